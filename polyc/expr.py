"""Expression trees of statement bodies and index expressions.

Owns the value language shared by every frontend (TC, einsum, Python loops)
and every backend: constants, index variables, size parameters, tensor reads,
unary/binary operators, builtin calls and selects.  Nodes are frozen and
hashable; ``span`` (a :class:`polyc.frontend.source.Span` or ``None``) points
back at the user's source and does not take part in equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

#: Builtins the C backend and the numpy reference both implement, with arity.
BUILTINS: dict[str, int] = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
    "abs": 1, "fabs": 1, "fmax": 2, "fmin": 2, "max": 2, "min": 2, "pow": 2,
    # C99's <math.h> functions of one float, as numpy's ufuncs of the same names
    # (arcsin... as asin...): each is C's function of the argument's float type
    "sin": 1, "cos": 1, "tan": 1, "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1,
    "asinh": 1, "acosh": 1, "atanh": 1,
    "log1p": 1, "expm1": 1, "exp2": 1, "log2": 1, "log10": 1, "cbrt": 1,
    "floor": 1, "ceil": 1, "trunc": 1, "rint": 1, "atan2": 2, "hypot": 2,
    "copysign": 2, "fmod": 2,
    # more of C99's <math.h>, for TC's builtins (not numpy's names: numpy's
    # remainder is fmod's floor variant, its round rounds half to even)
    "erfc": 1, "lgamma": 1, "tgamma": 1, "round": 1, "logb": 1,
    "nextafter": 2, "fdim": 2, "remainder": 2,
    # integer power (numpy's ``power`` of integers: wrapping products; a
    # negative exponent gives the truncated value: 1 for 1, +-1 for -1, else 0)
    "ipow": 2,
    # conversions to the small integer types, wrapping around (numpy's astype)
    "cast_int8": 1, "cast_int16": 1, "cast_uint8": 1, "cast_uint16": 1, "cast_uint32": 1,
    "cast_int32": 1,
    # conversions to int64 and to the float types (C's conversions, numpy's astype;
    # a float converted to an integer is truncated toward zero)
    "cast_int64": 1, "cast_float32": 1, "cast_float64": 1,
}

#: the builtins that are C99 functions of one float of the same name
#: (``sinf``/``sin``), beyond ``exp log sqrt tanh erf``
MATH_FUNCTIONS = ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                  "acosh", "atanh", "log1p",
                  "expm1", "exp2", "log2", "log10", "cbrt", "floor", "ceil", "trunc", "rint")
#: the builtins that are C99 functions of two floats of the same name
MATH_FUNCTIONS2 = ("atan2", "hypot", "copysign", "fmod")
#: C99 functions of one and of two floats that only the TC frontend spells
#: (scalar libm calls, no libmvec variant)
C99_FUNCTIONS = ("erfc", "lgamma", "tgamma", "round", "logb")
C99_FUNCTIONS2 = ("nextafter", "fdim", "remainder")
#: those of them without a libmvec variant: ``copysign`` is a bit operation
#: gcc inlines, ``fmod`` a scalar libm call (numpy's remainder and
#: floor_divide of floats start from it)
SCALAR_FUNCTIONS2 = ("copysign", "fmod")

ARITH_OPS = ("+", "-", "*", "/", "%")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("&&", "||")
#: bitwise operators of integers (C's; shifts by a count outside 0..width-1
#: give numpy's values)
BITWISE_OPS = ("&", "|", "^", "<<", ">>")
BINARY_OPS = ARITH_OPS + COMPARE_OPS + LOGIC_OPS + BITWISE_OPS
UNARY_OPS = ("-", "!", "~")


@dataclass(frozen=True)
class Expr:
    """Base class; use the subclasses."""

    def children(self) -> tuple["Expr", ...]:
        return ()

    def walk(self) -> Iterator["Expr"]:
        """Pre-order traversal of this tree."""
        yield self
        for c in self.children():
            yield from c.walk()


@dataclass(frozen=True)
class Const(Expr):
    """A numeric literal; ``value`` is an int or a float (printed exactly)."""
    value: Union[int, float]
    span: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Index(Expr):
    """An index (iteration) variable of the enclosing statement."""
    name: str
    span: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Param(Expr):
    """A size parameter of the program (an integer)."""
    name: str
    span: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Access(Expr):
    """A read (or, on a left-hand side, a write) of ``tensor`` at ``indices``."""
    tensor: str
    indices: tuple[Expr, ...]
    span: Any = field(default=None, compare=False, repr=False)

    def children(self):
        return self.indices


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    operand: Expr
    span: Any = field(default=None, compare=False, repr=False)

    def children(self):
        return (self.operand,)


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    lhs: Expr
    rhs: Expr
    span: Any = field(default=None, compare=False, repr=False)

    def children(self):
        return (self.lhs, self.rhs)


@dataclass(frozen=True)
class Call(Expr):
    """A builtin call; ``fn`` is a key of :data:`BUILTINS`."""
    fn: str
    args: tuple[Expr, ...]
    span: Any = field(default=None, compare=False, repr=False)

    def children(self):
        return self.args


@dataclass(frozen=True)
class Select(Expr):
    """``cond ? then : otherwise``."""
    cond: Expr
    then: Expr
    otherwise: Expr
    span: Any = field(default=None, compare=False, repr=False)

    def children(self):
        return (self.cond, self.then, self.otherwise)


def accesses(e: Expr) -> list[Access]:
    """Every tensor read in ``e`` in pre-order, gathers' inner reads included."""
    return [n for n in e.walk() if isinstance(n, Access)]


