"""Array contraction (polyc.schedule.contraction): temporaries whose every
dependence stays inside one iteration of a loop become buffers declared in
that loop's body.  Each case checks which temporaries were contracted, at
which loop and to what size, that the C function no longer takes them, and
the kernel's result against numpy (tolerance: polyc.testing.assert_close
with the longest reduction's length)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from polyc import api
from polyc.config import Config
from polyc.pipeline import compile_program, lower
from polyc.testing import assert_close

RNG = np.random.default_rng(7)

RBF = """
def rbf(double(N,D) X, double(M,D) Y) -> (O, T) {
    T(i, j) +=! (X(i, d) - Y(j, d)) * (X(i, d) - Y(j, d))
    O(i) +=! exp(-T(i, j))
}
"""

SOFTMAX = """
def softmax(float(N,K) X) -> (O, Mx, E, S) {
    Mx(i) max=! X(i, j)
    E(i, j) = exp(X(i, j) - Mx(i))
    S(i) +=! E(i, j)
    O(i, j) = E(i, j) / S(i)
}
"""

ALL_TO_ALL = """
def all_to_all(float(N) X) -> (O, T) {
    T(i) = X(i) * 2.0
    O(i) +=! T(j) * X(i)
}
"""

ROWS = """
def rows(float(N,K) X, float(K,J) W) -> (O, T) {
    T(i, k) = X(i, k) * X(i, k)
    O(i, j) +=! T(i, k) * W(k, j)
}
"""


def with_temps(source: str, temps: set[str], **kw):
    prog = api.program(source, **kw)
    return prog.replace(tensors=tuple(replace(t, role="temp") if t.name in temps else t
                                      for t in prog.tensors))


def cfg(**kw) -> Config:
    return Config(disk_cache=False, **kw)


def contracted(low) -> dict:
    return {c.tensor: c for c in low.contracted}


def test_reduction_result_contracts_to_a_scalar():
    prog = with_temps(RBF, {"T"})
    got = contracted(lower(prog, cfg()))
    assert set(got) == {"T"} and got["T"].scalar and got["T"].sizes == (1, 1)
    k = compile_program(prog, cfg())
    assert "T" not in k._source.tensors and "double t_T_c[1][1]" in k.source
    x, y = RNG.standard_normal((37, 3)), RNG.standard_normal((45, 3))
    want = np.exp(-((x[:, None, :] - y[None]) ** 2).sum(-1)).sum(-1)
    assert_close(k(x, y), want, reduction_length=45)


def test_per_row_statistics_contract_and_the_row_stays_an_array():
    prog = with_temps(SOFTMAX, {"Mx", "E", "S"})
    got = contracted(lower(prog, cfg()))
    assert {"Mx", "S"} <= set(got) and all(got[t].scalar for t in ("Mx", "S"))
    assert "E" not in got                      # a row of N elements: no constant box
    k = compile_program(prog, cfg())
    assert "E" in k._source.tensors and "Mx" not in k._source.tensors
    x = RNG.standard_normal((20, 33)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    assert_close(k(x), e / e.sum(-1, keepdims=True), reduction_length=33)


def test_a_value_read_by_other_iterations_is_not_contracted():
    prog = with_temps(ALL_TO_ALL, {"T"})
    assert contracted(lower(prog, cfg())) == {}
    k = compile_program(prog, cfg())
    assert "T" in k._source.tensors
    x = RNG.standard_normal(50).astype(np.float32)
    assert_close(k(x), (2 * x).sum() * x, reduction_length=50)


def test_a_constant_box_becomes_a_small_buffer():
    from polyc import astgen
    from polyc.backends.c import build, emit
    from polyc.runtime import Kernel
    from polyc.schedule.contraction import contract_temporaries
    prog = with_temps(ROWS, {"T"}, sizes={"K": 8})
    # the automatic pipeline contracts to scalars only (SCALARS_ONLY): T stays
    assert contracted(lower(prog, cfg(tensorize=False))) == {}
    low = lower(prog, cfg(tensorize=False, contract=False))
    sched, prog2, done = contract_temporaries(low.schedule, low.program)
    # the row of T that one iteration of i (or of its tile loop) reads
    (c,) = done
    assert c.tensor == "T" and c.sizes[1:] == (8,) and c.sizes[0] <= 256
    src = emit.emit(prog2, astgen.generate(prog2, sched))
    assert "T" not in src.tensors and "float t_T_c[" in src.text
    k = Kernel(prog2, src, build.build_library(src.text, config=cfg()), cfg())
    x = RNG.standard_normal((30, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 11)).astype(np.float32)
    assert_close(k(x, w), (x * x) @ w, reduction_length=8)


def test_contraction_can_be_turned_off():
    prog = with_temps(RBF, {"T"})
    assert contracted(lower(prog, cfg(contract=False))) == {}
    k = compile_program(prog, cfg(contract=False))
    assert "T" in k._source.tensors


def test_a_kernel_whose_source_comes_from_the_cache_allocates_no_contracted_temporary(tmp_path):
    prog = with_temps(RBF, {"T"})
    from polyc import cache, pipeline
    config = Config.from_env(cache_dir=str(tmp_path), disk_cache=True)
    pipeline._LOWERED.clear()          # lowered by the tests above: write it to disk
    first = compile_program(prog, config)
    pipeline._LOWERED.clear()          # a new process: only the disk cache is left
    cache.clear_memory()
    again = compile_program(prog, config)         # the lowered source read from disk
    assert again._lowered is None and "T" not in again._source.tensors
    x, y = RNG.standard_normal((9, 2)), RNG.standard_normal((13, 2))
    assert_close(again(x, y), first(x, y), reduction_length=13)
    assert "array contraction" in again.explain()


@pytest.mark.parametrize("budget", [0, 4])
def test_the_budget_of_local_buffers_is_respected(budget):
    from polyc.schedule.contraction import contract_temporaries
    prog = with_temps(ROWS, {"T"}, sizes={"K": 8})
    low = lower(prog, cfg(tensorize=False, contract=False))
    _, prog2, done = contract_temporaries(low.schedule, low.program, budget=budget)
    # at budget 4 the 1x8 float row does not fit; a deeper loop has no box
    assert done == [] and prog2 is low.program


def _two_nests(A, B, C):
    n = A.shape[0]
    for i in range(n):
        t = A[i] * 2.0
        B[i] = t
    for i in range(n):
        t = A[i] + 1.0
        C[i] = t * t


def test_temporaries_of_separate_nests_compute_right():
    """Each nest (a child of the top-level sequence) has its own scalar.
    They are not contracted: a loop whose statements run over different
    ranges of it is generated as a loop and a peeled iteration, each with
    its own buffer (contraction.py, ``covers``); the results are numpy's."""
    import polyc
    a, b, c = RNG.standard_normal(9), np.zeros(9), np.zeros(9)
    k = polyc.kernel(_two_nests, config=cfg()).specialize(a, b, c)
    k(a, b, c)
    np.testing.assert_allclose(b, a * 2.0)
    np.testing.assert_allclose(c, (a + 1.0) ** 2)


