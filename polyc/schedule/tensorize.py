"""Tensorization as a mark in the schedule tree.

``tensorize(loops, "gemm")`` marks the band whose outermost loop is
``loops[0]``: every statement instance below the mark, for one point of the
loops above it, is computed by one call of the intrinsic.  The tree stays a
schedule of the source program, so recipes, ``explain``, legality checks
and pictures treat the mark like any other; only code generation
(:func:`lower_marks`) replaces the subtree below the mark by the call.

A band may be marked when (isl decides every point):

* the statements below it are one update that matches the intrinsic
  (:func:`polyc.intrinsics.match_gemm`: access relations equal to the
  intrinsic's, by isl map equality; the domain a box in the scanned
  iterators) and, optionally, what the call folds: the ``+=!``
  initialisation or a scaling of the output before it (``C *= beta``,
  the intrinsic's ``beta``), the bias/ReLU epilogue after it;
* the loops above the mark do not depend on the iterators the intrinsic
  scans: the prefix schedule of every statement below, composed with the
  projection onto the call's loops (``{ S[b, m, n, k] -> call[b] }``), is a
  function of the call's loops.  So the instances one call computes run
  contiguously and at one point of the outer loops, and the legality check
  of the tree (against the source dependences) is the legality of the calls.

Before / after ``tensorize(("C", "m"), "gemm")`` on ``C(m,n) +=! A(m,k) *
B(k,n)`` in the source order::

    for m: for n: { S0_init; for k: S0 }       mark tensorize:gemm:S0
                                                 for m: for n: { S0_init; for k: S0 }
    generated:  polyc_gemm_f32(M, N, K, A, ..., C, ..., beta = 0, ...)

The automatic pipeline (:func:`polyc.pipeline.lower`) schedules the program
with each matched group contracted to its calls (:func:`contract`: the
scheduler then cannot fuse into the intrinsic's loops), expands the calls
back into the source statements (:func:`expand`) and marks each group
with :func:`mark_band`, the function ``Schedule.tensorize`` calls.

Source: TVM's ``tensorize`` schedule primitive; the polyhedral matching of
Bondhugula et al., "High-performance GPU/CPU tensor contraction via
polyhedral tensorization" (see :mod:`polyc.intrinsics`); the schedule-tree
grouping follows isl's ``isl_schedule_node_group`` (an expansion by the
projection onto the outer loops).
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from .. import expr as E
from ..errors import ScheduleError
from ..intrinsics import GemmMatch, match_epilogue, match_gemm, match_scale
from ..ir import Program, Statement
from ..isl_util import CTX
from . import surgery, tree
from .registry import transform

#: Prefix of the mark's name: ``tensorize:<intrinsic>:<statement>``.
MARK = "tensorize"
#: The intrinsics :func:`mark_band` knows.
INTRINSICS = ("gemm",)

_MARK = isl.schedule_node_type.mark


def mark_name(intrinsic: str, statement: str) -> str:
    return f"{MARK}:{intrinsic}:{statement}"


def parse_mark(name: str) -> tuple[str, str] | None:
    """``(intrinsic, statement)`` of a tensorize mark's name, else ``None``."""
    parts = name.split(":")
    if len(parts) == 3 and parts[0] == MARK:
        return parts[1], parts[2]
    return None


# ------------------------------------------------------------ projections

def _projection(stmt: Statement, name: str, keep: list[str], alias: list[str]) -> isl.Map:
    """``{ stmt[iterators] -> name[alias] }`` keeping the iterators ``keep``
    (renamed ``alias``), built with isl's API: the names are user text
    (``NAN`` or ``infty`` would read as values in isl's syntax)."""
    space = stmt.domain.get_space()
    ls = isl.LocalSpace.from_space(space)
    target = isl.Space.set_from_params(space.params()).add_dims(isl.dim_type.set, len(keep))
    target = target.set_tuple_name(isl.dim_type.set, name)
    affs = isl.AffList.alloc(space.get_ctx(), len(keep))
    for it in keep:
        affs = affs.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, stmt.iterators.index(it)))
    proj = isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(
        isl.Space.map_from_domain_and_range(space, target), affs))
    for i, a in enumerate(alias):
        proj = proj.set_dim_name(isl.dim_type.out, i, a)
    return proj


