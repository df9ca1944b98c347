"""Operations of the graph: each numpy call becomes a :class:`~polyc.graph.core.Node`
whose TC statements compute it (elementwise maps, reductions, contractions,
materialised copies), or a view: a new read template over the same nodes.

Semantics follow numpy 2 (NEP 50 promotion: Python scalars are weak,
numpy scalars and arrays are not; broadcasting; ``axis``/``keepdims``);
every shape error is a :class:`~polyc.errors.ShapeError` naming the user's
line.  Constants are printed exactly (``repr`` of the double; ``±inf`` and
NaN as IEEE quotients).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedError
from .accumulate import accumulated, count, integer_total, sum_dtype
from .core import Graph, Node, Tracer, compose, user_location
from .literals import float_literals, int_literals_beyond, literal
from .sizes import Size, SizeInt

_ALLOWED = ("float32", "float64", "int32", "int64", "bool", "float16", "int8", "int16", "uint8",
            "uint16", "uint32")


class Scalar:
    """A Python or numpy scalar operand (a literal in the TC text)."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.dtype = np.asarray(value).dtype
        self.weak = isinstance(value, (int, float, bool)) and not isinstance(value, np.generic)

    def literal(self, dtype: np.dtype) -> str:
        return literal(self.value, dtype)


def check_dtype(dtype: Any, what: str) -> np.dtype:
    d = np.dtype(dtype)
    if d.name not in _ALLOWED:
        hint = (" (bfloat16 compiles from TC and polyc.einsum; numpy's promotions for it "
                "come from ml_dtypes and are not traced yet)" if d.name == "bfloat16" else "")
        raise DTypeError(f"{user_location()}: {what} has dtype {d.name}; polyc.jit computes "
                         f"in float32, float64, float16, bool and the integers int8 ... int64, "
                         f"uint8 ... uint32 (convert it "
                         f"first, e.g. x.astype(np.int32) or np.float32){hint}")
    return d


