"""``np.interp`` of a traced array at constant sample points: a tone curve,
a lookup table, a piecewise-linear activation (``np.interp(x, [0, 0.5, 1],
[0, 0.8, 1])``).

The points ``xp`` and values ``fp`` must be numbers known while tracing
(lists, numpy arrays, at most :data:`MAX_POINTS`); the traced ``x`` is
read once per element, and each element picks its segment by a binary
search unrolled into nested comparisons (numpy's binary search gives the
same segment; a chain of one comparison per point nested too deeply for
polyc's parser from about 128 points) and computes
numpy's value in float64: ``NaN`` stays ``NaN`` (with one sample point
it gets ``fp[0]``, as numpy's), below ``xp[0]`` is
``left`` (``fp[0]``), above ``xp[-1]`` is ``right`` (``fp[-1]``), a sample
point gives its ``fp``, and inside segment ``j`` the value is ``slope_j *
(x - xp[j]) + fp[j]`` with ``slope_j = (fp[j+1] - fp[j]) / (xp[j+1] -
xp[j])``.  Traced points, ``period=`` and complex values are refused with
:class:`~polyc.errors.UnsupportedError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from .core import Tracer, user_location
from .ops import elementwise, literal, operand

#: the most sample points a traced ``np.interp`` unrolls into comparisons
MAX_POINTS = 256

_F64 = np.dtype("float64")


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def _points(v: Any, name: str) -> np.ndarray:
    if isinstance(v, Tracer) or (isinstance(v, (list, tuple)) and
                                 any(isinstance(e, Tracer) for e in v)):
        raise _refuse(f"np.interp with traced {name} is not supported (its sample points and "
                      f"values must be numbers known while tracing: lists or numpy arrays)")
    a = np.asarray(v)
    if a.dtype.kind == "c":
        raise _refuse("np.interp of complex values is not supported in traced code")
    return a.astype(np.float64)


def interp(g, x, xp, fp, left=None, right=None, period=None) -> Tracer:
    """``np.interp(x, xp, fp, left, right)`` with ``x`` traced (float64,
    numpy's result type) and ``xp``/``fp`` constant 1-D sequences of one
    length (``ValueError`` otherwise, as numpy)."""
    if period is not None:
        raise _refuse("np.interp with period= is not supported in traced code")
    px, py = _points(xp, "xp"), _points(fp, "fp")
    if px.ndim != 1 or py.ndim != 1:
        raise ValueError("object too deep for desired array")
    if len(px) != len(py):
        raise ValueError("fp and xp are not of the same length.")
    if len(px) == 0:
        raise ValueError("array of sample points is empty")
    if len(px) > MAX_POINTS:
        raise _refuse(f"np.interp with more than {MAX_POINTS} sample points is not supported "
                      f"in traced code (each is a comparison per element)")
    lo = py[0] if left is None else _points(left, "left")
    hi = py[-1] if right is None else _points(right, "right")
    if np.ndim(lo) or np.ndim(hi):
        raise _refuse("np.interp with array left= or right= is not supported in traced code")
    t = operand(g, x)
    if isinstance(t, Tracer) and t.dtype.kind == "c":
        raise _refuse("np.interp of complex values is not supported in traced code")
    c = [literal(v, _F64) for v in px]
    f = [literal(v, _F64) for v in py]
    n = len(px)

    def text(a):
        v = f"(1.0 * {a})"
        if n == 1:              # (numpy's one-point rule: a NaN gets fp[0] too)
            return f"(({v} < {c[0]}) ? {literal(lo, _F64)} : (({v} > {c[0]}) ? " \
                   f"{literal(hi, _F64)} : {f[0]}))"
        def seg(j):             # segment j, or above the last point for j = n - 1
            if j == n - 1:
                return f"(({v} > {c[-1]}) ? {literal(hi, _F64)} : {f[-1]})"
            with np.errstate(divide="ignore", invalid="ignore"):
                slope = literal((py[j + 1] - py[j]) / (px[j + 1] - px[j]), _F64)
            return f"(({v} == {c[j]}) ? {f[j]} : ({slope} * ({v} - {c[j]}) + {f[j]}))"

        def pick(a, b):         # the first j in [a, b] with v < xp[j + 1], else b
            if a == b:
                return seg(a)
            m = (a + b) // 2
            return f"(({v} < {c[m + 1]}) ? {pick(a, m)} : {pick(m + 1, b)})"
        return f"(({v} != {v}) ? {v} : (({v} < {c[0]}) ? {literal(lo, _F64)} : {pick(0, n - 1)}))"
    return elementwise(g, "interp", text, [t], _F64, compute_dtype=_F64)
