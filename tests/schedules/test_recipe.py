"""Recipes and text forms of schedules.

For every transformation of :data:`polyc.schedule.language.METHODS` (a case
is skipped while its transformation is not registered yet): the recipe
replays to the same tree (``to_text()``) and byte-identical generated
source, from a dict, its JSON text and a ``.json`` file
(``polyc.compile(src, schedule=path)``); the isl text form round-trips
(``from_text(to_text())``).  A recipe made for another program, and
malformed recipes, are refused with a :class:`~polyc.errors.ScheduleError`
naming the culprit.  The schedule of an automatically compiled kernel
prints, can be transformed further and replays too.
"""

from __future__ import annotations

import json

import islpy as isl
import pytest

import polyc
from polyc import pipeline
from polyc.backends.c import emit
from polyc.errors import IllegalScheduleError, ScheduleError
from polyc.schedule.language import METHODS, TRANSFORMS, Schedule

from .util import MATMUL, PRODUCER_CONSUMER, STENCIL, check, program, start


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

ADD3 = """
def add3(float(B, M, N) X, float(B, M, N) Y) -> (Z) {
    Z(b, m, n) = X(b, m, n) + Y(b, m, n)
}
"""

SOURCES = {"matmul": MATMUL, "pc": PRODUCER_CONSUMER, "stencil": STENCIL, "add3": ADD3}
SIZES = {"matmul": dict(M=5, N=7, K=3), "pc": dict(N=5, M=3), "stencil": dict(N=7, T=4),
         "add3": dict(B=2, M=5, N=3)}

C_M, C_N, C_K = ("C", "m"), ("C", "n"), ("C", "k")


def _tiled(s):
    return s.tile([C_M, C_N], [4, 4])


def _ident(s):
    return s


def _pc_mapped(s):
    """T's loops of the producer-consumer tiled, on blocks and threads."""
    s = s.tile([("T", "i"), ("T", "j")], [4, 4])
    return s.map_to_blocks([("T", "i_tile"), ("T", "j_tile")]).map_to_threads(
        [("T", "i"), ("T", "j")])


