"""CUDA code generation: (``ir.Program``, mapped LoopNest, kernel mappings)
-> CUDA source, and the same kernels as C for the CPU emulator.

The loop nest comes from a schedule mapped by
:mod:`polyc.schedule.gpu_mapping`: what lies outside its
:class:`~polyc.loopnest.Launch` nodes runs on the host; each launch's body
runs on every thread of a grid.  Each launch becomes one kernel::

    extern "C" __global__ void __launch_bounds__(256)
    polyc_k0(int64_t p_M, ..., int64_t c0 /* host loops */, const float *__restrict__ t_A, ...)

whose body is printed once (statements exactly as the C backend prints them,
:class:`backends.c.emit._Emitter`) and pasted both into the CUDA source and
into the emulator's C (:func:`emulation_source`).  A loop mapped to a block
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
    check_identifier,
    extent_name,
    loop_iterator_name,
    param_name,
    tensor_name,
)
from ..c.emit import PRELUDE, Source, _Emitter, arguments
from ..c.gemmcall import as_param

#: CUDA axes, innermost mapped loop first (as polyc.schedule.gpu_mapping.AXES).
AXES = "xyz"

#: Emulated entry point (same ABI as the C backend's ``polyc_kernel``).
ENTRY = "polyc_kernel"


#: A kernel's mapping (polyc.schedule.gpu_mapping.KernelMapping: ``index``,
#: ``tile``, ``block_axes``, ``thread_axes``, ``grid``/``block`` as isl
#: piecewise affine functions of the sizes); the backend reads these only.
Mapping = object


def kernel_name(k: int) -> str:
    return f"polyc_k{int(k)}"


@dataclass(frozen=True)
class LaunchSpec:
    """How the host launches kernel ``kernel``: ``grid`` and ``block``
    (x, y, z) as expressions of the size parameters; ``host_iterators``: the
    host loops' iterators passed after the parameters."""
    kernel: int
    grid: tuple[E.Expr, E.Expr, E.Expr]
    block: tuple[E.Expr, E.Expr, E.Expr]
    host_iterators: tuple[str, ...]
    threads: int


@dataclass(frozen=True)
class CudaSource:
    """The CUDA translation unit (``text``), its kernels' launches, the host
    loop nest around them (``host``: a LoopNest whose leaves are
    :class:`~polyc.loopnest.Launch` nodes) and the argument spec (size
    parameters, tensors, in ABI order)."""
    text: str
    launches: dict[int, LaunchSpec]
    host: L.Node
    params: tuple[str, ...]
    tensors: tuple[str, ...]
    kernel_names: tuple[str, ...] = field(default=())


def _device_prelude() -> str:
    """The C prelude's helpers (index arithmetic, wrapping integer
    arithmetic, NaN-propagating max/min, ...) as device functions."""
    start = PRELUDE.index("/* index arithmetic")
    body = PRELUDE[start:].replace("static inline", "static __device__ __forceinline__")
    return "#include <stdint.h>\n#include <math.h>\n\n" + body


class _KernelBody(_Emitter):
    """Prints one launch's body: sequential loops and statements as the C
    backend does; mapped loops as strided loops over their CUDA index; a
    statement outside the loop of a mapped axis guarded to index 0."""

    def __init__(self, program: Program, kernel: Mapping):
        super().__init__(program)
        self.axes = ({f"block.{a}" for a in kernel.block_axes}
                     | {f"thread.{a}" for a in kernel.thread_axes})
        self.covered: set[str] = set()

    def node(self, n: L.Node) -> c.Generable:
        if isinstance(n, L.For):
            n = replace(n, parallel=False, simd=False, reduction=False, collapse=1)
            if n.mapped:
                return self.mapped_for(n)
        if isinstance(n, L.StmtInstance):
            st = self.statement(n)
            missing = sorted(self.axes - self.covered)
            if missing:
                cond = " && ".join(f"{_index(a)} == 0" for a in missing)
                return c.If(cond, self._block(st))
            return st
        if isinstance(n, (L.Local, L.Launch)):
            raise AssertionError(f"unexpected {type(n).__name__} in a GPU kernel")
        return super().node(n)

    def mapped_for(self, n: L.For) -> c.For:
        ip = self.loop_printer.index
        it = loop_iterator_name(n.iterator)
        step = int(n.step)
        assert 0 < step < 2 ** 31 and n.mapped in self.axes, n
        self.covered.add(n.mapped)
        try:
            body = self.node(n.body)
        finally:
            self.covered.discard(n.mapped)
        return c.For(f"int64_t {it} = {ip(n.init)} + INT64_C({step}) * {_index(n.mapped)}",
                     ip(n.cond), f"{it} += INT64_C({step}) * {_count(n.mapped)}",
                     self._block(body))


