"""Intrinsics, described polyhedrally, and the matching of statements onto them.

An intrinsic is a computation a backend implements by hand, near the
machine's peak.  Its description here is backend-free (see DESIGN.md): an
iteration domain and access relations.  :data:`GEMM` is the contraction

    Gemm[m, n, k] : 0 <= m < M, 0 <= n < N, 0 <= k < K
    C[m, n] += A[m, k] * B[k, n]

implemented by ``backends/c/intrinsics/gemm.h`` (packed panels, a register-
blocked MR x NR micro-kernel for AVX-512, AVX2 or portable C chosen by the
compiler's target macros, OpenMP inside; BLIS's loop structure).  The
operands are addressed through strides, so a transposed operand (``B(n, k)``,
``A(k, m)``) or any dimension order of a row-major tensor matches too.

:func:`match_gemm` matches one statement: a ``+`` reduction update of a
product of two plain accesses.  Its iterators are classified by the tensors
they index (batch: all three; m: C and A; n: C and B; k: A and B), the
intrinsic's access relations are built for that classification and compared
with the statement's by isl map equality, and the statement's domain must be
the full box the tensor extents give.  A match is returned as a
:class:`GemmMatch`; a mismatch as the reason (a string), which
``explain`` and the generated source report.

Source: tensorization as matching of access relations, Bondhugula et al.,
"High-performance GPU/CPU tensor contraction via polyhedral tensorization"
and TVM's tensorize; the GEMM itself, Goto and van de Geijn, ACM TOMS 2008.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from . import expr as E
from .bounds import tensor_box
from .ir import Program, Statement

#: The float dtypes the GEMM intrinsic implements.
GEMM_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class GemmMatch:
    """``statement`` (C[...] += A[...] * B[...]) as batched GEMM calls.

    ``batch`` iterators stay loops around the call; ``m``, ``n``, ``k`` are
    the iterators the intrinsic scans; ``c``, ``a``, ``b`` the tensors (``a``
    holds m and k, ``b`` k and n); ``init`` the ``+=!`` initialisation folded
    into the call (it then overwrites C instead of accumulating)."""
    statement: str
    init: str | None
    dtype: str
    batch: tuple[str, ...]
    m: tuple[str, ...]
    n: tuple[str, ...]
    k: tuple[str, ...]
    c: str
    a: str
    b: str
    #: ``(tensor, access)`` of C, A and B as the statement wrote them
    accesses: tuple = ()
    #: the elementwise statement folded into the call's store (``C = C + bias(n)``
    #: and/or ``C = fmax(C, 0)``), its bias tensor and whether it applies relu
    epilogue: str | None = None
    bias: str | None = None
    relu: bool = False
    #: whether the call may use the kernel's OpenMP team (``Config.parallel``)
    parallel: bool = True

    def describe(self) -> str:
        roles = ", ".join(f"{r}={'*'.join(g)}" for r, g in
                          (("m", self.m), ("n", self.n), ("k", self.k)))
        if self.batch:
            roles += f", batch {', '.join(self.batch)}"
        extra = "; initialisation folded" if self.init else ""
        if self.epilogue:
            parts = ([f"+ {self.bias}(n)"] if self.bias else []) + (["relu"] if self.relu else [])
            extra += f"; epilogue {self.epilogue} ({', '.join(parts)}) fused into the store"
        return (f"{self.statement} tensorized onto gemm ({roles}; C={self.c}, A={self.a}, "
                f"B={self.b}{extra})")


def _plain(acc: E.Access) -> list[str] | None:
    names = [i.name for i in acc.indices if isinstance(i, E.Index)]
    if len(names) != len(acc.indices) or len(set(names)) != len(names):
        return None
    return names


def _relation(stmt: Statement, tensor: str, idx: list[str]) -> isl.Map:
    """``{ S[iterators] -> tensor[idx] }`` for every point of ``stmt``'s
    space, built from the intrinsic's side (isl)."""
    params = stmt.domain.get_space().get_var_names(isl.dim_type.param)
    text = (f"[{', '.join(params)}] -> {{ {stmt.name}[{', '.join(stmt.iterators)}] -> "
            f"{tensor}[{', '.join(idx)}] }}")
    return isl.Map(text, context=stmt.domain.get_ctx())


