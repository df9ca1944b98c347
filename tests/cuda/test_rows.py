"""Row kernels (``polyc.schedule.gpu_rows``): a streaming program of rows
runs as one kernel with a block per row, its statements as phases of the
block, barriers placed from the dependences that cross threads (and only
there), and reductions by the whole block.

Every kernel is proved by ``gpu_verify`` before it runs, then run by the
CPU emulator with its threads in both orders and instrumented (races
between threads of a phase, bounds), against numpy in float64.
Tolerance: ``polyc.testing.assert_close`` scaled by the row length."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import gpu_pipeline
from polyc.api import program as parse_program
from polyc.config import Config
from polyc.errors import IllegalScheduleError
from polyc.schedule import gpu_marks, gpu_rows, gpu_verify
from polyc.testing import assert_close

MODES = {"forward": {}, "reverse": {"emulate_reverse": True}, "checks": {"emulate_checks": True}}

SOFTMAX = """def softmax(float(N, C) I) -> (O, mx, e, s) {
    mx(n) max=! I(n, c)
    e(n, c) = exp(I(n, c) - mx(n))
    s(n) +=! e(n, c)
    O(n, c) = e(n, c) / s(n)
}"""

LAYERNORM = """def layernorm(float(N, C) X, float(C) g, float(C) b) -> (Y, mu, var) {
    mu(n) +=! X(n, c)
    mu(n) = mu(n) / C
    var(n) +=! (X(n, c) - mu(n)) * (X(n, c) - mu(n))
    var(n) = var(n) / C
    Y(n, c) = (X(n, c) - mu(n)) * rsqrt(var(n) + 1e-5) * g(c) + b(c)
}"""

GROUPNORM = """def gn(float(N, G, D, W) I) -> (O, mean, sq) {
    mean(n, g) +=! I(n, g, r_d, r_w)
    sq(n, g) +=! I(n, g, r_d, r_w) * I(n, g, r_d, r_w)
    mean(n, g) = mean(n, g) / (D * W)
    sq(n, g) = sq(n, g) / (D * W) - mean(n, g) * mean(n, g)
    O(n, g, d, w) = (I(n, g, d, w) - mean(n, g)) * rsqrt(sq(n, g) + 1e-5)
}"""

ATTENTION_SOFTMAX = """def attn(float(B, H, Q, K) S) -> (P, mx, s) {
    mx(b, h, q) max=! S(b, h, q, k)
    s(b, h, q) +=! exp(S(b, h, q, k) - mx(b, h, q))
    P(b, h, q, k) = exp(S(b, h, q, k) - mx(b, h, q)) / s(b, h, q)
}"""


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def _groupnorm(x):
    mu = x.mean((-2, -1), keepdims=True)
    var = (x * x).mean((-2, -1), keepdims=True) - mu * mu
    return (x - mu) / np.sqrt(var + 1e-5)


#: name: (source, row members, barriers, block reductions, input shapes of
#: sizes, reference of the first output)
CASES = {
    "softmax": (SOFTMAX, 1, 2, 2, lambda n, c: [(n, c)], lambda x: _softmax(x)),
    "layernorm": (LAYERNORM, 1, 2, 2, lambda n, c: [(n, c), (c,), (c,)], _layernorm),
    "groupnorm": (GROUPNORM, 2, 1, 2, lambda n, c: [(n, 3, 2, c)], _groupnorm),
    "attention": (ATTENTION_SOFTMAX, 3, 2, 2, lambda n, c: [(2, 2, n, c)], _softmax),
}
#: (rows, row length): ones, primes, a row longer than a block (threads
#: stride), more rows than the emulated grid is wide
SIZES = [(1, 1), (3, 7), (5, 300), (13, 33)]


def emulated(**kw) -> Config:
    return Config.from_env(target="cuda", emulate=True, **kw)


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", CASES)
def test_row_programs_run_one_block_per_row(name, mode):
    src, members, n_barriers, n_reduce, shapes, ref = CASES[name]
    k = polyc.compile(src, config=emulated(**MODES[mode]))
    (m,) = k.kernels
    assert m.rows and m.n_block == members
    assert len(m.barriers) == n_barriers
    assert sum(p.startswith("reduce") for p in m.rows) == n_reduce
    for n, c in SIZES:
        args = _inputs(shapes(n, c))
        got = k(*args)
        want = ref(*(a.astype(np.float64) for a in args))
        assert_close(got[0], want, dtype="float32", reduction_length=c,
                     name=f"{name} {mode} at {n} x {c}")


def test_barriers_only_where_a_dependence_crosses_threads():
    """Softmax: the maximum's store (thread 0) is read by every thread of
    the next phase (barrier), the exponentials are summed by the threads
    that wrote them (no barrier), the sum's store is read by every thread
    (barrier); the initialisations run on thread 0, as the stores."""
    k = polyc.compile(SOFTMAX, config=emulated())
    (m,) = k.kernels
    assert m.rows == ("thread0", "reduce S0", "threads", "thread0", "reduce S2", "threads")
    assert [b.split(":")[0] for b in m.barriers] == ["before S1", "before S3"]
    assert "flow dependence on mx from S0 to S1" in m.barriers[0]
    assert "flow dependence on s from S2 to S3" in m.barriers[1]
    text = k.explain()
    assert "one block per row" in text and "barrier before S1" in text
    gpu = k.explain(json=True)["gpu"]["kernels"][0]
    assert gpu["phases"] == list(m.rows) and gpu["barriers"] == list(m.barriers)
    src = polyc.compile(SOFTMAX, config=Config(target="cuda")).cuda_source
    assert src.count("__syncthreads()") == 2 + 2 * 2      # 2 barriers, 2 per block tree
    assert src.count("__shfl_down_sync") == 2 * 2


def _lowered(src: str):
    prog = parse_program(src)
    return gpu_pipeline.lower_gpu(prog, Config(target="cuda"))


def _without(schedule, pred):
    """``schedule`` with the mark nodes ``pred`` accepts deleted."""
    def go(node):
        if node.get_type() == node.get_type().mark and pred(node.mark_get_id().get_name()):
            node = node.delete()
            return go(node)
        for i in range(node.n_children()):
            node = go(node.child(i)).parent()
        return node
    return go(schedule.get_root()).get_schedule()


def test_the_proof_refuses_a_dropped_barrier_with_a_witness():
    low = _lowered(SOFTMAX)
    gpu_verify.verify(low.mapped, list(low.kernels), low.deps, low.program)
    for dropped in (gpu_marks.Barrier(0, 0), gpu_marks.Barrier(0, 1)):
        bad = _without(low.mapped, lambda name: gpu_marks.parse(name) == dropped)
        with pytest.raises(IllegalScheduleError, match="with no barrier between") as e:
            gpu_verify.verify(bad, list(low.kernels), low.deps, low.program)
        assert e.value.witness is not None and e.value.witness.kind == "flow"
        assert e.value.witness.tensor == ("mx" if dropped.number == 0 else "s")


def test_the_proof_refuses_a_barrier_that_not_every_thread_reaches():
    low = _lowered(SOFTMAX)

    def go(node):
        if isinstance(gpu_marks.of(node), gpu_marks.Threads):
            # a barrier below the loop on the threads
            return node.child(0).child(0).insert_mark(
                gpu_marks.Barrier(0, 9).id()).parent().parent()
        for i in range(node.n_children()):
            node = go(node.child(i)).parent()
        return node
    bad = go(low.mapped.get_root()).get_schedule()
    with pytest.raises(IllegalScheduleError, match="every thread of the block"):
        gpu_verify.verify(bad, list(low.kernels), low.deps, low.program)


def test_the_instrumented_emulator_sees_the_race_a_missing_barrier_leaves(monkeypatch):
    """Barriers switched off and the proof with them: thread 0 stores the
    row maximum while the other threads of its block read it, and the
    instrumented emulator reports the race (the barriers it honours when
    they are there: the same run with them reports nothing)."""
    k = polyc.compile(SOFTMAX, config=emulated(emulate_checks=True))
    x = _inputs([(3, 70)])[0]
    assert_close(k(x)[0], _softmax(x.astype(np.float64)), dtype="float32",
                 reduction_length=70)
    monkeypatch.setattr(gpu_rows, "barriers", lambda *a, **kw: [])
    monkeypatch.setattr(gpu_pipeline.gpu_verify, "verify", lambda *a, **kw: None)
    bad = polyc.compile(SOFTMAX, config=emulated(emulate_checks=True, gpu_block=(64,)))
    with pytest.raises(IllegalScheduleError, match="race on"):
        bad(x)


def test_row_kernels_can_be_turned_off():
    """``Config(gpu_rows=False)`` (``POLYC_GPU_ROWS=0``): the ordinary
    mapping, a kernel per nest, proved and correct."""
    off = polyc.compile(SOFTMAX, config=emulated(gpu_rows=False))
    assert not any(m.rows for m in off.kernels) and len(off.kernels) > 1
    x = _inputs([(4, 50)])[0]
    assert_close(off(x)[0], _softmax(x.astype(np.float64)), dtype="float32",
                 reduction_length=50)


def test_row_kernels_map_at_most_three_row_loops():
    src = """def r(float(A, B, C, D, E) X) -> (s, Y) {
        s(a, b, c, d) +=! X(a, b, c, d, e)
        Y(a, b, c, d, e) = X(a, b, c, d, e) - s(a, b, c, d)
    }"""
    k = polyc.compile(src, config=emulated())
    assert not any(m.rows for m in k.kernels)
    x = _inputs([(2, 3, 2, 2, 5)])[0]
    got = k(x)[1]
    np.testing.assert_allclose(got, x - x.sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op, ref", [("+", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_block_reductions_of_every_operator(op, ref, dtype):
    """Each operator's identity, combination and tree, and integer
    accumulators, against numpy (exact for integers)."""
    src = f"""def r({dtype}(N, C) A) -> (s, Y) {{
        s(n) {op}=! A(n, c)
        Y(n, c) = A(n, c) - s(n)
    }}"""
    k = polyc.compile(src, config=emulated(emulate_checks=True))
    assert k.kernels[0].rows == ("thread0", "reduce S0", "threads")
    rng = np.random.default_rng(3)
    for n, c in SIZES:
        a = rng.integers(-50, 50, (n, c)).astype(dtype)
        s, y = k(a)
        want = ref(a.astype(np.float64), axis=1)
        np.testing.assert_allclose(s, want, rtol=1e-12)
        np.testing.assert_allclose(y, a - want[:, None], rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_rows_of_no_element_still_initialise_their_sums(mode):
    """A row kernel over rows of length 0: the launch has one thread per
    block, not none, so the phases on thread 0 (a sum's initialisation to
    0) still run.  It was launched with 0 threads, that is not at all, and
    left its outputs as they were (NaN in a NaN-filled ``out=``)."""
    k = polyc.compile(LAYERNORM, config=emulated(**MODES[mode]))
    assert k.kernels[0].rows
    for c in (0, 1, 7):
        x, g, b = _inputs([(5, c), (c,), (c,)])
        out = (np.full((5, c), np.nan, np.float32), np.full(5, np.nan, np.float32),
               np.full(5, np.nan, np.float32))
        y, mu, var = k(x, g, b, out=out)
        with np.errstate(invalid="ignore", divide="ignore"):
            want_mu = x.astype(np.float64).sum(1) / c
        np.testing.assert_allclose(mu, want_mu, rtol=1e-5, atol=1e-6)
        if c == 0:                    # 0 / 0: NaN, as numpy gives, not the NaN of out=
            assert np.isnan(mu).all() and y.shape == (5, 0)
    s = polyc.compile("def s(float(N, C) A) -> (t) { t(n) +=! A(n, c) }",
                      config=emulated(**MODES[mode]))
    assert s.kernels[0].rows
    t = s(np.zeros((4, 0), np.float32), out=np.full(4, np.nan, np.float32))
    np.testing.assert_array_equal(t, np.zeros(4, np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_a_reduction_over_loops_in_the_order_of_its_terms(mode):
    """``o(i) +=! A(j, i) * B(k, i, j)``: ``j`` walks both operands with
    stride 1, but its band (j, k) is not permutable (the terms of the sum
    run in source order), so ``k`` goes on the threads and the loops keep
    their order.  Moving ``j`` innermost made the mapped schedule fail its
    own legality check: an IllegalScheduleError for a correct program."""
    src = "def f(double(J, I) A, double(K, I, J) B) -> (o) { o(i) +=! A(j, i) * B(k, i, j) }"
    k = polyc.compile(src, config=emulated(**MODES[mode]))
    (m,) = k.kernels
    assert m.rows == ("thread0", "reduce S0")
    rng = np.random.default_rng(5)
    for j, i, kk in ((16, 3, 7), (1, 1, 1), (5, 2, 300)):
        a, b = rng.standard_normal((j, i)), rng.standard_normal((kk, i, j))
        assert_close(k(a, b), np.einsum("ji,kij->i", a, b), dtype="float64",
                     reduction_length=j * kk)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_row_kernels_of_other_types(dtype):
    src = SOFTMAX.replace("float(N, C)", f"{dtype}(N, C)")
    k = polyc.compile(src, config=emulated(emulate_checks=True))
    assert k.kernels[0].rows
    x = _inputs([(6, 45)])[0].astype(dtype)
    assert_close(k(x)[0], _softmax(x.astype(np.float64)), dtype=dtype, reduction_length=45)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", CASES)
def test_row_kernels_compile_with_nvcc(name):
    """The block trees' shuffles and shared arrays and the barriers compile
    for sm_80 and sm_90, within what a block of 256 threads may use."""
    from polyc.backends.cuda.build import MAX_REGISTERS, REGISTERS_PER_BLOCK, build_cubin
    k = polyc.compile(CASES[name][0], config=emulated())
    threads = {n: s.threads for n, s in k.cuda.launches.items()}
    for arch in ("sm_80", "sm_90"):
        built = build_cubin(k.cuda_source, config=k.config, arch=arch, threads=threads)
        for launch, r in built.resources.items():
            assert 0 < r.registers <= MAX_REGISTERS
            assert r.registers * threads[launch] <= REGISTERS_PER_BLOCK


# ------------------------------------------------------------ phases mapped by hand

def _by_hand(src: str, tensors, sizes=None):
    """The rows of ``tensors``' nests fused, on blocks; loop ``c`` of each on
    threads."""
    s = polyc.Schedule.from_program(polyc.program(src), start="source")
    s = s.fuse(*tensors).map_to_blocks([(tensors[0], "n")])
    for t in tensors:
        s = s.map_to_threads([(t, "c")], sizes=sizes)
    return s


@pytest.mark.parametrize("mode", MODES)
def test_softmax_mapped_by_hand_in_phases(mode):
    """``fuse`` the rows, ``map_to_blocks`` them, ``map_to_threads`` one loop
    of each nest: the reductions become block reductions and the barriers
    are placed as in the automatic row kernel."""
    s = _by_hand(SOFTMAX, ["mx", "e", "s", "O"], sizes=[128])
    k = polyc.compile(SOFTMAX, schedule=s, config=emulated(**MODES[mode]))
    (m,) = k.kernels
    assert m.user and m.tile == (128,)
    assert m.rows == ("thread0", "reduce S0", "threads", "thread0", "reduce S2", "threads")
    assert [b.split(":")[0] for b in m.barriers] == ["before S1", "before S3"]
    assert "phases of a block mapped by the schedule" in k.explain()
    for n, c in SIZES:
        x = _inputs([(n, c)])[0]
        assert_close(k(x)[0], _softmax(x.astype(np.float64)), dtype="float32",
                     reduction_length=c, name=f"softmax by hand at {n} x {c}")


def test_a_phase_mapped_alone_is_checked_step_by_step():
    """Each step is checked: one reduction phase on the threads is a block
    reduction (legal), the schedule's other nests stay on thread 0."""
    s = polyc.Schedule.from_program(polyc.program(SOFTMAX), start="source")
    s = s.fuse("mx", "e", "s", "O").map_to_blocks([("mx", "n")])
    s = s.map_to_threads([("e", "c")])
    k = polyc.compile(SOFTMAX, schedule=s, config=emulated(emulate_checks=True))
    assert k.kernels[0].rows == ("thread0", "thread0", "threads", "thread0", "thread0",
                                 "thread0")
    x = _inputs([(3, 40)])[0]
    assert_close(k(x)[0], _softmax(x.astype(np.float64)), dtype="float32", reduction_length=40)


