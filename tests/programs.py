"""Hand-built ``ir.Program`` s for tests that must not depend on a frontend."""

from __future__ import annotations

import islpy as isl

from polyc import access, ir
from polyc import expr as E
from polyc.isl_util import aff_from_expr, box_set, const_pw_aff, param_space


def _p(params, name):
    return aff_from_expr(E.Param(name), param_space(params))


def matmul(dtype: str = "float32") -> ir.Program:
    """``C(m,n) +=! A(m,k) * B(k,n)``."""
    params = ("M", "N", "K")
    P = lambda n: _p(params, n)  # noqa: E731
    zero = const_pw_aff(param_space(params), 0)
    shapes = {"A": (P("M"), P("K")), "B": (P("K"), P("N")), "C": (P("M"), P("N"))}
    C = E.Access("C", (E.Index("m"), E.Index("n")))
    s0 = access.make_statement(
        name="S0_init", iterators=("m", "n"), lhs=C, op="=", rhs=E.Const(0.0),
        domain=box_set(params, "S0_init", ("m", "n"), [(zero, P("M")), (zero, P("N"))]),
        shapes=shapes, kind="init")
    s1 = access.make_statement(
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


def _pa(params, e):
    if isinstance(e, int):
        return const_pw_aff(param_space(params), e)
    if isinstance(e, str):
        return _p(params, e)
    return aff_from_expr(e, param_space(params))


def build(name, params, tensors, stmts, signature=None) -> ir.Program:
    """A Program from a compact description.

    ``tensors``: ``{name: (dtype, [extent...], role)}`` with extents given as
    ints, parameter names or expression trees; ``stmts``: tuples
    ``(name, iterators, [(lo, hi)...], lhs, op, rhs, kind, reduction_iterators)``.
    """
    params = tuple(params)
    shapes = {t: tuple(_pa(params, e) for e in spec[1]) for t, spec in tensors.items()}
    statements = []
    for (sname, its, bounds, lhs, op, rhs, kind, red) in stmts:
        dom = box_set(params, sname, its, [(_pa(params, lo), _pa(params, hi)) for lo, hi in bounds])
        statements.append(access.make_statement(
            name=sname, iterators=its, domain=dom, lhs=lhs, op=op, rhs=rhs,
            shapes=shapes, kind=kind, reduction_iterators=red))
    ts = tuple(ir.Tensor(t, spec[0], shapes[t], spec[2]) for t, spec in tensors.items())
    bindings = {}
    for t, spec in tensors.items():
        if spec[2] != "input":
            continue
        for d, e in enumerate(spec[1]):
            if isinstance(e, str) and e not in bindings:
                bindings[e] = (t, d)
    ctx = isl.Set.universe(param_space(params))
    for i in range(len(params)):
        ctx = ctx.lower_bound_val(isl.dim_type.param, i, isl.Val.zero(ctx.get_ctx()))
    sig = signature or tuple(t for t, spec in tensors.items() if spec[2] == "input")
    return ir.Program(name, params, ctx, ts, tuple(statements),
                      param_bindings=bindings, signature=sig)


I, C_, A_ = E.Index, E.Const, E.Access


def producer_consumer() -> ir.Program:
    """``B(i) = A(i) * 2;  C(i) = B(i) + 1`` (B is a temporary output)."""
    return build("pc", ["N"], {"A": ("float64", ["N"], "input"),
                               "B": ("float64", ["N"], "output"),
                               "C": ("float64", ["N"], "output")}, [
        ("S0", ("i",), [(0, "N")], A_("B", (I("i"),)), "=",
         E.Binary("*", A_("A", (I("i"),)), C_(2.0)), "assign", ()),
        ("S1", ("i",), [(0, "N")], A_("C", (I("i"),)), "=",
         E.Binary("+", A_("B", (I("i"),)), C_(1.0)), "assign", ()),
    ])


def stencil() -> ir.Program:
    """``B(i) = A(i) + A(i+1) + A(i+2)`` then in place ``B(i) = B(i-1) + B(i)``
    for 1 <= i < N-2 (a loop-carried flow dependence of distance 1)."""
    N2 = E.Binary("-", E.Param("N"), C_(2))
    return build("stencil", ["N"], {"A": ("float64", ["N"], "input"),
                                    "B": ("float64", [N2], "output")}, [
        ("S0", ("i",), [(0, N2)], A_("B", (I("i"),)), "=",
         E.Binary("+", E.Binary("+", A_("A", (I("i"),)),
                                A_("A", (E.Binary("+", I("i"), C_(1)),))),
                  A_("A", (E.Binary("+", I("i"), C_(2)),))), "assign", ()),
        ("S1", ("i",), [(1, N2)], A_("B", (I("i"),)), "=",
         E.Binary("+", A_("B", (E.Binary("-", I("i"), C_(1)),)), A_("B", (I("i"),))),
         "assign", ()),
    ])


def jacobi_1d() -> ir.Program:
    """PolyBench's jacobi-1d: ``for t < T: B(i) = (A(i-1) + A(i) + A(i+1)) / 3
    for 1 <= i < N-1, then A(i) = (B(i-1) + B(i) + B(i+1)) / 3``, in place
    (A and B are ``inout``; ``T`` is a scalar argument).  The time loop
    carries dependences, so it is what ``Config.time_tiling`` skews."""
    N1 = E.Binary("-", E.Param("N"), C_(1))
    third = lambda t: E.Binary("*", C_(1.0 / 3.0), E.Binary("+", E.Binary(  # noqa: E731
        "+", A_(t, (E.Binary("-", I("i"), C_(1)),)), A_(t, (I("i"),))),
        A_(t, (E.Binary("+", I("i"), C_(1)),))))
    p = build("jacobi_1d", ["N", "T"], {"A": ("float64", ["N"], "inout"),
                                        "B": ("float64", ["N"], "inout")}, [
        ("S0", ("t", "i"), [(0, "T"), (1, N1)], A_("B", (I("i"),)), "=", third("A"),
         "assign", ()),
        ("S1", ("t", "i"), [(0, "T"), (1, N1)], A_("A", (I("i"),)), "=", third("B"),
         "assign", ()),
    ], signature=("T", "A", "B"))
    # the source order: one time loop around the two space loops
    band = "[N, T] -> [{{ {0} }}]"
    order = isl.Schedule.read_from_str(p.context.get_ctx(), (
        '{ domain: "%s", child: { schedule: "%s", child: { sequence: [ '
        '{ filter: "{ S0[t, i] }", child: { schedule: "%s" } }, '
        '{ filter: "{ S1[t, i] }", child: { schedule: "%s" } } ] } } }') % (
        p.domain(), band.format("S0[t, i] -> [(t)]; S1[t, i] -> [(t)]"),
        band.format("S0[t, i] -> [(i)]"), band.format("S1[t, i] -> [(i)]")))
    return p.replace(param_bindings={"N": ("A", 0), "T": None}, order=order)
