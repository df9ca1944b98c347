"""The ufuncs :func:`polyc.jit` traces: each builds an elementwise node (or a
mask template, for comparisons and logical operations) with numpy 2's
semantics: NEP 50 promotion, NaN propagation of ``maximum``/``minimum``,
integer vs float division, numpy's fast paths of ``power``.  The table
:data:`UFUNCS` maps a ufunc's ``__name__`` to its builder
``(graph, *inputs) -> Tracer``; :mod:`polyc.graph.numpy_api` dispatches to it
(and adds ``matmul``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import DTypeError, UnsupportedError
from . import ops
from .core import Tracer, user_location
from .ops import Scalar, elementwise, literal, operand


def _float_dtype(*ops_: Any) -> np.dtype:
    """The float type numpy's float ufuncs (``sqrt``, ``arctan2``...) give:
    the operands' float type, else the smallest float holding their integers
    (float16 for uint8, int8 and bool, float32 for int16 and uint16)."""
    dt = ops.result_dtype(*ops_)
    return dt if dt.kind == "f" else np.result_type(dt, np.float16)


def _unary_float(fn: str) -> Callable:
    def run(g, x):
        x = operand(g, x)
        dt = _float_dtype(x)
        return elementwise(g, fn, lambda a: f"{fn}({a})", [x], dt, compute_dtype=dt)
    return run


def _binary(sym: str) -> Callable:
    def run(g, a, b):
        a, b = operand(g, a), operand(g, b)
        if a.dtype.kind == "b" and b.dtype.kind == "b" and sym == "-":
            loc = user_location()
            raise DTypeError(f"{loc}: numpy's subtract (-) of booleans is not supported "
                             f"(numpy's TypeError); use ^ or np.logical_xor\n    {loc.text}")
        if a.dtype.kind == "b" and b.dtype.kind == "b" and sym in "+*":
            # numpy's add and multiply of booleans are logical or and and
            return _logical("||" if sym == "+" else "&&")(g, a, b)
        return elementwise(g, {"+": "add", "-": "subtract", "*": "multiply"}[sym],
                           lambda x, y: f"({x} {sym} {y})", [a, b])
    return run


def _divide(g, a, b):
    a, b = operand(g, a), operand(g, b)
    dt = ops.result_dtype(a, b)
    dt = dt if dt.kind == "f" else np.dtype(np.float64)      # (numpy's true_divide)
    both_int = all(o.dtype.kind in "iub" for o in (a, b))
    return elementwise(g, "divide", lambda x, y: f"((1.0 * {x}) / {y})" if both_int
                       else f"({x} / {y})", [a, b], dt, compute_dtype=dt)


def _int8_of_bools(a, b):
    """numpy's loop of two booleans for ``power remainder``: int8."""
    if ops.result_dtype(a, b).kind != "b":
        return a, b
    return tuple(astype(o, np.int8) if isinstance(o, Tracer) else Scalar(np.int8(o.value))
                 for o in (a, b))


def _power(g, a, b):
    """``a ** b``; a scalar exponent of 2, 1, 0, -1 or 0.5 on a float array
    takes numpy's fast paths (``x * x``, ``x``, ``1``, ``1 / x``,
    ``sqrt(x)``), which give the same values; other exponents call ``pow``.
    An integer power with a negative literal exponent is numpy's
    ``ValueError`` (a :class:`~polyc.errors.ShapeError` at the user's line)."""
    a, b = _int8_of_bools(operand(g, a), operand(g, b))
    if isinstance(b, Scalar) and b.dtype.kind in "iu" and a.dtype.kind in "iu" and b.value < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    if isinstance(b, Scalar) and not isinstance(a, Scalar) and b.dtype.kind in "iuf":
        e = float(b.value)
        fast = {2.0: lambda x, y: f"({x} * {x})", 1.0: lambda x, y: f"(1 * {x})"}
        if a.dtype.kind == "f" or ops.result_dtype(a, b).kind == "f":
            fast.update({0.0: lambda x, y: "1.0", -1.0: lambda x, y: f"(1.0 / {x})",
                         0.5: lambda x, y: f"sqrt({x})"})
        else:
            fast[0.0] = lambda x, y: "1"
        if e in fast:
            return elementwise(g, "power", fast[e], [a, b])
    if ops.result_dtype(a, b).kind in "iu":
        # numpy's integer power, wrapping; a negative exponent in an array, numpy's
        # ValueError, gives the truncated value (1 for 1, +-1 for -1, else 0)
        return elementwise(g, "power", lambda x, y: f"ipow({x}, {y})", [a, b])
    return elementwise(g, "power", lambda x, y: f"pow({x}, {y})", [a, b])


