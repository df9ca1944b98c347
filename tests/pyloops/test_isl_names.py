"""Loop variables spelled like isl's keywords (``floor``, ``max``, ``NaN``):
the frontend renames them in the IR (``floor_``), as it does sizes so
named (``floor, NaN = A.shape``), so isl reads back every tree it prints.
Before, ``for NaN in range(n)`` compiled to a kernel that ran nothing
(isl read ``S0[NaN, j]`` back as an empty set) and a recipe of
``for floor in ...`` did not replay.  The schedule language still answers to
the source's spelling (``("S0", "floor")``, ``"floor_tile"``).

Tolerance: float64, relative 1e-12 of the output's magnitude."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

RNG = np.random.default_rng(11)


@polyc.kernel
def nan_loop(A, B):
    n, m = A.shape
    for NaN in range(n):
        for j in range(m):
            B[NaN] += A[NaN, j] * NaN + A[NaN, j]


@polyc.kernel
def keyword_loops(A, B):
    n, m = A.shape
    for floor in range(n):
        for max in range(m):
            if floor >= max:
                B[floor, max] = A[floor, max] * floor - max
    for infty in range(n):
        B[infty, 0] += 1.0


def _reference(k, *args):
    want = [a.copy() for a in args]
    k.py_func(*want)
    return want


def _close(got, want):
    scale = max(float(np.max(np.abs(want))), 1e-300)
    assert np.max(np.abs(got - want)) <= 1e-12 * scale, (got, want)


def test_a_loop_named_nan_runs():
    A, B = RNG.random((6, 5)), np.zeros(6)
    want = _reference(nan_loop, A, B)
    nan_loop(A, B)
    _close(B, want[1])


@pytest.mark.parametrize("loop", ["floor", "max"])
def test_keyword_loops_tile_and_replay_from_a_recipe(loop):
    A, B = RNG.random((7, 6)), np.zeros((7, 6))
    want = _reference(keyword_loops, A, B)
    keyword_loops(A, B)
    _close(B, want[1])
    s = keyword_loops.schedule.tile([("S0", loop)], [4]).tile([("S0", f"{loop}_tile")], [2])
    assert f"band ({loop}_tile_tile)" in str(s)          # named as the source spells it
    recipe = s.to_recipe()
    B2 = np.zeros((7, 6))
    keyword_loops.with_schedule(recipe)(A, B2)
    _close(B2, want[1])
    text = polyc.Schedule.from_program(keyword_loops.program).to_text()
    assert polyc.Schedule.from_program(keyword_loops.program).from_text(text).to_text() == text


@polyc.kernel
def keyword_sizes(A, B):
    floor, NaN = A.shape
    for i in range(floor):
        for j in range(NaN):
            if i + j < floor:
                B[i] += A[i, j] * floor


def test_sizes_named_like_isl_keywords_replay():
    A, B = RNG.random((6, 5)), np.zeros(6)
    want = _reference(keyword_sizes, A, B)
    keyword_sizes(A, B)
    _close(B, want[1])
    B2 = np.zeros(6)
    keyword_sizes.with_schedule(keyword_sizes.schedule.tile([("S0", "i")], [4]).to_recipe())(A, B2)
    _close(B2, want[1])
    s = polyc.Schedule.from_program(keyword_sizes.program)
    assert s.from_text(s.to_text()).to_text() == s.to_text()


def test_a_tc_index_named_nan_runs():
    """The TC frontend keeps its index names: ``Schedule.from_isl`` read the
    tree's text back as another domain (``S0[NaN]``: empty) and compiled a
    kernel that wrote nothing; a tree that does not read back as itself is
    kept as it is."""
    k = polyc.compile("def f(float(N, M) A) -> (B) { B(NaN) +=! A(NaN, j) }")
    A = RNG.random((5, 4)).astype(np.float32)
    np.testing.assert_allclose(k(A), A.sum(axis=1), rtol=1e-6)
