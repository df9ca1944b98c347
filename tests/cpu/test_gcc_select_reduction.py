"""A reduction carried across two loops into a contracted temporary, whose
body is a select (``np.where(...).sum()`` of a small fixed-size array):
gcc 12.2 at -O3 miscompiles the nest once it keeps the temporary in a
register across the outer loop (if-conversion and complete peeling of the
inner loop; inner trip counts 3, 5, 6, 7, 9, 11, 12, 13 and 16 gave wrong
sums).  The C emitter hides that value flow with an empty asm after each
such reduction loop (backends/c/emit.py); compared with numpy."""

import numpy as np
import pytest

import polyc


def masked_total(x, idx):
    onehot = np.where(idx[:, 0:1, None] == np.arange(x.shape[1] + 1), 1.0, 0.0).astype(np.float32)
    zeros = np.zeros((idx.shape[0], x.shape[1] + 1), np.float32)
    return np.where(onehot.max(-2) > 0, onehot.sum(-2), zeros).sum() + x.sum()


def relu_total(x):
    return np.where(x > 0, x, np.float32(0)).sum()


@pytest.mark.parametrize("rows, cols", [(6, 5), (6, 3), (4, 7), (9, 12), (3, 13), (5, 16)])
def test_select_sums_of_small_fixed_arrays(rows, cols):
    rng = np.random.default_rng(rows * 100 + cols)
    x = rng.standard_normal((rows, cols - 1)).astype(np.float32)
    idx = rng.integers(0, cols, (rows, 3))
    got = polyc.jit(masked_total)(x, idx)
    np.testing.assert_allclose(got, masked_total(x, idx), rtol=1e-5, atol=1e-5)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_allclose(polyc.jit(relu_total)(y), relu_total(y), rtol=1e-5, atol=1e-5)
