"""polyc against the libraries users would pick instead, and against the CPU's limits.

    python -m benchmarks.tensor                  # every workload, markdown table
    python -m benchmarks.tensor --only gemm1024_f32 softmax
    python -m benchmarks.tensor --json           # one JSON object
    python -m benchmarks.tensor --tiny           # tiny sizes (smoke test, seconds)
    python -m benchmarks.tensor --background-load   # also with one core half busy

For each workload (a Tensor Comprehensions definition at the sizes of
issue 5: square GEMM, TMM, TBMM and batched matmul, the C3/MLP layer,
convolutions, tensordot, Kronecker, softmax, layernorm, group norm), in one
process, on the same seeded inputs:

* **polyc**: ``polyc.compile(tc)`` on the machine's cores
  (``POLYC_NUM_THREADS``; a ``(1 thread)`` row pins polyc to one core);
* **numpy**: the best (lowest median) of the numpy formulations listed for
  the workload (``@``/``np.matmul`` on BLAS, ``np.einsum(optimize=True)``,
  im2col + GEMM for convolutions, plain numpy for normalisations);
* **torch eager** and **torch.compile** of the same formulation, when
  ``torch`` is importable (``pip install torch`` gives a CPU build).

Each time is the median after one warm-up call (``benchmarks.examples.measure``).
``polyc ms`` is a call that allocates its outputs, as the numpy and torch
formulations do, and the ratios compare it; ``polyc out= ms`` is the same
call into preallocated outputs (``kernel(*args, out=...)``), the kernel's
own time, from which the rate and fraction of peak are computed (a fresh
16 MiB output costs about a millisecond of page faults on this machine).
Compute-bound workloads are reported in GFLOP/s and as a fraction of the
measured FMA peak (``benchmarks/peak.c``, all cores, or one core for the
single-thread row); memory-bound ones in GB/s (every input read once, every
output written once: TC makes every written tensor an output) and as a
fraction of the measured STREAM triad bandwidth.  ``cold s`` is polyc's
compile in an empty kernel cache that holds the intrinsics library (built
once per machine at the start, its time printed above the table), ``call
us`` a warm call at every size 1, and ``extra MiB`` the memory polyc
allocated in a call beyond its outputs: the C heap the kernel's first
call keeps (glibc ``mallinfo2``: the intrinsic's packing block, kept for
the next call) plus the Python-side peak of a call
(``tracemalloc``: temporaries); stack buffers are not counted.  polyc's
outputs are checked against numpy's before anything is timed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import shutil
import sys
import tempfile
import tracemalloc
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import polyc
from polyc import cache, testing
from polyc.config import Config

from .examples import _wall, machine, measure

Args = list[np.ndarray]

GEMM = "def gemm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
TMM = "def tmm(float(M, K) A, float(N, K) B) -> (C) { C(m, n) +=! A(m, k) * B(n, k) }"
TBMM = ("def tbmm(float(B, N, K) X, float(B, M, K) Y) -> (Z) "
        "{ Z(b, n, m) +=! X(b, n, kk) * Y(b, m, kk) }")
BMM = ("def bmm(float(B, N, K) X, float(B, K, M) Y) -> (Z) "
       "{ Z(b, n, m) +=! X(b, n, kk) * Y(b, kk, m) }")
C3 = """def c3(float(B, K) I, float(N, K) W, float(N) b) -> (O) {
    O(i, n) +=! I(i, k) * W(n, k)
    O(i, n) = fmax(O(i, n) + b(n), 0.0)
}"""
CONV = """def conv(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) {
    O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, kh, kw)
}"""
GCONV = """def gconv(float(N, G, C, H, W) I, float(G, F, C, KH, KW) W1) -> (O) {
    O(n, g, f, h, w) +=! I(n, g, c, h + kh, w + kw) * W1(g, f, c, kh, kw)
}"""
TENSORDOT = """def tensordot(float(N, C1, C2, H, W) I0, float(N, C2, C3, H, W) I1) -> (O) {
    O(n, c1, c3, h, w) +=! I0(n, c1, r_c2, h, w) * I1(n, r_c2, c3, h, w)
}"""
KRONECKER = """def kronecker(float(D0, N0) W0, float(D1, N1) W1, float(D2, N2) W2,
              float(M, N0, N1, N2) X) -> (XW2, XW2W1, Y) {
    XW2(m, n0, n1, d2) +=! X(m, n0, n1, r_n2) * W2(d2, r_n2)
    XW2W1(m, n0, d1, d2) +=! XW2(m, n0, r_n1, d2) * W1(d1, r_n1)
    Y(m, d0, d1, d2) +=! XW2W1(m, r_n0, d1, d2) * W0(d0, r_n0)
}"""
SOFTMAX = """def softmax(float(N, C) I) -> (O, maxVal, expDist, expSum) {
    maxVal(n) max=! I(n, c)
    expDist(n, c) = exp(I(n, c) - maxVal(n))
    expSum(n) +=! expDist(n, c)
    O(n, c) = expDist(n, c) / expSum(n)
}"""
LAYERNORM = """def layernorm(float(N, C) I, float(C) gamma, float(C) beta) -> (mean, var, O) {
    mean(n) +=! I(n, c)
    var(n) +=! I(n, c) * I(n, c)
    mean(n) = mean(n) / C
    var(n) = var(n) / C - mean(n) * mean(n)
    O(n, c) = (I(n, c) - mean(n)) * rsqrt(var(n) + 1e-5) * gamma(c) + beta(c)
}"""
GROUPNORM = """def group_norm(float(N, G, D, H, W) I, float(G, D) gamma, float(G, D) beta)
    -> (mean, var, O)
{
    mean(n, g) +=! I(n, g, r_d, r_h, r_w)
    var(n, g) +=! I(n, g, r_d, r_h, r_w) * I(n, g, r_d, r_h, r_w)
    mean(n, g) = mean(n, g) / (D * H * W)
    var(n, g) = var(n, g) / (D * H * W) - mean(n, g) * mean(n, g)
    O(n, g, d, h, w) = gamma(g, d) * (I(n, g, d, h, w) - mean(n, g))
        * rsqrt(var(n, g) + 1e-5) + beta(g, d)
}"""


# ------------------------------------------------------------ formulations

def _im2col_conv(I, W):
    """Valid 2-D convolution as im2col + one GEMM (the numpy/BLAS way)."""
    k, c, kh, kw = W.shape
    win = np.lib.stride_tricks.sliding_window_view(I, (kh, kw), axis=(2, 3))
    n, _, h, w = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * kh * kw)
    return (cols @ W.reshape(k, -1).T).reshape(n, h, w, k).transpose(0, 3, 1, 2)


def _gconv(I, W1):
    kh, kw = W1.shape[-2:]
    win = np.lib.stride_tricks.sliding_window_view(I, (kh, kw), axis=(3, 4))
    return np.einsum("ngchwij,gfcij->ngfhw", win, W1, optimize=True)


def _kron(W0, W1, W2, X):
    xw2 = np.einsum("mabr,dr->mabd", X, W2, optimize=True)
    xw2w1 = np.einsum("marb,dr->madb", xw2, W1, optimize=True)
    return np.einsum("mrab,dr->mdab", xw2w1, W0, optimize=True)


def _softmax(I):
    e = np.exp(I - I.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm(I, gamma, beta):
    mean = I.mean(axis=1, keepdims=True)
    var = (I * I).mean(axis=1, keepdims=True) - mean * mean
    return (I - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _groupnorm(I, gamma, beta):
    mean = I.mean(axis=(2, 3, 4), keepdims=True)
    var = (I * I).mean(axis=(2, 3, 4), keepdims=True) - mean * mean
    return gamma[None, :, :, None, None] * (I - mean) / np.sqrt(var + 1e-5) \
        + beta[None, :, :, None, None]


def _torch_gconv(t, I, W1):
    n, g, c, h, w = I.shape
    f = W1.shape[1]
    out = t.nn.functional.conv2d(I.reshape(n, g * c, h, w),
                                 W1.reshape(g * f, c, *W1.shape[3:]), groups=g)
    return out.reshape(n, g, f, *out.shape[2:])


def _torch_kron(t, W0, W1, W2, X):
    xw2 = t.einsum("mabr,dr->mabd", X, W2)
    return t.einsum("mrab,dr->mdab", t.einsum("marb,dr->madb", xw2, W1), W0)


def _torch_groupnorm(t, I, gamma, beta):
    n, g, d, h, w = I.shape
    out = t.nn.functional.group_norm(I.reshape(n, g * d, h, w), g, gamma.reshape(-1),
                                     beta.reshape(-1), 1e-5)
    return out.reshape(I.shape)


@dataclass(frozen=True)
class Workload:
    """One benchmark: a TC definition at ``sizes``; ``shapes`` gives the
    input shapes in signature order; ``numpy`` the formulations compared
    (best taken), each mapping the inputs to the output at ``output``;
    ``flops`` (compute-bound) or ``None`` (memory-bound: bytes of every
    input and output); ``torch`` the same computation in torch."""
    name: str
    tc: str
    sizes: dict[str, int]
    shapes: Callable[[dict], list[tuple[int, ...]]]
    numpy: dict[str, Callable]
    output: int = 0
    dtype: str = "float32"
    flops: Callable[[dict], float] | None = None
    threads: int | None = None
    tiny: dict[str, int] = field(default_factory=dict)
    torch: Callable | None = None       # (torch module, *tensors) -> output


def _gemm(n: int, dtype: str, threads: int | None = None) -> Workload:
    suffix = "_1thread" if threads == 1 else ""
    return Workload(f"gemm{n}_{dtype[-2:].replace('32', 'f32').replace('64', 'f64')}{suffix}",
                    GEMM, dict(M=n, N=n, K=n), lambda s: [(s["M"], s["K"]), (s["K"], s["N"])],
                    {"A @ B": lambda A, B: A @ B}, dtype=dtype,
                    flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"], threads=threads,
                    tiny=dict(M=7, N=17, K=5), torch=lambda t, A, B: A @ B)


def workloads() -> list[Workload]:
    out = [_gemm(n, dt) for dt in ("float32", "float64") for n in (256, 512, 1024, 2048)]
    out.append(_gemm(1024, "float32", threads=1))
    mm = {"A @ B.T": lambda A, B: A @ B.T,
          "einsum": lambda A, B: np.einsum("mk,nk->mn", A, B, optimize=True)}
    out += [
        Workload("tmm_128x1024x1024", TMM, dict(M=128, N=1024, K=1024),
                 lambda s: [(s["M"], s["K"]), (s["N"], s["K"])], mm,
                 flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"], tiny=dict(M=3, N=9, K=4),
                 torch=lambda t, A, B: A @ B.T),
        Workload("tmm_128x4096x16384", TMM, dict(M=128, N=4096, K=16384),
                 lambda s: [(s["M"], s["K"]), (s["N"], s["K"])], mm,
                 flops=lambda s: 2.0 * s["M"] * s["N"] * s["K"], tiny=dict(M=2, N=3, K=5),
                 torch=lambda t, A, B: A @ B.T),
        # a token through a weight matrix: a matrix-vector product, memory-bound
        # (x @ W with W stored K x N; x @ W.T, torch.nn.Linear's layout, 4 tokens)
        Workload("gemv_1x768x3072", GEMM, dict(M=1, N=3072, K=768),
                 lambda s: [(s["M"], s["K"]), (s["K"], s["N"])], {"A @ B": lambda A, B: A @ B},
                 tiny=dict(M=1, N=17, K=5), torch=lambda t, A, B: A @ B),
        Workload("tmm_4x768x3072", TMM, dict(M=4, N=768, K=3072),
                 lambda s: [(s["M"], s["K"]), (s["N"], s["K"])], mm,
                 tiny=dict(M=2, N=3, K=5), torch=lambda t, A, B: A @ B.T),
        Workload("tbmm_500x26x72x26", TBMM, dict(B=500, N=26, M=72, K=26),
                 lambda s: [(s["B"], s["N"], s["K"]), (s["B"], s["M"], s["K"])],
                 {"matmul": lambda X, Y: np.matmul(X, Y.transpose(0, 2, 1)),
                  "einsum": lambda X, Y: np.einsum("bnk,bmk->bnm", X, Y, optimize=True)},
                 flops=lambda s: 2.0 * s["B"] * s["N"] * s["M"] * s["K"],
                 tiny=dict(B=2, N=3, M=5, K=2),
                 torch=lambda t, X, Y: t.matmul(X, Y.transpose(1, 2))),
        Workload("bmm_500x26x72x26", BMM, dict(B=500, N=26, M=72, K=26),
                 lambda s: [(s["B"], s["N"], s["K"]), (s["B"], s["K"], s["M"])],
                 {"matmul": np.matmul,
                  "einsum": lambda X, Y: np.einsum("bnk,bkm->bnm", X, Y, optimize=True)},
                 flops=lambda s: 2.0 * s["B"] * s["N"] * s["M"] * s["K"],
                 tiny=dict(B=2, N=3, M=5, K=2), torch=lambda t, X, Y: t.matmul(X, Y)),
        Workload("c3_mlp_128x1000x1024", C3, dict(B=128, K=1000, N=1024),
                 lambda s: [(s["B"], s["K"]), (s["N"], s["K"]), (s["N"],)],
                 {"relu(X @ W.T + b)": lambda I, W, b: np.maximum(I @ W.T + b, 0)},
                 flops=lambda s: 2.0 * s["B"] * s["N"] * s["K"], tiny=dict(B=3, K=5, N=7),
                 torch=lambda t, I, W, b: t.relu(t.addmm(b, I, W.T))),
        Workload("conv3x3_resnet_64x56x56", CONV,
                 dict(N=1, C=64, K=64, HP=58, WP=58, KH=3, KW=3),
                 lambda s: [(s["N"], s["C"], s["HP"], s["WP"]),
                            (s["K"], s["C"], s["KH"], s["KW"])],
                 {"im2col + GEMM": _im2col_conv},
                 flops=lambda s: 2.0 * s["N"] * s["K"] * (s["HP"] - 2) * (s["WP"] - 2)
                 * s["C"] * 9, tiny=dict(N=1, C=2, K=3, HP=5, WP=6, KH=3, KW=3),
                 torch=lambda t, I, W: t.nn.functional.conv2d(I, W)),
        Workload("gconv_tc", GCONV, dict(N=32, G=32, C=8, F=8, H=28, W=28, KH=3, KW=3),
                 lambda s: [(s["N"], s["G"], s["C"], s["H"], s["W"]),
                            (s["G"], s["F"], s["C"], s["KH"], s["KW"])],
                 {"einsum over windows": _gconv},
                 flops=lambda s: 2.0 * s["N"] * s["G"] * s["F"] * s["C"] * 9
                 * (s["H"] - 2) * (s["W"] - 2),
                 tiny=dict(N=1, G=2, C=2, F=3, H=5, W=4, KH=3, KW=3), torch=_torch_gconv),
        Workload("tensordot", TENSORDOT, dict(N=32, C1=512, C2=8, C3=2, H=28, W=28),
                 lambda s: [(s["N"], s["C1"], s["C2"], s["H"], s["W"]),
                            (s["N"], s["C2"], s["C3"], s["H"], s["W"])],
                 {"einsum": lambda a, b: np.einsum("nxchw,ncyhw->nxyhw", a, b,
                                                   optimize=True)},
                 flops=lambda s: 2.0 * s["N"] * s["C1"] * s["C2"] * s["C3"] * s["H"] * s["W"],
                 tiny=dict(N=2, C1=3, C2=2, C3=2, H=3, W=2),
                 torch=lambda t, a, b: t.einsum("nxchw,ncyhw->nxyhw", a, b)),
        Workload("kronecker", KRONECKER,
                 dict(M=256, N0=16, N1=16, N2=16, D0=16, D1=16, D2=16),
                 lambda s: [(s["D0"], s["N0"]), (s["D1"], s["N1"]), (s["D2"], s["N2"]),
                            (s["M"], s["N0"], s["N1"], s["N2"])],
                 {"three einsums": _kron}, output=2,
                 flops=lambda s: 2.0 * s["M"] * (s["N0"] * s["N1"] * s["N2"] * s["D2"]
                                                 + s["N0"] * s["N1"] * s["D1"] * s["D2"]
                                                 + s["N0"] * s["D0"] * s["D1"] * s["D2"]),
                 tiny=dict(M=2, N0=2, N1=3, N2=2, D0=3, D1=2, D2=2), torch=_torch_kron),
        Workload("softmax_4096x1024", SOFTMAX, dict(N=4096, C=1024),
                 lambda s: [(s["N"], s["C"])], {"numpy": _softmax}, tiny=dict(N=3, C=5),
                 torch=lambda t, I: t.softmax(I, dim=1)),
        Workload("layernorm_4096x1024", LAYERNORM, dict(N=4096, C=1024),
                 lambda s: [(s["N"], s["C"]), (s["C"],), (s["C"],)], {"numpy": _layernorm},
                 output=2, tiny=dict(N=3, C=5),
                 torch=lambda t, I, g, b: t.nn.functional.layer_norm(I, I.shape[1:], g, b,
                                                                     1e-5)),
        Workload("group_norm_tc", GROUPNORM, dict(N=32, G=32, D=16, H=48, W=48),
                 lambda s: [(s["N"], s["G"], s["D"], s["H"], s["W"]), (s["G"], s["D"]),
                            (s["G"], s["D"])], {"numpy": _groupnorm}, output=2,
                 tiny=dict(N=2, G=2, D=2, H=3, W=2), torch=_torch_groupnorm),
    ]
    return out


# ------------------------------------------------------------------ running

def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


@contextlib.contextmanager
def _peer_threads(threads: int | None, row: dict, torch=None):
    """Numpy's BLAS (``threadpoolctl``, the ``bench`` extra) and torch
    limited to ``threads`` while the peers of a ``threads``-pinned row are
    timed, so that a one-thread row compares one thread with one thread.
    Without threadpoolctl the row notes that numpy ran on every core."""
    if not threads:
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits
            stack.enter_context(threadpool_limits(limits=threads))
        except ImportError:
            row["note"] = ("numpy on every core: pip install threadpoolctl (polyc's bench "
                           "extra) to pin it")
        if torch is not None:
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            stack.callback(torch.set_num_threads, before)
        yield


def _time(fn: Callable[[], object], repeat_time: float) -> float:
    return measure(fn, repeat_time, min_reps=3, max_reps=200).median_s


def prebuild_intrinsics(directory: str) -> float:
    """Build the intrinsics library (built once per machine, compiler and
    flags; see ``backends/c/intrinsics``) into ``directory``; the seconds it
    took.  The workloads' cold compiles then start from an empty kernel cache
    that holds this library, as on a machine where polyc ran once."""
    from polyc.backends.c.build import intrinsics_library
    cache.clear_memory()
    _, seconds = _wall(lambda: intrinsics_library(config=Config.from_env(cache_dir=directory)))
    return seconds


def _seed_cache(library_dir: str | None, tmp: str) -> None:
    """Copy the prebuilt intrinsics library's entry into the empty cache ``tmp``."""
    if library_dir:
        for f in os.listdir(library_dir):
            if f.endswith((".so", ".json", ".c")):
                shutil.copy2(os.path.join(library_dir, f), os.path.join(tmp, f))