def _index(mapped: str) -> str:
    what, axis = mapped.split(".")
    return f"(int64_t){'blockIdx' if what == 'block' else 'threadIdx'}.{axis}"


def _count(mapped: str) -> str:
    what, axis = mapped.split(".")
    return f"(int64_t){'gridDim' if what == 'block' else 'blockDim'}.{axis}"


def _extents(em: _Emitter, program: Program) -> list:
    return [c.Initializer(c.Const(c.Value("int64_t", extent_name(t.name, d))),
                          em.extent_expr(t.name, d))
            for t in arguments(program) for d in range(1, t.ndim)]


def _launches(nest: L.Node, host: tuple[str, ...] = ()):
    """``(Launch, host iterators around it)`` in program order."""
    if isinstance(nest, L.Launch):
        yield nest, host
    elif isinstance(nest, L.For):
        yield from _launches(nest.body, host + (nest.iterator,))
    elif isinstance(nest, L.If):
        yield from _launches(nest.then, host)
        if nest.otherwise is not None:
            yield from _launches(nest.otherwise, host)
    elif isinstance(nest, L.Block):
        for ch in nest.children:
            yield from _launches(ch, host)
    elif isinstance(nest, L.StmtInstance):
        raise AssertionError(f"statement {nest.statement} outside every GPU kernel")


def _param_expr(pa, program: Program) -> E.Expr:
    """``pa`` (an ``isl.PwAff`` of the size parameters) as an expression."""
    return E.map_expr(pw_aff_to_expr(pa, program.context), as_param)


def _spec(program: Program, k: Mapping, host: tuple[str, ...]) -> LaunchSpec:
    one = E.Const(1)
    grid, block = [one, one, one], [one, one, one]
    for j, axis in enumerate(k.block_axes):
        grid[AXES.index(axis)] = _param_expr(k.grid[j], program)
    for j, axis in enumerate(k.thread_axes):
        block[AXES.index(axis)] = _param_expr(k.block[j], program)
    threads = 1
    for t in k.tile:
        threads *= t
    return LaunchSpec(k.index, tuple(grid), tuple(block), host, threads)


def _parameters(program: Program, host: tuple[str, ...], restrict: str) -> list:
    out = [c.Value("int64_t", param_name(p)) for p in program.params]
    out += [c.Value("int64_t", loop_iterator_name(h)) for h in host]
    for t in arguments(program):
        const = "const " if t.role == "input" else ""
        out.append(c.Value(f"{const}{C_TYPES[t.dtype]} *{restrict}", tensor_name(t.name)))
    return out


def _body(program: Program, launch: L.Launch, k: Mapping) -> c.Block:
    em = _KernelBody(program, k)
    decls = _extents(em, program)
    used = [c.Line(f"(void){param_name(p)};") for p in program.params]
    return c.Block(decls + used + [em.node(launch.body)])


def emit(program: Program, nest: L.Node, kernels: list[Mapping]) -> CudaSource:
    """The CUDA source of ``program`` running the mapped ``nest``."""
    by_index = {k.index: k for k in kernels}
    specs: dict[int, LaunchSpec] = {}
    parts = [f"/* polyc CUDA kernels for def {check_identifier(program.name)} */\n",
             _device_prelude()]
    for launch, host in _launches(nest):
        k = by_index[launch.kernel]
        specs[k.index] = spec = _spec(program, k, host)
        decl = c.FunctionDeclaration(
            c.Value(f'extern "C" __global__ void __launch_bounds__({spec.threads})',
                    kernel_name(k.index)),
            _parameters(program, host, "__restrict__"))
        parts.append(str(c.FunctionBody(decl, _body(program, launch, k))) + "\n")
    return CudaSource(text="\n".join(parts), launches=specs, host=nest,
                      params=tuple(program.params),
                      tensors=tuple(t.name for t in arguments(program)),
                      kernel_names=tuple(kernel_name(i) for i in sorted(specs)))


