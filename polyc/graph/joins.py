"""Joining traced arrays: ``np.concatenate`` (``axis`` None too, ``dtype=``)
and ``np.stack``, on which ``hstack vstack column_stack dstack append tile
roll pad`` build.  The result is one operation whose element picks the
operand that covers its coordinate along the axis (a chain of comparisons
with the operands' offsets, which stay symbolic).  Masks (comparisons) are
joined as int32 0/1 and compared with 0: the result is a mask, as numpy's
boolean array.  ``out=`` and a ``casting=`` other than ``same_kind`` are
refused with :class:`~polyc.errors.UnsupportedError`."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import ops, views
from .core import Tracer, user_location
from .ops import Scalar, operand
from .sizes import Size
from .ufuncs import UFUNCS, astype


def _out_dtype_kw(what: str, kw: dict):
    """The ``dtype=`` of a joining function; ``out=`` and ``casting=`` are
    refused rather than ignored."""
    if kw.pop("out", None) is not None:
        raise UnsupportedError(f"{user_location()}: {what} with out= is not supported")
    dtype = kw.pop("dtype", None)
    if kw.pop("casting", "same_kind") != "same_kind" or kw:
        raise UnsupportedError(f"{user_location()}: {what} with "
                               f"{', '.join(kw) or 'casting'}= is not supported")
    return dtype


def concatenate(g, arrays, axis=0, out=None, **kw):
    dtype = _out_dtype_kw("np.concatenate", dict(kw, out=out))
    if dtype is not None:
        return astype(concatenate(g, arrays, axis), dtype)
    ts = [operand(g, a) for a in arrays]
    if not ts or any(isinstance(t, Scalar) for t in ts):
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    if all(t.dtype.kind == "b" for t in ts):    # masks: joined as int32 0/1, a mask again
        ints = [ops.materialize(g, t, "astype", np.int32) for t in ts]
        return UFUNCS["not_equal"](g, concatenate(g, ints, axis), 0)
    if axis is None:
        ts = [views.reshape(t, (-1,)) for t in ts]
        axis = 0
    nd = ts[0].ndim
    axis = ops.normalize_axis(int(axis), nd)
    dt = ops.result_dtype(*ts)
    shape = list(ts[0]._shape)
    for t in ts[1:]:
        if t.ndim != nd:
            raise ValueError("all the input array dimensions except for the concatenation "
                             "axis must match exactly")
        for d in range(nd):
            if d != axis:
                if t._shape[d].value != shape[d].value:
                    raise ValueError("all the input array dimensions except for the "
                                     "concatenation axis must match exactly, but along "
                                     f"dimension {d}, the array at index 1 has size "
                                     f"{t._shape[d].value} and the array at index 0 has "
                                     f"size {shape[d].value}")
                g.symbols.unify(shape[d], t._shape[d], "concatenate")
    its = ops.iters(nd)
    offsets = []
    total = Size.constant(g.symbols, 0)
    for t in ts:
        offsets.append(total)
        total = total + t._shape[axis]
    shape[axis] = total
    ia = its[axis]
    expr = None
    for t, off in reversed(list(zip(ts, offsets))):
        co = list(its)
        o = ops.s_token(off)
        co[axis] = ia if o == "0" else f"{ia} - {o}"
        rd = t.read(co)
        if expr is None:
            expr = rd
        else:
            end = ops.s_token(off + t._shape[axis])
            expr = f"({ia} < {end} ? {rd} : {expr})"
    return ops.new_node(g, "concatenate", tuple(shape), dt, ts, lambda name: [
        f"{ops.lhs(name, its)} = {expr}{ops.where_clause(its, shape)}"])


def stack(g, arrays, axis=0, out=None, **kw):
    dtype = _out_dtype_kw("np.stack", dict(kw, out=out))
    if dtype is not None:
        return astype(stack(g, arrays, axis), dtype)
    ts = [operand(g, a) for a in arrays]
    nd = ts[0].ndim + 1
    axis = ops.normalize_axis(int(axis), nd)
    return concatenate(g, [views.expand_dims(t, axis) for t in ts], axis)


def block(g, arrays) -> Tracer:
    """``np.block``: nested lists of arrays joined from the innermost list
    outwards (along axis -1, then -2, ...), every array first given
    ``max(list depth, its ndim)`` dimensions by leading ones, as numpy's."""
    def depth(x) -> int:
        if isinstance(x, tuple):
            raise TypeError("np.block does not allow implicit conversion from tuple to "
                            "ndarray; use a list")
        return 1 + depth(x[0]) if isinstance(x, list) and x else 0

    def leaves(x):
        return [y for e in x for y in leaves(e)] if isinstance(x, list) else [operand(g, x)]
    d = depth(arrays)
    if d == 0:
        return ops.materialize(g, operand(g, arrays)) if not isinstance(
            operand(g, arrays), Scalar) else operand(g, arrays)
    nd = max([d] + [getattr(t, "ndim", 0) for t in leaves(arrays)])

    def rec(x, level: int):
        if isinstance(x, list):
            if depth(x) != d - level:
                raise ValueError("List depths are mismatched in np.block")
            return concatenate(g, [rec(e, level + 1) for e in x], axis=level - d)
        if level != d:
            raise ValueError("List depths are mismatched in np.block")
        t = operand(g, x)
        if isinstance(t, Scalar):
            t = ops.materialize(g, Tracer(g, t.literal(t.dtype), (), (), t.dtype))
        return views.reshape(t, (1,) * (nd - t.ndim) + tuple(t.shape)) if t.ndim < nd else t
    return rec(arrays, 0)
