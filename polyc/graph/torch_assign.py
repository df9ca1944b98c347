"""numpy lowerings of the ATen operators that assignment in a model's code
becomes, and a few more, for the torch backend
(:data:`polyc.graph.torch_backend.LOWERINGS` includes :data:`LOWERINGS`).

AOTAutograd functionalizes ``y[:, :4] = x`` into ``slice_scatter`` (or
``select_scatter`` for ``y[:, 5] = 1``, ``copy`` for the broadcast value),
``y[y < 0] = 0`` and ``y[i] = v`` into ``index_put``, and a buffer made with
``torch.empty`` into ``empty``; circular padding is built the same way.
Each is a new value here (traced values are immutable): the input with the
region replaced, :func:`polyc.graph.setitem.assigned` on a tracer, a numpy
copy on concrete arrays.  Also ``isnan``/``isinf``/``isfinite`` (``xlogy``
and ``kl_div`` decompose to them), ``var_mean``/``std_mean`` and
``diagonal``, ``scatter``/``scatter_add``.  No torch import: the table is keyed by names of
``torch.ops.aten`` packets, which :mod:`torch_backend` resolves.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import IndexBoundsError, UnsupportedError
from . import ops as _ops
from .core import Tracer
from .setitem import assigned
from .torch_values import full, full_like, is_int, var

_BIG = 2 ** 62


def _graph_of(*vals):
    return next((v._graph for v in vals if isinstance(v, Tracer)), None)


def _assign(x, key: tuple, src):
    """``x`` with ``x[key] = src`` (``src`` broadcast to the region and
    converted to ``x``'s dtype), ``x`` itself unchanged."""
    g = _graph_of(x, src)
    if g is None:
        out = np.array(x, copy=True)
        out[key] = src
        return out
    if not isinstance(x, Tracer):
        x = _ops.capture(g, np.ascontiguousarray(x))
    return assigned(x, key, src)


def _check_positions(x, index, d: int, negative: bool, what: str) -> None:
    """Constant positions ``index`` along axis ``d`` of ``x`` must lie in the
    axis (from its end too where ``negative``), as torch raises otherwise
    (:class:`~polyc.errors.IndexBoundsError`; the one-hot scatter would drop
    them silently).  Positions from the model's inputs are checked at each
    call (:mod:`polyc.graph.torch_bounds`)."""
    if isinstance(index, np.ndarray) and index.size:
        n = int(x.shape[d])
        lo, hi = int(index.min()), int(index.max())
        bad = lo if lo < (-n if negative else 0) else hi if hi >= n else None
        if bad is not None:
            raise IndexBoundsError(f"{what}: index {bad} is out of bounds for dimension {d} "
                                   f"with size {n}")


def _norm_slice(start, end, step):
    if is_int(start, 0):
        start = None
    if isinstance(end, (int, np.integer)) and end >= _BIG:
        end = None
    return slice(start, end, step)


def slice_scatter(x, src, dim: int = 0, start=None, end=None, step: int = 1):
    """``aten.slice_scatter``: ``x`` with ``x[..., start:end:step, ...] =
    src`` along ``dim``."""
    key = (slice(None),) * (dim % x.ndim) + (_norm_slice(start, end, step),)
    return _assign(x, key, src)


def select_scatter(x, src, dim: int, index):
    """``aten.select_scatter``: ``x`` with ``x[..., index, ...] = src``
    along ``dim``."""
    return _assign(x, (slice(None),) * (dim % x.ndim) + (index,), src)


def copy(x, src, non_blocking: bool = False):
    """``aten.copy`` (functional ``x.copy_(src)``): ``src`` broadcast to
    ``x``'s shape, in ``x``'s dtype."""
    return _assign(x, (Ellipsis,), src)


def index_put(x, indices, values, accumulate: bool = False):
    """``aten.index_put``: a single boolean mask over ``x``'s leading axes
    with one value (``y[y < 0] = 0``, ``masked_fill``'s in-place form),
    or one integer index array on one axis (``y[i] = v``, ``index_add``,
    ``y[:, i] += v``), the scatter written as a one-hot contraction;
    integer index arrays on adjacent axes (``y[i, j] = v``, ``F.fold``) as
    one on those axes merged.  Raises :class:`~polyc.errors.UnsupportedError`
    for index arrays on axes apart, boolean masks with others, and an array
    of values under a mask (a data-dependent placement)."""
    idx = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(idx) > 1:
        return _put_merged(x, idx, values, accumulate)
    d, i = idx[0]
    if i.dtype == np.bool_:
        return _masked_put(x, d, i, values, accumulate)
    _check_positions(x, i, d, True, "aten.index_put")
    return _scatter(x, d, i, values, accumulate)


def _put_merged(x, idx: list, values, accumulate: bool):
    """``x[..., i, j, ...] = values`` with integer index arrays on the
    adjacent axes ``d .. d+k-1``: the axes merged into one of their product's
    extent, indexed by ``i * n_j + j`` (each index from the end where
    negative, as torch counts it), and split again."""
    axes = [d for d, _ in idx]
    if axes != list(range(axes[0], axes[0] + len(axes))) or \
            any(i.dtype == np.bool_ for _, i in idx):
        raise UnsupportedError("aten.index_put with index tensors on axes apart (x[i, :, j] "
                               "= v) or with a boolean mask among them is not supported by "
                               "polyc; index adjacent axes with integer tensors")
    d, shape = axes[0], tuple(x.shape)
    extents = [shape[a] for a in axes]
    for a, i in idx:
        _check_positions(x, i, a, True, "aten.index_put")
    linear = None
    for (a, i), n in zip(idx, extents):
        i = np.where(i < 0, i + n, i)
        linear = i if linear is None else linear * n + i
    merged = x.reshape(shape[:d] + (int(np.prod([int(n) for n in extents])),)
                       + shape[d + len(axes):])
    out = _scatter(merged, d, linear, values, accumulate)
    return out.reshape(shape)


def _masked_put(x, d: int, mask, values, accumulate: bool):
    if d != 0:
        raise UnsupportedError("aten.index_put with a boolean mask after other axes "
                               "(x[:, mask] = v) is not supported by polyc; use torch.where")
    if int(np.prod([int(s) for s in getattr(values, "shape", ())])) != 1:
        raise UnsupportedError("aten.index_put of a tensor of values under a boolean mask "
                               "(x[mask] = v) fills the True positions in order, a placement "
                               "that depends on the data: polyc does not support it; use "
                               "torch.where(mask, v, x)")
    v = values.reshape(()) if hasattr(values, "reshape") else values
    if isinstance(mask, np.ndarray) and isinstance(x, Tracer):
        mask = _ops.capture(x._graph, mask.astype(np.float32)) != 0
    m = mask.reshape(tuple(mask.shape) + (1,) * (x.ndim - mask.ndim))
    new = x + v if accumulate else v
    return np.where(m, new, x).astype(x.dtype)


def _scatter(x, d: int, i, values, accumulate: bool):
    """Positions ``i`` (any shape, negative counted from the end) along axis
    ``d`` of ``x``: ``onehot[k, n] = (i[k] == n)`` and the contribution
    ``sum_k onehot[k, n] * values[..., k, ...]``; without ``accumulate``
    the positions written take it, the others keep ``x``, and a position
    written more than once takes its last value (torch documents it as
    undefined; its CPU kernel writes in order)."""
    if x.dtype.kind != "f":
        raise UnsupportedError("aten.index_put with integer indices into a non-float "
                               "tensor is not supported by polyc")
    n = x.shape[d]
    flat = i.reshape((-1,))
    k = flat.shape[0]
    flat = np.where(flat < 0, flat + n, flat)
    positions = np.arange(int(n))          # (a symbolic extent is specialised)
    onehot = (flat.reshape((k, 1)) == positions.reshape((1, -1)))
    if not accumulate:
        # a position written more than once takes its last value, as torch's
        # sequential CPU kernel leaves it: keep the last k of each position
        rank = np.arange(1, int(k) + 1, dtype=np.int64).reshape((k, 1))
        last = np.max(np.where(onehot, rank, 0), axis=0)
        onehot = np.logical_and(onehot, rank == last.reshape((1, -1)))
    onehot = np.where(onehot, 1.0, 0.0).astype(x.dtype)
    region = tuple(x.shape[:d]) + tuple(i.shape) + tuple(x.shape[d + 1:])
    v = np.broadcast_to(values, region) if isinstance(values, np.ndarray) or \
        isinstance(values, Tracer) else np.full(region, values, dtype=x.dtype)
    v = v.reshape(tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])).astype(x.dtype)
    vm = np.moveaxis(v, d, -1)
    contrib = np.moveaxis(np.matmul(vm, onehot), -1, d)
    if accumulate:
        return x + contrib
    hit = np.max(onehot, axis=0).reshape((int(n),) + (1,) * (x.ndim - d - 1))
    return np.where(hit > 0, contrib, x)


