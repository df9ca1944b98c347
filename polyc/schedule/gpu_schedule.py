"""GPU mapping in the schedule language: ``map_to_blocks``,
``map_to_threads``, ``promote_shared`` and ``promote_registers``, and the
step that turns a schedule carrying them into the kernels of
:mod:`polyc.schedule.gpu_mapping` (:func:`finalize`).

A user maps a schedule onto CUDA by hand, PPCG-style, after tiling it::

    s = polyc.Schedule.from_program(prog)
    s = s.tile([("C", "m"), ("C", "n")], [32, 32])
    s = s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")])
    s = s.map_to_threads([("C", "m"), ("C", "n")], sizes=[8, 32])
    k = polyc.compile(src, target="cuda", schedule=s)

* ``map_to_blocks(loops)``: one or two consecutive members of one band
  (outermost first) run on the blocks of a launch, the innermost on
  ``blockIdx.x``; everything above them runs on the host (sequential loops
  around the launch).  Block ``b`` runs the iterations whose index
  ``floor(value / stride)`` is ``b`` modulo the grid, so any grid is correct;
  the launch uses one block per index (isl's ``dim_min``/``dim_max`` and
  stride of the loop's values).
* ``map_to_threads(loops, sizes=None)``: one to three consecutive members
  of one band, at or below the block loops (or alone: a launch of one
  block), run on the threads of a block, the innermost on ``threadIdx.x``;
  thread ``t`` runs the iterations whose value is ``t`` modulo the block
  size.  ``sizes`` (threads per loop) defaults to the loop's extent where
  the loops around bound it (a point loop of a 32-tile: 32), else
  :data:`~polyc.schedule.gpu_mapping.DEFAULT_BLOCK`.
* ``promote_shared(tensor, at)``: the footprint of ``tensor`` in one
  iteration of loop ``at`` (inside a kernel, above its thread loops) in a
  ``__shared__`` buffer, copied in (and out, when the kernel writes it) by
  all the threads of the block, with a barrier after the copies and at the
  end of the iteration; the CPU promotion's footprints and copies
  (:func:`polyc.schedule.promotion.promote_loop`), at most 48 KiB.
* ``promote_registers(tensor, at)``: the footprint in one iteration of a
  loop *below* the thread loops, in an array private to each thread
  (registers when small and indexed by constants after unrolling, else
  local memory), at most :data:`REGISTER_BYTES`; no barrier: the thread
  that copies an element is the only one that uses it.

When the block loops hold a sequence of nests and one loop of each goes to
threads, the nests are *phases* of a block (:mod:`.gpu_phases`): block
reductions and barriers come from the dependences.

Every step is checked (:func:`check_mapping`, called by
:meth:`polyc.Schedule.check`): the marks must nest as a kernel needs
(blocks above threads, one thread band per kernel or per phase, shared
buffers above the thread loops and private ones below), and no dependence may join two
instances of one launch that run on different threads or blocks
(:func:`polyc.schedule.gpu_verify.threads_apart`); a violation raises
:class:`~polyc.errors.IllegalScheduleError` with the dependence and a
witness pair.  Loops a schedule does not map are mapped automatically at
compile time (:func:`finalize`: coincident members recomputed exactly,
then :class:`~polyc.schedule.gpu_mapping.Mapper`).  For ``target="c"`` the
mapping marks are ignored and the promotions are ordinary local buffers.
"""

from __future__ import annotations

import math

import islpy as isl
import numpy as np

from .. import expr as E
from ..dependence import Dependences
from ..errors import IllegalScheduleError, ScheduleError
from . import gpu_marks as M
from . import gpu_phases, surgery
from .fusion import exact_flags
from .gpu_geometry import bounded_extent, const_like, member_strides_extents
from .gpu_mapping import (
    DEFAULT_BLOCK,
    MAX_THREADS,
    SHARED_BUDGET,
    KernelMapping,
    Mapper,
    block_shape,
    fill_selectors,
)
from .gpu_promotion import mark_copies
from .gpu_verify import apart_error, band_below, check_mapped_band, threads_apart
from .legality import without_extensions
from .promotion import LOCAL_MARK, promote_loop
from .registry import transform
from .tree import band_names, path_of, walk

