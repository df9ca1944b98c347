"""numpy's creation functions without ``like=`` inside a traced function.

``out = np.empty((n, m), dtype=x.dtype)`` followed by ``out[i] = ...``
(an output buffer filled row by row, as NPBench's and most hand-written
numpy kernels do) makes a numpy array, which cannot hold traced values:
numpy's ``empty`` never sees a traced argument, so NEP 18/35 dispatch
cannot hand the call to polyc.  :func:`tracing_creation` therefore calls
the traced function with a copy of its globals in which ``np`` (any global
bound to the ``numpy`` module) is a proxy whose ``empty``, ``zeros``,
``ones`` and ``full`` make traced arrays (:mod:`polyc.graph.creation`,
as with ``like=``), and globals bound to those functions themselves
(``from numpy import zeros``) are replaced the same way.  Everything else
of numpy is numpy's own.  Sizes stay symbolic (``np.empty(x.shape)``
serves every shape class, where numpy's own ``empty`` would read them).

Functions of the same module that the traced function names (a helper
that makes its own buffer), and the ones they name, are called with the
same copy.  What this does not reach, and keeps numpy's behaviour for (the
:class:`~polyc.errors.TraceError` that names the ``like=`` spelling when a
traced value is stored into such an array): functions of other modules,
functions reached other than by a global name (a closure, a method, a
function passed in), a function that assigns globals (``global n``: the
copy would lose the writes), and ``numpy.empty`` reached through another
module than ``numpy`` itself.
``np.empty``'s elements are zeros (numpy leaves them undefined).
"""

from __future__ import annotations

import dis
import functools
import types
from typing import Any, Callable

import numpy as np

from . import creation

#: the creation functions made traced
NAMES = ("empty", "zeros", "ones", "full")

_IMPLS = creation.functions()


def _codes(code: types.CodeType):
    """``code`` and the code objects nested in it (lambdas, comprehensions,
    inner functions)."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _writes_globals(code: types.CodeType) -> bool:
    return any(ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")
               for c in _codes(code) for ins in dis.get_instructions(c))


def _traced(name: str, graph) -> Callable:
    real = getattr(np, name)
    impl = _IMPLS[name]

    @functools.wraps(real)
    def run(*args: Any, like: Any = None, **kwargs: Any) -> Any:
        if like is not None:
            return real(*args, like=like, **kwargs)
        return impl(graph, *args, **kwargs)
    return run


class _Numpy(types.ModuleType):
    """The ``numpy`` module as the traced function sees it: its own
    attributes, except :data:`NAMES`."""

    def __init__(self, graph) -> None:
        super().__init__("numpy", np.__doc__)
        for name in NAMES:
            setattr(self, name, _traced(name, graph))

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    def __dir__(self):
        return dir(np)


def _rebound(f: types.FunctionType, globs: dict) -> types.FunctionType:
    new = types.FunctionType(f.__code__, globs, f.__name__, f.__defaults__, f.__closure__)
    new.__kwdefaults__ = f.__kwdefaults__
    new.__qualname__ = f.__qualname__
    return new


def tracing_creation(fn: Callable, graph) -> Callable:
    """``fn`` (a function or a bound method) reading numpy's creation
    functions as traced ones (the module docstring), or ``fn`` itself when
    it names none of them or cannot be given other globals.  Functions of
    the same module that it names (a helper that makes its own buffer), and
    theirs, read the same copy of the globals."""
    bound = fn.__self__ if isinstance(fn, types.MethodType) else None
    f = fn.__func__ if bound is not None else fn
    if not isinstance(f, types.FunctionType) or _writes_globals(f.__code__):
        return fn
    g = f.__globals__
    real = {id(getattr(np, n)): n for n in NAMES}
    proxy: list[_Numpy] = []
    repl: dict[str, Any] = {}
    helpers: dict[str, types.FunctionType] = {}
    todo, seen = [f.__code__], set()
    while todo:
        code = todo.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        for c in _codes(code):
            for name in c.co_names:
                if name in repl or name in helpers or name not in g:
                    continue
                v = g[name]
                if v is np:
                    if not proxy:
                        proxy.append(_Numpy(graph))
                    repl[name] = proxy[0]
                elif id(v) in real and v is getattr(np, real[id(v)]):
                    repl[name] = _traced(real[id(v)], graph)
                elif isinstance(v, types.FunctionType) and v.__globals__ is g and \
                        not _writes_globals(v.__code__):
                    helpers[name] = v
                    todo.append(v.__code__)
    if not repl:
        return fn
    globs = {**g, **repl}
    globs.update({name: _rebound(h, globs) for name, h in helpers.items()})
    new = _rebound(f, globs)
    return types.MethodType(new, bound) if bound is not None else new
