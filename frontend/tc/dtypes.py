"""The element type of a TC output that declares none: numpy's promotion of
what its defining statement reads (``docs/tc-language.md``, "Output element
types"), with C's ``double`` functions of integers counted as float64."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ... import expr as E
from ... import ir


def promote(rhs: E.Expr, dtypes: Mapping[str, str]) -> str:
    """The dtype of an output defined by ``rhs``: numpy's promotion of the
    tensors read in value positions (index tensors of gathers excluded), with
    float literals taking part as Python floats do in numpy (``int32 * 1.5``
    is float64, ``float32 * 1.5`` stays float32); float32 when it reads no
    tensor."""
    def reads_of(e: E.Expr) -> list:
        if isinstance(e, E.Access):
            return [np.dtype(dtypes[e.tensor])]
        if isinstance(e, E.Const):
            return [e.value] if isinstance(e.value, float) else []
        if isinstance(e, E.Call) and e.fn.startswith("cast_"):
            return [np.dtype(e.fn[5:])]       # a conversion's type is its own
        inner = [r for c in e.children() for r in reads_of(c)]
        if (isinstance(e, E.Call) and e.fn in _FLOAT_VALUED and inner
                and all(isinstance(r, np.dtype) and r.kind in "iub" for r in inner)):
            return [np.dtype(np.float64)]      # C's double function of an integer
        return inner

    reads = reads_of(rhs)
    if not any(isinstance(r, np.dtype) for r in reads):
        return "float32"
    names = {r.name for r in reads if isinstance(r, np.dtype)}
    if names & set(ir.FLOAT_DTYPES):
        # a Python float is weak next to a float tensor (NEP 50): drop it, since
        # numpy promotes ml_dtypes' bfloat16 with a Python float to float64
        reads = [r for r in reads if isinstance(r, np.dtype)]
    if {"float16", "bfloat16"} <= names:
        # no common half type (numpy has no promotion between the two): float32,
        # as in PyTorch and JAX
        reads = [np.dtype(np.float32) if isinstance(r, np.dtype) and r.name in ir.HALF_DTYPES
                 else r for r in reads]
    return np.result_type(*reads).name


#: builtins whose value is a float of the argument's float type, and a
#: ``double`` for integer arguments (C's functions, numpy's ``np.sqrt(int32)``)
_FLOAT_VALUED = frozenset(("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "fabs",
                           "fmax", "fmin", "pow") + E.MATH_FUNCTIONS + E.MATH_FUNCTIONS2
                          + E.C99_FUNCTIONS + E.C99_FUNCTIONS2)
