"""Printing :mod:`polyc.expr` trees as C99 expressions.

Two modes:

* *index* expressions: 64-bit integer arithmetic (``int64_t`` everywhere,
  literals ``INT64_C``), floor division and remainder as TC and isl define
  them.  Used for subscripts, loop bounds, extents and statement iterators;
  their values are bounded by the iteration domains and tensor shapes, which
  the runtime checks, so they never overflow 64 bits.
* *value* expressions, typed as C's usual arithmetic conversions type them
  (the rules of the numpy oracle, :mod:`polyc.refeval`): an integer literal,
  index or size is ``int64``, a float literal has the statement's float type
  (its output's when that is a float, else ``float64``), a read has its
  tensor's dtype, arithmetic takes the wider operand type (any float wins),
  comparisons and logic give 0/1; the statement converts the result to its
  output type once, at the store.  Integer ``+ - *`` wrap modulo 2^32/2^64
  as numpy's do (computed in unsigned arithmetic: no undefined behaviour);
  integer ``/`` and ``%`` by zero give 0 as numpy's do (instead of SIGFPE).

User identifiers never reach the output verbatim: iterators print as
``i_<name>``, parameters as ``p_<name>``, tensors as ``t_<name>``, extents as
``d<k>_<name>``, all after :func:`check_identifier`.  polyc's own names start
with ``polyc_`` and isl's loop iterators are ``c<k>[_<j>]``, so the name spaces are
disjoint.  Floating constants print exactly: the value is first rounded to
the target type (as numpy converts it), then printed as a C99 hexadecimal
float, ``INFINITY``, or, for a NaN, its exact bit pattern.
"""

from __future__ import annotations

import re
import struct
from typing import Callable

import numpy as np

from polyc import expr as E
from polyc.errors import UnsupportedError
from polyc.ir import C_TYPES, HALF_DTYPES, is_float

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LOOP_ITERATOR = re.compile(r"c[0-9]+(_[0-9]+)*\Z")

#: Longest identifier accepted (C99 guarantees 63 significant characters for
#: internal names; gcc and clang have no limit).
MAX_IDENTIFIER = 200


def check_identifier(name: str) -> str:
    """Return ``name`` if it is a plain ASCII identifier, else raise
    :class:`UnsupportedError` (defence in depth: frontends validate too)."""
    if not isinstance(name, str) or not _IDENT.match(name) or len(name) > MAX_IDENTIFIER:
        raise UnsupportedError(f"identifier {str(name)[:40]!r} cannot be used in "
                               "generated code (use ASCII letters, digits and '_', "
                               f"at most {MAX_IDENTIFIER} characters)")
    return name


def iterator_name(name: str) -> str:
    return "i_" + check_identifier(name)


def param_name(name: str) -> str:
    return "p_" + check_identifier(name)


def tensor_name(name: str) -> str:
    return "t_" + check_identifier(name)


def extent_name(tensor: str, dim: int) -> str:
    """The row-major extent of dimension ``dim`` of ``tensor``.  A prefix, not
    a suffix: ``t_A_d1`` would be the pointer of a tensor named ``A_d1``."""
    return f"d{int(dim)}_{check_identifier(tensor)}"


def loop_iterator_name(name: str) -> str:
    """An isl AST loop iterator (``c0``, ``c1``, ...; ``c0_0`` when a size is
    named ``c0``), printed as is; anything else would be a polyc bug (it could
    collide with a mangled name)."""
    assert isinstance(name, str) and _LOOP_ITERATOR.match(name), \
        f"unexpected AST iterator name {name!r}"
    return check_identifier(name)


