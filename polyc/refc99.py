"""numpy versions of C99's ``erfc lgamma tgamma round logb nextafter fdim
remainder`` for :mod:`polyc.refeval` (TC's builtins of those names).

Each takes and returns arrays of one float type, and gives C's value where
numpy's function of a similar name differs (``round`` rounds half away from
zero, ``remainder`` is IEEE's, ``fdim`` is ``+0`` unless ``x > y``) and where
Python's ``math`` raises (``lgamma(0)`` is ``inf``, ``tgamma(-1)`` NaN).
"""

from __future__ import annotations

import math

import numpy as np


def _elementwise(fn, on_error: float = math.nan):
    """``fn`` of Python floats applied to each element, in the argument's
    dtype; a ``ValueError``/``OverflowError`` of ``fn`` gives ``on_error``
    (or ``on_error(x)`` when it is callable)."""
    def scalar(*xs):
        try:
            return fn(*xs)
        except (ValueError, OverflowError):
            return on_error(*xs) if callable(on_error) else on_error
    vec = np.vectorize(scalar, otypes=[np.float64])

    def apply(*arrays):
        dtype = np.result_type(*arrays)
        with np.errstate(all="ignore"):
            return np.asarray(vec(*arrays)).astype(dtype, copy=False)
    return apply


def _tgamma(x: float) -> float:
    if x == 0:
        return math.copysign(math.inf, x)
    if x == -math.inf or (x < 0 and x.is_integer()):
        return math.nan
    return math.gamma(x)


def _round(x):
    r = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - r) >= 0.5, r + np.sign(x), r).astype(x.dtype, copy=False)


def _logb(x):
    m, e = np.frexp(x)
    out = (e - 1).astype(x.dtype)
    out = np.where(x == 0, -np.inf, out)
    return np.where(np.isfinite(x), out, np.abs(x)).astype(x.dtype, copy=False)


def _fdim(a, b):
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.where(a > b, a - b, 0)
        return np.where(np.isnan(a) | np.isnan(b), a + b, d).astype(np.result_type(a, b),
                                                                    copy=False)


UNARY = {"erfc": _elementwise(math.erfc),
         "lgamma": _elementwise(math.lgamma, math.inf),
         "tgamma": _elementwise(_tgamma, lambda x: math.inf if x > 0 else math.nan),
         "round": _round, "logb": _logb}
BINARY = {"nextafter": np.nextafter, "fdim": _fdim,
          "remainder": _elementwise(math.remainder)}
