"""``@polyc.jit``: trace a function of numpy arrays once per shape class,
plan its fusion groups, compile one kernel per group, and run them.

The *shape class* of a call is its arrays' dtypes, ranks and which extents
are 1 (numpy's broadcasting depends on those), plus the static arguments
(every non-array argument, and those named in ``static_argnames``), keyed
as :mod:`polyc.graph.jitcall` says: lists, tuples and dicts of arrays are
inputs, static floats are keyed by ``repr``, static arrays by contents.  A
traced plan also carries guards: the extents the trace found equal, and
those it specialised (:mod:`polyc.graph.sizes`), and the arrays (by
identity) and scalars (by value) it read from closure cells, globals and a
method's instance (:class:`~polyc.graph.jitcall.Watch`); a call that meets
a plan's guards reuses it, any other call is traced again.  Called with
tracers (inside another jitted function's trace) a jitted function runs its
Python body, so the outer trace is one graph.  On a class, a jitted
function is a method: the instance is static, keyed by identity, and its
plans are dropped with it.  Arrays cross in and out without copies: numpy
arrays as they are, torch CPU tensors and any other DLPack producer through
``np.from_dlpack`` (results go back to torch with ``torch.from_numpy`` when
the inputs were torch tensors).

The configuration is the ``config`` given to :func:`jit`, else
``Config.from_env()`` read when a shape class is first traced; the plan and
its kernels keep it (``Plan.config``).  The plans of a :class:`Jitted` are
therefore keyed by shape class alone: the planner's options
(``Config.plan``, ``peak_gflops``, ``peak_gbs``), which decide which groups
fuse but never the code of a group, and the code-generation options are
fixed for every plan it holds.  ``POLYC_*`` variables changed after a shape
class was traced do not re-plan it: build another ``polyc.jit(fn,
config=...)`` for that.  Each group's kernel is compiled through
:func:`polyc.pipeline.compile_programs`, whose lowering cache keys on
:meth:`Config.codegen_key`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..config import Config
from ..dlpack import as_numpy, to_torch
from ..errors import BindingError, PolycWarning, UnsupportedError
from . import numpy_api  # noqa: F401  (installs the tracer's numpy protocols)
from .core import Location, Node, Tracer
from .creating import tracing_creation
from .gather import check_indices
from .jitcall import InstancePlans, TracedArgument, Watch, bind_args, native, split_args
from .ops import check_dtype, mask_of, materialize
from .plan import Graph, Plan, plan
from .selection import MaskedSelection
from .sizes import Size, SizeInt

log = logging.getLogger(__name__)


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
    """The :class:`~polyc.graph.core.Graph` of ``fn`` called on ``args``:
    numpy arrays or DLPack producers, and lists, tuples and dicts of them
    (:func:`~polyc.graph.jitcall.bind_args`), are graph inputs; other
    values are static, as are the arguments named in ``static_argnames``
    (their arrays passed as read-only copies).  Raises
    :class:`~polyc.errors.TraceError` for value-dependent control flow,
    :class:`~polyc.errors.UnsupportedError` for a function polyc does not
    cover, :class:`~polyc.errors.ShapeError` for incompatible shapes."""
    graph = Graph(name=getattr(fn, "__name__", "graph").strip("<>") or "graph")
    if not graph.name.isidentifier():
        graph.name = "graph"
    loc = Location(getattr(getattr(fn, "__code__", None), "co_filename", "<fn>"),
                   getattr(getattr(fn, "__code__", None), "co_firstlineno", 0), "")
    pos = 0

    def bind(x: Any) -> Any:
        nonlocal pos
        a = native(as_numpy(x))
        d = check_dtype(a.dtype, f"argument {pos}")
        shape = tuple(Size.constant(graph.symbols, 1) if v == 1 else
                      Size.symbol(graph.symbols, graph.symbols.new(v, (pos, k)))
                      for k, v in enumerate(a.shape))
        mask = d.kind == "b"          # (a mask: int32 0/1 in the kernels, ops.mask_input)
        node = graph.add("arg", "argument", shape, np.int32 if mask else d, prefix="x",
                         position=pos, location=loc, as_bool=mask)
        pos += 1
        return mask_of(graph, node) if mask else Tracer.of(node, graph)

    names = _param_names(fn, len(args))
    targs = [bind_args(a, n in static_argnames, bind) for a, n in zip(args, names)]
    tkw = {k: bind_args(v, k in static_argnames, bind) for k, v in kwargs.items()}
    before = _global_rng_state()
    result = tracing_creation(fn, graph)(*targs, **tkw)
    if _global_rng_state() != before:
        warnings.warn_explicit(PolycWarning(
            f"{graph.name} drew from numpy's global random generator (np.random.rand, "
            f"np.random.normal, ...) while polyc traced it: the draws are constants of the "
            f"compiled plan, the same at every call, where numpy draws anew; pass random "
            f"arrays as arguments"), PolycWarning, loc.filename, loc.line)
    for _, _, where in graph.pending_stores.values():
        raise UnsupportedError(
            f"{where}: in-place operator on a view whose result went into a list, dict or "
            "attribute, not into the view's base: numpy would write through the view into "
            "the base array; write base[key] op= value on the array itself, or x = x op "
            f"value\n    {where.text}")
    leaves: list = []
    graph.treedef = _flatten(result, leaves)
    outs: list[Any] = []
    for leaf in leaves:
        if isinstance(leaf, MaskedSelection):
            raise UnsupportedError(
                f"{loc}: {graph.name} returns x[mask], a boolean selection: its number of "
                "elements depends on the values, which polyc does not know while tracing; "
                "return np.where(mask, x, fill) (or x and the mask), or reduce it "
                "(x[mask].sum())")
        if isinstance(leaf, Tracer):
            node = leaf.node
            base = leaf._reshape_base
            if node is None and base is not None and base.node is not None and \
                    base.node.kind == "op" and leaf.dtype.kind != "b":
                # a reshape of an operation's result: that result, reshaped
                # when returned (no copy, as numpy returns a view)
                shape = [_extent_of(s, graph) for s in leaf._shape]
                if None not in shape:
                    outs.append(Reshaped(base.node, shape))
                    continue
            if node is None or node.kind != "op" or leaf.dtype.kind == "b":
                node = materialize(graph, leaf).node
            outs.append(node)
        elif isinstance(leaf, SizeInt):
            # a returned extent (x.shape, x.size): evaluated at each call
            extent = _extent_of(leaf.size, graph)
            outs.append(Extent(extent) if extent is not None else int(leaf))
        else:
            outs.append(leaf)
    graph.outputs = list(dict.fromkeys(o.node if isinstance(o, Reshaped) else o for o in outs
                                       if isinstance(o, (Node, Reshaped))))
    graph.leaves = outs
    _drop_dead(graph)
    return graph


def _global_rng_state() -> tuple:
    """numpy's legacy global random state, comparable (a draw moves it)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return name, keys.tobytes(), pos, has_gauss, gauss


