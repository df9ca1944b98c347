"""Loop coalescing of reduction nests (backends/c/coalesce.py): a reduction
over trailing dimensions that the nest walks in memory order runs as one
loop over the flat offset; anything else keeps its nest.  Every case is
checked against float64 numpy, coalesced or not, and the source says
which it got."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import polyc

#: a loop whose bound is a product of size parameters: a coalesced nest
FLAT = re.compile(r"for \(int64_t (c\d+) = INT64_C\(0\); \1 < \(+p_\w+ \* p_\w+")


def flat_loops(kernel) -> int:
    return len(FLAT.findall(kernel.source))


#: TC's group norm, as examples/group_norm.tc writes it
GROUPNORM = (Path(__file__).resolve().parents[2] / "examples" / "group_norm.tc").read_text()


@pytest.mark.parametrize("shape", [(2, 3, 4, 5, 6), (1, 2, 3, 7, 48), (2, 1, 1, 1, 1)])
def test_group_norm_coalesced(shape):
    rng = np.random.default_rng(0)
    n, g, d, h, w = shape
    x = rng.standard_normal(shape).astype(np.float32) + 3
    gamma = rng.standard_normal((g, d)).astype(np.float32)
    beta = rng.standard_normal((g, d)).astype(np.float32)
    k = polyc.compile(GROUPNORM)
    # mean's and var's nests (a vector and a scalar copy each), O's (h, w)
    assert flat_loops(k) == 5
    mean, var, out = k(x, gamma, beta)
    x64 = x.astype(np.float64)
    m = x64.mean(axis=(2, 3, 4))
    v = x64.var(axis=(2, 3, 4))
    ref = (gamma[None, :, :, None, None] * (x64 - m[:, :, None, None, None])
           / np.sqrt(v[:, :, None, None, None] + 1e-5) + beta[None, :, :, None, None])
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, v, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


def _run(src, *arrays):
    k = polyc.compile(src)
    return k, k(*arrays)


def test_two_operands_and_a_weight():
    """Both moving reads contiguous (a weight of rank 2 too): coalesced."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5, 7))
    b = rng.standard_normal((3, 5, 7))
    wt = rng.standard_normal((5, 7))
    k, out = _run("""def f(double(N, H, W) A, double(N, H, W) B, double(H, W) Wt) -> (s) {
        s(n) +=! A(n, r_h, r_w) * B(n, r_h, r_w) * Wt(r_h, r_w)
    }""", a, b, wt)
    assert flat_loops(k) == 2
    np.testing.assert_allclose(out, np.einsum("nhw,nhw,hw->n", a, b, wt), rtol=1e-12)


@pytest.mark.parametrize("op,ref", [("max", np.max), ("min", np.min), ("*", np.prod)])
def test_other_operators(op, ref):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.5, 1.5, (4, 6, 9)).astype(np.float32)
    k, out = _run(f"""def f(float(N, H, W) X) -> (s) {{
        s(n) {op}=! X(n, r_h, r_w)
    }}""", x)
    assert flat_loops(k) >= 1
    np.testing.assert_allclose(out, ref(x.astype(np.float64), axis=(1, 2)), rtol=1e-5)


def test_max_propagates_nan():
    x = np.arange(2 * 5 * 7, dtype=np.float32).reshape(2, 5, 7)
    x[1, 3, 2] = np.nan
    k, out = _run("""def f(float(N, H, W) X) -> (s) {
        s(n) max=! X(n, r_h, r_w)
    }""", x)
    assert flat_loops(k) >= 1
    np.testing.assert_array_equal(out, np.max(x, axis=(1, 2)))


def test_einsum_sum_over_trailing_axes():
    from polyc import einsum_call
    x = np.random.default_rng(3).standard_normal((3, 4, 5, 6)).astype(np.float32)
    einsum_call.clear_kernels()
    out = polyc.einsum("nchw->n", x)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=(1, 2, 3)), rtol=1e-5)
    (kernel,) = einsum_call._KERNELS.values()
    assert flat_loops(kernel) >= 1


NOT_COALESCED = {
    # the reduced dimensions are not the trailing ones
    "middle": ("""def f(float(N, H, C, W) X) -> (s) {
        s(n, c) +=! X(n, r_h, c, r_w)
    }""", lambda x: x.sum(axis=(1, 3)), (3, 4, 5, 6)),
    # an iterator read as a value
    "value": ("""def f(float(N, H, W) X) -> (s) {
        s(n) +=! X(n, r_h, r_w) * r_w
    }""", lambda x: (x * np.arange(x.shape[2])).sum(axis=(1, 2)), (3, 4, 5)),
    # a shifted read
    "shifted": ("""def f(float(N, H, W) X) -> (s) {
        s(n) +=! X(n, r_h, r_w + 1) where r_w in 0:W-1
    }""", lambda x: x[:, :, 1:].sum(axis=(1, 2)), (3, 4, 5)),
}


