"""Tensorization onto the GEMM intrinsic (polyc.intrinsics,
polyc.schedule.tensorize, backends/c/intrinsics/gemm.h): which statements
match (and why the others do not), and the tensorized kernels against numpy
on edge sizes, dtypes, transposed operands, batches and unaligned views."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.intrinsics import GemmMatch, match_gemm
from polyc.schedule.tensorize_auto import contract, find

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
CONV = ("def conv(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) "
        "{ O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, kh, kw) }")
GCONV = ("def gconv(float(N, G, C, H, W) I, float(G, F, C, KH, KW) W1) -> (O) "
         "{ O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw) }")
INTERLEAVED = ("def il(float(M, K, L) A, float(L, K, N) B) -> (C) "
               "{ C(m, n) +=! A(m, k, l) * B(l, k, n) }")
TRANSPOSED_C = "def tc(float(M, K) A, float(K, N) B) -> (C) { C(n, m) +=! A(m, k) * B(k, n) }"
SKEWED = ("def sk(float(M, K) A, float(K, N) B) -> (C) "
          "{ C(m, n) +=! A(m, k) * B(k, n + k) }")
KRON2 = ("def kron2(float(M, N0, N1, D2) X, float(D1, N1) W1) -> (Y) "
         "{ Y(m, n0, d1, d2) +=! X(m, n0, r_n1, d2) * W1(d1, r_n1) }")


def _match(src: str, which: int = -1):
    p = polyc.program(src)
    return match_gemm(p, [s for s in p.statements if s.kind == "update"][which])


def test_one_tensor_as_both_operands():
    """A Gram matrix A A^T: A is both operands (roles are per access)."""
    for src, ref in [("def g(float(N, K) A) -> (C) { C(i, j) +=! A(i, k) * A(j, k) }",
                      lambda A: A @ A.T),
                     ("def g(float(K, N) A) -> (C) { C(i, j) +=! A(k, i) * A(k, j) }",
                      lambda A: A.T @ A),
                     ("def g(float(N, N) A) -> (C) { C(i, j) +=! A(i, k) * A(k, j) }",
                      lambda A: A @ A)]:
        m = _match(src)
        assert isinstance(m, GemmMatch) and m.a == m.b == "A", m
        A = RNG.standard_normal((29, 29) if "N, N" in src else (29, 13)).astype(np.float32)
        kern, C = _run(src, A)
        assert "polyc_gemm_f32(" in kern.source
        np.testing.assert_allclose(C, ref(A), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("src, roles", [
    (GEMM, (("m",), ("n",), ("k",), ())),
    (TMM, (("m",), ("n",), ("k",), ())),                  # B transposed
    (TATB, (("m",), ("n",), ("k",), ())),                 # both transposed
    (TBMM, (("n",), ("m",), ("kk",), ("b",))),            # batched, transposed
    (ACC, (("m",), ("n",), ("k",), ())),                  # accumulates into C
    (GROUPED, (("m", "a"), ("n",), ("k", "l"), ())),      # grouped dimensions
    # implicit GEMMs: the window I(n, c, h + kh, w + kw) is B, gathered
    (CONV, (("k",), ("h", "w"), ("c", "kh", "kw"), ("n",))),
    (GCONV, (("f",), ("h", "w"), ("c", "kh", "kw"), ("n", "g"))),
    (INTERLEAVED, (("m",), ("n",), ("k", "l"), ())),      # k digits in two orders
    (TRANSPOSED_C, (("n",), ("m",), ("k",), ())),         # operands swapped: C's rows
    (SKEWED, (("m",), ("n",), ("k",), ())),               # B's row stride N + 1
    (KRON2, (("d1",), ("d2",), ("r_n1",), ("m", "n0"))),  # a Kronecker factor
])
def test_contractions_match(src, roles):
    m = _match(src)
    assert isinstance(m, GemmMatch), m
    assert (m.m, m.n, m.k, m.batch) == roles
    assert (m.init is None) == (src is ACC)       # +=! initialisations are folded
    assert m.gather == (src in (CONV, GCONV, INTERLEAVED, SKEWED))


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
    ("def q(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k / 2) * B(k, n) }",
     "division"),
    ("def q(float(M, K) A, float(K, N) B, int32(K) ix) -> (C) "
     "{ C(m, n) +=! A(m, ix(k)) * B(k, n) }", "not affine"),
    ("def q(float(M, K) A, float(K, N) B, float(M) D) -> (C) "
     "{ C(m, n) +=! D(m) * A(m, k) * B(k, n) }", "not a product of two tensor elements"),
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


def test_a_clipped_stride_does_not_match():
    """k < K (from B) and 2k + 1 < K2 (from A): the domain is not a box of
    one extent per iterator, so no call; the loops stay, and are correct."""
    src = ("def st(float(M, K2) A, float(K, N) B) -> (C) "
           "{ C(m, n) +=! A(m, 2 * k + 1) * B(k, n) }")
    m = _match(src)
    assert isinstance(m, str) and "full box" in m, m
    A, B = RNG.standard_normal((6, 11)), RNG.standard_normal((5, 7))
    kern, C = _run(src, A, B, dtype="float64")
    assert "polyc_gemm" not in kern.source
    np.testing.assert_allclose(C, A[:, 1::2] @ B, rtol=1e-12)


def test_contraction_to_calls_keeps_the_rest():
    """What the automatic pipeline schedules: each matched group as calls."""
    p = polyc.program(ACC)
    matches, notes = find(p)
    q = contract(p, matches)
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
     lambda I, W, b: np.maximum(I @ W.T + b[:, None], 0),
     "post:+ b (per row), relu"),         # bias along m: the call's post-operations
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
    if fused and fused.startswith("post:"):
        assert f"epilogue S1 ({fused[5:]}) applied by the call" in notes["S0"]
        assert "t_O[" not in kern.source.split("void polyc_kernel")[1]     # no pass over O
    elif fused:
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


def _conv_ref(I, W):
    kh, kw = W.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(I, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,kcij->nkhw", win, W)


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("n, c, k, hp, wp, kh, kw", [
    (1, 64, 64, 58, 58, 3, 3), (1, 1, 1, 3, 3, 3, 3), (2, 3, 5, 9, 17, 3, 3),
    (3, 7, 1, 5, 4, 2, 1), (1, 17, 31, 13, 40, 5, 3), (2, 2, 3, 4, 4, 1, 1),
    (1, 3, 2, 2, 5, 3, 3),                 # HP < KH: no output rows
    (0, 3, 2, 6, 6, 3, 3), (1, 0, 2, 6, 6, 3, 3)])
def test_implicit_gemm_convolution_matches_numpy(dtype, rtol, n, c, k, hp, wp, kh, kw):
    I = RNG.standard_normal((n, c, hp, wp)).astype(dtype)
    W = RNG.standard_normal((k, c, kh, kw)).astype(dtype)
    kern, O = _run(CONV, I, W, dtype=dtype)
    assert "polyc_gemmx_f" in kern.source
    want = _conv_ref(I, W) if hp >= kh else np.zeros((n, k, 0, wp - kw + 1))
    np.testing.assert_allclose(O, want, rtol=rtol, atol=rtol * max(1, np.sqrt(c * kh * kw)))


@pytest.mark.parametrize("threads", [1, 2])
def test_convolution_of_one_image_uses_the_team_and_many_images_the_loop(threads):
    """The image loop around the calls is parallel when it has an iteration
    per thread; otherwise it runs sequentially and each call uses the team."""
    W = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
    for n in (1, 5):
        I = RNG.standard_normal((n, 4, 12, 10)).astype(np.float32)
        kern, O = _run(CONV, I, W, num_threads=threads)
        np.testing.assert_allclose(O, _conv_ref(I, W), rtol=2e-5, atol=1e-4)
    src = kern.source.split("void polyc_kernel")[1]
    assert ">= polyc_team" in src and "#pragma omp parallel for" in src


def test_unaligned_and_strided_views_through_an_implicit_gemm():
    base = RNG.standard_normal(1 + 2 * 3 * 9 * 12).astype(np.float32)
    I = base[1:].reshape(2, 3, 9, 12)                       # not 64-byte aligned
    W = RNG.standard_normal((5, 3, 6, 3)).astype(np.float32)[:, :, ::2, :]   # a view
    _, O = _run(CONV, I, W)
    np.testing.assert_allclose(O, _conv_ref(I, W), rtol=2e-5, atol=1e-4)


def test_grouped_convolution_kronecker_factor_and_other_implicit_gemms():
    I = RNG.standard_normal((3, 4, 2, 7, 6))
    W1 = RNG.standard_normal((4, 5, 2, 3, 3))
    kern, O = _run(GCONV, I, W1, dtype="float64")
    win = np.lib.stride_tricks.sliding_window_view(I, (3, 3), axis=(3, 4))
    np.testing.assert_allclose(O, np.einsum("ngchwij,gfcij->ngfhw", win, W1), rtol=1e-12)
    X, W = RNG.standard_normal((3, 4, 5, 6)), RNG.standard_normal((7, 5))
    kern, Y = _run(KRON2, X, W, dtype="float64")
    assert "polyc_gemm_f64" in kern.source
    np.testing.assert_allclose(Y, np.einsum("mard,er->maed", X, W), rtol=1e-12)
    A, B = RNG.standard_normal((4, 5, 6)), RNG.standard_normal((6, 5, 3))
    kern, C = _run(INTERLEAVED, A, B, dtype="float64")
    assert "polyc_gemmx_f64" in kern.source
    np.testing.assert_allclose(C, np.einsum("mkl,lkn->mn", A, B), rtol=1e-12)
    A, B = RNG.standard_normal((6, 5)), RNG.standard_normal((5, 7))
    _, C = _run(TRANSPOSED_C, A, B, dtype="float64")
    np.testing.assert_allclose(C, (A @ B).T, rtol=1e-12)
    A, B = RNG.standard_normal((6, 5)), RNG.standard_normal((5, 9))
    kern, C = _run(SKEWED, A, B, dtype="float64")
    assert "polyc_gemmx_f64" in kern.source
    skew = np.stack([B[k, k:k + 5] for k in range(5)])
    np.testing.assert_allclose(C, A @ skew, rtol=1e-12)


FLIPPED = ("def flip(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) "
           "{ O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, KH - 1 - kh, KW - 1 - kw) }")


@pytest.mark.parametrize("shape", [(2, 3, 7, 9), (1, 1, 3, 2), (2, 3, 2, 9)])
def test_a_flipped_filter_is_an_implicit_gemm_with_negative_strides(shape):
    """W(k, c, KH - 1 - kh, ...): kh indexes no dimension plainly, so its extent
    is its range in the domain (isl), and A's column map has negative strides
    (an offset table)."""
    n, c, hp, wp = shape
    I = RNG.standard_normal(shape).astype(np.float32)
    W = RNG.standard_normal((4, c, 3, 2)).astype(np.float32)
    kern, O = _run(FLIPPED, I, W)
    assert "implicit GEMM" in kern.explain(json=True)["tensorize"]["S0"]
    if hp < 3:
        assert O.shape == (n, 4, 0, wp - 1)
        return
    np.testing.assert_allclose(O, _conv_ref(I, W[:, :, ::-1, ::-1]), rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("isa_flags", [("-mno-avx512f",),
                                       ("-mno-avx512f", "-mno-avx2", "-mno-fma")],
                         ids=["avx2", "portable"])
def test_kernels_built_without_avx512_fall_back_to_the_next_micro_kernel(isa_flags):
    """A CPU without AVX-512 (or AVX2), simulated by the compiler flags: the
    same tensorized kernels, on the AVX2 or portable micro-kernel, still
    match numpy."""
    cflags = polyc.Config().cflags + isa_flags
    I = RNG.standard_normal((2, 5, 9, 11)).astype(np.float32)
    W = RNG.standard_normal((7, 5, 3, 3)).astype(np.float32)
    kern, O = _run(CONV, I, W, cflags=cflags)
    assert "polyc_gemmx_f32" in kern.source
    np.testing.assert_allclose(O, _conv_ref(I, W), rtol=2e-5, atol=1e-4)
    A, B = RNG.standard_normal((37, 29)), RNG.standard_normal((29, 41))
    kern, C = _run(GEMM, A, B, dtype="float64", cflags=cflags)
    # another summation order: relative to the output's magnitude
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-13 * np.abs(A @ B).max())


def test_iterators_named_like_isl_values_are_tensorized_correctly():
    """User names reach isl through its API, never its text syntax: with
    iterators named NAN and infty the call's domain was once parsed as empty
    and the kernel computed nothing."""
    src = ("def q(float(M, K) A, float(K, N) B) -> (C) "
           "{ C(NAN, infty) +=! A(NAN, k) * B(k, infty) }")
    A, B = RNG.standard_normal((7, 19)), RNG.standard_normal((19, 5))
    kern, C = _run(src, A, B, dtype="float64")
    assert "polyc_gemm_f64" in kern.source
    np.testing.assert_allclose(C, A @ B, rtol=1e-12)


def test_a_reduction_of_constant_extent_zero_is_not_a_call():
    """``K`` fixed to 0 (a traced ``x @ w`` over an empty reshape): no
    instance to call, so no match (isl had no extent to print: a bare
    isl.Error), and the kernel stores zeros."""
    p = polyc.program(GEMM, sizes={"K": 0})
    m = match_gemm(p, [s for s in p.statements if s.kind == "update"][0])
    assert isinstance(m, str) and "no instance" in m, m
    from polyc.pipeline import compile_program
    A, B = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    assert np.array_equal(compile_program(p)(A, B), np.zeros((3, 4), np.float32))