def _output_batch(stmt: Statement, other: Statement, batch: list[str]) -> list[str] | None:
    """The iterators of ``other`` (a statement writing the same output with
    plain indices) at the output positions of ``stmt``'s ``batch``."""
    pos = [i.name for i in stmt.lhs.indices]
    idx = [getattr(i, "name", None) for i in other.lhs.indices]
    if len(idx) != len(pos) or None in idx:
        return None
    return [idx[pos.index(b)] for b in batch]


def group_statements(m: GemmMatch) -> tuple[str, ...]:
    """The statements one call computes: the scaling or initialisation
    folded before it, the update, the epilogue after it."""
    return tuple(x for x in (m.init, m.scale, m.statement, m.epilogue) if x)


def projections(program: Program, m: GemmMatch) -> dict[str, isl.Map]:
    """Per statement of the group, ``{ X[iterators] -> S[batch] }``: the call
    (named after the update ``S``) each instance belongs to."""
    stmt = program.statement(m.statement)
    batch = list(m.batch)
    out = {}
    for name in group_statements(m):
        st = program.statement(name)
        keep = batch if name == m.statement else _output_batch(stmt, st, batch)
        out[name] = _projection(st, stmt.name, keep, batch)
    return out


# ------------------------------------------------------------------ calls

def call_statement(program: Program, m: GemmMatch) -> Statement:
    """The ``intrinsic`` statement of ``m``: iterators the call's loops, the
    domain where calls run (with a folded initialisation or scaling also
    where the reduction is empty), the whole slices read and written as
    access relations (isl projections of the originals)."""
    stmt = program.statement(m.statement)
    proj = projections(program, m)
    first = program.statement(group_statements(m)[0])
    write = first.write.apply_domain(proj[first.name])
    domain = (write.domain() if first.name != stmt.name
              else stmt.domain.apply(proj[stmt.name]))
    # with the initialisation folded the call overwrites C: it reads no C
    reads = [r.apply_domain(proj[stmt.name]) for r in stmt.reads
             if m.init is None or r.get_tuple_name(isl.dim_type.out) != stmt.tensor]
    for name in group_statements(m):
        if name not in (m.statement, m.init):
            reads += [r.apply_domain(proj[name]) for r in program.statement(name).reads
                      if r.get_tuple_name(isl.dim_type.out) != stmt.tensor]
    return Statement(name=stmt.name, iterators=tuple(m.batch), domain=domain.coalesce(),
                     lhs=E.Access(stmt.tensor, ()), op="=", rhs=E.Const(0.0),
                     write=write.coalesce(), reads=tuple(r.coalesce() for r in reads),
                     kind="intrinsic", text=f"{stmt.text} [{m.describe()}]",
                     span=stmt.span, intrinsic=m)


def _representatives(program: Program, m: GemmMatch) -> isl.PwMultiAff:
    """``{ S[batch] -> X[...] }``: one instance of the group per call (the
    first in the lexicographic order of the group's first statement, which
    covers every call's domain)."""
    first = program.statement(group_statements(m)[0])
    rel = projections(program, m)[first.name].reverse().intersect_range(first.domain)
    return rel.lexmin_pw_multi_aff()


def _first_in_order(program: Program, m: GemmMatch) -> isl.UnionPwMultiAff:
    """``{ S[batch] -> X[...] }``: the instance of each call's group that runs
    first in the source order (where the contracted order puts the call)."""
    order = program.original_schedule().get_map()
    to_call = None
    for name, pr in projections(program, m).items():
        part = isl.UnionMap.from_map(pr.intersect_domain(program.statement(name).domain))
        to_call = part if to_call is None else to_call.union(part)
    times = isl.Map.from_union_map(to_call.reverse().apply_range(order)).lexmin()
    first = isl.UnionMap.from_map(times).apply_range(order.reverse())
    return isl.UnionPwMultiAff.from_union_map(first)


def _identity(space: isl.Space) -> isl.PwMultiAff:
    return isl.PwMultiAff.from_multi_aff(isl.MultiAff.identity(isl.Space.map_from_set(space)))


