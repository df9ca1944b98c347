"""numpy functions of :func:`polyc.jit` built from others: ``diff``,
``around``/``round``, ``tile``, ``repeat``, ``argmax``/``argmin``,
``ravel``, ``flip``, ``roll``, ``inner``, ``vdot``, ``kron``, ``ptp``, ``average``,
``count_nonzero``, ``nan_to_num`` and the ``edge``/``reflect``/``symmetric``/``wrap``
modes of ``pad``.  Each is expressed
with views, ufuncs, ``einsum`` and ``concatenate``, so it computes what
numpy computes in the order numpy does (``around`` multiplies by
``10**decimals``, rounds half to even and divides back, as numpy's
``around`` does; ``repeat`` reads element ``i // r``, a quasi-affine
access isl handles exactly)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, UnsupportedError
from . import arrayapi, gather, views
from .contractions import einsum, multi_dot
from .core import Tracer, user_location
from .creation import made
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
    s_token,
    where_clause,
)
from .outparam import store_out
from .sizes import Size, SizeInt
from .ufuncs import UFUNCS


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def diff(g, a, n=1, axis=-1, prepend=None, append=None, concatenate=None) -> Tracer:
    """``np.diff``: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times, after
    ``prepend`` and ``append`` are concatenated along ``axis`` (a scalar
    one as an extent-1 slab, as numpy broadcasts it)."""
    t = operand(g, a)
    if isinstance(t, Scalar) or t.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = normalize_axis(int(axis), t.ndim)
    if prepend is not None or append is not None:
        def slab(v):
            v = operand(g, v)
            if isinstance(v, Tracer) and v.ndim == t.ndim:
                return v
            shape = [1 if d == ax else s for d, s in enumerate(t.shape)]
            if isinstance(v, Tracer):
                return views.broadcast_to(v, shape)
            arr = np.asarray(v.value)           # (numpy's dtype: a 0-d array's, not weak)
            return made(g, "full", shape, arr.dtype, lambda its: literal(arr.item(),
                                                                              arr.dtype))
        parts = [slab(prepend)] if prepend is not None else []
        parts += [t] + ([slab(append)] if append is not None else [])
        t = concatenate(g, parts, axis=ax)
    for _ in range(int(n)):
        hi = tuple(slice(1, None) if d == ax else slice(None) for d in range(t.ndim))
        lo = tuple(slice(None, -1) if d == ax else slice(None) for d in range(t.ndim))
        # numpy's diff of booleans is not_equal (a mask), of anything else subtract
        op = "not_equal" if t.dtype.kind == "b" else "subtract"
        t = UFUNCS[op](g, views.getitem(t, hi), views.getitem(t, lo))
    return t


def _repeat_counts(g, t: Tracer, counts: np.ndarray, ax: int) -> Tracer:
    """``np.repeat`` with a count per element of axis ``ax`` (constants):
    the gather ``take(t, np.repeat(arange(n), counts), ax)``; the extent is
    specialised to the number of counts (``ValueError`` if they differ)."""
    if (counts < 0).any():
        raise ValueError("repeats may not contain negative values.")
    n = int(SizeInt(t._shape[ax], "np.repeat's counts are one per element"))
    if counts.size == 1:
        counts = np.full(n, counts[0])
    if counts.size != n:
        raise ValueError(f"operands could not be broadcast together with shape ({n},) "
                         f"({counts.size},)")
    idx = np.repeat(np.arange(n, dtype=np.int64), counts)
    if idx.size == 0:
        shape = [0 if d == ax else s for d, s in enumerate(t.shape)]
        return creation(g, "zeros", shape, t.dtype, lambda its: literal(0, t.dtype))
    return gather.take(g, t, idx, axis=ax)


def _power_of_ten(n: int) -> float:
    """``10.0 ** n`` (n >= 0) as numpy's ``round`` computes it: exact up to
    1e8, then 1e9 multiplied by 10 one step at a time (a few ulps from the
    correctly rounded power beyond 1e22), so that the scaled values agree."""
    if n < 9:
        return float(10 ** n)
    r = 1e9
    for _ in range(n - 9):
        r *= 10.0
        if r == float("inf"):
            break
    return r


def around(g, a, decimals=0, out=None) -> Tracer:
    """``np.around``/``np.round``: half to even; with ``decimals``, scaled
    by ``10**decimals`` first and back after (numpy's computation)."""
    if out is not None:
        return store_out(g, out, around(g, a, decimals), "np.round")
    t = operand(g, a)
    d = int(decimals)
    if t.dtype.kind == "b":
        if d == 0:      # numpy's rint of booleans: float16
            return UFUNCS["rint"](g, t)
        raise DTypeError(f"{user_location()}: np.round of booleans with decimals={d}: numpy "
                         "cannot cast the scaled float16 values back to bool (its TypeError); "
                         "convert first, e.g. x.astype(np.float32)")
    if t.dtype.kind in "iu":
        if d >= 0:
            return materialize(g, t)
        # numpy's: divided by 10**-d in float64, rounded half to even,
        # multiplied back and cast to the integer type (15 -> 20, 25 -> 20)
        scale = _power_of_ten(-d)
        f = materialize(g, t, "astype", np.dtype(np.float64))
        r = UFUNCS["multiply"](g, UFUNCS["rint"](g, UFUNCS["divide"](g, f, scale)), scale)
        return materialize(g, r, "astype", t.dtype)
    if d == 0:
        return UFUNCS["rint"](g, t)
    with np.errstate(over="ignore"):
        scale = t.dtype.type(_power_of_ten(abs(d)))
    if d > 0:
        return UFUNCS["divide"](g, UFUNCS["rint"](g, UFUNCS["multiply"](g, t, scale)), scale)
    return UFUNCS["multiply"](g, UFUNCS["rint"](g, UFUNCS["divide"](g, t, scale)), scale)


def round_builtin(t: Tracer, ndigits=None):
    """Python's ``round()`` of a traced array: of a 0-d one with ``ndigits``
    numpy's ``np.round`` (a numpy scalar); without ``ndigits`` it is a
    Python int of the value (``TraceError``); numpy's arrays of one or more
    dimensions have no ``round()`` (``UnsupportedError`` naming ``np.round``)."""
    if ndigits is None:
        t._refuse("round() of a traced value (a Python int)",
                  "np.round(x) or np.rint(x) rounds half to even and keeps a traced array")
    if t.ndim:
        raise _refuse(f"round(x, {ndigits!r}) of an array: numpy's arrays have no round(); "
                      f"write np.round(x, {ndigits!r})")
    return around(t._graph, t, ndigits)


def tile(g, a, reps, concatenate) -> Tracer:
    """``np.tile``: copies concatenated along each axis (``reps`` padded
    with ones on the left, or the array with unit axes, as numpy does);
    ``concatenate``: :func:`polyc.graph.numpy_api.concatenate`."""
    t = operand(g, a)
    reps = tuple(int(r) for r in np.atleast_1d(reps))
    if any(r < 0 for r in reps):
        raise ValueError("negative dimensions are not allowed")
    nd = max(t.ndim, len(reps))
    if 0 in reps:       # an empty result (its other extents specialised)
        shape = np.tile(np.empty(tuple(int(s) for s in t.shape), dtype=np.bool_), reps).shape
        return made(g, "tile", shape, t.dtype, lambda its: literal(0, t.dtype))
    if t.ndim < nd:
        t = views.reshape(t, (1,) * (nd - t.ndim) + tuple(t.shape))
    reps = (1,) * (nd - len(reps)) + reps
    for d, r in enumerate(reps):
        if r > 1:
            t = concatenate(g, [t] * r, axis=d)
    return t if any(r > 1 for r in reps) else materialize(g, t)


def repeat(g, a, repeats, axis=None) -> Tracer:
    """``np.repeat`` with one repetition count ``r`` for every element:
    element ``i`` of the axis is element ``i // r`` of ``a`` (a view)."""
    t = operand(g, a)
    if isinstance(repeats, SizeInt):
        repeats = int(repeats)               # specialised: the count is a value
    if isinstance(repeats, Tracer):
        raise _refuse("np.repeat with traced counts (a result whose size depends on the "
                      "values) is not supported; pass the counts as a list or numpy array")
    if axis is None:
        t = views.reshape(t, (-1,))
        axis = 0
    ax = normalize_axis(int(axis), t.ndim)
    if not isinstance(repeats, (int, np.integer)) or isinstance(repeats, bool):
        counts = np.asarray([int(r) for r in np.ravel(np.asarray(repeats, dtype=object))])
        if counts.size == 1:
            repeats = int(counts[0])
        else:
            return _repeat_counts(g, t, counts, ax)
    if repeats < 0:
        raise ValueError("repeats may not contain negative values.")
    if repeats == 0:
        return _repeat_counts(g, t, np.zeros(1, np.int64), ax)
    r = int(repeats)
    coords = [f"(({views.ph(d)}) / {r})" if d == ax else views.ph(d) for d in range(t.ndim)]
    shape = [s.scale(r) if d == ax else s for d, s in enumerate(t._shape)]
    return materialize(g, views._view(t, coords, shape))


def arg_reduce(g, kind: str, a, axis=None, out=None, *, keepdims=False) -> Tracer:
    """``np.argmax``/``np.argmin`` (``kind``): the first index of the
    maximum (minimum) along ``axis``, int64, NaN first as numpy (the max=
    reduction propagates it, and the index of the first element equal to
    the result, or NaN, is taken with a ``min=`` reduction);
    ``axis=None``: of the flattened array."""
    if out is not None:
        raise _refuse(f"np.{kind} with out= is not supported in traced code")
    t = operand(g, a)
    if isinstance(t, Scalar) or t.ndim == 0:
        raise _refuse(f"np.{kind} of a scalar is not supported")
    flat = axis is None
    if flat:
        t = materialize(g, views.reshape(t, (-1,))) if t.ndim > 1 else t
        axis = 0
    ax = normalize_axis(int(axis), t.ndim)
    if t._shape[ax].value == 0:
        raise ValueError(f"attempt to get {kind} of an empty sequence")
    g.symbols.require(t._shape[ax] - 1, f"np.{kind} along it (numpy raises for no elements)")
    its = iters(t.ndim - 1)
    coords = its[:ax] + ["r0"] + its[ax:]
    elem = t.read(coords)
    if t.dtype.kind == "b":
        elem = f"(({elem}) ? 1 : 0)"
    shape = tuple(s for d, s in enumerate(t._shape) if d != ax)
    wc = where_clause(its + ["r0"], list(shape) + [t._shape[ax]])
    red = "max" if kind == "argmax" else "min"

    def stmts(name):
        best = lhs(name + "_m", its)
        return [f"{best} {red}=! {elem}{wc}",
                f"{lhs(name, its)} min=! ((({elem}) == {best}) || (({elem}) != ({elem}))) "
                f"? r0 : {s_token(t._shape[ax])}{wc}"]
    mdt = np.dtype("int64") if t.dtype.kind == "b" else t.dtype
    out_t = new_node(g, kind, shape, np.dtype("int64"), [t], stmts, helpers=[("m", mdt)],
                     reduction=True)
    if keepdims:
        out_t = views.reshape(out_t, tuple(1 for _ in range(a.ndim))) if flat else \
            views.expand_dims(out_t, ax)
    return out_t


def _axes(axis, ndim: int) -> list[int]:
    """``axis`` (None: all, an int or a tuple; negative allowed) as a list."""
    if axis is None:
        return list(range(ndim))
    return [normalize_axis(int(a), ndim) for a in np.atleast_1d(axis)]


def ravel(g, a, order="C") -> Tracer:
    """``np.ravel``/``ndarray.flatten``: the elements in C order, or F order
    (a reshape)."""
    if order not in ("C", "A", "K", "F"):
        raise _refuse(f"np.ravel(order={order!r}) is not supported; only C and F order")
    t = operand(g, a)
    if isinstance(t, Scalar):
        raise _refuse("np.ravel of a Python scalar is not supported")
    return views.reshape(t, (-1,), order)


def flip(g, m, axis=None) -> Tracer:
    """``np.flip``: element ``i`` of each flipped axis is ``n - 1 - i``."""
    t = operand(g, m)
    key = [slice(None)] * t.ndim
    for d in _axes(axis, t.ndim):
        key[d] = slice(None, None, -1)
    return views.getitem(t, tuple(key))


def roll(g, a, shift, axis=None, concatenate=None) -> Tracer:
    """``np.roll``: along each axis the last ``shift`` elements first
    (the two slices concatenated).  A shift within the axis's extent at
    the traced size stays symbolic (the plan is guarded to extents at least
    that long); a longer one specialises the extent."""
    t = operand(g, a)
    if axis is None:
        flat = roll(g, ravel(g, t), shift, 0, concatenate)
        return views.reshape(flat, tuple(t.shape))
    shifts, axes = np.broadcast_arrays(np.atleast_1d(shift), np.atleast_1d(axis))
    moved = False
    for s, ax in zip(shifts.tolist(), axes.tolist()):
        d = normalize_axis(int(ax), t.ndim)
        s = int(s)
        if abs(s) > t._shape[d].value:
            s %= int(t.shape[d])                    # (specialises the extent)
        if not s:
            continue
        # the last s elements first (s < 0: the first -s last)
        head = [slice(None)] * t.ndim
        tail = [slice(None)] * t.ndim
        head[d], tail[d] = (slice(-s, None), slice(None, -s))
        t = concatenate(g, [views.getitem(t, tuple(head)), views.getitem(t, tuple(tail))],
                        axis=d)
        moved = True
    return t if moved else materialize(g, t)


def inner(g, a, b) -> Tracer:
    """``np.inner``: sums over the last axes of both; the result's axes are
    ``a``'s others, then ``b``'s (an ``einsum``)."""
    x, y = operand(g, a), operand(g, b)
    if isinstance(x, Scalar) or isinstance(y, Scalar) or x.ndim == 0 or y.ndim == 0:
        return UFUNCS["multiply"](g, x, y)
    if x.ndim + y.ndim - 1 > 26:
        raise _refuse("np.inner of more than 26 axes is not supported")
    letters = "abcdefghijklmnopqrstuvwxy"
    xa, ya = letters[:x.ndim - 1], letters[x.ndim - 1:x.ndim + y.ndim - 2]
    return einsum(g, f"{xa}z,{ya}z->{xa}{ya}", x, y)


def vdot(g, a, b) -> Tracer:
    """``np.vdot``: the dot product of both arrays flattened (real types:
    nothing to conjugate); their sizes must match."""
    x, y = operand(g, a), operand(g, b)
    if isinstance(x, Scalar) or isinstance(y, Scalar):
        return UFUNCS["multiply"](g, x, y)
    return einsum(g, "z,z->", views.reshape(x, (-1,)), views.reshape(y, (-1,)))


def kron(g, a, b) -> Tracer:
    """``np.kron``: the outer product with each pair of axes merged,
    ``(i, k) -> i * b.shape[d] + k`` (an einsum and a reshape)."""
    x, y = operand(g, a), operand(g, b)
    if isinstance(x, Scalar) or isinstance(y, Scalar):
        return UFUNCS["multiply"](g, x, y)
    nd = max(x.ndim, y.ndim)
    if 2 * nd > 26:
        raise _refuse("np.kron of more than 13 axes is not supported")
    x = views.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape)) if x.ndim < nd else x
    y = views.reshape(y, (1,) * (nd - y.ndim) + tuple(y.shape)) if y.ndim < nd else y
    letters = "abcdefghijklmnopqrstuvwxyz"
    xa, ya = letters[:nd], letters[nd:2 * nd]
    outer = einsum(g, f"{xa},{ya}->{''.join(p + q for p, q in zip(xa, ya))}", x, y)
    return views.reshape(outer, tuple(p * q for p, q in zip(x.shape, y.shape)))


