"""Integer array indexing of traced arrays: gathers.

``W[idx]`` (an embedding lookup), ``x[np.arange(n), labels]`` (the
probabilities of the labels), ``x[:, idx]`` and ``np.take(x, idx, axis)``
follow numpy's rules for advanced indexing
(https://numpy.org/doc/stable/user/basics.indexing.html#advanced-indexing):

* the integer arrays (and the integers, once any array is present) are
  broadcast together; the broadcast dimensions replace the indexed ones at
  the first indexed position when those positions are adjacent, and come
  first otherwise; slices keep their dimensions;
* a negative index counts from the end of its axis.

Each becomes one operation whose statement reads the data tensor at the
index tensors' values: a TC gather (``W(I(i), d)``), whose access polyc
over-approximates by the whole axis, so dependences stay sound
(``docs/tc-language.md``, "Indices").  numpy raises ``IndexError`` for an
index outside the axis; an index array passed to the jitted function or
closed over is checked at each call
(:class:`~polyc.errors.IndexBoundsError`, ``Graph.index_checks``), and the
kernel clamps every index into its axis, so that an index computed inside
the traced code can never read outside the array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import IndexBoundsError, UnsupportedError
from . import selection, views
from .core import Tracer, augmented_subscript_read, user_location
from .ops import (
    Scalar,
    broadcast,
    broadcast_read,
    elementwise,
    iters,
    lhs,
    new_node,
    normalize_axis,
    operand,
    s_token,
    where_clause,
)
from .sizes import Size


def _is_array(k: Any) -> bool:
    return isinstance(k, (Tracer, np.ndarray, list))


def getitem(t: Tracer, key: Any) -> Tracer:
    """``t[key]``: basic indexing (:func:`polyc.graph.views.getitem`), or a
    gather when ``key`` holds an integer array."""
    k = key if isinstance(key, tuple) else (key,)
    if (len(k) == 1 and isinstance(k[0], (Tracer, np.ndarray)) and k[0].dtype.kind == "b"
            and not augmented_subscript_read()):
        sel = selection.MaskedSelection(t, k[0])   # (checks the mask's shape, unites extents)
        if isinstance(k[0], np.ndarray):
            return gather(t, np.nonzero(k[0]))      # a constant mask: known positions
        return sel                                  # x[mask]: where= reductions, ufuncs
    if not any(_is_array(x) and not (isinstance(x, (Tracer, np.ndarray)) and
                                     x.dtype.kind == "b") for x in k):
        return views.getitem(t, key)
    return gather(t, k)


def take(g, a, indices, axis=None, out=None, mode="raise", *,
         negative: bool = True) -> Tracer:
    """``np.take``: ``a[..., indices, ...]`` along ``axis`` (None: of the
    flattened array).  ``negative=False``: an index array from outside the
    trace may not hold negative values (torch's ``embedding`` and
    ``index_select``: an ``IndexBoundsError`` at the call, as torch raises)."""
    if out is not None or mode != "raise":
        loc = user_location()
        raise UnsupportedError(f"{loc}: np.take with out= or mode={mode!r} is not supported "
                               f"in traced code\n    {loc.text}")
    t = operand(g, a)
    if axis is None:
        t, axis = views.reshape(t, (-1,)), 0
    ax = normalize_axis(int(axis), t.ndim)
    idx = indices if _is_array(indices) else np.asarray(indices)
    return gather(t, tuple([slice(None)] * ax + [idx]), negative=negative)


def take_along_axis(g, arr, indices, axis, *, negative: bool = True) -> Tracer:
    """``np.take_along_axis``: ``out[..., j, ...] = arr[..., indices[..., j,
    ...], ...]`` along ``axis`` (the other axes broadcast; ATen's
    ``gather``)."""
    t, x = operand(g, arr), _index_operand(g, indices)
    if not isinstance(x, Tracer) or x.ndim != t.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    ax = normalize_axis(int(axis), t.ndim)
    other = broadcast(g, [tuple(s for d, s in enumerate(t._shape) if d != ax),
                          tuple(s for d, s in enumerate(x._shape) if d != ax)],
                      "take_along_axis")
    shape = list(other[:ax]) + [x._shape[ax]] + list(other[ax:])
    its = iters(t.ndim)
    v = broadcast_read(x, its, np.dtype(np.int64), tuple(shape))
    coords = list(its)
    size = s_token(t._shape[ax])
    coords[ax] = _wrapped(v, size)
    for d in range(t.ndim):            # a unit axis of arr broadcasts: index 0
        if d != ax and t._shape[d].value == 1 and shape[d].value != 1:
            coords[d] = "0"
    _check_later(g, x, t._shape[ax], str(user_location()), negative)
    return _gathered(g, t, [t, x], its, tuple(shape), t.read(coords))


def _wrapped(v: str, size: str) -> str:
    """The index read ``v`` into an axis of extent ``size``: numpy's negative
    indices from the end, clamped into the axis (never a read outside)."""
    return f"max(0, min({size} - 1, (({v}) < 0) ? ({v}) + {size} : ({v})))"


def _check_later(g, x: Tracer, size: Size, where: str, negative: bool = True) -> None:
    """Record index array ``x`` for the per-call bounds check when it comes
    from outside the trace (an argument or a captured array); ``negative``:
    whether numpy's indices from the end are allowed."""
    if x.node is not None and x.node.kind in ("arg", "captured"):
        g.index_checks.append((x.node, size, where, negative))


