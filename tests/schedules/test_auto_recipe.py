"""The automatic schedule is a schedule-language recipe (issue 17, item 0):
the automatic pipeline applies registered transformations, so a compiled
kernel's ``schedule.to_recipe()`` lists its knobs (tile sizes, order, marks)
and replays to the same code; the tuner perturbs those knobs."""

import numpy as np
import pytest

import polyc
from polyc.errors import ScheduleError
from polyc.schedule.language import Schedule
from polyc.tune import autorecipe
from polyc.tune.space import Refused

from .util import MATMUL, PRODUCER_CONSUMER, STENCIL, check, program

NT = polyc.Config(tensorize=False)
MM_NT = "def mmt(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }"
MV = "def mv(float(M,K) A, float(K) x) -> (y) { y(m) +=! A(m,k) * x(k) }"


def ops(schedule) -> list[str]:
    return [st["op"] for st in schedule.recipe]


@pytest.mark.parametrize("src", [MATMUL, STENCIL, PRODUCER_CONSUMER, MM_NT, MV],
                         ids=["matmul", "stencil", "pc", "mm_nt", "mv"])
def test_kernel_schedule_is_its_recipe_and_replays_to_the_same_code(src):
    k = polyc.compile(src, config=NT)
    s = k.schedule
    assert s.recipe, "the automatic schedule has no steps"
    rec = s.to_recipe()
    assert "tree" in rec and rec["steps"] == [dict(x) for x in s.recipe]
    replayed = Schedule.replay(program(src), rec)
    assert replayed.to_text() == s.to_text()
    assert polyc.compile(src, schedule=rec, config=NT).source == k.source


def test_matmul_recipe_names_its_knobs():
    s = polyc.compile(MATMUL, config=NT).schedule
    assert ops(s) == ["reorder", "tile", "vectorize", "mark"]
    reorder, tile, vec, par = s.recipe
    assert reorder["args"] == [[["S0", "k"], ["S0", "n"]]]      # n innermost: stride 1
    assert tile["args"][0] == [["S0", "m"], ["S0", "k"], ["S0", "n"]]
    assert len(set(tile["args"][1])) == 1 and tile["args"][1][0] % 16 == 0
    assert vec["args"] == [["S0", "n"]]
    assert par["args"] == [["S0", "m_tile"], "parallel"]


def test_recipe_follows_the_config():
    steps = lambda **kw: polyc.compile(MATMUL, config=NT.replace(**kw)).schedule.recipe  # noqa: E731
    assert [st["args"][1] for st in steps(tile_sizes=(16, 8)) if st["op"] == "tile"] == \
        [[16, 8, 8]]
    assert "tile" not in [st["op"] for st in steps(tiling=False)]
    assert "vectorize" not in [st["op"] for st in steps(simd=False)]
    assert "mark" not in [st["op"] for st in steps(parallel=False)]


def test_reduction_distribution_and_register_reduction_are_steps():
    s = polyc.compile(MM_NT, config=NT).schedule
    assert ops(s)[:2] == ["distribute", "mark"]
    assert s.recipe[0]["args"] == [["S0", "k"], ["S0_init"], ["S0"]]
    assert s.recipe[1]["args"] == [["S0", "k"], "vector_reduction"]
    check(s, dict(M=9, N=70, K=67))
    assert ops(polyc.compile(MV, config=NT).schedule) == ["mark", "mark"]


def test_time_tiled_stencil_recipe_has_a_wavefront():
    from benchmarks.polybench import BENCHMARKS
    b = BENCHMARKS["jacobi-1d"]
    k = polyc.kernel(b.kernel.py_func, config=polyc.Config(time_tiling=True))
    args = b.init(b.sizes["MINI"])
    kernel = k.specialize(*args)
    s = kernel.schedule
    assert ops(s) == ["tile", "wavefront", "mark"]
    got = b.init(b.sizes["MINI"])
    kernel(*got)
    want = b.init(b.sizes["MINI"])
    b.reference(*want)
    for i in b.outputs:
        np.testing.assert_allclose(got[i], want[i], rtol=1e-12, atol=1e-12)
    # without the wavefront, the parallel mark on the tile loop breaks a
    # dependence: the perturbed recipe is refused before anything compiles
    rec = s.to_recipe()
    rec["steps"] = [st for st in rec["steps"] if st["op"] != "wavefront"]
    with pytest.raises(Refused) as e:
        autorecipe.build(s._base, rec)
    assert e.value.kind == "illegal" and "dependence" in e.value.reason


