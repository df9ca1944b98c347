"""Proof, with isl, that a GPU mapping is correct; run on every mapped
schedule before any CUDA is printed.

Takes the mapped ``isl.Schedule`` of :func:`polyc.schedule.gpu_mapping.map_schedule`,
its :class:`~polyc.schedule.gpu_mapping.KernelMapping` list, the program and
its dependences; returns nothing, or raises
:class:`~polyc.errors.IllegalScheduleError` with a concrete witness:

1. **Every instance in exactly one launch**: the domains that reach the
   ``gpu_kernel`` marks are pairwise disjoint and cover the domain; no
   kernel mark lies below another; every statement is in a kernel.
2. **No dependence between two threads of one launch** (two instances run
   on the same thread when the host loops, the tile loops mapped to blocks
   and the point loops mapped to threads have equal values: the code
   generator's value-aligned loops give each value one thread; sequential
   loops in between, such as a k-tile loop, run inside the thread) (but those of a
   reduction kernel's reduction, which a tree combines): for every
   dependence whose source and sink run in the same launch (the same
   kernel, at equal values of the host loops around it), the two instances
   have equal block and thread coordinates (equal values of the tile and
   point bands).  Kernels have no barriers yet, so a dependence between two
   threads of one block is as wrong as one between two blocks; dependences
   between launches are ordered by the launch order, which
   :func:`polyc.schedule.legality.check` proves with the rest of the tree.
   A tensor-core launch (``KernelMapping.intrinsic``) makes one call of the
   tensor-core GEMM per value of its batch loops; calls on different
   ``blockIdx.z`` must be joined by no dependence; inside a call, each
   block writes its own tiles of C (the intrinsic's contract).
3. **Launchable blocks**: at most 1024 threads per block.
4. **Row kernels** (:mod:`polyc.schedule.gpu_rows`, :func:`_check_rows`):
   no dependence joins two rows; every dependence between two threads of
   a row crosses a barrier, and every barrier is reached by the whole
   block.
5. **Buffers in bounds** (:func:`verify_buffers`, after promotion): every
   access of a shared or register buffer stays inside its box at every
   size the program accepts.

Bounds of global accesses are the program's preconditions
(:mod:`polyc.bounds`): the mapping changes which thread runs an instance,
never the instance, so they hold for the mapped kernel as for the C one.
"""

from __future__ import annotations

import islpy as isl

from ..dependence import Dependences
from ..errors import IllegalScheduleError, ScheduleError
from ..ir import Program
from ..isl_util import maps_of
from . import gpu_marks as M
from . import gpu_rows
from .gpu_mapping import MAX_THREADS, KernelMapping
from .legality import describe_instance_pair, witness

_T = isl.schedule_node_type


def _marked(schedule: isl.Schedule) -> tuple[dict, dict, dict]:
    """The ``gpu_kernel``, ``gpu_threads`` and ``gpu_blocks`` mark nodes, by
    kernel index."""
    kernels: dict[int, isl.ScheduleNode] = {}
    threads: dict[int, isl.ScheduleNode] = {}
    blocks: dict[int, isl.ScheduleNode] = {}

    def visit(node: isl.ScheduleNode, kernel: int | None) -> None:
        mark = M.of(node)
        if isinstance(mark, M.Kernel):
            if kernel is not None:
                raise IllegalScheduleError(
                    f"GPU mapping: kernel {mark.index} is nested in kernel {kernel}; "
                    "a launch cannot start inside another")
            kernel = mark.index
            kernels[kernel] = node
        elif isinstance(mark, (M.Threads, M.GridReduce)):
            if kernel is None:
                raise IllegalScheduleError("GPU mapping: thread band outside any kernel")
            threads[kernel] = node
        elif isinstance(mark, (M.Blocks, M.Batch)) and kernel is not None:
            blocks[kernel] = node
        for i in range(node.n_children()):
            visit(node.child(i), kernel)
    visit(schedule.get_root(), None)
    return kernels, threads, blocks


