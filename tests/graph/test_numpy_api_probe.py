"""Fixes found by walking numpy's public API under ``@polyc.jit`` (the probe
of issue 14): each test compares with plain numpy (``check``: structure,
shapes, dtypes, values within ``polyc.testing``'s tolerances) or asserts the
clean polyc error that numpy's behaviour calls for.  Sizes are tiny; each
test compiles one plan."""

from __future__ import annotations

import numpy as np

from .test_ops import check


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
