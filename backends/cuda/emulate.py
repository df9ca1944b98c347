"""The CPU emulator of mapped CUDA kernels (``Config(emulate=True)``).

The kernel bodies printed for the CUDA source (:func:`.emit.kernel_body`)
become C functions of ``(blockIdx, threadIdx, gridDim, blockDim)``; the host
loop nest runs as C, and each launch as loops over its grid and over one
block's threads (``reverse``: last thread first).  A reduction kernel's
function returns its thread's accumulator and the emulator combines them
with the CUDA kernel's own tree.  The result is an ordinary C
:class:`~backends.base.Source` with the C backend's entry point
``polyc_kernel(params, buffers, nthreads)``.

Instrumented mode (``Config(emulate_checks=True)``): every access of a
global tensor goes through ``polyc_chk``, which checks it against the
tensor's element count and, for the tensors a launch writes, keeps a shadow
of the thread that last wrote each element and of the thread(s) that read
it.  Two threads of one launch touching one element when one of them writes
it is a race (nothing orders two threads of a launch); the first bounds
violation or race is recorded in ``polyc_emu_report`` (kind, kernel,
tensor, element, the two threads), which
:class:`polyc.gpu_pipeline.EmulatedKernel` turns into an error.  An access
out of bounds reads and writes a dummy element instead, so nothing outside
the arrays is touched.
"""

from __future__ import annotations

from dataclasses import replace

import cgen as c

from polyc import loopnest as L
from polyc.ir import Program

from ..base import Source
from ..c.cexpr import check_identifier, loop_iterator_name, param_name, tensor_name
from ..c.emit import PRELUDE, _Emitter, arguments
from .blockreduce import emulated_tree
from .emit import (
    REDUCE_MAX_BLOCKS,
    REDUCE_THREADS,
    CudaSource,
    KernelBody,
    LaunchSpec,
    Mapping,
    element_counts,
    kernel_body,
    launch_name,
    launches,
    over_threads,
    parameters,
)
from .wmma import THREADS, emulated_source, variants

#: Emulated entry point (the C backend's ``polyc_kernel`` ABI).
ENTRY = "polyc_kernel"

#: Report kinds (``polyc_emu_report[0]``).
REPORT_BOUNDS, REPORT_RACE, REPORT_MEMORY = 1, 2, 3

CHECKS_PRELUDE = r"""
/* instrumented emulation: bounds and race checks (backends/cuda/emulate.py) */
int64_t polyc_emu_report[6];
static int64_t polyc_me;
/* phases: a block's barrier starts a new epoch; polyc_epoch0 is the first
   epoch of the block that runs (blocks run one after the other) */
static int64_t polyc_epoch = 1, polyc_epoch0 = 1;
static double polyc_dummy[4];
#define POLYC_ID(s) ((s) & 0xffffffffLL)
#define POLYC_EP(s) ((s) >> 32)
#define POLYC_SEVERAL 0xffffffffLL
static void polyc_report(int64_t kind, int64_t kernel, int64_t tensor, int64_t at,
                         int64_t a, int64_t b)
{
    if (polyc_emu_report[0]) return;
    polyc_emu_report[0] = kind; polyc_emu_report[1] = kernel; polyc_emu_report[2] = tensor;
    polyc_emu_report[3] = at; polyc_emu_report[4] = a; polyc_emu_report[5] = b;
}
/* whether an earlier access (epoch and thread in one word) is ordered before
   the current one: made by this block before one of its barriers */
static int polyc_ordered(int64_t s)
{
    return POLYC_EP(s) >= polyc_epoch0 && POLYC_EP(s) < polyc_epoch;
}
static int64_t polyc_who(int64_t s) { return POLYC_ID(s) == POLYC_SEVERAL ? -1 : POLYC_ID(s); }
static void *polyc_chk(void *base, int64_t size, int64_t off, int64_t n, int64_t *w,
                       int64_t *r, int64_t *o, int write, int64_t kernel, int64_t tensor)
{
    if (off < 0 || off >= n) {
        polyc_report(1, kernel, tensor, off, polyc_me, n);
        polyc_dummy[0] = 0;
        return polyc_dummy;
    }
    if (w) {
        /* w: last writer; r: its reader(s) since; o: a reader of an earlier
           block that r no longer holds */
        const int64_t me = polyc_me, now = (polyc_epoch << 32) | me;
        int64_t other = 0;
        if (w[off] && POLYC_ID(w[off]) != me && !polyc_ordered(w[off])) other = polyc_who(w[off]);
        else if (write && r[off] && POLYC_ID(r[off]) != me && !polyc_ordered(r[off]))
            other = polyc_who(r[off]);
        else if (write && o[off]) other = polyc_who(o[off]);
        if (other) polyc_report(2, kernel, tensor, off, other, me);
        if (write) w[off] = now;
        else if (!r[off] || polyc_ordered(r[off])) r[off] = now;
        else if (POLYC_EP(r[off]) < polyc_epoch0) { if (!o[off]) o[off] = r[off]; r[off] = now; }
        else if (POLYC_ID(r[off]) != me) r[off] = (polyc_epoch << 32) | POLYC_SEVERAL;
    }
    return (char *)base + off * size;
}
"""


