"""Memory-bound row kernels (issue 5, item 5): row fusion
(polyc.schedule.rowfuse), vectorised NaN-exact max/min reductions, hoisted
invariant reads and libmvec's SIMD math functions, against numpy on edge
sizes.  Tolerances: float32 results within a few ulp of numpy's (libmvec's
functions are within 4 ulp; sums are reassociated by the vector reduction),
so rtol 1e-5; float64 rtol 1e-12."""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

import polyc

# the peer benchmark's workloads and their numpy references
from benchmarks.tensor import GROUPNORM, LAYERNORM, SOFTMAX, _groupnorm, _layernorm, _softmax
from polyc.config import Config
from polyc.loopnest import For

RNG = np.random.default_rng(5)


def _outer_loops(k) -> list[For]:
    node = k.loopnest
    kids = getattr(node, "children", [node])
    return [n for n in kids if isinstance(n, For)]


@pytest.mark.parametrize("n, c", [(1, 1), (3, 5), (7, 17), (64, 129), (5, 1000)])
def test_softmax_row_fused(n, c):
    k = polyc.compile(SOFTMAX)
    I = RNG.standard_normal((n, c)).astype(np.float32) * 10
    O, m, e, s = k(I)
    np.testing.assert_allclose(O, _softmax(I), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(m, I.max(axis=1))
    # one parallel loop over the rows holds every statement
    outer = _outer_loops(k)
    assert len(outer) == 1 and outer[0].parallel
    assert "row loop n" in k.explain()
    assert k.explain(json=True)["row_fusion"].startswith("statements ")


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-4), ("float64", 1e-10)])
@pytest.mark.parametrize("n, c", [(1, 1), (4, 7), (33, 1024)])
def test_layernorm(dtype, rtol, n, c):
    k = polyc.compile(LAYERNORM, dtype=dtype)
    I = RNG.standard_normal((n, c)).astype(dtype)
    g, b = RNG.standard_normal(c).astype(dtype), RNG.standard_normal(c).astype(dtype)
    mean, var, O = k(I, g, b)
    ref = _layernorm(I, g, b)
    # var is a difference of close numbers: compare against the output's scale
    np.testing.assert_allclose(O, ref, rtol=rtol, atol=rtol * np.abs(ref).max() * 10)
    assert len(_outer_loops(k)) == 1


def test_group_norm_parallel_over_rows_untiled():
    k = polyc.compile(GROUPNORM)
    N, G, D, H, W = 2, 3, 2, 5, 7
    I = RNG.standard_normal((N, G, D, H, W)).astype(np.float32)
    gamma, beta = (RNG.standard_normal((G, D)).astype(np.float32) for _ in range(2))
    _, _, O = k(I, gamma, beta)
    np.testing.assert_allclose(O, _groupnorm(I, gamma, beta), rtol=1e-4, atol=1e-4)
    (outer,) = _outer_loops(k)
    # the row band (n, g) is collapsed, not tiled: one row per iteration
    assert outer.parallel and outer.collapse == 2 and int(outer.step) == 1


@pytest.mark.parametrize("src, why", [
    # a matmul's B(k, n) is invariant along m: reuse across rows, no row fusion
    ("def mb(float(M, K) A, float(K, N) B, float(N) b) -> (C, D) "
     "{ C(m, n) +=! A(m, k) * B(k, n)\n D(m, n) = C(m, n) + b(n) }", "reuse"),
    # every row reads row 0 of B: a dependence crosses rows
    ("def r0(float(N, C) A) -> (B, O) { B(n, c) = A(n, c) * 2\n O(n, c) = B(n, c) + B(0, c) }",
     "dependence"),
])
def test_not_row_fused(src, why):
    k = polyc.compile(src, config=Config.from_env(tensorize=False))
    assert k.explain(json=True)["row_fusion"] == "", why
    args = [RNG.standard_normal(sh) for sh in ([(6, 4), (4, 5), (5,)] if why == "reuse"
                                                 else [(6, 5)])]
    args = [a.astype(np.float32) for a in args]
    if why == "reuse":
        C, D = k(*args)
        np.testing.assert_allclose(D, args[0] @ args[1] + args[2], rtol=1e-5)
    else:
        B, O = k(*args)
        np.testing.assert_allclose(O, args[0] * 2 + args[0][0] * 2, rtol=1e-6)