def test_neighbours_change_one_knob_and_compute_the_same():
    k = polyc.compile(MATMUL, config=NT)
    rec = k.schedule.to_recipe()
    near = autorecipe.neighbours(rec)
    labels = [label for label, _ in near]
    assert any("->" in x for x in labels) and any("dropped" in x for x in labels)
    tile_at = [i for i, st in enumerate(rec["steps"]) if st["op"] == "tile"][0]
    base_sizes = rec["steps"][tile_at]["args"][1]
    for label, r in near:
        changed = [i for i, (a, b) in enumerate(zip(rec["steps"], r["steps"])) if a != b]
        assert len(r["steps"]) == len(rec["steps"]) - 1 or len(changed) == 1, label
        if "->" in label:
            assert r["steps"][tile_at]["args"][1] != base_sizes
    built = 0
    for label, r in near[:4]:
        try:
            s = autorecipe.build(program(MATMUL), r)
        except Refused:
            continue
        check(s, dict(M=70, N=67, K=65))
        built += 1
    assert built >= 2


def test_sink_moves_the_stride_loop_under_the_reduction():
    s = Schedule.from_program(program(MATMUL)).sink(("C", "n"))
    text = s.loop_nest()
    assert text.index("for (k") < text.rindex("for (n")
    check(s, dict(M=5, N=9, K=4))
    tiled = Schedule.from_program(program(MATMUL)).tile([("C", "m"), ("C", "n")], [4, 4])
    with pytest.raises(ScheduleError, match="innermost loop of its band"):
        tiled.sink(("C", "m_tile"))


def test_explain_lists_the_recipe():
    k = polyc.compile(MATMUL, config=NT)
    data = k.explain(json=True)
    assert data["steps"][1].startswith("tile([S0.m, S0.k, S0.n], [")
    assert data["steps"][-1] == "mark(S0.m_tile, 'parallel')"
    text = k.explain()
    assert "recipe (4 step(s)" in text and "    3. vectorize(S0.n)" in text


@polyc.kernel
def _row_norms(A, y):
    n, m = A.shape
    for i in range(n):
        t = 0.0
        for j in range(m):
            t += A[i, j] * A[i, j]
        y[i] = t + 1.0


def test_recipe_of_an_array_contracted_kernel_replays_to_the_same_code():
    """The expanded scalar ``t`` is contracted back to a scalar of loop i:
    the kernel's recipe is that of the source program (its fingerprint was
    the contracted program's, so replaying it onto the source was refused),
    and compiling it contracts ``t`` again: the same code."""
    from polyc.pipeline import compile_schedule
    a, y = np.arange(12.0).reshape(3, 4), np.zeros(3)
    k = _row_norms.specialize(a, y)
    assert "t_c" in k.source and "array contraction" in k.explain()
    rec = k.schedule.to_recipe()
    replayed = compile_schedule(Schedule.replay(k.program, rec), k.config)
    assert replayed.source == k.source
    assert "array contraction" in replayed.explain()
    replayed(a, y)
    np.testing.assert_allclose(y, (a * a).sum(axis=1) + 1.0)


OUTER = "def outer(float(N) a, float(M) b) -> (D) { D(i, j) = fabs(a(i) - b(j)) }"


@pytest.mark.parametrize("step", [
    lambda s: s.parallel(("D", "j_tile")),
    lambda s: s.split(("D", "j_tile"), 2),
    lambda s: s.tile([("D", "i_tile")], [2]),
    lambda s: s.unroll(("D", "j_tile"), 2),
], ids=["parallel", "split", "tile", "unroll"])
def test_transforming_a_member_of_a_collapsed_parallel_band(step):
    # the automatic schedule runs the tile band (i_tile, j_tile) as one
    # collapse(2) parallel loop; splitting that band left the mark above one
    # loop, refused as "illegal: mark parallel_collapse2 asks for 2 collapsed
    # loops but the band below has 1"
    s = polyc.compile(OUTER).schedule
    assert "collapse(2)" in s.loop_nest()
    s2 = step(s)
    assert "collapse(2)" not in s2.loop_nest()
    check(s2, dict(N=70, M=90))


def test_a_dropped_tile_step_moves_the_parallel_mark_to_the_loop_it_tiled():
    """Without its tile step, the recipe's ``mark(S0.m_tile, "parallel")``
    named a loop that no longer exists, so the "tile dropped" neighbour was
    always refused as inapplicable; the mark now goes to ``m``."""
    k = polyc.compile(MATMUL, config=NT)
    rec = k.schedule.to_recipe()
    assert any(st["op"] == "mark" and "_tile" in st["args"][0][1] for st in rec["steps"])
    ((label, r),) = [(lb, r) for lb, r in autorecipe.neighbours(rec)
                     if lb.startswith("auto recipe: tile(") and lb.endswith("dropped")]
    assert not any(st["op"] == "tile" for st in r["steps"])
    marks = [st for st in r["steps"] if st["op"] == "mark"]
    assert marks and all("_tile" not in st["args"][0][1] for st in marks)
    s = autorecipe.build(program(MATMUL), r)         # (was Refused: no loop 'm_tile')
    assert "parallel" in s.loop_nest()
    for sizes in (dict(M=1, N=1, K=1), dict(M=33, N=17, K=31), dict(M=64, N=65, K=63)):
        check(s, sizes)