@pytest.mark.parametrize("case", sorted(NOT_COALESCED))
def test_nests_that_keep_their_loops(case):
    src, ref, shape = NOT_COALESCED[case]
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    k, out = _run(src, x)
    assert flat_loops(k) == 0
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_transposed_read_keeps_its_loops():
    """The loops scan ``r_h`` outside ``r_w`` while the read's last index is
    ``r_h``: the nest is not in memory order and keeps its loops."""
    x = np.random.default_rng(5).standard_normal((3, 6, 5)).astype(np.float32)
    k, out = _run("""def f(float(N, W, H) X) -> (s) {
        s(n) +=! X(n, r_w, r_h) * X(n, r_w, r_h)
    }""", x)
    np.testing.assert_allclose(out, (x.astype(np.float64) ** 2).sum(axis=(1, 2)), rtol=1e-5)
    src = k.source
    if flat_loops(k):
        # the schedule may put r_w outside r_h: then the nest is in memory order
        assert re.search(r"X\[.*\+ i_r_h\]", src)


BNRELU = """def bnrelu(float(N, C, H, W) I, float(C) s, float(C) b) -> (O) {
    O(n, c, h, w) = fmax(I(n, c, h, w) * s(c) + b(c), 0.0)
}"""


@pytest.mark.parametrize("shape", [(2, 3, 7, 7), (1, 4, 1, 1), (2, 2, 3, 5), (1, 2, 14, 14)])
def test_elementwise_nest_is_one_vector_loop(shape):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(np.float32)
    s, b = (rng.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    k = polyc.compile(BNRELU)
    assert flat_loops(k) == 1
    want = np.maximum(x * s[:, None, None] + b[:, None, None], 0)
    np.testing.assert_allclose(k(x, s, b), want, rtol=1e-6)


def test_elementwise_transposed_write_keeps_its_loops():
    x = np.random.default_rng(8).standard_normal((2, 5, 6)).astype(np.float32)
    k = polyc.compile("""def f(float(N, H, W) I) -> (O) {
        O(n, w, h) = I(n, h, w) + 1.0
    }""")
    np.testing.assert_allclose(k(x), x.transpose(0, 2, 1) + 1, rtol=1e-6)


def test_inner_loop_of_a_collapsed_parallel_loop_stays():
    """A loop that is part of a ``collapse(2)`` header is not the first of a
    coalesced nest (gcc refuses the pragma without its perfect nest)."""
    x = np.random.default_rng(9).standard_normal((3, 4, 5)).astype(np.float32)
    k = polyc.compile("""def f(float(A, B, C) X) -> (O) {
        O(a, b, c) = X(a, b, c) + 1.0
    }""")
    assert "collapse(2)" in k.source
    np.testing.assert_allclose(k(x), x + 1, rtol=1e-6)


#: benchmarks.tensor's tensordot: the batch dimensions (h, w) below the reduction
TENSORDOT = """def tensordot(float(N, C1, C2, H, W) I0, float(N, C2, C3, H, W) I1) -> (O) {
    O(n, c1, c3, h, w) +=! I0(n, c1, r_c2, h, w) * I1(n, r_c2, c3, h, w)
}"""


@pytest.mark.parametrize("sizes", [(2, 3, 4, 2, 5, 6), (1, 1, 1, 1, 1, 1), (2, 5, 3, 1, 7, 17),
                                   (1, 2, 0, 3, 2, 2)])
def test_contraction_with_batch_dimensions_below_the_reduction(sizes):
    """The update over (h, w) runs inside the reduction loop as one vector
    loop over H * W elements, and the initialisation as another (the band
    is distributed at the run); C2 = 0 leaves the zeros."""
    n, c1, c2, c3, h, w = sizes
    rng = np.random.default_rng(10)
    a = rng.standard_normal((n, c1, c2, h, w)).astype(np.float32)
    b = rng.standard_normal((n, c2, c3, h, w)).astype(np.float32)
    k = polyc.compile(TENSORDOT)
    assert flat_loops(k) >= 2
    update = re.search(r"for \(int64_t (c\d+) = INT64_C\(0\); \1 < p_C2;", k.source)
    assert update and k.source.index(update.group(0)) < k.source.rindex("p_H * p_W")
    want = np.einsum("nxchw,ncyhw->nxyhw", a.astype(np.float64), b)
    np.testing.assert_allclose(k(a, b), want, rtol=1e-5, atol=1e-5)


def test_distributed_run_replays_from_its_recipe():
    k = polyc.compile(TENSORDOT)
    steps = [st["op"] for st in k.schedule.to_recipe()["steps"]]
    assert "distribute" in steps
    assert polyc.compile(TENSORDOT, schedule=k.schedule.to_recipe()).source == k.source


def test_broadcast_operand_keeps_the_reduction_inside():
    """A read broadcast along h (a bias over w) breaks the contiguous run:
    the nest keeps its order and the result is right."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    k = polyc.compile("""def f(float(N, C, H, W) X, float(C, W) B) -> (O) {
        O(n, h, w) +=! X(n, r_c, h, w) * B(r_c, w)
    }""")
    assert flat_loops(k) == 0
    assert "band (n, h, r_c)" in str(k.schedule)
    want = np.einsum("nchw,cw->nhw", a.astype(np.float64), b)
    np.testing.assert_allclose(k(a, b), want, rtol=1e-5, atol=1e-5)