def test_other_fusion_strategies_keep_their_schedule():
    k = polyc.compile(SOFTMAX, config=Config.from_env(fusion="min"))
    assert k.explain(json=True)["row_fusion"] == ""
    assert len(_outer_loops(k)) > 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op, npf", [("max", np.max), ("min", np.min)])
def test_vector_max_min_reduction_propagates_nan(dtype, op, npf):
    """The vectorised max/min reruns the exact sequential loop on a NaN:
    results equal numpy's, bit for bit, NaN rows included."""
    k = polyc.compile(f"def r(float(N, C) I) -> (O) {{ O(n) {op}=! I(n, c) }}", dtype=dtype)
    I = RNG.standard_normal((6, 67)).astype(dtype)
    I[1, 40] = np.nan
    I[2, 0] = np.nan
    I[3, :] = np.inf if op == "min" else -np.inf
    I[4, 66] = np.nan
    assert "reduction(" + op in k.source
    np.testing.assert_array_equal(k(I), npf(I, axis=1))


@pytest.mark.parametrize("dtype, rtol", [("float32", 4e-7), ("float64", 1e-15)])
@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "erf"])
def test_vector_math_functions(dtype, rtol, fn):
    """exp/log/tanh/erf in a vectorised loop call libmvec's SIMD variants (a
    float32 exp: the prelude's polyc_expf, test_expf.py): within 4 ulp of
    numpy's (erf: of math.erf in double, rounded), and exact at the special
    values."""
    k = polyc.compile(f"def f(float(N) I) -> (O) {{ O(i) = {fn}(I(i)) }}", dtype=dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 80.0, 88.5,
                        89.0, 710.0, -103.0, -746.0, 1e30], dtype=dtype)
    x = np.concatenate([special, RNG.uniform(-20, 20, 1000).astype(dtype),
                        RNG.uniform(0, 5, 100).astype(dtype)])
    with np.errstate(all="ignore"):
        ref = (np.vectorize(math.erf, otypes=[np.float64])(x).astype(dtype) if fn == "erf"
               else getattr(np, fn)(x))
        got = k(x)
    if fn == "exp" and dtype == "float32":
        assert "polyc_expf(" in k.source and b"expf" not in k.library.path.read_bytes()
    elif platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc":
        # the vectorised loop calls libmvec (_ZGV<isa>N<lanes>v_<fn>)
        assert f"v_{fn}{'f' if dtype == 'float32' else ''}".encode() in \
            k.library.path.read_bytes()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    eps = np.finfo(dtype).eps
    tiny = np.finfo(dtype).tiny
    err = np.abs(got[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), tiny)
    assert err.max() <= 4 * eps + rtol, (fn, float(err.max()))


def test_invariant_reads_hoisted_out_of_vector_loops():
    k = polyc.compile(SOFTMAX)
    # maxVal(n) and expSum(n) are loaded once per row, before their loops
    assert k.source.count("polyc_inv") >= 4


