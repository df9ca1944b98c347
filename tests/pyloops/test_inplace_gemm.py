"""Contractions whose output is also an operand (PolyBench's ``trmm``,
``B(i, j) += A(k, i) * B(k, j)``) on the GEMM micro-kernel, issue 15 item 3.

Over a band (trmm's ``k > i``), one call in place: each panel of the
reduction is packed before the call writes C, so an element read at
reduction index ``k_r`` may be written only at ``k_w >= k_r``, and the
source must read it before writing it (:func:`polyc.callbox.inplace_reason`;
a recurrence fails and takes row blocks).  On row blocks
(``Config.triangle_rows``), a call may read its output through an operand
only where no call reads an element it writes
(:func:`polyc.callbox.read_while_written`); the diagonal edge of a block
that the call depends on runs right before it when nothing it passes
forbids that (``GemmMatch.moved``, :func:`polyc.schedule.callorder.atomic_reason`).
Against plain Python loops at sizes around the block of rows, and the
refusals with their reasons.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS, fresh
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule


@polyc.kernel
def backward(alpha, A, B):
    """B := alpha * (I + strictly_lower(A))^T B, in place (PolyBench's trmm)."""
    m = B.shape[0]
    n = B.shape[1]
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]


@polyc.kernel
def forward(B, A):
    """B[i] += A[i, :i] @ B[:i] with the rows already updated (a recurrence)."""
    m = B.shape[0]
    n = B.shape[1]
    for i in range(m):
        for j in range(n):
            for k in range(i):
                B[i, j] += A[i, k] * B[k, j]


@polyc.kernel
def square(C, B):
    """C = C @ B in place: every call would read the rows it writes."""
    n = C.shape[0]
    m = C.shape[1]
    for i in range(n):
        for j in range(m):
            for k in range(m):
                C[i, j] += C[i, k] * B[k, j]


@polyc.kernel
def clobbered(C, A, B):
    """A triangle in the reduction, and a statement between a call's
    instances that writes rows of B later instances read."""
    n = C.shape[0]
    m = C.shape[1]
    for i in range(n):
        for j in range(m):
            for k in range(i, n):
                C[i, j] += A[i, k] * B[k, j]
            if i + 30 < n:
                B[i + 30, j] = 0.5 * B[i + 30, j]


SIZES = [(0, 4), (1, 3), (5, 2), (28, 7), (29, 1), (57, 9), (90, 33)]


def _called(kern, banded=False):
    call = "polyc_gemmt_f64(" if banded else "polyc_gemm_f64("
    assert call in kern.source, kern.explain()
    assert "S0 tensorized onto gemm" in kern.explain()


def _rows(kern):
    """``kern`` compiled with calls on blocks of rows."""
    from polyc.callbox import triangle_rows
    return polyc.kernel(kern.py_func, config=polyc.Config(triangle_rows=triangle_rows()))


