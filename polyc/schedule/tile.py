"""Band optimisation: loop order for locality, reduction distribution,
tiling, and simd marks.

Takes an ``isl.Schedule`` (from the scheduler), the ``ir.Program`` and its
``Dependences`` and returns a new ``isl.Schedule``.  For each band, bottom-up:

1. **reorder** (legal by construction): in a permutable band any order of the
   members is legal (every dependence is non-negative in every member), so the
   coincident member that makes the most accesses of the band's hot
   statements stride-1 is moved innermost;
2. otherwise, when the members that scan the reduction iterators give the
   stride-1 accesses (``C(m,n) += A(m,k) * B(n,k)``), **distribute the
   reduction**: the common members stay in the band, and below it a sequence
   runs the initialisation, the reduction loop (its own band, marked
   ``vector_reduction`` when innermost) and the epilogue;
3. **tile** (``isl_schedule_node_band_tile``): permutable bands of two or more
   members are tiled; tile sizes come from ``Config.tile_sizes`` or from the
   cache sizes read from sysfs (:func:`default_tile_size`);
4. **simd**: when the innermost member of a band with no band below is
   coincident and stride-1 for some access, it is split off and marked
   ``vector`` (see :mod:`polyc.schedule.marks`).

Every result is checked with :func:`polyc.schedule.legality.check`; if the
reduction distribution ever produced an illegal order, the band optimisation
is redone without it.
"""

from __future__ import annotations

import math

import islpy as isl

from .. import expr as E
from ..config import Config
from ..dependence import Dependences
from ..errors import IllegalScheduleError
from ..ir import Program
from ..isl_util import CTX
from ..machine import cache_sizes  # noqa: F401 (re-exported: tile.cache_sizes)
from . import legality
from .locality import (
    band_statements,
    hot_statements,
    member_iterator,
    member_scores,
    reduction_members,
)
from .marks import SIMD_REDUCTION, coincident_members, has_band_below, mark_simd_innermost

_BAND = isl.schedule_node_type.band


#: Largest tile edge: bigger tiles leave too few tiles to share among threads.
MAX_TILE = 64
#: Bands with more members are not tiled (deep nests of short loops, such as
#: convolutions, only grow code from it).
MAX_TILED_MEMBERS = 3


