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

import logging

import islpy as isl

from polyc import dependence
from polyc import expr as E
from polyc.dependence import Dependences
from polyc.ir import Program, Statement
from polyc.machine import gemm_rows

from . import legality, tensorize, tensorize_auto
from .initial import annotate
from .locality import _member_aff, band_statements, member_iterator
from .tree import iterator_band, mupa_from_columns

log = logging.getLogger(__name__)

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
    rows = {name: its[:k] for name, its in _memory_order(rows, stmts).items()}
    if not _rows_stream(stmts, rows):
        return None
    outer = iterator_band([(s, rows[s.name]) for s in stmts])
    if not _rows_independent(outer, deps):
        return None
    node = isl.Schedule.from_domain(program.domain()).get_root().child(0)
    node = _sequence(node.insert_partial_schedule(outer).child(0), [[s] for s in stmts])
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


def _memory_order(rows: dict[str, list[str]], stmts: list[Statement]) -> dict[str, list[str]]:
    """``rows`` with each statement's row iterators in the order its largest
    tensor's indices use them (outermost first; isl's order where an
    iterator indexes none of them; a call's in the order of its loops, those
    of the update it computes).  Consecutive rows are then consecutive
    in memory, which the hardware prefetcher streams (isl may order a head
    loop inside the query-row loop, 1 MiB apart), and the statements agree
    on their outer rows where isl ordered the same loops differently in two
    nests.  The caller checks that the rows it builds are independent and
    legal."""
    out = {}
    for s in stmts:
        its = rows[s.name]
        accs = [s.lhs] + E.accesses(s.rhs)
        big = max(accs, key=lambda a: len(a.indices))
        pos: dict[str, int] = {}
        for d, idx in enumerate(big.indices):
            for it in E.index_names(idx):
                pos.setdefault(it, d)
        if not big.indices:     # a call (its slices are relations): its loops' order
            pos = {it: k for k, it in enumerate(s.iterators)}
        out[s.name] = sorted(its, key=lambda it: (pos.get(it, len(s.iterators)), its.index(it)))
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


# ------------------------------------------------------------ row blocks

#: About how many rows of a row-blocked chain make a block (``Config.row_block``
#: 0): a 64 x 512 f32 score block is 128 KiB (L2), and a GEMM call on 64 rows
#: packs its B operand (a head's keys) once per 64 rows.
ROW_BLOCK = 64


def default_row_block() -> int:
    """:data:`ROW_BLOCK` rounded up to a multiple of the micro-kernel's rows
    (:func:`polyc.machine.gemm_rows`: 70 with AVX-512, 66 with AVX2): a block
    of 64 rows leaves a register tile 8 of 14 rows full, and measured 8% slower
    on 8 x 512 x 64 attention (AMD EPYC, AVX-512) than 56, 70 or 112."""
    mr = gemm_rows()
    return -(-ROW_BLOCK // mr) * mr


def row_blocked(rows_sched: isl.Schedule, contracted: Program, source: Program,
                matches: list, block: int):
    """The row-blocked form of a row-fused chain through GEMM calls
    (attention: ``S = Q K^T``, a softmax along S's rows, ``O = P V``), or
    ``None`` when it does not apply.

    ``rows_sched`` is :func:`row_fused`'s schedule of ``contracted`` (the
    program with each match of ``matches`` as its call, whose loops are the
    batch loops only); ``source`` the program before that contraction.  The
    chain is also fused along a second loop ``i`` of every statement, in
    blocks of ``block``: for a call, the GEMM's row index (``m = (i,)``,
    one call per block of rows: ``GemmMatch.block``); for every other
    statement, the first index of its output after the row loops.  The
    outer band becomes ``(rows, floor(i / block))``, the statements run in
    sequence inside it, each over its block; a softmax's score rows are
    then computed, normalised and consumed while they are in cache
    (Dao et al., "FlashAttention", NeurIPS 2022, without the online
    softmax: a block's rows are whole).

    Applied when a statement reduces along the rows (a softmax's max and
    sum: the rows are read several times), every call's ``B`` operand
    varies with a row loop (a head's
    keys and values, re-read once per block of its rows, small next to the
    rows' scores; a weight matrix shared by all rows is re-packed per block
    and is left alone), every dependence has distance 0 on the outer band
    (it stays parallel) and the result respects every dependence.  Returns
    ``(schedule, program, dependences, matches)`` of the blocked calls."""
    if block < 2 or not matches:
        return None
    band = rows_sched.get_root().child(0)
    mupa = band.band_get_partial_schedule()
    rows = {s.name: [member_iterator(s, mupa.get_union_pw_aff(j))
                     for j in range(band.band_n_member())] for s in contracted.statements}
    by_call = {m.statement: m for m in matches}
    calls = [s for s in contracted.statements if s.kind == "intrinsic"]
    if len(calls) != len(matches) or not any(s.kind == "update" for s in contracted.statements):
        return None      # no reduction along the rows: nothing reads a row twice
    blocked, second = [], {}
    for s in contracted.statements:
        mine = rows[s.name]
        if s.kind == "intrinsic":
            m = by_call.get(s.name)
            if m is None or len(m.m) != 1 or m.gather or not _b_varies(m, mine):
                log.debug("no row blocks: call %s (%s; rows %s)", s.name,
                          m.describe() if m else "?", mine)
                return None
            blocked.append(tensorize.row_blocked(source, m, block))
            continue
        found = next((i.name for i in s.lhs.indices if isinstance(i, E.Index)
                      and i.name not in mine and not _single(s, i.name)), None)
        if found is None:
            return None
        second[s.name] = found
    program = tensorize_auto.contract(source, blocked)
    deps = dependence.compute(program)
    cols = []
    for j in range(len(next(iter(rows.values()))) + 1):
        upa = None
        for s in program.statements:
            ls = isl.LocalSpace.from_space(s.domain.get_space())
            its = list(rows[s.name]) + [s.iterators[-1] if s.kind == "intrinsic"
                                        else second[s.name]]
            aff = isl.Aff.var_on_domain(ls, isl.dim_type.set, s.iterators.index(its[j]))
            if j == len(its) - 1 and s.kind != "intrinsic":
                aff = aff.scale_down_val(isl.Val.int_from_si(aff.get_ctx(), block)).floor()
            part = isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff).intersect_domain(s.domain))
            upa = part if upa is None else upa.union_add(part)
        cols.append(upa)
    outer = mupa_from_columns(cols)
    if not _rows_independent(outer, deps):
        return None
    # the calls, and between them each run of other statements fused along
    # its row loop (one row at a time, in the first cache level)
    runs: list[list[Statement]] = []
    for s in program.statements:
        if s.kind == "intrinsic" or not runs or runs[-1][0].kind == "intrinsic":
            runs.append([s])
        else:
            runs[-1].append(s)
    node = isl.Schedule.from_domain(program.domain()).get_root().child(0)
    node = node.insert_partial_schedule(outer).child(0)
    node = _sequence(node, runs)
    top = node.get_tree_depth()
    for i, run in enumerate(runs):
        if run[0].kind == "intrinsic":
            continue
        node = node.child(i).child(0) if len(runs) > 1 else node
        node = node.insert_partial_schedule(
            iterator_band([(s, [second[s.name]]) for s in run])).child(0)
        node = _sequence(node, [[s] for s in run])
        for j, s in enumerate(run):
            inner = [it for it in s.iterators if it not in rows[s.name] and it != second[s.name]]
            if inner:
                at = node.child(j).child(0) if len(run) > 1 else node
                node = at.insert_partial_schedule(iterator_band([(s, inner)]))
                node = node.parent().parent() if len(run) > 1 else node
        while node.get_tree_depth() > top:
            node = node.parent()
    fused = node.get_schedule()
    if legality.violations(fused, deps):
        return None
    fused = annotate(fused, deps.all()).get_root().child(0).band_set_permutable(0).get_schedule()
    return fused, program, deps, blocked


