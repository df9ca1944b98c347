"""CUDA code generation: (``ir.Program``, mapped LoopNest, kernel mappings)
-> CUDA source, and the same kernels as C for the CPU emulator.

The emulator's C (:mod:`.emulate`) pastes the same kernel bodies.

The loop nest comes from a schedule mapped by
:mod:`polyc.schedule.gpu_mapping`: what lies outside its
:class:`~polyc.loopnest.Launch` nodes runs on the host; each launch's body
runs on every thread of a grid.  Each launch becomes one kernel::

    extern "C" __global__ void __launch_bounds__(256)
    polyc_k0(int64_t p_M, ..., int64_t c0 /* host loops */, const float *__restrict__ t_A, ...)

whose body is printed once (statements exactly as the C backend prints them,
:class:`backends.c.emit._Emitter`) and pasted both into the CUDA source and
into the emulator's C (:func:`.emulate.emulation_source`).  A loop mapped to a block
(thread) index strides over it::

    for (int64_t c1 = 0 + INT64_C(32) * (int64_t)blockIdx.x; c1 < p_N;
         c1 += INT64_C(32) * (int64_t)gridDim.x)

so every grid and block size is correct (the launch uses the tight sizes of
the :class:`~polyc.schedule.gpu_mapping.Mapping`), and a statement
outside every loop of a mapped axis (isl prints no loop for a member with
one value) runs on index 0 of that axis only.

Guarantees: the C backend's (no user text reaches the source unchecked,
``int64_t`` index arithmetic with ``INT64_C`` literals, numpy's arithmetic);
the helpers of the C prelude are compiled as ``__device__`` functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import cgen as c

from polyc import expr as E
from polyc import loopnest as L
from polyc.ir import C_TYPES, Program
from polyc.isl_util import pw_aff_to_expr

from ..c.cexpr import (
    accumulator_type,
    check_identifier,
    combine,
    convert,
    extent_name,
    float_type_of,
    loop_iterator_name,
    param_name,
    tensor_name,
)
from ..c.emit import PRELUDE, _Emitter, arguments, comment_text, linear_offset
from ..c.gemmcall import as_param
from ..c.hoist import HOISTED
from ..c.loopshape import only_instance as _only_instance
from .blockreduce import block_reduce, grid_reduction, identity
from .wmma import device_source, variants, wmma_call

#: Extra elements on a shared buffer's innermost dimension, against bank
#: conflicts of column accesses.
SHARED_PADDING = 1

#: CUDA axes, innermost mapped loop first (as polyc.schedule.gpu_mapping.AXES).
AXES = "xyz"

#: Reduction kernels (as polyc.schedule.gpu_mapping.REDUCE_THREADS and
#: REDUCE_MAX_BLOCKS): threads per block, and the most blocks.
REDUCE_THREADS = 256
REDUCE_MAX_BLOCKS = 1024


#: A kernel's mapping (polyc.schedule.gpu_mapping.KernelMapping: ``index``,
#: ``tile``, ``block_axes``, ``thread_axes``, ``grid``/``block`` as isl
#: piecewise affine functions of the sizes); the backend reads these only.
Mapping = object


def kernel_name(k: int, occurrence: int = 0) -> str:
    """The CUDA function of kernel ``k`` (its ``occurrence``-th copy in the
    loop nest, :func:`polyc.loopnest.number_launches`)."""
    return f"polyc_k{int(k)}" + (f"_{int(occurrence)}" if occurrence else "")


def launch_name(launch: L.Launch) -> str:
    return kernel_name(launch.kernel, launch.occurrence)


@dataclass(frozen=True)
class LaunchSpec:
    """How the host launches CUDA function ``name`` (of kernel ``kernel``):
    ``grid`` and ``block`` (x, y, z) as expressions of the size parameters;
    ``host_iterators``: the host loops' iterators passed after the
    parameters."""
    name: str
    kernel: int
    grid: tuple[E.Expr, E.Expr, E.Expr]
    block: tuple[E.Expr, E.Expr, E.Expr]
    host_iterators: tuple[str, ...]
    threads: int


@dataclass(frozen=True)
class CudaSource:
    """The CUDA translation unit (``text``), its kernels' launches (by CUDA
    function name), the host
    loop nest around them (``host``: a LoopNest whose leaves are
    :class:`~polyc.loopnest.Launch` nodes) and the argument spec (size
    parameters, tensors, in ABI order)."""
    text: str
    launches: dict[str, LaunchSpec]
    host: L.Node
    params: tuple[str, ...]
    tensors: tuple[str, ...]
    kernel_names: tuple[str, ...] = field(default=())


def _device_prelude() -> str:
    """The C prelude's helpers (index arithmetic, wrapping integer
    arithmetic, NaN-propagating max/min, ...) as device functions."""
    start = PRELUDE.index("/* index arithmetic")
    body = PRELUDE[start:PRELUDE.index("/* half precision")]
    body = body.replace("static inline", "static __device__ __forceinline__")
    return "#include <stdint.h>\n#include <math.h>\n\n" + body + HALF_PRELUDE


#: The half-precision types in CUDA: ``__half`` and ``__nv_bfloat16``, with
#: the conversions of ``cuda_fp16.h`` and ``cuda_bf16.h`` (round to nearest
#: even), as the C prelude's ``polyc_<type>_to_f32``/``polyc_f32_to_<type>``.
HALF_PRELUDE = r"""/* half precision: storage types whose values compute in float */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef __half polyc_float16;
typedef __nv_bfloat16 polyc_bfloat16;
#define POLYC_DEV static __device__ __forceinline__
POLYC_DEV float polyc_float16_to_f32(polyc_float16 x) { return __half2float(x); }
POLYC_DEV polyc_float16 polyc_f32_to_float16(float x) { return __float2half_rn(x); }
POLYC_DEV polyc_float16 polyc_f64_to_float16(double x) { return __double2half(x); }
POLYC_DEV float polyc_bfloat16_to_f32(polyc_bfloat16 x) { return __bfloat162float(x); }
POLYC_DEV polyc_bfloat16 polyc_f32_to_bfloat16(float x) { return __float2bfloat16_rn(x); }
"""


class KernelBody(_Emitter):
    """Prints one launch's body: sequential loops and statements as the C backend
    does; mapped loops as strided loops over their CUDA index; a statement outside
    the loop of a mapped axis guarded to index 0.  In a reduction kernel, the
    reduction statement accumulates into the thread's ``polyc_acc``."""
    COALESCE = False    # (a thread's loops stay as the mapping made them)
    OUTER_VECTOR = False  # (a thread runs its loops one iteration at a time)
    REGIONS = False     # (no OpenMP region around host or device loops)
    HOST_ASM = False    # (nvcc: no gcc asm constraints in device code)

    def __init__(self, program: Program, kernel: Mapping):
        super().__init__(program)
        self.loop_printer.shifts = True
        self.axes = ({f"block.{a}" for a in kernel.block_axes}
                     | {f"thread.{a}" for a in kernel.thread_axes})
        self.covered: set[str] = set()
        self.reduction = kernel.reduction
        self.statements = tuple(kernel.statements)
        self.selectors = dict(getattr(kernel, "selectors", {}))
        self.host: tuple[str, ...] = ()
        #: instrumented emulation (backends/cuda/emulate.py): the kernel's
        #: number for reports; accesses of global tensors are checked
        self.checks: int | None = None
        self.writing = False
        #: emulating a kernel with shared buffers (so barriers): thread loops
        #: around each barrier-free part (:meth:`thread_loops`)
        self.phases = False
        self.in_threads = False
        self.reverse = False
        self.stored: L.StmtInstance | None = None
        #: the shared buffers' declarations, by name (printed at the top)
        self.shared: dict[str, c.Line] = {}
        #: a tensor-core launch: every thread of the block makes the call
        #: (the emulator starts them as POSIX threads)
        self.tensor_core = bool(getattr(kernel, "intrinsic", ""))
        #: a row kernel's barriers, the dependence behind each
        self.barriers = tuple(getattr(kernel, "barriers", ()))
        #: the CUDA function's name, and helper functions its emulation
        #: needs (a block reduction's tree), by name
        self.name = ""
        self.functions: dict[str, str] = {}
        if self.reduction:
            self.axes = {"global.x"}
            self.set_reduction(self.reduction)

    def set_reduction(self, statement: str) -> None:
        """Make ``statement`` (an update) the reduction that instances
        accumulate into ``polyc_acc`` of its accumulator type."""
        st = self.stmts[statement]
        dtype = self.dtypes[st.tensor]
        _, rtype = self._printer().typed(st.rhs, float_type_of(dtype))
        self.reduction, self.stored = statement, None
        self.acc_t = accumulator_type(dtype, rtype)
        self.acc_c = C_TYPES[self.acc_t]
        self.ident = identity(st.op, self.acc_t)

    def reduction_state(self) -> tuple:
        return (self.reduction, self.stored, getattr(self, "acc_t", None),
                getattr(self, "acc_c", None), getattr(self, "ident", None))

    def restore_reduction(self, state: tuple) -> None:
        self.reduction, self.stored, self.acc_t, self.acc_c, self.ident = state

    def barrier_epoch(self) -> list:
        """In an instrumented emulation, the start of a new phase of the
        block: accesses before it are ordered before those after it."""
        return [c.Statement("polyc_epoch++")] if self.checks is not None else []

    def thread_zero(self, inner: c.Generable) -> c.Block:
        """``inner`` as thread 0 of the block (emulator, outside the loops
        over the threads)."""
        body = [c.Line("const polyc_dim3 threadIdx = {0, 0, 0}; (void)threadIdx;")]
        if self.checks is not None:
            body.append(c.Statement(
                "polyc_me = 1 + ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x "
                "+ blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z)"))
        return c.Block(body + [inner])

    def intrinsic_call(self, s) -> c.Generable:
        """A statement tensorized onto the tensor-core GEMM: the call of
        :func:`.wmma.wmma_call`, made by every thread of the block."""
        if getattr(s.intrinsic, "operand_dtype", ""):
            return wmma_call(self, s)
        return super().intrinsic_call(s)

    def _access(self, tensor: str, idx: list[str]) -> str:
        """As the C backend's, but in an instrumented emulation every access
        of a global tensor goes through ``polyc_chk`` (bounds, races)."""
        if (self.checks is None or tensor.startswith(HOISTED) or tensor in self.locals):
            return super()._access(tensor, idx)
        i = self.arg_index[tensor]
        ctype = C_TYPES[self.dtypes[tensor]]
        return (f"(*({ctype} *)polyc_chk((void *){tensor_name(tensor)}, sizeof({ctype}), "
                f"{linear_offset(tensor, idx)}, polyc_n{i}, polyc_sw{i}, polyc_sr{i}, polyc_so{i}, "
                f"{int(self.writing)}, {self.checks}, {i}))")

    def written(self, pr, s) -> str:
        """The written element, checked as a write when instrumented (a
        read-modify-write for an update)."""
        self.writing = True
        try:
            return pr._access(s.lhs)
        finally:
            self.writing = False

    def accumulate(self, inst: L.StmtInstance) -> c.Block:
        """``polyc_acc = polyc_acc op rhs`` at ``inst``."""
        st = self.stmts[inst.statement]
        self.stored = self.stored or inst
        pr = self._printer()
        rhs, rtype = pr.typed(st.rhs, float_type_of(self.dtypes[st.tensor]))
        update = combine(st.op, "polyc_acc", convert(rhs, rtype, self.acc_t), self.acc_t)
        head = [c.Comment(comment_text(st.text))] if st.text else []
        return c.Block(head + self._iterators(zip(st.iterators, inst.args))
                       + [c.Statement(f"polyc_acc = {update}")])

    def combined(self, a: str, b: str) -> str:
        return combine(self.stmts[self.reduction].op, a, b, self.acc_t)

    def store(self, value: str, anywhere: bool = False) -> c.Generable:
        """``lhs = lhs op value`` (``value`` of the accumulator type): the
        output element, addressed through the host loops' iterators only
        (``anywhere``: through any loop around the reduction, the rows of a
        block reduction)."""
        if self.stored is None:
            return c.Comment("the reduction runs no instance")
        st = self.stmts[self.reduction]
        used = E.index_names(st.lhs)
        pairs = [(it, a) for it, a in zip(st.iterators, self.stored.args) if it in used]
        for _, a in pairs:
            assert anywhere or E.index_names(a) <= set(self.host), (st.name, a)
        dtype = self.dtypes[st.tensor]
        lhs = self.written(self._printer(), st)
        total = combine(st.op, convert(lhs, dtype, self.acc_t), value, self.acc_t)
        return c.Block(self._iterators(pairs)
                       + [c.Statement(f"{lhs} = {convert(total, self.acc_t, dtype)}")])

    def node(self, n: L.Node) -> c.Generable:
        if isinstance(n, L.Barrier):
            # a row kernel's barrier (polyc.schedule.gpu_rows); in the
            # emulator, where the next phase's loop over the threads starts
            why = self.barriers[n.number] if n.number < len(self.barriers) else ""
            head = [c.Comment(comment_text(f"barrier {why}"))]
            return c.Block(head + (self.barrier_epoch() if self.phases
                                   else [c.Statement("__syncthreads()")]))
        if isinstance(n, L.BlockReduce):
            return block_reduce(self, n)
        if self.phases and not self.in_threads and not _holds_barrier(n):
            # the emulator runs a barrier-free part of a kernel with shared
            # buffers as a loop over the block's threads
            self.in_threads = True
            try:
                return self.thread_loops(self.node(n))
            finally:
                self.in_threads = False
        if isinstance(n, L.For):
            n = replace(n, parallel=False, simd=False, reduction=False, collapse=1)
            if n.mapped:
                return self.mapped_for(n)
            acc = self.register_accumulator(n)
            if acc is not None:
                return acc
        if isinstance(n, L.StmtInstance):
            st = (self.accumulate(n) if n.statement == self.reduction
                  else self.statement(n))
            missing = sorted(self.axes - self.covered)
            if missing:
                return c.If(" && ".join(self._runs_here(n, a) for a in missing),
                            self._block(st))
            return st
        if isinstance(n, L.Launch):
            raise AssertionError("a launch inside a GPU kernel")
        return super().node(n)

    def _printer(self):
        """The C backend's statement printer, with shifts and masks for
        powers of two."""
        pr = super()._printer()
        pr.shifts = True            # no 64-bit divider: see CExprPrinter.shifts
        pr.fast_exp = pr.sincos_aliases = False     # the device's expf, sinf, cosf
        pr.select_fmax = False      # the device's fmaxf: one instruction
        return pr

    def register_accumulator(self, n: L.For) -> c.Generable | None:
        """A thread's sequential loop whose whole body is one instance of an
        update statement writing one element throughout (a GEMM's k loop
        below its thread loops): the element is read into a register before
        the loop, accumulated there in the loop's order, and stored once
        after it, instead of a load and a store per iteration.  The sum is
        the same, term by term (the accumulator has the output's type: half
        outputs keep their own path); ``None`` when the loop has another
        shape, runs the kernel's grid or block reduction, or is guarded to
        one thread of an axis."""
        body = _only_instance(n)
        if body is None or body.statement == self.reduction or self.axes - self.covered:
            return None
        st = self.stmts[body.statement]
        if st.kind != "update" or self.dtypes[st.tensor] not in ("float32", "float64"):
            return None
        dtype = self.dtypes[st.tensor]
        _, rtype = self._printer().typed(st.rhs, float_type_of(dtype))
        if accumulator_type(dtype, rtype) != dtype:
            return None         # a wider accumulator would round once instead of per term
        return self.reduction_loop(n, vectorize=False)

    def local(self, n: L.Local) -> c.Block:
        """A buffer in shared memory (:mod:`polyc.schedule.gpu_promotion`):
        declared ``__shared__``, once per kernel, with :data:`SHARED_PADDING` extra elements on
        its innermost dimension; a barrier between the copies and the rest
        of its body, and one at its end, so that the next iteration's
        copies wait for every thread's reads.  In the emulator: a plain
        array shared by the block's emulated threads, each part between two
        barriers a loop over the threads."""
        dims = [int(v) for v in n.sizes] or [1]
        if n.private:
            # a promotion to registers: one array per thread, no barrier (the
            # thread that copies an element is the one that uses it)
            return c.Block([c.Comment(f"registers {check_identifier(n.name)}"),
                            c.Line(f"{C_TYPES[n.dtype]} {tensor_name(n.name)}"
                                   f"{''.join(f'[{d}]' for d in dims)};"),
                            *self.poison(n), self.node(n.body)])
        if not self.phases and len(dims) >= 2:
            dims[-1] += SHARED_PADDING
        # declared once, at the top of the kernel (kernel_body): isl prints a
        # promoted loop several times (a peeled first iteration), and each
        # scope's __shared__ array would take memory of its own
        self.shared.setdefault(n.name, c.Line(
            f"{'' if self.phases else '__shared__ '}{C_TYPES[n.dtype]} "
            f"{tensor_name(n.name)}{''.join(f'[{d}]' for d in dims)};"))
        kids = list(n.body.children) if isinstance(n.body, L.Block) else [n.body]
        out: list = [c.Comment(f"shared buffer {check_identifier(n.name)}"),
                     *self.poison(n)]
        sync = self.barrier_epoch() if self.phases else [c.Statement("__syncthreads()")]
        prev = None
        for ch in kids:
            copy = self._copies_only(ch)
            if prev is not None and copy != prev:
                out += sync
            out.append(self.node(ch))
            prev = copy
        return c.Block(out + sync)

    def poison(self, n: L.Local) -> list:
        """In an instrumented emulation, a new buffer's bytes all 0xff (NaN
        for floats, -1 for integers), so that a read of an element no copy
        wrote shows in the results."""
        if self.checks is None:
            return []
        return [c.Statement(f"memset({tensor_name(n.name)}, 0xff, "
                            f"sizeof({tensor_name(n.name)}))")]

    def _copies_only(self, n: L.Node) -> bool:
        insts = [x for x in L.walk(n) if isinstance(x, L.StmtInstance)]
        return bool(insts) and all(self.stmts[x.statement].kind == "copy" for x in insts)

    def thread_loops(self, inner: c.Generable) -> c.Generable:
        """``inner`` for every thread of the block (emulator), last first
        when ``reverse``; instrumented: ``polyc_me`` names the thread."""
        body = [c.Line("const polyc_dim3 threadIdx = {polyc_tx, polyc_ty, polyc_tz};")]
        if self.checks is not None:
            body.append(c.Statement(
                "polyc_me = 1 + ((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x "
                "+ blockIdx.x) * (blockDim.x * blockDim.y * blockDim.z) + "
                "(polyc_tz * blockDim.y + polyc_ty) * blockDim.x + polyc_tx"))
        return over_threads(c.Block(body + [inner]), "blockDim", self.reverse)

    def _runs_here(self, inst: L.StmtInstance, axis: str) -> str:
        """The condition under which this block/thread runs ``inst`` on
        ``axis`` when isl printed no loop for the member mapped there: its
        selector (tile index, point value) modulo the blocks/threads on the
        axis is this block's/thread's index, as in :meth:`mapped_for`;
        index 0 for what has no selector (a reduction's degenerate loop, a
        copy of a promotion)."""
        sel = self.selectors.get(inst.statement, {}).get(axis)
        if sel is None:
            return f"{_index(axis)} == 0"
        st = self.stmts[inst.statement]
        args = dict(zip(st.iterators, inst.args))
        value = E.map_expr(sel, lambda x: args[x.name] if isinstance(x, E.Index) else None)
        return f"polyc_mod({self.loop_printer.index(value)}, {_count(axis)}) == {_index(axis)}"

    def mapped_for(self, n: L.For) -> c.For:
        """A loop mapped to an index, value-aligned: a block (a thread) runs
        the iterations whose index ``floor(value / step)`` (the tile index of
        a tile loop; the value itself for a point loop) is its index modulo
        the blocks (threads) on the axis; so an iteration runs on the same thread in every copy
        of the loop isl printed, whatever the copy's first value.  The
        iterations of a reduction's loop are spread over the whole grid."""
        ip = self.loop_printer.index
        it = loop_iterator_name(n.iterator)
        step = int(n.step)
        assert 0 < step < 2 ** 31 and n.mapped in self.axes, n
        self.covered.add(n.mapped)
        try:
            body = self.node(n.body)
        finally:
            self.covered.discard(n.mapped)
        init, what = ip(n.init), n.mapped.split(".")[0]
        if what == "global":
            start = f"{init} + INT64_C({step}) * {_index(n.mapped)}"
        elif what == "block" or step > 1:
            start = (f"{init} + INT64_C({step}) * polyc_mod({_index(n.mapped)} - "
                     f"polyc_floord({init}, INT64_C({step})), {_count(n.mapped)})")
        else:
            start = f"{init} + polyc_mod({_index(n.mapped)} - ({init}), {_count(n.mapped)})"
        return c.For(f"int64_t {it} = {start}", ip(n.cond),
                     f"{it} += INT64_C({step}) * {_count(n.mapped)}", self._block(body))