#: The most blocks per axis the emulator runs of a tensor-core launch.
EMULATED_GRID = 3


class _HostEmulator(_Emitter):
    """The emulator's host code: host loops as C loops, each launch as loops
    over its grid and its block's threads calling the kernel's body; a
    reduction kernel's trees run as loops over the threads of each level."""
    REGIONS = False     # (no OpenMP region around host or device loops)
    COALESCE = False    # (host loops printed as the CUDA host code runs them)
    OUTER_VECTOR = False  # (host loops as the CUDA host code runs them)


    def __init__(self, program: Program, specs: dict[str, LaunchSpec], reverse: bool,
                 printers: dict[str, KernelBody], checks: bool):
        super().__init__(program)
        self.specs = specs
        self.reverse = reverse
        self.printers = printers
        self.checks = checks
        self.arg_index = {t.name: i for i, t in enumerate(arguments(program))}

    def node(self, n: L.Node) -> c.Generable:
        if isinstance(n, L.Launch):
            return self.launch(self.specs[launch_name(n)])
        if isinstance(n, L.For):
            n = replace(n, parallel=False, simd=False, reduction=False, collapse=1)
        return super().node(n)

    def _threads(self, inner: c.Generable, axes: str = "xyz") -> c.Generable:
        return over_threads(inner, "polyc_block", self.reverse, axes)

    def launch(self, spec: LaunchSpec) -> c.Block:
        ip = self.loop_printer.index
        em = self.printers[spec.name]
        lines: list = []
        for name, exprs in (("polyc_grid", spec.grid), ("polyc_block", spec.block)):
            lines.append(c.Line(f"const polyc_dim3 {name} = {{"
                                + ", ".join(ip(x) for x in exprs) + "};"))
        args = ", ".join([param_name(p) for p in self.program.params]
                         + [loop_iterator_name(h) for h in spec.host_iterators]
                         + [tensor_name(t.name) for t in arguments(self.program)])
        out = "&polyc_red[polyc_tx], " if em.reduction else ""
        call = c.Statement(f"{spec.name}(polyc_b, polyc_t, polyc_grid, "
                           f"polyc_block, {out}{args}".rstrip(", ") + ")")
        me = ([c.Statement("polyc_me = 1 + ((polyc_bz * polyc_grid.y + polyc_by) * polyc_grid.x "
                           "+ polyc_bx) * (polyc_block.x * polyc_block.y * polyc_block.z) + "
                           "(polyc_tz * polyc_block.y + polyc_ty) * polyc_block.x + polyc_tx")]
              if self.checks else [])
        if em.phases:       # the function loops over the threads of each phase itself
            inner: c.Generable = c.Block([
                c.Line("const polyc_dim3 polyc_t = {0, 0, 0};"), call])
        else:
            inner = self._threads(c.Block([
                c.Line("const polyc_dim3 polyc_t = {polyc_tx, polyc_ty, polyc_tz};"), *me, call]))
        after: list = []
        if em.reduction:
            after = [c.Statement(f"{spec.name}_tree(polyc_red, polyc_block.x)"),
                     c.Statement("polyc_part[polyc_bx] = polyc_red[0]")]
        epoch = [c.Statement("polyc_epoch0 = ++polyc_epoch")] if self.checks else []
        inner = c.Block([c.Line("const polyc_dim3 polyc_b = {polyc_bx, polyc_by, polyc_bz};"),
                         *epoch, inner] + after)
        for axis in "xyz":
            v = f"polyc_b{axis}"
            inner = c.For(f"int64_t {v} = 0", f"{v} < polyc_grid.{axis}", f"{v}++",
                          self._block(inner))
        body = [self._pool(spec) if em.tensor_core else inner]
        if em.reduction:
            body = [c.Line(f"{em.acc_c} polyc_red[{REDUCE_THREADS}], "
                           f"polyc_part[{REDUCE_MAX_BLOCKS}];"), inner,
                    self._threads(c.Block([
                        c.Line(f"{em.acc_c} polyc_a = {em.ident};"),
                        c.For("int64_t polyc_g = polyc_tx", "polyc_g < polyc_grid.x",
                              "polyc_g += polyc_block.x", c.Block([c.Statement(
                                  "polyc_a = " + em.combined("polyc_a", "polyc_part[polyc_g]"))])),
                        c.Statement("polyc_red[polyc_tx] = polyc_a")]), "x"),
                    c.Statement(f"{spec.name}_tree(polyc_red, polyc_block.x)"),
                    em.store("polyc_red[0]")]
        if self.checks:
            body = self.shadows(em) + body + self.shadows(em, free=True)
        positive = " && ".join(f"{g}.{a} > 0" for g in ("polyc_grid", "polyc_block")
                               for a in "xyz")
        lines.append(c.If(positive, c.Block(body)))
        return c.Block(lines)

    def _pool(self, spec: LaunchSpec) -> c.Block:
        """A tensor-core launch, whose threads meet at barriers inside the
        call: the block's threads as POSIX threads (``polyc_wmma_block``),
        each running the kernel's body for every block of the grid in
        turn (``<name>_thread``)."""
        fields = [param_name(p) for p in self.program.params] + [
            loop_iterator_name(h) for h in spec.host_iterators] + [
            tensor_name(t.name) for t in arguments(self.program)]
        init = ", ".join(["{polyc_tx, 0, 0}", "polyc_tgrid", "polyc_block"] + fields)
        # the call's tile loops and the batch loop stride over the grid, so a
        # grid of at most EMULATED_GRID blocks per axis computes the same
        # (and exercises the strides) in fewer barrier rounds
        cap = ", ".join(f"polyc_grid.{a} < {EMULATED_GRID} ? polyc_grid.{a} : {EMULATED_GRID}"
                        for a in "xyz")
        return c.Block([
            c.Line(f"const polyc_dim3 polyc_tgrid = {{{cap}}};"),
            c.Line(f"struct {spec.name}_run polyc_r[{THREADS}];"),
            c.For("int64_t polyc_tx = 0", f"polyc_tx < {THREADS}", "polyc_tx++",
                  c.Block([c.Statement(
                      f"polyc_r[polyc_tx] = (struct {spec.name}_run){{{init}}}")])),
            c.Statement(f"polyc_wmma_block({spec.name}_thread, (char *)polyc_r, "
                        "sizeof(polyc_r[0]), (int)polyc_block.x)")])

    def shadows(self, em: KernelBody, free: bool = False) -> list:
        """Allocate (``free``: release) the race shadows of the tensors the
        launch writes: ``polyc_sw<i>`` (last writer per element),
        ``polyc_sr<i>`` (its reader, or several), ``polyc_so<i>`` (a reader
        of an earlier block), each with the epoch of the access
        (``CHECKS_PRELUDE``)."""
        written = sorted({self.arg_index[em.stmts[s].tensor] for s in em.statements
                          if em.stmts[s].tensor in self.arg_index})
        out = []
        for i in written:
            names = [f"polyc_s{x}{i}" for x in "wro"]
            release = c.Statement("; ".join(f"free({v})" for v in names))
            null = c.Statement(" = ".join(names) + " = NULL")
            if free:
                out += [release, null]
            else:
                out += [c.Statement(f"{v} = (int64_t *)calloc((size_t)polyc_n{i} + 1, "
                                    "sizeof(int64_t))") for v in names]
                out.append(c.If(" || ".join(f"!{v}" for v in names), c.Block([
                    c.Statement(f"polyc_report({REPORT_MEMORY}, -1, {i}, polyc_n{i}, 0, 0)"),
                    release, null])))
        return out


