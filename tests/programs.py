"""Hand-built ``ir.Program`` s for tests that must not depend on a frontend."""

from __future__ import annotations

from polyc import expr as E
from polyc import ir
from polyc.isl_util import aff_from_expr, box_set, const_pw_aff, param_space

import islpy as isl


def _p(params, name):
    return aff_from_expr(E.Param(name), param_space(params))


def matmul(dtype: str = "float32") -> ir.Program:
    """``C(m,n) +=! A(m,k) * B(k,n)``."""
    params = ("M", "N", "K")
    P = lambda n: _p(params, n)  # noqa: E731
    zero = const_pw_aff(param_space(params), 0)
    shapes = {"A": (P("M"), P("K")), "B": (P("K"), P("N")), "C": (P("M"), P("N"))}
    C = E.Access("C", (E.Index("m"), E.Index("n")))
    s0 = ir.make_statement(
        name="S0_init", iterators=("m", "n"), lhs=C, op="=", rhs=E.Const(0.0),
        domain=box_set(params, "S0_init", ("m", "n"), [(zero, P("M")), (zero, P("N"))]),
        shapes=shapes, kind="init")
    s1 = ir.make_statement(
        name="S0", iterators=("m", "n", "k"), lhs=C, op="+",
        rhs=E.Binary("*", E.Access("A", (E.Index("m"), E.Index("k"))),
                     E.Access("B", (E.Index("k"), E.Index("n")))),
        domain=box_set(params, "S0", ("m", "n", "k"),
                       [(zero, P("M")), (zero, P("N")), (zero, P("K"))]),
        shapes=shapes, kind="update", reduction_iterators=("k",))
    tensors = (ir.Tensor("A", dtype, shapes["A"], "input"),
               ir.Tensor("B", dtype, shapes["B"], "input"),
               ir.Tensor("C", dtype, shapes["C"], "output"))
    ctx = isl.Set.universe(param_space(params))
    for i in range(len(params)):
        ctx = ctx.lower_bound_val(isl.dim_type.param, i, isl.Val.zero(ctx.get_ctx()))
    return ir.Program("matmul", params, ctx, tensors, (s0, s1),
                      param_bindings={"M": ("A", 0), "K": ("A", 1), "N": ("B", 1)},
                      signature=("A", "B"))
