"""``nn.EmbeddingBag`` for the torch backend (``aten._embedding_bag``):
bags of one length (a 2-D input) as a gather and a reduction; bags given
by an ``offsets`` tensor (a 1-D input, the usual recommender-model call
``bag(indices, offsets)``, offsets an input or uneven) as a one-hot
contraction of the gathered rows with each element's bag.  numpy values
in (tracers or concrete arrays), numpy values out;
:mod:`polyc.graph.torch_backend` registers the lowering.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .torch_nn import PoolIndices
from .torch_values import take

_MODES = {0: "sum", 1: "mean", 2: "max"}


def _even_step(offsets, n: int) -> int | None:
    """The common bag length where ``offsets`` is a constant ``0, s, 2s,
    ...`` covering all ``n`` elements (what torch makes for a 2-D input)."""
    if not isinstance(offsets, np.ndarray) or offsets.size == 0 or offsets[0] != 0:
        return None
    step = int(offsets[1] - offsets[0]) if offsets.size > 1 else n
    if step * offsets.size != n or not np.array_equal(offsets,
                                                     np.arange(offsets.size) * step):
        return None
    return step


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """``aten._embedding_bag``: ``weight`` (V, D), ``indices`` (N,) integer,
    ``offsets`` (B,) integer (``B + 1`` with ``include_last_offset``), each
    the start of a bag in ``indices``; the result (B, D) in ``weight``'s
    dtype: each bag's rows summed (mode 0, times ``per_sample_weights``
    (N,)), averaged (1) or maxed (2).  Elements equal to ``padding_idx``
    are left out of their bag (its mean counts the others); an empty bag
    gives zeros, as in torch.  The other three outputs (bookkeeping for the
    backward) are not computed.

    Even bags are a gather and a reduction over a (B, L, D) array; other
    offsets a (B, N) one-hot matrix of each element's bag times the (N, D)
    gathered rows, ``B * N * D`` multiply-adds (``B * N * D`` comparisons
    for the maximum).  Indices are checked against ``V`` at each call
    (:class:`~polyc.errors.IndexBoundsError`)."""
    mode = int(mode)
    if mode not in _MODES:
        raise UnsupportedError(f"aten._embedding_bag mode {mode} is not supported by polyc")
    n = int(indices.shape[0])
    pad = padding_idx is not None and padding_idx >= 0
    unused = PoolIndices("the offsets and counts outputs of aten._embedding_bag")
    rows = take(weight, indices, 0)                               # (N, D)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape((n, 1))
    if include_last_offset:
        offsets = offsets[:-1]
    step = None if pad else _even_step(offsets, n)
    if step is not None:
        bags = rows.reshape((n // step, step, rows.shape[-1]))
        red = {0: np.sum, 1: np.mean, 2: np.max}[mode]
        return red(bags, axis=1), unused, unused, unused
    # bag[n] = (number of offsets <= n) - 1; member[b, n] = bag[n] == b
    position = np.arange(n, dtype=np.int64)
    starts = np.where(offsets.reshape((-1, 1)) <= position.reshape((1, n)), 1, 0)
    bag = starts.sum(axis=0) - 1                                   # (N,)
    bags = np.arange(int(offsets.shape[0]), dtype=np.int64).reshape((-1, 1))
    member = bag.reshape((1, n)) == bags                           # (B, N)
    if pad:
        member = np.logical_and(member, (indices != padding_idx).reshape((1, n)))
    if mode == 2:
        big = np.where(member.reshape(member.shape + (1,)), rows.reshape((1,) + rows.shape),
                       -np.inf)
        out = big.max(axis=1)
        return np.where(out == -np.inf, 0.0, out).astype(rows.dtype), unused, unused, unused
    weights = np.where(member, 1.0, 0.0).astype(rows.dtype)
    out = weights @ rows
    if mode == 1:
        count = weights.sum(axis=1, keepdims=True)
        out = out / np.maximum(count, 1.0)
    return out, unused, unused, unused
