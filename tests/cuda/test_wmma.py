"""Tensor cores on ``target="cuda"``: contractions of float16/bfloat16
operands into a float32 accumulator become one launch of the tensor-core
GEMM (``backends/cuda/wmma.py``).  The emulator (every mode) against numpy
in float64 and against the C backend, at sizes that are and are not
multiples of the 128 x 128 x 32 tiles (1, primes); batched, transposed and
scaled operands; what stays off tensor cores and why; nvcc builds for
sm_80/sm_90 within the launch limits (``nvcc`` marker); the device itself
(``gpu`` marker).

Tolerances: a float32 output (loop programs) within 1e-5 of the float64
product of the same half inputs, relative to the sum of the magnitudes of
the products; a half output: :func:`polyc.testing.assert_close` for its
type, scaled by the reduction length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.config import Config
from polyc.testing import assert_close, random_inputs

ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
MODES = {"forward": {}, "reverse": {"emulate_reverse": True}, "checks": {"emulate_checks": True}}
SIZES = [(1, 1, 1), (17, 33, 5), (130, 70, 257), (128, 64, 128), (3, 129, 2)]


def matmul(t: str) -> str:
    return f"def mm({t}(M,K) A, {t}(K,N) B) -> (C) {{ C(m,n) +=! A(m,k) * B(k,n) }}"


def emulated(**kw) -> Config:
    return Config.from_env(target="cuda", emulate=True, **kw)


def half(rng, shape, dt):
    return rng.standard_normal(shape).astype(dt)


def f64(x):
    return x.astype(np.float32).astype(np.float64)


def check_f32(got, a, b, subscripts):
    """``got`` (float32) against the float64 contraction of ``a``, ``b``."""
    want = np.einsum(subscripts, f64(a), f64(b))
    scale = np.einsum(subscripts, np.abs(f64(a)), np.abs(f64(b))) + 1e-30
    assert got.dtype == np.float32 and got.shape == want.shape
    err = np.abs(got - want) / scale
    assert float(err.max()) <= 1e-5, (float(err.max()), np.unravel_index(err.argmax(), err.shape))


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("t", list(DTYPES))
def test_matmul_on_tensor_cores_matches_numpy_and_the_c_backend(t, mode):
    dt = DTYPES[t]
    rng = np.random.default_rng(0)
    k = polyc.compile(matmul(t), config=emulated(**MODES[mode]))
    assert k.kernels[0].intrinsic == "S0"
    sfx = "f16" if t == "float16" else "bf16"
    # one launch: the rounding store of the float32 accumulator is folded
    # into the call, which stores half results into C (no C_acc at all)
    assert f"polyc_wmma_{sfx}_{sfx}(" in k.cuda_source and "wmma::mma_sync" in k.cuda_source
    assert len(k.kernels) == 1 and "t_C_acc" not in k.cuda_source
    assert "S0_round folded: the store rounds into C" in k.kernels[0].describe()
    c_backend = polyc.compile(matmul(t))
    for m, kk, n in SIZES:
        a, b = half(rng, (m, kk), dt), half(rng, (kk, n), dt)
        got = k(a, b)
        assert got.dtype == dt
        assert_close(got, (f64(a) @ f64(b)).astype(dt), reduction_length=kk, name="C")
        assert_close(got, c_backend(a, b), reduction_length=kk, name="C")


def test_the_float32_accumulator_of_a_loop_program_is_exact_to_float32():
    """A float32 C written by a loop program: no half rounding hides the
    accumulation's error; ``C = 0`` folds as beta 0 (C is not read: a NaN
    in the output's old contents does not survive)."""
    @polyc.kernel(config=emulated(emulate_checks=True))
    def lin(A, W, C):
        M, K = A.shape
        N = W.shape[1]
        for i in range(M):
            for j in range(N):
                C[i, j] = 0.0
                for k in range(K):
                    C[i, j] += A[i, k] * W[k, j]
    rng = np.random.default_rng(1)
    for m, kk, n in [(37, 50, 29), (1, 300, 1), (200, 7, 131)]:
        a, w = half(rng, (m, kk), np.float16), half(rng, (kk, n), np.float16)
        c = np.full((m, n), np.nan, np.float32)
        lin(a, w, c)
        check_f32(c, a, w, "ik,kj->ij")
    k = lin.specialize(a, w, c)
    assert k.kernels[0].intrinsic
    assert "tensor cores" in k.explain()


