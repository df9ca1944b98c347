"""Where the calls of tensorized groups run in a loop program's source
order (:mod:`polyc.schedule.tensorize_auto`).

In a ``@polyc.kernel`` loop program the instances of one call's group are
spread over the source order, with other instances between them.  The call
takes the place of the group's first instance; :func:`atomic_reason` checks
with isl (the exact dependences and the order's ``lex_lt`` relation) that
each instance between may run after the call, or right before it (a trmm's
diagonal edge, which reads rows of the block before the call writes them:
``GemmMatch.moved``).  :func:`moved_order` gives the contracted program's
order with those moved, and :func:`dependences` its dependences, projected
from the source's.

Source: the legality of moving statement instances past each other,
Kennedy and Allen, *Optimizing Compilers for Modern Architectures*, ch. 2
(a reordering is legal when it reverses no dependence), here on isl's exact
instance-wise dependences.
"""

from __future__ import annotations

import islpy as isl

from ..dependence import Dependences, compute
from ..intrinsics import GemmMatch
from ..ir import Program
from ..isl_util import CTX, maps_of, sets_of
from .parts import restricted
from .tensorize import projections

#: What :func:`atomic_reason` returns as the instances to move when the call
#: runs at the place of its group's last instance (``GemmMatch.at_last``).
AT_LAST = "at the last instance"


def group_to_call(program: Program, m: GemmMatch) -> isl.UnionMap:
    """``{ X[...] -> S[batch] }`` over the instances of the group of ``m``."""
    program = restricted(program, m)
    out = None
    for name, pr in projections(program, m).items():
        part = isl.UnionMap.from_map(pr.intersect_domain(program.statement(name).domain))
        out = part if out is None else out.union(part)
    return out


def first_in_order(program: Program, m: GemmMatch, order: isl.UnionMap
                   ) -> isl.UnionPwMultiAff:
    """``{ S[batch] -> X[...] }``: the instance of each call's group that runs
    first in the source ``order`` (the schedule's map; where the contracted
    order puts the call), or last with ``GemmMatch.at_last``."""
    to_call = group_to_call(program, m)
    times = isl.Map.from_union_map(to_call.reverse().apply_range(order))
    times = times.lexmax() if m.at_last else times.lexmin()
    first = isl.UnionMap.from_map(times).apply_range(order.reverse())
    return isl.UnionPwMultiAff.from_union_map(first)


def atomic_reason(program: Program, m: GemmMatch, deps: isl.UnionMap,
                  before: isl.UnionMap) -> tuple[str | None, isl.UnionMap | None]:
    """Why the instances of one call of ``m`` cannot run as one unit at the
    place of the first of them in the source order (``None`` when they can),
    and the instances that run right before the call instead (``None``:
    none; :data:`AT_LAST`: the call runs at the place of its last instance
    instead, which is legal when no instance between two of the call's
    depends on an instance of the group).  An instance outside the group
    that runs between two instances of one call (isl: the source order's
    ``lex_lt`` relation ``before``) may
    run after the call when no instance of the group depends on it (it may
    read what the group wrote: the exact dataflow gives it a value no later
    instance of the group changes); one the group depends on (``deps``, the
    exact dependences) runs right before the call, in source order with the
    others moved, when it depends on no instance that it would pass (from
    the call's first instance on, except the others moved: a trmm's
    diagonal edge, which reads rows of the block before the call writes
    them)."""
    to_call = group_to_call(program, m)
    group = to_call.domain()
    rest = before.domain().union(before.range()).subtract(group)
    after_some = before.intersect_domain(group).intersect_range(rest).reverse() \
        .apply_range(to_call)                      # x -> calls with an instance before x
    before_some = before.intersect_domain(rest).intersect_range(group) \
        .apply_range(to_call)                      # x -> calls with an instance after x
    between = after_some.intersect(before_some)
    needed = deps.intersect_domain(rest).intersect_range(group).apply_range(to_call)
    bad = between.intersect(needed)
    if bad.is_empty():
        return None, None
    # those run right before the call, with every other instance of their
    # statements between the call's instances (a trmm's edge: the dependences
    # among them are chains of up to a block's rows); none may depend on an
    # instance it passes (from the call's first instance on) that stays
    stmts_of = isl.UnionSet.empty(bad.get_space().domain())
    for st in sets_of(bad.domain()):
        stmts_of = stmts_of.union(isl.UnionSet.from_set(isl.Set.universe(st.get_space())))
    moved = between.intersect_domain(stmts_of).coalesce()
    start = moved.apply_range(_first_instances(to_call, before))
    passed = start.apply_range(before).union(start).intersect(before.reverse())
    blocked = passed.intersect(deps.reverse()).subtract_range(moved.domain())
    if blocked.is_empty() and moved.is_single_valued():
        return None, moved
    # or the call runs at its last instance's place: then no instance
    # between may depend on an instance of the group (on one before it)
    depending = deps.intersect_domain(group).intersect_range(rest).reverse() \
        .apply_range(to_call)                      # x -> calls with an instance x depends on
    if between.intersect(depending).is_empty():
        return None, AT_LAST
    names: set[str] = set()
    bad.domain().foreach_set(lambda st: names.add(st.get_tuple_name()))
    return (f"statement(s) {', '.join(sorted(names))} run between the instances of one call "
            "and the call depends on them (it would run as one unit)"), None