def _thread_entry(program: Program, host: tuple[str, ...], name: str) -> str:
    """For a tensor-core launch: ``<name>_run`` (one thread's arguments)
    and ``<name>_thread``, the POSIX thread that runs the kernel's body for
    its thread index in every block of the grid, one block after the other
    (a barrier of the block's threads between two blocks, whose shared
    arrays are the same static ones)."""
    fields = [c.Value("polyc_dim3", n) for n in ("t", "grid", "block")]
    fields += parameters(program, host, "")
    struct = "struct " + name + "_run {\n" + "".join(f"  {f};\n" for f in fields) + "};\n"
    args = ", ".join(["polyc_b"] + [f"r->{f.name}" for f in fields])
    return (struct + f"static void *{name}_thread(void *p)\n{{\n"
            f"  const struct {name}_run *r = (const struct {name}_run *)p;\n"
            "  for (int64_t z = 0; z < r->grid.z; z++)\n"
            "    for (int64_t y = 0; y < r->grid.y; y++)\n"
            "      for (int64_t x = 0; x < r->grid.x; x++) {\n"
            "        const polyc_dim3 polyc_b = {x, y, z};\n"
            f"        {name}({args});\n"
            "        pthread_barrier_wait(&polyc_wmma_bar);\n"
            "      }\n  return NULL;\n}\n")


