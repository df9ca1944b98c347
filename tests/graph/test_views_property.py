"""Property test of view chains (slices, steps, transposes, merges and
splits by reshape, expand_dims/squeeze) mixed with elementwise operations
and reductions, their last results returned: polyc.jit against numpy in
shape and value (float64; polyc.testing.assert_close).  It caught
``y[:, :3]`` returned as the whole ``y``."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc
from polyc.testing import assert_close

OPS = ["slice", "step", "T", "merge", "split", "expand", "mul", "tanh", "sum", "add_self",
       "squeeze", "neg_slice"]


@st.composite
def progs(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    ops = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10)),
                        min_size=1, max_size=5))
    nout = draw(st.integers(1, 2))
    return shape, ops, nout


def build(ops, nout):
    def f(x):
        y = x
        outs = []
        for op, k in ops:
            s = y.shape
            if op == "slice" and y.ndim:
                a = k % y.ndim
                idx = [slice(None)] * y.ndim
                idx[a] = slice(0, max(1, s[a] - 1))
                y = y[tuple(idx)]
            elif op == "neg_slice" and y.ndim:
                a = k % y.ndim
                idx = [slice(None)] * y.ndim
                idx[a] = slice(1 if s[a] > 1 else 0, None)
                y = y[tuple(idx)]
            elif op == "step" and y.ndim:
                a = k % y.ndim
                idx = [slice(None)] * y.ndim
                idx[a] = slice(None, None, 2)
                y = y[tuple(idx)]
            elif op == "T":
                y = y.T
            elif op == "merge" and y.ndim >= 2:
                a = k % (y.ndim - 1)
                y = y.reshape(*s[:a], s[a] * s[a + 1], *s[a + 2:])
            elif op == "split" and y.ndim >= 1:
                a = k % y.ndim
                if s[a] % 2 == 0 and s[a] > 0:
                    y = y.reshape(*s[:a], 2, s[a] // 2, *s[a + 1:])
            elif op == "expand":
                y = np.expand_dims(y, k % (y.ndim + 1))
            elif op == "squeeze":
                if 1 in s:
                    y = y.squeeze(s.index(1))
            elif op == "mul":
                y = y * 1.5
            elif op == "tanh":
                y = np.tanh(y)
            elif op == "sum" and y.ndim:
                y = y.sum(axis=k % y.ndim)
            elif op == "add_self":
                y = y + y
            outs.append(y)
        return tuple(outs[-nout:])
    return f


@settings(max_examples=int(os.environ.get("VIEW_PROPERTY_EXAMPLES", 40)), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=True)
@given(progs())
def test_view_chains_match_numpy(case):
    shape, ops, nout = case
    x = np.random.default_rng(0).standard_normal(shape)
    f = build(ops, nout)
    want = f(x)
    try:
        got = polyc.jit(f)(x)
    except polyc.errors.UnsupportedError:
        return
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape, (g.shape, w.shape, ops)
        assert_close(g, w, reduction_length=8)


@settings(max_examples=int(os.environ.get("POLYC_VIEW_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 9), min_size=2, max_size=4),
       st.sampled_from(["[:n]", "[-n:]", "[n:]", "[:-n]", "[n:-n]", "[n::2]", "[:n:2]",
                        "[-n::3]", "[::-1][:n]"]))
def test_slice_bounds_from_another_arguments_extent(ns, spelling):
    """``x[:n]`` with ``n = y.shape[0]``: one jit function called with
    several ``n`` (below, at and above ``len(x)``) gives numpy's slice each
    time (the bound's sign and numpy's clamping are guarded on the plan)."""
    def f(x, y):
        n = y.shape[0]
        return eval(f"x{spelling}", {"x": x, "n": n}) * 2.0
    jf = polyc.jit(f)
    x = np.arange(6, dtype=np.float64)
    for n in ns:
        y = np.ones(n)
        got, want = jf(x, y), f(x, y)
        assert got.shape == want.shape, (spelling, n, got.shape, want.shape)
        assert_close(got, want)


def test_size_arithmetic_with_python_floats():
    """An extent in float arithmetic (the attention scale ``d ** 0.5``,
    ``1.0 / n``, ``n / 2.0``) is specialised to its value, as numpy sees it."""
    def f(q):
        n = q.shape[-1]
        return q * (1.0 / n ** 0.5) + 1.0 / q.shape[0] + n / 2.0 + 0.5 ** n \
            + pow(n, 0.5) + (n > 0.5) + divmod(n, 2.5)[0] + (2.0 - n) + (n & 3) + (n | 8)
    jf = polyc.jit(f)
    for shape in ((4, 4), (2, 3)):
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        assert_close(jf(x), f(x))
