"""Contractions over triangular domains on the GEMM micro-kernel
(:mod:`polyc.callbox`, issue 15 item 3), both ways polyc calls it: by
default one call over the band the domain is (``polyc_gemmt``: a triangle
of C stored through a mask, a triangle of an operand packed with zeros);
with ``Config.triangle_rows`` one call per block of rows over the full part
of the block, the diagonal edge as loops.

Against numpy at sizes that are and are not multiples of the block, smaller
than one block, empty; lower and upper triangles, a folded scaling, a
triangle in the reduction (its edge before each call); the kernel's tree (a
schedule of the source program with a ``tensorize`` mark, below a filter
for row blocks) read back from its text compiles to the same C; the mark is
checked when read back.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.callbox import full_rows, triangle_rows
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule


@polyc.kernel
def lower(alpha, C, A, B):
    n = C.shape[0]
    m = A.shape[1]
    for i in range(n):
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * B[k, j]


@polyc.kernel
def upper(C, A, B):
    n = C.shape[0]
    m = A.shape[1]
    for i in range(n):
        for k in range(m):
            for j in range(i, n):
                C[i, j] += A[i, k] * B[k, j]


@polyc.kernel
def tri_k(C, A, B):
    """C = triu(A) @ B: the reduction runs over k >= i."""
    n = C.shape[0]
    m = C.shape[1]
    for i in range(n):
        for j in range(m):
            for k in range(i, n):
                C[i, j] += A[i, k] * B[k, j]


#: PolyBench's syrk (C's lower triangle scaled by beta, then alpha A A^T)
#: and syr2k (alpha (A B^T + B A^T)), as benchmarks/polybench writes them
scaled = BENCHMARKS["syrk"].kernel
syr2k_like = BENCHMARKS["syr2k"].kernel


def _data(n, m, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n)), rng.standard_normal((n, m)),
            rng.standard_normal((m, n)))


SIZES = [(0, 5), (1, 1), (7, 3), (28, 9), (61, 17), (100, 33), (40, 0)]


#: the two ways: one call over the band (the default), calls on row blocks
MODES = ["band", "rows"]


def _in(kern, mode):
    """``kern`` (a ``@polyc.kernel``) as compiled in ``mode``."""
    if mode == "band":
        return kern
    return polyc.kernel(kern.py_func, config=polyc.Config(triangle_rows=triangle_rows()))


def _called(kern, mode="band"):
    if mode == "band":
        assert "polyc_gemmt_f64(" in kern.source, kern.explain()
        assert "polyc_gemm_f64(" not in kern.source
        assert "band" in kern.explain() and "full part" not in kern.explain()
    else:
        assert "polyc_gemm_f64(" in kern.source, kern.explain()
        assert "full part of each block of rows" in kern.explain()
    assert "tensorize:gemm:" in str(kern.schedule)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n,m", SIZES)
def test_a_lower_triangle_matches_numpy(n, m, mode):
    C, A, B = _data(n, m)
    out = C.copy()
    _in(lower, mode)(1.5, out, A, B)
    want = C + np.tril(1.5 * A @ B)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    _called(_in(lower, mode).specialize(1.5, out, A, B), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n,m", SIZES)
def test_an_upper_triangle_starts_each_call_at_its_first_full_column(n, m, mode):
    C, A, B = _data(n, m, 1)
    out = C.copy()
    _in(upper, mode)(out, A, B)
    np.testing.assert_allclose(out, C + np.triu(A @ B), rtol=1e-12, atol=1e-12)
    _called(_in(upper, mode).specialize(out, A, B), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, 3, 28, 75])
def test_a_triangle_in_the_reduction_runs_its_edge_before_each_call(n, mode):
    rng = np.random.default_rng(2)
    C, A, B = (rng.standard_normal((n, 11)), rng.standard_normal((n, n)),
               rng.standard_normal((n, 11)))
    # A's other triangle must not reach C (the band's call packs zeros there)
    A[np.tril(np.ones((n, n), bool), -1)] = 1e300
    out = C.copy()
    _in(tri_k, mode)(out, A, B)
    np.testing.assert_allclose(out, C + np.triu(A) @ B, rtol=1e-12, atol=1e-12)
    # rows: the edge's terms of each C(i, j) (k from i to the block's end)
    # come first in the source's sums: the edge of a block runs before its call
    kern = _in(tri_k, mode).specialize(out, A, B)
    _called(kern, mode)
    if mode == "band":
        assert "POLYC_GEMM_BAND_MK" in kern.source
        assert "the reduction over the band 0 <= k - i" in kern.explain()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("beta", [0.0, 0.5])
@pytest.mark.parametrize("n,m", [(5, 4), (57, 13), (90, 40)])
def test_a_folded_scaling_over_the_triangle(n, m, beta, mode):
    rng = np.random.default_rng(3)
    C, A = rng.standard_normal((n, n)), rng.standard_normal((n, m))
    C[np.triu(np.ones((n, n), bool), 1)] = np.nan     # outside: never read nor written
    out = C.copy()
    _in(scaled, mode)(1.25, beta, out, A)
    want = np.where(np.tril(np.ones((n, n), bool)), beta * C + 1.25 * A @ A.T, C)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    kern = _in(scaled, mode).specialize(1.25, beta, out, A)
    _called(kern, mode)
    assert "S0 folded into the call of S1" in kern.explain()


def test_the_full_part_of_a_lower_triangle():
    import islpy as isl
    dom = isl.Set("[n] -> { S[i, j] : 0 <= j <= i < n }")
    part = full_rows(dom, 0, 4)
    want = isl.Set("[n] -> { S[i, j] : 0 <= i < n and 0 <= j <= 4 * floor(i / 4) }")
    assert part.is_equal(want)


@pytest.mark.parametrize("mode", MODES)
def test_the_tree_read_back_from_text_compiles_to_the_same_code(mode):
    C, A, _ = _data(70, 20)
    kern = _in(scaled, mode).specialize(1.0, 0.5, C, A)
    text = kern.schedule.to_text()
    again = Schedule.from_program(kern.schedule.program).from_text(text)
    assert compile_schedule(again).source == kern.source
    if mode == "band":
        assert "tensorize:gemm:S1" in text and "tensorize:gemm:S1:" not in text
    else:
        assert f"tensorize:gemm:S1:{triangle_rows()}" in text


def test_without_tensorization_the_loops_stay():
    C, A, B = _data(40, 10)
    cfg = polyc.Config(tensorize=False)
    kern = polyc.kernel(lower.py_func, config=cfg).specialize(1.0, C, A, B)
    assert "polyc_gemm" not in kern.source


# ------------------------------------------------------------ sums of products

@pytest.mark.parametrize("n,m", [(6, 5), (61, 17), (100, 30)])
def test_a_sum_of_two_products_is_two_calls(n, m):
    rng = np.random.default_rng(4)
    C, A, B = (rng.standard_normal((n, n)), rng.standard_normal((n, m)),
               rng.standard_normal((n, m)))
    out = C.copy()
    syr2k_like(0.75, 1.5, out, A, B)
    full = 1.5 * C + 0.75 * (A @ B.T + B @ A.T)
    want = np.where(np.tril(np.ones((n, n), bool)), full, C)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    kern = syr2k_like.specialize(0.75, 1.5, out, A, B)
    # two calls over the band (the beta of the first scales C where the
    # runtime beta is 0: one polyc_beta per pair of calls)
    assert kern.source.count("polyc_gemmt_f64(") == 2
    assert kern.source.count("const double polyc_beta") == 1
    assert "by a second call" in kern.explain()


def test_a_tc_sum_of_products_over_a_box():
    src = ("def two(float(M, K) A, float(K, N) B, float(M, K) D, float(N, K) E) -> (C) "
           "{ C(m, n) +=! A(m, k) * B(k, n) + 2.0 * D(m, k) * E(n, k) }")
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((30, 20)), rng.standard_normal((20, 25))
    D, E = rng.standard_normal((30, 20)), rng.standard_normal((25, 20))
    A, B, D, E = (x.astype(np.float32) for x in (A, B, D, E))
    kern = polyc.compile(src)
    assert kern.source.count("polyc_gemm_f32(") == 2, kern.explain()
    np.testing.assert_allclose(kern(A, B, D, E), A @ B + 2.0 * D @ E.T, rtol=2e-4, atol=2e-4)


def test_a_sum_whose_products_are_no_gemms_says_which():
    src = ("def bad(float(M, K) A, float(K, N) B, float(M, N) X, float(K) w) -> (C) "
           "{ C(m, n) +=! A(m, k) * B(k, n) + X(m, n) * w(k) }")
    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((9, 4)), rng.standard_normal((4, 5))
    X, w = rng.standard_normal((9, 5)), rng.standard_normal(4)
    A, B, X, w = (x.astype(np.float32) for x in (A, B, X, w))
    kern = polyc.compile(src)
    assert "polyc_gemm" not in kern.source
    assert "its term X(m, n) * w(k) does not match" in kern.explain()
    np.testing.assert_allclose(kern(A, B, X, w), A @ B + X * w.sum(), rtol=2e-4, atol=2e-4)


# ------------------------------------------------------ the schedule language

def test_tensorize_with_split_on_the_source_order():
    C, A, _ = _data(75, 19)
    kern = scaled.specialize(1.25, 0.5, C, A)
    s = Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm", split=True)
    rows = triangle_rows()
    assert s.recipe[-1]["op"] == "tensorize"
    assert f"mark: tensorize:gemm:S1:{rows}" in str(s)
    k = compile_schedule(s)
    assert "polyc_gemm_f64(" in k.source
    out = C.copy()
    k(1.25, 0.5, out, A)
    want = np.where(np.tril(np.ones(C.shape, bool)), 0.5 * C + 1.25 * A @ A.T, C)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    # the recipe replays to the same code
    again = Schedule.replay(kern.program, s.to_recipe())
    assert compile_schedule(again).source == k.source
    # both copies of i run S0 and S1: naming a statement cannot choose one, a path can
    with pytest.raises(polyc.ScheduleError, match=r"ambiguous: .*; use loop\(path=") as e:
        s.parallel(("C", "i"))
    assert "name one statement" not in str(e.value)


@pytest.mark.parametrize("rows", [8, 40])
def test_tensorize_with_split_and_rows(rows):
    C, A, B = _data(50, 7)
    kern = upper.specialize(C, A, B)
    s = Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm", rows=rows,
                                                      split=True)
    assert f"tensorize:gemm:S0:{rows}" in str(s)
    out = C.copy()
    compile_schedule(s)(out, A, B)
    np.testing.assert_allclose(out, C + np.triu(A @ B), rtol=1e-12, atol=1e-12)


@polyc.kernel
def wedge(C, A, B):
    """j <= 2 i: a triangle that is no band of its box (j - i ranges over [-i, i])."""
    n = C.shape[0]
    m = A.shape[1]
    for i in range(n):
        for k in range(m):
            for j in range(min(2 * i + 1, n)):
                C[i, j] += A[i, k] * B[k, j]


def test_tensorize_without_split_on_a_triangle_is_one_call_over_its_band():
    C, A, B = _data(30, 5)
    kern = lower.specialize(1.0, C, A, B)
    s = Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm")
    k = compile_schedule(s)
    assert "polyc_gemmt_f64(" in k.source and "POLYC_GEMM_BAND_MN" in k.source
    out = C.copy()
    k(1.0, out, A, B)
    np.testing.assert_allclose(out, C + np.tril(A @ B), rtol=1e-12, atol=1e-12)
    again = Schedule.replay(kern.program, s.to_recipe())
    assert compile_schedule(again).source == k.source
    with pytest.raises(polyc.errors.ScheduleError, match="split must be True or False"):
        Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm", split="yes")


def test_tensorize_on_a_triangle_that_is_no_band_says_why():
    C, A, B = _data(30, 5)
    kern = wedge.specialize(C, A, B)
    with pytest.raises(polyc.errors.ScheduleError, match="not the full box.*nor a band"):
        Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm")
    # the automatic pipeline takes row blocks instead, and is right
    out = C.copy()
    wedge(out, A, B)
    mask = np.arange(30)[None, :] <= 2 * np.arange(30)[:, None]
    np.testing.assert_allclose(out, C + np.where(mask, A @ B, 0), rtol=1e-12, atol=1e-12)


def test_symm_calls_both_updates_and_zeroes_only_what_they_write(monkeypatch):
    """PolyBench's symm: ``temp2 += B[k, j] * A[i, k]`` over ``k < i`` is a
    call per block of rows whose zeroing (``temp2 = 0``, folded as beta 0)
    covers only the rows a call writes: row 0 has no ``k`` and keeps its
    own zeroing.  Temporaries are poisoned with NaN to show it."""
    import polyc.binder as binder
    monkeypatch.setattr(binder.np, "empty",
                        lambda shape, dtype=float: np.full(shape, np.nan, dtype=dtype))
    bench = BENCHMARKS["symm"]
    for m, n in ((45, 30), (3, 4)):
        args = bench.init({"M": m, "N": n})
        want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        bench.reference(*want)
        bench.kernel(*got)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)
    for mode in MODES:
        kern = _in(bench.kernel, mode).specialize(*bench.init({"M": 45, "N": 30}))
        assert kern.explain().count("tensorized onto gemm") == 2
        assert "beta = 0.0 (S0 folded)" in kern.explain()
        if mode == "band":      # the update of C runs after every row's last statement
            assert "the call runs where the last of its instances ran" in kern.explain()
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        _in(bench.kernel, mode)(*got)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)


def test_the_rows_per_call_are_a_config_knob(monkeypatch):
    C, A, B = _data(70, 6)
    k56 = polyc.kernel(lower.py_func, config=polyc.Config(triangle_rows=56))
    kern = k56.specialize(1.0, C, A, B)
    assert "tensorize:gemm:S0:56" in str(kern.schedule)
    out = C.copy()
    k56(1.0, out, A, B)
    np.testing.assert_allclose(out, C + np.tril(A @ B), rtol=1e-12, atol=1e-12)
    off = polyc.kernel(lower.py_func, config=polyc.Config(triangle_rows=1))
    assert "polyc_gemm" not in off.specialize(1.0, C, A, B).source
    monkeypatch.setenv("POLYC_TRIANGLE_ROWS", "42")
    assert polyc.Config.from_env().triangle_rows == 42
    monkeypatch.setenv("POLYC_TRIANGLE_ROWS", "many")
    with pytest.raises(polyc.errors.PolycError, match="POLYC_TRIANGLE_ROWS"):
        polyc.Config.from_env()
    with pytest.raises(polyc.errors.PolycError, match="triangle_rows"):
        polyc.Config(triangle_rows=-2)


def test_the_tuner_tries_other_rows_per_call_on_a_triangle():
    from polyc.tune.space import auto_variants
    prog = scaled.specialize(1.0, 1.0, *_data(30, 4)[:2]).program
    variants = auto_variants(prog)
    assert {"triangle_rows": triangle_rows()} in variants
    assert {"triangle_rows": 2 * triangle_rows()} in variants
    assert {"triangle_rows": 1} in variants
    assert any("triangle_rows" in v for v in auto_variants(
        polyc.kernel(lower.py_func).specialize(1.0, *_data(30, 4)).program))
    box = polyc.program("def mm(float(M, K) A, float(K, N) B) -> (C) "
                        "{ C(m, n) +=! A(m, k) * B(k, n) }")
    assert not any("triangle_rows" in v for v in auto_variants(box))


# ------------------------------------------------------------ guarded products

CAUSAL = ("def causal(float(B, T, D) Q, float(B, T, D) K) -> (S) "
          "{ S(b, i, j) +=! (j <= i ? Q(b, i, d) * K(b, j, d) : 0.0) }")
WINDOW = ("def window(float(T, D) Q, float(T, D) K) -> (S) "
          "{ S(i, j) +=! (j <= i && j > i - 40 ? Q(i, d) * K(j, d) : 0.0) }")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("t", [1, 5, 29, 90])
def test_a_causal_mask_is_one_call_over_its_band_or_calls_on_row_blocks(t, mode):
    cfg = polyc.Config(triangle_rows=triangle_rows()) if mode == "rows" else None
    kern = polyc.compile(CAUSAL, config=cfg)
    rng = np.random.default_rng(7)
    Q, K = (rng.standard_normal((2, t, 16)).astype(np.float32) for _ in range(2))
    want = np.tril(np.einsum("bid,bjd->bij", Q, K))
    np.testing.assert_allclose(kern(Q, K), want, rtol=2e-5, atol=2e-5)
    text = kern.explain()
    assert "the product where j <= i" in text
    if mode == "band":      # per image b, the band j - i <= 0 (the zeroing folded on it)
        assert "polyc_gemmt_f32(" in kern.source and "polyc_gemm_f32(" not in kern.source
        assert "only the band j - i <= 0 of S" in text and "initialisation folded" in text
    else:
        assert "polyc_gemm_f32(" in kern.source and "full part of each block" in text


def test_a_sliding_window_mask():
    kern = polyc.compile(WINDOW)
    rng = np.random.default_rng(8)
    Q, K = (rng.standard_normal((150, 8)).astype(np.float32) for _ in range(2))
    i, j = np.indices((150, 150))
    want = np.where((j <= i) & (j > i - 40), Q @ K.T, 0.0)
    np.testing.assert_allclose(kern(Q, K), want, rtol=2e-5, atol=2e-5)
    assert "polyc_gemmt_f32(" in kern.source
    assert "only the band -39 <= j - i <= 0 of S" in kern.explain()


def test_a_guarded_product_tree_reads_back_to_the_same_code():
    kern = polyc.compile(CAUSAL)
    again = Schedule.from_program(kern.schedule.program).from_text(kern.schedule.to_text())
    assert compile_schedule(again).source == kern.source


def test_a_non_affine_mask_keeps_its_loops():
    src = ("def m(float(T, D) Q, float(T, D) K, float(T) w) -> (S) "
           "{ S(i, j) +=! (w(j) > 0.0 ? Q(i, d) * K(j, d) : 0.0) }")
    kern = polyc.compile(src)
    rng = np.random.default_rng(9)
    Q, K = (rng.standard_normal((20, 4)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(20).astype(np.float32)
    np.testing.assert_allclose(kern(Q, K, w), np.where(w[None, :] > 0, Q @ K.T, 0.0),
                               rtol=2e-5, atol=2e-5)
    assert "polyc_gemm" not in kern.source


SYRK_FILE = '''import polyc


@polyc.kernel
def syrk(C, A):
    n = C.shape[0]
    m = A.shape[1]
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= 0.5
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += 1.5 * A[i, k] * A[j, k]
'''


def test_the_cli_explains_and_compiles_the_band_call(tmp_path, capsys):
    from polyc.cli import main
    path = tmp_path / "syrk.py"
    path.write_text(SYRK_FILE)
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "only the band j - i <= 0 of C" in out and "beta = 0.5 (S0 folded)" in out
    assert main(["compile", str(path)]) == 0
    assert "polyc_gemmt_f64(" in capsys.readouterr().out
    assert main(["explain", str(path), "--triangle-rows", "28"]) == 0
    assert "28 rows of i per call" in capsys.readouterr().out
