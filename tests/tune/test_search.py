"""polyc.tune end to end, with small budgets: the default is measured, legal
candidates are checked in a child process and timed, failures (a segfault, a
wrong value, a hang) become records and the session finishes, the best recipe
is recorded and polyc.compile uses it (and says so), a recorded recipe that no
longer applies is ignored with the reason.  No timing is asserted."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polyc
from polyc.errors import BindingError, PolycError, ShapeError
from polyc.tune import Budget, Database, TuningWarning
from polyc.tune.db import ALL_SIZES, key_info, key_of

TR = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }"
SIZES = {"N": 300, "M": 200}
SMALL = Budget(seconds=120, measured=3, sampled=300, first=3, neighbours=1)


@pytest.fixture
def cfg(tmp_path):
    return polyc.Config.from_env().replace(cache_dir=str(tmp_path / "cache"))


def test_tune_measures_records_and_compile_uses_it(cfg, tmp_path):
    r = polyc.tune(TR, SIZES, budget=SMALL, config=cfg, progress=False)
    assert r.trials[0].status == "measured" and r.trials[0].ratio == 1.0
    measured = [t for t in r.trials[1:] if t.status == "measured"]
    assert 1 <= len(measured) <= SMALL.measured and r.measured == len(measured)
    # schedule recipes (a perturbation of the automatic recipe may have no
    # step left: its starting tree) or automatic-schedule options
    assert all(("steps" in t.recipe or "auto" in t.recipe) and t.ratio > 0 for t in measured)
    assert any(t.recipe.get("steps") for t in measured)
    assert r.history and r.history[-1][1] == r.measured
    db = Database(config=cfg)
    recs = db.records()
    assert sum(x["kind"] == "sample" for x in recs) == r.measured
    best = db.records(kind="best")[-1]
    assert best["recipe"] == r.recipe and best["sizes"] == [SIZES]
    # polyc.compile consults the database (Config.use_tuned, the default)
    k = polyc.compile(TR, config=cfg)
    if r.recipe is None:
        assert "automatic schedule is the best" in k.tuning
    else:
        assert k.tuning.startswith("tuned: schedule recipe from")
        want = polyc.compile(TR, schedule=r.recipe, config=cfg.replace(use_tuned=False))
        assert k.source == want.source
    assert k.tuning in k.explain()
    assert k.explain(json=True)["tuning"] == k.tuning
    a = np.random.default_rng(0).random((7, 5), dtype=np.float32)
    np.testing.assert_allclose(k(a), a.T + 1)
    # turned off: the automatic schedule, no note
    assert polyc.compile(TR, config=cfg.replace(use_tuned=False)).tuning is None


def test_failing_candidates_are_recorded_and_the_session_finishes(cfg):
    r = polyc.tune(TR, SIZES, budget=SMALL, config=cfg, progress=False,
                   _faults={0: "segfault", 1: "wrong", 2: "hang", "timeout": 8})
    failed = [t for t in r.trials if t.status == "failed"]
    reasons = sorted(t.reason.split(" (sizes")[0] for t in failed)
    assert len(failed) == 3 and r.failed == 3
    assert any("crashed (SIGSEGV)" in x for x in reasons)
    assert any(x.startswith("wrong values in B") for x in reasons)
    assert any(x.startswith("timed out") for x in reasons)
    recs = Database(config=cfg).records(kind="failure")
    assert len(recs) == 3
    # the session went on: the default is still the measured incumbent
    assert r.trials[0].status == "measured"


def test_recipe_that_no_longer_applies_is_ignored(cfg):
    program = polyc.program(TR)
    info = key_info(program, cfg, ALL_SIZES)
    bad = {"format": "polyc-recipe-1", "start": "isl",
           "steps": [{"op": "tile", "args": [[["S0", "nope"]], [8]], "kwargs": {}}]}
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": bad, "label": "stale", "speedup": 2.0}])
    with pytest.warns(TuningWarning, match="no longer applies"):
        k = polyc.compile(TR, config=cfg)
    assert "ignored" in k.tuning and "nope" in k.tuning
    a = np.ones((3, 4), dtype=np.float32)
    np.testing.assert_allclose(k(a), a.T + 1)


def test_a_record_whose_recipe_is_no_object_is_ignored(cfg):
    """A best record whose recipe is a number was a bare TypeError in
    polyc.compile, and a string was read as the path of a recipe file."""
    program = polyc.program(TR)
    info = key_info(program, cfg, ALL_SIZES)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for recipe in (5, "/etc/hostname", [1, 2]):
        Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                      "recipe": recipe, "label": "odd", "speedup": 1.2}])
        k = polyc.compile(TR, config=cfg)
        assert "ignored" in k.tuning and "not a recipe object" in k.tuning
        np.testing.assert_allclose(k(a), a.T + 1)


def test_budget_too_small_keeps_the_default(cfg):
    r = polyc.tune(TR, SIZES, budget=1e-6, config=cfg, progress=False)
    assert r.best.label.startswith("default") and r.measured == 0
    assert "budget" in r.note
    assert Database(config=cfg).records(kind="best") == []


def test_tasks_past_the_deadline_are_skipped_not_failed(cfg):
    """A build queued past the session's end is skipped; a measurement checks
    the incumbent, skips the candidates it reaches after the end and times
    what it checked for two rounds."""
    import time

    from polyc.tune.measure import build_task, measure_task
    program = polyc.program(TR)
    past = time.time() - 1
    b = build_task({"program": program, "recipe": None, "config": cfg, "deadline": past})
    assert not b["ok"] and b["skipped"] and "budget" in b["error"]
    res = measure_task({"program": program, "recipes": [None, None], "config": cfg,
                        "sizes": [{"N": 30, "M": 20}], "seed": 0, "deadline": past,
                        "min_sample": 0.001})
    assert res["skipped"] == [1] and res["measured"] == [0] and not res["failures"]
    (rounds,) = res["rounds"].values()
    assert len(rounds) == 2


def test_a_seconds_budget_bounds_ranking_and_the_first_batch(cfg, monkeypatch):
    """With a seconds budget the model ranks only what it can in its share of
    the seconds, and candidates whose build or check the session's end
    overtakes stay unmeasured with the reason (not failures); the note says
    the budget ran out when nothing was measured."""
    import time

    from polyc.tune import measure, search
    clock = {"t": 0.0}
    real_cost = search._Session.cost

    def slow_cost(self, k):         # each model evaluation "takes" 10 ms
        clock["t"] += 0.01
        clock["costs"] = clock.get("costs", 0) + 1
        return real_cost(self, k)
    monkeypatch.setattr(search._Session, "cost", slow_cost)
    real_monotonic = time.monotonic
    monkeypatch.setattr(search.time, "monotonic", lambda: real_monotonic() + clock["t"])
    real_build = measure.build_task

    def late_build(payload):        # the session's end passes during the builds
        clock["t"] += 100.0
        return real_build({**payload, "deadline": payload["deadline"] - 100.0})
    monkeypatch.setattr("polyc.tune.executors.build_task", late_build)
    budget = Budget(seconds=5, measured=6, sampled=2000, first=4, neighbours=1)
    r = polyc.tune(TR, SIZES, budget=budget, config=cfg, progress=False)
    # 0.5 s of ranking: the 64 candidates always ranked, not the 2000 sampled
    assert 64 <= clock["costs"] < 100
    unmeasured = [t for t in r.trials[1:] if t.status == "unmeasured" and t.reason]
    assert unmeasured and all("budget ran out" in t.reason for t in unmeasured)
    assert r.failed == 0 and r.measured == 0 and "ran out" in r.note
    # nothing was decided: no best record (it would hide an earlier session's)
    assert Database(config=cfg).records(kind="best") == []


def test_interrupt_keeps_what_was_measured(cfg):
    from polyc.tune import InlineExecutor

    class Interrupted(InlineExecutor):
        calls = 0

        def measure(self, payload):
            Interrupted.calls += 1
            if Interrupted.calls == 2:
                raise KeyboardInterrupt
            return super().measure(payload)
    budget = Budget(seconds=120, measured=3, sampled=300, first=2, neighbours=1)
    # the generic session measures, then the class session is interrupted
    with pytest.raises(KeyboardInterrupt):
        polyc.tune(TR, {"N = 1": {"N": 1, "M": 64}, "all": SIZES}, budget=budget,
                   config=cfg, executor=Interrupted(), progress=False)
    assert Interrupted.calls == 2
    assert len(Database(config=cfg).records(kind="sample")) >= 1


def test_bad_requests(cfg, tmp_path):
    with pytest.raises(BindingError, match="lack M"):
        polyc.tune(TR, {"N": 4}, config=cfg)
    # a misspelt size was ignored (the session tuned without it)
    with pytest.raises(BindingError, match="Q is not a size of tr .*N, M"):
        polyc.tune(TR, {**SIZES, "Q": 3}, config=cfg)
    # an unwritable database ended the session at its first record, after the
    # default and the first batch were built and measured
    (tmp_path / "file").write_text("")
    for bad in (tmp_path / "file" / "t.jsonl", tmp_path):
        with pytest.raises(PolycError, match="cannot write the tuning database.*record=False"):
            polyc.tune(TR, SIZES, config=cfg, db=bad)
    with pytest.raises(PolycError, match="budget"):
        polyc.tune(TR, SIZES, budget="forever", config=cfg)
    with pytest.raises(PolycError, match="executor"):
        polyc.tune(TR, SIZES, executor="carrier-pigeon", config=cfg)
    with pytest.raises(BindingError, match="cannot tune"):
        polyc.tune(3.5, SIZES, config=cfg)

    def loops(a):
        return a
    # the message did not mention @polyc.kernel (nor einsum strings)
    with pytest.raises(BindingError, match="a @polyc.kernel function after its first call.*"
                                           "decorate it with @polyc.kernel and call it once"):
        polyc.tune(loops, SIZES, config=cfg)
    # a negative size was numpy's bare ValueError, a fractional one was
    # truncated and budget=True ran for one second
    with pytest.raises(ShapeError, match="size N must be in 0..2"):
        polyc.tune(TR, {**SIZES, "N": -1}, config=cfg)
    with pytest.raises(BindingError, match="size N must be an integer, got 64.5"):
        polyc.tune(TR, {**SIZES, "N": 64.5}, config=cfg)
    # an empty iteration domain was tuned: every candidate timed an empty call
    with pytest.raises(ShapeError, match="no statement of tr runs.*nothing to time"):
        polyc.tune(TR, {**SIZES, "N": 0}, config=cfg)
    with pytest.raises(PolycError, match="budget True"):
        polyc.tune(TR, SIZES, budget=True, config=cfg)
    # a list or dict budget was a bare TypeError (unhashable, looked up by name)
    for bad in ([60], {"seconds": 60}):
        with pytest.raises(PolycError, match="choose quick, max or a number of seconds"):
            polyc.tune(TR, SIZES, budget=bad, config=cfg)
    # an infinite budget was a bare OverflowError; lattice sizes missing a
    # parameter or not integers were a bare KeyError or ValueError
    with pytest.raises(PolycError, match="positive and finite"):
        polyc.tune(TR, SIZES, budget=float("inf"), config=cfg)
    with pytest.raises(BindingError, match="lack M"):
        polyc.tune(TR, [SIZES, {"N": 4}], classes="lattice", config=cfg)
    with pytest.raises(BindingError, match="size N must be an integer, got 'a'"):
        polyc.tune(TR, [{**SIZES, "N": "a"}], classes="lattice", config=cfg)
    # sizes whose tensors cannot be allocated were numpy's bare MemoryError
    with pytest.raises(ShapeError, match="GiB.*tune at smaller sizes"):
        polyc.tune(TR, {"N": 2**31, "M": 2**31}, config=cfg)


def test_the_source_order_of_a_single_loop_is_tuned_and_scored(cfg):
    """The source order of a single loop had no band the knobs tune (one
    sequential member, no coincidence flags): the model costed nothing of it,
    it scored 0 and ranked first in ``--dry-run``, then was listed unscored
    as 'source: untransformed'.  A sequential band with no band below it is
    tuned now: its candidates are scored, and the probes found the loop
    parallel."""
    from polyc.tune import candidates
    src = "def scale(float(N) A) -> (B) { B(i) = A(i) * 2.0 + 1.0 }"
    every = [t for t in candidates(src, {"N": 100000}, count=40, config=cfg)
             if not t.label.startswith("auto recipe:")]
    assert every and all(t.model is not None and t.model > 0 for t in every)
    assert not any("untransformed" in t.label for t in every)
    assert any(t.label.startswith("source: ") and "par" in t.label and t.status == "legal"
               for t in every), [t.label for t in every]


def test_dry_run_and_cli(cfg, tmp_path, capsys, monkeypatch):
    from polyc.cli import main
    from polyc.tune import candidates
    every = candidates(TR, SIZES, count=6, config=cfg)
    # the model's ranking, then the automatic recipe's perturbations (no score)
    trials = [t for t in every if not t.label.startswith("auto recipe:")]
    autos = every[len(trials):]
    assert every[:len(trials)] == trials and autos
    assert all(t.model is None for t in autos) and len(autos) <= 6
    assert len(trials) == 6 and all(t.model is not None for t in trials)
    assert {t.status for t in every} <= {"legal", "illegal", "inapplicable", "duplicate"}
    models = [t.model for t in trials]
    assert models == sorted(models)
    src = tmp_path / "tr.tc"
    src.write_text(TR + "\n")
    monkeypatch.setenv("POLYC_CACHE_DIR", cfg.cache_dir)
    assert main(["tune", str(src), "--sizes", "N=120,M=64", "--dry-run", "--count", "4",
                 "--explain"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len([x for x in lines if "auto recipe:" not in x]) == 4
    assert all(x.split()[0] == "-" for x in lines if "auto recipe:" in x)
    assert main(["tune", str(src), "--sizes", "N=120,M=64", "--budget", "60",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["program"] == "tr" and out["measured"] >= 1
    assert main(["tune", "--show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["keys"]) == 1
    assert main(["tune", "--export", str(tmp_path / "x.jsonl")]) == 0
    assert main(["tune", str(src)]) == 2            # no sizes: a usage error
    assert "--sizes" in capsys.readouterr().err


def test_count_without_dry_run_is_a_usage_error(cfg, tmp_path, capsys, monkeypatch):
    # it was ignored: a full session ran (and recorded) instead of a listing
    from polyc.cli import main
    src = tmp_path / "tr.tc"
    src.write_text(TR + "\n")
    monkeypatch.setenv("POLYC_CACHE_DIR", cfg.cache_dir)
    assert main(["tune", str(src), "--sizes", "N=12,M=8", "--budget", "1", "--count", "2"]) == 2
    assert "add --dry-run" in capsys.readouterr().err


def test_automatic_schedule_variants_are_recipes_too(cfg):
    program = polyc.program(TR)
    info = key_info(program, cfg, ALL_SIZES)
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": {"auto": {"schedule": "identity"}},
                                  "label": "auto: schedule=identity", "speedup": 1.2}])
    k = polyc.compile(TR, config=cfg)
    assert "automatic schedule with schedule=identity" in k.tuning
    want = polyc.compile(TR, config=cfg.replace(use_tuned=False, schedule="identity"))
    assert k.source == want.source
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(k(a), a.T + 1)
    # TuneResult.recipe of such a best compiles as given: it was a ScheduleError
    # "schedule given for 'auto', which is not a definition of this source"
    k = polyc.compile(TR, schedule={"auto": {"schedule": "identity"}},
                      config=cfg.replace(use_tuned=False))
    assert k.source == want.source
    np.testing.assert_allclose(k(a), a.T + 1)
    # an option the tuner does not own is refused, the automatic schedule kept
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": {"auto": {"cc": "evil"}}, "label": "x"}])
    k = polyc.compile(TR, config=cfg)
    assert "ignored" in k.tuning and "cc" in k.tuning


def test_loop_programs_with_a_time_loop_are_tuned(cfg):
    """@polyc.kernel programs carry their own source order (not picklable by
    islpy, not evaluated by polyc.reference): they travel as text and are
    checked against the automatic schedule's kernel."""
    from benchmarks.polybench import BENCHMARKS
    bench = BENCHMARKS["jacobi-2d"]
    args = bench.init(bench.sizes["MINI"], np.float64)
    program = bench.kernel.specialize(*args).program
    sizes = {}
    for p, bind in program.param_bindings.items():
        sizes[p] = (args[program.signature.index(p)] if bind is None
                    else args[program.signature.index(bind[0])].shape[bind[1]])
    r = polyc.tune(program, sizes, config=cfg, progress=False,
                   budget=Budget(seconds=120, measured=4, sampled=300, first=2, neighbours=1))
    assert r.trials[0].status == "measured" and r.failed == 0, r.report(explain=True)
    assert any(t.label.startswith("auto: schedule=identity") for t in r.trials)
    assert r.measured >= 3