@pytest.mark.parametrize("mode", list(MODES))
def test_batched_operands_run_their_batch_loop_on_blocks_z(mode):
    """``S(b, m, n) = 0.125 * Q(b, m, k) * Kt(b, n, k)``: the batch on
    ``blockIdx.z``, a transposed operand through its strides, alpha."""
    src = ("def qk(float16(B,M,K) Q, float16(B,N,K) Kt) -> (S) "
           "{ S(b,m,n) +=! 0.125 * Q(b,m,k) * Kt(b,n,k) }")
    k = polyc.compile(src, config=emulated(**MODES[mode]))
    tc = k.kernels[0]
    assert tc.intrinsic and tc.block_axes == ("z",)
    assert "blockIdx.z" in k.cuda_source
    assert "alpha = 0.125" in tc.describe() and "blockIdx.z" in tc.describe()
    rng = np.random.default_rng(2)
    for b, m, n, kk in [(4, 33, 65, 16), (1, 1, 1, 1), (3, 129, 7, 40)]:
        q, kt = half(rng, (b, m, kk), np.float16), half(rng, (b, n, kk), np.float16)
        want = (0.125 * np.einsum("bmk,bnk->bmn", f64(q), f64(kt))).astype(np.float16)
        assert_close(k(q, kt), want, reduction_length=kk, name="S")


def test_a_weight_shared_by_the_batch_is_one_gemm_over_the_merged_rows():
    src = "def f(bfloat16(B,M,K) A, bfloat16(K,N) W) -> (C) { C(b,m,n) +=! A(b,m,k) * W(k,n) }"
    k = polyc.compile(src, config=emulated(emulate_checks=True))
    assert "m=b*m" in k.kernels[0].describe() and k.kernels[0].block_axes == ()
    dt = DTYPES["bfloat16"]
    rng = np.random.default_rng(3)
    a, w = half(rng, (3, 45, 50), dt), half(rng, (50, 70), dt)
    want = np.einsum("bmk,kn->bmn", f64(a), f64(w)).astype(dt)
    assert_close(k(a, w), want, reduction_length=50, name="C")


def test_einsum_and_jit_reach_tensor_cores():
    rng = np.random.default_rng(4)
    a, b = half(rng, (2, 5, 7), np.float16), half(rng, (2, 7, 9), np.float16)
    got = polyc.einsum("bij,bjk->bik", a, b, target="cuda", config=emulated())
    want = np.einsum("bij,bjk->bik", f64(a), f64(b)).astype(np.float16)
    assert_close(got, want, reduction_length=7)


def test_turned_off_the_same_program_maps_to_plain_threads():
    k = polyc.compile(matmul("float16"), config=emulated(gpu_tensor_cores=False))
    assert "wmma" not in k.cuda_source and not any(x.intrinsic for x in k.kernels)
    rng = np.random.default_rng(5)
    a, b = half(rng, (20, 30), np.float16), half(rng, (30, 10), np.float16)
    on = polyc.compile(matmul("float16"), config=emulated())
    assert_close(k(a, b), on(a, b), reduction_length=30)


def test_what_stays_off_tensor_cores_says_why():
    # bfloat16 WMMA needs sm_80
    k = polyc.compile(matmul("bfloat16"), config=emulated(cuda_arch="sm_75"))
    assert "wmma" not in k.cuda_source
    assert "bfloat16 WMMA needs sm_80 or newer" in k.explain()
    # float16 runs on sm_75's tensor cores
    k = polyc.compile(matmul("float16"), config=emulated(cuda_arch="sm_75"))
    assert k.kernels[0].intrinsic
    # float32 operands: the SIMT GEMM, not tensor cores; switched off, loops
    k = polyc.compile(matmul("float"), config=emulated())
    assert k.kernels[0].intrinsic and "polyc_wmma_f32" in k.cuda_source
    assert "onto the SIMT GEMM" in k.explain() and "WMMA" not in k.explain()
    k = polyc.compile(matmul("float"), config=emulated(gpu_simt_gemm=False))
    assert "wmma" not in k.cuda_source and not k.kernels[0].intrinsic
    # float64 operands: the SIMT GEMM in double
    k = polyc.compile(matmul("double"), config=emulated())
    assert "polyc_wmma_f64" in k.cuda_source and "SIMT GEMM (float64 FMA" in k.explain()
    # operands of two dtypes: neither GEMM, and explain says why
    k = polyc.compile("def mm(float16(M,K) A, float(K,N) B) -> (C) "
                      "{ C(m,n) +=! A(m,k) * B(k,n) }", config=emulated())
    assert "wmma" not in k.cuda_source and "the GPU GEMMs take two" in k.explain()



