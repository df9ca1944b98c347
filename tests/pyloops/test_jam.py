"""Row recurrences of loop programs unrolled and jammed (the automatic
schedule's step 2c', polyc/schedule/auto.py ``jam``): ``tmp[i] = 0.5 *
tmp[i] + A[i, j] * x[j]`` is a recurrence, not a reduction update (``tmp[i]
= tmp[i] + e`` is one, as ``+=``: tests/pyloops/test_spelled_updates.py), so
it runs in source order, and the rows advance together, eight recurrences
per iteration of ``j``, instead of a vector loop over ``i`` whose every load
of ``A`` is a gather.  The results are bit for bit those of the source order
(``Config(schedule="identity")``) at sizes around the jam factor and the
tile size."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.api import compile_with_schedule
from polyc.schedule.auto import JAM_FACTOR


@polyc.kernel
def row_dots(A, x, tmp):
    m, n = A.shape
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = 0.5 * tmp[i] + A[i, j] * x[j]


@polyc.kernel
def column_sums(A, s):
    m, n = A.shape
    for j in range(n):
        s[j] = 0.0
    for i in range(m):
        for j in range(n):
            s[j] = s[j] + A[i, j]


def _inputs(m, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, n)).astype(dtype), rng.standard_normal(n).astype(dtype))


@pytest.mark.parametrize("m", [1, JAM_FACTOR - 1, JAM_FACTOR, JAM_FACTOR + 1, 17, 64, 65, 131])
@pytest.mark.parametrize("n", [1, 5, 70])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_advance_together_in_source_order(m, n, dtype):
    A, x = _inputs(m, n, dtype)
    got, want = np.full(m, np.nan, dtype), np.full(m, np.nan, dtype)
    row_dots(A, x, got)
    row_dots.with_config(polyc.Config(schedule="identity"))(A, x, want)
    np.testing.assert_array_equal(got, want)


def test_the_schedule_unrolls_and_jams_the_rows():
    A, x = _inputs(40, 30, np.float64)
    k = row_dots.specialize(A, x, np.zeros(40))
    steps = [st["op"] for st in k.schedule.to_recipe()["steps"]]
    assert "unroll_and_jam" in steps and "distribute" in steps
    # the recurrence's loop is innermost and sequential: no vector loop over
    # the rows of A (a gather per element)
    update = k.source.index("tmp[i] = 0.5 * tmp[i] + A[i, j] * x[j]")
    assert k.source.count("tmp[i] = 0.5 * tmp[i] + A[i, j] * x[j]") >= JAM_FACTOR
    assert "omp simd" not in k.source[k.source.rindex("for (", 0, update) - 200:update]
    replayed = compile_with_schedule(k.program, k.schedule.to_recipe(), polyc.Config())
    assert replayed.source == k.source


@pytest.mark.parametrize("m,n", [(1, 1), (9, 7), (66, 40)])
def test_atax_matches_the_source_order(m, n):
    """PolyBench's atax: ``tmp = A x`` (a reduction along the rows: summed in
    another order, rel 1e-13), then ``y = A^T tmp``."""
    atax = BENCHMARKS["atax"].kernel
    A, x = _inputs(m, n, np.float64, seed=3)
    got = (np.zeros(n), np.zeros(m))
    want = (np.zeros(n), np.zeros(m))
    atax(A, x, *got)
    atax.with_config(polyc.Config(schedule="identity"))(A, x, *want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-13 * max(np.abs(w).max(), 1.0))


def test_a_stride_one_coincident_member_still_vectorises():
    """Column sums: ``j`` is coincident and stride-1 in every access, so it
    is the vector loop and nothing is jammed."""
    A, _ = _inputs(20, 33, np.float64)
    s = np.zeros(33)
    column_sums(A, s)
    k = column_sums.specialize(A, s)
    assert "unroll_and_jam" not in [st["op"] for st in k.schedule.to_recipe()["steps"]]
    want = np.zeros(33)
    column_sums.with_config(polyc.Config(schedule="identity"))(A, want)
    np.testing.assert_array_equal(s, want)



@pytest.mark.parametrize("n", [1, JAM_FACTOR + 1, 40])
def test_gesummv_two_reductions_along_one_loop_are_jammed(n):
    """PolyBench's gesummv: two reduction updates along ``j`` in one band
    (``tmp[i]`` and ``y[i]``, fused by the statement that reads both), so no
    single register accumulator: they are jammed as the recurrences they
    were before ``tmp[i] = e + tmp[i]`` became an update (left plain, gesummv
    at LARGE ran 3.5 ms against 1.7 ms jammed), summed in source order."""
    gesummv = BENCHMARKS["gesummv"].kernel
    rng = np.random.default_rng(5)
    A, B, x = rng.standard_normal((n, n)), rng.standard_normal((n, n)), rng.standard_normal(n)
    got = (np.full(n, np.nan), np.full(n, np.nan))
    want = (np.full(n, np.nan), np.full(n, np.nan))
    gesummv(1.5, 1.2, A, B, got[0], x, got[1])
    gesummv.with_config(polyc.Config(schedule="identity"))(1.5, 1.2, A, B, want[0], x, want[1])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    k = gesummv.specialize(1.5, 1.2, A, B, *got[:1], x, got[1])
    assert "unroll_and_jam" in [st["op"] for st in k.schedule.to_recipe()["steps"]]
