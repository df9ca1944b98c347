"""Loop fusion and distribution (fission) in the schedule language.

``fuse`` merges the outermost loops of sibling subtrees (children of one
sequence or set node) into one loop that runs them all, with a sequence
below that keeps their original order; ``distribute`` is its inverse: it
splits a loop into one copy per group of statements, run one after the
other.  Both are *checked*: :meth:`Schedule.apply` verifies the new order
against the exact dependences and refuses, with the violated dependence
named, a fusion that would read a value before it is produced or a
distribution that would separate statements exchanging values inside the
loop.

isl has no fusion primitive, so :func:`fuse_subtrees` rebuilds the sequence
node whose children it fuses: the subtree is read into a small Python
description (bands with their partial schedule, ``permutable`` flag,
``coincident`` members, AST options and loop names; sequences and sets with
their filters; marks; leaves), the description is rewritten, and the
subtree is rebuilt in place with isl's own tree construction
(``isl_schedule_node_cut``, ``insert_partial_schedule``,
``insert_sequence``/``insert_set``, ``insert_mark``).  The fused band's
``coincident`` members and ``permutable`` flag are recomputed from the exact
dependences (a fused loop may carry a dependence that neither original loop
carried).  Distribution needs no rebuilding: ``isl_schedule_node_insert_sequence``
above the band copies the subtree under one filter per group and simplifies
each copy to its statements.

:func:`fuse_subtrees` works on raw ``isl.Schedule`` trees too (without loop
names): the fusion strategies of :mod:`polyc.schedule.initial` use it.
"""

from __future__ import annotations

import islpy as isl

from ..errors import ScheduleError
from . import legality, surgery
from .rebuild import _Band, _Children, _filter_list, _kind, describe, replace_subtree
from .registry import transform
from .tensorize import parse_mark
from .tree import (
    Loop,
    band_names,
    is_names_mark,
    mupa_from_columns,
    node_at,
    path_of,
    set_band_names,
    statement_filter,
    statements_of,
    target_statements,
)

_T = isl.schedule_node_type
_BAND = _T.band
_MARK = _T.mark


# ------------------------------------------------------------ exact flags

def nonnegative_member(band: isl.ScheduleNode, j: int, deps: isl.UnionMap) -> bool:
    """Whether every dependence of ``deps`` between instances under ``band``
    that the outer schedule (enclosing bands) does not separate has a
    non-negative distance along member ``j``."""
    return legality.nonnegative(band, j, deps)


def exact_flags(band: isl.ScheduleNode, deps: isl.UnionMap, coincident=None,
                permutable: bool | None = None) -> isl.ScheduleNode:
    """``band`` with its ``coincident`` members and ``permutable`` flag
    recomputed from ``deps``: a member is coincident when it carries no
    dependence (and, when ``coincident`` is given, was claimed coincident
    there); the band is permutable when every dependence it does not leave
    to an outer band is non-negative along every member (and, when
    ``permutable`` is given, it was claimed so)."""
    n = band.band_n_member()
    for j in range(n):
        claim = True if coincident is None else bool(coincident[j])
        ok = claim and not legality.carries(band, j, deps)
        band = band.band_member_set_coincident(j, int(ok))
    claim = True if permutable is None else bool(permutable)
    perm = claim and all(nonnegative_member(band, j, deps) for j in range(n))
    return band.band_set_permutable(int(perm))


# ------------------------------------------------------------ fusion core

def _head(child: isl.ScheduleNode):
    """From a filter child of a sequence: the chain of bands heading its
    subtree, reached through ``loops:`` marks only; returns (bands, node
    below them)."""
    node = child.child(0)
    chain = []
    while True:
        if is_names_mark(node) and node.n_children():
            node = node.child(0)
            continue
        if node.get_type() == _BAND:
            chain.append(node)
            node = node.child(0)
            continue
        return chain, node


def head_depth(child: isl.ScheduleNode) -> int:
    """The number of band members heading the subtree of filter ``child``
    (through ``loops:`` marks only)."""
    return sum(b.band_n_member() for b in _head(child)[0])


