"""The pipeline end to end on hand-built programs (no frontend), vs numpy."""

import numpy as np
import programs
import pytest

from polyc import cache
from polyc.config import Config
from polyc.errors import BindingError, CacheWarning, DTypeError, ShapeError
from polyc.pipeline import compile_program, lower


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.uniform(-1, 1, size=shape).astype(dtype)


@pytest.fixture(scope="module")
def mm32():
    return compile_program(programs.matmul("float32"), Config.from_env(tensorize=False))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 13, 5), (97, 211, 131), (0, 3, 4),
                                   (3, 4, 0), (300, 17, 257)])
def test_matmul_sizes(mm32, M, N, K):
    A, B = rand(M, K), rand(K, N)
    C = mm32(A, B)
    assert C.shape == (M, N) and C.dtype == np.float32
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(C, ref, rtol=1e-5 * max(1, K) ** 0.5, atol=1e-5 * max(1, K) ** 0.5)


def test_matmul_float64_and_tile_override():
    k = compile_program(programs.matmul("float64"), Config.from_env(tile_sizes=(8, 16, 4)))
    A, B = rand(45, 33, dtype="float64"), rand(33, 29, dtype="float64")
    np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-12, atol=1e-12)
    assert "+= 8" in k.source and "+= 16" in k.source


def test_generated_code_is_parallel_tiled_and_vectorised(mm32):
    src = mm32.source
    assert "#pragma omp parallel for" in src
    assert "#pragma omp simd" in src
    assert "int64_t" in src and "restrict" in src


def test_identity_schedule_agrees():
    k = compile_program(programs.matmul("float64"), Config.from_env(schedule="identity"))
    # no loop pragma (the prelude's `omp declare simd` math declarations aside)
    assert "#pragma omp parallel" not in k.source and "#pragma omp simd" not in k.source
    A, B = rand(20, 30, dtype="float64"), rand(30, 10, dtype="float64")
    np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-12)


def test_producer_consumer_and_stencil():
    k = compile_program(programs.producer_consumer())
    A = rand(37, dtype="float64")
    B, C = k(A)
    np.testing.assert_allclose(B, A * 2)
    np.testing.assert_allclose(C, A * 2 + 1)
    k = compile_program(programs.stencil())
    for n in (3, 4, 5, 64):
        A = rand(n, dtype="float64")
        B = A[:-2] + A[1:-1] + A[2:]
        for i in range(1, n - 2):
            B[i] = B[i - 1] + B[i]
        np.testing.assert_allclose(k(A), B, rtol=1e-12)


def test_one_compile_serves_every_size(tmp_path):
    cfg = Config.from_env(cache_dir=str(tmp_path))
    cache.clear_memory()
    cache.reset_stats()
    k = compile_program(programs.matmul("float32"), cfg)
    assert cache.stats().builds == 1
    for M, N, K in [(2, 3, 4), (64, 65, 66), (129, 1, 7)]:
        A, B = rand(M, K), rand(K, N)
        np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-4, atol=1e-4)
    compile_program(programs.matmul("float32"), cfg)  # same source: no rebuild
    assert cache.stats().builds == 1
    cache.clear_memory()
    compile_program(programs.matmul("float32"), cfg)
    s = cache.stats()
    assert s.builds == 1 and s.disk_hits == 1


def test_generated_source_is_reproducible():
    a = lower(programs.matmul())
    b = lower(programs.matmul())
    from polyc.backends.c.emit import emit
    assert emit(a.program, a.loopnest).text == emit(b.program, b.loopnest).text