def scatter(x, dim: int, index, src, reduce=None, *, add: bool = False):
    """``aten.scatter`` (a tensor or a value, ``F.one_hot``'s common
    spelling ``zeros.scatter_(1, y[:, None], 1.0)``) and ``scatter_add``:
    ``out[..., index[..., j, ...], ...] = src[..., j, ...]`` along ``dim``,
    as a one-hot comparison of ``index`` with the positions of the axis and
    a sum over ``j`` (added to ``x`` for ``scatter_add``; for ``scatter``
    a position written twice takes the last value, as torch's CPU kernel
    leaves it).  ``index`` may be smaller than ``x`` on the other axes (it
    writes that corner, as torch); ``reduce=`` raises
    :class:`~polyc.errors.UnsupportedError`."""
    if reduce is not None:
        raise UnsupportedError(f"aten.scatter with reduce={reduce!r} is not supported by polyc")
    d = dim % x.ndim
    if index.ndim != x.ndim or any(int(index.shape[a]) > int(x.shape[a])
                                   for a in range(x.ndim) if a != d):
        raise UnsupportedError(f"aten.scatter with an index of shape {tuple(index.shape)} "
                               f"into a tensor of shape {tuple(x.shape)}: torch needs the "
                               "same number of axes, none larger except along dim")
    # an index smaller than x on the other axes writes only that corner
    widths = [(0, 0) if a == d else (0, int(x.shape[a]) - int(index.shape[a]))
              for a in range(x.ndim)]
    if x.dtype.kind != "f":
        raise UnsupportedError("aten.scatter into a non-float tensor is not supported by polyc")
    _check_positions(x, index, d, False, "aten.scatter")
    n = int(x.shape[d])
    idx = np.moveaxis(index, d, -1)
    idx = np.where(idx < 0, idx + n, idx)
    onehot = np.expand_dims(idx, -1) == np.arange(n)                  # (..., J, N)
    if not add:
        # a position written more than once takes its last value (torch's CPU
        # kernel writes in order): keep the last j of each position
        j = int(idx.shape[-1])
        rank = np.arange(1, j + 1, dtype=np.int64).reshape((j, 1))
        last = np.max(np.where(onehot, rank, 0), axis=-2, keepdims=True)
        onehot = np.logical_and(onehot, rank == last)
    onehot = np.where(onehot, 1.0, 0.0).astype(x.dtype)
    if isinstance(src, (Tracer, np.ndarray)) and src.ndim:
        src = src[tuple(slice(0, int(s)) for s in index.shape)]
        vals = np.expand_dims(np.moveaxis(src, d, -1), -1).astype(x.dtype)
    else:
        vals = src
    contrib = np.moveaxis(np.sum(onehot * vals, axis=-2), -1, d)
    if any(w for _, w in widths):
        contrib = np.pad(contrib, widths)
    if add:
        return x + contrib
    hit = np.moveaxis(np.max(onehot, axis=-2), -1, d)
    if any(w for _, w in widths):
        hit = np.pad(hit, widths)
    return np.where(hit > 0, contrib, x)


