"""``torch.bucketize`` and ``torch.searchsorted`` for the torch backend
(:data:`polyc.graph.torch_backend.LOWERINGS` includes :data:`LOWERINGS`):
numpy values in (tracers or concrete arrays), numpy values out.

A binary search is data-dependent control flow; over a sorted sequence its
result is a count instead, a reduction polyc fuses: the position of ``v``
is the number of boundaries ``b`` with ``not (v <= b)`` (``right=False``,
``side="left"``) or ``not (v < b)`` (``right=True``), which is torch's
comparison, so a NaN value lands after every boundary as in torch.  The
cost is ``len(values) * len(boundaries)`` comparisons (torch's
``log2(len(boundaries))`` each): fine for the tens to thousands of
boundaries of a histogram or a quantizer.  No torch import: the table is
keyed by names of ``torch.ops.aten`` packets.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedError


def _count(seq, values, right: bool, out_int32: bool):
    """Positions of ``values`` (..., J) in the sorted last axis of ``seq``
    (..., K), or of a 1-d ``seq`` for any ``values``: ``(..., J)``."""
    v = np.expand_dims(values, -1)                         # (..., J, 1)
    b = np.expand_dims(seq, -2) if seq.ndim > 1 else seq   # (..., 1, K) or (K,)
    after = np.logical_not(v < b) if right else np.logical_not(v <= b)
    out = np.sum(np.where(after, 1, 0).astype(np.int64), axis=-1)
    return out.astype(np.int32) if out_int32 else out


def bucketize(values, boundaries, *, out_int32: bool = False, right: bool = False):
    """``aten.bucketize``: for each value the index of its bucket among the
    sorted 1-d ``boundaries`` (``torch.bucketize``'s shape: the values');
    int64, int32 with ``out_int32``."""
    if boundaries.ndim != 1:
        raise UnsupportedError("torch.bucketize takes 1-d boundaries")
    return _positions(boundaries, values, right, out_int32)


def searchsorted(seq, values, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter=None):
    """``aten.searchsorted``: the insertion positions of ``values`` in the
    sorted last axis of ``seq`` (1-d, or with the leading axes of
    ``values``); ``side="right"`` as ``right=True``; a ``sorter``
    (``argsort`` of an unsorted ``seq``) reads ``seq`` in its order."""
    if side is not None:
        right = side == "right"
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter, -1)
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(np.shape(values)[:-1]):
        raise UnsupportedError(f"torch.searchsorted of values of shape {np.shape(values)} "
                               f"in a sequence of shape {tuple(seq.shape)}: the leading "
                               "axes must agree")
    return _positions(seq, values, right, out_int32)


def _positions(seq, values, right: bool, out_int32: bool):
    """:func:`_count`, of a 0-d or Python-number value too (a 0-d result)."""
    if np.ndim(values) == 0:
        if not hasattr(values, "reshape"):
            values = np.asarray(values, dtype=seq.dtype)
        return _count(seq, values.reshape((1,)), right, out_int32).reshape(())
    return _count(seq, values, right, out_int32)


#: ATen packet name -> lowering, merged into the backend's table
LOWERINGS: dict[str, Callable[..., Any]] = {"bucketize": bucketize,
                                            "searchsorted": searchsorted}
