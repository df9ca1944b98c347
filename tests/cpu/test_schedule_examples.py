"""Every ``examples/schedules/*.py`` script runs, exits 0 and prints what it
promises; ``docs/schedules.md`` covers every transformation and quotes the
refusals of ``refused.py`` as the code prints them today.

Each script runs as a subprocess (``sys.executable``) with
``POLYC_EXAMPLE_SMALL=1``, which the scripts read to use small sizes and to
skip their timings.  A script added to the directory without an entry in
:data:`EXPECTED` fails :func:`test_every_example_is_covered`.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE_EXAMPLES = ROOT / "examples" / "schedules"
SCHEDULE_DOC = ROOT / "docs" / "schedules.md"
SCRIPTS = sorted(p.name for p in SCHEDULE_EXAMPLES.glob("*.py"))

#: Lines (substrings) each script's output must contain, with how many times.
EXPECTED: dict[str, dict[str, int]] = {
    "custom_intrinsic.py": {
        "registered: static void outer8(": 1,
        "mark: tensorize:outer8:S0": 1,
        "call: outer8(t_A + ": 1,
        "the tensorized kernel matches numpy": 1,
        "refused: tensorize(S0.m, 'outer8')": 1,
        "register outer8: IntrinsicError": 1,
        "register bad: CompileError": 1,
    },
    "gpu_matmul.py": {
        "refused: map_to_threads([C.n, C.k]): GPU mapping of kernel 0 is illegal": 1,
        "witness: S0[0, 0, 0] -> S0[0, 0, 1]": 1,
        "mark: gpu_map_threads:8,32": 1,
        "mark: gpu_private": 1,
        '"op": "promote_registers"': 1,
        "A -> shared A_shared[32x32]": 1,
        "C -> registers C_reg[1x1]": 1,
        "the emulated kernel matches numpy": 1,
    },
    "gpu_softmax_phases.py": {
        "mark: gpu_map_threads:128": 4,
        "refused: map_to_threads([S1.c]): GPU mapping: the flow dependence on t": 1,
        "witness: S1[0, 0, 0] -> S1[0, 0, 1]": 1,
        "phases: thread0 | reduce S0 | threads | thread0 | reduce S2 | threads": 1,
        "barrier before S1: flow dependence on mx from S0 to S1": 1,
        "barrier before S3: flow dependence on s from S2 to S3": 1,
        "the emulated kernel matches numpy": 1,
    },
    "matmul_tile.py": {
        "--- source order": 1,
        "for (k_tile = 0; k_tile < K; k_tile += 64)": 1,
        "#pragma omp parallel for": 1,
        "#pragma omp simd": 1,
        '"format": "polyc-recipe-1"': 1,
        "matches numpy": 1,
    },
    "refused.py": {
        "refused: ": 3,
        "parallel(C.k) is illegal": 1,
        "the flow dependence on tensor C": 1,
        "the reduction dependence on tensor C": 1,
        "with_reassociation()": 1,
        "reverse(S1.t) is illegal": 1,
        "the schedules are unchanged after the refusals": 1,
    },
    "fuse_producer_consumer.py": {
        "S0 | S1 kept apart:": 1,
        "every statement runs in one loop nest": 1,
        "reuse distance of T at N=8, M=8: max 64, mean 64": 1,
        "reuse distance of T at N=8, M=8: max 1, mean 1": 1,
        "both schedules match numpy": 1,
    },
    "stencil_wavefront.py": {
        "for (i = t + 1; i < N + t - 1; i++)": 1,
        "refused: parallel(S1.i_tile) is illegal": 1,
        "it carries the flow dependence on tensor A": 1,
        "#pragma omp parallel for": 1,
        "wavefront and source order match numpy": 1,
    },
}


@functools.lru_cache(maxsize=None)
def run_script(name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, POLYC_EXAMPLE_SMALL="1")
    return subprocess.run([sys.executable, str(SCHEDULE_EXAMPLES / name)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


def test_every_example_is_covered():
    assert len(SCRIPTS) >= 4, SCRIPTS
    assert sorted(EXPECTED) == SCRIPTS, (
        "add the expected output of each examples/schedules script to EXPECTED")


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_has_docstring_and_main(name):
    module = ast.parse((SCHEDULE_EXAMPLES / name).read_text())
    doc = ast.get_docstring(module)
    assert doc and "Run: " in doc, f"{name}: the module docstring should say how to run it"
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in module.body), name


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(name):
    proc = run_script(name)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    for line, times in EXPECTED.get(name, {}).items():
        found = proc.stdout.count(line)
        assert found == times, (f"{name}: expected {line!r} {times} time(s) in the output, "
                                f"found {found}:\n{proc.stdout}")


def test_docs_cover_every_transformation():
    from polyc.schedule.language import METHODS
    doc = SCHEDULE_DOC.read_text()
    missing = [op for op in (*METHODS, "with_reassociation") if f"\n### {op}\n" not in doc]
    assert not missing, f"docs/schedules.md has no section for {missing}"


def test_docs_quote_the_refusals_verbatim():
    """The three messages of refused.py appear in the doc exactly as printed."""
    proc = run_script("refused.py")
    assert proc.returncode == 0, proc.stderr
    doc = SCHEDULE_DOC.read_text()
    refusals = [line[len("refused: "):] for line in proc.stdout.splitlines()
                if line.startswith("refused: ")]
    assert len(refusals) == 3, proc.stdout
    stale = [msg for msg in refusals if msg not in doc]
    assert not stale, f"docs/schedules.md quotes an outdated refusal; now: {stale}"
