"""The graph of a trace: :class:`Node` (one operation, its TC statements),
:class:`Graph` (the nodes in program order, the size symbols; the traced
graph users get is :class:`polyc.graph.plan.Graph`, which adds
``explain``) and
:class:`Tracer` (the lazy array the user's code manipulates).

A node's computation is TC text (``../shared/TC-LANGUAGE.md``) over tensor
names that polyc chose (``x0`` arguments, ``w0`` captured arrays, ``t5``
results), with every index variable's range given by a ``where`` clause and
size tokens ``$k`` (symbol ``k`` of the :class:`~polyc.graph.sizes.SymbolTable`)
that are resolved only when a fusion group is printed, after the whole trace
has united or specialised sizes.  No user text ever reaches that TC.

A tracer is a *read template* over nodes: the TC expression that reads one
element at view coordinates ``{0}, {1}, ...`` (``t3({1}, 2*({0}) + 1)`` for a
strided transpose), so views (slices, transposes, affine reshapes, window
views) cost nothing: they are folded into the consumer's access relations.
Comparisons are templates too (``(x0({0}) > 0.0)``), inlined where ``where``
uses them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dis
import functools
import linecache
import os
import re
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import DTypeError, ShapeError, TraceError, UnsupportedError
from .sizes import Size, SizeInt, SymbolTable

#: dtypes a traced value may have (polyc's element types) and bool masks
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
_DTYPES = ("float32", "float64", "float16", "bfloat16") + _INTS
_TC_TYPE = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
            **{t: t for t in _INTS}}


def tc_type(dtype: np.dtype) -> str:
    return _TC_TYPE[np.dtype(dtype).name]


@dataclass(frozen=True)
class Location:
    """Where in the user's code an operation was called."""
    filename: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}"


_HERE = os.path.dirname(os.path.abspath(__file__))
_SIZE_TOKEN = re.compile(r"\$(\d+)")
_NUMPY = os.path.dirname(np.__file__)


#: where the operation being traced was written, when the caller knows better
#: than the stack (the model line of an ATen node: polyc.graph.torch_backend)
_LOCATION: contextvars.ContextVar[Location | None] = contextvars.ContextVar(
    "polyc_graph_location", default=None)


@contextlib.contextmanager
def located(loc: Location | None):
    """Within the block, :func:`user_location` is ``loc`` (if not None)."""
    token = _LOCATION.set(loc)
    try:
        yield
    finally:
        _LOCATION.reset(token)


def user_location() -> Location:
    """The innermost stack frame outside polyc.graph and numpy (or the
    location set by :func:`located`)."""
    if (loc := _LOCATION.get()) is not None:
        return loc
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not (fn.startswith(_HERE) or fn.startswith(_NUMPY) or "<__array_function__" in fn):
            line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
            return Location(f.f_code.co_filename, f.f_lineno, line)
        f = f.f_back
    return Location("<unknown>", 0, "")


def int_in_range(value: Any, dtype: np.dtype) -> int:
    """``int(value)``, a literal of integer type ``dtype`` (or of another
    kind: returned as it is).  A value outside ``dtype``'s range is a
    :class:`~polyc.errors.DTypeError` at the user's line: numpy raises
    ``OverflowError`` for a Python int that an integer array's type cannot
    hold (``x + 2**31`` of int32)."""
    v = int(value)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            loc = user_location()
            raise DTypeError(f"{loc}: Python integer {v} out of bounds for {np.dtype(dtype)} "
                             f"(numpy raises OverflowError): convert the array first, e.g. "
                             f"x.astype(np.int64)\n    {loc.text}")
    return v


def _user_opname(back: int = 0) -> str | None:
    """The instruction the innermost frame outside polyc.graph and numpy is
    running (``BINARY_SUBSCR`` for ``table[ids]``), or the one ``back``
    instructions before it, or None."""
    ins = user_instruction(-back)
    return ins.opname if ins is not None else None


