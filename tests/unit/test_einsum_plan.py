"""Contraction paths of ``polyc.einsum(..., optimize=...)`` (``polyc/einsum_plan.py``)
without compiling anything: the steps of a plan, the path against
``numpy.einsum_path`` for each strategy, explicit paths, and every
``optimize`` argument numpy rejects, rejected with numpy's class."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import errors
from polyc.einsum_plan import ContractionStep, einsum_path, normalize_optimize, plan_contraction

F64 = "float64"


def _numpy_path(subscripts, shapes, optimize):
    path, _ = np.einsum_path(subscripts, *[np.empty(s) for s in shapes], optimize=optimize)
    return [tuple(p) for p in path[1:]]


def _plan(subscripts, shapes, optimize, dtypes=None):
    return plan_contraction(subscripts, shapes, dtypes or [F64] * len(shapes), optimize)


def _flops(steps):
    return sum(s.flops for s in steps)


def test_chain_at_200_is_two_cubic_contractions():
    # issue 14: one O(n^4) nest was 8x slower than numpy's pairwise path
    steps = _plan("ij,jk,kl->il", [(200, 200)] * 3, True)
    assert steps == [
        ContractionStep((0, 1), "ij,jk->ik", (200, 200), F64, 2 * 200 ** 3, 3),
        ContractionStep((0, 1), "kl,ik->il", (200, 200), F64, 2 * 200 ** 3, 3),
    ]
    single = _plan("ij,jk,kl->il", [(200, 200)] * 3, False)
    assert [s.scaling for s in single] == [4]
    assert single[0].flops > 50 * _flops(steps)


@pytest.mark.parametrize("optimize", [False, None])
def test_no_optimize_is_one_step_over_all_operands(optimize):
    steps = _plan("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)], optimize)
    assert [(s.operands, s.subscripts, s.shape) for s in steps] == [
        ((0, 1, 2), "ij,jk,kl->li", (5, 2))]


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),              # two operands: nothing to order
    ("i,j,k->ijk", [(2,), (3,), (4,)]),           # nothing summed
    ("ii->", [(3, 3)]),
])
def test_numpy_keeps_one_step(subscripts, shapes):
    for optimize in (True, "greedy", "optimal"):
        steps = _plan(subscripts, shapes, optimize)
        assert len(steps) == 1 and steps[0].operands == tuple(range(len(shapes)))
        assert _numpy_path(subscripts, shapes, optimize) == [steps[0].operands]


#: Networks where opt_einsum's greedy path is numpy's.
COMMON = [
    ("ij,jk,kl->il", [(200, 200)] * 3),
    ("ij,jk,kl->il", [(10, 400), (400, 30), (30, 500)]),
    ("ij,jk,kl,lm->im", [(8, 64), (64, 32), (32, 128), (128, 4)]),
    ("bij,bjk,bkl->bil", [(4, 16, 32), (4, 32, 8), (4, 8, 64)]),
    ("ea,fb,abcd,gc,hd->efgh", [(10, 10)] * 2 + [(10, 10, 10, 10)] + [(10, 10)] * 2),
    ("ii,ij,jk->k", [(30, 30), (30, 40), (40, 5)]),
    ("i,ij,jk,k->", [(100,), (100, 20), (20, 100), (100,)]),
]


def test_greedy_may_differ_from_numpys_greedy():
    """numpy's greedy is its own port of opt_einsum 2's; opt_einsum 3's can
    pick another path, here a costlier one (10000 FLOPs against 7750);
    'optimal' finds numpy's."""
    eq, shapes = "ab,bc,cd,de,ef->af", [(5, 50), (50, 5), (5, 50), (50, 5), (5, 50)]
    numpy_greedy = _plan(eq, shapes, ["einsum_path"] + _numpy_path(eq, shapes, "greedy"))
    assert _flops(_plan(eq, shapes, "greedy")) == 10000
    assert _flops(numpy_greedy) == _flops(_plan(eq, shapes, "optimal")) == 7750
    assert [s.operands for s in _plan(eq, shapes, "optimal")] == [
        tuple(sorted(p)) for p in _numpy_path(eq, shapes, "optimal")]


@pytest.mark.parametrize("strategy", ["greedy", "optimal", True])
@pytest.mark.parametrize("subscripts,shapes", COMMON)
def test_path_is_numpys_on_common_networks(subscripts, shapes, strategy):
    steps = _plan(subscripts, shapes, strategy)
    want = _numpy_path(subscripts, shapes, strategy)
    assert [s.operands for s in steps] == [tuple(sorted(p)) for p in want]


