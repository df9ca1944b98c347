"""The automatic schedule of a tensorized program as a recipe of the source
program: the tree isl's scheduler gave, each group's statements below its
own loops, then ``tensorize`` steps, then the steps of polyc's band
optimisation (:mod:`polyc.schedule.auto`).

The automatic pipeline schedules a program whose groups are each one call
statement (:func:`polyc.schedule.tensorize_auto.contract`: the scheduler
and :mod:`~polyc.schedule.auto` see a call as one unit), then shows the
tree of the source statements with a ``tensorize`` mark per group
(:func:`~polyc.schedule.tensorize_auto.expand`).  :func:`source_schedule`
turns that into a :class:`~polyc.schedule.language.Schedule` of the source
program whose recipe has steps a tuner can perturb (``tile`` sizes,
``reorder``, marks; :mod:`polyc.tune.autorecipe`):

1. the start tree: isl's tree of the contracted program pulled back onto
   the source statements, each group's loops below its call's leaf,
   unmarked (``expand(..., mark=False)``);
2. one ``tensorize(loop, "gemm", rows=...)`` step per group on the group's
   outermost loop: the schedule language's own transformation, which
   matches the group again and checks the loops above;
3. the band optimisation's steps, each loop argument resolved in the
   contracted schedule at that step and named again in the source one (a
   call's instances are at the same place in both trees: the group's loops
   lie below its leaf), a call's name in ``distribute``'s groups replaced by
   its group's statements.

Every step is checked against the source program's exact dependences as it
is applied (replaying the recipe checks them again).  The result is kept
only when its tree is the very tree the code was generated from (and, the
pipeline checks, lowers to the same loop nest); otherwise
(a step that does not carry over, such as one that moves loops into the
leaves where the group's loops now are) ``None`` is returned and the kernel
shows the marked tree itself as its recipe's start, with no steps.
"""

from __future__ import annotations

import logging

import islpy as isl

from ..errors import PolycError
from ..ir import Program
from .auto import loop_spec
from .language import Schedule
from .recipe import decode_args
from .tensorize import group_statements
from .tensorize_auto import expand
from .tree import node_at, path_of, statements_of, walk, without_names

log = logging.getLogger(__name__)

#: Transformations whose first argument is a list of loops (the others take one).
_LOOP_LISTS = {"reorder", "tile"}


def source_schedule(auto: Schedule, source: Program, matches, parallel: bool,
                    code_tree: isl.Schedule, deps) -> Schedule | None:
    """The automatic schedule of ``source`` as a recipe with steps (module
    docstring), or ``None`` when its replay does not rebuild ``code_tree``.

    ``auto``: the band optimisation of the contracted program (its
    ``origin`` is isl's tree, its ``recipe`` the steps); ``source``: the
    program of the source statements the kernel shows; ``matches``: the
    groups (``GemmMatch``); ``code_tree``: the marked tree of ``source``
    the code was generated from (the replayed tree must be the same,
    :func:`same_tree`; the pipeline also compares the loop nests,
    :func:`polyc.pipeline.lower`); ``deps``: the dependences of
    ``source``."""
    try:
        s = _build(auto, source, matches, parallel, deps)
    except (PolycError, isl.Error) as e:
        log.debug("automatic recipe of %s: a step does not carry over to the source "
                  "program (%s); its recipe starts from the marked tree", source.name, e)
        return None
    if not same_tree(s.isl, code_tree):
        log.debug("automatic recipe of %s: the replayed tree differs from the code's; its "
                  "recipe starts from the marked tree", source.name)
        return None
    return s


