"""Fixes found by walking numpy's public API under ``@polyc.jit`` (the probe
of issue 14): each test compares with plain numpy (``check``: structure,
shapes, dtypes, values within ``polyc.testing``'s tolerances) or asserts the
clean polyc error that numpy's behaviour calls for.  Sizes are tiny; each
test compiles one plan."""

from __future__ import annotations

import numpy as np
import pytest

from polyc.errors import DTypeError, TraceError, UnsupportedError

from .test_ops import check, jitted


def _int_reciprocals(a, b, c):
    return np.reciprocal(a), np.reciprocal(b), np.reciprocal(c)


def test_integer_reciprocal_of_zero_is_numpys():
    """numpy's integer ``reciprocal`` computes ``1.0 / x`` and converts: of 0
    it is the type's minimum for int32 and int64 (x86's conversion of inf),
    0 for narrower types; polyc gave 0 for every type."""
    x = np.array([0, 1, -1, 2, -3], dtype=np.int64)
    with np.errstate(all="ignore"):
        check(_int_reciprocals, x.astype(np.int32), x, x.astype(np.int8))


def _boolean_nodes(b, x):
    m = x > 0
    return (np.tril(b), np.triu(m, 1), np.minimum(b, m), np.abs(b), np.pad(m, 1),
            np.where(np.tril(m), x, -x), np.maximum(b, m).sum(axis=0))


def test_boolean_results_of_array_operations():
    """A boolean result computed by a node of its own (``tril``/``triu``/
    ``pad`` of a mask, ``minimum``/``maximum``/``abs`` of masks) was refused
    ("would materialise a boolean array"); it is an int32 node read as a mask."""
    x = np.array([[1.0, -2.0, 3.0], [-1.0, 2.0, -3.0], [0.5, 0.0, -0.5]])
    check(_boolean_nodes, x < 0.7, x)


def _bool_dtypes(b):
    return np.round(b), np.rint(b), np.square(b), np.reciprocal(b), b ** 2, b ** 3


def test_numpys_dtypes_of_boolean_ufuncs():
    """numpy's loops for booleans: ``round``/``rint`` float16 (``round`` kept
    bool), ``square``/``reciprocal``/``b ** 2`` int8 (refused, or int64 for
    ``**``); ``negative``/``positive``/``+b``/``round(b, 1)`` are numpy's
    TypeError, a ``DTypeError`` (they returned the mask)."""
    b = np.array([[True, False, True]])
    check(_bool_dtypes, b)
    for fn in (np.positive, np.negative, lambda x: +x, lambda x: np.round(x, 1)):
        with pytest.raises(TypeError):
            fn(b)
        with pytest.raises(DTypeError):
            jitted(fn)(b)


def test_memory_order_reshapes_are_refused():
    """``ravel``/``reshape`` with ``order="A"``/``"K"`` follow numpy's memory
    layout (an F-ordered argument, a transposed view: F order); polyc read
    them in C order, a wrong result.  Refused for 2-d and more."""
    a = np.arange(6.0).reshape(2, 3)
    for fn in (lambda x: x.ravel("K"), lambda x: np.ravel(x.T, order="A"),
               lambda x: x.reshape(6, order="A")):
        with pytest.raises(UnsupportedError, match="memory layout"):
            jitted(fn)(np.asfortranarray(a))


def _scalar_tensordot_and_int64_masks(x, y):
    return (np.tensordot(x, 3.0, axes=0), np.tensordot(2, y, 0), x == 2**40,
            np.tril(np.stack([x, x]) > 2**35), (y > 2**33).astype(np.int8))


def test_tensordot_of_a_scalar_and_returned_int64_masks():
    """``np.tensordot(x, 3.0, axes=0)`` raised a bare AttributeError (numpy:
    the Python scalar is a 0-d float64 array); a returned mask comparing
    int64 values with a literal beyond int32 (``x == 2**40``) was a
    SemanticError from its int32 0/1 node: computed in int64 now."""
    x = np.array([2**40, 1, 2**36], dtype=np.int64)
    check(_scalar_tensordot_and_int64_masks, x, np.array([0.5, 2.0**34], dtype=np.float32))


def _bool_pairs(b, c):
    return np.remainder(b, c), np.power(b, c), np.conjugate(b), np.maximum(b, c)


def test_numpys_int8_loops_of_two_booleans():
    """``remainder power conjugate`` of booleans are numpy's int8 loops (they
    were bool once boolean nodes were computed); ``b - c`` and ``np.ptp`` of
    booleans are numpy's TypeError, a ``DTypeError``."""
    b, c = np.array([True, False, True, False]), np.array([True, True, False, False])
    with np.errstate(all="ignore"):
        check(_bool_pairs, b, c)
    for fn in (lambda x, y: x - y, lambda x, y: np.ptp(x)):
        with pytest.raises(DTypeError):
            jitted(fn)(b, c)