@pytest.mark.parametrize("mode", list(MODES))
def test_a_half_convolution_is_an_implicit_gemm_on_tensor_cores(mode):
    """``O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw)``: k = c*kh*kw and
    n = h*w address the image through their digits' offsets (no im2col)."""
    conv = ("def conv(float16(N,C,H,W) I, float16(F,C,3,3) Wt) -> (O) "
            "{ O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw) where h in 0:H-2, w in 0:W-2 }")
    k = polyc.compile(conv, config=emulated(**MODES[mode]))
    assert k.kernels[0].intrinsic and "implicit GEMM" in k.kernels[0].describe()
    rng = np.random.default_rng(6)
    for n, c, h, w, f in [(2, 5, 9, 11, 7), (1, 1, 3, 3, 1), (2, 17, 12, 5, 3)]:
        i, wt = half(rng, (n, c, h, w), np.float16), half(rng, (f, c, 3, 3), np.float16)
        want = sum(np.einsum("nchw,fc->nfhw", f64(i[:, :, a:a + h - 2, b:b + w - 2]),
                             f64(wt[:, :, a, b])) for a in range(3) for b in range(3))
        assert_close(k(i, wt), want.astype(np.float16), reduction_length=9 * c)


def test_the_explanation_and_json_report_the_tensor_core_launch():
    k = polyc.compile(matmul("float16"), config=emulated())
    text = k.explain()
    assert "tensorized onto tensor cores (WMMA m16n16k16, float16 operands" in text
    assert "128 x 128 tiles" in text and "[(N + 127) / 128] x [(M + 127) / 128] x [1]" in text
    js = k.explain(json=True)
    first = js["gpu"]["kernels"][0]
    assert first["block"] == ["256"] and "tensor cores" in first["text"]


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("t", list(DTYPES))
def test_tensor_core_kernels_compile_with_nvcc(t, arch):
    from polyc.backends.cuda.build import MAX_REGISTERS, REGISTERS_PER_BLOCK, build_cubin
    for src in (matmul(t), f"def f({t}(B,M,K) A, {t}(B,K,N) W) -> (C) "
                           "{ C(b,m,n) +=! A(b,m,k) * W(b,k,n) }"):
        k = polyc.compile(src, config=emulated(cuda_arch=arch))
        threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
        built = build_cubin(k.cuda_source, config=k.config, arch=arch, threads=threads)
        tc = built.resources["polyc_k0"]
        assert 0 < tc.registers <= MAX_REGISTERS
        assert tc.registers * threads["polyc_k0"] <= REGISTERS_PER_BLOCK
        assert tc.spill_stores == 0 and 0 < tc.shared <= 48 * 1024


@pytest.mark.nvcc
def test_float16_tensor_cores_compile_for_sm_75():
    from polyc.backends.cuda.build import build_cubin
    k = polyc.compile(matmul("float16"), config=emulated(cuda_arch="sm_75"))
    threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
    assert build_cubin(k.cuda_source, config=k.config, arch="sm_75",
                       threads=threads).cubin[:4] == b"\x7fELF"


def test_the_device_path_launches_the_tensor_core_grid(monkeypatch):
    """pycuda against a fake driver: the tensor-core launch takes one block
    of 256 threads per 128 x 128 tile and one per batch value on z;
    ``time`` runs the launches between two CUDA events, arguments copied
    once and every buffer freed."""
    from tests.cuda.test_mapping import fake_pycuda
    fake = fake_pycuda(monkeypatch)
    src = ("def qk(float16(B,M,K) Q, float16(B,N,K) Kt) -> (S) "
           "{ S(b,m,n) +=! Q(b,m,k) * Kt(b,n,k) }")
    k = polyc.compile(src, target="cuda")
    q, kt = np.ones((3, 300, 64), np.float16), np.ones((3, 129, 64), np.float16)
    k(q, kt)
    name, args, grid, block = fake.launches[0]
    assert name == "polyc_k0" and grid == (2, 3, 3) and block == (256, 1, 1)
    assert [int(a) for a in args[:3]] == [3, 300, 64]
    fake.launches.clear()
    fake.freed = 0
    assert k.time(q, kt, repeat=3) == pytest.approx(2.0 * len(k.kernels) / 1e3)
    # Q, Kt and S: the float32 accumulator the call took over is neither
    # passed nor allocated
    assert len(fake.launches) == 4 * len(k.kernels) and fake.freed == 3


