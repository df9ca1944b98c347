"""torch dtypes, ``dim`` arguments and constant tensors as numpy values, for
the torch backend's lowerings (:mod:`polyc.graph.torch_backend`,
:mod:`polyc.graph.torch_assign`): traced arrays in, traced arrays out."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..errors import UnsupportedError
from . import torch_nn as nn_ops
from .core import Tracer
from .sizes import SizeInt

_DTYPES = {torch.float32: np.float32, torch.float64: np.float64,
           torch.float16: np.float16, torch.int32: np.int32, torch.int64: np.int64,
           torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8}


def np_dtype(dtype: torch.dtype | None, default=None):
    if dtype is None:
        return default
    if dtype is torch.bool:
        return np.bool_
    if dtype not in _DTYPES:
        raise UnsupportedError(f"torch dtype {dtype} is not supported by polyc "
                               f"(supported: {', '.join(str(d) for d in _DTYPES)})")
    return _DTYPES[dtype]


def is_int(v, k: int) -> bool:
    """Whether ``v`` is the plain integer ``k``.  A traced extent (a
    :class:`~polyc.graph.sizes.SizeInt`, a symbolic size of a dynamic-shape
    graph) is never compared: comparing one reads its value, which
    specialises the plan to that size (a new trace for every other size)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v == k


def is_one(s) -> bool:
    """Whether the extent ``s`` is 1 (``squeeze``).  A symbolic extent of
    another value is not, without a guard: torch's dynamic shapes never
    make a symbol 1 (they specialise 0 and 1), and polyc's shape classes
    key the input extents of 1."""
    if isinstance(s, SizeInt) and not s.size.is_constant and s.size.value != 1:
        return False
    return s == 1


def axes(dim, ndim: int) -> tuple[int, ...] | None:
    """A torch ``dim`` argument (None, an int, a list; empty means all) as
    numpy's ``axis``; of a 0-d tensor ``()`` (torch's dim 0 of one)."""
    if dim is None:
        return None
    if ndim == 0:              # torch takes dim 0 or -1 of a 0-d tensor: nothing to reduce
        return ()
    if isinstance(dim, int):
        return (dim,)
    return tuple(dim) or None


def var(std: bool) -> Callable:
    def run(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(unbiased, (bool, type(None))):
            ddof = correction if correction is not None else (0 if unbiased is False else 1)
        else:                              # var.correction(x, dim, *, correction, keepdim)
            ddof = 1 if unbiased is None else unbiased
        ddof = 1 if ddof is None else ddof
        f = np.std if std else np.var
        return f(nn_ops.wide(x), axis=axes(dim, x.ndim), ddof=ddof, keepdims=keepdim)
    return run


def reduction(fn: Callable, integers_to_int64: bool = False) -> Callable:
    """``aten.sum``-like reductions as ``fn`` (``np.sum``, ...): a ``dtype=``
    converts first; with ``integers_to_int64`` (sum, prod) integers
    reduce in int64 as torch's do."""
    def run(x, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None:              # torch converts first, then reduces
            x = x.astype(np_dtype(dtype))
        elif integers_to_int64:
            x = int64_total(x)
        return fn(nn_ops.wide(x), axis=axes(dim, x.ndim), keepdims=keepdim)
    return run


def int64_total(x):
    """``x`` as int64 where it holds integers: torch sums and
    multiplies those in int64 (numpy in uint64 for an unsigned type, which
    polyc does not compute in)."""
    return x.astype(np.int64) if np.dtype(x.dtype).kind in "ui" else x


def scan(fn: Callable) -> Callable:
    """``aten.cumsum``/``cumprod`` as ``fn`` (integers in int64)."""
    def run(x, dim, *, dtype=None):
        return fn(x if dtype is not None else int64_total(x), axis=dim, dtype=np_dtype(dtype))
    return run


def nan_to_num(x, nan=None, posinf=None, neginf=None):
    """``aten.nan_to_num`` (torch's ``nan`` default is 0)."""
    return np.nan_to_num(x, nan=0.0 if nan is None else nan, posinf=posinf, neginf=neginf)


def symbolic(v) -> bool:
    """Whether ``v`` is a traced extent that is not a constant (a dynamic
    shape's size)."""
    return isinstance(v, SizeInt) and not v.size.is_constant


def full(size, value, *, dtype=None, like=None, **kw):
    """``aten.full``: a concrete array, or where a size is symbolic (``torch.zeros(x.shape[0],
    8)`` in a dynamic-shape graph) a traced one made ``like=`` a traced
    value of the graph, so the size stays symbolic (a concrete array would
    read it and specialise the plan to it)."""
    default = (np.bool_ if isinstance(value, bool) else
               np.int64 if isinstance(value, int) else np.float32)
    dt = np_dtype(dtype, default)
    size = tuple(size)
    if like is not None and any(symbolic(s) for s in size):
        if dt == np.bool_:                 # a mask, as a comparison
            return np.full(size, 1 if value else 0, dtype=np.int32, like=like) != 0
        return np.full(size, value, dtype=dt, like=like)
    return np.full(size, value, dtype=dt)


def full_like(x, value, *, dtype=None, **kw):
    dt = np_dtype(dtype)
    if isinstance(x, Tracer) and (dt or x.dtype) == np.bool_:     # a mask, as a comparison
        return np.full_like(x, 1 if value else 0, dtype=np.int32) != 0
    return np.full_like(x, value, dtype=dt)


def take(x, i, dim: int, along: bool = False):
    """``aten.embedding`` / ``index_select`` (``np.take``) and ``gather``
    (``np.take_along_axis``, ``along``) with torch's indices: a negative
    index is an error (numpy counts it from the end), checked at each call
    where the indices come from outside the model
    (:class:`~polyc.errors.IndexBoundsError`)."""
    from . import gather
    if x.ndim == 0:
        # torch reads a 0-d tensor as one element: the one index is 0 and
        # the result is 0-d (numpy has no axis 0 to take from)
        return x
    traced = next((a for a in (x, i) if isinstance(a, Tracer)), None)
    if traced is None:
        return np.take_along_axis(x, i, dim) if along else np.take(x, i, axis=dim)
    if along:
        return gather.take_along_axis(traced._graph, x, i, dim, negative=False)
    return gather.take(traced._graph, x, i, axis=dim, negative=False)


def model_location(node):
    """The :class:`~polyc.graph.core.Location` of the model code that made
    the ATen ``node`` (its innermost frame in ``node.meta["stack_trace"]``),
    or ``None``: what errors and ``explain`` name instead of torch's
    internals."""
    import re

    from .core import Location
    lines = (node.meta.get("stack_trace") or "").rstrip().splitlines()
    for k in range(len(lines) - 1, -1, -1):
        m = re.match(r'\s*File "(.*)", line (\d+)', lines[k])
        if m:
            code = lines[k + 1].strip() if k + 1 < len(lines) else ""
            return Location(m.group(1), int(m.group(2)), code)
    return None
