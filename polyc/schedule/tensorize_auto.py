"""The automatic pipeline's tensorization: which statements become calls,
the program it schedules (each group contracted to its calls), and the tree
of the source statements it shows afterwards, marked by
:func:`polyc.schedule.tensorize.mark_band` (the function of the schedule
language's ``tensorize``).

``find`` matches every update (with the initialisation, scaling and
epilogue it folds) and, in a program with an explicit source order (a
``@polyc.kernel`` loop program), checks that each call's instances can run
as one unit; ``contract`` replaces each group by its call statement and
pulls the source order back onto the calls; after scheduling, ``expand``
pulls the tree back onto the source statements
(``isl_schedule_pullback_union_pw_multi_aff`` by the projections onto the
calls' loops) and marks each group.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ..callbox import triangle_rows as triangle_rows_default
from ..errors import ScheduleError
from ..expansion import expand_array
from ..intrinsics import GemmMatch, match_epilogue, match_gemm, match_scale
from ..ir import Program, Statement
from ..isl_util import CTX
from . import rebuild, tree
from .callorder import AT_LAST, atomic_reason, first_in_order, moved_order
from .parts import (
    accumulates,
    as_updates,
    edges,
    guarded_product,
    restricted,
    with_domains,
    written_part,
)
from .tensorize import call_statement, group_statements, identity, mark_band, projections


def contract(program: Program, matches: list[GemmMatch]) -> Program:
    """``program`` with each group of ``matches`` replaced by its call
    statement (at the update's position); a source order
    (``Program.order``) is pulled back onto the calls."""
    if not matches:
        return program
    edge = {name: d for m in matches for name, d in edges(program, m).items()}
    folded = {x for m in matches for x in group_statements(m) if x != m.statement}
    calls = {m.statement: call_statement(program, m) for m in matches}
    kept = with_domains(program, edge).statements    # a split group's edges keep their loops
    stmts = tuple(x for s in kept for x in
                  ((calls[s.name], s) if s.name in calls and s.name in edge else
                   (calls.get(s.name, s),))
                  if s.name not in folded or s.name in edge)
    order = program.order
    if order is not None:
        upma = isl.UnionPwMultiAff.empty(order.get_domain().get_space())
        times = order.get_map()
        reps = {m.call: first_in_order(program, m, times) for m in matches}
        for s in stmts:
            f = identity(s.domain.get_space())
            if s.name in edge:
                f = f.intersect_domain(s.domain)
            upma = upma.union_add(reps[s.name] if s.kind == "intrinsic" else
                                  isl.UnionPwMultiAff.from_pw_multi_aff(f))
        if any(m.moved is not None for m in matches):
            order = moved_order(order, stmts, reps, matches)
        else:
            order = order.pullback_union_pw_multi_aff(upma)
    return program.replace(statements=stmts, order=order)


def find(program: Program, parallel: bool = True, *, tensor_cores: bool = False,
         triangle_rows: int = 0) -> tuple[list[GemmMatch], dict[str, str]]:
    """The groups the automatic pipeline tensorizes, and per update statement
    what happened (the match, or why it did not match).  In a program with
    an explicit source order (a ``@polyc.kernel`` loop program) a group must
    also run as one unit (:func:`polyc.schedule.callorder.atomic_reason`).  ``tensor_cores``: match
    for the CUDA backend's tensor-core GEMM (``match_gemm(...,
    tensor_cores=True)``).  ``triangle_rows``: rows of C per call over a
    triangular domain (``Config.triangle_rows``; 0: automatic, a band of C
    is one call that stores the band, other triangles take row blocks of
    :func:`polyc.callbox.triangle_rows`; 1: such domains keep their loops)."""
    notes: dict[str, str] = {}
    matches: list[GemmMatch] = []
    stmts = list(program.statements)
    # triangular domains and masked products: calls over full row blocks
    rows = 0 if tensor_cores or triangle_rows == 1 else triangle_rows or triangle_rows_default()
    facts = _Facts(program)  # loop programs: (dependences, source order's lex_lt)
    if not tensor_cores:     # X = X + A * X: matched as the update it is
        program = as_updates(program)
        stmts = list(program.statements)
    for i, s in enumerate(stmts):
        if s.kind == "assign" and accumulates(s):
            # X = X + a * b written as an assignment (a loop program's +=
            # whose output is also read elsewhere): say why it is no call
            m = match_gemm(program, replace(s, kind="update", op="+", rhs=s.rhs.rhs),
                           tensor_cores=tensor_cores)
            notes[s.name] = (f"{s.name} not tensorized: "
                             f"{m if isinstance(m, str) else 'an assignment, not a reduction'}")
            continue
        if s.kind != "update":
            continue
        # a triangle is one call over its band (polyc_gemmt) unless
        # Config.triangle_rows asks for row blocks (or loops: 1); a band
        # whose call cannot run as one unit takes row blocks instead
        m, guard, blocked = _matched(program, s, stmts[:i], rows, not triangle_rows,
                                     parallel, tensor_cores, facts)
        if blocked and m.band is not None:
            m, guard, blocked = _matched(program, s, stmts[:i], rows, False, parallel,
                                         tensor_cores, facts)
        if isinstance(m, str) or blocked:
            notes[s.name] = f"{s.name} not tensorized: {blocked or m}"
            continue
        matches.append(m)
        notes[s.name] = m.describe() + guard
    for m in matches:
        for name in group_statements(m):
            if name != m.statement and program.statement(name).kind == "update":
                notes[name] = f"{name} folded into the call of {m.statement}"
    return matches, notes


class _Facts:
    """A loop program's exact dependences and its source order's ``lex_lt``,
    computed on first use (``get()``: ``None`` without a source order)."""

    def __init__(self, program: Program):
        self.program, self.value = program, None

    def get(self):
        if self.value is None and self.program.order is not None:
            from ..dependence import compute
            order = self.program.order.get_map()
            self.value = (compute(self.program).all(), order.lex_lt_union_map(order))
        return self.value


def _matched(program: Program, s: Statement, earlier, rows: int, band: bool,
             parallel: bool, tensor_cores: bool, facts):
    """``(match, guard, blocked)`` of update ``s`` for :func:`find`
    (``earlier``: the statements before it; ``band``: a band of its box may
    be one call; ``guard``: what explain adds for a guarded product), or
    ``(reason, "", None)``; ``blocked``: why the match's call cannot run as
    one unit in the source order, else ``None``."""
    m = match_gemm(program, s, tensor_cores=tensor_cores, band=band)
    # the statement that may scale or zero C first: the last one before s
    # that writes s's output (statements between writing other tensors
    # run apart, as the source order's dependences allow: callorder.atomic_reason)
    before = next((x for x in reversed(earlier) if x.tensor == s.tensor), None)
    if isinstance(m, str) and BOX_REASON in m and rows:
        split = _split(program, s, before, rows)
        m = split if not isinstance(split, str) else f"{m}; {split}"
    guarded = guarded_product(program, s) if isinstance(m, str) and rows else None
    guard = ""
    if guarded is not None:
        # C += (cond ? A * B : 0): the product over the instances where
        # the affine condition holds (a causal mask), the rest adds 0
        split = _split(program.replace(statements=tuple(
            guarded if x.name == s.name else x for x in program.statements)), guarded,
            before, rows, whole=True, band=band)
        m = split if not isinstance(split, str) else f"{m}; where {guarded.text}: {split}"
        guard = f"; the product where {guarded.text} (it adds 0 elsewhere)"
    if isinstance(m, str):
        return m, "", None
    if m.parts:
        m = replace(m, parallel=parallel)
    else:
        m = replace(match_epilogue(program, m, post=not tensor_cores), parallel=parallel)
    if m.init is None and before is not None and not m.parts:
        beta = match_scale(program, m, before)
        if beta is not None:
            m = replace(m, scale=before.name, beta=beta)
    if program.order is not None:
        reason, moved = atomic_reason(program, m, *facts.get())
        if reason and (m.epilogue or m.scale or m.tile):
            m = replace(m, epilogue=None, bias=None, relu=False, scale=None, beta=None,
                        post=(), post_relu=0, tile=())
            reason, moved = atomic_reason(program, m, *facts.get())
        if reason:
            return m, guard, reason
        m = replace(m, at_last=True) if moved is AT_LAST else replace(m, moved=moved)
    return m, guard, None


#: How :func:`polyc.intrinsics.match_gemm` says a domain is not a box.
BOX_REASON = "the iteration domain is not the full box"


def _split(program: Program, s: Statement, before: Statement | None, rows: int,
           whole: bool = False, band: bool = False) -> GemmMatch | str:
    """``s`` (whose domain is not a box: a triangle) as calls over the full
    part of its blocks of rows (:mod:`polyc.callbox`), with its ``+=!``
    initialisation or the scaling ``before`` it restricted to the elements
    the calls write (``rows`` rows per call); the reason it cannot be
    otherwise.  ``whole``: ``s`` is a part of the program's statement (a
    guarded product's instances), so the match has ``parts`` even when the
    calls compute all of ``s``; with ``band``, one call over the band those
    instances are when they are one (a causal mask: ``GemmMatch.band``)."""
    m = match_gemm(program, s, rows=rows, split=True)
    if isinstance(m, str):
        return f"nor as calls on full blocks of {rows} rows: {m}"
    if whole and band:
        over = match_gemm(program, s)
        if not isinstance(over, str) and over.band is not None and not over.inplace:
            # (the initialisation is folded over the band's elements below)
            m = replace(over, init=m.init, parts=())
    if not m.parts and not whole:
        return m
    parts = dict(m.parts) or {s.name: s.domain}
    if m.init:
        parts[m.init] = written_part(program, m, program.statement(m.init))
    elif before is not None and before.tensor == m.c:
        part = written_part(program, m, before)
        rp = with_domains(program, {**parts, before.name: part})
        beta = match_scale(rp, m, rp.statement(before.name))
        if beta is not None:
            m, parts[before.name] = replace(m, scale=before.name, beta=beta), part
    return replace(m, parts=tuple(sorted(parts.items())))


#: How :func:`polyc.intrinsics.match_gemm` says an iterator moves one tensor only.
ONE_TENSOR = "an iterator indexes only one tensor"


def expanded_for_calls(program: Program, parallel: bool = True,
                       triangle_rows: int = 0) -> Program:
    """``program`` (a loop program) with the accumulator of each update that
    is no matrix product because loops around it index only one operand
    (PolyBench's ``doitgen``: ``sum(p) += A(r, q, s) * C4(s, p)`` in ``for
    r: for q:``) expanded along those loops
    (:func:`polyc.expansion.expand_array`: ``sum_x(r, q, p) += ...``, one
    call for all ``(r, q)``), where :func:`find` then tensorizes the
    expanded update.  The pipeline compiles this program (its kernel
    allocates the expanded temporary): :func:`polyc.pipeline.compile_programs`."""
    base = as_updates(program)
    got = _expand_for_calls(base)
    if got is base:          # nothing expanded (the common case: no isl comparison)
        return program
    matches, _ = find(got, parallel, triangle_rows=triangle_rows)
    return _expand_for_calls(program, {m.statement for m in matches})


def _expand_for_calls(program: Program, names=None) -> Program:
    """``program`` with the accumulators of the updates (of ``names``: all
    when ``None``) that :func:`expanded_for_calls` describes expanded."""
    if program.order is None:
        return program
    for s in program.statements:
        if s.kind != "update" or (names is not None and s.name not in names):
            continue
        m = match_gemm(program, s)
        if not isinstance(m, str) or ONE_TENSOR not in m:
            continue
        got = expand_array(program, s.tensor)
        if isinstance(got, str) or isinstance(match_gemm(got, got.statement(s.name)), str):
            continue
        program = got
    return program


def expand(schedule: isl.Schedule, source: Program, matches: list[GemmMatch],
           parallel: bool = True, *, mark: bool = True) -> isl.Schedule:
    """The tree of the contracted program ``schedule`` (scheduled with each
    group as its calls, :func:`contract`) as a tree of ``source``: every
    instance of a group at its call's place
    (``isl_schedule_pullback_union_pw_multi_aff`` by the projections), below
    it the group's own loops in source order (a band over the output's loops
    the call scans, then the initialisation or scaling, the update's
    reduction loops and the epilogue in sequence), marked by
    :func:`mark_band` (``mark=False``: unmarked, the start of the recipe of
    :mod:`polyc.schedule.tensorize_recipe`)."""
    upma = None
    in_group = {x: m for m in matches for x in group_statements(m)}
    for s in source.statements:
        m = in_group.get(s.name)
        edge = edges(source, m).get(s.name) if m else None
        fs = []
        if m:
            dom = restricted(source, m).statement(s.name).domain
            fs.append(isl.PwMultiAff.from_map(projections(source, m)[s.name]
                                              .intersect_domain(dom)))
        if not m or edge is not None:       # a split group's edge keeps its own loops
            f = identity(s.domain.get_space())
            fs.append(f if edge is None else f.intersect_domain(edge))
        for f in fs:
            part = isl.UnionPwMultiAff.from_pw_multi_aff(f)
            upma = part if upma is None else upma.union_add(part)
    try:
        schedule = schedule.pullback_union_pw_multi_aff(upma)
    except isl.Error:         # a split group's edge and calls share a band
        schedule = rebuild.pullback(schedule, isl.UnionMap.from_union_pw_multi_aff(upma),
                                    source.domain())
    for m in matches:
        band = _insert_group(schedule, source, m)
        schedule = (mark_band(band.get_schedule(), source, band, "gemm", parallel, known=m)
                    if mark else band.get_schedule())
    return schedule


def _leaf_of(schedule: isl.Schedule, name: str, part: isl.Set) -> isl.ScheduleNode:
    """The leaf that the instances ``part`` of statement ``name`` reach."""
    for n in tree.walk(schedule.get_root()):
        if n.get_type() == isl.schedule_node_type.leaf and name in tree.statements_of(n) \
                and not n.get_domain().intersect(isl.UnionSet.from_set(part)).is_empty():
            return n
    raise ScheduleError(f"internal: statement {name} has no leaf in the schedule")


def _insert_group(schedule: isl.Schedule, program: Program, m: GemmMatch) -> isl.ScheduleNode:
    """The group's loops below its call's leaf; returns their outermost band."""
    group = group_statements(m)
    program = restricted(program, m)
    stmt = program.statement(m.statement)
    node = _leaf_of(schedule, m.statement, stmt.domain)
    others = [x for x in tree.statements_of(node) if x not in group]
    if others or m.parts:  # instances sharing the call's point: independent of it
        mine = tree.statement_filter(program, group)
        rest = tree.statement_filter(program, others) if others else None
        if m.parts:        # the edges of a split group are not the call's
            mine = None
            for x in group:
                d = isl.UnionSet.from_set(program.statement(x).domain)
                mine = d if mine is None else mine.union(d)
            rest = node.get_domain().subtract(mine)
        if rest is not None and not rest.is_empty():
            filters = isl.UnionSetList.alloc(CTX, 2).add(mine).add(rest)
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
