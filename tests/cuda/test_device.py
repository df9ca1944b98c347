"""On a GPU (``gpu`` marker: skipped without pycuda and a device): the TC
examples and the 30 PolyBench kernels run on the device, against the C
backend's results on the same inputs (same tolerances as the CPU tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc import reference
from polyc.config import Config
from polyc.frontend import tc
from polyc.testing import assert_close, random_inputs, reduction_length

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def device() -> Config:
    return Config.from_env(target="cuda", cuda_arch="sm_90")


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.tc")))
def test_tc_examples_on_the_device(name):
    text = (EXAMPLES / name).read_text()
    k = polyc.compile(text, config=device(), filename=name)
    header = tc.sizes_header(text)
    for sizes in ({n: max(1, v // 8) for n, v in header.items()}, {n: 1 for n in header}):
        program = k.program
        inputs = random_inputs(program, sizes, seed=0)
        got = k(*[inputs[n] if n in inputs else sizes[n] for n in program.signature])
        got = got if isinstance(got, tuple) else (got,)
        want = reference.evaluate(program, inputs, sizes)
        # nvcc contracts a * b + c into one FMA, which rounds a * b once less
        # than numpy: where a result cancels (group_norm's E[x^2] - E[x]^2 is 0
        # for one element) the error is on the scale of the products, not of
        # the result
        scale = max([1.0] + [float(np.max(np.abs(x))) ** 2 for x in inputs.values()
                             if isinstance(x, np.ndarray) and x.size and x.dtype.kind == "f"])
        for t, g in zip(program.outputs, got):
            assert_close(g, want[t.name], dtype=t.dtype, magnitude=scale,
                         reduction_length=reduction_length(program, sizes), name=t.name)


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_polybench_on_the_device(name):
    bench = BENCHMARKS[name]
    sizes = bench.sizes["MINI"]
    args = bench.init(sizes, np.float64)
    got = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    want = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    bench.kernel.with_config(device())(*got)
    bench.kernel.with_config(Config.from_env())(*want)
    # the comparable part of each output (gramschmidt's input is rank
    # deficient: columns past the rank are rounding noise, NaN or not)
    outs = zip(bench.comparable(sizes, [got[i] for i in bench.outputs]),
               bench.comparable(sizes, [want[i] for i in bench.outputs]))
    for g, w in outs:
        scale = max(float(np.max(np.abs(w))), 1e-300)
        assert float(np.max(np.abs(g - w))) / scale <= 1e-9, name


def test_reduction_on_the_device():
    k = polyc.compile("def s(float(N) A) -> (s) { s +=! A(i) }", config=device())
    a = np.random.default_rng(0).random(3_000_000).astype(np.float32)
    np.testing.assert_allclose(k(a), a.sum(dtype=np.float64), rtol=1e-5)
    assert k(a) == k(a)          # deterministic


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_tensor_core_gemm_on_the_device(t):
    """The WMMA device function (backends/cuda/wmma.py), which the emulator
    replaces by its C twin: full and partial tiles, batched and transposed
    operands, against the C backend."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = np.dtype(np.float16) if t == "float16" else np.dtype(ml_dtypes.bfloat16)
    src = (f"def bmm({t}(B,M,K) A, {t}(B,N,K) W) -> (C) "
           "{ C(b,m,n) +=! 0.5 * A(b,m,k) * W(b,n,k) }")
    gpu, cpu = polyc.compile(src, config=device()), polyc.compile(src)
    assert gpu.kernels[0].intrinsic, gpu.explain()
    rng = np.random.default_rng(0)
    for b, m, n, k in [(2, 256, 384, 512), (3, 130, 257, 70), (1, 1, 1, 1)]:
        a = rng.standard_normal((b, m, k)).astype(dt)
        w = rng.standard_normal((b, n, k)).astype(dt)
        assert_close(gpu(a, w), cpu(a, w), reduction_length=k, name="C")


def test_torch_cuda_tensors_in_and_out():
    """torch CUDA tensors go in and come out as torch CUDA tensors on the
    same device, without copies (polyc.gpu_arrays); a row kernel's softmax
    against torch's."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    src = ("def softmax(float(N, C) I) -> (O, mx, s) {\n  mx(n) max=! I(n, c)\n"
           "  s(n) +=! exp(I(n, c) - mx(n))\n  O(n, c) = exp(I(n, c) - mx(n)) / s(n)\n}")
    k = polyc.compile(src, config=device())
    x = torch.randn(129, 1000, device="cuda")
    o, mx, s = k(x)
    assert o.is_cuda and o.device == x.device and o.shape == x.shape
    torch.testing.assert_close(o, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    out = torch.empty_like(x), torch.empty(129, device="cuda"), torch.empty(129, device="cuda")
    assert k(x, out=out)[0].data_ptr() == out[0].data_ptr()


def test_torch_calls_replay_their_plan_asynchronously():
    """A second call with the same shapes replays the first call's launches
    (gpu_arrays.CallPlan) on new outputs; calls queue without waiting, so a
    chain of calls and torch operators on the default stream stays in
    order; other shapes get their own plan; a side stream is waited for."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    k = polyc.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                      config=device())
    a, b = torch.randn(300, 129, device="cuda"), torch.randn(129, 77, device="cuda")
    first = k(a, b)
    assert len(k._plans) == 1
    outs = [k(a * i, b) for i in range(1, 6)]          # replayed, queued behind torch's ops
    assert len(k._plans) == 1
    for i, c in enumerate(outs, 1):
        torch.testing.assert_close(c, (a * i) @ b, rtol=1e-4, atol=1e-4)
    assert len({c.data_ptr() for c in outs + [first]}) == 6
    k(a[:17].contiguous(), b)                            # another shape: another plan
    assert len(k._plans) == 2
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a2 = a * 3                                       # written on the side stream
        c = k(a2, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a * 3) @ b, rtol=1e-4, atol=1e-4)