def _floor_divide(g, a, b):
    """``a // b``: on integers TC's ``/`` (it floors and gives 0 for a zero
    divisor, as numpy); on floats numpy's ``npy_divmod``: ``fmod`` first,
    ``(a - mod) / b`` less one where the remainder's sign was adjusted,
    snapped to the nearest integer (``a / b`` for a zero divisor, a zero
    quotient signed as ``a / b``), so every bit agrees with numpy's."""
    a, b = operand(g, a), operand(g, b)
    dt = ops.result_dtype(a, b)
    if dt.kind == "b":
        loc = user_location()
        raise UnsupportedError(f"{loc}: np.floor_divide (//) of booleans is not supported by "
                               f"polyc.jit\n    {loc.text}")
    if dt.kind in "iu":
        return elementwise(g, "floor_divide", lambda x, y: f"({x} / {y})", [a, b])

    def text(x, y):
        m = f"fmod({x}, {y})"
        adj = f"((({m} != 0) && (({y} < 0) != ({m} < 0))) ? 1.0 : 0.0)"
        d = f"((({x} - {m}) / {y}) - {adj})"
        snap = f"(floor({d}) + ((({d} - floor({d})) > 0.5) ? 1.0 : 0.0))"
        return (f"(({y} == 0) ? ({x} / {y}) : (({d} != 0) ? {snap} : "
                f"copysign(0.0, {x} / {y})))")
    return elementwise(g, "floor_divide", text, [a, b], dt, compute_dtype=dt)


def _remainder(g, a, b):
    """``a % b`` with numpy's sign rule (the divisor's), integers and floats."""
    a, b = _int8_of_bools(operand(g, a), operand(g, b))
    return elementwise(g, "remainder", lambda x, y: f"({x} % {y})", [a, b])


def _compare(sym: str) -> Callable:
    def run(g, a, b):
        ops_ = [operand(g, a), operand(g, b)]
        dt = ops.result_dtype(*ops_)
        big = [o for o in ops_ if isinstance(o, Scalar) and o.weak and o.dtype.kind == "i"
               and dt.kind in "iu" and not np.iinfo(dt).min <= o.value <= np.iinfo(dt).max]
        arrays = [o for o in ops_ if isinstance(o, Tracer)]
        if big and len(arrays) == 1:
            # numpy 2 compares a Python int beyond the array's type exactly: the
            # same outcome for every element (that of element 0); x == x is true
            a_, b_ = (0 if isinstance(o, Tracer) else o.value for o in ops_)
            same = {"<": a_ < b_, "<=": a_ <= b_, ">": a_ > b_, ">=": a_ >= b_,
                    "==": a_ == b_, "!=": a_ != b_}[sym]
            return elementwise(g, "compare", lambda x: f"({x} {'==' if same else '!='} {x})",
                               arrays, np.dtype(bool), lazy=True, compute_dtype=dt)
        t = elementwise(g, "compare", lambda x, y: f"({x} {sym} {y})", ops_, np.dtype(bool),
                        lazy=True, compute_dtype=dt)
        return t
    return run


def _logical(sym: str) -> Callable:
    def run(g, a, b):
        return elementwise(g, "logical", lambda x, y: f"({_truth(x)} {sym} {_truth(y)})",
                           [a, b], np.dtype(bool), lazy=True, compute_dtype=np.dtype(bool))
    return run


def _truth(text: str) -> str:
    return text


def _bitwise(name: str, sym: str) -> Callable:
    """``&``, ``|`` (``bitwise_and``, ``bitwise_or``): logical on boolean
    masks, as numpy's; bitwise on integers (numpy's result type); a
    TypeError on floats, as numpy's."""
    def run(g, a, b):
        ops_ = [operand(g, a), operand(g, b)]
        if not _all_bool(name, ops_):
            return elementwise(g, name, lambda x, y: f"({x} {sym[0]} {y})", ops_)
        return elementwise(g, "logical", lambda x, y: f"({x} {sym} {y})", ops_,
                           np.dtype(bool), lazy=True, compute_dtype=np.dtype(bool))
    return run


