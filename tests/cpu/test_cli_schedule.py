"""The schedule side of the ``polyc`` command line: ``polyc explain``,
``--schedule RECIPE.json`` for compile and run, ``--emit schedule|loopnest|
recipe``, the scheduler options (``--fusion``, ``--no-skewing``,
``--no-outer-coincidence``), and ``Kernel.explain``."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

import polyc
from polyc.cli import main
from polyc.config import Config
from polyc.schedule.language import Schedule


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

ROOT = Path(__file__).resolve().parents[2]

MM = """\
# sizes: M=7 N=5 K=13
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""
TR = """\
# sizes: M=4 N=3
def tr(float(M, N) A) -> (T) {
    T(j, i) = A(i, j)
}
"""
PC = """\
# sizes: N=6 M=5
def pc(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) + 1.0
}
"""
TWO = MM + TR.replace("# sizes: M=4 N=3\n", "")


def has_field(name: str) -> bool:
    return name in {f.name for f in fields(Config)}


@pytest.fixture
def tcfile(tmp_path):
    def write(text: str, name: str = "k.tc") -> str:
        p = tmp_path / name
        p.write_text(text)
        return str(p)
    return write


@pytest.fixture
def recipe(tmp_path):
    """``recipe(schedule_or_dict)``: write a recipe file, return its path."""
    def write(what, name: str = "recipe.json") -> str:
        data = what.to_recipe() if isinstance(what, Schedule) else what
        p = tmp_path / name
        p.write_text(json.dumps(data))
        return str(p)
    return write


def run_main(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def tiled_mm() -> Schedule:
    s = Schedule.from_program(polyc.program(MM))
    return s.tile([("C", "m"), ("C", "n")], [4, 4]).parallel(("C", "m_tile"))


# ---------------------------------------------------------------- explain

def test_explain_text(capsys, tcfile):
    rc, out, err = run_main(capsys, ["explain", tcfile(MM)])
    assert rc == 0, err
    assert out.startswith("explain mm: ")
    assert "\n  loop k  statements S0" in out
    assert "flow    C  S0 -> S0  distance (0, 0, 1)  reduction" in out
    assert "parallel      no: it carries the flow dependence on C from S0 to S0" in out
    assert "\nfusion" in out and "\ntiles" in out
    assert "  sizes: M=7 N=5 K=13" in out


def test_explain_json(capsys, tcfile):
    rc, out, err = run_main(capsys, ["explain", tcfile(MM), "--json"])
    assert rc == 0, err
    data = json.loads(out)
    assert data["program"] == "mm"
    (k,) = [lp for lp in data["loops"] if lp["name"] == "k"]
    flow = [d for d in k["carries"] if d["kind"] == "flow"]
    assert flow and flow[0]["tensor"] == "C" and flow[0]["distance"] == [0, 0, 1]
    assert all(lp["parallel"] for lp in data["loops"] if lp["name"] in ("m", "n"))
    assert [g["statements"] for g in data["fusion"]["groups"]] == [["S0", "S0_init"]]


def test_explain_def_and_recipe(capsys, tcfile, recipe):
    rc, out, err = run_main(capsys, ["explain", tcfile(TWO), "--def", "tr"])
    assert rc == 0, err
    assert out.startswith("explain tr: ")
    rc, out, err = run_main(capsys, ["explain", tcfile(MM), "--schedule",
                                     recipe(tiled_mm())])
    assert rc == 0, err
    assert "starting from the source order" in out
    assert "  loop m_tile  statements S0, S0_init; depth 0" in out
    assert "marked        parallel (omp parallel for)" in out
    assert "  band (m_tile, n_tile)  statements S0, S0_init" in out
    assert "    C      4 x 4" in out


def test_explain_fusion_kept_apart_under_the_source_order(capsys, tcfile, recipe):
    s = Schedule.from_program(polyc.program(PC))
    rc, out, err = run_main(capsys, ["explain", tcfile(PC), "--schedule", recipe(s)])
    assert rc == 0, err
    assert "  S0 | S1 kept apart:" in out
    assert "flow  T  S0 -> S1  distance (0, 0)" in out


# -------------------------------------------------------------- compile

def test_compile_under_a_recipe(capsys, tcfile, recipe):
    path = recipe(tiled_mm())
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", path,
                                     "--emit", "loopnest"])
    assert rc == 0, err
    assert out == tiled_mm().loop_nest()
    assert "for (m_tile = 0; m_tile < M; m_tile += 4)" in out
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", path,
                                     "--emit", "schedule"])
    assert rc == 0 and out == str(tiled_mm())
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", path,
                                     "--emit", "recipe"])
    assert rc == 0 and json.loads(out) == tiled_mm().to_recipe()
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", path,
                                     "--emit", "c"])
    assert rc == 0, err
    from polyc.backends.c import emit
    from polyc.pipeline import lower_schedule
    low = lower_schedule(tiled_mm())
    assert out == emit.emit(low.program, low.loopnest).text
    assert "#pragma omp parallel for" in out
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", path,
                                     "--emit", "ast"])
    assert rc == 0 and "for" in out