def _build(auto: Schedule, source: Program, matches, parallel: bool, deps) -> Schedule:
    start = isl.Schedule.read_from_str(auto.isl.get_ctx(), auto.origin)
    bare = expand(start, source, matches, parallel, mark=False)
    marked = expand(start, source, matches, parallel)
    s = Schedule.from_isl(source, bare, deps)
    s.check("the automatic schedule's start tree")
    for m in matches:
        path = _group_band(start, s.isl, m)
        kwargs = {"rows": m.block} if m.block else {}
        s = s.apply("tensorize", loop_spec(s, path, 0), "gemm", **kwargs)
    if not same_tree(s.isl, marked):
        # a group the language matches otherwise (a split triangle's edges):
        # start from the marked tree
        s = Schedule.from_isl(source, marked, deps)
    calls = {m.call: list(group_statements(m)) for m in matches}
    c = Schedule(auto.base, auto.deps, start, start="isl", origin=auto.origin)
    for step in auto.recipe:
        op = step["op"]
        args, kwargs = decode_args(step.get("args", []), step.get("kwargs", {}))
        if not args:
            raise PolycError(f"step {op} names no loop")
        if op in _LOOP_LISTS and isinstance(args[0], list) and args[0] \
                and not isinstance(args[0][0], str):
            first = [_carried(c, s, lp) for lp in args[0]]
        else:
            first = _carried(c, s, args[0])
        rest = args[1:]
        if op == "distribute":
            rest = [_statements(g, calls) for g in rest]
        c = c.apply_unchecked(op, *args, **kwargs)
        s = s.apply(op, first, *rest, **kwargs)
    return s


def same_tree(a: isl.Schedule, b: isl.Schedule) -> bool:
    """Whether trees ``a`` and ``b`` schedule alike, node by node: the same
    node kinds and marks (``loops:`` name marks, which code generation
    ignores, skipped), equal domains, filters equal on the instances that
    reach them, and bands with the same
    flags whose partial schedules are equal on the instances that reach
    them (``isl_union_map_is_equal``; a piece's redundant constraint does
    not count)."""
    return _same(without_names(a).get_root(), without_names(b).get_root())


def _same(x: isl.ScheduleNode, y: isl.ScheduleNode) -> bool:
    kind = x.get_type()
    if kind != y.get_type() or x.n_children() != y.n_children():
        return False
    T = isl.schedule_node_type
    if kind == T.domain and not x.domain_get_domain().is_equal(y.domain_get_domain()):
        return False
    if kind == T.filter:
        dom = x.get_domain()        # (the instances reaching the filter node)
        if not x.filter_get_filter().intersect(dom).is_equal(
                y.filter_get_filter().intersect(y.get_domain())):
            return False
    if kind == T.mark and x.mark_get_id().get_name() != y.mark_get_id().get_name():
        return False
    if kind == T.band:
        n = x.band_n_member()
        if n != y.band_n_member() or x.band_get_permutable() != y.band_get_permutable():
            return False
        if any(x.band_member_get_coincident(i) != y.band_member_get_coincident(i)
               for i in range(n)):
            return False
        dom = x.get_domain()
        fx = isl.UnionMap.from_multi_union_pw_aff(x.band_get_partial_schedule())
        fy = isl.UnionMap.from_multi_union_pw_aff(y.band_get_partial_schedule())
        if not fx.intersect_domain(dom).is_equal(fy.intersect_domain(dom)):
            return False
    if kind in (T.extension, T.guard, T.context, T.expansion):
        return False        # (none in an automatic tree: not compared)
    return all(_same(x.child(i), y.child(i)) for i in range(x.n_children()))


def _carried(c: Schedule, s: Schedule, loop):
    """``loop`` of the contracted schedule ``c`` as ``s`` names the loop
    at the same place."""
    lp = c.resolve(loop)
    return loop_spec(s, lp.path, lp.member)


def _statements(group, calls: dict):
    """A ``distribute`` group with each call replaced by its statements."""
    names = [group] if isinstance(group, str) else list(group)
    out = [x for n in names for x in calls.get(n, [n])]
    return out[0] if isinstance(group, str) and len(out) == 1 else out


def _group_band(start: isl.Schedule, schedule: isl.Schedule, m) -> tuple:
    """The path in ``schedule`` (``start`` with the groups' loops below
    their calls' leaves) of the outermost band of ``m``'s own loops: the
    first band at or below the leaf of ``m``'s call in ``start`` that runs
    ``m``'s update."""
    for n in walk(start.get_root()):
        if n.get_type() == isl.schedule_node_type.leaf and m.call in statements_of(n):
            break
    else:
        raise PolycError(f"the call of {m.statement} has no leaf")
    for n in walk(node_at(schedule, path_of(n))):
        if n.get_type() == isl.schedule_node_type.band and m.statement in statements_of(n):
            return path_of(n)
    raise PolycError(f"the group of {m.statement} has no band of its own")