_T = isl.schedule_node_type

#: The marks the schedule language puts above mapped bands; :func:`finalize`
#: replaces them with gpu_mapping's marks (which carry schedule depths).
BLOCKS = M.UserBlocks.PREFIX
THREADS = M.UserThreads.PREFIX
#: A thread's private buffers (promote_registers) together: 255 registers of
#: 4 bytes is CUDA's limit per thread, and the kernel needs some for itself.
REGISTER_BYTES = 512


# ------------------------------------------------------------ marks

def user_mark(node: isl.ScheduleNode) -> tuple[str, tuple[int, ...]] | None:
    """``("blocks", ())`` or ``("threads", sizes)`` for a mapping mark of
    the schedule language, ``None`` otherwise."""
    mark = M.of(node)
    if isinstance(mark, M.UserBlocks):
        return "blocks", ()
    if isinstance(mark, M.UserThreads):
        return "threads", mark.sizes
    return None


def has_user_marks(schedule: isl.Schedule) -> bool:
    return any(user_mark(n) is not None for n in walk(schedule.get_root()))


def _marks_above(node: isl.ScheduleNode) -> list[tuple[str, tuple]]:
    out = []
    while node.has_parent():
        node = node.parent()
        m = user_mark(node)
        if m is not None:
            out.append(m)
    return out


def _marks_below(node: isl.ScheduleNode) -> list[str]:
    return [m[0] for n in walk(node) if (m := user_mark(n)) is not None]


def _own_marks(band: isl.ScheduleNode) -> list[str]:
    """The mapping marks directly above ``band`` (through its ``loops:``)."""
    out = []
    node = band
    while node.has_parent() and node.parent().get_type() == _T.mark:
        node = node.parent()
        m = user_mark(node)
        if m is not None:
            out.append(m[0])
    return out


# ------------------------------------------------------------ the transformations

def _mapped_band(s, loops, what: str, most: int) -> tuple[isl.ScheduleNode, list]:
    """The band made of exactly ``loops`` (consecutive members of one band,
    outermost first), split out of its band; returns the node to put the
    mark on (above the band's ``loops:`` names) and the loops."""
    lps = surgery.resolve_loops(s, loops, what)
    if len(lps) > most:
        raise ScheduleError(f"{what}: at most {most} loops map to CUDA "
                            f"{'blocks' if most == 2 else 'threads'}, got {len(lps)}")
    if len({lp.path for lp in lps}) != 1:
        raise ScheduleError(f"{what}: loops {', '.join(lp.name for lp in lps)} are not members "
                            "of one band; map loops of one band (merge or tile them first)")
    members = [lp.member for lp in lps]
    if members != list(range(members[0], members[0] + len(members))):
        raise ScheduleError(f"{what}: loops {', '.join(lp.name for lp in lps)} are not "
                            "consecutive members in band order (outermost first); reorder "
                            "them first")
    band = surgery.band_node(s.isl, lps[0])
    if _own_marks(band):
        raise ScheduleError(f"{what}: loop {lps[0].name} is already mapped")
    band = surgery.isolate(band, members[0], len(members), s.program)
    return surgery.top_of_band(band), lps


@transform("map_to_blocks")
def map_to_blocks(s, loops):
    """Run one or two consecutive loops of a band on the blocks of a CUDA
    launch (the innermost on ``blockIdx.x``); the loops above run on the
    host.  Checked (:func:`check_mapping`): no dependence may join two
    instances of one launch in different blocks; a loop that carries one
    raises :class:`IllegalScheduleError` with the dependence and a pair of
    instances.  For ``target="c"`` the mark is ignored.

    Before / after ``map_to_blocks([("C","m_tile"), ("C","n_tile")])``::

        for m_tile: for n_tile:          // blocks y, x
          for m: for n: ...              for m_tile: for n_tile:
                                           for m: for n: ...
    """
    top, _ = _mapped_band(s, loops, "map_to_blocks", 2)
    return top.insert_mark(M.UserBlocks().id()).get_schedule()


