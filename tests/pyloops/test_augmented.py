"""Augmented assignments of ``@polyc.kernel`` bodies mean what Python's do:
``x op= v`` is ``x = x op v`` with true division of integers, flooring
``//`` and ``%`` and ``**`` a power, for array elements and local scalars,
integer and float arrays; each compared with the function run as plain
Python."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

RNG = np.random.default_rng(23)


@polyc.kernel
def elements(A, B):
    n = A.shape[0]
    for i in range(n):
        A[i] /= 2
        B[i] //= -3
        B[i] %= 4


@polyc.kernel
def by_array(A, D):
    n = A.shape[0]
    for i in range(n):
        A[i] //= D[i]
        A[i] **= 2


@polyc.kernel
def scalars(A, B):
    n = A.shape[0]
    for i in range(n):
        t = A[i] + 10
        t //= 3
        t %= 5
        t **= 2
        t /= 2
        B[i] = t


def _run_both(k, *args):
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    k(*got)
    k.py_func(*want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6 if g.dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64, np.float32])
def test_augmented_assignments_are_pythons(dtype):
    """``A[i] /= 2`` of an int array floored (Python truncates the float
    quotient it stores), ``//=`` printed as a remainder, ``**=`` was
    refused."""
    n = 23
    a = RNG.integers(-40, 40, n).astype(dtype)
    b = RNG.integers(-40, 40, n).astype(dtype)
    if a.dtype.kind == "f":
        a, b = a + RNG.random(n).astype(dtype), b + RNG.random(n).astype(dtype)
    _run_both(elements, a, b)
    d = (RNG.integers(1, 6, n) * RNG.choice([-1, 1], n)).astype(dtype)
    _run_both(by_array, a, d)
    _run_both(scalars, a, b)


@polyc.kernel
def int_scalars(A, B):
    n = A.shape[0]
    for i in range(n):
        s = A[i]
        s = s / 4              # a float from here on, as in Python
        k = A[i] * 3
        k //= 2                # an integer throughout
        B[i] = s * 4 + k / 2


@polyc.kernel
def int_accumulate_floats(X, B):
    n, m = X.shape
    for i in range(n):
        for j in range(m):
            B[i] += X[i, j]    # int(B[i] + X[i, j]) at every step


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_programs_type_their_scalars_and_updates_as_python(dtype):
    """A scalar of an integer program assigned a true division is a float
    (it was an integer, so ``s / 4 * 4`` lost the fraction, and ``k / 2``
    floored); an integer element accumulating floats is truncated at every
    step (it was a reduction that summed the floats first)."""
    n = 17
    a = RNG.integers(-50, 50, n).astype(dtype)
    _run_both(int_scalars, a, np.zeros(n, dtype))
    x = RNG.standard_normal((n, 6)) * 3
    _run_both(int_accumulate_floats, x, RNG.integers(-9, 9, n).astype(dtype))


@polyc.kernel
def derived_size(A, B):
    n = A.shape[0]
    m = n // 2
    for i in range(m):
        B[i] = A[i + m]


def test_a_local_scalar_in_a_loop_bound_is_refused_with_the_fix():
    """A size computed into a local (``m = n // 2``) is a scalar of the
    program: refused where a size is needed, naming it and saying to write
    the expression there (the message said it "holds data")."""
    with pytest.raises(polyc.UnsupportedError) as info:
        derived_size(np.zeros(6), np.zeros(6))
    msg = str(info.value)
    assert "m is a local scalar" in msg and "range(n // 2)" in msg
    assert "test_augmented.py" in msg and "for i in range(m)" in msg
