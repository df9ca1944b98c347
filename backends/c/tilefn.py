"""The tile function of a GEMM call: the elementwise statements after a
contraction (``GemmMatch.tile``, :func:`polyc.gemm_post.match_tile`: a
GELU, a chain of ufuncs on C) compiled with the kernel as a function that
the call applies to each block of C once its sums are final
(``polyc_gemm_post.tile`` in ``backends/c/intrinsics/gemm_api.h``)::

    typedef struct { const int64_t *params; void *const *buffers;
                     int64_t loops[1]; } polyc_kernel_tile0_ctx;
    static void polyc_kernel_tile0(const void *polyc_ctx, int64_t polyc_i0,
                                   int64_t polyc_mr, int64_t polyc_j0, int64_t polyc_nc)
    {
        ... the kernel's prologue from params and buffers ...
        const int64_t polyc_l0 = x->loops[0];           (a loop around the call)
        for (polyc_r = polyc_i0; polyc_r < polyc_i0 + polyc_mr; polyc_r++) {
            ... the row's digits of m ...
            #pragma omp simd
            for (polyc_s = polyc_j0; polyc_s < polyc_j0 + polyc_nc; polyc_s++) {
                ... the column's digits of n, each statement's iterators ...
                t_C[...] = <the statement>;
            }
        }
    }

The call site fills the context: the kernel's parameters and buffers, the
values of the loops around the call, the window offsets of the tensors the
statements read (:mod:`.windows`).  Row ``r`` of the call is the mixed-radix
number of the m digits (the last the fastest), column ``s`` of the n
digits, as the call's index maps (``polyc_gemm_dims``) define them; a call
per block of rows (``GemmMatch.block``, row fusion) starts at row
``block * ib`` of its loop ``ib``.
"""

from __future__ import annotations

import cgen as c

from polyc import expr as E
from polyc.errors import CompileError
from polyc.ir import Statement

from .cexpr import iterator_name, tensor_name
from .printer import StatementPrinter as Emitter
from .windows import offset_name


def _tensors(st: Statement) -> list[str]:
    return list(dict.fromkeys([st.tensor] + [a.tensor for a in E.accesses(st.rhs)]))


def _digits(var: str, group: tuple, ext1: dict, prefix: str) -> tuple[list, dict]:
    """Declarations of the digits of ``var`` (the last the fastest) and
    ``{iterator: C name}``."""
    names = {it: f"{prefix}{k}" for k, it in enumerate(group)}
    if len(group) == 1:
        return [], {group[0]: var}
    out = [c.Line(f"int64_t {prefix}q = {var};")]
    for it in reversed(group[1:]):
        out.append(c.Line(f"const int64_t {names[it]} = {prefix}q % ({ext1[it]}); "
                          f"{prefix}q /= ({ext1[it]});"))
    out.append(c.Line(f"const int64_t {names[group[0]]} = {prefix}q;"))
    return out, names


def tile_function(em: Emitter, m, name: str, ext1: dict) -> tuple[str, str]:
    """``(definition, context initializer)``: the C text of ``m``'s tile
    function ``name`` (with its context type), and the initializer of its
    context at the call site (``{polyc_params, polyc_buffers, {loops},
    {window offsets}}``).  ``ext1``: each scanned iterator's extent as C
    text (:func:`.gemmcall._roles`).  Raises ``CompileError`` when a
    statement reads a tensor the function cannot address (a local buffer of
    the kernel: contraction and promotion leave a call's tensors alone, so
    this is a polyc bug)."""
    c_acc = m.accesses[0][1]
    tensors = list(dict.fromkeys(t for st in m.tile for t in _tensors(st)))
    bad = [t for t in tensors if t in em.locals or t not in em.dtypes]
    if bad:
        raise CompileError(f"internal: the tile function of {m.statement} reads "
                           f"{', '.join(bad)}, a buffer of the kernel's body")
    windowed = [t for t in tensors if t in getattr(em, "windows", {})]
    fields = ["const int64_t *params;", "void *const *buffers;"]
    if m.loops:
        fields.append(f"int64_t loops[{len(m.loops)}];")
    if windowed:
        fields.append(f"int64_t woff[{len(windowed)}];")
    ctx_t = f"{name}_ctx"
    body: list = [
        c.Line(f"const {ctx_t} *polyc_x = (const {ctx_t} *)polyc_ctx;"),
        c.Line("const int64_t *restrict polyc_params = polyc_x->params;"),
        c.Line("void *const *restrict polyc_buffers = polyc_x->buffers;"),
        *em.prologue(),
        c.Line("(void)polyc_params; (void)polyc_buffers;")]
    where = {it: f"polyc_l{k}" for k, it in enumerate(m.loops)}
    body += [c.Line(f"const int64_t {v} = polyc_x->loops[{k}];")
             for k, v in enumerate(where.values())]
    body += [c.Line(f"const int64_t {offset_name(t)} = polyc_x->woff[{k}];")
             for k, t in enumerate(windowed)]
    row = "polyc_r"
    if m.block:       # a call per block of rows (GemmMatch.block): its first row
        row = f"({int(m.block)} * {where[m.block_iter]} + polyc_r)"
    rows, rnames = _digits(row, m.m, ext1, "polyc_m")
    cols, cnames = _digits("polyc_s", m.n, ext1, "polyc_n")
    where.update(rnames)
    where.update(cnames)
    pr = em._printer()
    inner: list = list(cols)
    for st in m.tile:
        if len(st.lhs.indices) != len(c_acc.indices):
            raise CompileError(f"internal: {st.name} does not write {m.c}'s element")
        its = [c.Line(f"const int64_t {iterator_name(i.name)} = {where[u.name]};")
               for i, u in zip(st.lhs.indices, c_acc.indices)]
        value = pr.value(st.rhs, em.dtypes[st.tensor])
        inner.append(c.Block(its + [c.Statement(f"{pr._access(st.lhs)} = {value}")]))
    loop = c.For("int64_t polyc_r = polyc_i0", "polyc_r < polyc_i0 + polyc_mr", "polyc_r++",
                 c.Block(rows + [c.Pragma("omp simd"),
                                 c.For("int64_t polyc_s = polyc_j0",
                                       "polyc_s < polyc_j0 + polyc_nc", "polyc_s++",
                                       c.Block(inner))]))
    fn = c.FunctionBody(
        c.FunctionDeclaration(c.Value("static void", name), [
            c.Value("const void *", "polyc_ctx"), c.Value("int64_t", "polyc_i0"),
            c.Value("int64_t", "polyc_mr"), c.Value("int64_t", "polyc_j0"),
            c.Value("int64_t", "polyc_nc")]),
        c.Block(body + [loop]))
    names = ", ".join(st.name for st in m.tile)
    text = (f"\n/* the tile function of {m.statement}'s call: {names} on each finished "
            f"block of {tensor_name(m.c)} */\n"
            f"typedef struct {{ {' '.join(fields)} }} {ctx_t};\n{fn}\n")
    init = ["polyc_params", "polyc_buffers"]
    if m.loops:
        init.append("{" + ", ".join(iterator_name(it) for it in m.loops) + "}")
    if windowed:
        init.append("{" + ", ".join(offset_name(t) for t in windowed) + "}")
    return text, "{" + ", ".join(init) + "}"
