"""How ``@polyc.jit`` functions are called (polyc.graph.jit, polyc.graph.jitcall):
one jitted function inside another, methods, static floats and arrays,
lists and dicts of arrays, and globals, closure cells and attributes that
change between calls.  Every result is compared with numpy's on the same
inputs: polyc.testing.assert_close at the dtype's default tolerance
(float32 here; reduction_length for the matrix products)."""

from __future__ import annotations

import gc
import warnings
import weakref
from collections import namedtuple

import numpy as np
import pytest

import polyc
from polyc.errors import BindingError, DTypeError, PolycWarning, TraceError
from polyc.testing import assert_close

RNG = np.random.default_rng(21)
F32 = np.float32


def rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


def _n_plans(j) -> int:
    return sum(len(v) for v in j._plans.values())


# -- a jitted function called inside another one ------------------------------------
@polyc.jit
def _inner(x):
    return x * 2


@polyc.jit
def _outer(x):
    return _inner(x) + 1


@polyc.jit(static_argnames=("k",))
def _scaled(x, k):
    return x * k


@polyc.jit
def _outer_static(x):
    return _scaled(x, k=3.0) - _scaled(x, 0.5)


def test_a_jitted_function_inside_another_traces_inline():
    x = rand(3, 4)
    assert_close(_outer(x), x * 2 + 1)
    # one graph: the inner function's multiply is an operation of the outer
    # trace, and the inner function was never traced on its own
    assert len(_outer.graph(x).ops) == 2
    assert _n_plans(_inner) == 0
    assert_close(_inner(x), x * 2)        # still a jitted function of its own
    assert _n_plans(_inner) == 1


def test_an_inlined_jitted_function_takes_its_static_arguments():
    x = rand(5)
    assert_close(_outer_static(x), x * 3.0 - x * 0.5)
    assert _n_plans(_scaled) == 0


# -- methods ----------------------------------------------------------------------------
class Layer:
    def __init__(self, w):
        self.W = w
        self.scale = 1.0

    @polyc.jit
    def fwd(self, x):
        return (x @ self.W) * self.scale


class Slotted:
    __slots__ = ("W",)

    def __init__(self, w):
        self.W = w

    @polyc.jit
    def fwd(self, x):
        return x + self.W


class Block:
    def __init__(self, w, b):
        self.W, self.b = w, b

    @polyc.jit
    def bias(self, y):
        return y + self.b

    @polyc.jit
    def fwd(self, x):
        return self.bias(np.tanh(x @ self.W))


def test_a_jitted_method_calling_another_is_one_graph_that_watches_both():
    x = rand(2, 4)
    blk = Block(rand(4, 3), rand(3))
    assert_close(blk.fwd(x), np.tanh(x @ blk.W) + blk.b, reduction_length=4)
    assert len(blk.fwd.graph(x).captured) == 2          # W and b, in one trace
    blk.b = blk.b + 10                                  # read by the inner method only
    assert_close(blk.fwd(x), np.tanh(x @ blk.W) + blk.b, reduction_length=4)


def test_a_jitted_method_binds_self_and_each_instance_keeps_its_weights():
    x = rand(2, 5)
    a, b = Layer(rand(5, 3)), Layer(rand(5, 3))
    assert_close(a.fwd(x), x @ a.W, reduction_length=5)
    assert_close(b.fwd(x), x @ b.W, reduction_length=5)
    assert_close(a.fwd(x), x @ a.W, reduction_length=5)
    assert "kernel" in a.fwd.explain(x)
    assert len(a.fwd.graph(x).captured) == 1


def test_a_jitted_method_sees_rebound_and_changed_attributes():
    x = rand(2, 5)
    a = Layer(rand(5, 3))
    a.fwd(x)
    a.W = a.W * 5                    # rebinding, as a training step does
    assert_close(a.fwd(x), x @ a.W, reduction_length=5)
    a.scale = 0.25                   # a scalar attribute is a literal: traced again
    assert_close(a.fwd(x), (x @ a.W) * F32(0.25), reduction_length=5)
    a.W[:] = 1.0                     # in place: the plan feeds the same array
    assert_close(a.fwd(x), (x @ np.ones((5, 3), F32)) * F32(0.25), reduction_length=5)


def test_an_instance_and_its_plans_are_dropped_together():
    x = rand(2, 5)
    a = Layer(rand(5, 3))
    a.fwd(x)
    table = Layer.fwd._instances
    before = len(table)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None
    assert len(table) == before - 1


def test_a_method_of_a_class_without_weak_references():
    x = rand(4)
    a, b = Slotted(rand(4)), Slotted(rand(4))
    assert_close(a.fwd(x), x + a.W)
    assert_close(b.fwd(x), x + b.W)


# -- static floats --------------------------------------------------------------------
def test_static_zero_and_negative_zero_are_different_plans():
    j = polyc.jit(lambda x, s: 1 / (x * s))
    x = np.ones(2, F32)
    with np.errstate(divide="ignore"):
        assert np.array_equal(j(x, 0.0), np.full(2, np.inf, F32))
        assert np.array_equal(j(x, -0.0), np.full(2, -np.inf, F32))
        assert np.array_equal(j(x, np.float32(-0.0)), np.full(2, -np.inf, F32))


