"""The call of the GEMM intrinsic (``backends/c/intrinsics/gemm.h``) that
a tensorized statement (:mod:`polyc.schedule.tensorize`) becomes.

An element's address is linear in the iterators (``GemmMatch.linear``): the
part of the loops around the call and the indices' constants make each
operand's base pointer, the scanned iterators' parts the strides: one per
role (``polyc_gemm_<f32|f64>``), or a mixed-radix map of digit extents and
strides per role for an implicit GEMM (``polyc_gemmx_<f32|f64>``).  The
call computes ``C = alpha * A . B + beta * C``: alpha is the product of the
update's scalar factors (``GemmMatch.alpha``), beta ``GemmMatch.beta``, else 0
with a folded initialisation, else 1; both printed as C expressions of the
element type (a rank-0 tensor argument reads its element).
"""

from __future__ import annotations

from dataclasses import dataclass

import cgen as c

from polyc import expr as E
from polyc.ir import C_TYPES, Statement

from .cexpr import extent_name, tensor_name
from .printer import StatementPrinter as Emitter
from .tilefn import tile_function
from .windows import offset_name


def as_param(x: E.Expr) -> E.Expr | None:
    """An identifier of an expression over the size parameters (isl's AST
    gives :class:`~polyc.expr.Index`) as the parameter it names."""
    return E.Param(x.name) if isinstance(x, E.Index) else None


def row_major_stride(em: Emitter, tensor: str, d: int) -> str:
    """Elements between consecutive indices of dimension ``d`` (row-major)."""
    nd = em.program.tensor(tensor).ndim
    return " * ".join(extent_name(tensor, j) for j in range(d + 1, nd)) or "1"


def _extent(em: Emitter, tensor: str, d: int) -> str:
    """The C expression of ``tensor``'s extent ``d`` (the prologue's
    ``d<d>_<tensor>`` constant where there is one)."""
    return extent_name(tensor, d) if d > 0 else f"({em.extent_expr(tensor, d)})"


def scalar(em: Emitter, e: E.Expr, dtype: str) -> str:
    """``e`` (a scalar expression: constants, size parameters, rank-0 tensor
    reads) as a C expression of ``dtype``'s type: a constant as its exact
    literal, anything else converted with a cast."""
    text = em._printer().value(e, dtype)
    return text if isinstance(e, E.Const) else f"({C_TYPES[dtype]})({text})"


def base_pointer(em: Emitter, tensor: str, acc: E.Access, scanned, first=None) -> str:
    """The address of ``acc``'s element with the ``scanned`` iterators at 0
    (the loops around a call fixed), or at the expression ``first[it]``
    where given (a row block's first row): ``t_X + stride_0 * (i_0) + ...``."""
    pr = em._printer()
    first = first or {}
    terms = []
    for d, idx in enumerate(acc.indices):
        idx = E.map_expr(idx, lambda e: first.get(e.name, E.Const(0)) if isinstance(e, E.Index)
                         and e.name in scanned else None)
        if not (isinstance(idx, E.Const) and idx.value == 0):
            terms.append(f"({row_major_stride(em, tensor, d)}) * ({pr.index(idx)})")
    if tensor in em.windows:                 # a thread window (.windows)
        terms.append(offset_name(tensor))
    return f"{tensor_name(tensor)} + ({' + '.join(terms) or '0'})"


@dataclass(frozen=True)
class GemmOperands:
    """A GEMM call's operands as C expressions: the extents ``M``, ``N``,
    ``K`` (products of each role's digit extents), each operand's base
    pointer and its strides along the GEMM's rows and columns (``a_rs``:
    A's stride along m, ``a_cs`` along k; ``b_rs`` along k, ``b_cs`` along
    n; ``c_rs``/``c_cs`` along m/n), and alpha, beta as expressions of the
    element type."""
    M: str
    N: str
    K: str
    a: str
    a_rs: str
    a_cs: str
    b: str
    b_rs: str
    b_cs: str
    c: str
    c_rs: str
    c_cs: str
    alpha: str
    beta: str
    #: per operand and role (``"a_m"``, ``"a_k"``, ``"b_k"``, ``"b_n"``,
    #: ``"c_m"``, ``"c_n"``): its digits' ``(extent, stride)``, the last digit
    #: the fastest; a window (``GemmMatch.gather``) is addressed only through these
    digits: tuple = ()


