"""float16 and bfloat16 on ``target="cuda"``: ``__half`` and
``__nv_bfloat16`` storage, float32 arithmetic and accumulators, the same
rounding as the C backend.  The emulator (every mode) against the C
backend and :func:`polyc.reference.evaluate`; nvcc builds for sm_80/sm_90
(``nvcc`` marker).  Tolerances: :func:`polyc.testing.assert_close` for the
half type, scaled by the reduction length."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.pipeline import compile_schedule
from polyc.testing import assert_close

ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = {"half": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
MODES = {"forward": {}, "reverse": {"emulate_reverse": True}, "checks": {"emulate_checks": True}}
SOFTMAX = """
def softmax({t}(N, C) I) -> (O, maxVal, expDist, expSum) {{
    maxVal(n) max=! I(n, c)
    expDist(n, c) = exp(I(n, c) - maxVal(n))
    expSum(n) +=! expDist(n, c)
    O(n, c) = expDist(n, c) / expSum(n)
}}
"""


def matmul(t: str) -> str:
    return f"def mm({t}(M,K) A, {t}(K,N) B) -> (C) {{ C(m,n) +=! A(m,k) * B(k,n) }}"


def emulated(**kw) -> Config:
    return Config.from_env(target="cuda", emulate=True, **kw)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("t", list(DTYPES))
def test_matmul_and_softmax_match_the_c_backend(t, mode):
    dt = DTYPES[t]
    rng = np.random.default_rng(0)
    mm_gpu = polyc.compile(matmul(t), config=emulated(**MODES[mode]))
    mm_c = polyc.compile(matmul(t))
    for m, k, n in [(33, 70, 20), (1, 1, 1), (40, 64, 33)]:
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        got = mm_gpu(a, b)
        assert got.dtype == dt
        assert_close(got, mm_c(a, b), reduction_length=k, name="C")
    sm_gpu = polyc.compile(SOFTMAX.format(t=t), config=emulated(**MODES[mode]))
    sm_c = polyc.compile(SOFTMAX.format(t=t))
    x = rng.standard_normal((9, 77)).astype(dt)
    for got, want in zip(sm_gpu(x), sm_c(x)):
        assert got.dtype == dt
        assert_close(got, want, reduction_length=77)


@pytest.mark.parametrize("t", list(DTYPES))
def test_strided_half_convolution_on_tensor_cores(t):
    """A stride-2 convolution's tensor-core call reads the extents of the
    output, not of its float accumulator (which the call replaces: a
    KeyError 'O_acc' before)."""
    src = (f"def sconv({t}(N,C,H,W) I, {t}(F,C,KH,KW) Wt) -> (O) {{\n"
           "  O(n,f,h,w) +=! I(n,c,2*h+kh,2*w+kw) * Wt(f,c,kh,kw)\n}")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 11)).astype(DTYPES[t])
    w = rng.standard_normal((4, 3, 3, 3)).astype(DTYPES[t])
    got = polyc.compile(src, config=emulated())(x, w)
    assert_close(got, polyc.compile(src)(x, w), reduction_length=27)


def test_the_cuda_source_stores_half_types():
    # off tensor cores (tests/cuda/test_wmma.py), the accumulator is a
    # float32 temporary that a rounding statement stores
    k = polyc.compile(matmul("half"), config=emulated(gpu_tensor_cores=False))
    text = k.cuda_source
    assert "#include <cuda_fp16.h>" in text and "typedef __half polyc_float16;" in text
    assert "polyc_float16 *__restrict__ t_C" in text
    assert "polyc_f32_to_float16(" in text and "float *__restrict__ t_C_acc" in text


def test_a_hand_mapped_half_matmul_with_shared_and_register_buffers():
    src = matmul("bfloat16")
    s = polyc.Schedule.from_program(polyc.program(src), start="isl")
    s = s.tile([("C_acc", "m"), ("C_acc", "n"), ("C_acc", "k")], [32, 32, 32])
    s = s.map_to_blocks([("C_acc", "m_tile"), ("C_acc", "n_tile")])
    s = s.map_to_threads([("C_acc", "m"), ("C_acc", "n")], sizes=[8, 32])
    s = s.promote_shared("A", ("C_acc", "k_tile")).promote_shared("B", ("C_acc", "k_tile"))
    s = s.promote_registers("C_acc", ("C_acc", "n"))
    k = compile_schedule(s, emulated(emulate_checks=True))
    assert "__shared__ polyc_bfloat16 t_A_shared[32][33]" in k.cuda_source
    dt = DTYPES["bfloat16"]
    rng = np.random.default_rng(5)
    a = rng.standard_normal((45, 70)).astype(dt)
    b = rng.standard_normal((70, 37)).astype(dt)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(dt)
    got = k(a, b)
    assert_close(got, want, reduction_length=70)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("t", list(DTYPES))
def test_half_kernels_compile_with_nvcc(t, arch):
    from polyc.backends.cuda.build import MAX_REGISTERS, build_cubin
    for src in (matmul(t), SOFTMAX.format(t=t)):
        k = polyc.compile(src, config=emulated())
        threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
        built = build_cubin(k.cuda_source, config=k.config, arch=arch, threads=threads)
        for r in built.resources.values():
            assert 0 < r.registers <= MAX_REGISTERS


GUARDED = {
    # the k-tile loop's last iteration for a row tile is peeled (the rounding
    # statement sits there): its copies into shared memory and its reads of
    # them need a barrier between them like every other iteration
    "triangular": ("def g({t}(M,K) A, {t}(K,N) B) -> (C) {{ C(m,n) +=! "
                   "(k <= m ? A(m,k) * B(k,n) : 0.0) where m in 0:M, n in 0:N, k in 0:K }}",
                   lambda a, b: np.tril(a) @ b, lambda m, k: (m, k)),
    "strided": ("def g({t}(M,K2) A, {t}(K,N) B) -> (C) {{ C(m,n) +=! A(m,2*k) * B(k,n) }}",
                lambda a, b: a[:, ::2] @ b, lambda m, k: (m, 2 * k)),
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", list(GUARDED))
@pytest.mark.parametrize("t", ["float", *DTYPES])
def test_promoted_contractions_with_peeled_k_tiles(t, case, mode):
    """Guarded and strided contractions whose operands go to shared memory:
    the emulator's result matches numpy's (float64 reference) and the C
    backend's, within the dtype's tolerance scaled by the reduction length."""
    src, ref, a_shape = GUARDED[case]
    dt = DTYPES.get(t, np.dtype(np.float32))
    gpu = polyc.compile(src.format(t=t), config=emulated(**MODES[mode]))
    cpu = polyc.compile(src.format(t=t))
    rng = np.random.default_rng(1)
    for m, k, n in [(17, 65, 3), (3, 17, 33), (41, 70, 36)]:
        a = rng.standard_normal(a_shape(m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        got = gpu(a, b)
        assert not np.isnan(got.astype(np.float64)).any(), (t, case, m, k, n)
        want = ref(a.astype(np.float64), b.astype(np.float64))
        assert_close(got, want, dtype=dt, reduction_length=k, name=f"{case} {m}x{k}x{n}")
        assert_close(got, cpu(a, b).astype(np.float64), dtype=dt, reduction_length=k)
