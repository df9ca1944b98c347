"""The scalar factors of a GEMM call: which products of scalars a matched
update multiplies by (its alpha), and which statements next to the update
scale C so that the call can absorb them (beta before it, a new alpha after
it).

A scalar factor is a constant, a size parameter, a rank-0 tensor read or the
negation of one.  :func:`match_scale` recognises ``C(i, j) *= s``,
``C(i, j) = s * C(i, j)`` or ``C(i, j) = 0`` before the update (beta);
:func:`post_scale` ``C(i, j) = C(i, j) * s`` after it (alpha).  Each checks
with isl that the statement writes exactly the elements the call writes,
each once (:func:`polyc.gemm_post.each_called_once`).
"""

from __future__ import annotations

from . import expr as E
from .gemm_match import GemmMatch
from .gemm_post import each_called_once, plain_indices
from .ir import Program, Statement


def factors_of(e: E.Expr) -> list[E.Expr]:
    """The factors of a product in any association (``[e]`` when ``e`` is
    not a product)."""
    if isinstance(e, E.Binary) and e.op == "*":
        return factors_of(e.lhs) + factors_of(e.rhs)
    return [e]


def is_scalar(e: E.Expr) -> bool:
    """A factor the call can take as a scalar: a constant, a size parameter,
    a rank-0 tensor read, or the negation of one."""
    if isinstance(e, E.Unary) and e.op == "-":
        return is_scalar(e.operand)
    return isinstance(e, (E.Const, E.Param)) or (isinstance(e, E.Access) and not e.indices)


def product(factors: list[E.Expr]) -> E.Expr | None:
    """The product of ``factors`` (left-associated), ``None`` for none."""
    out = None
    for f in factors:
        out = f if out is None else E.Binary("*", out, f)
    return out


def tensors_of(e: E.Expr | None) -> set[str]:
    return set() if e is None else {a.tensor for a in E.accesses(e)}


def is_zero(e: E.Expr) -> bool:
    return isinstance(e, E.Const) and float(e.value) == 0.0


def post_scale(program: Program, m: GemmMatch, nxt: Statement) -> E.Expr | None:
    """The call's new alpha when ``nxt``, the statement after the update,
    scales the result: ``C(i, j) = C(i, j) * s`` (any association, ``s`` a
    product of scalars as in :func:`polyc.intrinsics.match_gemm`) over exactly the elements
    the call writes, each once, with the initialisation folded (``C =
    alpha * A . B`` then becomes ``C = (alpha * s) * A . B``: the same
    single rounding of each product as scaling the stored result; an
    attention's ``Q K^T * scale``); else ``None``."""
    if m.init is None or m.scale is not None or nxt.op != "=":
        return None
    s = self_scale(nxt)
    if s is None or tensors_of(s) & {m.c, m.a, m.b} or not each_called_once(program, m, nxt):
        return None
    return s if m.alpha is None else product([m.alpha, s])


def self_scale(st: Statement) -> E.Expr | None:
    """``s`` when ``st`` is ``C(i, j) = C(i, j) * s`` in any association of
    the factors, ``s`` a product of scalars (:func:`is_scalar`); else ``None``."""
    factors = factors_of(st.rhs)
    own = [f for f in factors if f == st.lhs]
    rest = [f for f in factors if f != st.lhs]
    if len(own) != 1 or not rest or not all(is_scalar(f) for f in rest):
        return None
    return product(rest)


def match_scale(program: Program, m: GemmMatch, cand: Statement) -> E.Expr | None:
    """The beta the call of ``m`` can absorb from ``cand`` (``C = alpha * A .
    B + beta * C``), or ``None`` when it cannot.

    ``cand`` must multiply by a scalar, or set to zero, exactly the output
    elements the call's update writes, each once:

    - ``C(i, j) *= s`` (an ``update`` with ``*``), ``C(i, j) = s * C(i, j)``
      or ``C(i, j) = C(i, j) * s`` (an ``assign``; any association of the
      factors): beta = ``s``, a product of scalar factors as in
      :func:`polyc.intrinsics.match_gemm` (constants, size parameters, rank-0 tensors);
    - ``C(i, j) = 0`` or a ``+=!`` initialisation to zero: beta = ``0.0``.

    Conditions: ``cand`` writes ``m.c`` through plain iterators; the
    elements it writes (isl, under the parameter context) equal those the
    update writes wherever its reduction is not empty (the update's write
    relation without the constraints on the reduction iterators ``m.k``:
    with ``K = 0`` the call still writes ``beta * C``, so the caller must
    run it wherever C has those elements, as with a folded
    initialisation), and the write is injective (no element scaled twice);
    its right-hand side reads no tensor the call reads or writes, except C
    at exactly the written element.  Where ``cand``'s instances run relative
    to the update is the caller's concern (:mod:`polyc.schedule.tensorize`).
    """
    stmt = program.statement(m.statement)
    if cand.name == stmt.name or cand.tensor != m.c or plain_indices(cand.lhs) is None \
            or m.inplace:       # (in place: beta 1, C is also read as an operand)
        return None
    if cand.kind in ("init", "assign") and is_zero(cand.rhs):
        beta: E.Expr | None = E.Const(0.0)
    elif cand.kind == "update" and cand.op == "*":
        factors = factors_of(cand.rhs)
        beta = product(factors) if all(is_scalar(f) for f in factors) else None
    elif cand.kind == "assign" and cand.op == "=":
        beta = self_scale(cand)
    else:
        return None
    if beta is None or tensors_of(beta) & ({m.c, m.a, m.b, m.bias} | tensors_of(m.alpha) | {
            x for t in m.terms for x in (t.a, t.b, *tensors_of(t.alpha))}):
        return None
    return beta if each_called_once(program, m, cand) else None