def test_the_automatic_recipe_is_perturbed_and_a_recorded_perturbation_is_used(cfg):
    """The automatic schedule is a recipe (issue 17, item 0): the session
    measures it with one knob changed (a tile size, a dropped step), and a
    recorded perturbation compiles to the code of its replay."""
    mm = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    c = cfg.replace(tensorize=False)
    r = polyc.tune(mm, {"M": 96, "N": 96, "K": 96}, config=c, progress=False,
                   budget=Budget(seconds=120, measured=6, sampled=100, first=3, neighbours=2))
    mine = [t for t in r.trials if t.label.startswith("auto recipe:")]
    assert mine, r.report(explain=True)
    assert all(t.status in ("measured", "illegal", "inapplicable", "duplicate", "failed",
                            "unmeasured") for t in mine)
    measured = [t for t in mine if t.status == "measured"]
    assert measured and r.failed == 0, r.report(explain=True)
    t = measured[0]
    assert "tree" in t.recipe and any(st["op"] == "tile" for st in t.recipe["steps"])
    program = polyc.program(mm)
    info = key_info(program, c, ALL_SIZES)
    Database(config=c).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                "recipe": t.recipe, "label": t.label, "speedup": 1.5}])
    k = polyc.compile(mm, config=c)
    assert k.tuning.startswith("tuned: schedule recipe from") and t.label in k.tuning
    want = polyc.compile(mm, schedule=t.recipe, config=c.replace(use_tuned=False))
    assert k.source == want.source
    rng = np.random.default_rng(1)
    a, b = rng.random((33, 20), dtype=np.float32), rng.random((20, 17), dtype=np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)


