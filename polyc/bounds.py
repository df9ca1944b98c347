"""In-bounds preconditions of a program's accesses.

Takes an ``ir.Program`` and returns, for each access that can leave its
tensor for some parameter values, the set of those parameter values (isl).
Range inference keeps most accesses in bounds by construction; the rest
(e.g. ``C(i + j)`` with ``i`` and ``j`` ranged elsewhere) become conditions on
the sizes that the runtime checks before a call.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from .ir import Program, Statement
from .isl_util import box_set, const_pw_aff, param_space


@dataclass(frozen=True)
class OutOfBounds:
    """Parameter values (``params``, an ``isl.Set`` without set dimensions)
    for which ``statement`` accesses ``tensor`` outside its shape."""
    statement: Statement
    tensor: str
    params: isl.Set


def tensor_box(program: Program, name: str) -> isl.Set:
    t = program.tensor(name)
    zero = const_pw_aff(param_space(program.params), 0)
    dims = [f"x{d}" for d in range(t.ndim)]
    return box_set(program.params, name, dims, [(zero, e) for e in t.shape])


def out_of_bounds(program: Program) -> list[OutOfBounds]:
    """Every access that is out of bounds for some parameter values in the
    context, with those values.  A tensor the program does not list (a
    temporary that array contraction made a buffer of the generated code,
    sized by polyc: ``runtime._as_called``) is skipped."""
    result = []
    boxes = {t.name: tensor_box(program, t.name) for t in program.tensors}
    for s in program.statements:
        for acc in (s.write,) + s.reads:
            name = acc.get_tuple_name(isl.dim_type.out)
            if name not in boxes:
                continue
            outside = acc.range().subtract(boxes[name])
            bad = acc.intersect_range(outside).domain().params().intersect_params(
                program.context.params())
            if not bad.is_empty():
                result.append(OutOfBounds(s, name, bad))
    return result


def preconditions(program: Program) -> isl.Set:
    """The parameter values (within the context) for which every access of
    ``program`` stays in bounds."""
    ok = program.context.params()
    for oob in out_of_bounds(program):
        ok = ok.subtract(oob.params)
    return ok.coalesce()


def preconditions_or_none(program: Program) -> isl.Set | None:
    """:func:`preconditions`, or ``None`` when every parameter value of the
    context keeps the accesses in bounds (the form frontends record)."""
    ok = preconditions(program)
    return None if ok.is_equal(program.context.params()) else ok

