"""Every ``examples/*.tc`` compiles, runs and matches ``polyc.reference``.

Each example runs at small sizes (its ``# sizes:`` header divided by 8, at
least 1) and, when cheap, at the header sizes themselves; the expensive header
runs are marked ``slow``.  ``examples/quickstart.py`` runs as a script.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc import reference
from polyc.frontend import tc
from polyc.isl_util import dim_range
from polyc.testing import assert_close, random_inputs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TC_FILES = sorted(p.name for p in EXAMPLES.glob("*.tc"))
#: Header-size runs that take more than a few seconds (compile + numpy oracle).
SLOW_AT_HEADER_SIZES = {"gconv.tc", "mlp.tc", "tmm.tc", "matmul.tc", "group_norm.tc"}


def test_examples_are_found():
    assert len(TC_FILES) >= 9, TC_FILES
    assert {"matmul.tc", "mlp.tc", "softmax.tc", "embedding_bag.tc"} <= set(TC_FILES)


@functools.lru_cache(maxsize=None)
def compiled(name: str):
    text = (EXAMPLES / name).read_text()
    k = polyc.compile(text, filename=str(EXAMPLES / name))
    assert isinstance(k, polyc.Kernel), f"{name} should hold exactly one def"
    return text, k


def reduction_length(program, sizes) -> int:
    """Terms per output element of the longest reduction at ``sizes``."""
    longest = 1
    for s in program.statements:
        n = 1
        for it in s.reduction_iterators:
            r = dim_range(s.domain, s.iterators.index(it), dict(sizes))
            n *= 1 if r is None else r[1] - r[0] + 1
        longest = max(longest, n)
    return longest


def run_and_compare(name: str, sizes: dict[str, int], seed: int = 0) -> None:
    _, k = compiled(name)
    program = k.program
    inputs = random_inputs(program, sizes, seed=seed)
    before = {n: a.copy() for n, a in inputs.items()}
    args = [inputs[n] if n in inputs else sizes[n] for n in program.signature]
    got = k(*args)
    got = got if isinstance(got, tuple) else (got,)
    for n, a in inputs.items():
        assert np.array_equal(a, before[n]), f"{name}: input {n} was modified"
    want = reference.evaluate(program, inputs, sizes)
    red = reduction_length(program, sizes)
    assert len(got) == len(program.outputs)
    for t, g in zip(program.outputs, got):
        w = want[t.name]
        assert g.shape == w.shape, f"{name}: {t.name} shape {g.shape} != {w.shape}"
        assert g.dtype == np.dtype(t.dtype), f"{name}: {t.name} dtype {g.dtype}"
        assert_close(g, w, dtype=t.dtype, reduction_length=red, name=f"{name}: {t.name}")


def header_sizes(name: str) -> dict[str, int]:
    sizes = tc.sizes_header((EXAMPLES / name).read_text())
    assert sizes, f"{name} has no '# sizes:' header"
    return sizes


@pytest.mark.parametrize("name", TC_FILES)
def test_example_small_sizes(name):
    sizes = {k: max(1, v // 8) for k, v in header_sizes(name).items()}
    run_and_compare(name, sizes)


@pytest.mark.parametrize("name", TC_FILES)
def test_example_odd_small_sizes(name):
    """Sizes not divisible by anything: header / 8 plus a prime offset."""
    sizes = {k: max(1, v // 8) + (3 if v >= 8 else 0) for k, v in header_sizes(name).items()}
    run_and_compare(name, sizes, seed=1)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in SLOW_AT_HEADER_SIZES else n
    for n in TC_FILES])
def test_example_header_sizes(name):
    run_and_compare(name, header_sizes(name))


def test_quickstart_script_runs():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "quickstart.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "matches numpy" in proc.stdout
    assert "Traceback" not in proc.stderr