def _drop_dead(graph: Graph) -> None:
    """Remove the operations no output reads, directly or through others
    (a ``zeros_like`` whose ``.shape`` alone was used, an unused
    intermediate): they would run for nothing, and a group of them has no
    output at all."""
    live: set[int] = set()
    todo = list(graph.outputs)
    while todo:
        n = todo.pop()
        if n.id not in live:
            live.add(n.id)
            todo.extend(n.inputs)
    dead = [n for n in graph.nodes if n.kind == "op" and n.id not in live]
    if dead:
        log.debug("polyc.jit %s: dropped unused operations %s", graph.name,
                  ", ".join(n.name for n in dead))
        graph.nodes = [n for n in graph.nodes if n.kind != "op" or n.id in live]
        graph._consumers = None


@dataclass
class Extent:
    """A returned extent: a constant plus argument extents (as
    :func:`_extent_of` gives it), a Python int at each call."""
    form: tuple[int, list[tuple[int, int, int]]]

    def value(self, env: dict, arrays: list[np.ndarray]) -> int:
        return self.form[0] + sum(c * arrays[p].shape[d] for c, p, d in self.form[1])


@dataclass
class Reshaped:
    """A returned reshape view of ``node``: ``shape`` per dimension as
    ``(constant, [(coefficient, argument position, dimension), ...])``."""
    node: Node
    shape: list[tuple[int, list[tuple[int, int, int]]]]

    def value(self, env: dict, arrays: list[np.ndarray]) -> np.ndarray:
        return env[self.node.name].reshape(tuple(
            c + sum(k * arrays[p].shape[d] for k, p, d in terms) for c, terms in self.shape))