@pytest.mark.parametrize("m,n", SIZES)
def test_trmm_in_place_matches_its_loops(m, n):
    rng = np.random.default_rng(m)
    A, B = rng.standard_normal((m, m)), rng.standard_normal((m, n))
    want = B.copy()
    backward.py_func(1.5, A, want)
    got = B.copy()
    backward(1.5, A, got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    kern = backward.specialize(1.5, A, got)
    _called(kern, banded=True)      # one call over the band, in place
    assert "in place (B is also an operand" in kern.explain()
    assert "POLYC_GEMM_BAND_MK" in kern.source
    got = B.copy()
    _rows(backward)(1.5, A, got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if m >= 28:                 # a full block of rows exists
        _called(_rows(backward).specialize(1.5, A, got))


@pytest.mark.parametrize("m,n", SIZES)
def test_a_recurrence_through_the_output_reads_finished_rows(m, n):
    rng = np.random.default_rng(m + 1)
    A, B = 0.05 * rng.standard_normal((m, m)), rng.standard_normal((m, n))
    want = B.copy()
    forward.py_func(want, A)
    got = B.copy()
    forward(got, A)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
    kern = forward.specialize(got, A)
    # one call over the band would read rows before the source updates them
    assert "polyc_gemmt_f64(" not in kern.source
    if m >= 28:
        _called(kern)
        assert "is written at a smaller one" in kern.explain() or \
            "full part of each block of rows" in kern.explain()


def test_the_band_refuses_a_recurrence_with_the_reason():
    from polyc.intrinsics import match_gemm
    from polyc.schedule.tensorize_auto import as_updates
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((40, 40)), rng.standard_normal((40, 6))
    prog = as_updates(forward.specialize(B, A).program)
    why = match_gemm(prog, prog.statement("S0"))
    assert isinstance(why, str) and "read at one reduction index is written at a smaller" in why
    prog = as_updates(backward.specialize(1.0, A, B).program)
    m = match_gemm(prog, prog.statement("S0"))
    assert not isinstance(m, str) and m.inplace and m.band.pair == "mk" and m.init is None


@polyc.kernel
def through_a(C, B):
    """C[i, :] += C[i, i+1:] @ B[i+1:, :]: the output is the call's A operand."""
    n = C.shape[0]
    for i in range(n):
        for j in range(n):
            for k in range(i + 1, n):
                C[i, j] += C[i, k] * B[k, j]


def test_the_band_refuses_the_output_as_its_a_operand():
    """A is packed again for every block of columns of C, after earlier
    blocks wrote it: in place only through B (trmm's)."""
    from polyc.intrinsics import match_gemm
    from polyc.schedule.tensorize_auto import as_updates
    rng = np.random.default_rng(4)
    C, B = rng.standard_normal((40, 40)), 0.1 * rng.standard_normal((40, 40))
    prog = as_updates(through_a.specialize(C, B).program)
    why = match_gemm(prog, prog.statement("S0"))
    assert isinstance(why, str) and "also the call's A operand" in why
    want, got = C.copy(), C.copy()
    through_a.py_func(want, B)
    through_a(got, B)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)


def test_polybench_trmm_calls_the_micro_kernel_at_small():
    bench = BENCHMARKS["trmm"]
    args = bench.init(bench.sizes["SMALL"], np.float64)
    kern = bench.kernel.specialize(*fresh(args))
    _called(kern, banded=True)
    got, want = fresh(args), fresh(args)
    bench.kernel(*got)
    bench.reference(*want)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-12, atol=1e-12)


def test_a_call_that_would_read_what_it_writes_is_refused():
    rng = np.random.default_rng(5)
    C, B = rng.standard_normal((40, 12)), 0.1 * rng.standard_normal((12, 12))
    want = C.copy()
    square.py_func(want, B)
    got = C.copy()
    square(got, B)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    kern = square.specialize(got, B)
    assert "polyc_gemm" not in kern.source
    assert "an operand is also the output: one call would read through C(i, k)" \
        in kern.explain()


def test_an_edge_that_cannot_run_before_its_call_keeps_the_loops():
    rng = np.random.default_rng(6)
    n = 75
    C, A, B = (rng.standard_normal((n, 5)), rng.standard_normal((n, n)),
               rng.standard_normal((n, 5)))
    want, wb = C.copy(), B.copy()
    clobbered.py_func(want, A, wb)
    got, gb = C.copy(), B.copy()
    clobbered(got, A, gb)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(gb, wb)
    kern = clobbered.specialize(got, A, gb)
    assert "polyc_gemm" not in kern.source
    assert "run between the instances of one call and the call depends on them" \
        in kern.explain()


def test_the_trmm_tree_reads_back_to_the_same_code():
    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((70, 70)), rng.standard_normal((70, 20))
    kern = backward.specialize(1.0, A, B)
    text = kern.schedule.to_text()
    again = Schedule.from_program(kern.schedule.program).from_text(text)
    assert compile_schedule(again).source == kern.source