def test_a_phase_whose_thread_loop_carries_a_dependence_is_refused():
    """A reduction into several elements per block cannot be reduced by the
    block: the mapping is refused with the dependence and a witness, and
    the schedule is unchanged."""
    src = """def r(float(N, C) A, float(C, K) B) -> (t, y) {
        t(n, k) = 0.0 where n in 0:N, k in 0:K
        t(n, k) += A(n, c) * B(c, k)
        y(n, c) = A(n, c) * 2.0
    }"""
    s = polyc.Schedule.from_program(polyc.program(src), start="source")
    s = s.fuse(("S0", "n"), ("S1", "n"), ("S2", "n")).map_to_blocks([("S0", "n")])
    before = s.to_text()
    with pytest.raises(IllegalScheduleError, match="joins two threads of one phase") as e:
        s.map_to_threads([("S1", "c")])
    assert e.value.witness is not None and e.value.witness.tensor == "t"
    assert s.to_text() == before
    # another phase's parallel loop maps, and runs with the rest on thread 0
    ok = s.map_to_threads([("S2", "c")])
    k = polyc.compile(src, schedule=ok, config=emulated(emulate_checks=True))
    assert k.kernels[0].rows == ("thread0", "thread0", "threads")
    a, b = _inputs([(3, 20), (20, 4)])
    t, y = k(a, b)
    np.testing.assert_allclose(t, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, a * 2, rtol=1e-6)


