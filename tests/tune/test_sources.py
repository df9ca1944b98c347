"""What polyc.tune accepts besides TC source of float arguments: an einsum
string (it was a ParseError "expected 'def'") and TC source at another
dtype (tune had no dtype=, so ``polyc.compile(src, dtype="float64")`` never
found a record).  The record is the one ``polyc.einsum`` / ``polyc.compile``
looks up, and their results stay numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import BindingError, EinsumError
from polyc.tune import Budget

TINY = Budget(seconds=120, measured=1, sampled=100, first=1, neighbours=1, batch=1)


@pytest.fixture
def cfg(tmp_path):
    return polyc.Config.from_env().replace(cache_dir=str(tmp_path / "cache"))


def test_an_einsum_string_is_tuned_and_polyc_einsum_uses_the_record(cfg):
    from polyc.einsum_call import clear_kernels
    r = polyc.tune("ij,jk->ik", {"i": 40, "j": 24, "k": 32}, budget=TINY, config=cfg,
                   progress=False, dtype="float32")
    assert r.trials[0].status == "measured" and r.failed == 0, r.report(explain=True)
    assert r.sizes == [{"d_i": 40, "d_j": 24, "d_k": 32}]
    clear_kernels()
    rng = np.random.default_rng(0)
    a, b = rng.random((9, 5), dtype=np.float32), rng.random((5, 13), dtype=np.float32)
    np.testing.assert_allclose(polyc.einsum("ij,jk->ik", a, b, config=cfg), a @ b, rtol=1e-5)
    from polyc.einsum_call import _KERNELS
    (kernel,) = [k for (spec, c), k in _KERNELS.items() if c == cfg]
    assert kernel.tuning and kernel.tuning.startswith("tuned:")
    clear_kernels()


def test_einsum_requests_that_cannot_be_tuned(cfg):
    with pytest.raises(BindingError, match="give a size per label.*missing j, k"):
        polyc.tune("ij,jk->ik", {"i": 4}, config=cfg)
    with pytest.raises(BindingError, match="'...'"):
        polyc.tune("...ij->ij", {"i": 3, "j": 3}, config=cfg)
    with pytest.raises(EinsumError, match="never appeared"):
        polyc.tune("ij,jk->iq", {"i": 2, "j": 2, "k": 2, "q": 2}, config=cfg)
    with pytest.raises(BindingError, match="dtype= applies"):
        polyc.tune(polyc.program("def f(float(N) x) -> (y) { y(i) = x(i) }"), {"N": 4},
                   config=cfg, dtype="float64")


def test_tc_source_at_another_dtype(cfg):
    src = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }"
    r = polyc.tune(src, {"N": 60, "M": 40}, budget=TINY, config=cfg, progress=False,
                   dtype="float64")
    assert r.trials[0].status == "measured", r.report(explain=True)
    k = polyc.compile(src, config=cfg, dtype="float64")
    assert k.tuning and k.tuning.startswith("tuned:")
    assert polyc.compile(src, config=cfg).tuning is None     # float32: not tuned
    a = np.random.default_rng(1).random((7, 3))
    np.testing.assert_allclose(k(a), a.T + 1, rtol=1e-15)


def test_einsum_classes_over_labels_are_over_their_parameters():
    from polyc.tune.sources import tuned_program
    program, got = tuned_program("ij,jk->ik", None, {"i = 1": {"i": 1, "j": 8, "k": 8},
                                                     "all": [{"i": 9, "j": 8, "k": 8}]})
    assert program.params == ("d_i", "d_j", "d_k")
    assert got == {"d_i = 1": {"d_i": 1, "d_j": 8, "d_k": 8},
                   "all": [{"d_i": 9, "d_j": 8, "d_k": 8}]}


ADD = """
import polyc


@polyc.kernel
def add_shifted(A, B, C):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            C[i, j] = A[i, j] + B[i + 1, j]
"""


def test_a_loop_program_is_tuned_at_the_sizes_it_unpacks(cfg, tmp_path, monkeypatch):
    """``n, m = A.shape``: the other arrays' extents are sizes B_dim0...
    the user never named; ``polyc.tune(add, {"n": .., "m": ..})`` was
    refused for lacking them.  They default to the smallest the loops
    access (B: (n + 1) x m), and the session's check runs at them."""
    import importlib

    from polyc.tune.sources import fill_extents
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "add_shifted_mod.py").write_text(ADD)
    add = importlib.import_module("add_shifted_mod").add_shifted
    rng = np.random.default_rng(0)
    A, B = rng.random((3, 4)), rng.random((4, 4))
    C = np.zeros((3, 4))
    add(A, B, C)
    np.testing.assert_allclose(C, A + B[1:], rtol=1e-12)
    p = add.program
    filled = fill_extents(p, {"n": 5, "m": 7})
    assert filled == {"n": 5, "m": 7, "B_dim0": 6, "B_dim1": 7, "C_dim0": 5, "C_dim1": 7}
    # a program as polyc tune FILE.py lowers it, without preconditions yet:
    # the extents were filled with 0 (then "out of bounds" at the first check)
    assert fill_extents(p.replace(preconditions=None), {"n": 5, "m": 7}) == filled
    assert fill_extents(p, {"n": 5}) == {"n": 5}          # a named size missing: refused later
    assert fill_extents(p, {"n": 5, "m": 7, "B_dim0": 9})["B_dim0"] == 9
    # the message listed the array extents too, as if they had to be given
    with pytest.raises(BindingError, match=r"lack m \(the program's .*; array extents "
                                           r"default to what the loops access\)"):
        polyc.tune(add, {"n": 5}, budget=TINY, config=cfg, record=False)
    r = polyc.tune(add, {"n": 40, "m": 33}, budget=TINY, config=cfg, progress=False)
    assert r.trials[0].status == "measured", r.report()
    assert polyc.tune.candidates(add, [{"n": 1, "m": 8}, {"n": 9, "m": 8}], count=2)


def test_the_dry_run_takes_shape_classes_as_tune_does():
    src = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }"
    classes = {"N = 1": {"N": 1, "M": 64}, "all": {"N": 64, "M": 64}}
    # (was "sizes {'N = 1': ...} lack N, M")
    trials = polyc.tune.candidates(src, classes, count=2)
    assert trials and trials[0].status in ("legal", "duplicate", "illegal", "inapplicable")
    with pytest.raises(BindingError, match="not in class"):
        polyc.tune.candidates(src, {"N = 1": {"N": 2, "M": 64}}, count=2)


def test_lattice_classes_of_a_loop_program(tmp_path, capsys):
    """``polyc tune add.py --sizes n=1,m=64 ... --classes lattice --dry-run``
    was refused for lacking B_dim0... (the dry run grouped the sizes before
    filling in the array extents), and ``polyc.tune(..., classes="lattice")``
    made the extents lattice parameters too: guards such as ``C_dim0 = 1``
    that a caller passing larger arrays misses.  Classes are over n, m."""
    from polyc.cli import main
    (tmp_path / "add_lattice.py").write_text(ADD)
    sizes = ["n=1,m=64", "n=7,m=64", "n=64,m=64"]
    assert main(["tune", str(tmp_path / "add_lattice.py"), *[a for s in sizes
                 for a in ("--sizes", s)], "--classes", "lattice", "--dry-run",
                 "--count", "1"]) == 0
    classes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("class ")]
    assert len(classes) == 3 and not any("_dim" in ln.split(":")[0] for ln in classes)
    assert any(ln.startswith("class n = 1 and m >= 32") and "'B_dim0': 2" in ln
               for ln in classes), classes
