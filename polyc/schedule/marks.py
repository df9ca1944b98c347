"""Marks in the schedule tree that say how a loop runs: in parallel, as
vector lanes, as a vectorised reduction.

Takes and returns an ``isl.Schedule``.  The names are target-neutral: each
backend decides what they become.  A mark node ``parallel`` above a band
means: its outermost loop runs in parallel (the C backend prints
``#pragma omp parallel for``); a mark ``vector`` above a one-member band
means its iterations run as vector lanes (``#pragma omp simd``).  Marks are
placed only on coincident band members (members that carry no dependence,
because the scheduler received every dependence as a coincidence constraint),
so they are legal by construction; the loop structure is unchanged
(structural: the statement order is not modified).  A mark
``vector_reduction`` above a band that scans only the reduction iterators
of a single reduction update asks for an accumulator in a register and
``#pragma omp simd reduction(op: acc)``: reordering the terms of a reduction
is allowed by the TC semantics (reductions are associative and commutative).
"""

from __future__ import annotations

import islpy as isl

PARALLEL = "parallel"
SIMD = "vector"
SIMD_REDUCTION = "vector_reduction"
#: The names these marks had before they were target-neutral (in schedule
#: texts saved then): read by :func:`current_names`.
LEGACY = {"omp_parallel": PARALLEL, "omp_simd": SIMD, "omp_simd_reduction": SIMD_REDUCTION}
#: At most this many coincident loops are collapsed into one parallel loop.
MAX_COLLAPSE = 2

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark


def coincident_members(band: isl.ScheduleNode) -> list[bool]:
    return [bool(band.band_member_get_coincident(i)) for i in range(band.band_n_member())]


def _is_mark(node: isl.ScheduleNode, name: str) -> bool:
    return node.get_type() == _MARK and node.mark_get_id().get_name() == name


def parallel_mark_name(collapse: int) -> str:
    """``parallel`` for one loop, ``parallel_collapse<k>`` for ``k``
    perfectly nested coincident loops run as one parallel iteration space."""
    return PARALLEL if collapse == 1 else f"{PARALLEL}_collapse{collapse}"


def parse_parallel_mark(name: str) -> int:
    """The collapse depth of a parallel mark name, 0 when it is not one."""
    if name == PARALLEL:
        return 1
    if name.startswith(PARALLEL + "_collapse"):
        return int(name[len(PARALLEL + "_collapse"):])
    return 0


def current_name(name: str) -> str:
    """``name`` with a legacy ``omp_`` mark name replaced by its current one
    (``parallel_collapse2`` -> ``parallel_collapse2``)."""
    for old, new in LEGACY.items():
        if name == old or name.startswith(old + "_collapse"):
            return new + name[len(old):]
    return name


def current_names(schedule: isl.Schedule) -> isl.Schedule:
    """``schedule`` with every legacy mark name replaced (:func:`current_name`)."""
    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == _MARK:
            name = node.mark_get_id().get_name()
            if current_name(name) != name:
                return node.delete().insert_mark(isl.Id(current_name(name)))
        return node
    return schedule.map_schedule_node_bottom_up(fn)


def _mark_outermost(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """Insert a parallel mark above the outermost coincident members on every
    root-to-leaf path; returns a node at the same position as ``node``."""
    if node.get_type() == _BAND:
        coinc = coincident_members(node)
        if any(coinc):
            p = coinc.index(True)
            if p > 0:
                node = node.band_split(p).child(0)
            run = 0
            while run < len(coinc) - p and coinc[p + run]:
                run += 1
            node = node.insert_mark(isl.Id(parallel_mark_name(min(run, MAX_COLLAPSE))))
            return node.parent() if p > 0 else node
    for i in range(node.n_children()):
        node = _mark_outermost(node.child(i)).parent()
    return node


def mark_parallel(schedule: isl.Schedule) -> isl.Schedule:
    """Mark the outermost coincident loop of every nest ``parallel`` (with
    the next coincident member of the same band, when there is one, collapsed
    into it: ``parallel_collapse2``, so that a nest with few outer tiles
    still has work for every thread).

    Before (matmul after isl scheduling)::

        for m: for n: for k: S0(m, n, k)          # m, n coincident

    After::

        #pragma omp parallel for
        for m: for n: for k: S0(m, n, k)
    """
    return _mark_outermost(schedule.get_root()).get_schedule()


def parallel_depths(schedule: isl.Schedule) -> int:
    """Number of ``parallel`` marks in ``schedule`` (for tests/explain)."""
    count = [0]

    def visit(n):
        if n.get_type() == _MARK and parse_parallel_mark(n.mark_get_id().get_name()):
            count[0] += 1
        return True
    schedule.get_root().foreach_descendant_top_down(visit)
    return count[0]


def has_band_below(node: isl.ScheduleNode) -> bool:
    """True when the subtree strictly below ``node`` contains a band."""
    found = [False]

    def visit(n):
        if n.get_type() == _BAND:
            found[0] = True
            return False
        return True
    for i in range(node.n_children()):
        node.child(i).foreach_descendant_top_down(visit)
    return found[0]


def mark_simd_innermost(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """Split off the last member of ``band`` (if it has several) and mark it
    ``vector``; returns a node at the position of ``band``.  The caller has
    checked that the member is coincident and that no band lies below."""
    n = band.band_n_member()
    if n == 1:
        return band.insert_mark(isl.Id(SIMD))
    return band.band_split(n - 1).child(0).insert_mark(isl.Id(SIMD)).parent()