def default_tile_size(n_tensors: int, elem_bytes: int) -> int:
    """A square tile edge ``T`` such that ``n_tensors`` tiles of ``T x T``
    elements fill about half of the L2 cache, a multiple of 16 in
    [16, :data:`MAX_TILE`]."""
    budget = cache_sizes().get(2, 1 << 20) // 2
    t = int(math.sqrt(budget / max(1, n_tensors * elem_bytes)))
    return max(16, min(MAX_TILE, t // 16 * 16))


def reorder_members(band: isl.ScheduleNode, order: list[int]) -> isl.ScheduleNode:
    """Rebuild ``band`` with its members permuted to ``order`` (keeps the
    permutable flag and each member's coincidence)."""
    mupa = band.band_get_partial_schedule()
    coinc = coincident_members(band)
    perm = band.band_get_permutable()
    new = mupa
    for k, j in enumerate(order):
        new = new.set_union_pw_aff(k, mupa.get_union_pw_aff(j))
    node = band.delete().insert_partial_schedule(new).band_set_permutable(perm)
    for k, j in enumerate(order):
        node = node.band_member_set_coincident(k, coinc[j])
    return node


def _tile_sizes(band: isl.ScheduleNode, program: Program, config: Config) -> isl.MultiVal:
    n = band.band_n_member()
    if config.tile_sizes:
        sizes = list(config.tile_sizes) + [config.tile_sizes[-1]] * n
    else:
        stmts = band_statements(band, program)
        tensors = {s.tensor for s in stmts} | {t for s in stmts for t in s.read_tensors()}
        elem = max((8 if program.tensor(t).dtype.endswith("64") else 4 for t in tensors),
                   default=8)
        sizes = [default_tile_size(len(tensors), elem)] * n
    mv = isl.MultiVal.zero(band.band_get_space())
    for i in range(n):
        mv = mv.set_val(i, isl.Val.int_from_si(CTX, int(sizes[i])))
    return mv


def _union_domain(stmts) -> isl.UnionSet:
    u = isl.UnionSet.empty(stmts[0].domain.get_space().params())
    for s in stmts:
        u = u.union(isl.UnionSet.from_set(isl.Set.universe(s.domain.get_space())))
    return u


def _distribute_reduction(band: isl.ScheduleNode, program: Program,
                          red: list[int]) -> isl.ScheduleNode | None:
    """Step 2 of the module docstring; ``None`` when the band has another
    shape.  Returns the node at the position of ``band``."""
    n = band.band_n_member()
    common = [j for j in range(n) if j not in red]
    order = common + red
    if order != list(range(n)):
        if not band.band_get_permutable():
            return None
        band = reorder_members(band, order)
    stmts = band_statements(band, program)
    hot = hot_statements(stmts)
    if not common and len(hot) == len(stmts):
        return None              # already a band of the reduction alone
    umap = isl.UnionMap.from_multi_union_pw_aff(band.band_get_partial_schedule())

    def red_values(group) -> isl.Set:
        """The values the reduction members take for ``group``."""
        dom = isl.UnionSet.empty(umap.get_space().params())
        for st in group:
            dom = dom.union(isl.UnionSet.from_set(st.domain))
        m = umap.intersect_domain(dom).range()
        s = isl.Set.from_union_set(m)
        return s.project_out(isl.dim_type.set, 0, len(common))
    hot_vals = red_values(hot)
    before, after = [], []
    for s in stmts:
        if s in hot:
            continue
        vals = red_values([s])
        if vals.lex_gt_set(hot_vals).is_empty():
            before.append(s)
        elif vals.lex_lt_set(hot_vals).is_empty():
            after.append(s)
        else:
            return None
    if common:
        outer = band.band_split(len(common))
        inner = outer.child(0)
    else:
        outer, inner = None, band
    red_sched = inner.band_get_partial_schedule()
    node = inner.delete()
    groups = [g for g in (before, hot, after) if g]
    filters = isl.UnionSetList.alloc(CTX, len(groups))
    for g in groups:
        filters = filters.add(_union_domain(g))
    node = node.insert_sequence(filters)
    h = groups.index(hot)
    node = node.child(h).child(0).insert_partial_schedule(
        red_sched.intersect_domain(_union_domain(hot)))
    node = node.band_set_permutable(True)
    node = node.parent().parent()        # the sequence
    return node.parent() if outer is not None else node


def _is_pure_reduction_band(node: isl.ScheduleNode, program: Program) -> bool:
    stmts = band_statements(node, program)
    red = reduction_members(node, program)
    return (len(stmts) >= 1 and red is not None and len(red) == node.band_n_member()
            and all(s.kind == "update" and s.op in ("+", "*", "max", "min") for s in stmts)
            and len(stmts) == 1
            # the accumulator may live in a register only if nothing else reads it
            and stmts[0].tensor not in {a.tensor for a in E.accesses(stmts[0].rhs)})


def _mark_reduction_loop(node: isl.ScheduleNode) -> isl.ScheduleNode:
    n = node.band_n_member()
    if n > 1:
        return node.band_split(n - 1).child(0).insert_mark(isl.Id(SIMD_REDUCTION)).parent()
    return node.insert_mark(isl.Id(SIMD_REDUCTION))


class _BandOptimizer:
    def __init__(self, program: Program, config: Config, distribute: bool):
        self.program, self.config, self.distribute = program, config, distribute

    def walk(self, node: isl.ScheduleNode) -> isl.ScheduleNode:
        for i in range(node.n_children()):
            node = self.walk(node.child(i)).parent()
        return self.band(node)

    def band(self, node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != _BAND:
            return node
        program, config = self.program, self.config
        n = node.band_n_member()
        innermost = not has_band_below(node)
        coinc = coincident_members(node)
        scores = member_scores(node, program)
        if innermost and _is_pure_reduction_band(node, program):
            return _mark_reduction_loop(node) if config.simd else node
        best = None
        cands = [j for j in range(n) if coinc[j] and scores[j] is not None and scores[j] > 0]
        if cands and (node.band_get_permutable() or n == 1):
            best = max(cands, key=lambda j: (scores[j], j))
            if best != n - 1:
                node = reorder_members(node, [j for j in range(n) if j != best] + [best])
                best = n - 1
        elif self.distribute and innermost:
            red = reduction_members(node, program)
            if red and any((scores[j] or 0) > 0 for j in red):
                dist = _distribute_reduction(node, program, red)
                if dist is not None:
                    # optimise the new bands below, then this one again
                    node = dist
                    for i in range(node.n_children()):
                        node = self.walk(node.child(i)).parent()
                    if node.get_type() == _BAND:
                        return self._tile(node, simd_last=False)
                    return node
        return self._tile(node, simd_last=(best == n - 1 and innermost))

    def _tile(self, node: isl.ScheduleNode, simd_last: bool) -> isl.ScheduleNode:
        n = node.band_n_member()
        if (self.config.tiling and 2 <= n <= MAX_TILED_MEMBERS
                and node.band_get_permutable()
                and (self.config.tile_sizes or _carries_reuse(node, self.program))):
            node = node.band_tile(_tile_sizes(node, self.program, self.config)).child(0)
            if self.config.simd and simd_last:
                node = mark_simd_innermost(node)
            node = node.parent()
            if self.distribute and getattr(self.config, "time_tiling", False):
                node = wavefront(node)
            return node
        if self.config.simd and simd_last:
            node = mark_simd_innermost(node)
        return node


def _carries_reuse(band: isl.ScheduleNode, program: Program) -> bool:
    """Whether tiling ``band`` can shorten a reuse distance: some access of
    a hot statement is invariant along one of the band's members (``A[i,k]``
    along ``j`` in a matmul: temporal reuse across a whole loop, which a
    tile keeps in cache).  A band whose every access moves with every member
    (a stencil's ``A[i-1,j], A[i,j+1]``) has only neighbour reuse, which the
    untiled loops already keep; tiling it only cuts the parallel loop into
    fewer, larger iterations.  A member that is not a single iterator
    (skewed) counts as carrying reuse.  Source: the temporal-reuse test of
    Wolf and Lam, "A data locality optimizing algorithm", PLDI 1991."""
    mupa = band.band_get_partial_schedule()
    hot = hot_statements(band_statements(band, program))
    for s in hot:
        accs = [a for a in [s.lhs] + E.accesses(s.rhs) if a.indices]
        for j in range(band.band_n_member()):
            var = member_iterator(s, mupa.get_union_pw_aff(j))
            if var is None:
                return True
            if any(var not in set().union(*map(E.index_names, a.indices)) for a in accs):
                return True
    return False


def _below_offers_stride(node: isl.ScheduleNode, program: Program) -> bool:
    """Whether an innermost band below ``node`` has a coincident member with a
    positive stride score."""
    found = [False]

    def visit(n):
        if n.get_type() == _BAND and not has_band_below(n):
            if any(c and (sc or 0) > 0 for c, sc in
                   zip(coincident_members(n), member_scores(n, program))):
                found[0] = True
        return not found[0]
    for i in range(node.n_children()):
        node.child(i).foreach_descendant_top_down(visit)
    return found[0]


def _sink_stride_member(node: isl.ScheduleNode, program: Program) -> isl.ScheduleNode:
    """Top-down: when a band that has bands below it owns the coincident
    stride-1 member of its hot statements (``w`` of a convolution whose
    reduction ``kh, kw`` isl put in a band below), and no band below offers
    such a member, move that member to the leaves
    (``isl_schedule_node_band_sink``), so it becomes the vectorised loop."""
    if node.get_type() == _BAND and has_band_below(node) and node.band_get_permutable():
        n = node.band_n_member()
        coinc = coincident_members(node)
        scores = member_scores(node, program)
        cands = [j for j in range(n) if coinc[j] and (scores[j] or 0) > 0]
        if cands and n >= 2 and not _below_offers_stride(node, program):
            best = max(cands, key=lambda j: (scores[j], j))
            if best != n - 1:
                node = reorder_members(node, [j for j in range(n) if j != best] + [best])
            node = node.band_split(n - 1).child(0).band_sink().parent()
    for i in range(node.n_children()):
        node = _sink_stride_member(node.child(i), program).parent()
    return node


def wavefront(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """Run the tiles of a permutable tile band whose first member is
    sequential as a wavefront: member 0 becomes ``m0 + m1`` (a positive
    combination, so every dependence between distinct tiles, whose tile
    distances are non-negative in a permutable band, is carried by it) and
    the band is split after it, leaving ``m1`` coincident (parallel).
    Legal for any permutable band; bands with a coincident first member, or
    a single member, are returned unchanged.  The result is checked against
    the dependences with the rest of the schedule (``optimize_bands``).

    Source: Pluto's ``--parallel`` tile wavefront (Bondhugula et al., PLDI
    2008, section 5.2)."""
    n = band.band_n_member()
    if n < 2 or not band.band_get_permutable() or band.band_member_get_coincident(0):
        return band
    mupa = band.band_get_partial_schedule()
    mupa = mupa.set_union_pw_aff(0, mupa.get_union_pw_aff(0).add(mupa.get_union_pw_aff(1)))
    opts = band.band_get_ast_build_options()
    node = band.delete().insert_partial_schedule(mupa)
    node = node.band_set_permutable(1).band_set_ast_build_options(opts)
    node = node.band_split(1).child(0)
    node = node.band_member_set_coincident(0, 1)
    for j in range(1, node.band_n_member()):
        node = node.band_member_set_coincident(j, 0)
    return node.parent()


def optimize_bands(schedule: isl.Schedule, program: Program, config: Config,
                   deps: Dependences | None = None) -> isl.Schedule:
    """Apply member sinking, reordering, reduction distribution, tiling and
    simd marking to every band.  With ``deps``, a result that violates a
    dependence is replaced by the result without sinking and distribution."""
    def run(aggressive: bool) -> isl.Schedule:
        root = schedule.get_root()
        if aggressive:
            root = _sink_stride_member(root, program)
        return _BandOptimizer(program, config, aggressive).walk(root).get_schedule()

    result = run(True)
    if deps is not None:
        try:
            legality.check(result, deps, program)
        except IllegalScheduleError:
            result = run(False)
    return result
