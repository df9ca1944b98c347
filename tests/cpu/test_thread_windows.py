"""Thread windows (polyc.schedule.windows): the temporaries of a row-blocked
kernel (attention's score block) are stored in one reused window per
thread.  Results must equal numpy's at every thread count, including teams
too large for the array to hold a window each (the array is then used as
before), and the windows must be where they pay (the score and
probability blocks) and nowhere a value crosses iterations.  Tolerances:
polyc.testing.assert_close with the reduction length of the longest
reduction."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.schedule.windows import thread_windows
from polyc.testing import assert_close

RNG = np.random.default_rng(31)


def attention(q, k, v):
    s = q @ k.swapaxes(-1, -2) * (1.0 / 8.0)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def causal(q, k, v):
    n = q.shape[-2]
    s = q @ k.swapaxes(-1, -2) * (1.0 / 8.0) + np.triu(np.full((n, n), -np.inf, q.dtype), 1)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def _kernel(j, *args):
    (kernel,) = j.plan(*args).kernels
    return kernel


@pytest.mark.parametrize("fn", [attention, causal])
@pytest.mark.parametrize("threads", [1, 2, 3, 7])
@pytest.mark.parametrize("shape", [(4, 150, 16), (2, 3, 71, 8), (1, 40, 24)])
def test_windowed_attention_matches_numpy(fn, threads, shape):
    q, k, v = (RNG.standard_normal(shape).astype(np.float32) for _ in range(3))
    j = polyc.jit(fn, config=Config.from_env().replace(num_threads=threads))
    out = j(q, k, v)
    assert_close(out, fn(q, k, v), reduction_length=shape[-2])
    for _ in range(2):                              # warm calls reuse the windows
        q[...] = RNG.standard_normal(shape)
        assert_close(j(q, k, v), fn(q, k, v), reduction_length=shape[-2])


def test_threads_never_share_a_window():
    """Enough blocks that two threads run at once for a while: a window
    shared between them would mix their score blocks."""
    q, k, v = (RNG.standard_normal((8, 300, 32)).astype(np.float32) for _ in range(3))
    j = polyc.jit(attention, config=Config.from_env().replace(num_threads=2))
    for _ in range(5):
        assert_close(j(q, k, v), attention(q, k, v), reduction_length=300)
        q[...] = RNG.standard_normal(q.shape)


def test_the_score_and_probability_blocks_are_windowed():
    q, k, v = (RNG.standard_normal((4, 150, 16)).astype(np.float32) for _ in range(3))
    j = polyc.jit(attention)
    j(q, k, v)
    kernel = _kernel(j, q, k, v)
    low = kernel._low()
    windows = {w.tensor: w for w in low.windows}
    square = [t.name for t in low.program.tensors
              if t.role == "temp" and t.ndim == 3 and not t.shape[2].is_cst()]
    assert len(square) == 2 and set(square) <= set(windows)
    for name in square:
        w = windows[name]
        assert w.dim == 1 and w.depth == 2 and 1 < w.rows < 150
        assert f"polyc_woff_t_{name}" in kernel.source
    rec = j.explain(q, k, v, json=True)
    assert {w["tensor"] for w in rec["groups"][0]["windows"]} == set(windows)
    assert "one window per thread" in j.explain(q, k, v)
    assert "thread windows" in kernel.explain()


def test_no_windows_without_contraction():
    q, k, v = (RNG.standard_normal((2, 40, 8)).astype(np.float32) for _ in range(3))
    j = polyc.jit(attention, config=Config.from_env().replace(contract=False))
    assert_close(j(q, k, v), attention(q, k, v), reduction_length=40)
    kernel = _kernel(j, q, k, v)
    assert not kernel._low().windows and "polyc_woff" not in kernel.source


def test_a_team_larger_than_the_windows_fit_uses_the_array():
    """Two blocks of rows and seven threads: seven windows would overrun the
    array, so the guard keeps the plain addressing; three fit."""
    q, k, v = (RNG.standard_normal((2, 71, 8)).astype(np.float32) for _ in range(3))
    for threads in (7, 3):
        j = polyc.jit(attention, config=Config.from_env().replace(num_threads=threads))
        assert_close(j(q, k, v), attention(q, k, v), reduction_length=71)
        kernel = _kernel(j, q, k, v)
        assert "polyc_wuse_" in kernel.source


def test_values_crossing_iterations_get_no_window():
    """A temporary written by one parallel nest and read, reversed, by
    another: its values cross iterations, so it keeps its array."""
    src = """
    def rev(float(N, M) X) -> (O, T) {
        T(i, j) = X(i, j) * 2.0
        O(i, j) = T(N - 1 - i, j) + 1.0
    }"""
    from dataclasses import replace

    from polyc import api
    from polyc.pipeline import compile_program
    prog = api.program(src)
    prog = prog.replace(tensors=tuple(replace(t, role="temp") if t.name == "T" else t
                                      for t in prog.tensors))
    k = compile_program(prog, Config.from_env())
    low = k._low()
    assert "T" not in {w.tensor for w in thread_windows(low.schedule, low.program)}
    x = RNG.standard_normal((64, 33)).astype(np.float32)
    np.testing.assert_allclose(k(x), x[::-1] * 2 + 1, rtol=1e-6)


def _smooth_twice(u):
    for _ in range(2):
        v = u.copy()
        v[1:-1] = 0.25 * u[:-2] + 0.5 * u[1:-1] + 0.25 * u[2:]
        u = v
    return u


def test_a_window_in_a_simd_loop_is_not_shared_by_its_lanes():
    """A one-row window of the (parallel, simd) loop itself: every iteration
    writes row 0 of the thread's window, so the loop must not be
    vectorised (the lanes overwrote each other's t6: wrong results).
    float64, rtol 1e-12."""
    from polyc.graph import trace
    from polyc.graph.plan import from_dict
    u = RNG.random(50)
    g = trace(_smooth_twice, u)
    ops = [n.name for n in g.ops]
    p = from_dict(g, {"groups": [ops[:12], ops[12:]]}).compile()
    assert p.kernels[0]._low().windows, "the first kernel holds a windowed temporary"
    got = p.run({n.name: u for n in g.args}, {0: u.shape[0]})[g.outputs[0].name]
    np.testing.assert_allclose(got, _smooth_twice(u.copy()), rtol=1e-12, atol=1e-14)
