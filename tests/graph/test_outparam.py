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
    buf = np.zeros((3, 5))          # made outside: a numpy array (inside, a traced one)
    with pytest.raises(UnsupportedError, match="a numpy array cannot hold traced values"):
        polyc.jit(lambda a: np.clip(a, 0, 1, out=buf))(x)


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


def _copies(x, s, i):
    y = x.copy()
    assert np.copyto(y, 1.0, where=y > 0) is None
    np.copyto(y, s[0])                              # broadcast
    z = x * 3
    np.copyto(z, s, where=s > 0)
    np.copyto(z, z.astype(np.float64) / 7)          # same_kind: float64 into float32
    j = i.copy()
    np.copyto(j, x * 3, casting="unsafe")
    k = i.copy()
    np.copyto(k, 1.7, casting="unsafe")
    np.copyto(y, 3, casting="safe")                 # a Python int is weak
    p = x.copy()
    np.putmask(p, p > 0, 0.0)
    np.putmask(z, x < 0, x)                         # values of the array's shape
    q = i.copy()
    np.putmask(q, q > 1, 7.9)
    np.place(p, p < -0.5, [9.0])
    return y, z, j, k, p, q


def test_copyto_putmask_place():
    check(_copies, rand((4, 5), F32, seed=60), rand((4, 5), F32, seed=61),
          np.arange(20).reshape(4, 5))


_NUMPY_BUF = np.zeros(5, np.float32)     # captured: a numpy array


@pytest.mark.parametrize("fn,error,match", [
    (lambda x: np.copyto(x.copy(), x.astype(np.float64), casting="safe"), DTypeError, "safe"),
    (lambda x: np.copyto(x.astype(np.int64), x), DTypeError, "same_kind"),
    (lambda x: np.copyto(x.copy(), x[0, :3]), ShapeError, "broadcast"),
    (lambda x: np.copyto(x, 1.0), UnsupportedError, "argument"),
    (lambda x: np.copyto(_NUMPY_BUF, x[0]), UnsupportedError, "numpy array"),
    (lambda x: np.putmask(x.copy(), x > 0, x[0]), UnsupportedError, "repeat over"),
    (lambda x: np.place(x.copy(), x > 0, x[0]), UnsupportedError, "in order")])
def test_copyto_putmask_place_refusals(fn, error, match):
    with pytest.raises(error, match=match):
        polyc.jit(fn)(rand((4, 5), F32, seed=62))
