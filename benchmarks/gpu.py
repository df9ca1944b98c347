"""``python -m benchmarks.gpu``: every GPU task of issue 18 in one invocation.

On a machine with a GPU: installs pycuda from a wheel placed beside this
file (``benchmarks/pycuda-*.whl``) when pycuda is missing (pycuda ships as
source only: build the wheel where the CUDA headers are, with ``CUDA_ROOT``
pointing at the toolkit: ``CUDA_ROOT=/usr/local/cuda pip wheel pycuda``),
runs the ``gpu``-marked tests, runs ``compute-sanitizer`` (racecheck,
memcheck, synccheck) over small launches, and times the workloads below
against torch (cuBLAS/cuDNN) and CuPy when they are installed, printing a
markdown table (``--json``: one JSON object).

Without a GPU it prints what can be measured here (mapping, emulator and
nvcc times per kernel) and says that the device timings are pending.
Exit status: 0 when every step that ran passed.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: (name, TC source, sizes) timed against torch: GEMM and the TC benchmark kernels.
#: The fp16/bf16 GEMMs run on tensor cores, the fp32/fp64 ones on the SIMT GEMM
#: (backends/cuda/wmma.py).
WORKLOADS = [
    (f"gemm 4096 {short}",
     f"def mm({t}(M,K) A, {t}(K,N) B) -> (C) {{ C(m,n) +=! A(m,k) * B(k,n) }}",
     {"M": 4096, "K": 4096, "N": 4096})
    for t, short in (("float", "fp32"), ("float16", "fp16"), ("bfloat16", "bf16"),
                     ("double", "fp64"))
] + [
    ("gemm batched fp16 64x512x512x64",
     "def bmm(float16(B,M,K) A, float16(B,K,N) W) -> (C) { C(b,m,n) +=! A(b,m,k) * W(b,k,n) }",
     {"B": 64, "M": 512, "K": 64, "N": 512}),
] + [
    # row kernels (polyc.schedule.gpu_rows): bound by memory bandwidth, reported as a
    # fraction of the device-to-device copy bandwidth measured in the same run
    ("softmax rows 8192x8192 fp32",
     "def softmax(float(N, C) I) -> (O, mx, s) {\n"
     "  mx(n) max=! I(n, c)\n"
     "  s(n) +=! exp(I(n, c) - mx(n))\n"
     "  O(n, c) = exp(I(n, c) - mx(n)) / s(n)\n}",
     {"N": 8192, "C": 8192}),
    ("layernorm rows 8192x8192 fp32",
     "def layernorm(float(N, C) X, float(C) g, float(C) b) -> (Y, mu, var) {\n"
     "  mu(n) +=! X(n, c)\n  mu(n) = mu(n) / C\n"
     "  var(n) +=! (X(n, c) - mu(n)) * (X(n, c) - mu(n))\n  var(n) = var(n) / C\n"
     "  Y(n, c) = (X(n, c) - mu(n)) * rsqrt(var(n) + 1e-5) * g(c) + b(c)\n}",
     {"N": 8192, "C": 8192}),
] + [(p.stem, p.read_text(), None) for p in sorted((ROOT / "examples").glob("*.tc"))]


def copy_bandwidth() -> float:
    """Bytes per second of a device-to-device copy of 1 GiB (read + write),
    the bandwidth the row kernels are measured against."""
    import pycuda.driver as cuda
    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()     # the one polyc and torch use
    ctx.push()
    try:
        n = 1 << 30
        src, dst = cuda.mem_alloc(n), cuda.mem_alloc(n)
        start, end = cuda.Event(), cuda.Event()
        cuda.memcpy_dtod(dst, src, n)
        start.record()
        for _ in range(10):
            cuda.memcpy_dtod(dst, src, n)
        end.record()
        end.synchronize()
        return 2.0 * n * 10 / (start.time_till(end) / 1e3)
    finally:
        ctx.pop()


def _row_reference(name: str, args):
    """torch's own kernel for a row workload, on device tensors, or None."""
    import torch
    x = torch.from_numpy(args[0]).cuda()
    if name.startswith("softmax"):
        return lambda: torch.softmax(x, -1)
    g, b = (torch.from_numpy(a).cuda() for a in args[1:3])
    return lambda: torch.nn.functional.layer_norm(x, x.shape[-1:], g, b)


def _has_gpu() -> bool:
    from polyc.gpu_runtime import has_gpu
    return has_gpu()


def install_pycuda() -> str:
    """pycuda's state: already importable, installed from a wheel beside
    this file, or missing."""
    if importlib.util.find_spec("pycuda") is not None:
        return "present"
    wheels = sorted(glob.glob(str(HERE / "pycuda-*.whl")))
    if not wheels:
        return "missing (no benchmarks/pycuda-*.whl)"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", wheels[-1]], check=True)
    return f"installed {Path(wheels[-1]).name}"