@transform("map_to_threads")
def map_to_threads(s, loops, sizes=None):
    """Run one to three consecutive loops of a band on the threads of a
    block (the innermost on ``threadIdx.x``, so that consecutive threads
    touch consecutive elements when it walks the innermost dimension).
    ``sizes``: threads per loop, outermost first (default: the loop's extent
    when the loops around bound it, e.g. 32 for the point loop of a
    32-tile; else 256 threads in all); at most 1024 in all.  Checked like
    :func:`map_to_blocks`.  For ``target="c"`` the mark is ignored.

    Before / after ``map_to_threads([("C","m"), ("C","n")], sizes=[8, 32])``::

        for m: for n: S0                 // threads y (8), x (32)
                                         for m: for n: S0
    """
    top, lps = _mapped_band(s, loops, "map_to_threads", 3)
    mark = M.UserThreads()
    if sizes is not None:
        if not isinstance(sizes, (list, tuple)) or len(sizes) != len(lps):
            raise ScheduleError(f"map_to_threads: give one size per loop ({len(lps)}), "
                                f"got {sizes!r}")
        sizes = [surgery.positive_int(v, "a thread count") for v in sizes]
        if math.prod(sizes) > MAX_THREADS:
            raise ScheduleError(f"map_to_threads: {' x '.join(map(str, sizes))} = "
                                f"{math.prod(sizes)} threads per block; CUDA allows at most "
                                f"{MAX_THREADS}")
        mark = M.UserThreads(tuple(sizes))
    return top.insert_mark(mark.id()).get_schedule()


def _promotion_site(s, at, what: str, registers: bool):
    """Check where a GPU promotion at loop ``at`` goes; returns the loop."""
    lp = s.resolve(at)
    band = surgery.band_node(s.isl, lp)
    last = lp.member == band.band_n_member() - 1
    own, above, below = _own_marks(band), _marks_above(band), _marks_below(band)
    above_threads = any(k == "threads" for k, _ in above)
    if own and not last:
        raise ScheduleError(f"{what}: loop {lp.name} is mapped to {own[0]} with the loops "
                            "after it in its band; promote at the band's last loop")
    if registers:
        if not above_threads and "threads" not in own:
            raise ScheduleError(
                f"{what}: loop {lp.name} is not inside loops mapped to threads; a buffer in "
                "registers belongs to one thread: promote at a loop at or below "
                "map_to_threads (promote_shared for a buffer of the block)")
    else:
        if above_threads or "threads" in own:
            raise ScheduleError(
                f"{what}: loop {lp.name} lies inside the loops mapped to threads; a shared "
                "buffer is filled by all the threads of a block: promote at a loop above "
                "map_to_threads (promote_registers for a buffer per thread)")
        if "threads" not in below:
            raise ScheduleError(
                f"{what}: no loop below {lp.name} is mapped to threads; map the kernel "
                "(map_to_blocks, map_to_threads) before promoting to shared memory")
        if "blocks" in below:
            raise ScheduleError(
                f"{what}: loop {lp.name} lies above the loops mapped to blocks; its footprint "
                "would span several blocks: promote at a loop inside the kernel")
    return lp