def test_a_value_read_in_a_peeled_iteration_is_the_one_written():
    """np.corrcoef(a, b)[0, 1]: the element is read after the loop that
    writes the matrix, at that loop's last iteration (it returned 0.0 when
    the matrix was contracted to a buffer of the loop's body)."""
    import polyc
    a, b = RNG.standard_normal(20), RNG.standard_normal(20)

    def g(a, b):
        return np.corrcoef(a, b)[0, 1]
    np.testing.assert_allclose(polyc.jit(g)(a, b), g(a, b), rtol=1e-12)


def test_the_automatic_recipe_replays_with_its_contractions_and_windows():
    """The softmax's row maximum and sum contract to scalars and its
    exponentials are stored in thread windows; compiling the kernel's
    recipe does both too, so the recipe gives the same code (it gave
    neither: the windows were the automatic pipeline's only)."""
    from polyc.pipeline import compile_schedule
    from polyc.schedule.language import Schedule
    prog = with_temps(SOFTMAX, {"Mx", "S", "E"})
    config = cfg(tensorize=False)
    low = lower(prog, config)
    assert set(contracted(low)) == {"Mx", "S"} and {w.tensor for w in low.windows} == {"E"}
    k = compile_program(prog, config)
    again = compile_schedule(Schedule.replay(prog, k.schedule.to_recipe()), config)
    assert again.source == k.source
    x = RNG.standard_normal((37, 19)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(again(x), e / e.sum(axis=1, keepdims=True), reduction_length=19)


def test_a_value_of_a_statement_on_fewer_loops_is_read_in_its_iteration():
    """``a[:, 0] = x[:, 0] * 2`` then ``d[1:] = a[1:] * 3``: the column
    ``x[:, 0] * 2`` (a statement on loop i only) was contracted to a buffer
    of the body of loop j, where isl generated it in a piece of its own
    before the j loop, each piece with its own buffer: the loop read an
    uninitialised value (column 0 of d was 0).  A temporary contracts only
    at loops its statements all run over the same iterations of."""
    import polyc

    def f(x):
        a = x * 1
        a[:, 0] = x[:, 0] * 2
        d = a * 1
        d[1:] = a[1:] * 3
        return d
    x = RNG.standard_normal((5, 7)).astype(np.float32)
    np.testing.assert_allclose(polyc.jit(f)(x), f(x.copy()), rtol=1e-6)