def over_threads(inner: c.Generable, dims: str, reverse: bool,
                 axes: str = "xyz") -> c.Generable:
    """``inner`` in loops over ``polyc_t<axis>`` from 0 to ``dims.<axis>``
    (the emulator's threads of a block; ``reverse``: last first)."""
    for axis in axes:
        v = f"polyc_t{axis}"
        head = ((f"int64_t {v} = {dims}.{axis} - 1", f"{v} >= 0", f"{v}--") if reverse
                else (f"int64_t {v} = 0", f"{v} < {dims}.{axis}", f"{v}++"))
        inner = c.For(*head, inner if isinstance(inner, c.Block) else c.Block([inner]))
    return inner


def _holds_barrier(n: L.Node) -> bool:
    """Whether ``n`` holds a barrier: a buffer in shared memory, a row
    kernel's barrier or block reduction."""
    return any((isinstance(x, L.Local) and not x.private)
               or isinstance(x, (L.Barrier, L.BlockReduce)) for x in L.walk(n))


def _index(mapped: str) -> str:
    what, axis = mapped.split(".")
    if what == "global":
        return (f"((int64_t)blockIdx.{axis} * (int64_t)blockDim.{axis} "
                f"+ (int64_t)threadIdx.{axis})")
    return f"(int64_t){'blockIdx' if what == 'block' else 'threadIdx'}.{axis}"


