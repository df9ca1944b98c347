"""Memory layouts in the torch backend's ATen graphs: ``aten.as_strided``,
the one ATen operator defined on a tensor's storage rather than on its
values, lowered from the layout torch gives its input (the FX node's fake
tensor strides).  numpy values in (tracers or concrete arrays), numpy
values out; :mod:`polyc.graph.torch_backend` registers the lowering.

Where it comes from: torch's decompositions restride a result to the
layout eager torch would give it, e.g. ``adaptive_avg_pool2d(x, 1)`` of a
``channels_last`` input ends in ``as_strided(mean, [N, C, 1, 1],
[C, 1, C, C])`` before ``flatten``.  polyc's values have no storage of
their own (a plan decides the layouts), so the lowering reads ``x`` in the
order torch stores it and picks the requested elements from that.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from ..errors import UnsupportedError
from .sizes import SizeInt


def _concrete(values: Sequence, what: str) -> tuple[int, ...]:
    """Extents as ints: a traced extent (:class:`~polyc.graph.sizes.SizeInt`)
    is specialised to its value (the plan is guarded by it, a new size
    traces again); a ``torch.SymInt`` of the graph's fake tensors (a
    dynamic shape) is read at its example value."""
    out = []
    for v in values:
        if isinstance(v, (int, np.integer, SizeInt)):
            out.append(int(v))
        elif hasattr(v, "node") and hasattr(v.node, "hint") and v.node.hint is not None:
            out.append(int(v.node.hint))
        else:
            raise UnsupportedError(f"aten.as_strided with {what} {tuple(values)} is not "
                                   "supported by polyc; compile with dynamic=False")
    return tuple(out)


def _storage_order(shape: tuple[int, ...], layout: tuple[int, ...]) -> list[int] | None:
    """The axes of a tensor of ``shape`` stored with strides ``layout``,
    outermost first, if that layout is dense (a permutation of a contiguous
    one: every element once, no gaps); else ``None``.  Axes of extent 1
    may have any stride."""
    order = sorted(range(len(shape)), key=lambda d: (-layout[d], d))
    expect = 1
    for d in reversed(order):
        if shape[d] != 1:
            if layout[d] != expect:
                return None
            expect *= shape[d]
    return order


def as_strided(x, size, stride, storage_offset=None, *, base):
    """``aten.as_strided(x, size, stride, storage_offset)`` where torch
    stores ``x`` densely (``base``: its fake tensor, whose strides give the
    order of its axes in storage): element ``i`` of the result is element
    ``storage_offset + sum(i * stride)`` of ``x``'s storage.

    A result that is itself a dense layout of consecutive storage elements
    (a restride, a permutation, a contiguous slice) is a reshape and a
    transpose of ``x`` in storage order; any other (overlapping windows,
    gaps) is a gather through a constant index array.  Shapes: ``x`` any,
    the result ``size``; dtype kept.

    Raises :class:`~polyc.errors.UnsupportedError` for symbolic sizes or
    strides, an ``x`` torch stores with gaps or overlaps, and an element
    outside ``x``'s storage."""
    layout = _concrete(base.stride(), "input strides")
    order = _storage_order(_concrete(base.shape, "input shape"), layout)
    if order is None or int(base.storage_offset()) != 0:
        raise UnsupportedError(f"aten.as_strided of a tensor stored with gaps or overlaps "
                               f"(shape {tuple(base.shape)}, strides {layout}, offset "
                               f"{base.storage_offset()}) is not supported by polyc")
    # the storage order of the example; its extents those of this trace
    shape = _concrete(x.shape, "input shape")
    size, stride = _concrete(size, "size"), _concrete(stride, "stride")
    offset = int(storage_offset or 0)
    n, m = math.prod(shape), math.prod(size)
    if m and (offset < 0 or offset + sum((s - 1) * abs(t) for s, t in zip(size, stride)) >= n
              or any(t < 0 for s, t in zip(size, stride) if s > 1)):
        raise UnsupportedError(f"aten.as_strided(size={size}, stride={stride}, "
                               f"storage_offset={offset}) reads outside its input's {n} "
                               "elements; polyc supports views within the input")
    flat = np.transpose(x, order) if order != list(range(len(shape))) else x
    flat = flat.reshape((n,))
    out_order = _storage_order(size, stride)
    if out_order is not None:
        # consecutive elements [offset, offset + m) laid out as ``size`` in ``out_order``
        part = flat[offset:offset + m] if (offset, m) != (0, n) else flat
        part = part.reshape(tuple(size[d] for d in out_order))
        inverse = [out_order.index(d) for d in range(len(size))]
        return np.transpose(part, inverse) if inverse != list(range(len(size))) else part
    index = np.full(size, offset, dtype=np.int64)
    for d, (s, t) in enumerate(zip(size, stride)):
        index = index + (np.arange(s, dtype=np.int64) * t).reshape(
            (1,) * d + (s,) + (1,) * (len(size) - d - 1))
    return np.take(flat, index)


def _hint(v) -> int | None:
    if isinstance(v, (int, np.integer)):
        return int(v)
    hint = getattr(getattr(v, "node", None), "hint", None)
    return None if hint is None else int(hint)


def output_orders(gm) -> list[list[int] | None]:
    """For each output of the ATen graph ``gm``, the storage order of its
    axes (outermost first) where torch gives it a dense layout that is not
    the contiguous one (a ``channels_last`` convolution's, a transposed
    result's); ``None`` where it is contiguous, not dense, or not a tensor.
    A dynamic shape's strides are read at their example values (the order
    of the axes does not change with the sizes)."""
    node = next(n for n in gm.graph.nodes if n.op == "output")
    orders: list[list[int] | None] = []
    for out in node.args[0]:
        val = getattr(out, "meta", {}).get("val")
        order = None
        if hasattr(val, "stride") and val.ndim > 1:
            shape = [_hint(s) for s in val.shape]
            layout = [_hint(s) for s in val.stride()]
            if None not in shape and None not in layout:
                order = _storage_order(tuple(shape), tuple(layout))
        orders.append(None if order is None or order == sorted(order) else order)
    return orders


def in_storage_order(outputs: tuple, orders: list[list[int] | None]) -> tuple:
    """The graph's ``outputs`` (numpy values), each transposed to the
    storage order torch gives it (:func:`output_orders`): polyc then writes
    it in that order, and :func:`restride` views it back."""
    return tuple(np.transpose(o, order) if order is not None and getattr(o, "ndim", -1) ==
                 len(order) else o for o, order in zip(outputs, orders))


def restride(results, orders: list[list[int] | None]):
    """The compiled function's results (torch tensors, in storage order,
    see :func:`in_storage_order`) as views with torch's shapes and strides:
    a ``channels_last`` model's output is ``channels_last``, no copy.  A
    numpy result (polyc.jit returns numpy where no argument was a tensor: a
    graph of ``arange``, ``full`` and sizes only) becomes a torch tensor of
    its own memory, as torch returns one."""
    single = not isinstance(results, (tuple, list))
    seq = (results,) if single else results
    if not any(orders) and not any(isinstance(r, (np.ndarray, np.generic)) for r in seq):
        return results
    out = []
    for r, order in zip(seq, orders or [None] * len(seq)):
        if isinstance(r, (np.ndarray, np.generic)):
            r = torch.from_numpy(np.array(r))
        if order is not None and getattr(r, "ndim", -1) == len(order):
            r = r.permute(*[order.index(d) for d in range(len(order))])
        out.append(r)
    return out[0] if single else type(seq)(out)
