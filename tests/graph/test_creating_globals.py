"""numpy's creation functions without ``like=`` inside a traced function
make traced arrays (:mod:`polyc.graph.creating`): output buffers filled a
slice at a time, as NPBench's kernels write them (NPBench's conv2d itself:
tests/graph/test_npbench_style.py)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy import zeros as np_zeros

import polyc
from polyc.errors import TraceError

RTOL, ATOL = 1e-5, 1e-6


def _accumulate(x):
    acc = np_zeros((x.shape[1],), dtype=x.dtype)       # `from numpy import zeros`
    for i in range(x.shape[0]):
        acc += x[i] * (i + 1)
    rows = [np.ones(x.shape[1]) * k for k in range(2)]  # inside a comprehension
    return acc, rows[1] + np.full((x.shape[1],), 2.0)


def test_imported_names_comprehensions_and_symbolic_sizes():
    f = polyc.jit(_accumulate)
    for shape in ((3, 4), (5, 4)):
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        for got, want in zip(f(x), _accumulate(x)):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert np.zeros is np_zeros and isinstance(np.zeros(2), np.ndarray)   # numpy untouched


def _rows_doubled(x):                      # a helper that makes its own buffer
    out = np.empty((x.shape[0], 2))
    out[:, 0] = x[:, 0] * 2
    out[:, 1] = x[:, -1]
    return out


def _uses_a_helper(x):
    return _rows_doubled(x) + 1


def test_a_helper_of_the_same_module_makes_traced_buffers_too():
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(polyc.jit(_uses_a_helper)(x), _uses_a_helper(x))


_CALLS = 0


def _counts_calls(x):
    global _CALLS
    _CALLS += 1
    out = np.empty(x.shape)
    out[0] = x[0]
    return out


def test_a_function_that_assigns_globals_keeps_numpy_arrays_and_the_hint():
    with pytest.raises(TraceError, match="like="):
        polyc.jit(_counts_calls)(np.ones((2, 3)))