def _count(mapped: str) -> str:
    what, axis = mapped.split(".")
    if what == "global":
        return f"((int64_t)gridDim.{axis} * (int64_t)blockDim.{axis})"
    return f"(int64_t){'gridDim' if what == 'block' else 'blockDim'}.{axis}"


def _extents(em: _Emitter, program: Program) -> list:
    return [c.Initializer(c.Const(c.Value("int64_t", extent_name(t.name, d))),
                          em.extent_expr(t.name, d))
            for t in arguments(program) for d in range(1, t.ndim)]


def element_counts(em: _Emitter, program: Program) -> list:
    """``polyc_n<i>``: the element count of argument tensor ``i`` (for the
    instrumented emulation's bounds checks)."""
    out = []
    for i, t in enumerate(arguments(program)):
        n = " * ".join([f"({em.extent_expr(t.name, 0)})"]
                       + [extent_name(t.name, d) for d in range(1, t.ndim)]) if t.ndim else "1"
        out.append(c.Line(f"const int64_t polyc_n{i} = {n}; (void)polyc_n{i};"))
    return out


def launches(nest: L.Node, host: tuple[str, ...] = ()):
    """``(Launch, host iterators around it)`` in program order."""
    if isinstance(nest, L.Launch):
        yield nest, host
    elif isinstance(nest, L.For):
        yield from launches(nest.body, host + (nest.iterator,))
    elif isinstance(nest, L.If):
        yield from launches(nest.then, host)
        if nest.otherwise is not None:
            yield from launches(nest.otherwise, host)
    elif isinstance(nest, L.Block):
        for ch in nest.children:
            yield from launches(ch, host)
    elif isinstance(nest, L.StmtInstance):
        raise AssertionError(f"statement {nest.statement} outside every GPU kernel")


