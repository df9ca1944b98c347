"""Finite differences and NaN-aware moments of :func:`polyc.jit`, written
with the traced operations numpy's own implementations use, so that the
values are numpy's: ``gradient`` (second-order central differences inside,
one-sided ones of ``edge_order`` 1 or 2 at the ends; spacings as scalars or
coordinate arrays) and ``nanvar nanstd`` (NaNs left out of the mean, the
squares and the count), ``nanprod nancumsum nancumprod nanargmax
nanargmin`` (NaNs replaced, as numpy does); the grid builders ``meshgrid broadcast_arrays``
(views) and ``append``; numpy 2's ``linalg.vector_norm matrix_norm``;
``interp`` at constant points (:mod:`polyc.graph.interp`).
Each takes traced arrays and returns traced arrays;
:data:`polyc.graph.numpy_api.FUNCTIONS` lists them by numpy name.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedError
from . import histogram, morefns, search, views
from .core import Tracer, user_location
from .interp import interp
from .ops import Scalar, broadcast, capture, materialize, normalize_axis, operand, reduce
from .sizes import SizeInt
from .ufuncs import UFUNCS


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def _along(nd: int, ax: int, key: slice) -> tuple:
    return tuple(key if d == ax else slice(None) for d in range(nd))


def gradient(g, f, *varargs: Any, axis=None, edge_order: int = 1,
             concatenate: Callable | None = None) -> Tracer | tuple[Tracer, ...]:
    """``np.gradient(f, *varargs, axis=None, edge_order=1)``.

    ``f``: an array of at least one dimension, each differentiated axis at
    least ``edge_order + 1`` long (``ValueError`` otherwise, as numpy).
    ``varargs``: none (unit spacing), one scalar for every axis, or one per
    axis, each a scalar or a 1-D array of coordinates as long as its axis
    (numpy's non-uniform formulas, which numpy also takes for coordinates
    that happen to be evenly spaced: the values then agree within rounding).
    Returns one array of ``f``'s float type (float64 for integers) per axis,
    a tuple for several axes, as numpy does."""
    t = operand(g, f)
    if isinstance(t, Scalar) or t.ndim == 0:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                         "least (edge_order + 1) elements are required.")
    nd = t.ndim
    axes = list(range(nd)) if axis is None else \
        [normalize_axis(int(a), nd) for a in (axis if isinstance(axis, (tuple, list))
                                               else (axis,))]
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    if len(varargs) == 0:
        spacing: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    edge_order = int(edge_order)
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    if t.dtype.kind == "b":
        raise _refuse("np.gradient of booleans is not supported (numpy refuses boolean "
                      "subtraction)")
    otype = t.dtype if t.dtype.kind == "f" else np.dtype("float64")
    if t.dtype != otype:
        t = materialize(g, t, "astype", otype)
    outs = [_gradient_axis(g, t, ax, dx, edge_order, otype, concatenate)
            for ax, dx in zip(axes, spacing)]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _gradient_axis(g, t: Tracer, ax: int, dx: Any, edge_order: int, otype: np.dtype,
                   concatenate: Callable) -> Tracer:
    nd = t.ndim
    if t._shape[ax].value < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                         "least (edge_order + 1) elements are required.")
    at = lambda k: t[_along(nd, ax, slice(k, None if k == -1 else k + 1))]  # noqa: E731
    f_lo, f_mid, f_hi = (t[_along(nd, ax, s)] for s in
                         (slice(None, -2), slice(1, -1), slice(2, None)))
    if not isinstance(dx, Tracer) and np.ndim(dx) == 1:
        # numpy takes evenly spaced coordinates it can read as one spacing
        diffs = np.diff(np.asarray(dx, dtype=np.float64 if np.asarray(dx).dtype.kind in "iub"
                                   else None))
        if diffs.size and (diffs == diffs[0]).all() and \
                len(dx) == t._shape[ax].value:
            dx = diffs[0]
    x = operand(g, dx)
    if isinstance(x, Scalar):
        h = x.value
        inner = (f_hi - f_lo) / (2.0 * h)
        if edge_order == 1:
            first, last = (at(1) - at(0)) / h, (at(-1) - at(-2)) / h
        else:
            first = (-1.5 / h) * at(0) + (2.0 / h) * at(1) + (-0.5 / h) * at(2)
            last = (0.5 / h) * at(-3) + (-2.0 / h) * at(-2) + (1.5 / h) * at(-1)
    else:
        inner, first, last = _nonuniform(g, t, ax, x, edge_order, f_lo, f_mid, f_hi, at)
    parts = [p if p.dtype == otype else materialize(g, p, "astype", otype)
             for p in (first, inner, last)]
    return concatenate(g, parts, axis=ax)


def _nonuniform(g, t: Tracer, ax: int, x: Tracer, edge_order: int, f_lo, f_mid, f_hi, at):
    """numpy's formulas for the spacings ``np.diff(x)`` of coordinates ``x``."""
    if x.ndim != 1:
        raise ValueError("distances must be either scalars or 1d")
    if x._shape[0].value != t._shape[ax].value:
        raise ValueError("when 1d, distances must match the length of the corresponding "
                         "dimension")
    g.symbols.unify(x._shape[0], t._shape[ax], "np.gradient's coordinates")
    if x.dtype.kind in "iub":
        x = materialize(g, x, "astype", np.dtype("float64"))
    d = x[1:] - x[:-1]
    shape = [1] * t.ndim

    def along(v: Tracer) -> Tracer:            # a 1-D spacing broadcast along axis ax
        shape[ax] = -1
        return v.reshape(tuple(shape)) if t.ndim > 1 else v
    dx1, dx2 = d[:-1], d[1:]
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    inner = along(a) * f_lo + along(b) * f_mid + along(c) * f_hi
    if edge_order == 1:
        return inner, (at(1) - at(0)) / along(d[:1]), (at(-1) - at(-2)) / along(d[-1:])
    dx1, dx2 = d[:1], d[1:2]
    a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
    b = (dx1 + dx2) / (dx1 * dx2)
    c = -dx1 / (dx2 * (dx1 + dx2))
    first = along(a) * at(0) + along(b) * at(1) + along(c) * at(2)
    dx1, dx2 = d[-2:-1], d[-1:]
    a = dx2 / (dx1 * (dx1 + dx2))
    b = -(dx2 + dx1) / (dx1 * dx2)
    c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
    last = along(a) * at(-3) + along(b) * at(-2) + along(c) * at(-1)
    return inner, first, last


