"""Expressions of ``@polyc.kernel`` loop programs (:mod:`.pyloops`): Python
``ast`` nodes read as :mod:`polyc.expr` trees.

:class:`Expressions` reads index expressions (integer affine: loop
variables, sizes, literals, ``+ - *``, ``//`` and ``%`` by literals,
``min``/``max``) and values (literals, array elements, scalars, arithmetic,
comparisons, ``a if c else b`` and the functions of :data:`FUNCTIONS`).
What a name means, and how a failure is reported with its file, line and
column, it asks the lowering it serves (:class:`Names`).  Anything else
raises :class:`~polyc.errors.UnsupportedError` saying what is allowed
instead.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from polyc import expr as E
from polyc.errors import DTypeError, ShapeError, UnsupportedError

from .pysource import ArgSpec, is_shape_read
from .source import Span

#: Value functions and the expression-tree builtin each becomes.
FUNCTIONS = {"min": "min", "max": "max", "abs": "abs", "fabs": "abs", "sqrt": "sqrt",
             "exp": "exp", "log": "log", "pow": "pow", "tanh": "tanh",
             **{f: f for f in E.MATH_FUNCTIONS if f not in ("rint",)},
             **{f: f for f in E.MATH_FUNCTIONS2},
             # numpy's names of the inverse functions (math.asin is asin)
             "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2",
             "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
             "absolute": "abs", "power": "pow", "rint": "rint",
             # numpy's elementwise extrema: fmax/fmin ignore a NaN (C's), maximum
             # and minimum propagate it (:meth:`Expressions.call` writes selects)
             "fmax": "fmax", "fmin": "fmin", "maximum": "maximum", "minimum": "minimum"}
MODULES = ("math", "np", "numpy")
#: (``//`` is TC's flooring ``/`` on integers, :func:`_float_floordiv` on
#: floats; ``%`` is TC's, which takes the divisor's sign as Python's does)
BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
          ast.RShift: ">>"}
CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
        ast.NotEq: "!="}


@dataclass
class Loop:
    """A ``for var in range(lower, upper, step)`` loop around the code read.
    ``var`` is the iterator's name in the IR: the source's ``source``, or
    ``floor_`` for a loop variable that isl reads as a keyword (``floor``,
    ``max``, ``NaN``: :func:`polyc.isl_util.isl_safe_name`)."""
    var: str
    lower: E.Expr
    upper: E.Expr
    step: int
    source: str = ""

    @property
    def name(self) -> str:
        """The loop variable as the source spells it."""
        return self.source or self.var


class Names(Protocol):
    """What :class:`Expressions` asks the lowering (``pyloops._Lowering``):
    the names in scope, which grow as the lowering reads the function, and
    how to report a construct outside the accepted subset."""
    params: list[str]               # size parameters
    size_alias: dict[str, str]      # a size the source spells like an isl keyword -> its name
    specs: dict[str, ArgSpec]       # the arguments
    arrays: dict[str, ArgSpec]      # array arguments
    floats: list[str]               # scalar arguments (float, and int values)
    int_values: set[str]            # int arguments read only as values
    scalars: dict[str, str]         # local scalar -> its tensor
    assigned_later: set[str]        # names assigned somewhere in the body

    def span(self, node: ast.AST) -> Span: ...

    def fail(self, node: ast.AST, what: str, instead: str = "") -> UnsupportedError: ...


class Expressions:
    """Reads expressions for one lowering (:class:`Names`)."""

    def __init__(self, names: Names):
        self.names = names
        self.span, self.fail = names.span, names.fail

    def where(self, node: ast.AST) -> str:
        sp = self.span(node)
        return f"{sp.filename}:{sp.line}"

    def const_int(self, node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool):
            return node.value
        if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                and isinstance(node.operand, ast.Constant)
                and isinstance(node.operand.value, int)):
            return -node.operand.value
        raise self.fail(node, "expected an integer literal")

    # ---------------------------------------------------------- expressions
    def _loop_or_size(self, name: str, vars_: dict[str, str], sp: Span) -> E.Expr | None:
        """A loop variable or a size parameter named ``name``, else ``None``
        (``vars_``: each enclosing loop's source name -> its IR name)."""
        if name in vars_:
            return E.Index(vars_[name], sp)
        name = self.names.size_alias.get(name, name)
        if name in self.names.params:
            return E.Param(name, sp)
        return None

    def index_expr(self, node: ast.AST, loops: list[Loop]) -> E.Expr:
        """An integer affine expression: loop variables, sizes, literals."""
        vars_ = {lp.name: lp.var for lp in loops}
        sp = self.span(node)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                raise self.fail(node, "a non-integer constant in an index expression")
            return E.Const(self._int64(node), sp)
        if isinstance(node, ast.Name):
            known = self._loop_or_size(node.id, vars_, sp)
            if known is not None:
                return known
            if node.id in self.names.specs and self.names.specs[node.id].kind == "float":
                raise DTypeError(f"{self.where(node)}: argument {node.id} is used as an "
                                 "integer (a loop bound, subscript or condition), but the "
                                 "call passed a float; pass an int")
            n = self.names
            if node.id in n.scalars:
                raise self.fail(node, f"{node.id} is a local scalar (a value computed as the "
                                      "kernel runs), so it cannot be used in a subscript, "
                                      "loop bound or if condition",
                                "write the size expression there instead (range(n // 2), "
                                "A[i + n - 1], with n = A.shape[0]); use `a if cond else b` "
                                "for data-dependent values")
            if node.id in n.arrays or node.id in n.specs:
                raise self.fail(node, f"{node.id} holds data, so it cannot be used in a "
                                      "subscript, loop bound or if condition",
                                "these must be affine in loop variables and sizes; use "
                                "`a if cond else b` for data-dependent values")
            raise self.fail(node, f"unknown name {node.id}",
                            "names in indices are loop variables, sizes from "
                            "`n = A.shape[0]`, integer arguments or int constants of the "
                            "module (TILE = 4)")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.index_expr(node.operand, loops)
            return inner if isinstance(node.op, ast.UAdd) else E.Unary("-", inner, sp)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/",
                   ast.Mod: "%"}
            op = ops.get(type(node.op))
            if op is None:
                raise self.fail(node, "an operator that is not integer affine arithmetic",
                                "indices and bounds use + - *, and // or % by a positive "
                                "integer literal")
            return E.Binary(op, self.index_expr(node.left, loops),
                            self.index_expr(node.right, loops), sp)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("min", "max") and len(node.args) >= 2
                and not node.keywords):
            args = [self.index_expr(a, loops) for a in node.args]
            out = args[0]
            for a in args[1:]:
                out = E.Call(node.func.id, (out, a), sp)
            return out
        size = self._shape_read(node)
        if size is not None:
            return E.Param(size, sp)
        if isinstance(node, ast.Subscript):
            raise self.fail(node, "a subscript that reads data (an indirect access)",
                            "subscripts must be affine in loop variables and sizes")
        raise self.fail(node, "an expression that is not affine in loop variables and sizes")

    def _int_valued(self, e: E.Expr) -> bool:
        """Whether ``e`` has an integer type: indices, sizes, int literals,
        elements of integer or boolean arrays, and ``+ - * % /`` and ``abs
        min max`` of those (float arguments are floats, local scalars are
        integers only in an integer program whose values for them all are)."""
        if _integral(e):
            return True
        if isinstance(e, E.Access):
            if e.tensor in self.names.int_values or e.tensor in self.names.int_scalar_tensors:
                return True
            spec = self.names.arrays.get(e.tensor)
            return spec is not None and np.dtype(spec.dtype).kind in "iub"
        if isinstance(e, E.Unary) and e.op in ("-", "~"):
            return self._int_valued(e.operand)
        if isinstance(e, E.Binary) and e.op in ("+", "-", "*", "%", "/") + E.BITWISE_OPS:
            return self._int_valued(e.lhs) and self._int_valued(e.rhs)
        if isinstance(e, E.Call) and e.fn in ("abs", "min", "max", "ipow"):
            return all(self._int_valued(a) for a in e.args)
        if isinstance(e, E.Call) and e.fn.startswith(("cast_int", "cast_uint")):
            return True
        if isinstance(e, E.Select):     # `a if c else b` of integers
            return self._int_valued(e.then) and self._int_valued(e.otherwise)
        return False

    def _shape_read(self, node: ast.AST) -> str | None:
        """The size parameter that ``A.shape[k]`` (a literal ``k``) or
        ``len(A)`` reads, for an array argument ``A``; ``None`` for any
        other expression.  Raises ``ShapeError`` for a dimension ``A``
        does not have."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "len" and len(node.args) == 1 and not node.keywords
                and isinstance(node.args[0], ast.Name)):
            arr, dim = node.args[0].id, 0
        elif isinstance(node, ast.Subscript) and is_shape_read(node):
            arr = node.value.value.id
            dim = self.const_int(node.slice)
        else:
            return None
        spec = self.names.specs.get(arr)
        if spec is None or spec.kind != "array":
            return None
        d = dim + spec.ndim if dim < 0 else dim
        if not 0 <= d < spec.ndim:
            raise ShapeError(f"{self.where(node)}: {arr}.shape[{dim}] does not exist: "
                             f"argument {arr} has {spec.ndim} dimension(s)")
        return self.names.shape_param[(arr, d)]

    def value_expr(self, node: ast.AST, loops: list[Loop]) -> E.Expr:
        """A value: literals, array elements, scalars, arithmetic, selects, calls."""
        sp = self.span(node)
        vars_ = {lp.name: lp.var for lp in loops}
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise self.fail(node, f"the constant {node.value!r}",
                                "values are int or float literals")
            return E.Const(self._int64(node) if isinstance(node.value, int) else node.value, sp)
        if isinstance(node, ast.Name):
            known = self._loop_or_size(node.id, vars_, sp)
            if known is not None:
                return known
            if node.id in self.names.floats:
                return E.Access(node.id, (), sp)
            if node.id in self.names.scalars:
                return E.Access(self.names.scalars[node.id], (), sp)
            if node.id in self.names.arrays:
                if self.names.arrays[node.id].ndim == 0:     # np.array(2.5): its value
                    return E.Access(node.id, (), sp)
                raise self.fail(node, f"the whole array {node.id} used as a value",
                                f"read one element: {node.id}[i, ...]")
            if node.id in self.names.assigned_later:
                raise self.fail(node, f"scalar {node.id} is read before it is assigned")
            raise self.fail(node, f"unknown name {node.id}",
                            "a kernel reads its arguments, loop variables, sizes, "
                            "local scalars assigned earlier and int or float constants "
                            "of its module (TILE = 4)")
        size = self._shape_read(node)
        if size is not None:
            return E.Param(size, sp)
        if isinstance(node, ast.Subscript):
            return self.access(node, loops)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.UAdd):
                return self.value_expr(node.operand, loops)
            if isinstance(node.op, ast.USub):
                return E.Unary("-", self.value_expr(node.operand, loops), sp)
            if isinstance(node.op, ast.Not):
                return E.Unary("!", self.value_expr(node.operand, loops), sp)
            if isinstance(node.op, ast.Invert):
                return E.Unary("~", self.value_expr(node.operand, loops), sp)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                args = (self.value_expr(node.left, loops), self.value_expr(node.right, loops))
                # integers: numpy's wrapping integer power (polyc.expr's ipow)
                ints = all(self._int_valued(a) for a in args) and not all(
                    isinstance(a, E.Const) for a in args)
                if ints and _negative_int(args[1]):
                    if _integral(args[0]):      # Python's int ** -k is a float
                        return E.Call("pow", args, sp)
                    raise self.fail(node, "an integer array element to a negative integer "
                                    "power (numpy raises ValueError)",
                                    "write a float exponent (x ** -1.0) for a float result")
                return E.Call("ipow" if ints else "pow", args, sp)
            op = BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(node, f"the operator {type(node.op).__name__} on values",
                                "values use + - * / // % ** & | ^ << >> and the functions "
                                + ", ".join(sorted(set(FUNCTIONS))))
            lhs, rhs = self.value_expr(node.left, loops), self.value_expr(node.right, loops)
            ints = self._int_valued(lhs) and self._int_valued(rhs)
            if op == "/" and ints:
                lhs = E.Binary("*", E.Const(1.0), lhs, sp)   # Python's true division
            if op == "//":
                return E.Binary("/", lhs, rhs, sp) if ints else _float_floordiv(lhs, rhs, sp)
            return E.Binary(op, lhs, rhs, sp)
        if isinstance(node, ast.Compare):
            parts, left = [], self.value_expr(node.left, loops)
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in CMP:
                    raise self.fail(node, f"the comparison {type(op).__name__}")
                r = self.value_expr(right, loops)
                parts.append(E.Binary(CMP[type(op)], left, r, sp))
                left = r
            out = parts[0]
            for p in parts[1:]:
                out = E.Binary("&&", out, p, sp)
            return out
        if isinstance(node, ast.BoolOp):
            # Python's `a and b` is `b if a else a`, `a or b` is `a if a else b`
            # (2.0 and 3.0 is 3.0); of truth values that is C's && and ||
            op = "&&" if isinstance(node.op, ast.And) else "||"
            vals = [self.value_expr(v, loops) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                if _is_truth(out) and _is_truth(v):
                    out = E.Binary(op, out, v, sp)
                else:
                    out = E.Select(out, v, out, sp) if op == "&&" else E.Select(out, out, v, sp)
            return out
        if isinstance(node, ast.IfExp):
            return E.Select(self.value_expr(node.test, loops),
                            self.value_expr(node.body, loops),
                            self.value_expr(node.orelse, loops), sp)
        if isinstance(node, ast.Call):
            return self.call(node, loops)
        raise self.fail(node, f"the expression {type(node).__name__}",
                        "values use literals, array elements, scalars, + - * / **, "
                        "comparisons, `a if c else b` and "
                        + ", ".join(sorted(set(FUNCTIONS))))

    def call(self, node: ast.Call, loops: list[Loop]) -> E.Expr:
        f = node.func
        name = None
        if isinstance(f, ast.Name):
            name = f.id
        elif (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
              and f.value.id in MODULES):
            name = f.attr
        if (isinstance(f, ast.Name) and name == "float" and len(node.args) == 1
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            return self._float_text(node.args[0].value, node)
        if isinstance(f, ast.Name) and name in ("float", "int", "round") and len(
                node.args) == 1 and not node.keywords:
            return self._conversion(name, self.value_expr(node.args[0], loops), node)
        if name not in FUNCTIONS or node.keywords:
            raise self.fail(node, f"a call to {ast.unparse(f)}",
                            "a kernel may call " + ", ".join(sorted(set(FUNCTIONS)))
                            + " (also as math.* / np.*)")
        fn = FUNCTIONS[name]
        args = [self.value_expr(a, loops) for a in node.args]
        if fn in ("maximum", "minimum"):
            if len(args) != 2:
                raise self.fail(node, f"{name}() takes 2 argument(s), got {len(args)}")
            a, b, sp = args[0], args[1], self.span(node)
            cmp = E.Binary(">" if fn == "maximum" else "<", a, b, sp)
            # numpy's: a NaN operand gives NaN (a if a is NaN, else b if b is),
            # and of equal values the second (np.maximum(-0.0, 0.0) is 0.0)
            return E.Select(E.Binary("||", cmp, E.Binary("!=", a, a, sp), sp), a, b, sp)
        if fn in ("min", "max"):
            if len(args) < 2:
                raise self.fail(node, f"{name}() needs at least two values")
            out, sp = args[0], self.span(node)
            exact = all(self._int_valued(a) for a in args)
            for a in args[1:]:
                # Python's: the later value where it compares greater (less),
                # so max(nan, 1.0) is nan and max(1.0, nan) 1.0 (C's fmax
                # drops the NaN either way); integers as C's max
                out = E.Call(fn, (out, a), sp) if exact else E.Select(
                    E.Binary(">" if fn == "max" else "<", a, out, sp), a, out, sp)
            return out
        want = E.BUILTINS[fn]
        if len(args) != want:
            raise self.fail(node, f"{name}() takes {want} argument(s), got {len(args)}")
        return E.Call(fn, tuple(args), self.span(node))

    def _int64(self, node: ast.Constant) -> int:
        """An integer literal's value; beyond int64 (which the generated code
        computes in, and numpy refuses with OverflowError for int64 arrays) a
        located UnsupportedError."""
        v = node.value
        if not -2 ** 63 <= v < 2 ** 63:
            raise self.fail(node, f"the integer literal {v}, beyond int64",
                            "write a float literal (1e20) for a float value; for int64's "
                            "minimum write -9223372036854775807 - 1")
        return v

    def _float_text(self, text: str, node: ast.Call) -> E.Expr:
        """Python's ``float("inf")``, ``float("-inf")``, ``float("nan")``
        (the idioms for an extremum's start value): the literal."""
        try:
            value = float(text)
        except ValueError:
            raise self.fail(node, f"float({text!r}), which Python refuses",
                            "write a number, or 'inf', '-inf', 'nan'") from None
        return E.Const(value, self.span(node))

    def _conversion(self, name: str, x: E.Expr, node: ast.Call) -> E.Expr:
        """Python's ``float(x)``, ``int(x)`` (truncates toward zero) and
        ``round(x)`` (half to even: C's ``rint``) of one value.  ``int`` and
        ``round`` of a float give an integer (int64), as Python's do: no
        negative zero (``int(-0.5)`` is 0), and integer operators apply
        (``int(x) & 3``); a NaN, an infinity or a value beyond int64, which
        Python refuses, converts as numpy's ``astype(np.int64)`` does."""
        sp = self.span(node)
        if self._int_valued(x):
            return E.Binary("*", E.Const(1.0), x, sp) if name == "float" else x
        if name == "float":
            return x
        if name == "round":
            x = E.Call("rint", (x,), sp)
        return E.Call("cast_int64", (x,), sp)

    def access(self, node: ast.Subscript, loops: list[Loop]) -> E.Access:
        base = node.value
        if isinstance(base, ast.Subscript):
            raise self.fail(node, "chained subscripts A[i][j]", "write A[i, j]")
        if not isinstance(base, ast.Name) or base.id not in self.names.arrays:
            what = ast.unparse(base)
            if isinstance(base, ast.Name) and base.id in self.names.specs:
                raise DTypeError(f"{self.where(node)}: argument {base.id} is indexed as an "
                                 f"array, but the call passed a {self.names.specs[base.id].kind}")
            raise self.fail(node, f"a subscript of {what}, which is not an array argument")
        sl = node.slice
        idx = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(i, ast.Slice) for i in idx):
            raise self.fail(node, "slicing", "kernels access one element at a time: "
                                             "write the loop")
        ndim = self.names.arrays[base.id].ndim
        if len(idx) != ndim:
            raise ShapeError(f"{self.where(node)}: {ast.unparse(node)} has {len(idx)} "
                             f"subscript(s), but argument {base.id} has {ndim} "
                             "dimension(s)")
        subs = []
        for d, i in enumerate(idx):
            k = self._negative_literal(i)
            if k is None:
                subs.append(self.index_expr(i, loops))
            else:       # A[-1]: Python's element from the end (a literal only)
                size = E.Param(self.names.shape_param[(base.id, d)], self.span(i))
                subs.append(E.Binary("-", size, E.Const(k), self.span(i)))
        return E.Access(base.id, tuple(subs), self.span(node))

    @staticmethod
    def _negative_literal(node: ast.AST) -> int | None:
        """``k`` where ``node`` is the literal ``-k`` (``k > 0``), else ``None``."""
        if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                and isinstance(node.operand, ast.Constant)
                and type(node.operand.value) is int and node.operand.value > 0):
            return node.operand.value
        return None