#: (id, op, program, preparation, call forms).  The case applies ``op`` with
#: the first call form (args, kwargs) that the transformation accepts (one
#: form each today; more may cover a signature being settled).
CASES = [
    ("tile", "tile", "matmul", _ident, [(([C_M, C_N], [4, 3]), {})]),
    ("tile_names", "tile", "add3", _ident,
     [(([("Z", "m"), ("Z", "n")], [2, 2]), {"names": ["mo", "no"]})]),
    ("split", "split", "matmul", _ident, [((C_K, 2), {})]),
    ("reorder", "reorder", "add3", _ident, [(([("Z", "n"), ("Z", "b"), ("Z", "m")],), {})]),
    ("reorder_merged", "reorder", "matmul", _tiled, [(([C_M, ("C", "n_tile")],), {})]),
    ("interchange", "interchange", "matmul", _ident, [((C_M, C_N), {})]),
    ("parallel", "parallel", "matmul", _ident, [((C_N,), {})]),
    ("vectorize", "vectorize", "pc", _ident, [((("B", "j"),), {})]),
    ("vectorize_reduction", "vectorize", "matmul", lambda s: s.with_reassociation(),
     [((C_K,), {})]),
    ("mark", "mark", "stencil", _ident, [((("S1", "t"), "wavefront"), {})]),
    ("path_loop", "split", "matmul", _ident, [(({"path": [0, 0, 0, 1, 0, 0], "member": 0},
                                                2), {})]),
    ("fuse", "fuse", "pc", _ident, [((("T", "i"), ("B", "i")), {})]),
    ("fuse_statements", "fuse", "pc", _ident, [(("T", "B"), {})]),
    ("fuse_renamed", "fuse", "pc", _ident, [((("T", "i"), ("B", "i")), {"name": "row"})]),
    ("distribute", "distribute", "matmul", _ident, [((C_N,), {})]),
    ("distribute_groups", "distribute", "matmul", _ident, [((C_M, ["S0_init"], ["S0"]), {})]),
    ("distribute_interchange", "interchange", "matmul",
     lambda s: s.distribute(C_N), [((("S0", "n"), ("S0", "k")), {})]),
    ("skew", "skew", "stencil", _ident, [((("S1", "i"), ("S1", "t")), {})]),
    ("skew_factor", "skew", "stencil", _ident, [((("S1", "i"), ("S1", "t"), 2), {})]),
    ("shift", "shift", "matmul", _ident, [(("S0", C_M, 1), {})]),
    ("shift_negative", "shift", "pc", _ident, [(("B", ("B", "i"), -2), {})]),
    ("reverse", "reverse", "stencil", _ident, [((("S1", "i"),), {})]),
    ("unroll", "unroll", "matmul", _ident, [((C_K, 2), {})]),
    ("unroll_full", "unroll", "matmul", lambda s: s.split(C_K, 4), [((C_K,), {})]),
    ("unroll_and_jam", "unroll_and_jam", "add3", _ident, [((("Z", "m"), 2), {})]),
    ("isolate_full_tiles", "isolate_full_tiles", "matmul", _tiled,
     [((("C", "m_tile"),), {})]),
    ("sink", "sink", "matmul", _ident, [((C_N,), {})]),
    ("wavefront", "wavefront", "stencil",
     lambda s: s.skew(("S1", "i"), ("S1", "t")).tile([("S1", "t"), ("S1", "i")], [4, 4]),
     [((("S1", "t_tile"),), {})]),
    ("promote", "promote", "pc", lambda s: s.tile([("T", "i"), ("T", "j")], [4, 4]),
     [(("A",), {"at": ("T", "j_tile")})]),
    ("promote_output", "promote", "matmul", _tiled, [(("C",), {"at": ("C", "n_tile")})]),
    ("tensorize", "tensorize", "matmul", _ident, [((C_M, "gemm"), {})]),
    ("tensorize_tiled", "tensorize", "matmul", _tiled, [((("C", "m_tile"),), {})]),
    ("map_to_blocks", "map_to_blocks", "matmul", _tiled,
     [(([("C", "m_tile"), ("C", "n_tile")],), {})]),
    ("map_to_threads", "map_to_threads", "matmul",
     lambda s: _tiled(s).map_to_blocks([("C", "m_tile"), ("C", "n_tile")]),
     [(([C_M, C_N],), {"sizes": [2, 4]})]),
    ("promote_shared", "promote_shared", "pc", lambda s: _pc_mapped(s),
     [(("A",), {"at": ("T", "j_tile")})]),
    ("promote_registers", "promote_registers", "pc", lambda s: _pc_mapped(s),
     [(("A",), {"at": ("T", "j")})]),
    ("chain", "tile", "matmul", lambda s: s.with_reassociation(),
     [(([C_M, C_N], [2, 3]), {})]),
]
CASE_IDS = [c[0] for c in CASES]


def test_every_method_has_a_case():
    assert set(METHODS) <= {c[1] for c in CASES}


def build(case) -> tuple[str, Schedule]:
    """``(program key, the transformed schedule)`` of ``case``; skips when
    the transformation is not registered."""
    cid, op, prog, prep, forms = case
    import polyc.schedule.transforms  # noqa: F401  (registers what exists)
    if op not in TRANSFORMS:
        pytest.skip(f"transformation {op} is not implemented yet")
    s = prep(start(SOURCES[prog]))
    errors = []
    for args, kwargs in forms:
        try:
            out = s.apply(op, *args, **kwargs)
        except IllegalScheduleError:
            raise
        except (TypeError, ScheduleError) as e:
            if len(forms) == 1:
                raise
            errors.append(f"{op}{args}{kwargs}: {type(e).__name__}: {e}")
            continue
        if cid == "chain":
            out = out.split(C_K, 2).parallel(("C", "m_tile")).vectorize(C_K).mark(C_N, "hook")
        return prog, out
    pytest.fail(f"no call form of {op} was accepted; update CASES in "
                f"tests/schedules/test_recipe.py:\n" + "\n".join(errors))


