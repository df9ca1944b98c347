"""benchmarks.warm_call runs, prints a row per kernel, and leaves the call
shim setting as it found it (no timing is asserted)."""

from __future__ import annotations

import os

from benchmarks import warm_call


def test_warm_call_benchmark_prints_both_paths(capsys, monkeypatch):
    monkeypatch.setattr(warm_call, "_best", lambda fn: (fn(), 1e-6)[1])
    monkeypatch.delenv("POLYC_CALL_SHIM", raising=False)
    assert warm_call.main(["gemm256_f32", "kronecker"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| gemm256_f32")
            or line.startswith("| kronecker")]
    assert len(rows) == 2 and all(len(r.split("|")) == 7 for r in rows)
    assert "POLYC_CALL_SHIM" not in os.environ