def _first_instances(to_call: isl.UnionMap, before: isl.UnionMap) -> isl.UnionMap:
    """``{ call -> X }``: the instance of each call that runs first in the
    source order (``before``: its ``lex_lt`` relation)."""
    inst = to_call.reverse()
    return inst.subtract(inst.apply_range(before).intersect(inst))


def moved_order(order: isl.Schedule, stmts, reps: dict, matches: list[GemmMatch]
                ) -> isl.Schedule:
    """The source ``order`` of the contracted statements ``stmts`` as one
    band, when some instances run right before a call
    (``GemmMatch.moved``): with ``t`` the source order's time of an
    instance, a call runs at ``(t(first), 1, 0...)`` (``reps``: its first
    instance), a moved instance ``x`` at ``(t(first of its call), 0,
    t(x))`` and every other one at ``(t(x), 0, 0...)``.  (Composed as
    functions, ``isl_union_pw_multi_aff_pullback_union_pw_multi_aff``: as
    relations the times would carry existentials that make the dependence
    analysis slow.)"""
    times = isl.UnionPwMultiAff.from_union_map(order.get_map())
    n = maps_of(order.get_map())[0].dim(isl.dim_type.out)
    moved = None
    for m in matches:
        if m.moved is not None:
            f = reps[m.call].pullback_union_pw_multi_aff(
                isl.UnionPwMultiAff.from_union_map(m.moved.coalesce()))   # x -> first
            moved = f if moved is None else moved.union_add(f)
    out = None
    for s in stmts:
        dom = isl.UnionSet.from_set(s.domain)
        if s.kind == "intrinsic":
            part = times.pullback_union_pw_multi_aff(reps[s.name].intersect_domain(dom)) \
                .flat_range_product(_const(dom, [1] + [0] * n))
        else:
            mine = moved.intersect_domain(dom) if moved is not None else None
            rest = dom if mine is None else dom.subtract(mine.domain())
            part = times.intersect_domain(rest).flat_range_product(_const(rest, [0] * (n + 1)))
            if mine is not None and not mine.domain().is_empty():
                at = mine.domain()
                part = part.union_add(times.pullback_union_pw_multi_aff(mine)
                                      .flat_range_product(_const(at, [0]))
                                      .flat_range_product(times.intersect_domain(at)))
        out = part if out is None else out.union_add(part)
    return isl.Schedule.from_domain(out.domain()).insert_partial_schedule(
        isl.MultiUnionPwAff.from_union_pw_multi_aff(out))


def _const(dom: isl.UnionSet, values: list[int]) -> isl.UnionPwMultiAff:
    """``{ x -> [values] }`` on the instances ``dom``."""
    point = isl.Set.universe(isl.Space.set_alloc(CTX, 0, len(values)))
    for d, v in enumerate(values):
        point = point.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(CTX, v))
    return isl.UnionPwMultiAff.from_union_map(
        isl.UnionMap.from_domain_and_range(dom, isl.UnionSet.from_set(point)))


def dependences(contracted: Program, source: Program, matches: list[GemmMatch]):
    """The exact dependences of ``contracted`` (``contract(source,
    matches)``): computed from its own order, or, when some instances run
    right before a call (``GemmMatch.moved``, whose order's times are
    quasi-affine pieces that make isl's dataflow analysis slow), those of
    ``source`` projected onto the calls (``P^-1 . D . P``, ``P`` taking each
    instance of a group to its call, the others to themselves; the pairs
    within one call dropped): the same ordering constraints, since
    :func:`atomic_reason` proved that no dependence runs backwards."""
    if not any(m.moved is not None for m in matches):
        return compute(contracted)
    deps = compute(source)
    grouped, proj = None, None
    for m in matches:
        to_call = group_to_call(source, m)
        grouped = to_call.domain() if grouped is None else grouped.union(to_call.domain())
        proj = to_call if proj is None else proj.union(to_call)
    proj = proj.union(source.domain().subtract(grouped).identity())
    calls = isl.UnionSet.empty(proj.get_space().range())
    for s in contracted.statements:
        if s.kind == "intrinsic":
            calls = calls.union(isl.UnionSet.from_set(s.domain))
    same = calls.identity()

    def project(d: isl.UnionMap) -> isl.UnionMap:
        return d.apply_domain(proj).apply_range(proj).subtract(same).coalesce()
    return Dependences(flow=project(deps.flow), anti=project(deps.anti),
                       output=project(deps.output), reduction=project(deps.reduction))
