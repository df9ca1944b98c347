"""The GEMM call's tile function (polyc.gemm_post.match_tile, docs/tensorize.md
"Tile functions"): the elementwise statements after a contraction compiled
with the kernel and applied by the call to each finished block of C.
``explain`` says so; results against float64 numpy; the recipe replays to
the same C; what must keep its loops keeps them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import polyc
from polyc import testing
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule

TILED = "applied by the call to each finished block of C"

GELU = """def ffn(float(M, K) X, float(K, N) W, float(N) b) -> (O) {
    O(i, j) +=! X(i, k) * W(k, j)
    O(i, j) = O(i, j) + b(j)
    O(i, j) = 0.5 * O(i, j) * (1.0 + tanh(0.7978845608 * (O(i, j)
              + 0.044715 * O(i, j) * O(i, j) * O(i, j))))
}"""

# batch loops around the call, a per-batch factor, a tensor read transposed
BATCHED = """def bmm(float(B, M, K) X, float(B, K, N) Y, float(B) s, float(N, M) R) -> (O) {
    O(b, i, j) +=! X(b, i, k) * Y(b, k, j)
    O(b, i, j) = tanh(O(b, i, j)) * s(b) + R(j, i)
    O(b, i, j) = O(b, i, j) * O(b, i, j)
}"""

# a statement reading another element of C keeps its loops (not final yet)
OTHER = """def mm(float(M, K) X, float(K, N) W) -> (O) {
    O(i, j) +=! X(i, k) * W(k, j)
    O(i, j) = exp(O(i, j) * 0.125)
    O(i, j) = O(i, j) + O(i, 0)
}"""


def _gemm_line(kernel) -> str:
    return next(line for line in kernel.explain().splitlines()
                if "tensorized onto gemm" in line)


def _rng(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 17, 33), (61, 300, 1100), (200, 96, 64)])
def test_gelu_after_bias(dtype, shape):
    """The bias becomes a post-operation, the GELU the tile function; the
    small, packed (several k blocks) and few-rows paths."""
    M, K, N = shape
    src = GELU if dtype == np.float32 else GELU.replace("float", "double")
    kernel = polyc.compile(src)
    line = _gemm_line(kernel)
    assert TILED in line and "S2" in line and "+ b (per column)" in line
    assert "polyc_gemmx_post_" in kernel.source and "tile_S0" in kernel.source
    X, W, b = _rng(M, K, dtype=dtype), _rng(K, N, seed=1, dtype=dtype), _rng(N, dtype=dtype)
    y = X.astype(np.float64) @ W + b
    want = 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
    testing.assert_close(kernel(X, W, b), want.astype(dtype), reduction_length=K)


def test_batch_loops_and_transposed_operand():
    kernel = polyc.compile(BATCHED)
    line = _gemm_line(kernel)
    assert TILED in line and "S1, S2" in line
    X, Y = _rng(3, 20, 30), _rng(3, 30, 40, seed=1)
    s, R = _rng(3, seed=2), _rng(40, 20, seed=3)
    t = np.tanh(np.einsum("bik,bkj->bij", X.astype(np.float64), Y)) * s[:, None, None] + R.T
    testing.assert_close(kernel(X, Y, s, R), (t * t).astype(np.float32), reduction_length=30)


def test_reading_another_element_keeps_its_loops():
    kernel = polyc.compile(OTHER)
    line = _gemm_line(kernel)
    assert TILED in line and "S1" in line and "S2" not in line.split(TILED)[0][-40:]
    X, W = _rng(30, 20), _rng(20, 50, seed=1)
    want = np.exp((X.astype(np.float64) @ W) * 0.125)
    want[:, 0] *= 2                   # (in source order: O(i, 0) first, then the others)
    want[:, 1:] += want[:, :1]
    testing.assert_close(kernel(X, W), want.astype(np.float32), reduction_length=20)


def test_the_recipe_replays_to_the_same_source():
    kernel = polyc.compile(GELU)
    s = kernel.schedule
    replayed = Schedule.replay(kernel.program, s.to_recipe())
    assert replayed.to_text() == s.to_text()
    assert compile_schedule(replayed, kernel.config).source == kernel.source


def _conv_sigmoid(x, w, s):
    win = sliding_window_view(np.pad(x, ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
    y = np.einsum("chwij,kcij->khw", win, w) * s[:, None, None]
    return 1.0 / (1.0 + np.exp(-y))


def test_implicit_gemm_with_a_sigmoid():
    """A convolution (the window gathered by the call: the columns are the
    digits (h, w)) with a per-channel scale (post-operation) and a sigmoid
    (the tile function), from plain numpy."""
    jitted = polyc.jit(_conv_sigmoid)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 10, 12)).astype(np.float32)
    w = (rng.standard_normal((16, 8, 3, 3)) / 9).astype(np.float32)
    s = rng.standard_normal(16).astype(np.float32)
    testing.assert_close(jitted(x, w, s), _conv_sigmoid(x, w, s), reduction_length=72)
    assert any(TILED in k.explain() for k in jitted.plan(x, w, s).kernels)


def _ffn(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    g = 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
    return g @ w2 + b2 + x


def test_ffn_gelu_runs_in_the_first_gemm():
    """The FFN's GELU (and the bias before it) run in the first GEMM call."""
    jitted = polyc.jit(_ffn)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((70, 48)).astype(np.float32)
    w1 = (rng.standard_normal((48, 192)) / 7).astype(np.float32)
    w2 = (rng.standard_normal((192, 48)) / 14).astype(np.float32)
    b1, b2 = rng.standard_normal(192).astype(np.float32), rng.standard_normal(48).astype(np.float32)
    testing.assert_close(jitted(x, w1, b1, w2, b2), _ffn(x, w1, b1, w2, b2),
                         reduction_length=192)
    plan = jitted.plan(x, w1, b1, w2, b2)
    assert len(plan.kernels) <= 2        # (small sizes: one, the nests in sequence)
    assert TILED in plan.kernels[0].explain()