def test_a_producer_and_a_consumer_fused_around_the_call_are_distributed():
    """isl fuses ``X = 2 A``, the call and the rounding store in the batch
    loop; the band is distributed (the call after its producer, before its
    consumers), each call one launch with its batch on ``blockIdx.z``."""
    src = """def f(float16(B,M,K) A, float16(B,K,N) W) -> (X, C, D) {
      X(b,m,k) = A(b,m,k) * 2.0
      C(b,m,n) +=! X(b,m,k) * W(b,k,n)
      D(b,m,n) = C(b,m,n) + 1.0
    }"""
    k = polyc.compile(src, config=emulated(emulate_checks=True))
    tc = [x for x in k.kernels if x.intrinsic]
    assert len(tc) == 1 and tc[0].block_axes == ("z",) and not tc[0].host_depth
    rng = np.random.default_rng(7)
    a, w = half(rng, (3, 20, 30), np.float16), half(rng, (3, 30, 17), np.float16)
    x, c, d = k(a, w)
    assert_close(x, (f64(a) * 2).astype(np.float16))
    assert_close(c, np.einsum("bmk,bkn->bmn", f64(x), f64(w)).astype(np.float16),
                 reduction_length=30)
    assert_close(d, (f64(c) + 1).astype(np.float16))


def test_the_proof_refuses_calls_on_different_blocks_joined_by_a_dependence():
    """Injected: a flow dependence between the calls of consecutive batch
    values, which run on different ``blockIdx.z``; the verifier names it
    with a witness pair."""
    from dataclasses import replace

    import islpy as isl

    from polyc import gpu_pipeline
    from polyc.errors import IllegalScheduleError
    from polyc.schedule import gpu_verify
    src = ("def qk(float16(B,M,K) Q, float16(B,N,K) Kt) -> (S) "
           "{ S(b,m,n) +=! Q(b,m,k) * Kt(b,n,k) }")
    low = gpu_pipeline.lower_gpu(polyc.program(src), emulated())
    extra = isl.UnionMap("[B, M, K, N] -> { S0[b] -> S0[b + 1] : 0 <= b < B - 1 }")
    deps = replace(low.deps, flow=low.deps.flow.union(extra))
    with pytest.raises(IllegalScheduleError, match="flow dependence") as err:
        gpu_verify.verify(low.mapped, list(low.kernels), deps, low.program)
    assert err.value.witness is not None


@st.composite
def contractions(draw):
    """A two-operand einsum in half precision: batch, m, n and k subscripts
    (0-2, 1-2, 1-2, 1-2 of them), each operand's and the output's
    subscripts in a random order, extents 1-9."""
    letters = iter("abcdefghij")
    roles = {r: [next(letters) for _ in range(draw(st.integers(lo, 2)))]
             for r, lo in (("b", 0), ("m", 1), ("n", 1), ("k", 1))}

    def order(subs):
        return "".join(draw(st.permutations(subs)))
    a = order(roles["b"] + roles["m"] + roles["k"])
    b = order(roles["b"] + roles["k"] + roles["n"])
    c = order(roles["b"] + roles["m"] + roles["n"])
    sizes = {x: draw(st.integers(1, 9)) for g in roles.values() for x in g}
    dt = draw(st.sampled_from(list(DTYPES)))
    return f"{a},{b}->{c}", sizes, dt


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(contractions())
def test_random_half_contractions_match_numpy(case):
    """Whatever the subscripts' order, the emulated CUDA einsum (on tensor
    cores wherever the matcher takes it) matches numpy in float64."""
    subscripts, sizes, t = case
    dt = DTYPES[t]
    rng = np.random.default_rng(len(subscripts))
    ins = subscripts.split("->")[0].split(",")
    a, b = (half(rng, tuple(sizes[x] for x in s), dt) for s in ins)
    got = polyc.einsum(subscripts, a, b, target="cuda", config=emulated(emulate_checks=True))
    want = np.einsum(subscripts, f64(a), f64(b)).astype(dt)
    out = subscripts.split("->")[1]
    red = int(np.prod([sizes[x] for x in ins[0] if x in ins[1] and x not in out]))
    assert_close(got, want, reduction_length=max(red, 1), name=subscripts)