def test_numpy_softmax_and_layernorm_through_the_graph_layer_are_row_kernels():
    """``polyc.jit`` over plain numpy (``keepdims`` reductions: a parallel
    member of one value beside the reduced one) gives one row kernel whose
    reductions are block reductions."""
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layernorm(x, g, b):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b

    cfg = emulated(emulate_checks=True)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 300)).astype(np.float32)
    g, b = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    for fn, args in ((softmax, (x,)), (layernorm, (x, g, b))):
        j = polyc.jit(fn, config=cfg)
        assert_close(j(*args), fn(*(a.astype(np.float64) for a in args)), dtype="float32",
                     reduction_length=300, name=fn.__name__)
        (kernel,) = j.plan(*args).kernels
        (m,) = kernel.kernels
        assert sum(p.startswith("reduce") for p in m.rows) == 2, (fn.__name__, m.rows)


def test_phases_map_one_loop_each():
    """Two loops of one phase on threads (a 2-D thread band) beside another
    phase's: refused, since a block has one shape for all its phases."""
    src = """def two(float(N, C, D) A) -> (B, E) {
        B(n, c, d) = A(n, c, d) * 2.0
        E(n, c, d) = A(n, c, d) + 1.0
    }"""
    s = polyc.Schedule.from_program(polyc.program(src), start="source")
    s = s.fuse(("S0", "n"), ("S1", "n")).map_to_blocks([("S0", "n")])
    s = s.map_to_threads([("S0", "c"), ("S0", "d")])
    with pytest.raises(IllegalScheduleError, match="map one loop each to threads"):
        s.map_to_threads([("S1", "d")])


def test_a_row_block_over_1024_threads_names_the_setting():
    """``Config.gpu_block`` of 2000 threads: the row kernel's refusal said
    only '2000 threads per block (at most 1024)'; it names the setting."""
    with pytest.raises(IllegalScheduleError, match="2000 threads per block.*Config.gpu_block"):
        polyc.compile(SOFTMAX, config=emulated(gpu_block=(2000,)))
