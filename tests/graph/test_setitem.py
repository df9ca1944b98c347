"""Assignment into traced arrays, ``x[key] = value`` (polyc.graph.setitem):
boolean masks with scalars, basic indices with broadcast values, dtype
conversion as numpy's, aliases that see the change, and the refusals
(arguments, views, scatters), each against plain numpy (``check``: shapes,
dtypes, values within ``polyc.testing``'s tolerances)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc.errors import TraceError, UnsupportedError

from .test_ops import F32, F64, check, rand


def _relu_by_mask(x):
    y = x.copy()
    y[y < 0] = 0
    z = x * 2
    z[x[:, 0] > 0] = -1.0          # a mask over the leading dimension: whole rows
    return y, z


def _blocks(x, a):
    out = np.zeros_like(x, shape=(x.shape[0], x.shape[1] + a.shape[1]))
    out[:, :x.shape[1]] = x
    out[:, x.shape[1]:] = a
    return out


def _indices(x):
    y = x.copy()
    y[0] = 1.0
    y[-1, :] = y[0] * 3
    y[:, 1] = x[:, 2]
    y[1, 2] = 7
    y[..., -1] = x[..., 0]
    w = np.zeros_like(x)
    w[1:3] = x[0]                   # a row broadcast over the region
    return y, w


def _aliases(x):
    y = x + 1
    z = y
    z[0, :] = 0                     # y is z: it sees the change
    return y, z


@pytest.mark.parametrize("dtype", [F32, F64])
def test_assignments(dtype):
    x = rand((4, 5), dtype, seed=50)
    check(_relu_by_mask, x)
    check(_indices, x)
    check(_aliases, x)


@pytest.mark.parametrize("shapes", [((4, 5), (4, 3)), ((2, 6), (2, 1))])
def test_blocks_at_several_shapes(shapes):
    """One plan per shape class: the regions follow the extents."""
    f = polyc.jit(_blocks)
    for k, (sx, sa) in enumerate([shapes, tuple((s[0] + 2, s[1]) for s in shapes)]):
        x, a = rand(sx, F32, seed=51 + k), rand(sa, F32, seed=61 + k)
        polyc.testing.assert_close(f(x, a), _blocks(x, a))


def test_integer_target_converts_as_numpy():
    x = (rand((4, 5), F64, seed=52) * 10).astype(np.int32)

    def fn(a):
        y = a.copy()
        y[1:3] = 2.7                # truncated, numpy's unsafe assignment cast
        y[y > 5] = -1
        return y
    check(fn, x)


def _into_argument(x):
    x[0] = 0
    return x


def _into_view(x):
    y = x.copy()
    y[0][1] = 5.0
    return y


def _scatter(x):
    y = x.copy()
    y[x[:2, 0].astype(np.int64)] = 1.0      # traced indices: a scatter
    return y


def _array_under_mask(x):
    y = x.copy()
    y[y > 0] = x[0, 0] + y
    return y


def _strided(x):
    y = x.copy()
    y[::2] = 0.0                    # steps, negative steps, a value array
    y[1::3] += 1
    y[-2::-3] *= 2
    y[:, ::-1] -= x
    y[3:0:-2, 1:] = x[:2, :-1]
    return y


def _wave(u, up):
    """A wave equation's leapfrog steps: the interior updated in place."""
    for _ in range(3):
        un = 2 * u - up
        un[1:-1] += 0.3 * (u[2:] - 2 * u[1:-1] + u[:-2])
        un[0] *= 0.5
        up, u = u, un
    return u


def _red_black(u):
    """Gauss-Seidel's red rows, then its black rows, of a 2-D grid."""
    u = u.copy()
    u[1:-1:2, 1:-1] = 0.25 * (u[0:-2:2, 1:-1] + u[2::2, 1:-1] + u[1:-1:2, :-2] + u[1:-1:2, 2:])
    u[2:-1:2, 1:-1] = 0.25 * (u[1:-2:2, 1:-1] + u[3::2, 1:-1] + u[2:-1:2, :-2] + u[2:-1:2, 2:])
    return u


def _burgers(u0):
    """Burgers' equation with periodic ends copied from inside the array
    (u[0] = u[-2]: the value is a view of the array assigned into)."""
    u = u0.copy()
    for _ in range(3):
        un = u.copy()
        u[1:-1] = un[1:-1] - un[1:-1] * 0.1 * (un[1:-1] - un[:-2]) + \
            0.07 * (un[2:] - 2 * un[1:-1] + un[:-2])
        u[0] = u[-2]
        u[-1] = u[1]
    return u


def _views_see_changes(x):
    """Views held across assignments and in-place operators read the
    array's new value, as numpy's views do."""
    y = x * 1
    z, r = y.T, y[1:3]
    b = r[:, ::-1]
    y += 1
    y[0] = 7.0
    a = z.sum()
    y[:, -1] = y[:, -2]
    y *= 2
    return z, r, b, a, r[0]


