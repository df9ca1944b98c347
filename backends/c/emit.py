"""C99/OpenMP code generation: (``ir.Program``, LoopNest) -> C source.

Emits one function ``polyc_kernel(const int64_t *params, void *const
*buffers, int32_t nthreads)``: ``params`` holds the size parameters in
``Program.params`` order, ``buffers`` one pointer per tensor in
``Program.tensors`` order (C-contiguous, row-major; the runtime guarantees
that no two buffers overlap, which makes ``restrict`` valid), ``nthreads`` the
OpenMP team size (0: the runtime default).  Index arithmetic is 64-bit.
Syntax is produced with cgen.
"""

from __future__ import annotations

from dataclasses import dataclass

import cgen as c

from polyc import expr as E
from polyc import loopnest as L
from polyc.ir import C_TYPES, Program, Statement
from polyc.isl_util import pw_aff_to_expr

from .cexpr import (
    CExprPrinter,
    check_identifier,
    combine,
    extent_name,
    iterator_name,
    param_name,
    tensor_name,
)

ENTRY = "polyc_kernel"

PRELUDE = r"""#include <stdint.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static inline int64_t polyc_floord(int64_t a, int64_t b)
{ int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t polyc_mod(int64_t a, int64_t b)
{ int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline int64_t polyc_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyc_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int32_t polyc_min_int32_t(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t polyc_max_int32_t(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int64_t polyc_min_int64_t(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t polyc_max_int64_t(int64_t a, int64_t b) { return a > b ? a : b; }
/* max=/min= reductions propagate NaN, as numpy's maximum/minimum do */
static inline float polyc_max_float(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float polyc_min_float(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double polyc_max_double(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double polyc_min_double(double a, double b) { return (a != a || a < b) ? a : b; }
/* floating-point % rounds the quotient toward minus infinity (numpy's remainder) */
static inline float polyc_rem_float(float a, float b)
{ float r = fmodf(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline double polyc_rem_double(double a, double b)
{ double r = fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""


_COMMENT_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                    " ()+-*/=!<>,.:?%&|_[]")


def comment_text(text: str, limit: int = 160) -> str:
    """User source shown in a C comment, made inert: printable ASCII of the
    expression alphabet only, no comment terminator, no trigraph."""
    flat = "".join(ch if ch in _COMMENT_SAFE else " " for ch in " ".join(text.split()))
    flat = flat.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
    return flat[:limit]


@dataclass(frozen=True)
class Source:
    """Generated C: ``text``, the ``entry`` symbol, and the argument spec
    (parameter names, tensor names, in ABI order)."""
    text: str
    entry: str
    params: tuple[str, ...]
    tensors: tuple[str, ...]


class _Emitter:
    def __init__(self, program: Program):
        self.program = program
        self.stmts = {s.name: s for s in program.statements}
        self.dtypes = {t.name: t.dtype for t in program.tensors}
        self.loop_printer = CExprPrinter(lambda n: check_identifier(n), self._access,
                                         self.dtypes.__getitem__)

    def _access(self, tensor: str, idx: list[str]) -> str:
        if not idx:
            return f"{tensor_name(tensor)}[0]"
        off = idx[0]
        for d in range(1, len(idx)):
            off = f"({off}) * {extent_name(tensor, d)} + {idx[d]}"
        return f"{tensor_name(tensor)}[{off}]"

    # -- prologue ---------------------------------------------------------------
    def prologue(self) -> list:
        p = self.program
        out: list = []
        for k, name in enumerate(p.params):
            out.append(c.Initializer(c.Const(c.Value("int64_t", param_name(name))),
                                     f"polyc_params[{k}]"))
        for k, t in enumerate(p.tensors):
            ct = C_TYPES[t.dtype]
            qual = "const " if t.role == "input" else ""
            out.append(c.Line(f"{qual}{ct} *restrict {tensor_name(t.name)} = "
                              f"({qual}{ct} *)polyc_buffers[{k}];"))
            for d in range(1, t.ndim):
                ext = pw_aff_to_expr(t.shape[d], p.context)
                ext = E.map_expr(ext, lambda x: E.Param(x.name) if isinstance(x, E.Index) else None)
                out.append(c.Initializer(c.Const(c.Value("int64_t", extent_name(t.name, d))),
                                         self.loop_printer.index(ext)))
        return out

    # -- statements -------------------------------------------------------------
    def statement(self, inst: L.StmtInstance) -> c.Generable:
        s: Statement = self.stmts[inst.statement]
        body: list = []
        for it, arg in zip(s.iterators, inst.args):
            body.append(c.Initializer(c.Const(c.Value("int64_t", iterator_name(it))),
                                      self.loop_printer.index(arg)))
        pr = CExprPrinter(iterator_name, self._access, self.dtypes.__getitem__)
        dtype = self.dtypes[s.tensor]
        lhs = pr._access(s.lhs)
        rhs = pr.value(s.rhs, dtype)
        if s.op == "=":
            body.append(c.Statement(f"{lhs} = {rhs}"))
        else:
            body.append(c.Statement(f"{lhs} = {combine(s.op, lhs, rhs, dtype)}"))
        if s.text:
            body.insert(0, c.Comment(comment_text(s.text)))
        return c.Block(body)

    def reduction_loop(self, n: L.For) -> c.Generable | None:
        """A loop over reduction iterators of one update statement, with the
        accumulator in a local variable (``omp simd reduction`` for + and *);
        ``None`` when the loop body does not have that shape."""
        body = n.body
        while isinstance(body, L.Block) and len(body.children) == 1:
            body = body.children[0]
        if not isinstance(body, L.StmtInstance):
            return None
        s = self.stmts[body.statement]
        if s.kind != "update" or s.op not in ("+", "*", "max", "min"):
            return None
        if s.tensor in {a.tensor for a in E.accesses(s.rhs)}:
            return None          # the accumulator is read elsewhere: no register copy
        outer, inner = [], []
        for it, arg in zip(s.iterators, body.args):
            moves = n.iterator in E.index_names(arg)
            if it not in s.reduction_iterators and moves:
                return None
            (inner if it in s.reduction_iterators else outer).append((it, arg))
        ip = self.loop_printer.index
        pr = CExprPrinter(iterator_name, self._access, self.dtypes.__getitem__)
        dtype = self.dtypes[s.tensor]
        lhs = pr._access(s.lhs)
        acc = "polyc_acc"
        loop_body = [c.Initializer(c.Const(c.Value("int64_t", iterator_name(it))), ip(arg))
                     for it, arg in inner]
        update = combine(s.op, acc, pr.value(s.rhs, dtype), dtype)
        loop_body.append(c.Statement(f"{acc} = {update}"))
        loop = self._for(n, c.Block(loop_body))
        pragma = ([c.Pragma(f"omp simd reduction({s.op}:{acc})")]
                  if s.op in ("+", "*") else [])
        block = [c.Initializer(c.Const(c.Value("int64_t", iterator_name(it))), ip(arg))
                 for it, arg in outer]
        block += [c.Comment(f"{s.name}: reduction with a register accumulator"),
                  c.Initializer(c.Value(C_TYPES[dtype], acc), lhs), *pragma, loop,
                  c.Statement(f"{lhs} = {acc}")]
        return c.Block(block)

    def _for(self, n: L.For, body: c.Generable) -> c.For:
        ip = self.loop_printer.index
        it = check_identifier(n.iterator)
        cond = n.cond
        if isinstance(cond, E.Binary) and cond.op in E.COMPARE_OPS:
            cond_text = f"{ip(cond.lhs)} {cond.op} {ip(cond.rhs)}"  # OpenMP canonical form
        else:
            cond_text = ip(cond)
        return c.For(f"int64_t {it} = {ip(n.init)}", cond_text, f"{it} += {n.step}",
                     self._block(body))

    # -- loops ------------------------------------------------------------------
    def node(self, n: L.Node) -> c.Generable:
        ip = self.loop_printer.index
        if isinstance(n, L.For) and n.reduction and not n.parallel:
            red = self.reduction_loop(n)
            if red is not None:
                return red
        if isinstance(n, L.For):
            loop = self._for(n, self.node(n.body))
            if n.parallel:
                simd = " simd" if n.simd else ""
                collapse = f" collapse({n.collapse})" if n.collapse > 1 else ""
                return c.Module([c.Pragma(f"omp parallel for{simd}{collapse} schedule(static) "
                                          "num_threads(polyc_team)"), loop])
            if n.simd:
                return c.Module([c.Pragma("omp simd"), loop])
            return loop
        if isinstance(n, L.If):
            other = None if n.otherwise is None else self._block(self.node(n.otherwise))
            return c.If(ip(n.cond), self._block(self.node(n.then)), other)
        if isinstance(n, L.Block):
            return c.Module([self.node(k) for k in n.children])
        if isinstance(n, L.StmtInstance):
            return self.statement(n)
        raise AssertionError(type(n))

    @staticmethod
    def _block(g: c.Generable) -> c.Block:
        if isinstance(g, c.Module):  # (a cgen Module is a Block without braces)
            return c.Block(list(g.contents))
        if isinstance(g, c.Block):
            return g
        return c.Block([g])


def emit(program: Program, nest: L.Node) -> Source:
    """Generate the C source of ``program`` executing ``nest``."""
    em = _Emitter(program)
    team = [c.Line("#ifdef _OPENMP"),
            c.Line("const int polyc_team = polyc_nthreads > 0 ? (int)polyc_nthreads "
                   ": omp_get_max_threads();"),
            c.Line("#endif"),
            c.Line("(void)polyc_nthreads;")]
    fn = c.FunctionBody(
        c.FunctionDeclaration(c.Value("void", ENTRY), [
            c.Value("const int64_t *restrict", "polyc_params"),
            c.Value("void *const *restrict", "polyc_buffers"),
            c.Value("int32_t", "polyc_nthreads")]),
        c.Block(em.prologue() + team + [em.node(nest)]))
    header = f"/* polyc kernel for def {check_identifier(program.name)} */\n"
    text = header + PRELUDE + "\n" + str(fn) + "\n"
    return Source(text=text, entry=ENTRY, params=tuple(program.params),
                  tensors=tuple(t.name for t in program.tensors))
