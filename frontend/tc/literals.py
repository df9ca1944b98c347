"""The check that a statement's literals fit the type it computes in.

Owns :func:`check_literals`, called by :mod:`.sema` on each statement's
right-hand side (an ``E.Expr``) with the element type of the tensor it
writes; a literal that type cannot represent is a located
:class:`~polyc.errors.SemanticError`.
"""

from __future__ import annotations

import numpy as np

from ... import expr as E
from ... import ir
from ..source import Span, span_text

_WIDER = dict(int8="int16", uint8="uint16", int16="int32", uint16="int32", uint32="int64")


def check_literals(rhs: E.Expr, dtype: str, T: str, semantic, source: str,
                   fallback: Span) -> None:
    """Every literal in a value position of ``rhs`` is computed in the statement's
    element type ``dtype`` (the backend converts it): refuse one that
    type cannot represent instead of letting C wrap or overflow it
    (``3000000000`` in an int32 statement, ``1e39`` in a float32 one, a
    fractional ``1.5`` in an integer one).  Index positions are 64-bit;
    the parser already bounds literals to that.  ``semantic(span, message)``
    builds the error; ``fallback`` locates a literal without a span."""
    dtype = ir.compute_dtype(dtype)   # half types compute in float32
    info = np.iinfo(dtype) if (integer := np.dtype(dtype).kind in "iu") else np.finfo(dtype)

    def visit(e: E.Expr, negated: bool) -> None:
        if isinstance(e, E.Access) or (isinstance(e, E.Call) and e.fn.startswith("cast_")):
            return       # indices: 64-bit index arithmetic; a cast's operand: its own types
        if isinstance(e, E.Unary) and e.op == "-" and isinstance(e.operand, E.Const):
            visit(e.operand, not negated)
            return
        if isinstance(e, E.Const):
            value = -e.value if negated else e.value
            shown = f"{'-' if negated else ''}{span_text(source, e.span) or '?'}" \
                if e.span is not None else repr(value)
            bad = None
            if integer:
                if isinstance(value, float) and not value.is_integer():
                    bad = "it has a fractional part"
                elif not info.min <= value <= info.max:
                    bad = f"{dtype} holds {info.min}..{info.max}"
            elif abs(value) > float(info.max):
                bad = f"it overflows to infinity ({dtype} holds magnitudes up to " \
                      f"{float(info.max):.4g})"
            if bad is not None:
                span = e.span or fallback
                wider = dict(_WIDER, float32="double", int32="int64").get(dtype)
                hint = (f"; declare a wider output type, e.g. '-> ({wider} {T})'"
                        if wider and not (isinstance(value, float) and integer
                                          and not value.is_integer()) else "")
                raise semantic(span, f"the literal {shown} cannot be represented in {dtype}, "
                               f"the element type of '{T}' in which this statement "
                               f"computes: {bad}{hint}")
            return
        for c in e.children():
            visit(c, False)

    visit(rhs, False)
