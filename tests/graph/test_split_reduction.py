"""Contractions and elementwise operations over dimensions that a reshape merged (BERT's
``ctx.transpose(0, 2, 1, 3).reshape(b, s, d) @ wo``) reads its operand
through ``(r) / C`` and ``(r) % C``; polyc.graph.ops.split_iterators
writes the reduction with one iterator per merged dimension, so that the
product runs on the GEMM micro-kernel (an implicit GEMM).  Tolerances:
polyc.testing.assert_close with the reduction length."""

from __future__ import annotations

import os

import numpy as np
import pytest

import polyc
from polyc.testing import assert_close

RNG = np.random.default_rng(31)


def merged_heads(ctx, w):
    b, h, s, dh = ctx.shape
    return ctx.transpose(0, 2, 1, 3).reshape(b, s, h * dh) @ w


def merged_three(x, w):
    return x.reshape(x.shape[0], -1) @ w


def _statement(p, op="matmul"):
    return next(n for n in p.graph.ops if n.op == op).stmts[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 12, 40, 16), (2, 3, 7, 5), (1, 1, 9, 4)])
def test_merged_heads_run_on_the_gemm_micro_kernel(dtype, shape):
    ctx = RNG.standard_normal(shape).astype(dtype)
    w = RNG.standard_normal((shape[1] * shape[3], 24)).astype(dtype)
    j = polyc.jit(merged_heads)
    out = j(ctx, w)
    assert_close(out, merged_heads(ctx, w), reduction_length=w.shape[0])
    p = j.plan(ctx, w)
    text = _statement(p)
    if shape[1] > 1:
        # the reduction's digits: heads and the position inside a head
        assert "r0h" in text and "r0l" in text and "%" not in text and "/" not in text
    assert len(p.groups) == 1
    assert "polyc_gemm" in p.compile().kernels[0].source


def test_a_merge_of_three_dimensions_splits_twice():
    x = RNG.standard_normal((10, 4, 3, 5)).astype(np.float32)
    w = RNG.standard_normal((60, 17)).astype(np.float32)
    j = polyc.jit(merged_three)
    out = j(x, w)
    assert_close(out, merged_three(x, w), reduction_length=60)
    text = _statement(j.plan(x, w))
    assert "r0hh" in text and "r0hl" in text and "r0l" in text
    assert "%" not in text and "/" not in text
    assert "polyc_gemm" in j.plan(x, w).compile().kernels[0].source


def test_a_transposed_merge_splits_into_affine_reads():
    # (4, 6) -> swapped -> merged: the operand reads x(i, 6 * ((r) % 4) + (r) / 4)
    def f(x, w):
        return np.einsum("ik,k->i", x.reshape(x.shape[0], 4, 6).swapaxes(1, 2)
                         .reshape(x.shape[0], 24), w)
    x = RNG.standard_normal((5, 24))
    w = RNG.standard_normal(24)
    j = polyc.jit(f)
    assert_close(j(x, w), f(x, w), reduction_length=24)
    text = j.plan(x, w).graph.ops[-1].stmts[0]
    assert "r0h" in text and "%" not in text and "/" not in text


def test_split_iterators_leaves_uneven_reads_alone():
    from polyc.graph.ops import split_iterators
    from polyc.graph.sizes import Size, SymbolTable
    table = SymbolTable()
    ext = Size.constant(table, 24)
    for reads in (["A((r0) % 4, (r0) / 6)"],          # 4 does not divide 6
                  ["A((r0) % 4, (r0) % 6)"],          # two moduli
                  ["A(r0 + 1)"]):                     # nothing to split
        assert split_iterators(["r0"], [ext], reads) == (["r0"], [ext], reads)
    odd = Size.constant(table, 26)                    # 4 does not divide the extent
    assert split_iterators(["r0"], [odd], ["A((r0) % 4)"])[0] == ["r0"]
    rs, exts, out = split_iterators(["r0"], [ext], ["A((r0) / 4, (r0) % 4) * B(r0)"])
    assert rs == ["r0h", "r0l"] and [e.value for e in exts] == [6, 4]
    assert out == ["A(r0h, r0l) * B((4*r0h + r0l))"]


def test_integer_merged_reduction():
    ctx = RNG.integers(-5, 5, size=(2, 3, 4, 5)).astype(np.int64)
    w = RNG.integers(-5, 5, size=(15, 6)).astype(np.int64)
    out = polyc.jit(merged_heads)(ctx, w)
    np.testing.assert_array_equal(out, merged_heads(ctx, w))


def linear_on_tokens(x, w1, b1, w2):
    # the usual numpy/PyTorch idiom: flatten (batch, seq) into rows
    h = np.maximum(x.reshape(-1, x.shape[-1]) @ w1 + b1, 0.0)
    return (h @ w2).reshape(x.shape[0], x.shape[1], -1)


