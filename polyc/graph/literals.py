"""Literals of the TC text that graph operations generate: numpy values
printed exactly in a statement's element type (:func:`literal`), and the
checks that tell :func:`polyc.graph.ops.new_node` a statement's literals do
not fit the type it computes in (a fractional or huge float literal, an
int64 literal in an int32 statement)."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .core import int_in_range


def literal(value: Any, dtype: np.dtype) -> str:
    """``value`` as an exact TC literal of element type ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # the value in ``dtype`` (printed as the double that equals it), so
        # that a statement of a wider float type computes with the same value
        with np.errstate(over="ignore"):
            v = float(dtype.type(value))
        if math.isnan(v):
            return "(0.0/0.0)"
        if math.isinf(v):
            return "(1.0/0.0)" if v > 0 else "(-1.0/0.0)"
        text = repr(v)
        return f"({text})" if v < 0 else text
    if dtype.kind == "b":
        return "1" if bool(value) else "0"
    v = int_in_range(value, dtype)      # (int64's minimum, which TC cannot spell, as a sum)
    return str(v) if v >= 0 else f"({v})" if v > -2**63 else f"({v + 1} - 1)"


_FLOAT_LITERAL = re.compile(r"(?<![\w.$])(\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+)")
_INT_LITERAL = re.compile(r"(?<![\w.$])(\d+)(?![\w.])")


def int_literals_beyond(text: str, dtype: np.dtype) -> bool:
    """Whether ``text`` has an integer literal outside the range of the type a
    statement of ``dtype`` computes in (int32 for the smaller types)."""
    info = np.iinfo(dtype if dtype.itemsize >= 4 else np.int32)
    return any(int(m) > info.max for m in _INT_LITERAL.findall(text))


def float_literals(text: str) -> bool:
    """Whether ``text`` has a literal an integer statement cannot compute
    with (fractional, huge, or a ``/0.0`` quotient for inf and NaN)."""
    if "/0.0" in text:
        return True
    return any(not float(m).is_integer() or abs(float(m)) >= 2.0 ** 62
               for m in _FLOAT_LITERAL.findall(text))