def _bitwise_xor(g, a, b):
    """``^`` (``bitwise_xor``): logical on boolean masks, as numpy's;
    bitwise on integers."""
    ops_ = [operand(g, a), operand(g, b)]
    if not _all_bool("bitwise_xor", ops_):
        return elementwise(g, "bitwise_xor", lambda x, y: f"({x} ^ {y})", ops_)
    return elementwise(g, "logical", lambda x, y: f"(({x} != 0) != ({y} != 0))", ops_,
                       np.dtype(bool), lazy=True, compute_dtype=np.dtype(bool))


def _all_bool(name: str, ops_) -> bool:
    """Whether the operands of bitwise ufunc ``name`` are all booleans
    (else integers, possibly with booleans); numpy's TypeError for floats."""
    kinds = {o.dtype.kind for o in ops_}
    if kinds & {"f"}:
        loc = user_location()
        raise DTypeError(f"{loc}: ufunc '{name}' not supported for float inputs (numpy "
                        f"raises too)\n    {loc.text}")
    return kinds <= {"b"}


def _invert(g, x):
    """``~`` (``invert``): logical not of a mask, bitwise not of integers."""
    x = operand(g, x)
    if not _all_bool("invert", [x]):
        return elementwise(g, "invert", lambda a: f"(~{a})", [x])
    return elementwise(g, "logical_not", lambda a: f"(!{a})", [x], np.dtype(bool), lazy=True,
                       compute_dtype=x.dtype)


def _maximum(kind: str) -> Callable:
    cmp = ">" if kind == "maximum" else "<"

    def run(g, a, b):
        # numpy propagates NaN from either operand (C's fmax does not)
        return elementwise(g, kind, lambda x, y: f"(({x} {cmp} {y} || {x} != {x}) ? {x} : {y})",
                           [a, b])
    return run


def _abs(g, x):
    x = operand(g, x)
    fn = "fabs" if x.dtype.kind == "f" else "abs"
    return elementwise(g, "absolute", lambda a: f"{fn}({a})", [x])


def _no_bool_loop(name: str, x) -> None:
    """numpy has no boolean loop for ``name`` (its ``TypeError``)."""
    if x.dtype.kind == "b":
        loc = user_location()
        raise DTypeError(f"{loc}: np.{name} of booleans: numpy has no loop for it (its "
                         f"TypeError); use ~x or np.logical_not(x), or convert first, e.g. "
                         f"x.astype(np.int8)\n    {loc.text}")


def _negative(g, x):
    x = operand(g, x)
    _no_bool_loop("negative", x)
    return elementwise(g, "negative", lambda a: f"(-{a})", [x])


def _positive(g, x):
    x = operand(g, x)
    _no_bool_loop("positive", x)
    return ops.materialize(g, x)


def _reciprocal(g, x):
    x = operand(g, x)
    if x.dtype.kind == "f":
        return elementwise(g, "reciprocal", lambda a: f"(1.0 / {a})", [x])
    # numpy's integer 1 / x truncates toward zero (TC's / floors); no -1 in unsigned types.
    # numpy computes 1.0 / x and converts: x86's conversion of 1/0 = inf gives the
    # type's minimum for int32 and int64, and 0 for the narrower and unsigned types
    if x.dtype.kind == "b":             # numpy's int8 loop: 1 / True is 1, 1 / False 0
        return astype(x, np.int8)
    if x.dtype.kind == "u":
        return elementwise(g, "reciprocal", lambda a: f"({a} == 1 ? 1 : 0)", [x])
    zero = literal(np.iinfo(x.dtype).min if x.dtype.itemsize >= 4 else 0, x.dtype)
    return elementwise(g, "reciprocal", lambda a: f"({a} == 1 ? 1 : ({a} == -1 ? -1 : "
                       f"({a} == 0 ? {zero} : 0)))", [x])


