"""The facts the automatic schedule (:mod:`polyc.schedule.auto`) decides a
band's optimisation from: tile sizes from the cache sizes, whether tiling
can shorten a reuse distance, how a reduction distributes, whether a band
is a pure reduction (a register accumulator), and the isl surgery of a tile
wavefront.  :mod:`polyc.schedule.auto` applies the decisions as
schedule-language transformations; the GPU mapping reuses
:func:`reorder_members`.
"""

from __future__ import annotations

import math

import islpy as isl

from .. import expr as E
from ..config import Config
from ..ir import Program
from ..machine import cache_sizes  # noqa: F401 (re-exported: tile.cache_sizes)
from .locality import (
    band_statements,
    hot_statements,
    member_iterator,
    member_scores,
    reduction_members,
)
from .marks import coincident_members, has_band_below

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


def tile_sizes(band: isl.ScheduleNode, program: Program, config: Config) -> list[int]:
    """One tile size per member of ``band``: ``Config.tile_sizes`` (the last
    one repeated), else :func:`default_tile_size` for the tensors its
    statements touch."""
    n = band.band_n_member()
    if config.tile_sizes:
        return [int(v) for v in (list(config.tile_sizes) + [config.tile_sizes[-1]] * n)[:n]]
    stmts = band_statements(band, program)
    tensors = {s.tensor for s in stmts} | {t for s in stmts for t in s.read_tensors()}
    elem = max((8 if program.tensor(t).dtype.endswith("64") else 4 for t in tensors),
               default=8)
    return [default_tile_size(len(tensors), elem)] * n


def reduction_groups(band: isl.ScheduleNode, program: Program,
                     red: list[int]) -> tuple[list[int], list[list[str]]] | None:
    """How to distribute the reduction of ``band`` (step 2 of the module
    docstring): ``(order, groups)`` where ``order`` puts the common members
    first and the reduction members ``red`` last, and ``groups`` are the
    statement names run before the reduction (an initialisation), the hot
    statements that scan it, and those run after (an epilogue), empty groups
    left out.  ``None`` when the band has another shape: a band of the
    reduction alone, or a statement whose reduction values interleave with
    the hot ones'."""
    n = band.band_n_member()
    common = [j for j in range(n) if j not in red]
    stmts = band_statements(band, program)
    hot = hot_statements(stmts)
    if not common and len(hot) == len(stmts):
        return None              # already a band of the reduction alone
    if common + red != list(range(n)) and not band.band_get_permutable():
        return None
    umap = isl.UnionMap.from_multi_union_pw_aff(band.band_get_partial_schedule())

    def red_values(group) -> isl.Set:
        """The values the reduction members take for ``group``."""
        dom = isl.UnionSet.empty(umap.get_space().params())
        for st in group:
            dom = dom.union(isl.UnionSet.from_set(st.domain))
        m = umap.intersect_domain(dom).range()
        s = isl.Set.from_union_set(m)
        keep = [j for j in red]
        for j in sorted(set(range(n)) - set(keep), reverse=True):
            s = s.project_out(isl.dim_type.set, j, 1)
        return s
    hot_vals = red_values(hot)
    before, after = [], []
    for s in stmts:
        if s in hot:
            continue
        vals = red_values([s])
        if vals.lex_gt_set(hot_vals).is_empty():
            before.append(s.name)
        elif vals.lex_lt_set(hot_vals).is_empty():
            after.append(s.name)
        else:
            return None
    groups = [g for g in (before, [s.name for s in hot], after) if g]
    return common + red, groups


def _is_pure_reduction_band(node: isl.ScheduleNode, program: Program) -> bool:
    stmts = band_statements(node, program)
    red = reduction_members(node, program)
    return (len(stmts) >= 1 and red is not None and len(red) == node.band_n_member()
            and all(s.kind == "update" and s.op in ("+", "*", "max", "min") for s in stmts)
            and len(stmts) == 1
            # the accumulator may live in a register only if nothing else reads it
            and stmts[0].tensor not in {a.tensor for a in E.accesses(stmts[0].rhs)})


def _carries_reuse(band: isl.ScheduleNode, program: Program) -> bool:
    """Whether tiling ``band`` can shorten a reuse distance: some access of
    a hot statement is invariant along one of the band's members and moves
    with a member inside it (``A[i,k]`` along ``j`` in a matmul over
    ``(i, j, k)``: each element is reused once per sweep of ``k``, a whole
    loop apart, which a tile keeps in cache).  An access invariant only
    along members inside every member it moves with (a per-channel scale
    ``s[c]`` in ``y[c,h,w] = x[c,h,w] * s[c]``) is reused at distance 0
    already; a band whose every access moves with every member (a stencil's
    ``A[i-1,j], A[i,j+1]``) has only neighbour reuse, which the untiled
    loops keep too.  Tiling those only cuts the parallel loop into fewer,
    larger iterations (one tile of 64 channels: one thread).  A member that
    is not a single iterator (skewed) counts as carrying reuse.  Source: the
    temporal-reuse test of Wolf and Lam, "A data locality optimizing
    algorithm", PLDI 1991."""
    mupa = band.band_get_partial_schedule()
    hot = hot_statements(band_statements(band, program))
    n = band.band_n_member()
    for s in hot:
        accs = [set().union(*map(E.index_names, a.indices))
                for a in [s.lhs] + E.accesses(s.rhs) if a.indices]
        names = [member_iterator(s, mupa.get_union_pw_aff(j)) for j in range(n)]
        if any(v is None for v in names):
            return True
        for j, var in enumerate(names):
            if any(var not in used and any(w in used for w in names[j + 1:])
                   for used in accs):
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