def test_rows_flattened_by_a_reshape_run_on_the_gemm_micro_kernel():
    x = RNG.standard_normal((3, 40, 24)).astype(np.float32)
    w1 = RNG.standard_normal((24, 56)).astype(np.float32)
    b1 = RNG.standard_normal(56).astype(np.float32)
    w2 = RNG.standard_normal((56, 16)).astype(np.float32)
    j = polyc.jit(linear_on_tokens)
    out = j(x, w1, b1, w2)
    assert out.shape == (3, 40, 16) and out.dtype == np.float32
    assert_close(out, linear_on_tokens(x, w1, b1, w2), reduction_length=56)
    p = j.plan(x, w1, b1, w2)
    # the products and the bias/ReLU are computed over (batch, seq) digits:
    # no floor division or remainder left in any statement
    assert all("%" not in s and "/" not in s for n in p.graph.ops for s in n.stmts)
    kernels = p.compile().kernels
    assert len(kernels) <= 2
    assert sum(k.source.count("polyc_gemm_f32(") for k in kernels) >= 2
    # another batch is the same shape class (40 was specialised by the reshape)
    x2 = RNG.standard_normal((5, 40, 24)).astype(np.float32)
    assert_close(j(x2, w1, b1, w2), linear_on_tokens(x2, w1, b1, w2), reduction_length=56)
    assert len(j._plans) == 1


def test_a_returned_reshape_of_a_result_is_not_copied():
    def f(x, w):
        return x.reshape(-1, x.shape[-1]) @ w
    x = RNG.standard_normal((4, 30, 8))
    w = RNG.standard_normal((8, 6))
    j = polyc.jit(f)
    a, b = j(x, w), j(x, w)
    assert a.shape == (120, 6) and a.dtype == np.float64
    assert_close(a, f(x, w), reduction_length=8)
    assert not np.shares_memory(a, b)             # a fresh result per call
    p = j.plan(x, w)
    assert len(p.groups) == 1 and [n.op for n in p.graph.ops] == ["matmul"]
    x5 = RNG.standard_normal((5, 30, 8))
    assert j(x5, w).shape == (150, 6)


def test_a_reshape_of_a_reshape_reads_the_base():
    from polyc.graph import trace

    def f(x):
        return np.exp(x.reshape(-1, 12).reshape(x.shape) * 2.0)
    x = RNG.standard_normal((2, 3, 4))
    g = trace(f, x)
    assert [n.op for n in g.ops] == ["multiply", "exp"]
    assert all("%" not in n.stmts[0] and "/" not in n.stmts[0] for n in g.ops)
    assert_close(polyc.jit(f)(x), f(x))



def test_reductions_over_a_merge_run_over_its_digits():
    def f(x):
        y = x * 2
        return (y.transpose(0, 2, 1).reshape(x.shape[0], -1).sum(1),
                y.reshape(x.shape[0], -1).var(1), y.reshape(-1).max())
    x = RNG.standard_normal((3, 4, 6))
    j = polyc.jit(f)
    for got, want in zip(j(x), f(x)):
        assert got.shape == want.shape
        assert_close(got, want, reduction_length=24)
    p = j.plan(x)
    assert all("%" not in s and "/ 4" not in s and "/ 6" not in s
               for n in p.graph.ops for s in n.stmts), [n.stmts for n in p.graph.ops]


def test_a_softmax_over_flattened_rows_stays_one_kernel():
    # elementwise operations over a merge are computed split, so the row
    # statistics are too: the softmax keeps one loop nest (it was 3 kernels
    # and 5x slower when only the elementwise operations were split)
    def f(x):
        y = x.reshape(-1, x.shape[-1]) * 2.0
        p = np.exp(y - y.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True)
    x = RNG.standard_normal((3, 20, 16)).astype(np.float32)
    j = polyc.jit(f)
    out = j(x)
    assert out.shape == (60, 16)
    assert_close(out, f(x), reduction_length=16)
    p = j.plan(x)
    assert len(p.groups) == 1
    assert all("%" not in s and "/ 20" not in s for n in p.graph.ops for s in n.stmts)

# -- property: random merges and splits around products and elementwise ops ------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _merge_programs(draw):
    dims = draw(st.lists(st.integers(1, 5), min_size=3, max_size=4))
    perm = draw(st.permutations(range(len(dims))))
    n = draw(st.integers(1, 6))
    cut = draw(st.integers(1, len(dims) - 1))       # rows: dims[:cut], reduction: the rest
    tail = draw(st.sampled_from(["none", "bias_tanh", "back", "sum"]))
    return dims, list(perm), n, cut, tail


@settings(max_examples=int(os.environ.get("SPLIT_PROPERTY_EXAMPLES", 20)), deadline=None,
          derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_merge_programs())
def test_random_merges_match_numpy(case):
    """A transposed array merged into (rows, reduction) by a reshape, a
    product, then an elementwise tail, a reshape back or a reduction: polyc
    against numpy (float64, tolerance for the reduction length)."""
    dims, perm, n, cut, tail = case
    shape = [dims[p] for p in perm]
    rows = int(np.prod(shape[:cut]))
    red = int(np.prod(shape[cut:]))
    x = RNG.standard_normal(dims)
    w = RNG.standard_normal((red, n))
    b = RNG.standard_normal(n)

    def f(x, w, b):
        t = x.transpose(perm)
        y = t.reshape(rows, red) @ w
        if tail == "bias_tanh":
            y = np.tanh(y + b)
        elif tail == "back":
            y = y.reshape(*t.shape[:cut], n)
        elif tail == "sum":
            y = y.reshape(*t.shape[:cut], n).sum(0)
        return y
    got = polyc.jit(f)(x, w, b)
    want = f(x, w, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_close(got, want, reduction_length=red)
