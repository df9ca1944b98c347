"""Legality tests in schedule time, for :mod:`polyc.schedule.legality`.

Each maps the dependence pairs into schedule time (source time, sink time)
and tests them there, linear in the dependences, instead of relating every
pair of instances the schedule orders (quadratic).  Their answers are pure
functions of isl text and are remembered by it (bounded dicts): the steps
of a recipe's replay, and the tuner's candidates that share steps, check
the same statements' schedules again and again.  Takes isl objects,
returns booleans (``None``: the times do not share one space, so the exact
test must decide) or a digest.
"""

from __future__ import annotations

import hashlib

import islpy as isl

from ..isl_util import maps_of

#: bound of each remembered-answer dict (cleared when full)
MEMO_MAX = 50_000


def respects(smap: isl.UnionMap, dep: isl.UnionMap) -> bool | None:
    """Whether every pair of ``dep`` runs source before sink under the
    flattened schedule ``smap``, decided on the dependence pairs alone: each
    pair mapped to its (source time, sink time) must be lexicographically
    increasing (``isl_map_lex_lt`` of the time space).  ``None`` when the
    times do not share one space (the exact, quadratic test decides).

    Decided per map of ``dep`` (one pair of statements) from the schedules
    of its two statements, and remembered by their text
    (:data:`_RESPECTED`): the steps of a recipe, and candidates that share
    steps, change the schedules of a few statements at a time."""
    times = {m.get_tuple_name(isl.dim_type.in_): m for m in maps_of(smap)}
    texts: dict[str, str] = {}

    def text(name: str) -> str:
        if name not in texts:
            texts[name] = times[name].to_str()
        return texts[name]
    for d in maps_of(dep):
        src, dst = d.get_tuple_name(isl.dim_type.in_), d.get_tuple_name(isl.dim_type.out)
        if src not in times or dst not in times:
            return None
        key = (d.to_str(), text(src), text(dst))
        ok = _RESPECTED.get(key)
        if ok is None:
            ok = _respects_map(d, times[src], times[dst])
            if len(_RESPECTED) >= MEMO_MAX:
                _RESPECTED.clear()
            _RESPECTED[key] = ok
        if ok is not True:
            return ok
    return True


#: (dependence map, source schedule, sink schedule) as isl text -> the
#: answer of :func:`_respects_map` (a pure function of them); bounded.
_RESPECTED: dict[tuple[str, str, str], bool | str] = {}


def _respects_map(dep: isl.Map, src_time: isl.Map, dst_time: isl.Map) -> bool | None:
    """:func:`respects` of one dependence map, its source statement's
    schedule ``src_time`` and its sink's ``dst_time``."""
    timed = isl.UnionMap.from_map(dep).apply_domain(isl.UnionMap.from_map(src_time)) \
        .apply_range(isl.UnionMap.from_map(dst_time))
    for m in maps_of(timed):
        space = m.get_space()
        n = space.dim(isl.dim_type.in_)
        if n != space.dim(isl.dim_type.out):
            return None
        lt = isl.Map.lex_lt(isl.Space.set_alloc(m.get_ctx(), 0, n))
        lt = lt.set_tuple_id(isl.dim_type.in_, space.get_tuple_id(isl.dim_type.in_)) \
            if space.has_tuple_id(isl.dim_type.in_) else lt
        lt = lt.set_tuple_id(isl.dim_type.out, space.get_tuple_id(isl.dim_type.out)) \
            if space.has_tuple_id(isl.dim_type.out) else lt
        if not m.subtract(lt).is_empty():
            return False
    return True


def order_key(schedule: isl.Schedule) -> bytes:
    """A digest of ``schedule``'s tree text with its mark nodes deleted."""
    def unmark(node: isl.ScheduleNode) -> isl.ScheduleNode:
        while node.get_type() == isl.schedule_node_type.mark:
            node = node.delete()
        return node
    bare = schedule.get_root().map_descendant_bottom_up(unmark).get_schedule()
    return hashlib.sha256(bare.to_str().encode()).digest()


#: (schedule up to a member, dependences) as isl text -> :func:`carries_in_time`.
_CARRIES: dict[tuple[str, str], bool | None] = {}


def carries_in_time(within: isl.UnionMap, time: isl.UnionMap) -> bool | None:
    """Whether a pair of ``within`` is equal on every dimension of ``time``
    but the last, and differs on the last; ``None`` when the times of the
    pairs do not share one space.  Remembered by the isl text of both."""
    key = (time.to_str(), within.to_str())
    if key not in _CARRIES:
        if len(_CARRIES) >= MEMO_MAX:
            _CARRIES.clear()
        _CARRIES[key] = _carries_in_time(within, time)
    return _CARRIES[key]


def _carries_in_time(within: isl.UnionMap, time: isl.UnionMap,
                     backwards: bool = False) -> bool | None:
    """Whether a pair of ``within``, mapped into ``time``, is equal on every
    dimension but the last and differs on the last (``backwards``: its sink
    comes before its source on the last); ``None`` when the times of the
    pairs do not share one space."""
    for m in maps_of(within.apply_domain(time).apply_range(time)):
        space = m.get_space()
        n = space.dim(isl.dim_type.in_)
        if n != space.dim(isl.dim_type.out) or n == 0:
            return None
        same = isl.Map.universe(space)
        for i in range(n - 1):
            same = same.equate(isl.dim_type.in_, i, isl.dim_type.out, i)
        if backwards:       # sink - source <= -1 on the last dimension
            differ = same.order_gt(isl.dim_type.in_, n - 1, isl.dim_type.out, n - 1)
        else:
            differ = same.subtract(same.equate(isl.dim_type.in_, n - 1,
                                               isl.dim_type.out, n - 1))
        if not m.intersect(differ).is_empty():
            return True
    return False


def negative_in_time(within: isl.UnionMap, time: isl.UnionMap) -> bool | None:
    """Whether a pair of ``within`` is equal on every dimension of ``time``
    but the last and has a negative distance (sink before source) on the
    last; ``None`` when the times of the pairs do not share one space.
    Remembered by the isl text of both."""
    key = (time.to_str(), within.to_str())
    if key not in _NEGATIVE:
        if len(_NEGATIVE) >= MEMO_MAX:
            _NEGATIVE.clear()
        _NEGATIVE[key] = _carries_in_time(within, time, backwards=True)
    return _NEGATIVE[key]


#: (schedule up to a member, dependences) as isl text -> :func:`negative_in_time`.
_NEGATIVE: dict[tuple[str, str], bool | None] = {}


def union(maps) -> isl.UnionMap:
    maps = list(maps)
    out = maps[0]
    for m in maps[1:]:
        out = out.union(m)
    return out
