"""``@polyc.jit``: trace a function of numpy arrays once per shape class,
plan its fusion groups, compile one kernel per group, and run them.

The *shape class* of a call is its arrays' dtypes, ranks and which extents
are 1 (numpy's broadcasting depends on those), plus the static arguments
(every non-array argument, and those named in ``static_argnames``).  A
traced plan also carries guards: the extents the trace found equal, and
those it specialised (:mod:`polyc.graph.sizes`); a call that meets a plan's
guards reuses it, any other call is traced again.  Arrays cross in and out
without copies: numpy arrays as they are, torch CPU tensors and any other
DLPack producer through ``np.from_dlpack`` (results go back to torch with
``torch.from_numpy`` when the inputs were torch tensors).
"""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..config import Config
from ..errors import BindingError
from . import numpy_api  # noqa: F401  (installs the tracer's numpy protocols)
from .core import Graph, Location, Node, Tracer
from .ops import check_dtype, materialize
from .plan import Plan, plan
from .sizes import Size

log = logging.getLogger(__name__)


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or (hasattr(x, "__dlpack__") and not isinstance(x, Tracer))


def _as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError) as e:
        raise BindingError(f"cannot read a {type(x).__name__} through DLPack: {e}") from None


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _flatten(value: Any, leaves: list) -> Any:
    if isinstance(value, (tuple, list)):
        return (type(value), [_flatten(v, leaves) for v in value])
    if isinstance(value, dict):
        return (dict, {k: _flatten(v, leaves) for k, v in value.items()})
    leaves.append(value)
    return len(leaves) - 1


def _unflatten(tree: Any, leaves: list) -> Any:
    if isinstance(tree, int):
        return leaves[tree]
    kind, items = tree
    if kind is dict:
        return {k: _unflatten(v, leaves) for k, v in items.items()}
    vals = [_unflatten(v, leaves) for v in items]
    return kind(vals) if kind in (list, tuple) else kind(*vals)


def trace(fn: Callable, *args: Any, static_argnames: Sequence[str] = (), **kwargs: Any) -> Graph:
    """The :class:`~polyc.graph.core.Graph` of ``fn`` called on ``args``
    (numpy arrays or DLPack producers; other arguments are static).  Raises
    :class:`~polyc.errors.TraceError` for value-dependent control flow,
    :class:`~polyc.errors.UnsupportedError` for a function polyc does not
    cover, :class:`~polyc.errors.ShapeError` for incompatible shapes."""
    graph = Graph(name=getattr(fn, "__name__", "graph").strip("<>") or "graph")
    if not graph.name.isidentifier():
        graph.name = "graph"
    loc = Location(getattr(getattr(fn, "__code__", None), "co_filename", "<fn>"),
                   getattr(getattr(fn, "__code__", None), "co_firstlineno", 0), "")
    pos = 0

    def bind(x: Any, name: str | None) -> Any:
        nonlocal pos
        if name in static_argnames or not _is_array(x):
            return x
        a = _as_numpy(x)
        d = check_dtype(a.dtype, f"argument {pos}")
        shape = tuple(Size.constant(graph.symbols, 1) if v == 1 else
                      Size.symbol(graph.symbols, graph.symbols.new(v, (pos, k)))
                      for k, v in enumerate(a.shape))
        node = graph.add("arg", "argument", shape, d, prefix="x", position=pos, location=loc)
        pos += 1
        return Tracer.of(node, graph)

    names = _param_names(fn, len(args))
    targs = [bind(a, n) for a, n in zip(args, names)]
    tkw = {k: bind(v, k) for k, v in kwargs.items()}
    result = fn(*targs, **tkw)
    leaves: list = []
    graph.treedef = _flatten(result, leaves)
    outs: list[Any] = []
    for leaf in leaves:
        if isinstance(leaf, Tracer):
            node = leaf.node
            if node is None or node.kind != "op" or leaf.dtype.kind == "b":
                node = materialize(graph, leaf).node
            outs.append(node)
        else:
            outs.append(leaf)
    graph.outputs = [o for o in outs if isinstance(o, Node)]
    graph.leaves = outs
    return graph


def _param_names(fn: Callable, n: int) -> list[str | None]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [None] * n
    names: list[str | None] = []
    for k in range(n):
        if k < len(params) and params[k].kind in (params[k].POSITIONAL_ONLY,
                                                  params[k].POSITIONAL_OR_KEYWORD):
            names.append(params[k].name)
        else:
            names.append(None)
    return names


@dataclass
class _Traced:
    graph: Graph
    plan: Plan
    guards: list