def ptp(g, a, axis=None, out=None, keepdims=False) -> Tracer:
    """``np.ptp``: the maximum less the minimum along ``axis``."""
    if out is not None:
        raise _refuse("np.ptp with out= is not supported in traced code")
    t = operand(g, a)
    return UFUNCS["subtract"](g, reduce(g, "max", t, axis, bool(keepdims)),
                              reduce(g, "min", t, axis, bool(keepdims)))


def average(g, a, axis=None, weights=None, returned=False, *, keepdims=False) -> Tracer:
    """``np.average``: the mean, or ``sum(a * w) / sum(w)`` along ``axis``
    with ``weights`` of ``a``'s shape or, with one axis, 1-D along it
    (numpy's computation and result type).  ``returned=True``: also the
    sum of the weights (the count without weights), of the average's shape
    and dtype."""
    t = operand(g, a)
    if weights is None:
        avg = reduce(g, "mean", t, axis, bool(keepdims))
        if not returned:
            return avg
        n = " * ".join(["1.0"] + [s_token(t._shape[d]) for d in _axes(axis, t.ndim)])
        return avg, creation(g, "full", avg.shape, avg.dtype, lambda its: f"({n})")
    w = operand(g, weights)
    if isinstance(w, Scalar) or isinstance(t, Scalar):
        raise _refuse("np.average with scalar weights is not supported")
    if tuple(w.shape) != tuple(t.shape):
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        axes = _axes(axis, t.ndim)
        if w.ndim != len(axes):
            raise ValueError("Shape of weights must be consistent with shape of a along "
                             "specified axis.")
        w = views.reshape(w, tuple(w.shape[axes.index(d)] if d in axes else 1
                                   for d in range(t.ndim)))
    dt = np.result_type(t.dtype, w.dtype, "f8" if t.dtype.kind in "iub" else t.dtype)
    tw = UFUNCS["multiply"](g, t, w)
    num = reduce(g, "sum", tw, axis, bool(keepdims), dtype=dt if tw.dtype != dt else None)
    wt = views.broadcast_to(w, tuple(t.shape)) if tuple(w.shape) != tuple(t.shape) else w
    den = reduce(g, "sum", wt, axis, bool(keepdims), dtype=dt)
    avg = UFUNCS["divide"](g, num, den)
    return (avg, den) if returned else avg


