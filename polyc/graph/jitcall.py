"""What a call of a ``@polyc.jit`` function is keyed and guarded by
(used by :mod:`polyc.graph.jit`; takes the call's Python arguments, returns
keys, argument arrays and :class:`Watch` records).

- :func:`split_args`: the *shape-class key* of a call and its input arrays
  in order.  Arguments are pytrees: a list, tuple (named tuples included)
  or dict is flattened, its array leaves are graph inputs and every other
  leaf is static.  Static leaves are keyed by :func:`static_key`: floats
  by ``repr`` (``-0.0`` is not ``0.0``; a NaN equals a NaN), arrays by
  their dtype, shape and bytes.
- :func:`bind_args`: the same walk at trace time, replacing the input
  leaves with tracers, in the same order.
- :class:`Watch`: the closure cells, globals and instance attributes that
  held arrays and scalars when the function was traced, checked at each
  call (:meth:`Watch.stale`): a rebound array or a changed scalar makes the
  plan stale, so the call traces again.  In-place changes to an array keep
  its identity and are read by the next call (the plan feeds that object).
- :class:`InstancePlans`: the plans of a jitted method, one table per
  instance, keyed by identity and dropped with the instance.
"""

from __future__ import annotations

import dis
import types
import weakref
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ..dlpack import as_numpy, is_foreign, is_torch
from ..errors import BindingError
from .core import Tracer

#: Python and numpy scalar types whose value a trace may bake in as a literal
_SCALARS = (bool, int, float, complex, np.generic)


def is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or (is_foreign(x) and not isinstance(x, Tracer))


