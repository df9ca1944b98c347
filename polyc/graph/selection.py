"""``x[mask]`` in traced code: a boolean selection, reduced or computed with.

``x[mask]`` has as many elements as ``mask`` has True values, a shape that
depends on the values, so traced code cannot hold it as an array: the
subscript returns a :class:`MaskedSelection`, ``x`` read under ``mask``.
Its reduction methods (:data:`METHODS`; ``err[mask].mean()``,
``x[x > 0].sum()``, ``rows[keep].max(axis=0)``, also bound to a name
first, and ``np.sum(sel)``) are numpy's reductions of ``x`` with
``where=mask``, which need no such shape.  ``axis`` may be None (every
element) or 0 (the selected positions, when ``mask`` covers ``x``'s leading
dimensions); ``dtype`` is honoured, ``keepdims`` and ``out`` are refused.
numpy raises ``ValueError`` for ``max``/``min`` of an empty selection, which
needs the values: here that gives ``-inf``/``+inf`` (the integer type's
bounds).

Elementwise arithmetic keeps a selection a selection
(:class:`MaskedSelection` implements ``__array_ufunc__``): ufuncs and
operators of selections under the same mask (one mask object, or two
evaluations of one comparison: the same template over the same nodes),
scalars, and arrays that broadcast against the dimensions after the mask's
compute over the whole array, and the elements under the mask are those of
the selection; so ``v = x[mask]; v.mean()`` and ``y[m] = y[m] ** -1.5``
(npbench's nbody), which :func:`polyc.graph.setitem.setitem` stores as
``np.where(m, y ** -1.5, y)``.  Anything that needs the number of selected
elements (``len``, ``shape``, indexing, joining, returning it, an operand
whose dimensions reach the mask's) is refused with
:class:`~polyc.errors.UnsupportedError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ..errors import UnsupportedError
from . import views
from .core import Tracer, user_location
from .ops import Scalar, operand

#: the reduction methods ``x[mask].method(...)`` may call
METHODS = ("sum", "mean", "max", "min", "prod", "any", "all")


def same_mask(a: Any, b: Any) -> bool:
    """Whether masks ``a`` and ``b`` are one value: the same object, equal
    numpy arrays, or tracers of one template over the same nodes (``x > 0``
    evaluated twice)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return isinstance(a, Tracer) and isinstance(b, Tracer) and \
        a._template == b._template and a._nodes == b._nodes and a._shape == b._shape


class MaskedSelection(NDArrayOperatorsMixin):
    """``x[mask]``: ``t`` (the whole array, or a value computed from
    selections over the whole array) read under ``mask``; its reductions
    (:data:`METHODS`) are where= reductions, its elementwise arithmetic
    another selection under the same mask (module docstring)."""

    __array_priority__ = 2000

    def __init__(self, t: Tracer, mask: Any) -> None:
        self._key = mask
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
        return UnsupportedError(f"{loc}: {what} is not supported in traced code; compute "
                                f"over the whole array (np.where(mask, f(x), x)) or reduce "
                                f"with where= (np.sum(x, where=mask))\n    {loc.text}")

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

    # -- elementwise arithmetic: another selection under the same mask ---------
    def _operand(self, x: Any, what: str) -> Any:
        if isinstance(x, MaskedSelection):
            if not same_mask(x._key, self._key):
                raise self._refuse(f"{what} of selections under two different masks (their "
                                   f"elements pair up by position)")
            if x._t.ndim != self._t.ndim:
                raise self._refuse(f"{what} of selections with different numbers of "
                                   f"dimensions after the mask's")
            return x._t
        if isinstance(operand(self._t._graph, x), Scalar):
            return x
        if np.ndim(x) > self._t.ndim - self._k:
            raise self._refuse(f"{what} of x[mask] and an array of shape {tuple(x.shape)} "
                               f"(its dimensions would pair with the selected elements)")
        return x

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        what = f"np.{ufunc.__name__}"
        if method != "__call__" or kwargs:
            raise self._refuse(f"{what}.{method}" if method != "__call__" else
                               f"{what} with {', '.join(kwargs)}= on x[mask]")
        out = ufunc(*(self._operand(x, what) for x in inputs))
        if isinstance(out, tuple):
            return tuple(MaskedSelection(o, self._key) for o in out)
        return MaskedSelection(out, self._key)

    def astype(self, dtype, **kw) -> MaskedSelection:
        return MaskedSelection(self._t.astype(dtype, **kw), self._key)

    def copy(self) -> MaskedSelection:
        return self

    _FUNCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "amax": "max",
                  "min": "min", "amin": "min", "any": "any", "all": "all"}

    def __array_function__(self, func, types, args, kwargs):
        name = self._FUNCTIONS.get(func.__name__)
        if name is None or not args or args[0] is not self:
            raise self._refuse(f"np.{func.__name__} of x[mask] (a selection whose number of "
                               f"elements depends on the values)")
        return getattr(self, name)(*args[1:], **kwargs)

    def full_value(self, target: Tracer) -> Tracer:
        """The whole-array value to store by ``target[mask] = self``
        (:func:`polyc.graph.setitem.setitem`): ``target``'s dimensions
        after the mask's must be as many as the selection's."""
        if target.ndim != self._t.ndim:
            raise self._refuse("x[mask] = y[mask] with different numbers of dimensions "
                               "after the mask's")
        return self._t

    def _value_dependent(self, what: str):
        raise self._refuse(f"{what} of x[mask] (its number of elements depends on the "
                           f"values)")

    @property
    def dtype(self) -> np.dtype:
        return self._t.dtype

    @property
    def ndim(self) -> int:
        return self._t.ndim - self._k + 1

    @property
    def shape(self):
        self._value_dependent("the shape")

    @property
    def size(self):
        self._value_dependent("the size")

    def __len__(self):
        self._value_dependent("len()")

    def __iter__(self):
        self._value_dependent("iterating")

    def __getitem__(self, key):
        self._value_dependent("indexing")

    def __setitem__(self, key, value):
        self._value_dependent("assigning into")

    def __array__(self, dtype=None, copy=None):
        self._value_dependent("converting (np.asarray)")

    def __bool__(self):
        self._value_dependent("bool()")

    def __float__(self):
        self._value_dependent("float()")

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._value_dependent(f"x[mask].{name}")
