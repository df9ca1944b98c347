"""The post-operations of a GEMM call: the elementwise statement after a
contraction folded into the call, applied to each tile of C once its sum is
final (``polyc_gemmx_post`` in ``backends/c/intrinsics/gemm.h``).

A convolution followed by inference batch norm, a residual add and a ReLU
(a ResNet block's ``relu(conv(x) * s[c] + b[c] + x)``) or a matrix product
with a per-row bias (``W @ X + b[:, None]``) otherwise writes C, then reads
it back in a second kernel, on other threads than the ones that stored each
part of it.  The call instead applies

    C = relu(C * mul + add + add2)

on each finished tile, by the thread that computed it, while the tile is in
its caches.  Each operand is a per-row vector (indexed by the GEMM's row: an
output channel), a per-column vector, or a tensor read at C's own element
(the residual); each is optional, and so is the ReLU (C's ``fmax``, NaN
becomes 0, or numpy's ``maximum``, NaN kept).  The order of the arithmetic
is the statement's, so the result is the unfused program's, bit for bit.

:func:`match_post` recognises the statement (in any association that keeps
that order: ``C * s + b``, ``b + s * C``, ``(C * s + b) + x``) and checks
with isl that it writes exactly the elements the call writes, each once.
"""

from __future__ import annotations

from dataclasses import replace

from . import expr as E
from .callbox import called_elements
from .gemm_match import GemmMatch, PostOp
from .ir import Program, Statement


def each_called_once(program: Program, m: GemmMatch, st: Statement) -> bool:
    """Whether ``st`` writes exactly the elements of C the call of ``m``
    writes (isl, under the parameter context), each once."""
    ctx = program.parameter_domain()
    return (st.write.range().intersect_params(ctx).is_equal(
        called_elements(program, m).range().intersect_params(ctx))
        and st.write.intersect_domain(st.domain).intersect_params(ctx).is_injective())


def plain_indices(acc: E.Access) -> list[str] | None:
    """The iterator names of ``acc`` when every index is a distinct plain
    iterator (``C(i, j)``), else ``None``."""
    names = [i.name for i in acc.indices if isinstance(i, E.Index)]
    if len(names) != len(acc.indices) or len(set(names)) != len(names):
        return None
    return names


def _relu(e: E.Expr) -> tuple[E.Expr, int]:
    """``(x, mode)`` when ``e`` is a ReLU of ``x``: ``fmax(x, 0)`` or
    ``max(x, 0)`` (mode 1: NaN becomes 0, as C's fmax), or numpy's
    ``maximum`` as the graph layer writes it, ``(x > 0 || x != x) ? x : 0``
    (mode 2: NaN kept); ``(e, 0)`` otherwise."""
    zero = (lambda x: isinstance(x, E.Const) and float(x.value) == 0.0)
    if isinstance(e, E.Call) and e.fn in ("fmax", "max") and len(e.args) == 2 \
            and zero(e.args[1]):
        return e.args[0], 1
    if isinstance(e, E.Select) and zero(e.otherwise):
        x, c = e.then, e.cond
        if (isinstance(c, E.Binary) and c.op == "||" and isinstance(c.lhs, E.Binary)
                and c.lhs == E.Binary(">", x, c.lhs.rhs) and zero(c.lhs.rhs)
                and c.rhs == E.Binary("!=", x, x)):
            return x, 2
    return e, 0


def _chain(e: E.Expr, c_acc: E.Access) -> list[tuple[str, E.Access]] | None:
    """The operations that make ``e`` from C's element ``c_acc``, innermost
    first: ``[("*", s), ("+", b), ...]``, each with one operand access; or
    ``None`` when ``e`` is not such a chain (C read once, at its element)."""
    if e == c_acc:
        return []
    if not (isinstance(e, E.Binary) and e.op in ("*", "+")):
        return None
    for inner, other in ((e.lhs, e.rhs), (e.rhs, e.lhs)):   # (+ and * commute exactly)
        if isinstance(other, E.Access) and other.tensor != c_acc.tensor:
            rest = _chain(inner, c_acc)
            if rest is not None:
                return rest + [(e.op, other)]
    return None


def _layout(program: Program, m: GemmMatch, acc: E.Access, c_acc: E.Access) -> str | None:
    """``"row"``, ``"col"`` or ``"full"``: how operand ``acc`` (update's
    iterator names) is indexed relative to the call's C; ``None`` when the
    call cannot address it with a row and a column stride."""
    names = plain_indices(acc)
    if names is None:
        return None
    if acc.indices == c_acc.indices:
        shape, c_shape = program.tensor(acc.tensor).shape, program.tensor(c_acc.tensor).shape
        if len(shape) == len(c_shape) and all(a.is_equal(b) for a, b in zip(shape, c_shape)):
            return "full"      # C's strides, since its shape is C's
        return None
    loops = set(m.batch)
    for layout, group in (("row", m.m), ("col", m.n)):
        if len(group) == 1 and group[0] in names and set(names) <= loops | {group[0]}:
            return layout
    return None


