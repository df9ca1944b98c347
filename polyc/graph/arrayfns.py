"""numpy functions of :func:`polyc.jit` built from others: ``diff``,
``trace``, ``around``/``round``, ``tile``, ``repeat``, ``argmax``/``argmin``.  Each is expressed
with views, ufuncs, ``einsum`` and ``concatenate``, so it computes what
numpy computes in the order numpy does (``around`` multiplies by
``10**decimals``, rounds half to even and divides back, as numpy's
``around`` does; ``repeat`` reads element ``i // r``, a quasi-affine
access isl handles exactly)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from . import views
from .contractions import einsum
from .core import Tracer, user_location
from .ops import (
    Scalar,
    iters,
    lhs,
    materialize,
    new_node,
    normalize_axis,
    operand,
    s_token,
    where_clause,
)
from .ufuncs import UFUNCS


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def diff(g, a, n=1, axis=-1, prepend=None, append=None) -> Tracer:
    """``np.diff``: ``a[1:] - a[:-1]`` along ``axis``, ``n`` times."""
    if prepend is not None or append is not None:
        raise _refuse("np.diff with prepend= or append= is not supported")
    t = operand(g, a)
    if isinstance(t, Scalar) or t.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    if t.dtype.kind == "b":
        raise _refuse("np.diff of booleans (numpy computes not_equal) is not supported")
    ax = normalize_axis(int(axis), t.ndim)
    for _ in range(int(n)):
        hi = tuple(slice(1, None) if d == ax else slice(None) for d in range(t.ndim))
        lo = tuple(slice(None, -1) if d == ax else slice(None) for d in range(t.ndim))
        t = UFUNCS["subtract"](g, views.getitem(t, hi), views.getitem(t, lo))
    return t


def trace(g, a, offset=0, axis1=0, axis2=1, dtype=None, out=None) -> Tracer:
    """``np.trace`` of the main diagonal of a matrix (``einsum('ii')``)."""
    t = operand(g, a)
    if out is not None or dtype is not None or offset != 0 or t.ndim != 2 \
            or sorted((normalize_axis(axis1, 2), normalize_axis(axis2, 2))) != [0, 1]:
        raise _refuse("np.trace is supported on a matrix's main diagonal only (offset=0, "
                      "no dtype= or out=)")
    return einsum(g, "ii", t)


def around(g, a, decimals=0, out=None) -> Tracer:
    """``np.around``/``np.round``: half to even; with ``decimals``, scaled
    by ``10**decimals`` first and back after (numpy's computation)."""
    if out is not None:
        raise _refuse("np.round with out= is not supported in traced code")
    t = operand(g, a)
    d = int(decimals)
    if t.dtype.kind in "iub":
        if d >= 0:
            return UFUNCS["positive"](g, t)
        raise _refuse("np.round of integers with negative decimals is not supported")
    if d == 0:
        return UFUNCS["rint"](g, t)
    scale = t.dtype.type(10.0 ** abs(d))
    if d > 0:
        return UFUNCS["divide"](g, UFUNCS["rint"](g, UFUNCS["multiply"](g, t, scale)), scale)
    return UFUNCS["multiply"](g, UFUNCS["rint"](g, UFUNCS["divide"](g, t, scale)), scale)


def tile(g, a, reps, concatenate) -> Tracer:
    """``np.tile``: copies concatenated along each axis (``reps`` padded
    with ones on the left, or the array with unit axes, as numpy does);
    ``concatenate``: :func:`polyc.graph.numpy_api.concatenate`."""
    t = operand(g, a)
    reps = tuple(int(r) for r in np.atleast_1d(reps))
    if any(r < 1 for r in reps):
        raise _refuse("np.tile with a repetition count below 1 is not supported")
    nd = max(t.ndim, len(reps))
    if t.ndim < nd:
        t = views.reshape(t, (1,) * (nd - t.ndim) + tuple(t.shape))
    reps = (1,) * (nd - len(reps)) + reps
    for d, r in enumerate(reps):
        if r > 1:
            t = concatenate(g, [t] * r, axis=d)
    return t if any(r > 1 for r in reps) else UFUNCS["positive"](g, t)


def repeat(g, a, repeats, axis=None) -> Tracer:
    """``np.repeat`` with one repetition count ``r`` for every element:
    element ``i`` of the axis is element ``i // r`` of ``a`` (a view)."""
    t = operand(g, a)
    if not isinstance(repeats, (int, np.integer)) or isinstance(repeats, bool) or repeats < 1:
        raise _refuse("np.repeat is supported with one positive int count")
    if axis is None:
        t = views.reshape(t, (-1,))
        axis = 0
    ax = normalize_axis(int(axis), t.ndim)
    r = int(repeats)
    coords = [f"(({views.ph(d)}) / {r})" if d == ax else views.ph(d) for d in range(t.ndim)]
    shape = [s.scale(r) if d == ax else s for d, s in enumerate(t._shape)]
    return UFUNCS["positive"](g, views._view(t, coords, shape))


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


def functions(concatenate) -> dict[str, Any]:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`,
    which lends its ``concatenate``)."""
    return {"diff": diff, "trace": trace, "around": around, "round": around,
            "round_": around, "repeat": repeat,
            "tile": lambda g, a, reps: tile(g, a, reps, concatenate),
            "argmax": lambda g, a, axis=None, out=None, *, keepdims=False:
                arg_reduce(g, "argmax", a, axis, out, keepdims=keepdims),
            "argmin": lambda g, a, axis=None, out=None, *, keepdims=False:
                arg_reduce(g, "argmin", a, axis, out, keepdims=keepdims)}
