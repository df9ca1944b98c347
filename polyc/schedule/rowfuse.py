"""Row fusion: streaming kernels fused along their independent outer loops.

A softmax, a layer norm or a group norm is a chain of statements over the
same *rows* (``n``, or ``n, g``): per row, a reduction or two over the row's
elements, then an elementwise pass that reads the reductions.  No
dependence crosses rows, and no large tensor is reused from one row to the
next.  The program that streams at memory bandwidth runs each row once,
start to finish, while its data is in the first cache levels:

    for n:                       parallel
        for c: m = max(m, I[n, c])             (a vectorised reduction)
        for c: e[n, c] = exp(I[n, c] - m); s += e[n, c]
        for c: O[n, c] = e[n, c] / s

isl's clustering does not find it.  It either leaves the elementwise pass
as a second nest over the whole tensor (a second trip through memory and a
second fork), or it fuses the statements into one band whose inner member
concatenates the row loops with *parametric shifts* (``c``, ``C + c``,
``2C + c``): a sequence in disguise, which defeats vectorisation and, once
tiled, walks the rows in 64-row blocks.

:func:`row_fused` builds the schedule above directly, as a schedule tree:
an outer band of the row iterators shared by every statement, then a
``sequence`` of the statements in source order, each with a band of its
remaining iterators (the source order within the row).  It is proposed
only when

* every statement has the same number ``k >= 1`` of leading coincident
  members in isl's schedule that are plain iterators (the row loops);
* no dependence crosses rows: every dependence has distance 0 on the
  outer band (:func:`_rows_independent`), so the outer band is parallel;
* no reuse crosses rows: every access to a tensor of the program's largest
  rank indexes every row iterator (the temporal-reuse test of Wolf and Lam,
  PLDI 1991, at the outer band: a matmul's ``B[k, j]`` is invariant along
  ``i``, so a matmul is never row-fused; ``gamma[c]``, of lower rank, is a
  row's worth of data that stays in cache);
* a row is contiguous memory: those accesses index the row iterators in
  dimensions before their last one only (a column sum ``O(k) +=! A(n, k)``
  keeps isl's schedule, which walks ``A`` along its rows);
* the result respects every dependence (:func:`polyc.schedule.legality.violations`).

The row band is left non-permutable, so that band optimisation does not tile
it (a tile of rows has nothing to reuse); its members are coincident, and
the outer ones are collapsed into the parallel loop as usual.

It is the ``isl`` fusion strategy's schedule for such programs
(:func:`polyc.pipeline.lower`); ``Config.fusion`` = ``"min"``, ``"max"``,
``"smart"`` or ``"preserve_coincident"`` keep their own.
"""

from __future__ import annotations

import islpy as isl

from polyc import expr as E
from polyc.dependence import Dependences
from polyc.ir import Program, Statement

from . import legality
from .initial import annotate
from .locality import _member_aff, band_statements, member_iterator
from .tree import iterator_band

_BAND = isl.schedule_node_type.band
_FILTER = isl.schedule_node_type.filter
_MARK = isl.schedule_node_type.mark
_SEQUENCE = isl.schedule_node_type.sequence
_SET = isl.schedule_node_type.set


def row_fused(sched: isl.Schedule, program: Program, deps: Dependences
              ) -> isl.Schedule | None:
    """The row-fused schedule of ``program`` (module docstring), or ``None``
    when the program is not a chain of row-wise statements.  ``sched`` is
    isl's schedule, from which the row iterators are read.  Flags
    (``coincident``, ``permutable``) of the result are exact."""
    stmts = list(program.statements)
    if len(stmts) < 2 or program.order is not None:
        return None
    rows = _row_iterators(sched, program)
    if rows is None:
        return None
    k = min(len(v) for v in rows.values())
    if k == 0:
        return None
    rows = {name: its[:k] for name, its in rows.items()}
    if not _rows_stream(stmts, rows):
        return None
    outer = iterator_band([(s, rows[s.name]) for s in stmts])
    if not _rows_independent(outer, deps):
        return None
    node = isl.Schedule.from_domain(program.domain()).get_root().child(0)
    node = node.insert_partial_schedule(outer).child(0)
    filters = isl.UnionSetList.alloc(node.get_ctx(), len(stmts))
    for s in stmts:
        filters = filters.add(isl.UnionSet.from_set(s.domain))
    node = node.insert_sequence(filters)
    for i, s in enumerate(stmts):
        inner = [it for it in s.iterators if it not in rows[s.name]]
        if inner:
            node = node.child(i).child(0).insert_partial_schedule(
                iterator_band([(s, inner)])).parent().parent()
    fused = node.get_schedule()
    if legality.violations(fused, deps):
        return None
    # the row band is not tiled: no reuse crosses rows (its rows run whole)
    return annotate(fused, deps.all()).get_root().child(0).band_set_permutable(0).get_schedule()