def _extent_of(size: Size, graph: Graph) -> tuple[int, list[tuple[int, int, int]]] | None:
    """``size`` as a constant plus argument extents (each symbol bound by an
    argument dimension of its class), or None where a symbol has none."""
    table = graph.symbols
    n = size.normal()
    terms = []
    for s, c in n.terms:
        org = next((o for q, o in enumerate(table.origin)
                    if o is not None and table.find(q) == s), None)
        if org is None:
            return None
        terms.append((c, org[0], org[1]))
    return n.const, terms


def _extent_now(size: Size, graph: Graph, arrays: list[np.ndarray]) -> int:
    """``size`` at a call with these argument arrays (its traced value where
    no argument binds it: a constant)."""
    e = _extent_of(size, graph)
    if e is None:
        return size.value
    return e[0] + sum(c * arrays[p].shape[d] for c, p, d in e[1])


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


@dataclass(eq=False)
class _Traced:
    graph: Graph
    plan: Plan
    guards: list
    arg_names: list[str]
    captured: list[tuple[str, np.ndarray]]
    #: size classes some kernel takes as an argument -> (array, dim) binding it
    size_args: dict[int, tuple[int, int]]
    #: the closure cells, globals and attributes the trace read (None: none)
    watch: Watch | None = None


#: the most plans one shape class keeps (plans that differ in specialised
#: sizes or in the scalars they read from globals); the oldest goes first
MAX_PLANS_PER_CLASS = 32

_UNBOUND = object()


