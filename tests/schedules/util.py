"""Helpers of the schedule-language tests: programs by TC source, and a
differential check of a user schedule against the numpy reference.

``check(schedule, sizes)`` compiles ``schedule`` (a ``polyc.Schedule``)
through :func:`polyc.pipeline.compile_schedule`, runs it on seeded random
inputs and compares every output with :func:`polyc.reference.evaluate` of
the *original* program (the schedule's base program), with the per-dtype
tolerance of :func:`polyc.testing.assert_close`.
"""

from __future__ import annotations

import functools

import pytest

import polyc
from polyc import reference, testing
from polyc.errors import IllegalScheduleError, ScheduleError
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule

MATMUL = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""

#: producer / consumer: T is produced, then consumed elementwise
PRODUCER_CONSUMER = """
def pc(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) + 1.0
}
"""

#: a one-dimensional stencil over time: A(t, i) from A(t-1, i-1 .. i+1)
STENCIL = """
def stencil(float(N) X, float(T) W) -> (A) {
    A(t, i) = X(i) where t in 0:T, i in 0:N
    A(t, i) = (A(t-1, i-1) + A(t-1, i) + A(t-1, i+1)) * 0.3333 where t in 1:T, i in 1:N-1
}
"""

#: a recurrence along j: S1 carries a flow dependence of distance (0, 1)
RECUR = """
def recur(float(N, M) X) -> (A) {
    A(i, j) = X(i, j) where i in 0:N, j in 0:M
    A(i, j) = A(i, j-1) + X(i, j) where i in 0:N, j in 1:M
}
"""

#: an in-place update reading A(i+1, j-1) before S1(i+1, j-1) overwrites it:
#: an anti dependence of distance (1, -1)
ANTI = """
def anti(float(N, M) X) -> (A) {
    A(i, j) = X(i, j)
    A(i, j) = A(i+1, j-1) * 0.5 + X(i, j) where i in 0:N-1, j in 1:M
}
"""


@functools.lru_cache(maxsize=None)
def program(src: str, name: str | None = None):
    return polyc.program(src, name)


def start(src: str, **kw) -> Schedule:
    return Schedule.from_program(program(src), **kw)


def check(schedule: Schedule, sizes: dict, seed: int = 0) -> None:
    """Compile ``schedule`` and compare its outputs with numpy's."""
    base = schedule._base
    kernel = compile_schedule(schedule)
    inputs = testing.random_inputs(base, sizes, seed)
    args = testing.call_args(base, inputs, sizes)
    got = kernel(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = reference.evaluate(base, inputs, sizes)
    for t, g in zip(base.outputs, got):
        w = want[t.name]
        assert g.shape == w.shape, (t.name, g.shape, w.shape)
        testing.assert_close(g, w, dtype=t.dtype,
                             reduction_length=testing.reduction_length(base, sizes))
    return kernel


def refused(s: Schedule, fn, exc=ScheduleError) -> str:
    """Run ``fn(s)``, expect ``exc``; check that ``s`` is unchanged (tree and
    recipe); return the message.  An ``IllegalScheduleError`` is not a
    ``ScheduleError``: asking for one does not accept the other."""
    text, recipe = s.to_text(), s.recipe
    with pytest.raises(exc) as info:
        fn(s)
    if exc is ScheduleError:
        assert not isinstance(info.value, IllegalScheduleError), info.value
    assert s.to_text() == text, "a refused transformation changed the schedule"
    assert s.recipe == recipe
    return str(info.value)