def native(a: np.ndarray) -> np.ndarray:
    """``a``, or a copy in the machine's byte order when it is stored
    byte-swapped (a big-endian file read on a little-endian machine), as
    numpy computes with either."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def _is_container(x: Any) -> bool:
    t = type(x)
    return t is list or t is tuple or t is dict or (isinstance(x, tuple) and hasattr(t, "_fields"))


class TracedArgument(Exception):
    """Internal: a tracer among the arguments (a jitted function called while
    another one traces); the caller runs the Python function inline."""


def static_key(a: Any, name: str | None) -> Any:
    """The cache key of a static value: ``(type, repr)`` for floats and
    complex numbers (``0.0`` and ``-0.0`` differ, NaNs are equal), the
    dtype, shape and bytes of an array, ``(type, value)`` otherwise.
    Raises :class:`BindingError` for a value that is neither."""
    t = type(a)
    if t is float or t is complex or isinstance(a, (np.floating, np.complexfloating)):
        return (t, repr(a))
    if is_array(a):
        arr = np.asarray(as_numpy(a))
        if arr.dtype.hasobject:
            raise BindingError(f"static argument {name or '?'}: an array of Python objects "
                               "cannot be a static argument")
        return ("array", arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(a, Tracer):
        raise TracedArgument
    try:
        hash(a)
    except TypeError:
        raise BindingError(
            f"argument {name or '?'} of type {t.__name__} is neither an array nor hashable: "
            "polyc.jit takes arrays, lists/tuples/dicts of arrays, and hashable static "
            "values (numbers, strings, tuples); pass the arrays themselves, or make the "
            "object hashable") from None
    return (t, a)


def split_args(args: tuple, kwargs: dict, names: list, static_argnames: tuple
               ) -> tuple[tuple, list[np.ndarray], bool]:
    """One pass over a call's arguments: the shape-class key, the input
    arrays in order (pytrees flattened depth first, kwargs by name), and
    whether any was a torch tensor.  Raises :class:`TracedArgument` when an
    argument holds a tracer."""
    parts: list = []
    arrays: list[np.ndarray] = []
    flags = [False]
    items = list(zip(args, names))
    if kwargs:
        items += sorted(((v, k) for k, v in kwargs.items()), key=lambda t: t[1])
    for a, n in items:
        if type(a) is np.ndarray and n not in static_argnames:
            a = native(a)
            arrays.append(a)
            parts.append((a.dtype.str, a.ndim, 1 in a.shape and tuple(s == 1 for s in a.shape)))
        else:
            parts.append(_key(a, n, n in static_argnames, arrays, flags))
    return (tuple(parts), tuple(sorted(kwargs))), arrays, flags[0]


def _key(a: Any, name: str | None, static: bool, arrays: list, flags: list) -> Any:
    if not static and is_array(a):
        if type(a) is not np.ndarray:
            flags[0] = flags[0] or is_torch(a)
            a = as_numpy(a)
        a = native(a)
        arrays.append(a)
        return (a.dtype.str, a.ndim, 1 in a.shape and tuple(s == 1 for s in a.shape))
    if _is_container(a):
        if type(a) is dict:
            return (dict, tuple(a), tuple(_key(v, name, static, arrays, flags)
                                          for v in a.values()))
        return (type(a), tuple(_key(v, name, static, arrays, flags) for v in a))
    return static_key(a, name)


def bind_args(value: Any, static: bool, bind: Callable[[Any], Any]) -> Any:
    """``value`` with its input leaves replaced by ``bind(leaf)`` (the walk of
    :func:`split_args`, so the leaves come in the same order); the arrays
    of a static value are replaced by read-only copies, so the plan's
    captured arrays keep the contents its key names."""
    if _is_container(value):
        if type(value) is dict:
            return {k: bind_args(v, static, bind) for k, v in value.items()}
        vals = [bind_args(v, static, bind) for v in value]
        return vals if type(value) is list else \
            type(value)(*vals) if hasattr(type(value), "_fields") else tuple(vals)
    if static:
        if is_array(value):
            copy = np.array(as_numpy(value), copy=True)
            copy.setflags(write=False)
            return copy
        return value
    return bind(value) if is_array(value) else value


# -- guards on the values a trace read from outside its arguments -----------------
_MISSING = object()
_ARRAY, _SCALAR, _ZERO_D = 0, 1, 2


def _code_names(code: types.CodeType, out: tuple[set[str], set[str]]
                ) -> tuple[set[str], set[str]]:
    """The global names and the attribute names that ``code`` and its nested
    code objects (inner functions, lambdas, comprehensions) load."""
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            out[0].add(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            out[1].add(ins.argval)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)
    return out


def _watched(value: Any) -> tuple[int, Any] | None:
    """How a value is guarded: arrays by identity, scalars by
    :func:`static_key`, 0-d arrays (traced as literals) by their bytes."""
    if type(value) is np.ndarray:
        if value.ndim == 0:
            return _ZERO_D, (value.dtype.str, value.tobytes())
        return _ARRAY, None
    if isinstance(value, _SCALARS):
        return _SCALAR, static_key(value, None)
    return None


class Watch:
    """The values a trace read from outside its arguments, as they were when
    it traced: closure cells and globals named by the function's code (and
    by the code of functions and jitted functions of the same module that
    it names, two levels deep), and the instance attributes a method's
    code names.  Only arrays and scalars are watched; containers (a dict of
    weights) and attributes of other objects are not."""

    __slots__ = ("entries",)

    #: how deep called functions are followed (a helper of a helper)
    DEPTH = 2

    def __init__(self, fn: Callable, inst: Any = None) -> None:
        #: (kind, container, name, value seen, its key); container is a
        #: cell, a globals dict, or None for an attribute of the instance
        self.entries: list[tuple] = []
        fn = getattr(fn, "__func__", fn)
        attrs: set[str] = set()
        seen: set[int] = set()
        module = getattr(fn, "__globals__", None)
        self._function(fn, module, 0, seen, attrs)
        if inst is None:
            return
        # the methods of the instance's class that the code names
        # (``self.block(x)``) read its attributes too
        done: set[str] = set()
        while attrs - done:
            name = min(attrs - done)
            done.add(name)
            method = next((k.__dict__[name] for k in type(inst).__mro__
                           if name in k.__dict__), None)
            self._follow(method, module, 1, seen, attrs)
        d = getattr(inst, "__dict__", None)
        if d is not None:
            for name in sorted(attrs & d.keys()):
                self._add(None, name, d[name])

    def _function(self, fn: Any, module: dict | None, depth: int, seen: set[int],
                  attrs: set[str]) -> None:
        """Watches the cells and globals ``fn`` reads, follows the functions
        of ``module`` among them, and collects the attribute names loaded."""
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType) or id(fn) in seen:
            return
        seen.add(id(fn))
        names, loaded = _code_names(code, (set(), set()))
        attrs |= loaded
        found = []
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                found.append((cell, name, cell.cell_contents))
            except ValueError:          # a cell not bound yet
                continue
        g = getattr(fn, "__globals__", None)
        if g is not None:
            found += [(g, name, g[name]) for name in sorted(names) if name in g]
        for container, name, value in found:
            self._add(container, name, value)
            if depth < self.DEPTH:
                self._follow(value, module, depth + 1, seen, attrs)

    def _follow(self, value: Any, module: dict | None, depth: int, seen: set[int],
                attrs: set[str]) -> None:
        """Watches what ``value`` reads when it is a function or a jitted
        function (plain or a method) defined in ``module``."""
        # a jitted function wraps its Python function (functools.update_wrapper)
        target = getattr(value, "__wrapped__", value) if callable(value) else value
        if isinstance(target, types.FunctionType) and module is not None and \
                target.__globals__ is module:
            self._function(target, module, depth, seen, attrs)

    def _add(self, container: Any, name: str, value: Any) -> None:
        how = _watched(value)
        if how is not None:
            self.entries.append((how[0], container, name, value, how[1]))

    def stale(self, inst: Any) -> int:
        """0 when every watched name still holds what the trace saw; 1 when a
        scalar changed (the plan may hold again later); 2 when an array was
        rebound (the plan holds the old array and can be dropped)."""
        worst = 0
        d = None
        for kind, container, name, value, key in self.entries:
            if container is None:
                if d is None:
                    d = getattr(inst, "__dict__", {})
                now = d.get(name, _MISSING)
            elif type(container) is dict:
                now = container.get(name, _MISSING)
            else:
                try:
                    now = container.cell_contents
                except ValueError:
                    now = _MISSING
            if now is value and kind != _ZERO_D:
                continue
            if kind == _ARRAY:
                return 2
            how = _watched(now)
            if how is None or how[0] != kind or how[1] != key:
                worst = 1
        return worst

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __repr__(self) -> str:
        return "<Watch " + ", ".join(e[2] for e in self.entries) + ">"


# -- per-instance plans of a jitted method ----------------------------------------
class InstancePlans:
    """The plan tables of a jitted method, one per instance, keyed by the
    instance's identity.  A table lives as long as its instance (a weak
    reference drops it); an instance that takes no weak reference is held
    strongly, and only the ``strong_limit`` most recently used are kept."""

    def __init__(self, strong_limit: int = 8) -> None:
        self._weak: dict[int, tuple[weakref.ref, dict]] = {}
        self._strong: OrderedDict[int, tuple[Any, dict]] = OrderedDict()
        self.strong_limit = strong_limit

    def table(self, inst: Any) -> dict:
        k = id(inst)
        entry = self._weak.get(k)
        if entry is not None and entry[0]() is inst:
            return entry[1]
        strong = self._strong.get(k)
        if strong is not None and strong[0] is inst:
            self._strong.move_to_end(k)
            return strong[1]
        plans: dict = {}
        try:
            ref = weakref.ref(inst, _forget(self._weak, k))
        except TypeError:
            self._strong[k] = (inst, plans)
            while len(self._strong) > self.strong_limit:
                self._strong.popitem(last=False)
            return plans
        self._weak[k] = (ref, plans)
        return plans

    def __len__(self) -> int:
        return len(self._weak) + len(self._strong)


def _forget(table: dict, k: int) -> Callable:
    def drop(ref: weakref.ref) -> None:
        entry = table.get(k)
        if entry is not None and entry[0] is ref:
            del table[k]
    return drop