def test_a_static_nan_reuses_its_plan():
    j = polyc.jit(lambda x, s: x + s)
    x = rand(3)
    for _ in range(3):
        assert np.isnan(j(x, float("nan"))).all()
    assert _n_plans(j) == 1


# -- static arrays --------------------------------------------------------------------
def _masked(x, mask):
    if mask[0]:                      # a static array's values may steer Python code
        return np.where(mask, x, 0) * 2
    return np.where(mask, x, 0)


def test_a_static_array_argument_is_keyed_by_its_contents():
    j = polyc.jit(_masked, static_argnames=("mask",))
    x = rand(4)
    m = np.array([1, 0, 1, 0], bool)
    assert_close(j(x, m), _masked(x, m))
    assert_close(j(x, m.copy()), _masked(x, m))
    assert _n_plans(j) == 1                      # equal contents: one plan
    m2 = np.array([0, 1, 1, 0], bool)
    assert_close(j(x, m2), _masked(x, m2))
    m[:] = [0, 0, 0, 1]                          # the caller's array changes in place
    assert_close(j(x, m), _masked(x, m))
    assert_close(j(x, np.array([1, 0, 1, 0], bool)), _masked(x, np.array([1, 0, 1, 0], bool)))


# -- lists, tuples and dicts of arrays ------------------------------------------------
Pair = namedtuple("Pair", "a b")


def _tree(xs, params, pair):
    return xs[0] * params["w"] + xs[1] - pair.a * pair.b


def test_lists_dicts_and_named_tuples_of_arrays_are_inputs():
    j = polyc.jit(_tree)
    for n in (3, 7):
        xs, w, pa, pb = [rand(n), rand(n)], rand(n), rand(n), rand(n)
        got = j(xs, {"w": w}, Pair(pa, pb))
        assert_close(got, _tree(xs, {"w": w}, Pair(pa, pb)))
    assert _n_plans(j) == 1                      # arrays, not static values
    assert len(j.graph(xs, {"w": w}, Pair(pa, pb)).args) == 5


def test_a_list_of_arrays_and_static_values():
    def f(xs, axes):
        return sum(x.sum(axis=axes[0]) for x in xs)
    j = polyc.jit(f)
    xs = [rand(4, 6), rand(4, 6), rand(4, 6)]
    assert_close(j(xs, [1]), f(xs, [1]), reduction_length=18)
    assert_close(j(xs, [0]), f(xs, [0]), reduction_length=12)
    assert_close(j(xs[:2], [0]), f(xs[:2], [0]), reduction_length=8)


def test_an_unhashable_argument_is_refused_with_what_to_pass():
    j = polyc.jit(lambda x, s: x * 2)
    with pytest.raises(BindingError, match=r"argument s of type set .*lists/tuples/dicts"):
        j(rand(3), {1, 2})


# -- globals and closure cells that change between calls ---------------------------
W_GLOBAL = np.ones((3, 2), F32)
LR = 0.1
ZERO_D = np.array(2.0, F32)


def _uses_globals(x):
    return x @ W_GLOBAL * LR


def _helper(x):
    return x * LR


def _calls_helper(x):
    return _helper(x) + ZERO_D


def test_rebound_global_array_and_changed_global_scalar_are_seen():
    global W_GLOBAL, LR
    j = polyc.jit(_uses_globals)
    x = rand(1, 3)
    old_w, old_lr = W_GLOBAL, LR
    try:
        assert_close(j(x), x @ W_GLOBAL * F32(LR), reduction_length=3)
        W_GLOBAL = W_GLOBAL * 5
        LR = 0.5
        assert_close(j(x), x @ W_GLOBAL * F32(LR), reduction_length=3)
        assert _n_plans(j) == 1        # the plan of the old array was dropped
        LR = 0.1                       # a scalar seen before: that plan again
        assert_close(j(x), x @ W_GLOBAL * F32(LR), reduction_length=3)
        LR = 0.5
        assert_close(j(x), x @ W_GLOBAL * F32(LR), reduction_length=3)
        assert _n_plans(j) == 2
        W_GLOBAL[:] = 2.0              # in place: same array, same plan, new values
        assert_close(j(x), x @ W_GLOBAL * F32(LR), reduction_length=3)
        assert _n_plans(j) == 2
    finally:
        W_GLOBAL, LR = old_w, old_lr


def test_globals_of_a_called_helper_and_a_zero_d_array_are_seen():
    global LR
    j = polyc.jit(_calls_helper)
    x = rand(4)
    old = LR
    try:
        assert_close(j(x), x * F32(LR) + ZERO_D)
        LR = 3.0
        assert_close(j(x), x * F32(LR) + ZERO_D)
        ZERO_D[()] = -1.0              # a 0-d array is traced as a literal: traced again
        assert_close(j(x), x * F32(LR) + ZERO_D)
    finally:
        LR = old
        ZERO_D[()] = 2.0