def fresh_source(s: Schedule) -> str:
    """The C source generated for ``s``, bypassing every cache."""
    low = pipeline.lower_schedule(s)
    return emit.emit(low.program, low.loopnest).text


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_replay_round_trip(case):
    prog, s = build(case)
    p = program(SOURCES[prog])
    rec = s.to_recipe()
    assert rec["program"] == p.name
    assert [st["op"] for st in rec["steps"]] == [st["op"] for st in s.recipe]
    text = json.dumps(rec)
    assert json.loads(text) == rec                 # JSON-serialisable as is
    for form in (rec, text, s.to_json(indent=2), rec["steps"] if "tree" not in rec else rec):
        r = Schedule.replay(p, form)
        assert r.to_text() == s.to_text()
        assert r.recipe == s.recipe
        assert r.reassociate == s.reassociate
        assert str(r) == str(s) and r.loop_nest() == s.loop_nest()
    r = Schedule.replay(p, rec)
    # byte-identical generated source: freshly lowered, and through compile
    assert fresh_source(r) == fresh_source(s)
    assert pipeline.compile_schedule(r).source == pipeline.compile_schedule(s).source
    check(r, SIZES[prog])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_recipe_file_through_compile(case, tmp_path):
    prog, s = build(case)
    path = tmp_path / "recipe.json"
    path.write_text(s.to_json(indent=1))
    want = pipeline.compile_schedule(s).source
    assert polyc.compile(SOURCES[prog], schedule=str(path)).source == want
    assert polyc.compile(SOURCES[prog], schedule=path).source == want
    assert polyc.compile(SOURCES[prog], schedule=s.to_recipe()).source == want
    assert polyc.compile(SOURCES[prog], schedule=s.to_json()).source == want
    assert polyc.compile(SOURCES[prog], schedule=s).source == want


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_text_round_trip(case):
    prog, s = build(case)
    t = s.from_text(s.to_text())
    # the same schedule (isl may print the pieces of a union in another order;
    # isl has no flat map of a tree with extension nodes: promotion)
    if "extension" not in s.to_text():
        assert t.isl.get_map().is_equal(s.isl.get_map())
    assert str(t) == str(s)
    assert fresh_source(t) == fresh_source(s)
    # reading back is a fixed point after one round
    assert t.from_text(t.to_text()).to_text() == t.to_text()
    # a schedule read from text replays from its recipe (which carries the tree)
    rec = t.to_recipe()
    assert "tree" in rec
    if "extension" in s.to_text():
        # the copy statements of a promotion are not in the text: refused
        with pytest.raises(ScheduleError, match="copies of a promotion"):
            Schedule.replay(program(SOURCES[prog]), rec)
        return
    r = Schedule.replay(program(SOURCES[prog]), rec)
    assert r.to_text() == t.to_text()
    assert fresh_source(r) == fresh_source(t)


def test_transform_after_from_text_replays():
    s = start(MATMUL).tile([C_M, C_N], [4, 4])
    t = s.from_text(s.to_text()).parallel(("C", "m_tile")).split(C_K, 3)
    r = Schedule.replay(program(MATMUL), json.dumps(t.to_recipe()))
    assert r.to_text() == t.to_text()
    assert fresh_source(r) == fresh_source(t)


def test_isl_start_replays():
    s = Schedule.from_program(program(MATMUL), start="isl")
    lp = s.loops()[0]
    t = s.split(lp, 3)
    rec = t.to_recipe()
    assert rec["start"] == "isl" and "tree" not in rec
    r = Schedule.replay(program(MATMUL), rec)
    assert r.start == "isl" and r.to_text() == t.to_text()
    check(r, SIZES["matmul"])


def test_reassociation_is_recorded():
    s = start(MATMUL).with_reassociation().vectorize(C_K)
    assert s.recipe[0] == {"op": "with_reassociation", "args": [True], "kwargs": {}}
    r = Schedule.replay(program(MATMUL), s.to_recipe())
    assert r.reassociate and r.to_text() == s.to_text()
    # without the step the vectorization is refused on replay
    rec = s.to_recipe()
    rec["steps"] = rec["steps"][1:]
    with pytest.raises(IllegalScheduleError, match="reduction dependence on tensor C"):
        Schedule.replay(program(MATMUL), rec)


# ------------------------------------------------------- another program

def test_recipe_of_another_program_is_refused():
    s = start(MATMUL).split(C_K, 2)
    for form in (s.to_recipe(), s.to_json()):
        with pytest.raises(ScheduleError) as info:
            Schedule.replay(program(STENCIL), form)
        msg = str(info.value)
        assert "'matmul'" in msg and "'stencil'" in msg, msg
        assert not isinstance(info.value, IllegalScheduleError)
    with pytest.raises(ScheduleError, match="'matmul'.*'stencil'"):
        polyc.compile(STENCIL, schedule=s.to_recipe())