def count_nonzero(g, a, axis=None, *, keepdims=False) -> Tracer:
    """``np.count_nonzero``: the number of non-zero elements along ``axis``
    (int64)."""
    t = operand(g, a)
    nz = UFUNCS["not_equal"](g, t, 0)
    return reduce(g, "sum", nz, axis, bool(keepdims), dtype=np.int64)


def nan_to_num(g, x, copy=True, nan=0.0, posinf=None, neginf=None) -> Tracer:
    """``np.nan_to_num``: NaN, +inf and -inf replaced (by default with 0 and
    the type's largest and most negative finite values); integers copied.
    ``copy=False`` replaces them in ``x`` itself, as numpy does (refused
    where ``x`` is an argument or a view, as for ``out=``)."""
    t = operand(g, x)
    if not copy and isinstance(t, Tracer):
        return store_out(g, t, nan_to_num(g, t, True, nan, posinf, neginf),
                         "np.nan_to_num", " with copy=False")
    if isinstance(t, Scalar):
        return UFUNCS["positive"](g, t)
    if t.dtype.kind != "f":
        return materialize(g, t)
    fi = np.finfo(t.dtype)
    vals = [literal(v, t.dtype) for v in (nan, fi.max if posinf is None else posinf,
                                          fi.min if neginf is None else neginf)]
    inf = literal(np.inf, t.dtype)
    return elementwise(g, "nan_to_num", lambda e: (
        f"(({e} != {e}) ? {vals[0]} : (({e} == {inf}) ? {vals[1]} : "
        f"(({e} == -{inf}) ? {vals[2]} : {e})))"), [t], t.dtype, compute_dtype=t.dtype)


