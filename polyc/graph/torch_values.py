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

_DTYPES = {torch.float32: np.float32, torch.float64: np.float64,
           torch.float16: np.float16, torch.int32: np.int32, torch.int64: np.int64}


def np_dtype(dtype: torch.dtype | None, default=None):
    if dtype is None:
        return default
    if dtype is torch.bool:
        return np.bool_
    if dtype not in _DTYPES:
        raise UnsupportedError(f"torch dtype {dtype} is not supported by polyc "
                               f"(supported: {', '.join(str(d) for d in _DTYPES)})")
    return _DTYPES[dtype]


def axes(dim, ndim: int) -> tuple[int, ...] | None:
    """A torch ``dim`` argument (None, an int, a list; empty means all) as
    numpy's ``axis``."""
    if dim is None:
        return None
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


def full(size, value, *, dtype=None, **kw):
    default = (np.bool_ if isinstance(value, bool) else
               np.int64 if isinstance(value, int) else np.float32)
    return np.full(tuple(size), value, dtype=np_dtype(dtype, default))


def full_like(x, value, *, dtype=None, **kw):
    dt = np_dtype(dtype)
    if isinstance(x, Tracer) and (dt or x.dtype) == np.bool_:     # a mask, as a comparison
        return np.full_like(x, 1 if value else 0, dtype=np.int32) != 0
    return np.full_like(x, value, dtype=dt)
