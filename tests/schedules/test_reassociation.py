"""``with_reassociation`` on loop programs: the updates of a reduction may
run in any order only when nothing observes its partial values.  A running
sum read inside its own loop (``B[i, j] = s[i]`` after ``s[i] += A[i, j]``)
keeps the order of its updates; a sum read once it is complete is released.
Each schedule is compared with the Python function run as plain Python."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import IllegalScheduleError


def running(A, s, B):
    n, m = A.shape
    for i in range(n):
        s[i] = 0.0
        for j in range(m):
            s[i] += A[i, j]
            B[i, j] = s[i]


def closed(A, s, B):
    n, m = A.shape
    for i in range(n):
        s[i] = 0.0
        for j in range(m):
            s[i] += A[i, j]
        for j in range(m):
            B[i, j] = s[i] * A[i, j]


def _run(fn, schedule, shape):
    A = np.random.default_rng(sum(shape)).random(shape)
    got = (A, np.zeros(shape[0]), np.zeros(shape))
    want = (A.copy(), np.zeros(shape[0]), np.zeros(shape))
    polyc.kernel(fn).with_schedule(schedule)(*got)
    fn(*want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _start(fn):
    k = polyc.kernel(fn)
    program = k.specialize(np.zeros((2, 3)), np.zeros(2), np.zeros((2, 3))).program
    return polyc.Schedule.from_program(program, reassociate=True)


@pytest.mark.parametrize("shape", [(1, 1), (4, 6), (3, 0)])
def test_a_running_sum_read_inside_its_loop_keeps_its_order(shape):
    s = _start(running)
    s.check()                               # the source order is legal, as without it
    _run(running, s.parallel(("S1", "i")).unroll_and_jam(("S1", "i"), 2), shape)
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor s from "
                                                   "statement S1 to statement S1") as e:
        s.reverse(("S1", "j"))
    assert "other statements read the partial values of S1 inside its loop" in str(e.value)
    w = e.value.witness
    assert (w.source, w.sink) == ("S1", "S1")
    assert w.source_point[0] == w.sink_point[0] and w.source_point[1] < w.sink_point[1]


@pytest.mark.parametrize("shape", [(1, 1), (4, 6), (3, 0)])
def test_a_sum_read_once_complete_is_reassociated(shape):
    s = _start(closed)
    r = s.reverse(("S1", "j"))              # legal only with reassociation
    with pytest.raises(IllegalScheduleError):
        polyc.Schedule.from_program(s.program).reverse(("S1", "j"))
    _run(closed, r, shape)


def assigned(A, x, w):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            w[i] = w[i] + A[i, j] * x[j]


def test_an_accumulation_written_as_an_assignment_is_a_reduction():
    """``w[i] = w[i] + e`` is the update ``w[i] += e`` (it was an assignment
    whose steps kept their order): with reassociation its loop vectorises
    and reverses, and the results are Python's (rel 1e-12)."""
    k = polyc.kernel(assigned)
    program = k.specialize(np.zeros((2, 3)), np.zeros(3), np.zeros(2)).program
    assert program.statements[0].kind == "update"
    s = polyc.Schedule.from_program(program).with_reassociation()
    rng = np.random.default_rng(2)
    A, x = rng.random((5, 7)), rng.random(7)
    want = np.zeros(5)
    assigned(A, x, want)
    for t in (s.vectorize(("S0", "j")), s.reverse(("S0", "j"))):
        got = np.zeros(5)
        k.with_schedule(t.to_recipe())(A, x, got)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_reassociate_true_is_recorded_in_the_recipe():
    """``Schedule.from_program(p, reassociate=True)``'s recipe replays (the
    option was not recorded: the replayed reverse was refused as illegal)."""
    k = polyc.kernel(assigned)
    rng = np.random.default_rng(4)
    A, x = rng.random((4, 6)), rng.random(6)
    program = k.specialize(A, x, np.zeros(4)).program
    s = polyc.Schedule.from_program(program, reassociate=True).reverse(("S0", "j"))
    assert [st["op"] for st in s.to_recipe()["steps"]] == ["with_reassociation", "reverse"]
    got, want = np.zeros(4), np.zeros(4)
    k.with_schedule(s.to_recipe())(A, x, got)
    assigned(A, x, want)
    np.testing.assert_allclose(got, want, rtol=1e-12)