def _split_raw(band: isl.ScheduleNode, pos: int) -> isl.ScheduleNode:
    """Split ``band`` before member ``pos``, keeping the ``loops:`` names of
    each part when it has them; returns the outer part."""
    names = None
    if band.has_parent() and is_names_mark(band.parent()):
        names = band.parent().mark_get_id().get_name()[len("loops:"):].split(",")
        if len(names) != band.band_n_member():
            names = None
    outer = band.band_split(pos)
    if names is None:
        return outer
    inner = set_band_names(outer.child(0), names[pos:])
    outer = inner.parent().parent()
    return set_band_names(outer, names[:pos])


def _cut_heads(schedule: isl.Schedule, q_path, positions, depth: int) -> isl.Schedule:
    """Split bands so that the head chain of each child in ``positions`` of
    the node at ``q_path`` ends exactly after ``depth`` members."""
    for pos in positions:
        child = node_at(schedule, q_path).child(pos)
        chain, _ = _head(child)
        have = sum(b.band_n_member() for b in chain)
        if have < depth:
            who = ", ".join(statements_of(child.child(0)))
            raise ScheduleError(f"the subtree of {who} has only {have} leading loop(s), "
                                f"fewer than {depth}")
        total = 0
        for band in chain:
            n = band.band_n_member()
            if total + n > depth:
                schedule = _split_raw(band, depth - total).get_schedule()
                break
            total += n
            if total == depth:
                break
    return schedule


def _strip(desc, depth: int):
    """The bands making the first ``depth`` members of ``desc`` (a head
    chain already cut at ``depth``) and the description below them."""
    bands = []
    total = 0
    while total < depth:
        assert isinstance(desc, _Band), desc
        bands.append(desc)
        total += desc.n
        desc = desc.child
    assert total == depth
    return bands, desc


def fuse_subtrees(schedule: isl.Schedule, q_path, positions, depth: int,
                  deps: isl.UnionMap, names=None, names_from: int | None = None,
                  ) -> tuple[isl.Schedule, tuple[int, ...]]:
    """Fuse the leading ``depth`` loops of children ``positions`` of the
    sequence or set node at ``q_path``.

    The fused band's member ``k`` is the union (``isl_union_pw_aff_union_add``
    over the disjoint statement sets) of member ``k`` of each child's head
    chain; below it a sequence (set) keeps the children in their original
    relative order, each with the rest of its subtree.  The fused group
    takes the place of the first child.  ``names``: the fused loop names
    (default: those of child ``names_from``'s chain, when it has names; none
    for unnamed trees).  The fused band's ``coincident`` members and
    ``permutable`` flag are those all children claimed, confirmed against
    ``deps``.  Returns the new tree and the path of the fused band.
    Raises :class:`ScheduleError` for a subtree that cannot be rebuilt.
    """
    positions = sorted(set(positions))
    assert len(positions) >= 2 and depth >= 1
    q_path = tuple(q_path)
    schedule = _cut_heads(schedule, q_path, positions, depth)
    q = node_at(schedule, q_path)
    assert q.get_type() in (_T.sequence, _T.set), q.get_type()
    desc = describe(q)
    chains, rests = {}, {}
    for pos in positions:
        chains[pos], rests[pos] = _strip(desc.parts[pos][1], depth)
    # member k of the fused band: the union of member k of every chain
    cols = []
    coinc = []
    for k in range(depth):
        col, claimed = None, True
        for pos in positions:
            total = 0
            for b in chains[pos]:
                if k < total + b.n:
                    j = k - total
                    upa = b.mupa.get_union_pw_aff(j).intersect_domain(b.domain.universe())
                    claimed = claimed and b.coincident[j]
                    break
                total += b.n
            col = upa if col is None else col.union_add(upa)
        cols.append(col)
        coinc.append(claimed)
    perm = all(b.permutable for pos in positions for b in chains[pos])
    if names is None:
        ref = positions[0] if names_from is None else names_from
        got = []
        for b in chains[ref]:
            if b.names is None:
                got = None
                break
            got += b.names
        names = got
    # the children below the fused band, in their original order; a child
    # whose rest is a node of the same kind is spliced in
    inner = []
    for pos in positions:
        f, rest = desc.parts[pos][0], rests[pos]
        if isinstance(rest, _Children) and rest.kind == desc.kind:
            inner += [(f.intersect(g), c) for g, c in rest.parts]
        else:
            inner.append((f, rest))
    domain = None
    for pos in positions:
        f = desc.parts[pos][0]
        domain = f if domain is None else domain.union(f)
    fused = _Band(mupa=mupa_from_columns(cols), domain=domain, permutable=perm,
                  coincident=coinc, loop_types=[], isolate_types=[], options=None,
                  names=list(names) if names is not None else None,
                  child=_Children(desc.kind, inner))
    keep = [(f, c) for i, (f, c) in enumerate(desc.parts) if i not in positions[1:]]
    first = positions[0]
    keep[first] = (domain, fused)
    if len(keep) == 1:
        new = fused
        band_path = q_path
    else:
        new = _Children(desc.kind, keep)
        band_path = q_path + (first, 0)
    root = replace_subtree(node_at(schedule, q_path), new)
    band = node_at(root.get_schedule(), band_path)
    if is_names_mark(band):
        band = band.child(0)
    band = exact_flags(band, deps, coinc, perm)
    return band.get_schedule(), path_of(band)