def block_first(m) -> dict:
    """``{row iterator: block * ib}`` for a call per block of rows
    (``GemmMatch.block``, row fusion: its first row); ``{}`` otherwise."""
    return ({m.m[0]: E.Binary("*", E.Const(m.block), E.Index(m.block_iter))}
            if m.block else {})


def _roles(em: Emitter, m):
    """``(stride(role, iterator), base(role), ext(group), ext1)`` of ``m``'s
    call: per role (C, A, B) the stride of an iterator and the base pointer,
    the extent of a group of digits, and each digit's extent."""
    tensors = [t for t, _ in m.linear]
    if getattr(m, "store", ""):
        # tensor cores: C's rounding store folded, the call stores into the
        # half tensor of C's shape, through the same indices
        tensors[0] = m.store
    lin = [coeffs for _, coeffs in m.linear]
    accs = [acc for _, acc in m.accesses]
    scanned = set(m.m + m.n + m.k)

    def stride(role: int, it: str) -> str:
        t = tensors[role]
        terms = [row_major_stride(em, t, d) if k == 1 else f"{k} * ({row_major_stride(em, t, d)})"
                 for d, coeffs in enumerate(lin[role]) for i, k in coeffs if i == it]
        return " + ".join(f"({x})" for x in terms) or "0"

    first = block_first(m)

    def base(role: int) -> str:
        return base_pointer(em, tensors[role], accs[role], scanned, first)
    ext1 = {it: _extent(em, t, d) if t is not None else
            f"({em.loop_printer.index(E.map_expr(d, as_param))})"
            for it, t, d in m.extents}
    if m.bounds:
        # the full part of a triangular domain's row blocks (callbox): each
        # scanned iterator's first value and extent depend on the call's loops
        ip = em._printer().index
        first = {it: lo for it, lo, _ in m.bounds}
        ext1.update((it, f"({ip(ext)})") for it, _, ext in m.bounds)
    elif m.block:
        ip = em._printer().index
        rows = ip(E.Const(m.block))                         # INT64_C(...)
        ext1[m.m[0]] = f"polyc_min({rows}, {ext1[m.m[0]]} - {rows} * ({ip(E.Index(m.block_iter))}))"

    def ext(group: tuple) -> str:
        return " * ".join(ext1[it] for it in group)
    return stride, base, ext, ext1


def gemm_operands(em: Emitter, s: Statement) -> GemmOperands:
    """The operands of the call of ``s`` (a statement tensorized onto
    GEMM), for a backend's own GEMM (the CUDA tensor-core one): the row and
    column strides (meaningful without a window, ``GemmMatch.gather``
    false) and every role's digits."""
    m = s.intrinsic
    stride, base, ext, ext1 = _roles(em, m)
    beta = m.beta if m.beta is not None else E.Const(0.0 if m.init else 1.0)
    alpha = m.alpha if m.alpha is not None else E.Const(1.0)
    C, A, B = 0, 1, 2
    digits = tuple((f"{name}_{r}", tuple((ext1[it], stride(role, it)) for it in group))
                   for name, role in (("a", A), ("b", B), ("c", C))
                   for r, group in (("m", m.m), ("n", m.n), ("k", m.k))
                   if (name, r) not in (("a", "n"), ("b", "m"), ("c", "k")))
    return GemmOperands(ext(m.m), ext(m.n), ext(m.k),
                        base(A), stride(A, m.m[-1]), stride(A, m.k[-1]),
                        base(B), stride(B, m.k[-1]), stride(B, m.n[-1]),
                        base(C), stride(C, m.m[-1]), stride(C, m.n[-1]),
                        scalar(em, alpha, m.dtype), scalar(em, beta, m.dtype), digits)


