"""numpy 2's array-API names and the metadata functions of :func:`polyc.jit`:
``result_type`` (the traced arrays' dtypes, Python scalars weak, as numpy's),
``iscomplexobj isrealobj`` (from the dtype), ``size`` (the extents' product,
symbolic), ``cumulative_sum cumulative_prod`` (the scans of ``cumsum`` /
``cumprod``; ``include_initial`` puts the identity first), ``unstack`` (views
along ``axis``), ``diag_indices_from tril_indices_from triu_indices_from``
(numpy's constant index arrays, the extents specialised), ``block``
(:func:`polyc.graph.joins.block`) and
``linalg.vecdot`` (``sum(x1 * x2, axis)`` as an einsum over the broadcast
operands).  Each returns what numpy returns: numbers and
dtypes as Python values, arrays as traced arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import joins, views
from .contractions import einsum
from .core import Tracer
from .ops import Scalar, broadcast, normalize_axis, operand
from .sizes import SizeInt


def _meta(x: Any) -> Any:
    """A traced array as its dtype (numpy's strong operand), anything else as it is."""
    return x.dtype if isinstance(x, Tracer) else x


def result_type(g, *arrays_and_dtypes) -> np.dtype:
    return np.result_type(*[_meta(a) for a in arrays_and_dtypes])


def size(g, a, axis=None):
    """``np.size``: the number of elements (or the extent of ``axis``), an
    extent that stays symbolic until Python reads it as a number."""
    t = operand(g, a)
    if isinstance(t, Scalar):
        return 1
    if axis is None:
        n = SizeInt(t._shape[0]) if t.ndim else 1
        for s in t._shape[1:]:
            n = n * SizeInt(s)
        return n
    return t.shape[normalize_axis(int(axis), t.ndim)]


def cumulative(kind: str):
    """``np.cumulative_sum``/``np.cumulative_prod``: ``axis`` (required
    unless 1-D), ``dtype``, ``include_initial`` (0 or 1 first)."""
    def run(g, x, *, axis=None, dtype=None, out=None, include_initial=False):
        t = operand(g, x)
        if axis is None:
            if isinstance(t, Scalar) or t.ndim != 1:
                raise ValueError("For arrays which have more than one dimension ``axis`` "
                                 "argument is required.")
            axis = 0
        fn = np.cumsum if kind == "sum" else np.cumprod
        r = fn(t, axis=axis, dtype=dtype, out=out)
        if not include_initial:
            return r
        ax = normalize_axis(int(axis), r.ndim)
        like = np.zeros_like if kind == "sum" else np.ones_like
        first = like(r, shape=tuple(1 if d == ax else s for d, s in enumerate(r.shape)))
        return np.concatenate([first, r], axis=ax)
    return run


def unstack(g, x, *, axis=0) -> tuple:
    """``np.unstack``: the views ``x[..., i, ...]`` along ``axis``."""
    t = operand(g, x)
    ax = normalize_axis(int(axis), t.ndim)
    key = [slice(None)] * t.ndim
    out = []
    for i in range(int(t.shape[ax])):
        key[ax] = i
        out.append(views.getitem(t, tuple(key)))
    return tuple(out)


def vecdot(g, x1, x2, *, axis=-1) -> Tracer:
    """``np.linalg.vecdot`` of real arrays: ``sum(x1 * x2, axis)`` with the
    other dimensions broadcast (an einsum, a contraction)."""
    a, b = operand(g, x1), operand(g, x2)
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        raise ValueError("vecdot: Input operand does not have enough dimensions")
    a = views.moveaxis(a, normalize_axis(int(axis), a.ndim), -1)
    b = views.moveaxis(b, normalize_axis(int(axis), b.ndim), -1)
    shape = broadcast(g, [a._shape[:-1], b._shape[:-1]], "vecdot")
    n = [SizeInt(s) for s in shape]
    a = views.broadcast_to(a, n + [a.shape[-1]])
    b = views.broadcast_to(b, n + [b.shape[-1]])
    return einsum(g, "...i,...i->...", a, b)


def _square_n(t: Tracer, what: str) -> int:
    n = [int(s) for s in t.shape]
    if t.ndim < 2 or len(set(n)) != 1:
        raise ValueError(f"{what}: all dimensions of input must be of equal length")
    return n[0]


def indices_from(kind: str):
    """``np.diag_indices_from tril_indices_from triu_indices_from``: numpy's
    index arrays for the traced array's extents (specialised)."""
    def run(g, arr, k=0):
        t = operand(g, arr)
        if kind == "diag":
            return np.diag_indices(_square_n(t, "diag_indices_from"), t.ndim)
        if t.ndim != 2:
            raise ValueError("input array must be 2-d")
        n, m = int(t.shape[0]), int(t.shape[1])
        return (np.tril_indices if kind == "tril" else np.triu_indices)(n, k=k, m=m)
    return run


def functions() -> dict:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`)."""
    return {"result_type": result_type, "size": size, "unstack": unstack, "vecdot": vecdot,
            "iscomplexobj": lambda g, x: operand(g, x).dtype.kind == "c",
            "isrealobj": lambda g, x: operand(g, x).dtype.kind != "c",
            "block": joins.block, "cumulative_sum": cumulative("sum"),
            "cumulative_prod": cumulative("prod"),
            **{f"{k}_indices_from": indices_from(k) for k in ("diag", "tril", "triu")}}