def emulation_source(program: Program, cuda: CudaSource, nest: L.Node,
                     kernels: list[Mapping], *, reverse: bool = False,
                     checks: bool = False) -> Source:
    """C source running ``cuda``'s kernels on the CPU, with the C backend's
    entry point ``polyc_kernel(params, buffers, nthreads)``: each kernel's
    body (the text pasted into the CUDA source) becomes a C function of its
    block and thread indices, and each launch loops over the blocks, then
    over one block's threads, ``reverse``: last thread first.  A reduction
    kernel's function returns its thread's accumulator; the emulator then
    combines them in the order the CUDA kernel does.  ``checks``: the
    instrumented mode of the module docstring."""
    by_index = {k.index: k for k in kernels}
    number = {name: i for i, name in enumerate(cuda.kernel_names)}
    # POSIX threads and barriers for tensor-core launches, before any header
    tensor_cores = variants(program)
    posix = "#define _GNU_SOURCE 1\n" if tensor_cores else ""
    parts = [f"/* polyc CUDA kernels of def {check_identifier(program.name)}, "
             f"emulated on the CPU */\n{posix}", PRELUDE,
             "typedef struct { int64_t x, y, z; } polyc_dim3;\n",
             emulated_source(tensor_cores)]
    if checks:
        parts += ["#include <stdlib.h>\n#include <string.h>\n", CHECKS_PRELUDE]
        parts += [f"static int64_t *polyc_sw{i}, *polyc_sr{i}, *polyc_so{i};\n"
                  for i in range(len(arguments(program)))]
    printers: dict[str, KernelBody] = {}
    for launch, host in launches(nest):
        k, name = by_index[launch.kernel], launch_name(launch)
        body, em = kernel_body(program, launch, k, host,
                               checks=number[name] if checks else None, emulated=True,
                               reverse=reverse)
        printers[name] = em
        params = [c.Value("polyc_dim3", n)
                  for n in ("blockIdx", "threadIdx", "gridDim", "blockDim")]
        if k.reduction:
            params.append(c.Value(f"{em.acc_c} *restrict", "polyc_out"))
            body = c.Block(list(body.contents) + [c.Statement("*polyc_out = polyc_acc")])
            parts.append(emulated_tree(em, f"{name}_tree"))
        parts += list(em.functions.values())
        params += parameters(program, host, "restrict")
        decl = c.FunctionDeclaration(c.Value("static void", name), params)
        body = c.Block([c.Line("(void)gridDim; (void)blockDim; (void)blockIdx; "
                               "(void)threadIdx;")] + list(body.contents))
        parts.append(str(c.FunctionBody(decl, body)) + "\n")
        if k.intrinsic:
            parts.append(_thread_entry(program, host, name))
    em = _HostEmulator(program, cuda.launches, reverse, printers, checks)
    counts = element_counts(em, program) if checks else []
    fn = c.FunctionBody(
        c.FunctionDeclaration(c.Value("void", ENTRY), [
            c.Value("const int64_t *restrict", "polyc_params"),
            c.Value("void *const *restrict", "polyc_buffers"),
            c.Value("int32_t", "polyc_nthreads")]),
        c.Block(em.prologue() + counts + [c.Line("(void)polyc_nthreads;"), em.node(nest)]))
    parts.append(str(fn) + "\n")
    return Source(text="\n".join(parts), entry=ENTRY, params=tuple(program.params),
                  tensors=tuple(t.name for t in arguments(program)))
