"""ctypes views of ``backends/c/intrinsics/gemm.h``'s types and the build of
a test shim around it, shared by the tests that call the intrinsic directly
(tests/unit/test_gemm_intrinsic.py, tests/unit/test_gemm_dynamic.py,
tests/cpu/test_gemm_scaled.py; tests/ is on sys.path via conftest)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

#: where gemm.h and gemm_api.h live
HEADER_DIR = Path(__file__).resolve().parents[1] / "backends" / "c" / "intrinsics"


#: The flags of the shim builds for each micro-kernel: the CPU's widest, AVX2
#: (AVX-512 off) and portable C (AVX2, AVX-512 and FMA off).
ISA_FLAGS = {
    "native": [],
    "avx2": ["-mno-avx512f"],
    "portable": ["-mno-avx2", "-mno-avx512f", "-mno-fma"],
}


def build_shim(tmp_path_factory, name: str, source: str, flags: list[str]) -> ctypes.CDLL:
    """Compile ``source`` (C that includes ``gemm.h``) as a shared library with
    ``cc FLAGS -fPIC -shared -std=c99 -Wall -Wextra -Werror -I<HEADER_DIR>`` in a
    fresh temporary directory and load it; skips the test without a C compiler
    and fails with the compiler's stderr when it does not compile."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp(name)
    src, so_path = d / "shim.c", d / "libshim.so"
    src.write_text(source)
    cmd = [cc, *flags, "-fPIC", "-shared", "-std=c99", "-Wall", "-Wextra", "-Werror",
           f"-I{HEADER_DIR}", str(src), "-o", str(so_path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return ctypes.CDLL(str(so_path))


def build_shims(tmp_path_factory, prefix: str, source: str,
                builds: dict[str, list[str]]) -> dict[str, ctypes.CDLL]:
    """:func:`build_shim` of ``source`` once per entry of ``builds`` (name ->
    flags), the compilers run two at a time (each compiles all of
    ``gemm.h``: about 3 s)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(build_shim, tmp_path_factory, f"{prefix}_{name}", source,
                                     flags)
                   for name, flags in builds.items()}
        return {name: f.result() for name, f in futures.items()}


#: C for a shim (after ``#include "gemm.h"``): ``gemm_f32``/``gemm_f64`` call
#: ``polyc_gemm_<t>`` with alpha and beta as doubles (see :func:`bind_gemm`).
GEMM_SHIM = r"""
#define POLYC_TEST_GEMM(T, SFX)                                                     \
    void gemm_##SFX(int64_t M, int64_t N, int64_t K, const T *A, int64_t a_rs,      \
                    int64_t a_cs, const T *B, int64_t b_rs, int64_t b_cs, T *C,     \
                    int64_t c_rs, int64_t c_cs, double alpha, double beta,          \
                    const T *bias, int64_t bias_cs, int relu, int nt)               \
    {                                                                               \
        polyc_gemm_##SFX(M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, c_rs, c_cs,      \
                         (T)alpha, (T)beta, bias, bias_cs, relu, nt);               \
    }
POLYC_TEST_GEMM(float, f32)
POLYC_TEST_GEMM(double, f64)
"""


def bind_gemm(so: ctypes.CDLL) -> None:
    """Declare the shim functions ``gemm_f32``/``gemm_f64`` of the tests that
    call ``polyc_gemm_<t>`` with the whole epilogue (tests/unit/
    test_gemm_small.py, test_gemm_few.py): ``(M, N, K, A, a_rs, a_cs, B, b_rs,
    b_cs, C, c_rs, c_cs, double alpha, double beta, bias, bias_cs, int relu,
    int nthreads)``, strides in elements."""
    i64, vp, ci, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    for f in (so.gemm_f32, so.gemm_f64):
        f.restype = None
        f.argtypes = [i64, i64, i64, vp, i64, i64, vp, i64, i64, vp, i64, i64, dbl, dbl,
                      vp, i64, ci, ci]


def cpu_has(*flags: str) -> bool:
    """Whether /proc/cpuinfo lists every flag (``"avx2"``, ``"fma"``)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return all(f" {flag}" in text for flag in flags)


def runnable(builds: dict, build: str):
    """``builds[build]`` (a shim with ``isa()`` returning ``polyc_gemm_isa()``),
    skipping the test where this CPU cannot run it: ``"avx2"`` without AVX2
    and FMA, ``"native"`` unless it is the AVX-512 build (the avx2 build
    covers an AVX2 CPU)."""
    if build == "avx2" and not cpu_has("avx2", "fma"):
        pytest.skip("no AVX2 on this CPU")
    so = builds[build]
    if build == "native" and so.isa() != b"avx512":
        pytest.skip("no AVX-512 on this CPU (the avx2 build covers AVX2)")
    return so


class Dims(ctypes.Structure):
    """``polyc_gemm_dims``: the digits of a row or column index and their strides."""
    _fields_ = [("n", ctypes.c_int), ("ext", ctypes.c_int64 * 8),
                ("stride", ctypes.c_int64 * 8)]


def dims(*pairs) -> Dims:
    """A ``polyc_gemm_dims`` of ``(extent, stride)`` digits, outermost first."""
    d = Dims()
    d.n = len(pairs)
    for j, (e, st) in enumerate(pairs):
        d.ext[j], d.stride[j] = e, st
    return d


def offsets(pairs) -> np.ndarray:
    """The offsets ``polyc_gemm_offset`` gives, computed by numpy."""
    off = np.zeros(1, np.int64)
    for e, st in pairs:
        off = (off[:, None] + st * np.arange(e, dtype=np.int64)[None, :]).reshape(-1)
    return off