class Jitted:
    """A function compiled by :func:`jit`.  Calling it runs the compiled
    plan of the call's shape class; :meth:`explain` prints the plan;
    :meth:`graph` and :meth:`plan` return them.  Called with tracers (from
    inside another jitted function's trace) it runs the Python function,
    so the caller's trace records its operations inline.  As a class
    attribute it is a method (:meth:`__get__`): the instance is a static
    argument keyed by identity, with a plan table of its own."""

    def __init__(self, fn: Callable, static_argnames: Sequence[str] = (),
                 config: Config | None = None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.static_argnames = tuple(static_argnames)
        self.config = config
        self._plans: dict[tuple, list[_Traced]] = {}
        self._instances = InstancePlans()
        self._names = _param_names(fn, 64)
        self._method_names = self._names[1:]

    def __get__(self, inst: Any, owner: type | None = None) -> Any:
        return self if inst is None else _Bound(self, inst)

    def _traced(self, args, kwargs, inst: Any = _UNBOUND
                ) -> tuple[_Traced, list[np.ndarray], bool]:
        names = self._names if inst is _UNBOUND else self._method_names
        if len(args) > len(names):
            names = _param_names(self.fn, len(args) + (inst is not _UNBOUND))
            names = names if inst is _UNBOUND else names[1:]
        key, arrays, torch_in = split_args(args, kwargs, names, self.static_argnames)
        table = self._plans if inst is _UNBOUND else self._instances.table(inst)
        t = _lookup(table.get(key), arrays, inst)
        if t is not None:
            return t, arrays, torch_in
        fn = self.fn if inst is _UNBOUND else types.MethodType(self.fn, inst)
        watch = Watch(self.fn, None if inst is _UNBOUND else inst)
        kw = dict(sorted(kwargs.items()))
        graph = trace(fn, *args, static_argnames=self.static_argnames, **kw)
        p = plan(graph, self.config or Config.from_env())
        t = _Traced(graph, p, graph.symbols.guards(), [n.name for n in graph.args],
                    [(n.name, n.value) for n in graph.captured], _size_args(graph, p),
                    watch if watch.entries else None)
        traced = table.setdefault(key, [])
        traced.append(t)
        del traced[:-MAX_PLANS_PER_CLASS]
        log.info("polyc.jit %s: traced %d ops into %d kernels", graph.name, len(graph.ops),
                 len(p.groups))
        return t, arrays, torch_in

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, _UNBOUND)

    def _call(self, args, kwargs, inst):
        try:
            t, arrays, torch_out = self._traced(args, kwargs, inst)
        except TracedArgument:         # called while another function traces
            return self.fn(*args, **kwargs) if inst is _UNBOUND else \
                self.fn(inst, *args, **kwargs)
        env = dict(zip(t.arg_names, arrays))
        env.update(t.captured)
        if t.graph.index_checks:
            check_indices(t.graph.index_checks, env,
                          lambda s: _extent_now(s, t.graph, arrays))
        sizes = {r: arrays[p].shape[d] for r, (p, d) in t.size_args.items()}
        env = t.plan.compile().run(env, sizes, reuse=True)
        leaves = [(env[o.name].astype(bool) if o.as_bool else env[o.name])
                  if isinstance(o, Node) else o.value(env, arrays)
                  if isinstance(o, (Reshaped, Extent)) else o for o in t.graph.leaves]
        if torch_out:
            leaves = to_torch(leaves)
        else:               # numpy's reductions to one element return scalars
            leaves = [x[()] if type(x) is np.ndarray and x.ndim == 0 else x for x in leaves]
        if t.graph.treedef == 0:
            return leaves[0]
        return _unflatten(t.graph.treedef, leaves)

    def _for(self, args, kwargs, inst) -> _Traced:
        try:
            return self._traced(args, kwargs, inst)[0]
        except TracedArgument:
            raise BindingError(f"{self!r}: graph/plan/explain/use_plan take numpy arrays, "
                               "not traced arrays") from None

    def graph(self, *args, _inst: Any = _UNBOUND, **kwargs) -> Graph:
        return self._for(args, kwargs, _inst).graph

    def plan(self, *args, _inst: Any = _UNBOUND, **kwargs) -> Plan:
        return self._for(args, kwargs, _inst).plan

    def use_plan(self, new_plan, *args, _inst: Any = _UNBOUND, **kwargs) -> Plan:
        """Run this shape class with ``new_plan``: a :class:`Plan` made from
        this function's plan (``jitted.plan(*args).edit(...)``) or plan JSON
        (:meth:`Plan.to_json`, possibly edited), checked by
        :func:`polyc.graph.plan.from_dict`.  Returns the plan in use."""
        from ..errors import ScheduleError
        from .plan import from_dict
        t = self._for(args, kwargs, _inst)
        if not isinstance(new_plan, Plan):
            new_plan = from_dict(t.graph, new_plan, self.config)
        elif new_plan.graph is not t.graph:
            raise ScheduleError("use_plan: the plan was made for another trace; edit "
                                "jitted.plan(*args) of these arguments")
        t.plan = new_plan
        t.size_args = _size_args(t.graph, new_plan)
        return new_plan

    def explain(self, *args, json: bool = False, _inst: Any = _UNBOUND, **kwargs):
        """The plan for these arguments' shape class: text, or a dict with
        ``json=True`` (groups with their source lines, every fusion decision
        with the rule that decided it, specialised sizes)."""
        p = self._for(args, kwargs, _inst).plan
        return p.to_dict() if json else p.explain()

    def __repr__(self) -> str:
        return f"<polyc.jit {getattr(self.fn, '__name__', '?')}>"