def _isnan(kind: str) -> Callable:
    def run(g, x):
        x = operand(g, x)
        if x.dtype.kind != "f":
            text = {"isnan": "0", "isinf": "0", "isfinite": "1"}[kind]
            return elementwise(g, kind, lambda a: text, [x],
                               np.dtype(bool), lazy=True, compute_dtype=x.dtype)
        inf = literal(np.inf, x.dtype)
        fn = {"isnan": lambda a: f"({a} != {a})",
              "isinf": lambda a: f"({a} == {inf} || {a} == -{inf})",
              "isfinite": lambda a: f"({a} == {a} && {a} != {inf} && {a} != -{inf})"}[kind]
        return elementwise(g, kind, fn, [x], np.dtype(bool), lazy=True, compute_dtype=x.dtype)
    return run


def _rounding(fn: str) -> Callable:
    """``floor``, ``ceil``, ``trunc``: C's function of the float type; on
    integers the values themselves, in their dtype (numpy 2)."""
    unary = _unary_float(fn)

    def run(g, x):
        x = operand(g, x)
        if x.dtype.kind in "iub":
            return ops.materialize(g, x)
        return unary(g, x)
    return run


def _binary_float(name: str, fn: str) -> Callable:
    """A float function of two values (``arctan2`` as C's ``atan2``)."""
    def run(g, a, b):
        a, b = operand(g, a), operand(g, b)
        dt = _float_dtype(a, b)
        return elementwise(g, name, lambda x, y: f"{fn}({x}, {y})", [a, b], dt,
                           compute_dtype=dt)
    return run


def _logaddexp(base2: bool) -> Callable:
    """``log(exp(a) + exp(b))`` (base 2: ``log2(2**a + 2**b)``) as numpy
    computes it: the larger plus ``log1p`` of the smaller's ratio, equal
    values (infinities included) plus ``log 2`` (1), NaN kept."""
    name = "logaddexp2" if base2 else "logaddexp"

    def run(g, a, b):
        a, b = operand(g, a), operand(g, b)
        dt = _float_dtype(a, b)

        def text(x, y):
            if base2:
                def step(hi, lo):
                    return f"({hi} + log1p(exp2({lo} - {hi})) * 1.4426950408889634)"
                same = f"({x} + 1.0)"
            else:
                def step(hi, lo):
                    return f"({hi} + log1p(exp({lo} - {hi})))"
                same = f"({x} + 0.6931471805599453)"
            return (f"(({x} > {y}) ? {step(x, y)} : (({x} == {y}) ? {same} : "
                    f"{step(y, x)}))")
        return elementwise(g, name, text, [a, b], dt, compute_dtype=dt)
    return run


def _sign(g, x):
    """``sign``: -1, 0 or 1 in x's dtype; a float NaN stays NaN, and both
    zeros give +0 (numpy's values)."""
    x = operand(g, x)
    if x.dtype.kind == "b":
        loc = user_location()
        raise UnsupportedError(f"{loc}: np.sign of booleans (numpy has no loop for it)"
                               f"\n    {loc.text}")
    if x.dtype.kind == "f":
        return elementwise(g, "sign", lambda a: f"(({a} > 0) ? 1.0 : (({a} < 0) ? -1.0 : "
                           f"(({a} == {a}) ? 0.0 : {a})))", [x])
    if x.dtype.kind == "u":         # (no -1 in an unsigned type)
        return elementwise(g, "sign", lambda a: f"(({a} > 0) ? 1 : 0)", [x])
    return elementwise(g, "sign", lambda a: f"(({a} > 0) ? 1 : (({a} < 0) ? -1 : 0))", [x])


def _heaviside(g, x, h):
    """``heaviside(x, h)``: 0 below zero, ``h`` at zero, 1 above, NaN kept
    (numpy's values)."""
    x, h = operand(g, x), operand(g, h)
    dt = _float_dtype(x, h)
    return elementwise(g, "heaviside", lambda a, b: f"(({a} < 0) ? 0.0 : (({a} == 0) ? {b} : "
                       f"(({a} > 0) ? 1.0 : {a})))", [x, h], dt, compute_dtype=dt)