def _row_iterators(sched: isl.Schedule, program: Program) -> dict[str, list[str]] | None:
    """Per statement, the iterators of the leading coincident members of the
    outermost band above it in ``sched`` that are plain iterators."""
    out: dict[str, list[str]] = {}

    def nest(node: isl.ScheduleNode) -> bool:
        # descend through marks and single filters to the nest's first band
        while node.get_type() in (_MARK, _FILTER) and node.n_children() == 1:
            node = node.child(0)
        if node.get_type() in (_SEQUENCE, _SET):
            return all(nest(node.child(i)) for i in range(node.n_children()))
        if node.get_type() != _BAND:
            return False
        mupa = node.band_get_partial_schedule()
        for s in band_statements(node, program):
            its: list[str] = []
            for j in range(node.band_n_member()):
                var = (member_iterator(s, mupa.get_union_pw_aff(j))
                       if node.band_member_get_coincident(j) else None)
                if var is None or not _plain(s, mupa.get_union_pw_aff(j)):
                    break
                its.append(var)
            out[s.name] = its
        return True

    if not nest(sched.get_root().child(0)):
        return None
    if set(out) != {s.name for s in program.statements}:
        return None
    return out


def _plain(stmt: Statement, upa: isl.UnionPwAff) -> bool:
    """Whether ``upa`` is exactly one iterator of ``stmt`` (no constant or
    parameter term)."""
    aff = _member_aff(stmt, upa)
    if aff is None or not aff.get_constant_val().is_zero():
        return False
    return all(aff.get_coefficient_val(isl.dim_type.param, i).is_zero()
               for i in range(aff.dim(isl.dim_type.param)))


def _rows_stream(stmts: list[Statement], rows: dict[str, list[str]]) -> bool:
    """Whether every access to a tensor of the largest rank indexes every row
    iterator, and none in its last (contiguous) dimension."""
    accesses = [(s, a) for s in stmts for a in [s.lhs] + E.accesses(s.rhs)]
    rank = max((len(a.indices) for _, a in accesses), default=0)
    for s, a in accesses:
        if len(a.indices) == rank:
            mine = set(rows[s.name])
            used = set().union(*map(E.index_names, a.indices[:-1]))
            if not mine <= used or mine & E.index_names(a.indices[-1]):
                return False
    return True


def _rows_independent(outer: isl.MultiUnionPwAff, deps: Dependences) -> bool:
    """Whether every dependence has distance 0 on ``outer``."""
    all_deps = deps.all()
    if all_deps.is_empty():
        return True
    p = isl.UnionMap.from_multi_union_pw_aff(outer)
    between = all_deps.apply_domain(p).apply_range(p)
    return between.is_subset(between.domain().union(between.range()).identity())


def describe(sched: isl.Schedule, program: Program) -> str:
    """One line: the row iterators and the statements fused along them."""
    band = sched.get_root().child(0)
    mupa = band.band_get_partial_schedule()
    s0 = program.statements[0]
    rows = [member_iterator(s0, mupa.get_union_pw_aff(j)) for j in range(band.band_n_member())]
    return (f"statements {', '.join(s.name for s in program.statements)} fused along their "
            f"row loop{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))} (parallel: no "
            "dependence or reuse crosses rows), then run one after another within each row")