def _single(stmt: Statement, it: str) -> bool:
    """Whether iterator ``it`` of ``stmt`` takes one value (a unit batch
    dimension: no loop)."""
    pos = stmt.iterators.index(it)
    dom = stmt.domain
    return dom.project_out(isl.dim_type.set, pos + 1, dom.dim(isl.dim_type.set) - pos - 1) \
        .project_out(isl.dim_type.set, 0, pos).is_singleton()


def _sequence(node: isl.ScheduleNode, parts: list[list[Statement]]) -> isl.ScheduleNode:
    """A sequence at ``node`` with one filter per list of statements, or
    ``node`` itself for one list."""
    if len(parts) == 1:
        return node
    filters = isl.UnionSetList.alloc(node.get_ctx(), len(parts))
    for part in parts:
        dom = isl.UnionSet.from_set(part[0].domain)
        for s in part[1:]:
            dom = dom.union(isl.UnionSet.from_set(s.domain))
        filters = filters.add(dom)
    return node.insert_sequence(filters)


def _b_varies(m, rows: list) -> bool:
    """Whether the GEMM's ``B`` operand is indexed by one of the ``rows``."""
    _, acc = m.accesses[2]
    used = set().union(*map(E.index_names, acc.indices)) if acc.indices else set()
    return bool(used & set(rows))


def describe(sched: isl.Schedule, program: Program) -> str:
    """One line: the row iterators and the statements fused along them."""
    band = sched.get_root().child(0)
    mupa = band.band_get_partial_schedule()
    s0 = program.statements[0]
    rows = [member_iterator(s0, mupa.get_union_pw_aff(j)) for j in range(band.band_n_member())]
    return (f"statements {', '.join(s.name for s in program.statements)} fused along their "
            f"row loop{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))} (parallel: no "
            "dependence or reuse crosses rows), then run one after another within each row")


def describe_blocked(sched: isl.Schedule, program: Program, matches: list) -> str:
    """One line: the row loops, the block and the calls of a row-blocked chain."""
    band = sched.get_root().child(0)
    mupa = band.band_get_partial_schedule()
    s0 = next(s for s in program.statements if s.kind != "intrinsic")
    rows = [member_iterator(s0, mupa.get_union_pw_aff(j))
            for j in range(band.band_n_member() - 1)]
    m = matches[0]
    calls = ", ".join(x.statement for x in matches)
    return (f"statements {', '.join(s.name for s in program.statements)} fused along "
            f"{'their row loops ' + ', '.join(map(str, rows)) + ' and ' if rows else ''}"
            f"blocks of {m.block} rows (parallel: no dependence crosses a block), then run "
            f"one after another within each block; the GEMM calls {calls} compute one block "
            f"of rows each")
