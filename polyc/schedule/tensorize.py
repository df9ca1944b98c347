"""Tensorization as a mark in the schedule tree.

``tensorize(loops, "gemm")`` marks the band whose outermost loop is
``loops[0]``: every statement instance below the mark, for one point of the
loops above it, is computed by one call of the intrinsic.  The tree stays a
schedule of the source program, so recipes, ``explain``, legality checks
and pictures treat the mark like any other; only code generation
(:func:`lower_marks`) replaces the subtree below the mark by the call.

A band may be marked when (isl decides every point):

* the statements below it are one update that matches the intrinsic
  (:func:`polyc.intrinsics.match_gemm`: access relations equal by isl map
  equality, the domain a box in the scanned iterators) and what the call
  folds: the ``+=!`` initialisation (also where it absorbs it as beta 0: a
  triangle's band) or ``C *= beta``, a bias/ReLU epilogue;
* the loops above the mark do not depend on the iterators the intrinsic
  scans: the prefix schedule of every statement below, composed with the
  projection onto the call's loops (``{ S[b, m, n, k] -> call[b] }``), is a
  function of the call's loops.  So the instances one call computes run
  contiguously and at one point of the outer loops, and the legality check
  of the tree (against the source dependences) is the legality of the calls.

``tensorize(("C", "m"), "gemm")`` on ``C(m,n) +=! A(m,k) * B(k,n)``::

    for m: for n: { S0_init; for k: S0 }   ->   mark tensorize:gemm:S0 (same loops)
    generated:  polyc_gemm_f32(M, N, K, A, ..., C, ..., beta = 0, ...)

The automatic pipeline (:mod:`polyc.schedule.tensorize_auto`) schedules with each
matched group contracted to its calls, expands them back and marks each group with
:func:`mark_band`, as ``Schedule.tensorize`` does.

Source: TVM's ``tensorize`` primitive; the polyhedral matching of Bondhugula et al.,
"High-performance GPU/CPU tensor contraction via polyhedral tensorization"
(:mod:`polyc.intrinsics`); the grouping follows isl's ``isl_schedule_node_group``.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from .. import expr as E
from ..callbox import triangle_rows
from ..errors import ScheduleError
from ..intrinsics import GemmMatch, match_epilogue, match_gemm, match_scale
from ..ir import Program, Statement
from ..isl_util import CTX
from . import surgery, tree
from .callproj import group_statements, prefix_reason, projections
from .parts import edges, guarded_product, reached, restricted, with_domains, written_part
from .registry import transform

#: Prefix of the mark's name: ``tensorize:<intrinsic>:<statement>``, and
#: ``:<rows>`` for calls that each compute a block of rows
#: (``GemmMatch.block``).
MARK = "tensorize"
#: The intrinsics :func:`mark_band` knows.
INTRINSICS = ("gemm",)

_MARK = isl.schedule_node_type.mark


def mark_name(intrinsic: str, statement: str, rows: int = 0) -> str:
    return f"{MARK}:{intrinsic}:{statement}" + (f":{rows}" if rows else "")


def _parsed(name: str) -> tuple[str, str, int] | None:
    """``(intrinsic, statement, rows)`` of a tensorize mark's name (rows 0:
    whole slices), else ``None``."""
    parts = name.split(":")
    if parts[0] == MARK and (len(parts) == 3 or (len(parts) == 4 and parts[3].isdigit())):
        return parts[1], parts[2], int(parts[3]) if len(parts) == 4 else 0
    return None


def parse_mark(name: str) -> tuple[str, str] | None:
    """``(intrinsic, statement)`` of a tensorize mark's name, else ``None``."""
    found = _parsed(name)
    return found[:2] if found else None


def row_blocked(program: Program, m, rows: int):
    """``m`` as calls that each compute ``rows`` rows of C (``GemmMatch.block``;
    the loop over the blocks named after the row iterator), or the reason it
    cannot be."""
    if not rows:
        return m
    if not isinstance(m, GemmMatch) or len(m.m) != 1 or m.gather:
        return ("only a GEMM whose rows are one iterator with a plain stride can be called "
                "per block of rows")
    if m.block:
        return m if m.block == rows else f"the calls compute blocks of {m.block} rows"
    taken = set(program.statement(m.statement).iterators) | set(m.batch)
    return replace(m, block=rows, block_iter=tree.fresh_name(f"{m.m[0]}_blk", taken))


