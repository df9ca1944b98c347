"""Scalar promotion of loop invariants, for the C emitter (:mod:`.emit`).

A statement that is the whole body of a vector loop may read elements that
do not move with the loop (a row's ``max`` in a softmax, a layernorm's
``mean`` and ``var``).  :func:`hoist_invariants` loads each once into a local
before the loop, then computes once the costly expressions over those locals
alone (``1 / sqrt(var + eps)``): one division and square root per row
instead of one per vector.  Loading before the loop also keeps gcc's partial
redundancy elimination from reloading a just-stored element in the loop
latch after a call (``expf``), which would keep the loop scalar.

The locals are named ``polyc_inv<k>`` in C; in the rewritten statement they
are scalar accesses to tensors named ``HOISTED + k``, which no user tensor
can be named (``$`` is never part of a tensor name).
"""

from __future__ import annotations

from dataclasses import replace

import cgen as c

from polyc import expr as E
from polyc.ir import C_TYPES, Statement

from .cexpr import float_type_of
from .printer import StatementPrinter as Emitter

#: Prefix of the names of hoisted invariants in rewritten statements.
HOISTED = "$inv"


def hoist_invariants(em: Emitter, s: Statement, args, loop: str,
                     defined: set[str] | None = None) -> tuple[Statement, list, list]:
    """Loop-invariant reads of ``s``'s right-hand side in the loop over
    ``loop``: ``(s with each replaced by a local, the declarations of the
    iterators they use, the locals' initialisers)``.  A read is invariant
    when no index moves with ``loop`` and ``s`` does not write its tensor
    (the loop body is ``s`` alone); with ``defined``, only reads whose
    indices use those iterators (already declared by the caller, so no
    declarations are returned).  Then the largest costly subexpressions over
    those locals alone become locals too (floating-point only: an integer
    division may trap, so it stays where it was)."""
    moving = {it for it, arg in zip(s.iterators, args) if loop in E.index_names(arg)}
    reads: list[E.Access] = []
    for a in E.accesses(s.rhs):
        idx = set().union(*map(E.index_names, a.indices))
        if (a.tensor == s.tensor or a.tensor in em.locals or a in reads
                or idx & moving or any(E.accesses(i) for i in a.indices)
                or (defined is not None and not idx <= defined)):
            continue
        reads.append(a)
    if not reads:
        return s, [], []
    pr = em._printer()
    used = set().union(*(E.index_names(i) for a in reads for i in a.indices))
    its = [] if defined is not None else em._iterators(
        [(it, arg) for it, arg in zip(s.iterators, args) if it in used])
    inits: list = []

    def local(dtype: str, value: str) -> E.Access:
        name = f"{HOISTED}{em.hoisted}"
        em.hoisted += 1
        em.dtypes[name] = dtype
        inits.append(c.Initializer(c.Const(c.Value(C_TYPES[dtype], em._access(name, []))),
                                   value))
        return E.Access(name, ())
    names = {a: local(em.dtypes[a.tensor], pr._access(a)) for a in reads}
    rhs = E.map_expr(s.rhs, lambda e: names.get(e) if isinstance(e, E.Access) else None)
    hoisted = {a.tensor for a in names.values()}
    ftype = float_type_of(em.dtypes[s.tensor])
    for sub in _costly_invariants(rhs, hoisted):
        text, t = pr.typed(sub, ftype)
        if not t.startswith("float") or any(
                not pr.typed(x, ftype)[1].startswith("float") for x in sub.walk()
                if isinstance(x, E.Binary) and x.op in ("/", "%")):
            continue
        var = local(t, text)
        rhs = E.map_expr(rhs, lambda e, sub=sub, var=var: var if e == sub else None)
    return replace(s, rhs=rhs), its, inits


def _costly_invariants(e: E.Expr, locals_: set[str]) -> list[E.Expr]:
    """The largest subexpressions of ``e`` that read nothing but the scalars
    ``locals_`` (no iterator, no other element) and call a function or divide:
    worth computing once before a loop."""
    def invariant(x: E.Expr) -> bool:
        return not any(isinstance(y, E.Index) or (isinstance(y, E.Access)
                                                  and (y.tensor not in locals_ or y.indices))
                       for y in x.walk())

    def costly(x: E.Expr) -> bool:
        return any(isinstance(y, E.Call) or (isinstance(y, E.Binary) and y.op in ("/", "%"))
                   for y in x.walk())
    found: list[E.Expr] = []

    def go(x: E.Expr) -> None:
        if not isinstance(x, (E.Access, E.Const, E.Param)) and invariant(x) and costly(x):
            found.append(x)
            return
        for child in x.children():
            go(child)
    go(e)
    return found