def test_schedule_of_another_program_is_refused():
    s = start(MATMUL)
    with pytest.raises(ScheduleError) as info:
        polyc.compile(STENCIL, schedule=s)
    assert "'matmul'" in str(info.value) and "'stencil'" in str(info.value)


def test_same_name_other_program_is_refused():
    other = MATMUL.replace("A(m, k) * B(k, n)", "A(m, k) + B(k, n)")
    s = start(MATMUL).split(C_K, 2)
    with pytest.raises(ScheduleError, match="fingerprint"):
        Schedule.replay(program(other), s.to_recipe())


def test_steps_without_fingerprint_replay_anywhere():
    steps = start(MATMUL).split(C_K, 2).to_recipe()["steps"]
    other = MATMUL.replace("A(m, k) * B(k, n)", "A(m, k) + B(k, n)")
    r = Schedule.replay(program(other), steps)
    assert [st["op"] for st in r.recipe] == ["split"]
    check(r, SIZES["matmul"])


# --------------------------------------------------------- malformed

def _refused_recipe(recipe, prog=MATMUL) -> str:
    with pytest.raises(ScheduleError) as info:
        Schedule.replay(program(prog), recipe)
    assert not isinstance(info.value, IllegalScheduleError), info.value
    return str(info.value)


def test_bad_json_text():
    msg = _refused_recipe('{"format": "polyc-recipe-1", "steps": [}')
    assert "invalid JSON at line 1 column" in msg, msg


def test_bad_json_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"steps": [\n  {"op": "split",]\n}')
    msg = _refused_recipe(str(path))
    assert str(path) in msg and "invalid JSON at line 2" in msg, msg
    with pytest.raises(ScheduleError, match="broken.json"):
        polyc.compile(MATMUL, schedule=path)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.json"
    msg = _refused_recipe(str(path))
    assert "cannot read recipe" in msg and "nowhere.json" in msg, msg


def test_unknown_op():
    msg = _refused_recipe({"steps": [{"op": "frobnicate", "args": [], "kwargs": {}}]})
    assert "unknown transformation 'frobnicate'" in msg, msg
    msg = _refused_recipe({"steps": [{"args": []}]})
    assert "unknown transformation None" in msg, msg


def test_missing_loop():
    msg = _refused_recipe({"steps": [{"op": "split", "args": [{"loop": ["C", "q"]}, 2],
                                      "kwargs": {}}]})
    assert "split(C.q, 2)" in msg and "no loop 'q' runs C; its loops are: m, n, k" in msg, msg
    msg = _refused_recipe({"steps": [{"op": "parallel", "args": [{"path": [0, 7],
                                                                  "member": 0}]}]})
    assert "[0, 7] does not exist" in msg, msg


def test_step_that_fails_later_names_the_step():
    rec = start(MATMUL).tile([C_M, C_N], [2, 2]).to_recipe()
    rec["steps"].append({"op": "split", "args": [{"loop": ["C", "m_tile"]}, 0], "kwargs": {}})
    msg = _refused_recipe(rec)
    assert "split(C.m_tile, 0)" in msg and "positive integer" in msg, msg


def test_illegal_step_is_an_illegal_schedule_error():
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor C"):
        Schedule.replay(program(MATMUL), [{"op": "parallel", "args": [["C", "k"]]}])


@pytest.mark.parametrize("recipe,words", [
    ({"format": "polyc-recipe-0", "steps": []}, "not a polyc recipe"),
    ({"steps": {"op": "split"}}, "'steps' must be a list"),
    ({"steps": ["split"]}, "recipe step 0: expected an object"),
    ({"steps": [{"op": "split", "args": {"x": 1}}]}, "'args' must be a list"),
    ({"steps": [{"op": "split", "args": [], "kwargs": []}]}, "'kwargs' an object"),
    ({"start": "random", "steps": []}, "start='random'"),
    ({"tree": 42, "steps": []}, "'tree'"),
    ({"tree": "{ not a tree", "steps": []}, "not an isl schedule tree"),
    (42, "a recipe is a dict"),
    ('  {"format": 3}', "not a polyc recipe"),
    ("[1]", "recipe step 0: expected an object"),
    # arguments that do not fit the transformation (a TypeError escaped)
    ({"steps": [{"op": "split", "args": [["C", "m"], 4], "kwargs": {"bogus": 1}}]},
     "got an unexpected keyword argument 'bogus'"),
    ({"steps": [{"op": "reverse", "args": [["C", "m"], 1, 2]}]}, "too many positional"),
    # arguments of the wrong type (a TypeError inside the transformation)
    ({"steps": [{"op": "split", "args": [["C", "m"], 3, 0]}]}, "names must be a list"),
    ({"steps": [{"op": "tensorize", "args": [["C", "m"], []]}]}, "named by a string"),
], ids=["format", "steps", "step", "args", "kwargs", "start", "tree_type", "tree_text",
        "int", "json_format", "json_list", "unknown_kwarg", "too_many_args", "names_type",
        "intrinsic_type"])