def test_compile_emit_schedule_loopnest_recipe_of_the_automatic_schedule(capsys, tcfile):
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--emit", "schedule"])
    assert rc == 0, err
    assert out.startswith("domain: S0, S0_init\n") and "band (" in out
    rc, nest, err = run_main(capsys, ["compile", tcfile(MM), "--emit", "loopnest"])
    assert rc == 0, err
    assert nest.startswith(("#pragma", "for")) and "S0(" in nest
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--emit", "recipe"])
    assert rc == 0, err
    data = json.loads(out)
    # the automatic schedule is a recipe: isl's tree and polyc's steps
    assert data["program"] == "mm" and data["start"] == "isl" and "tree" in data
    assert {st["op"] for st in data["steps"]} >= {"tile", "mark"}


def test_recipe_of_the_automatic_schedule_replays_to_the_same_c(capsys, tcfile, tmp_path):
    src = tcfile(MM)
    rc, text, err = run_main(capsys, ["compile", src, "--emit", "recipe"])
    assert rc == 0, err
    if "tree" not in json.loads(text):
        pytest.skip("recipes do not carry the starting tree")
    path = tmp_path / "auto.json"
    path.write_text(text)
    rc, auto_c, err = run_main(capsys, ["compile", src, "--emit", "c"])
    assert rc == 0, err
    rc, replayed_c, err = run_main(capsys, ["compile", src, "--emit", "c",
                                            "--schedule", str(path)])
    assert rc == 0, err
    assert replayed_c == auto_c


def test_run_under_a_recipe_checks_against_numpy(capsys, tcfile, recipe):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--schedule", recipe(tiled_mm()),
                                     "--check", "--json"])
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["check"]["passed"] and rep["schedule"].endswith("recipe.json")


def test_recipe_of_another_program_exits_2_naming_it(capsys, tcfile, recipe):
    other = Schedule.from_program(polyc.program(TR)).interchange(("T", "j"), ("T", "i"))
    path = recipe(other)
    for cmd in (["compile", tcfile(MM), "--emit", "c"], ["run", tcfile(MM)],
                ["explain", tcfile(MM)]):
        rc, out, err = run_main(capsys, cmd + ["--schedule", path])
        assert rc == 2, (cmd, err)
        assert "'tr'" in err and "'mm'" in err and "Traceback" not in err
        assert err.startswith("polyc: error: ")


def test_illegal_recipe_exits_2_naming_the_dependence(capsys, tcfile, recipe):
    good = tiled_mm().to_recipe()
    bad = dict(good, steps=good["steps"] + [
        {"op": "parallel", "args": [{"loop": ["C", "k"]}], "kwargs": {}}])
    path = recipe(bad)
    for cmd in (["compile", tcfile(MM)], ["run", tcfile(MM)], ["explain", tcfile(MM)]):
        rc, out, err = run_main(capsys, cmd + ["--schedule", path])
        assert rc == 2, (cmd, err)
        assert "flow dependence on tensor C" in err and "S0" in err, err
        assert "Traceback" not in err