def gemm_call(em: Emitter, s: Statement) -> c.Generable:
    """``polyc_gemm_<f32|f64>(M, N, K, A, a_rs, a_cs, B, ..., C, c_rs, c_cs,
    alpha, beta, bias, bias_cs, relu, nthreads)``,
    ``polyc_gemmx_<f32|f64>(M, N, K, A, &a_rows, &a_cols, B, ...)`` or, for a
    band of C (``GemmMatch.band``), ``polyc_gemmt_<f32|f64>(M, N, K, A, ...,
    alpha, beta, band_lo, band_hi, nthreads)`` for one
    point of the loops around the call; one thread inside a parallel loop."""
    m = s.intrinsic
    sfx = "f32" if m.dtype == "float32" else "f64"
    beta = m.beta if m.beta is not None else E.Const(0.0 if m.init else 1.0)
    # a folded ``C *= beta`` with beta 0 at run time: the statement computes
    # C * 0 (NaN for NaN or inf elements), which BLAS's beta 0 (C not read)
    # would not; C is scaled first and the call adds (below)
    runtime_scale = m.scale is not None and not isinstance(beta, E.Const)
    beta_text = ("polyc_beta == 0 ? 1 : polyc_beta" if runtime_scale
                 else scalar(em, beta, m.dtype))
    # an update adding several products: one more call per product, adding
    calls = [_call(em, m, beta_text, sfx)] + [_call(em, t, "1", sfx) for t in m.terms]
    call = calls[0] if len(calls) == 1 else c.Block(calls)
    if not runtime_scale:
        return call
    stride, base, ext, _ = _roles(em, m)
    C = 0
    t = "float" if m.dtype == "float32" else "double"
    scale = c.Statement(f"polyc_c[polyc_r * ({stride(C, m.m[-1])}) + polyc_s * "
                        f"({stride(C, m.n[-1])})] *= polyc_beta")
    if m.band is not None and m.band.pair == "mn":   # only the band's elements
        lo, hi = band_bounds(em, m)
        scale = c.If(f"polyc_s - polyc_r >= {lo} && polyc_s - polyc_r <= {hi}", scale)
    return c.Block([
        c.Statement(f"const {t} polyc_beta = {scalar(em, beta, m.dtype)}"),
        c.If("polyc_beta == 0", c.Block([
            c.Statement(f"{t} *polyc_c = {base(C)}"),
            c.For("int64_t polyc_r = 0", f"polyc_r < {ext(m.m)}", "polyc_r++",
                  c.For("int64_t polyc_s = 0", f"polyc_s < {ext(m.n)}", "polyc_s++",
                        scale))])),
        *calls])


def band_bounds(em: Emitter, m) -> tuple[str, str]:
    """``GemmMatch.band`` as two C expressions of ``int64_t`` (an unbounded
    side: ``INT64_MIN`` or ``INT64_MAX``)."""
    return tuple(limit if x is None else
                 f"(int64_t)({em.loop_printer.index(E.map_expr(x, as_param))})"
                 for x, limit in ((m.band.lo, "INT64_MIN"), (m.band.hi, "INT64_MAX")))


#: The band kinds of polyc_gemmt (gemm_api.h).
_BAND_KIND = {"mn": "POLYC_GEMM_BAND_MN", "mk": "POLYC_GEMM_BAND_MK",
              "nk": "POLYC_GEMM_BAND_NK"}


