"""Half precision (``float16``, ``bfloat16``): storage types whose values
compute in float32.

Every backend loads a half-precision element into a float32, computes the
statement in float32 (or wider, C's usual conversions) and rounds the
result to nearest-even when it stores it (``polyc.ir.HALF_DTYPES``; the C
prelude's ``polyc_f32_to_float16``, CUDA's ``__float2half_rn``).  A
reduction that read-modify-wrote its half-precision output at every step
would round at every step and lose the sum (a 4096-term dot product in
float16 keeps about 3 significant digits of a few hundred terms), so
:func:`widen_half_reductions` gives each one a float32 accumulator, as
cuBLAS, cuDNN and PyTorch accumulate half products in float32::

    C(m, n) +=! A(m, k) * B(k, n)          # C: float16

becomes::

    S0_init:  C_acc(m, n) = 0               # C_acc: float32 temporary
    S0:       C_acc(m, n) += A(m, k) * B(k, n)
    S0_round: C(m, n) = C_acc(m, n)         # one rounding

The frontends (TC, einsum) apply it when they build a program, so the
numpy reference (:func:`polyc.reference.evaluate`, which also holds half
tensors in float32 and rounds them after each statement) and every backend
see the same program.
"""

from __future__ import annotations

import islpy as isl

from . import expr as E
from .access import make_statement
from .errors import UnsupportedError
from .ir import HALF_DTYPES, Program, Statement, Tensor


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _element_domain(u: Statement, name: str) -> tuple[tuple[str, ...], isl.Set]:
    """The iterators and domain of ``u``'s output elements (its reduction
    iterators projected out), named ``name``."""
    dom = u.domain
    for pos in sorted((u.iterators.index(r) for r in u.reduction_iterators), reverse=True):
        dom = dom.project_out(isl.dim_type.set, pos, 1)
    its = tuple(i for i in u.iterators if i not in u.reduction_iterators)
    for k, it in enumerate(its):
        dom = dom.set_dim_name(isl.dim_type.set, k, it)
    return its, dom.set_tuple_name(name)


def widen_half_reductions(program: Program) -> Program:
    """``program`` with every reduction into a float16/bfloat16 tensor
    accumulating in a float32 temporary ``<tensor>_acc`` (see the module
    docstring): its initialisation (or, for a reduction without ``!``, a
    copy of the output) and updates write the temporary, a new assignment
    ``<update>_round`` stores it, rounded, once.  Programs with an explicit
    execution order (``@polyc.kernel`` loop nests, whose statements update
    arrays in place) are returned unchanged."""
    if program.order is not None or not any(
            s.kind == "update" and program.tensor(s.tensor).dtype in HALF_DTYPES
            for s in program.statements):
        return program
    shapes = {t.name: t.shape for t in program.tensors}
    tensor_names = set(shapes)
    stmt_names = {s.name for s in program.statements}
    temps: list[Tensor] = []
    out: list[Statement] = []
    stmts = list(program.statements)
    for k, u in enumerate(stmts):
        if u.kind != "update" or program.tensor(u.tensor).dtype not in HALF_DTYPES:
            out.append(u)
            continue
        t = program.tensor(u.tensor)
        acc = _fresh(f"{t.name}_acc", tensor_names)
        temps.append(Tensor(acc, "float32", t.shape, "temp", origin=t.name))
        shapes[acc] = t.shape
        acc_lhs = E.Access(acc, u.lhs.indices)
        init = out[-1] if out and out[-1].kind == "init" and out[-1].tensor == t.name else None
        if init is not None:
            out[-1] = make_statement(
                name=init.name, iterators=init.iterators, domain=init.domain, lhs=acc_lhs,
                op="=", rhs=init.rhs, shapes=shapes, kind="init", text=init.text,
                span=init.span)
        else:
            name = _fresh(f"{u.name}_load", stmt_names)
            its, dom = _element_domain(u, name)
            out.append(make_statement(
                name=name, iterators=its, domain=dom, lhs=acc_lhs, op="=", rhs=u.lhs,
                shapes=shapes, kind="assign", text=u.text, span=u.span))
        out.append(make_statement(
            name=u.name, iterators=u.iterators, domain=u.domain, lhs=acc_lhs, op=u.op,
            rhs=u.rhs, shapes=shapes, kind="update",
            reduction_iterators=u.reduction_iterators, text=u.text, span=u.span))
        # the rounding store follows the last update of this accumulator
        last = next((j for j in range(len(stmts) - 1, k, -1)
                     if stmts[j].kind == "update" and stmts[j].tensor == t.name), None)
        if last is not None:
            raise UnsupportedError(
                f"statements {u.name} and {stmts[last].name} both reduce into the "
                f"{t.dtype} tensor {t.name}; write the sum into one statement, or declare "
                f"{t.name} float")
        name = _fresh(f"{u.name}_round", stmt_names)
        its, dom = _element_domain(u, name)
        if init is not None and tuple(init.iterators) == its:
            # ``+=!`` over an empty reduction (K = 0) still stores the zeros
            dom = dom.union(init.domain.set_tuple_name(name)).coalesce()
        out.append(make_statement(
            name=name, iterators=its, domain=dom, lhs=u.lhs, op="=", rhs=acc_lhs,
            shapes=shapes, kind="assign", text=u.text, span=u.span))
    return program.replace(tensors=program.tensors + tuple(temps), statements=tuple(out))


__all__ = ["widen_half_reductions"]