# ------------------------------------------------------------ fuse

def _is_loop_spec(x) -> bool:
    if isinstance(x, Loop) or (isinstance(x, dict) and "path" in x):
        return True
    if isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, str) for v in x):
        return True
    return isinstance(x, str) and "." in x


def _sibling_of(s, lp: Loop):
    """(path of the sequence/set node, child position) whose subtree ``lp``
    heads; ScheduleError when it heads none."""
    band = surgery.band_node(s.isl, lp)
    node = band
    while node.has_parent() and is_names_mark(node.parent()):
        node = node.parent()
    parent = node.parent() if node.has_parent() else None
    if parent is not None and parent.get_type() == _MARK:
        raise ScheduleError(f"the mark {parent.mark_get_id().get_name()} sits above loop "
                            f"{lp.name}; fuse loops before marking them (apply "
                            f"parallel/vectorize/mark after the loop structure is final)")
    if parent is None or parent.get_type() != _T.filter or not parent.has_parent() or \
            parent.parent().get_type() not in (_T.sequence, _T.set):
        where = _kind(parent) if parent is not None else "nothing"
        raise ScheduleError(f"loop {lp.name} ({', '.join(lp.statements)}) is not the "
                            f"outermost loop of one of several sibling subtrees (its band "
                            f"hangs below a {where}), so there is nothing to fuse it with")
    return path_of(parent.parent()), parent.get_child_position()


def _names_arg(name, depth: int, default) -> list[str] | None:
    if name is None:
        return default
    names = [name] if isinstance(name, str) else list(name) if isinstance(
        name, (list, tuple)) else None
    if names is None or not all(isinstance(x, str) and x.isidentifier() for x in names):
        raise ScheduleError(f"name must be an identifier (or a list of identifiers), "
                            f"got {name!r}")
    if len(names) == depth:
        return names
    if len(names) == 1 and default is not None:
        return names + list(default[1:])
    if len(names) == 1:
        return names + [f"c{k}" for k in range(1, depth)]
    raise ScheduleError(f"{len(names)} name(s) given for {depth} fused loop(s)")


def _items(items):
    if len(items) == 1 and isinstance(items[0], (list, tuple)) and not _is_loop_spec(items[0]):
        items = tuple(items[0])
    elif (len(items) == 1 and isinstance(items[0], list) and len(items[0]) == 2
          and all(isinstance(v, str) and "." not in v for v in items[0])):
        items = tuple(items[0])
    return items