def match_post(program: Program, m: GemmMatch, nxt: Statement) -> GemmMatch | None:
    """``m`` with ``nxt``, the statement right after its update, folded as the
    call's post-operations, or ``None`` when it cannot be: ``nxt`` assigns
    ``C = relu(C * mul + add + add2)`` at C's element (each operand and the
    ReLU optional, at most one ``mul``, applied first), with operands of C's
    dtype that :func:`_layout` can address; it writes exactly the elements
    the call writes, each once (isl, under the parameter context).  Not for
    calls over a band, of several products, in place, per block of rows or
    over part of a domain, nor on tensor cores."""
    if (m.band is not None or m.terms or m.inplace or m.block or m.parts or m.operand_dtype
            or m.store or nxt.kind != "assign" or nxt.op != "=" or nxt.tensor != m.c):
        return None
    c_acc = m.accesses[0][1]
    lhs = plain_indices(nxt.lhs)
    if lhs is None or plain_indices(c_acc) is None or len(lhs) != len(c_acc.indices):
        return None
    # the statement in the update's iterator names
    ren = {a: E.Index(b.name) for a, b in zip(lhs, c_acc.indices)}
    rhs = E.map_expr(nxt.rhs, lambda e: ren.get(e.name) if isinstance(e, E.Index) else None)
    x, relu = _relu(rhs)
    chain = _chain(x, c_acc)
    if chain is None or not (chain or relu) or len(chain) > 3:
        return None
    if any(op == "*" for op, _ in chain[1:]) or sum(op == "+" for op, _ in chain) > 2:
        return None
    ops: list[PostOp] = []
    roles = iter(("add", "add2"))
    for op, acc in chain:
        layout = _layout(program, m, acc, c_acc)
        if layout is None or program.tensor(acc.tensor).dtype != m.dtype:
            return None
        ops.append(PostOp("mul" if op == "*" else next(roles), acc.tensor, acc, layout))
    if not each_called_once(program, m, nxt):
        return None
    return replace(m, epilogue=nxt.name, post=tuple(ops), post_relu=relu)


def _tile_ready(m: GemmMatch) -> bool:
    """Whether the call of ``m`` can run a tile function
    (:func:`match_tile`): one plain call of ``polyc_gemmx_post``."""
    return not (m.band is not None or m.terms or m.inplace or m.block or m.parts
                or m.operand_dtype or m.store or m.bounds)


def _tile_statement(program: Program, m: GemmMatch, st: Statement) -> bool:
    """Whether ``st`` may run in the tile function of ``m``'s call: it
    assigns C's element at plain indices (every index of C), reads C only at
    that element, writes exactly the elements the call writes, each once
    (isl, :func:`each_called_once`)."""
    c_acc = m.accesses[0][1]
    if st.kind != "assign" or st.op != "=" or st.tensor != m.c:
        return False
    lhs = plain_indices(st.lhs)
    if lhs is None or len(lhs) != len(c_acc.indices):
        return False
    if any(a.tensor == m.c and a != st.lhs for a in E.accesses(st.rhs)):
        return False           # (another element of C: not final in this tile)
    return each_called_once(program, m, st)


def match_tile(program: Program, m: GemmMatch, after: list[Statement]) -> GemmMatch:
    """``m`` with the longest run of ``after`` (the statements right after
    its update or folded epilogue, in source order) that
    :func:`_tile_statement` accepts folded as the call's tile function:
    ``GemmMatch.tile``, compiled with the kernel and applied by the call to
    each block of C once its sums and post-operations are final
    (``polyc_gemm_post.tile`` in ``gemm_api.h``).  Any elementwise chain on
    C qualifies (a GELU, ``tanh``, a scale by a per-row tensor read through
    any affine index); it must not read another element of C.  A bias and
    ReLU folded into the store (``GemmMatch.bias``) become post-operations,
    since the call is then ``polyc_gemmx_post``."""
    if not _tile_ready(m):
        return m
    run: list[Statement] = []
    for st in after:
        if not _tile_statement(program, m, st):
            break
        run.append(st)
    if not run:
        return m
    if m.bias or m.relu:
        c_acc = m.accesses[0][1]
        post = ((PostOp("add", m.bias, E.Access(m.bias, (E.Index(m.n[-1]),)), "col"),)
                if m.bias else ())
        m = replace(m, bias=None, relu=False, post=post, post_relu=1 if m.relu else 0)
        assert len(m.n) == 1 and plain_indices(c_acc) is not None
    return replace(m, tile=tuple(run))
