"""``np.searchsorted`` and ``np.digitize`` of :func:`polyc.jit`.

The insertion index of ``v`` in a sorted 1-D ``a`` is a count: ``side='left'``
counts the elements of ``a`` that sort before ``v``, ``side='right'`` those
that do not sort after it, in numpy's sort order (NaN after every number,
so a NaN ``v`` goes after the numbers of ``a``: ``left`` before its NaNs,
``right`` after them).  Each index is a sum over ``a`` of a comparison mask
(``len(a)`` comparisons an element instead of numpy's binary search), so
``a`` may be traced as well as constant.  As with numpy, ``a`` is assumed
sorted, and ``sorter=`` is refused.

``np.digitize(x, bins, right)`` is numpy's: ``searchsorted(bins, x)`` on
the other side for increasing bins, ``len(bins) - searchsorted(bins[::-1],
x)`` for decreasing ones.  Constant bins that are neither raise numpy's
``ValueError``; traced bins are taken as increasing or decreasing by their
first and last elements (both indices are computed).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import views
from .core import Tracer, user_location
from .ops import Scalar, elementwise, operand, reduce, result_dtype

_INTP = np.dtype(np.int64)


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def searchsorted(g, a, v, side="left", sorter=None) -> Tracer:
    """Indices (int64, ``v``'s shape) where ``v`` would be inserted into the
    sorted 1-D ``a`` (traced or constant) to keep it sorted.  ``ValueError``
    for a bad ``side`` or an ``a`` that is not 1-D."""
    if sorter is not None:
        raise _refuse("np.searchsorted with sorter= is not supported in traced code")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    ta, tv = operand(g, a), operand(g, v)
    if isinstance(ta, Scalar) or ta.ndim != 1:
        raise ValueError("object too deep for desired array" if not isinstance(ta, Scalar)
                         else "object of too small depth for desired array")
    dt = result_dtype(ta, tv)
    if isinstance(tv, Tracer):
        tv = views.expand_dims(tv, -1)          # v[..., None] against a[j]
    if side == "left":          # a[j] sorts before v (a NaN v after every number)
        def text(x, y):
            return f"(({x} < {y}) || (({y} != {y}) && ({x} == {x})))"
    else:                       # not (v sorts before a[j])
        def text(x, y):
            return f"(!(({y} < {x}) || (({x} != {x}) && ({y} == {y}))))"
    mask = elementwise(g, "searchsorted", text, [ta, tv], np.dtype(bool), lazy=True,
                       compute_dtype=dt)
    return reduce(g, "sum", mask, -1, False, _INTP)


def digitize(g, x, bins, right=False) -> Tracer:
    """``np.digitize``: the index of the bin of each ``x`` (int64)."""
    tb = operand(g, bins)
    side = "left" if right else "right"
    if not isinstance(tb, Tracer) or tb.ndim != 1:
        raise ValueError("object too deep for desired array" if isinstance(tb, Tracer)
                         else "object of too small depth for desired array")
    n = tb.shape[0]
    const = bins if isinstance(bins, (list, tuple, np.ndarray)) else None
    if const is not None:
        b = np.asarray(const)
        with np.errstate(invalid="ignore"):
            d = np.diff(b)
        if (d >= 0).all():
            return searchsorted(g, tb, x, side)
        if (d <= 0).all():
            return n - searchsorted(g, views.getitem(tb, slice(None, None, -1)), x, side)
        raise ValueError("bins must be monotonically increasing or decreasing")
    up = searchsorted(g, tb, x, side)
    down = n - searchsorted(g, views.getitem(tb, slice(None, None, -1)), x, side)
    decreasing = views.getitem(tb, -1) < views.getitem(tb, 0)
    return np.where(decreasing, down, up)


def functions() -> dict:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`)."""
    return {"searchsorted": searchsorted, "digitize": digitize}