def user_instruction(delta: int = 0) -> dis.Instruction | None:
    """The instruction ``delta`` places after the one the innermost frame
    outside polyc.graph and numpy is running, or None."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not (fn.startswith(_HERE) or fn.startswith(_NUMPY) or "<__array_function__" in fn):
            try:
                where, ins = _instructions(f.f_code)
                k = where[f.f_lasti] + delta
                return ins[k] if 0 <= k < len(ins) else None
            except Exception:       # an unreadable code object
                return None
        f = f.f_back
    return None


def augmented_subscript_read() -> bool:
    """Whether the user's code is reading ``base[key]`` for Python's
    ``base[key] op= value`` (``COPY 2; COPY 2; BINARY_SUBSCR``), whose
    result the in-place operator updates and assigns back to ``base[key]``."""
    return _user_opname() == "BINARY_SUBSCR" and _user_opname(1) == _user_opname(2) == "COPY"


_STACK_SHUFFLES = frozenset({"SWAP", "COPY", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N",
                             "EXTENDED_ARG", "CACHE", "NOP"})


@functools.lru_cache(maxsize=512)
def _instructions(code) -> tuple[dict[int, int], list[dis.Instruction]]:
    """``code``'s instructions, and each one's position in that list by offset."""
    ins = list(dis.get_instructions(code))
    return {i.offset: k for k, i in enumerate(ins)}, ins


def subscript_store_follows(frame) -> bool:
    """Whether the instruction ``frame`` runs (an in-place operator) is
    followed, past stack shuffles, by a subscript store: Python's
    ``base[key] op= value`` (``STORE_SUBSCR``, or ``STORE_SLICE`` for a
    literal slice), which assigns the operator's result to ``base[key]``."""
    try:
        where, ins = _instructions(frame.f_code)
    except Exception:           # an unreadable code object: no store known
        return False
    k = where.get(frame.f_lasti)
    if k is None:
        return False
    for i in ins[k + 1:]:
        if i.opname not in _STACK_SHUFFLES:
            return i.opname in ("STORE_SUBSCR", "STORE_SLICE")
    return False


@dataclass(eq=False)
class Node:
    """One operation of the graph, producing tensor ``name``.

    ``kind``: ``"arg"`` (the ``position``-th array argument), ``"captured"``
    (an array closed over or passed as a constant: ``value``, fed at every
    call, never a literal) or ``"op"``.  ``stmts`` are TC statements writing
    ``name`` and the node's ``helpers`` (``(name, dtype)`` of scratch
    tensors such as a mean's sum); ``inputs`` the nodes they read.
    ``flops`` counts the arithmetic of one evaluation at the traced sizes.
    """
    id: int
    name: str
    kind: str
    op: str
    shape: tuple[Size, ...]
    dtype: np.dtype
    location: Location
    stmts: tuple[str, ...] = ()
    inputs: tuple[Node, ...] = ()
    helpers: tuple[tuple[str, np.dtype], ...] = ()
    position: int = -1
    value: Any = None
    flops: int = 0
    contraction: bool = False
    reduction: bool = False
    note: str = ""
    #: an int32 0/1 tensor holding a mask, returned as a numpy bool array
    as_bool: bool = False

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= max(0, s.value)
        return n * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"<{self.op} {self.name} {tuple(s.value for s in self.shape)} {self.dtype}>"


@dataclass(eq=False)
class Graph:
    """The operations of one trace, in program order, and its outputs."""
    symbols: SymbolTable = field(default_factory=SymbolTable)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    #: the structure of the function's return value, with output indices
    treedef: Any = None
    name: str = "graph"
    #: the gathers' index arrays that come from outside the trace (arguments,
    #: captured arrays): ``(node, extent of the axis they index, location)``,
    #: checked against the extent at each call (:mod:`polyc.graph.views`)
    index_checks: list = field(default_factory=list)
    #: results of ``view op= value`` that Python's ``base[key] = result``
    #: has not stored into the view's base yet: id -> (result, view, where);
    #: :func:`polyc.graph.jit.trace` refuses any left (stored elsewhere)
    pending_stores: dict = field(default_factory=dict, compare=False, repr=False)
    _consumers: Any = field(default=None, compare=False, repr=False)

    def add(self, kind: str, op: str, shape, dtype, *, prefix: str = "t", **kw) -> Node:
        node = Node(len(self.nodes), f"{prefix}{len(self.nodes)}", kind, op, tuple(shape),
                    np.dtype(dtype), kw.pop("location", None) or user_location(), **kw)
        self.nodes.append(node)
        self._consumers = None
        return node

    @property
    def args(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "arg"]

    @property
    def captured(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "captured"]

    @property
    def ops(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "op"]

    def consumers(self) -> dict[int, list[Node]]:
        """Node id -> the nodes that read it (computed once per node added;
        the planner asks for it for every candidate group)."""
        if self._consumers is None:
            out: dict[int, list[Node]] = {n.id: [] for n in self.nodes}
            for n in self.nodes:
                for i in dict.fromkeys(n.inputs):
                    out[i.id].append(n)
            self._consumers = out
        return self._consumers

    def _size_text(self, m: re.Match) -> str:
        """A size token ``$k`` of a statement as its symbol's name (or value
        where the trace specialised it)."""
        r = self.symbols.find(int(m.group(1)))
        return str(self.symbols.values[r]) if r in self.symbols.fixed else self.symbols.name(r)

    def __repr__(self) -> str:
        lines = [f"graph {self.name}:"]
        for n in self.nodes:
            src = f"  # {n.location}" if n.kind == "op" else ""
            ins = ", ".join(i.name for i in dict.fromkeys(n.inputs))
            lines.append(f"  {n.name} = {n.op}({ins}) : {n.dtype} "
                         f"{tuple(s.text() for s in n.shape)}{src}")
            # its TC, where the scalars (x * 0.5) and index offsets show
            lines.extend(f"      {_SIZE_TOKEN.sub(self._size_text, st)}" for st in n.stmts)
        lines.append("  return " + ", ".join(o.name for o in self.outputs))
        return "\n".join(lines)


