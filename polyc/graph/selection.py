"""``x[mask].sum()``: a full reduction of a boolean selection in traced code.

``x[mask]`` has as many elements as ``mask`` has True values, a shape that
depends on the values, so traced code cannot hold it.  Read by one reduction
method right away (``err[mask].mean()``, ``x[x > 0].sum()``,
``rows[keep].max(axis=0)``), it is the reduction of ``x`` with numpy's
``where=mask``, which needs no such shape: when the instruction after the
subscript loads one of the methods :data:`METHODS` (Python's bytecode, read
by :func:`polyc.graph.core.user_instruction`), the subscript returns a
:class:`MaskedSelection` that has only those methods.  ``axis`` may be None
(every element) or 0 (the selected positions, when ``mask`` covers ``x``'s
leading dimensions); ``dtype`` is honoured, ``keepdims`` and ``out`` are
refused.  numpy raises ``ValueError`` for ``max``/``min`` of an empty
selection, which needs the values: here that gives ``-inf``/``+inf`` (the
integer type's bounds).  Any other use of ``x[mask]`` stays refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from . import views
from .core import Tracer, user_instruction, user_location
from .ops import operand

#: the reduction methods ``x[mask].method(...)`` may call
METHODS = ("sum", "mean", "max", "min", "prod", "any", "all")


def reduction_follows() -> bool:
    """Whether the user's subscript is followed by loading one of
    :data:`METHODS` (``x[mask].sum``)."""
    nxt = user_instruction(1)
    return nxt is not None and nxt.opname in ("LOAD_METHOD", "LOAD_ATTR") and \
        nxt.argval in METHODS and getattr(user_instruction(0), "opname", "") == \
        "BINARY_SUBSCR"


class MaskedSelection:
    """``x[mask]`` for one reduction method (:data:`METHODS`)."""

    def __init__(self, t: Tracer, mask: Any) -> None:
        m = operand(t._graph, mask)
        ms, ts = [s.value for s in m._shape], [s.value for s in t._shape]
        if m.ndim > t.ndim or ms != ts[:m.ndim]:
            bad = next((d for d in range(min(m.ndim, t.ndim)) if ms[d] != ts[d]), 0)
            raise IndexError(f"boolean index did not match indexed array along axis {bad}; "
                             f"size of axis is {ts[bad] if bad < t.ndim else 0} but size of "
                             f"corresponding boolean axis is {ms[bad]}")
        for a, b in zip(m._shape, t._shape):
            t._graph.symbols.unify(a, b, "a boolean index")
        self._t, self._k = t, m.ndim
        self._mask = views.reshape(m, tuple(m.shape) + (1,) * (t.ndim - m.ndim))

    def _axes(self, what: str, axis, keepdims=False, out=None, **kw) -> tuple:
        if keepdims or out is not None or kw:
            raise self._refuse(f"x[mask].{what}() with keepdims=, out= or "
                               f"{', '.join(kw) or 'where'}=")
        if axis is None:
            return tuple(range(self._t.ndim))
        ax = tuple(np.atleast_1d(axis))
        if len(ax) == 1 and int(ax[0]) in (0, -(self._t.ndim - self._k + 1)):
            return tuple(range(self._k))
        raise self._refuse(f"x[mask].{what}(axis={axis!r}) (it keeps the selected "
                           f"positions, whose number depends on the values)")

    @staticmethod
    def _refuse(what: str) -> UnsupportedError:
        loc = user_location()
        return UnsupportedError(f"{loc}: {what} is not supported in traced code; use the "
                                f"reduction's where= (np.sum(x, where=mask))\n    {loc.text}")

    def _total(self, fn, what, axis=None, dtype=None, **kw):
        return fn(self._t, axis=self._axes(what, axis, **kw), dtype=dtype, where=self._mask)

    def sum(self, axis=None, dtype=None, **kw):
        return self._total(np.sum, "sum", axis, dtype, **kw)

    def prod(self, axis=None, dtype=None, **kw):
        return self._total(np.prod, "prod", axis, dtype, **kw)

    def mean(self, axis=None, dtype=None, **kw):
        return self._total(np.mean, "mean", axis, dtype, **kw)

    def _extreme(self, fn, what: str, axis=None, **kw):
        dt = self._t.dtype
        lo = dt.kind == "f"
        if what == "max":
            init = -np.inf if lo else (0 if dt.kind == "b" else np.iinfo(dt).min)
        else:
            init = np.inf if lo else (1 if dt.kind == "b" else np.iinfo(dt).max)
        return fn(self._t, axis=self._axes(what, axis, **kw), where=self._mask, initial=init)

    def max(self, axis=None, **kw):
        return self._extreme(np.max, "max", axis, **kw)

    def min(self, axis=None, **kw):
        return self._extreme(np.min, "min", axis, **kw)

    def any(self, axis=None, **kw):
        return np.any(np.logical_and(self._mask, self._t), axis=self._axes("any", axis, **kw))

    def all(self, axis=None, **kw):
        return np.all(np.logical_or(np.logical_not(self._mask), self._t),
                      axis=self._axes("all", axis, **kw))