def _call(em: Emitter, m, beta_text: str, sfx: str) -> c.Statement:
    """The call of one product of ``m`` (its ``beta`` as the C text
    ``beta_text``)."""
    C, A, B = 0, 1, 2
    stride, base, ext, ext1 = _roles(em, m)

    def dims(role: int, group: tuple) -> str:
        return (f"&(const polyc_gemm_dims){{{len(group)}, "
                f"{{{', '.join(ext1[it] for it in group)}}}, "
                f"{{{', '.join(stride(role, it) for it in group)}}}}}")
    threads = "1" if em.parallel_depth or not m.parallel else "polyc_threads"
    c_op = f"{base(C)}, {stride(C, m.m[-1])}, {stride(C, m.n[-1])}"
    alpha = m.alpha if m.alpha is not None else E.Const(1.0)
    tail = (f"{scalar(em, alpha, m.dtype)}, {beta_text}, "
            f"{tensor_name(m.bias) if m.bias else 'NULL'}, "
            f"{1 if m.bias else 0}, {1 if m.relu else 0}, {threads}")
    if m.band is not None:
        # a band (a triangle of C, A or B): polyc_gemmt; no epilogue
        lo, hi = band_bounds(em, m)
        return c.Statement(
            f"polyc_gemmt_{sfx}({ext(m.m)}, {ext(m.n)}, {ext(m.k)}, {base(A)}, "
            f"{stride(A, m.m[-1])}, {stride(A, m.k[-1])}, {base(B)}, "
            f"{stride(B, m.k[-1])}, {stride(B, m.n[-1])}, {c_op}, "
            f"{scalar(em, alpha, m.dtype)}, {beta_text}, {_BAND_KIND[m.band.pair]}, {lo}, "
            f"{hi}, {threads})")
    if m.post or m.post_relu or m.tile:
        return _post_call(em, m, sfx, c_op, dims, scalar(em, alpha, m.dtype), beta_text,
                          threads)
    if m.gather:
        return c.Statement(
            f"polyc_gemmx_{sfx}({ext(m.m)}, {ext(m.n)}, {ext(m.k)}, {base(A)}, "
            f"{dims(A, m.m)}, {dims(A, m.k)}, {base(B)}, {dims(B, m.k)}, "
            f"{dims(B, m.n)}, {c_op}, {tail})")
    return c.Statement(
        f"polyc_gemm_{sfx}({ext(m.m)}, {ext(m.n)}, {ext(m.k)}, {base(A)}, "
        f"{stride(A, m.m[-1])}, {stride(A, m.k[-1])}, {base(B)}, "
        f"{stride(B, m.k[-1])}, {stride(B, m.n[-1])}, {c_op}, {tail})")


def _post_call(em: Emitter, m, sfx: str, c_op: str, dims, alpha: str, beta: str,
               threads: str) -> c.Generable:
    """``polyc_gemmx_post_<t>`` with the post-operations of ``m``
    (``GemmMatch.post``, :mod:`polyc.gemm_post`) as a ``polyc_gemm_post``:
    each operand's address at the call's first element and its strides along
    the GEMM's row and column (0 where it does not move: a per-row vector
    has a column stride of 0)."""
    A, B = 1, 2
    _, base, ext, ext1 = _roles(em, m)
    scanned = set(m.scanned)
    first = block_first(m)      # (row fusion: the operands at the block's first row)

    def operand(op) -> str:
        if op is None:
            return "{0, 0, 0}"
        nd = len(op.access.indices)

        def along(it: str) -> str:
            terms = [row_major_stride(em, op.tensor, d) for d in range(nd)
                     if isinstance(op.access.indices[d], E.Index)
                     and op.access.indices[d].name == it]
            return " + ".join(f"({x})" for x in terms) or "0"
        return (f"{{{base_pointer(em, op.tensor, op.access, scanned, first)}, "
                f"{along(m.m[-1])}, {along(m.n[-1])}}}")
    by_role = {op.role: op for op in m.post}
    post = ", ".join(operand(by_role.get(r)) for r in ("mul", "add", "add2"))
    setup = []
    if m.tile:
        fn = em.add_function(f"tile_{m.statement}", lambda name: tile_function(em, m, name,
                                                                               ext1))
        setup.append(c.Statement(f"const {fn.name}_ctx polyc_tile_ctx = {fn.init}"))
        post += f", {m.post_relu}, {fn.name}, &polyc_tile_ctx"
    else:
        post += f", {m.post_relu}, NULL, NULL"
    return c.Block(setup + [
        c.Statement(f"const polyc_gemm_post polyc_post = {{{post}}}"),
        c.Statement(
            f"polyc_gemmx_post_{sfx}({ext(m.m)}, {ext(m.n)}, {ext(m.k)}, {base(A)}, "
            f"{dims(A, m.m)}, {dims(A, m.k)}, {base(B)}, {dims(B, m.k)}, "
            f"{dims(B, m.n)}, {c_op}, {alpha}, {beta}, &polyc_post, {threads})")])
