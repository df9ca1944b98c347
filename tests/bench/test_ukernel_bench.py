"""benchmarks.ukernel builds the GEMM driver for each ISA build, measures,
and prints one row per size (no timing is asserted)."""

from __future__ import annotations

import shutil

import pytest

from benchmarks import ukernel


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="no C compiler")
def test_ukernel_benchmark_quick(capsys):
    assert ukernel.main(["--quick", "--builds", "native", "portable"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| native")
            or line.startswith("| portable")]
    assert len(rows) == 2 * len(ukernel.QUICK_SIZES)
    assert all(float(r.split("|")[3]) > 0 for r in rows)
    assert all(r.split("|")[4].strip() == "-" for r in rows if r.startswith("| portable"))