def _fmod(g, a, b):
    """``fmod``: the remainder with the dividend's sign.  Floats: C's
    ``fmod``.  Integers: TC's ``%`` (the divisor's sign, 0 for a zero
    divisor, as numpy's) less the divisor where a nonzero remainder's sign
    differs from the dividend's, so a zero divisor gives 0 as numpy's."""
    a, b = operand(g, a), operand(g, b)
    dt = ops.result_dtype(a, b)
    if dt.kind == "b":
        loc = user_location()
        raise UnsupportedError(f"{loc}: np.fmod of booleans is not supported by polyc.jit "
                               f"(numpy computes it in int8)\n    {loc.text}")
    if dt.kind in "iu":
        def text(x, y):
            m = f"({x} % {y})"
            return f"((({m} != 0) && (({x} < 0) != ({y} < 0))) ? ({m} - {y}) : {m})"
        return elementwise(g, "fmod", text, [a, b], dt, compute_dtype=dt)
    return _binary_float("fmod", "fmod")(g, a, b)


def _divmod(g, a, b):
    """``np.divmod``/``divmod()``: ``(a // b, a % b)``, numpy's two results."""
    return _floor_divide(g, a, b), _remainder(g, a, b)


def _logical_xor(g, a, b):
    a, b = operand(g, a), operand(g, b)
    dt = ops.result_dtype(a, b)
    return elementwise(g, "logical_xor", lambda x, y: f"(({x} != 0) != ({y} != 0))", [a, b],
                       np.dtype(bool), lazy=True, compute_dtype=dt)


def _signbit(g, x):
    """``signbit``: the sign bit, of zeros and NaNs too (``copysign``)."""
    x = operand(g, x)
    if x.dtype.kind != "f":
        return elementwise(g, "signbit", lambda a: f"({a} < 0)", [x], np.dtype(bool),
                           lazy=True, compute_dtype=x.dtype)
    return elementwise(g, "signbit", lambda a: f"(copysign(1.0, {a}) < 0)", [x],
                       np.dtype(bool), lazy=True, compute_dtype=x.dtype)


def _scaled(name: str, factor: float) -> Callable:
    """``deg2rad``/``rad2deg``: ``x`` times the constant numpy's loop uses,
    rounded to the float type."""
    def run(g, x):
        x = operand(g, x)
        dt = _float_dtype(x)
        c = ops.literal(factor, dt)
        return elementwise(g, name, lambda a: f"({a} * {c})", [x], dt, compute_dtype=dt)
    return run


def _float_power(g, a, b):
    """``float_power``: ``power`` in float64 (numpy's rule)."""
    f64 = np.dtype(np.float64)
    a, b = operand(g, a), operand(g, b)
    conv = [ops.materialize(g, t, dtype=f64) if isinstance(t, Tracer) and t.dtype != f64
            else t for t in (a, b)]
    return _power(g, *conv)


def _shift(name: str) -> Callable:
    """``right_shift``/``left_shift`` (``>>``, ``<<``) of integers, in numpy's
    result type: a count outside 0..width-1 of the type C computes in (int32
    for the types up to 16 bits, wrapped to them when stored) gives 0, or -1
    for a negative value shifted right, as numpy's."""
    def run(g, a, b):
        ops_ = [operand(g, a), operand(g, b)]
        if any(o.dtype.kind not in "iub" for o in ops_):
            loc = user_location()
            raise DTypeError(f"{loc}: ufunc '{name}' not supported for "
                            f"{'/'.join(sorted({o.dtype.name for o in ops_}))} inputs (numpy "
                            f"raises too: integers and booleans only)\n    {loc.text}")
        if any(o.dtype.kind == "b" for o in ops_):
            # numpy shifts booleans in their promoted integer type (int8 for two)
            dt = ops.result_dtype(*ops_)
            dt = np.dtype(np.int8) if dt.kind == "b" else dt
            ops_ = [ops.materialize(g, o, dtype=dt) if isinstance(o, Tracer)
                    and o.dtype.kind == "b" else o for o in ops_]
        sym = ">>" if name == "right_shift" else "<<"
        return elementwise(g, name, lambda x, y: f"({x} {sym} {y})", ops_)
    return run


def _square(g, x):
    x = operand(g, x)
    if x.dtype.kind == "b":             # numpy's boolean square is its int8 loop
        x = astype(x, np.int8)
    return elementwise(g, "square", lambda a: f"({a} * {a})", [x])


