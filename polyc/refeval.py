"""Expression evaluation for the numpy reference (:mod:`polyc.reference`).

Owns the evaluation of :mod:`polyc.expr` trees over numpy index grids: the
per-statement environment (:class:`Env`), dtype promotion as C does it,
reads (strided views for linear indices, gathers through index tensors), and
the builtins.  Takes expression trees and numpy arrays, returns numpy arrays.
"""

from __future__ import annotations

import numpy as np

from . import expr as E
from . import refc99 as C99
from .errors import ShapeError

_COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "%": np.remainder, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
          "<<": np.left_shift, ">>": np.right_shift}
_UNARY_FLOAT = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
                "erf": lambda x: _erf(x),
                "fabs": np.abs, "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x),
                "sigmoid": lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)),
                "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
                "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
                "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
                "log1p": np.log1p, "expm1": np.expm1, "exp2": np.exp2, "log2": np.log2,
                "log10": np.log10, "cbrt": np.cbrt, "floor": np.floor, "ceil": np.ceil,
                "trunc": np.trunc, "rint": np.rint, **C99.UNARY}


_erf_scalar = np.vectorize(__import__("math").erf, otypes=[np.float64])


def _erf(x):
    """The error function elementwise (math.erf; numpy has none), in x's dtype."""
    return _erf_scalar(x).astype(x.dtype, copy=False)


class Env:
    """Evaluation state of one statement: arrays, parameter values, the float
    type of literals, and the current chunk's index grids."""

    def __init__(self, arrays, values, float_type, iterators):
        self.arrays, self.values, self.float_type = arrays, values, float_type
        self.iterators = iterators
        self.copy_views = True

    def set_chunk(self, lo, hi):
        n = len(lo)
        self.lo, self.hi = lo, hi
        self.shape = tuple(b - a + 1 for a, b in zip(lo, hi))
        self.grid_list = [np.arange(lo[k], hi[k] + 1, dtype=np.int64)
                          .reshape([-1 if a == k else 1 for a in range(n)]) for k in range(n)]
        self.grids = dict(zip(self.iterators, self.grid_list))
        self.axis = {name: k for k, name in enumerate(self.iterators)}


def dtype_of(v) -> np.dtype:
    return np.asarray(v).dtype  # Python bool/int/float: bool/int64/float64


def promote_dtype(dtypes) -> np.dtype:
    """C's usual arithmetic conversions: any float wins (the widest float),
    else the widest integer (bools count as int64; the integers narrower than
    32 bits as int32, as C promotes them to ``int``, and uint32 as int64)."""
    floats = [d for d in dtypes if d.kind == "f"]
    if floats:
        return np.result_type(*floats)
    ints = [np.dtype(np.int32) if d.itemsize < 4 else np.dtype(np.int64) if d.name == "uint32"
            else d for d in dtypes if d.kind in "iu"]
    return np.result_type(*ints) if ints else np.dtype(np.int64)


def numeric(*vs):
    """Operands converted to their common C arithmetic type."""
    t = promote_dtype([dtype_of(v) for v in vs])
    return [np.asarray(v).astype(t, copy=False) if dtype_of(v) != t else v for v in vs]


def as_ndim(v, n):
    v = np.asarray(v)
    return v.reshape((1,) * (n - v.ndim) + v.shape) if v.ndim < n else v


def _truth(v):
    return v if dtype_of(v) == np.dtype(bool) else np.not_equal(v, 0)


def _narrow(active, cond):
    return cond if active is None else np.logical_and(active, cond)


def _to_float(env, v):
    return v if dtype_of(v).kind == "f" else np.asarray(v).astype(env.float_type)


def eval_expr(e: E.Expr, env: Env, active):
    """Value of ``e`` on the current chunk; ``active`` (a boolean array or
    ``None`` for all) marks the points whose reads must be in range."""
    if isinstance(e, E.Const):
        if isinstance(e.value, (bool, int)):
            return np.int64(e.value)
        return env.float_type.type(e.value)
    if isinstance(e, E.Index):
        return env.grids[e.name]
    if isinstance(e, E.Param):
        return np.int64(env.values[e.name])
    if isinstance(e, E.Access):
        return _access(e, env, active)
    if isinstance(e, E.Unary):
        v = eval_expr(e.operand, env, active)
        if e.op == "!":
            return np.logical_not(_truth(v))
        if e.op == "~":
            return np.invert(numeric(v)[0])
        return np.negative(numeric(v)[0])
    if isinstance(e, E.Binary):
        if e.op in ("&&", "||"):
            a = _truth(eval_expr(e.lhs, env, active))
            b = _truth(eval_expr(e.rhs, env, _narrow(active, a if e.op == "&&" else ~a)))
            return np.logical_and(a, b) if e.op == "&&" else np.logical_or(a, b)
        a, b = numeric(eval_expr(e.lhs, env, active), eval_expr(e.rhs, env, active))
        if e.op in _COMPARE:
            return _COMPARE[e.op](a, b)
        if e.op == "/" and dtype_of(a).kind != "f":
            return np.floor_divide(a, b)
        return _ARITH[e.op](a, b)
    if isinstance(e, E.Select):
        c = _truth(eval_expr(e.cond, env, active))
        a, b = numeric(eval_expr(e.then, env, _narrow(active, c)),
                    eval_expr(e.otherwise, env, _narrow(active, ~c)))
        return np.where(c, a, b)
    if isinstance(e, E.Call):
        return _call(e, env, [eval_expr(a, env, active) for a in e.args])
    raise AssertionError(f"unknown expression node {type(e).__name__}")


