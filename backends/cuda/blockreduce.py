"""Reductions by the threads of one block: the tree that combines their
accumulators, in CUDA and in the CPU emulator; the block reduction of a
row kernel (:class:`polyc.loopnest.BlockReduce`,
:mod:`polyc.schedule.gpu_rows`); the end of a reduction kernel over the
whole grid (:func:`grid_reduction`).

The functions take the kernel's printer (:class:`.emit.KernelBody`) and
read its reduction state: ``acc_c`` (the accumulator's C type),
``ident`` (the operator's identity), ``combined(a, b)`` and ``store``.

The tree is deterministic: a shuffle tree within each warp
(``__shfl_down_sync`` over the warp's existing lanes), the warps' results
through shared memory, a shuffle tree over them in warp 0; the emulator's
:func:`emulated_tree` combines the same pairs in the same order, so the
emulator computes what the GPU computes.  Source: the warp-shuffle block
reduction of CUB's ``BlockReduceWarpReductions`` (written here; polyc does
not use CUB).
"""

from __future__ import annotations

import cgen as c

from polyc import loopnest as L
from polyc.ir import C_TYPES

#: Threads of a warp, the unit of ``__shfl_down_sync``.
WARP = 32
#: The most threads of a block (the emulator's per-thread accumulators).
MAX_THREADS = 1024


def identity(op: str, acc_t: str) -> str:
    """The identity element of reduction ``op`` in C type ``acc_t``."""
    ctype = C_TYPES[acc_t]
    if op in ("+", "*"):
        return f"(({ctype}){0 if op == '+' else 1})"
    if acc_t.startswith("float"):
        return f"(-({ctype})INFINITY)" if op == "max" else f"(({ctype})INFINITY)"
    bits = acc_t[len("int"):]
    return f"INT{bits}_MIN" if op == "max" else f"INT{bits}_MAX"


def grid_reduction(em, name: str) -> list:
    """The end of a reduction kernel: a tree over the block's threads
    (:func:`block_tree`), the block's result into ``<name>_part``; the last
    block to finish (a ticket counter after ``__threadfence``) combines the
    partial results in block order and stores."""
    part, ticket = f"{name}_part", f"{name}_ticket"
    acc = em.acc_c
    return [
        c.Line(f"__shared__ {acc} polyc_red[{WARP}];"),
        c.Line("__shared__ int polyc_last;"),
        c.Line("const int64_t polyc_tid = (int64_t)threadIdx.x, polyc_n = (int64_t)blockDim.x;"),
        block_tree(em),
        c.If("polyc_tid == 0", c.Block([
            c.Statement(f"{part}[blockIdx.x] = polyc_red[0]"),
            c.Statement("__threadfence()"),
            c.Statement(f"polyc_last = atomicAdd(&{ticket}, 1u) == gridDim.x - 1u")])),
        c.Statement("__syncthreads()"),
        c.If("polyc_last", c.Block([
            c.Statement("__threadfence()"),
            c.Statement(f"polyc_acc = {em.ident}"),
            c.For("int64_t polyc_g = polyc_tid", "polyc_g < (int64_t)gridDim.x",
                  "polyc_g += polyc_n",
                  c.Block([c.Statement("polyc_acc = " + em.combined(
                      "polyc_acc", f"((volatile {acc} *){part})[polyc_g]"))])),
            block_tree(em),
            c.If("polyc_tid == 0", c.Block([em.store("polyc_red[0]"),
                                            c.Statement(f"{ticket} = 0u")]))])),
    ]


def block_tree(em, red: str = "polyc_red") -> c.Block:
    """Combine ``polyc_acc`` of the block's ``polyc_n`` threads (numbered
    ``polyc_tid``) into ``<red>[0]``, a ``__shared__`` array of
    :data:`WARP` accumulators; ends with ``__syncthreads()``, so every
    thread may read ``<red>[0]`` after it."""
    acc = em.acc_c

    def levels(lanes, mask):
        return c.For(f"int polyc_o = {WARP // 2}", "polyc_o > 0", "polyc_o /= 2", c.Block([
            c.Line(f"const {acc} polyc_x = __shfl_down_sync({mask}, polyc_v, polyc_o);"),
            c.If(f"polyc_lane + polyc_o < {lanes}",
                 c.Statement("polyc_v = " + em.combined("polyc_v", "polyc_x")))]))
    return c.Block([
        c.Line(f"const int64_t polyc_lane = polyc_tid % {WARP}, polyc_warp = polyc_tid / {WARP};"),
        c.Line(f"const int64_t polyc_wn = polyc_n - {WARP} * polyc_warp < {WARP} ? "
               f"polyc_n - {WARP} * polyc_warp : {WARP};"),
        c.Line(f"const int64_t polyc_nw = (polyc_n + {WARP - 1}) / {WARP};"),
        c.Line(f"const unsigned polyc_mask = polyc_wn == {WARP} ? 0xffffffffu : "
               "((1u << polyc_wn) - 1u);"),
        c.Line(f"{acc} polyc_v = polyc_acc;"),
        levels("polyc_wn", "polyc_mask"),
        c.If("polyc_lane == 0", c.Statement(f"{red}[polyc_warp] = polyc_v")),
        c.Statement("__syncthreads()"),
        c.If("polyc_warp == 0", c.Block([
            c.Line(f"const unsigned polyc_m0 = polyc_n >= {WARP} ? 0xffffffffu : "
                   "((1u << polyc_n) - 1u);"),
            c.Statement(f"polyc_v = polyc_lane < polyc_nw ? {red}[polyc_lane] : {em.ident}"),
            levels("polyc_nw", "polyc_m0"),
            c.If("polyc_lane == 0", c.Statement(f"{red}[0] = polyc_v"))])),
        c.Statement("__syncthreads()"),
    ])