def _edges(t: Tracer, d: int, mode: str, lo: int, hi: int) -> tuple[Tracer, Tracer]:
    """The ``lo`` elements before and the ``hi`` after axis ``d`` of ``t``
    that ``np.pad`` adds in ``mode``, as views (index maps of the axis)."""
    n = t._shape[d]
    j = views.ph(d)
    last = s_token(n - 1)
    before = {"edge": "0", "reflect": f"{lo} - {j}", "symmetric": f"{lo - 1} - {j}",
              "wrap": f"{s_token(n - lo)} + {j}"}[mode]
    after = {"edge": last, "reflect": f"{s_token(n - 2)} - {j}",
             "symmetric": f"{last} - {j}", "wrap": j}[mode]
    parts = []
    for text, k in ((before, lo), (after, hi)):
        coords = [views.ph(e) if e != d else f"({text})" for e in range(t.ndim)]
        shape = [s if e != d else Size.constant(n.table, k) for e, s in enumerate(t._shape)]
        parts.append(views._view(t, coords, shape))
    return parts[0], parts[1]


def pad_mode(g, t: Tracer, pw, mode: str, concatenate) -> Tracer:
    """``np.pad`` in ``mode`` (``edge reflect symmetric wrap``), one axis
    after the other as numpy pads them (corners come from the axes padded
    before).  Each side must fit the extent once at every size of the shape
    class (numpy repeats the reflection for wider pads): the plan is
    guarded to such extents."""
    for d in range(t.ndim):
        lo, hi = (int(v) for v in pw[d])
        if not lo and not hi:
            continue
        n = t._shape[d]
        need = {"edge": 1, "reflect": max(lo, hi) + 1, "symmetric": max(lo, hi),
                "wrap": max(lo, hi)}[mode]
        if n.value < need:
            raise _refuse(f"np.pad(mode={mode!r}) wider than the axis it pads (extent "
                          f"{n.value}, pad {max(lo, hi)}) is not supported")
        n.table.require(n - need, f"np.pad(mode={mode!r})")
        before, after = _edges(t, d, mode, lo, hi)
        t = concatenate(g, ([before] if lo else []) + [t] + ([after] if hi else []), axis=d)
    return materialize(g, t) if t.node is None else t


