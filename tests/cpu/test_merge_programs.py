"""Programs merged with ``ir.merge_programs`` and renamed with
``Program.rename_statements`` compile and compute what their parts compute,
vs numpy."""

from __future__ import annotations

import numpy as np
import pytest

from polyc import ir
from polyc.api import program
from polyc.config import Config
from polyc.pipeline import compile_program

RNG = np.random.default_rng(14)

ADD_BIAS = "def a(float(N,K) X, float(K) b) -> (Y) { Y(n,k) = X(n,k) + b(k) }"
ROW_SUM = "def b(float(N,K) Y) -> (Z) { Z(n) +=! Y(n,k) }"


def _config() -> Config:
    return Config.from_env(tensorize=False)


@pytest.mark.parametrize("N,K", [(1, 1), (5, 7), (33, 64), (0, 3), (4, 0)])
def test_merged_bias_and_row_sum_match_numpy(N, K):
    kernel = compile_program(ir.merge_programs([program(ADD_BIAS), program(ROW_SUM)]),
                             _config())
    X = RNG.uniform(-1, 1, (N, K)).astype(np.float32)
    b = RNG.uniform(-1, 1, K).astype(np.float32)
    Z = kernel(X, b)
    assert Z.shape == (N,) and Z.dtype == np.float32
    ref = (X.astype(np.float64) + b).sum(axis=1)
    np.testing.assert_allclose(Z, ref, rtol=1e-5, atol=1e-5 * max(1, K))


def test_merged_program_returns_the_requested_outputs():
    merged = ir.merge_programs([program(ADD_BIAS), program(ROW_SUM)], outputs=("Z", "Y"))
    kernel = compile_program(merged, _config())
    X = RNG.uniform(-1, 1, (6, 9)).astype(np.float32)
    b = RNG.uniform(-1, 1, 9).astype(np.float32)
    Z, Y = kernel(X, b)
    np.testing.assert_allclose(Y, X + b, rtol=1e-6)
    np.testing.assert_allclose(Z, (X.astype(np.float64) + b).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_renamed_statements_compute_the_same():
    """A renamed program (statements of a @polyc.kernel with its own
    ``order``: an imperfect loop nest) computes what the original does."""
    import polyc

    @polyc.kernel
    def forward(L, x, b):
        n = L.shape[0]
        for i in range(n):
            x[i] = b[i]
            for j in range(i):
                x[i] -= L[i, j] * x[j]
            x[i] = x[i] / L[i, i]

    n = 12
    L = np.tril(RNG.random((n, n))) + n * np.eye(n)
    b = RNG.random(n)
    x1, x2 = np.zeros(n), np.zeros(n)
    original = forward.specialize(L, x1, b)
    p = original.program
    assert p.order is not None
    renamed = p.rename_statements({s.name: "solve_" + s.name for s in p.statements})
    assert renamed.order.get_domain().is_equal(renamed.domain())
    original(L, x1, b)
    compile_program(renamed, _config())(L, x2, b)
    np.testing.assert_allclose(x2, x1, rtol=1e-12)
    np.testing.assert_allclose(L @ x1, b, rtol=1e-10)


def test_merged_programs_with_their_own_order():
    """Two programs with an ``order`` (imperfect nests) merge into the
    sequence of their orders."""
    import polyc

    @polyc.kernel
    def prefix(A, B):
        n = A.shape[0]
        for i in range(n):
            B[i] = A[i]
            for j in range(i):
                B[i] += A[j]

    n = 9
    A, B = RNG.random(n), np.zeros(n)
    p = prefix.specialize(A, B).program
    assert p.order is not None
    q = p.rename_tensors({"A": "C", "B": "D"})
    merged = ir.merge_programs([p, q])
    assert merged.order is not None
    assert merged.order.get_domain().is_equal(merged.domain())
    assert merged.signature == ("A", "B", "C", "D")
    C, D = RNG.random(n), np.zeros(n)
    compile_program(merged, _config())(A, B, C, D)
    np.testing.assert_allclose(B, np.cumsum(A), rtol=1e-12)
    np.testing.assert_allclose(D, np.cumsum(C), rtol=1e-12)