# ------------------------------------------------------------------ calls

def call_statement(program: Program, m: GemmMatch) -> Statement:
    """The ``intrinsic`` statement of ``m``: iterators the call's loops, the
    domain where calls run (with a folded initialisation or scaling also
    where the reduction is empty), the whole slices read and written as
    access relations (isl projections of the originals); named
    ``m.call``."""
    program = restricted(program, m)
    stmt = program.statement(m.statement)
    proj = projections(program, m)
    first = program.statement(group_statements(m)[0])
    write = first.write.apply_domain(proj[first.name])
    domain = (write.domain() if first.name != stmt.name
              else stmt.domain.apply(proj[stmt.name]))
    if getattr(m, "store", ""):     # the accumulator's rounding store folded: the call writes it
        write = program.statement(m.epilogue).write.apply_domain(proj[m.epilogue])
    # with the initialisation folded the call overwrites C: it reads no C
    reads = [r.apply_domain(proj[stmt.name]) for r in stmt.reads
             if m.init is None or r.get_tuple_name(isl.dim_type.out) != stmt.tensor]
    for name in group_statements(m):
        if name not in (m.statement, m.init):
            reads += [r.apply_domain(proj[name]) for r in program.statement(name).reads
                      if r.get_tuple_name(isl.dim_type.out) != stmt.tensor]
    return Statement(name=m.call, iterators=m.loops, domain=domain.coalesce(),
                     lhs=E.Access(stmt.tensor, ()), op="=", rhs=E.Const(0.0),
                     write=write.coalesce(), reads=tuple(r.coalesce() for r in reads),
                     kind="intrinsic", text=f"{stmt.text} [{m.describe()}]",
                     span=stmt.span, intrinsic=m)


def _representatives(program: Program, m: GemmMatch) -> isl.PwMultiAff:
    """``{ S[batch] -> X[...] }``: one instance of the group per call (the
    first in the lexicographic order of the group's first statement, which
    covers every call's domain)."""
    first = restricted(program, m).statement(group_statements(m)[0])
    rel = projections(program, m)[first.name].reverse().intersect_range(first.domain)
    return rel.lexmin_pw_multi_aff()


def identity(space: isl.Space) -> isl.PwMultiAff:
    return isl.PwMultiAff.from_multi_aff(isl.MultiAff.identity(isl.Space.map_from_set(space)))


# ------------------------------------------------------------------ matching

def fold(program: Program, main: str, others, parallel: bool = True,
         rows: int = 0) -> GemmMatch | str:
    """The match of update ``main`` with the statements ``others`` folded
    into the call (each must be its initialisation, a scaling of its output
    before it, or its epilogue), or the reason it cannot be.  ``rows``: one
    call per block of that many rows, each call's instances a box whose
    bounds may depend on the block (``match_gemm(..., rows=)``)."""
    stmt = program.statement(main)
    m = match_gemm(program, stmt, rows=rows)
    if isinstance(m, str):
        return f"{main} ({stmt.text.strip()}) does not match gemm: {m}"
    init = m.init
    order = [x.name for x in program.statements]
    # the epilogue (a scaling after the update needs the initialisation folded)
    epi = match_epilogue(program, replace(m, init=init if init in others else None)) \
        if others else m
    tile = tuple(st for st in epi.tile if st.name in others)
    if epi.tile and not tile:        # (the epilogue alone: its own form)
        epi = match_epilogue(program, replace(m, init=init if init in others else None),
                             tile=False)
    m = replace(m, init=None, parallel=parallel)
    for name in others:
        if (st := program.statement(name)) and name == init:
            m = replace(m, init=name)
        elif name == epi.epilogue:
            m = replace(m, epilogue=epi.epilogue, bias=epi.bias, relu=epi.relu, alpha=epi.alpha,
                        post=epi.post, post_relu=epi.post_relu)
        elif name in {st.name for st in tile}:
            pass                                   # (below)
        elif m.scale is None and order.index(name) < order.index(main) and (
                beta := match_scale(program, m, st)) is not None:
            zero = st.kind == "init" and isinstance(beta, E.Const) and beta.value == 0
            m = replace(m, init=name) if zero else replace(m, scale=name, beta=beta)
        else:
            return (f"statement {name} ({st.text.strip()}) also runs below the band; gemm "
                    f"computes only {main} with its initialisation, a scaling of "
                    f"{stmt.tensor} before it, or an epilogue after it (a bias, a scale per "
                    "row, a residual, a ReLU)")
    if tile != epi.tile[:len(tile)]:
        skipped = next(st.name for st in epi.tile if st not in tile)
        return (f"{skipped} runs between the call and {tile[-1].name}: an elementwise "
                f"statement on {stmt.tensor} runs in the call's tile function only with "
                "those before it")
    return replace(m, tile=tile) if tile else m


