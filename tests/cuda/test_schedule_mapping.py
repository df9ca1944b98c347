"""GPU mapping in the schedule language (``polyc.schedule.gpu_schedule``):
``map_to_blocks``, ``map_to_threads``, ``promote_shared`` and
``promote_registers`` are checked transformations; a schedule that uses
them compiles for ``target="cuda"`` as written and runs on the emulator
(both thread orders, and instrumented for races and bounds) against numpy;
recipes replay to the same CUDA; illegal mappings are refused with a
witness.  Runs on every machine (the nvcc builds are marked ``nvcc``).
Tolerances: float32 matmul 1e-4 relative to the largest product sum;
float64 stencils exact (same operation order as the reference)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.config import Config
from polyc.errors import IllegalScheduleError, ScheduleError, UnsupportedError
from polyc.pipeline import compile_schedule

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
TWO = """
def two(float(M,N) A, float(N) b) -> (C, D) {
  C(m,n) = A(m,n) * 2.0
  D(m) +=! C(m,n) * b(n)
}
"""
MODES = {"forward": {}, "reverse": {"emulate_reverse": True}, "checks": {"emulate_checks": True}}
SIZES = [(70, 45, 33), (1, 1, 1), (64, 64, 64), (31, 97, 5), (2, 3, 37)]


def emulated(**kw) -> Config:
    return Config.from_env(target="cuda", emulate=True, **kw)


def ppcg_matmul(registers: bool = False, sizes=(8, 32)) -> polyc.Schedule:
    """PPCG's matmul: 32x32 output tiles on blocks, a k-tile loop, the
    inputs' tiles in shared memory, each thread's outputs in registers."""
    s = polyc.Schedule.from_program(polyc.program(MATMUL), start="isl")
    s = s.tile([("C", "m"), ("C", "n"), ("C", "k")], [32, 32, 32])
    s = s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")])
    s = s.map_to_threads([("C", "m"), ("C", "n")], sizes=list(sizes))
    s = s.promote_shared("A", ("C", "k_tile"))
    s = s.promote_shared("B", ("C", "k_tile"))
    if registers:
        s = s.promote_registers("C", ("C", "n"))
    return s


def check_matmul(kernel, seed=0):
    rng = np.random.default_rng(seed)
    for m, k, n in SIZES:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = kernel(a, b)
        scale = max(1.0, float(np.abs(a).max() * np.abs(b).max() * k))
        assert np.abs(got - want).max() <= 1e-4 * scale, (m, k, n)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("registers", [False, True])
def test_ppcg_matmul_runs_on_the_emulator(mode, registers):
    k = compile_schedule(ppcg_matmul(registers), emulated(**MODES[mode]))
    check_matmul(k)
    text = k.cuda_source
    assert "__shared__ float t_A_shared[32][33]" in text
    assert "__shared__ float t_B_shared[32][33]" in text
    assert ("float t_C_reg[1][1];" in text) == registers
    (km,) = k.kernels
    assert km.user and km.tile == (8, 32) and km.n_block == 2
    assert km.promoted["A"].startswith("shared A_shared[32x32]")
    report = k.explain()
    assert "mapped by the schedule: blocks m_tile, n_tile; threads m, n (8 x 32)" in report
    if registers:
        assert km.promoted["C"].startswith("registers C_reg[1x1]")


@pytest.mark.parametrize("sizes", [(1, 32), (4, 8), (32, 32), (3, 5)])
def test_any_block_shape_is_correct(sizes):
    """Threads stride over the loop values, so a block smaller than the tile
    (or of odd shape) is still correct."""
    k = compile_schedule(ppcg_matmul(True, sizes), emulated(emulate_checks=True))
    check_matmul(k, seed=1)


def test_a_recipe_replays_to_the_same_cuda():
    s = ppcg_matmul(True)
    again = polyc.Schedule.replay(polyc.program(MATMUL), s.to_json())
    assert again.to_text() == s.to_text()
    cfg = emulated()
    assert compile_schedule(again, cfg).cuda_source == compile_schedule(s, cfg).cuda_source
    ops = [step["op"] for step in s.to_recipe()["steps"]]
    assert ops == ["tile", "map_to_blocks", "map_to_threads", "promote_shared",
                   "promote_shared", "promote_registers"]


def test_compile_takes_the_schedule_and_the_c_target_ignores_the_mapping():
    s = ppcg_matmul(True)
    cuda = polyc.compile(MATMUL, schedule=s, target="cuda", config=emulated())
    assert cuda.schedule is s and "promote_registers" in cuda.schedule.to_json()
    c = polyc.compile(MATMUL, schedule=s)
    assert not hasattr(c, "cuda_source") and "__global__" not in c.source
    check_matmul(cuda)
    check_matmul(c)


def test_a_reduction_loop_mapped_to_threads_is_refused_with_a_witness():
    s = polyc.Schedule.from_program(polyc.program(MATMUL), start="isl")
    s = s.tile([("C", "m"), ("C", "n"), ("C", "k")], [32, 32, 32])
    with pytest.raises(IllegalScheduleError, match="dependence") as info:
        s.map_to_threads([("C", "n"), ("C", "k")])
    w = info.value.witness
    assert w is not None and w.source == "S0" and w.sink == "S0" and w.tensor == "C"
    assert w.source_point[2] != w.sink_point[2]          # two values of k


def test_a_time_loop_mapped_to_blocks_is_refused():
    s = polyc.Schedule.from_program(stencil_program())
    with pytest.raises(IllegalScheduleError, match="different threads, in different blocks"):
        s.map_to_blocks(("S0", "t"))


def _prefix(A, B):
    n = A.shape[0]
    for i in range(1, n):
        B[i] = B[i - 1] + A[i]


def test_a_refusal_names_the_tensor_and_where_its_witness_runs():
    """A recurrence's loop on blocks: the refusal says the pair runs in
    different blocks; on the threads of one block: of one block.  Both name
    the tensor, the statement and a witness pair."""
    k = polyc.kernel(_prefix, config=emulated()).specialize(np.zeros(8), np.zeros(8))
    s = polyc.Schedule.from_program(k.program)
    with pytest.raises(IllegalScheduleError) as info:
        s.tile([("S0", "i")], [4]).map_to_blocks([("S0", "i_tile")])
    text = str(info.value)
    assert "on tensor B, S0[i=" in text and "in different blocks" in text
    w = info.value.witness
    assert (w.source, w.sink, w.tensor) == ("S0", "S0", "B")
    assert w.source_point[0] // 4 != w.sink_point[0] // 4        # two tiles: two blocks
    with pytest.raises(IllegalScheduleError, match="on tensor B, S0.* of one block"):
        s.map_to_threads([("S0", "i")])


def test_structure_errors_say_what_to_do():
    s = polyc.Schedule.from_program(polyc.program(MATMUL), start="isl")
    s = s.tile([("C", "m"), ("C", "n"), ("C", "k")], [32, 32, 32])
    with pytest.raises(ScheduleError, match="consecutive"):
        s.map_to_blocks([("C", "n_tile"), ("C", "m_tile")])
    with pytest.raises(ScheduleError, match="at most 1024"):
        s.map_to_threads([("C", "m"), ("C", "n")], sizes=[64, 32])
    with pytest.raises(ScheduleError, match="one size per loop"):
        s.map_to_threads([("C", "m"), ("C", "n")], sizes=[8])
    t = s.map_to_threads([("C", "m"), ("C", "n")])
    with pytest.raises(IllegalScheduleError, match="above its thread loops"):
        t.map_to_blocks([("C", "k")])
    with pytest.raises(ScheduleError, match="no loop below k_tile is mapped to threads"
                       "|inside the loops mapped to threads"):
        s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")]).promote_shared("A", ("C", "k_tile"))
    b = s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")])
    with pytest.raises(ScheduleError, match="maps loops to blocks but none to threads"):
        compile_schedule(b, emulated())
    # a loop with none inside: the message says how to get a thread loop, which works
    sc = polyc.Schedule.from_program("def sc(float(N) A) -> (B) { B(i) = A(i) * 2.0 }")
    with pytest.raises(ScheduleError, match="with none inside, split a block loop"):
        compile_schedule(sc.map_to_blocks([("B", "i")]), emulated())
    k = compile_schedule(sc.split(("B", "i"), 32).map_to_blocks([("B", "i_outer")])
                         .map_to_threads([("B", "i")]), emulated())
    a = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(k(a), 2 * a)
    with pytest.raises(ScheduleError, match="use promote_registers|promote_registers"):
        t.promote_shared("A", ("C", "n"))
    with pytest.raises(ScheduleError, match="not inside loops mapped to threads"):
        t.promote_registers("C", ("C", "k_tile"))
    with pytest.raises(ScheduleError, match="already mapped"):
        t.map_to_threads([("C", "m")])


def test_a_cpu_promotion_outside_the_kernels_is_refused_for_cuda():
    s = polyc.Schedule.from_program(polyc.program(MATMUL), start="isl")
    s = s.tile([("C", "m"), ("C", "n"), ("C", "k")], [32, 32, 32])
    s = s.promote("A", ("C", "k_tile"))
    with pytest.raises(IllegalScheduleError, match="outside every kernel"):
        compile_schedule(s, emulated())


def test_tensorize_marks_are_refused_for_cuda():
    k = polyc.compile(MATMUL)
    if "tensorize" not in k.schedule.tree():
        pytest.skip("the C kernel is not tensorized on this machine")
    with pytest.raises(UnsupportedError, match="micro-kernel"):
        polyc.compile(MATMUL, schedule=k.schedule, target="cuda", config=emulated())


def test_loops_a_schedule_does_not_map_are_mapped_automatically():
    """Map C's loops by hand; D's reduction is left to the automatic
    mapping (a kernel of its own, coincident members recomputed)."""
    program = polyc.program(TWO)
    s = polyc.Schedule.from_program(program)
    s = s.tile([("C", "m"), ("C", "n")], [16, 16])
    s = s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")])
    s = s.map_to_threads([("C", "m"), ("C", "n")])
    for mode in MODES.values():
        k = compile_schedule(s, emulated(**mode))
        assert [km.user for km in k.kernels] == [True, False]
        rng = np.random.default_rng(3)
        for m, n in [(33, 17), (1, 1), (16, 48)]:
            a = rng.standard_normal((m, n)).astype(np.float32)
            b = rng.standard_normal(n).astype(np.float32)
            c, d = k(a, b)
            np.testing.assert_allclose(c, a * 2, rtol=1e-6)
            np.testing.assert_allclose(d, (a * 2) @ b, rtol=1e-4, atol=1e-4)


def stencil_program():
    bench = BENCHMARKS["jacobi-2d"]
    k = bench.kernel.with_config(emulated()).specialize(
        *bench.init(bench.sizes["MINI"], np.float64))
    return k.program


def test_a_stencil_with_its_halo_in_shared_memory():
    """jacobi-2d: the time loop on the host, each sweep a kernel whose block
    copies its tile and halo (a cross: no corners) into shared memory."""
    bench = BENCHMARKS["jacobi-2d"]
    s = polyc.Schedule.from_program(stencil_program())
    for st in ("S0", "S1"):
        s = s.tile([(st, "i"), (st, "j")], [8, 32])
        s = s.map_to_blocks([(st, "i_tile"), (st, "j_tile")])
        s = s.map_to_threads([(st, "i"), (st, "j")])
    s = s.promote_shared("A", ("S0", "j_tile")).promote_shared("B", ("S1", "j_tile"))
    for mode in MODES.values():
        k = compile_schedule(s, emulated(**mode))
        assert [km.promoted for km in k.kernels] == [
            {"A": "shared A_shared[10x34] (2720 bytes, promoted by the schedule)"},
            {"B": "shared B_shared[10x34] (2720 bytes, promoted by the schedule)"}]
        assert all(km.host_depth == 1 for km in k.kernels)
        for n in (bench.sizes["MINI"]["N"], 3, 41):
            args = bench.init({**bench.sizes["MINI"], "N": n, "TSTEPS": 3}, np.float64)
            got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            k(*got)
            bench.reference(*want)
            for g, w in zip(got, want):
                if isinstance(g, np.ndarray):
                    np.testing.assert_array_equal(g, w)


def test_the_cli_maps_a_recipe(tmp_path):
    from polyc.cli import main
    recipe = tmp_path / "mm.json"
    recipe.write_text(ppcg_matmul(True).to_json())
    tc = tmp_path / "mm.tc"
    tc.write_text("# sizes: M=40 K=33 N=70\n" + MATMUL + "\n")
    assert main(["run", str(tc), "--target", "cuda", "--emulate", "--schedule", str(recipe),
                 "--check"]) == 0
    assert main(["explain", str(tc), "--target", "cuda", "--schedule", str(recipe)]) == 0


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mapped_schedules_compile_with_nvcc(arch):
    from polyc.backends.cuda.build import MAX_REGISTERS, build_cubin
    for s in (ppcg_matmul(False), ppcg_matmul(True)):
        k = compile_schedule(s, emulated())
        threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
        built = build_cubin(k.cuda_source, config=k.config, arch=arch, threads=threads)
        for r in built.resources.values():
            assert 0 < r.registers <= MAX_REGISTERS and r.shared >= 2 * 32 * 33 * 4


def _shrink_copy(node, statement: str):
    """The loop nest with the innermost loop around ``statement`` stopping
    one iteration short of a full 32-element row: a copy box shrunk by one."""
    import dataclasses

    from polyc import expr as E
    from polyc import loopnest as L
    if isinstance(node, L.For):
        body = node.body
        kids = body.children if isinstance(body, L.Block) else (body,)
        if any(isinstance(x, L.StmtInstance) and x.statement == statement for x in kids):
            short = E.Binary("<", E.Index(node.iterator), E.Binary("+", node.init, E.Const(31)))
            return dataclasses.replace(node, cond=E.Binary("&&", node.cond, short))
        return dataclasses.replace(node, body=_shrink_copy(body, statement))
    if isinstance(node, L.Block):
        return dataclasses.replace(node, children=tuple(_shrink_copy(x, statement)
                                                        for x in node.children))
    if isinstance(node, L.If):
        return dataclasses.replace(node, then=_shrink_copy(node.then, statement),
                                   otherwise=None if node.otherwise is None
                                   else _shrink_copy(node.otherwise, statement))
    if isinstance(node, (L.Local, L.Launch)):
        return dataclasses.replace(node, body=_shrink_copy(node.body, statement))
    return node


def test_the_instrumented_emulator_poisons_shared_memory():
    """Injected: the copy of A's tiles skips their last column.  The
    instrumented emulator fills every new buffer with 0xff bytes (NaN), so
    the elements the copy leaves show in the result."""
    from polyc.backends.base import backend
    from polyc.backends.cuda.emulate import emulation_source
    from polyc.gpu_pipeline import EmulatedKernel, lower_gpu_schedule
    cfg = emulated(emulate_checks=True)
    low = lower_gpu_schedule(ppcg_matmul(), cfg)
    nest = _shrink_copy(low.loopnest, "A_shared_in")
    assert nest != low.loopnest
    cuda = backend("cuda").emit(low.program, nest, cfg, kernels=low.kernels)
    source = emulation_source(low.program, cuda, nest, list(low.kernels), reverse=False,
                              checks=True)
    assert "memset(t_A_shared, 0xff, sizeof(t_A_shared))" in source.text
    k = EmulatedKernel(low.program, source, backend("c").build(source.text, cfg), cfg,
                       lowered=low, cuda=cuda)
    a = np.ones((40, 45), np.float32)
    b = np.ones((45, 20), np.float32)
    c = k(a, b)
    assert np.isnan(c).all()          # column 31 of every row of A's first k-tile


def test_the_verifier_proves_buffer_accesses_in_bounds():
    """Every access of a shared or register buffer lies in its box at every
    size; injected: A_shared declared one row short."""
    import dataclasses

    import islpy as isl

    from polyc.gpu_pipeline import lower_gpu_schedule
    from polyc.schedule import gpu_verify
    low = lower_gpu_schedule(ppcg_matmul(True), emulated())
    gpu_verify.verify_buffers(low.program)
    shrunk = tuple(
        dataclasses.replace(t, shape=(t.shape[0].add_constant_val(
            isl.Val.int_from_si(t.shape[0].get_ctx(), -1)),) + t.shape[1:])
        if t.name == "A_shared" else t for t in low.program.tensors)
    with pytest.raises(IllegalScheduleError, match=r"A_shared\[31\]\[32\].*outside its box"):
        gpu_verify.verify_buffers(low.program.replace(tensors=shrunk))


def test_shared_buffers_are_declared_once_per_kernel():
    """isl prints the k-tile loop twice (k_tile = 0 peeled); each buffer is
    still one __shared__ array, declared at the top of the kernel."""
    k = compile_schedule(ppcg_matmul(True), emulated())
    text = k.cuda_source
    assert text.count("__shared__ float t_A_shared[32][33];") == 1
    assert text.count("__shared__ float t_B_shared[32][33];") == 1
    assert text.count("/* shared buffer A_shared */") >= 2


BLUR = "def blur(float(N) A) -> (B) { B(i) = (A(i) + A(i+1) + A(i+2)) / 3.0 where i in 0:N-2 }"


def test_a_one_dimensional_stencil_promotes_its_tile_and_halo():
    """One loop on blocks and threads, A's tile and halo (15 elements of a
    13-wide tile) in shared memory.  The sequence of the copy and the
    statement below the promotion is no sequence of phases: the step was
    refused as 'a kernel of several phases' before."""
    s = polyc.Schedule.from_program(polyc.program(BLUR), start="isl")
    s = s.tile([("B", "i")], [13])
    s = s.map_to_blocks([("B", "i_tile")])
    s = s.map_to_threads([("B", "i")])
    s = s.promote_shared("A", ("B", "i_tile"))
    rng = np.random.default_rng(5)
    for mode in MODES.values():
        k = compile_schedule(s, emulated(**mode))
        assert k.kernels[0].promoted["A"].startswith("shared A_shared[15]")
        for n in (3, 4, 17, 65):
            a = rng.standard_normal(n).astype(np.float32)
            want = (a[:-2] + a[1:-1] + a[2:]) / np.float32(3.0)
            np.testing.assert_allclose(k(a), want, rtol=1e-6, atol=1e-6)


def test_a_tiled_copy_loop_maps_only_its_point_loop_to_threads():
    """A user tile of the copy statement's loop (``A_shared_in``'s ``x0``)
    after ``promote_shared``: each copy band got a ``gpu_copy`` mark, so the
    tile loop and its point loop both strided over ``threadIdx.x`` and most
    of A's tile was copied by no thread (NaN from the poisoned buffer, wrong
    values otherwise).  Only the innermost copy band maps to threads now."""
    s = polyc.Schedule.from_program(polyc.program(BLUR), start="isl")
    s = s.tile([("B", "i")], [13]).map_to_blocks([("B", "i_tile")])
    s = s.map_to_threads([("B", "i")], sizes=[32])
    s = s.promote_shared("A", ("B", "i_tile")).tile([("A_shared_in", "x0")], [4])
    rng = np.random.default_rng(6)
    for mode in MODES.values():
        k = compile_schedule(s, emulated(**mode))
        assert k.cuda_source.count("threadIdx.x") == 2       # the copy's point loop, B's i
        for n in (3, 4, 17, 65):
            a = rng.standard_normal(n).astype(np.float32)
            want = (a[:-2] + a[1:-1] + a[2:]) / np.float32(3.0)
            np.testing.assert_allclose(k(a), want, rtol=1e-6, atol=1e-6)


def test_tiling_mapped_loops_after_the_mapping_is_refused():
    """``map_to_threads`` of two loops, then a tile of one of them: the band
    below the mark kept one loop for two sizes, and compiling failed inside
    isl (a bare ``islpy.Error``).  The tile is refused, the schedule kept."""
    s = polyc.Schedule.from_program(polyc.program(MATMUL), start="isl")
    t = s.map_to_threads([("C", "m"), ("C", "n")], sizes=[4, 8])
    with pytest.raises(ScheduleError, match="now has 1 loop.*transform the loops first"):
        t.tile([("C", "n")], [4])
    check_matmul(compile_schedule(t, emulated(emulate_checks=True)))
    with pytest.raises(ScheduleError, match="now has 1 loop"):
        t.split(("C", "m"), 2)