@transform("fuse")
def fuse(s, *loops_or_statements, name=None):
    """Loop fusion: run the outermost loops of sibling subtrees as one loop.

    Given loops (each the outermost loop of a band heading one child of the
    same sequence), the result is one loop over the union of their
    iterations, with a sequence below that runs, at each iteration, the
    fused subtrees in their original order, each keeping the rest of its
    band.  Siblings need not be adjacent: the fused group takes the place of
    the first one (the legality check refuses it if that reorders a
    dependence).  Given statements or written tensors instead, the sibling
    subtrees holding them are fused as deeply as they all have loops.  The
    fused loop keeps the first loop's name (``name=`` renames it).
    Checked: a consumer that reads a value its producer computes at a later
    iteration of the fused loop (``T(i+1, j)``) is refused, naming the flow
    dependence on ``T``.

    Before / after ``fuse(("T","i"), ("B","i"))`` on ``T(i,j) = A(i,j) * 2``
    then ``B(i,j) = T(i,j) + 1``::

        for i: for j: S0(i, j)          for i:
        for i: for j: S1(i, j)            for j: S0(i, j)
                                          for j: S1(i, j)

    and ``fuse("T", "B")`` fuses both loops::

        for i: for j: S0(i, j)          for i: for j: { S0(i, j); S1(i, j) }
        for i: for j: S1(i, j)
    """
    items = _items(loops_or_statements)
    if len(items) < 2:
        raise ScheduleError(f"give at least two loops or statements, got "
                            f"{len(items)}")
    kinds = {_is_loop_spec(x) for x in items}
    if len(kinds) > 1:
        raise ScheduleError("give either loops (('T', 'i'), 'T.i') or statements / "
                            "tensors ('T'), not both")
    if kinds == {True}:
        return _fuse_loops(s, [s.resolve(x) for x in items], name)
    for x in items:
        if not isinstance(x, str):
            raise ScheduleError(f"{x!r} is neither a loop nor a statement or tensor "
                                f"name")
    return _fuse_statements(s, list(items), name)


def _fuse_loops(s, lps: list[Loop], name):
    places = []
    for lp in lps:
        if lp.member != 0:
            band = surgery.band_node(s.isl, lp)
            names = band_names(band, s.program)
            raise ScheduleError(
                f"loop {lp.name} is not the outermost loop of its band "
                f"({', '.join(names)}): only the outermost loops of sibling subtrees "
                f"can be fused; fuse {names[0]} first, or fuse the statements")
        places.append(_sibling_of(s, lp))
    q_paths = {p for p, _ in places}
    if len(q_paths) > 1:
        where = "; ".join(f"loop {lp.name} ({', '.join(lp.statements)}) below the node at "
                          f"path {list(p)}" for lp, (p, _) in zip(lps, places))
        raise ScheduleError(f"a fuse of loops with different parents: {where}; only loops "
                            f"heading children of one sequence can be fused")
    seen: dict[int, Loop] = {}
    for lp, (_, pos) in zip(lps, places):
        if pos in seen:
            raise ScheduleError(f"loops {seen[pos].name} and {lp.name} are in the same "
                                f"subtree ({', '.join(lp.statements)}): they are already "
                                f"fused, or one is given twice")
        seen[pos] = lp
    q_path = places[0][0]
    names = _names_arg(name, 1, [lps[0].name])
    new, _ = fuse_subtrees(s.isl, q_path, [p for _, p in places], 1, s.deps.all(),
                           names=names)
    return new


def _fuse_statements(s, targets: list[str], name):
    wanted: dict[str, set] = {t: set(target_statements(s.program, t)) for t in targets}
    every = set().union(*wanted.values())
    node = s.isl.get_root()
    while True:
        t = node.get_type()
        if t in (_T.sequence, _T.set):
            holding = [i for i in range(node.n_children())
                       if every & set(statements_of(node.child(i).child(0)))]
            if len(holding) == 1:
                node = node.child(holding[0])
                continue
            break
        if node.n_children() == 0:
            raise ScheduleError(f"{', '.join(targets)} already run in one loop nest "
                                f"with nothing between them to fuse")
        node = node.child(0)
    q_path = path_of(node)
    depths = {}
    for i in holding:
        child = node.child(i)
        depths[i] = head_depth(child)
        if depths[i] == 0:
            who = statements_of(child.child(0))
            raise ScheduleError(f"{', '.join(who)} {'has' if len(who) == 1 else 'have'} no "
                                f"loop of {'its' if len(who) == 1 else 'their'} own below the "
                                f"{_kind(node)} at path {list(q_path)}: nothing to fuse")
    depth = min(depths.values())
    first = next(i for i in holding
                 if wanted[targets[0]] & set(statements_of(node.child(i).child(0))))
    # default names: the first target's loops
    chain, _ = _head(node.child(first))
    default = []
    for b in chain:
        default += band_names(b, s.program)
    default = default[:depth]
    names = _names_arg(name, depth, default)
    new, _ = fuse_subtrees(s.isl, q_path, holding, depth, s.deps.all(), names=names,
                           names_from=first)
    return new