def _inputs(program, sizes):
    from polyc.testing import random_inputs
    inputs = random_inputs(program, sizes, seed=0)
    return [inputs[n] if n in inputs else sizes[n] for n in program.signature]


def _median(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _events(fn, repeat: int = 20) -> float:
    """Median seconds of ``fn()`` (work queued on torch's current stream, or
    CuPy's default stream, which synchronises with it) timed with CUDA
    events, after 3 warm-up runs: the way :meth:`CudaKernel.time` times
    polyc's launches."""
    import torch
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def compile_figures() -> list[dict]:
    """Mapping + emulator build and nvcc per workload (no GPU needed)."""
    import polyc
    from polyc.backends.cuda.build import build_cubin
    from polyc.config import Config
    rows = []
    for name, src, _ in WORKLOADS:
        cfg = Config.from_env(target="cuda", emulate=True, disk_cache=False)
        t = time.perf_counter()
        k = polyc.compile(src, config=cfg)
        map_s = time.perf_counter() - t
        row = {"workload": name, "map+emulator_s": map_s}
        if hasattr(k, "cuda"):
            threads = {name: s.threads for name, s in k.cuda.launches.items()}
            t = time.perf_counter()
            built = build_cubin(k.cuda_source, config=cfg, threads=threads)
            row["nvcc_s"] = time.perf_counter() - t
            row["kernels"] = len(k.kernels)
            row["max_registers"] = max(r.registers for r in built.resources.values())
        rows.append(row)
    return rows


def _chosen(name: str, only: list[str] | None) -> bool:
    return not only or any(o in name for o in only)


def device_figures(only: list[str] | None = None) -> list[dict]:
    """Per workload: polyc's launches on the device (``CudaKernel.time``:
    CUDA events, arguments already on the device), polyc's whole CUDA call
    (host arrays copied in and out: device arrays are not taken yet),
    polyc's C kernel on this machine's CPU, and for the GEMMs torch
    (cuBLAS) and CuPy on device arrays, synchronised, with TFLOP/s."""
    from polyc.frontend import tc
    rows = []
    for name, src, sizes in WORKLOADS:
        if not _chosen(name, only):
            continue
        try:
            rows.append(_device_row(name, src, sizes or tc.sizes_header(src)))
        except Exception as e:          # noqa: BLE001 -- reported in the table, exit 1
            rows.append({"workload": name, "error": f"{type(e).__name__}: {e}"[:2000]})
        print(f"timed {json.dumps(rows[-1], default=float)}", file=sys.stderr, flush=True)
    return rows


def _device_row(name: str, src: str, sizes: dict) -> dict:
    """One row of :func:`device_figures`."""
    import polyc
    from polyc.config import Config
    gpu = polyc.compile(src, config=Config.from_env(target="cuda"))
    cpu = polyc.compile(src, config=Config.from_env())    # on the device machine's CPU
    args = _inputs(gpu.program, sizes)
    row = {"workload": name, "polyc_cuda_s": gpu.time(*args),
           "polyc_cuda_call_s": _median(lambda: gpu(*args)),
           "polyc_c_s": None if "fp32" not in name and "gemm" in name
           else _median(lambda: cpu(*args), repeat=1 if "gemm" in name else 5)}
    try:
        import torch
        if all(str(a.dtype) != "bfloat16" for a in args if isinstance(a, np.ndarray)):
            dev = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a
                   for a in args]
            row["polyc_cuda_tensors_s"] = _events(lambda: gpu(*dev))
    except ImportError:
        pass
    if " rows " in name:
        # compulsory traffic: every argument read once, every output written once
        arrays = [x for x in args if isinstance(x, np.ndarray)]
        outs = gpu(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        moved = sum(a.nbytes for a in arrays) + sum(o.nbytes for o in outs)
        row["gb_per_s"] = moved / row["polyc_cuda_s"] / 1e9
        try:
            row["hbm_fraction"] = moved / row["polyc_cuda_s"] / copy_bandwidth()
        except Exception as e:          # noqa: BLE001 -- a figure, not a failure
            row["hbm_fraction_error"] = str(e)
        try:
            row["torch_s"] = _events(_row_reference(name, arrays))
        except ImportError:
            pass
    if name.startswith("gemm"):
        flops = 2.0 * sizes.get("B", 1) * sizes["M"] * sizes["N"] * sizes["K"]
        row["polyc_tflops"] = flops / row["polyc_cuda_s"] / 1e12
        row["tensor_cores"] = any(k.intrinsic for k in gpu.kernels)
        a, b = (x for x in args if isinstance(x, np.ndarray))
        try:
            import torch
            half = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(str(a.dtype))
            ta, tb = (torch.from_numpy(x if x.dtype == np.float64 else x.astype(np.float32))
                      .cuda() for x in (a, b))
            if half is not None:
                ta, tb = ta.to(half), tb.to(half)
            row["torch_s"] = _events(lambda: ta @ tb)
            row["torch_tflops"] = flops / row["torch_s"] / 1e12
        except ImportError:
            pass
        try:
            import cupy
            if str(a.dtype) != "bfloat16":
                ca, cb = cupy.asarray(a), cupy.asarray(b)
                row["cupy_s"] = _events(lambda: ca @ cb)
        except ImportError:
            pass
    return row


#: examples/embedding_bag.tc at its header sizes, with torch's EmbeddingBag(mode="sum")
EMBEDDING_BAG = ("embedding_bag", {"B": 128, "L": 50, "N": 10000, "D": 64})


def tensor_figures(only: list[str] | None = None) -> list[dict]:
    """The TC benchmark kernels of :mod:`benchmarks.tensor` (float32, at the
    sizes of that table) and the embedding bag, on torch CUDA tensors:
    polyc's launches (``CudaKernel.time``), polyc's call on device tensors
    (binding, launches, synchronisation) and torch eager's, both timed with
    CUDA events; the output checked against torch's."""
    from benchmarks import tensor
    rows = []
    works = [w for w in tensor.workloads() if w.dtype == "float32" and w.threads is None
             and not w.name.startswith(("gemm512", "gemm1024", "gemm2048"))]
    for w in works + [EMBEDDING_BAG]:
        name = w[0] if isinstance(w, tuple) else w.name
        if not _chosen(name, only):
            continue
        try:
            rows.append(_tensor_row(w))
        except Exception as e:          # noqa: BLE001 -- reported in the table, exit 1
            rows.append({"workload": name, "error": f"{type(e).__name__}: {e}"[:2000]})
        print(f"timed {json.dumps(rows[-1], default=float)}", file=sys.stderr, flush=True)
    return rows


def _tensor_row(w) -> dict:
    """One row of :func:`tensor_figures`."""
    import torch

    import polyc
    from polyc.config import Config
    rng = np.random.default_rng(0)
    if isinstance(w, tuple):            # the embedding bag: indices in [0, N)
        name, s = w
        src = (ROOT / "examples" / "embedding_bag.tc").read_text()
        args = [rng.integers(0, s["N"], (s["B"], s["L"])).astype(np.int64),
                rng.standard_normal((s["N"], s["D"])).astype(np.float32)]
        output = 0

        def peer(t, idx, lut):
            return t.nn.functional.embedding_bag(idx, lut, mode="sum")
    else:
        name, src, output, peer = w.name, w.tc, w.output, w.torch
        args = [rng.standard_normal(sh).astype(np.float32) for sh in w.shapes(w.sizes)]
    gpu = polyc.compile(src, config=Config.from_env(target="cuda"))
    dev = [torch.from_numpy(a).cuda() for a in args]
    with torch.no_grad():
        expected = peer(torch, *dev)
        outs = gpu(*dev)
        got = (outs if isinstance(outs, tuple) else (outs,))[output]
        scale = float(expected.abs().max())
        err = float((got - expected).abs().max()) / max(scale, 1e-30)
        row = {"workload": name, "max_rel_err": err,
               "polyc_cuda_s": gpu.time(*args),
               "polyc_cuda_tensors_s": _events(lambda: gpu(*dev)),
               "torch_s": _events(lambda: peer(torch, *dev)),
               "kernels": len(gpu.kernels)}
    if err > 1e-3:
        row["error"] = f"wrong result: max relative error {err:.2e} against torch"
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--device-only", action="store_true",
                    help="skip the compile figures (map, emulator, nvcc) measured here")
    ap.add_argument("--tensor", action="store_true",
                    help="only the TC benchmark kernels against torch eager on the device")
    ap.add_argument("--only", nargs="+", metavar="TEXT",
                    help="only the workloads whose names contain one of these")
    ap.add_argument("--from-json", metavar="FILE",
                    help="print the table of a report written earlier with --json")
    args = ap.parse_args(argv)
    if args.from_json:
        print_table(json.loads(Path(args.from_json).read_text()))
        return 0
    report: dict = {"pycuda": install_pycuda(), "gpu": _has_gpu()}
    if args.tensor:
        report["compile"], report["device"] = [], []
        report["tensor"] = tensor_figures(args.only) if report["gpu"] else []
        if args.json:
            print(json.dumps(report, indent=2, default=float))
        else:
            print_table(report)
        return int(any("error" in r for r in report["tensor"]))
    status = 0
    if report["gpu"] and not args.skip_tests:
        rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu",
                             str(ROOT / "tests")], cwd=ROOT).returncode
        report["gpu_tests"] = "passed" if rc == 0 else f"failed ({rc})"
        status = status or (rc != 0)
        sanitizer = "compute-sanitizer"
        for tool in ("racecheck", "memcheck", "synccheck"):
            code = ("import numpy as np, polyc; "
                    "k = polyc.compile(open('examples/softmax.tc').read(), target='cuda'); "
                    "k(np.random.rand(33, 70).astype(np.float32))")
            try:
                rc = subprocess.run([sanitizer, f"--tool={tool}", "--error-exitcode=1",
                                     sys.executable, "-c", code], cwd=ROOT).returncode
                report[f"sanitizer_{tool}"] = "clean" if rc == 0 else "errors"
                status = status or (rc != 0)
            except FileNotFoundError:
                report[f"sanitizer_{tool}"] = "compute-sanitizer not found"
    report["compile"] = [] if args.device_only else compile_figures()
    report["device"] = (device_figures(args.only) if report["gpu"]
                        else "pending: no GPU on this machine")
    if not isinstance(report["device"], str):
        status = status or any("error" in r for r in report["device"])
        report["tensor"] = tensor_figures(args.only)
        status = status or any("error" in r for r in report["tensor"])
    if args.json:
        print(json.dumps(report, indent=2, default=float))
    else:
        print_table(report)
    return int(status)