def _index_operand(g, k: Any) -> Tracer | Scalar:
    x = operand(g, np.asarray(k) if isinstance(k, list) else k)
    dt = x.dtype if isinstance(x, Tracer) else np.asarray(x.value).dtype
    if dt.kind not in "iu":
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
    return x


def gather(t: Tracer, key: tuple, negative: bool = True) -> Tracer:
    """``t[key]`` for a ``key`` with integer arrays (see the module
    docstring); ``None`` in such a key is not supported.  ``negative``: see
    :func:`take`."""
    g = t._graph
    loc = user_location()
    if any(k is None for k in key):
        raise UnsupportedError(f"{loc}: np.newaxis next to an index array is not supported "
                               f"in traced code; index first, then expand_dims\n"
                               f"    {loc.text}")
    full = views.expand_key(key, t.ndim)        # (no None: refused above)
    adv = [d for d, k in enumerate(full) if not isinstance(k, slice)]
    index = {d: _index_operand(g, full[d]) for d in adv}
    arrays = [x for x in index.values() if isinstance(x, Tracer)]
    bshape = broadcast(g, [x._shape for x in arrays], "indexing")
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    first = adv[0] if adjacent else 0
    # the output's dimensions: slices before the broadcast ones (adjacent case)
    slices = [d for d in range(t.ndim) if d not in index]
    before = [d for d in slices if d < first] if adjacent else []
    after = [d for d in slices if d not in before]
    nb = len(bshape)
    out_pos = {d: k for k, d in enumerate(before)}
    out_pos.update({d: len(before) + nb + k for k, d in enumerate(after)})
    its = iters(len(before) + nb + len(after))
    bits = its[len(before):len(before) + nb]
    coords, shape = [None] * t.ndim, [None] * len(its)
    for k in range(nb):
        shape[len(before) + k] = bshape[k]
    for d in slices:
        start, length, step = views._slice(g, t._shape[d], full[d])
        start_t = s_token(start)
        j = its[out_pos[d]]
        term = j if step == 1 else f"{step}*{j}"
        coords[d] = term if start_t == "0" else f"{start_t} + {term}"
        shape[out_pos[d]] = length
    for d, x in index.items():
        n = t._shape[d]
        if isinstance(x, Scalar):
            v = int(x.value)
            if not -n.value <= v < n.value:
                raise IndexError(f"index {v} is out of bounds for axis {d} with size {n.value}")
            pos = Size.constant(g.symbols, v) if v >= 0 else n + v
            g.symbols.require(pos, "an index")
            g.symbols.require(n - pos - 1, "an index")
            coords[d] = s_token(pos)
            continue
        v = broadcast_read(x, bits, np.dtype(np.int64), tuple(bshape))
        size = s_token(n)
        coords[d] = _wrapped(v, size)
        _check_later(g, x, n, str(loc), negative)
    return _gathered(g, t, [t] + arrays, its, tuple(shape), t.read(coords))


def _gathered(g, t: Tracer, reads: list, its: list, shape: tuple, elem: str) -> Tracer:
    """The gather node ``[its] = elem`` of ``t``'s elements; of a mask, an
    int32 0/1 node read back as a mask (numpy's boolean result)."""
    if t.dtype.kind == "b":
        n = new_node(g, "gather", shape, np.dtype(np.int32), reads, lambda name: [
            f"{lhs(name, its)} = ({elem}) ? 1 : 0{where_clause(its, shape)}"])
        return elementwise(g, "gather", lambda a: f"({a} != 0)", [n], np.dtype(bool),
                           lazy=True, compute_dtype=n.dtype)
    return new_node(g, "gather", shape, t.dtype, reads, lambda name: [
        f"{lhs(name, its)} = {elem}{where_clause(its, shape)}"])


def check_indices(checks, env: dict, extent) -> None:
    """Raise :class:`~polyc.errors.IndexBoundsError` where an index array of
    ``checks`` (``Graph.index_checks``) holds a value outside its axis at
    this call; ``extent(size)``: the axis's extent at this call."""
    for node, size, where, negative in checks:
        a = env.get(node.name)
        if a is None or not np.size(a):
            continue
        n = int(extent(size))
        lo, hi = int(np.min(a)), int(np.max(a))
        bad = lo if lo < (-n if negative else 0) else hi if hi >= n else None
        if bad is not None:
            raise IndexBoundsError(
                f"{where}: index {bad} is out of bounds for an axis of size {n} (argument or "
                f"captured array {node.name}"
                + ("" if negative or bad >= 0 else "; indices from the end are not allowed "
                   "here, as in torch's embedding, index_select and gather") + ")")