# ------------------------------------------------------------ distribute


def _own_tensorize_marks(seq: isl.ScheduleNode, sets) -> isl.ScheduleNode:
    """``seq`` (the sequence :func:`distribute` inserted above the marks of
    the loop, which each group's copy repeats) without the tensorize marks
    whose statement is not in that group: a kernel's ``tensorize:gemm:S0``
    above ``S0_init`` alone was refused when compiled ("not a += reduction");
    the group of ``S0`` keeps the call, the others run their loops."""
    for i, mine in enumerate(sets):
        node, depth = seq.child(i).child(0), 2
        while node.get_type() == _MARK:
            parsed = parse_mark(node.mark_get_id().get_name())
            if parsed is not None and parsed[1] not in mine:
                node = node.delete()
            else:
                node, depth = node.child(0), depth + 1
        for _ in range(depth):
            node = node.parent()
        seq = node
    return seq


@transform("distribute")
def distribute(s, loop, *groups):
    """Loop distribution (fission): split ``loop`` into one copy per group of
    statements, run one after the other.

    The band holding ``loop`` is split at it: the outer loops stay shared;
    from ``loop`` inward, each group gets its own copy of the loop and of
    the rest of the subtree, restricted to its statements.  ``groups``:
    lists of statement or tensor names (a single name is a group of one);
    statements under the loop that no group names form a last group.  By
    default, one group per child of the sequence directly below the loop
    (or one per statement).  Checked: statements that exchange values
    inside the loop, in the order the groups would break, are refused with
    the dependence named.

    Before / after ``distribute(("C","n"))`` on the matmul source order::

        for m:                          for m:
          for n:                          for n: S0_init(m, n)
            S0_init(m, n)                 for n: for k: S0(m, n, k)
            for k: S0(m, n, k)

    after which ``interchange(("S0","n"), ("S0","k"))`` is legal.
    """
    lp = s.resolve(loop)
    under = set(lp.statements)
    order = [st.name for st in s.program.statements if st.name in under]
    band = surgery.band_node(s.isl, lp)
    inner = surgery.split_band(band, lp.member, s.program)
    if groups:
        if len(groups) == 1 and isinstance(groups[0], (list, tuple)) and groups[0] and \
                all(isinstance(g, (list, tuple)) for g in groups[0]):
            groups = tuple(groups[0])
        sets, owner = [], {}
        for k, g in enumerate(groups):
            g = [g] if isinstance(g, str) else g
            if not isinstance(g, (list, tuple)) or not g or not all(isinstance(x, str)
                                                                   for x in g):
                raise ScheduleError(f"group {k + 1} must be a statement or "
                                    f"tensor name or a non-empty list of them, got {g!r}")
            mine = []
            for nm in g:
                stmts = target_statements(s.program, nm)
                here = [x for x in stmts if x in under]
                if not here:
                    raise ScheduleError(
                        f"{nm} does not run in loop {lp.name} (the loop runs "
                        f"{', '.join(order)})")
                for x in here:
                    if x in owner:
                        raise ScheduleError(f"statement {x} is in group "
                                            f"{owner[x] + 1} and group {k + 1}")
                    owner[x] = k
                    mine.append(x)
            sets.append(mine)
        rest = [x for x in order if x not in owner]
        if rest:
            sets.append(rest)
    else:
        below = inner.child(0)
        if below.get_type() in (_T.sequence, _T.set):
            sets = [list(statements_of(below.child(i).child(0)))
                    for i in range(below.n_children())]
        else:
            sets = [[x] for x in order]
    if len(sets) < 2:
        what = (f"only {order[0]}" if len(order) == 1
                else f"{', '.join(order)}, all in one group")
        raise ScheduleError(f"nothing to distribute: loop {lp.name} runs {what}")
    top = inner
    while top.has_parent() and top.parent().get_type() == _MARK:
        top = top.parent()
    filters = _filter_list([statement_filter(s.program, g) for g in sets])
    node = _own_tensorize_marks(top.insert_sequence(filters), sets)
    parent = node.parent() if node.has_parent() else None
    if (parent is not None and parent.get_type() == _T.filter
            and parent.parent().get_type() == _T.sequence):
        node = parent.parent().sequence_splice_child(parent.get_child_position())
    return node.get_schedule()
