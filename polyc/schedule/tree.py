"""Schedule trees as the schedule language sees them: paths, loop names,
loop handles and the natural source order (printing:
:mod:`polyc.schedule.tree_print`).

A *loop* is one member of a band node of an ``isl.Schedule``.  Loops carry
names: a mark node ``loops:m,n`` directly above a band names its members in
order (the mark lives in the tree, so names survive isl's text form; the code
generator ignores it).  A band without such a mark gets names derived from its
partial schedule (:func:`default_member_names`): the iterator a member scans
(``m``), ``m_tile`` for a tile loop ``32*floor(m/32)``, ``t+i`` for a skewed
member; members that scan different iterators of fused statements are named
``i|j`` and answer to either name.

Nodes are addressed by their *path*: the child positions from the root
(``()`` is the domain node).  A :class:`Loop` is a path to a band plus a
member index, with the statements the band schedules.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..errors import ScheduleError
from ..ir import LOOP_NAMES_MARK, Program, Statement, loop_names_mark
from ..isl_util import CTX, source_spelling
from .registry import did_you_mean

NAMES = LOOP_NAMES_MARK
_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_T = isl.schedule_node_type


# ----------------------------------------------------------------- paths

def node_at(schedule: isl.Schedule, path: tuple[int, ...]) -> isl.ScheduleNode:
    """The node at ``path`` (child positions from the root)."""
    node = schedule.get_root()
    for i in path:
        if not 0 <= i < node.n_children():
            raise ScheduleError(f"schedule path {list(path)} does not exist "
                                f"(node at {list(path[:path.index(i)])} has "
                                f"{node.n_children()} children)")
        node = node.child(i)
    return node


def path_of(node: isl.ScheduleNode) -> tuple[int, ...]:
    """The path of ``node`` from the root."""
    out = []
    while node.has_parent():
        out.append(node.get_child_position())
        node = node.parent()
    return tuple(reversed(out))


def statements_of(node: isl.ScheduleNode) -> tuple[str, ...]:
    """Names of the statements whose instances reach ``node``, sorted."""
    names: set[str] = set()
    if node.get_type() == _T.domain:
        dom = node.domain_get_domain()
    else:
        try:
            dom = node.get_domain()
        except isl.Error:
            # below an extension node (promotion's copy statements) isl has
            # no domain, only the universe domain (the names are all we need)
            dom = node.get_universe_domain()
    dom.foreach_set(lambda s: names.add(s.get_tuple_name()))
    return tuple(sorted(names))


def walk(node: isl.ScheduleNode):
    """Pre-order traversal of the subtree at ``node`` (nodes, not paths)."""
    yield node
    for i in range(node.n_children()):
        yield from walk(node.child(i))


def has_extension(schedule: isl.Schedule) -> bool:
    """Whether the tree has extension nodes (promotion's copy statements)."""
    return any(n.get_type() == _T.extension for n in walk(schedule.get_root()))


def bands(schedule: isl.Schedule):
    """Every band node of ``schedule``, in pre-order."""
    return [n for n in walk(schedule.get_root()) if n.get_type() == _BAND]


# ----------------------------------------------------------------- names

def is_names_mark(node: isl.ScheduleNode) -> bool:
    return node.get_type() == _MARK and node.mark_get_id().get_name().startswith(NAMES)


names_mark_id = loop_names_mark


def _aff_text(aff: isl.Aff, iterators: tuple[str, ...]) -> str | None:
    """``m`` / ``t+i`` / ``-i`` / ``m_tile`` for a member's affine function."""
    coeffs = [int(aff.get_coefficient_val(isl.dim_type.in_, i).to_python())
              for i in range(len(iterators))]
    ndiv = aff.dim(isl.dim_type.div)
    if ndiv:
        used = []
        for k in range(ndiv):
            div = aff.get_div(k)
            for i, it in enumerate(iterators):
                if (not div.get_coefficient_val(isl.dim_type.in_, i).is_zero()
                        and it not in used):
                    used.append(it)
        if not used:
            return None
        # isl writes a tile loop m - (m mod T) as T*floor(m/T): no direct
        # coefficient; a point loop (m mod T) keeps m's own coefficient
        return "_".join(used) + ("_tile" if all(c == 0 for c in coeffs) else "")
    terms = []
    for it, c in zip(iterators, coeffs):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        mag = "" if abs(c) == 1 else f"{abs(c)}*"
        terms.append(f"{sign}{mag}{it}")
    if not terms:
        return None
    text = "".join(terms)
    return text[1:] if text.startswith("+") else text


def member_name_for(stmt: Statement, upa: isl.UnionPwAff) -> str | None:
    """The derived name of band member ``upa`` for statement ``stmt``."""
    fn_space = isl.Space.from_domain(stmt.domain.get_space()).add_dims(isl.dim_type.out, 1)
    pieces = upa.extract_pw_aff(fn_space).get_pieces()
    if not pieces:
        return None
    texts = {_aff_text(aff, stmt.iterators) for _, aff in pieces}
    return texts.pop() if len(texts) == 1 else None


def default_member_names(band: isl.ScheduleNode, program: Program) -> list[str]:
    """Names for the members of ``band`` derived from its partial schedule
    (see the module docstring); ``c<depth>`` when no name can be derived."""
    stmts = set(statements_of(band))
    mupa = band.band_get_partial_schedule()
    depth = band.get_schedule_depth()
    out = []
    for j in range(band.band_n_member()):
        upa = mupa.get_union_pw_aff(j)
        found: list[str] = []
        for s in program.statements:
            if s.name not in stmts:
                continue
            text = member_name_for(s, upa)
            if text is not None and text not in found:
                found.append(text)
        out.append("|".join(found) if found else f"c{depth + j}")
    return out


def band_names(band: isl.ScheduleNode, program: Program) -> list[str]:
    """The names of the members of ``band``: from its ``loops:`` mark, else
    derived (:func:`default_member_names`)."""
    if band.has_parent():
        parent = band.parent()
        if is_names_mark(parent):
            names = parent.mark_get_id().get_name()[len(NAMES):].split(",")
            if len(names) == band.band_n_member():
                return names
    return default_member_names(band, program)


def set_band_names(band: isl.ScheduleNode, names) -> isl.ScheduleNode:
    """Put (or replace) the ``loops:`` mark above ``band``; returns the band."""
    names = list(names)
    assert len(names) == band.band_n_member(), (names, band.band_n_member())
    if band.has_parent() and is_names_mark(band.parent()):
        band = band.parent().delete()
    return band.insert_mark(names_mark_id(names)).child(0)


def name_all_bands(schedule: isl.Schedule, program: Program) -> isl.Schedule:
    """``schedule`` with a ``loops:`` mark above every band that has none
    (names derived from the partial schedules, made unique along each path by
    a numeric suffix)."""
    def go(node: isl.ScheduleNode, taken: frozenset) -> isl.ScheduleNode:
        """Returns the node now at ``node``'s position."""
        fresh = None
        if node.get_type() == _BAND:
            fresh = []
            for nm in band_names(node, program):
                base, k = nm, 2
                while nm in taken or nm in fresh:
                    nm, k = f"{base}_{k}", k + 1
                fresh.append(nm)
            taken = taken | set(fresh)
        for i in range(node.n_children()):
            node = go(node.child(i), taken).parent()
        if fresh is not None:
            marked = node.has_parent() and is_names_mark(node.parent())
            node = set_band_names(node, fresh)
            if not marked:
                node = node.parent()
        return node
    return go(schedule.get_root(), frozenset()).get_schedule()


def without_names(schedule: isl.Schedule) -> isl.Schedule:
    """``schedule`` with every ``loops:`` mark deleted (the names are the
    schedule language's; the passes after the automatic schedule and code
    generation do not need them)."""
    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        return node.delete() if is_names_mark(node) else node
    return schedule.map_schedule_node_bottom_up(fn)


# ----------------------------------------------------------------- loops

@dataclass(frozen=True)
class Loop:
    """A handle on one loop of a schedule: band member ``member`` of the band
    at ``path``.  ``statements`` are the statements the loop runs; ``spec``
    is ``(target, name)`` when the loop was found by name (recipes record
    that rather than the path)."""
    path: tuple[int, ...]
    member: int
    name: str
    statements: tuple[str, ...]
    spec: tuple[str, str] | None = None

    def __str__(self) -> str:
        return f"loop {self.name} (statements {', '.join(self.statements)})"

    def matches(self, name: str) -> bool:
        names = self.name.split("|")
        # a renamed iterator (floor_) answers to the source's floor, floor_tile
        return name == self.name or name in names or name in map(source_spelling, names)


_LAST: list[tuple] = []   # (schedule, program, loops) of the last calls: isl trees are values


def all_loops(schedule: isl.Schedule, program: Program) -> list[Loop]:
    """Every loop of ``schedule`` in pre-order (outer bands first, members in order),
    remembered for the last few trees (a schedule step resolves several loops of one)."""
    out = next((list(lps) for s, p, lps in _LAST if s is schedule and p is program), [])
    for band in () if out else bands(schedule):
        path, stmts = path_of(band), statements_of(band)
        out += [Loop(path, j, nm, stmts) for j, nm in enumerate(band_names(band, program))]
    _LAST[:] = [(schedule, program, tuple(out))] + [e for e in _LAST if e[0] is not schedule][:3]
    return out


def fresh_name(name: str, taken, sep: str = "") -> str:
    """``name``, or ``name<sep>2``, ``name<sep>3``... until it is not in
    ``taken``."""
    out, k = name, 2
    while out in taken:
        out, k = f"{name}{sep}{k}", k + 1
    return out


def loop_names_near(schedule: isl.Schedule, program: Program, statements) -> set[str]:
    """Every name (aliases included) of the loops that run one of
    ``statements``: what a new loop name among them must avoid."""
    mine = set(statements)
    return {nm for lp in all_loops(schedule, program) if mine & set(lp.statements)
            for nm in lp.name.split("|")}


def target_statements(program: Program, target: str) -> tuple[str, ...]:
    """The statements a target names: a statement name, or a tensor (every
    statement that writes it, also through a local buffer after promotion;
    not the promotion's copies: :meth:`polyc.ir.Program.writers`)."""
    names = [s.name for s in program.statements]
    if target in names:
        return (target,)
    writers = program.writers(target)
    if writers:
        return writers
    tensors = sorted({s.tensor for s in program.statements})
    raise ScheduleError(f"no statement or written tensor named {target!r} in "
                        f"{program.name}{did_you_mean(target, names + tensors)}; "
                        f"statements: {', '.join(names)}; "
                        f"written tensors: {', '.join(tensors)}")


def find_loop(schedule: isl.Schedule, program: Program, target: str, name: str) -> Loop:
    """The loop called ``name`` that runs statement (or output tensor)
    ``target``.  Raises :class:`ScheduleError` naming the loops that exist
    when there is none, and the candidates when there are several."""
    stmts = set(target_statements(program, target))
    loops = all_loops(schedule, program)
    mine = [lp for lp in loops if stmts & set(lp.statements)]
    hits = [lp for lp in mine if lp.matches(name)]
    if len(hits) > 1 and sum(lp.name == name for lp in hits) == 1:     # "j" over "k|j"
        hits = [lp for lp in hits if lp.name == name]
    if not hits:
        have = ", ".join(dict.fromkeys(lp.name for lp in mine)) or "none"
        hint = did_you_mean(name, (n for lp in mine for n in lp.name.split("|")))
        raise ScheduleError(f"no loop {name!r} runs {target}{hint}; its loops are: {have}")
    if len(hits) > 1:
        where = "; ".join(f"{lp.name} at path {list(lp.path)} member {lp.member} "
                          f"({', '.join(lp.statements)})" for lp in hits)
        one = "" if len({lp.statements for lp in hits}) == 1 else "name one statement, or "
        raise ScheduleError(f"loop {name!r} of {target} is ambiguous: {where}; "
                            f"{one}use loop(path=..., member=...)")
    return Loop(hits[0].path, hits[0].member, hits[0].name, hits[0].statements,
                spec=(target, name))


def loop_at(schedule: isl.Schedule, program: Program, path, member: int = 0) -> Loop:
    """The loop at band ``path``, member ``member``."""
    path = tuple(int(p) for p in path)
    node = node_at(schedule, path)
    if node.get_type() != _BAND:
        raise ScheduleError(f"the node at path {list(path)} is a "
                            f"{_node_kind(node)}, not a band (a loop)")
    n = node.band_n_member()
    if not 0 <= member < n:
        raise ScheduleError(f"the band at path {list(path)} has {n} member(s); "
                            f"member {member} does not exist")
    return Loop(path, member, band_names(node, program)[member], statements_of(node))


def _node_kind(node: isl.ScheduleNode) -> str:
    return str(node.get_type()).split(".")[-1].rstrip("_")


# ------------------------------------------------------- natural schedule

def _band_on(stmts: list[Statement], iterators: tuple[str, ...]) -> isl.MultiUnionPwAff:
    """A band scanning ``iterators`` (by name) of every statement in ``stmts``."""
    return iterator_band([(s, iterators) for s in stmts])


def iterator_band(parts) -> isl.MultiUnionPwAff:
    """The band ``{ S[i] -> [its] }`` over ``parts``, pairs ``(statement,
    iterator names)``: member ``k`` scans each statement's ``k``-th named
    iterator (all lists have one length)."""
    cols = []
    for k in range(len(parts[0][1])):
        upa = None
        for s, its in parts:
            ls = isl.LocalSpace.from_space(s.domain.get_space())
            aff = isl.Aff.var_on_domain(ls, isl.dim_type.set, s.iterators.index(its[k]))
            part = isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff).intersect_domain(
                s.domain))
            upa = part if upa is None else upa.union_add(part)
        cols.append(upa)
    return mupa_from_columns(cols)


