"""numpy's wrap-around of small integers in ``@polyc.kernel`` values.

Python runs a loop body on numpy scalars: ``A[i] + B[i]`` of two uint8
elements is a uint8 that wraps modulo 256 before ``// 2`` divides it.  C
promotes both to ``int`` and would not wrap.  :func:`wrap_narrow` gives
every arithmetic value whose numpy type is int8, int16, int32, uint8,
uint16 or uint32 the conversion to that type (the builtin ``cast_<type>``), so the
compiled program computes what ``py_func`` does.  Python ints (literals,
loop variables, sizes, scalar arguments) are weak, as in numpy 2 (NEP 50):
``A[i] + 1`` stays uint8."""

from __future__ import annotations

from typing import Callable

import numpy as np

from polyc import expr as E

#: the integer types C may compute wider than themselves (int32: next to a
#: Python int, which C's value arithmetic types as int64)
NARROW = ("int8", "int16", "uint8", "uint16", "uint32", "int32")
class _Weak:
    """A Python scalar's type (a sentinel: numpy compares dtypes with strings)."""
    def __init__(self, name: str) -> None:
        self.name = name


_WEAK_INT, _WEAK_FLOAT = _Weak("int"), _Weak("float")
_FLOAT_CALLS = frozenset(E.BUILTINS) - {"abs", "max", "min", "ipow",
                                        *(f for f in E.BUILTINS if f.startswith("cast_"))}


def wrap_narrow(e: E.Expr, dtype_of: Callable[[str], str | None]) -> E.Expr:
    """``e`` with each arithmetic result of a small integer numpy type
    converted to that type.  ``dtype_of(tensor)``: the dtype of an array,
    ``None`` for a Python scalar (weak)."""
    if not any(isinstance(x, E.Access) and dtype_of(x.tensor) in NARROW for x in e.walk()):
        return e
    return _wrap(e, dtype_of)[0]


def _promote(a, b):
    if isinstance(a, _Weak) and isinstance(b, _Weak):
        return _WEAK_FLOAT if _WEAK_FLOAT in (a, b) else _WEAK_INT
    if isinstance(a, _Weak):
        a, b = b, a
    if b is _WEAK_INT:
        return a
    if b is _WEAK_FLOAT:
        return a if a.kind == "f" else np.dtype(np.float64)
    return np.result_type(a, b)


def _cast(e: E.Expr, t) -> E.Expr:
    if isinstance(t, np.dtype) and t.name in NARROW:
        return E.Call(f"cast_{t.name}", (e,), getattr(e, "span", None))
    return e


def _wrap(e: E.Expr, dtype_of):
    """``(rebuilt e, numpy type)``; the type is a numpy dtype or weak."""
    if isinstance(e, E.Const):
        return e, _WEAK_FLOAT if isinstance(e.value, float) else _WEAK_INT
    if isinstance(e, (E.Index, E.Param)):
        return e, _WEAK_INT
    if isinstance(e, E.Access):
        d = dtype_of(e.tensor)
        return e, np.dtype(d) if d is not None else _WEAK_INT
    if isinstance(e, E.Unary):
        a, t = _wrap(e.operand, dtype_of)
        if e.op == "!":
            return E.Unary(e.op, a, e.span), np.dtype(bool)
        return _cast(E.Unary(e.op, a, e.span), t), t
    if isinstance(e, E.Binary):
        (a, ta), (b, tb) = _wrap(e.lhs, dtype_of), _wrap(e.rhs, dtype_of)
        out = E.Binary(e.op, a, b, e.span)
        if e.op in E.COMPARE_OPS + E.LOGIC_OPS:
            return out, np.dtype(bool)
        t = _promote(ta, tb)
        return _cast(out, t), t
    if isinstance(e, E.Select):
        c, _ = _wrap(e.cond, dtype_of)
        (a, ta), (b, tb) = _wrap(e.then, dtype_of), _wrap(e.otherwise, dtype_of)
        return E.Select(c, a, b, e.span), _promote(ta, tb)
    if isinstance(e, E.Call):
        args = [_wrap(x, dtype_of) for x in e.args]
        out = E.Call(e.fn, tuple(a for a, _ in args), e.span)
        if e.fn in _FLOAT_CALLS:
            return out, np.dtype(np.float64)
        if e.fn.startswith("cast_"):
            return out, np.dtype(e.fn[5:])
        t = args[0][1] if len(args) == 1 else _promote(args[0][1], args[1][1])
        return _cast(out, t), t
    return e, _WEAK_INT
