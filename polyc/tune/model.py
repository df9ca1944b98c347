"""The analytical cost model that ranks candidates before anything is
compiled.

For each statement under a tuned band, the loops of a candidate are, outer
to inner: the tile loops (in the band's order), the point loops, then the
statement's iterators that no band member scans (loops below the band, in
source order).  A statement under nested tuned bands is costed once, under
the innermost, with each band's tile and point loops in turn, outer band
first.  The model estimates, in seconds at the tuning sizes:

* **memory traffic per cache level** by reuse distance: for a cache of
  capacity ``C``, the smallest traffic ``outer iterations x footprint`` over
  the loop depths whose inner footprint fits in ``FILL * C``.  A footprint is
  the rectangular box an access touches while the inner loops run: per
  tensor dimension ``1 + sum |coefficient| * (extent - 1)`` (the access
  relation's affine coefficients, read with isl), the innermost dimension
  rounded up to cache lines; a non-affine access (a gather) counts its whole
  tensor.  L1, L2 and L3 sizes are this machine's (:func:`polyc.machine.cache_sizes`);
  the bandwidths between levels are nominal (:data:`BANDWIDTH`).
* **compute**: instances x arithmetic operations over the vector lanes the
  innermost loop can use (every access that moves with it has stride 1 in
  its last dimension; a reduction over it needs reassociation and a simd
  mark) and the lanes its trip count fills.
* **loop overhead**: a cost per entry of the innermost loop and per
  iteration, the latter divided by the unroll factor.
* **parallelism**: a parallel outermost loop divides compute and private
  cache traffic by the cores it keeps busy (``trip / ceil(trip / cores)``),
  shared L3 and DRAM traffic by at most :data:`SHARED_SCALING`.

A statement's time is ``max(compute, memory) + OVERLAP * min(...)`` plus the
loop overhead; a candidate's is the sum over statements and tuning sizes.
The figures are relative: they rank candidates, they do not predict wall
time.  The model follows the tile-footprint and reuse-distance reasoning of
Wolf & Lam (PLDI 1991) and the capacity test of PPCG's/Pluto's tile size
selection, much simplified.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from functools import lru_cache

from ..machine import cache_sizes
from .space import BandInfo, BandKnobs, Knobs, StatementInfo

#: Nominal clock (Hz) and FMA ports: only ratios matter.
FREQ = 3.0e9
FMA_PORTS = 2
#: Bytes per second into L1 (from L2), into L2 (from L3), into L3 (from DRAM).
BANDWIDTH = {1: 64 * FREQ, 2: 24 * FREQ, 3: 6 * FREQ}
#: A footprint counts as cache-resident below this fraction of the capacity.
FILL = 0.6
LINE = 64
OVERLAP = 0.25
#: Shared levels (L3, DRAM) scale by at most this factor with threads.
SHARED_SCALING = 1.3
#: Seconds per entry of an innermost loop, per iteration, per parallel region.
LOOP_ENTRY = 6 / FREQ
LOOP_ITERATION = 1 / FREQ
FORK = 4e-6


@lru_cache(maxsize=None)
def vector_bytes() -> int:
    """The vector register width in bytes (64 with AVX-512, 32 with AVX2,
    16 otherwise), from the CPU flags."""
    from ..cache import cpu_features
    flags = set(cpu_features().split())
    if "avx512f" in flags:
        return 64
    if "avx2" in flags:
        return 32
    return 16


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def _loops(info: BandInfo, b: BandKnobs, st: StatementInfo, segments=None):
    """``(member or iterator, trip)`` of the loops around ``st``, outer first:
    tile loops, point loops, then iterators no member scans.  ``segments``:
    ``(first, end)`` positions of ``b.order`` per nested band (outer first;
    default: one band), each its tile loops then its point loops."""
    loops: list[tuple[object, int]] = [(("i", it), st.extents.get(it, 1)) for it in st.outer]
    for lo, hi in segments or [(0, len(b.order))]:
        for p in range(lo, hi):
            if b.tiles[p]:
                loops.append((("m", b.order[p]), math.ceil(info.trips[b.order[p]] / b.tiles[p])))
        for p in range(lo, hi):
            j = b.order[p]
            trip = min(b.tiles[p], info.trips[j]) if b.tiles[p] else info.trips[j]
            loops.append((("m", j), trip))
    covered = {it for m in st.members for it in m} | set(st.outer)
    for it in st.iterators:
        if it not in covered:
            loops.append((("i", it), st.extents.get(it, 1)))
    return loops


def _iterator_extents(st: StatementInfo, inside) -> dict[str, int]:
    """Extent of each iterator while the loops ``inside`` run (the others
    fixed): a member's extent is the product of its loops' trips inside; an
    iterator takes the smallest extent of the members that scan it."""
    member_ext: dict[int, int] = {}
    iter_ext: dict[str, int] = {}
    for (kind, key), trip in inside:
        if kind == "m":
            member_ext[key] = member_ext.get(key, 1) * trip
        else:
            iter_ext[key] = trip
    out = {}
    for it in st.iterators:
        if it in iter_ext:
            out[it] = iter_ext[it]
            continue
        e = None
        for j, coefs in enumerate(st.members):
            if coefs.get(it):
                ext = member_ext.get(j, 1)
                e = ext if e is None else min(e, ext)
        out[it] = min(e if e is not None else 1, max(st.extents.get(it, 1), 1))
    return out


def _footprint(st: StatementInfo, ext: dict[str, int]) -> float:
    """Bytes the accesses of ``st`` touch for the iterator extents ``ext``
    (each tensor once: the union of its accesses' boxes, approximated by the
    largest)."""
    per_tensor: dict[str, float] = {}
    for a in st.accesses:
        if a.coefs is None:
            size = a.itemsize
            for d in a.shape:
                size *= d
        else:
            dims = [1 + sum(abs(c) * (ext.get(it, 1) - 1) for it, c in cd.items())
                    for cd in a.coefs]
            dims = [min(d, s) for d, s in zip(dims, a.shape)] if a.shape else dims
            size = 1.0
            for d in dims[:-1]:
                size *= d
            last = dims[-1] if dims else 1
            size *= math.ceil(last * a.itemsize / LINE) * LINE
        per_tensor[a.tensor] = max(per_tensor.get(a.tensor, 0.0), size)
    return sum(per_tensor.values())


def _traffic(st: StatementInfo, loops, capacity: float,
             footprints: dict[int, float] | None = None) -> float:
    """Bytes moved into a cache of ``capacity`` bytes (reuse distance).
    ``footprints``: the footprint inside each depth of ``loops``, filled in
    as computed (shared by the cache levels)."""
    footprints = {} if footprints is None else footprints
    best = math.inf
    outer = 1.0
    for d in range(len(loops) + 1):
        if d not in footprints:
            footprints[d] = _footprint(st, _iterator_extents(st, loops[d:]))
        fp = footprints[d]
        if fp <= FILL * capacity:
            best = min(best, outer * fp)
            break           # the deepest depth that fits is reached first from outside
        if d < len(loops):
            outer *= loops[d][1]
    if best is math.inf:    # not even one iteration fits: stream everything
        best = outer * _footprint(st, _iterator_extents(st, []))
    return best


def _lanes(st: StatementInfo, b: BandKnobs, knobs: Knobs, innermost, trip: int) -> float:
    """Vector lanes the innermost loop fills."""
    kind, key = innermost
    varying = {it for j, coefs in enumerate(st.members) if kind == "m" and j == key
               for it in coefs} if kind == "m" else {key}
    itemsize = max((a.itemsize for a in st.accesses), default=4)
    width = max(1, vector_bytes() // itemsize)
    writes_move = False
    for a in st.accesses:
        if a.coefs is None:
            if a.write:
                return 1.0
            continue
        moves = [d for d, cd in enumerate(a.coefs) if varying & set(cd)]
        if not moves:
            continue
        if a.write:
            writes_move = True
        last = len(a.coefs) - 1
        if moves != [last] or sum(abs(a.coefs[last].get(it, 0)) for it in varying) != 1:
            return 1.5 if not a.write else 1.0     # gathers: a little better than scalar
    if not writes_move:          # a reduction along the vector loop
        if not (b.vectorize and knobs.reassociate):
            return 1.0
    eff = 1.0 if b.vectorize else 0.8        # gcc -O3 vectorizes most of these anyway
    fill = trip / (math.ceil(trip / width) * width)
    return max(1.0, width * fill * eff)


def _statement_time(info: BandInfo, b: BandKnobs, knobs: Knobs, st: StatementInfo,
                    caches: dict[int, int], cores: int, segments=None,
                    par_at: int | None = None, memo: dict | None = None) -> float:
    """``par_at``: the position in the loops of the parallel one (default:
    the band's outermost, after ``st.outer``).  ``memo``: :func:`cost`'s,
    where the memory traffic of each statement's loops is remembered (a
    candidate's marks and unroll factor do not change it)."""
    if st.instances == 0:
        return 0.0
    loops = _loops(info, b, st, segments)
    if not loops:
        return st.ops / FREQ
    innermost, trip = loops[-1]
    lanes = _lanes(st, b, knobs, innermost, max(trip, 1))
    compute = st.instances * st.ops / (FREQ * FMA_PORTS * lanes)
    entries = st.instances / max(trip, 1)
    overhead = entries * LOOP_ENTRY + st.instances / (lanes * b.unroll) * LOOP_ITERATION
    if b.unroll > 1 and b.unroll > trip:
        overhead *= 1.5          # an unroll longer than the loop only adds guards
    key = ("traffic", st.name, tuple(loops))
    memory = memo.get(key) if memo is not None else None
    if memory is None:
        fps: dict[int, float] = {}
        memory = {lvl: _traffic(st, loops, cap, fps) / BANDWIDTH[lvl]
                  for lvl, cap in caches.items() if lvl in BANDWIDTH}
        if memo is not None:
            memo[key] = memory
    speed = shared = 1.0
    fork = 0.0
    if b.parallel and cores > 1:
        at = len(st.outer) if par_at is None else par_at
        ptrip = loops[at][1]          # the band's outermost loop
        speed = max(1.0, ptrip / math.ceil(ptrip / cores))
        shared = min(speed, SHARED_SCALING)
        fork = FORK * math.prod(trip for _, trip in loops[:at])
    private = sum(t for lvl, t in memory.items() if lvl < 3) / speed
    mem = private + memory.get(3, 0.0) / shared
    work = compute / speed + overhead / speed
    return max(work, mem) + OVERLAP * min(work, mem) + fork


#: Fraction of the vector FMA peak the GEMM micro-kernel reaches.
MICROKERNEL_EFFICIENCY = 0.8


def _tensorized_time(info: BandInfo, cores: int) -> float:
    """A band on the GEMM micro-kernel: its updates at
    :data:`MICROKERNEL_EFFICIENCY` of every core's peak, plus a fixed cost
    per call."""
    total = 0.0
    for st in info.statements:
        if st.name not in info.updates:
            continue
        lanes = max(1, vector_bytes() // max((a.itemsize for a in st.accesses), default=4))
        peak = FREQ * FMA_PORTS * lanes * MICROKERNEL_EFFICIENCY * cores
        total += st.instances / peak + 2e-6
    return total


def _nested_time(infos: list[BandInfo], knobs: Knobs, chain: list[int], st: StatementInfo,
                 caches: dict[int, int], cores: int, memo: dict | None) -> float:
    """The time of ``st`` under the tuned bands ``chain`` (indices into
    ``infos``, outermost first, ``st`` of the last): their members' loops
    nested band by band, each with its own tiles and order; the innermost
    band's simd and unroll knobs, the outermost parallel band's mark."""
    members, trips, order, tiles, segments, par_at = [], [], [], [], [], None
    outer = st.outer
    for x in chain:
        info, b = infos[x], knobs.bands[x]
        mine = next(s for s in info.statements if s.name == st.name)
        if b.parallel and par_at is None:
            par_at = len(outer) + len(order) + sum(1 for t in tiles if t)
        segments.append((len(order), len(order) + len(b.order)))
        order += [len(members) + j for j in b.order]
        tiles += list(b.tiles)
        trips += info.trips
        members += mine.members
    last = knobs.bands[chain[-1]]
    b = BandKnobs(tuple(order), tuple(tiles), par_at is not None, last.vectorize, last.unroll)
    combined = replace(st, members=members, outer=outer)
    return _statement_time(replace(infos[chain[-1]], trips=trips), b, knobs, combined,
                           caches, cores, segments, par_at, memo)


def cost(knobs: Knobs, infos: list[BandInfo], *, caches: dict[int, int] | None = None,
         cores: int | None = None, memo: dict | None = None) -> float:
    """The modelled time of ``knobs`` (seconds, relative) with ``infos``
    analysed at one set of sizes (:func:`polyc.tune.space.analyse`).
    ``memo``: a dict kept by the caller for one ``infos`` (and machine), in
    which each band's time is remembered by its knobs: the samples of a
    ranking share most of their bands' knobs."""
    caches = caches or cache_sizes()
    cores = cores or _cores()
    chains, inner = _nesting(infos)
    total = 0.0
    for i, (info, b) in enumerate(zip(infos, knobs.bands)):
        chain = chains[i]
        key = (i, tuple(knobs.bands[x] for x in chain), knobs.reassociate)
        if memo is not None and key in memo:
            total += memo[key]
            continue
        if any(knobs.bands[x].tensorize for x in chain[:-1]):
            t = 0.0             # in the micro-kernel's calls of the band above
        elif b.tensorize:
            t = _tensorized_time(info, cores)
        elif len(chain) == 1:
            t = sum(_statement_time(info, b, knobs, st, caches, cores, memo=memo)
                    for st in info.statements if st.name not in inner[i])
        else:
            t = sum(_nested_time(infos, knobs, chain, st, caches, cores, memo)
                    for st in info.statements if st.name not in inner[i])
        if memo is not None:
            memo[key] = t
        total += t
    return total


def _nesting(infos: list[BandInfo]) -> tuple[list[list[int]], list[set]]:
    """Per tuned band: the chain of tuned bands from the outermost down to it
    (indices), and the statements of the bands nested in it (costed there,
    not by it)."""
    chains: list[list[int]] = []
    inner: list[set] = [set() for _ in infos]
    for i, info in enumerate(infos):
        chain = [i]
        while infos[chain[0]].parent is not None:
            chain.insert(0, infos[chain[0]].parent)
        chains.append(chain)
        for x in chain[:-1]:
            inner[x].update(s.name for s in info.statements)
    return chains, inner
