"""Dependence records of schedule explanations (:mod:`polyc.schedule.explain`,
:mod:`polyc.schedule.explain_fusion`): for one dependence relation, its
kind, tensor, source and sink statements, distance vectors and an example
instance pair, as a JSON-serialisable dict, and the sentence that names it.
Takes isl maps and a :class:`~polyc.schedule.language.Schedule`'s
``program`` / ``deps``; computes everything with isl.
"""

from __future__ import annotations

import islpy as isl

from ..isl_util import maps_of
from . import legality

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_LEAF = isl.schedule_node_type.leaf

#: At most this many distance vectors are listed for one dependence; more
#: (or infinitely many) make it "non-uniform".
MAX_DISTANCES = 8


def distances(m: isl.Map, program) -> list[tuple[int, ...]] | None:
    """The distance vectors ``sink - source`` of dependence ``m`` over all
    parameter values, when there are at most :data:`MAX_DISTANCES` of them
    (one: a uniform dependence, :func:`legality.uniform_distance`); ``None``
    when they vary (or the two statements have different iterators)."""
    src = m.get_tuple_name(isl.dim_type.in_)
    dst = m.get_tuple_name(isl.dim_type.out)
    if src == dst:
        one = legality.uniform_distance(m)
        if one is not None:
            return [one]
    else:
        try:
            same = program.statement(src).iterators == program.statement(dst).iterators
        except KeyError:
            same = False
        if not same:
            return None
        m = m.set_tuple_name(isl.dim_type.out, src)
    d = m.deltas()
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    if d.is_empty() or not d.is_bounded():
        return None
    n = d.dim(isl.dim_type.set)
    box = 1
    for i in range(n):
        box *= int(d.dim_max_val(i).to_python()) - int(d.dim_min_val(i).to_python()) + 1
    if box > 8 * MAX_DISTANCES:      # too many to list: do not enumerate them
        return None
    pts: list[tuple[int, ...]] = []

    def add(pt):
        if len(pts) <= MAX_DISTANCES:
            pts.append(tuple(int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
                             for i in range(n)))
    d.foreach_point(add)
    if not pts or len(pts) > MAX_DISTANCES:
        return None
    return sorted(pts)


def _dep_record(kind: str, m: isl.Map, schedule) -> dict:
    src = m.get_tuple_name(isl.dim_type.in_)
    dst = m.get_tuple_name(isl.dim_type.out)
    red = isl.UnionMap.from_map(m).is_subset(schedule.deps.reduction)
    dist = distances(m, schedule.program)
    return {"kind": kind, "tensor": legality.dependence_tensor(schedule.program, m, kind),
            "source": src, "sink": dst,
            "distance": list(dist[0]) if dist and len(dist) == 1 else None,
            "distances": [list(d) for d in dist] if dist else None,
            "uniform": bool(dist) and len(dist) == 1,
            "reduction": bool(red),
            "example": legality.describe_instance_pair(m)}


def _dep_phrase(d: dict, example: bool = True) -> str:
    extra = []
    if d["distances"]:
        extra.append(("distance " if len(d["distances"]) == 1 else "distances ")
                     + ", ".join(_vec(v) for v in d["distances"]))
    if d["reduction"]:
        extra.append("a reduction")
    text = (f"the {d['kind']} dependence on {d['tensor']} from {d['source']} to {d['sink']}"
            + (f" ({'; '.join(extra)})" if extra else ""))
    return text + (f", e.g. {d['example']}" if example else "")


def _vec(v) -> str:
    return "(" + ", ".join(str(x) for x in v) + ")"


def _carried(band: isl.ScheduleNode, member: int, schedule) -> list[dict]:
    out = []
    for kind, c in legality.carried_dependences(band, member, schedule.deps).items():
        for m in sorted(maps_of(c), key=str):
            out.append(_dep_record(kind, m, schedule))
    kinds = {"flow": 0, "anti": 1, "output": 2}
    out.sort(key=lambda d: (d["reduction"], kinds[d["kind"]], d["tensor"], d["source"],
                            d["sink"]))
    return out
