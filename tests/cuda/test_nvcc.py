"""Every mapped kernel of the TC examples and the 30 PolyBench kernels
compiles with nvcc for sm_80 and sm_90, and ptxas's resources are within
what a launch of its block can have (``nvcc`` marker: skipped without
nvcc)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.backends.cuda.build import MAX_REGISTERS, REGISTERS_PER_BLOCK, build_cubin
from polyc.config import Config

pytestmark = pytest.mark.nvcc

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARCHS = ("sm_80", "sm_90")


def emulated() -> Config:
    return Config.from_env(target="cuda", emulate=True)


def check_build(kernel, arch: str) -> None:
    threads = {name: s.threads for name, s in kernel.cuda.launches.items()}
    built = build_cubin(kernel.cuda_source, config=kernel.config, arch=arch, threads=threads)
    assert built.cubin[:4] == b"\x7fELF" and built.arch == arch
    assert set(built.resources) == set(threads)
    for name, r in built.resources.items():
        assert 0 < r.registers <= MAX_REGISTERS
        assert r.registers * threads[name] <= REGISTERS_PER_BLOCK


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.tc")))
def test_tc_examples_compile(name, arch):
    text = (EXAMPLES / name).read_text()
    k = polyc.compile(text, config=emulated(), filename=name)
    if not hasattr(k, "cuda"):          # size-specialised definitions compile per call
        pytest.skip(f"{name} is compiled per size")
    check_build(k, arch)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_polybench_compiles(name, arch):
    bench = BENCHMARKS[name]
    k = bench.kernel.with_config(emulated()).specialize(
        *bench.init(bench.sizes["MINI"], np.float64))
    check_build(k, arch)


def test_kernel_for_the_device_builds_at_compile_time():
    """Without emulate, compile runs nvcc (a GPU is needed only to run)."""
    k = polyc.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                      target="cuda", config=Config.from_env(cuda_arch="sm_80"))
    assert k.cubin[:4] == b"\x7fELF" and "polyc_k0" in k.resources
    assert "ptxas polyc_k0" in k.explain()


def test_gpu_benchmark_script_without_a_gpu(monkeypatch, capsys):
    """``python -m benchmarks.gpu`` on a machine with nvcc and no GPU: the
    mapping and nvcc figures, and device timings said to be pending."""
    import json

    from benchmarks import gpu
    monkeypatch.setattr(gpu, "WORKLOADS", gpu.WORKLOADS[:1])
    monkeypatch.setattr(gpu, "_has_gpu", lambda: False)
    assert gpu.main(["--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"].startswith("pending")
    (row,) = report["compile"]
    assert row["kernels"] == 1 and row["nvcc_s"] > 0 and row["max_registers"] > 0


@pytest.mark.parametrize("src", [
    "def s(float(N) A) -> (s) { s +=! A(i) }",
    "def s(double(N,M) A) -> (s) { s max=! A(i,j) }",
    "def s(int32(N) A) -> (s) { s min=! A(i) }",
    "def s(int64(N) A) -> (s) { s *=! A(i) }",
])
def test_reduction_kernels_compile(src):
    """Warp shuffles of every accumulator type, the block tree's shared
    memory and the cross-block ticket compile, within the launch limits."""
    k = polyc.compile(src, config=emulated())
    assert any(m.reduction for m in k.kernels) and "__shfl_down_sync" in k.cuda_source
    for arch in ARCHS:
        check_build(k, arch)


def test_power_helpers_compile_as_device_functions():
    """``pow(x, 0.5)`` prints as the prelude's square root helper and
    ``pow(x, 2)`` as a product; both are device functions under nvcc."""
    k = polyc.compile("def p(float(N) x) -> (y) { y(i) = pow(x(i), 0.5) + pow(x(i), 2) }",
                      config=emulated())
    assert "polyc_pow0_float" in k.cuda_source
    check_build(k, ARCHS[0])


@pytest.mark.parametrize("src", [
    "def a(uint8(M,N) A, uint8(M,N) B) -> (uint8(M,N) C) { C(i,j) = (A(i,j) + B(i,j)) / 2 }",
    "def q(int8(M,K) A, int8(K,N) B) -> (int32(M,N) C) { C(m,n) +=! A(m,k) * B(k,n) }",
    "def s(uint16(N) A, int16(N) B, uint32(N) U) -> (R) { R(i) = -A(i) * B(i) + U(i) }",
    "def m(uint8(N,M) A) -> (s) { s max=! A(i,j) }",
])
def test_small_integer_kernels_compile(src):
    """int8 ... uint32 spell as <stdint.h> types in kernels and in a block
    reduction's accumulator, and compute through the int32/int64 helpers."""
    k = polyc.compile(src, config=emulated())
    for arch in ARCHS:
        check_build(k, arch)


def test_bitwise_operators_compile():
    k = polyc.compile("def b(uint8(N) A, int32(N) S) -> (R) "
                      "{ R(i) = ((A(i) << S(i)) | ~A(i)) ^ (A(i) >> 2) & S(i) }", config=emulated())
    assert "polyc_shl_int32_t" in k.cuda_source
    for arch in ARCHS:
        check_build(k, arch)


def test_integer_power_compiles():
    k = polyc.compile("def p(int16(N) A, int64(N) B) -> (R) { R(i) = ipow(A(i), B(i)) }",
                      config=emulated())
    assert "polyc_ipow_int64_t" in k.cuda_source
    check_build(k, ARCHS[0])


def test_small_integer_casts_compile():
    k = polyc.compile("def c(int32(N) A) -> (R) { R(i) = cast_uint8(A(i) * 3) / 2 }",
                      config=emulated())
    check_build(k, ARCHS[0])
