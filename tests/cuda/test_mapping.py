"""The GPU mapping and its proof (``polyc.schedule.gpu_mapping``,
``polyc.schedule.gpu_verify``): the verifier rejects injected bugs with a
witness; block sizes, host loops, launch sizes and ptxas reports; clear
errors without nvcc or pycuda.  Runs on every machine (no GPU, no nvcc)."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc import bounds, dependence
from polyc.backends.cuda import build as cuda_build
from polyc.backends.cuda import emit as cuda_emit
from polyc.config import Config
from polyc.errors import IllegalScheduleError, PolycError, ScheduleError, ToolMissingError
from polyc.gemm_match import tensor_core_support
from polyc.gpu_runtime import host_source
from polyc.schedule import gpu_mapping, gpu_marks, gpu_verify, initial
from polyc.testing import random_inputs

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def prepared(program):
    program = program.replace(preconditions=bounds.preconditions(program))
    deps = dependence.compute(program)
    return program, deps, initial.auto_schedule(program, deps, Config())


def polybench_program(name):
    bench = BENCHMARKS[name]
    k = bench.kernel.with_config(Config(target="cuda", emulate=True))
    return k.specialize(*bench.init(bench.sizes["MINI"], np.float64)).program


def force_coincident(schedule: isl.Schedule) -> isl.Schedule:
    """Every band member claims to be coincident: the injected bug of a
    mapping that trusts a loop which carries a dependence."""
    def fn(node):
        if node.get_type() == isl.schedule_node_type.band:
            for i in range(node.band_n_member()):
                node = node.band_member_set_coincident(i, True)
        return node
    return schedule.map_schedule_node_bottom_up(fn)


def test_matmul_maps_two_loops_to_blocks_and_threads():
    program, deps, sched = prepared(polyc.program(MATMUL))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)
    gpu_verify.verify(mapped, kernels, deps, program)
    (k,) = kernels
    assert k.tile == (8, 32) and k.block_axes == ("y", "x") and k.thread_axes == ("y", "x")
    # the launch sizes, tightened by isl: ceil(M / 8) x ceil(N / 32) blocks,
    # min(M, 8) x min(N, 32) threads
    grid = [int(g.eval(isl.Point.zero(g.get_domain_space()).set_coordinate_val(
        isl.dim_type.param, 0, 20).set_coordinate_val(isl.dim_type.param, 1, 3)
        .set_coordinate_val(isl.dim_type.param, 2, 70)).to_python()) for g in k.grid]
    assert grid == [3, 3]


def test_a_dependence_between_threads_is_refused_with_a_witness():
    program = polybench_program("jacobi-1d")
    program, deps, sched = prepared(program)
    mapped, kernels = gpu_mapping.map_schedule(force_coincident(sched), program)
    with pytest.raises(IllegalScheduleError) as err:
        gpu_verify.verify(mapped, kernels, deps, program)
    assert "different threads" in str(err.value)
    w = err.value.witness
    assert w is not None and w.reason == "parallel" and w.source_point != w.sink_point


def test_a_reduction_mapped_to_threads_is_refused():
    program, deps, sched = prepared(polyc.program("def s(float(N) A) -> (s) { s +=! A(i) }"))
    mapped, kernels = gpu_mapping.map_schedule(force_coincident(sched), program)
    with pytest.raises(IllegalScheduleError, match="flow|output|anti"):
        gpu_verify.verify(mapped, kernels, deps, program)


def _delete_mark(schedule: isl.Schedule, name: str) -> isl.Schedule:
    def fn(node):
        if (node.get_type() == isl.schedule_node_type.mark
                and node.mark_get_id().get_name() == name):
            return node.delete()
        return node
    return schedule.map_schedule_node_bottom_up(fn)


def test_an_instance_in_no_kernel_is_refused():
    program, deps, sched = prepared(polybench_program("atax"))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)
    assert len(kernels) == 2
    broken = _delete_mark(mapped, gpu_marks.Kernel(1).name())
    with pytest.raises(IllegalScheduleError, match="outside any kernel"):
        gpu_verify.verify(broken, kernels[:1], deps, program)
    program, deps, sched = prepared(polyc.program("def s(float(N) A) -> (s) { s +=! A(i) }"))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)
    broken = _delete_mark(mapped, gpu_marks.Kernel(0).name())
    with pytest.raises(IllegalScheduleError, match="runs in no kernel"):
        gpu_verify.verify(broken, kernels[1:], deps, program)
    with pytest.raises(IllegalScheduleError, match="do not match"):
        gpu_verify.verify(broken, kernels, deps, program)


def test_a_kernel_inside_a_kernel_is_refused():
    program, deps, sched = prepared(polyc.program(MATMUL))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)

    def fn(node):
        if isinstance(gpu_marks.of(node), gpu_marks.Threads):
            return node.insert_mark(gpu_marks.Kernel(7).id())
        return node
    with pytest.raises(IllegalScheduleError, match="nested"):
        gpu_verify.verify(mapped.map_schedule_node_bottom_up(fn), kernels, deps, program)


def test_a_time_loop_stays_on_the_host():
    program = polybench_program("jacobi-1d")
    cfg = Config(target="cuda", emulate=True)
    from polyc.gpu_pipeline import lower_gpu
    low = lower_gpu(program, cfg)
    assert [bool(k.tile) for k in low.kernels] == [True, True]
    assert all(k.host_depth == 1 for k in low.kernels)
    cuda = cuda_emit.emit(low.program, low.loopnest, list(low.kernels))
    assert all(s.host_iterators == ("c0",) for s in cuda.launches.values())
    # the host loop nest that pycuda runs: every time step launches both kernels
    ns: dict = {"min": min, "max": max}
    exec(host_source(cuda), ns)  # noqa: S102
    calls = []
    sizes = {"n": 30, "tsteps": 5, "B_dim0": 30}
    ns["host"](lambda k, grid, block, hosts: calls.append((k, grid, block, hosts)),
               *[sizes[p] for p in program.params])
    assert [c[0] for c in calls] == ["polyc_k0", "polyc_k1"] * sizes["tsteps"]
    assert [c[3] for c in calls[::2]] == [(t,) for t in range(sizes["tsteps"])]
    assert all(c[1][0] >= 1 and c[2][0] >= 1 and c[2][0] <= 256 for c in calls)


@pytest.mark.parametrize("block", [(2048,), (64, 64), (0, 8)])
def test_blocks_cuda_cannot_launch_are_refused(block):
    with pytest.raises(PolycError, match="threads|positive"):
        polyc.compile(MATMUL, config=Config(target="cuda", emulate=True, gpu_block=block,
                                            gpu_simt_gemm=False))


def test_config_checks_target_and_arch():
    with pytest.raises(PolycError, match="target"):
        Config(target="opencl")
    with pytest.raises(PolycError, match="sm_75"):
        Config(cuda_arch="sm_70")
    with pytest.raises(PolycError, match="sm_75"):
        Config(cuda_arch="sm_70a")
    # architecture-specific targets (Hopper's sm_90a): a ValueError escaped
    for arch in ("sm_90a", "sm_100a", "sm_120f"):
        assert Config(cuda_arch=arch).cuda_arch == arch
    assert tensor_core_support("bfloat16", "sm_90a") is None
    assert "sm_80" in tensor_core_support("bfloat16", "sm_75")
    k = polyc.compile(MATMUL, config=Config(target="cuda", emulate=True, cuda_arch="sm_90a"))
    a, b = np.ones((3, 5), np.float32), np.ones((5, 2), np.float32)
    np.testing.assert_array_equal(k(a, b), np.full((3, 2), 5, np.float32))
    with pytest.raises(PolycError, match="gpu_block"):
        Config(gpu_block=(1, 2, 3, 4))
    with pytest.raises(ScheduleError):
        gpu_mapping.block_shape(2, (0, 3))


def test_ptxas_report_is_parsed_and_limits_enforced():
    text = """ptxas info    : Compiling entry function 'polyc_k0' for 'sm_90'
