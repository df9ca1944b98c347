"""numpy idioms of ``@polyc.jit`` that used to be refused or to differ from
numpy: ``np.dot`` with a Python scalar (numpy converts it to an array, so
its dtype is not weak), ``isposinf``/``isneginf``, ``diff`` of booleans
(``not_equal``), ``round`` of integers to negative decimals, ``where``
between masks (a mask), ``linalg.multi_dot`` (numpy's parenthesisation) and
``repeat`` with a count per element.  Each against plain numpy
(``check``: structure, shapes, dtypes, values)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import ShapeError, UnsupportedError

from .test_ops import F32, F64, check, rand


def test_dot_with_a_python_scalar_has_numpys_dtype():
    x = rand((3, 4), F32, seed=1)
    check(lambda a: (np.dot(a, 2.0), np.dot(3, a), np.dot(a, True), np.dot(a, np.float32(2))), x)
    check(lambda a: np.dot(2, a), np.arange(-6, 6, dtype=np.int32).reshape(3, 4))


def test_isposinf_isneginf():
    x = np.array([[1.0, np.nan, -np.inf], [np.inf, -0.0, 2.5]], dtype=np.float32)
    check(lambda a: (np.isposinf(a), np.isneginf(a), np.where(np.isposinf(a), 0, a)), x)
    check(lambda a: (np.isposinf(a), np.isneginf(a)), np.array([-3, 0, 4], dtype=np.int64))


def test_diff_of_booleans_is_not_equal():
    x = rand((7, 3), F32, seed=2)
    check(lambda a: (np.diff(a > 0, axis=0), np.diff(a[:, 0] > 0), np.diff(a > 0, n=2),
                     np.diff(a > 0).sum(axis=1)), x)


def test_round_integers_to_negative_decimals():
    x = np.array([15, 25, -35, 44, -45, 5, 0, 150, 249], dtype=np.int64)
    check(lambda a: (np.round(a, -1), np.round(a, -2), a.round(-1), np.around(a, 1)), x)
    check(lambda a: np.round(a, -1), x.astype(np.int32))


def test_where_between_masks_is_a_mask():
    x = rand((3, 4), F32, seed=3)
    check(lambda a: (np.where(a > 0, True, a < -1), np.where(a > 0, False, True),
                     np.where(np.where(a > 0, a < 1, False), a, 0),
                     np.where(a > 0, a < 1, False).sum(axis=1)), x)


@pytest.mark.parametrize("shapes", [
    [(10, 3), (3, 8), (8, 2)], [(2, 30), (30, 3), (3, 40)],
    [(10, 3), (3, 8), (8, 2), (2, 9)], [(3,), (3, 8), (8,)], [(3,), (3, 8), (8, 4)],
    [(5, 3), (3, 8), (8, 4), (4,)], [(5, 3), (3,)]])
def test_multi_dot(shapes):
    arrays = [rand(s, F32, seed=k) for k, s in enumerate(shapes)]
    check(lambda *a: np.linalg.multi_dot(list(a)), *arrays, reduction_length=30)


def test_multi_dot_needs_matrices():
    f = polyc.jit(lambda a, b, c: np.linalg.multi_dot([a, b, c]))
    with pytest.raises(ShapeError, match="two-dimensional"):
        f(rand((2, 5, 3), F32), rand((3, 8), F32), rand((8,), F32))


def test_repeat_with_a_count_per_element():
    x = rand((2, 3), F32, seed=4)
    check(lambda a: (np.repeat(a, [1, 2], axis=0), np.repeat(a, [0, 2, 3], axis=1),
                     np.repeat(a, np.array([1, 0, 2, 1, 1, 3])), np.repeat(a, [2], axis=1),
                     np.repeat(a, 0, axis=1), a.repeat([3, 1], axis=0) * 2), x)
    check(lambda a: np.repeat(a, [2, 1, 1]), np.array([4, 5, 6]))


def test_repeat_refusals():
    x = rand((2, 3), F32)
    with pytest.raises(ShapeError, match="negative"):
        polyc.jit(lambda a: np.repeat(a, [1, -1], axis=0))(x)
    with pytest.raises(ShapeError, match="broadcast"):
        polyc.jit(lambda a: np.repeat(a, [1, 2, 3], axis=0))(x)
    with pytest.raises(UnsupportedError, match="traced counts"):
        polyc.jit(lambda a, r: np.repeat(a, r))(x[0], np.array([1, 2, 3]))


def test_nan_functions_replace_nans_as_numpy():
    x = np.array([[np.nan, 1, 3], [2, np.nan, -1], [0.5, 4, np.nan]], np.float32)
    check(lambda a: (np.nanprod(a), np.nanprod(a, axis=0, keepdims=True), np.nancumsum(a),
                     np.nancumsum(a, axis=1), np.nancumsum(a, 0, np.float64),
                     np.nancumprod(a, axis=0), np.nanargmax(a, axis=0), np.nanargmin(a, axis=1),
                     np.nanargmax(a), np.nanargmax(a, axis=1, keepdims=True)), x)
    check(lambda a: (np.nanprod(a, axis=1), np.nanargmax(a, axis=1), np.nancumsum(a)),
          np.array([[1, 2], [4, 3]]))


def test_round_builtin():
    x = rand((3, 4), F32, seed=5)
    check(lambda a: round(a.sum(), 2), x)
    with pytest.raises(polyc.TraceError, match=r"round\(\) of a traced value"):
        polyc.jit(lambda a: round(a.sum()))(x)
    with pytest.raises(UnsupportedError, match=r"np.round\(x, 2\)"):
        polyc.jit(lambda a: round(a, 2))(x)


def test_searchsorted_and_digitize():
    a = np.array([0.0, 0.5, 0.5, 1.0, np.nan])
    v = np.array([[-1, 0, 0.25, 0.5, 0.7], [1.0, 2.0, np.nan, 0.5, -0.0]], np.float32)
    check(lambda x: (np.searchsorted(a, x), np.searchsorted(a, x, side="right"),
                     np.searchsorted([0, 1, 2], x), np.digitize(x, [0.0, 0.5, 1.0]),
                     np.digitize(x, np.array([0.0, 0.5, 1.0]), right=True),
                     np.digitize(x, [1.0, 0.5, 0.0]), np.digitize(x, [1.0, 0.5, 0.0], True)), v)
    check(lambda s, x: (np.searchsorted(s, x), np.searchsorted(s, x, "right"),
                        np.searchsorted(s, 0.5), np.digitize(x, s), np.digitize(x, s[3::-1]),
                        np.digitize(x, s[:4], right=True)), a, v)
    check(lambda s, x: np.searchsorted(s, x), np.array([1, 3, 3, 7]), np.array([0, 3, 4, 8, 7]))
    with pytest.raises(ShapeError, match="monotonically"):
        polyc.jit(lambda x: np.digitize(x, [1.0, 0.5, 2.0]))(v)


def test_products_of_masks_are_boolean():
    a, b, c = rand((3, 4), F32, seed=6), rand((4, 5), F32, seed=7), rand((5, 2), F32, seed=8)
    check(lambda x, y, z: ((x > 0) @ (y > 0), np.dot(x[0] > 0, y[:, 0] > 0),
                           np.tensordot(x > 0, y > 0, 1), np.inner(x > 0, x > 0),
                           np.einsum('ij,jk->ik', x > 0, y > 0), np.einsum('ij->i', x > 0),
                           np.einsum('ij,jk,kl->il', x > 0, y > 0, z > 0),
                           np.vdot(x > 0, x > 1), np.kron(x[0] > 0, y[0] > 0),
                           np.where((x > 0) @ (y > 0), 1.0, -1.0), ((x > 0) @ (y > 0)).sum(),
                           np.einsum('ij,jk->ik', x > 0, y > 0, dtype=np.float32)), a, b, c)


def test_empty_extents_in_reductions_as_numpy():
    """A plan traced at a non-empty extent was reused for an empty one: any
    gave True, max -inf and argmax 2**63 - 1 where numpy gives False or
    raises; the plan is guarded and the call traces again."""
    f = polyc.jit(lambda a: (np.any(a > 0, axis=0), np.all(a > 0, axis=0), a.any(),
                             np.all(a, axis=1), np.max(a, axis=0, initial=0.5),
                             np.min(a, axis=1, initial=2.0)))
    for shape in [(3, 3), (0, 3), (3, 0), (2, 2)]:
        x = np.ones(shape, np.float32)
        got = f(x)
        want = (np.any(x > 0, axis=0), np.all(x > 0, axis=0), x.any(), np.all(x, axis=1),
                np.max(x, axis=0, initial=0.5), np.min(x, axis=1, initial=2.0))
        for a, b in zip(got, want):
            assert np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a, b)
    g = polyc.jit(lambda a: (a.max(axis=0), np.argmax(a, axis=1)))
    g(np.ones((3, 3), np.float32))
    with pytest.raises(ShapeError, match="zero-size array"):
        g(np.ones((0, 3), np.float32))
    with pytest.raises(ShapeError, match="empty sequence"):
        g(np.ones((3, 0), np.float32))


def test_masks_join_into_masks():
    a, b = rand((3, 4), F32, seed=9), rand((3, 4), F32, seed=10)
    check(lambda x, y: (np.concatenate([x > 0, y > 0]), np.concatenate([x > 0, y[:2] > 0], None),
                        np.stack([x > 0, y > 0], axis=-1), np.hstack([x[0] > 0, y[0] > 0]),
                        np.vstack([x[0] > 0, y[0] > 0]), np.tile(x[0] > 0, 2),
                        np.roll(x > 0, 1), np.append(x > 0, y < 0),
                        np.diff(x[0] > 0, prepend=False), np.column_stack([x[0] > 0, y[0] > 0]),
                        np.where(np.concatenate([x > 0, y > 0]), 1, 2),
                        np.concatenate([x > 0, y > 0]).sum(axis=0),
                        np.concatenate([x > 0, y]), np.concatenate([x > 0, y > 0],
                                                                   dtype=np.float32)), a, b)
    check(lambda x, m: np.concatenate([x[0] > 0, m]), a, np.array([True, False]))


@pytest.mark.parametrize("fn,numpy_error", [
    (lambda a: np.concatenate([a, a], axis=2), np.exceptions.AxisError),
    (lambda a: np.stack([a, a], axis=3), np.exceptions.AxisError),
    (lambda a: a.sum(axis=-3), np.exceptions.AxisError),
    (lambda a: a[5] + 1, IndexError)])
def test_axis_and_index_errors_are_polyc_errors_and_numpys(fn, numpy_error):
    with pytest.raises(polyc.PolycError, match="test_numpy_idioms.py") as info:
        polyc.jit(fn)(rand((3, 4), F32))
    assert isinstance(info.value, numpy_error)


def test_reductions_of_a_boolean_selection():
    """``x[mask].sum()`` and the like were refused as boolean indexing; they
    are numpy's reductions with ``where=mask``."""
    x, y = rand((6, 5), F32, seed=11), rand((6, 5), F32, seed=12)
    keep = np.array([True, False, True, True, False, True])
    check(lambda a, b: (a[a > 0].sum(), (a - b)[np.abs(b) > 0.5].mean(), a[a < 1].max(),
                        a[a > -1].min(), a[np.abs(a) < 1].prod(), a[a > 0].any(),
                        (a > -5)[a > 0].all(), a[a[:, 0] > 0].sum(axis=0),
                        a[a[:, 0] > 0].max(0), a[a[:, 0] > 0].mean(), a[keep].sum(axis=0),
                        a[a > 0].sum(dtype=np.float64), a[a > 100].sum()), x, y,
          reduction_length=30)
    i = np.arange(-15, 15, dtype=np.int32).reshape(6, 5)
    check(lambda a: (a[a > 0].sum(), a[a > 3].max(), a[a % 2 == 0].mean()), i)
    with pytest.raises(UnsupportedError, match="axis=1"):
        polyc.jit(lambda a: a[a[:, 0] > 0].sum(axis=1))(x)
    with pytest.raises(UnsupportedError, match="boolean selection"):
        polyc.jit(lambda a: a[a > 0] * 2)(x)


