"""Printing :mod:`polyc.expr` trees as C99 expressions.

Two modes: *index* expressions (64-bit integer arithmetic, floor division and
remainder as TC and isl define them) and *value* expressions in a statement's
element type (float, double, int32_t, int64_t).  User identifiers never reach
the output verbatim: iterators print as ``i_<name>``, parameters as
``p_<name>``, tensors as ``t_<name>`` after :func:`check_identifier`;
floating constants print exactly (C99 hexadecimal floats).
"""

from __future__ import annotations

import math
import re
from typing import Callable

from polyc import expr as E
from polyc.errors import UnsupportedError
from polyc.ir import C_TYPES

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_identifier(name: str) -> str:
    """Return ``name`` if it is a plain ASCII identifier, else raise
    :class:`UnsupportedError` (defence in depth: frontends validate too)."""
    if not _IDENT.match(name) or len(name) > 200:
        raise UnsupportedError(f"identifier {name[:40]!r} cannot be used in generated code")
    return name


def iterator_name(name: str) -> str:
    return "i_" + check_identifier(name)


def param_name(name: str) -> str:
    return "p_" + check_identifier(name)


def tensor_name(name: str) -> str:
    return "t_" + check_identifier(name)


def extent_name(tensor: str, dim: int) -> str:
    return f"{tensor_name(tensor)}_d{dim}"


def float_literal(value: float, ctype: str) -> str:
    """An exact C literal of ``value`` in ``ctype`` (``float`` or ``double``)."""
    if math.isnan(value):
        return f"(({ctype})NAN)"
    if math.isinf(value):
        return f"(({ctype})INFINITY)" if value > 0 else f"(-({ctype})INFINITY)"
    return f"(({ctype}){float(value).hex()})"


def int_literal(value: int) -> str:
    if not -(2 ** 63) <= value < 2 ** 63:
        raise UnsupportedError(f"integer constant {value} does not fit in 64 bits")
    if value == -(2 ** 63):
        return "INT64_MIN"
    return f"INT64_C({value})"


_FLOAT_FN = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh",
             "abs": "fabs", "fabs": "fabs", "fmax": "fmax", "fmin": "fmin",
             "max": "fmax", "min": "fmin", "pow": "pow"}


