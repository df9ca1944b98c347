"""Scans for :func:`polyc.jit`: ``np.cumsum`` and ``np.cumprod`` along one
axis, as a first-order recurrence.

A scan is one node of two TC statements over the array's domain::

    O(i0, i1) = X(i0, i1)
    O(i0, i1) = O(i0, i1 - 1) + O(i0, i1)  where i1 in 1:N1

The second reads its own result one step back along the axis, a flow
dependence of distance 1 that the exact dependence analysis keeps: the
axis runs in order, the other dimensions stay parallel (rows of a 2-D
cumsum on separate threads).  The sums are those of numpy's sequential
loop (``out[i] = out[i - 1] + x[i]``; addition and multiplication commute
exactly), so the result is numpy's bit for bit.  ``axis=None`` of a 1-D
array is its axis 0; of a larger one (numpy flattens) it is refused,
naming the axis argument.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from . import views
from .accumulate import integer_total
from .core import Tracer, user_location
from .ops import (
    Scalar,
    count,
    iters,
    lhs,
    materialize,
    new_node,
    normalize_axis,
    operand,
    s_token,
    where_clause,
)

#: the recurrence of each scan: the previous result and the element
_OPS = {"cumsum": lambda p, x: f"{p} + {x}", "cumprod": lambda p, x: f"{p} * {x}",
        # numpy's maximum/minimum: a NaN on either side is the result
        "cummax": lambda p, x: f"(({p} != {p}) || ({p} > {x})) ? {p} : {x}",
        "cummin": lambda p, x: f"(({p} != {p}) || ({p} < {x})) ? {p} : {x}"}


def scan(graph, kind: str, x: Any, axis=None, dtype=None, out=None) -> Tracer:
    """``np.cumsum`` (``kind="cumsum"``), ``np.cumprod``, or
    ``np.maximum.accumulate``/``np.minimum.accumulate`` (``"cummax"``,
    ``"cummin"``: NaN propagates, the dtype is kept) of ``x`` along
    ``axis``; for sums and products integers and booleans accumulate in
    int64 and floats in their own type unless ``dtype`` says otherwise
    (numpy's rules).
    ``axis=None`` scans the flattened array (a copy in C order).  Raises
    :class:`~polyc.errors.UnsupportedError` for ``out=``."""
    loc = user_location()
    if out is not None:
        raise UnsupportedError(f"{loc}: np.{kind} with out= is not supported in traced "
                               f"code\n    {loc.text}")
    x = operand(graph, x)
    if isinstance(x, Scalar):
        x = materialize(graph, Tracer(graph, x.literal(x.dtype), (), (), x.dtype))
    if x.ndim == 0:
        x = materialize(graph, x)
    if axis is None:
        if x.ndim > 1:                     # numpy scans the flattened array
            x = materialize(graph, views.reshape(x, (-1,)))
        axis = 0
    nd = max(x.ndim, 1)
    ax = normalize_axis(int(axis), nd)
    its = iters(nd)
    if x.node is None and re.search(r"[/%]", x.read(its)):
        x = materialize(graph, x)            # a merged reshape: read its own copy
    elem = x.read(its)
    if x.dtype.kind == "b":
        elem = f"(({elem}) ? 1 : 0)"
    if kind in ("cummax", "cummin"):         # (maximum.accumulate keeps the dtype)
        dt = np.dtype(dtype) if dtype is not None else x.dtype
    else:
        dt = np.dtype(dtype) if dtype is not None else (
            integer_total(x.dtype, f"np.{kind}") if x.dtype.kind in "iub" else x.dtype)
    shape = x._shape
    prev = [f"{it} - 1" if d == ax else it for d, it in enumerate(its)]
    rest = " where " + ", ".join(f"{it} in {1 if d == ax else 0}:{s_token(s)}"
                                 for d, (it, s) in enumerate(zip(its, shape)))
    op = _OPS[kind]
    return new_node(graph, kind, shape, dt, [x], lambda name: [
        f"{lhs(name, its)} = {elem}{where_clause(its, shape)}",
        f"{lhs(name, its)} = {op(lhs(name, prev), lhs(name, its))}{rest}"],
        flops=count(shape))