def test_malformed_recipes(recipe, words):
    msg = _refused_recipe(recipe)
    assert words in msg, msg


def test_recipe_tree_of_another_program():
    rec = polyc.compile(STENCIL).schedule.to_recipe()
    rec.pop("fingerprint")
    msg = _refused_recipe(rec)
    assert "another program" in msg, msg


# ------------------------------------------------------------ text form

def test_from_text_errors():
    s = start(MATMUL)
    with pytest.raises(ScheduleError, match="not an isl schedule tree"):
        s.from_text("{ domain: oops")
    with pytest.raises(ScheduleError, match="another program"):
        s.from_text(start(STENCIL).to_text())
    # a tree that breaks a dependence: the interchange of the stencil, built
    # without the check, then read back through the checked text path
    st = start(STENCIL)
    bad = TRANSFORMS["interchange"](st, ("S1", "t"), ("S1", "i")).to_str()
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor A"):
        st.from_text(bad)


# ---------------------------------------------------- compiled kernels

def test_kernel_schedule_prints_and_transforms():
    k = polyc.compile(MATMUL)
    s = k.schedule
    assert isinstance(s, Schedule)
    text = str(s)
    assert text.startswith("domain: S0, S0_init") and "band (" in text
    assert "for (" in s.loop_nest() and "#pragma omp parallel for" in s.loop_nest()
    # the automatic schedule is built by steps (a recipe), not read from
    # text: the first read may reorder pieces of a union map, then the
    # text is stable (docs/schedules.md, "isl text")
    once = s.from_text(s.to_text())
    assert once.isl.get_map().is_equal(s.isl.get_map())
    assert once.to_text() == s.from_text(once.to_text()).to_text()
    assert s.recipe and {st["op"] for st in s.recipe} >= {"tile", "mark"}
    inner = s.loops()[-1]
    t = s.split(inner, 3)
    assert t is not s and s.to_text() == text_of(k)
    k2 = polyc.compile(MATMUL, schedule=t)
    assert k2.schedule is t
    check(t, SIZES["matmul"])
    check(t, dict(M=70, N=67, K=65))
    # its recipe carries the kernel's tree and replays to the same schedule
    rec = t.to_recipe()
    assert "tree" in rec and rec["start"] == "isl"
    r = Schedule.replay(program(MATMUL), json.dumps(rec))
    assert r.to_text() == t.to_text()
    assert fresh_source(r) == fresh_source(t)
    assert polyc.compile(MATMUL, schedule=rec).source == k2.source


def text_of(kernel) -> str:
    return kernel.schedule.to_text()


def test_kernel_schedule_replays_untransformed():
    for src in (MATMUL, STENCIL, PRODUCER_CONSUMER):
        k = polyc.compile(src)
        r = Schedule.replay(program(src), k.schedule.to_recipe())
        assert r.to_text() == k.schedule.to_text()
        assert fresh_source(r) == k.source


def test_kernel_schedule_refused_transform():
    k = polyc.compile(STENCIL)
    s = k.schedule
    before = s.to_text()
    t_loops = [lp for lp in s.loops() if lp.name == "t" and lp.statements == ("S1",)]
    assert len(t_loops) == 1
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor A from "
                       "statement S1 to statement S1"):
        s.parallel(t_loops[0])
    assert s.to_text() == before
    with pytest.raises(IllegalScheduleError):
        s.parallel(("S1", "t"))
    assert s.to_text() == before


