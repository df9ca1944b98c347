"""More numpy functions of :func:`polyc.jit`, each written with the traced
operations numpy's own implementation uses, so that the values are numpy's:
``any all`` (a count of the mask), ``diag diagonal`` (a guarded read, a
view), ``convolve correlate`` (numpy's zero padding, windows and sums),
``cross`` (the three products numpy forms), ``isclose``, ``nansum nanmean
nanmax nanmin``, ``atleast_1d atleast_2d atleast_3d column_stack dstack
rot90``, ``trapezoid``, ``sinc``, ``select``, ``linalg.matrix_power``,
``polyval``, ``hsplit vsplit dsplit``, ``real imag`` (of real arrays), and
the ufunc methods ``outer``, ``reduce`` of the logical ones and
``accumulate``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedError
from . import views
from .arrayfns import _refuse, flip
from .contractions import einsum, matmul
from .core import Tracer, user_location
from .ops import (
    Scalar,
    creation,
    elementwise,
    iters,
    lhs,
    literal,
    materialize,
    new_node,
    normalize_axis,
    operand,
    reduce,
    where_clause,
)
from .scans import scan
from .sizes import Size, SizeInt
from .ufuncs import UFUNCS

#: numpy_api's joining and selection functions (:func:`functions` fills it:
#: numpy_api imports this module)
_API: dict[str, Callable] = {}


def _mask(g, a) -> Tracer:
    t = operand(g, a)
    return t if t.dtype.kind == "b" else UFUNCS["not_equal"](g, t, 0)


def any_all(kind: str) -> Callable:
    """``np.any``/``np.all`` (and the ndarray methods): the count of true
    (``any``) or false (``all``) elements along ``axis`` compared with 0, as
    bool (so an empty slice gives False and True, as numpy's)."""
    def run(g, a, axis=None, out=None, keepdims=False, *, where=True):
        if out is not None or where is not True:
            raise _refuse(f"np.{kind} with out= or where= is not supported in traced code")
        m = _mask(g, a)
        if isinstance(m, Scalar):
            raise _refuse(f"np.{kind} of a Python scalar is not supported")
        if kind == "all":
            m = UFUNCS["logical_not"](g, m)
        r = reduce(g, "sum", m, axis, bool(keepdims))
        return UFUNCS["not_equal" if kind == "any" else "equal"](g, r, 0)
    return run


def diag(g, v, k=0) -> Tracer:
    """``np.diag``: of a vector, the square matrix with it on diagonal
    ``k`` (a guarded read, zeros elsewhere); of a matrix, its diagonal
    ``k`` (:func:`diagonal`)."""
    t = operand(g, v)
    if isinstance(t, Scalar) or t.ndim not in (1, 2):
        raise ValueError("Input must be 1- or 2-d.")
    if t.ndim == 2:
        return diagonal(g, t, k)
    k = int(k)
    n = t._shape[0] + abs(k)
    its = iters(2)
    row, col = its
    src = row if k >= 0 else col
    elem = t.read([src])
    zero = literal(0, t.dtype)
    cond = f"{col} == {row} + {k}" if k >= 0 else f"{row} == {col} + {-k}"
    return new_node(g, "diag", (n, n), t.dtype, [t], lambda name: [
        f"{lhs(name, its)} = ({cond}) ? {elem} : {zero}{where_clause(its, (n, n))}"])


def diagonal(g, a, offset=0, axis1=0, axis2=1) -> Tracer:
    """``np.diagonal``: ``a[..., i, i + offset]`` with the two axes moved
    last (a view).  Its length ``min(n1, n2 - offset)`` stays symbolic when
    one of the two is the smaller at every size of the shape class they
    share; otherwise the extents are specialised."""
    t = operand(g, a)
    if isinstance(t, Scalar) or t.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1, a2 = normalize_axis(int(axis1), t.ndim), normalize_axis(int(axis2), t.ndim)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    k = int(offset)
    t = views.moveaxis(t, (a1, a2), (-2, -1))
    n1, n2 = t._shape[-2], t._shape[-1]
    rows, cols = (n1, n2 - k) if k >= 0 else (n1 + k, n2)
    if (rows - cols).is_constant:
        length = rows if (rows - cols).value <= 0 else cols
    else:
        length = Size.constant(n1.table, max(0, min(int(SizeInt(rows)), int(SizeInt(cols)))))
    if length.value < 0:
        length = Size.constant(n1.table, 0)
    nd = t.ndim - 1
    j = views.ph(nd - 1)
    coords = [views.ph(d) for d in range(nd - 1)]
    coords += [j if k >= 0 else f"{j} + {-k}", f"{j} + {k}" if k > 0 else j]
    return views._view(t, coords, list(t._shape[:-2]) + [length])


def trace(g, a, offset=0, axis1=0, axis2=1, dtype=None, out=None) -> Tracer:
    """``np.trace``: the sum of :func:`diagonal` (numpy's order)."""
    if out is not None:
        raise _refuse("np.trace with out= is not supported in traced code")
    d = diagonal(g, a, offset, axis1, axis2)
    return reduce(g, "sum", d, -1, False, dtype)


def _windows(g, a: Tracer, v: Tracer, mode: str, flip: bool) -> Tracer:
    """numpy's ``correlate`` of 1-D ``a`` and ``v`` (``convolve`` with ``v``
    reversed: ``flip``), ``len(v) <= len(a)`` at every size of the shape
    class: ``a`` padded with ``m // 2``/``m - 1`` zeros as numpy pads it,
    each output the sum over a window of ``a`` times ``v``."""
    if not isinstance(a, Tracer) or not isinstance(v, Tracer) or a.ndim != 1 or v.ndim != 1:
        raise _refuse("np.convolve/np.correlate of 1-D arrays only")
    n, m = a._shape[0], v._shape[0]
    if m.value == 0 or n.value == 0:
        raise ValueError("v cannot be empty" if m.value == 0 else "a cannot be empty")
    n.table.require(n - m, "np.convolve/np.correlate: the second operand not longer")
    mm = int(SizeInt(m, "np.convolve/np.correlate: the window's length"))
    left, right = {"valid": (0, 0), "same": (mm // 2, mm - 1 - mm // 2),
                   "full": (mm - 1, mm - 1)}[mode]
    if left or right:
        a = _API["pad"](g, a, ((left, right),))
    w = views.sliding_window_view(a, mm)
    if flip:
        v = views.getitem(v, (slice(None, None, -1),))
    return einsum(g, "ij,j->i", w, v)


def convolve(g, a, v, mode="full") -> Tracer:
    """``np.convolve`` (numpy swaps the operands when ``v`` is the longer)."""
    x, y = operand(g, a), operand(g, v)
    if isinstance(x, Tracer) and isinstance(y, Tracer) and y.ndim == x.ndim == 1 and \
            y._shape[0].value > x._shape[0].value:
        x, y = y, x
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    return _windows(g, x, y, mode, True)


def correlate(g, a, v, mode="valid") -> Tracer:
    """``np.correlate``; with ``len(v) > len(a)`` numpy correlates ``v``
    with ``a`` and reverses the result (the plan guarded to that order)."""
    x, y = operand(g, a), operand(g, v)
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    if isinstance(x, Tracer) and isinstance(y, Tracer) and y.ndim == x.ndim == 1 and \
            y._shape[0].value > x._shape[0].value:
        x._shape[0].table.require(y._shape[0] - x._shape[0] - 1,
                                  "np.correlate: the second operand longer")
        return views.getitem(_windows(g, y, x, mode, False), (slice(None, None, -1),))
    return _windows(g, x, y, mode, False)


def cross(g, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None) -> Tracer:
    """``np.cross`` of 3-vectors (and of 2-vectors: the z component), the
    products numpy forms: ``a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0``."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = operand(g, a), operand(g, b)
    x = views.moveaxis(x, int(axisa), -1)
    y = views.moveaxis(y, int(axisb), -1)
    dx, dy = x._shape[-1].value, y._shape[-1].value
    if {dx, dy} - {2, 3}:
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    for t in (x, y):
        for s in t._shape[-1].symbols():
            t._shape[-1].table.fix(s, "np.cross: the vectors' length")
    def c(t, k):
        return views.getitem(t, (Ellipsis, k))
    mul, sub = UFUNCS["multiply"], UFUNCS["subtract"]
    if dx == 2 and dy == 2:
        return sub(g, mul(g, c(x, 0), c(y, 1)), mul(g, c(x, 1), c(y, 0)))
    x2 = c(x, 2) if dx == 3 else 0
    y2 = c(y, 2) if dy == 3 else 0
    parts = [sub(g, mul(g, c(x, 1), y2), mul(g, x2, c(y, 1))),
             sub(g, mul(g, x2, c(y, 0)), mul(g, c(x, 0), y2)),
             sub(g, mul(g, c(x, 0), c(y, 1)), mul(g, c(x, 1), c(y, 0)))]
    out = _API["stack"](g, parts, axis=-1)
    return views.moveaxis(out, -1, int(axisc))


def isclose(g, a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tracer:
    """``np.isclose``: ``|a - b| <= atol + rtol * |b|`` where ``b`` is
    finite, or ``a == b`` (infinities), or both NaN with ``equal_nan``."""
    x, y = operand(g, a), operand(g, b)
    dts = [t.dtype for t in (x, y) if isinstance(t, Tracer)]
    dt = np.result_type(*dts) if dts else np.dtype(np.float64)
    dt = dt if dt.kind == "f" else np.dtype(np.float64)       # (numpy: result_type(y, 1.))
    r, t_ = literal(rtol, dt), literal(atol, dt)
    inf = literal(np.inf, dt)

    def text(p, q):
        close = (f"((fabs({p} - {q}) <= {t_} + {r} * fabs({q})) && ({q} == {q}) && "
                 f"({q} != {inf}) && ({q} != -{inf}))")
        out = f"({close} || ({p} == {q}))"
        return f"({out} || (({p} != {p}) && ({q} != {q})))" if equal_nan else out
    return elementwise(g, "isclose", text, [x, y], np.dtype(bool), lazy=True, compute_dtype=dt)


def nan_reduction(kind: str) -> Callable:
    """``np.nansum nanmean nanmax nanmin``: NaNs as 0 (``nansum``), left out
    of the count (``nanmean``) or as -inf/+inf (``nanmax``/``nanmin``; a
    slice of NaNs only gives NaN, as numpy, which also warns)."""
    def run(g, a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        if out is not None or kw.get("where", True) is not True or \
                set(kw) - {"where", "initial"} or kw.get("initial") is not None:
            raise _refuse(f"np.nan{kind} with out=, where= or initial= is not supported")
        t = operand(g, a)
        if isinstance(t, Scalar) or t.dtype.kind != "f":
            return reduce(g, kind, t, axis, bool(keepdims), dtype)
        nan = UFUNCS["isnan"](g, t)
        if kind == "sum":
            return reduce(g, "sum", _where(g, nan, 0, t), axis, bool(keepdims), dtype)
        if kind == "mean":
            s = reduce(g, "sum", _where(g, nan, 0, t), axis, bool(keepdims), dtype)
            cnt = reduce(g, "sum", UFUNCS["logical_not"](g, nan), axis, bool(keepdims),
                         np.int64)
            q = UFUNCS["divide"](g, s, cnt)     # (numpy divides in float64, stores in s's type)
            return q if q.dtype == s.dtype else materialize(g, q, dtype=s.dtype)
        filled = _where(g, nan, -np.inf if kind == "max" else np.inf, t)
        m = reduce(g, kind, filled, axis, bool(keepdims))
        allnan = any_all("all")(g, nan, axis, keepdims=bool(keepdims))
        return _where(g, allnan, np.nan, m)
    return run


def matrix_power(g, a, n) -> Tracer:
    """``np.linalg.matrix_power`` for an integer ``n >= 0`` (static): the
    identity for 0, else products of repeated squares, as numpy forms them
    (a negative power needs an inverse, which polyc does not compute)."""
    t, n = operand(g, a), int(n)
    if isinstance(t, Scalar) or t.ndim < 2:
        raise ValueError(f"{t.ndim if isinstance(t, Tracer) else 0}-dimensional array "
                         "given. Array must be at least two-dimensional")
    if t._shape[-1].value != t._shape[-2].value:
        raise ValueError("Last 2 dimensions of the array must be square")
    g.symbols.unify(t._shape[-1], t._shape[-2], "matrix_power")
    if n < 0:
        raise _refuse("np.linalg.matrix_power with a negative power (an inverse) is not "
                      "supported")
    if n == 0:
        return creation(g, "identity", t.shape, t.dtype,
                        lambda its: f"(({its[-2]} == {its[-1]}) ? 1 : 0)")
    result, z = None, t
    while True:                 # numpy's binary decomposition of n
        if n & 1:
            result = z if result is None else matmul(g, result, z)
        n >>= 1
        if not n:
            return result if result is not t else materialize(g, t)
        z = matmul(g, z, z)


def split_along(axis: int, name: str) -> Callable:
    """``np.hsplit vsplit dsplit``: ``np.split`` along axis 1 (0 for 1-D
    arrays), 0 or 2."""
    def run(g, ary, indices_or_sections):
        t = operand(g, ary)
        nd = t.ndim if isinstance(t, Tracer) else 0
        if nd < (1 if name == "hsplit" else axis + 1):
            raise ValueError(f"{name} only works on arrays of {max(axis + 1, 1)} or more "
                             "dimensions")
        ax = 0 if name == "hsplit" and nd == 1 else axis
        return _API["split"](g, t, indices_or_sections, ax)
    return run


def polyval(g, p, x) -> Tracer:
    """``np.polyval``: Horner's rule from zeros shaped like ``x``, numpy's
    order of operations (its coefficients as a numpy array: an array of
    float64 coefficients is float64 even for a float32 ``x``)."""
    coeffs = p if isinstance(p, Tracer) else np.asarray(p)
    t = operand(g, x)
    y = creation(g, "zeros_like", t.shape, t.dtype, lambda its: "0") \
        if isinstance(t, Tracer) else np.zeros_like(x)
    for c in coeffs:
        y = UFUNCS["add"](g, UFUNCS["multiply"](g, y, x), c)
    return y


def imag(g, val) -> Tracer:
    """``np.imag`` of a real array (polyc's types are real; ``np.real`` is
    the array itself): zeros of its shape and dtype."""
    return creation(g, "imag", val.shape, val.dtype, lambda its: "0")


def select(g, condlist, choicelist, default=0) -> Tracer:
    """``np.select``: the choice of the first condition that holds, else
    ``default`` (``np.where`` from the last condition to the first)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        out = _where(g, cond, choice, out)
    return out


def _where(g, cond, a, b) -> Tracer:
    return _API["where"](g, cond, a, b)


def atleast(nd: int) -> Callable:
    """``np.atleast_1d/2d/3d`` (unit axes as numpy adds them); of several
    arrays a tuple, as numpy's."""
    def run(g, *arys):
        if len(arys) != 1:
            return tuple(run(g, a) for a in arys)
        t = operand(g, arys[0])
        if isinstance(t, Scalar):
            t = materialize(g, Tracer(g, t.literal(t.dtype), (), (), t.dtype))
        shape = tuple(t.shape)
        if t.ndim >= nd:
            return t
        if nd == 1 or t.ndim == 0:
            new = (1,) * (nd - t.ndim) + shape
        elif nd == 2:
            new = (1,) + shape
        else:                                 # numpy: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)
            new = (1,) + shape + (1,) if t.ndim == 1 else shape + (1,)
        return views.reshape(t, new)
    return run


def column_stack(g, tup) -> Tracer:
    """``np.column_stack``: 1-D arrays as columns, the rest joined on axis 1."""
    ts = [operand(g, a) for a in tup]
    ts = [views.reshape(t, (t.shape[0], 1)) if t.ndim < 2 else t for t in ts]
    return _API["concatenate"](g, ts, axis=1)


def dstack(g, tup) -> Tracer:
    """``np.dstack``: each at least 3-D, joined on axis 2."""
    return _API["concatenate"](g, [atleast(3)(g, a) for a in tup], axis=2)


def rot90(g, m, k=1, axes=(0, 1)) -> Tracer:
    """``np.rot90``: flips and a transposition (views)."""
    t = operand(g, m)
    a0, a1 = (normalize_axis(int(a), t.ndim) for a in axes)
    if a0 == a1:
        raise ValueError("Axes must be different.")
    k %= 4
    if k == 0:
        return materialize(g, t)
    if k == 2:
        return flip(g, t, (a0, a1))
    perm = list(range(t.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return views.transpose(flip(g, t, a1), perm)
    return flip(g, views.transpose(t, perm), a1)


def trapezoid(g, y, x=None, dx=1.0, axis=-1) -> Tracer:
    """``np.trapezoid``/``np.trapz``: ``(d * (y[1:] + y[:-1]) / 2.0).sum(axis)``
    with ``d`` the spacing ``dx`` or ``diff(x)``, as numpy computes it."""
    t = operand(g, y)
    ax = normalize_axis(int(axis), t.ndim)
    hi = [slice(None)] * t.ndim
    lo = [slice(None)] * t.ndim
    hi[ax], lo[ax] = slice(1, None), slice(None, -1)
    if x is None:
        d: Any = dx
    else:
        xs = operand(g, x)
        if xs.ndim == 1:
            d = UFUNCS["subtract"](g, views.getitem(xs, (slice(1, None),)),
                                   views.getitem(xs, (slice(None, -1),)))
            shape = [1] * t.ndim
            shape[ax] = d.shape[0]
            d = views.reshape(d, tuple(shape))
        else:
            d = UFUNCS["subtract"](g, views.getitem(xs, tuple(hi)),
                                   views.getitem(xs, tuple(lo)))
    s = UFUNCS["add"](g, views.getitem(t, tuple(hi)), views.getitem(t, tuple(lo)))
    return reduce(g, "sum", UFUNCS["divide"](g, UFUNCS["multiply"](g, d, s), 2.0), ax)


def sinc(g, x) -> Tracer:
    """``np.sinc``: ``sin(y) / y`` with ``y = pi * x`` (``x = 0`` as 1e-20,
    numpy's way to give 1)."""
    t = operand(g, x)
    y = UFUNCS["multiply"](g, np.pi, _where(g, UFUNCS["equal"](g, t, 0), 1.0e-20, t))
    return UFUNCS["divide"](g, UFUNCS["sin"](g, y), y)


def ufunc_method(g, ufunc, method: str, inputs, kwargs) -> Tracer | None:
    """``ufunc.outer`` of any binary ufunc polyc traces (``a[..., None, ...]
    op b``, broadcast), ``reduce`` of ``logical_and logical_or`` (``all``,
    ``any``) and ``accumulate`` of ``add multiply maximum minimum`` (scans:
    :mod:`polyc.graph.scans`); ``None`` for another method."""
    name = ufunc.__name__
    if method == "outer" and len(inputs) == 2 and not kwargs and name in UFUNCS:
        a, b = operand(g, inputs[0]), operand(g, inputs[1])
        if isinstance(a, Tracer) and isinstance(b, Tracer):
            a = views.reshape(a, tuple(a.shape) + (1,) * b.ndim)
        return UFUNCS[name](g, a, b)
    if method == "reduce" and name in ("logical_and", "logical_or") and len(inputs) == 1 \
            and kwargs.get("out") is None and set(kwargs) <= {"axis", "keepdims", "out"}:
        return any_all("all" if name == "logical_and" else "any")(
            g, inputs[0], kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
    kinds = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax",
             "minimum": "cummin"}
    if method == "accumulate" and name in kinds and len(inputs) == 1:
        axis = kwargs.pop("axis", 0)
        dtype = kwargs.pop("dtype", None)
        x = operand(g, inputs[0])
        if name in ("maximum", "minimum") and x.dtype.kind == "b":
            raise _refuse(f"np.{name}.accumulate of booleans is not supported")
        if kwargs.pop("out", None) is None and not kwargs:
            return scan(g, kinds[name], x, axis, dtype)
    return None


def norm(g, x, ord=None, axis=None, keepdims=False):
    """``np.linalg.norm`` where it is a reduction: of vectors the orders
    ``None``/2 (``sqrt(sum(x * x))``), 1, ``inf``, ``-inf``, 0 (the count of
    nonzeros) and any other ``p`` (``sum(|x| ** p) ** (1 / p)``); of
    matrices (2-D ``x``, or two axes) ``None``/``'fro'``, 1 and -1 (the
    extreme column sum of ``|x|``), ``inf`` and ``-inf`` (row sums).  The
    matrix orders 2, -2 and ``'nuc'`` need singular values: refused.
    Integers are converted to float64 first, as numpy does."""
    t = operand(g, x)
    if t.dtype.kind != "f":
        t = materialize(g, t, dtype=np.float64)
    keep = bool(keepdims)
    axes = None if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if axes is not None:
        axes = tuple(normalize_axis(int(a), t.ndim) for a in axes)
    matrix = len(axes) == 2 if axes is not None else (t.ndim == 2 and ord is not None)
    if ord is None or (ord == "fro" and (matrix or axes is None)) or (ord == 2 and not matrix):
        sq = reduce(g, "sum", UFUNCS["multiply"](g, t, t), axes, keep)
        return UFUNCS["sqrt"](g, sq)
    if matrix:
        r, c = axes or (0, 1)
        if ord in (1, -1, np.inf, -np.inf):
            inner, outer = (r, c) if ord in (1, -1) else (c, r)
            sums = reduce(g, "sum", UFUNCS["absolute"](g, t), (inner,), True)
            out = reduce(g, "max" if ord > 0 else "min", sums, (outer,), True)
            return out if keep else views.squeeze(out, (r, c))
        raise UnsupportedError(f"{user_location()}: np.linalg.norm with ord={ord!r} of a "
                               "matrix needs its singular values, which polyc does not "
                               "compute (None/'fro', 1, -1, inf, -inf are supported)")
    if axes is None and t.ndim != 1:
        raise ValueError("Improper number of dimensions to norm.")
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == 1:
        return reduce(g, "sum", UFUNCS["absolute"](g, t), axes, keep)
    if ord in (np.inf, -np.inf):
        return reduce(g, "max" if ord > 0 else "min", UFUNCS["absolute"](g, t), axes, keep)
    if ord == 0:
        nz = UFUNCS["not_equal"](g, t, 0.0)
        return materialize(g, reduce(g, "sum", nz, axes, keep), dtype=t.dtype)
    p = float(ord)
    powered = UFUNCS["power"](g, UFUNCS["absolute"](g, t), p)
    return UFUNCS["power"](g, reduce(g, "sum", powered, axes, keep), 1.0 / p)


def cov(g, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        *, dtype=None):
    """``np.cov``: the rows (columns with ``rowvar=False``) are variables,
    centred by their means, ``X @ X.T / (N - ddof)``; float64 unless
    ``dtype`` says otherwise, as numpy computes it.  Weights are refused."""
    if fweights is not None or aweights is not None:
        raise _refuse("np.cov with fweights or aweights is not supported")
    dt = np.dtype(dtype) if dtype is not None else np.result_type(operand(g, m).dtype,
                                                                   np.float64)
    def variables(a):
        a = np.atleast_2d(operand(g, a))
        return (a if rowvar or a.shape[0] == 1 else a.T).astype(dt)
    x = variables(m)
    if y is not None:
        x = _API["concatenate"](g, (x, variables(y)), 0)
    ddof = (0 if bias else 1) if ddof is None else int(ddof)
    x = x - x.mean(axis=1, keepdims=True)
    c = (x @ x.T) * (1.0 / (int(x.shape[1]) - ddof))
    return np.squeeze(c)


def corrcoef(g, x, y=None, rowvar=True, *, dtype=None):
    """``np.corrcoef``: :func:`cov` over the outer product of the standard
    deviations, clipped to [-1, 1] as numpy does."""
    c = cov(g, x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = np.sqrt(np.diagonal(c))
    return np.clip(c / d[:, None] / d[None, :], -1, 1)


def array_split(g, ary, indices_or_sections, axis=0):
    """``np.array_split``: ``k`` sections, the first ``n % k`` one longer
    (the extent is specialised), or the cuts given: numpy_api's ``split``
    at those cuts."""
    t = operand(g, ary)
    ax = normalize_axis(int(axis), t.ndim)
    if not isinstance(indices_or_sections, (int, np.integer, SizeInt)):
        return _API["split"](g, t, indices_or_sections, ax)
    k = int(indices_or_sections)
    if k <= 0:
        raise ValueError("number sections must be larger than 0.")
    each, extra = divmod(int(t.shape[ax]), k)
    cuts = [j * (each + 1) if j <= extra else extra * (each + 1) + (j - extra) * each
            for j in range(1, k)]
    return _API["split"](g, t, cuts, ax)


def functions(api: dict[str, Callable]) -> dict[str, Any]:
    """These functions by numpy name; ``api``: numpy_api's ``concatenate
    stack pad where split``, which they build on."""
    _API.update(api)
    return {"any": any_all("any"), "all": any_all("all"), "diag": diag, "trace": trace,
            "diagonal": diagonal, "convolve": convolve, "correlate": correlate,
            "cross": cross, "isclose": isclose, "select": select,
            "matrix_power": matrix_power, "polyval": polyval,
            "real": lambda g, val: val, "imag": imag,
            **{n: split_along(a, n) for n, a in (("hsplit", 1), ("vsplit", 0), ("dsplit", 2))},
            **{f"nan{k}": nan_reduction(k) for k in ("sum", "mean", "max", "min")},
            "atleast_1d": atleast(1), "atleast_2d": atleast(2), "atleast_3d": atleast(3),
            "column_stack": column_stack, "dstack": dstack,
            "rot90": rot90, "trapezoid": trapezoid, "trapz": trapezoid, "sinc": sinc,
            "norm": norm, "cov": cov, "corrcoef": corrcoef, "array_split": array_split}