class _Bound:
    """A jitted method bound to an instance (``obj.fwd``): calls, plans and
    explanations of ``Jitted`` with the instance as its first argument."""

    __slots__ = ("jitted", "inst")

    def __init__(self, jitted: Jitted, inst: Any) -> None:
        self.jitted, self.inst = jitted, inst

    def __call__(self, *args, **kwargs):
        return self.jitted._call(args, kwargs, self.inst)

    def graph(self, *args, **kwargs) -> Graph:
        return self.jitted.graph(*args, _inst=self.inst, **kwargs)

    def plan(self, *args, **kwargs) -> Plan:
        return self.jitted.plan(*args, _inst=self.inst, **kwargs)

    def use_plan(self, new_plan, *args, **kwargs) -> Plan:
        return self.jitted.use_plan(new_plan, *args, _inst=self.inst, **kwargs)

    def explain(self, *args, json: bool = False, **kwargs):
        return self.jitted.explain(*args, json=json, _inst=self.inst, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jitted, name)

    def __repr__(self) -> str:
        return f"<bound polyc.jit {getattr(self.jitted.fn, '__qualname__', '?')} of " \
               f"{type(self.inst).__name__} object>"


def _lookup(traced: list[_Traced] | None, arrays: list[np.ndarray], inst: Any
            ) -> _Traced | None:
    """The first plan of a shape class whose size guards hold for these
    arrays and whose watched names still hold what its trace read; plans
    whose watched arrays were rebound are dropped (they hold the old ones)."""
    if not traced:
        return None
    found = None
    dead = []
    for t in traced:
        if t.guards and not _guards_hold(t.guards, arrays):
            continue
        if t.watch is not None:
            stale = t.watch.stale(inst)
            if stale:
                if stale == 2:
                    dead.append(t)
                continue
        found = t
        break
    for d in dead:
        if d in traced:            # (another thread may have dropped it)
            traced.remove(d)
    return found


def _size_args(graph: Graph, p: Plan) -> dict[int, tuple[int, int]]:
    """The size classes the plan's kernels take as ``int64`` arguments, each
    with an argument dimension that binds it."""
    table = graph.symbols
    need = {r for src in p.sources for r in src.size_args}
    out: dict[int, tuple[int, int]] = {}
    for s, org in enumerate(table.origin):
        r = table.find(s)
        if r in need and org is not None:
            out.setdefault(r, org)
    missing = need - out.keys()
    assert not missing, f"size classes {missing} bound by no argument"
    return out


def _guards_hold(guards, arrays) -> bool:
    for kind, a, b in guards:
        if kind == "ge":
            if sum(c * arrays[o[0]].shape[o[1]] for c, o in a) + b < 0:
                return False
            continue
        va = arrays[a[0]].shape[a[1]]
        if kind == "eq" and va != arrays[b[0]].shape[b[1]]:
            return False
        if kind == "val" and va != b:
            return False
    return True


def jit(fn: Callable | None = None, *, static_argnames: Sequence[str] = (),
        config: Config | None = None, target: str | None = None):
    """Compile a function of numpy arrays (``@polyc.jit``,
    ``@polyc.jit(static_argnames=("causal",))`` or ``@polyc.jit(target="cuda")``:
    ``target`` overrides ``config.target``, as for ``@polyc.kernel``).

    The function is traced once per shape class (see the module docstring)
    with :class:`~polyc.graph.core.Tracer` arguments, its numpy calls
    become a graph, the fusion planner (:mod:`polyc.graph.plan`) groups the
    operations, and each group compiles to one C kernel.  Returns exactly
    what the numpy function returns (values within polyc's tolerances,
    shapes, dtypes); inputs are never modified.  Raises
    :class:`~polyc.errors.TraceError`, :class:`~polyc.errors.UnsupportedError`,
    :class:`~polyc.errors.ShapeError` with the user's file and line."""
    if target is not None:
        config = (config or Config.from_env()).replace(target=target)
    if fn is None:
        return lambda f: Jitted(f, static_argnames, config)
    return Jitted(fn, static_argnames, config)