def mupa_from_columns(cols) -> isl.MultiUnionPwAff:
    """The band (``isl.MultiUnionPwAff``) whose members are ``cols``, a
    non-empty list of ``isl.UnionPwAff`` over the same statements."""
    space = cols[0].get_space().add_dims(isl.dim_type.set, len(cols))
    upal = isl.UnionPwAffList.alloc(CTX, len(cols))
    for c in cols:
        upal = upal.add(c)
    return isl.MultiUnionPwAff.from_union_pw_aff_list(space, upal)


def statement_filter(program: Program, names) -> isl.UnionSet:
    """The filter ``{ S[...] }`` (universe of each statement space) of the
    statements ``names`` of ``program``, in program order."""
    return _filter([st for st in program.statements if st.name in set(names)])


def _filter(stmts) -> isl.UnionSet:
    u = None
    for s in stmts:
        part = isl.UnionSet.from_set(isl.Set.universe(s.domain.get_space()))
        u = part if u is None else u.union(part)
    return u


def _groups(program: Program) -> list[list[Statement]]:
    """Source statements: an ``init`` followed by the ``update`` of the same
    tensor whose leading iterators are the init's form one group."""
    out: list[list[Statement]] = []
    for s in program.statements:
        prev = out[-1] if out else None
        if (prev and len(prev) == 1 and prev[0].kind == "init" and s.kind == "update"
                and s.tensor == prev[0].tensor
                and s.iterators[:len(prev[0].iterators)] == prev[0].iterators):
            prev.append(s)
        else:
            out.append([s])
    return out