def _partition(schedule: isl.Schedule, kernels: dict[int, isl.ScheduleNode]) -> None:
    domain = schedule.get_domain()
    seen = isl.UnionSet.empty(domain.get_space())
    for k in sorted(kernels):
        dom = kernels[k].get_domain()
        twice = dom.intersect(seen)
        if not twice.is_empty():
            raise IllegalScheduleError(
                f"GPU mapping: instances {twice.sample_point()} run in kernel {k} and "
                "in an earlier kernel (an instance must run once)")
        seen = seen.union(dom)
    lost = domain.subtract(seen)
    if not lost.is_empty():
        raise IllegalScheduleError(
            f"GPU mapping: instance {lost.sample_point()} runs in no kernel "
            f"({M.Kernel.PREFIX} marks must cover every statement)")


def _same(prefix: isl.UnionMap) -> isl.UnionMap:
    """Pairs of instances with equal values of ``prefix``."""
    return prefix.apply_range(prefix.reverse())


def band_below(mark: isl.ScheduleNode) -> isl.ScheduleNode:
    """The band a GPU mark maps: below the mark and any marks under it (a
    band's ``loops:`` names)."""
    node = mark.child(0)
    while node.get_type() == _T.mark:
        node = node.child(0)
    assert node.get_type() == _T.band, node.get_type()
    return node


class Apart(dict):
    """The dependences of :func:`threads_apart`, by kind; ``blocks``: the
    pairs of instances of one launch that run in different blocks (empty
    for a launch of one block), so that a refusal can say where its
    witness runs."""
    blocks: isl.UnionMap


def check_mapped_band(mark: isl.ScheduleNode, kind: str, sizes: tuple[int, ...]) -> None:
    """The band below a schedule-language mapping mark (``kind``
    ``"blocks"`` or ``"threads"``, ``map_to_threads``' ``sizes``) still has
    loops the mark can map.  A ``tile`` or ``split`` of mapped loops after
    the mapping splits the band below the mark, which then maps fewer loops
    than it has sizes for (compiling failed inside isl).  Raises
    :class:`~polyc.errors.ScheduleError`."""
    n = band_below(mark).band_n_member()
    most = 2 if kind == "blocks" else 3
    if n > most or (sizes and n != len(sizes)):
        want = f"{len(sizes)} (one per size)" if sizes and n != len(sizes) else f"at most {most}"
        raise ScheduleError(
            f"GPU mapping: the band mapped to {kind} now has {n} loop(s), not {want}: a "
            f"transformation after map_to_{kind} (tile, split, ...) changed the mapped loops; "
            "transform the loops first, then map them")


def threads_apart(deps: Dependences, kernel: isl.ScheduleNode,
                  blocks: isl.ScheduleNode | None,
                  threads: isl.ScheduleNode | None) -> Apart:
    """The dependences, by kind, between two instances of one launch of
    ``kernel`` that run on different threads or blocks: two instances run
    on the same thread when the host loops, the loops mapped to blocks (the
    ``blocks`` mark's band and every loop above it) and the loops mapped to
    threads (the ``threads`` mark's band) have equal values; sequential
    loops in between, such as a k-tile loop, run inside the thread.
    ``blocks=None``: a launch of one block; ``threads=None``: one thread
    per block."""
    dom = kernel.get_domain()
    everything = isl.UnionMap.from_domain_and_range(dom, dom)
    host = kernel.get_prefix_schedule_union_map().intersect_domain(dom)
    same_launch = _same(host) if kernel.get_schedule_depth() else everything
    same = same_launch
    if blocks is not None:
        band = band_below(blocks)
        same = same.intersect(_same(
            band.child(0).get_prefix_schedule_union_map().intersect_domain(dom)))
    across_blocks = same_launch.subtract(same)
    if threads is not None:
        band = band_below(threads)
        same = same.intersect(_same(
            band.band_get_partial_schedule_union_map().intersect_domain(dom)))
    apart = same_launch.subtract(same)
    out = Apart()
    out.blocks = across_blocks
    for kind, dep in deps.by_kind().items():
        bad = dep.intersect_domain(dom).intersect_range(dom).intersect(apart)
        if not bad.is_empty():
            out[kind] = bad
    return out


