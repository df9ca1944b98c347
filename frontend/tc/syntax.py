"""The TC syntax tree: frozen dataclasses produced by :mod:`.parser`.

Owns the shape of a parsed TC source before any meaning is given to names:
an identifier in an expression is a :class:`Name` (size, scalar tensor or
index variable, decided by :mod:`.sema`), ``X(...)`` is an :class:`Apply`
(tensor read or builtin call).  Every node carries a
:class:`~polyc.frontend.source.Span`.  :func:`format_syntax` prints a stable,
indented dump used by the golden tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..source import Span


# ---------------------------------------------------------------- signature
@dataclass(frozen=True)
class SizeName:
    """A size variable in a type's size list (``M`` in ``float(M, K)``)."""
    name: str
    span: Span


@dataclass(frozen=True)
class SizeConst:
    """An integer literal in a type's size list (``3`` in ``float(3, N)``)."""
    value: int
    span: Span


Dim = SizeName | SizeConst


@dataclass(frozen=True)
class TensorType:
    """``scalar`` is the type keyword as written (``float``, ``int64``, ...);
    ``dims`` the size list (empty for rank 0, with or without ``()``)."""
    scalar: str
    dims: tuple[Dim, ...]
    span: Span

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class Param:
    """An argument ``TYPE NAME`` of a definition."""
    type: TensorType
    name: str
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Output:
    """A name in ``-> (...)``, with an optional declared type."""
    name: str
    type: TensorType | None
    span: Span
    name_span: Span


# -------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Number:
    """A numeric literal: ``value`` is an ``int`` when ``text`` is all digits,
    else a ``float``."""
    text: str
    value: int | float
    span: Span


@dataclass(frozen=True)
class Name:
    """A bare identifier."""
    name: str
    span: Span


@dataclass(frozen=True)
class Apply:
    """``name(args)``: a tensor read or a builtin call."""
    name: str
    args: tuple[Expr, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class DimOf:
    """``name.dim``: the extent of dimension ``dim`` of tensor ``name``."""
    name: str
    dim: int
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: Expr
    rhs: Expr
    span: Span


@dataclass(frozen=True)
class Ternary:
    """``cond ? then : otherwise``."""
    cond: Expr
    then: Expr
    otherwise: Expr
    span: Span


@dataclass(frozen=True)
class Cast:
    """``type(operand)``, e.g. ``float(i)``."""
    type: str
    operand: Expr
    span: Span


Expr = Number | Name | Apply | DimOf | Unary | Binary | Ternary | Cast


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Apply):
        return e.args
    if isinstance(e, (Unary, Cast)):
        return (e.operand,)
    if isinstance(e, Binary):
        return (e.lhs, e.rhs)
    if isinstance(e, Ternary):
        return (e.cond, e.then, e.otherwise)
    return ()


def walk(e: Expr):
    """Pre-order traversal of an expression."""
    yield e
    for c in children(e):
        yield from walk(c)


# ---------------------------------------------------------------- statements
@dataclass(frozen=True)
class RangeConstraint:
    """``where var in lo:hi`` (``lo <= var < hi``)."""
    var: str
    lo: Expr
    hi: Expr
    span: Span
    var_span: Span


@dataclass(frozen=True)
class Exists:
    """``where exists expr``: ``expr``'s accesses join range inference."""
    expr: Expr
    span: Span


@dataclass(frozen=True)
class Let:
    """``where var = expr``: TC's let binding; ``var`` stands for ``expr``
    in the statement's right-hand side (:mod:`.lets` substitutes it)."""
    var: str
    expr: Expr
    span: Span
    var_span: Span


WhereClause = RangeConstraint | Exists | Let


@dataclass(frozen=True)
class Statement:
    """``tensor(indices) op rhs where ...``; ``op`` as written (``+=!``)."""
    tensor: str
    indices: tuple[Expr, ...]
    op: str
    rhs: Expr
    where: tuple[WhereClause, ...]
    span: Span
    lhs_span: Span
    op_span: Span
    #: TC's ``<=> name(args)`` annotation (an :class:`Apply`), which computes nothing
    equivalent: Expr | None = None


