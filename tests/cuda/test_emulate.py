"""``target="cuda"`` kernels run by the CPU emulator (``Config(emulate=True)``)
against ``polyc.reference`` (TC examples) and PolyBench's numpy references.

Every kernel is mapped (``polyc.schedule.gpu_mapping``), proved
(``polyc.schedule.gpu_verify``: a failure raises before anything runs) and
run with its threads in both orders, at sizes that are and are not
multiples of the tiles: the header sizes / 8, every size 1, and primes.
Tolerances: ``polyc.testing.assert_close`` (TC: scaled by the reduction
length), 1e-9 of the largest magnitude (PolyBench, float64)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc import reference
from polyc.config import Config
from polyc.errors import PolycError
from polyc.frontend import tc
from polyc.testing import assert_close, random_inputs, reduction_length

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TC_FILES = sorted(p.name for p in EXAMPLES.glob("*.tc"))
ORDERS = {"forward": False, "reverse": True}
#: modes of the example sweep: thread orders, and the instrumented emulator
MODES = {"forward": {}, "reverse": {"emulate_reverse": True}, "checks": {"emulate_checks": True}}
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71)


def emulated(reverse: bool = False, **kw) -> Config:
    """The emulator's configuration.  The SIMT GEMM call is off: these tests
    check the loop mapping on the examples' float32 contractions (the call
    has tests of its own, tests/cuda/test_wmma.py)."""
    kw.setdefault("emulate_reverse", reverse)
    kw.setdefault("gpu_simt_gemm", False)
    return Config.from_env(target="cuda", emulate=True, **kw)


@functools.lru_cache(maxsize=None)
def compiled(name: str, mode: str = "forward"):
    text = (EXAMPLES / name).read_text()
    return polyc.compile(text, config=emulated(**MODES[mode]), filename=str(EXAMPLES / name))


def header(name: str) -> dict[str, int]:
    return tc.sizes_header((EXAMPLES / name).read_text())


def size_sets(name: str) -> dict[str, dict[str, int]]:
    h = header(name)
    small = {k: max(1, v // 8) for k, v in h.items()}
    primes = {k: max(p for p in PRIMES if p <= max(2, v // 16)) for k, v in h.items()}
    return {"small": small, "ones": {k: 1 for k in h}, "primes": primes}


def run_and_compare(kernel, sizes: dict[str, int], name: str, seed: int = 0) -> None:
    program = kernel.program
    inputs = random_inputs(program, sizes, seed=seed)
    args = [inputs[n] if n in inputs else sizes[n] for n in program.signature]
    got = kernel(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = reference.evaluate(program, inputs, sizes)
    red = reduction_length(program, sizes)
    for t, g in zip(program.outputs, got):
        assert_close(g, want[t.name], dtype=t.dtype, reduction_length=red,
                     name=f"{name}: {t.name} at {sizes}")


def _valid(name: str, sizes: dict[str, int]) -> bool:
    """Whether the example accepts ``sizes`` (a convolution's window must
    fit its input); checked by the C kernel's own preconditions."""
    from polyc.errors import PolycError
    k = polyc.compile((EXAMPLES / name).read_text(), config=Config.from_env())
    try:
        run_and_compare(k, sizes, name)
        return True
    except PolycError:
        return False


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("which", ["small", "ones", "primes"])
@pytest.mark.parametrize("name", TC_FILES)
def test_tc_examples_on_the_emulator(name, which, mode):
    sizes = size_sets(name)[which]
    if which != "small" and not _valid(name, sizes):
        pytest.skip(f"{name} does not accept {sizes}")
    k = compiled(name, mode)
    run_and_compare(k, sizes, name)


