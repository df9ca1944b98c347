"""``out=`` of elementwise operations under ``@polyc.jit``
(``polyc/graph/outparam.py``), against numpy: the result is written into
the traced array ``out`` (every name bound to it sees it), broadcast and
cast as numpy's ufuncs do (and ``x.fill``); ``np.clip(..., out=)`` and
``np.fix(..., out=)`` used to ignore ``out`` and return the right value while ``out``
kept its old one, and ``np.dot(..., out=)`` failed with a bare TypeError."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import DTypeError, ShapeError, UnsupportedError

from .test_ops import F32, F64, check, rand


def _ufunc_out(x):
    y = x * 2
    z = y
    r = np.maximum(y, 0, out=y)
    np.multiply(z, 3, out=(z,))
    np.add(y, x[0], out=y)
    w = np.zeros_like(x, dtype=np.float64)
    np.sqrt(np.abs(x), out=w)
    return y, z, r, w


def _clip_fix_round_out(x):
    a, b, c, d = x * 4, x * 4, x * 4, x * 4
    r = np.clip(a, -1.5, 1.5, out=a)
    b.clip(0, 1, out=b)
    np.fix(c, out=c)
    np.round(d, 1, out=d)
    e = np.zeros_like(x[:, :3])
    np.dot(x[:3], x[:3].T, out=e)
    f = x.copy()
    f[0, 0] = np.nan
    g = np.nan_to_num(f, copy=False)
    return a, b, c, d, r, e, f, g


@pytest.mark.parametrize("fn", [_ufunc_out, _clip_fix_round_out])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_out_writes_into_the_traced_array(fn, dtype):
    check(fn, rand((3, 5), dtype, 4), reduction_length=5)


def test_out_refusals_name_the_reason():
    x = rand((3, 5), F64, 1)
    with pytest.raises(UnsupportedError, match="np.exp with out= on a traced array: it is an "
                                               "argument"):
        polyc.jit(lambda a: np.exp(a, out=a))(x)
    with pytest.raises(UnsupportedError, match="a view"):
        polyc.jit(lambda a: np.exp(a[:, :2], out=(a * 1)[:, :2]))(x)
    with pytest.raises(DTypeError, match="same_kind"):
        polyc.jit(lambda a: np.floor(a, out=np.zeros_like(a, dtype=np.int64)))(x)
    with pytest.raises(ShapeError, match="non-broadcastable output"):
        polyc.jit(lambda a: np.add(a, 1, out=np.zeros_like(a[0])))(x)
    with pytest.raises(UnsupportedError, match="a numpy array cannot hold traced values"):
        polyc.jit(lambda a: np.clip(a, 0, 1, out=np.zeros((3, 5))))(x)


def _array_methods(x):
    y = x * 2
    y.fill(3)
    z = x.astype(np.int32)
    z.fill(2.7)
    w = x * 1
    w.fill(x.sum())
    return y, z, w, x.conj(), x.conjugate() + 1, x.real * 2, x.imag, x * x.nbytes + x.itemsize


@pytest.mark.parametrize("dtype", [F32, F64])
def test_fill_conj_real_imag_nbytes(dtype):
    """``x.fill`` (in place, numpy's conversion), ``conj``/``conjugate``,
    ``real``/``imag``, ``nbytes``/``itemsize``: were refused as ndarray
    methods polyc does not trace."""
    check(_array_methods, rand((3, 5), dtype, 6), reduction_length=15)


def _reduce_into(a):
    y = a * 1
    np.sum(a, axis=0, out=y[0])
    return y


@pytest.mark.parametrize("fn, name", [
    (_reduce_into, "np.sum"),
    (lambda a: a.max(axis=0, out=(a * 1)[0]), "np.max"),
    (lambda a: np.outer(a[0], a[0], out=np.zeros_like(a, shape=(5, 5))), "np.outer")])
def test_reductions_refuse_out_at_the_users_line(fn, name):
    """A reduction's (and ``np.outer``'s) ``out=`` refusal named neither the
    function nor the user's line, unlike every other refusal of ``out=``."""
    with pytest.raises(UnsupportedError, match=rf"test_outparam.py:\d+: {name} with out= "):
        polyc.jit(fn)(rand((3, 5), F64, 2))
