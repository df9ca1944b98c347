"""Marks in the schedule tree that the code generator turns into pragmas.

Takes and returns an ``isl.Schedule``.  A mark node ``omp_parallel`` above a
band means: its outermost loop runs as ``#pragma omp parallel for``; a mark
``omp_simd`` above a one-member band means ``#pragma omp simd``.  Marks are
placed only on coincident band members (members that carry no dependence,
because the scheduler received every dependence as a coincidence constraint),
so they are legal by construction; the loop structure is unchanged
(structural: the statement order is not modified).  A mark
``omp_simd_reduction`` above a band that scans only the reduction iterators
of a single reduction update asks for an accumulator in a register and
``#pragma omp simd reduction(op: acc)``: reordering the terms of a reduction
is allowed by the TC semantics (reductions are associative and commutative).
"""

from __future__ import annotations

import islpy as isl

PARALLEL = "omp_parallel"
SIMD = "omp_simd"
SIMD_REDUCTION = "omp_simd_reduction"
#: At most this many coincident loops are collapsed into one parallel loop.
MAX_COLLAPSE = 2

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark


def coincident_members(band: isl.ScheduleNode) -> list[bool]:
    return [bool(band.band_member_get_coincident(i)) for i in range(band.band_n_member())]


def _is_mark(node: isl.ScheduleNode, name: str) -> bool:
    return node.get_type() == _MARK and node.mark_get_id().get_name() == name


def parallel_mark_name(collapse: int) -> str:
    """``omp_parallel`` for one loop, ``omp_parallel_collapse<k>`` for ``k``
    perfectly nested coincident loops run as one parallel iteration space."""
    return PARALLEL if collapse == 1 else f"{PARALLEL}_collapse{collapse}"


def parse_parallel_mark(name: str) -> int:
    """The collapse depth of a parallel mark name, 0 when it is not one."""
    if name == PARALLEL:
        return 1
    if name.startswith(PARALLEL + "_collapse"):
        return int(name[len(PARALLEL + "_collapse"):])
    return 0


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
    """Mark the outermost coincident loop of every nest ``omp_parallel`` (with
    the next coincident member of the same band, when there is one, collapsed
    into it: ``omp_parallel_collapse2``, so that a nest with few outer tiles
    still has work for every thread).

    Before (matmul after isl scheduling)::

        for m: for n: for k: S0(m, n, k)          # m, n coincident

    After::

        #pragma omp parallel for
        for m: for n: for k: S0(m, n, k)
    """
    return _mark_outermost(schedule.get_root()).get_schedule()


def parallel_depths(schedule: isl.Schedule) -> int:
    """Number of ``omp_parallel`` marks in ``schedule`` (for tests/explain)."""
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
    ``omp_simd``; returns a node at the position of ``band``.  The caller has
    checked that the member is coincident and that no band lies below."""
    n = band.band_n_member()
    if n == 1:
        return band.insert_mark(isl.Id(SIMD))
    return band.band_split(n - 1).child(0).insert_mark(isl.Id(SIMD)).parent()