def test_a_kernel_reports_its_mapping():
    k = compiled("matmul.tc")
    assert isinstance(k, polyc.Kernel)
    assert len(k.kernels) == 1 and k.kernels[0].tile == (8, 32)
    src = k.cuda_source
    assert '__global__' in src and "blockIdx.x" in src and "threadIdx.y" in src
    text = k.explain()
    assert "GPU mapping" in text and "point loops y/x -> threads" in text
    data = k.explain(json=True)
    (kern,) = data["gpu"]["kernels"]
    assert data["gpu"]["emulated"] and kern["threads"] == ["y", "x"]
    assert kern["grid"] == ["(M + 7) / 8", "(N + 31) / 32"] and kern["host_loops"] == 0
    assert "blocks [(M + 7) / 8] x [(N + 31) / 32]" in text and "launched once" in text


@pytest.mark.parametrize("block", [(4, 4), (1, 1), (3, 5), (64,)])
def test_block_sizes_that_are_not_the_default(block):
    text = (EXAMPLES / "matmul.tc").read_text()
    k = polyc.compile(text, config=emulated(gpu_block=block))
    assert k.kernels[0].tile == ((1,) + block if len(block) == 1 else block)
    for sizes in ({"M": 7, "K": 3, "N": 9}, {"M": 1, "K": 1, "N": 1}, {"M": 33, "K": 2, "N": 65}):
        run_and_compare(k, sizes, "matmul")


def test_a_recurrence_runs_on_one_thread():
    @polyc.kernel(config=emulated())
    def prefix(a):
        n = a.shape[0]
        for i in range(1, n):
            a[i] = a[i - 1] + a[i]
    x = np.random.default_rng(0).random(1000)
    want = np.cumsum(x)
    prefix(x)
    np.testing.assert_allclose(x, want, rtol=1e-12)
    k = prefix.specialize(x)
    assert all(not m.tile for m in k.kernels)
    assert "one block of one thread" in k.explain()


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("src, ref", [
    ("def s(float(N) A) -> (s) { s +=! A(i) }", lambda a: a.sum(dtype=np.float64)),
    ("def s(float(N,M) A) -> (s) { s max=! A(i,j) }", np.max),
    ("def s(double(N,M) A) -> (s) { s min=! A(i,j) }", np.min),
    ("def s(double(N) A) -> (s) { s *=! A(i) }", np.prod),
    ("def s(int32(N) A) -> (s) { s +=! A(i) }", lambda a: a.sum(dtype=np.int32)),
])
def test_reductions_run_over_the_whole_grid(src, ref, order):
    """A reduction into one element: every thread of the grid accumulates a
    strided part, a tree combines each block's, the last block combines the
    blocks' (sizes below one block, of several blocks, and above the 1024
    blocks' cap)."""
    k = polyc.compile(src, config=emulated(ORDERS[order]))
    assert any(m.reduction for m in k.kernels)
    assert "reduction of S0 over the grid" in k.explain()
    rng = np.random.default_rng(0)
    two_d = "j)" in src
    for n in (1, 7, 256, 257, 5000, 300_000):
        shape = (n // 3 + 1, 3) if two_d else (n,)
        a = rng.random(shape) + 0.5
        if "*=" in src:
            a = 1 + (a - 1) / n
        a = a.astype(k.program.tensors[0].dtype) if "int" not in src else \
            rng.integers(-5, 5, shape).astype(np.int32)
        got, want = k(a), ref(a)
        tol = 0 if "int" in src else (1e-12 if "double" in src else 1e-5) * max(1.0, abs(want))
        assert abs(got - want) <= tol, (n, got, want)


def test_a_nan_reaches_a_max_reduction():
    k = polyc.compile("def s(float(N) A) -> (s) { s max=! A(i) }", config=emulated())
    a = np.arange(10_000, dtype=np.float32)
    a[1234] = np.nan
    assert np.isnan(k(a))


def test_einsum_on_the_emulator():
    rng = np.random.default_rng(1)
    a, b = rng.random((5, 7, 3)), rng.random((5, 3, 11))
    got = polyc.einsum("bij,bjk->bik", a, b, config=emulated())
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a, b), rtol=1e-12)