def _param_expr(pa, program: Program) -> E.Expr:
    """``pa`` (an ``isl.PwAff`` of the size parameters) as an expression."""
    return E.map_expr(pw_aff_to_expr(pa, program.context), as_param)


def _spec(program: Program, k: Mapping, host: tuple[str, ...], name: str) -> LaunchSpec:
    one = E.Const(1)
    grid, block = [one, one, one], [one, one, one]
    if k.intrinsic:     # a tensor-core launch (wmma.py): tiles of n, of m, batch
        grid = [E.map_expr(x, as_param) for x in k.launch_grid]
        return LaunchSpec(name, k.index, tuple(grid), (E.Const(k.tile[0]), one, one), host,
                          k.tile[0])
    for j, axis in enumerate(k.block_axes):
        grid[AXES.index(axis)] = _param_expr(k.grid[j], program)
    for j, axis in enumerate(k.thread_axes):
        block[AXES.index(axis)] = _param_expr(k.block[j], program)
    threads = 1
    for t in k.tile:
        threads *= t
    return LaunchSpec(name, k.index, tuple(grid), tuple(block), host, threads)


def parameters(program: Program, host: tuple[str, ...], restrict: str) -> list:
    out = [c.Value("int64_t", param_name(p)) for p in program.params]
    out += [c.Value("int64_t", loop_iterator_name(h)) for h in host]
    for t in arguments(program):
        const = "const " if t.role == "input" else ""
        out.append(c.Value(f"{const}{C_TYPES[t.dtype]} *{restrict}", tensor_name(t.name)))
    return out