def apart_error(index: int, bad: dict[str, isl.UnionMap],
                program: Program) -> IllegalScheduleError:
    """The error of kernel ``index`` whose launch joins two threads by the
    dependences ``bad`` (:func:`threads_apart`), with a witness."""
    kind, rel = next(iter(bad.items()))
    where = "on different threads of one block"
    across = getattr(bad, "blocks", None)
    if across is not None and not rel.intersect(across).is_empty():
        rel, where = rel.intersect(across), "on different threads, in different blocks"
    m = maps_of(rel)[0]
    w = witness(kind, "parallel", rel, program)
    on = f" on tensor {w.tensor}" if w.tensor else ""
    return IllegalScheduleError(
        f"GPU mapping of kernel {index} is illegal: the {kind} dependence{on}, "
        f"{describe_instance_pair(m)} joins two instances of one launch that run "
        f"{where} (a mapped loop carries it; nothing orders two threads of a launch)",
        witness=w)


def _check_reduction(k: KernelMapping, kernel: isl.ScheduleNode, deps: Dependences,
                     program: Program) -> None:
    """A reduction kernel spreads the instances of one launch over every
    thread: each launch must write one element, and every dependence
    between its instances must be one of the reduction (which TC lets polyc
    reassociate)."""
    dom = kernel.get_domain()
    host = kernel.get_prefix_schedule_union_map().intersect_domain(dom)
    same = (_same(host) if kernel.get_schedule_depth()
            else isl.UnionMap.from_domain_and_range(dom, dom))
    s = program.statement(k.reduction)
    write = isl.UnionMap.from_map(s.write).intersect_domain(dom)
    if not same.is_subset(write.apply_range(write.reverse())):
        raise IllegalScheduleError(
            f"GPU mapping of reduction kernel {k.index}: one launch of {k.reduction} writes "
            "several elements; a reduction kernel combines into one")
    for kind, dep in deps.by_kind().items():
        bad = dep.intersect_domain(dom).intersect_range(dom).intersect(same).subtract(
            deps.reduction)
        if not bad.is_empty():
            m = maps_of(bad)[0]
            raise IllegalScheduleError(
                f"GPU mapping of reduction kernel {k.index} is illegal: the {kind} dependence "
                f"{describe_instance_pair(m)} is not one of the reduction, and its instances "
                "run on different threads",
                witness=witness(kind, "parallel", bad, program))


def _check_rows(k: KernelMapping, kernel: isl.ScheduleNode, blocks: isl.ScheduleNode | None,
                deps: Dependences, program: Program) -> None:
    """A row kernel (:mod:`polyc.schedule.gpu_rows`): no dependence joins
    two rows (two blocks); within a row, every dependence between instances
    on two threads (per tensor, as :func:`gpu_rows.apart` decides from the
    marks) goes from one phase to a later one with a barrier between them;
    the barriers are the marks directly inside the children of the row
    band's sequence, so under the row loop and guards on the row iterators
    and sizes only: uniform across the block's threads."""
    if blocks is None:
        raise IllegalScheduleError(f"GPU mapping: row kernel {k.index} has no block loops")
    bad = threads_apart(deps, kernel, blocks, None)
    if bad:
        raise apart_error(k.index, bad, program)
    band = band_below(blocks)
    seq = band.child(0)
    if seq.get_type() != _T.sequence:
        raise IllegalScheduleError(f"GPU mapping: row kernel {k.index}: no sequence below "
                                   "the row loops")
    direct = sum(_is_barrier(seq.child(i).child(0)) for i in range(seq.n_children()))
    if gpu_rows.count_barriers(kernel) != direct:
        raise IllegalScheduleError(
            f"GPU mapping: row kernel {k.index} has a barrier below a loop or a branch of "
            "its threads; a barrier must be reached by every thread of the block")
    try:
        phases, before = gpu_rows.read_phases(seq, program)
    except ValueError as e:
        raise IllegalScheduleError(f"GPU mapping: row kernel {k.index}: {e}") from None
    same = gpu_rows.same_row(band)
    for b in range(len(phases)):
        for a in range(b + 1):
            if a < b and any(a < i <= b for i in before):
                continue
            bad = gpu_rows.apart(program, deps, same, phases, a, b)
            if bad:
                kind, rel = next(iter(bad.items()))
                where = ("inside one phase" if a == b else
                         f"from phase {a} ({', '.join(phases[a].statements)}) to phase {b} "
                         f"({', '.join(phases[b].statements)}) with no barrier between")
                raise IllegalScheduleError(
                    f"GPU mapping of row kernel {k.index} is illegal: the "
                    f"{gpu_rows.describe_dependence(program, bad)} joins two threads of one "
                    f"block {where}",
                    witness=witness(kind, "barrier", rel, program))