def test_the_tensor_core_example_runs():
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "examples" / "tensor_cores.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("tensor cores: True") == 3


# -- the float32 SIMT GEMM (same device-function file, launch and matcher) ----

@pytest.mark.parametrize("mode", list(MODES))
def test_float32_contractions_run_on_the_simt_gemm(mode):
    """A float32 matmul, a batched one with transposed operands and alpha,
    and a convolution as an implicit GEMM, each one launch of
    ``polyc_wmma_f32``, against numpy in float64 at sizes that are and are
    not multiples of the 128 x 128 x 32 tiles."""
    rng = np.random.default_rng(11)
    k = polyc.compile(matmul("float"), config=emulated(**MODES[mode]))
    assert len(k.kernels) == 1 and "SIMT GEMM" in k.kernels[0].describe()
    # (256, 256, 64): full panels of both operands, copied 16 bytes at a time
    for m, n, kk in SIZES + [(256, 256, 64)]:
        a = rng.standard_normal((m, kk)).astype(np.float32)
        b = rng.standard_normal((kk, n)).astype(np.float32)
        check_f32(k(a, b), a, b, "mk,kn->mn")
    bmm = polyc.compile("def f(float(B,M,K) A, float(B,N,K) W) -> (C) "
                        "{ C(b,m,n) +=! 0.5 * A(b,m,k) * W(b,n,k) }",
                        config=emulated(**MODES[mode]))
    assert bmm.kernels[0].intrinsic
    a = rng.standard_normal((3, 130, 40)).astype(np.float32)
    w = rng.standard_normal((3, 9, 40)).astype(np.float32)
    check_f32(bmm(a, w) * 2, a, w, "bmk,bnk->bmn")
    conv = polyc.compile("def conv(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) "
                         "{ O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw) "
                         "where h in 0:H-2, w in 0:W-2 }", config=emulated(**MODES[mode]))
    assert conv.kernels[0].intrinsic and "implicit GEMM" in conv.kernels[0].describe()
    i = rng.standard_normal((2, 5, 9, 11)).astype(np.float32)
    wt = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    want = sum(np.einsum("nchw,fc->nfhw", f64(i[:, :, p:p + 7, q:q + 9]), f64(wt[:, :, p, q]))
               for p in range(3) for q in range(3))
    scale = sum(np.einsum("nchw,fc->nfhw", np.abs(f64(i[:, :, p:p + 7, q:q + 9])),
                          np.abs(f64(wt[:, :, p, q]))) for p in range(3) for q in range(3))
    assert float((np.abs(conv(i, wt) - want) / scale).max()) <= 1e-5


def test_a_call_the_mapping_cannot_launch_is_lowered_as_loops():
    """kronecker's second and third contractions match the GEMM, but their
    loops carry dependences around one-thread kernels: a call there would
    wait at its barriers for 255 threads that do not exist.  They are
    lowered as loops instead, and explain says why."""
    text = (Path(__file__).resolve().parents[2] / "examples" / "kronecker.tc").read_text()
    k = polyc.compile(text, config=emulated(emulate_checks=True))
    calls = [m for m in k.kernels if m.intrinsic]
    assert len(calls) == 1 and all(not m.intrinsic for m in k.kernels if m not in calls)
    assert "could not give the call a launch of its own" in k.explain()
    sizes = {"D0": 3, "N0": 4, "D1": 5, "N1": 2, "D2": 6, "N2": 7, "M": 3}
    from polyc import reference
    inputs = random_inputs(k.program, sizes, seed=2)
    got = k(*[inputs[n] if n in inputs else sizes[n] for n in k.program.signature])
    want = reference.evaluate(k.program, inputs, sizes)
    np.testing.assert_allclose(got[-1], want["Y"], rtol=1e-4)