def contract(program: Program, matches: list[GemmMatch]) -> Program:
    """``program`` with each group of ``matches`` replaced by its call
    statement (at the update's position); a source order
    (``Program.order``) is pulled back onto the calls."""
    if not matches:
        return program
    folded = {x for m in matches for x in group_statements(m) if x != m.statement}
    calls = {m.statement: call_statement(program, m) for m in matches}
    stmts = tuple(calls.get(s.name, s) for s in program.statements if s.name not in folded)
    order = program.order
    if order is not None:
        upma = isl.UnionPwMultiAff.empty(order.get_domain().get_space())
        reps = {m.statement: _first_in_order(program, m) for m in matches}
        for s in stmts:
            upma = upma.union_add(reps[s.name] if s.kind == "intrinsic" else
                                  isl.UnionPwMultiAff.from_pw_multi_aff(
                                      _identity(s.domain.get_space())))
        order = order.pullback_union_pw_multi_aff(upma)
    return program.replace(statements=stmts, order=order)


# ------------------------------------------------------------------ matching

def fold(program: Program, main: str, others, parallel: bool = True) -> GemmMatch | str:
    """The match of update ``main`` with the statements ``others`` folded
    into the call (each must be its initialisation, a scaling of its output
    before it, or its epilogue), or the reason it cannot be."""
    stmt = program.statement(main)
    m = match_gemm(program, stmt)
    if isinstance(m, str):
        return f"{main} ({stmt.text.strip()}) does not match gemm: {m}"
    init = m.init
    m = replace(m, init=None, parallel=parallel)
    epi = match_epilogue(program, m) if others else m
    for name in others:
        st = program.statement(name)
        if name == init:
            m = replace(m, init=name)
        elif name == epi.epilogue:
            m = replace(m, epilogue=epi.epilogue, bias=epi.bias, relu=epi.relu)
        elif m.scale is None and (
                beta := match_scale(program, m, st)) is not None:
            m = replace(m, scale=name, beta=beta)
        else:
            return (f"statement {name} ({st.text.strip()}) also runs below the band; gemm "
                    f"computes only {main} with its initialisation, a scaling of "
                    f"{stmt.tensor} before it, or a bias/ReLU epilogue after it")
    return m


def _prefix_reason(node: isl.ScheduleNode, program: Program, m: GemmMatch) -> str | None:
    """Why the loops above ``node`` are not a function of the calls' loops
    (``None`` when they are): ``{ call -> prefix }``, the union over the
    group of the projections' inverses composed with the prefix schedule,
    must be single-valued."""
    prefix = node.get_prefix_schedule_union_map()
    reach = node.get_domain()
    proj = projections(program, m)

    def q_of(name: str) -> isl.UnionMap:
        dom = isl.UnionSet.from_set(program.statement(name).domain).intersect(reach)
        return isl.UnionMap.from_map(proj[name]).intersect_domain(dom).reverse() \
            .apply_range(prefix.intersect_domain(dom))
    qs = {name: q_of(name) for name in proj}
    q = qs[m.statement]
    if q.is_single_valued():
        for name, part in qs.items():
            q = q.union(part)
            if not q.is_single_valued():
                return (f"{name} does not run at the same point of the loops above the band "
                        f"as the {m.statement} instances it belongs to")
        return None
    stmt = program.statement(m.statement)
    own = prefix.intersect_domain(isl.UnionSet.from_set(stmt.domain))
    for it in m.scanned:
        pos = stmt.iterators.index(it)
        p = isl.Map.identity(isl.Space.map_from_set(stmt.domain.get_space()))
        p = p.project_out(isl.dim_type.out, pos, 1).insert_dims(isl.dim_type.out, pos, 1)
        p = p.set_tuple_name(isl.dim_type.out, stmt.name).intersect_domain(stmt.domain) \
             .intersect_range(stmt.domain)
        if not isl.UnionMap.from_map(p).apply_range(own).is_subset(own):
            return (f"a loop above the band depends on {it}, which the intrinsic scans "
                    f"(it computes whole slices of {m.c}): mark the outermost loop that "
                    f"scans {it}")
    return "the loops above the band are not a function of the call's loops"