def _more_functions(x, v, m, i):
    return (np.ediff1d(x, to_begin=[-1.0], to_end=x[0, :2]), np.diagflat(v, -1),
            np.rollaxis(m, 2, 1), np.angle(np.where(x > 0, x, -0.0), deg=True),
            np.isreal(x), np.iscomplex(i), np.delete(x, [0, 2], axis=1),
            np.compress([True, False, True], x, axis=0), np.resize(v, (2, 4)),
            np.take(x, [-1, 9], mode="clip", axis=1), np.take(x, [5, -13], mode="wrap"),
            np.pad(i, 1, mode="mean"), np.vecdot(x, x[0]), np.matvec(m, v[:4]),
            np.vecmat(v[:3], x), *np.modf(x * 3))


def test_functions_found_missing_by_the_api_walk():
    """``ediff1d diagflat rollaxis angle isreal iscomplex delete compress
    resize take(mode=) pad(maximum/minimum/mean) vecdot matvec vecmat modf``
    were refused as unsupported; numpy's values and dtypes now."""
    x = np.array([[0.5, -1.5, 2.0, 0.0], [3.25, -0.75, 1.0, -2.0], [4.0, 0.25, -3.5, 1.5]])
    m = np.arange(24.0).reshape(2, 3, 4) / 7
    i = np.array([[3, -4, 7], [0, 5, -2]], dtype=np.int32)
    check(_more_functions, x, np.array([1.0, -2.0, 0.5, 4.0, -0.25]), m, i)


def test_value_dependent_python_bools_are_trace_errors():
    """``np.allclose``/``array_equal``/``array_equiv`` return a Python bool of
    the values: a ``TraceError`` (was an ``UnsupportedError``)."""
    x = np.ones(3)
    for fn in (np.allclose, np.array_equal, np.array_equiv):
        with pytest.raises(TraceError, match=fn.__name__):
            jitted(lambda a, b: fn(a, b))(x, x)


def _puts(x):
    b = x.copy()
    np.put(b, [0, 5, -1], [1.0, 2.0])                       # the values repeated
    np.put_along_axis(b, np.array([[1, 2], [0, 0], [3, 1]]), x[:, :2] * 10, axis=1)
    c = x.copy()
    c.put([1, 3], -1.0)
    return (b, c, np.take_along_axis(x, np.array([3, 0, 11]), axis=None),
            x.compress([0, 1, 1], axis=0), x[0].searchsorted(x[1] / 2),
            *np.atleast_1d(x[0, 0], x), np.tile(x, (2, 0)))


def test_put_into_a_traced_copy_and_more_methods():
    """``np.put``/``put_along_axis``/``ndarray.put`` with indices known while
    tracing (assignments), ``take_along_axis(axis=None)`` (a ShapeError),
    the methods ``compress`` and ``searchsorted``, ``np.atleast_1d`` of
    several arrays and ``np.tile`` with a count of 0 were refused."""
    check(_puts, np.arange(12.0).reshape(3, 4))


def _vander_choose(a, v, i):
    return (np.vander(v),
            np.histogram_bin_edges(v, 2), np.choose(i, [a, -a, v]), i.choose([0, 1.5, a]),
            np.choose(i, [a, a * 2], mode="wrap"))


def test_vander_histogram_bin_edges_and_choose():
    """``vander`` (numpy's running product), ``histogram_bin_edges`` and
    ``choose``/``ndarray.choose`` (a chain of ``np.where``; Python scalar
    choices strong, as numpy's asarray) were refused."""
    i = np.array([[0, 1, 2, 1], [2, 2, 0, 0], [1, 0, 1, 2]])
    check(_vander_choose, np.arange(12.0).reshape(3, 4) / 7, np.array([1.5, -2.0, 3.0, 0.5]), i)


def _correlate_longer_second(a, v):
    return np.correlate(a, v, "same"), np.correlate(a, v)


def test_correlate_with_the_longer_operand_second():
    """``np.correlate(a, v)`` with ``len(v) > len(a)`` was refused; numpy
    correlates ``v`` with ``a`` and reverses the result (the plan is guarded
    to that order: a call with the lengths the other way round traces again)."""
    a, v = np.array([0.5, -1.0, 2.0]), np.array([1.0, 3.0, -2.0, 0.25, 4.0])
    check(_correlate_longer_second, a, v)
    np.testing.assert_allclose(jitted(_correlate_longer_second)(v, a)[0],
                               np.correlate(v, a, "same"))


def _ufunc_reduce_options(a):
    return (np.minimum.reduce(a, axis=1, initial=0.0), np.add.reduce(a, 0, where=a > 0),
            np.maximum.reduce(a, axis=None, initial=-1.0, where=a < 3))


def test_ufunc_reduce_with_initial_and_where():
    """``np.minimum.reduce(a, initial=...)`` and ``where=`` were refused
    ("not supported in traced code"); they are the reductions' own options."""
    check(_ufunc_reduce_options, np.arange(12.0).reshape(3, 4) - 5)