def test_a_rebound_closure_cell_is_seen():
    w = rand(4)
    s = 2.0

    @polyc.jit
    def f(x):
        return x * w + s

    x = rand(4)
    assert_close(f(x), x * w + F32(s))
    w = w * 5
    s = -1.0
    assert_close(f(x), x * w + F32(s))
    w[:] = 0.5
    assert_close(f(x), x * w + F32(s))


def test_an_inlined_jitted_function_s_globals_are_watched_by_the_caller():
    global LR
    j = polyc.jit(lambda x: _jit_helper(x) * 2)
    x = rand(3)
    old = LR
    try:
        assert_close(j(x), x * F32(LR) * 2)
        LR = 7.0
        assert_close(j(x), x * F32(LR) * 2)
    finally:
        LR = old


@polyc.jit
def _jit_helper(x):
    return x * LR


# -- extents and unused operations ----------------------------------------------------
@polyc.jit
def _with_shape(x):
    return (x + 1).sum(), x.shape, x.shape[0] * 2 + 1


def test_returned_extents_are_those_of_each_call():
    """``x.shape`` returned (not read as a number) is evaluated at every
    call of the shape class (it returned the first call's extents)."""
    for shape in ((4, 5), (6, 7), (2, 3)):
        x = rand(*shape)
        total, shp, rows = _with_shape(x)
        assert_close(total, (x + 1).sum(), reduction_length=x.size)
        assert shp == x.shape and rows == 2 * x.shape[0] + 1
        assert all(type(v) is int for v in (*shp, rows))
    assert _n_plans(_with_shape) == 1        # (one plan: no extent was specialised)


def _unused_creation(x):
    like = np.zeros_like(x)         # only its shape is used
    unused = x * 3                  # never used
    return x.sum() + like.shape[1], unused.shape


def test_operations_no_output_reads_are_dropped():
    """An operation whose result nothing returned reads (a zeros_like used
    for its shape) ran as a kernel without outputs, which crashed."""
    x = rand(3, 4)
    total, shp = polyc.jit(_unused_creation)(x)
    assert_close(total, x.sum() + 4, reduction_length=x.size)
    assert shp == (3, 4)
    assert [n.op for n in polyc.jit(_unused_creation).graph(x).ops] == ["sum", "add"]
    assert polyc.jit(lambda x: (np.ones_like(x), 2.0)[1])(x) == 2.0


# -- extents in numpy's promotion ---------------------------------------------------------
def _scaled_by_extents(x):
    d = x.shape[-1]
    half = np.arange(d // 2, dtype=np.float32)      # a numpy array (d specialised)
    return half * 2 / d, half * d, x / np.sqrt(d), np.float32(1.5) / d * x


def test_an_extent_is_a_weak_python_int_in_numpy_operators():
    """``numpy_float32_array / x.shape[1]`` is float32, as numpy's Python
    ints are weak (the extent was converted to an int64 array: float64)."""
    x = rand(3, 8)
    got, want = polyc.jit(_scaled_by_extents)(x), _scaled_by_extents(x)
    for g, w in zip(got, want):
        assert_close(g, w)


def test_indexing_a_numpy_array_by_a_traced_one_says_what_to_do():
    table = rand(5, 3)
    ids = np.array([0, 4, 1])
    with pytest.raises(TraceError, match="pass the table as an argument"):
        polyc.jit(lambda i: table[i])(ids)
    assert_close(polyc.jit(lambda t, i: t[i])(table, ids), table[ids])


def test_an_argument_of_an_uncomputed_dtype_says_how_to_convert():
    with pytest.raises(DTypeError, match=r"uint64.*astype"):
        polyc.jit(lambda x: x * 2)(np.arange(4, dtype=np.uint64))


def test_byte_swapped_arguments_compute_as_numpy():
    """A big-endian array (read from a FITS or HDF5 file, say) is read in
    the machine's byte order, as numpy computes with it; it was refused as
    a dtype mismatch naming polyc's internal argument x0.  One plan serves
    both byte orders."""
    f = polyc.jit(lambda x, ys: x * 2 + x.sum(0) + x @ ys[0] @ ys[1])
    x, y = rand(3, 4), rand(4, 4)
    for xa, ya in ((x.astype(">f4"), y.astype(">f4")), (x, y)):
        assert_close(f(xa, [ya, ya]), x * 2 + x.sum(0) + x @ y @ y, reduction_length=16)
    assert _n_plans(f) == 1
    np.testing.assert_array_equal(polyc.jit(lambda i: i + 1)(np.arange(5, dtype=">i4")),
                                  np.arange(1, 6))


def test_a_draw_from_numpys_global_random_generator_while_tracing_warns():
    """``np.random.rand`` inside a jitted function runs once, at the
    trace: its values are constants of the plan, the same at every call,
    where numpy draws anew (silently so before).  A PolycWarning at the
    function says so; a function that draws nothing does not warn."""
    x = rand(2, 3)
    f = polyc.jit(lambda a: a + np.random.rand(*a.shape))
    with pytest.warns(PolycWarning, match="global random generator"):
        first = f(x)
    np.testing.assert_array_equal(f(x), first)          # (the frozen draws)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PolycWarning)
        polyc.jit(lambda a: a * 2)(x)