def test_a_band_that_no_instance_reaches_launches_nothing():
    """Found by the fuzzer: under the source order, the band of the second
    statement is reached by no instance at any size (``B(i, j, i)`` bounds
    ``i`` by B's extent 1, and ``O0(i - 1)`` needs ``i >= 1``), so isl gave
    its tiles no range and the mapping had no launch sizes."""
    src = """def f(float(N) A, float(1, N, N) B) -> (O0) {
    O0(i) +=! B(i, j, i) + A(i)
    O0(i) += tanh((A(i) <= -0.25 ? O0(j) : A(i))) + tanh(O0(i - 1))
    O0(i) += A(j) + O0(2*k + 0) + A(l)
}"""
    k = polyc.compile(src, config=emulated(schedule="identity", gpu_block=(7,)))
    for sizes in ({"N": 1, "K": 1, "L": 1}, {"N": 3, "K": 1, "L": 2}):
        run_and_compare(k, sizes, "f")


@polyc.kernel(config=emulated())
def _columns(A, B):
    n, m = A.shape
    for j in range(m):
        for i in range(n):
            B[i, j] = A[i, j] * 2.0


def test_the_stride_one_loop_maps_to_thread_x():
    """Coalescing: a loop program that walks columns outermost has its
    stride-1 loop ``j`` moved innermost among the mapped loops, onto
    ``threadIdx.x``, so a warp reads 32 consecutive elements of a row."""
    a = np.random.default_rng(0).random((37, 45))
    b = np.zeros_like(a)
    _columns(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    k = _columns.specialize(a, b)
    assert "moved innermost (threadIdx.x)" in k.kernels[0].describe()
    src = k.cuda_source
    # S0's second index (j) is the x-mapped loop's iterator
    assert "int64_t const i_j = (c1 + c3);" in src
    assert "c3 = INT64_C(0) + polyc_mod((int64_t)threadIdx.x" in src


def test_a_kernel_printed_twice_by_isl_gets_two_functions():
    """Found by the fuzzer: isl printed one kernel's subtree in two branches
    of a condition on the sizes, and both copies were emitted under one
    name.  Each copy is its own function (``polyc_k2``, ``polyc_k2_1``)."""
    src = """def f(float(1, K, N) A) -> (O0) {
    O0(j) +=! A(i, j, k) + A(i + i, i, i) + tanh(A(i, i, j)) + 1.5
    O0(i) += A(i + j, k, l) + O0(m) + O0(i) + 1.5
}"""
    k = polyc.compile(src, config=emulated())
    names = list(k.cuda.launches)
    assert len(names) == len(set(names)) > len(k.kernels)
    for sizes in ({"N": 1, "K": 1, "L": 1, "M": 1}, {"N": 1, "K": 3, "L": 1, "M": 1},
                  {"N": 3, "K": 1, "L": 1, "M": 3}):
        run_and_compare(k, sizes, "f")


def _attention(q, k, v):
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def test_a_numpy_program_compiles_to_cuda_through_the_graph_layer():
    """``polyc.jit`` with ``target="cuda"``: each fusion group is mapped,
    proved and (here) emulated like a TC definition."""
    f = polyc.jit(_attention, config=emulated(emulate_checks=True))
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 33, 16)).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(f(q, k, v), _attention(q, k, v), rtol=1e-4, atol=1e-5)