def _top(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Above ``node``'s ``loops:`` name mark and any loop marks right above."""
    node = surgery.top_of_band(node)
    while node.has_parent() and node.parent().get_type() == _MARK \
            and parse_mark(node.parent().mark_get_id().get_name()) is None:
        node = node.parent()
    return node


def mark_band(schedule: isl.Schedule, program: Program, band: isl.ScheduleNode,
              intrinsic: str = "gemm", parallel: bool = True,
              known: GemmMatch | None = None, rows: int = 0) -> isl.Schedule:
    """``schedule`` with a ``tensorize:<intrinsic>:<S>`` mark above ``band``
    (a band node of ``schedule``) after checking that the subtree is one
    call of ``intrinsic`` per point of the loops above (module docstring).
    ``known``: the match of the statements below, already made (the
    automatic pipeline's, ``tensorize_auto.expand``); the loops above are checked all
    the same.  ``rows``: each call computes that many rows of C, and the
    loops above may depend on the row iterator ``i`` through ``floor(i /
    rows)`` (a tile of the rows).  Raises
    :class:`~polyc.errors.ScheduleError` with the reason otherwise."""
    from .. import custom_intrinsics
    if intrinsic not in INTRINSICS and custom_intrinsics.get(intrinsic) is None:
        raise ScheduleError(f"unknown intrinsic {intrinsic!r}; known: "
                            f"{', '.join(custom_intrinsics.names())} (register one with "
                            f"polyc.intrinsics.register)")
    top = _top(band)
    for n in tree.walk(top):
        kind = n.get_type()
        if kind == isl.schedule_node_type.extension or (
                kind == _MARK and n.mark_get_id().get_name().startswith(("promote:", MARK))):
            raise ScheduleError("the band holds a promotion or another tensorize mark: "
                                "tensorize first, then promote elsewhere")
    m = _match_below(program, intrinsic, tree.statements_of(top), parallel, known, top, rows)
    m = row_blocked(program, m, rows or m.block)
    if isinstance(m, str):
        raise ScheduleError(m)
    reason = prefix_reason(top, program, m)
    if reason:
        raise ScheduleError(reason)
    return top.insert_mark(isl.Id(mark_name(intrinsic, m.statement, m.block),
                                  context=CTX)).get_schedule()


#: Why a user intrinsic cannot take a band that only part of a statement's
#: instances reach.
_PART_REASON = ("{0} computes all the instances of its statement, and only part of {1} "
                "reaches the band (a filter above it splits them)")


def _split_fold(program: Program, main: str, others, parallel: bool, parts: dict,
                rows: int) -> GemmMatch | str:
    """:func:`fold` over the instances ``parts`` that reach the band: with no
    ``rows``, one call over the band of its box those instances are (a
    causal mask's, ``GemmMatch.band``) when they are one; else one call per
    block of ``rows`` rows (the default :func:`polyc.callbox.triangle_rows`)."""
    rp = with_domains(program, parts)
    g = guarded_product(rp, rp.statement(main))
    if g is not None and g.domain.is_equal(rp.statement(main).domain):
        # a guarded product (C += cond ? A * B : 0) whose condition holds on
        # every instance reaching the band: the product itself
        rp = rp.replace(statements=tuple(g if x.name == main else x for x in rp.statements))
    m = fold(rp, main, others, parallel) if not rows else None
    if m is None or isinstance(m, str) or m.band is None:
        # (no rows asked: one call over the band the part is, else row blocks)
        m = fold(rp, main, others, parallel, rows or triangle_rows())
    return m if isinstance(m, str) else replace(m, parts=tuple(sorted(parts.items())))


def _match_below(program: Program, intrinsic: str, names, parallel: bool,
                 known: GemmMatch | None = None, node: isl.ScheduleNode | None = None,
                 rows: int = 0):
    """The match of the statements ``names`` below a band onto ``intrinsic``
    (``known`` when it is theirs); raises ScheduleError with the reason.
    ``node``: the band, when only part of a statement's instances may reach
    it (:func:`reached`)."""
    if known is not None and set(names) == set(group_statements(known)):
        return known
    parts = reached(program, names, node) if node is not None else {}
    if parts and intrinsic not in INTRINSICS:
        raise ScheduleError(_PART_REASON.format(intrinsic, ", ".join(sorted(parts))))
    if intrinsic not in INTRINSICS:
        return _custom(program, intrinsic, names, node)
    if parts:
        updates = [x for x in names if program.statement(x).kind == "update"
                   and program.statement(x).op == "+"]
        if len(updates) != 1:
            raise ScheduleError(f"the band computes part of {', '.join(sorted(parts))}: one "
                                f"call per block of rows computes one contraction")
        m = _split_fold(program, updates[0], [x for x in names if x != updates[0]], parallel,
                        parts, rows)
        if isinstance(m, str):
            raise ScheduleError(m)
        return m
    updates = [x for x in names if program.statement(x).kind == "update"
               and not isinstance(match_gemm(program, program.statement(x)), str)]
    if not updates:
        reasons = [fold(program, x, ()) for x in names if program.statement(x).kind == "update"]
        raise ScheduleError("; ".join(r for r in reasons if isinstance(r, str))
                            or f"no update statement below the band (statements "
                               f"{', '.join(names)})")
    if len(updates) > 1:
        raise ScheduleError(f"the band computes {len(updates)} contractions "
                            f"({', '.join(updates)}): one call computes one; distribute "
                            f"them first")
    m = fold(program, updates[0], [x for x in names if x != updates[0]], parallel)
    if isinstance(m, str):
        raise ScheduleError(m)
    return m


def _marked_match(program: Program, intrinsic: str, main: str, names, parallel: bool,
                  known=(), rows: int = 0, node: isl.ScheduleNode | None = None):
    """The match of an existing mark ``tensorize:<intrinsic>:<main>[:rows]``
    (the mark ``node``) over the statements ``names`` (one of ``known`` when
    it is theirs), or the reason it does not hold."""
    m = next((k for k in known if k.statement == main and k.block == rows
              and set(group_statements(k)) == set(names)), None)
    if m is not None:
        return m
    parts = reached(program, names, node) if node is not None else {}
    if parts and intrinsic not in INTRINSICS:
        return _PART_REASON.format(intrinsic, ", ".join(sorted(parts)))
    if parts:
        return _split_fold(program, main, [x for x in names if x != main], parallel, parts,
                           rows)
    if intrinsic in INTRINSICS:
        m = fold(program, main, [x for x in names if x != main], parallel)
        if isinstance(m, str) and (g := guarded_product(program, program.statement(main))):
            m = _split_fold(program, main, [x for x in names if x != main], parallel,
                            {main: g.domain}, rows)   # C += cond ? A * B : 0, as auto marks it
        return m if isinstance(m, str) else row_blocked(program, m, rows)
    try:
        return _custom(program, intrinsic, names, node)
    except ScheduleError as e:
        return str(e)


def _custom(program: Program, intrinsic: str, names, node=None) -> GemmMatch:
    """The match of the one statement below a band onto user intrinsic
    ``intrinsic`` (:mod:`polyc.custom_intrinsics`); raises ScheduleError."""
    from .. import custom_intrinsics
    if len(names) != 1:
        raise ScheduleError(f"statements {', '.join(names)} run below the band; {intrinsic} "
                            f"computes one statement (distribute or move the others first)")
    stmt = program.statement(names[0])
    m = custom_intrinsics.match(program, stmt, custom_intrinsics.get(intrinsic), above=node)
    if isinstance(m, str):
        raise ScheduleError(f"{stmt.name} ({stmt.text.strip()}) does not match {intrinsic}: {m}")
    return m


def _separate_full_rows(program: Program, band: isl.ScheduleNode, rows: int
                        ) -> isl.ScheduleNode:
    """The band, below a sequence that runs first the instances below it
    outside the full part of their blocks of ``rows`` rows (a triangular
    domain's diagonal edge, :func:`polyc.callbox.full_rows`), then a copy
    of the band over the full part; returns that copy."""
    top = _top(band)
    names = tree.statements_of(top)
    parts = reached(program, names, top)
    rp = with_domains(program, parts) if parts else program
    updates = [x for x in names if rp.statement(x).kind == "update" and rp.statement(x).op == "+"]
    if len(updates) != 1:
        raise ScheduleError(f"tensorize(split=True): the band computes {len(updates)} updates "
                            f"({', '.join(updates) or 'none'}); one call computes one")
    m = match_gemm(rp, rp.statement(updates[0]), rows=rows, split=True)
    if isinstance(m, str):
        raise ScheduleError(f"{updates[0]} ({rp.statement(updates[0]).text.strip()}) does not "
                            f"match gemm on the full part of blocks of {rows} rows: {m}")
    if not m.parts:
        return band
    full = None
    for x in names:     # (a statement writing another tensor runs with the edge)
        part = dict(m.parts).get(x)
        if part is None:
            if rp.statement(x).tensor != m.c:
                continue
            part = written_part(rp, m, rp.statement(x))
        full = isl.UnionSet.from_set(part) if full is None else full.union(
            isl.UnionSet.from_set(part))
    rest = top.get_domain().subtract(full)
    node = top.insert_sequence(isl.UnionSetList.alloc(CTX, 2).add(rest).add(full))
    node = node.child(1).child(0)
    while node.get_type() != isl.schedule_node_type.band:
        node = node.child(0)
    return node


@transform("tensorize")
def tensorize(s, loop, intrinsic: str = "gemm", rows: int = 0, split: bool = False):
    """Compute the band whose outermost loop is ``loop`` with an intrinsic
    (``"gemm"``: ``C += A * B`` on the packed micro-kernel of
    ``backends/c/intrinsics/gemm.h``), one call per point of the loops
    above it.  Checked: the statements below must be one update matching
    the intrinsic (access relations compared with the intrinsic's by isl
    map equality) plus what the call folds (its ``+=!`` initialisation, a
    scaling ``C *= beta`` before it, a bias/ReLU epilogue after it), and
    the loops above must not depend on the iterators the intrinsic scans;
    otherwise :class:`ScheduleError` says which access or loop differs.
    ``rows``: each call computes that many rows of C (below a tile of the
    row loop of that size: the loops above may depend on it by ``floor(i /
    rows)``).  ``split``: the band's domain need not be a box per call (a
    triangle, ``j <= i``): a sequence runs first the instances outside the
    full part of their blocks of ``rows`` rows (default
    :func:`polyc.callbox.triangle_rows`) with the band's loops, then the
    calls over the full part (isl computes it; :mod:`polyc.callbox`).

    Before / after ``tensorize(("C","m"), "gemm")``::

        for m: for n: { S0_init; for k: S0 }    mark tensorize:gemm:S0
                                                  (one polyc_gemm call)

    and ``tensorize(("C","i"), "gemm", split=True)`` on ``for i: for k:
    for j <= i: C(i, j) += A(i, k) * A(j, k)`` (PolyBench's syrk)::

        for i: for k: for j in (28*floor(i/28), i]: S1   # the diagonal edge
        mark tensorize:gemm:S1:28                        # one call per 28 rows
          for i: for k: for j <= 28*floor(i/28): S1
    """
    lp = s.resolve(loop)
    band = surgery.band_node(s.isl, lp)
    band = surgery.split_band(band, lp.member, s.program)
    parallel = True
    if not isinstance(intrinsic, str):
        raise ScheduleError(f"tensorize: the intrinsic is named by a string, e.g. 'gemm', "
                            f"got {intrinsic!r}")
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        raise ScheduleError(f"tensorize: rows must be a number of rows >= 0, got {rows!r}")
    if not isinstance(split, bool):
        raise ScheduleError(f"tensorize: split must be True or False, got {split!r}")
    if split:
        if intrinsic not in INTRINSICS:
            raise ScheduleError(f"tensorize(split=True) splits a GEMM's domain; {intrinsic} "
                                "computes whole slices")
        rows = rows or triangle_rows()
        band = _separate_full_rows(s.program, band, rows)
    return mark_band(band.get_schedule(), s.program, band, intrinsic, parallel, rows=rows)


# ------------------------------------------------------------------ lowering

def marks(schedule: isl.Schedule) -> list[tuple[tuple[int, ...], str, str, int]]:
    """``(path, intrinsic, statement, rows)`` of every tensorize mark, pre-order."""
    out = []
    for n in tree.walk(schedule.get_root()):
        if n.get_type() == _MARK:
            found = _parsed(n.mark_get_id().get_name())
            if found:
                out.append((tree.path_of(n), *found))
    return out


def check_marks(schedule: isl.Schedule, program: Program) -> None:
    """Raise :class:`ScheduleError` unless every tensorize mark of
    ``schedule`` still holds (a transformation applied after ``tensorize``
    may have moved another statement below it, or made the loops above
    depend on a scanned iterator)."""
    for path, intrinsic, main, rows in marks(schedule):
        node = tree.node_at(schedule, path)
        m = _marked_match(program, intrinsic, main, tree.statements_of(node), True, (), rows,
                          node)
        reason = m if isinstance(m, str) else prefix_reason(node, program, m)
        if reason:
            raise ScheduleError(f"the mark {node.mark_get_id().get_name()} no longer holds: "
                                f"{reason}")


def lower_marks(schedule: isl.Schedule, program: Program, parallel: bool = True,
                known: list[GemmMatch] = ()) -> tuple[isl.Schedule, Program, list[GemmMatch]]:
    """The tree and program code generation sees: below every tensorize mark
    the subtree is cut, the mark removed and the group's instances replaced
    by the calls (:func:`call_statement`), whose schedule is that of one
    instance of their group (``isl_schedule_pullback_union_pw_multi_aff``;
    equal for all of them, :func:`mark_band` checked it)."""
    found: list[GemmMatch] = []
    while True:
        todo = marks(schedule)
        if not todo:
            break
        path, intrinsic, main, rows = todo[0]
        node = tree.node_at(schedule, path)
        m = _marked_match(program, intrinsic, main, tree.statements_of(node), parallel, known,
                          rows, node)
        if isinstance(m, str):
            raise ScheduleError(f"mark {node.mark_get_id().get_name()}: {m}")
        call = call_statement(program, m)
        edge = edges(program, m)
        node = node.child(0).cut().parent().delete()
        schedule = node.get_schedule()
        upma = isl.UnionPwMultiAff.from_pw_multi_aff(_representatives(program, m))
        group = set(group_statements(m))
        spaces: list[isl.Set] = []
        schedule.get_domain().foreach_set(spaces.append)
        for st in spaces:
            name = st.get_tuple_name()
            if name not in group or name in edge:       # a split statement's edge stays
                f = identity(st.get_space())
                if name in edge:
                    f = f.intersect_domain(edge[name])
                upma = upma.union_add(isl.UnionPwMultiAff.from_pw_multi_aff(f))
        try:
            schedule = schedule.pullback_union_pw_multi_aff(upma)
        except isl.Error as e:
            raise ScheduleError(f"cannot lower the tensorize mark of {main}: {e}") from None
        kept = with_domains(program, edge).statements
        program = program.replace(statements=tuple(
            x for s in kept for x in ((call, s) if s.name == main and edge else (call,)
                                      if s.name == main else (s,))
            if s.name == main or s.name not in group or s.name in edge), order=None)
        found.append(m)
    return schedule, program, found