def nan_moment(kind: str) -> Callable:
    """``np.nanvar`` / ``np.nanstd`` (``axis``, ``dtype``, ``ddof``,
    ``keepdims``): numpy's ``_nanvar``: NaNs as 0, the mean of the others
    (their sum divided by their count, stored in the sum's type), the squared
    deviations of the others summed and divided by ``count - ddof`` (NaN
    where that is not positive).  Integer arrays are ``np.var``/``np.std``."""
    def run(g, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        if out is not None or set(kw) - {"where", "mean", "correction"} or \
                kw.get("where", True) is not True or kw.get("mean") is not None:
            raise _refuse(f"np.nan{kind} with out=, where= or mean= is not supported")
        if kw.get("correction") is not None:
            ddof = kw["correction"]
        t = operand(g, a)
        if isinstance(t, Scalar) or t.dtype.kind != "f":
            return np.var(t, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims) \
                if kind == "var" else np.std(t, axis=axis, dtype=dtype, ddof=ddof,
                                             keepdims=keepdims)
        nan = UFUNCS["isnan"](g, t)
        filled = np.where(nan, 0, t)
        cnt = reduce(g, "sum", UFUNCS["logical_not"](g, nan), axis, True, np.int64)
        s = reduce(g, "sum", filled, axis, True, dtype)
        avg = s / cnt
        avg = avg if avg.dtype == s.dtype else materialize(g, avg, "astype", s.dtype)
        dev = np.where(nan, 0, filled - avg)
        var = reduce(g, "sum", dev * dev, axis, bool(keepdims), dtype)
        dof = (cnt if keepdims else reduce(g, "sum", cnt, axis, False, np.int64)) - ddof
        q = var / dof
        q = q if q.dtype == var.dtype else materialize(g, q, "astype", var.dtype)
        q = np.where(dof <= 0, np.nan, q)
        q = q if q.dtype == var.dtype else materialize(g, q, "astype", var.dtype)
        return np.sqrt(q) if kind == "std" else q
    return run


def masked_moment(g, kind: str, a, axis, dtype, keepdims: bool, ddof, where) -> Tracer:
    """``np.var``/``np.std`` with ``where=``: numpy's ``_var``: the mean of
    the selected elements (their sum over their count, in the sum's type),
    the squared deviations of the selected ones summed and divided by
    ``max(count - ddof, 0)``; integers in float64, as numpy's."""
    t = operand(g, a)
    if isinstance(t, Scalar):
        t = _array(g, t)
    if t.dtype.kind in "iub":
        t = materialize(g, t, "astype", np.dtype(np.float64))
    w = views.broadcast_to(operand(g, np.where(where, True, False) if not isinstance(
        where, Tracer) else where), t.shape)
    s = np.sum(t, axis=axis, dtype=dtype, keepdims=True, where=w)
    cnt = reduce(g, "sum", w, axis, True, np.int64)
    avg = s / cnt
    avg = avg if avg.dtype == s.dtype else materialize(g, avg, "astype", s.dtype)
    dev = t - avg
    var = np.sum(dev * dev, axis=axis, dtype=dtype, keepdims=keepdims, where=w)
    dof = np.maximum((cnt if keepdims else reduce(g, "sum", cnt, axis, False, np.int64)) - ddof,
                     0)
    q = var / dof
    q = q if q.dtype == var.dtype else materialize(g, q, "astype", var.dtype)
    return np.sqrt(q) if kind == "std" else q


def nan_filled(kind: str) -> Callable:
    """``np.nanprod nancumsum nancumprod nanargmax nanargmin``: numpy's
    ``_replace_nan``: NaNs replaced by 1 (products), 0 (sums) or -inf/+inf
    (arg maxima/minima), then the plain function; integer arrays go straight
    to it.  numpy raises ``ValueError`` for a slice of NaNs only in
    ``nanargmax``/``nanargmin``, which needs the values: here such a slice
    gives index 0."""
    fill = {"prod": 1, "cumsum": 0, "cumprod": 1, "argmax": -np.inf, "argmin": np.inf}[kind]
    plain = getattr(np, kind)

    def run(g, a, *args, **kw):
        if kw.get("out") is not None or len(args) > (1 if kind.startswith("arg") else 2):
            raise _refuse(f"np.nan{kind} with out= is not supported")
        t = operand(g, a)
        if isinstance(t, Tracer) and t.dtype.kind == "f":
            t = np.where(UFUNCS["isnan"](g, t), fill, t)
        return plain(t, *args, **kw)
    return run


def _array(g, x: Any) -> Tracer:
    """``x`` traced, a scalar as numpy's 0-d array of it (its dtype, not weak)."""
    t = operand(g, x)
    if isinstance(t, Tracer):
        return t
    return views.reshape(capture(g, np.asarray(t.value).reshape(1)), ())


def broadcast_arrays(g, *args, subok: bool = False) -> tuple[Tracer, ...]:
    """``np.broadcast_arrays``: each operand a view of the common shape
    (a ``ShapeError`` at the user's line for shapes that do not broadcast)."""
    ts = [_array(g, a) for a in args]
    shape = broadcast(g, [t._shape for t in ts], "np.broadcast_arrays")
    return tuple(views.broadcast_to(t, [SizeInt(s) for s in shape]) for t in ts)


def meshgrid(g, *xi, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> tuple[Tracer, ...]:
    """``np.meshgrid``: each of the ``n`` arrays flattened along its own
    axis (the first two swapped for ``indexing='xy'``), then broadcast
    together unless ``sparse``; views, as a copy returned is a fresh array."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    out = []
    for k, x in enumerate(xi):
        t = _array(g, x)
        shape = [1] * n
        shape[k] = -1
        if indexing == "xy" and n > 1 and k < 2:
            shape[0], shape[1] = (1, -1) if k == 0 else (-1, 1)
        out.append(views.reshape(t, tuple(shape)))
    return tuple(out) if sparse else broadcast_arrays(g, *out)


def append(g, arr, values, axis=None, concatenate: Callable | None = None) -> Tracer:
    """``np.append``: ``arr`` and ``values`` joined along ``axis``, both
    flattened first for ``axis=None`` (a scalar ``values`` is numpy's 1-D
    array of it, with numpy's dtype for it, not a weak scalar)."""
    t, v = _array(g, arr), _array(g, values)
    if axis is None:
        t, v = views.reshape(t, (-1,)), views.reshape(v, (-1,))
        axis = 0
    return concatenate(g, [t, v], axis=axis)


def vector_norm(g, x, *, axis=None, keepdims: bool = False, ord=2) -> Tracer:
    """``np.linalg.vector_norm``: :func:`~polyc.graph.morefns.norm` of
    vectors along ``axis`` (every axis at once, as one flattened vector,
    for ``None`` or a tuple), with numpy's ``keepdims``."""
    t = _array(g, x)
    nd = t.ndim
    axes = tuple(range(nd)) if axis is None else \
        tuple(normalize_axis(int(a), nd) for a in (axis if isinstance(axis, tuple) else (axis,)))
    rest = [d for d in range(nd) if d not in axes]
    flat = views.reshape(views.transpose(t, rest + list(axes)),
                         tuple(t.shape[d] for d in rest) + (-1,))
    out = morefns.norm(g, flat, ord=ord, axis=-1)
    if keepdims:
        out = views.reshape(out, tuple(1 if d in axes else t.shape[d] for d in range(nd)))
    return out


def functions(concatenate: Callable) -> dict[str, Callable]:
    """These functions by numpy name (numpy_api lends its ``concatenate``)."""
    return {"gradient": lambda g, f, *varargs, axis=None, edge_order=1:
            gradient(g, f, *varargs, axis=axis, edge_order=edge_order,
                     concatenate=concatenate),
            "nanvar": nan_moment("var"), "nanstd": nan_moment("std"),
            **{f"nan{k}": nan_filled(k) for k in ("prod", "cumsum", "cumprod", "argmax",
                                                   "argmin")},
            "broadcast_arrays": broadcast_arrays, "meshgrid": meshgrid,
            "vector_norm": vector_norm,
            "matrix_norm": lambda g, x, *, keepdims=False, ord="fro":
                morefns.norm(g, x, ord=ord, axis=(-2, -1), keepdims=keepdims),
            "append": lambda g, arr, values, axis=None: append(g, arr, values, axis,
                                                               concatenate),
            "interp": interp, **search.functions(), **histogram.functions()}