def test_optimal_matches_numpys_flop_count_on_random_networks():
    """opt_einsum's 'optimal' under numpy's default memory bound finds paths
    of numpy's cost on every network; its 'greedy' differs from numpy's own
    port of the old opt_einsum greedy on some (same path on 87% of these,
    same cost on 94%), so only the FLOP model is checked for it."""
    rand_equation = pytest.importorskip("opt_einsum.testing").rand_equation
    for seed in range(60):
        eq, shapes = rand_equation(3 + seed % 4, 2, n_out=seed % 3, d_min=2, d_max=9,
                                   seed=seed)
        ours = _plan(eq, shapes, "optimal")
        theirs = _plan(eq, shapes, ["einsum_path"] + _numpy_path(eq, shapes, "optimal"))
        assert _flops(ours) == _flops(theirs), eq
        # the FLOP model is numpy's: its report's count for its own path
        _, report = np.einsum_path(eq, *[np.empty(s) for s in shapes], optimize="greedy")
        count = float(report.split("Optimized FLOP count:")[1].split()[0])
        mine = _flops(_plan(eq, shapes, ["einsum_path"] + _numpy_path(eq, shapes, "greedy")))
        assert mine + 1 == pytest.approx(count, rel=1e-3), eq


def test_memory_limit_is_passed_to_the_search():
    shapes = [(10, 10), (10, 10), (10, 10, 10, 10), (10, 10), (10, 10)]
    eq = "ea,fb,abcd,gc,hd->efgh"
    assert len(_plan(eq, shapes, ("greedy", 10 ** 4))) == 4
    # no intermediate fits: one contraction of everything, as in numpy
    assert [s.operands for s in _plan(eq, shapes, ("optimal", 1))] == [(0, 1, 2, 3, 4)]
    assert _numpy_path(eq, shapes, ("optimal", 1)) == [(0, 1, 2, 3, 4)]


def test_limits_below_one_leave_one_step():
    # a zero-size operand makes numpy's default bound 0, which opt_einsum
    # refuses (numpy lets size-0 intermediates fit; either way nothing is computed)
    shapes = [(0, 3), (3, 0), (3, 0)]
    for optimize in ("optimal", ("greedy", 0), ("optimal", -1)):
        assert [s.operands for s in _plan("li,ij,ij", shapes, optimize)] == [(0, 1, 2)]
    assert [s.operands for s in _plan("ij,jk,kl", [(2, 3), (3, 2), (2, 3)], ("greedy", 0))] == [
        (0, 1, 2)] == _numpy_path("ij,jk,kl", [(2, 3), (3, 2), (2, 3)], ("greedy", 0))


def test_explicit_path_is_taken_as_given():
    shapes = [(2, 3), (3, 4), (4, 5)]
    steps = _plan("ij,jk,kl->il", shapes, ["einsum_path", (2, 1), (0, 1)])
    assert [(s.operands, s.subscripts, s.shape) for s in steps] == [
        ((1, 2), "jk,kl->jl", (3, 5)), ((0, 1), "ij,jl->il", (2, 5))]
    steps = _plan("ij,jk,kl->il", shapes, ("einsum_path", [0], [0, 1], [0, 1]))
    assert [s.subscripts for s in steps] == ["ij->ij", "jk,kl->jl", "ij,jl->il"]
    # a unary step after the last pair maps the intermediate to the output
    steps = _plan("ij,jk,kl->li", shapes, ["einsum_path", (0, 1), (0, 1), (0,)])
    assert [s.subscripts for s in steps] == ["ij,jk->ik", "kl,ik->li", "li->li"]
    # numpy returns the operand itself for an empty path on one operand
    assert [s.subscripts for s in _plan("ii->", [(3, 3)], ["einsum_path"])] == ["ii->"]


def test_steps_keep_ellipsis_and_broadcast_sizes():
    shapes = [(2, 3, 4), (4, 5), (1, 5, 6)]
    steps = _plan("...ij,jk,...kl->i...l", shapes, ["einsum_path", (1, 2), (0, 1)])
    assert [(s.subscripts, s.shape) for s in steps] == [
        ("jk,...kl->...jl", (1, 4, 6)), ("...ij,...jl->i...l", (3, 2, 6))]
    # j has size 1 in the first operand and 4 in the second: the intermediate
    # of the first and third keeps size 1
    steps = _plan("ij,jk,kl->il", [(3, 1), (4, 5), (5, 2)], ["einsum_path", (0, 2), (0, 1)])
    assert [(s.subscripts, s.shape) for s in steps] == [
        ("ij,kl->ijkl", (3, 1, 5, 2)), ("jk,ijkl->il", (3, 2))]