class Jitted:
    """A function compiled by :func:`jit`.  Calling it runs the compiled
    plan of the call's shape class; :meth:`explain` prints the plan;
    :meth:`graph` and :meth:`plan` return them."""

    def __init__(self, fn: Callable, static_argnames: Sequence[str] = (),
                 config: Config | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.config = config
        self._plans: dict[tuple, list[_Traced]] = {}

    def _key(self, args, kwargs) -> tuple:
        names = _param_names(self.fn, len(args))
        parts = []
        for a, n in list(zip(args, names)) + [(v, k) for k, v in sorted(kwargs.items())]:
            if n not in self.static_argnames and _is_array(a):
                x = _as_numpy(a)
                parts.append(("array", x.dtype.str, tuple(s == 1 for s in x.shape)))
            else:
                try:
                    hash(a)
                except TypeError:
                    raise BindingError(f"static argument {n or '?'} of type "
                                       f"{type(a).__name__} is not hashable") from None
                parts.append(("static", type(a).__name__, a))
        return (tuple(parts), tuple(sorted(kwargs)))

    def _shapes(self, args, kwargs) -> list[tuple[int, ...]]:
        names = _param_names(self.fn, len(args))
        out = []
        for a, n in list(zip(args, names)) + [(v, k) for k, v in kwargs.items()]:
            if n not in self.static_argnames and _is_array(a):
                out.append(tuple(_as_numpy(a).shape))
        return out

    def _traced(self, args, kwargs) -> _Traced:
        key = self._key(args, kwargs)
        shapes = self._shapes(args, kwargs)
        for t in self._plans.get(key, []):
            if _guards_hold(t.guards, shapes):
                return t
        graph = trace(self.fn, *args, static_argnames=self.static_argnames, **kwargs)
        p = plan(graph, self.config or Config.from_env())
        t = _Traced(graph, p, graph.symbols.guards())
        self._plans.setdefault(key, []).append(t)
        log.info("polyc.jit %s: traced %d ops into %d kernels", graph.name, len(graph.ops),
                 len(p.groups))
        return t

    def __call__(self, *args, **kwargs):
        t = self._traced(args, kwargs)
        t.plan.compile()
        names = _param_names(self.fn, len(args))
        arrays = {}
        pos = 0
        torch_out = False
        for a, n in list(zip(args, names)) + [(v, k) for k, v in kwargs.items()]:
            if n not in self.static_argnames and _is_array(a):
                torch_out = torch_out or _is_torch(a)
                arrays[f"x{_arg_node(t.graph, pos).id}"] = _as_numpy(a)
                pos += 1
        for n in t.graph.captured:
            arrays[n.name] = n.value
        sizes = t.graph.symbols.param_values(self._shapes(args, kwargs))
        for r in list(sizes):
            sizes[r] = sizes[r]
        env = t.plan.run(arrays, _all_sizes(t.graph, sizes))
        leaves = [(env[o.name].astype(bool) if o.as_bool else env[o.name])
                  if isinstance(o, Node) else o for o in t.graph.leaves]
        if torch_out:
            import torch
            leaves = [torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in leaves]
        return _unflatten(t.graph.treedef, leaves)

    def graph(self, *args, **kwargs) -> Graph:
        return self._traced(args, kwargs).graph

    def plan(self, *args, **kwargs) -> Plan:
        return self._traced(args, kwargs).plan

    def explain(self, *args, json: bool = False, **kwargs):
        """The plan for these arguments' shape class: text, or a dict with
        ``json=True`` (groups with their source lines, every fusion decision
        with the rule that decided it, specialised sizes)."""
        p = self._traced(args, kwargs).plan
        return p.to_dict() if json else p.explain()

    def __repr__(self) -> str:
        return f"<polyc.jit {getattr(self.fn, '__name__', '?')}>"


def _arg_node(graph: Graph, pos: int) -> Node:
    for n in graph.args:
        if n.position == pos:
            return n
    raise AssertionError(pos)


def _all_sizes(graph: Graph, vals: dict[int, int]) -> dict[int, int]:
    """Extents of every size class the kernels may take as an argument."""
    table = graph.symbols
    out = {}
    for s in range(len(table.values)):
        r = table.find(s)
        out[r] = vals.get(r, table.values[r])
    return out


def _guards_hold(guards, shapes) -> bool:
    for kind, a, b in guards:
        if kind == "ge":
            if sum(c * shapes[o[0]][o[1]] for c, o in a) + b < 0:
                return False
            continue
        va = shapes[a[0]][a[1]]
        if kind == "eq" and va != shapes[b[0]][b[1]]:
            return False
        if kind == "val" and va != b:
            return False
    return True


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] = (),
        config: Config | None = None):
    """Compile a function of numpy arrays (``@polyc.jit`` or
    ``@polyc.jit(static_argnames=("causal",))``).

    The function is traced once per shape class (see the module docstring)
    with :class:`~polyc.graph.core.Tracer` arguments, its numpy calls
    become a graph, the fusion planner (:mod:`polyc.graph.plan`) groups the
    operations, and each group compiles to one C kernel.  Returns exactly
    what the numpy function returns (values within polyc's tolerances,
    shapes, dtypes); inputs are never modified.  Raises
    :class:`~polyc.errors.TraceError`, :class:`~polyc.errors.UnsupportedError`,
    :class:`~polyc.errors.ShapeError` with the user's file and line."""
    if fn is None:
        return lambda f: Jitted(f, static_argnames, config)
    return Jitted(fn, static_argnames, config)