def kernel_body(program: Program, launch: L.Launch, k: Mapping, host: tuple[str, ...],
                checks: int | None = None, *, emulated: bool = False,
                reverse: bool = False) -> tuple[c.Block, KernelBody]:
    """A launch's body (for a reduction kernel: up to each thread's
    accumulator) and the printer that printed it; ``checks``: the kernel's
    number in an instrumented emulation (element counts declared, accesses
    checked); ``emulated``: for the emulator, where a kernel with shared
    buffers runs per block, with a loop over the threads (``reverse``:
    last first) around each part between barriers (``em.phases``)."""
    em = KernelBody(program, k)
    em.host = host
    em.checks = checks
    em.phases = emulated and _holds_barrier(launch.body)
    em.name = launch_name(launch)
    em.reverse = reverse
    em.arg_index = {t.name: i for i, t in enumerate(arguments(program))}
    decls = _extents(em, program)
    if checks is not None:
        decls += element_counts(em, program)
    used = [c.Line(f"(void){param_name(p)};") for p in program.params]
    if k.reduction:
        decls.append(c.Line(f"{em.acc_c} polyc_acc = {em.ident};"))
    body = em.node(launch.body)
    return c.Block(decls + list(em.shared.values()) + used + [body]), em


def emit(program: Program, nest: L.Node, kernels: list[Mapping]) -> CudaSource:
    """The CUDA source of ``program`` running the mapped ``nest``."""
    by_index = {k.index: k for k in kernels}
    specs: dict[str, LaunchSpec] = {}
    parts = [f"/* polyc CUDA kernels for def {check_identifier(program.name)} */\n",
             _device_prelude(), device_source(variants(program))]
    for launch, host in launches(nest):
        k, name = by_index[launch.kernel], launch_name(launch)
        specs[name] = spec = _spec(program, k, host, name)
        decl = c.FunctionDeclaration(
            c.Value(f'extern "C" __global__ void __launch_bounds__({spec.threads})', name),
            parameters(program, host, "__restrict__"))
        body, em = kernel_body(program, launch, k, host)
        if k.reduction:
            parts.append(f"__device__ {em.acc_c} {name}_part[{REDUCE_MAX_BLOCKS}];\n"
                         f"__device__ unsigned int {name}_ticket;\n")
            body = c.Block(list(body.contents) + grid_reduction(em, name))
        parts.append(str(c.FunctionBody(decl, body)) + "\n")
    return CudaSource(text="\n".join(parts), launches=specs, host=nest,
                      params=tuple(program.params),
                      tensors=tuple(t.name for t in arguments(program)),
                      kernel_names=tuple(specs))