def test_intermediates_compute_in_numpys_type_of_their_operands():
    shapes = [(2, 3), (3, 4), (4, 5)]
    path = ["einsum_path", (0, 1), (0, 1)]
    steps = plan_contraction("ij,jk,kl->il", shapes, ["float32", "float32", "float64"], path)
    assert [s.dtype for s in steps] == ["float32", "float64"]
    assert np.einsum("ij,jk->ik", np.ones((2, 3), "f4"), np.ones((3, 4), "f4")).dtype == "f4"
    steps = plan_contraction("ij,jk,kl->il", shapes, ["float32"] * 3, path, dtype="float64")
    assert [s.dtype for s in steps] == ["float64", "float64"]
    steps = plan_contraction("ij,jk,kl->il", shapes, ["float32"] * 3, path, out_dtype="float64")
    assert [s.dtype for s in steps] == ["float32", "float64"]
    # int8 intermediates are computed in int8, wrapping around as numpy's do
    steps = plan_contraction("ij,jk,kl->il", shapes, ["int8", "int8", "float32"], path)
    assert [s.dtype for s in steps] == ["int8", "float32"]


def test_einsum_path_returns_numpys_pair():
    ops = [np.empty((200, 200))] * 3
    path, report = polyc.einsum_path("ij,jk,kl->il", *ops)
    assert path == np.einsum_path("ij,jk,kl->il", *ops)[0] == ["einsum_path", (0, 1), (0, 1)]
    assert "Complete contraction:  ij,jk,kl->il" in report
    assert "Optimized FLOP count:  3.200e+07" in report
    assert "ij,jk->ik" in report and "kl,ik->il" in report
    path, _ = einsum_path(ops[0], [0, 1], ops[1], [1, 2], ops[2], [2, 3], [0, 3],
                          optimize=False)
    assert path == ["einsum_path", (0, 1, 2)]


#: (optimize, the class numpy raises, a substring of polyc's message)
BAD = [
    (["einsum_path", (0, 1)], RuntimeError,
     "Invalid einsum_path is specified: 1 more operands has to be contracted."),
    (["einsum_path"], RuntimeError,
     "Invalid einsum_path is specified: 2 more operands has to be contracted."),
    (["einsum_path", (0, 5), (0, 1)], IndexError, "pop index out of range"),
    (["einsum_path", (-1, 0), (0, 1)], ValueError, "negative position"),
    ("foo", KeyError, "Path name foo not found"),
    ("True", KeyError, "Path name True not found"),
    (("greedy",), TypeError, "Did not understand the path: ('greedy',)"),
    ([], TypeError, "Did not understand the path: []"),
    (3, TypeError, "Did not understand the path: 3"),
    (np.False_, TypeError, "Did not understand the path"),
    (["einsum_path", 0, 1], TypeError, "'int' object is not iterable"),
    (["einsum_path", (0.0, 1), (0, 1)], TypeError,
     "'float' object cannot be interpreted as an integer"),
]


@pytest.mark.parametrize("optimize,cls,text", BAD, ids=[repr(b[0]) for b in BAD])
def test_bad_paths_raise_numpys_class(optimize, cls, text):
    ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))]
    with pytest.raises(cls):
        np.einsum("ij,jk,kl->il", *ops, optimize=optimize)
    with pytest.raises(cls) as info:
        polyc.einsum("ij,jk,kl->il", *ops, optimize=optimize)
    assert isinstance(info.value, errors.PolycError)
    assert text in str(info.value)
    with pytest.raises(cls):
        plan_contraction("ij,jk,kl->il", [o.shape for o in ops], [F64] * 3, optimize)


@pytest.mark.parametrize("optimize,text", [
    (["einsum_path", (0, 0), (0, 1)], "names an operand twice"),   # numpy: a wrong result
    (["einsum_path", (), (0, 1, 2)], "names no operand"),
])
def test_paths_numpy_misreads_are_refused(optimize, text):
    with pytest.raises(errors.EinsumError, match=text):
        plan_contraction("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], [F64] * 3, optimize)


def test_unknown_name_passes_where_numpy_does_not_search():
    # numpy checks the name only when there is a path to search for
    ops = [np.ones((2, 3)), np.ones((3, 4))]
    np.einsum("ij,jk->ik", *ops, optimize="foo")
    assert len(_plan("ij,jk->ik", [(2, 3), (3, 4)], "foo")) == 1


def test_optimize_is_checked_before_the_subscripts():
    # numpy's order: the kind of optimize, then the subscripts
    with pytest.raises(TypeError):
        np.einsum("ij,jk,kl->iz", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)),
                  optimize=("greedy",))
    with pytest.raises(errors.BindingError):
        _plan("ij,jk,kl->iz", [(2, 3), (3, 4), (4, 5)], ("greedy",))


def test_normalized_optimize_is_hashable():
    for opt in (False, True, "optimal", ("greedy", 1e3), ["einsum_path", [0, 1], (0, 1)]):
        hash(normalize_optimize(opt))
    assert normalize_optimize(["einsum_path", [True, 0]]).path == ((1, 0),)