_NEUTRAL = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": -np.inf, "amin": np.inf}


def scatter_reduce(x, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """``aten.scatter_reduce.two`` (``x.scatter_reduce(dim, index, src,
    reduce)``, ``reduce`` one of ``sum prod mean amax amin``): each position
    of ``x`` along ``dim`` that ``index`` hits combines the ``src`` values
    sent to it (with its own value where ``include_self``; ``mean``
    counts it as one more value), the others keep ``x``.  Written as the
    one-hot comparison of :func:`scatter`, every ``src`` value masked by it
    (the operator's neutral element elsewhere) and reduced over ``j``.
    Raises :class:`~polyc.errors.UnsupportedError` for another ``reduce``
    and a non-float ``x``."""
    if reduce not in _NEUTRAL:
        raise UnsupportedError(f"aten.scatter_reduce with reduce={reduce!r} is not supported "
                               f"by polyc (supported: {', '.join(_NEUTRAL)})")
    d = dim % x.ndim
    if index.ndim != x.ndim or x.dtype.kind != "f":
        raise UnsupportedError(f"aten.scatter_reduce of a {x.dtype} tensor of shape "
                               f"{tuple(x.shape)} with an index of shape {tuple(index.shape)} "
                               "is not supported by polyc (a float tensor, an index with as "
                               "many axes)")
    _check_positions(x, index, d, False, "aten.scatter_reduce")
    n = int(x.shape[d])
    onehot = np.expand_dims(np.moveaxis(index, d, -1), -1) == np.arange(n)    # (..., J, N)
    src = src[tuple(slice(0, int(s)) for s in index.shape)]
    vals = np.expand_dims(np.moveaxis(src, d, -1), -1).astype(x.dtype)        # (..., J, 1)
    red = {"sum": np.sum, "mean": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}
    acc = red[reduce](np.where(onehot, vals, _NEUTRAL[reduce]).astype(x.dtype), axis=-2)
    hits = np.sum(np.where(onehot, 1.0, 0.0).astype(x.dtype), axis=-2)
    acc, hits = np.moveaxis(acc, -1, d), np.moveaxis(hits, -1, d)
    widths = [(0, 0) if a == d else (0, int(x.shape[a]) - int(index.shape[a]))
              for a in range(x.ndim)]
    if any(w for _, w in widths):           # (an index smaller than x: that corner)
        acc, hits = np.pad(acc, widths), np.pad(hits, widths)
    if not include_self:
        out = acc / np.maximum(hits, 1.0) if reduce == "mean" else acc
    elif reduce in ("sum", "mean"):
        out = x + acc if reduce == "sum" else (x + acc) / (hits + 1.0)
    elif reduce == "prod":
        out = x * acc
    else:
        out = np.maximum(acc, x) if reduce == "amax" else np.minimum(acc, x)
    return np.where(hits > 0, out, x).astype(x.dtype)


def empty(size, *, dtype=None, like=None, **kw):
    """``aten.empty``: zeros (its values are undefined; polyc fills them)."""
    return full(size, 0.0, dtype=dtype, like=like)


def empty_like(x, *, dtype=None, **kw):
    return full_like(x, 0, dtype=dtype)


def _finite(kind: str) -> Callable:
    fn = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}[kind]

    def run(x):
        if x.dtype.kind != "f":            # integers: never nan or inf
            full = np.zeros_like(x) if kind != "isfinite" else np.ones_like(x)
            return full != 0
        return fn(x)
    return run