@pytest.mark.parametrize("mode", list(MODES))
def test_float64_contractions_run_on_the_simt_gemm(mode):
    """float64 operands into a float64 C take the SIMT GEMM too (panels of
    16 in k): a matmul at sizes that are and are not multiples of the
    tiles (64 x 64 and 128 x 128), a batched one with transposed operands
    and alpha, and a PolyBench gemm (C = alpha A B + beta C), against numpy
    at float64's tolerance."""
    rng = np.random.default_rng(12)
    k = polyc.compile(matmul("double"), config=emulated(**MODES[mode]))
    assert len(k.kernels) == 1 and "SIMT GEMM (float64 FMA" in k.kernels[0].describe()
    for m, n, kk in SIZES + [(256, 256, 64), (300, 270, 33)]:
        a, b = rng.standard_normal((m, kk)), rng.standard_normal((kk, n))
        got = k(a, b)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12 * kk)
    bmm = polyc.compile("def f(double(B,M,K) A, double(B,N,K) W) -> (C) "
                        "{ C(b,m,n) +=! 0.5 * A(b,m,k) * W(b,n,k) }",
                        config=emulated(**MODES[mode]))
    assert bmm.kernels[0].intrinsic
    a, w = rng.standard_normal((3, 130, 40)), rng.standard_normal((3, 9, 40))
    np.testing.assert_allclose(bmm(a, w), 0.5 * a @ w.transpose(0, 2, 1), rtol=1e-12,
                               atol=1e-12 * 40)
    gemm = BENCHMARKS["gemm"]
    args = gemm.init({"NI": 70, "NJ": 33, "NK": 129}, np.float64)
    want = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    gemm.kernel.with_config(emulated(**MODES[mode]))(*args)
    gemm.kernel.with_config(Config.from_env())(*want)
    np.testing.assert_allclose(args[2], want[2], rtol=1e-12, atol=1e-10)


@pytest.mark.nvcc
@pytest.mark.parametrize("t", ["float", "double"])
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_the_simt_gemm_compiles_without_spills(arch, t):
    from polyc.backends.cuda.build import REGISTERS_PER_BLOCK, build_cubin
    k = polyc.compile(matmul(t), config=emulated(cuda_arch=arch))
    threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
    built = build_cubin(k.cuda_source, config=k.config, arch=arch, threads=threads)
    r = built.resources["polyc_k0"]
    assert r.registers * threads["polyc_k0"] <= REGISTERS_PER_BLOCK
    assert r.spill_stores == 0 and r.stack == 0 and 0 < r.shared <= 48 * 1024


def test_the_proof_refuses_a_gemm_call_outside_its_own_launch():
    """Injected: the call's kernel loses its tensor-core launch (as if the
    mapping had put the call in an ordinary kernel, where one thread or a
    block of another shape would make it)."""
    from dataclasses import replace

    from polyc.errors import IllegalScheduleError
    from polyc.gpu_pipeline import lower_gpu
    from polyc.schedule import gpu_verify
    k = polyc.compile(matmul("float16"), config=emulated())
    low = lower_gpu(k.program, k.config)
    kernels = [replace(m, intrinsic="") for m in low.kernels]
    deps = low.deps if not callable(low.deps) else low.deps()
    with pytest.raises(IllegalScheduleError, match="without a launch of its own"):
        gpu_verify.verify(low.mapped, kernels, deps, low.program)


@pytest.mark.parametrize("batch, grid", [(3, (2, 2, 3)), (264, (1, 1, 264))])
def test_the_simt_gemm_takes_64_tiles_when_128_ones_are_few(batch, grid):
    """A launch with fewer than SIMT_FEW_TILES tiles of 128 x 128 (its batch
    counted) runs on 64 x 64 tiles: the host's grid counts them and the
    device picks the same tile by the same test; at the threshold the
    128 x 128 tiles, one block per batch entry.  Both against numpy."""
    from polyc.binder import param_function
    k = polyc.compile("def f(float(B,M,K) A, float(B,K,N) W) -> (C) "
                      "{ C(b,m,n) +=! A(b,m,k) * W(b,k,n) }", config=emulated())
    (spec,) = k.cuda.launches.values()
    sizes = {"B": batch, "M": 70, "K": 9, "N": 66}
    got = tuple(param_function(g, k.program.params)(*[sizes[p] for p in k.program.params])
                for g in spec.grid)
    assert got == grid
    rng = np.random.default_rng(5)
    a = rng.standard_normal((batch, 70, 9)).astype(np.float32)
    w = rng.standard_normal((batch, 9, 66)).astype(np.float32)
    check_f32(k(a, w), a, w, "bmk,bkn->bmn")