def functions(concatenate) -> dict[str, Any]:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`,
    which lends its ``concatenate``)."""
    return {"diff": lambda g, a, n=1, axis=-1, prepend=None, append=None:
            diff(g, a, n, axis, prepend, append, concatenate), "around": around, "round": around,
            "round_": around, "repeat": repeat,
            "tile": lambda g, a, reps: tile(g, a, reps, concatenate),
            "argmax": lambda g, a, axis=None, out=None, *, keepdims=False:
                arg_reduce(g, "argmax", a, axis, out, keepdims=keepdims),
            "argmin": lambda g, a, axis=None, out=None, *, keepdims=False:
                arg_reduce(g, "argmin", a, axis, out, keepdims=keepdims),
            "ravel": ravel, "flip": flip,
            "fliplr": lambda g, m: flip(g, m, 1), "flipud": lambda g, m: flip(g, m, 0),
            "roll": lambda g, a, shift, axis=None: roll(g, a, shift, axis, concatenate),
            "inner": inner, "vdot": vdot, "kron": kron, "ptp": ptp, "average": average,
            "count_nonzero": count_nonzero, "nan_to_num": nan_to_num,
            "multi_dot": multi_dot, **arrayapi.functions(),
            "isposinf": lambda g, x, out=None: _isinf_signed(g, x, out, False),
            "isneginf": lambda g, x, out=None: _isinf_signed(g, x, out, True)}


def _isinf_signed(g, x, out, negative: bool) -> Tracer:
    """``np.isposinf``/``np.isneginf``: ``isinf(x) & (signbit(x) == negative)``
    as numpy computes them (a boolean mask; False for integers)."""
    if out is not None:
        return store_out(g, out, _isinf_signed(g, x, None, negative),
                         "np.isneginf" if negative else "np.isposinf")
    t = operand(g, x)
    sign = UFUNCS["signbit"](g, t)
    if not negative:
        sign = UFUNCS["logical_not"](g, sign)
    return UFUNCS["logical_and"](g, UFUNCS["isinf"](g, t), sign)