@pytest.mark.parametrize("dtype", [F32, F64])
def test_assigning_into_an_array_with_views(dtype):
    check(_burgers, rand((17,), dtype, seed=60))
    check(_views_see_changes, rand((4, 3), dtype, seed=61))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_augmented_and_strided_assignments(dtype):
    """``y[key] op= v`` and ``y[a:b:step] = v``: Python's ``y[key] = y[key]
    op v``, as numpy computes them (they were refused: the in-place operator
    on the view, the step)."""
    check(_strided, rand((6, 5), dtype, seed=55))
    check(_strided, rand((7, 5), dtype, seed=56))
    check(_wave, rand((17,), dtype, seed=57), rand((17,), dtype, seed=58))
    check(_red_black, rand((9, 8), dtype, seed=59))


def _odd_points(u):
    u = u.copy()
    u[1:-1:2] = 0.5 * (u[:-2:2] + u[2::2])      # no point for fewer than 3 elements
    u[-2::-2] *= 2
    u[3:1] = 5.0                                 # empty regions: nothing changes
    u[4:1:2] = u[:0]
    return u


def test_stepped_and_empty_regions_at_several_lengths():
    """A region that is empty at some length assigns nothing; it was a
    statement reading its value out of bounds (a ShapeError at compile)."""
    f = polyc.jit(_odd_points)
    for n in (9, 4, 2, 1):
        u = rand((n,), F64, seed=62 + n)
        polyc.testing.assert_close(f(u), _odd_points(u))


def _view_named(x):
    y = x.copy()
    v = y[:2]
    v += 5                          # numpy writes y through v
    return y


def _augmented_view_in_a_list(x):
    y = x.copy()
    parts = np.split(y, 2)              # views of y: numpy's parts[0] += 1 writes into y
    parts[0] += 1
    return y


def _augmented_argument(x):
    x[1:] += 1
    return x


@pytest.mark.parametrize("fn,match", [(_into_argument, "it is an argument"),
                                      (_into_view, "view of another array"),
                                      (_scatter, "scatter"),
                                      (_array_under_mask, "np.where"),
                                      (_view_named, "in-place \\+= on a traced array: it is "
                                                    "a view"),
                                      (_augmented_argument, "it is an argument"),
                                      (_augmented_view_in_a_list, "went into a list")])
def test_refused_assignments_say_why(fn, match):
    with pytest.raises(UnsupportedError, match=match):
        polyc.jit(fn)(rand((4, 5), F32, seed=53))


def test_assigning_traced_values_into_a_numpy_array_names_zeros_like():
    buf = np.zeros((4, 8), np.float32)     # closed over: a numpy array, not traced

    def fn(x):
        buf[:, :5] = x
        return buf
    with pytest.raises(TraceError, match="zeros_like"):
        polyc.jit(fn)(rand((4, 5), F32, seed=54))


_ROWS = np.array([True, False, True, True])


def _augmented_under_masks(x):
    y = x.copy()
    y[y > 0] += 1                       # numpy: the selected elements updated in place
    y[y < 0] *= -0.5
    y[y > 1.5] **= 2
    y[x[:, 0] > 0] -= 10                # a mask over the leading dimension: whole rows
    y[_ROWS] /= 4                       # a numpy mask
    y[np.isnan(y)] += 1
    y[y.sum(1) > 0] += x[0]             # a value for the dimensions after the mask's
    y[y > 0] -= y.max()                 # a 0-d value
    return y


def _augmented_ints_under_a_mask(x):
    y = (x * 10).astype(np.int64)
    y[y > 3] //= 2
    y[y < 0] %= 3
    return y


def test_augmented_assignment_under_a_mask():
    x = rand((4, 5), F32, seed=55)
    check(_augmented_under_masks, x)
    check(_augmented_ints_under_a_mask, x)


def _augmented_array_under_mask(x):
    y = x.copy()
    y[y > 0] += x                       # numpy: x must match the number of selected elements
    return y


def _augmented_mask_of_argument(x):
    x[x > 0] += 1
    return x


@pytest.mark.parametrize("fn,match", [(_augmented_array_under_mask, "selected elements"),
                                      (_augmented_mask_of_argument, "it is an argument")])
def test_refused_augmented_assignments_under_a_mask(fn, match):
    with pytest.raises(UnsupportedError, match=match):
        polyc.jit(fn)(rand((4, 5), F32, seed=56))


def _constant_scatters(x, v):
    y = x.copy()
    y[np.array([0, 2])] = 1.0               # index arrays known while tracing
    y[[1, 3]] = v[:2]
    y[[0, 0, 1]] += 1                       # numpy: repeated positions once
    y[:, [1, 3]] = v[:4, :2]
    y[np.array([2, 0]), np.array([1, 3])] = v[0, :2]
    y[[-1]] *= 2
    y[np.ix_([0, 2], [1, 3])] = v[:2, :2]
    y[[0, 1], 1:] += y[[1, 2], :-1]
    y[np.array([True, False, True, False])] = v[:2]     # a numpy mask, an array value
    z = x[:4, :4].copy()
    z[np.diag_indices(4)] = 0
    z[np.tril_indices(4, -1)] = z[np.triu_indices(4, 1)]
    np.fill_diagonal(z, -1.5)
    w = x[:3, :3].copy()
    w[np.diag_indices_from(w)] = 1.0
    return y, z, w, x[np.tril_indices_from(x[:3, :3])], x[np.triu_indices_from(x, k=1)]


def test_assignment_through_constant_index_arrays():
    check(_constant_scatters, rand((4, 5), F32, seed=57), rand((4, 5), F32, seed=58))
