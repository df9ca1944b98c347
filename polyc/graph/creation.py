"""numpy's creation functions with ``like=`` a traced array (NEP 35):
``np.eye(n, like=x)``, ``identity zeros ones empty full arange`` and
``array asarray ascontiguousarray asfortranarray``.

Without ``like=`` these functions make numpy arrays (captured as graph
inputs), which numpy itself indexes: ``np.eye(n)[labels]`` asks for the
values of ``labels`` (a :class:`~polyc.errors.TraceError`).  With
``like=`` numpy hands the call to the tracer, and the result is a traced
array: ``np.eye(n, like=labels)[labels]`` is a gather, as
``jnp.eye(n)[labels]`` is in JAX.  Sizes may be extents of the arguments:
``np.ones(x.shape, like=x)``, ``full``, ``eye`` and ``arange(n)`` keep them
symbolic; numpy's ``zeros`` and ``empty`` read their shape before they hand
the call on, which specialises it (``np.zeros_like(x, shape=...)`` does
not).  Values are numpy's: the default dtype is float64 (``full``: the fill
value's, ``arange``: its arguments'), the fill value is converted to the
dtype as numpy converts it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedError
from . import ops
from .core import Tracer, user_location
from .ops import literal
from .sizes import SizeInt


def _refuse(what: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: {what}\n    {loc.text}")


def _dtype(dtype: Any, default: Any, what: str) -> np.dtype:
    return ops.check_dtype(default if dtype is None else dtype, what)


def made(g, name: str, shape: Any, dtype: np.dtype, rhs: Callable) -> Tracer:
    """:func:`polyc.graph.ops.creation`; a boolean array is made as int32
    0/1 and read as a mask (the kernels have no boolean element type)."""
    if np.dtype(dtype).kind != "b":
        return ops.creation(g, name, shape, dtype, rhs)
    t = ops.creation(g, name, shape, np.dtype("int32"), rhs)
    return ops.elementwise(g, "astype", lambda a: f"({a} != 0)", [t], np.dtype(bool),
                           lazy=True, compute_dtype=t.dtype)


def _filled(g, name: str, shape: Any, value: Any, dtype: np.dtype) -> Tracer:
    if isinstance(value, Tracer):
        raise _refuse(f"np.{name} with a traced fill value is not supported; use "
                      f"np.zeros_like(x, shape=...) + value, or broadcasting")
    text = literal(value, dtype)
    return made(g, name, ops.shape_arg(shape), dtype, lambda its: text)


def _check_order(name: str, kw: dict) -> None:
    if kw.pop("order", "C") not in ("C", "F", "K", "A", None) or \
            kw.pop("device", None) not in (None, "cpu") or kw:
        raise _refuse(f"np.{name} with {', '.join(kw) or 'these arguments'} is not "
                      f"supported in traced code")


def _constant(value: float, name: str) -> Callable:
    def run(g, shape, dtype=None, order="C", **kw):
        _check_order(name, dict(kw, order=order))
        return _filled(g, name, shape, value, _dtype(dtype, float, f"np.{name}'s dtype"))
    return run


def full(g, shape, fill_value, dtype=None, order="C", **kw):
    """``np.full``: the dtype is the fill value's (numpy's ``np.array(fill)``)."""
    _check_order("full", dict(kw, order=order))
    if isinstance(fill_value, Tracer):
        return _filled(g, "full", shape, fill_value, np.dtype(float))
    dt = _dtype(dtype, np.asarray(fill_value).dtype, "np.full's dtype")
    if np.ndim(fill_value) != 0:
        raise _refuse("np.full with an array fill value is not supported in traced code; "
                      "use np.broadcast_to(value, shape).copy()")
    return _filled(g, "full", shape, np.asarray(fill_value)[()], dt)


def eye(g, N, M=None, k=0, dtype=float, order="C", **kw):
    """``np.eye``: ones where the column is the row plus ``k``."""
    _check_order("eye", dict(kw, order=order))
    dt = _dtype(dtype, float, "np.eye's dtype")
    one, zero = literal(1, dt), literal(0, dt)
    k = int(k)
    shape = (N, N if M is None else M)
    return made(g, "eye", shape, dt,
                lambda its: f"(({its[1]} - {its[0]} == {k}) ? {one} : {zero})")


def identity(g, n, dtype=None, **kw):
    return eye(g, n, dtype=float if dtype is None else dtype, **kw)


def arange(g, start, stop=None, step=None, dtype=None, **kw):
    """``np.arange``: from 0 to an extent by 1 (``np.arange(x.shape[0],
    like=x)``) stays symbolic; other bounds are read as numbers (an extent
    is then specialised) and give numpy's own values."""
    _check_order("arange", dict(kw))
    if any(isinstance(v, Tracer) for v in (start, stop, step)):
        raise _refuse("np.arange with traced bounds has a data-dependent size")
    lo, hi = (0, start) if stop is None else (start, stop)
    if isinstance(hi, SizeInt) and isinstance(lo, int) and lo == 0 and step in (None, 1):
        dt = _dtype(dtype, int, "np.arange's dtype")
        return ops.creation(g, "arange", (hi,), dt,
                            lambda its: its[0] if dt.kind in "iu" else f"(1.0 * {its[0]})")
    plain = [int(v) if isinstance(v, SizeInt) else v for v in (start, stop, step)]
    args = [v for v in plain if v is not None] if plain[2] is None else plain
    value = np.arange(*args, dtype=dtype)
    ops.check_dtype(value.dtype, "np.arange's dtype")
    return ops.capture(g, value)


