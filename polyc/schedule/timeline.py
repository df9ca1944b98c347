"""When and how a schedule runs each statement instance: time vectors,
wavefront steps, tile keys and parallel loops, as isl maps.

Takes an ``isl.Schedule`` (promotion's extension nodes are ignored: the
copies are not statements of the source) and a :class:`~polyc.ir.Program`;
returns ``isl.UnionMap`` s from statement instances to integer vectors, for
:mod:`polyc.picture` to enumerate at fixed sizes.  Queries only: nothing
here builds or changes a schedule.

* :func:`time_map`: each instance's time vector (``isl_schedule_get_map``:
  one dimension per band member and one per sequence or set node, padded);
  lexicographic order on it is the execution order;
* :func:`wavefront_map`: the same vectors cut before each statement's
  outermost parallel loop (the instances one parallel loop runs at once
  share a value);
* :func:`tile_map`: the values of the *tile loops* above each instance
  (band members ``T*floor(f(x)/T)``, as ``tile`` and ``split`` make them);
* :func:`parallel_bands`: the bands whose first members an
  ``parallel`` mark runs in parallel.
"""

from __future__ import annotations

import islpy as isl

from ..ir import Program, Statement
from ..isl_util import maps_of
from .legality import without_extensions
from .marks import parse_parallel_mark
from .tree import bands, path_of, statements_of, walk

_BAND = isl.schedule_node_type.band
_SEQ = (isl.schedule_node_type.sequence, isl.schedule_node_type.set)


def time_map(schedule: isl.Schedule) -> isl.UnionMap:
    """``{ S[i] -> [t0, t1, ...] }``: each instance's time vector (on the
    schedule's domain: the bands of a loop program's source order are
    defined on every point of the statements' spaces)."""
    schedule = without_extensions(schedule)
    return schedule.get_map().intersect_domain(schedule.get_domain())


def nodes_above(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    """The ancestors of ``node``, the root first."""
    out = []
    while node.has_parent():
        node = node.parent()
        out.append(node)
    return out[::-1]


def time_prefix_length(node: isl.ScheduleNode) -> int:
    """How many dimensions of :func:`time_map` the nodes above ``node``
    contribute (one per band member, one per sequence or set node)."""
    return sum(a.band_n_member() if a.get_type() == _BAND else 1
               for a in nodes_above(node) if a.get_type() == _BAND or a.get_type() in _SEQ)


def parallel_bands(schedule: isl.Schedule) -> list[tuple[isl.ScheduleNode, int]]:
    """``(band, k)`` for the outermost band on every path below a parallel
    mark (``parallel``, ``parallel_collapse<k>``): its members
    ``0 .. k-1`` run in parallel."""
    out = []
    for n in walk(schedule.get_root()):
        if n.get_type() != isl.schedule_node_type.mark or not n.n_children():
            continue
        k = parse_parallel_mark(n.mark_get_id().get_name())
        todo = [n.child(0)] if k else []
        while todo:
            c = todo.pop()
            if c.get_type() == _BAND:
                out.append((c, min(k, c.band_n_member())))
            else:
                todo += [c.child(i) for i in range(c.n_children())]
    return out


def wavefront_map(schedule: isl.Schedule, time: isl.UnionMap) -> isl.UnionMap:
    """``time`` (a restriction of :func:`time_map`) with each statement's
    vectors cut before its outermost parallel loop: equal values run in
    one step of that loop.  Statements under no parallel loop keep their
    whole vector (one instance per step)."""
    keep: dict[str, int] = {}
    for node, _ in parallel_bands(schedule):
        depth = time_prefix_length(node)
        for name in statements_of(node):
            keep[name] = min(keep.get(name, depth), depth)
    out = isl.UnionMap.empty(time.get_space())
    for m in maps_of(time):
        n = m.dim(isl.dim_type.out)
        k = keep.get(m.get_tuple_name(isl.dim_type.in_), n)
        out = out.union(isl.UnionMap.from_map(m.project_out(isl.dim_type.out, k, n - k)))
    return out


def member_pw_aff(band: isl.ScheduleNode, j: int, stmt: Statement) -> isl.PwAff:
    """Band member ``j``'s schedule of the instances of ``stmt``."""
    upa = band.band_get_partial_schedule().get_union_pw_aff(j)
    space = isl.Space.from_domain(stmt.domain.get_space()).add_dims(isl.dim_type.out, 1)
    return upa.extract_pw_aff(space)


def iterators_used(pa: isl.PwAff, n: int) -> set[int]:
    """The input dimensions (of ``n``) the values of ``pa`` depend on,
    directly or through an integer division; its domain is ignored."""
    used: set[int] = set()
    for _, aff in pa.get_pieces():
        used |= {j for j in range(n)
                 if not aff.get_coefficient_val(isl.dim_type.in_, j).is_zero()}
        for k in range(aff.dim(isl.dim_type.div)):
            if not aff.get_coefficient_val(isl.dim_type.div, k).is_zero():
                div = aff.get_div(k)
                used |= {j for j in range(n)
                         if not div.get_coefficient_val(isl.dim_type.in_, j).is_zero()}
    return used


def is_tile_member(pa: isl.PwAff, n: int) -> bool:
    """A tile loop ``T*floor(f(x)/T)``: integer divisions of the iterators
    and no direct coefficient on any (a point loop ``x mod T`` keeps ``x``'s;
    the same test names a member ``m_tile``, see
    :func:`polyc.schedule.tree.default_member_names`)."""
    pieces = pa.get_pieces()
    return bool(pieces) and all(
        aff.dim(isl.dim_type.div) > 0 and all(
            aff.get_coefficient_val(isl.dim_type.in_, j).is_zero() for j in range(n))
        for _, aff in pieces) and bool(iterators_used(pa, n))


def tile_map(schedule: isl.Schedule, program: Program, statements,
             within: set[tuple[int, ...]] | None = None) -> isl.UnionMap | None:
    """``{ S[i] -> [tile loop values] }`` for ``statements`` (names): the
    tile members of the bands above each, outer first; only bands whose
    tree path is in ``within`` when given.  ``None`` when no statement has
    a tile loop.  Instances with equal values are in one tile."""
    keys = None
    for name in sorted(statements):
        s = program.statement(name)
        members = []
        for band in bands(schedule):
            if name not in statements_of(band):
                continue
            if within is not None and path_of(band) not in within:
                continue
            for j in range(band.band_n_member()):
                pa = member_pw_aff(band, j, s)
                if is_tile_member(pa, len(s.iterators)):
                    members.append(isl.UnionMap.from_map(isl.Map.from_pw_aff(pa)))
        if not members:
            continue
        kmap = members[0]
        for m in members[1:]:
            kmap = kmap.flat_range_product(m)
        keys = kmap if keys is None else keys.union(kmap)
    return keys
