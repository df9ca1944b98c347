"""TC's let bindings (``where foo = a(i)``), substituted away before lowering.

Takes a :class:`~.syntax.Def` and returns one without :class:`~.syntax.Let`
clauses: in each statement, every binding's name is replaced by its
expression in the right-hand side, in ``exists`` clauses and in later
bindings (a binding sees the bindings before it), as TC's semantics says
(``b(i) = 2*foo where foo = a(i)`` is ``b(i) = 2*a(i)``).  The substituted
nodes keep the spans of the binding's expression, so later errors point
at it.  A name bound twice, bound while it is a size, a tensor or a
left-hand-side index, given a range (``where foo = a(i), foo in 1:2``), or
bound to an expression that uses the name itself is a
:class:`~polyc.errors.SemanticError` with its location.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import SemanticError
from ..source import Span, excerpt
from . import syntax as S


def expand_lets(defn: S.Def, source: str) -> S.Def:
    """``defn`` with every ``where NAME = EXPR`` substituted (see the module)."""
    if not any(isinstance(w, S.Let) for st in defn.statements for w in st.where):
        return defn
    names = {p.name for p in defn.params} | {o.name for o in defn.outputs}
    names |= {d.name for p in defn.params for d in p.type.dims if isinstance(d, S.SizeName)}
    return replace(defn, statements=tuple(_statement(st, names, source)
                                          for st in defn.statements))


def _error(source: str, span: Span, message: str) -> SemanticError:
    return SemanticError(message, line=span.line, column=span.column,
                         excerpt=excerpt(source, span), filename=span.filename)


def _statement(st: S.Statement, names: set[str], source: str) -> S.Statement:
    lets: dict[str, S.Expr] = {}
    lhs = {i.name for i in st.indices if isinstance(i, S.Name)}
    for w in st.where:
        if not isinstance(w, S.Let):
            continue
        if w.var in lets:
            raise _error(source, w.var_span, f"'{w.var}' is bound twice in this where clause")
        if w.var in names or w.var in lhs:
            what = "a left-hand side index" if w.var in lhs else "a size, tensor or argument"
            raise _error(source, w.var_span, f"'{w.var}' is {what}; a where binding "
                         "'NAME = EXPR' needs a name of its own")
        if any(isinstance(n, S.Name) and n.name == w.var for n in S.walk(w.expr)):
            raise _error(source, w.var_span, f"the binding of '{w.var}' uses '{w.var}' itself")
        lets[w.var] = _substitute(w.expr, lets)
    for w in st.where:
        if isinstance(w, S.RangeConstraint) and w.var in lets:
            raise _error(source, w.var_span, f"'{w.var}' is bound by 'where {w.var} = ...', "
                         "so it is not an index variable and takes no range")
    where = tuple(replace(w, expr=_substitute(w.expr, lets)) if isinstance(w, S.Exists) else w
                  for w in st.where if not isinstance(w, S.Let))
    return replace(st, rhs=_substitute(st.rhs, lets), where=where)


def _substitute(e: S.Expr, lets: dict[str, S.Expr]) -> S.Expr:
    """``e`` with each :class:`~.syntax.Name` bound in ``lets`` replaced."""
    if isinstance(e, S.Name):
        return lets.get(e.name, e)
    if isinstance(e, S.Apply):
        return replace(e, args=tuple(_substitute(a, lets) for a in e.args))
    if isinstance(e, S.Unary):
        return replace(e, operand=_substitute(e.operand, lets))
    if isinstance(e, S.Binary):
        return replace(e, lhs=_substitute(e.lhs, lets), rhs=_substitute(e.rhs, lets))
    if isinstance(e, S.Ternary):
        return replace(e, cond=_substitute(e.cond, lets), then=_substitute(e.then, lets),
                       otherwise=_substitute(e.otherwise, lets))
    if isinstance(e, S.Cast):
        return replace(e, operand=_substitute(e.operand, lets))
    return e            # Number, DimOf
