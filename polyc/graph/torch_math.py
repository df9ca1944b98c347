"""ATen's elementwise operators whose values differ from numpy's ufunc of the
same name, written as numpy calls with torch's semantics, for the torch
backend's lowering table (:data:`polyc.graph.torch_backend.LOWERINGS`).
numpy values in (tracers or concrete arrays), numpy values out.

Where torch and numpy differ:

* ``sign``/``sgn`` of a NaN is 0 in torch (NaN in numpy);
* ``remainder`` of floats: a zero remainder takes the dividend's sign in
  torch (``fmod``'s), the divisor's in numpy;
* ``div(rounding_mode="trunc")`` of integers truncates toward zero (an
  exact quotient for every dividend, ``INT64_MIN`` included);
* ``round(decimals=d)`` scales by ``10**d`` and rounds half to even, as
  numpy's ``round`` does.

Integer division and remainder by zero, which torch raises on
(``ZeroDivisionError``), give 0 here as in numpy: a compiled kernel cannot
raise (``docs/torch.md``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedError
from . import ops as _ops
from .core import Tracer


def _is_float(x) -> bool:
    return isinstance(x, float) or getattr(x, "dtype", np.dtype(np.int64)).kind == "f"


def sign(x):
    """``aten.sign``/``aten.sgn`` of a real tensor: -1, 0 or 1 in x's dtype;
    a NaN gives 0 (torch's ``(0 < x) - (x < 0)``)."""
    if _is_float(x):
        return np.where(x != x, np.zeros_like(x), np.sign(x))
    return np.sign(x)


def remainder(a, b):
    """``aten.remainder``: the remainder with the divisor's sign; of floats
    ``fmod(a, b)``, plus ``b`` where a nonzero result's sign differs from
    ``b``'s, so that a zero result keeps the dividend's sign (torch's
    kernel; numpy's remainder signs it as the divisor)."""
    if not (_is_float(a) or _is_float(b)):
        return np.remainder(a, b)
    m = np.fmod(a, b)
    return np.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


def div(a, b, rounding_mode=None):
    """``aten.div``: true division; ``rounding_mode="floor"`` numpy's
    ``floor_divide`` (ATen's ``div_floor`` computes the same, from ``fmod``);
    ``"trunc"`` the quotient truncated toward zero: of floats
    ``trunc(a / b)``, of integers the floored quotient plus one where the
    division left a remainder and the operands' signs differ (0 for a zero
    divisor)."""
    if rounding_mode == "floor":
        return np.floor_divide(a, b)
    if rounding_mode == "trunc":
        if _is_float(a) or _is_float(b):
            return np.trunc(np.divide(a, b))
        q = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((np.less(a, 0)) != (np.less(b, 0)))
        return np.where(inexact, q + 1, q)
    if rounding_mode is not None:
        raise UnsupportedError(f"aten.div with rounding_mode={rounding_mode!r} is not "
                               "supported by polyc (torch has 'floor' and 'trunc')")
    return np.divide(a, b)


def round_(x, decimals: int = 0):
    """``aten.round`` (``decimals`` too): half to even, as numpy's ``rint``
    and ``round``; integers stay as they are (numpy's ``rint`` would give
    floats)."""
    if not _is_float(x):
        return x
    return np.rint(x) if decimals == 0 else np.round(x, decimals)


def maximum(a, b):
    """``aten.maximum``: ``b`` where ``a < b`` or ``b`` is NaN, else ``a``;
    of equal values (``-0.0`` and ``0.0``) the first, as torch's kernel
    picks it (numpy's ``maximum(x, y)`` picks ``y``): numpy's with the
    operands swapped."""
    return np.maximum(b, a)


def minimum(a, b):
    """``aten.minimum``: of equal values the first (see :func:`maximum`)."""
    return np.minimum(b, a)


def relu(x):
    """``aten.relu``: ``x`` unless it is below zero, so ``relu(-0.0)`` is
    ``-0.0`` and ``relu(nan)`` NaN, as torch."""
    return maximum(x, 0)


def clamp(x, min=None, max=None):
    """``aten.clamp`` (``clamp_min``, ``clamp_max``, ``hardtanh``):
    ``minimum(maximum(x, min), max)`` with torch's choice between equal
    values (``clamp(-0.0, min=0)`` is ``-0.0``) and NaN propagation."""
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


def c_unary(name: str) -> Callable:
    """``aten.<name>`` as C99's ``<name>`` elementwise (``erfc lgamma``:
    ``1 - erf(x)`` would lose the tail), computed in float32 for half and
    integer inputs, in float64 for double ones."""
    def run(x):
        dt = np.dtype(np.float64 if x.dtype == np.float64 else np.float32)
        if not isinstance(x, Tracer):
            return np.vectorize(getattr(math, name), otypes=[dt])(x)
        x = x.astype(dt) if x.dtype != dt else x
        return _ops.elementwise(x._graph, name, lambda a: f"{name}({a})", [x], dt,
                                compute_dtype=dt)
    return run


def arg_extreme(fn: Callable) -> Callable:
    """``aten.argmax``/``argmin``: numpy's, and 0 for a 0-d tensor (torch's
    one element; numpy's tracer has no axis to search)."""
    def run(x, dim=None, keepdim=False):
        if x.ndim == 0:
            return np.zeros((), dtype=np.int64)
        return fn(x, axis=dim, keepdims=keepdim)
    return run


def _narrow(x, dim: int, start: int, length: int):
    return x[(slice(None),) * (dim % x.ndim) + (slice(start, start + length),)]


def _unbind(x, dim: int = 0):
    d = dim % x.ndim
    return [x[(slice(None),) * d + (k,)] for k in range(int(x.shape[d]))]


def angle(x):
    """``aten.angle`` of a real tensor: pi below zero, else 0; NaN stays NaN."""
    if not _is_float(x):
        return np.where(x < 0, np.pi, 0.0)
    return np.where(x != x, x, np.where(x < 0, np.pi, 0.0))


def ldexp(x, e):
    """``aten.ldexp``: ``x * 2**e`` (a float result, as torch's)."""
    if hasattr(e, "astype") and not _is_float(e):
        e = e.astype(np.float32)
    return np.multiply(x, np.exp2(e))


def _indices(fn: Callable) -> Callable:
    """``aten.triu_indices``/``tril_indices``: the (2, N) int64 positions."""
    def run(row: int, col: int, offset: int = 0, *, dtype=None, **kw):
        return np.stack(fn(int(row), int(offset), int(col))).astype(np.int64)
    return run


#: ATen packet name -> lowering, merged into the backend's table: inverse
#: hyperbolic functions, ``logical_xor``, C99's ``erfc``/``lgamma``, argmax
#: of a 0-d tensor, and the ``*_copy`` forms of views (a value is a copy here)
LOWERINGS: dict[str, Callable[..., Any]] = {
    "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh,
    "logical_xor": np.logical_xor, "erfc": c_unary("erfc"), "lgamma": c_unary("lgamma"),
    "argmax": arg_extreme(np.argmax), "argmin": arg_extreme(np.argmin),
    "view_copy": np.reshape, "permute_copy": np.transpose, "narrow_copy": _narrow,
    "unbind_copy": _unbind, "angle": angle, "ldexp": ldexp,
    "triu_indices": _indices(np.triu_indices), "tril_indices": _indices(np.tril_indices),
}
