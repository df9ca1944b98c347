"""Single-core efficiency of the GEMM micro-kernels, per ISA build.

    python -m benchmarks.ukernel              # every build this CPU runs
    python -m benchmarks.ukernel --quick      # tiny sizes (a smoke test)
    python -m benchmarks.ukernel --json

Issue 16 asks the AVX2 and AVX-512 kernels to reach 90% of one core's FMA
peak in their inner loop, reported from a single-core run.  For each build
of ``backends/c/intrinsics/gemm.h`` this CPU can run (``native``: the
widest, AVX-512 here; ``avx2``: ``-mno-avx512f``; ``portable``: no AVX2,
AVX-512 or FMA, reported for reference), a C driver calls
``polyc_gemm_f32``/``polyc_gemm_f64`` with one thread on square and
transformer-shaped products (row-major operands, alpha 1, beta 0) and
prints the best GFLOP/s of repeated calls.  ``benchmarks/peak.c`` built
with the same flags gives that build's one-core FMA peak, so an AVX2
kernel is measured against the AVX2 peak (on Intel cores with two 512-bit
FMA units that is half the AVX-512 one).  The times include packing, so
the fraction is a lower bound on the inner loop's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import peak

HEADER_DIR = Path(__file__).resolve().parents[1] / "backends" / "c" / "intrinsics"

#: The builds: name -> extra compiler flags (as in tests/gemm_abi.py).
BUILDS = {
    "native": [],
    "avx2": ["-mno-avx512f"],
    "portable": ["-mno-avx2", "-mno-avx512f", "-mno-fma"],
}

SIZES = [(2048, 2048, 2048), (1024, 1024, 1024), (512, 768, 3072), (512, 3072, 768)]
QUICK_SIZES = [(64, 64, 64), (30, 50, 70)]

DRIVER = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gemm.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

#define TIME(T, SFX)                                                                \
    static double time_##SFX(int64_t M, int64_t N, int64_t K, double budget)        \
    {                                                                               \
        T *A = malloc(sizeof(T) * M * K), *B = malloc(sizeof(T) * K * N);           \
        T *C = malloc(sizeof(T) * M * N);                                           \
        double best = 1e30, spent = 0;                                              \
        int64_t i, reps = 0;                                                        \
        if (!A || !B || !C)                                                         \
            return -1;                                                              \
        for (i = 0; i < M * K; i++) A[i] = (T)((i % 17) - 8) / 8;                   \
        for (i = 0; i < K * N; i++) B[i] = (T)((i % 13) - 6) / 8;                   \
        polyc_gemm_##SFX(M, N, K, A, K, 1, B, N, 1, C, N, 1, 1, 0, NULL, 0, 0, 1);  \
        while (reps < 3 || (spent < budget && reps < 1000)) {                       \
            double t = now();                                                       \
            polyc_gemm_##SFX(M, N, K, A, K, 1, B, N, 1, C, N, 1, 1, 0, NULL, 0, 0,  \
                             1);                                                    \
            t = now() - t;                                                          \
            spent += t;                                                             \
            reps++;                                                                 \
            if (t < best)                                                           \
                best = t;                                                           \
        }                                                                           \
        free(A);                                                                    \
        free(B);                                                                    \
        free(C);                                                                    \
        return 2.0 * M * N * K / best / 1e9;                                        \
    }
TIME(float, f32)
TIME(double, f64)

int main(int argc, char **argv)
{
    double budget = atof(argv[1]);
    int k;
    printf("{\"isa\": \"%s\", \"results\": [", polyc_gemm_isa());
    for (k = 2; k + 2 < argc; k += 3) {
        int64_t M = atoll(argv[k]), N = atoll(argv[k + 1]), K = atoll(argv[k + 2]);
        printf("%s{\"M\": %lld, \"N\": %lld, \"K\": %lld, \"f32\": %.3f, \"f64\": %.3f}",
               k == 2 ? "" : ", ", (long long)M, (long long)N, (long long)K,
               time_f32(M, N, K, budget), time_f64(M, N, K, budget));
        fflush(stdout);
    }
    printf("]}\n");
    return 0;
}
"""


def _cpu_flags() -> str:
    p = Path("/proc/cpuinfo")
    return p.read_text() if p.exists() else ""


def builds_here() -> list[str]:
    """The builds this CPU runs with a vector FMA kernel: native always;
    avx2 when native is wider and the CPU has AVX2 and FMA (``portable``
    only when asked: ``peak.c`` has no portable FMA peak to compare with)."""
    flags = _cpu_flags()
    out = ["native"]
    if " avx512f" in flags and " avx2" in flags and " fma" in flags:
        out.append("avx2")
    return out


def run_build(name: str, sizes, budget: float, quick: bool) -> dict:
    """``{"build", "isa", "peak_f32", "peak_f64", "results": [...]}`` of one build."""
    cc = os.environ.get("CC", "gcc")
    flags = BUILDS[name]
    with tempfile.TemporaryDirectory(prefix="polyc-ukernel-") as tmp:
        src, exe = Path(tmp) / "driver.c", Path(tmp) / "driver"
        src.write_text(DRIVER)
        cmd = [cc, "-O3", "-march=native", *flags, "-fopenmp", "-std=c99",
               f"-I{HEADER_DIR}", str(src), "-o", str(exe), "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr}")
        args = [str(exe), str(budget), *(str(v) for s in sizes for v in s)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True,
                                        env=env, timeout=1800).stdout)
    pk = peak.measure(quick=quick, flags=tuple(flags))
    return {"build": name, "isa": out["isa"], "peak_f32": pk["fma_gflops_1core_f32"],
            "peak_f64": pk["fma_gflops_1core_f64"], "results": out["results"]}


def table(rows: list[dict]) -> str:
    lines = ["| build (kernel) | M x N x K | f32 GFLOP/s | of 1-core peak | f64 GFLOP/s "
             "| of 1-core peak |", "|---|---|---|---|---|---|"]
    for b in rows:
        vector = b["isa"] != "portable"
        for r in b["results"]:
            f32 = f"{r['f32'] / b['peak_f32']:.0%}" if vector else "-"
            f64 = f"{r['f64'] / b['peak_f64']:.0%}" if vector else "-"
            lines.append(f"| {b['build']} ({b['isa']}) | {r['M']}x{r['N']}x{r['K']} | "
                         f"{r['f32']:.1f} | {f32} | {r['f64']:.1f} | {f64} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ukernel")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, short runs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--builds", nargs="*", choices=sorted(BUILDS))
    args = ap.parse_args(argv)
    sizes, budget = (QUICK_SIZES, 0.01) if args.quick else (SIZES, 0.6)
    rows = [run_build(b, sizes, budget, args.quick) for b in (args.builds or builds_here())]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for b in rows:
            print(f"{b['build']}: micro-kernel {b['isa']}, one-core FMA peak "
                  f"{b['peak_f32']:.1f} GFLOP/s f32, {b['peak_f64']:.1f} f64")
        print()
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