def run_workload(w: Workload, repeat_time: float, tiny: bool, peak: dict | None,
                 seed: int = 0, library_dir: str | None = None,
                 torch_compile: bool = True) -> dict:
    """The row of ``w``: times in seconds, ratios, throughput, errors.  The
    cold compile starts from an empty kernel cache (holding only the
    intrinsics library of ``library_dir``, when given).  ``torch_compile``
    False leaves out the ``torch.compile`` peer (Inductor's compile takes
    seconds per workload)."""
    sizes = w.tiny if tiny else w.sizes
    row: dict = {"workload": w.name, "sizes": sizes, "dtype": w.dtype, "error": None}
    tmp = tempfile.mkdtemp(prefix="polyc-tensor-")
    stage = "inputs"
    try:
        rng = np.random.default_rng(seed)
        args = [rng.standard_normal(sh).astype(w.dtype) for sh in w.shapes(sizes)]
        cfg = Config.from_env(cache_dir=tmp)
        if w.threads:
            cfg = cfg.replace(num_threads=w.threads)
        _seed_cache(library_dir, tmp)
        stage = "cold compile"
        cache.clear_memory()
        kernel, row["cold_compile_s"] = _wall(lambda: polyc.compile(w.tc, config=cfg,
                                                                    dtype=w.dtype))
        stage = "check"
        heap0 = _c_heap_bytes()
        outs = kernel(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        c_extra = _c_heap_bytes() - heap0 - sum(o.nbytes for o in outs)
        got = outs[w.output]
        ref = {k: f(*args) for k, f in w.numpy.items()}
        expected = next(iter(ref.values()))
        red = testing.reduction_length(kernel.program, sizes)
        testing.assert_close(got, expected, dtype=w.dtype, reduction_length=red, name=w.name)
        row["max_rel_err"] = float(np.max(np.abs(got - expected))
                                   / max(float(np.max(np.abs(expected))), 1e-30))
        out_bytes = sum(o.nbytes for o in outs)
        del got, ref
        stage = "extra memory"
        tracemalloc.start()
        kernel(*args)
        peak_mem = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        row["extra_mib"] = (max(peak_mem - out_bytes, 0) + max(c_extra, 0)) / 2 ** 20
        stage = "time polyc"
        row["polyc_s"] = _time(lambda: kernel(*args), repeat_time)
        prealloc = tuple(np.empty(o.shape, o.dtype) for o in outs)
        out = prealloc if len(prealloc) > 1 else prealloc[0]
        row["polyc_out_s"] = _time(lambda: kernel(*args, out=out), repeat_time)

        stage = "time numpy"
        with _peer_threads(w.threads, row):
            times = {k: _time(lambda f=f: f(*args), repeat_time) for k, f in w.numpy.items()}
        row["numpy_best"] = min(times, key=times.get)
        row["numpy_s"] = times[row["numpy_best"]]
        torch = _torch()
        if torch is not None:
            stage = "time torch"
            targs = [torch.from_numpy(a) for a in args]

            def fn(*ts):
                return w.torch(torch, *ts)
            with torch.no_grad(), _peer_threads(w.threads, row, torch):
                np.testing.assert_allclose(fn(*targs).numpy(), expected, rtol=1e-2,
                                           atol=1e-2 * float(np.max(np.abs(expected))))
                row["torch_s"] = _time(lambda: fn(*targs), repeat_time)
                if torch_compile:
                    compiled = torch.compile(fn)
                    row["torch_compile_s"] = _time(lambda: compiled(*targs), repeat_time)
        stage = "call overhead"
        small = [np.ones([1] * len(sh), w.dtype) for sh in w.shapes(sizes)]
        if _accepts(kernel, small):
            row["call_overhead_s"] = measure(lambda: kernel(*small), repeat_time,
                                             max_reps=100_000).median_s
    except Exception as e:  # noqa: BLE001 (reported in the row)
        row["error"] = {"stage": stage, "type": type(e).__name__, "message": str(e)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _derive(row, w, sizes, peak)
    return row


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _c_heap_bytes() -> int:
    """Bytes in use on the C heap (glibc ``mallinfo2``: ``uordblks`` plus
    ``hblkhd``, the mmap-ed blocks); 0 where glibc is not the allocator."""
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return 0
    f.restype = _MallInfo2
    m = f()
    return int(m.uordblks + m.hblkhd)


def _accepts(kernel, args) -> bool:
    try:
        kernel(*args)
        return True
    except polyc.PolycError:
        return False


def _derive(row: dict, w: Workload, sizes: dict, peak: dict | None) -> None:
    t = row.get("polyc_s")
    for peer in ("numpy", "torch", "torch_compile"):
        if t and row.get(f"{peer}_s"):
            row[f"vs_{peer}"] = row[f"{peer}_s"] / t
    # throughput: the kernel's own rate, outputs preallocated (out=): a fresh
    # output's page faults are the allocator's cost, paid by numpy too
    t = row.get("polyc_out_s") or t
    if not t:
        return
    kind = "f64" if w.dtype == "float64" else "f32"
    if w.flops is not None:
        row["gflops"] = w.flops(sizes) / t / 1e9
        key = f"fma_gflops_{'1core' if w.threads == 1 else 'allcores'}_{kind}"
        if peak and peak.get(key):
            row["fraction_of_peak"] = row["gflops"] / peak[key]
    else:
        item = np.dtype(w.dtype).itemsize
        # every input read once and every output (TC: every written tensor) written once
        row["bytes"] = item * (sum(math.prod(sh) for sh in w.shapes(sizes)) + _out_elems(w, sizes))
        row["gbs"] = row["bytes"] / t / 1e9
        if peak and peak.get("stream_triad_gbs_allcores"):
            row["fraction_of_peak"] = row["gbs"] / peak["stream_triad_gbs_allcores"]


def _out_elems(w: Workload, sizes: dict) -> int:
    from polyc.isl_util import eval_pw_aff
    prog = polyc.program(w.tc, dtype=w.dtype)
    return sum(math.prod(eval_pw_aff(d, sizes) for d in t.shape) for t in prog.outputs)


# ----------------------------------------------------------------- printing

def _ms(v) -> str:
    return f"{v * 1e3:.3f}" if v else "-"


def _x(v) -> str:
    return f"{v:.2f}x" if v else "-"


def table(rows: list[dict]) -> str:
    cols = ["workload", "dtype", "polyc ms", "polyc out= ms", "numpy ms", "torch ms",
            "torch.compile ms", "vs numpy", "vs torch", "vs torch.compile", "rate", "of peak",
            "cold s", "call us", "extra MiB", "err"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        if r.get("error"):
            e = r["error"]
            lines.append(f"| {r['workload']} | {r['dtype']} | failed at {e['stage']}: "
                         f"{e['type']}: {e['message'].splitlines()[0][:120]} |"
                         + " |" * (len(cols) - 3))
            continue
        rate = (f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r
                else f"{r['gbs']:.1f} GB/s" if "gbs" in r else "-")
        peak = f"{100 * r['fraction_of_peak']:.0f}%" if r.get("fraction_of_peak") else "-"
        call = f"{r['call_overhead_s'] * 1e6:.1f}" if r.get("call_overhead_s") else "-"
        lines.append("| " + " | ".join([
            r["workload"], r["dtype"], _ms(r.get("polyc_s")), _ms(r.get("polyc_out_s")),
            f"{_ms(r.get('numpy_s'))} ({r.get('numpy_best', '-')})",
            _ms(r.get("torch_s")), _ms(r.get("torch_compile_s")),
            _x(r.get("vs_numpy")), _x(r.get("vs_torch")), _x(r.get("vs_torch_compile")),
            rate, peak, f"{r.get('cold_compile_s', 0):.2f}", call,
            f"{r.get('extra_mib', 0):.2f}", f"{r.get('max_rel_err', 0):.1e}"]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tensor",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="workload names (prefixes match)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke test")
    ap.add_argument("--repeat-time", type=float, default=0.5,
                    help="seconds each measurement runs for at least (default 0.5)")
    ap.add_argument("--background-load", type=float, nargs="?", const=0.5, default=None,
                    metavar="DUTY",
                    help="measure every workload twice: quiet, then with another process "
                         "keeping DUTY (default 0.5) of one core busy "
                         "(benchmarks/background.py); prints both tables and how much of "
                         "each quiet ratio polyc kept")
    ap.add_argument("--no-peak", action="store_true",
                    help="skip measuring the FMA peak and STREAM bandwidth")
    ap.add_argument("--no-torch-compile", action="store_true",
                    help="leave out the torch.compile peer (its compiles take seconds "
                         "per workload)")
    a = ap.parse_args(argv)
    todo = [w for w in workloads()
            if not a.only or any(w.name.startswith(p) for p in a.only)]
    if not todo:
        ap.error(f"no workload matches {a.only}")
    peak = None
    if not a.no_peak:
        from .peak import PeakError
        from .peak import measure as measure_peak
        print("[tensor] measuring the FMA peak and STREAM triad ...", file=sys.stderr)
        try:
            peak = measure_peak(quick=a.tiny)
        except PeakError as err:
            # the workloads are still measured, without the fractions of peak
            print(f"[tensor] no peak figures: {err}", file=sys.stderr)
    torch = _torch()
    mach = {**machine(Config.from_env()), "peak": peak,
            "torch": getattr(torch, "__version__", None)}
    library_dir = tempfile.mkdtemp(prefix="polyc-intrinsics-")
    mach["intrinsics_library_build_s"] = prebuild_intrinsics(library_dir)
    rows = []
    for w in todo:
        print(f"[tensor] {w.name} ...", file=sys.stderr, flush=True)
        rows.append(run_workload(w, a.repeat_time, a.tiny, peak, library_dir=library_dir,
                                 torch_compile=not a.no_torch_compile))
        print(f"[tensor] {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    loaded, load_text = [], ""
    if a.background_load:
        from .background import BackgroundLoad
        with BackgroundLoad(a.background_load) as load:
            for w in todo:
                print(f"[tensor] {w.name} (loaded) ...", file=sys.stderr, flush=True)
                loaded.append(run_workload(w, a.repeat_time, a.tiny, peak,
                                           library_dir=library_dir,
                                           torch_compile=not a.no_torch_compile))
        load_text = load.report()
    shutil.rmtree(library_dir, ignore_errors=True)
    if a.json:
        print(json.dumps({"machine": mach, "repeat_time_s": a.repeat_time, "tiny": a.tiny,
                          "results": rows, "loaded": loaded, "background_load": load_text},
                         indent=1))
    else:
        threads = mach["polyc_threads"]
        print(f"- {mach['cpu']}, {mach['cores']} cores; polyc on {threads} thread(s); numpy "
              f"{mach['numpy']} ({mach['blas']}); torch: {mach['torch'] or 'not installed'}")
        print(f"- the intrinsics library (gemm.h, built once per machine and compiler) took "
              f"{mach['intrinsics_library_build_s']:.2f} s to build; `cold s` below is the "
              f"kernel's own compile, with that library in the cache")
        if peak:
            print("- measured peak (benchmarks/peak.c): FMA f32 "
                  f"{peak.get('fma_gflops_1core_f32', 0):.0f}"
                  f" GFLOP/s on 1 core, {peak.get('fma_gflops_allcores_f32', 0):.0f} on all; "
                  f"f64 {peak.get('fma_gflops_1core_f64', 0):.0f} / "
                  f"{peak.get('fma_gflops_allcores_f64', 0):.0f}; STREAM triad "
                  f"{peak.get('stream_triad_gbs_allcores', 0):.1f} GB/s (all cores)")
        print()
        print(table(rows))
        if loaded:
            print(f"\nWith a {load_text}:\n")
            print(table(loaded))
            print("\nHow much of each quiet ratio polyc kept under the load (target: "
                  "at least 0.9):\n")
            print(kept_table(rows, loaded))
    return 1 if any(r.get("error") for r in rows + loaded) else 0


def kept_table(quiet: list[dict], loaded: list[dict]) -> str:
    """Per workload, polyc's ratio to each peer quiet and loaded, and the
    loaded ratio over the quiet one (``kept``; below 0.9 is marked)."""
    peers = ("numpy", "torch", "torch_compile")
    cols = ["workload"] + [f"{p} {k}" for p in peers for k in ("quiet", "loaded", "kept")]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for q, ld in zip(quiet, loaded):
        cells = [q["workload"]]
        for peer in peers:
            a, b = q.get(f"vs_{peer}"), ld.get(f"vs_{peer}")
            kept = b / a if a and b else None
            mark = " (below 0.9)" if kept is not None and kept < 0.9 else ""
            cells += [_x(a), _x(b), (f"{kept:.2f}{mark}" if kept is not None else "-")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