def var_mean(std: bool) -> Callable:
    """``aten.var_mean``/``std_mean`` (their ``correction`` overloads):
    the variance (or standard deviation) and the mean."""
    def run(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        axis = None if dim is None else (dim,) if isinstance(dim, int) else tuple(dim) or None
        spread = var(std)(x, dim, unbiased, keepdim, correction=correction)
        from .torch_nn import wide
        return spread, np.mean(wide(x), axis=axis, keepdims=keepdim)
    return run


def diagonal(x, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """``aten.diagonal``: numpy's, the diagonal axis last as in torch."""
    return np.diagonal(x, offset, dim1, dim2)


#: ATen packet name -> lowering, merged into the backend's table
LOWERINGS: dict[str, Callable[..., Any]] = {
    "slice_scatter": slice_scatter, "select_scatter": select_scatter, "copy": copy,
    "index_put": index_put, "empty": empty, "empty_like": empty_like, "scatter": scatter,
    "scatter_add": lambda x, dim, index, src: scatter(x, dim, index, src, add=True),
    "scatter_reduce": scatter_reduce,
    "isnan": _finite("isnan"), "isinf": _finite("isinf"), "isfinite": _finite("isfinite"),
    "var_mean": var_mean(False), "std_mean": var_mean(True), "diagonal": diagonal,
}
