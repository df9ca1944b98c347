"""Range inference for TC statements, done with isl.

Owns TC's rule for the ranges of index variables (TC-LANGUAGE.md, "Range
inference"): rectangular, as large as possible without reading out of bounds,
computed in rounds.  Variables fixed by ``where`` start resolved.  In each
round every tensor access argument with exactly one unresolved variable ``v``
gives the set of good values of ``v``::

    { v : for all resolved others o in [lo_o, hi_o): 0 <= arg(v, o) < extent }
      = complement of  proj_v( box(others) \\ { 0 <= arg < extent } )

whose bounds are isl's ``dim_min``/``dim_max`` (piecewise affine in the size
parameters); intervals found for one variable in one round are intersected.
Gather positions (an argument that reads a tensor) constrain nothing; the
inner read is an ordinary access.

Takes :mod:`polyc.expr` index expressions and extents (``isl.PwAff`` on
:func:`polyc.isl_util.param_space`); returns :class:`Range` objects on the same
space.  Also owns the isl helpers the TC lowering shares: the non-negative
parameter context, iteration-domain boxes, tensor boxes and the parameter
values for which an access stays in bounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import islpy as isl

from ... import expr as E
from ...access import condition_set
from ...isl_util import aff_from_expr, const_pw_aff, param_space, set_space


@dataclass(frozen=True)
class Range:
    """``lo <= v < hi``; both ``isl.PwAff`` on ``param_space(params)``,
    defined on (at least) the non-negative parameter context.  (During
    inference, the interval of one guarded read may lack a side: ``None``.)"""
    lo: isl.PwAff
    hi: isl.PwAff


@dataclass(frozen=True)
class Use:
    """One tensor access argument that takes part in range inference:
    ``0 <= index < extent`` must hold (``extent`` on the parameter space)
    wherever the read happens.  ``guards``: the conditions of the enclosing
    ``c ? a : b`` branches, each ``(c, taken)`` (``taken``: the read is in
    the ``a`` branch); a guarded read constrains only where its affine
    guards hold (TC-LANGUAGE.md, guarded reads)."""
    index: E.Expr
    extent: isl.PwAff
    tensor: str
    dim: int
    guards: tuple = ()

    def text(self) -> str:
        return f"{self.tensor}(...{E.to_text(self.index)}...) (dimension {self.dim})"


@dataclass(frozen=True)
class Inference:
    """The result: ``ranges[v]`` for every variable, and the variables
    resolved in each round (round 0: the ``where`` clauses)."""
    ranges: dict
    rounds: tuple


class RangeInferenceError(Exception):
    """``var`` never became resolvable; ``uses`` are the arguments that
    mention it with another unresolved variable, ``guarded`` the guarded
    reads that mention it alone (their guards leave it unbounded on a side)."""

    def __init__(self, var: str, uses: Sequence[Use], guarded: Sequence[Use] = ()):
        super().__init__(var)
        self.var, self.uses, self.guarded = var, tuple(uses), tuple(guarded)


# ------------------------------------------------------------ isl helpers
def nonneg_context(params: Sequence[str]) -> isl.Set:
    """``[params] -> { [] : every param >= 0 }`` built with the isl API."""
    space = param_space(params)
    ctx = isl.Set.universe(space)
    for p in params:
        ctx = ctx.add_constraint(isl.Constraint.ineq_from_names(space, {p: 1}))
    return ctx


def size_pw_aff(e: E.Expr, params: Sequence[str]) -> isl.PwAff:
    """An integer size expression (no index variables) as a ``PwAff`` on the
    parameter space.  Raises :class:`~polyc.isl_util.NonAffineError`."""
    return aff_from_expr(e, param_space(params))


def on_param_space(pa: isl.PwAff, params: Sequence[str]) -> isl.PwAff:
    """Move ``pa`` (parameter domain or 0-d set domain) onto
    ``param_space(params)``, the space of shapes and ranges."""
    if not pa.get_domain_space().is_params():
        pa = pa.project_domain_on_params()
    return pa.insert_domain(param_space(params))


def lift(pa: isl.PwAff, space: isl.Space) -> isl.PwAff:
    """``pa`` (a function of the parameters) as a function on ``space``."""
    if not pa.get_domain_space().is_params():
        pa = pa.project_domain_on_params()
    return pa.insert_domain(space)


def _var(space: isl.Space, pos: int) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(space)
    return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, pos))


def box(space: isl.Space, ranges: Mapping[str, Range]) -> isl.Set:
    """The set of ``space`` whose dimensions named in ``ranges`` lie in their
    ranges (the other dimensions are unconstrained).

    A bound's pieces may hold on parameter values described with
    existentially quantified variables (``dim_max`` of a strided access,
    ``2*h + 3*w + kh``), which each intersection copies; isl's
    ``compute_divs`` gives them explicit integer divisions of the sizes (the
    same set): every later operation on the domain (dependences, scheduling,
    AST generation) was seconds slower with the copies."""
    s = isl.Set.universe(space)
    for pos, name in enumerate(space.get_var_names(isl.dim_type.set)):
        if name in ranges:
            v, r = _var(space, pos), ranges[name]
            s = s.intersect(v.ge_set(lift(r.lo, space))).intersect(v.lt_set(lift(r.hi, space)))
    return s.compute_divs().coalesce()


def domain_box(name: str, iterators: Sequence[str], ranges: Mapping[str, Range],
               params: Sequence[str]) -> isl.Set:
    """The iteration domain ``{ name[iterators] : lo_v <= v < hi_v }``."""
    return box(set_space(params, iterators, name), ranges)


def masked_domain(name: str, iterators: Sequence[str], ranges: Mapping[str, Range],
                  params: Sequence[str], rhs: E.Expr | None) -> isl.Set:
    """The domain of a statement: the box; for a ``+=!`` update whose
    right-hand side ``rhs`` is ``c ? e : 0.0`` with an affine ``c`` (a causal
    mask), the box intersected with ``c``: where ``c`` fails the term adds
    0.0 to an accumulator that starts at +0.0, which changes no bit.
    ``rhs``: ``None`` for any other statement."""
    domain = domain_box(name, iterators, ranges, params)
    if isinstance(rhs, E.Select) and isinstance(rhs.otherwise, E.Const) \
            and float(rhs.otherwise.value) == 0.0:
        cond = condition_set(rhs.cond, domain.get_space())
        if cond is not None:
            domain = domain.intersect(cond).coalesce()
    return domain


def holds_on(cond: isl.Set, context: isl.Set) -> bool:
    """Whether the parameter set ``cond`` contains all of ``context``."""
    return context.is_subset(cond)


def pw_min(a: isl.PwAff, b: isl.PwAff, context: isl.Set) -> isl.PwAff:
    """``min(a, b)``, returning one operand when it is provably the smaller."""
    if holds_on(a.le_set(b), context):
        return a
    if holds_on(b.le_set(a), context):
        return b
    return a.min(b).coalesce()


def pw_max(a: isl.PwAff, b: isl.PwAff, context: isl.Set) -> isl.PwAff:
    if holds_on(a.ge_set(b), context):
        return a
    if holds_on(b.ge_set(a), context):
        return b
    return a.max(b).coalesce()


def nonneg(pa: isl.PwAff, context: isl.Set, params: Sequence[str]) -> isl.PwAff:
    """``max(pa, 0)``, or ``pa`` itself when it is provably >= 0."""
    return pw_max(pa, const_pw_aff(param_space(params), 0), context)


def is_zero(pa: isl.PwAff, context: isl.Set, params: Sequence[str]) -> bool:
    """Whether ``pa`` is defined and equal to 0 on all of ``context``."""
    zero = const_pw_aff(param_space(params), 0)
    return holds_on(pa.eq_set(zero), context)


# -------------------------------------------------------------- inference
def uses_of(access: E.Access, shape: Sequence[isl.PwAff], guards: tuple = ()) -> list[Use]:
    """The arguments of ``access`` that take part in range inference: every
    index except gather positions (those that read a tensor).  ``guards``:
    the branch conditions the read is under (:func:`guarded_reads`)."""
    return [Use(idx, shape[d], access.tensor, d, guards)
            for d, idx in enumerate(access.indices)
            if not any(isinstance(n, E.Access) for n in idx.walk())]


def guarded_reads(e: E.Expr) -> list[tuple[E.Access, tuple]]:
    """Every tensor read of ``e`` (the order of :func:`E.accesses`) with the
    conditions of the ``c ? a : b`` branches it is in, each ``(c, taken)``;
    the reads of a condition itself are unguarded by it."""
    out: list[tuple[E.Access, tuple]] = []

    def visit(x: E.Expr, guards: tuple) -> None:
        if isinstance(x, E.Access):
            out.append((x, guards))
        if isinstance(x, E.Select):
            visit(x.cond, guards)
            visit(x.then, guards + ((x.cond, True),))
            visit(x.otherwise, guards + ((x.cond, False),))
            return
        for c in x.children():
            visit(c, guards)
    visit(e, ())
    return out


def _guard_set(space: isl.Space, guards: tuple) -> isl.Set:
    """Where the affine ones of ``guards`` hold on ``space`` (a non-affine
    condition restricts nothing: the read is assumed everywhere, which is
    sound); variables not yet resolved are unconstrained."""
    s = isl.Set.universe(space)
    for cond, taken in guards:
        c = condition_set(cond, space)
        if c is not None:
            s = s.intersect(c) if taken else s.subtract(c)
    return s


def _total(pa: isl.PwAff, context: isl.Set, params: Sequence[str]) -> isl.PwAff:
    """Extend a bound defined where its interval is non-empty to the whole
    context: a single affine piece is extended as is (TC's symbolic bound,
    e.g. ``I - K + 1``); otherwise the rest of the context gets 0 (an empty
    range ``[0, 0)``)."""
    pa = on_param_space(pa, params)
    if pa.n_piece() == 1:
        (_, aff), = pa.get_pieces()
        return isl.PwAff.from_aff(aff)
    rest = context.subtract(pa.domain())
    if rest.is_empty():
        return pa.coalesce()
    return pa.union_add(const_pw_aff(param_space(params), 0).intersect_domain(rest)).coalesce()


def _good(space: isl.Space, var: str, bad: isl.Set, params: isl.Set) -> isl.Set:
    """The values of ``var`` outside the projection of ``bad`` onto it, for
    the parameter values ``params``."""
    pos = space.find_dim_by_name(isl.dim_type.set, var)
    n = space.dim(isl.dim_type.set)
    bad_v = bad.project_out(isl.dim_type.set, pos + 1, n - pos - 1) \
               .project_out(isl.dim_type.set, 0, pos)
    return isl.Set.universe(bad_v.get_space()).intersect_params(params) \
              .subtract(bad_v).coalesce()


def _is_convex(s: isl.Set) -> bool:
    """Whether ``s`` holds every integer point of its polyhedral hull (the
    hull in the space of the sizes and the set's dimensions together).

    The hull of a guarded read's good values over seven sizes took a second
    to compute (a transposed convolution: seconds in all), so two exact
    answers come first: one basic set without existentials is convex; and
    when a basic set without existentials is unbounded along a dimension
    (no constraint limits it that way), the hull's recession cone holds
    that direction, so every point of ``s`` moved along it lies in the hull
    and one outside ``s`` shows that ``s`` is not convex.  The hull decides
    the rest."""
    s = s.coalesce()
    pieces = s.get_basic_sets()
    if len(pieces) <= 1 and all(b.dim(isl.dim_type.div) == 0 for b in pieces):
        return True
    space = s.get_space()
    for pos in range(space.dim(isl.dim_type.set)):
        for sign in (1, -1):
            if not any(b.dim(isl.dim_type.div) == 0 and not b.is_empty() and all(
                    (c.get_coefficient_val(isl.dim_type.set, pos) * sign).is_nonneg()
                    and (not c.is_equality()
                         or c.get_coefficient_val(isl.dim_type.set, pos).is_zero())
                    for c in b.get_constraints()) for b in pieces):
                continue
            # { x -> x + t e_pos : t >= 1 } along the unbounded direction
            ms = isl.Space.map_from_set(space)
            move = isl.Map.identity(ms).project_out(isl.dim_type.out, pos, 1) \
                .insert_dims(isl.dim_type.out, pos, 1)
            step = isl.Constraint.alloc_inequality(isl.LocalSpace.from_space(ms)) \
                .set_coefficient_val(isl.dim_type.in_, pos, -sign) \
                .set_coefficient_val(isl.dim_type.out, pos, sign).set_constant_val(-1)
            if not s.apply(move.add_constraint(step)).is_subset(s):
                return False
    return isl.Set.from_basic_set(s.polyhedral_hull()).is_subset(s)


def _interval(space: isl.Space, var: str, use: Use, resolved: Mapping[str, Range],
              context: isl.Set, params: Sequence[str]) -> tuple[Range | None, Range | None]:
    """``(bounds, fallback)`` of ``var`` for one argument.  ``bounds``: its
    maximal interval, ``None`` when the argument does not bound it (e.g.
    ``i % 4``).  A guarded read (``use.guards``) bounds ``var`` only where
    its affine guards hold; when the values of ``var`` that keep it in
    bounds there form an interval, a side of it may be missing (``lo`` or
    ``hi`` is ``None``: ``i > 0 ? x(i - 1) : ...`` bounds ``i`` from above
    only; a read that its guard keeps in bounds bounds nothing) and
    ``fallback`` is the interval the read would give unguarded (for a side
    no read bounds: :func:`infer_ranges`); otherwise the read bounds ``var``
    as an unguarded one would (a smaller interval, still in bounds)."""
    arg = aff_from_expr(use.index, space)
    names = E.index_names(use.index).union(*(E.index_names(c) for c, _ in use.guards))
    others = {o: resolved[o] for o in names if o != var and o in resolved}
    within = box(space, others).intersect_params(context.params())
    zero = const_pw_aff(space, 0)
    inside = arg.ge_set(zero).intersect(arg.lt_set(lift(use.extent, space)))
    bad = within.subtract(inside)
    good = _good(space, var, bad, within.params())
    plain = _bounds(good, context, params) if good.is_bounded() else None
    if use.guards:
        guarded = _good(space, var, bad.intersect(_guard_set(space, use.guards)),
                        within.params())
        if _is_convex(guarded):
            return _bounds(guarded, context, params), plain
    return plain, None


def _bounds(good: isl.Set, context: isl.Set, params: Sequence[str]) -> Range | None:
    """The interval ``good`` (a convex one-dimensional set), a missing side
    ``None``; ``None`` when it has neither."""
    if good.is_empty():
        empty = const_pw_aff(param_space(params), 0)
        return Range(empty, empty)
    lo = _total(good.dim_min(0), context, params) \
        if good.dim_has_lower_bound(isl.dim_type.set, 0) else None
    hi = _total(good.dim_max(0).add(const_pw_aff(good.dim_max(0).get_domain_space(), 1)),
                context, params) if good.dim_has_upper_bound(isl.dim_type.set, 0) else None
    return None if lo is None and hi is None else Range(lo, hi)


def _tightest(bounds, pick, context: isl.Set) -> isl.PwAff | None:
    """``pick`` (:func:`pw_max` or :func:`pw_min`) of the bounds that are
    not ``None``; ``None`` when there are none."""
    out = None
    for b in bounds:
        if b is not None:
            out = b if out is None else pick(out, b, context)
    return out


def infer_ranges(variables: Sequence[str], params: Sequence[str], context: isl.Set,
                 uses: Sequence[Use], fixed: Mapping[str, Range]) -> Inference:
    """Infer a :class:`Range` for every name in ``variables``.

    ``fixed`` are the ``where`` ranges (resolved from the start, never
    narrowed); ``uses`` the access arguments taking part; ``context`` the
    parameter context (a 0-d set).  Raises
    :class:`~polyc.isl_util.NonAffineError` for an argument isl cannot
    represent (that is not a gather position) and
    :class:`RangeInferenceError` for the first variable that never becomes
    resolvable.
    """
    space = set_space(params, variables)
    for use in uses:  # report non-affine arguments first, in source order
        aff_from_expr(use.index, space)
    resolved: dict[str, Range] = dict(fixed)
    rounds = [tuple(v for v in variables if v in fixed)]
    while len(resolved) < len(variables):
        found: dict[str, list[tuple]] = {}
        for use in uses:
            names = E.index_names(use.index)
            open_ = [v for v in names if v not in resolved]
            if len(open_) != 1:
                continue
            r, fallback = _interval(space, open_[0], use, resolved, context, params)
            if r is not None or fallback is not None:
                found.setdefault(open_[0], []).append((r, fallback))
        if not found:
            break
        done = []
        for v, rs in found.items():
            # a guarded read may bound one side only; a side that no read
            # bounds is the unguarded bound of the guarded reads lacking it
            # (y(i) = i < 3 ? x(i) : 0.0 has N elements)
            lo = _tightest([r.lo for r, _ in rs if r is not None], pw_max, context)
            if lo is None:
                lo = _tightest([f.lo for r, f in rs if f is not None
                                and (r is None or r.lo is None)], pw_max, context)
            hi = _tightest([r.hi for r, _ in rs if r is not None], pw_min, context)
            if hi is None:
                hi = _tightest([f.hi for r, f in rs if f is not None
                                and (r is None or r.hi is None)], pw_min, context)
            if lo is not None and hi is not None:
                resolved[v] = Range(lo, hi)
                done.append(v)
        if not done:
            break
        rounds.append(tuple(v for v in variables if v in done))
    for v in variables:
        if v not in resolved:
            mine = [u for u in uses if v in E.index_names(u.index)]
            alone = [u for u in mine if E.index_names(u.index) - set(resolved) == {v}]
            raise RangeInferenceError(v, [u for u in mine if u not in alone],
                                      [u for u in alone if u.guards])
    return Inference({v: resolved[v] for v in variables}, tuple(rounds))


def empty_at_zero(r: Range, context: isl.Set, params) -> Range:
    """``r`` with ``[0, 0)`` for the sizes where it is empty, when it starts
    at 0 for all others (and there are some) (``N >= 1 ? 0 : 1`` from a guarded read at ``N = 0``
    gives no extent); ``r`` itself otherwise."""
    if is_zero(r.lo, context, params):
        return r
    zero = const_pw_aff(param_space(params), 0)
    empty = r.lo.ge_set(r.hi)
    if context.is_subset(empty) or not context.is_subset(r.lo.eq_set(zero).union(empty)):
        return r
    hi = r.hi if empty.is_subset(r.hi.le_set(zero)) else r.hi.intersect_domain(
        context.subtract(empty)).union_add(zero.intersect_domain(empty)).coalesce()
    return Range(zero, hi)