def index_names(e: Expr) -> set[str]:
    return {n.name for n in e.walk() if isinstance(n, Index)}


def walks_last_dims(acc: Access, names: list[str]) -> bool | None:
    """Whether ``acc`` indexes its last ``len(names)`` dimensions by exactly
    the iterators ``names``, in that order, and mentions them nowhere else
    (the access walks those dimensions in memory order as the iterators
    advance, innermost last); ``None`` when it mentions none of them."""
    k, moving = len(names), set(names)
    if not set().union(*(index_names(i) for i in acc.indices)) & moving:
        return None
    if len(acc.indices) < k:
        return False
    lead, tail = acc.indices[:-k], acc.indices[-k:]
    return (not any(index_names(i) & moving for i in lead)
            and all(isinstance(i, Index) and i.name == v for i, v in zip(tail, names)))


def is_affine_index(e: Expr) -> bool:
    """True when ``e`` is (quasi-)affine in index variables and parameters:
    sums, differences, products with at least one constant or parameter-only
    factor... kept conservative: products need a side free of index vars."""
    if isinstance(e, (Const, Index, Param)):
        return isinstance(e, Index) or isinstance(e, Param) or isinstance(e.value, int)
    if isinstance(e, Unary) and e.op == "-":
        return is_affine_index(e.operand)
    if isinstance(e, Binary) and e.op in ("+", "-"):
        return is_affine_index(e.lhs) and is_affine_index(e.rhs)
    if isinstance(e, Binary) and e.op == "*":
        if not (is_affine_index(e.lhs) and is_affine_index(e.rhs)):
            return False
        return not index_names(e.lhs) or not index_names(e.rhs)
    if isinstance(e, Binary) and e.op in ("/", "%"):
        return (is_affine_index(e.lhs) and isinstance(e.rhs, Const)
                and isinstance(e.rhs.value, int) and e.rhs.value > 0)
    return False


def map_expr(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``e`` bottom-up; ``fn`` may return a replacement or ``None``."""
    if isinstance(e, Access):
        e = Access(e.tensor, tuple(map_expr(i, fn) for i in e.indices), e.span)
    elif isinstance(e, Unary):
        e = Unary(e.op, map_expr(e.operand, fn), e.span)
    elif isinstance(e, Binary):
        e = Binary(e.op, map_expr(e.lhs, fn), map_expr(e.rhs, fn), e.span)
    elif isinstance(e, Call):
        e = Call(e.fn, tuple(map_expr(a, fn) for a in e.args), e.span)
    elif isinstance(e, Select):
        e = Select(map_expr(e.cond, fn), map_expr(e.then, fn),
                   map_expr(e.otherwise, fn), e.span)
    r = fn(e)
    return e if r is None else r


def rename_tensors(e: Expr, mapping) -> Expr:
    """``e`` with every read of a tensor named in ``mapping`` (a ``Mapping``
    old name -> new name) reading the new name instead."""
    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Access) and x.tensor in mapping:
            return Access(mapping[x.tensor], x.indices, x.span)
        return None
    return map_expr(e, fn)


def canonical(e: Expr) -> list:
    """``e`` as nested JSON lists, one per node (``["Binary", "+", lhs,
    rhs]``): its structure without printing choices (precedence,
    parentheses); a constant keeps its Python type and exact ``repr``.
    Spans are left out.  :meth:`polyc.ir.Program.fingerprint` hashes it."""
    if isinstance(e, Const):
        return ["Const", type(e.value).__name__, repr(e.value)]
    if isinstance(e, (Index, Param)):
        return [type(e).__name__, e.name]
    if isinstance(e, Access):
        return ["Access", e.tensor, [canonical(i) for i in e.indices]]
    if isinstance(e, Unary):
        return ["Unary", e.op, canonical(e.operand)]
    if isinstance(e, Binary):
        return ["Binary", e.op, canonical(e.lhs), canonical(e.rhs)]
    if isinstance(e, Call):
        return ["Call", e.fn, [canonical(a) for a in e.args]]
    if isinstance(e, Select):
        return ["Select", canonical(e.cond), canonical(e.then), canonical(e.otherwise)]
    raise AssertionError(type(e))


# TC's precedence: all comparisons share one level (left-associative); the
# bitwise operators sit where C puts them
_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 6, "<=": 6, ">": 6,
         ">=": 6, "<<": 7, ">>": 7, "+": 8, "-": 8, "*": 9, "/": 9, "%": 9}


def to_text(e: Expr, prec: int = 0) -> str:
    """Print ``e`` in TC syntax (used by IR dumps and error messages)."""
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, (Index, Param)):
        return e.name
    if isinstance(e, Access):
        return f"{e.tensor}({', '.join(to_text(i) for i in e.indices)})"
    if isinstance(e, Unary):
        return f"{e.op}{to_text(e.operand, 10)}"
    if isinstance(e, Binary):
        p = _PREC[e.op]
        s = f"{to_text(e.lhs, p)} {e.op} {to_text(e.rhs, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(to_text(a) for a in e.args)})"
    if isinstance(e, Select):
        s = f"{to_text(e.cond, 1)} ? {to_text(e.then)} : {to_text(e.otherwise)}"
        return f"({s})" if prec > 0 else s
    raise AssertionError(type(e))