def _nan_bits(value: float, ctype: str) -> int:
    if ctype == "float":
        with np.errstate(all="ignore"):
            return int(np.array(value, dtype=np.float64).astype(np.float32).view(np.uint32))
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def float_literal(value: float, ctype: str) -> str:
    """An exact C expression of ``value`` converted to ``ctype`` (``float`` or
    ``double``) as numpy converts it: rounded to nearest (overflowing to
    infinity), subnormals and the sign of zero kept, a NaN's sign and payload
    kept bit for bit."""
    value = float(value)
    if ctype == "float":
        with np.errstate(all="ignore"):
            value32 = np.array(value, dtype=np.float64).astype(np.float32)
        if value == value:          # not NaN: the float32 value, exactly
            value = float(value32)
    elif ctype != "double":
        raise AssertionError(ctype)
    if value != value:
        if ctype == "float":
            return f"polyc_bits_float(UINT32_C(0x{_nan_bits(value, ctype):08x}))"
        return f"polyc_bits_double(UINT64_C(0x{_nan_bits(value, ctype):016x}))"
    if value in (float("inf"), float("-inf")):
        return f"(({ctype})INFINITY)" if value > 0 else f"(-({ctype})INFINITY)"
    return f"(({ctype}){value.hex()})"


def int_literal(value: int) -> str:
    value = int(value)
    if not -(2 ** 63) <= value < 2 ** 63:
        raise UnsupportedError(f"integer constant {value} does not fit in 64 bits")
    if value == -(2 ** 63):
        return "INT64_MIN"
    return f"INT64_C({value})"


def promote(*dtypes: str) -> str:
    """C's usual arithmetic conversions on polyc dtypes (``refeval.promote_dtype``):
    the widest float if any, else the widest integer; ``bool`` (a comparison's
    0/1) counts as ``int64``; the narrow integers (int8, int16, uint8, uint16)
    as ``int32``, as C promotes them to ``int``; ``uint32`` as ``int64``."""
    floats = [d for d in dtypes if is_float(d)]
    if floats:
        return "float64" if "float64" in floats else "float32"
    return "int32" if dtypes and all(d in _INT32_COMPUTED for d in dtypes) else "int64"


#: the integer types whose values compute in ``int32`` (C's integer promotion)
_INT32_COMPUTED = ("int8", "int16", "uint8", "uint16", "int32")


def convert(text: str, frm: str, to: str) -> str:
    """``text`` of dtype ``frm`` (or ``"bool"``: a C ``int`` 0/1) converted to
    dtype ``to`` (a C conversion; the half types through the prelude's
    ``polyc_<type>_to_f32`` and ``polyc_f32_to_<type>``, float16 rounded
    directly from any float type; a float to an integer type through the
    prelude's ``polyc_<float>_to_int32/int64/uint32``, defined for NaN and
    out-of-range values as numpy's casts compute them on x86: INT32_MIN /
    INT64_MIN, wrapped to the narrower types)."""
    if frm == to:
        return text
    if frm in HALF_DTYPES:
        text, frm = f"polyc_{frm}_to_f32({text})", "float32"
        if frm == to:
            return text
    if to == "float16" and frm == "float64":
        return f"polyc_f64_to_float16({text})"
    if to in HALF_DTYPES:
        return f"polyc_f32_to_{to}({convert(text, frm, 'float32')})"
    if is_float(frm) and not is_float(to):
        # (the prelude's defined conversions: C's cast of a NaN or an
        # out-of-range float is undefined behaviour)
        wide = to if to in ("int64", "uint32") else "int32"
        text = f"polyc_{C_TYPES[frm]}_to_{wide}({text})"
        if to == wide:
            return text
    return f"(({C_TYPES[to]}){text})"


def arith(op: str, a: str, b: str, dtype: str) -> str:
    """``a op b`` for ``op`` in ``+ - *`` with both operands of ``dtype``;
    integers wrap around (numpy's behaviour, defined behaviour in C)."""
    if is_float(dtype):
        return f"({a} {op} {b})"
    name = {"+": "add", "-": "sub", "*": "mul"}[op]
    return f"polyc_{name}_{C_TYPES[dtype]}({a}, {b})"


