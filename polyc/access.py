"""Access relations of statements, derived from their expressions with isl.

:func:`make_statement` builds an :class:`~polyc.ir.Statement` from its
iteration domain and expressions: the written and read access relations
(:func:`access_relation`), each read restricted to where it happens (a read
in a branch of ``c ? a : b`` with an affine condition, :func:`guarded_accesses`
and :func:`condition_set`).  Gathers (an index that reads a tensor) are
over-approximated by the full extent of that dimension so that dependences
stay sound.
"""

from __future__ import annotations

from typing import Any, Sequence

import islpy as isl

from . import expr as E
from .ir import Statement
from .isl_util import CTX, NonAffineError, aff_from_expr


def statement_space(params: Sequence[str], name: str, iterators: Sequence[str]) -> isl.Space:
    sp = isl.Space.create_from_names(CTX, set=list(iterators), params=list(params))
    return sp.set_tuple_name(isl.dim_type.set, name)


def access_relation(domain: isl.Set, access: E.Access, shape: Sequence[isl.PwAff]) -> isl.Map:
    """The access relation ``{ S[i] -> T[f(i)] }`` of ``access`` on ``domain``.

    Affine indices give exact relations; an index that is not affine because
    it reads a tensor (a gather) is over-approximated by ``0 <= x < shape[d]``
    (the user's precondition is that the index tensor's values are in range).
    Other non-affine indices raise :class:`~polyc.isl_util.NonAffineError`.
    """
    space = domain.get_space()
    assert len(access.indices) == len(shape)
    rel = isl.Map.from_domain(domain)  # { S[i] -> [] }
    for d, idx in enumerate(access.indices):
        try:
            pa = aff_from_expr(idx, space)
            col = isl.Map.from_pw_aff(pa)
        except NonAffineError as err:
            if not any(isinstance(n, E.Access) for n in idx.walk()):
                raise
            del err
            # full extent of dimension d: { S[i] -> [x] : 0 <= x < shape_d }
            box = extent_set(shape[d].align_params(space.params()))
            col = isl.Map.from_domain_and_range(domain, box)
        rel = rel.flat_range_product(col)
    rel = rel.set_tuple_name(isl.dim_type.out, access.tensor)
    return rel.intersect_domain(domain)


def extent_set(extent: isl.PwAff) -> isl.Set:
    """The one-dimensional set ``{ [x] : 0 <= x < extent }`` for an extent
    given as a ``PwAff`` on a parameter space."""
    ext = extent.insert_dims(isl.dim_type.in_, 0, 1)
    ls = isl.LocalSpace.from_space(ext.get_domain_space())
    x = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, 0))
    zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
    return x.ge_set(zero).intersect(x.lt_set(ext))


def guarded_accesses(e: E.Expr, domain: isl.Set) -> list[tuple[E.Access, isl.Set]]:
    """Every tensor read of ``e`` (the order of :func:`E.accesses`) with the
    part of ``domain`` where it happens: a read in a branch of ``c ? a : b``
    whose condition is affine in index variables and sizes happens only
    where its branch is taken (TC-LANGUAGE.md, guarded reads); any other
    read on the whole ``domain``."""
    out: list[tuple[E.Access, isl.Set]] = []

    def visit(x: E.Expr, dom: isl.Set) -> None:
        if isinstance(x, E.Access):
            out.append((x, dom))
        if isinstance(x, E.Select):
            visit(x.cond, dom)
            cond = condition_set(x.cond, domain.get_space())
            visit(x.then, dom if cond is None else dom.intersect(cond))
            visit(x.otherwise, dom if cond is None else dom.subtract(cond))
            return
        for c in x.children():
            visit(c, dom)
    visit(e, domain)
    return out


_COMPARE = {"<": "lt_set", "<=": "le_set", ">": "gt_set", ">=": "ge_set", "==": "eq_set",
            "!=": "ne_set"}


def condition_set(e: E.Expr, space: isl.Space) -> isl.Set | None:
    """The points of ``space`` where the condition ``e`` holds, or ``None``
    when ``e`` is not affine (comparisons of affine index expressions
    combined with ``&&``, ``||`` and ``!``)."""
    if isinstance(e, E.Binary) and e.op in _COMPARE:
        try:
            a, b = aff_from_expr(e.lhs, space), aff_from_expr(e.rhs, space)
        except NonAffineError:
            return None
        return getattr(a, _COMPARE[e.op])(b)
    if isinstance(e, E.Binary) and e.op in ("&&", "||"):
        a, b = condition_set(e.lhs, space), condition_set(e.rhs, space)
        if a is None or b is None:
            return None
        return a.intersect(b) if e.op == "&&" else a.union(b)
    if isinstance(e, E.Unary) and e.op == "!":
        a = condition_set(e.operand, space)
        return None if a is None else isl.Set.universe(space).subtract(a)
    return None


def make_statement(*, name: str, iterators: Sequence[str], domain: isl.Set,
                   lhs: E.Access, op: str, rhs: E.Expr, shapes: dict,
                   kind: str = "assign", reduction_iterators: Sequence[str] = (),
                   text: str = "", span: Any = None) -> Statement:
    """Build a :class:`Statement`, deriving its access relations with isl.

    ``shapes`` maps every tensor name to its shape (a sequence of
    ``isl.PwAff``).  ``domain`` must be a set named ``name`` whose dimensions
    are ``iterators``.  Raises :class:`~polyc.isl_util.NonAffineError` for a
    non-affine index that is not a gather.
    """
    assert domain.get_tuple_name() == name
    write = access_relation(domain, lhs, shapes[lhs.tensor])
    reads = []
    if kind == "update":
        reads.append(write)
    for acc, dom in guarded_accesses(rhs, domain):
        reads.append(access_relation(dom, acc, shapes[acc.tensor]))
    return Statement(name=name, iterators=tuple(iterators), domain=domain, lhs=lhs,
                     op=op, rhs=rhs, write=write, reads=tuple(reads), kind=kind,
                     reduction_iterators=tuple(reduction_iterators), text=text, span=span)