_UNARY = [np.tanh, lambda y: np.exp(-np.abs(y)), lambda y: 1.0 / (1.0 + np.exp(-y)),
          lambda y: y * y, lambda y: np.sqrt(np.abs(y) + 1.0),
          lambda y: np.where(y > 0, y, 0.1 * y)]


def _random_chain(seed: int):
    """A contraction followed by a random chain of 1-3 elementwise steps,
    each a unary function or a combination with an operand broadcast per
    row, per column, at C's element or transposed."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(rng.integers(1, 4)):
        steps.append((int(rng.integers(len(_UNARY))), str(rng.choice(
            ["none", "row", "col", "full", "transposed"])), str(rng.choice(["+", "*", "max"]))))

    def fn(a, w, r, c, f, t):
        y = a @ w
        for u, kind, op in steps:
            y = _UNARY[u](y)
            x = {"none": None, "row": r[:, None], "col": c, "full": f, "transposed": t.T}[kind]
            if x is not None:
                y = y + x if op == "+" else y * x if op == "*" else np.maximum(y, x)
        return y
    return fn


@pytest.mark.parametrize("seed", range(12))
def test_random_elementwise_chains(seed):
    """Random chains after a GEMM against float64 numpy: whatever the
    planner folds into the call's tile function (or keeps apart), the
    values are numpy's."""
    rng = np.random.default_rng(100 + seed)
    dtype = np.float32 if seed % 3 else np.float64
    M, K, N = (int(x) for x in rng.integers(1, 90, 3))
    args = [rng.standard_normal(s).astype(dtype) for s in
            ((M, K), (K, N), (M,), (N,), (M, N), (N, M))]
    fn = _random_chain(seed)
    got = polyc.jit(fn)(*args)
    want = fn(*(a.astype(np.float64) for a in args))
    testing.assert_close(got, want.astype(dtype), reduction_length=K)


def _causal(q, k, v, mask):
    s = q @ k.swapaxes(-1, -2) * 0.125 + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def _row_scaled(q, k, v, r):
    s = q @ k.swapaxes(-1, -2) * r[:, None]
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("fn, folded", [(_causal, TILED), (_row_scaled, "each tile of C")])
@pytest.mark.parametrize("shape", [(2, 150, 16), (3, 71, 8)])
def test_row_blocked_calls(fn, folded, shape):
    """Attention's calls per block of query rows (row fusion) with the mask
    added by the tile function, or a per-row scale as a post-operation: each
    block's call addresses its own rows (row ``block * ib + r``), not the
    first block's (which corrupted the heap, or gave wrong values)."""
    B, S, D = shape
    rng = np.random.default_rng(S)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    extra = (np.triu(np.full((S, S), -np.inf, np.float32), 1) if fn is _causal
             else rng.random(S).astype(np.float32))
    jitted = polyc.jit(fn)
    got = jitted(q, k, v, extra)
    want = fn(*(a.astype(np.float64) for a in (q, k, v, extra)))
    testing.assert_close(got, want.astype(np.float32), reduction_length=S)
    text = "\n".join(kern.explain() for kern in jitted.plan(q, k, v, extra).kernels)
    assert "rows of i" in text and folded in text