def test_bad_recipe_files_exit_2(capsys, tcfile, tmp_path):
    missing = str(tmp_path / "nope.json")
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", missing])
    assert rc == 2 and "nope.json" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", str(broken)])
    assert rc == 2 and "invalid JSON" in err
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"format": "polyc-recipe-1",
                                   "steps": [{"op": "frobnicate", "args": []}]}))
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--schedule", str(unknown)])
    assert rc == 2 and "frobnicate" in err


def test_exit_status_of_a_real_process(tcfile, recipe):
    other = Schedule.from_program(polyc.program(TR))
    p = subprocess.run([sys.executable, "-m", "polyc.cli", "compile", tcfile(MM),
                        "--schedule", recipe(other)], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 2 and "'tr'" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "polyc.cli", "explain", tcfile(MM), "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["program"] == "mm"


# ------------------------------------------------------ scheduler options

def test_fusion_choices_are_checked(capsys, tcfile):
    with pytest.raises(SystemExit) as e:
        main(["compile", tcfile(MM), "--fusion", "sometimes"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "max" in err and "preserve_coincident" in err


@pytest.mark.parametrize("strategy", ["isl", "max", "min", "smart", "preserve_coincident"])
def test_fusion_strategies(capsys, tcfile, strategy):
    argv = ["explain", tcfile(PC), "--json", "--fusion", strategy]
    if not has_field("fusion"):
        rc, out, err = run_main(capsys, argv)
        assert rc == 2 and "Config.fusion" in err
        pytest.skip("Config.fusion not there yet")
    rc, out, err = run_main(capsys, argv)
    assert rc == 0, err
    data = json.loads(out)
    assert data["fusion"]["strategy"] == strategy
    groups = [g["statements"] for g in data["fusion"]["groups"]]
    if strategy == "min":
        assert groups == [["S0"], ["S1"]]
        assert any("'min'" in r for r in data["fusion"]["apart"][0]["reasons"])
    elif strategy == "max":
        assert groups == [["S0", "S1"]]
    rc, out, err = run_main(capsys, ["run", tcfile(PC), "--check", "--fusion", strategy])
    assert rc == 0, err


@pytest.mark.parametrize("flag,name", [("--no-skewing", "allow_skewing"),
                                       ("--no-outer-coincidence", "outer_coincidence")])
def test_scheduler_switches(capsys, tcfile, flag, name):
    argv = ["compile", tcfile(MM), "--emit", "schedule", flag]
    rc, out, err = run_main(capsys, argv)
    if not has_field(name):
        assert rc == 2 and f"Config.{name}" in err
        pytest.skip(f"Config.{name} not there yet")
    assert rc == 0, err
    assert out.startswith("domain:")
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--check", flag])
    assert rc == 0, err


def test_config_of_the_options():
    from polyc.cli import _config, build_parser
    args = build_parser().parse_args(["explain", "x.tc"])
    assert _config(args) == Config.from_env()
    if has_field("fusion") and has_field("allow_skewing") and has_field("outer_coincidence"):
        args = build_parser().parse_args(["run", "x.tc", "--fusion", "smart", "--no-skewing",
                                          "--no-outer-coincidence"])
        c = _config(args)
        assert (c.fusion, c.allow_skewing, c.outer_coincidence) == ("smart", False, False)


# ------------------------------------------------------------ the API

def test_kernel_explain():
    k = polyc.compile(MM)
    text = k.explain()
    assert text.startswith("explain mm: ") and "\n  loop k  " in text
    data = k.explain(json=True)
    json.dumps(data)
    (kl,) = [lp for lp in data["loops"] if lp["name"] == "k"]
    assert not kl["parallel"]
    k2 = polyc.compile(MM, schedule=tiled_mm())
    assert "m_tile" in k2.explain()


def test_tensorized_kernels_through_the_cli(capsys, tcfile, tmp_path, monkeypatch):
    """The automatic schedule's recipe (with its tensorize step) replays to
    the same C from the command line, ``polyc explain`` shows the mark, and
    a hand-written recipe that tensorizes runs and checks against numpy."""
    monkeypatch.setenv("POLYC_TENSORIZE", "1")
    src = tcfile(MM)
    rc, text, err = run_main(capsys, ["compile", src, "--emit", "recipe"])
    assert rc == 0, err
    assert json.loads(text)["steps"][0] == {"op": "tensorize", "args": [["S0", "m"], "gemm"],
                                            "kwargs": {}}
    path = tmp_path / "auto.json"
    path.write_text(text)
    rc, auto_c, err = run_main(capsys, ["compile", src, "--emit", "c"])
    assert rc == 0 and "polyc_gemm_f32(" in auto_c, err
    rc, replayed_c, err = run_main(capsys, ["compile", src, "--emit", "c",
                                            "--schedule", str(path)])
    assert rc == 0 and replayed_c == auto_c, err
    rc, out, err = run_main(capsys, ["explain", src])
    assert rc == 0 and "tensorized: one gemm call computes S0" in out, err
    by_hand = tmp_path / "hand.json"
    by_hand.write_text(Schedule.from_program(polyc.program(MM)).tensorize(("C", "m")).to_json())
    rc, out, err = run_main(capsys, ["run", src, "--schedule", str(by_hand), "--check",
                                     "--json"])
    assert rc == 0 and json.loads(out)["check"]["passed"], err


def test_triangle_rows_option_reaches_the_config(capsys, tcfile, monkeypatch):
    import polyc.cli as cli
    seen = []
    real = cli._config
    monkeypatch.setattr(cli, "_config", lambda args: seen.append(real(args)) or seen[-1])
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--triangle-rows", "56"])
    assert rc == 0, err
    assert seen and seen[-1].triangle_rows == 56
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--triangle-rows", "-3"])
    assert rc != 0 and "triangle_rows" in err


DOITGEN = """\
import polyc


@polyc.kernel
def doitgen(A, C4, s):
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                s[p] = 0.0
                for k in range(np_):
                    s[p] += A[r, q, k] * C4[k, p]
            for p in range(np_):
                A[r, q, p] = s[p]


@polyc.kernel
def only_shape(seq, table):
    n = seq.shape[0]
    for i in range(n):
        table[i] = i * 2.0
"""


def test_recipe_of_an_expanded_loop_program_replays(capsys, tmp_path, monkeypatch):
    """doitgen's accumulator ``s`` is expanded (``s_x``) so its update is a
    matrix product: ``--emit recipe`` records the expanded program, and
    ``--schedule`` replays onto it (it was refused: the fingerprints of the
    program as read and as compiled differ)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "1")
    src = tmp_path / "doitgen.py"
    src.write_text(DOITGEN)
    rc, text, err = run_main(capsys, ["compile", str(src), "--def", "doitgen",
                                      "--emit", "recipe"])
    assert rc == 0, err
    path = tmp_path / "doitgen.json"
    path.write_text(text)
    rc, auto_c, err = run_main(capsys, ["compile", str(src), "--def", "doitgen", "--emit", "c"])
    assert rc == 0 and "s_x" in auto_c, err
    rc, replayed_c, err = run_main(capsys, ["compile", str(src), "--def", "doitgen",
                                            "--emit", "c", "--schedule", str(path)])
    assert rc == 0 and replayed_c == auto_c, err


def test_an_array_read_only_through_its_shape_is_an_array(capsys, tmp_path):
    """``n = seq.shape[0]`` makes ``seq`` an array of the file's kernel
    (it was taken for a float scalar, and lowering refused the function)."""
    src = tmp_path / "k.py"
    src.write_text(DOITGEN)
    rc, out, err = run_main(capsys, ["compile", str(src), "--def", "only_shape",
                                     "--emit", "program"])
    assert rc == 0, err
    assert "seq: float64[" in out
