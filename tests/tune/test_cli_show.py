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