def test_invariant_computations_hoisted_but_not_integer_divisions():
    """rsqrt(var(n) + eps) is computed once per row, before the vector loop;
    an integer division of sizes stays in the loop (hoisted above a loop
    that may run zero times it could divide by zero)."""
    k = polyc.compile(LAYERNORM)
    body = k.source.split("void polyc_kernel")[1]
    sq = [ln for ln in body.splitlines() if "sqrtf(" in ln]
    assert sq and all(ln.strip().startswith("float const polyc_inv") for ln in sq), sq
    I = RNG.standard_normal((9, 33)).astype(np.float32)
    g, b = RNG.standard_normal(33).astype(np.float32), RNG.standard_normal(33).astype(np.float32)
    want = (I - I.mean(1, keepdims=True)) / np.sqrt(I.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(k(I, g, b)[2], want, rtol=2e-4, atol=2e-4)
    src = ("def q(float(N, C) I, float(N) s) -> (O) "
           "{ O(n, c) = I(n, c) * s(n) + (C / N) }")
    k = polyc.compile(src)
    body = k.source.split("void polyc_kernel")[1]
    assert not any("polyc_inv" in ln and "/" in ln.split("=", 1)[1] for ln in body.splitlines()
                   if "const polyc_inv" in ln)
    I = RNG.standard_normal((4, 7)).astype(np.float32)
    sv = RNG.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(k(I, sv), I * sv[:, None] + (7 // 4), rtol=1e-6)


def test_column_reductions_are_not_row_fused():
    """A row of O(k) +=! A(n, k) is a column of A: strided, so isl's schedule stays."""
    k = polyc.compile("def cs(float(N, K) A) -> (O) { O(k) +=! A(n, k) }")
    assert k.explain(json=True)["row_fusion"] == ""
    A = RNG.standard_normal((37, 301)).astype(np.float32)
    np.testing.assert_allclose(k(A), A.sum(axis=0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 3, 15, 16, 17, 100])
def test_short_reductions_run_sequentially(n):
    # RBF's sum over 3 coordinates: a vector reduction's set-up costs more
    # than 3 iterations, so the loop is versioned on its trip count
    src = """
    def rbf(float(M, C) X, float(N, C) Y) -> (D, O) {
      D(i, j) +=! (X(i, c) - Y(j, c)) * (X(i, c) - Y(j, c))
      O(i) +=! exp(-D(i, j))
    }
    """
    k = polyc.compile(src)
    X = RNG.standard_normal((5, n)).astype(np.float32) / max(1, n) ** 0.5
    Y = RNG.standard_normal((7, n)).astype(np.float32) / max(1, n) ** 0.5
    d = ((X[:, None, :].astype(np.float64) - Y[None]) ** 2).sum(-1)
    D, O = k(X, Y)
    np.testing.assert_allclose(D, d, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(O, np.exp(-d).sum(-1), rtol=2e-5)
    assert ">= INT64_C(16))" in k.source and "omp simd reduction(+:polyc_acc)" in k.source
    assert "polyc_trip" not in k.source     # (its trip count is a size: no asm)


@pytest.mark.parametrize("n", [1, 15, 16, 40])
def test_a_reduction_whose_trip_moves_with_its_loop_hides_the_test_from_loop_splitting(n):
    """durbin's ``sum += r[k - i - 1] * y[i]`` for ``i < k``: the versioning
    test on ``k`` reaches the C compiler through an empty asm, because gcc's
    -fsplit-loops would split the loop over ``k`` at it and vectorise neither
    copy of the simd loop (durbin LARGE 0.75 ms with it, 2.1 ms without); a
    trip count of sizes only keeps the plain test (above)."""
    from benchmarks.polybench import BENCHMARKS, fresh
    bench = BENCHMARKS["durbin"]
    args = bench.init({"N": n})
    got, want = fresh(args), fresh(args)
    bench.kernel(*got)
    bench.reference(*want)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
    k = bench.kernel.specialize(*fresh(args))
    assert '__asm__("" : "+r"(polyc_trip))' in k.source
    assert "polyc_trip >= INT64_C(16)" in k.source


def test_a_constant_short_reduction_is_not_vectorised():
    src = """
    def f(float(M, 3) X) -> (S) {
      S(i) +=! X(i, c) * X(i, c)
    }
    """
    k = polyc.compile(src)
    X = RNG.standard_normal((9, 3)).astype(np.float32)
    np.testing.assert_allclose(k(X), (X.astype(np.float64) ** 2).sum(-1), rtol=2e-5)
    assert "omp simd reduction" not in k.source