def operand(graph: Graph, x: Any) -> Tracer | Scalar:
    """A traced operand: tracers as they are, numpy arrays as captured graph
    inputs (fed at every call, never literals), scalars as literals."""
    if isinstance(x, (Tracer, Scalar)):
        return x
    if isinstance(x, SizeInt):
        return Scalar(int(x))
    if isinstance(x, np.generic):
        check_dtype(x.dtype, "a scalar")
        return Scalar(x)
    if isinstance(x, (bool, int, float)):
        return Scalar(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        check_dtype(x.dtype, "a scalar")
        return Scalar(x[()])
    if isinstance(x, np.ndarray):
        return capture(graph, x)
    if isinstance(x, (list, tuple)):
        return capture(graph, np.asarray(x))
    if hasattr(x, "__dlpack__"):
        return capture(graph, np.from_dlpack(x))
    raise UnsupportedError(f"{user_location()}: cannot trace an operand of type "
                           f"{type(x).__name__}")


def capture(graph: Graph, value: np.ndarray) -> Tracer:
    """A numpy array the traced code uses without receiving it as an argument
    (a weight closed over, a constant table): a graph input whose extents are
    constants, fed from the same array at every call."""
    for n in graph.captured:
        if n.value is value:
            return mask_of(graph, n) if n.as_bool else Tracer.of(n, graph)
    d = check_dtype(value.dtype, "a captured array")
    shape = tuple(Size.constant(graph.symbols, s) for s in value.shape)
    mask = d.kind == "b"                     # (a mask: int32 0/1, core.mask_input)
    node = graph.add("captured", "array", shape, np.int32 if mask else d, prefix="w",
                     value=value, as_bool=mask)
    return mask_of(graph, node) if mask else Tracer.of(node, graph)


def mask_of(graph: Graph, node: Node) -> Tracer:
    """The mask an input ``node`` holds (``as_bool``: int32 0/1, filled by
    :func:`~polyc.graph.core.mask_input`), as the template ``node != 0``."""
    return elementwise(graph, "compare", lambda a: f"({a} != 0)", [Tracer.of(node, graph)],
                       np.dtype(bool), lazy=True, compute_dtype=np.dtype(np.int32))


# -- shapes -----------------------------------------------------------------------
def broadcast(graph: Graph, shapes: Sequence[tuple[Size, ...]], what: str) -> tuple[Size, ...]:
    """numpy's broadcast of ``shapes``; equal extents are united as sizes."""
    nd = max((len(s) for s in shapes), default=0)
    out: list[Size] = []
    for d in range(nd):
        dims = [s[len(s) - nd + d] for s in shapes if len(s) - nd + d >= 0]
        if any(s.value != 1 for s in dims):
            # an extent of traced value 1 that is symbolic (``x[2:]`` of 3
            # rows) broadcasts: it is specialised to 1
            for s in dims:
                if s.value == 1 and not s.is_constant:
                    graph.symbols.unify(s, Size.constant(graph.symbols, 1),
                                        f"{what} broadcasts an extent of 1")
        big = [s for s in dims if s.value != 1 or not s.is_constant]
        if not big:
            out.append(dims[0])
            continue
        first = big[0]
        for other in big[1:]:
            if other.value != first.value:
                loc = user_location()
                raise ShapeError(
                    f"{loc}: {what}: operands could not be broadcast together with shapes "
                    + " ".join(str(tuple(x.value for x in s)) for s in shapes)
                    + f"\n    {loc.text}")
            graph.symbols.unify(first, other, f"{what} broadcasts them together")
        for s in big:
            if s.value == 1 and len(big) != len(dims):
                # a symbolic extent of value 1 broadcast against a constant 1
                graph.symbols.unify(s, Size.constant(graph.symbols, 1), "broadcast of 1")
        out.append(first)
    return tuple(out)


def broadcast_read(t: Tracer | Scalar, coords: list[str], dtype: np.dtype,
                   out_shape: Sequence[Size] | None = None) -> str:
    """``t``'s element for output coordinates ``coords`` (right-aligned;
    a dimension of extent 1 broadcast against a larger one reads index 0;
    against an output extent of 1 it keeps the iterator, so that every
    access of a row-wise chain indexes the same iterators)."""
    if isinstance(t, Scalar):
        return t.literal(dtype)
    nd = t.ndim
    own = coords[len(coords) - nd:] if nd else []
    outs = list(out_shape[len(out_shape) - nd:]) if out_shape is not None and nd else \
        [None] * nd

    def one(s) -> bool:
        return s is not None and s.is_constant and s.normal().const == 1
    mine = ["0" if one(s) and not one(o) else c for s, o, c in zip(t._shape, outs, own)]
    return as_float(t.read(mine), t.dtype, dtype)


def as_float(text: str, have: np.dtype, want: np.dtype) -> str:
    """``text`` (of dtype ``have``) converted to the float ``want`` before
    arithmetic, as numpy converts: C would compute ``float * int64`` in
    float, numpy in float64 (the ``1.0`` takes the statement's float type)."""
    if np.dtype(want).kind == "f" and np.dtype(have).kind in "iu":
        return f"(1.0 * {text})"
    return text


def result_dtype(*ops: Tracer | Scalar) -> np.dtype:
    args = []
    for o in ops:
        if isinstance(o, Scalar):
            args.append(o.value)
        else:
            args.append(o.dtype)
    return np.result_type(*args)


def normalize_axis(axis: int, ndim: int, loc=None) -> int:
    if not -ndim <= axis < ndim:
        from numpy.exceptions import AxisError
        raise AxisError(axis, ndim)
    return axis % ndim


def iters(n: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{k}" for k in range(n)]


def where_clause(names: Sequence[str], sizes: Sequence[Size]) -> str:
    if not names:
        return ""
    return " where " + ", ".join(f"{n} in 0:{s_token(s)}" for n, s in zip(names, sizes))


def s_token(s: Size) -> str:
    """A size in TC text with symbol tokens ``$k`` (resolved when printed)."""
    parts = [("$%d" % sym) if c == 1 else f"{c}*${sym}" for sym, c in s.terms]
    if s.const or not parts:
        parts.append(str(s.const))
    return "(" + " + ".join(parts) + ")" if len(parts) > 1 else parts[0]


def lhs(name: str, names: Sequence[str]) -> str:
    return f"{name}({', '.join(names)})" if names else name


# -- node builders -------------------------------------------------------------------
def new_node(graph: Graph, op: str, shape: tuple[Size, ...], dtype: np.dtype,
             reads: Sequence[Tracer], stmts: Callable[[str], list[str]], *,
             flops: int = 0, helpers: Sequence[tuple[str, np.dtype]] = (),
             contraction: bool = False, reduction: bool = False, note: str = "") -> Tracer:
    dtype = check_dtype(dtype, op)
    if dtype.kind == "b":
        # polyc has no boolean tensors: a boolean result (np.tril of a mask, a
        # minimum of masks) is an int32 node of the same statements, read as
        # the mask "!= 0" (returned as a numpy bool array, see materialize)
        tmp = new_node(graph, op, shape, np.dtype("int32"), reads, stmts, flops=flops,
                       helpers=helpers, contraction=contraction, reduction=reduction,
                       note=note)
        return elementwise(graph, "compare", lambda v: f"({v} != 0)", [tmp],
                           np.dtype(bool), lazy=True)
    lit = _widest([r._literal_dtype for r in reads])
    if lit is not None and lit.itemsize > dtype.itemsize and dtype.kind == "f":
        # a statement's literals take its float type: a mask comparing float64
        # values with 0.1 inside a float32 statement is computed in float64
        # (one rounding of each float32 operation's exact result: the same values)
        tmp = new_node(graph, op, shape, lit, reads, stmts, flops=flops, helpers=helpers,
                       contraction=contraction, reduction=reduction, note=note)
        return materialize(graph, tmp, "astype", dtype)
    if dtype.kind in "iu" and dtype.itemsize < 8 and \
            any(int_literals_beyond(t, dtype) for t in stmts("t")):
        # an int64 literal in an int32 statement (a mask comparing int64 values
        # with 2**40, returned: its int32 0/1 node): computed in int64, converted
        tmp = new_node(graph, op, shape, np.dtype("int64"), reads, stmts, flops=flops,
                       helpers=helpers, contraction=contraction, reduction=reduction,
                       note=note)
        return materialize(graph, tmp, "astype", dtype)
    if dtype.kind in "iu" and (lit is not None or any(float_literals(t) for t in stmts("t"))):
        # a TC statement computes in its element type, literals included: a
        # comparison of floats with 0.5 (a mask) in an integer statement is
        # computed in float64 (exact for these values) and then converted
        tmp = new_node(graph, op, shape, np.dtype("float64"), reads, stmts, flops=flops,
                       helpers=[(h, np.dtype("float64") if np.dtype(d).kind in "iu" else d)
                                for h, d in helpers],
                       contraction=contraction, reduction=reduction, note=note)
        return materialize(graph, tmp, "astype", dtype)
    name = f"t{len(graph.nodes)}"
    inputs = tuple(dict.fromkeys(n for r in reads for n in r._nodes))
    texts = stmts(name)
    node = graph.add("op", op, shape, dtype, stmts=tuple(texts), inputs=inputs,
                     helpers=tuple((f"{name}_{h}", np.dtype(d)) for h, d in helpers),
                     flops=flops, contraction=contraction, reduction=reduction, note=note)
    assert node.name == name
    return Tracer.of(node, graph)


def _widest(dtypes) -> np.dtype | None:
    ds = [np.dtype(d) for d in dtypes if d is not None]
    return max(ds, key=lambda d: d.itemsize) if ds else None


def elementwise(graph: Graph, op: str, fn: Callable[..., str], operands: Sequence[Any],
                dtype: np.dtype | None = None, *, lazy: bool = False,
                compute_dtype: np.dtype | None = None) -> Tracer:
    """``fn`` applied elementwise to the broadcast ``operands``.  ``lazy``:
    return a template (comparisons), not a node."""
    ops = [operand(graph, o) for o in operands]
    shape = broadcast(graph, [o._shape for o in ops if isinstance(o, Tracer)], op)
    rdt = compute_dtype if compute_dtype is not None else result_dtype(*ops)
    out_dt = np.dtype(dtype) if dtype is not None else rdt
    tracers = [o for o in ops if isinstance(o, Tracer)]
    if lazy:
        coords = [f"{{{k}}}" for k in range(len(shape))]
        text = fn(*[broadcast_read(o, coords, rdt, shape) for o in ops])
        t = Tracer(graph, text, tuple(n for t in tracers for n in t._nodes), shape, out_dt)
        # the float type its literals must be computed in (see new_node)
        t._literal_dtype = _widest([rdt if rdt.kind == "f" else None] +
                                   [o._literal_dtype for o in tracers])
        return t
    its = iters(len(shape))
    rhs = fn(*[broadcast_read(o, its, rdt, shape) for o in ops])
    # an operand read through a merge (a reshape view of a split node) is
    # computed in the split space: the node keeps the digits as dimensions
    # and the result is its reshape view (see split_iterators)
    digits, node_shape, (rhs,) = split_iterators(its, list(shape), [rhs])
    out = new_node(graph, op, tuple(node_shape), out_dt, tracers,
                   lambda name: [f"{lhs(name, digits)} = {rhs}{where_clause(digits, node_shape)}"],
                   flops=count(shape))
    return out if digits == its else _merged(out, its, digits, shape)


def _merged(t: Tracer, its: Sequence[str], digits: Sequence[str],
            shape: Sequence[Size]) -> Tracer:
    """``t``, a node over the ``digits`` of iterators ``its`` (names
    ``i0h``, ``i0l`` of ``i0``: :func:`split_iterators`), as the view of
    ``shape`` that merges them again, as a C-order reshape does (a later
    reshape reads ``t`` through ``_reshape_base``)."""
    coords: list[str] = []
    for g, it in enumerate(its):
        ks = [k for k, d in enumerate(digits) if d.rstrip("hl") == it]
        # the digits after the first have constant extents (split_iterators)
        coords += digit_coords(f"{{{g}}}", [t._shape[k].normal().const for k in ks])
    out = Tracer(t._graph, compose(t._template, coords), t._nodes, tuple(shape), t.dtype)
    out._literal_dtype = t._literal_dtype
    out._reshape_base = t
    return out      # (of a node nothing else reads: no view for in-place operators)


def digit_coords(flat: str, extents: Sequence[int]) -> list[str]:
    """The digits of the C-order index ``flat`` over ``extents`` (the first
    extent is not read): ``(flat) / inner`` for the first, ``((flat) /
    inner) % extent`` for the others (what a reshape's merge reads, and
    what :func:`split_iterators` recognises)."""
    out = []
    for j in range(len(extents)):
        inner = math.prod(extents[j + 1:])
        coord = flat if inner == 1 else f"({flat}) / {inner}"
        out.append(coord if j == 0 else f"({coord}) % {extents[j]}")
    return out


def materialize(graph: Graph, t: Tracer, op: str = "copy", dtype=None) -> Tracer:
    """``t`` as a node of its own (a copy of a view, or a conversion).  A
    mask without a ``dtype`` becomes an int32 0/1 node marked ``as_bool``
    (polyc has no boolean tensors; the jit returns it as a numpy bool array)."""
    as_bool = t.dtype.kind == "b" and dtype is None
    dt = np.dtype("int32") if as_bool else np.dtype(dtype) if dtype is not None else t.dtype
    its = iters(t.ndim)
    rhs = t.read(its)
    if t.dtype.kind == "b":
        rhs = f"({rhs}) ? 1 : 0"
    out = new_node(graph, op, t._shape, dt, [t],
                   lambda name: [f"{lhs(name, its)} = {rhs}{where_clause(its, t._shape)}"])
    if as_bool:
        out.node.as_bool = True
    return out


def reduce(graph: Graph, kind: str, x: Any, axis=None, keepdims: bool = False,
           dtype=None, ddof: int = 0, where_loc: str = "", empty_ok: bool = False) -> Tracer:
    """``sum prod max min mean var std`` over ``axis`` (None, an int or a tuple;
    negative allowed) with ``keepdims``.  A ``max``/``min`` of no elements is
    numpy's ``ValueError`` (plans guarded to non-empty extents) unless
    ``empty_ok`` (an ``initial=`` follows the identity, -inf/+inf)."""
    x = operand(graph, x)
    if isinstance(x, Scalar):
        x = materialize(graph, Tracer(graph, x.literal(x.dtype), (), (), x.dtype))
    nd = x.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(normalize_axis(int(a), nd) for a in
                     (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
        axes = tuple(sorted(axes))  # the reduction iterators follow the dimensions
    out_shape = tuple(Size.constant(graph.symbols, 1) if d in axes else x._shape[d]
                      for d in range(nd) if keepdims or d not in axes)
    its = iters(len(out_shape))
    # reduced dimensions of extent 1 read index 0 (no loop)
    loop_axes = [d for d in axes if not _is_one(x._shape[d])]
    red = iters(len(loop_axes), "r")
    coords, k = [], 0
    for d in range(nd):
        if d in axes:
            coords.append(red[loop_axes.index(d)] if d in loop_axes else "0")
            if keepdims:
                k += 1
        else:
            coords.append(its[k])
            k += 1
    out_idx = its
    out_ranges = list(out_shape)
    red_sizes = [x._shape[d] for d in axes]
    loop_sizes = [x._shape[d] for d in loop_axes]
    n = count(red_sizes)
    elem = x.read(coords)
    if any(not _uses(elem, r) for r in red):
        # a view that ignores a reduced coordinate (broadcast_to): reduce a copy
        x = materialize(graph, x, dtype=np.int64 if x.dtype.kind == "b" else None)
        elem = x.read(coords)
    if x.dtype.kind == "b":
        elem = f"(({elem}) ? 1 : 0)"
        x_dtype = np.dtype("int64")
    else:
        x_dtype = x.dtype
    # a reduction over a merge (x.reshape(b, -1).sum(1)): one iterator per
    # digit; an output dimension read through one (a softmax over
    # x.reshape(-1, d) computed split) keeps its digits, as elementwise does
    red, loop_sizes, (elem,) = split_iterators(red, loop_sizes, [elem])
    merged_idx = out_idx
    out_idx, out_ranges, (elem,) = split_iterators(out_idx, out_ranges, [elem])
    node_shape = tuple(out_ranges)

    def done(t: Tracer) -> Tracer:
        return t if out_idx == merged_idx else _merged(t, merged_idx, out_idx, out_shape)
    wc = where_clause(out_idx + red, out_ranges + loop_sizes)
    wo = where_clause(out_idx, out_ranges)
    flops = count(x._shape)
    cnt = _count_text(red_sizes)
    if kind in ("max", "min"):      # (of a mask: its 0/1 reduced in int32, a mask)
        if n == 0 and not empty_ok:
            raise ValueError(f"zero-size array to reduction operation {kind}imum which has "
                             "no identity")
        for s in red_sizes if not empty_ok else ():     # an empty call traces again
            graph.symbols.require(s - 1, f"np.{kind} over it (numpy raises for no elements)")
        dt = np.dtype("int32") if x.dtype.kind == "b" else x_dtype
        r = done(new_node(graph, kind, node_shape, dt, [x], lambda name: [
            f"{lhs(name, out_idx)} {kind}=! {elem}{wc}"], flops=flops, reduction=True))
        return r if x.dtype.kind != "b" else elementwise(
            graph, "compare", lambda a: f"({a} != 0)", [r], np.dtype(bool), lazy=True)
    if kind in ("sum", "prod"):
        dt = np.dtype(dtype) if dtype is not None else (
            integer_total(x.dtype, kind) if x_dtype.kind in "iub" else x_dtype)
        op, acc = ("+=!", sum_dtype(dt, red_sizes, x)) if kind == "sum" else ("*=!", dt)
        return done(new_node(graph, kind, node_shape, dt, [x], lambda name: accumulated(
            lhs(name, out_idx), lhs(name + "_s", out_idx), f"{op} {elem}{wc}", wo, acc != dt),
            helpers=[("s", acc)] * (acc != dt), flops=flops, reduction=True))
    fdt = np.dtype(dtype) if dtype is not None else (
        np.dtype("float64") if x_dtype.kind in "iub" else x_dtype)
    if kind == "mean":      # float16's sum in float32, as numpy's _mean does
        sdt = np.dtype("float32") if fdt == np.float16 else sum_dtype(fdt, red_sizes, x)
        return done(new_node(graph, "mean", node_shape, fdt, [x], lambda name: [
            f"{lhs(name + '_s', out_idx)} +=! {elem}{wc}",
            f"{lhs(name, out_idx)} = {lhs(name + '_s', out_idx)} / {cnt}{wo}"],
            helpers=[("s", sdt)], flops=flops, reduction=True))
    if kind in ("var", "std"):
        def stmts(name):
            m, q = lhs(name + "_m", out_idx), lhs(name + "_q", out_idx)
            dev = f"({elem} - {m})"
            final = f"{q} / ({cnt} - {int(ddof)})"
            if kind == "std":
                final = f"sqrt({final})"
            return [f"{lhs(name + '_s', out_idx)} +=! {elem}{wc}",
                    f"{m} = {lhs(name + '_s', out_idx)} / {cnt}{wo}",
                    f"{q} +=! {dev} * {dev}{wc}",
                    f"{lhs(name, out_idx)} = {final}{wo}"]
        w = sum_dtype(fdt, red_sizes, x)
        return done(new_node(graph, kind, node_shape, fdt, [x], stmts, flops=3 * flops,
                             helpers=[(h, w) for h in "smq"], reduction=True))
    raise UnsupportedError(f"reduction {kind}")


def _is_one(s: Size) -> bool:
    return s.is_constant and s.normal().const == 1


def _uses(text: str, it: str) -> bool:
    return re.search(rf"\b{it}\b", text) is not None


def _count_text(sizes: Sequence[Size]) -> str:
    if not sizes:
        return "1"
    return "(" + " * ".join(s_token(s) for s in sizes) + ")"


def split_iterators(rs: list[str], extents: list[Size],
                    reads: list[str]) -> tuple[list[str], list[Size], list[str]]:
    """Iterators that the reads use through ``(r) / D`` and ``(r) % C`` (and
    possibly plainly, as ``r``; a reshape merged the dimensions they index: BERT's
    ``ctx.transpose(0, 2, 1, 3).reshape(b, s, d) @ wo`` in the reduction,
    ``x.reshape(b * s, d) @ w`` in the rows) become two
    iterators ``r = C * rh + rl`` with ``rl in 0:C``, ``rh in 0:extent/C``:
    the same instances, with affine accesses, so that the contraction can
    be tensorized (an implicit GEMM whose reduction index has the digits
    ``(rh, rl)``).  ``rh`` is split again where it can be (a merge of
    three or more dimensions).  Only where ``C`` divides every ``D`` and
    the extent exactly; otherwise ``r`` stays as it is.  Returns the
    iterators, their extents and the reads."""
    out_rs: list[str] = []
    out_ext: list[Size] = []
    for r, ext in zip(rs, extents):
        digits, reads = _split_one(r, ext, reads)
        out_rs += [d for d, _ in digits]
        out_ext += [e for _, e in digits]
    return out_rs, out_ext, reads


def _split_one(r: str, ext: Size, reads: list[str]) -> tuple[list[tuple[str, Size]], list[str]]:
    div = re.compile(rf"\(\s*{r}\s*\)\s*/\s*(\d+)")
    mod = re.compile(rf"\(\s*{r}\s*\)\s*%\s*(\d+)")
    mods = {int(m) for t in reads for m in mod.findall(t)}
    divs = {int(d) for t in reads for d in div.findall(t)}
    n = ext.normal()
    c = mods.pop() if len(mods) == 1 else 0
    if c < 2 or any(d % c for d in divs) or n.const % c or any(k % c for _, k in n.terms):
        return [(r, ext)], reads
    hi, lo = f"{r}h", f"{r}l"

    def one(text: str) -> str:
        text = div.sub(lambda m: hi if int(m.group(1)) == c else
                       f"({hi}) / {int(m.group(1)) // c}", text)
        text = mod.sub(lo, text)
        return re.sub(rf"\b{r}\b", f"({c}*{hi} + {lo})", text)
    head = Size(ext.table, tuple((sym, k // c) for sym, k in n.terms), n.const // c,
                ext.value // c)
    high, reads = _split_one(hi, head, [one(t) for t in reads])
    return high + [(lo, Size.constant(ext.table, c))], reads


def contraction(graph: Graph, op: str, a: Tracer, b: Tracer | None, a_labels: Sequence[str],
                b_labels: Sequence[str] | None, out_labels: Sequence[str],
                sizes: dict[str, Size], dtype: np.dtype | None = None,
                more: Sequence[tuple[Tracer, Sequence[str]]] = ()) -> Tracer:
    """``out[out_labels] = sum over the other labels of a[a_labels] * b[b_labels]``
    (einsum semantics with one or two operands, or more in ``more``: one
    loop nest over every label, numpy's ``optimize=False``; labels repeated
    within an operand take diagonals).  Size-1 broadcast dimensions read
    index 0."""
    operands = [(a, a_labels)] + ([(b, b_labels)] if b is not None else []) + list(more)
    red = [lab for lab in dict.fromkeys(x for _, ls in operands for x in ls)
           if lab not in out_labels]
    # a summed label of extent 1 has the single index 0 (no loop)
    red = [lab for lab in red if not _is_one(sizes[lab])]
    name_of = {lab: f"i{k}" for k, lab in enumerate(out_labels)}
    name_of.update({lab: f"r{k}" for k, lab in enumerate(red)})
    dt = np.dtype(dtype) if dtype is not None else result_dtype(*[t for t, _ in operands])
    reads = []
    for k, (t, labels) in enumerate(operands):
        if red and len(operands) == 2 and t.dtype.kind == "f" and t.dtype != dt:
            # a float32 operand of a float64 product (numpy promotes it):
            # converted first, as numpy does, so that the product has one
            # dtype and may run on the GEMM micro-kernel (exact: same values)
            t = materialize(graph, t, "astype", dt)
            operands[k] = (t, labels)
        coords = []
        for s, lab in zip(t._shape, labels):
            if lab not in name_of or (_is_one(s) and not _is_one(sizes[lab])):
                coords.append("0")
            else:
                coords.append(name_of[lab])
        text = as_float(t.read(coords), t.dtype, dt)
        if any(c != "0" and not _uses(text, c) for c in coords):
            # a view that ignores a coordinate (broadcast_to): the summation
            # must still run over it, so read a copy
            t = materialize(graph, t)
            operands[k] = (t, labels)
            text = as_float(t.read(coords), t.dtype, dt)
        reads.append(text)
    out_shape = tuple(sizes[lab] for lab in out_labels)
    its = [name_of[lab] for lab in out_labels]
    rs = [name_of[lab] for lab in red]
    r_sizes = [sizes[lab] for lab in red]
    rs, r_sizes, reads = split_iterators(rs, r_sizes, reads)
    # output iterators too: the node gets one dimension per digit, and the
    # result is its reshape view (a later reshape back reads it unchanged)
    digits, node_shape, reads = split_iterators(its, list(out_shape), reads)
    rhs = " * ".join(reads)
    wc = where_clause(digits + rs, node_shape + r_sizes)
    flops = 2 * count(node_shape + r_sizes)
    if not red:
        out = new_node(graph, op, tuple(node_shape), dt, [t for t, _ in operands],
                       lambda name: [f"{lhs(name, digits)} = {rhs}{wc}"], flops=flops // 2)
    else:
        out = new_node(graph, op, tuple(node_shape), dt, [t for t, _ in operands],
                       lambda name: [f"{lhs(name, digits)} +=! {rhs}{wc}"], flops=flops,
                       contraction=b is not None, reduction=True)
    return out if digits == its else _merged(out, its, digits, out_shape)


def creation(graph: Graph, op: str, shape: Sequence[Any], dtype, rhs: Callable[[list[str]], str],
             reads: Sequence[Tracer] = ()) -> Tracer:
    """A new array of ``shape`` (ints or extents) whose element at
    ``i0, i1, ...`` is ``rhs(iterators)``."""
    sizes = tuple(to_size(graph, s) for s in shape)
    its = iters(len(sizes))
    text = rhs(its)
    return new_node(graph, op, sizes, np.dtype(dtype), list(reads), lambda name: [
        f"{lhs(name, its)} = {text}{where_clause(its, sizes)}"])


def to_size(graph: Graph, s: Any) -> Size:
    if isinstance(s, SizeInt):
        return s.size
    if isinstance(s, Tracer):
        s._refuse("a traced array as a size")
    v = int(s)
    if v < 0:
        raise ValueError("negative dimensions are not allowed")
    return Size.constant(graph.symbols, v)


def shape_arg(shape: Any) -> tuple:
    if isinstance(shape, (int, np.integer, SizeInt)):
        return (shape,)
    return tuple(shape)