ptxas info    : Function properties for polyc_k0
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, 1024 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'polyc_k1' for 'sm_90'
ptxas info    : Used 255 registers, 400 bytes cmem[0]
"""
    res = cuda_build.parse_ptxas(text)
    assert res["polyc_k0"] == cuda_build.Resources(40, 1024, 400, 0, 8, 4)
    assert res["polyc_k1"].registers == 255
    cuda_build.check_resources(res, {"polyc_k0": 256, "polyc_k1": 256})
    with pytest.raises(polyc.CompileError, match="registers"):
        cuda_build.check_resources(res, {"polyc_k1": 1024})


def test_missing_nvcc_is_a_tool_missing_error(monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(cuda_build.os, "access", lambda *a: False)
    monkeypatch.setattr(cuda_build.shutil, "which", lambda *a: None)
    with pytest.raises(ToolMissingError, match="nvcc"):
        polyc.compile(MATMUL, target="cuda", config=Config(disk_cache=False))


def test_missing_pycuda_is_a_tool_missing_error(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(cuda_build, "build_cubin", lambda *a, **k: None)
    k = polyc.compile(MATMUL, target="cuda")
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ToolMissingError, match="pycuda"):
        k(a, a)


def test_the_c_target_never_imports_pycuda():
    import subprocess
    import sys
    code = ("import sys, polyc, numpy as np; k = polyc.compile('" + MATMUL + "'); "
            "k(np.ones((2,2),np.float32), np.ones((2,2),np.float32)); "
            "assert 'pycuda' not in sys.modules and 'polyc.backends.cuda.emit' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_kernels_schedule_compiles_for_cuda():
    """A compiled kernel's schedule (no GPU marks) is mapped automatically
    for target="cuda" (tests/cuda/test_schedule_mapping.py maps by hand)."""
    import os
    os.environ["POLYC_TENSORIZE"] = "0"
    try:
        k = polyc.compile(MATMUL, config=Config.from_env())
    finally:
        del os.environ["POLYC_TENSORIZE"]
    g = polyc.compile(MATMUL, schedule=k.schedule, target="cuda", config=Config(emulate=True))
    assert len(g.kernels) >= 1 and any(km.tile for km in g.kernels)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(g(a, a.T), a @ a.T, rtol=1e-6)


def test_a_reduction_kernel_must_write_one_element():
    """Injected: a kernel over many outputs claimed to be a reduction."""
    import dataclasses
    program, deps, sched = prepared(polyc.program(MATMUL))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)
    bad = [dataclasses.replace(kernels[0], reduction="S0")]
    with pytest.raises(IllegalScheduleError, match="writes several elements"):
        gpu_verify.verify(mapped, bad, deps, program)


def test_reduction_kernels_are_recognised():
    program, deps, sched = prepared(polyc.program("def s(float(N,M) A) -> (s) { s +=! A(i,j) }"))
    mapped, kernels = gpu_mapping.map_schedule(sched, program)
    gpu_verify.verify(mapped, kernels, deps, program)
    assert [k.reduction for k in kernels] == ["", "S0"]
    # a row reduction keeps its rows on the threads
    program, deps, sched = prepared(polyc.program("def s(float(B,N) A) -> (s) { s(b) +=! A(b,i) }"))
    _, kernels = gpu_mapping.map_schedule(sched, program)
    assert [k.reduction for k in kernels] == [""] and kernels[0].tile == (256,)


class _FakeDriver:
    """Enough of ``pycuda.driver`` to run :class:`polyc.gpu_runtime.CudaKernel`
    without a GPU: launches are recorded, device buffers are numpy copies."""

    class Error(Exception):
        pass

    def __init__(self):
        self.launches = []
        self.freed = 0
        self.context_depth = 0          # pushes minus pops: 0 between calls
        drv = self

        class Alloc:
            def __init__(self, arr):
                self.arr = arr.copy()

            def __int__(self):
                return id(self)

            def free(self):
                drv.freed += 1

        class Function:
            """Records each launch with its arguments typed as its prepared
            format says (int64 'q', pointer 'P')."""
            def __init__(self, name):
                self.name = name

            def prepare(self, fmt):
                self.fmt = fmt
                return self

            def prepared_call(self, grid, block, *args):
                assert len(args) == len(self.fmt), (self.name, self.fmt, args)
                typed = tuple(np.int64(a) if f == "q" else np.uintp(a)
                              for f, a in zip(self.fmt, args))
                drv.launches.append((self.name, typed, grid, block))

        class Module:
            def get_function(self, name):
                return Function(name)

        class Context:
            def push(self):
                drv.context_depth += 1

            @staticmethod
            def pop():
                assert drv.context_depth > 0, "popped a context that was never pushed"
                drv.context_depth -= 1

            @staticmethod
            def synchronize():
                pass

        class Device:
            @staticmethod
            def count():
                return 1

            def __init__(self, i):
                pass

            def retain_primary_context(self):
                return Context()

        class Event:
            """Records the launch count when recorded; 2 ms per launch since."""
            def record(self):
                self.at = len(drv.launches)

            def synchronize(self):
                pass

            def time_since(self, start):
                return 2.0 * (self.at - start.at)

        self.Alloc, self.Device, self.Context = Alloc, Device, Context
        self.Event = Event
        self.module_from_buffer = lambda cubin: Module()

    def init(self):
        pass

    def to_device(self, arr):
        return self.Alloc(arr)

    def memcpy_dtoh(self, dst, src):
        dst[...] = src.arr


def fake_pycuda(monkeypatch) -> _FakeDriver:
    """Install a :class:`_FakeDriver` as ``pycuda.driver`` and a build that
    returns an empty cubin (no nvcc run); returns the driver."""
    import sys
    import types
    fake = _FakeDriver()
    pkg = types.ModuleType("pycuda")
    pkg.driver = fake
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    monkeypatch.setattr(cuda_build, "build_cubin", lambda *a, **k: cuda_build.Cubin(
        b"\x7fELF", "sm_90", {}, ()))
    return fake


def test_device_launches_through_pycuda(monkeypatch):
    """The pycuda path without a GPU: each kernel is launched with int64
    sizes and host-loop values, device buffers, grids clamped to CUDA's
    limits; written tensors come back and every buffer is freed."""
    fake = fake_pycuda(monkeypatch)
    k = polyc.compile("def s(float(N) A) -> (s) { s +=! A(i) }", target="cuda")
    a = np.ones(10 ** 6, np.float32)
    k(a)
    names = [launch[0] for launch in fake.launches]
    assert names == ["polyc_k0", "polyc_k1"]
    _, args, grid, block = fake.launches[1]
    assert isinstance(args[0], np.int64) and int(args[0]) == 10 ** 6
    assert grid == (1024, 1, 1) and block == (256, 1, 1)       # the reduction's cap
    assert fake.freed == 2
    assert fake.context_depth == 0      # a process exiting with one pushed aborts in pycuda
    # a host loop: its iterator is passed after the sizes, each step launches both sweeps
    fake.launches.clear()
    bench = BENCHMARKS["jacobi-1d"]
    args = bench.init({"TSTEPS": 3, "N": 50}, np.float64)
    bench.kernel.with_config(Config(target="cuda"))(*args)
    assert [launch[0] for launch in fake.launches] == ["polyc_k0", "polyc_k1"] * 3
    assert [int(launch[1][3]) for launch in fake.launches[::2]] == [0, 1, 2]


def test_instrumented_emulation_catches_a_race_the_verifier_was_told_to_miss(monkeypatch):
    """Injected: every band member claims to be coincident and the proof is
    switched off, so jacobi-1d's time loop is spread over threads.  The
    instrumented emulator (``Config(emulate_checks=True)``) sees two threads
    of one launch touch one element, one writing it, and says so."""
    from polyc import gpu_pipeline
    bench = BENCHMARKS["jacobi-1d"]
    args = bench.init({"TSTEPS": 4, "N": 20}, np.float64)
    good = Config(target="cuda", emulate=True, emulate_checks=True)
    bench.kernel.with_config(good)(*args)           # the real mapping: no report
    monkeypatch.setattr(gpu_mapping, "coincident_members",
                        lambda band: [True] * band.band_n_member())
    monkeypatch.setattr(gpu_pipeline.gpu_verify, "verify", lambda *a, **k: None)
    bad = good.replace(gpu_block=(3,))
    with pytest.raises(IllegalScheduleError, match="race on"):
        bench.kernel.with_config(bad)(*args)


@pytest.mark.parametrize("src", [
    # a tensor-core call takes over the float32 accumulator of a half matmul:
    # the temporary is no argument (passing it failed every launch on an H200
    # with "too many resources requested for launch")
    "def mm(float16(M,K) A, float16(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
    "def bmm(bfloat16(B,M,K) A, bfloat16(B,N,K) W) -> (C) "
    "{ C(b,m,n) +=! 0.5 * A(b,m,k) * W(b,n,k) }",
    (EXAMPLES / "softmax.tc").read_text(),
    (EXAMPLES / "group_norm.tc").read_text(),
    "def s(float(N) A) -> (s) { s +=! A(i) }",
])
def test_each_launch_passes_exactly_the_kernels_parameters(monkeypatch, src):
    """Every launch passes as many arguments as its ``__global__`` function
    declares, of the declared kinds (int64 sizes and host values, then
    pointers): the driver cannot check a packed argument buffer."""
    import re
    fake = fake_pycuda(monkeypatch)
    k = polyc.compile(src, target="cuda")
    sizes = {p: 3 for p in k.program.params}
    inputs = random_inputs(k.program, sizes, seed=0)
    k(*[inputs[n] if n in inputs else sizes[n] for n in k.program.signature])
    assert fake.launches and fake.context_depth == 0
    signature = {m.group(1): m.group(2).split(",") for m in re.finditer(
        r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(([^)]*)\)", k.cuda_source)}
    for name, args, _, _ in fake.launches:
        declared = signature[name]
        assert len(args) == len(declared), (name, declared)
        for arg, decl in zip(args, declared):
            assert isinstance(arg, np.int64) == decl.strip().startswith("int64_t "), (name, decl)