def test_a_dropped_tile_step_turns_its_collapsed_parallel_mark_into_one():
    """PolyBench cholesky and correlation: the automatic recipe's 'tile
    dropped' neighbour kept ``mark(S.i_tile, "parallel_collapse2")`` as
    ``mark(S.i, "parallel_collapse2")``, refused because the untiled loops
    are not one band: always pruned.  The mark becomes a parallel mark."""
    from pathlib import Path
    from types import SimpleNamespace

    from polyc.cli_input import _load
    from polyc.tune import autorecipe
    tile = {"op": "tile", "args": [[["S0", "i"], ["S0", "j"]], [64, 64]], "kwargs": {}}
    later = [{"op": "mark", "args": [["S0", "i_tile"], "parallel_collapse2"], "kwargs": {}},
             {"op": "mark", "args": [["S1", "i"], "parallel_collapse2"], "kwargs": {}}]
    assert [st["args"] for st in autorecipe._untiled(tile, later)] == [
        [["S0", "i"], "parallel"], [["S1", "i"], "parallel_collapse2"]]
    path = Path(__file__).parents[2] / "benchmarks" / "polybench" / "linear_algebra_solvers.py"
    p, _ = _load(SimpleNamespace(file=str(path), def_name="cholesky", dtype=None, sizes=None))
    auto = autorecipe.automatic(p, polyc.Config.from_env().replace(use_tuned=False))
    dropped = [r for label, r in autorecipe.neighbours(auto) if label.endswith("tile(i,j) dropped")]
    assert dropped
    for r in dropped:
        autorecipe.build(p, r)          # checked: it was refused