def match_gemm(program: Program, stmt: Statement) -> GemmMatch | str:
    """Match ``stmt`` onto :data:`GEMM`; the reason it does not match otherwise."""
    if stmt.kind != "update" or stmt.op != "+":
        return "not a += reduction"
    rhs = stmt.rhs
    if not (isinstance(rhs, E.Binary) and rhs.op == "*"
            and isinstance(rhs.lhs, E.Access) and isinstance(rhs.rhs, E.Access)):
        return "the right-hand side is not a product of two tensor elements"
    c_idx, x_idx, y_idx = _plain(stmt.lhs), _plain(rhs.lhs), _plain(rhs.rhs)
    if c_idx is None or x_idx is None or y_idx is None:
        return "an index is not a plain iterator (offset, stride or repeated)"
    names = {stmt.tensor, rhs.lhs.tensor, rhs.rhs.tensor}
    if len(names) != 3:
        return "an operand is also the output, or both operands are one tensor"
    dtypes = {program.tensor(t).dtype for t in names}
    if len(dtypes) != 1 or next(iter(dtypes)) not in GEMM_DTYPES:
        return f"operand dtypes {sorted(dtypes)} (gemm takes one of {', '.join(GEMM_DTYPES)})"
    cs, xs, ys = set(c_idx), set(x_idx), set(y_idx)
    batch = [i for i in stmt.iterators if i in cs and i in xs and i in ys]
    m = [i for i in stmt.iterators if i in cs and i in xs and i not in ys]
    n = [i for i in stmt.iterators if i in cs and i in ys and i not in xs]
    k = [i for i in stmt.iterators if i in xs and i in ys and i not in cs]
    if len(batch) + len(m) + len(n) + len(k) != len(stmt.iterators):
        return "an iterator indexes only one tensor (a sum or broadcast, not a contraction)"
    if not k:
        return "no iterator is summed over both operands (an elementwise product)"
    if not m or not n:
        return "no output dimension comes from one operand alone (an outer or inner " \
               "product shape, not a matrix product)"
    a, b = (rhs.lhs, rhs.rhs)
    for role, group, where in (("m", m, (c_idx, x_idx)), ("n", n, (c_idx, y_idx)),
                               ("k", k, (x_idx, y_idx))):
        for idx in where:
            pos = [idx.index(i) for i in group]
            if pos != list(range(pos[0], pos[0] + len(pos))):
                return (f"the {role} dimensions ({', '.join(group)}) are not consecutive, in "
                        f"one order, in every tensor (grouping them needs that)")
    for t, idx, own in ((stmt.tensor, c_idx, m + n), (a.tensor, x_idx, m + k),
                        (b.tensor, y_idx, k + n)):
        if idx and idx[-1] not in own:
            return (f"{t}'s innermost dimension {idx[-1]} is a batch dimension: each call "
                    "would be a small strided product; the loops vectorise along it instead")
    # the intrinsic's access relations under this classification, compared
    # with the statement's by isl map equality
    want = {stmt.tensor: _relation(stmt, stmt.tensor, c_idx),
            a.tensor: _relation(stmt, a.tensor, x_idx),
            b.tensor: _relation(stmt, b.tensor, y_idx)}
    have = {stmt.tensor: stmt.write}
    for r in stmt.reads:
        have.setdefault(r.get_tuple_name(isl.dim_type.out), r)
    for t, rel in want.items():
        if not rel.intersect_domain(stmt.domain).is_equal(have[t].intersect_domain(stmt.domain)):
            return f"the access relation of {t} differs from the intrinsic's"
    # the domain must be the whole box the extents give (no triangle, no
    # offset): every point whose three accesses are in bounds
    ctx = program.parameter_domain()
    box = isl.Set.universe(stmt.domain.get_space())
    for t, rel in want.items():
        box = box.intersect(rel.intersect_range(tensor_box(program, t)).domain())
    dom = stmt.domain.intersect_params(ctx)
    if not dom.is_equal(box.intersect_params(ctx)):
        return "the iteration domain is not the full box of the tensor extents"
    return GemmMatch(statement=stmt.name, init=_folded_init(program, stmt), dtype=dtypes.pop(),
                     batch=tuple(batch), m=tuple(m), n=tuple(n), k=tuple(k), c=stmt.tensor,
                     a=a.tensor, b=b.tensor,
                     accesses=((stmt.tensor, stmt.lhs), (a.tensor, a), (b.tensor, b)))