def _nested(g, obj: Any) -> Any:
    """A list or tuple holding traced arrays, stacked as ``np.array`` nests
    them; anything else as it is."""
    if isinstance(obj, (list, tuple)) and any(isinstance(o, (Tracer, list, tuple)) for o in obj):
        parts = [_nested(g, o) for o in obj]
        if any(isinstance(p, Tracer) for p in parts):
            return np.stack([p if isinstance(p, Tracer) else np.asarray(p) for p in parts])
    return obj


def asarray(name: str, copy_default: bool) -> Callable:
    """``np.array``/``np.asarray``/... ``(obj, like=x)``: a traced array
    as it is (a copy for ``np.array``; converted for ``dtype``), a list of
    traced arrays stacked, anything else a captured numpy array."""
    def run(g, obj, dtype=None, *args, copy=None, order=None, ndmin=0, **kw):
        kw.pop("device", None)
        kw.pop("subok", None)
        if args or kw or ndmin:
            raise _refuse(f"np.{name} with these arguments is not supported in traced code")
        obj = _nested(g, obj)
        if isinstance(obj, Tracer):          # (Tracer.astype: polyc.graph.numpy_api)
            if dtype is not None and np.dtype(dtype) != obj.dtype:
                return obj.astype(dtype)
            return obj.astype(obj.dtype, copy=True) if (copy or copy_default and copy is None) \
                else obj
        value = np.array(obj, dtype=dtype)
        ops.check_dtype(value.dtype, f"np.{name}'s value")
        if value.ndim == 0:
            return value
        return ops.capture(g, value)
    return run


def functions() -> dict[str, Callable]:
    """The creation functions by numpy name, for
    :data:`polyc.graph.numpy_api.FUNCTIONS`."""
    return {
        "zeros": _constant(0, "zeros"), "ones": _constant(1, "ones"),
        "empty": _constant(0, "empty"), "full": full, "eye": eye, "identity": identity,
        "arange": arange, "array": asarray("array", True), "asarray": asarray("asarray", False),
        "asanyarray": asarray("asanyarray", False),
        "ascontiguousarray": asarray("ascontiguousarray", False),
        "asfortranarray": asarray("asfortranarray", False),
    }