def emulated_tree(em, name: str) -> str:
    """The emulator's version of :func:`block_tree`, a C function
    ``name(red, n)`` over the ``n`` accumulators ``red[0..n)``: per warp,
    the shuffle levels as loops over the lanes in increasing order (each
    lane reads its partner before the partner's own update of that level,
    as a shuffle does), then the same levels over the warps' results;
    ``red[0]`` holds the block's result."""
    def levels(base: str, lanes: str) -> c.For:
        pair = em.combined(f"polyc_red[{base} + polyc_l]", f"polyc_red[{base} + polyc_l + polyc_o]")
        return c.For(f"int64_t polyc_o = {WARP // 2}", "polyc_o > 0", "polyc_o /= 2", c.Block([
            c.For("int64_t polyc_l = 0", f"polyc_l + polyc_o < {lanes}", "polyc_l++", c.Block([
                c.Statement(f"polyc_red[{base} + polyc_l] = {pair}")]))]))
    body = [
        c.Line(f"const int64_t polyc_nw = (polyc_n + {WARP - 1}) / {WARP};"),
        c.For("int64_t polyc_w = 0", "polyc_w < polyc_nw", "polyc_w++", c.Block([
            c.Line(f"const int64_t polyc_wn = polyc_n - {WARP} * polyc_w < {WARP} ? "
                   f"polyc_n - {WARP} * polyc_w : {WARP};"),
            levels(f"{WARP} * polyc_w", "polyc_wn"),
            c.Statement(f"polyc_red[polyc_w] = polyc_red[{WARP} * polyc_w]")])),
        levels("0", "polyc_nw"),
    ]
    decl = c.FunctionDeclaration(c.Value("static void", name), [
        c.Value(f"{em.acc_c} *restrict", "polyc_red"), c.Value("int64_t", "polyc_n")])
    return str(c.FunctionBody(decl, c.Block(body))) + "\n"


def block_reduce(em, n: L.BlockReduce) -> c.Block:
    """A row kernel's block reduction of ``n.statement``: every thread
    accumulates the terms of ``n.body`` its mapped loops give it into
    ``polyc_acc``, :func:`block_tree` combines the block's accumulators and
    thread 0 stores ``lhs = lhs op total``.  In the emulator (``em.phases``)
    the accumulation is a loop over the block's threads into an array of
    accumulators, :func:`emulated_tree` combines them, then the store runs
    as thread 0."""
    saved = em.reduction_state()
    em.set_reduction(n.statement)
    try:
        if em.phases:
            return _emulated(em, n)
        red = f"polyc_red_{em.acc_t}"
        em.shared.setdefault(red, c.Line(f"__shared__ {em.acc_c} {red}[{WARP}];"))
        body = em.node(n.body)
        return c.Block([
            c.Comment(f"block reduction of {n.statement} (polyc.schedule.gpu_rows)"),
            c.Line(f"{em.acc_c} polyc_acc = {em.ident};"),
            body,
            c.Block([c.Line("const int64_t polyc_tid = (int64_t)threadIdx.x, "
                            "polyc_n = (int64_t)blockDim.x;"),
                     block_tree(em, red),
                     c.If("polyc_tid == 0", c.Block([em.store(f"{red}[0]", anywhere=True)]))]),
        ])
    finally:
        em.restore_reduction(saved)


def _emulated(em, n: L.BlockReduce) -> c.Block:
    name = f"{em.name}_{n.statement}_tree"
    em.functions.setdefault(name, emulated_tree(em, name))
    em.in_threads = True
    try:
        body = em.node(n.body)
    finally:
        em.in_threads = False
    per_thread = c.Block([c.Line(f"{em.acc_c} polyc_acc = {em.ident};"), body,
                          c.Statement("polyc_part[polyc_tx] = polyc_acc")])
    return c.Block([
        c.Comment(f"block reduction of {n.statement} (polyc.schedule.gpu_rows)"),
        c.Line(f"{em.acc_c} polyc_part[{MAX_THREADS}];"),
        em.thread_loops(per_thread),
        *em.barrier_epoch(),
        c.Statement(f"{name}(polyc_part, blockDim.x)"),
        em.thread_zero(em.store("polyc_part[0]", anywhere=True)),
    ])
