"""Max pooling with its indices for the torch backend
(``aten.max_pool{2,3}d_with_indices``, ``aten.adaptive_max_pool{2,3}d``,
``F.max_pool2d(x, k, return_indices=True)``): the values as
:func:`polyc.graph.torch_nn.max_pool` computes them, and the index of each
maximum, as torch gives it, into the flattened spatial axes of the input.
numpy values in (tracers or concrete arrays), numpy values out;
:mod:`polyc.graph.torch_backend` registers the lowerings.
"""

from __future__ import annotations

import numpy as np

from . import torch_nn as nn_ops

#: larger than any flattened spatial index (the minimum's neutral value)
_NONE = np.int64(2 ** 62)


def max_pool_with_indices(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``aten.max_pool{2,3}d_with_indices``: ``(values, indices)``, both of
    shape (N, C, *out) or (C, *out); the indices int64, each the position
    of its window's maximum in the input's flattened spatial axes
    (``h * W + w``), the first one in the window's row-major order where
    several are equal, as torch's CPU kernel picks it; of a window with NaNs
    the last NaN's (its value NaN).

    The window positions are a constant array of the (concrete) spatial
    extents: a traced extent is specialised to its value."""
    values = nn_ops.max_pool(x, kernel, stride, padding, dilation, ceil_mode)
    k, s, p, d = nn_ops._pool_args(x, kernel, stride, padding, dilation)
    nd = len(k)
    spatial = tuple(int(n) for n in x.shape[-nd:])
    right = nn_ops._ceil_extra(x, k, s, p, d) if ceil_mode else (0,) * nd
    lead = x.ndim - nd
    if any(p) or any(right):
        x = np.pad(x, ((0, 0),) * lead + tuple((q, q + r) for q, r in zip(p, right)),
                   constant_values=-np.inf)
    if lead != 2:
        x = x.reshape((1,) * (2 - lead) + tuple(x.shape))
    win = nn_ops._windows(x, k, s, d)                   # (N, C, *out, *window)
    out = tuple(int(n) for n in win.shape[2:2 + nd])
    # position[o, w] = flattened input index of window w of output cell o
    position = np.zeros(out + k, dtype=np.int64)
    for j in range(nd):
        coord = (np.arange(out[j], dtype=np.int64)[:, None] * s[j] - p[j]
                 + np.arange(k[j], dtype=np.int64)[None, :] * d[j])
        coord = np.moveaxis(coord.reshape((out[j], k[j]) + (1,) * (2 * nd - 2)),
                            (0, 1), (j, nd + j))
        position = position * spatial[j] + coord
    best = values.reshape((1,) * (2 - lead) + tuple(values.shape)) if lead != 2 else values
    best = best.reshape(tuple(best.shape) + (1,) * nd)
    window_axes = tuple(range(-nd, 0))
    indices = np.min(np.where(win == best, position, _NONE), axis=window_axes)
    if np.dtype(win.dtype).kind == "f":
        # a window with a NaN: its maximum is NaN and torch's kernel, which
        # takes every NaN it meets, gives the position of the window's last
        nan_at = np.max(np.where(win != win, position, -1), axis=window_axes)
        indices = np.where(nan_at >= 0, nan_at, indices)
    if lead != 2:
        indices = indices.reshape(tuple(indices.shape[2 - lead:]))
    return values, indices


def adaptive_max_pool_with_indices(x, output_size):
    """``aten.adaptive_max_pool{2,3}d``: ``(values, indices)`` where each
    output size divides its input extent (equal windows, a max pooling
    with kernel and stride ``n // o``); for other sizes the values only
    (reading the indices raises :class:`~polyc.errors.UnsupportedError`)."""
    out = tuple(int(o) for o in output_size)
    spatial = tuple(int(n) for n in x.shape[-len(out):])
    if any(n % o for n, o in zip(spatial, out)):
        return nn_ops._adaptive(x, out, "max"), nn_ops.PoolIndices(
            f"the indices of aten.adaptive_max_pool to {out} from {spatial} (polyc computes "
            "them where the output sizes divide the input's)")
    window = tuple(n // o for n, o in zip(spatial, out))
    return max_pool_with_indices(x, window, window)