def test_gathers_of_masks_are_masks():
    x = rand((5, 3), F32, seed=13)
    idx = np.array([4, 0, -1])
    check(lambda a, i: ((a > 0)[i], np.take(a[:, 0] > 0, [0, 2]), (a > 0)[i, 1:],
                        np.take_along_axis(a > 0, np.array([[0], [2], [1], [0], [2]]), axis=1),
                        np.where((a[:, 0] > 0)[i], 1.0, 0.0), np.repeat(a[:3, 0] > 0, [1, 2, 0])),
          x, idx)
    check(lambda m, i: m[i], np.array([True, False, True]), np.array([2, 2, 0]))


def test_array_api_names_and_metadata():
    x, y = rand((2, 3), F32, seed=14), rand((2, 3), F64, seed=15)
    check(lambda a, b: (a * np.ones(1, np.result_type(a, b)),
                        np.zeros_like(a, dtype=np.result_type(a, 2.0)) + a,
                        a * np.isrealobj(a), a.real if np.iscomplexobj(a) else a * 1,
                        a / np.size(a), a / np.size(a, 1), a.reshape(np.size(a)),
                        np.cumulative_sum(a, axis=1, include_initial=True),
                        np.cumulative_prod(a, axis=0, include_initial=True),
                        np.cumulative_sum(a[0]), np.unstack(a)[1], np.unstack(a, axis=1)[2],
                        np.linalg.vecdot(a, b), np.linalg.vecdot(a, a[:1], axis=-1)), x, y)
    check(lambda a: np.cumulative_sum(a), np.arange(5, dtype=np.int32))


