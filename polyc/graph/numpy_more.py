"""numpy functions that the walk over numpy's public API found missing,
each built from the covered operations, with numpy's values and dtypes:

- ``vecdot matvec vecmat`` (numpy 2's gufuncs: contractions over the last
  axis, the others broadcast);
- ``ediff1d`` (``to_begin``/``to_end``), ``diagflat`` (``k``), ``rollaxis``
  (a transposition), ``angle`` of real arrays (``arctan2(0, x)``, ``deg``),
  ``isreal iscomplex`` of real arrays (constant masks), ``modf`` (the
  fractional and integral parts, signed as numpy's);
- with index arrays known while tracing (the extent they index
  specialised): ``delete``, ``compress`` (a constant condition), ``resize``
  (numpy's cyclic repetition), ``take`` with ``mode='clip'``/``'wrap'``,
  and ``put put_along_axis`` into a traced array (assignments,
  :mod:`polyc.graph.setitem`); ``take_along_axis`` with ``axis=None``;
- ``pad`` with ``mode`` ``maximum minimum mean`` (the whole axis'
  statistic, axis after axis as numpy pads; ``stat_length`` refused);
- ``vander`` (numpy's running product), ``histogram_bin_edges``, ``choose``
  (a chain of ``np.where``; an index out of range, numpy's ``ValueError``,
  takes the nearest choice);
- ``allclose array_equal array_equiv``: a Python ``bool`` of the values,
  a :class:`~polyc.errors.TraceError` with the traced form as hint.

Each function takes the graph first, as :data:`polyc.graph.numpy_api.FUNCTIONS`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from ..errors import TraceError, UnsupportedError
from . import gather, views
from .arrayapi import vecdot
from .contractions import matmul
from .core import Tracer, user_location
from .morefns import diag
from .ops import Scalar, elementwise, normalize_axis, operand, reduce, result_dtype
from .scans import scan
from .setitem import setitem
from .ufuncs import UFUNCS, astype

log = logging.getLogger(__name__)

#: numpy_api's ``concatenate asarray full_like zeros_like where histogram`` (set by
#: :func:`functions`)
_API: dict[str, Callable] = {}


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def _array(g, a, what: str) -> Tracer:
    t = operand(g, a)
    if isinstance(t, Scalar):
        raise _refuse(f"{what} of a Python scalar is not supported")
    return t


# -- numpy 2's gufuncs -------------------------------------------------------------------
def matvec(g, m, v) -> Tracer:
    """``np.matvec(m, v)``: ``m[..., i, j] * v[..., j]`` summed over ``j``."""
    m, v = _array(g, m, "np.matvec"), _array(g, v, "np.matvec")
    if m.ndim < 2:
        raise ValueError("matvec: Input operand 0 does not have enough dimensions")
    if v.ndim == 1:
        return matmul(g, m, v)
    return views.squeeze(matmul(g, m, views.expand_dims(v, -1)), -1)


def vecmat(g, v, m) -> Tracer:
    """``np.vecmat(v, m)``: ``v[..., i] * m[..., i, j]`` summed over ``i``."""
    m, v = _array(g, m, "np.vecmat"), _array(g, v, "np.vecmat")
    if m.ndim < 2:
        raise ValueError("vecmat: Input operand 1 does not have enough dimensions")
    if v.ndim == 1:
        return matmul(g, v, m)
    return views.squeeze(matmul(g, views.expand_dims(v, -2), m), -2)


# -- small functions ------------------------------------------------------------------------
def ediff1d(g, ary, to_end=None, to_begin=None) -> Tracer:
    """``np.ediff1d``: differences of the flattened array, ``to_begin`` and
    ``to_end`` (converted to its dtype, numpy's ``same_kind``) around them."""
    t = views.reshape(_array(g, ary, "np.ediff1d"), (-1,))
    parts = [UFUNCS["subtract"](g, views.getitem(t, slice(1, None)),
                                views.getitem(t, slice(None, -1)))]
    for k, extra in ((0, to_begin), (len(parts) + 1, to_end)):
        if extra is None:
            continue
        e = operand(g, extra)
        if isinstance(e, Tracer):
            e = views.reshape(e, (-1,))
            e = e if e.dtype == t.dtype else astype(e, t.dtype)
        else:
            vals = np.asarray(extra)
            if not np.can_cast(vals.dtype, t.dtype, "same_kind"):
                raise TypeError("dtype of `to_begin` must be compatible with input `ary` "
                                "under the `same_kind` rule.")
            e = _API["asarray"](g, vals.astype(t.dtype).ravel(), like=t)
        parts.insert(k if k == 0 else len(parts), e)
    return parts[0] if len(parts) == 1 else _API["concatenate"](g, parts)


def diagflat(g, v, k=0) -> Tracer:
    """``np.diagflat``: :func:`np.diag` of the flattened input."""
    return diag(g, views.reshape(_array(g, v, "np.diagflat"), (-1,)), k)


def rollaxis(g, a, axis, start=0) -> Tracer:
    """``np.rollaxis``: numpy's permutation of the axes, as a view."""
    t = _array(g, a, "np.rollaxis")
    probe = np.empty(tuple(range(2, t.ndim + 2)), dtype=np.bool_) if t.ndim else None
    if probe is None:
        raise np.exceptions.AxisError(axis, 0)
    perm = [s - 2 for s in np.rollaxis(probe, axis, start).shape]
    return views.transpose(t, perm)


def angle(g, z, deg=False) -> Tracer:
    """``np.angle`` of a real array: ``arctan2(0, x)`` (pi for negative
    values and -0.0), in degrees with ``deg``."""
    t = _array(g, z, "np.angle")
    out = UFUNCS["arctan2"](g, 0, t)
    return UFUNCS["multiply"](g, out, 180 / np.pi) if deg else out


def _constant_mask(value: bool) -> Callable:
    def run(g, x) -> Tracer:
        return _API["full_like"](g, _array(g, x, "np.isreal"), value, dtype=bool)
    return run


def modf(g, x) -> tuple[Tracer, Tracer]:
    """``np.modf``: ``(x - trunc(x), trunc(x))``, the fractional part signed
    as ``x`` (-0.0 of -2.0) and zero for infinities (numpy's values)."""
    t = _array(g, x, "np.modf")
    if t.dtype.kind != "f":         # numpy's float loop for the type (as np.sqrt's)
        t = astype(t, np.sqrt(np.zeros(1, t.dtype)).dtype)
    whole = UFUNCS["trunc"](g, t)
    frac = elementwise(g, "modf", lambda v: f"(({v} - {v} == 0 || {v} != {v}) ? "
                       f"copysign({v} - trunc({v}), {v}) : copysign(0.0, {v}))", [t])
    return frac, whole


# -- constant index arrays ----------------------------------------------------------------
def _extent(t: Tracer, axis: int) -> int:
    return int(t.shape[axis])       # (specialised: the indices are computed from it)


def delete(g, arr, obj, axis=None) -> Tracer:
    """``np.delete`` with indices, a slice or a mask known while tracing: a
    gather of the kept positions (the extent specialised)."""
    t = _array(g, arr, "np.delete")
    if isinstance(obj, Tracer):
        raise _refuse("np.delete with traced indices (the result's extent depends on "
                      "their values) is not supported; pass them as a numpy array")
    if axis is None:
        t, axis = views.reshape(t, (-1,)), 0
    ax = normalize_axis(int(axis), t.ndim)
    keep = np.delete(np.arange(_extent(t, ax)), obj)
    return gather.take(g, t, keep, ax)


def compress(g, condition, a, axis=None, out=None) -> Tracer:
    """``np.compress`` with a condition known while tracing."""
    if out is not None:
        raise _refuse("np.compress with out= is not supported")
    if isinstance(condition, Tracer):
        raise _refuse("np.compress with a traced condition (the result's extent depends "
                      "on its values) is not supported; use a[mask] reduced, or np.where")
    t = _array(g, a, "np.compress")
    if axis is None:
        t, axis = views.reshape(t, (-1,)), 0
    ax = normalize_axis(int(axis), t.ndim)
    cond = np.asarray(condition).astype(bool).ravel()
    if cond.size > _extent(t, ax):
        raise IndexError(f"index {cond.size - 1} is out of bounds for axis {ax} with size "
                         f"{_extent(t, ax)}")
    return gather.take(g, t, np.nonzero(cond)[0], ax)


def resize(g, a, new_shape) -> Tracer:
    """``np.resize``: the flattened array repeated cyclically to ``new_shape``."""
    t = views.reshape(_array(g, a, "np.resize"), (-1,))
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    n, total = _extent(t, 0), int(np.prod(shape))
    if n == 0 or total == 0:
        return _API["zeros_like"](g, t, shape=shape)
    return views.reshape(gather.take(g, t, np.arange(total) % n, 0), shape)


def take(g, a, indices, axis=None, out=None, mode="raise") -> Tracer:
    """``np.take``; ``mode='clip'``/``'wrap'`` with indices known while
    tracing (clipped or wrapped by numpy, the extent specialised)."""
    if mode == "raise" or out is not None:
        return gather.take(g, a, indices, axis, out, mode)
    if mode not in ("clip", "wrap"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    if isinstance(indices, Tracer):
        raise _refuse(f"np.take(mode={mode!r}) with traced indices is not supported; pass "
                      "them as a numpy array, or clip them with np.clip first")
    t = _array(g, a, "np.take")
    if axis is None:
        t, axis = views.reshape(t, (-1,)), 0
    ax = normalize_axis(int(axis), t.ndim)
    n = _extent(t, ax)
    idx = np.asarray(indices, dtype=np.int64)
    idx = np.clip(idx, 0, n - 1) if mode == "clip" else np.mod(idx, n)
    return gather.take(g, t, idx, ax)


def put(g, a, ind, v, mode="raise") -> None:
    """``np.put`` into a traced array with flat indices known while tracing:
    the assignment ``a[np.unravel_index(ind, a.shape)] = v`` (``v`` repeated
    to the indices' number, as numpy does; the extents specialised)."""
    t = _array(g, a, "np.put")
    if isinstance(ind, Tracer):
        raise _refuse("np.put with traced indices (a scatter) is not supported")
    size = int(np.prod([int(s) for s in t.shape]))
    idx = np.asarray(ind, dtype=np.int64).ravel()
    if mode == "clip":
        idx = np.clip(idx, 0, size - 1)
    elif mode == "wrap":
        idx = np.mod(idx, size)
    elif np.any((idx < -size) | (idx >= size)):
        raise IndexError(f"index {idx[(idx < -size) | (idx >= size)][0]} is out of bounds "
                         f"for axis 0 with size {size}")
    idx = np.where(idx < 0, idx + size, idx)
    val = v if isinstance(v, Tracer) else np.resize(np.asarray(v), idx.shape)
    if isinstance(v, Tracer):
        val = views.reshape(v, (-1,))
        if int(val.shape[0]) != idx.size:
            raise _refuse("np.put with a traced value of another length than the indices "
                          "(numpy repeats it) is not supported")
    setitem(t, np.unravel_index(idx, tuple(int(s) for s in t.shape)), val)


def put_along_axis(g, arr, indices, values, axis) -> None:
    """``np.put_along_axis`` into a traced array with indices known while
    tracing: numpy's fancy index along ``axis`` (the other axes' positions
    broadcast), an assignment (:mod:`polyc.graph.setitem`)."""
    t = _array(g, arr, "np.put_along_axis")
    if isinstance(indices, Tracer):
        raise _refuse("np.put_along_axis with traced indices (a scatter) is not supported; "
                      "pass them as a numpy array")
    if axis is None:
        raise _refuse("np.put_along_axis(axis=None) is not supported (it writes the "
                      "flattened array); use np.put")
    idx = np.asarray(indices)
    ax = normalize_axis(int(axis), t.ndim)
    if idx.ndim != t.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    shape = [int(s) for s in t.shape]
    key = []
    for d in range(t.ndim):
        if d == ax:
            key.append(np.where(idx < 0, idx + shape[d], idx))
        else:
            sh = [1] * t.ndim
            sh[d] = shape[d]
            key.append(np.arange(shape[d]).reshape(sh))
    setitem(t, tuple(key), values)


def take_along_axis(g, arr, indices, axis=-1) -> Tracer:
    """``np.take_along_axis``; ``axis=None`` reads the flattened array with
    1-d indices (numpy's)."""
    if axis is None:
        t = views.reshape(_array(g, arr, "np.take_along_axis"), (-1,))
        return gather.take_along_axis(g, t, indices, 0)
    return gather.take_along_axis(g, arr, indices, axis)


# -- pad with statistics ------------------------------------------------------------------
def pad_stat(g, t: Tracer, pw: np.ndarray, mode: str, concatenate: Callable,
             stat_length=None) -> Tracer:
    """``np.pad(mode='maximum'|'minimum'|'mean')``: each side of each axis
    filled with the statistic of the whole axis of the array padded so far
    (numpy's order, so corners take the later axes' statistic); a mean of
    integers is rounded half to even, as numpy does."""
    if stat_length is not None:
        raise _refuse(f"np.pad(mode={mode!r}, stat_length=...) is not supported; the "
                      "statistic of the whole axis is")
    kind = {"maximum": "max", "minimum": "min", "mean": "mean"}[mode]
    for d, (lo, hi) in enumerate(pw):
        lo, hi = int(lo), int(hi)
        if not lo and not hi:
            continue
        if _extent(t, d) == 0:
            raise ValueError(f"can't extend empty axis {d} using modes other than "
                             "'constant' or 'empty'")
        s = reduce(g, kind, t, d, True)
        if s.dtype != t.dtype:
            s = astype(UFUNCS["rint"](g, s) if t.dtype.kind in "iu" else s, t.dtype)
        parts = []
        for w in (lo, hi):
            shape = list(t.shape)
            shape[d] = w
            parts.append(views.broadcast_to(s, shape) if w else None)
        t = concatenate(g, [p for p in (parts[0], t, parts[1]) if p is not None], axis=d)
    return t


def vander(g, x, N=None, increasing=False) -> Tracer:
    """``np.vander``: column ``j`` of row ``i`` is ``x[i] ** j`` (reversed
    unless ``increasing``), by numpy's running product (``multiply.accumulate``,
    the same roundings) in ``promote_types(x.dtype, int)``."""
    t = _array(g, x, "np.vander")
    if t.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = int(t.shape[0]) if N is None else int(N)
    dt = np.promote_types(t.dtype, np.int64)
    t = t if t.dtype == dt else astype(t, dt)
    ones = _API["full_like"](g, t, 1, dtype=dt, shape=(t.shape[0], min(n, 1)))
    if n <= 1:
        return ones
    cols = views.broadcast_to(views.expand_dims(t, 1), (t.shape[0], n - 1))
    v = _API["concatenate"](g, [ones, scan(g, "cumprod", cols, 1, None, None)], axis=1)
    return v if increasing else views.getitem(v, (slice(None), slice(None, None, -1)))


def histogram_bin_edges(g, a, bins=10, range=None, weights=None) -> Tracer:
    """``np.histogram_bin_edges``: the edges of :func:`np.histogram` (its
    counts are dropped with the graph's dead nodes)."""
    return _API["histogram"](g, a, bins, range, None, weights)[1]


def choose(g, a, choices, out=None, mode="raise") -> Tracer:
    """``np.choose``: ``choices[a[...]][...]``, a chain of ``np.where`` over
    the broadcast operands.  numpy raises ``ValueError`` for an index out of
    range with ``mode='raise'``, which a kernel cannot: such an index takes
    the nearest choice, as ``mode='clip'`` (``'wrap'``: modulo)."""
    if out is not None:
        raise _refuse("np.choose with out= is not supported")
    idx = operand(g, a)
    if idx.dtype.kind not in "iub":
        raise TypeError("Cannot cast array data from dtype('float64') to dtype('int64') "
                        "according to the rule 'safe'")
    # numpy converts the choices with asarray: Python scalars are not weak
    cs = [c if isinstance(c, (Tracer, np.ndarray)) else np.asarray(c)[()] for c in choices]
    if not cs:
        raise ValueError("0-length sequence.")
    if mode == "wrap":
        idx = UFUNCS["remainder"](g, idx, len(cs))
    where = _API["where"]
    out = where(g, UFUNCS["equal"](g, idx, idx), cs[-1], cs[-1])    # (broadcast to a's)
    for k in reversed(range(len(cs) - 1)):
        out = where(g, UFUNCS["less_equal"](g, idx, k), cs[k], out)
    dt = result_dtype(*[operand(g, c) for c in cs])
    return out if out.dtype == dt else astype(out, dt)


# -- value-dependent Python results -----------------------------------------------------------
def _python_bool(name: str, hint: str) -> Callable:
    def run(g, a, b, *args, **kw) -> Any:
        loc = user_location()
        raise TraceError(
            f"{loc}: np.{name} returns a Python bool of the arrays' values, which do not "
            f"exist while polyc traces the function\n    {loc.text}\nhint: {hint}",
            filename=loc.filename, line=loc.line)
    return run


def functions(api: dict[str, Callable]) -> dict[str, Callable]:
    """These functions by numpy name (for ``FUNCTIONS``); ``api``: numpy_api's
    ``concatenate asarray full_like zeros_like``, which they build on."""
    _API.update(api)
    return {
        "ediff1d": ediff1d, "diagflat": diagflat, "rollaxis": rollaxis, "angle": angle,
        "isreal": _constant_mask(True), "iscomplex": _constant_mask(False),
        "delete": delete, "compress": compress, "resize": resize, "take": take,
        "put": put, "put_along_axis": put_along_axis, "take_along_axis": take_along_axis,
        "vander": vander, "histogram_bin_edges": histogram_bin_edges, "choose": choose,
        "allclose": _python_bool("allclose", "np.isclose(a, b).all() is a traced 0-d "
                                 "mask; or compare outside the jitted function"),
        "array_equal": _python_bool("array_equal", "np.all(a == b) is a traced 0-d "
                                    "mask; or compare outside the jitted function"),
        "array_equiv": _python_bool("array_equiv", "np.all(a == b) is a traced 0-d "
                                    "mask; or compare outside the jitted function"),
    }


UFUNC_EXTRAS: dict[str, Callable] = {"vecdot": vecdot, "matvec": matvec, "vecmat": vecmat,
                                     "modf": modf}
