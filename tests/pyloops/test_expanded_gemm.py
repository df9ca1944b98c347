"""An accumulator expanded so that its update becomes one matrix product
(PolyBench's ``doitgen``; :func:`polyc.expansion.expand_array`,
``tensorize_auto.expanded_for_calls``), issue 15 item 3.

Against the kernel's own Python loops (every argument, the accumulator's
final values included) at sizes with empty loops; the refusals (a value that
flows between iterations, outer loops that are no box) keep the loops.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.expansion import expand_array

doitgen = BENCHMARKS["doitgen"].kernel


@polyc.kernel
def carried(A, C4, acc):
    """The accumulator is never reset: each (r, q) adds to the last one's."""
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                for s in range(np_):
                    acc[p] += A[r, q, s] * C4[s, p]
            for p in range(np_):
                A[r, q, p] = acc[p]


@polyc.kernel
def triangle(A, C4, acc):
    """The (r, q) loops are a triangle: their expansion would be no box."""
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(r + 1):
            for p in range(np_):
                acc[p] = 0.0
                for s in range(np_):
                    acc[p] += A[r, q, s] * C4[s, p]
            for p in range(np_):
                A[r, q, p] = acc[p]


def _args(nr, nq, np_, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((nr, nq, np_)), rng.standard_normal((np_, np_)),
            rng.standard_normal(np_))


def _same(kern, args):
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    kern(*got)
    kern.py_func(*want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nr,nq,np_", [(0, 3, 4), (2, 0, 4), (3, 2, 0), (1, 1, 1),
                                       (4, 5, 6), (7, 3, 33)])
def test_doitgen_matches_its_loops_and_keeps_the_accumulators_last_values(nr, nq, np_):
    _same(doitgen, _args(nr, nq, np_))


def test_doitgen_is_one_call_on_the_expanded_accumulator():
    kern = doitgen.specialize(*_args(5, 4, 16))
    assert kern.source.count("polyc_gemm_f64(") == 1
    assert "tensorized onto gemm (m=r*q, n=p, k=s; C=sum_x" in kern.explain()
    temps = [t for t in kern.program.tensors if t.role == "temp"]
    assert [t.name for t in temps] == ["sum_x"] and temps[0].ndim == 3
    # the last statement copies the last (r, q) back into the argument
    assert kern.program.statements[-1].rhs.tensor == "sum_x"


def test_without_tensorization_nothing_is_expanded():
    kern = polyc.kernel(doitgen.py_func, config=polyc.Config(tensorize=False)) \
        .specialize(*_args(3, 3, 8))
    assert all(t.role != "temp" for t in kern.program.tensors)
    assert "polyc_gemm" not in kern.source


def test_a_value_carried_between_iterations_is_not_expanded():
    args = _args(3, 4, 9, 1)
    _same(carried, args)
    kern = carried.specialize(*args)
    assert "polyc_gemm" not in kern.source
    assert "sum or broadcast" in kern.explain()
    assert "from before the program" in expand_array(kern.program, "acc")


def test_outer_loops_that_are_no_box_keep_the_loops():
    args = _args(6, 6, 10, 2)
    _same(triangle, args)
    kern = triangle.specialize(*args)
    assert "polyc_gemm" not in kern.source
    assert all(t.role != "temp" for t in kern.program.tensors)


def test_the_cli_explains_and_compiles_the_expanded_kernel(tmp_path, capsys):
    import inspect

    from polyc.cli import main
    path = tmp_path / "doitgen.py"
    path.write_text("import polyc\n\n\n@polyc.kernel\n" + inspect.getsource(doitgen.py_func))
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "S1 tensorized onto gemm (m=r*q, n=p, k=s; C=sum_x" in out
    assert main(["compile", str(path)]) == 0
    assert "polyc_gemm_f64(" in capsys.readouterr().out