def test_the_fusion_plan_for_cuda_reads_the_cuda_pipeline():
    """The planner lowers candidate groups through the CUDA pipeline for
    ``target="cuda"``: the parallel loops it counts are those mapped to
    blocks and threads (the C pipeline's OpenMP marks are absent there: it
    counted 0), and its rules name the GEMM call (float32: the SIMT GEMM,
    which stores the bias add), not the C micro-kernel.  A float16 product
    runs on tensor cores in a launch of its own, so the
    bias and ReLU after it are a separate nest (no common loop)."""
    def mlp(x, w, b):
        return np.maximum(x @ w + b, 0.0)
    rng = np.random.default_rng(2)
    for dt in (np.float32, np.float16):
        x, w = rng.standard_normal((64, 32)).astype(dt), rng.standard_normal((32, 48)).astype(dt)
        b = rng.standard_normal(48).astype(dt)
        f = polyc.jit(mlp, config=emulated(gpu_simt_gemm=True))
        text = f.explain(x, w, b)
        assert "micro-kernel" not in text and " 0 parallel loop" not in text, text
        assert "2 parallel loop(s) kept" in text, text
        if dt == np.float32:
            assert "epilogue folded into the GEMM call's store" in text, text
        else:
            assert "nests in sequence (no common loop)" in text, text
        ref = mlp(*(a.astype(np.float64) for a in (x, w, b)))
        np.testing.assert_allclose(f(x, w, b).astype(np.float64), ref,
                                   rtol=2e-2 if dt == np.float16 else 1e-4, atol=2e-2)