@transform("promote_shared", kind="structural")
def promote_shared(s, tensor, at, name=None):
    """Copy the footprint of ``tensor`` in one iteration of loop ``at``
    (inside a kernel: at or below the block loops, above the thread loops)
    into a ``__shared__`` buffer (``<tensor>_shared``, or ``name``), copied
    in before the body and out after it by all the threads of the block,
    with a barrier after the copies and at the end of the iteration.  The
    box, the copies and the refusals are those of :func:`promote`, with the
    48 KiB budget of static shared memory.  For ``target="c"``: an ordinary
    local buffer.

    Before / after ``promote_shared("A", ("C","k_tile"))`` on a mapped
    matmul::

        for k_tile:                      for k_tile:
          for m: for n:   // threads       __shared__ A_shared[32][33]
            for k: S0                      copy A -> A_shared; __syncthreads()
                                           for m: for n: for k: S0 (A_shared)
                                           __syncthreads()
    """
    lp = _promotion_site(s, at, "promote_shared", registers=False)
    return promote_loop(s, tensor, at, name, max_bytes=SHARED_BUDGET,
                        memory="shared memory (static, per block)", suffix="_shared",
                        used=_used(s, lp, private=False))


@transform("promote_registers", kind="structural")
def promote_registers(s, tensor, at, name=None):
    """Copy the footprint of ``tensor`` in one iteration of loop ``at`` (at
    or below the thread loops) into an array private to each thread
    (``<tensor>_reg``, or ``name``): registers when small and indexed by
    constants (unroll the loops below), else local memory; at most
    :data:`REGISTER_BYTES` per thread.  The accumulator of a matmul in
    registers: ``promote_registers("C", ("C", "n"))`` below the thread
    loops ``m, n``.  For ``target="c"``: an ordinary local buffer."""
    lp = _promotion_site(s, at, "promote_registers", registers=True)
    sched, program = promote_loop(s, tensor, at, name, max_bytes=REGISTER_BYTES,
                                  memory="registers per thread", suffix="_reg",
                                  used=_used(s, lp, private=True))
    buf = program.tensors[-1].name
    node = next(n for n in walk(sched.get_root()) if n.get_type() == _T.mark
                and n.mark_get_id().get_name() == LOCAL_MARK + buf)
    return node.insert_mark(M.Private().id()).get_schedule(), program


def _used(s, lp, private: bool) -> int:
    """Bytes of the kernel around loop ``lp`` taken by earlier buffers in
    shared memory (``private=False``) or in each thread's registers."""
    node = surgery.band_node(s.isl, lp)
    root = node
    while node.has_parent():
        node = node.parent()
        if user_mark(node) is not None:
            root = node
    total = 0
    for n in walk(root):
        if n.get_type() == _T.mark and n.mark_get_id().get_name().startswith(LOCAL_MARK):
            if _is_private(n) == private:
                t = s.program.tensor(n.mark_get_id().get_name()[len(LOCAL_MARK):])
                total += math.prod(t.constant_shape()) * np.dtype(t.dtype).itemsize
    return total


def _is_private(local: isl.ScheduleNode) -> bool:
    """Whether the ``promote:`` mark ``local`` is a register buffer's (a
    ``gpu_private`` mark directly above it)."""
    return (local.has_parent() and local.parent().get_type() == _T.mark
            and isinstance(M.of(local.parent()), M.Private))


# ------------------------------------------------------------ structure

class _Kernel:
    """A kernel a schedule maps: its root (the outermost mapping mark), the
    block and thread marks (either may be missing) and the promotion marks
    below the root (``(buffer, private)``)."""

    def __init__(self, root: isl.ScheduleNode):
        self.root = root
        self.blocks: isl.ScheduleNode | None = None
        self.threads: isl.ScheduleNode | None = None
        self.sizes: tuple[int, ...] = ()
        self.buffers: list[tuple[str, bool]] = []
        #: every thread band (several: phases of a block, polyc.schedule.gpu_phases)
        self.all_threads: list[isl.ScheduleNode] = []

    @property
    def phased(self) -> bool:
        """Whether the kernel's block loops hold a sequence of nests, one loop
        of each mapped to threads at most (phases of a block,
        :mod:`polyc.schedule.gpu_phases`)."""
        if self.blocks is None or not self.all_threads:
            return False
        if not gpu_phases.has_sequence_below(self.blocks):
            return False
        return all(band_below(t).band_n_member() == 1 for t in self.all_threads)