def _float_floordiv(a: E.Expr, b: E.Expr, sp) -> E.Expr:
    """Python's (and numpy's) ``a // b`` of floats, as CPython's
    ``float_divmod`` computes it: ``fmod`` first, ``(a - mod) / b`` less one
    where the remainder's sign was adjusted, snapped to the nearest integer;
    ``a / b`` for a zero divisor (numpy's value; Python raises), a zero
    quotient signed as ``a / b``."""
    def B(op, x, y):
        return E.Binary(op, x, y, sp)

    def sel(c, x, y):
        return E.Select(c, x, y, sp)
    zero, one = E.Const(0.0), E.Const(1.0)
    m = E.Call("fmod", (a, b), sp)
    adj = sel(B("&&", B("!=", m, zero), B("!=", B("<", b, zero), B("<", m, zero))), one, zero)
    d = B("-", B("/", B("-", a, m), b), adj)
    fl = E.Call("floor", (d,), sp)
    snap = B("+", fl, sel(B(">", B("-", d, fl), E.Const(0.5)), one, zero))
    q = B("/", a, b)
    return sel(B("==", b, zero), q, sel(B("!=", d, zero), snap,
                                        E.Call("copysign", (zero, q), sp)))


def _negative_int(e: E.Expr) -> bool:
    """Whether ``e`` is a negative integer literal (``-1`` parses as a
    negation of the literal 1)."""
    if isinstance(e, E.Unary) and e.op == "-" and isinstance(e.operand, E.Const):
        e = E.Const(-e.operand.value)
    return isinstance(e, E.Const) and type(e.value) is int and e.value < 0


def _integral(e: E.Expr) -> bool:
    """Whether ``e`` is integer-valued in C (indices, sizes, int literals)."""
    if isinstance(e, (E.Index, E.Param)):
        return True
    if isinstance(e, E.Const):
        return isinstance(e.value, int)
    if isinstance(e, E.Unary) and e.op == "-":
        return _integral(e.operand)
    if isinstance(e, E.Binary) and e.op in ("+", "-", "*", "%"):
        return _integral(e.lhs) and _integral(e.rhs)
    return False


def _is_truth(e: E.Expr) -> bool:
    """Whether ``e`` is a truth value (a comparison, ``not``, ``and``/``or``
    of truth values): 0 or 1, as C's ``&&`` gives."""
    return ((isinstance(e, E.Binary) and e.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"))
            or (isinstance(e, E.Unary) and e.op == "!"))