def _top(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Above ``node``'s ``loops:`` name mark and any loop marks right above."""
    node = surgery.top_of_band(node)
    while node.has_parent() and node.parent().get_type() == _MARK \
            and parse_mark(node.parent().mark_get_id().get_name()) is None:
        node = node.parent()
    return node


def mark_band(schedule: isl.Schedule, program: Program, band: isl.ScheduleNode,
              intrinsic: str = "gemm", parallel: bool = True,
              known: GemmMatch | None = None) -> isl.Schedule:
    """``schedule`` with a ``tensorize:<intrinsic>:<S>`` mark above ``band``
    (a band node of ``schedule``) after checking that the subtree is one
    call of ``intrinsic`` per point of the loops above (module docstring).
    ``known``: the match of the statements below, already made (the
    automatic pipeline's, :func:`expand`); the loops above are checked all
    the same.  Raises :class:`~polyc.errors.ScheduleError` with the reason
    otherwise."""
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
    names = tree.statements_of(top)
    if known is not None and set(names) == set(group_statements(known)):
        reason = _prefix_reason(top, program, known)
        if reason:
            raise ScheduleError(reason)
        return top.insert_mark(isl.Id(mark_name(intrinsic, known.statement), context=CTX)) \
                  .get_schedule()
    if intrinsic not in INTRINSICS:
        m = _custom(program, intrinsic, names)
        reason = _prefix_reason(top, program, m)
        if reason:
            raise ScheduleError(reason)
        return top.insert_mark(isl.Id(mark_name(intrinsic, m.statement), context=CTX)) \
                  .get_schedule()
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
    reason = _prefix_reason(top, program, m)
    if reason:
        raise ScheduleError(reason)
    return top.insert_mark(isl.Id(mark_name(intrinsic, m.statement), context=CTX)) \
              .get_schedule()


def _custom(program: Program, intrinsic: str, names) -> GemmMatch:
    """The match of the one statement below a band onto user intrinsic
    ``intrinsic`` (:mod:`polyc.custom_intrinsics`); raises ScheduleError."""
    from .. import custom_intrinsics
    if len(names) != 1:
        raise ScheduleError(f"statements {', '.join(names)} run below the band; {intrinsic} "
                            f"computes one statement (distribute or move the others first)")
    stmt = program.statement(names[0])
    m = custom_intrinsics.match(program, stmt, custom_intrinsics.get(intrinsic))
    if isinstance(m, str):
        raise ScheduleError(f"{stmt.name} ({stmt.text.strip()}) does not match {intrinsic}: {m}")
    return m


@transform("tensorize")
def tensorize(s, loop, intrinsic: str = "gemm"):
    """Compute the band whose outermost loop is ``loop`` with an intrinsic
    (``"gemm"``: ``C += A * B`` on the packed micro-kernel of
    ``backends/c/intrinsics/gemm.h``), one call per point of the loops
    above it.  Checked: the statements below must be one update matching
    the intrinsic (access relations compared with the intrinsic's by isl
    map equality) plus what the call folds (its ``+=!`` initialisation, a
    scaling ``C *= beta`` before it, a bias/ReLU epilogue after it), and
    the loops above must not depend on the iterators the intrinsic scans;
    otherwise :class:`ScheduleError` says which access or loop differs.

    Before / after ``tensorize(("C","m"), "gemm")``::

        for m: for n: { S0_init; for k: S0 }    mark tensorize:gemm:S0
                                                  (one polyc_gemm call)
    """
    lp = s.resolve(loop)
    band = surgery.band_node(s.isl, lp)
    band = surgery.split_band(band, lp.member, s.program)
    parallel = True
    return mark_band(band.get_schedule(), s.program, band, intrinsic, parallel)


# ------------------------------------------------------------------ lowering

def marks(schedule: isl.Schedule) -> list[tuple[tuple[int, ...], str, str]]:
    """``(path, intrinsic, statement)`` of every tensorize mark, pre-order."""
    out = []
    for n in tree.walk(schedule.get_root()):
        if n.get_type() == _MARK:
            found = parse_mark(n.mark_get_id().get_name())
            if found:
                out.append((tree.path_of(n), *found))
    return out


def check_marks(schedule: isl.Schedule, program: Program) -> None:
    """Raise :class:`ScheduleError` unless every tensorize mark of
    ``schedule`` still holds (a transformation applied after ``tensorize``
    may have moved another statement below it, or made the loops above
    depend on a scanned iterator)."""
    for path, intrinsic, main in marks(schedule):
        node = tree.node_at(schedule, path)
        names = tree.statements_of(node)
        if intrinsic in INTRINSICS:
            m = fold(program, main, [x for x in names if x != main])
        else:
            m = _custom(program, intrinsic, names)
        reason = m if isinstance(m, str) else _prefix_reason(node, program, m)
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
        path, intrinsic, main = todo[0]
        node = tree.node_at(schedule, path)
        names = tree.statements_of(node)
        m = next((k for k in known if k.statement == main
                  and set(group_statements(k)) == set(names)), None)
        if m is None and intrinsic in INTRINSICS:
            m = fold(program, main, [x for x in names if x != main], parallel)
        elif m is None:
            m = _custom(program, intrinsic, names)
        if isinstance(m, str):
            raise ScheduleError(f"mark {node.mark_get_id().get_name()}: {m}")
        call = call_statement(program, m)
        node = node.child(0).cut().parent().delete()
        schedule = node.get_schedule()
        upma = isl.UnionPwMultiAff.from_pw_multi_aff(_representatives(program, m))
        group = set(group_statements(m))
        spaces: list[isl.Set] = []
        schedule.get_domain().foreach_set(spaces.append)
        for st in spaces:
            if st.get_tuple_name() not in group:
                upma = upma.union_add(isl.UnionPwMultiAff.from_pw_multi_aff(
                    _identity(st.get_space())))
        try:
            schedule = schedule.pullback_union_pw_multi_aff(upma)
        except isl.Error as e:
            raise ScheduleError(f"cannot lower the tensorize mark of {main}: {e}") from None
        program = program.replace(statements=tuple(
            call if s.name == main else s for s in program.statements
            if s.name == main or s.name not in group), order=None)
        found.append(m)
    return schedule, program, found


# ------------------------------------------------------------------ automatic

def find(program: Program, parallel: bool = True) -> tuple[list[GemmMatch], dict[str, str]]:
    """The groups the automatic pipeline tensorizes, and per update statement
    what happened (the match, or why it did not match).  In a program with
    an explicit source order (a ``@polyc.kernel`` loop program) a group must
    also run as one unit (:func:`_atomic_reason`)."""
    notes: dict[str, str] = {}
    matches: list[GemmMatch] = []
    stmts = list(program.statements)
    deps = None
    for i, s in enumerate(stmts):
        if s.kind == "assign" and _accumulates(s):
            # X = X + a * b written as an assignment (a loop program's +=
            # whose output is also read elsewhere): say why it is no call
            m = match_gemm(program, replace(s, kind="update", op="+", rhs=s.rhs.rhs))
            notes[s.name] = (f"{s.name} not tensorized: "
                             f"{m if isinstance(m, str) else 'an assignment, not a reduction'}")
            continue
        if s.kind != "update":
            continue
        m = match_gemm(program, s)
        if isinstance(m, str):
            notes[s.name] = f"{s.name} not tensorized: {m}"
            continue
        m = replace(match_epilogue(program, m), parallel=parallel)
        if m.init is None and i > 0:
            beta = match_scale(program, m, stmts[i - 1])
            if beta is not None:
                m = replace(m, scale=stmts[i - 1].name, beta=beta)
        if program.order is not None:
            if deps is None:
                from ..dependence import compute
                deps = compute(program).all()
            reason = _atomic_reason(program, m, deps)
            if reason and (m.epilogue or m.scale):
                m = replace(m, epilogue=None, bias=None, relu=False, scale=None, beta=None)
                reason = _atomic_reason(program, m, deps)
            if reason:
                notes[s.name] = f"{s.name} not tensorized: {reason}"
                continue
        matches.append(m)
        notes[s.name] = m.describe()
    for m in matches:
        for name in group_statements(m):
            if name != m.statement and program.statement(name).kind == "update":
                notes[name] = f"{name} folded into the call of {m.statement}"
    return matches, notes


def _accumulates(s: Statement) -> bool:
    """Whether assignment ``s`` is ``X[i] = X[i] + e``."""
    return (isinstance(s.rhs, E.Binary) and s.rhs.op == "+" and isinstance(s.rhs.lhs, E.Access)
            and s.rhs.lhs.tensor == s.tensor and s.rhs.lhs.indices == s.lhs.indices)


def _atomic_reason(program: Program, m: GemmMatch, deps: isl.UnionMap) -> str | None:
    """Why the instances of one call of ``m`` cannot run as one unit at the
    place of the first of them in the source order (``None`` when they can):
    a statement instance outside the group that runs between two instances
    of one call and that an instance of the group depends on (isl: the
    source order's ``lex_lt`` relation and the exact dependences).  Those
    that only read what the group wrote run after the call."""
    order = program.original_schedule().get_map()
    before = order.lex_lt_union_map(order)
    proj = projections(program, m)
    group = isl.UnionSet.empty(program.parameter_domain().get_space())
    to_call = None
    for name, pr in proj.items():
        dom = program.statement(name).domain
        group = group.union(isl.UnionSet.from_set(dom))
        part = isl.UnionMap.from_map(pr.intersect_domain(dom))
        to_call = part if to_call is None else to_call.union(part)
    rest = before.domain().union(before.range()).subtract(group)
    after_some = before.intersect_domain(group).intersect_range(rest).reverse() \
        .apply_range(to_call)                      # x -> calls with an instance before x
    before_some = before.intersect_domain(rest).intersect_range(group) \
        .apply_range(to_call)                      # x -> calls with an instance after x
    between = after_some.intersect(before_some)
    # such an instance runs after the call (the call takes the place of the
    # group's first instance): it may read what the group wrote (the exact
    # dataflow gives it a value no later instance of the group changes), but
    # no instance of the group may depend on it
    needed = deps.intersect_domain(rest).intersect_range(group).apply_range(to_call)
    bad = between.intersect(needed)
    if bad.is_empty():
        return None
    names: set[str] = set()
    bad.domain().foreach_set(lambda st: names.add(st.get_tuple_name()))
    return (f"statement(s) {', '.join(sorted(names))} run between the instances of one call "
            f"and the call depends on them (it would run as one unit)")


def expand(schedule: isl.Schedule, source: Program, matches: list[GemmMatch],
           parallel: bool = True) -> isl.Schedule:
    """The tree of the contracted program ``schedule`` (scheduled with each
    group as its calls, :func:`contract`) as a tree of ``source``: every
    instance of a group at its call's place
    (``isl_schedule_pullback_union_pw_multi_aff`` by the projections), below
    it the group's own loops in source order (a band over the output's loops
    the call scans, then the initialisation or scaling, the update's
    reduction loops and the epilogue in sequence), marked by
    :func:`mark_band`."""
    upma = None
    in_group = {x: m for m in matches for x in group_statements(m)}
    for s in source.statements:
        m = in_group.get(s.name)
        f = (isl.PwMultiAff.from_map(projections(source, m)[s.name].intersect_domain(s.domain))
             if m else _identity(s.domain.get_space()))
        part = isl.UnionPwMultiAff.from_pw_multi_aff(f)
        upma = part if upma is None else upma.union_add(part)
    schedule = schedule.pullback_union_pw_multi_aff(upma)
    for m in matches:
        band = _insert_group(schedule, source, m)
        schedule = mark_band(band.get_schedule(), source, band, "gemm", parallel, known=m)
    return schedule


def _leaf_of(schedule: isl.Schedule, name: str) -> isl.ScheduleNode:
    for n in tree.walk(schedule.get_root()):
        if n.get_type() == isl.schedule_node_type.leaf and name in tree.statements_of(n):
            return n
    raise ScheduleError(f"internal: statement {name} has no leaf in the schedule")


def _insert_group(schedule: isl.Schedule, program: Program, m: GemmMatch) -> isl.ScheduleNode:
    """The group's loops below its call's leaf; returns their outermost band."""
    group = group_statements(m)
    stmt = program.statement(m.statement)
    node = _leaf_of(schedule, m.statement)
    others = [x for x in tree.statements_of(node) if x not in group]
    if others:             # statements sharing the call's point: independent of it
        filters = isl.UnionSetList.alloc(CTX, 2) \
            .add(tree.statement_filter(program, group)) \
            .add(tree.statement_filter(program, others))
        node = node.insert_sequence(filters).child(0).child(0)
    c_idx = [i.name for i in stmt.lhs.indices]
    out_pos = [p for p, it in enumerate(c_idx) if it not in m.batch]
    k_its = tuple(it for it in stmt.iterators if it not in c_idx and it not in m.batch)
    sts = [program.statement(x) for x in group]
    if len(sts) > 1:
        filters = isl.UnionSetList.alloc(CTX, len(sts))
        for st in sts:
            filters = filters.add(tree.statement_filter(program, [st.name]))
        node = node.insert_sequence(filters)
        if k_its:
            inner = node.child(group.index(m.statement)).child(0)
            inner = inner.insert_partial_schedule(tree.iterator_band([(stmt, k_its)]))
            node = tree.set_band_names(inner, k_its)
            while node.get_type() != isl.schedule_node_type.sequence:
                node = node.parent()
        parts = [(st, tuple(st.lhs.indices[p].name for p in out_pos)) for st in sts]
    else:
        parts = [(stmt, tuple(c_idx[p] for p in out_pos) + k_its)]
    node = node.insert_partial_schedule(tree.iterator_band(parts))
    return tree.set_band_names(node, parts[0][1])