def test_multi_definition_source_with_schedule_dict():
    src = MATMUL + STENCIL
    s = Schedule.from_program(polyc.program(src, "matmul")).split(C_K, 2)
    ks = polyc.compile(src, schedule={"matmul": s.to_recipe()})
    assert set(ks) == {"matmul", "stencil"}
    assert ks["matmul"].source == pipeline.compile_schedule(s).source
    with pytest.raises(ScheduleError, match="'nope'"):
        polyc.compile(src, schedule={"nope": s.to_recipe()})
    with pytest.raises(ScheduleError, match="2 definitions"):
        polyc.compile(src, schedule=s.to_recipe()["steps"])     # steps name no definition
    # a Schedule, and a recipe (its "program"), name their own definition
    assert polyc.compile(src, schedule=s)["matmul"].source == ks["matmul"].source
    assert polyc.compile(src, schedule=s.to_json())["matmul"].source == ks["matmul"].source


def test_marks_written_into_a_tree_are_checked():
    """A tree read from text (a recipe's ``tree``) is held to the same rules:
    a parallel mark above a sequence is checked on every loop it reaches; a
    ``promote:`` mark must name a buffer that promote() made."""
    st = start(STENCIL)
    marked = st.isl.get_root().child(0).insert_mark(isl.Id("omp_parallel"))
    with pytest.raises(IllegalScheduleError, match="loop t cannot run parallel.*tensor A"):
        st.from_text(marked.get_schedule().to_str())
    mm = start(MATMUL)
    fake = mm.isl.get_root().child(0).insert_mark(isl.Id("promote:A"))
    recipe = dict(mm.to_recipe(), tree=fake.get_schedule().to_str())
    with pytest.raises(ScheduleError, match="no local buffer 'A'"):
        polyc.compile(MATMUL, schedule=recipe)
    band_k = mm.isl.get_root().child(0).child(0).child(0).child(1).child(0)
    collapse = band_k.insert_mark(isl.Id("omp_parallel_collapse2"))  # one-member band k
    with pytest.raises(IllegalScheduleError, match="2 collapsed loops"):
        mm.from_text(collapse.get_schedule().to_str())


def _isl_words(A, B, mod, floor):
    for i in range(mod):
        for j in range(floor):
            B[i, j] = A[i, j] * 2.0


def test_a_tree_isl_cannot_read_back_names_the_culprits():
    """isl prints sizes named like its keywords (``mod``, ``floor``: integer
    arguments) but cannot read them back: a recipe carrying such a tree says
    so (loop variables and unpacked sizes so named are renamed by the
    frontend: tests/pyloops/test_isl_names.py)."""
    import numpy as np
    k = polyc.kernel(_isl_words)
    k(np.ones((2, 3)), np.zeros((2, 3)), 2, 3)
    s = Schedule.from_program(k.program)
    with pytest.raises(ScheduleError, match=r"isl reads floor, mod as keywords.*rename those "
                                            r"loop variables"):
        s.from_text(s.to_text())
    # recipes without a tree still replay
    t = s.tile([("S0", "i")], [2])
    assert Schedule.replay(k.program, t.to_json()).to_text() == t.to_text()


STRIDED = """
def down(float(N, H) X, int64 S) -> (Y) {
    Y(n, h) +=! X(n, h * S + k) where h in 0:H / S, k in 0:S
}
"""


def test_a_size_scaled_index_says_how_to_schedule_it():
    """``h * S``: isl needs S as a constant; ``polyc.program`` says which
    keyword gives it, and a schedule of that program compiles and runs."""
    import numpy as np
    with pytest.raises(polyc.UnsupportedError, match=r"pass polyc.program\(source, "
                                                     r"sizes=\{'S': \.\.\.\}\)"):
        polyc.program(STRIDED)
    with pytest.raises(polyc.UnsupportedError, match=r"sizes=\{\.\.\.\}\) and compile it"):
        polyc.compile(STRIDED, schedule=[{"op": "parallel", "args": [["Y", "n"]]}])
    s = Schedule.from_program(polyc.program(STRIDED, sizes={"S": 2})).parallel(("Y", "n"))
    X = np.random.default_rng(0).random((3, 8)).astype(np.float32)
    got = pipeline.compile_schedule(s)(X, 2)
    np.testing.assert_allclose(got, X.reshape(3, 4, 2).sum(-1), rtol=1e-5)
