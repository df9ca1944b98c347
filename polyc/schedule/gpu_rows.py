"""Row kernels: one GPU block per row, the row's statements as phases of
the block, barriers where dependences cross threads, reductions by the
whole block.

Takes the row-fused schedule of a streaming program
(:func:`polyc.schedule.rowfuse.row_fused`: a softmax, a layer norm, a
group norm): a band of *row* iterators that every statement shares, all
coincident (no dependence crosses rows), above a ``sequence`` with one
child per statement.  The CUDA kernel PyTorch and cuDNN write for such a
program runs each row on one block, start to finish, with its elements on
the threads::

    for i (rows):                     blockIdx.x (grid-stride)
        S0_init(i)                    thread 0
        for j: S0(i, j)               threads over j, then a block tree: mx(i)
        __syncthreads()               flow on mx: S0 -> S1
        for j: S1(i, j)               threads over j
        ...

:func:`map_rows` builds that mapping on the schedule tree:

* the row band (at most 3 members, on ``blockIdx.z/y/x``; more stay the
  ordinary mapping's) goes on the blocks without tiling (:class:`~.gpu_marks.Blocks`);
* a child whose band has a coincident member runs on the threads: the one
  of its coincident members that walks memory with stride 1 in most
  accesses (:func:`polyc.schedule.locality.member_scores`) moves innermost
  and maps to ``threadIdx.x`` (a member with distance 0 on every dependence
  can move anywhere in a band); its other members run in every thread;
* a child that is one reduction update whose instances in a row all write
  one element (:func:`polyc.schedule.gpu_mapping.reduction_statement`: TC
  lets polyc reassociate it) runs on the threads the same way, each thread
  accumulating its share of the terms, then a block tree (warp shuffles and
  shared memory, :mod:`backends.cuda.blockreduce`) combines them and
  thread 0 stores the result (a :class:`~.gpu_marks.BlockReduce` mark);
* a child with no loop (an initialisation ``mx(i) = -inf``) runs on
  thread 0.

**Barriers from dependences** (:func:`barriers`).  Which thread runs an
instance is known exactly: the value of the member on ``threadIdx.x``
(value-aligned loops, :meth:`backends.cuda.emit.KernelBody.mapped_for`)
and thread 0 for what has no thread loop and for a reduction's store of
its accumulator.  For each dependence between two statements of one row,
per tensor through which it goes (the pairs of instances that access one
element of it), the pairs whose threads differ (equal values give one
thread; unequal ones are taken as two, which can only add a barrier) must
be ordered by a barrier between their phases.  Walking the children in
order, a barrier goes before a child exactly when such a pair joins it to
a child after the last barrier: the greedy placement that stabs every
interval with the fewest barriers.  A dependence inside one child that
joins two threads (other than the reduction's own) makes the program no
row kernel; it keeps the ordinary mapping.

:func:`polyc.schedule.gpu_verify.verify` proves the result independently:
no dependence between rows, every pair of a row on two threads separated
by a barrier mark, every barrier directly below the row band (so under
conditions uniform across the block's threads).

Source: the block-per-row softmax and layer norm of PyTorch
(``aten/src/ATen/native/cuda/SoftMax.cu``) and PPCG's placement of
synchronisation between the children of a sequence inside a kernel
(Verdoolaege et al., TACO 2013, section 4.6).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import islpy as isl

from ..dependence import Dependences
from ..ir import Program
from ..isl_util import maps_of
from . import gpu_marks as M
from .gpu_geometry import const_like, member_extents
from .gpu_mapping import (
    KernelMapping,
    fill_selectors,
    reduction_statement,
)
from .legality import dependence_tensor, describe_instance_pair, violations
from .locality import member_scores
from .marks import coincident_members
from .tile import reorder_members
from .tree import statements_of, walk

log = logging.getLogger(__name__)

_T = isl.schedule_node_type

#: Threads per block of a row kernel (on ``x``), at most.
ROW_THREADS = 256
#: CUDA's limit on ``gridDim.y`` and ``gridDim.z`` (the outer row members).
MAX_GRID_Y = 65535


@dataclass(frozen=True)
class Phase:
    """One child of a row kernel's sequence: its ``statements``; ``kind``
    ``"thread0"`` (no loop: thread 0), ``"threads"`` (a loop on
    ``threadIdx.x``) or ``"reduce"`` (a block reduction of ``reduction``);
    ``member``: per statement, the values of the member on ``threadIdx.x``
    (an ``isl.Map`` from the statement's instances to ``[v]``), absent for
    ``thread0``; ``thread_member``: which member of the child's band goes
    on ``threadIdx.x`` (moved innermost), -1 for ``thread0``."""
    statements: tuple[str, ...]
    kind: str
    reduction: str = ""
    member: dict | None = None
    thread_member: int = -1


def _child_band(filt: isl.ScheduleNode) -> isl.ScheduleNode | None:
    """The band below a sequence child's filter, ``None`` for a leaf;
    raises ``ValueError`` for any other shape."""
    node = filt.child(0)
    if node.get_type() == _T.leaf:
        return None
    if node.get_type() == _T.band and node.child(0).get_type() == _T.leaf:
        return node
    raise ValueError("not a row kernel child")


def eligible(band: isl.ScheduleNode) -> bool:
    """Whether ``band`` has the shape of a row band: at most 3 members, all
    coincident, above a sequence whose children are a leaf or one band
    above a leaf."""
    n = band.band_n_member()
    if n > 3 or not all(coincident_members(band)):
        return False
    seq = band.child(0)
    if seq.get_type() != _T.sequence:
        return False
    try:
        for i in range(seq.n_children()):
            _child_band(seq.child(i))
    except ValueError:
        return False
    return True


def _thread_member(band: isl.ScheduleNode, program: Program, coincident_only: bool,
                   deps: Dependences | None = None) -> int | None:
    """The member of a child's band to put on ``threadIdx.x``: among the
    coincident ones (``coincident_only``) or all, the one with the best
    stride-1 score (the innermost on ties) whose move innermost
    (:func:`_mapped_member`) keeps every dependence of ``deps``; ``None``
    when no member qualifies.  A reduction over several loops whose band
    is not permutable (``o(i) +=! A(j, i) * B(k, i, j)``: ``j`` has the
    best stride) keeps its loops in order: the proof of the kernel checks
    the order of the reduction's terms within a thread."""
    scores = member_scores(band, program)
    coinc = coincident_members(band)
    n = band.band_n_member()
    cands = sorted((j for j in range(n) if coinc[j] or not coincident_only),
                   key=lambda j: (scores[j] if scores[j] is not None else -1, j), reverse=True)
    for j in cands:
        if j == n - 1 or deps is None or not violations(
                _mapped_member(band, j).get_schedule(), deps):
            return j
    return None


def _mapped_member(band: isl.ScheduleNode, j: int) -> isl.ScheduleNode:
    """``band`` with member ``j`` moved innermost and split off as a band of
    its own; returns that one-member band."""
    n = band.band_n_member()
    if j != n - 1:
        band = reorder_members(band, [i for i in range(n) if i != j] + [j])
    if n > 1:
        band = band.band_split(n - 1).child(0)
    return band


def _member_maps(band: isl.ScheduleNode) -> dict:
    """Per statement below the one-member ``band``: instance -> ``[v]``."""
    part = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    out = {}
    for m in maps_of(part):
        out[m.get_tuple_name(isl.dim_type.in_)] = m.reset_tuple_id(isl.dim_type.out)
    return out


def _thread0(domain: isl.Set) -> isl.Map:
    """``{ S[...] -> [0] }`` on ``domain``."""
    zero = isl.Set.universe(isl.Space.set_alloc(domain.get_ctx(), 0, 1))
    zero = zero.fix_val(isl.dim_type.set, 0, isl.Val.zero(domain.get_ctx()))
    zero = zero.align_params(domain.get_space())
    return isl.Map.from_domain_and_range(domain, zero)


def thread_of(program: Program, phase: Phase, statement: str, tensor: str) -> isl.Map:
    """The thread (as ``[v]``: equal values, one thread) that runs the
    accesses of ``statement`` (in ``phase``) to ``tensor``: thread 0 for a
    ``thread0`` phase and for a block reduction's own accumulator (stored
    by thread 0 after the tree), the value of the member on
    ``threadIdx.x`` otherwise."""
    st = program.statement(statement)
    if phase.kind == "thread0" or (phase.kind == "reduce" and tensor == st.tensor):
        return _thread0(st.domain)
    if statement not in phase.member:      # outside the phase's thread loop: thread 0
        return _thread0(st.domain)
    return phase.member[statement]


def _accesses(program: Program, statement: str, writes: bool) -> dict[str, isl.UnionMap]:
    """The write (``writes``) or the read relations of ``statement``, by tensor."""
    st = program.statement(statement)
    out: dict[str, isl.UnionMap] = {}
    for rel in ((st.write,) if writes else st.reads):
        t = rel.get_tuple_name(isl.dim_type.out)
        u = isl.UnionMap.from_map(rel)
        out[t] = out[t].union(u) if t in out else u
    return out


#: per dependence kind, whether its source and its sink access by writing
_WRITES = {"flow": (True, False), "anti": (False, True), "output": (True, True)}


def apart(program: Program, deps: Dependences, same: isl.UnionMap, phases: list[Phase],
          a: int, b: int) -> dict[str, isl.UnionMap]:
    """The dependences, by kind, from a statement of phase ``a`` to one of
    phase ``b`` between two instances of one row (``same``: pairs with
    equal row values) on different threads (:func:`thread_of`, per tensor
    through which the dependence goes: written by the source and read by
    the sink of a flow dependence, and so on).  A block reduction's dependences on
    its own accumulator join instances of thread 0 (the store after the
    tree), so they never count; the same reduction with its loop on the
    threads of a ``threads`` phase races, and they do."""
    out: dict[str, isl.UnionMap] = {}
    for kind, dep in deps.by_kind().items():
        bad = None
        src_writes, dst_writes = _WRITES[kind]
        for sa in phases[a].statements:
            acc_a = _accesses(program, sa, src_writes)
            for sb in phases[b].statements:
                acc_b = _accesses(program, sb, dst_writes)
                pair = dep.intersect_domain(isl.UnionSet.from_set(program.statement(sa).domain)) \
                    .intersect_range(isl.UnionSet.from_set(program.statement(sb).domain)) \
                    .intersect(same)
                if pair.is_empty():
                    continue
                for t in sorted(set(acc_a) & set(acc_b)):
                    via = pair.intersect(acc_a[t].apply_range(acc_b[t].reverse()))
                    if via.is_empty():
                        continue
                    ta = thread_of(program, phases[a], sa, t)
                    tb = thread_of(program, phases[b], sb, t)
                    one = isl.UnionMap.from_map(ta).apply_range(
                        isl.UnionMap.from_map(tb).reverse())
                    diff = via.subtract(one)
                    if not diff.is_empty():
                        bad = diff if bad is None else bad.union(diff)
        if bad is not None:
            out[kind] = bad
    return out


def same_row(band: isl.ScheduleNode) -> isl.UnionMap:
    """Pairs of instances below ``band`` with equal values of the host
    loops and of the row band's members."""
    dom = band.get_domain()
    prefix = band.child(0).get_prefix_schedule_union_map().intersect_domain(dom)
    return prefix.apply_range(prefix.reverse())


def barriers(program: Program, deps: Dependences, same: isl.UnionMap,
             phases: list[Phase]) -> list[tuple[int, str]] | None:
    """``(child, reason)`` per barrier, the fewest that order every pair
    of :func:`apart` instances of two phases (the module docstring), or
    ``None`` when a dependence inside one phase joins two threads."""
    out: list[tuple[int, str]] = []
    last = 0
    for b in range(len(phases)):
        if apart(program, deps, same, phases, b, b):
            return None
        for a in range(last, b):
            bad = apart(program, deps, same, phases, a, b)
            if bad:
                out.append((b, describe_dependence(program, bad)))
                last = b
                break
    return out


def describe_dependence(program: Program, bad: dict[str, isl.UnionMap]) -> str:
    """``flow dependence on mx from S0 to S1, e.g. S0[n=0, c=1] -> S1[...]``:
    the first of :func:`apart`'s dependences, as text."""
    kind, rel = next(iter(bad.items()))
    m = maps_of(rel)[0]
    return (f"{kind} dependence on {dependence_tensor(program, m, kind)} from "
            f"{m.get_tuple_name(isl.dim_type.in_)} to {m.get_tuple_name(isl.dim_type.out)}, "
            f"e.g. {describe_instance_pair(m)}")


def _phases(seq: isl.ScheduleNode, program: Program,
            deps: Dependences | None = None) -> list[Phase] | None:
    """The phases of an (unmapped) row kernel's sequence, with the members
    their threads would take, or ``None`` when a child can run neither on
    the threads nor on thread 0 (no member can go innermost without
    breaking a dependence of ``deps``)."""
    out = []
    for i in range(seq.n_children()):
        filt = seq.child(i)
        band = _child_band(filt)
        names = statements_of(filt.child(0))
        if band is None:
            out.append(Phase(names, "thread0"))
            continue
        # a reduction into one element per row is reduced by the block, also when
        # the band has a parallel member of one value (numpy's keepdims)
        red = reduction_statement(band, program) or ""
        if red:
            j = _thread_member(band, program, coincident_only=False, deps=deps)
            kind = "reduce"
        elif any(coincident_members(band)):
            j = _thread_member(band, program, coincident_only=True, deps=deps)
            kind = "threads"
        else:
            return None
        if j is None:
            return None
        out.append(Phase(names, kind, red, _member_maps(_mapped_member(band, j)), j))
    return out


def map_schedule(schedule: isl.Schedule, program: Program, deps: Dependences,
                 block: tuple[int, ...] = ()) -> tuple[isl.Schedule, list[KernelMapping]] | None:
    """``schedule`` (a row-fused schedule, :func:`polyc.schedule.rowfuse.row_fused`)
    mapped as one row kernel, and its mapping; ``None`` when its root band
    is no row band, a statement is a call (a tensor-core GEMM is a launch of
    its own) or :func:`map_rows` refuses it."""
    if any(getattr(st, "intrinsic", None) is not None for st in program.statements):
        return None
    band = schedule.get_root().child(0)
    if band.get_type() != _T.band or not eligible(band):
        return None
    done = map_rows(band, program, deps, 0, block)
    if done is None:
        return None
    node, k = done
    log.debug("%s", k.describe())
    return node.get_schedule(), [k]


def map_rows(band: isl.ScheduleNode, program: Program, deps: Dependences, index: int,
             block: tuple[int, ...] = ()) -> tuple[isl.ScheduleNode, KernelMapping] | None:
    """Map the row band ``band`` (:func:`eligible`) as kernel ``index``:
    the marked node at ``band``'s position (the ``gpu_kernel`` mark) and
    its :class:`KernelMapping`, or ``None`` when the rows cannot run this
    way (a child neither parallel nor a reduction, a dependence inside a
    child across threads).  ``block``: ``Config.gpu_block`` (its last
    entry is the threads per block)."""
    seq = band.child(0)
    phases = _phases(seq, program, deps)
    if phases is None:
        return None
    same = same_row(band)
    placed = barriers(program, deps, same, phases)
    if placed is None:
        log.debug("no row kernel: a dependence inside a phase joins two threads")
        return None
    threads = int(block[-1]) if block else ROW_THREADS
    n = band.band_n_member()
    depth = band.get_schedule_depth()
    k = KernelMapping(index, statements_of(band), depth, tile=(threads,), n_block=n,
                      block_depth=depth, thread_depth=depth + n,
                      reason="one block per row")
    describe(k, phases, placed)
    k.steps, k.thread_steps = (1,) * n, (1,)
    grid = member_extents(band, n)
    for j in range(n - 1):          # gridDim.y and .z (the loops stride over the grid)
        grid[j] = grid[j].min(const_like(grid[j], MAX_GRID_Y))
    k.grid = [g.coalesce() for g in grid]
    rows_mupa = band.band_get_partial_schedule()
    fill_selectors(k, program, rows_mupa, None, k.steps)
    # mark the children: barriers, block reductions, the member on threadIdx.x
    seq = band.child(0)
    widest = None
    for i, p in enumerate(phases):
        node = seq.child(i).child(0)
        if p.kind != "thread0":
            mapped = _mapped_member(node, p.thread_member)
            ext = thread_selectors(k, program, rows_mupa, mapped, (1,), p.statements)
            widest = ext if widest is None else widest.max(ext)
            node = mapped.insert_mark(M.Threads(mapped.get_schedule_depth(), 1).id())
            while node.parent().get_type() != _T.filter:
                node = node.parent()
        seq = mark_phase(node, p, i, placed, index).parent().parent()
        assert seq.get_type() == _T.sequence
    k.block = block_size(k, widest, threads)
    band = seq.parent()
    band = band.insert_mark(M.Blocks(depth, n).id())
    return band.insert_mark(M.Kernel(index).id()), k


def _skip_marks(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """``node`` or the first node below it that is not a mark other than a
    GPU one (the schedule language's ``loops:`` names)."""
    while node.get_type() == _T.mark and M.of(node) is None:
        node = node.child(0)
    return node


def describe(k: KernelMapping, phases: list[Phase], placed: list[tuple[int, str]]) -> None:
    """``k.rows`` and ``k.barriers``: each phase's kind, each barrier's
    place and dependence."""
    k.rows = tuple(p.kind if not p.reduction else f"reduce {p.reduction}" for p in phases)
    k.barriers = tuple(f"before {', '.join(phases[i].statements)}: {why}" for i, why in placed)


def thread_selectors(k: KernelMapping, program: Program, blocks: isl.MultiUnionPwAff,
                     band: isl.ScheduleNode, step: tuple[int, ...],
                     statements: tuple[str, ...]) -> isl.PwAff:
    """Add to ``k.selectors`` of ``statements`` the thread selector of the
    one-member ``band`` on ``threadIdx.x`` (values stepping by ``step``);
    returns the band's extent."""
    sub = replace(k, statements=statements, selectors={})
    fill_selectors(sub, program, blocks, band.band_get_partial_schedule(), k.steps, step)
    for name in statements:
        k.selectors[name].update(
            {a: v for a, v in sub.selectors[name].items() if a.startswith("thread")})
    return member_extents(band, 1)[0]


def block_size(k: KernelMapping, widest: isl.PwAff | None, threads: int) -> list:
    """The launch's threads per block: ``threads``, at most the widest loop
    on the threads, at least one (one thread when no phase has one, or when
    the rows are empty: the phases on thread 0 still run, the
    initialisation of a sum over no terms among them)."""
    widest = widest if widest is not None else const_like(k.grid[0], 1)
    # the extents are defined only where their loops run: at other sizes
    # (rows of no element) one thread, not what isl's AST would assume there
    one = const_like(widest, 1)
    block = widest.min(const_like(widest, threads)).union_max(one)
    rows = k.grid[0].domain()
    for g in k.grid[1:]:
        rows = rows.intersect(g.domain())
    return [block.gist_params(rows).coalesce()]     # no launch without rows


def mark_phase(node: isl.ScheduleNode, phase: Phase, i: int, placed: list[tuple[int, str]],
               kernel: int) -> isl.ScheduleNode:
    """At the top of child ``i`` of the sequence (``node``, below its
    filter): the block reduction's mark, then the barrier's when one
    precedes the child; returns the node at ``node``'s position."""
    if phase.kind == "reduce":
        node = node.insert_mark(M.BlockReduce(phase.reduction).id())
    before = [c for c, _ in placed]
    if i in before:
        node = node.insert_mark(M.Barrier(kernel, before.index(i)).id())
    return node


def read_phases(seq: isl.ScheduleNode, program: Program,
                threads=(M.Threads,)) -> tuple[list[Phase], list[int]]:
    """The phases of a mapped row kernel's sequence ``seq``, read from its
    marks alone (for the proof, :func:`polyc.schedule.gpu_verify.verify`),
    and the children that a barrier precedes.  A child runs on thread 0
    when no mark of ``threads`` lies in it, else every statement of the
    child lies below the one-member band under that mark.  Raises
    ``ValueError`` for a child of another shape (two thread bands, a thread
    band of several members, a statement beside the thread loop)."""
    phases, before = [], []
    for i in range(seq.n_children()):
        node = _skip_marks(seq.child(i).child(0))
        names = statements_of(node)
        red = ""
        if isinstance(M.of(node), M.Barrier):
            before.append(i)
            node = _skip_marks(node.child(0))
        if isinstance(M.of(node), M.BlockReduce):
            red = M.of(node).statement
            node = node.child(0)
        marks = [n for n in walk(node) if isinstance(M.of(n), threads)]
        if not marks and not red:
            phases.append(Phase(names, "thread0"))
            continue
        if len(marks) != 1:
            raise ValueError(f"child {i} of the kernel has {len(marks)} loops on the threads; "
                             "map one loop of each phase")
        mapped = _skip_marks(marks[0].child(0))
        if mapped.get_type() != _T.band or mapped.band_n_member() != 1:
            raise ValueError(f"child {i} of the kernel maps no single loop to threads; map "
                             "one loop of each phase (a kernel with several phases puts "
                             "threadIdx.x on one loop of each)")
        if statements_of(mapped) != names:
            raise ValueError(f"child {i} of the kernel runs statements "
                             f"{', '.join(sorted(set(names) - set(statements_of(mapped))))} beside "
                             "its loop on the threads; distribute them into phases of their own")
        phases.append(Phase(names, "reduce" if red else "threads", red, _member_maps(mapped)))
    return phases, before


def count_barriers(node: isl.ScheduleNode) -> int:
    """The ``gpu_barrier`` marks in the subtree at ``node``."""
    n = int(isinstance(M.of(node), M.Barrier))
    return n + sum(count_barriers(node.child(i)) for i in range(node.n_children()))