def test_var_std_with_where():
    x = rand((5, 4), F32, seed=16)
    check(lambda a: (np.std(a, where=a > 0), np.var(a, axis=1, where=a > -0.5),
                     np.var(a, axis=0, ddof=1, keepdims=True, where=a > -0.5),
                     a.std(axis=1, where=np.array([True, False, True, True])),
                     np.std(a, dtype=np.float64, where=a > 0), a.var(where=a > 0)), x,
          reduction_length=20)
    check(lambda a: np.var(a, where=a > 2), np.arange(12).reshape(3, 4))


def test_block():
    a, b = rand((2, 2), F32, seed=17), rand((2, 3), F32, seed=18)
    check(lambda x, y: (np.block([[x, x], [x, x]]), np.block([x, y]), np.block([x[0], y[0]]),
                        np.block([[y[0]], [y]]), np.block([[[x, x]], [[x, x]]]),
                        np.block([[x, np.zeros((2, 1), np.float32)],
                                  [np.ones((1, 3), np.float32)]]), np.block([x > 0, x < 0])),
          a, b)
    with pytest.raises(ShapeError, match="depths"):
        polyc.jit(lambda x: np.block([[x], x]))(a)


def test_r_and_c_name_concatenate():
    """np.r_[a, b] was refused with the hint for a numpy array indexed by a
    traced one (np.eye(n)[labels]), which it is not."""
    x = rand((3,), F32)
    for fn in (lambda a: np.r_[a, a], lambda a: np.c_[a, a]):
        with pytest.raises(polyc.TraceError, match=r"np.r_\[...\].*\n.*\n.*np.concatenate"):
            polyc.jit(fn)(x)