class _HostEmulator(_Emitter):
    """The emulator's host code: host loops as C loops, each launch as loops
    over its grid and its block's threads calling the kernel's body."""

    def __init__(self, program: Program, specs: dict[int, LaunchSpec], reverse: bool):
        super().__init__(program)
        self.specs = specs
        self.reverse = reverse

    def node(self, n: L.Node) -> c.Generable:
        if isinstance(n, L.Launch):
            return self.launch(self.specs[n.kernel])
        if isinstance(n, L.For):
            n = replace(n, parallel=False, simd=False, reduction=False, collapse=1)
        return super().node(n)

    def launch(self, spec: LaunchSpec) -> c.Block:
        ip = self.loop_printer.index
        lines: list = []
        for name, exprs in (("polyc_grid", spec.grid), ("polyc_block", spec.block)):
            lines.append(c.Line(f"const polyc_dim3 {name} = {{"
                                + ", ".join(ip(x) for x in exprs) + "};"))
        args = ", ".join([param_name(p) for p in self.program.params]
                         + [loop_iterator_name(h) for h in spec.host_iterators]
                         + [tensor_name(t.name) for t in arguments(self.program)])
        call = c.Statement(f"{kernel_name(spec.kernel)}(polyc_b, polyc_t, polyc_grid, "
                           f"polyc_block{', ' + args if args else ''})")
        inner: c.Generable = c.Block([
            c.Line("const polyc_dim3 polyc_t = {polyc_tx, polyc_ty, polyc_tz};"), call])
        for axis in "xyz":
            v = f"polyc_t{axis}"
            if self.reverse:
                inner = c.For(f"int64_t {v} = polyc_block.{axis} - 1", f"{v} >= 0", f"{v}--",
                              self._block(inner))
            else:
                inner = c.For(f"int64_t {v} = 0", f"{v} < polyc_block.{axis}", f"{v}++",
                              self._block(inner))
        inner = c.Block([c.Line("const polyc_dim3 polyc_b = {polyc_bx, polyc_by, polyc_bz};"),
                         inner])
        for axis in "xyz":
            v = f"polyc_b{axis}"
            inner = c.For(f"int64_t {v} = 0", f"{v} < polyc_grid.{axis}", f"{v}++",
                          self._block(inner))
        positive = " && ".join(f"{g}.{a} > 0" for g in ("polyc_grid", "polyc_block")
                               for a in "xyz")
        lines.append(c.If(positive, self._block(inner)))
        return c.Block(lines)


def emulation_source(program: Program, cuda: CudaSource, nest: L.Node,
                     kernels: list[Mapping], *, reverse: bool = False) -> Source:
    """C source running ``cuda``'s kernels on the CPU, with the C backend's
    entry point ``polyc_kernel(params, buffers, nthreads)``: each kernel's
    body (the text pasted into the CUDA source) becomes a C function of its
    block and thread indices, and each launch loops over the blocks, then
    over one block's threads, ``reverse``: last thread first."""
    by_index = {k.index: k for k in kernels}
    parts = [f"/* polyc CUDA kernels of def {check_identifier(program.name)}, "
             "emulated on the CPU */\n", PRELUDE,
             "typedef struct { int64_t x, y, z; } polyc_dim3;\n"]
    for launch, host in _launches(nest):
        k = by_index[launch.kernel]
        params = [c.Value("polyc_dim3", n)
                  for n in ("blockIdx", "threadIdx", "gridDim", "blockDim")]
        params += _parameters(program, host, "restrict")
        decl = c.FunctionDeclaration(c.Value("static void", kernel_name(k.index)), params)
        body = _body(program, launch, k)
        body = c.Block([c.Line("(void)gridDim; (void)blockDim; (void)blockIdx; "
                               "(void)threadIdx;")] + list(body.contents))
        parts.append(str(c.FunctionBody(decl, body)) + "\n")
    em = _HostEmulator(program, cuda.launches, reverse)
    fn = c.FunctionBody(
        c.FunctionDeclaration(c.Value("void", ENTRY), [
            c.Value("const int64_t *restrict", "polyc_params"),
            c.Value("void *const *restrict", "polyc_buffers"),
            c.Value("int32_t", "polyc_nthreads")]),
        c.Block(em.prologue() + [c.Line("(void)polyc_nthreads;"), em.node(nest)]))
    parts.append(str(fn) + "\n")
    return Source(text="\n".join(parts), entry=ENTRY, params=tuple(program.params),
                  tensors=tuple(t.name for t in arguments(program)))