def _kernels(tree: isl.Schedule) -> list[_Kernel]:
    """The kernels of ``tree`` in launch order, their structure checked;
    raises :class:`IllegalScheduleError` for marks a kernel cannot have."""
    out: list[_Kernel] = []

    def visit(node: isl.ScheduleNode, kernel: _Kernel | None, threads: bool) -> None:
        m = user_mark(node)
        if m is not None:
            kind, sizes = m
            check_mapped_band(node, kind, sizes)
            if kernel is None:
                kernel = _Kernel(node)
                out.append(kernel)
            if kind == "blocks":
                if kernel.blocks is not None or kernel.threads is not None:
                    raise IllegalScheduleError(
                        "GPU mapping: loops mapped to blocks below other loops mapped to "
                        f"{'blocks' if kernel.threads is None else 'threads'}; a kernel has "
                        "one band of block loops, above its thread loops")
                kernel.blocks = node
            else:
                if kernel.threads is not None and (kernel.blocks is None or kernel.buffers
                                                   or not gpu_phases.has_sequence_below(
                                                       kernel.blocks)):
                    raise IllegalScheduleError(
                        "GPU mapping: two bands of one kernel are mapped to threads; map "
                        "one band per kernel (distribute the statements into separate "
                        "kernels, or fuse their loops into one band), or map the block "
                        "loops above a sequence of nests and one loop of each nest to "
                        "threads (phases of a block, without promoted buffers)")
                if kernel.threads is None:
                    kernel.threads, kernel.sizes = node, sizes
                kernel.all_threads.append(node)
                threads = True
        elif node.get_type() == _T.mark:
            name = node.mark_get_id().get_name()
            if name.startswith(LOCAL_MARK):
                buf = name[len(LOCAL_MARK):]
                private = _is_private(node)
                if kernel is None:
                    raise IllegalScheduleError(
                        f"GPU mapping: buffer {buf} is promoted outside every kernel the "
                        "schedule maps (on host loops, or on loops left to the automatic "
                        "mapping); promote inside a kernel: promote_shared above its thread "
                        "loops, promote_registers below them")
                if threads and not private:
                    raise IllegalScheduleError(
                        f"GPU mapping: buffer {buf} is promoted inside the thread loops with "
                        "promote(); a shared buffer there would need barriers the threads "
                        "do not all reach: use promote_registers")
                elif private and not threads:
                    raise IllegalScheduleError(
                        f"GPU mapping: register buffer {buf} lies above the thread loops")
                else:
                    kernel.buffers.append((buf, private))
        for i in range(node.n_children()):
            visit(node.child(i), kernel, threads)
    visit(tree.get_root(), None, False)
    for k in out:
        if len(k.all_threads) > 1 and not k.phased:
            raise IllegalScheduleError(
                "GPU mapping: a kernel with loops of several nests on threads runs them as "
                "phases of a block, which map one loop each to threads; map_to_threads one "
                "loop of each nest")
        if k.phased and k.buffers:
            raise IllegalScheduleError(
                "GPU mapping: a kernel of several phases (loops of several nests mapped to "
                "threads) cannot have promoted buffers yet; promote in a kernel of one "
                "thread band")
    return out


def check_mapping(tree: isl.Schedule, deps: Dependences, program) -> None:
    """Check the mapping marks of a schedule-language tree (see the module
    docstring): their structure, and that no dependence joins two threads or
    blocks of one launch.  Raises :class:`IllegalScheduleError` with a
    witness; called by :meth:`polyc.Schedule.check`."""
    for k, kernel in enumerate(_kernels(without_extensions(tree))):
        if kernel.phased:       # no dependence across blocks; within a phase, across threads
            bad = threads_apart(deps, kernel.root, kernel.blocks, None)
            if bad:
                raise apart_error(k, bad, program)
            gpu_phases.phases(kernel.blocks, program, deps)
            continue
        bad = threads_apart(deps, kernel.root, kernel.blocks, kernel.threads)
        if bad:
            raise apart_error(k, bad, program)


