"""fmax/fmin (and max/min of floats in an expression) print as the
prelude's selects, which gcc vectorises, with glibc's fmax results bit for
bit: a NaN operand ignored, of two equal zeros the first."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import polyc

SPECIAL = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 3.5, -2.25, 1e-40]


def glibc(fn: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's fmax/fmin as glibc computes them."""
    keep_a = (a >= b if fn in ("fmax", "max") else a <= b) | np.isnan(b)
    return np.where(keep_a, a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["fmax", "fmin", "max", "min"])
def test_bit_for_bit(dtype, fn):
    a, b = (np.array(v, dtype=dtype) for v in zip(*itertools.product(SPECIAL, SPECIAL)))
    k = polyc.compile(f"def f({dtype}(N) A, {dtype}(N) B) -> (O) {{ O(i) = {fn}(A(i), B(i)) }}")
    assert f"polyc_{'fmax' if 'max' in fn else 'fmin'}_" in k.source
    got, want = k(a, b), glibc(fn, a, b)
    bits = np.uint32 if dtype == "float32" else np.uint64
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(bits), want[ok].view(bits))


def test_relu_of_an_affine_map_over_nchw():
    """A ReLU written as fmax over a batch-norm's affine map (the loop this
    change vectorised), against numpy, with NaN inputs ignored as fmax does."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 7, 7)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    s, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    k = polyc.compile("""def bnrelu(float(N, C, H, W) I, float(C) s, float(C) b) -> (O) {
        O(n, c, h, w) = fmax(I(n, c, h, w) * s(c) + b(c), 0.0)
    }""")
    assert "fmaxf(" not in k.source
    want = np.fmax(x * s[:, None, None] + b[:, None, None], 0)
    np.testing.assert_allclose(k(x, s, b), want, rtol=1e-6)