def test_binding_errors(mm32):
    A, B = rand(4, 5), rand(6, 3)
    with pytest.raises(ShapeError, match=r"argument B: dimension 0 has extent 6, expected 5"):
        mm32(A, B)
    with pytest.raises(DTypeError, match="argument A: expected dtype float32, got float64"):
        mm32(A.astype(np.float64), rand(5, 3))
    with pytest.raises(BindingError, match="expected 2 dimension"):
        mm32(rand(4), rand(5, 3))
    with pytest.raises(BindingError, match="takes 2 argument"):
        mm32(A)
    with pytest.raises(BindingError, match="expected a numpy.ndarray"):
        mm32([[1.0]], rand(1, 1))
    with pytest.raises(ShapeError, match=r"out C: expected shape \(4, 3\)"):
        mm32(A, rand(5, 3), out=np.empty((3, 4), np.float32))
    ro = np.empty((4, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(BindingError, match="read-only"):
        mm32(A, rand(5, 3), out=ro)


def test_noncontiguous_inputs_and_out(mm32):
    A = rand(8, 12)[:, ::2]          # 8x6, strided
    B = rand(6, 10).T.copy().T       # Fortran order
    out = np.zeros((10, 8), np.float32).T   # non-contiguous out
    A0, B0 = A.copy(), B.copy()
    r = mm32(A, B, out=out)
    assert r is out
    np.testing.assert_allclose(out, A0 @ B0, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(B, B0)


def test_out_aliasing_an_input_gets_copy_semantics(mm32):
    A = rand(6, 6)
    B = rand(6, 6)
    want = A @ B
    mm32(A, B, out=A)
    np.testing.assert_allclose(A, want, rtol=1e-5, atol=1e-5)


def test_warm_compile_skips_scheduling_but_schedule_stays_inspectable(tmp_path, monkeypatch):
    from polyc import pipeline
    cfg = Config.from_env(cache_dir=str(tmp_path))
    pipeline._LOWERED.clear()
    first = compile_program(programs.producer_consumer(), cfg)
    pipeline._LOWERED.clear()          # a new process: only the disk cache is left
    cache.clear_memory()
    calls = []
    real_lower = pipeline.lower
    monkeypatch.setattr(pipeline, "lower", lambda *a, **k: calls.append(1) or real_lower(*a, **k))
    again = compile_program(programs.producer_consumer(), cfg)
    assert calls == [] and again.source == first.source
    assert again.schedule == first.schedule and calls == [1]   # recomputed on demand
    A = rand(9, dtype="float64")
    np.testing.assert_allclose(again(A)[1], A * 2 + 1)
    # a corrupt entry is ignored, never trusted
    for f in tmp_path.glob("*.lowered.json"):
        f.write_text("{not json")
    pipeline._LOWERED.clear()
    calls.clear()
    with pytest.warns(CacheWarning):
        compile_program(programs.producer_consumer(), cfg)
    assert calls == [1]


def test_time_tiling_is_not_served_the_untiled_code(tmp_path):
    """Config.time_tiling changes the schedule, so it is part of the lowering
    key: compiling with it right after compiling without it (same process,
    same disk cache) gives the time-tiled code, not the cached untiled one;
    both compute jacobi-1d."""
    from polyc import pipeline
    program = programs.jacobi_1d()
    plain = Config.from_env(cache_dir=str(tmp_path), tensorize=False)
    tiled = plain.replace(time_tiling=True)
    assert pipeline.lowered_key(program, plain) != pipeline.lowered_key(program, tiled)
    first = compile_program(program, plain)
    second = compile_program(program, tiled)
    assert second.source != first.source
    pipeline._LOWERED.clear()
    cache.clear_memory()
    again = compile_program(program, tiled)         # from the disk cache
    assert again.source == second.source
    from polyc.backends.c.emit import emit
    fresh = pipeline.lower(program, tiled)          # what lowering gives now
    assert second.source == emit(fresh.program, fresh.loopnest).text
    T, N = 7, 300
    A0 = np.random.default_rng(7).uniform(-1, 1, N)
    want_a, want_b = A0.copy(), A0.copy()
    for _ in range(T):
        want_b[1:-1] = (want_a[:-2] + want_a[1:-1] + want_a[2:]) / 3
        want_a[1:-1] = (want_b[:-2] + want_b[1:-1] + want_b[2:]) / 3
    for kernel in (first, second):
        A, B = A0.copy(), A0.copy()
        kernel(T, A, B)
        # values in [-1, 1]: an absolute bound (x / 3 vs x * (1/3), T steps)
        np.testing.assert_allclose(A, want_a, rtol=0, atol=1e-14)
        np.testing.assert_allclose(B, want_b, rtol=0, atol=1e-14)


def test_sizes_named_like_isl_loops_keep_the_loop_marks():
    """Sizes named ``c0``, ``c1`` (isl's names for the AST loops, which it
    then calls ``c0_0``, ``c1_0``): the parallel and vector marks found no
    loop ``c<depth>`` and the C kernel ran serial and scalar."""
    import polyc
    for src in ("def f(float(c0,c1) A) -> (B) { B(i,j) = A(i,j) * 2.0 }",
                "def f(float(c0,c1) A) -> (s) { s(i) +=! A(i,j) }"):
        k = polyc.compile(src, config=Config.from_env())
        assert "omp parallel" in k.source and "omp simd" in k.source, src
    a = rand(70, 33)
    np.testing.assert_allclose(k(a), a.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
