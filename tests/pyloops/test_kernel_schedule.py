"""A ``@polyc.kernel`` compiled under a user schedule
(``polyc.kernel(schedule=...)``, ``PyKernel.with_schedule``): the recipe
replays on the specialisation's program, every step checked against the
dependences, and the result is numpy's."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import IllegalScheduleError, ScheduleError

from .test_frontend import gemm

RNG = np.random.default_rng(5)


mm = gemm.py_func        # C[i, j] += A[i, k] * B[k, j], called (C, A, B)


def prefix(x):
    for i in range(1, x.shape[0]):
        x[i] += x[i - 1]


def test_recipe_and_schedule_object_compile_the_kernel():
    A, B = RNG.random((40, 24)), RNG.random((24, 30))
    auto = polyc.kernel(mm)
    auto(np.zeros((40, 30)), A, B)
    tiled = polyc.Schedule.from_program(auto.program).tile([("C", "i"), ("C", "j")], [16, 8])
    for k in (auto.with_schedule(tiled.to_recipe()), polyc.kernel(schedule=tiled)(mm),
              polyc.kernel(mm).with_schedule(tiled.to_json())):
        C = np.zeros((40, 30))
        k(C, A, B)
        np.testing.assert_allclose(C, A @ B, rtol=1e-12)
        assert [st["op"] for st in k.schedule.to_recipe()["steps"]] == ["tile"]
        assert "tensorize" not in k.schedule.tree() and "polyc_gemm" not in k.source
    # other sizes reuse the specialisation; the recipe keeps its tiles
    A2, B2 = RNG.random((7, 5)), RNG.random((5, 3))
    C2 = np.zeros((7, 3))
    k(C2, A2, B2)
    np.testing.assert_allclose(C2, A2 @ B2, rtol=1e-12)


def test_illegal_and_foreign_recipes_are_refused_at_the_call():
    p = polyc.kernel(prefix)
    x = RNG.random(20)
    p(x.copy())
    recipe = polyc.Schedule.from_program(p.program).to_recipe()
    recipe["steps"] = [{"op": "reverse", "args": [["x", "i"]], "kwargs": {}}]
    y = RNG.random(20)
    before = y.copy()
    with pytest.raises(IllegalScheduleError, match="flow dependence"):
        p.with_schedule(recipe)(y)
    assert np.array_equal(y, before)
    # a recipe of the float64 specialisation does not replay on float32
    k = polyc.kernel(mm)
    k(np.zeros((4, 2)), RNG.random((4, 3)), RNG.random((3, 2)))
    k64 = k.with_schedule(polyc.Schedule.from_program(k.program).to_recipe())
    f32 = [a.astype(np.float32) for a in (np.zeros((4, 2)), RNG.random((4, 3)), RNG.random((3, 2)))]
    with pytest.raises(polyc.RecipeMismatchError,
                       match="float32 2-d array.*record one per specialisation"):
        k64(*f32)
    # a Schedule object (not a recipe) of the float64 program: the same typed error
    k64s = k.with_schedule(polyc.Schedule.from_program(k.program))
    with pytest.raises(polyc.RecipeMismatchError, match="record one per specialisation"):
        k64s(*f32)
    assert issubclass(polyc.RecipeMismatchError, ScheduleError)