def test_jit_takes_target_as_kernel_does(monkeypatch):
    """``@polyc.jit(target="cuda")``, as ``@polyc.kernel(target="cuda")``:
    ``target`` over ``config``'s (a TypeError before); the rest of the
    configuration from the environment."""
    monkeypatch.setenv("POLYC_CUDA_EMULATE", "checks")
    f = polyc.jit(_attention, target="cuda")
    assert f.config.target == "cuda" and f.config.emulate_checks
    g = polyc.jit(target="cuda", config=emulated(emulate_checks=True))(lambda x: x.max(0) * 2)
    assert g.config.target == "cuda" and g.config.emulate
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 17, 8)).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(f(q, k, v), _attention(q, k, v), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(g(q[0]), q[0].max(0) * 2)
    with pytest.raises(PolycError, match="target"):
        polyc.jit(_attention, target="gpu")


@pytest.mark.parametrize("value, emulate, checks, reverse", [
    ("1", True, False, False), ("checks", True, True, False), ("Reverse", True, False, True),
    ("0", False, False, False)])
def test_the_emulator_modes_from_the_environment(monkeypatch, value, emulate, checks, reverse):
    """``POLYC_CUDA_EMULATE`` names each emulator mode (``reverse`` had no
    variable); a value it does not know (``true``) was ignored silently, so
    the kernels went to pycuda: now a ``PolycError`` listing the values."""
    monkeypatch.setenv("POLYC_CUDA_EMULATE", value)
    c = Config.from_env(target="cuda")
    assert (c.emulate, c.emulate_checks, c.emulate_reverse) == (emulate, checks, reverse)
    if emulate:
        k = polyc.compile("def f(float(N) x) -> (y) { y(i) = x(i) * 2.0 }", target="cuda")
        assert k.config.emulate_reverse == reverse
        np.testing.assert_array_equal(k(np.ones(3, np.float32)), np.full(3, 2, np.float32))
    monkeypatch.setenv("POLYC_CUDA_EMULATE", "true")
    with pytest.raises(PolycError, match="POLYC_CUDA_EMULATE='true' is not one of 0, 1, checks"):
        Config.from_env()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_matmul_reads_its_inputs_from_shared_memory(mode):
    """Promotion (``polyc.schedule.gpu_promotion``): the k loop tiled by 32
    between blocks and threads, A's 8 x 32 and B's 32 x 32 boxes copied into
    padded shared buffers by all threads of the block, barriers after the
    copies and at the end of each k-tile iteration; emulated per phase."""
    k = polyc.compile((EXAMPLES / "matmul.tc").read_text(), config=emulated(**MODES[mode]))
    (m,) = k.kernels
    assert m.promoted["A"].startswith("shared A_shared[8][32]")
    assert m.promoted["B"].startswith("shared B_shared[32][32]")
    src = k.cuda_source
    assert "__shared__ float t_A_shared[8][33];" in src and "__syncthreads();" in src
    for sizes in ({"M": 1, "K": 1, "N": 1}, {"M": 9, "K": 33, "N": 31},
                  {"M": 17, "K": 64, "N": 65}):
        run_and_compare(k, sizes, "matmul")
    off = polyc.compile((EXAMPLES / "matmul.tc").read_text(),
                        config=emulated(gpu_promote=False))
    assert "__shared__" not in off.cuda_source and not off.kernels[0].promoted


def test_a_box_over_the_shared_budget_says_shared_memory():
    """A matrix-vector product in float64: A's 256 x 32 box per k-tile
    (64 KiB) stays in global memory, and the report names the budget it
    went over, shared memory's (it named the CPU's stack buffers)."""
    k = polyc.compile("def mv(double(N,M) A, double(M) x) -> (y) { y(i) +=! A(i,j) * x(j) }",
                      config=emulated(gpu_rows=False, gpu_simt_gemm=False))
    (m,) = k.kernels
    assert m.promoted["A"].startswith("global (") and "65536 bytes" in m.promoted["A"]
    assert "48 KiB of shared memory (static, per block)" in m.promoted["A"]
    assert "stack" not in k.explain()
    a = np.random.default_rng(0).standard_normal((300, 40))
    x = np.random.default_rng(1).standard_normal(40)
    np.testing.assert_allclose(k(a, x), a @ x, rtol=1e-12, atol=1e-12)


def test_an_instance_runs_on_one_thread_in_every_copy_isl_prints():
    """Found by the instrumented emulator: isl printed lu's thread-mapped
    loop several times with different first values (and once not at all, a
    member with one value), and each copy handed a row to another thread,
    so two threads of a launch raced on it.  Mapped loops are value-aligned
    (thread = value mod threads) and a member isl prints no loop for is
    guarded by the same rule."""
    from benchmarks.polybench import BENCHMARKS, fresh
    bench = BENCHMARKS["lu"]
    args = bench.init(bench.sizes["MINI"], np.float64)
    want = fresh(args)
    bench.reference(*want)
    got = fresh(args)
    bench.kernel.with_config(emulated(emulate_checks=True))(*got)
    for i in bench.outputs:
        np.testing.assert_allclose(got[i], want[i], rtol=1e-9, atol=1e-9)
    k = bench.kernel.with_config(emulated()).specialize(*fresh(args))
    assert "polyc_mod(" in k.cuda_source and "== (int64_t)threadIdx.x" in k.cuda_source


def test_an_emulated_kernel_says_it_has_no_device_time():
    """``CudaKernel.time`` on an emulated kernel: an AttributeError before."""
    from polyc.errors import UnsupportedError
    k = polyc.compile("def f(float(N) x) -> (y) { y(i) = x(i) * 2.0 }", config=emulated())
    with pytest.raises(UnsupportedError, match="no device time"):
        k.time(np.ones(3, np.float32))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_sizes_named_like_isl_loops_still_map(mode):
    """Sizes named ``c0``, ``c1``: isl names the AST loops ``c0_0``,
    ``c1_0``, and the mapping matched loops by the name ``c<depth>`` only, so
    no loop went to the blocks or threads: every block ran every row, and a
    row kernel's block-reduction store (thread 0 of every block) raced on the
    row's sum (reported by the instrumented emulator)."""
    k = polyc.compile("def f(float(c0,c1) A) -> (s, B) { s(i) +=! A(i,j)\n"
                      " B(i,j) = A(i,j) - s(i) }", config=emulated(**MODES[mode]))
    assert "c0_0 += INT64_C(1) * (int64_t)gridDim.x" in k.cuda_source
    rng = np.random.default_rng(2)
    for n, m in [(1, 1), (5, 7), (17, 300)]:
        a = rng.standard_normal((n, m)).astype(np.float32)
        s, b = k(a)
        want = a.astype(np.float64).sum(1)
        np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(b, a - want[:, None], rtol=1e-5, atol=1e-4)