@dataclass(frozen=True)
class Def:
    """One ``def``.  ``source`` is the whole text it was parsed from (for
    error excerpts and ``Program.source``); it takes no part in equality."""
    name: str
    params: tuple[Param, ...]
    outputs: tuple[Output, ...]
    statements: tuple[Statement, ...]
    span: Span
    name_span: Span
    source: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Module:
    """A parsed TC source: its definitions in order."""
    defs: tuple[Def, ...]
    filename: str = "<tc>"
    source: str = field(default="", compare=False, repr=False)

    def get(self, name: str) -> Def:
        for d in self.defs:
            if d.name == name:
                return d
        raise KeyError(name)


# ------------------------------------------------------------------- printer
def format_type(t: TensorType) -> str:
    if not t.dims:
        return t.scalar
    dims = ", ".join(d.name if isinstance(d, SizeName) else str(d.value) for d in t.dims)
    return f"{t.scalar}({dims})"


def format_syntax(module: Module) -> str:
    """A stable, indented dump of ``module``: one node per line with its
    kind, its payload and its span ``[line:col-end_line:end_col]``."""
    out: list[str] = [f"module {module.filename}"]

    def emit(depth: int, text: str, span: Span | None) -> None:
        where = f" [{span.short()}]" if span is not None else ""
        out.append("  " * depth + text + where)

    def expr(e: Expr, depth: int, label: str = "") -> None:
        pre = f"{label}: " if label else ""
        if isinstance(e, Number):
            emit(depth, f"{pre}number {e.text} ({type(e.value).__name__})", e.span)
        elif isinstance(e, Name):
            emit(depth, f"{pre}name {e.name}", e.span)
        elif isinstance(e, DimOf):
            emit(depth, f"{pre}dim {e.name}.{e.dim}", e.span)
        elif isinstance(e, Apply):
            emit(depth, f"{pre}apply {e.name}/{len(e.args)}", e.span)
            for a in e.args:
                expr(a, depth + 1)
        elif isinstance(e, Unary):
            emit(depth, f"{pre}unary {e.op}", e.span)
            expr(e.operand, depth + 1)
        elif isinstance(e, Binary):
            emit(depth, f"{pre}binary {e.op}", e.span)
            expr(e.lhs, depth + 1)
            expr(e.rhs, depth + 1)
        elif isinstance(e, Ternary):
            emit(depth, f"{pre}ternary", e.span)
            expr(e.cond, depth + 1, "cond")
            expr(e.then, depth + 1, "then")
            expr(e.otherwise, depth + 1, "else")
        elif isinstance(e, Cast):
            emit(depth, f"{pre}cast {e.type}", e.span)
            expr(e.operand, depth + 1)
        else:  # pragma: no cover - exhaustive
            raise TypeError(type(e))

    for d in module.defs:
        emit(1, f"def {d.name}", d.span)
        for p in d.params:
            emit(2, f"param {p.name}: {format_type(p.type)}", p.span)
        for o in d.outputs:
            typ = f": {format_type(o.type)}" if o.type is not None else ""
            emit(2, f"output {o.name}{typ}", o.span)
        for s in d.statements:
            emit(2, f"statement {s.tensor} {s.op}", s.span)
            emit(3, f"lhs {s.tensor}/{len(s.indices)}", s.lhs_span)
            for i in s.indices:
                expr(i, 4)
            expr(s.rhs, 3, "rhs")
            if s.equivalent is not None:
                expr(s.equivalent, 3, "equivalent")
            for w in s.where:
                if isinstance(w, RangeConstraint):
                    emit(3, f"where {w.var} in", w.span)
                    expr(w.lo, 4, "lo")
                    expr(w.hi, 4, "hi")
                elif isinstance(w, Let):
                    emit(3, f"where {w.var} =", w.span)
                    expr(w.expr, 4)
                else:
                    emit(3, "where exists", w.span)
                    expr(w.expr, 4)
    return "\n".join(out) + "\n"