def test_report_counts_pruned_kinds_without_an_empty_list():
    """``TuneResult.report()`` read ``0 pruned: ;`` when nothing was pruned."""
    from polyc.tune.search import Trial, TuneResult
    best = Trial("default (automatic schedule)", None, None, status="measured", ratio=1.0)

    def line(pruned):
        r = TuneResult("tr", "k", [], best, [best], pruned, 1, 0, 2.0, 0.1, [], "db")
        return r.report().splitlines()[0]

    assert "(1 measured, 0 failed, 0 pruned; 2.0 s; noise 10.0%)" in line({})
    assert "3 pruned: 1 duplicate, 2 illegal; 2.0 s" in line({"illegal": 2, "duplicate": 1})


def test_a_definition_specialised_per_stride_is_tuned_at_that_stride(cfg):
    """``I(h*S + kh)``: polyc.compile specialises per value of S; polyc.tune
    refused the source with an UnsupportedError telling to pass fixed_sizes
    (which it does not take), and the check could not call the kernel with
    S.  It tunes the kernel of the S the sizes give, and the compiled kernel
    of that S uses the record."""
    src = ("def strided(float(H) I, float(KH) W, int64 S) -> (O) {\n"
           "    O(h) +=! I(h*S + kh) * W(kh)\n}")
    budget = Budget(seconds=120, measured=2, sampled=100, first=1, neighbours=1, batch=2)
    with pytest.raises(BindingError, match="give S in the sizes"):
        polyc.tune(src, {"H": 90, "KH": 3}, config=cfg, budget=budget)
    with pytest.raises(BindingError, match="each value on its own"):
        polyc.tune(src, [{"H": 90, "KH": 3, "S": 2}, {"H": 90, "KH": 3, "S": 3}],
                   config=cfg, budget=budget)
    r = polyc.tune(src, {"H": 90, "KH": 3, "S": 2}, config=cfg, budget=budget,
                   progress=False)
    assert r.trials[0].status == "measured" and r.failed == 0, r.report(explain=True)
    k = polyc.compile(src, config=cfg)
    rng = np.random.default_rng(3)
    for h, kh, s in [(90, 3, 2), (7, 3, 2), (31, 4, 3)]:
        i, w = rng.random(h, dtype=np.float32), rng.random(kh, dtype=np.float32)
        n = (h - kh) // s + 1
        want = np.array([np.dot(i[x * s:x * s + kh].astype(np.float64), w) for x in range(n)])
        np.testing.assert_allclose(k(i, w, s), want, rtol=1e-5)
    assert k.specialize(S=2).tuning.startswith("tuned:")
    assert k.specialize(S=3).tuning is None