def _call(e: E.Call, env: Env, args):
    fn = e.fn
    if fn in _UNARY_FLOAT:
        return _UNARY_FLOAT[fn](_to_float(env, args[0]))
    if fn == "abs":
        return np.abs(numeric(args[0])[0])
    if fn.startswith("cast_"):
        return np.asarray(args[0]).astype(fn[5:])
    a, b = numeric(*args)
    if fn in ("fmax", "fmin") or (fn in ("max", "min") and dtype_of(a).kind == "f"):
        a, b = _to_float(env, a), _to_float(env, b)
        return np.fmax(a, b) if fn in ("fmax", "max") else np.fmin(a, b)
    if fn in ("max", "min"):
        return np.maximum(a, b) if fn == "max" else np.minimum(a, b)
    if fn == "pow":
        return np.power(_to_float(env, a), _to_float(env, b))
    if fn == "ipow":
        with np.errstate(over="ignore"):
            p = np.power(a, np.maximum(b, 0))
        neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        return np.where(b < 0, neg.astype(p.dtype), p)
    if fn in C99.BINARY:
        return C99.BINARY[fn](_to_float(env, a), _to_float(env, b))
    if fn in E.MATH_FUNCTIONS2:
        f = {"atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
             "fmod": np.fmod}[fn]
        return f(_to_float(env, a), _to_float(env, b))
    raise NotImplementedError(f"reference.evaluate: builtin {fn!r}")


def _linear(e: E.Expr, env: Env):
    """``(coefficients by axis, constant)`` when ``e`` is an integer linear
    function of the iterators (sizes count as constants), else ``None``."""
    if isinstance(e, E.Const):
        return ({}, e.value) if isinstance(e.value, int) else None
    if isinstance(e, E.Param):
        return {}, int(env.values[e.name])
    if isinstance(e, E.Index):
        return {env.axis[e.name]: 1}, 0
    if isinstance(e, E.Unary) and e.op == "-":
        a = _linear(e.operand, env)
        return None if a is None else ({k: -c for k, c in a[0].items()}, -a[1])
    if isinstance(e, E.Binary) and e.op in ("+", "-", "*"):
        a, b = _linear(e.lhs, env), _linear(e.rhs, env)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (co, k), f = (a, b[1]) if a[0] else (b, a[1])
            return {ax: c * f for ax, c in co.items()}, k * f
        sign = 1 if e.op == "+" else -1
        co = dict(a[0])
        for ax, c in b[0].items():
            co[ax] = co.get(ax, 0) + sign * c
        return co, a[1] + sign * b[1]
    return None


def _strided_view(e: E.Access, arr: np.ndarray, env: Env):
    """A read-only strided view of ``arr`` giving ``e`` on the whole chunk
    (one axis per iterator, extent 1 where unused), when every index is
    linear in the iterators and stays in range on the chunk; else ``None``."""
    n = len(env.shape)
    start, strides, used, plain = [], [0] * n, set(), True
    for d, ie in enumerate(e.indices):
        lin = _linear(ie, env)
        if lin is None:
            return None
        co, k = lin
        first = k + sum(c * env.lo[ax] for ax, c in co.items())
        lo = k + sum(c * (env.lo[ax] if c > 0 else env.hi[ax]) for ax, c in co.items())
        hi = k + sum(c * (env.hi[ax] if c > 0 else env.lo[ax]) for ax, c in co.items())
        if lo < 0 or hi >= arr.shape[d]:
            return None
        start.append(first)
        plain = plain and isinstance(ie, E.Index) and env.axis[ie.name] not in used
        for ax, c in co.items():
            strides[ax] += c * arr.strides[d]
            used.add(ax)
    shape = [env.shape[ax] if ax in used else 1 for ax in range(n)]
    if 0 in shape:
        return None
    base = arr[tuple(slice(s, None) for s in start)]
    view = np.lib.stride_tricks.as_strided(base, shape, strides, writeable=False)
    # a sliding window (h + kh) broadcasts badly: copy it when asked
    return view if plain or not env.copy_views else np.ascontiguousarray(view)


def _access(e: E.Access, env: Env, active):
    arr = env.arrays[e.tensor]
    n = len(env.shape)
    if len(e.indices) != arr.ndim:
        raise ShapeError(f"reference.evaluate: {E.to_text(e)} has {len(e.indices)} "
                         f"indices but {e.tensor} has rank {arr.ndim}")
    view = _strided_view(e, arr, env)
    if view is not None:
        return view
    idx = []
    for d, ie in enumerate(e.indices):
        v = eval_expr(ie, env, active)
        if dtype_of(v).kind != "i":
            v = np.asarray(v).astype(np.int64)  # a gather through a non-int64 value
        bad = np.logical_or(v < 0, v >= arr.shape[d])
        if np.any(bad):
            hit = bad if active is None else np.logical_and(bad, active)
            if np.any(hit):
                where = np.unravel_index(int(np.argmax(np.broadcast_to(hit, env.shape))),
                                         env.shape)
                point = {env.iterators[k]: int(env.lo[k] + where[k]) for k in range(n)}
                bad_v = np.broadcast_to(v, env.shape)[where]
                raise IndexError(f"reference.evaluate: {E.to_text(e)} reads index {bad_v} "
                                 f"of dimension {d} of {e.tensor} (extent {arr.shape[d]}) "
                                 f"at {point}")
            v = np.clip(v, 0, max(arr.shape[d] - 1, 0))
        idx.append(v)
    return arr[tuple(idx)]
