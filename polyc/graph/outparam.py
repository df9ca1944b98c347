"""numpy's ``out=`` argument of elementwise operations in traced code:
``np.maximum(y, 0, out=y)``, ``np.clip(y, lo, hi, out=y)``,
``np.exp(x, out=(y,))``, ``np.fix``, ``np.round`` and ``np.dot``; and
``np.nan_to_num(y, copy=False)``.

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

from ..errors import ShapeError, UnsupportedError
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
