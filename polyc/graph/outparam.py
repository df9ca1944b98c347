"""numpy's ``out=`` argument of elementwise operations in traced code:
``np.maximum(y, 0, out=y)``, ``np.clip(y, lo, hi, out=y)``,
``np.exp(x, out=(y,))``, ``np.fix``, ``np.round`` and ``np.dot``; and
``np.nan_to_num(y, copy=False)``; ``np.copyto(y, src, where=mask)``,
``np.putmask(y, mask, v)`` and ``np.place(y, mask, v)`` (``v`` a scalar, or
for ``putmask`` an array of ``y``'s shape: values placed in order at the
True positions depend on the values) as ``np.where(mask, src, y)`` stored.

The result is written into ``out`` as an in-place operator writes
(:meth:`polyc.graph.core.Tracer.update_inplace`): broadcast to ``out``'s
shape, cast to its dtype under numpy's ``same_kind`` rule
(:class:`~polyc.errors.DTypeError` otherwise), and the traced array object
``out`` itself takes the new value, so every name bound to it sees it; the
call returns ``out``, as numpy's does.  Refused, as for in-place operators:
``out`` an argument or captured array (the caller's array would change), a
view, or a numpy array (which cannot hold traced values).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedError
from . import ops, views
from .core import Tracer, user_location


def store_out(g, out: Any, value: Any, what: str, how: str = " with out=") -> Any:
    """``value`` (the result of ``what``) written into ``out`` (None: the
    value as it is; a 1-tuple as numpy's ufuncs accept it); ``how`` names
    the argument that asked for it in errors.  Returns
    ``out``.  Raises :class:`~polyc.errors.UnsupportedError`,
    :class:`~polyc.errors.ShapeError` or :class:`~polyc.errors.DTypeError`
    where numpy's semantics cannot be traced or numpy would raise."""
    if isinstance(out, tuple):
        if len(out) != 1:
            loc = user_location()
            raise UnsupportedError(f"{loc}: {what} with {len(out)} out= arrays is not "
                                   f"supported in traced code\n    {loc.text}")
        out = out[0]
    if out is None:
        return value
    loc = user_location()
    if not isinstance(out, Tracer):
        raise UnsupportedError(
            f"{loc}: {what}{how} a numpy array: a numpy array cannot hold traced "
            f"values; assign the result to a name instead, or create the buffer traced "
            f"(np.zeros_like(x), np.zeros(shape, like=x))\n    {loc.text}")
    v = ops.operand(g, value)
    if not isinstance(v, Tracer):
        v = ops.materialize(g, Tracer(g, v.literal(v.dtype), (), (), v.dtype))
    shape = tuple(s.value for s in out._shape)
    if tuple(s.value for s in v._shape) != shape:
        try:
            v = views.broadcast_to(v, out.shape)
        except ValueError:
            raise ShapeError(f"{loc}: {what}: non-broadcastable output operand with shape "
                             f"{shape} doesn't match the broadcast shape "
                             f"{tuple(s.value for s in v._shape)}\n    {loc.text}") from None
    return out.update_inplace("", v, what=f"{what}{how}")


def copyto(g, dst, src, casting="same_kind", where=True) -> None:
    """``np.copyto``: ``src`` (broadcast to ``dst``) written into the traced
    ``dst`` where ``where`` holds; ``casting`` as numpy's (``DTypeError``
    where it refuses the conversion; a Python scalar counts as ``dst``'s
    kind, as numpy 2's weak scalars)."""
    if not isinstance(dst, Tracer):
        store_out(g, dst, src, "np.copyto", how=" into")      # (raises: a numpy array)
    v = ops.operand(g, src)
    if isinstance(dst, Tracer):
        weak = isinstance(v, ops.Scalar) and v.weak
        sdt = np.result_type(dst.dtype, v.value) if weak else v.dtype
        if casting == "unsafe":
            v = ops.Scalar(dst.dtype.type(v.value)) if isinstance(v, ops.Scalar) else \
                v if v.dtype == dst.dtype else ops.materialize(g, v, "astype", dst.dtype)
        elif not np.can_cast(sdt, dst.dtype, casting):
            loc = user_location()
            raise DTypeError(f"{loc}: np.copyto: cannot cast from {sdt} to {dst.dtype} "
                             f"according to the rule {casting!r}\n    {loc.text}")
    v = v.value if isinstance(v, ops.Scalar) else v
    store_out(g, dst, v if where is True else np.where(where, v, dst), "np.copyto", how="")


def _mask_store(g, name: str, a, mask, values, in_order: bool) -> None:
    """``np.putmask``/``np.place``: ``values`` converted to ``a``'s dtype (as
    numpy's assignment) at the True positions of ``mask``."""
    if not isinstance(a, Tracer):
        store_out(g, a, values, f"np.{name}", how=" into")      # (raises: a numpy array)
    v = ops.operand(g, values)
    if isinstance(v, Tracer):
        if all(s.value == 1 for s in v._shape):
            v = views.reshape(v, ())        # numpy repeats the one value
        elif in_order or tuple(v.shape) != tuple(a.shape):
            loc = user_location()
            why = "they go to the True positions in order, a placement that depends on " \
                "the values" if in_order else "values of another shape than the array's " \
                "repeat over its flat positions"
            raise UnsupportedError(f"{loc}: np.{name} with an array of values: {why}; use "
                                   f"np.where(mask, values, a)\n    {loc.text}")
        v = v if v.dtype == a.dtype else ops.materialize(g, v, "astype", a.dtype)
    else:
        v = a.dtype.type(v.value)
    store_out(g, a, np.where(mask, v, a), f"np.{name}", how="")


def fill_diagonal(g, a, val, wrap=False) -> None:
    """``np.fill_diagonal`` of a traced array with a scalar ``val``: the
    positions ``(i, i, ...)`` for ``i`` below the smallest extent (2-D
    arrays with ``wrap=False``, or every extent equal), set in place."""
    from .setitem import setitem  # (setitem imports views, as this module does)
    t = a if isinstance(a, Tracer) else None
    if t is None:
        store_out(g, a, val, "np.fill_diagonal", how=" into")     # (raises: a numpy array)
    n = [int(s) for s in t.shape]
    if t.ndim < 2 or (t.ndim > 2 and len(set(n)) != 1):
        raise ValueError("array must be at least 2-d" if t.ndim < 2 else
                         "All dimensions of input must be of equal length")
    if wrap or np.ndim(val) or isinstance(val, Tracer):
        loc = user_location()
        raise UnsupportedError(f"{loc}: np.fill_diagonal with wrap=True or an array of "
                               f"values is not supported in traced code\n    {loc.text}")
    i = np.arange(min(n))
    setitem(t, (i,) * t.ndim, val)


def functions() -> dict:
    """These functions by numpy name (for :data:`polyc.graph.numpy_api.FUNCTIONS`)."""
    return {"copyto": copyto, "fill_diagonal": fill_diagonal,
            "putmask": lambda g, a, mask, values: _mask_store(g, "putmask", a, mask, values,
                                                              False),
            "place": lambda g, arr, mask, vals: _mask_store(g, "place", arr, mask, vals, True)}
