"""The automatic schedule of a tensorized program is a recipe of the source
program with steps (:mod:`polyc.schedule.tensorize_recipe`): it starts from
isl's tree with the groups' loops unmarked, tensorizes each group with the
schedule language's ``tensorize`` step, then applies the band
optimisation's steps; it replays onto the source program to byte-identical
C, and the tuner perturbs its knobs like any automatic recipe's."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.errors import ScheduleError
from polyc.pipeline import compile_program, compile_schedule, lower
from polyc.schedule import tensorize as T
from polyc.schedule import tensorize_recipe as R
from polyc.schedule.language import Schedule
from polyc.tune import autorecipe
from polyc.tune.space import Refused

from .test_tensorize_mark import AUTOMATIC, MLP
from .util import MATMUL, check, program

BLAS = ["gemm", "2mm", "3mm", "syrk", "syr2k", "symm", "trmm", "doitgen"]


def _ops(s: Schedule) -> list[str]:
    return [st["op"] for st in s.recipe]


def _assert_tensorized_recipe(kernel, source_program):
    """The kernel's recipe: an unmarked start tree, one tensorize step per
    mark first, and a byte-identical replay."""
    s = kernel.schedule
    rec = s.to_recipe()
    n_marks = len(T.marks(s.isl))
    assert n_marks >= 1
    assert "tensorize:" not in rec["tree"], "the start tree is already marked"
    assert _ops(s)[:n_marks] == ["tensorize"] * n_marks
    assert "tensorize" not in _ops(s)[n_marks:]
    replayed = Schedule.replay(source_program, rec)
    assert replayed.to_text() == s.to_text()
    assert compile_schedule(replayed, kernel.config).source == kernel.source
    return s


@pytest.mark.parametrize("src", AUTOMATIC, ids=lambda s: s.split("(")[0][4:])
def test_tc_kernels_have_a_recipe_with_tensorize_steps(src):
    p = program(src)
    _assert_tensorized_recipe(compile_program(p), p)


@pytest.mark.parametrize("name", BLAS)
def test_polybench_blas_kernels_have_a_recipe_with_tensorize_steps(name):
    b = BENCHMARKS[name]
    k = b.kernel.specialize(*b.init(b.sizes["MINI"]))
    assert "polyc_gemm" in k.source
    _assert_tensorized_recipe(k, k.program)


def test_row_blocked_triangles_keep_their_distribution_as_steps():
    b = BENCHMARKS["syrk"]
    kern = b.kernel.with_config(polyc.Config(triangle_rows=28))
    k = kern.specialize(*b.init(b.sizes["MINI"]))
    s = _assert_tensorized_recipe(k, k.program)
    assert {"distribute", "tile"} <= set(_ops(s))
    assert s.recipe[0]["kwargs"] == {"rows": 28}


def test_trmm_recipe_reads_its_assignment_as_an_update_on_replay():
    b = BENCHMARKS["trmm"]
    k = b.kernel.specialize(*b.init(b.sizes["MINI"]))
    rec = k.schedule.to_recipe()
    # the loop program writes B = B + A * B; the recipe's program reads it as +=
    assert rec["updates"] and all(k.program.statement(x).kind == "assign"
                                  for x in rec["updates"])
    assert compile_schedule(Schedule.replay(k.program, rec)).source == k.source
    bad = dict(rec, updates="S1")
    with pytest.raises(ScheduleError, match="'updates' must be a list"):
        Schedule.replay(k.program, bad)
    without = {x: v for x, v in rec.items() if x != "updates"}
    with pytest.raises(ScheduleError, match="fingerprint"):
        Schedule.replay(k.program, without)


def test_the_tuner_perturbs_a_tensorized_kernels_knobs():
    p = program(MLP)
    rec = autorecipe.automatic(p, polyc.Config())
    assert rec is not None and rec["steps"][0]["op"] == "tensorize"
    near = autorecipe.neighbours(rec)
    assert any("->" in label for label, _ in near)
    built = 0
    for label, r in near:
        try:
            s = autorecipe.build(p, r)
        except Refused:
            continue
        assert T.marks(s.isl) or label.startswith("auto recipe: tensorize("), label
        check(s, dict(M=37, K=29, N=41))
        built += 1
    assert built >= 2


def test_a_recipe_that_does_not_rebuild_the_code_is_not_shown():
    """The kernel keeps the marked tree as its recipe's start when the steps
    do not rebuild the tree, or the loop nest, the code came from."""
    p = program(MLP)
    low = lower(p)
    auto, source, matches, parallel, code_tree, nest = low.auto.args
    deps = low.schedule_view()[2]
    assert R.source_schedule(auto, source, matches, parallel, code_tree, deps)
    other = lower(p, polyc.Config(tensorize=False))
    assert R.source_schedule(auto, source, matches, parallel, other.schedule, deps) is None
    assert low.auto.func(auto, source, matches, parallel, code_tree, nest, deps)
    assert low.auto.func(auto, source, matches, parallel, code_tree, other.loopnest,
                         deps) is None
    assert low.auto_schedule() is not None


def test_same_tree_ignores_redundant_constraints_and_names_only():
    s = Schedule.from_program(program(MLP)).tile([("C", "m"), ("C", "n")], [8, 8])
    tree = s.isl
    assert R.same_tree(tree, tree)
    # the tile band's schedule simplified on its instances: another text,
    # the same schedule
    node = T.tree.node_at(tree, s.loop("C", "m_tile").path)
    mupa = node.band_get_partial_schedule().gist(node.get_domain())
    other = node.delete().insert_partial_schedule(mupa)
    other = other.band_set_permutable(node.band_get_permutable())
    for i in range(node.band_n_member()):
        other = other.band_member_set_coincident(i, node.band_member_get_coincident(i))
    other = other.get_schedule()
    assert other.to_str() != tree.to_str()
    assert R.same_tree(tree, other)
    # a mark, or another order, is another tree
    assert not R.same_tree(tree, s.mark(("C", "m_tile"), "parallel").isl)
    assert not R.same_tree(tree, Schedule.from_program(program(MLP)).isl)


def test_tensorized_kernels_run_from_their_recipe():
    src = MLP
    k = polyc.compile(src)
    rec = k.schedule.to_json()
    again = polyc.compile(src, schedule=rec)
    assert again.source == k.source
    rng = np.random.default_rng(0)
    A = rng.standard_normal((9, 7)).astype(np.float32)
    B = rng.standard_normal((7, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    C, D = again(A, B, b)
    np.testing.assert_allclose(D, np.maximum(A @ B + b, 0), rtol=1e-4, atol=1e-5)


def test_cli_emits_the_tensorized_recipe_and_compiles_it_back(tmp_path, capsys):
    from polyc.cli import main
    src = tmp_path / "mlp.tc"
    src.write_text("# sizes: M=33 K=20 N=17\n" + MLP + "\n")
    assert main(["compile", str(src), "--emit", "recipe"]) == 0
    text = capsys.readouterr().out
    data = json.loads(text)
    assert data["steps"][0]["op"] == "tensorize" and "tensorize:" not in data["tree"]
    path = tmp_path / "auto.json"
    path.write_text(text)
    assert main(["compile", str(src), "--emit", "c"]) == 0
    auto_c = capsys.readouterr().out
    assert main(["compile", str(src), "--emit", "c", "--schedule", str(path)]) == 0
    assert capsys.readouterr().out == auto_c and "polyc_gemm" in auto_c
    assert main(["run", str(src), "--schedule", str(path), "--check"]) == 0


ATT = ("def att(float(B, M, D) Q, float(B, N, D) K, float(B, N, E) V) -> (S, mx, P, O) {\n"
       "  S(b, i, j) +=! Q(b, i, d) * K(b, j, d)\n"
       "  mx(b, i) max=! S(b, i, j)\n"
       "  P(b, i, j) = exp(S(b, i, j) - mx(b, i))\n"
       "  O(b, i, e) +=! P(b, i, j) * V(b, j, e)\n}")


def test_the_rows_per_call_and_the_call_itself_are_knobs():
    p = program(ATT)
    rec = autorecipe.automatic(p, polyc.Config())
    first = rec["steps"][0]
    assert first["op"] == "tensorize" and first["kwargs"]["rows"] > 1
    rows = first["kwargs"]["rows"]
    near = dict(autorecipe.neighbours(rec))
    halved = [r for label, r in near.items() if f"rows {rows} -> {rows // 2}" in label]
    dropped = [r for label, r in near.items() if "tensorize(" in label and "dropped" in label]
    assert halved and dropped
    sizes = dict(B=2, M=2 * rows + 3, D=5, N=11, E=6)
    # half the rows per call still fits the row tile above the calls
    s = autorecipe.build(p, halved[0])
    assert f"tensorize:gemm:S0:{rows // 2}" in str(s)
    check(s, sizes)
    # doubling them does not: the tile above would split a call
    doubled = [r for label, r in near.items() if f"rows {rows} -> {rows * 2}" in label]
    with pytest.raises(Refused):
        autorecipe.build(p, doubled[0])
    # without a tensorize step the group keeps its loops
    s = autorecipe.build(p, dropped[0])
    assert len(T.marks(s.isl)) == 1
    check(s, sizes)


TRIANGLE = """
def tri(float(N, N) A, float(N, M) B) -> (C) {
    C(i, j) +=! k <= i ? A(i, k) * B(k, j) : 0.0
}
"""


def test_the_schedule_of_a_guarded_product_compiles_again():
    # the mark of C += (k <= i ? A * B : 0) was checked against the select
    # when the kernel's schedule or recipe was compiled again: "the mark
    # tensorize:gemm:S0 no longer holds: ... not a product of two tensor
    # elements"
    k = polyc.compile(TRIANGLE)
    assert "gemm" in k.source
    for schedule in (k.schedule, k.schedule.to_recipe()):
        assert polyc.compile(TRIANGLE, schedule=schedule).source == k.source
    check(k.schedule, dict(N=37, M=5))


def test_distributing_a_tensorized_band_keeps_the_call_with_its_statement():
    # distribute(C.m) on a kernel's schedule copied the mark tensorize:gemm:S0
    # above S0_init alone, refused when compiled ("not a += reduction")
    k = polyc.compile(MATMUL)
    s = k.schedule.distribute(("C", "m"))
    assert [p[2] for p in T.marks(s.isl)] == ["S0"]
    assert "gemm" in polyc.compile(MATMUL, schedule=s).source
    check(s, dict(M=33, N=21, K=17))