_FLOAT_FN = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf",
             "abs": "fabs", "fabs": "fabs", "fmax": "fmax", "fmin": "fmin",
             "max": "fmax", "min": "fmin", "pow": "pow",
             **{f: f for f in E.MATH_FUNCTIONS + E.MATH_FUNCTIONS2},
             **{f: f for f in E.C99_FUNCTIONS + E.C99_FUNCTIONS2}}
_UNARY_FLOAT = ("exp", "log", "sqrt", "tanh", "erf", "fabs", "rsqrt", "sigmoid",
                *E.MATH_FUNCTIONS, *E.C99_FUNCTIONS)
#: builtins printed as calls of libm functions with libmvec variants (not
#: ``exp``, which is the prelude's ``polyc_expf`` where it can be)
_VECTOR_CALLS = (frozenset(("log", "tanh", "erf", "pow", *E.MATH_FUNCTIONS, *E.MATH_FUNCTIONS2))
                 - {"floor", "ceil", "trunc", "rint"}      # (those four are instructions)
                 - set(E.SCALAR_FUNCTIONS2))


def _small_power(e: E.Expr) -> int | None:
    """n where ``e`` is the constant 2, 3 or 4 (``pow(x, n)`` prints as
    products: ``polyc_pow<n>_<type>`` of the prelude), 0 where it is 0.5
    (``polyc_pow0_<type>``: a square root, which also keeps gcc 12 from an
    internal compiler error on ``powf(x, 0.5f)`` in an ``omp simd`` loop),
    else ``None``."""
    if isinstance(e, E.Const) and not isinstance(e.value, bool):
        v = e.value
        if isinstance(v, (int, float)) and float(v) in (2.0, 3.0, 4.0):
            return int(v)
        if isinstance(v, float) and v == 0.5:
            return 0       # polyc_pow0_<type>: the square root, as pow(x, 0.5) is
    return None


def _log2(e: E.Expr) -> int | None:
    """k where ``e`` is the integer constant 2**k (k >= 1), else ``None``."""
    if isinstance(e, E.Const) and not isinstance(e.value, bool):
        v = e.value
        if (isinstance(v, int) or (isinstance(v, float) and v.is_integer())) and v >= 2:
            v = int(v)
            if v & (v - 1) == 0:
                return v.bit_length() - 1
    return None


