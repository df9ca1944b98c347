"""Locality analysis of band members (no transformation here).

Takes a band node of an ``isl.Schedule`` and the ``ir.Program``; answers which
iterator of each statement a band member scans, which members are constant for
a statement (an initialisation or epilogue fused into a reduction band), and
how many accesses a member makes stride-1 — the inputs of the loop-order
decisions in :mod:`polyc.schedule.tile`.
"""

from __future__ import annotations

import islpy as isl

from .. import expr as E
from ..ir import Program, Statement
from ..isl_util import NonAffineError, aff_from_expr


def band_statements(band: isl.ScheduleNode, program: Program) -> list[Statement]:
    """The statements whose instances the band schedules, in program order."""
    names: set[str] = set()
    band.get_domain().foreach_set(lambda s: names.add(s.get_tuple_name()))
    return [s for s in program.statements if s.name in names]


def _member_aff(stmt: Statement, upa: isl.UnionPwAff) -> isl.Aff | None:
    fn_space = isl.Space.from_domain(stmt.domain.get_space()).add_dims(isl.dim_type.out, 1)
    pieces = upa.extract_pw_aff(fn_space).get_pieces()
    return pieces[0][1] if len(pieces) == 1 else None


def member_iterator(stmt: Statement, upa: isl.UnionPwAff) -> str | None:
    """The iterator of ``stmt`` that band member ``upa`` scans with unit
    coefficient (``None`` when the member is not a single iterator)."""
    aff = _member_aff(stmt, upa)
    if aff is None:
        return None
    found = None
    for i, name in enumerate(stmt.iterators):
        c = aff.get_coefficient_val(isl.dim_type.in_, i).to_python()
        if c == 0:
            continue
        if c != 1 or found is not None:
            return None
        found = name
    return found


def member_is_constant(stmt: Statement, upa: isl.UnionPwAff) -> bool:
    """True when member ``upa`` does not depend on any iterator of ``stmt``."""
    aff = _member_aff(stmt, upa)
    if aff is None:
        return False
    return all(aff.get_coefficient_val(isl.dim_type.in_, i).is_zero()
               for i in range(len(stmt.iterators)))


def _coefficient(idx: E.Expr, stmt: Statement, var: str) -> int | None:
    try:
        pa = aff_from_expr(idx, stmt.domain.get_space())
    except NonAffineError:
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    pos = stmt.iterators.index(var)
    return int(pieces[0][1].get_coefficient_val(isl.dim_type.in_, pos).to_python())


def stride_score(stmt: Statement, var: str) -> int:
    """+1 for every access of ``stmt`` whose last index moves by one element
    when ``var`` does (and no other index depends on it), -1 for every access
    that ``var`` strides through a non-last dimension, 0 when ``var`` does not
    move the access."""
    score = 0
    for acc in [stmt.lhs] + E.accesses(stmt.rhs):
        if not acc.indices:
            continue
        coeffs = [_coefficient(i, stmt, var) for i in acc.indices]
        if any(c is None for c in coeffs):
            continue
        if any(coeffs[:-1]):
            score -= 1
        elif coeffs[-1] in (1, -1):
            score += 1
    return score


def hot_statements(stmts: list[Statement]) -> list[Statement]:
    """The statements of deepest iteration domain (the ones that run most)."""
    depth = max((len(s.iterators) for s in stmts), default=0)
    return [s for s in stmts if len(s.iterators) == depth and depth > 0]


def member_scores(band: isl.ScheduleNode, program: Program) -> list[int | None]:
    """Per band member: the summed :func:`stride_score` over the band's hot
    statements, or ``None`` when the member is not a plain iterator of one."""
    mupa = band.band_get_partial_schedule()
    hot = hot_statements(band_statements(band, program))
    scores: list[int | None] = []
    for j in range(band.band_n_member()):
        upa = mupa.get_union_pw_aff(j)
        total: int | None = 0
        for s in hot:
            var = member_iterator(s, upa)
            if var is None:
                total = None
                break
            total += stride_score(s, var)
        scores.append(total)
    return scores


def reduction_members(band: isl.ScheduleNode, program: Program) -> list[int] | None:
    """Members that scan only reduction iterators of the band's hot
    statements (each a reduction update) and are constant for every other
    statement; ``None`` when the band does not have that shape."""
    mupa = band.band_get_partial_schedule()
    stmts = band_statements(band, program)
    hot = hot_statements(stmts)
    if not hot or any(s.kind != "update" or not s.reduction_iterators for s in hot):
        return None
    members = []
    for j in range(band.band_n_member()):
        upa = mupa.get_union_pw_aff(j)
        vars_ = [member_iterator(s, upa) for s in hot]
        if all(v is not None and v in s.reduction_iterators for v, s in zip(vars_, hot)):
            if all(member_is_constant(s, upa) for s in stmts if s not in hot):
                members.append(j)
    return members or None


def _walks_in_order(stmt: Statement, names: list[str]) -> bool:
    """Whether every access of ``stmt`` that one of the iterators ``names``
    moves indexes its last ``len(names)`` dimensions by exactly those
    iterators, in that order, and mentions them nowhere else."""
    return all(E.walks_last_dims(acc, names) is not False
               for acc in [stmt.lhs] + E.accesses(stmt.rhs))


def contiguous_run(band: isl.ScheduleNode, program: Program, member: int,
                   coincident: list[bool]) -> list[int]:
    """The members that, innermost in this order and ending with ``member``,
    walk every access of the band's hot statements that they move through
    its last dimensions in memory order (``[h, w]`` of
    ``O(n, c1, c3, h, w) += I0(n, c1, r_c2, h, w) * I1(n, r_c2, c3, h, w)``).

    Grown outward from ``member`` one coincident member at a time, as long
    as each hot statement scans the candidate as a plain iterator indexing
    the dimension just before the run's in every access the run or the
    candidate moves.  The run's elements are consecutive in memory, so the
    nest over them is one loop over the flat offset in the C backend
    (:mod:`backends.c.coalesce`) and one long vector loop instead of a
    short one per row.  ``coincident``: the band's coincidence flags."""
    mupa = band.band_get_partial_schedule()
    hot = hot_statements(band_statements(band, program))
    its = [[member_iterator(s, mupa.get_union_pw_aff(j)) for s in hot]
           for j in range(band.band_n_member())]
    run = [member]
    if any(v is None for v in its[member]):
        return run
    while True:
        grown = None
        for j, flag in enumerate(coincident):
            if j in run or not flag or any(v is None for v in its[j]):
                continue
            if all(_walks_in_order(s, [its[m][i] for m in [j] + run])
                   for i, s in enumerate(hot)):
                grown = j
                break
        if grown is None:
            return run
        run.insert(0, grown)


def accumulates_along(band: isl.ScheduleNode, program: Program, seq: int, par: int) -> bool:
    """Whether every hot statement of ``band`` writes an element that member
    ``seq`` leaves in place and member ``par`` moves (``tmp[i] = tmp[i] +
    A[i, j] * x[j]`` with ``seq`` scanning ``j`` and ``par`` scanning ``i``):
    a recurrence along ``seq`` per element, one per value of ``par``."""
    mupa = band.band_get_partial_schedule()
    for s in hot_statements(band_statements(band, program)):
        r = member_iterator(s, mupa.get_union_pw_aff(seq))
        p = member_iterator(s, mupa.get_union_pw_aff(par))
        if r is None or p is None:
            return False
        used = set().union(*(E.index_names(i) for i in s.lhs.indices))
        if r in used or p not in used:
            return False
    return True
