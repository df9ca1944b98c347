"""numpy's creation functions with ``like=`` a traced array under
``@polyc.jit`` (``polyc/graph/creation.py``), against numpy's values and
dtypes: one-hot rows by ``np.eye(n, like=labels)[labels]``, buffers by
``np.zeros(shape, like=x)``, ``np.arange`` and ``np.asarray``; and the
error that names ``like=`` for a numpy array indexed by a traced one."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import TraceError

from .test_ops import F32, F64, check, rand


def _one_hot_cross_entropy(x, labels, w):
    logits = x @ w
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    onehot = np.eye(w.shape[1], dtype=x.dtype, like=x)[labels]
    return -np.sum(onehot * np.log(p)) / x.shape[0], x.T @ (p - onehot), onehot


@pytest.mark.parametrize("dtype", [F32, F64])
def test_eye_like_one_hot(dtype):
    labels = np.random.default_rng(1).integers(0, 5, 12)
    check(_one_hot_cross_entropy, rand((12, 3), dtype, 2), labels, rand((3, 5), dtype, 3),
          reduction_length=12)


def _eyes(x):
    return (np.eye(4, 6, k=1, like=x), np.eye(4, 3, k=-2, dtype=np.int32, like=x),
            np.identity(x.shape[1], like=x) @ x.T, np.eye(3, like=x)[[2, 0]])


def _filled(x):
    z = np.zeros(x.shape, like=x)
    z[:, 0] = x[:, 1]
    return (z, np.ones((2, x.shape[1]), np.float32, like=x), np.full(x.shape, 7, like=x),
            np.full((3,), 2.5, like=x), np.empty(x.shape[0], like=x) * 0)


def _ranges(x):
    n = x.shape[0]
    return (np.arange(n, like=x), np.arange(n, like=x) * x[:, 0], np.arange(1, 7, 2, like=x),
            np.arange(0.0, 1.0, 0.25, like=x), np.arange(n, dtype=np.float32, like=x) + x[:, 1])


def _arrays(x):
    return (np.asarray(x, like=x) * 2, np.array([x[:, 0], x[:, 1]], like=x),
            np.ascontiguousarray(x.T, like=x), np.asarray([1.0, 2.0, 3.0], like=x) * x,
            np.array(x, dtype=np.float64, like=x))


@pytest.mark.parametrize("fn", [_eyes, _filled, _ranges, _arrays])
def test_creation_like_a_traced_array(fn):
    check(fn, rand((5, 3), F32, 4), reduction_length=3)


def _symbolic(x):
    n = x.shape[0]
    return (np.ones((n, x.shape[1]), like=x) + x, np.full((n,), 2, like=x) * x[:, 0],
            np.eye(n, like=x), np.arange(n, like=x))


def test_creation_like_keeps_extents_symbolic():
    """``ones full eye arange`` keep extents symbolic: one plan for every
    size (numpy's ``zeros`` and ``empty`` read their shape before handing
    the call on, which specialises it)."""
    f = polyc.jit(_symbolic)
    for n in (5, 9):
        x = rand((n, 3), F32, n)
        for got, want in zip(f(x), _symbolic(x)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert f.explain(rand((7, 3), F32, 1), json=True)["specialised_sizes"] == {}


def test_numpy_array_indexed_by_a_traced_array_names_like():
    labels = np.arange(4) % 3
    with pytest.raises(TraceError, match=r"np.eye\(n, like=labels\)\[labels\]"):
        polyc.jit(lambda ids: np.eye(3)[ids])(labels)


def _boolean(x):
    m = np.zeros(x.shape, dtype=bool, like=x) | (x > 0)
    return (m, np.full(x.shape, True, like=x), np.ones_like(x, dtype=bool),
            np.eye(3, dtype=bool, like=x), np.zeros_like(x, dtype=bool).sum(),
            np.where(np.ones_like(x, dtype=bool), x, 0))


def test_boolean_creation_makes_masks():
    """Boolean arrays made by ``zeros_like ones_like full_like`` and the
    ``like=`` functions are masks (int32 0/1 in the kernels); they were
    refused ("would materialise a boolean array")."""
    check(_boolean, rand((4, 3), F32, 8))
