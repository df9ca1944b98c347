"""Tensor-core calls in a GPU schedule: the statements a program was
contracted to (:func:`polyc.gpu_pipeline.tensor_cores`, each a call of the
tensor-core GEMM over its batch loops), the bands isl fused around them
distributed so that each call gets a launch of its own
(:func:`separate_calls`), and the extents of the GEMM's roles, which size a
tensor-core launch's grid (:meth:`polyc.schedule.gpu_mapping.Mapper.tensor_core`)."""

from __future__ import annotations

import islpy as isl

from .. import expr as E
from ..ir import Program
from ..isl_util import pw_aff_to_expr
from .tree import path_of, statements_of, walk

_T = isl.schedule_node_type


def calls_below(node: isl.ScheduleNode, program: Program) -> list[str]:
    """The statements below ``node`` tensorized onto the tensor-core GEMM."""
    return [s for s in statements_of(node) if program.statement(s).kind == "intrinsic"]


def separate_calls(schedule: isl.Schedule, program: Program,
                   deps: isl.UnionMap) -> isl.Schedule:
    """``schedule`` with every band in which isl fused tensor-core calls with
    other statements distributed into a sequence of two copies of it
    (:func:`calls_apart`), outermost first, so that each call gets a
    launch of its own; a band the dependences keep together stays (the
    mapping then runs its outer loop on the host)."""
    kept: set = set()
    while True:
        for node in walk(schedule.get_root()):
            if node.get_type() != _T.band or path_of(node) in kept:
                continue
            calls = calls_below(node, program)
            if not calls or len(calls) == len(statements_of(node)):
                continue
            apart = calls_apart(node, calls, program, deps)
            if apart is None:
                kept.add(path_of(node))
                continue
            schedule = apart.get_schedule()
            break
        else:
            return schedule


def calls_apart(band: isl.ScheduleNode, calls: list[str], program: Program,
                deps: isl.UnionMap) -> isl.ScheduleNode | None:
    """``band`` distributed into a sequence of two copies of it, the
    ``calls``' copy first (``isl_schedule_node_order_before``) when no
    dependence runs from another statement to a call at the same
    iterations of the loops above, else last (``order_after``) when none
    runs from a call to another statement there (a producer of the call's
    operands); ``None`` when dependences run both ways."""
    dom = band.get_domain()
    mine = isl.UnionSet.empty(dom.get_space())
    for name in calls:
        mine = mine.union(isl.UnionSet.from_set(program.statement(name).domain))
    mine = mine.intersect(dom)
    rest = dom.subtract(mine)
    prefix = band.get_prefix_schedule_union_map().intersect_domain(dom)
    deps = deps.intersect(prefix.apply_range(prefix.reverse()))
    if deps.intersect_domain(rest).intersect_range(mine).is_empty():
        return band.order_before(mine)
    if deps.intersect_domain(mine).intersect_range(rest).is_empty():
        return band.order_after(mine)
    return None


def group_extent(program: Program, m, group: tuple[str, ...]) -> E.Expr:
    """The product of the extents of a GEMM role's digits (``m.extents``:
    a tensor's extent or an expression of the sizes)."""
    out: E.Expr | None = None
    for it, tensor, d in m.extents:
        if it in group:
            ext = (pw_aff_to_expr(program.tensor(tensor).shape[d], program.context)
                   if tensor is not None else d)
            out = ext if out is None else E.Binary("*", out, ext)
    assert out is not None, group
    return out
