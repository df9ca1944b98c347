"""numpy's protocols on :class:`~polyc.graph.core.Tracer`: ``__array_ufunc__``
(NEP 13), ``__array_function__`` (NEP 18), the Python operators and the
common ndarray methods.

Covered: the ufuncs of :data:`UFUNCS` (arithmetic, ``power sqrt reciprocal
exp log tanh abs maximum minimum``, comparisons, ``isnan isinf isfinite``,
logical operations and ``& | ^ ~`` on masks, ``scipy.special.erf``), ``matmul``
and ``add/maximum/minimum.reduce``; the functions of :data:`FUNCTIONS`
(reductions with ``axis``, ``keepdims``, ``ddof``; contractions; views;
``where clip concatenate stack hstack vstack split pad triu tril *_like``).
Comparisons are masks (templates inlined into ``np.where`` and arithmetic);
a returned mask is an int32 0/1 tensor converted to bool on the way out.
Anything else raises :class:`~polyc.errors.UnsupportedError` naming the
function: nothing falls back to numpy.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..errors import AxisError, IndexBoundsError, ShapeError, UnsupportedError
from . import arrayfns, creation, gather, morefns, numerics, numpy_more, ops, outparam, views
from .contractions import dot, einsum, matmul, tensordot
from .core import Tracer, subscript_store_follows, user_location
from .joins import concatenate, stack
from .ops import Scalar, elementwise, literal, operand, reduce
from .outparam import store_out
from .scans import scan
from .selection import MaskedSelection
from .setitem import selection_operand, setitem
from .sizes import SizeInt
from .ufuncs import UFUNCS, _abs, _invert, _negative, _no_bool_loop, _square, astype


def _graph(args) -> Any:
    for a in args:
        if isinstance(a, Tracer):
            return a._graph
        if isinstance(a, (list, tuple)):
            g = _graph(a)
            if g is not None:
                return g
    return None


def array_ufunc(self: Tracer, ufunc, method: str, *inputs, **kwargs):
    if any(isinstance(x, MaskedSelection) for x in inputs):
        return NotImplemented       # (x[mask] ufuncs: MaskedSelection.__array_ufunc__)
    g = self._graph
    loc = user_location()
    if method != "__call__":
        out = morefns.ufunc_method(g, ufunc, method, inputs, dict(kwargs))
        if out is not None:
            return out
        if method == "reduce" and ufunc.__name__ in ("add", "multiply", "maximum", "minimum"):
            kind = {"add": "sum", "multiply": "prod", "maximum": "max",
                    "minimum": "min"}[ufunc.__name__]
            # ufunc.reduce(array, axis=0, dtype=None, out=None, keepdims=False, ...)
            pos = dict(zip(("axis", "dtype", "out", "keepdims"), inputs[1:]))
            if len(inputs) > 5 or set(pos) & set(kwargs):
                raise UnsupportedError(f"{loc}: np.{ufunc.__name__}.reduce with these "
                                       f"arguments is not supported\n    {loc.text}")
            kwargs.update(pos)
            axis = kwargs.pop("axis", 0)
            keep = kwargs.pop("keepdims", False)
            dtype = kwargs.pop("dtype", None)
            if kwargs.get("out", None) is None:
                kwargs.pop("out", None)
            mask, initial = kwargs.pop("where", True), kwargs.pop("initial", None)
            if not kwargs:
                return located(f"np.{ufunc.__name__}.reduce", _masked_reduction, g, kind,
                               inputs[0], axis, dtype, bool(keep), 0, mask, initial)
        raise UnsupportedError(f"{loc}: np.{ufunc.__name__}.{method} is not supported in "
                               f"traced code\n    {loc.text}")
    out_arg = kwargs.pop("out", None)
    dtype = kwargs.pop("dtype", None)
    if kwargs:
        raise UnsupportedError(f"{loc}: np.{ufunc.__name__}() with "
                               f"{', '.join(kwargs)}= is not supported in traced code")
    fn = UFUNCS.get(ufunc.__name__)
    if fn is None:
        raise UnsupportedError(f"{loc}: np.{ufunc.__name__} is not supported by polyc.jit "
                               f"(supported ufuncs: {', '.join(sorted(UFUNCS))})\n    {loc.text}")
    if dtype is not None:
        # numpy computes in dtype: the inputs are converted first
        dt = ops.check_dtype(dtype, f"np.{ufunc.__name__}'s dtype")
        inputs = tuple(astype(i, dt) if isinstance(i, Tracer) and i.dtype != dt else
                       (Scalar(dt.type(i)) if isinstance(i, (int, float)) else i)
                       for i in inputs)
    out = located(f"np.{ufunc.__name__}", fn, g, *inputs)
    if dtype is not None and np.dtype(dtype) != out.dtype and out.dtype.kind != "b":
        out = astype(out, dtype)
    if out_arg is not None:
        if isinstance(out, tuple):
            raise UnsupportedError(f"{loc}: out= of np.{ufunc.__name__}, which has two "
                                   f"results, is not supported in traced code\n    {loc.text}")
        return store_out(g, out_arg, out, f"np.{ufunc.__name__}")
    return out


# -- contractions: polyc.graph.contractions ---------------------------------------------
UFUNCS["matmul"] = lambda g, a, b: matmul(g, a, b)


def where(g, cond, a=None, b=None):
    if a is None or b is None:
        raise UnsupportedError(f"{user_location()}: np.where(cond) (indices) has a "
                               "data-dependent shape; use np.where(cond, a, b)")
    c, x, y = operand(g, cond), operand(g, a), operand(g, b)
    dt = ops.result_dtype(x, y)
    if dt.kind in "iu":     # a Python int beyond the type wraps, as numpy's np.where does
        x, y = (_wrapped(o, dt) if isinstance(o, ops.Scalar) and o.weak else o for o in (x, y))
    cb = c.dtype.kind == "b"
    return elementwise(g, "where", lambda cc, p, q: f"({cc} ? {p} : {q})" if cb else
                       f"(({cc} != 0) ? {p} : {q})", [c, x, y], dt, compute_dtype=dt,
                       lazy=dt.kind == "b")             # of masks: a mask


def _wrapped(s: ops.Scalar, dt: np.dtype) -> ops.Scalar:
    bits = 8 * dt.itemsize
    v = int(s.value) % (1 << bits)
    return ops.Scalar(v - (1 << bits) if dt.kind == "i" and v >> (bits - 1) else v)


def clip(g, a, a_min=None, a_max=None, **kw):
    out = kw.pop("out", None)
    if out is not None:
        return store_out(g, out, clip(g, a, a_min, a_max, **kw), "np.clip")
    lo = kw.pop("min", a_min)
    hi = kw.pop("max", a_max)
    x = operand(g, a)
    if x.dtype.kind in "iu":        # numpy 2 clips to a Python int bound beyond the type's range
        info = np.iinfo(x.dtype)
        lo, hi = (min(max(v, info.min), info.max) if type(v) is int else v for v in (lo, hi))
    args = [x] + [operand(g, v) for v in (lo, hi) if v is not None]
    floats = ops.result_dtype(*args).kind == "f"

    def fn(v, *bounds):
        # numpy's min(max(x, lo), hi) with its NaN rule: a NaN value stays, a NaN
        # bound gives NaN, and of equal values (zeros of two signs) the bound
        out, k = v, 0
        for bound, cmp in ((lo, ">"), (hi, "<")):
            if bound is not None:
                nan = f"{out} != {out} || " if floats else ""
                out = f"(({nan}{out} {cmp} {bounds[k]}) ? {out} : {bounds[k]})"
                k += 1
        return out
    return elementwise(g, "clip", fn, args)


def split(g, ary, indices_or_sections, axis=0):
    t = operand(g, ary)
    axis = ops.normalize_axis(int(axis), t.ndim)
    size = t._shape[axis]
    if isinstance(indices_or_sections, (int, np.integer, SizeInt)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if size.value % k:
            raise ValueError("array split does not result in an equal division")
        part = size.floordiv(k, "np.split divides it")   # exact, or specialised
        cuts: list = [SizeInt(part.scale(j)) for j in range(1, k)]
    else:
        cuts = [c if isinstance(c, SizeInt) else int(c) for c in indices_or_sections]
    bounds = [0] + cuts + [None]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key = [slice(None)] * t.ndim
        key[axis] = slice(lo, hi)
        out.append(views.getitem(t, tuple(key)))
    return out


def pad(g, array, pad_width, mode="constant", constant_values=0, **kw):
    stats = ("maximum", "minimum", "mean")
    if mode not in ("constant", "edge", "reflect", "symmetric", "wrap") + stats or \
            set(kw) - ({"stat_length"} if mode in stats else set()):
        raise UnsupportedError(f"{user_location()}: np.pad(mode={mode!r}"
                               f"{''.join(f', {k}=' for k in kw)}) is not supported; the "
                               "modes are constant, edge, reflect, symmetric, wrap, maximum, "
                               "minimum and mean")
    t = operand(g, array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (t.ndim, 2))
    if np.any(pw < 0):
        raise ValueError("index can't contain negative values")
    if mode in stats:
        return numpy_more.pad_stat(g, t, pw, mode, concatenate, **kw)
    if mode != "constant":
        return arrayfns.pad_mode(g, t, pw, mode, concatenate)
    cv = np.broadcast_to(np.asarray(constant_values), (t.ndim, 2))
    its = ops.iters(t.ndim)
    shape, coords, sides = [], [], []
    for d, (s, (lo, hi)) in enumerate(zip(t._shape, pw)):
        lo, hi = int(lo), int(hi)
        shape.append(s + (lo + hi))
        coords.append(its[d] if lo == 0 else f"{its[d]} - {lo}")
        sides += [(f"{its[d]} < {lo}", cv[d, 0])] if lo else []
        sides += [(f"{its[d]} >= {ops.s_token(s + lo)}", cv[d, 1])] if hi else []
    expr = t.read(coords)
    for cond, v in sides:       # numpy pads axis by axis: the last one's value wins corners
        expr = f"(({cond}) ? {literal(v, t.dtype)} : {expr})"
    return ops.new_node(g, "pad", tuple(shape), t.dtype, [t], lambda name: [
        f"{ops.lhs(name, its)} = {expr}{ops.where_clause(its, shape)}"])


def _tri(kind: str):
    def run(g, m, k=0):
        t = operand(g, m)
        if t.ndim < 2:
            raise UnsupportedError(f"np.{kind} of a {t.ndim}-d array")
        its = ops.iters(t.ndim)
        i, j = its[-2], its[-1]
        cond = f"{j} >= {i} + ({int(k)})" if kind == "triu" else f"{j} <= {i} + ({int(k)})"
        zero = literal(0, t.dtype)
        rd = t.read(its)
        return ops.new_node(g, kind, t._shape, t.dtype, [t], lambda name: [
            f"{ops.lhs(name, its)} = ({cond} ? {rd} : {zero}){ops.where_clause(its, t._shape)}"])
    return run


def _like(value):
    def run(g, a, *args, dtype=None, shape=None, **kw):
        # zeros_like(a, dtype, order, subok, shape); full_like(a, fill_value, dtype, ...)
        t = operand(g, a)
        if value is None:
            fill, args = args[0], args[1:]
        else:
            fill = value
        if args:
            dtype = args[0] if dtype is None else dtype
            if len(args) >= 4 and shape is None:
                shape = args[3]
        if isinstance(fill, Tracer) or kw.get("device") not in (None, "cpu"):
            raise UnsupportedError(f"{user_location()}: np.full_like with a traced fill "
                                   "value is not supported; use np.where or broadcasting")
        dt = np.dtype(dtype) if dtype is not None else t.dtype
        sh = t.shape if shape is None else ops.shape_arg(shape)
        text = literal(fill, dt)
        return creation.made(g, "full_like", sh, dt, lambda its: text)
    return run


def _reduction(kind: str):
    def run(g, a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kw):
        if out is not None:
            raise UnsupportedError(f"{user_location()}: np.{kind} with out= is not supported")
        if kind in ("var", "std") and kw.get("correction") is not None:
            if ddof:
                raise ValueError("ddof and correction can't be provided simultaneously.")
            ddof = kw.pop("correction")
        mask = kw.pop("where", True)
        initial = kw.pop("initial", None)
        if kw or (
                initial is not None and kind not in ("sum", "prod", "max", "min")):
            raise UnsupportedError(f"{user_location()}: np.{kind} with "
                                   f"{', '.join(kw) or 'where or initial'}= is not supported")
        if kind in ("var", "std") and mask is not True:
            return numerics.masked_moment(g, kind, a, axis, dtype, bool(keepdims), ddof, mask)
        return _masked_reduction(g, kind, a, axis, dtype, bool(keepdims), ddof, mask,
                                 initial)
    return run


def _masked_reduction(g, kind, a, axis, dtype, keepdims, ddof, mask, initial):
    """A reduction with numpy's ``where=`` (the masked-out elements replaced
    by the operation's identity, or ``initial`` for max and min, which have
    none; a mean divides by the count of selected elements) and
    ``initial=`` (combined with the result)."""
    if mask is not True:
        if kind in ("max", "min") and initial is None:
            raise ValueError(f"reduction operation '{kind}imum' does not have an identity, "
                             "so to use a where mask one has to specify 'initial'")
        fill = {"sum": 0, "mean": 0, "prod": 1}.get(kind, initial)
        t = operand(g, a)
        if kind == "mean":
            total = reduce(g, "sum", where(g, mask, t, 0), axis, keepdims, dtype)
            ones = views.broadcast_to(operand(g, where(g, mask, 1, 0)), t.shape)
            cdt = total.dtype if total.dtype.kind == "f" else None
            return UFUNCS["divide"](g, total, reduce(g, "sum", ones, axis, keepdims, cdt))
        a = where(g, mask, t, fill)
    out = reduce(g, kind, a, axis, keepdims, dtype, ddof, empty_ok=initial is not None)
    if initial is not None:
        name = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum"}[kind]
        out = UFUNCS[name](g, out, initial)
    return out


def _copy(g, a) -> Tracer:
    """A copy; a mask is returned as it is (traced values are immutable)."""
    t = operand(g, a)
    return t if t.dtype.kind == "b" else ops.materialize(g, t)


def _at_least_2d(t: Tracer) -> Tracer:
    if isinstance(t, Scalar):
        raise UnsupportedError(f"{user_location()}: np.vstack of a scalar")
    return views.reshape(t, (1, t.shape[0])) if t.ndim == 1 else t


def _outer(g, a, b, out=None):
    """``np.outer``: both operands flattened, their products ``a[i] * b[j]``."""
    if out is not None:
        raise UnsupportedError(f"{user_location()}: np.outer with out= is not supported")
    a = views.reshape(operand(g, a), (-1, 1))
    b = views.reshape(operand(g, b), (1, -1))
    return UFUNCS["multiply"](g, a, b)


def _max_fn(kind: str):
    """np.max/np.min/np.amax/np.amin: ``(a, axis, out, keepdims, initial, where)``."""
    def run(g, a, axis=None, out=None, keepdims=False, *args, **kw):
        kw.update(zip(("initial", "where"), args))
        return _reduction(kind)(g, a, axis, None, out, keepdims, **kw)
    return run


def _var_fn(kind: str):
    """np.var/np.std: ``(a, axis, dtype, out, ddof, keepdims, *, where, mean, correction)``."""
    def run(g, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return _reduction(kind)(g, a, axis, dtype, out, keepdims, ddof, **kw)
    return run


FUNCTIONS: dict[str, Callable] = {
    "sum": _reduction("sum"), "prod": _reduction("prod"),
    "max": _max_fn("max"), "amax": _max_fn("max"),
    "min": _max_fn("min"), "amin": _max_fn("min"), "mean": _reduction("mean"),
    "var": _var_fn("var"), "std": _var_fn("std"),
    "dot": dot, "einsum": einsum, "tensordot": tensordot,
    "outer": _outer, **arrayfns.functions(concatenate), "take": gather.take,
    "take_along_axis": gather.take_along_axis,
    "fix": lambda g, x, out=None: store_out(g, out, UFUNCS["trunc"](g, x), "np.fix"),
    "cumsum": lambda g, a, axis=None, dtype=None, out=None: scan(g, "cumsum", a, axis, dtype,
                                                                 out),
    "cumprod": lambda g, a, axis=None, dtype=None, out=None: scan(g, "cumprod", a, axis, dtype,
                                                                  out),
    "matmul": matmul,
    "reshape": lambda g, a, shape=None, order="C", *, newshape=None, copy=None:
        views.reshape(operand(g, a), shape if shape is not None else newshape, order),
    "transpose": lambda g, a, axes=None: views.transpose(operand(g, a), axes),
    "swapaxes": lambda g, a, x, y: views.swapaxes(operand(g, a), x, y),
    "moveaxis": lambda g, a, s, d: views.moveaxis(operand(g, a), s, d),
    "expand_dims": lambda g, a, axis: views.expand_dims(operand(g, a), axis),
    "squeeze": lambda g, a, axis=None: views.squeeze(operand(g, a), axis),
    "broadcast_to": lambda g, a, shape, subok=False: views.broadcast_to(
        operand(g, a), ops.shape_arg(shape)),
    "sliding_window_view": lambda g, x, window_shape, axis=None, **kw:
        views.sliding_window_view(operand(g, x), window_shape, axis),
    "concatenate": concatenate, "stack": stack, "split": split, "pad": pad,
    "hstack": lambda g, tup, **kw: concatenate(
        g, tup, 0 if operand(g, tup[0]).ndim == 1 else 1, **kw),
    "vstack": lambda g, tup, **kw: concatenate(
        g, [_at_least_2d(operand(g, t)) for t in tup], 0, **kw),
    "matrix_transpose": lambda g, a: views.swapaxes(operand(g, a), -1, -2),
    "where": where, "clip": clip, "triu": _tri("triu"), "tril": _tri("tril"),
    "zeros_like": _like(0), "ones_like": _like(1), "full_like": _like(None),
    "empty_like": _like(0),
    "copy": lambda g, a, **kw: _copy(g, a),
    "astype": lambda g, a, dtype, **kw: astype(operand(g, a), dtype),
    "square": lambda g, x: _square(g, x),
    "ndim": lambda g, a: operand(g, a).ndim,
    "shape": lambda g, a: operand(g, a).shape,
}


FUNCTIONS.update(morefns.functions({"concatenate": concatenate, "stack": stack, "pad": pad,
                                    "where": where, "split": split}))
FUNCTIONS.update(**numerics.functions(concatenate), **creation.functions(),
                 **outparam.functions())
FUNCTIONS.update(numpy_more.functions({k: FUNCTIONS[k] for k in (
    "concatenate", "asarray", "full_like", "zeros_like", "where", "histogram")}))
UFUNCS.update(numpy_more.UFUNC_EXTRAS)


def array_function(self: Tracer, func, types, args, kwargs):
    name = func.__name__
    fn = FUNCTIONS.get(name)
    if fn is None:
        loc = user_location()
        sub = next((m for m in ("linalg", "fft", "random", "ma") if
                    f"numpy.{m}" in (getattr(func, "__module__", "") or "")), None)
        name = f"{sub}.{name}" if sub else name
        raise UnsupportedError(f"{loc}: np.{name} is not supported by polyc.jit (covered: "
                               f"{', '.join(sorted(FUNCTIONS))})\n    {loc.text}")
    g = _graph(args) or self._graph
    return located(f"np.{name}", fn, g, *args, **kwargs)


def located(what: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``; a shape, axis or index error it raises
    without the user's file and line gets them (a plain ``ValueError``
    becomes a :class:`~polyc.errors.ShapeError`, which is one)."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, IndexError) as e:
        loc = user_location()
        msg = str(e)
        if f"{loc.filename}:" in msg:
            raise
        text = f"{loc}: {what}: {msg}\n    {loc.text}"
        if isinstance(e, np.exceptions.AxisError):
            raise AxisError(text) from None
        if type(e) in (ValueError, ShapeError):
            raise ShapeError(text) from None
        if type(e) is IndexError:       # (numpy's class, and polyc's)
            raise IndexBoundsError(text) from None
        raise type(e)(text) from None


def _method(what: str, fn: Callable) -> Callable:
    def method(*args, **kwargs):
        return located(what, fn, *args, **kwargs)
    method.__name__ = fn.__name__
    return method


# -- the Tracer's operators and methods --------------------------------------------
def _op(name: str, swap: bool = False):
    uf = UFUNCS[name]

    def method(self, other):
        if isinstance(other, complex):
            other = np.complex128(other)     # its dtype, which operand() refuses by name
        if not isinstance(other, (Tracer, np.ndarray, int, float, np.generic, list, tuple)) \
                and not hasattr(other, "__index__"):
            return NotImplemented
        args = (other, self) if swap else (self, other)
        if name == "power" and not swap and self.dtype.kind == "b" and type(other) is int \
                and other == 2:
            return _square(self._graph, self)   # numpy's x ** 2 is np.square: int8 here
        return located(name, uf, self._graph, *args)
    return method


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**", "matmul": "@",
            "floordiv": "//", "mod": "%", "and": "&", "or": "|", "xor": "^", "lshift": "<<",
            "rshift": ">>"}


def _inplace(name: str, sym: str):
    """``x op= value``: :meth:`Tracer.update_inplace` (refused on views,
    arguments and arrays with views)."""
    binary = _op(name)

    def method(self, other):
        new = binary(self, selection_operand(self, other))
        if new is NotImplemented:
            return new
        return self.update_inplace(_SYMBOLS[sym], new,
                                   stored_back=subscript_store_follows(sys._getframe(1)))
    return method


def _install() -> None:
    T = Tracer
    T.__array_ufunc__ = array_ufunc
    T.__array_function__ = array_function
    for sym, name in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                      ("truediv", "divide"), ("pow", "power"), ("matmul", "matmul"),
                      ("floordiv", "floor_divide"), ("mod", "remainder"), ("and", "bitwise_and"),
                      ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("lshift", "left_shift"),
                      ("rshift", "right_shift")):
        setattr(T, f"__{sym}__", _op(name))
        setattr(T, f"__r{sym}__", _op(name, swap=True))
        setattr(T, f"__i{sym}__", _inplace(name, sym))
    for sym, name in (("gt", "greater"), ("ge", "greater_equal"), ("lt", "less"),
                      ("le", "less_equal"), ("eq", "equal"), ("ne", "not_equal")):
        setattr(T, f"__{sym}__", _op(name))
    T.__divmod__ = _op("divmod")
    T.__rdivmod__ = _op("divmod", swap=True)
    T.__invert__ = lambda self: _invert(self._graph, self)
    T.__hash__ = object.__hash__
    T.__neg__ = lambda self: _negative(self._graph, self)
    T.__pos__ = lambda self: _no_bool_loop("positive", self) or self
    T.__abs__ = lambda self: _abs(self._graph, self)
    T.__getitem__ = lambda self, key: gather.getitem(self, key)

    T.__setitem__ = lambda self, key, value: located("assignment", setitem, self, key, value)

    def getattr_(self, name):
        # an ndarray method or attribute polyc does not trace: say so by name
        # (dunder names stay AttributeErrors: numpy and hasattr() probe them)
        if not name.startswith("__") and hasattr(np.ndarray, name):
            loc = user_location()
            raise UnsupportedError(f"{loc}: ndarray.{name} is not supported by polyc.jit on "
                                   f"traced arrays\n    {loc.text}")
        raise AttributeError(f"'Tracer' object has no attribute {name!r}")
    T.__getattr__ = getattr_
    # the ndarray methods' own positional orders
    def _sum_like(k):
        def method(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
            return _reduction(k)(self._graph, self, axis, dtype, out, keepdims, **kw)
        return method

    def _max_like(k):
        def method(self, axis=None, out=None, keepdims=False, **kw):
            return _reduction(k)(self._graph, self, axis, None, out, keepdims, **kw)
        return method

    def _var_like(k):
        def method(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
            return _reduction(k)(self._graph, self, axis, dtype, out, keepdims, ddof, **kw)
        return method
    for kind, make in (("sum", _sum_like), ("prod", _sum_like), ("mean", _sum_like),
                       ("max", _max_like), ("min", _max_like), ("var", _var_like),
                       ("std", _var_like)):
        setattr(T, kind, make(kind))

    def reshape_method(self, *shape, order="C", copy=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return views.reshape(self, shape, order)
    T.reshape = reshape_method
    T.transpose = lambda self, *axes: views.transpose(
        self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else
        (axes or None))
    T.T = property(lambda self: views.transpose(self))
    T.mT = property(lambda self: views.swapaxes(self, -1, -2))
    T.swapaxes = lambda self, a, b: views.swapaxes(self, a, b)
    T.astype = lambda self, dtype, copy=True, **kw: astype(self, dtype, copy)
    T.squeeze = lambda self, axis=None: views.squeeze(self, axis)
    T.copy = lambda self, order="C": _copy(self._graph, self)
    T.clip = lambda self, lo=None, hi=None, **kw: clip(self._graph, self, lo, hi, **kw)
    T.dot = lambda self, other, out=None: dot(self._graph, self, other, out)
    T.__round__ = arrayfns.round_builtin
    def as_method(fn):      # np.fn(a, *args) as a.fn(*args): the same arguments after a
        return lambda self, *args, **kw: fn(self._graph, self, *args, **kw)
    T.flatten = lambda self, order="C": FUNCTIONS["ravel"](self._graph, self, order)
    for name in ("round", "repeat", "trace", "argmax", "argmin", "cumsum", "cumprod", "ravel",
                 "any", "all", "diagonal", "take", "put", "searchsorted", "choose"):
        setattr(T, name, as_method(FUNCTIONS[name]))
    T.compress = lambda self, condition, axis=None, out=None: FUNCTIONS["compress"](
        self._graph, condition, self, axis, out)
    for attr in ("__getitem__", "sum", "prod", "max", "min", "mean", "var", "std", "reshape",
                 "transpose", "swapaxes", "astype", "squeeze", "clip", "dot", "cumsum",
                 "cumprod", "round", "repeat", "trace", "argmax", "argmin", "ravel",
                 "flatten", "any", "all", "diagonal", "take", "put", "searchsorted", "choose",
                 "compress"):
        setattr(T, attr, _method(f".{attr.strip('_')}", getattr(T, attr)))


_install()
