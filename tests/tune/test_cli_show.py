"""Two CLI regressions: ``polyc tune --show`` lists a best record whose
speedup was never measured (null), and a CLI whose stdout is closed early
(``polyc ... | head -1``) stops quietly instead of reporting an internal
error."""

from __future__ import annotations

import os
import subprocess
import sys

import polyc
from polyc.cli import main
from polyc.tune import Database
from polyc.tune.db import ALL_SIZES, key_info, key_of

TR = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }"


def test_show_lists_a_best_with_null_speedup(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    cfg = polyc.Config.from_env()
    info = key_info(polyc.program(TR), cfg, ALL_SIZES)
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": None, "label": "automatic",
                                  "speedup": None, "sizes": [{"N": 8, "M": 4}]}])
    assert main(["tune", "--show"]) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err
    line = next(x for x in out.splitlines() if " tr on " in x)
    assert "best automatic (not measured)" in line
    assert main(["tune", "--show", "--json"]) == 0
    assert '"speedup": null' in capsys.readouterr().out


def test_closed_stdout_ends_quietly(tmp_path):
    """``python -m polyc compile ... --emit c | head -1``: the reader closes
    the pipe after one line; polyc must not print an internal error or a
    traceback."""
    src = tmp_path / "mm.tc"
    src.write_text("# sizes: M=7 N=5 K=13\n"
                   "def mm(float(M, K) A, float(K, N) B) -> (C) {\n"
                   "    C(m, n) +=! A(m, k) * B(k, n)\n}\n")
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("POLYC_DEBUG", None)
    r, w = os.pipe()
    os.close(r)                         # nobody will ever read: every write fails
    try:
        proc = subprocess.run([sys.executable, "-m", "polyc", "compile", str(src),
                               "--emit", "c"], stdout=w, stderr=subprocess.PIPE,
                              env=env, text=True, timeout=300)
    finally:
        os.close(w)
    assert "internal error" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 141


def test_cli_usage_errors_and_dry_run_classes(tmp_path, capsys, monkeypatch):
    """``--count 0`` listed nothing with status 0, ``--export`` to a missing
    folder was an internal error, ``--dry-run --classes lattice`` ignored the
    classes: now two usage errors and the classes listed before the
    candidates."""
    import json

    import pytest
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "tr.tc"
    src.write_text(TR + "\n")
    with pytest.raises(SystemExit) as e:
        main(["tune", str(src), "--sizes", "N=8,M=4", "--dry-run", "--count", "0"])
    assert e.value.code == 2 and "--count: must be >= 1" in capsys.readouterr().err
    assert main(["tune", "--export", str(tmp_path / "missing" / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "internal error" not in err
    assert main(["tune", str(src), "--sizes", "N=1,M=64", "--sizes", "N=64,M=64",
                 "--dry-run", "--count", "2", "--classes", "lattice"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("class N = 1 and M >= 32") and "{'N': 1, 'M': 64}" in out[0]
    assert out[1].startswith("class N >= 32") and "{'N': 64, 'M': 64}" in out[1]
    assert main(["tune", str(src), "--sizes", "N=1,M=64", "--dry-run", "--count", "2",
                 "--classes", "lattice", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["classes"].values()) == [[{"N": 1, "M": 64}]] and doc["candidates"]
    # --json left out the 'not proposed' notes --explain prints (matvec's j:
    # no parallel mark, no simd mark without reassociation): one object carries both
    src = tmp_path / "mv.tc"
    src.write_text("def mv(float(N,M) A, float(M) x) -> (y) { y(i) +=! A(i,j) * x(j) }\n")
    assert main(["tune", str(src), "--sizes", "N=8,M=4", "--dry-run", "--count", "2",
                 "--explain"]) == 0
    text = [ln[len("not proposed: "):] for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("not proposed: ")]
    assert main(["tune", str(src), "--sizes", "N=8,M=4", "--dry-run", "--count", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert text and doc["not_proposed"] == text and doc["classes"] == {}
    assert all({"label", "status", "reason", "model"} <= set(c) for c in doc["candidates"])


def test_explain_lists_the_recorded_versions(tmp_path, capsys, monkeypatch):
    """``polyc explain`` of a program with versions by shape class recorded
    said nothing of them (polyc.compile builds them into the kernel), and
    its tuning note ended without a newline."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    cfg = polyc.Config.from_env()
    p = polyc.program(TR)
    info = key_info(p, cfg, "N = 1")
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": None, "label": "default", "version": True,
                                  "why": "1.30x the generic version"}])
    src = tmp_path / "tr.tc"
    src.write_text(TR + "\n")
    assert main(["explain", str(src), "--sizes", "N=8,M=4"]) == 0
    out = capsys.readouterr().out
    assert "versions by shape class (1" in out and "N = 1 — 1.30x the generic version" in out
    assert out.endswith("\n")
    # --show told the classes of one program apart by their key hash only
    assert main(["tune", "--show"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if " tr " in x)
    assert " tr [N = 1] on " in line and line.endswith("; a version")


def test_show_reports_a_skipped_line_as_one_warning_line(tmp_path, capsys, monkeypatch):
    """A corrupt database line was printed as a Python warning with polyc's
    file, line number and source line."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tuning.jsonl").write_text("garbage\n")
    assert main(["tune", "--show"]) == 0
    err = capsys.readouterr().err
    assert "polyc: warning: tuning database" in err and "line 1: not JSON" in err
    assert "cli.py" not in err and "recs = " not in err


def test_a_program_without_size_parameters_needs_no_sizes(tmp_path, capsys, monkeypatch):
    """``def f(float(4, 8) x)`` has no size to give: polyc tune asked for --sizes
    anyway, and nothing could satisfy it."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "f.tc"
    src.write_text("def f(float(4, 8) x) -> (y) { y(i, j) = x(i, j) * 2.0 }\n")
    assert main(["tune", str(src), "--dry-run", "--count", "1"]) == 0
    assert "legal" in capsys.readouterr().out