# ------------------------------------------------------------ compiling

def _thread_sizes(band: isl.ScheduleNode, n: int, requested: tuple[int, ...],
                  config_block: tuple[int, ...]) -> tuple[int, ...]:
    if requested:
        return requested
    if config_block:
        return block_shape(n, config_block)
    sizes = []
    for j in range(n):
        ext = bounded_extent(band, j)
        sizes.append(min(ext, MAX_THREADS) if ext is not None else DEFAULT_BLOCK[n][j])
    while math.prod(sizes) > MAX_THREADS:
        j = next(i for i, v in enumerate(sizes) if v > 1)
        sizes[j] = (sizes[j] + 1) // 2
    return tuple(sizes)


def _mapping(index: int, kernel: _Kernel, program, config_block) -> KernelMapping:
    """The :class:`KernelMapping` of a kernel of a tree without extension
    nodes."""
    names: list[str] = []
    kernel.root.get_domain().foreach_set(lambda st: names.append(st.get_tuple_name()))
    k = KernelMapping(index, tuple(sorted(names)), kernel.root.get_schedule_depth())
    parts = []
    steps: tuple[int, ...] = ()
    blocks = threads = None
    if kernel.blocks is not None:
        band = band_below(kernel.blocks)
        n = band.band_n_member()
        k.n_block, k.block_depth = n, band.get_schedule_depth()
        steps, k.grid = member_strides_extents(band, n)
        blocks = band.band_get_partial_schedule()
        parts.append(f"blocks {', '.join(band_names(band, program))}")
    if kernel.threads is None:
        raise ScheduleError(
            f"GPU kernel {index} ({', '.join(k.statements)}) maps loops to blocks but none to "
            "threads; map_to_threads a loop inside it (with none inside, split a block loop "
            "and map its inner loop to threads)")
    if kernel.threads is not None:
        band = band_below(kernel.threads)
        n = band.band_n_member()
        k.tile = _thread_sizes(band, n, kernel.sizes, config_block)
        k.thread_depth = band.get_schedule_depth()
        k.thread_steps, extents = member_strides_extents(band, n)
        k.block = [e.min(const_like(e, t)).coalesce() for e, t in zip(extents, k.tile)]
        threads = band.band_get_partial_schedule()
        parts.append(f"threads {', '.join(band_names(band, program))} "
                     f"({' x '.join(map(str, k.tile))})")
    k.reason = "mapped by the schedule: " + "; ".join(parts)
    k.steps, k.user = steps, True
    fill_selectors(k, program, blocks, threads, steps, k.thread_steps)
    return k


def _rewrite(node: isl.ScheduleNode, k: KernelMapping) -> isl.ScheduleNode:
    """Below the kernel root ``node`` (a mapping mark) of the full tree:
    gpu_mapping's marks for the user's; returns the kernel mark."""
    def go(n: isl.ScheduleNode) -> isl.ScheduleNode:
        m = user_mark(n)
        if m is not None:
            band = band_below(n)
            depth, count = band.get_schedule_depth(), band.band_n_member()
            kind = M.Blocks if m[0] == "blocks" else M.Threads
            n = n.delete().insert_mark(kind(depth, count).id())
        for i in range(n.n_children()):
            n = go(n.child(i)).parent()
        return n
    node = go(node)
    return node.insert_mark(M.Kernel(k.index).id())


def _copy_selectors(k: KernelMapping, program, private: bool, buf: str) -> None:
    """Selectors of the copy statements of buffer ``buf`` in kernel ``k``:
    the block (and for a private buffer, the thread) that owns an
    iteration of the loops around the copies, from the copies' prefix
    iterators."""
    for st in program.statements:
        if st.kind != "copy" or buf not in {st.tensor, *st.read_tensors()}:
            continue
        sel = {}
        for j, axis in enumerate(k.block_axes):
            it = E.Index(st.iterators[k.block_depth + j])
            step = k.steps[j]
            sel[f"block.{axis}"] = E.Binary("/", it, E.Const(step)) if step > 1 else it
        if private:
            for j, axis in enumerate(k.thread_axes):
                it = E.Index(st.iterators[k.thread_depth + j])
                step = k.thread_steps[j]
                sel[f"thread.{axis}"] = E.Binary("/", it, E.Const(step)) if step > 1 else it
        k.selectors[st.name] = sel


