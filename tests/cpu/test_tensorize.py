"""Tensorization onto the GEMM intrinsic (polyc.intrinsics,
polyc.schedule.tensorize, backends/c/intrinsics/gemm.h): which statements
match (and why the others do not), and the tensorized kernels against numpy
on edge sizes, dtypes, transposed operands, batches and unaligned views."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.intrinsics import GemmMatch, match_gemm
from polyc.schedule.tensorize import tensorize

RNG = np.random.default_rng(3)

GEMM = "def gemm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
TMM = "def tmm(float(M, K) A, float(N, K) B) -> (C) { C(m, n) +=! A(m, k) * B(n, k) }"
TATB = "def tatb(float(K, M) A, float(N, K) B) -> (C) { C(m, n) +=! A(k, m) * B(n, k) }"
TBMM = ("def tbmm(float(B, N, K) X, float(B, M, K) Y) -> (Z) "
        "{ Z(b, n, m) +=! X(b, n, kk) * Y(b, m, kk) }")
GROUPED = ("def grouped(float(M, A, K, L) X, float(K, L, N) Y) -> (Z) "
           "{ Z(m, a, n) +=! X(m, a, k, l) * Y(k, l, n) }")
ACC = ("def acc(float(M, K) A, float(K, N) B, float(M, N) C0) -> (C) "
       "{ C(m, n) = C0(m, n)\n C(m, n) += A(m, k) * B(k, n) }")


def _match(src: str, which: int = -1):
    p = polyc.program(src)
    return match_gemm(p, [s for s in p.statements if s.kind == "update"][which])


@pytest.mark.parametrize("src, roles", [
    (GEMM, (("m",), ("n",), ("k",), ())),
    (TMM, (("m",), ("n",), ("k",), ())),                  # B transposed
    (TATB, (("m",), ("n",), ("k",), ())),                 # both transposed
    (TBMM, (("n",), ("m",), ("kk",), ("b",))),            # batched, transposed
    (ACC, (("m",), ("n",), ("k",), ())),                  # accumulates into C
    (GROUPED, (("m", "a"), ("n",), ("k", "l"), ())),      # grouped dimensions
])
def test_contractions_match(src, roles):
    m = _match(src)
    assert isinstance(m, GemmMatch), m
    assert (m.m, m.n, m.k, m.batch) == roles
    assert (m.init is None) == (src is ACC)       # +=! initialisations are folded


def test_grouped_dimensions_run_as_one():
    X = RNG.standard_normal((5, 3, 4, 6))
    Y = RNG.standard_normal((4, 6, 7))
    k, Z = _run(GROUPED, X, Y, dtype="float64")
    assert "polyc_gemm_f64" in k.source
    np.testing.assert_allclose(Z, np.einsum("makl,kln->man", X, Y), rtol=1e-12)


@pytest.mark.parametrize("src, reason", [
    ("def s(float(M, K) A) -> (C) { C(m) +=! A(m, k) }", "not a product"),
    ("def e(float(M, N) A, float(M, N) B) -> (C) { C(m, n) +=! A(m, n) * B(m, n) }",
     "elementwise"),
    ("def c(float(N, C, H, W) I, float(K, C, KH, KW) W1) -> (O) "
     "{ O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W1(k, c, kh, kw) }", "plain iterator"),
    ("def g(float(M, K, L) A, float(L, K, N) B) -> (C) "
     "{ C(m, n) +=! A(m, k, l) * B(l, k, n) }", "not consecutive"),
    ("def t(float(N, C1, C2, H) I0, float(N, C2, C3, H) I1) -> (O) "
     "{ O(n, c1, c3, h) +=! I0(n, c1, c2, h) * I1(n, c2, c3, h) }", "innermost dimension h"),
    ("def s(float(N, N) A, float(N, N) B) -> (C) "
     "{ C(i, j) +=! A(i, k) * B(k, i) where j in 0:N }",
     "only one tensor"),
    ("def d(double(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }",
     "dtypes"),
    ("def x(float(M, K) A, float(K, N) B) -> (C) { C(m, n) max=! A(m, k) * B(k, n) }",
     "not a += reduction"),
])
def test_non_contractions_do_not_match_and_say_why(src, reason):
    m = _match(src)
    assert isinstance(m, str) and reason in m, m


def test_a_sub_box_domain_does_not_match():
    src = ("def sub(float(M, K) A, float(K, N) B) -> (C) "
           "{ C(m, n) +=! A(m, k) * B(k, n) where k in 1:K }")
    m = _match(src)
    assert isinstance(m, str) and "full box" in m, m


def test_tensorize_rewrites_the_program_and_keeps_the_rest():
    p = polyc.program(ACC)
    q, notes = tensorize(p)
    assert [s.kind for s in q.statements] == ["assign", "intrinsic"]
    call = q.statements[1]
    assert call.iterators == () and "tensorized onto gemm" in notes[call.name]
    # the call writes every element of C and reads all of A, B and C
    assert set(call.read_tensors()) == {"A", "B", "C"}


def _run(src, *args, dtype="float32", **cfg):
    k = polyc.compile(src, dtype=dtype, config=polyc.Config.from_env(**cfg))
    out = k(*args)
    return k, out


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (7, 17, 5), (31, 1, 97), (130, 67, 259),
                                     (0, 5, 3), (4, 0, 3), (4, 5, 0)])
def test_tensorized_gemm_matches_numpy(dtype, rtol, m, n, k):
    A = RNG.standard_normal((m, k)).astype(dtype)
    B = RNG.standard_normal((k, n)).astype(dtype)
    kern, C = _run(GEMM, A, B, dtype=dtype)
    assert "polyc_gemm_f" in kern.source
    np.testing.assert_allclose(C, A @ B, rtol=rtol, atol=rtol * max(1, np.sqrt(k)))


def test_transposed_batched_and_accumulating_calls():
    A, B = RNG.standard_normal((23, 41)), RNG.standard_normal((19, 41))
    _, C = _run(TMM, A, B, dtype="float64")
    np.testing.assert_allclose(C, A @ B.T, rtol=1e-12)
    At = RNG.standard_normal((41, 23))
    _, C = _run(TATB, At, B, dtype="float64")
    np.testing.assert_allclose(C, At.T @ B.T, rtol=1e-12)
    X, Y = RNG.standard_normal((9, 5, 13)), RNG.standard_normal((9, 7, 13))
    k, Z = _run(TBMM, X, Y, dtype="float64")
    np.testing.assert_allclose(Z, X @ Y.transpose(0, 2, 1), rtol=1e-12)
    assert "for (int64_t c0" in k.source          # the batch loop stays a loop
    A, B2, C0 = RNG.standard_normal((6, 4)), RNG.standard_normal((4, 9)), \
        RNG.standard_normal((6, 9))
    _, C = _run(ACC, A, B2, C0, dtype="float64")
    np.testing.assert_allclose(C, C0 + A @ B2, rtol=1e-12)


def test_unaligned_views_and_one_thread():
    base = RNG.standard_normal(1 + 33 * 20).astype(np.float32)
    A = base[1:].reshape(33, 20)                  # not 64-byte aligned
    B = RNG.standard_normal((20, 45)).astype(np.float32)
    _, C = _run(GEMM, A, B, num_threads=1)
    np.testing.assert_allclose(C, A @ B, rtol=2e-5, atol=1e-4)


def test_tensorize_off_keeps_loops():
    A, B = RNG.standard_normal((8, 6)), RNG.standard_normal((6, 5))
    k, C = _run(GEMM, A, B, dtype="float64", tensorize=False)
    assert "polyc_gemm" not in k.source
    np.testing.assert_allclose(C, A @ B, rtol=1e-12)


C3 = ("def c3(float(B, K) I, float(N, K) W, float(N) b) -> (O) {\n"
      "    O(i, n) +=! I(i, k) * W(n, k)\n    O(i, n) = fmax(O(i, n) + b(n), 0.0)\n}")


@pytest.mark.parametrize("src, ref, fused", [
    (C3, lambda I, W, b: np.maximum(I @ W.T + b, 0), "+ b(n), relu"),
    (C3.replace("fmax(O(i, n) + b(n), 0.0)", "O(i, n) + b(n)"),
     lambda I, W, b: I @ W.T + b, "+ b(n)"),
    (C3.replace("fmax(O(i, n) + b(n), 0.0)", "fmax(O(i, n), 0.0) + 0.0 * b(n)"),
     lambda I, W, b: np.maximum(I @ W.T, 0) + 0.0 * b, None),       # not the pattern
    (C3.replace("float(N) b", "float(B) b").replace("b(n)", "b(i)"),
     lambda I, W, b: np.maximum(I @ W.T + b[:, None], 0), None),     # bias along m
])
@pytest.mark.parametrize("shape", [(1, 1, 1), (37, 29, 50), (5, 70, 0)])
def test_epilogue_fused_into_the_store(src, ref, fused, shape):
    bsz, n, k = shape
    I = RNG.standard_normal((bsz, k)).astype(np.float32)
    W = RNG.standard_normal((n, k)).astype(np.float32)
    b = RNG.standard_normal(bsz if "float(B) b" in src else n).astype(np.float32)
    kern, O = _run(src, I, W, b)
    np.testing.assert_allclose(O, ref(I, W, b), rtol=2e-5, atol=1e-4)
    notes = kern.explain(json=True)["tensorize"]
    if fused:
        assert f"epilogue S1 ({fused}) fused" in notes["S0"]
        assert "t_O[" not in kern.source.split("void polyc_kernel")[1]     # one pass over O
    else:
        assert "epilogue" not in notes["S0"] and "tensorized onto gemm" in notes["S0"]


def test_batched_calls_inside_a_parallel_loop():
    """One single-threaded GEMM per batch on each thread of the batch loop's
    team: the intrinsic's barriers must not bind to that team (this hung)."""
    X = RNG.standard_normal((65, 6, 6)).astype(np.float32)
    Y = RNG.standard_normal((65, 12, 6)).astype(np.float32)
    k, Z = _run(TBMM, X, Y, num_threads=2)
    assert "#pragma omp parallel for" in k.source
    np.testing.assert_allclose(Z, X @ Y.transpose(0, 2, 1), rtol=2e-5, atol=1e-5)