def _logical_not(g, x):
    x = operand(g, x)
    return elementwise(g, "logical_not", lambda a: f"(!{a})" if x.dtype.kind == "b"
                       else f"({a} == 0)", [x], np.dtype(bool), lazy=True,
                       compute_dtype=x.dtype)


#: ufunc name -> builder(graph, *inputs)
UFUNCS: dict[str, Callable] = {
    "add": _binary("+"), "subtract": _binary("-"), "multiply": _binary("*"),
    "divide": _divide, "true_divide": _divide, "power": _power,
    "floor_divide": _floor_divide, "remainder": _remainder, "divmod": _divmod,
    "negative": _negative, "positive": _positive,
    "conjugate": lambda g, x: (astype(operand(g, x), np.int8) if operand(g, x).dtype.kind
                               == "b" else ops.materialize(g, operand(g, x))),  # (real types)
    "sqrt": _unary_float("sqrt"), "exp": _unary_float("exp"), "log": _unary_float("log"),
    "tanh": _unary_float("tanh"), "erf": _unary_float("erf"),
    **{name: _unary_float(fn) for name, fn in (
        ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("arcsin", "asin"),
        ("arccos", "acos"), ("arctan", "atan"), ("sinh", "sinh"), ("cosh", "cosh"),
        ("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh"),
        ("log1p", "log1p"), ("expm1", "expm1"), ("exp2", "exp2"), ("log2", "log2"),
        ("log10", "log10"), ("cbrt", "cbrt"), ("rint", "rint"))},
    "floor": _rounding("floor"), "ceil": _rounding("ceil"), "trunc": _rounding("trunc"),
    "sign": _sign,
    "arctan2": _binary_float("arctan2", "atan2"), "hypot": _binary_float("hypot", "hypot"),
    "logaddexp": _logaddexp(False), "logaddexp2": _logaddexp(True),
    "copysign": _binary_float("copysign", "copysign"), "fmod": _fmod,
    "heaviside": _heaviside, "logical_xor": _logical_xor, "signbit": _signbit,
    "deg2rad": _scaled("deg2rad", np.pi / 180.0), "radians": _scaled("radians", np.pi / 180.0),
    "rad2deg": _scaled("rad2deg", 180.0 / np.pi), "degrees": _scaled("degrees", 180.0 / np.pi),
    "float_power": _float_power, "right_shift": _shift("right_shift"),
    "left_shift": _shift("left_shift"),
    "reciprocal": _reciprocal, "absolute": _abs, "fabs": _unary_float("fabs"), "square": _square,
    "maximum": _maximum("maximum"), "minimum": _maximum("minimum"),
    "fmax": lambda g, a, b: elementwise(g, "fmax", lambda x, y: f"fmax({x}, {y})", [a, b]),
    "fmin": lambda g, a, b: elementwise(g, "fmin", lambda x, y: f"fmin({x}, {y})", [a, b]),
    "greater": _compare(">"), "greater_equal": _compare(">="), "less": _compare("<"),
    "less_equal": _compare("<="), "equal": _compare("=="), "not_equal": _compare("!="),
    "logical_and": _logical("&&"), "logical_or": _logical("||"),
    "logical_not": _logical_not,
    "isnan": _isnan("isnan"), "isinf": _isnan("isinf"), "isfinite": _isnan("isfinite"),
    "bitwise_and": _bitwise("bitwise_and", "&&"), "bitwise_or": _bitwise("bitwise_or", "||"),
    "bitwise_xor": _bitwise_xor,
    "invert": _invert,
}


def astype(t: Tracer, dtype, copy: bool = True) -> Tracer:
    """``t.astype(dtype)``: a converted copy (``copy=False``: ``t`` itself
    when it already has ``dtype``); to ``bool``, ``t != 0``."""
    dt = ops.check_dtype(dtype, "astype's target")
    if dt == t.dtype and not copy:
        return t
    if dt.kind == "b":
        if t.dtype.kind == "b":
            return t
        return elementwise(t._graph, "astype", lambda a: f"({a} != 0)", [t], dt, lazy=True,
                           compute_dtype=t.dtype)
    return ops.materialize(t._graph, t, "astype", dt)