def print_table(report: dict) -> None:
    """The markdown tables of a report (compile figures, device timings)."""
    print(f"pycuda: {report['pycuda']}; GPU: {report['gpu']}")
    print("\n| workload | kernels | map + emulator s | nvcc s | max registers |")
    print("|---|---|---|---|---|")
    for r in report["compile"]:
        print(f"| {r['workload']} | {r.get('kernels', '-')} | {r['map+emulator_s']:.2f} | "
              f"{r.get('nvcc_s', float('nan')):.2f} | {r.get('max_registers', '-')} |")
    if isinstance(report["device"], str):
        print(f"\ndevice timings: {report['device']}")
    else:
        print("\n| workload | polyc cuda ms (device) | with copies ms | on torch tensors ms "
              "| polyc C ms | torch ms | cupy ms | polyc / torch TFLOP/s, or bandwidth |")
        print("|---|---|---|---|---|---|---|---|")
        for r in report["device"]:
            cells = [r.get(k) for k in ("polyc_cuda_s", "polyc_cuda_call_s",
                                        "polyc_cuda_tensors_s", "polyc_c_s", "torch_s",
                                        "cupy_s")]
            rate = (f"{r['polyc_tflops']:.1f} / {r.get('torch_tflops', float('nan')):.1f}"
                    + ((" (SIMT GEMM)" if any(t in r["workload"] for t in ("fp32", "fp64"))
                        else " (tensor cores)")
                       if r.get("tensor_cores") else "")
                    if "polyc_tflops" in r else "-")
            if "gb_per_s" in r:
                rate = (f"{r['gb_per_s']:.0f} GB/s, "
                        f"{r.get('hbm_fraction', float('nan')):.0%} of copy bandwidth")
            if "error" in r:
                rate = "error: " + r["error"].splitlines()[0][:160]
            print(f"| {r['workload']} | " + " | ".join(
                "-" if v is None else f"{v * 1e3:.3f}" for v in cells) + f" | {rate} |")
    if report.get("tensor"):
        print("\n| TC kernel | kernels | polyc launches ms | polyc on torch tensors ms "
              "| torch eager ms | torch / polyc launches | torch / polyc call |")
        print("|---|---|---|---|---|---|---|")
        for r in report["tensor"]:
            if "polyc_cuda_s" not in r:
                print(f"| {r['workload']} | error: {r['error'].splitlines()[0][:160]} |")
                continue
            print(f"| {r['workload']} | {r['kernels']} | {r['polyc_cuda_s'] * 1e3:.3f} | "
                  f"{r['polyc_cuda_tensors_s'] * 1e3:.3f} | {r['torch_s'] * 1e3:.3f} | "
                  f"{r['torch_s'] / r['polyc_cuda_s']:.2f}x | "
                  f"{r['torch_s'] / r['polyc_cuda_tensors_s']:.2f}x |"
                  + (f" {r['error']}" if "error" in r else ""))


if __name__ == "__main__":
    sys.exit(main())