def _subtree(stmts: list[Statement]) -> isl.Schedule:
    """The source order of one group: its common iterators as one band, then
    (for an init/update pair) the init before the update's reduction loops."""
    dom = None
    for s in stmts:
        part = isl.UnionSet.from_set(s.domain)
        dom = part if dom is None else dom.union(part)
    sched = isl.Schedule.from_domain(dom)
    common = stmts[0].iterators
    node = sched.get_root().child(0)
    if len(stmts) == 2:
        init, upd = stmts
        rest = upd.iterators[len(common):]
        filters = isl.UnionSetList.alloc(CTX, 2).add(_filter([init])).add(_filter([upd]))
        node = node.insert_sequence(filters)
        if rest:
            node = node.child(1).child(0).insert_partial_schedule(_band_on([upd], rest))
            node = set_band_names(node, rest)
        node = node.root().child(0)          # the sequence, below the domain
    if common:
        node = node.insert_partial_schedule(_band_on(stmts, common))
        node = set_band_names(node, common)
    return node.get_schedule()


def natural_schedule(program: Program) -> isl.Schedule:
    """The source order as a programmer writes it: statements in sequence,
    each scanning its iterators in order, with a reduction's initialisation
    placed inside the loops of its output element, just before the reduction
    loops (``for m: for n: { C = 0; for k: C += ... }``).  Every band is
    named after the source iterators.  Legal by construction: the only
    instances it reorders with respect to :func:`polyc.ir.original_schedule`
    are an initialisation and the updates of other output elements.  A
    program with an explicit source order (``Program.order``: Python loop
    nests) gets that order."""
    if program.order is not None:
        return program.order
    parts = [_subtree(g) for g in _groups(program)]
    sched = parts[0]
    for p in parts[1:]:
        sched = sched.sequence(p)
    return sched