class CExprPrinter:
    """Prints expressions of one statement.  ``iter_name`` maps an
    :class:`~polyc.expr.Index` name to its C variable; ``access`` prints a
    tensor element given the tensor name and its C index expressions;
    ``tensor_dtype`` gives a tensor's dtype."""

    def __init__(self, iter_name: Callable[[str], str],
                 access: Callable[[str, list[str]], str],
                 tensor_dtype: Callable[[str], str]):
        self.iter_name = iter_name
        self.access = access
        self.tensor_dtype = tensor_dtype
        #: print floor division and remainder by a constant power of two as
        #: an arithmetic shift and a mask, which are exact for int64_t in two's
        #: complement (gcc, clang and nvcc shift signed values arithmetically):
        #: a GPU has no 64-bit divider, and nvcc left a shared buffer's
        #: ``polyc_mod(k, 32)`` as a dozen instructions per access
        self.shifts = False
        #: a float exp printed as the prelude's ``polyc_expf`` (no call, no
        #: slow path below -87) rather than ``expf`` (libmvec); the CUDA
        #: kernels keep the device's ``expf``
        self.fast_exp = True
        #: fmax/fmin as the prelude's selects (vectorised), not libm's calls
        self.select_fmax = True
        #: sin and cos as the prelude's ``polyc_sinf``... (libm's functions
        #: under other names, so that gcc does not fuse them into sincos)
        self.sincos_aliases = True
        self._depth = 0             # recursion depth of typed()
        self._vector_calls = False  # the expression printed calls libmvec too

    # -- index expressions: int64_t arithmetic --------------------------------
    def index(self, e: E.Expr) -> str:
        if isinstance(e, E.Const):
            if isinstance(e.value, float):
                if not e.value.is_integer():
                    raise UnsupportedError(f"non-integer index {e.value!r}")
                return int_literal(int(e.value))
            return int_literal(int(e.value))
        if isinstance(e, E.Index):
            return self.iter_name(e.name)
        if isinstance(e, E.Param):
            return param_name(e.name)
        if isinstance(e, E.Access):
            return f"((int64_t){self._access(e)})"
        if isinstance(e, E.Unary):
            return f"({e.op}{self.index(e.operand)})"
        if isinstance(e, E.Binary):
            a, b = self.index(e.lhs), self.index(e.rhs)
            shift = _log2(e.rhs) if self.shifts and e.op in "/%" else None
            if shift is not None:
                return (f"({a} >> {shift})" if e.op == "/"
                        else f"({a} & {int_literal((1 << shift) - 1)})")
            if e.op == "/":
                return f"polyc_floord({a}, {b})"
            if e.op == "%":
                return f"polyc_mod({a}, {b})"
            return f"({a} {e.op} {b})"
        if isinstance(e, E.Call) and e.fn in ("min", "max"):
            return f"polyc_{e.fn}({self.index(e.args[0])}, {self.index(e.args[1])})"
        if isinstance(e, E.Call) and e.fn.startswith("cast_") and "float" not in e.fn:
            # a gather through a conversion (TC's A(int32(B(i)))): the value
            # converted as a store would (a float truncates), then widened
            text, _ = self.typed(e, "float64")
            return f"((int64_t){text})"
        if isinstance(e, E.Select):
            return f"({self.index(e.cond)} ? {self.index(e.then)} : {self.index(e.otherwise)})"
        raise UnsupportedError(f"cannot use {E.to_text(e)} as an index")

    def _access(self, e: E.Access) -> str:
        return self.access(e.tensor, [self.index(i) for i in e.indices])

    # -- value expressions -----------------------------------------------------
    def value(self, e: E.Expr, dtype: str) -> str:
        """``e`` converted to ``dtype``, evaluated in C's arithmetic types with
        float literals of the float type of a statement whose output is
        ``dtype``."""
        text, t = self.typed(e, float_type_of(dtype))
        return convert(text, t, dtype)

    def typed(self, e: E.Expr, float_type: str) -> tuple[str, str]:
        """``(C text, dtype)`` of ``e``; dtype is a key of ``C_TYPES`` or
        ``"bool"`` (a C ``int`` holding 0 or 1)."""
        if self._depth == 0:
            # a float exp next to a libmvec call (softplus's log1p(exp(x))) is
            # libmvec's expf too: polyc_expf's selects are control flow that gcc
            # does not if-convert in a loop with a call, and the loop stayed scalar
            self._vector_calls = any(
                isinstance(x, E.Call) and x.fn in _VECTOR_CALLS
                and not (x.fn == "pow" and _small_power(x.args[1]) is not None)
                for x in e.walk())
        self._depth += 1
        try:
            return self._typed(e, float_type)
        finally:
            self._depth -= 1

    def _typed(self, e: E.Expr, float_type: str) -> tuple[str, str]:
        ft = float_type
        if isinstance(e, E.Const):
            if isinstance(e.value, bool) or isinstance(e.value, int):
                return int_literal(int(e.value)), "int64"
            return float_literal(e.value, C_TYPES[ft]), ft
        if isinstance(e, E.Index):
            return self.iter_name(e.name), "int64"
        if isinstance(e, E.Param):
            return param_name(e.name), "int64"
        if isinstance(e, E.Access):
            t = self.tensor_dtype(e.tensor)
            if t in HALF_DTYPES:       # half-precision values compute in float32
                return convert(self._access(e), t, "float32"), "float32"
            return self._access(e), t
        if isinstance(e, E.Unary):
            a, t = self.typed(e.operand, ft)
            if e.op == "!":
                return f"(!{a})", "bool"
            a, t = convert(a, t, _numeric(t)), _numeric(t)
            if e.op == "~":
                return f"(~{_integer(a, t, e)})", t
            if t.startswith("float"):
                return f"(-{a})", t
            return f"polyc_neg_{C_TYPES[t]}({a})", t
        if isinstance(e, E.Binary):
            a, ta = self.typed(e.lhs, ft)
            b, tb = self.typed(e.rhs, ft)
            if e.op in E.LOGIC_OPS:
                return f"({a} {e.op} {b})", "bool"
            t = promote(_numeric(ta), _numeric(tb))
            a, b = convert(a, ta, t), convert(b, tb, t)
            if e.op in E.COMPARE_OPS:
                return f"({a} {e.op} {b})", "bool"
            if e.op in ("+", "-", "*"):
                return arith(e.op, a, b, t), t
            if e.op in E.BITWISE_OPS:
                a, b = _integer(a, t, e), _integer(b, t, e)
                if e.op in ("<<", ">>"):
                    return f"polyc_sh{'l' if e.op == '<<' else 'r'}_{C_TYPES[t]}({a}, {b})", t
                return f"({a} {e.op} {b})", t
            if t.startswith("float"):
                if e.op == "/":
                    return f"({a} / {b})", t
                return f"polyc_rem_{C_TYPES[t]}({a}, {b})", t
            name = "div" if e.op == "/" else "mod"
            return convert(f"polyc_{name}_int64_t({a}, {b})", "int64", t), t
        if isinstance(e, E.Select):
            c, _ = self.typed(e.cond, ft)
            a, ta = self.typed(e.then, ft)
            b, tb = self.typed(e.otherwise, ft)
            t = promote(_numeric(ta), _numeric(tb))
            return f"({c} ? {convert(a, ta, t)} : {convert(b, tb, t)})", t
        if isinstance(e, E.Call):
            if e.fn == "pow" and _small_power(e.args[1]) is not None:
                (a, ta), (_, tb) = self.typed(e.args[0], ft), self.typed(e.args[1], ft)
                t = promote(_numeric(ta), _numeric(tb))
                if not is_float(t):     # integers: wrapping products, as numpy's
                    a = convert(a, ta, t)
                    p = a
                    for _ in range(_small_power(e.args[1]) - 1):
                        p = arith("*", p, a, t)
                    return p, t
                t = t if t.startswith("float") else ft
                return f"polyc_pow{_small_power(e.args[1])}_{C_TYPES[t]}({convert(a, ta, t)})", t
            return self._call(e.fn, [self.typed(a, ft) for a in e.args], ft)
        raise AssertionError(type(e))

    def _call(self, fn: str, args: list[tuple[str, str]], ft: str) -> tuple[str, str]:
        if fn.startswith("cast_"):      # (a float truncates, as numpy's astype)
            (a, t), to = args[0], fn[5:]
            return convert(a, t, to), to
        if fn in _UNARY_FLOAT:
            a, t = args[0]
            if not t.startswith("float"):
                a, t = convert(a, t, ft), ft
            ct = C_TYPES[t]
            suf = "f" if ct == "float" else ""
            one = float_literal(1.0, ct)
            if fn == "rsqrt":
                return f"({one} / sqrt{suf}({a}))", t
            if fn == "sigmoid":
                e = "polyc_expf" if ct == "float" and self.fast_exp else f"exp{suf}"
                return f"({one} / ({one} + {e}(-({a}))))", t
            if fn == "exp" and ct == "float" and self.fast_exp and not self._vector_calls:
                return f"polyc_expf({a})", t
            if fn in ("sin", "cos") and self.sincos_aliases:
                return f"polyc_{fn}{suf}({a})", t
            return f"{_FLOAT_FN[fn]}{suf}({a})", t
        if fn == "abs":
            a, t = args[0]
            if t.startswith("float"):
                return f"fabs{'f' if t == 'float32' else ''}({a})", t
            a, t = convert(a, t, _numeric(t)), _numeric(t)
            return f"polyc_abs_{C_TYPES[t]}({a})", t
        (a, ta), (b, tb) = args
        t = promote(_numeric(ta), _numeric(tb))
        if fn == "ipow":
            if is_float(t):
                raise UnsupportedError(f"ipow needs integer operands, not {t} (use pow)")
            return f"polyc_ipow_{C_TYPES[t]}({convert(a, ta, t)}, {convert(b, tb, t)})", t
        if fn in ("fmax", "fmin", "pow", *E.MATH_FUNCTIONS2, *E.C99_FUNCTIONS2) or (
                fn in ("max", "min") and t.startswith("float")):
            if not t.startswith("float"):
                t = ft
            a, b = convert(a, ta, t), convert(b, tb, t)
            if fn in ("fmax", "fmin", "max", "min") and self.select_fmax:
                return f"polyc_{_FLOAT_FN[fn]}_{C_TYPES[t]}({a}, {b})", t
            suf = "f" if t == "float32" else ""
            return f"{_FLOAT_FN[fn]}{suf}({a}, {b})", t
        if fn in ("max", "min"):
            a, b = convert(a, ta, t), convert(b, tb, t)
            return f"polyc_{fn}_{C_TYPES[t]}({a}, {b})", t
        raise UnsupportedError(f"builtin {fn!r} is not supported by the C backend")


