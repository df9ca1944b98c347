"""Fixes found by walking numpy's public API under ``@polyc.jit`` (the probe
of issue 14): each test compares with plain numpy (``check``: structure,
shapes, dtypes, values within ``polyc.testing``'s tolerances) or asserts the
clean polyc error that numpy's behaviour calls for.  Sizes are tiny; each
test compiles one plan."""

from __future__ import annotations

import numpy as np
import pytest

from polyc.errors import DTypeError, UnsupportedError

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