def identity_template(node: Node) -> str:
    if not node.shape:
        return node.name        # a rank-0 tensor reads as its name in TC
    return f"{node.name}(" + ", ".join(f"{{{k}}}" for k in range(len(node.shape))) + ")"


def compose(template: str, coords: list[str]) -> str:
    """``template`` with its view coordinates ``{k}`` replaced by ``coords[k]``
    (each parenthesised, so the result is again an expression)."""
    return template.format(*[c if _atomic(c) else f"({c})" for c in coords])


def _atomic(c: str) -> bool:
    return c.replace("_", "").replace("{", "").replace("}", "").isalnum()


class Tracer:
    """The array value a traced function computes with.

    ``template`` reads one element at view coordinates ``{0}..{ndim-1}``;
    ``nodes`` are the nodes it reads; ``shape`` is a tuple of
    :class:`~polyc.graph.sizes.Size`; ``dtype`` a numpy dtype (``bool`` for
    comparison masks, which exist only as templates).  Implements numpy's
    ``__array_ufunc__`` (NEP 13) and ``__array_function__`` (NEP 18); see
    :mod:`polyc.graph.numpy_api` for the functions covered.
    """

    __array_priority__ = 1000

    def __init__(self, graph: Graph, template: str, nodes: tuple[Node, ...],
                 shape: tuple[Size, ...], dtype) -> None:
        self._graph = graph
        self._template = template
        self._nodes = tuple(dict.fromkeys(nodes))
        self._shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        #: a mask's comparisons hold float literals that must be computed in
        #: this type (None for other tracers); see ops.new_node
        self._literal_dtype: np.dtype | None = None
        #: the tracer a ``reshape`` view was made from (None for others): a
        #: reshape of a reshape is a reshape of that tracer (C order), so a
        #: merge followed by the inverse split reads the base unchanged
        self._reshape_base: Tracer | None = None
        #: a view of another tracer (a slice, transpose, reshape...), the
        #: coordinates of the base it reads (``_view_of``'s template composed
        #: with them is its own), and the views made of this one (weak: a view
        #: dropped by the time of an in-place operator does not count)
        self._view_of: Tracer | None = None
        self._view_coords: tuple[str, ...] | None = None
        self._views: list[weakref.ref] = []

    @staticmethod
    def of(node: Node, graph: Graph) -> Tracer:
        return Tracer(graph, identity_template(node), (node,), node.shape, node.dtype)

    # -- array attributes ------------------------------------------------------
    @property
    def shape(self) -> tuple[SizeInt, ...]:
        return tuple(SizeInt(s) for s in self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> SizeInt:
        out = SizeInt(Size.constant(self._graph.symbols, 1))
        for s in self.shape:
            out = out * s
        return out

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> SizeInt:
        return self.size * self.dtype.itemsize

    @property
    def real(self) -> Tracer:
        return np.real(self)

    @property
    def imag(self) -> Tracer:
        return np.imag(self)

    def conj(self) -> Tracer:
        return np.conjugate(self)

    conjugate = conj

    def fill(self, value: Any) -> None:
        """``x.fill(value)``: every element becomes ``value`` (converted to
        the dtype as numpy converts it); refused on arguments and views as
        the in-place operators are."""
        if isinstance(value, Tracer):
            self[...] = value           # (a 0-d traced value: numpy's assignment)
        else:
            self.update_inplace("", np.full_like(self, value), what="x.fill()")

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object")
        return int(SizeInt(self._shape[0], "len() read it"))

    def read(self, coords: list[str]) -> str:
        """The TC expression of the element at ``coords`` (index expressions)."""
        return compose(self._template, coords)

    @property
    def node(self) -> Node | None:
        """The node this tracer is, unviewed, or None.  A view that reads the
        node at the same coordinates but has another shape (a prefix slice
        ``y[:, :3]``, a reshape adding unit dimensions) is not the node."""
        if len(self._nodes) == 1 and self._template == identity_template(self._nodes[0]) \
                and len(self._shape) == len(self._nodes[0].shape) \
                and all(a == b for a, b in zip(self._shape, self._nodes[0].shape)):
            return self._nodes[0]
        return None

    def became_view_of(self, base: Tracer, coords: Sequence[str] | None = None) -> Tracer:
        """Marks this tracer as a view of ``base`` reading it at ``coords``
        (see :meth:`update_inplace`)."""
        self._view_of = base
        self._view_coords = tuple(coords) if coords is not None else None
        base._views = [r for r in base._views if r() is not None] + [weakref.ref(self)]
        return self

    def update_inplace(self, op: str, new: Tracer, *, stored_back: bool = False,
                       what: str | None = None) -> Tracer:
        """``self op= value`` with ``new`` the value of ``self op value``:
        this tracer object becomes ``new`` cast to its dtype (numpy's
        ``same_kind`` casting), so every Python name bound to it sees the
        change, as with an ndarray.  Refused where numpy's semantics would
        reach other arrays: a view (the write goes to its base), an argument
        or captured array (the caller's array would change).  The views of
        this array read its new value afterwards, as numpy's views of an
        array changed in place do (:meth:`_refresh_views`).

        ``stored_back``: the operator is Python's ``base[key] op= value``,
        whose result Python assigns to ``base[key]`` next (see
        :func:`subscript_store_follows`).  A view then returns the value
        (checked and cast as above) and changes nothing: the assignment
        (:func:`polyc.graph.setitem.setitem`) writes it into the base.

        ``what``: the operation named in errors instead of ``in-place op=``
        (``np.clip with out=``: :func:`polyc.graph.outparam.store_out`)."""
        loc = user_location()
        what = what or f"in-place {op}="
        node = self.node
        why = None
        if self._view_of is not None and stored_back:
            res = self._inplace_result(loc, what, new)
            self._graph.pending_stores[id(res)] = (res, self, loc)
            return res
        if self._view_of is not None:
            why = "it is a view of another array (a slice, transpose or reshape)"
        elif node is not None and node.kind in ("arg", "captured"):
            kind = "an argument" if node.kind == "arg" else "a captured array"
            why = f"it is {kind}, which the caller would see change"
        if why is not None:
            fix = f"x = x {op} value" if what.startswith("in-place") else \
                "the result to a name instead"
            raise UnsupportedError(
                f"{loc}: {what} on a traced array: {why}; polyc's traced arrays "
                f"are values, so write {fix} (or make a copy first)\n    {loc.text}")
        new = self._inplace_result(loc, what, new)
        self._template, self._nodes, self._shape = new._template, new._nodes, new._shape
        self._literal_dtype, self._reshape_base = new._literal_dtype, new._reshape_base
        self._refresh_views()
        return self

    def _refresh_views(self) -> None:
        """Each live view of this tracer (and theirs) reads its current value:
        its template is this one's composed with the view's coordinates."""
        for r in self._views:
            v = r()
            if v is not None and v._view_coords is not None:
                v._template = compose(self._template, list(v._view_coords))
                v._nodes, v._literal_dtype = self._nodes, self._literal_dtype
                v._refresh_views()

    def _inplace_result(self, loc: Location, what: str, new: Tracer) -> Tracer:
        """``new`` checked against this array's shape and cast to its dtype
        (``what``: the operation, for errors)."""
        if new.ndim != self.ndim or any(a.value != b.value
                                        for a, b in zip(new._shape, self._shape)):
            raise ShapeError(f"{loc}: {what}: the result's shape "
                             f"{tuple(s.value for s in new._shape)} differs from the array's "
                             f"{tuple(s.value for s in self._shape)}")
        if new.dtype != self.dtype:
            if not np.can_cast(new.dtype, self.dtype, "same_kind"):
                raise DTypeError(f"{loc}: {what} cannot cast the result from "
                                 f"{new.dtype} to the array's {self.dtype} (numpy's "
                                 "same_kind rule)")
            new = new.astype(self.dtype)
        return new

    def __repr__(self) -> str:
        return (f"<polyc.graph.Tracer shape={tuple(s.value for s in self._shape)} "
                f"dtype={self.dtype}>")

    # -- value-dependent control flow is refused -------------------------------
    def _refuse(self, what: str, hint: str = ""):
        loc = user_location()
        hint = hint or ("keep the decision in the computation (np.where(cond, a, b), "
                        "np.maximum, masks), or pass the value as a static argument "
                        "(@polyc.jit(static_argnames=...))")
        raise TraceError(
            f"{loc}: {what} needs the array's values, which do not exist while polyc "
            f"traces the function\n    {loc.text}\nhint: {hint}",
            filename=loc.filename, line=loc.line)

    def __bool__(self):
        self._refuse("bool() of a traced array (an if, while, and/or or assert on it)")

    def __float__(self):
        self._refuse("float() of a traced array")

    def __int__(self):
        self._refuse("int() of a traced array")

    def __index__(self):
        self._refuse("using a traced array as an index")

    def __array__(self, dtype=None, copy=None):
        f = sys._getframe(1)
        while f is not None and not f.f_code.co_filename.endswith(
                ("index_tricks_impl.py", "index_tricks.py")):
            f = f.f_back if f.f_code.co_filename.startswith(_NUMPY) else None
        if f is not None:           # np.r_[a, b] / np.c_[...] converts with np.array
            self._refuse("np.r_[...] / np.c_[...] of traced arrays (numpy converts them with "
                         "np.array)", "join them with np.concatenate([a, b]), "
                         "np.column_stack([a, b]) or np.stack")
        if _user_opname() == "STORE_SUBSCR":
            self._refuse("assigning a traced value into a numpy array (y[...] = value, y made "
                         "by np.empty, np.zeros, np.ones, np.full or np.ndarray without like=, "
                         "or closed over)",
                         "make y a traced array: np.empty(shape, dtype=..., like=x), "
                         "np.zeros(shape, like=x) or np.zeros_like(x, shape=...) for an "
                         "argument x (numpy's own creation functions make numpy arrays, "
                         "which cannot hold traced values)")
        if _user_opname() == "BINARY_SUBSCR":
            self._refuse("a numpy array indexed by a traced array (np.eye(n)[labels]): "
                         "numpy's indexing of it",
                         "make the indexed array a traced one: create it with like= a traced "
                         "array (np.eye(n, like=labels)[labels], np.arange(n, like=x)), or "
                         "pass the table as an argument of the jitted function")
        self._refuse("np.asarray() / np.array() of a traced array",
                     "inside a polyc.jit function the arguments already are arrays: drop "
                     "the np.asarray/np.array call (x.astype(dtype) converts, x.copy() "
                     "copies), or give like= a traced array (np.asarray(x, like=x)); a numpy "
                     "array cannot hold traced values: create an array you assign into with "
                     "np.zeros_like(x, shape=...) or np.zeros(shape, like=x) (a traced one), "
                     "and to index a numpy array by a traced one (np.take(table, ids)), "
                     "create it with like= or pass the table as an argument of the jitted "
                     "function; a list of traced arrays given to numpy (np.array([a, b]), "
                     "np.sum([a, b], axis=0)) is converted with np.asarray too: join it with "
                     "np.stack([a, b]) first")

    def __iter__(self):
        n = len(self)
        return (self[i] for i in range(n))

    def tolist(self):
        self._refuse(".tolist()")

    def item(self, *args):
        self._refuse(".item()")


def mask_input(value: Any) -> Any:
    """A call's array for an input node: a bool array as int32 0/1 (the
    kernels have no boolean element type; a copy per call, 4 bytes an
    element), anything else as it is."""
    dt = getattr(value, "dtype", None)
    return value.astype(np.int32) if dt is not None and dt == np.bool_ else value
