"""Kernels of several phases mapped by hand in the schedule language.

A user maps the loops of a kernel to blocks (``map_to_blocks``) above a
``sequence`` of nests, and one loop of each nest to threads
(``map_to_threads``): each child of the sequence is a *phase* of the block,
as in the automatic row kernels (:mod:`polyc.schedule.gpu_rows`)::

    s = s.fuse([("S0", "n"), ("S1", "n"), ("S2", "n")])   # the rows, one band
    s = s.map_to_blocks([("S0", "n")])
    s = s.map_to_threads([("S0", "c")])     # a reduction: reduced by the block
    s = s.map_to_threads([("S1", "c")])
    s = s.map_to_threads([("S2", "c")])

The mapping decides the rest from the dependences:

* a phase whose loop on the threads carries a dependence between two of
  its threads is a **block reduction** when it is one reduction update
  whose instances at equal block loops all write one element (its terms
  may be reassociated: each thread accumulates its share, a tree combines
  them, thread 0 stores); otherwise the mapping is illegal
  (:class:`~polyc.errors.IllegalScheduleError` with the dependence and a
  pair of instances);
* a phase with no loop on the threads runs on thread 0;
* **barriers** go where a dependence between two threads of a block crosses
  from one phase to a later one, the fewest that separate every such pair
  (:func:`polyc.schedule.gpu_rows.barriers`).

Each phase maps one loop (``threadIdx.x``, one block size for the kernel:
the largest ``sizes`` given, else ``Config.gpu_block``'s last entry, else
256 threads).  The phases must be the children of a sequence directly below
the block loops (sequential loops in between would need barriers at the
end of their iterations, which are not placed), and a kernel of several
phases has no promoted buffers.  :func:`polyc.schedule.gpu_verify.verify`
proves the result like an automatic row kernel.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from ..dependence import Dependences
from ..errors import IllegalScheduleError, ScheduleError
from ..ir import Program
from . import gpu_marks as M
from .gpu_geometry import member_strides_extents
from .gpu_mapping import KernelMapping, fill_selectors, one_element_reduction
from .gpu_rows import (
    ROW_THREADS,
    Phase,
    apart,
    barriers,
    block_size,
    describe,
    describe_dependence,
    mark_phase,
    read_phases,
    same_row,
    thread_selectors,
)
from .gpu_verify import band_below
from .legality import witness
from .promotion import LOCAL_MARK
from .tree import statements_of, walk

_T = isl.schedule_node_type

_USER_THREADS = (M.UserThreads,)


def _band_and_child(blocks: isl.ScheduleNode) -> tuple[isl.ScheduleNode, isl.ScheduleNode]:
    """The band under the ``map_to_blocks`` mark ``blocks`` and its child
    (through marks)."""
    band = band_below(blocks)
    child = band.child(0)
    while child.get_type() == _T.mark:
        child = child.child(0)
    return band, child


def has_sequence_below(blocks: isl.ScheduleNode) -> bool:
    """Whether the band under the ``map_to_blocks`` mark ``blocks`` has a
    sequence of nests as its child (through marks).  The sequence of a
    promotion's copies and the statements (below its ``promote:`` mark,
    extension deleted) is not one: a kernel of one thread band with a
    buffer promoted on its block loops (a 1-D stencil's tile and halo)."""
    child = band_below(blocks).child(0)
    while child.get_type() == _T.mark:
        if child.mark_get_id().get_name().startswith(LOCAL_MARK):
            return False
        child = child.child(0)
    return child.get_type() == _T.sequence


def sequence_below(blocks: isl.ScheduleNode) -> tuple[isl.ScheduleNode, isl.ScheduleNode]:
    """The band under the ``map_to_blocks`` mark ``blocks`` and the
    sequence of phases below it; raises :class:`IllegalScheduleError` when
    the band's child is no sequence."""
    band, seq = _band_and_child(blocks)
    if seq.get_type() != _T.sequence:
        raise IllegalScheduleError(
            "GPU mapping: a kernel maps several loops to threads, but the loops below its "
            "block loops are no sequence of nests; map one loop of each nest of a sequence "
            "directly below the block loops (fuse the nests' outer loops into the block "
            "band, distribute the rest), or map one band to threads")
    return band, seq


def phases(blocks: isl.ScheduleNode, program: Program, deps: Dependences
           ) -> tuple[list[Phase], list[tuple[int, str]]]:
    """The phases of the user kernel whose ``map_to_blocks`` mark is
    ``blocks`` (block reductions recognised) and the barriers they need;
    raises :class:`IllegalScheduleError` with a witness when a dependence
    inside one phase joins two threads."""
    band, seq = sequence_below(blocks)
    try:
        found, _ = read_phases(seq, program, threads=_USER_THREADS)
    except ValueError as e:
        raise IllegalScheduleError(f"GPU mapping: {e}") from None
    same = same_row(band)
    for i, p in enumerate(found):
        bad = apart(program, deps, same, found, i, i)
        if bad and p.kind == "threads":
            red = one_element_reduction(program, p.statements, same)
            if red:
                found[i] = replace(p, kind="reduce", reduction=red)
                bad = apart(program, deps, same, found, i, i)
        if bad:
            kind, rel = next(iter(bad.items()))
            raise IllegalScheduleError(
                f"GPU mapping: the {describe_dependence(program, bad)} joins two threads of "
                f"one phase ({', '.join(p.statements)}) of a block: the loop on the threads "
                "carries it (only a reduction into one element per block may)",
                witness=witness(kind, "parallel", rel, program))
    placed = barriers(program, deps, same, found)
    assert placed is not None          # every phase was checked above
    return found, placed


def _thread_bands(seq: isl.ScheduleNode) -> dict[int, tuple[isl.ScheduleNode, tuple]]:
    """Per child of ``seq``, the band under its ``map_to_threads`` mark and
    the sizes the mark asks for."""
    out = {}
    for i in range(seq.n_children()):
        stack = [seq.child(i)]
        while stack:
            n = stack.pop()
            m = M.of(n)
            if isinstance(m, M.UserThreads):
                out[i] = (band_below(n), m.sizes)
                break
            stack.extend(n.child(j) for j in range(n.n_children()))
    return out


def map_kernel(root: isl.ScheduleNode, program: Program, deps: Dependences, index: int,
               config_block: tuple[int, ...] = ()) -> tuple[isl.ScheduleNode, KernelMapping]:
    """The user kernel at ``root`` (its outermost mapping mark) with its
    barriers and block reductions marked, and its :class:`KernelMapping` as
    kernel ``index``; the user's own marks are left for the caller to
    rewrite.  Raises :class:`IllegalScheduleError` (a dependence inside a
    phase) or :class:`ScheduleError` (sizes CUDA cannot launch)."""
    blocks = next(n for n in walk(root) if isinstance(M.of(n), M.UserBlocks))
    found, placed = phases(blocks, program, deps)
    band, seq = sequence_below(blocks)
    n = band.band_n_member()
    bands = _thread_bands(seq)
    sizes = [s[0] for _, s in bands.values() if s]
    if any(len(s) != 1 for _, s in bands.values() if s):
        raise ScheduleError("GPU mapping: a kernel of several phases maps one loop of each "
                            "phase to threads; give one size per map_to_threads")
    threads = max(sizes) if sizes else (int(config_block[-1]) if config_block else ROW_THREADS)
    if threads > 1024:
        raise ScheduleError(f"GPU mapping: {threads} threads per block; CUDA allows at most 1024")
    k = KernelMapping(index, statements_of(root), root.get_schedule_depth(), tile=(threads,),
                      n_block=n, block_depth=band.get_schedule_depth(), user=True,
                      reason="mapped by the schedule: phases of a block")
    k.steps, k.grid = member_strides_extents(band, n)
    describe(k, found, placed)
    blocks_mupa = band.band_get_partial_schedule()
    fill_selectors(k, program, blocks_mupa, None, k.steps)
    widest = None
    for i, (tband, _) in sorted(bands.items()):
        step, _ = member_strides_extents(tband, 1)
        ext = thread_selectors(k, program, blocks_mupa, tband, step, found[i].statements)
        widest = ext if widest is None else widest.max(ext)
    k.block = block_size(k, widest, threads)
    top = root.get_tree_depth()
    for i, p in enumerate(found):
        seq = mark_phase(seq.child(i).child(0), p, i, placed, index).parent().parent()
    node = seq
    while node.get_tree_depth() > top:
        node = node.parent()
    return node, k
