"""The PolyBench harness survives its peers: a baseline build that crashes
(or hangs) becomes a row saying so, the other columns and the other kernels
are still measured, and the run ends with its table (issue 19: a Polly build
that overflowed its stack on ``2mm`` killed ``python -m benchmarks.polybench``
and lost every row measured so far).

The crashing baseline is a real peer build: the gcc -O3 column's C is
compiled with ``-include`` of a header whose constructor raises SIGSEGV
when the library is loaded (or waits forever, for the timeout).  No
timing is asserted."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import isolate
from benchmarks.polybench import BENCHMARKS, run

CRASH_H = """#include <signal.h>
static void __attribute__((constructor)) polyc_test_crash(void) { raise(SIGSEGV); }
"""
HANG_H = """#include <unistd.h>
static void __attribute__((constructor)) polyc_test_hang(void) { for (;;) pause(); }
"""


def _peer_with_header(tmp_path, text: str, name: str, cache_dir: str, variants=run.variants):
    header = tmp_path / name
    header.write_text(text)
    cfgs = variants(None, cache_dir)
    gcc = cfgs["gcc -O3"]
    cfgs["gcc -O3"] = gcc.replace(cflags=tuple(gcc.cflags) + ("-include", str(header)))
    return cfgs


def test_a_crashing_baseline_becomes_a_row(tmp_path):
    cfgs = _peer_with_header(tmp_path, CRASH_H, "crash.h", str(tmp_path / "cache"))
    row = run.run_one(BENCHMARKS["gemm"], "MINI", cfgs, 0.0, 1, np.dtype("float64"))
    assert row["errors"] == {"gcc -O3": "crashed (SIGSEGV)"}
    assert row["gcc -O3"] is None
    assert row["polyc"] > 0 and "vs gcc -O3" not in row
    assert "crashed (SIGSEGV)" in run.table([row], list(cfgs))


def test_a_hanging_baseline_times_out(tmp_path):
    cfgs = _peer_with_header(tmp_path, HANG_H, "hang.h", str(tmp_path / "cache"))
    row = run.run_one(BENCHMARKS["gemm"], "MINI", cfgs, 0.0, 1, np.dtype("float64"),
                      peer_timeout=3)
    assert row["errors"] == {"gcc -O3": "timed out after 3 s"}
    assert row["polyc"] > 0


def test_the_run_goes_on_after_a_crash(tmp_path, monkeypatch, capsys):
    variants = run.variants

    def crashing_variants(polly_cc, cache_dir):
        assert polly_cc is None
        return _peer_with_header(tmp_path, CRASH_H, "crash.h", cache_dir, variants)

    monkeypatch.setattr(run, "variants", crashing_variants)
    status = run.main(["--dataset", "MINI", "--only", "gemm", "atax", "--no-polly",
                       "--repeat-time", "0", "--max-runs", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 1
    assert [r["kernel"] for r in out["rows"]] == ["gemm", "atax"]
    for r in out["rows"]:
        assert r["polyc"] > 0
        assert r["errors"] == {"gcc -O3": "crashed (SIGSEGV)"}


def test_a_healthy_baseline_is_measured_in_its_child(tmp_path):
    cfgs = run.variants(None, str(tmp_path / "cache"))
    row = run.run_one(BENCHMARKS["atax"], "MINI", cfgs, 0.0, 1, np.dtype("float64"))
    assert "errors" not in row
    assert row["gcc -O3"] > 0 and row["err"] <= 1e-6


def _raise():
    raise RuntimeError("no such peer")


@pytest.mark.parametrize("fn,args,error", [
    (_raise, (), "RuntimeError: no such peer"),
    (divmod, (7, 2), None),
])
def test_run_isolated_reports_the_childs_outcome(fn, args, error):
    got = isolate.run_isolated(fn, *args, timeout=60)
    assert got.error == error
    assert got.ok == (error is None)
    if error is None:
        assert got.value == (3, 1)


def test_a_crashing_peak_program_is_reported_not_fatal(tmp_path, monkeypatch, capsys):
    from benchmarks import peak, tensor
    src = tmp_path / "peak.c"
    src.write_text("#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }\n")
    monkeypatch.setattr(peak, "SOURCE", src)
    with pytest.raises(peak.PeakError, match=r"crashed \(SIGSEGV\)"):
        peak.measure(quick=True)
    # benchmarks.tensor goes on without the peak figures (and here without torch)
    monkeypatch.setattr(tensor, "_torch", lambda: None)
    assert tensor.main(["--tiny", "--only", "softmax", "--repeat-time", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["machine"]["peak"] is None and out["results"][0]["polyc_s"] > 0
