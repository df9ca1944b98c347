"""ctypes views of ``backends/c/intrinsics/gemm.h``'s types, shared by the
tests that call the intrinsic directly (tests/unit/test_gemm_intrinsic.py,
tests/cpu/test_gemm_scaled.py; tests/ is on sys.path via conftest)."""

from __future__ import annotations

import ctypes

import numpy as np


class Dims(ctypes.Structure):
    """``polyc_gemm_dims``: the digits of a row or column index and their strides."""
    _fields_ = [("n", ctypes.c_int), ("ext", ctypes.c_int64 * 8),
                ("stride", ctypes.c_int64 * 8)]


def dims(*pairs) -> Dims:
    """A ``polyc_gemm_dims`` of ``(extent, stride)`` digits, outermost first."""
    d = Dims()
    d.n = len(pairs)
    for j, (e, st) in enumerate(pairs):
        d.ext[j], d.stride[j] = e, st
    return d


def offsets(pairs) -> np.ndarray:
    """The offsets ``polyc_gemm_offset`` gives, computed by numpy."""
    off = np.zeros(1, np.int64)
    for e, st in pairs:
        off = (off[:, None] + st * np.arange(e, dtype=np.int64)[None, :]).reshape(-1)
    return off