def _folded_init(program: Program, stmt: Statement) -> str | None:
    """The ``+=!`` initialisation of ``stmt`` that the call can absorb: the
    statement right before it, of kind ``init``, writing exactly the output
    elements ``stmt`` writes, with no other statement in between."""
    stmts = list(program.statements)
    i = stmts.index(stmt)
    if i == 0:
        return None
    prev = stmts[i - 1]
    if prev.kind != "init" or prev.tensor != stmt.tensor or prev.reads:
        return None
    ctx = program.parameter_domain()
    written = prev.write.range().intersect_params(ctx)
    full = tensor_box(program, prev.tensor).intersect_params(ctx)
    if not (written.is_equal(full) and stmt.write.range().intersect_params(ctx)
            .is_subset(written)):
        return None
    if not (isinstance(prev.rhs, E.Const) and float(prev.rhs.value) == 0.0):
        return None
    return prev.name


def _is_zero(e: E.Expr) -> bool:
    return isinstance(e, E.Const) and float(e.value) == 0.0


def match_epilogue(program: Program, m: GemmMatch) -> GemmMatch:
    """``m`` with the statement right after it folded into the call's store
    when that statement is ``C = C + bias(n)``, ``C = fmax(C, 0)`` or
    ``C = fmax(C + bias(n), 0)`` over every element of C (an MLP layer's bias
    and ReLU): the call then applies it on the last pass over each C tile
    instead of a second pass over C."""
    stmts = list(program.statements)
    i = stmts.index(program.statement(m.statement))
    if i + 1 >= len(stmts) or m.batch or len(m.n) != 1:
        return m
    nxt = stmts[i + 1]
    c_acc = dict(m.accesses)[m.c]
    if nxt.kind != "assign" or nxt.tensor != m.c or _plain(nxt.lhs) is None:
        return m
    ren = dict(zip((x.name for x in nxt.lhs.indices), (x.name for x in c_acc.indices)))
    n_name = next(k for k, v in ren.items() if v == m.n[0])
    e, relu = nxt.rhs, False
    if isinstance(e, E.Call) and e.fn in ("fmax", "max") and len(e.args) == 2 \
            and _is_zero(e.args[1]):
        e, relu = e.args[0], True
    bias = None
    if isinstance(e, E.Binary) and e.op == "+" and isinstance(e.rhs, E.Access) \
            and len(e.rhs.indices) == 1 and isinstance(e.rhs.indices[0], E.Index) \
            and e.rhs.indices[0].name == n_name and e.rhs.tensor not in (m.c, m.a, m.b) \
            and program.tensor(e.rhs.tensor).dtype == m.dtype:
        bias, e = e.rhs.tensor, e.lhs
    if not (isinstance(e, E.Access) and e.tensor == m.c and e.indices == nxt.lhs.indices):
        return m
    if bias is None and not relu:
        return m
    ctx = program.parameter_domain()
    if not nxt.write.range().intersect_params(ctx).is_equal(
            tensor_box(program, m.c).intersect_params(ctx)):
        return m
    return replace(m, epilogue=nxt.name, bias=bias, relu=relu)