def _integer(text: str, t: str, e: E.Expr) -> str:
    """``text`` (of computation type ``t``), an operand of the bitwise
    operator of ``e``: integers only."""
    if is_float(t):
        raise UnsupportedError(f"{e.span or E.to_text(e)}: the bitwise operator "
                               f"'{getattr(e, 'op', '')}' needs integer operands, not {t}")
    return text


def _numeric(t: str) -> str:
    """Comparisons' 0/1 count as int64 in arithmetic (numpy's ``numeric``);
    the integers narrower than 32 bits compute in int32 (C's promotion to
    ``int``), uint32 in int64."""
    return "int64" if t in ("bool", "uint32") else "int32" if t in _INT32_COMPUTED else t


def float_type_of(dtype: str) -> str:
    """The type of float literals in a statement whose output is ``dtype``
    (float32 for the half types, which compute in float32)."""
    if dtype in HALF_DTYPES:
        return "float32"
    return dtype if is_float(dtype) else "float64"


def accumulator_type(out_dtype: str, rhs_dtype: str) -> str:
    """The type a reduction into ``out_dtype`` of values of ``rhs_dtype``
    combines in (the oracle reduces in the right-hand side's type, integers
    converted to a float output's type first, then combines with the
    output)."""
    rhs = _numeric(rhs_dtype)
    if out_dtype in HALF_DTYPES:
        out_dtype = "float32"
    if is_float(out_dtype) and not is_float(rhs):
        rhs = out_dtype
    return promote(out_dtype, rhs)


def combine(op: str, current: str, update: str, dtype: str) -> str:
    """``current op update`` for a reduction operator, both of ``dtype``.
    ``max``/``min`` propagate NaN, as numpy's ``maximum``/``minimum``."""
    if op in ("+", "*"):
        return arith(op, current, update, dtype)
    return f"polyc_{op}_{C_TYPES[dtype]}({current}, {update})"


_COMMENT_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                          " ()+-*/=!<>,.:?%&|_[]")


def comment_text(text: str, limit: int = 160) -> str:
    """User source shown in a C comment, made inert: printable ASCII of the
    expression alphabet only (no backslash, quote, ``#``, non-ASCII or
    control character), on one line, with no comment opener or terminator
    and no ``??`` (trigraphs).  cgen frames it as ``/* text */``, so a final
    ``*`` or ``/`` cannot pair with the terminator."""
    flat = "".join(ch if ch in _COMMENT_SAFE else " " for ch in " ".join(str(text).split()))
    flat = flat[:limit]
    while True:
        new = flat.replace("*/", "* /").replace("/*", "/ *").replace("??", "? ?")
        if new == flat:
            break
        flat = new
    return flat.strip()