def finalize(tree: isl.Schedule, program, deps: Dependences, *,
             block: tuple[int, ...] = ()) -> tuple[isl.Schedule, list[KernelMapping]]:
    """The tree with gpu_mapping's marks (kernels, blocks, threads, copies)
    for a schedule-language tree: the user's kernels as mapped, every other
    subtree mapped automatically (its bands' coincident members recomputed
    from ``deps``, then :class:`~polyc.schedule.gpu_mapping.Mapper`,
    ``block``: ``Config.gpu_block``); and the kernels in launch order.
    Raises :class:`IllegalScheduleError` for a mapping
    :func:`check_mapping` refuses, :class:`ScheduleError` for a kernel with
    no thread loops."""
    plain = without_extensions(tree)
    user = {path_of(k.root): k for k in _kernels(plain)}
    mapper = Mapper(program, tuple(block), 3, False)
    all_deps = deps.all()
    copies: dict[str, KernelMapping] = {}

    def walk_(node: isl.ScheduleNode) -> isl.ScheduleNode:
        path = path_of(node)
        if path in user and user[path].phased:
            node, k = gpu_phases.map_kernel(node, program, deps, len(mapper.kernels), block)
            mapper.kernels.append(k)
            return _rewrite(node, k)
        if path in user:
            # no proof here: gpu_verify.verify proves every kernel of the result
            k = _mapping(len(mapper.kernels), user[path], program, block)
            kernel = user[path]
            mapper.kernels.append(k)
            for buf, private in kernel.buffers:
                _copy_selectors(k, program, private, buf)
                t = program.tensor(buf)
                box = "x".join(map(str, t.constant_shape()))
                nbytes = math.prod(t.constant_shape()) * np.dtype(t.dtype).itemsize
                k.promoted[t.origin] = (f"{'registers' if private else 'shared'} {buf}[{box}] "
                                        f"({nbytes} bytes, promoted by the schedule)")
                if not private:
                    copies.update({st.name: k for st in program.statements
                                   if st.kind == "copy" and st.tensor == buf})
            shared = sum(math.prod(program.tensor(b).constant_shape())
                         * np.dtype(program.tensor(b).dtype).itemsize
                         for b, private in kernel.buffers if not private)
            if shared > SHARED_BUDGET:
                raise ScheduleError(f"GPU kernel {k.index}: its shared buffers take {shared} "
                                    f"bytes, over the {SHARED_BUDGET // 1024} KiB a block "
                                    "may have")
            return _rewrite(node, k)
        if not any(p[:len(path)] == path for p in user):
            return mapper.walk(_annotated(node, all_deps))
        for i in range(node.n_children()):
            node = walk_(node.child(i)).parent()
        return node

    root = tree.get_root()
    node = walk_(root.child(0)) if root.n_children() else root
    mapped = node.get_schedule()
    if copies:
        mapped = mark_copies(mapped, program, copies)
    return mapped, mapper.kernels


def _annotated(node: isl.ScheduleNode, all_deps: isl.UnionMap) -> isl.ScheduleNode:
    """The subtree at ``node`` with every band's coincident members and
    permutable flag recomputed from the dependences (a user's transformations
    need not keep isl's flags)."""
    if node.get_type() == _T.band:
        node = exact_flags(node, all_deps)
    for i in range(node.n_children()):
        node = _annotated(node.child(i), all_deps).parent()
    return node


__all__ = ["map_to_blocks", "map_to_threads", "promote_shared", "promote_registers",
           "check_mapping", "finalize", "has_user_marks", "BLOCKS", "THREADS",
           "REGISTER_BYTES"]