def _is_barrier(node: isl.ScheduleNode) -> bool:
    return isinstance(M.of(node), M.Barrier)


def verify_buffers(program: Program) -> None:
    """Prove that every access of a shared or register buffer (a tensor with
    role ``"local"``: promotion's copies and the rewritten statements) stays
    inside the buffer's box ``[0, size_d)`` at every size the program
    accepts (its parameter domain); raises
    :class:`~polyc.errors.IllegalScheduleError` naming the statement, the
    buffer and an instance that would step outside.  Accesses of global
    tensors are the program's preconditions (:mod:`polyc.bounds`), checked
    at every call."""
    params = program.parameter_domain()
    for t in program.locals:
        sizes = t.constant_shape()
        box = isl.Set.universe(isl.Space.set_alloc(params.get_ctx(), 0, len(sizes))
                               .align_params(params.get_space()).set_tuple_name(
                                   isl.dim_type.set, t.name))
        for d, n in enumerate(sizes):
            box = box.lower_bound_val(isl.dim_type.set, d, isl.Val.zero(box.get_ctx()))
            box = box.upper_bound_val(isl.dim_type.set, d,
                                      isl.Val.int_from_si(box.get_ctx(), n - 1))
        for st in program.statements:
            for rel in (st.write, *st.reads):
                if rel.get_tuple_name(isl.dim_type.out) != t.name:
                    continue
                touched = rel.intersect_domain(st.domain).intersect_params(params)
                outside = touched.intersect_range(
                    isl.Set.universe(box.get_space()).subtract(box))
                if not outside.is_empty():
                    raise IllegalScheduleError(
                        f"GPU buffer {t.name}[{']['.join(map(str, sizes))}]: statement "
                        f"{st.name} accesses it outside its box, e.g. "
                        f"{outside.sample().to_str()}; a polyc bug")


def verify(schedule: isl.Schedule, kernels: list[KernelMapping], deps: Dependences,
           program: Program) -> None:
    """Prove the mapping (see the module docstring) or raise
    :class:`~polyc.errors.IllegalScheduleError` naming the kernel, the
    dependence and a pair of instances that would run on different threads
    (with its :class:`~polyc.errors.Witness`)."""
    marks, threads, blocks = _marked(schedule)
    if sorted(marks) != [k.index for k in kernels]:
        raise IllegalScheduleError(
            f"GPU mapping: kernel marks {sorted(marks)} do not match the kernels "
            f"{[k.index for k in kernels]}")
    _partition(schedule, marks)
    calls = {s.name for s in program.statements
             if s.kind == "intrinsic" and getattr(s.intrinsic, "operand_dtype", "")}
    for k in kernels:
        stray = sorted(calls.intersection(k.statements)) if not k.intrinsic else []
        if stray:
            # every thread of a block of TENSOR_CORE_THREADS makes a GEMM call and
            # meets the others at its barriers: elsewhere it would hang or
            # compute a part of C
            raise IllegalScheduleError(
                f"GPU mapping: kernel {k.index} runs the GEMM call {stray[0]} without a "
                "launch of its own")
        total = 1
        for t in k.tile:
            total *= t
        if total > MAX_THREADS:
            raise IllegalScheduleError(
                f"GPU mapping: kernel {k.index} has {total} threads per block "
                f"(at most {MAX_THREADS}); pass smaller Config.gpu_block sizes "
                "(POLYC_GPU_BLOCK) or map_to_threads sizes")
        if not k.tile:
            continue
        if k.intrinsic:
            # a tensor-core launch: each block computes its own tiles of C in
            # one call; the calls of different batch values (blockIdx.z) must
            # be independent
            bad = threads_apart(deps, marks[k.index], blocks.get(k.index), None)
            if bad:
                raise apart_error(k.index, bad, program)
            continue
        if k.reduction:
            _check_reduction(k, marks[k.index], deps, program)
            continue
        if k.rows:
            _check_rows(k, marks[k.index], blocks.get(k.index), deps, program)
            continue
        if k.index not in threads:
            raise IllegalScheduleError(
                f"GPU mapping: kernel {k.index} has no {M.Threads.PREFIX} band")
        bad = threads_apart(deps, marks[k.index], blocks.get(k.index), threads[k.index])
        if bad:
            raise apart_error(k.index, bad, program)