class CExprPrinter:
    """Prints expressions of one statement.  ``iter_name`` maps an
    :class:`~polyc.expr.Index` name to its C variable; ``access`` prints a
    tensor element given the tensor name and its C index expressions."""

    def __init__(self, iter_name: Callable[[str], str],
                 access: Callable[[str, list[str]], str],
                 tensor_dtype: Callable[[str], str]):
        self.iter_name = iter_name
        self.access = access
        self.tensor_dtype = tensor_dtype

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
            if e.op == "/":
                return f"polyc_floord({a}, {b})"
            if e.op == "%":
                return f"polyc_mod({a}, {b})"
            return f"({a} {e.op} {b})"
        if isinstance(e, E.Call) and e.fn in ("min", "max"):
            return f"polyc_{e.fn}({self.index(e.args[0])}, {self.index(e.args[1])})"
        if isinstance(e, E.Select):
            return f"({self.index(e.cond)} ? {self.index(e.then)} : {self.index(e.otherwise)})"
        raise UnsupportedError(f"cannot use {E.to_text(e)} as an index")

    def _access(self, e: E.Access) -> str:
        return self.access(e.tensor, [self.index(i) for i in e.indices])

    def is_integer(self, e: E.Expr) -> bool:
        """Whether ``e`` has an integer type in TC's typing: sizes, index
        variables, integer literals and integer tensors, combined by
        arithmetic, comparisons (0/1), selects and min/max/abs."""
        if isinstance(e, E.Const):
            return isinstance(e.value, int)
        if isinstance(e, (E.Index, E.Param)):
            return True
        if isinstance(e, E.Access):
            return self.tensor_dtype(e.tensor).startswith("int")
        if isinstance(e, E.Unary):
            return e.op == "!" or self.is_integer(e.operand)
        if isinstance(e, E.Binary):
            if e.op in E.COMPARE_OPS or e.op in E.LOGIC_OPS:
                return True
            return self.is_integer(e.lhs) and self.is_integer(e.rhs)
        if isinstance(e, E.Select):
            return self.is_integer(e.then) and self.is_integer(e.otherwise)
        if isinstance(e, E.Call) and e.fn in ("min", "max"):
            return all(self.is_integer(a) for a in e.args)
        return False

    # -- value expressions in element type `dtype` ----------------------------
    def value(self, e: E.Expr, dtype: str) -> str:
        ct = C_TYPES[dtype]
        is_float = dtype.startswith("float")
        if (is_float and isinstance(e, (E.Binary, E.Unary, E.Select, E.Call))
                and self.is_integer(e) and not _has_logic(e)):
            # integer arithmetic stays integer (floor division), then converts
            return f"(({ct}){self.index(e)})"
        if isinstance(e, E.Const):
            if is_float:
                return float_literal(float(e.value), ct)
            if isinstance(e.value, float) and not e.value.is_integer():
                return f"(({ct}){float(e.value).hex()})"
            return f"(({ct}){int_literal(int(e.value))})"
        if isinstance(e, (E.Index, E.Param)):
            return f"(({ct}){self.index(e)})"
        if isinstance(e, E.Access):
            return f"(({ct}){self._access(e)})"
        if isinstance(e, E.Unary):
            return f"({e.op}{self.value(e.operand, dtype)})"
        if isinstance(e, E.Binary):
            a, b = self.value(e.lhs, dtype), self.value(e.rhs, dtype)
            if e.op in E.COMPARE_OPS or e.op in E.LOGIC_OPS:
                return f"(({ct})({a} {e.op} {b}))"
            if e.op == "/" and not is_float:
                return f"(({ct})polyc_floord({a}, {b}))"
            if e.op == "%":
                return f"polyc_rem_{ct}({a}, {b})" if is_float \
                    else f"(({ct})polyc_mod({a}, {b}))"
            return f"({a} {e.op} {b})"
        if isinstance(e, E.Select):
            c = self.value(e.cond, dtype)
            return f"({c} ? {self.value(e.then, dtype)} : {self.value(e.otherwise, dtype)})"
        if isinstance(e, E.Call):
            args = [self.value(a, dtype) for a in e.args]
            return self._call(e.fn, args, dtype)
        raise AssertionError(type(e))

    def _call(self, fn: str, args: list[str], dtype: str) -> str:
        ct = C_TYPES[dtype]
        if dtype.startswith("float"):
            suf = "f" if ct == "float" else ""
            one = float_literal(1.0, ct)
            if fn == "rsqrt":
                return f"({one} / sqrt{suf}({args[0]}))"
            if fn == "sigmoid":
                return f"({one} / ({one} + exp{suf}(-({args[0]}))))"
            return f"{_FLOAT_FN[fn]}{suf}({', '.join(args)})"
        if fn in ("max", "fmax"):
            return f"polyc_max_{ct}({args[0]}, {args[1]})"
        if fn in ("min", "fmin"):
            return f"polyc_min_{ct}({args[0]}, {args[1]})"
        if fn in ("abs", "fabs"):
            return f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
        # transcendental functions of integers: computed in double, truncated
        if fn == "rsqrt":
            return f"(({ct})(1.0 / sqrt((double){args[0]})))"
        if fn == "sigmoid":
            return f"(({ct})(1.0 / (1.0 + exp(-(double){args[0]}))))"
        dargs = ", ".join(f"(double){a}" for a in args)
        return f"(({ct}){_FLOAT_FN[fn]}({dargs}))"


def _has_logic(e: E.Expr) -> bool:
    """Comparisons and logic print fine in either mode; keep them in value
    mode so that float operands nested inside stay floats."""
    return any(isinstance(n, E.Binary) and (n.op in E.COMPARE_OPS or n.op in E.LOGIC_OPS)
               for n in e.walk())


def combine(op: str, current: str, update: str, dtype: str) -> str:
    """``current op update`` for a reduction operator."""
    ct = C_TYPES[dtype]
    if op == "+":
        return f"{current} + {update}"
    if op == "*":
        return f"{current} * ({update})"
    return f"polyc_{op}_{ct}({current}, {update})"
