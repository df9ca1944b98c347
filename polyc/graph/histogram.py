"""``np.histogram`` of :func:`polyc.jit` with a number of equal bins, and
``np.linspace`` between traced endpoints.

``linspace`` is numpy's computation: ``arange(num) * step + start`` in the
endpoints' float type (``arange / div * delta`` where the step is 0), the
last value ``stop`` when ``endpoint``; endpoints that are arrays (not 0-d)
are refused.

numpy's own computation for equal bins (``numpy/lib/_histograms_impl.py``,
the ``bincount`` path), on traced arrays: the outer edges are ``a``'s
minimum and maximum (moved by 0.5 each way when they are equal) or the
``range`` given; the edges are numpy's ``linspace`` (``arange * step +
first``, the last one ``last``) in numpy's bin type (``a``'s float type,
float64 for integers); each element's bin is ``(a - first) / (last -
first) * bins`` truncated, the last edge's elements in the last bin, and
moved by one where it disagrees with the edges (numpy's corrections for a
result within an ulp of an edge).  The count of bin ``b`` is a reduction
over the elements of the mask ``bin == b`` (``bins * len(a)`` comparisons
instead of numpy's ``bincount`` scatter): int64 counts, or the sum of the
``weights`` in their dtype.  ``density=True`` divides by the total and the
bin widths, as numpy does.

Refused with :class:`~polyc.errors.UnsupportedError`: bin edges given as an
array and bin estimators (``bins='auto'``).  numpy raises ``ValueError``
for an automatic range that is not finite (NaN or infinity in ``a``), which
needs the values: here such a histogram has NaN edges and no counts.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from . import views
from .core import Tracer, user_location
from .ops import operand

_INTP = np.dtype(np.int64)


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def histogram(g, a, bins=10, range=None, density=None, weights=None):
    """``(hist, bin_edges)``: ``hist`` of shape ``(bins,)`` (int64, or the
    weights' dtype), ``bin_edges`` of shape ``(bins + 1,)`` in numpy's bin
    type.  ``ValueError`` as numpy's for a bad ``bins`` or ``range``,
    ``ShapeError`` for weights not of ``a``'s shape."""
    if isinstance(bins, (str, list, tuple, np.ndarray, Tracer)):
        raise _refuse(f"np.histogram with bins={bins!r} (an estimator or bin edges) is not "
                      f"supported in traced code; give a number of equal bins")
    n = int(bins)
    if n != bins or n < 1:
        raise ValueError("`bins` must be positive, when an integer")
    t = views.reshape(operand(g, a), (-1,))
    w = None
    if weights is not None:
        w = operand(g, weights)
        if tuple(s.value for s in w._shape) != tuple(s.value for s in operand(g, a)._shape):
            raise ShapeError(f"{user_location()}: np.histogram: weights should have the same "
                             f"shape as a")
        w = views.reshape(w, (-1,))
    if range is not None:
        first, last = (float(r) + 0.0 for r in range)
        if first > last:
            raise ValueError("max must be larger than min in range parameter.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"supplied range of [{first}, {last}] is not finite")
        if first == last:
            first, last = first - 0.5, last + 0.5
        bin_type = np.result_type(first, last, t.dtype)
    else:
        lo, hi = t.min(), t.max()
        same = lo == hi
        first, last = np.where(same, lo - 0.5, lo), np.where(same, hi + 0.5, hi)
        bin_type = np.result_type(first.dtype, last.dtype, t.dtype)
    if bin_type.kind in "iub":
        bin_type = np.result_type(bin_type, float)
    # numpy's linspace(first, last, n + 1, dtype=bin_type)
    start = first.astype(bin_type) if isinstance(first, Tracer) else bin_type.type(first)
    stop = last.astype(bin_type) if isinstance(last, Tracer) else bin_type.type(last)
    step = (stop - start) / n
    edges = np.arange(n + 1, dtype=bin_type, like=t) * step + start
    edges = np.where(np.arange(n + 1, like=t) == n, stop, edges)
    # numpy's bin of each element (the elements outside the range are left out)
    x = t.astype(bin_type)
    keep = (t >= first) & (t <= last)
    index = (((x - first) / (last - first)) * n).astype(_INTP)
    index = np.where(index == n, n - 1, index)
    index = np.where(x < edges[np.clip(index, 0, n)], index - 1, index)
    index = np.where((x >= edges[np.clip(index + 1, 0, n)]) & (index != n - 1),
                     index + 1, index)
    hit = (index[None, :] == np.arange(n, like=t)[:, None]) & keep[None, :]
    if w is None:
        hist = np.sum(np.where(hit, 1, 0).astype(_INTP), axis=1)
    else:
        hist = np.sum(np.where(hit, w[None, :], 0), axis=1, dtype=w.dtype)
    if density:
        widths = edges[1:] - edges[:-1]
        return hist / widths / hist.sum(), edges
    return hist, edges


def linspace(g, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``num`` values from ``start`` to ``stop`` (0-d traced values or
    scalars; shape ``(num,)``, the endpoints' float type or ``dtype``);
    with ``retstep`` also the step.  ``ValueError`` as numpy's for a
    negative ``num``."""
    num = int(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    ends = [operand(g, x) for x in (start, stop)]
    if any(isinstance(x, Tracer) and x.ndim for x in ends):
        raise _refuse("np.linspace between arrays of endpoints is not supported in traced "
                      "code; give 0-d endpoints (a.min(), a.max()) or scalars")
    like = next(x for x in ends if isinstance(x, Tracer))
    dt = np.result_type(*[x if isinstance(x, Tracer) else x.value for x in ends])
    if dt.kind not in "fc":
        dt = np.result_type(dt, float)
    lo, hi = (x.astype(dt) if isinstance(x, Tracer) else dt.type(x.value) for x in ends)
    div = num - 1 if endpoint else num
    delta = hi - lo
    y = np.arange(num, dtype=dt, like=like)
    if div > 0:
        step = delta / div
        y = np.where(step == 0, y / div * delta, y * step)
    else:
        step = np.nan
        y = y * delta
    y = y + lo
    if endpoint and num > 1:
        y = np.where(np.arange(num, like=like) == num - 1, hi, y)
    if dtype is not None:
        if np.issubdtype(dtype, np.integer):
            y = np.floor(y)
        y = y.astype(dtype)
    return (y, step) if retstep else y


def functions() -> dict:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`)."""
    return {"histogram": histogram, "linspace": linspace}
