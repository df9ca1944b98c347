"""Mapping a schedule tree onto CUDA blocks and threads.

Takes the ``isl.Schedule`` of isl's scheduler (run with outer coincidence, so
that the outermost member of a band is parallel wherever one can be) and
returns it with every statement instance placed in one *kernel*, following
PPCG (Verdoolaege et al., "Polyhedral parallel code generation for CUDA",
TACO 2013; ``gpu.c``/``gpu_tree.c``):

* walking down from the root, the first band whose outermost member is
  coincident starts a kernel.  Its leading coincident members (at most 3)
  are tiled (``isl_schedule_node_band_tile``); the outer (at most 2) tile
  loops are mapped to blocks, the point loops to threads, the innermost
  member on ``x`` so that consecutive threads touch consecutive elements;
* a band whose outermost member carries a dependence, above a subtree that
  has parallelism, stays on the host: its first member becomes a host loop
  around the kernels of its subtree (a time loop around a stencil's sweeps);
* a subtree with no coincident member at all (a recurrence, a scalar
  statement) becomes a kernel of one block of one thread, so no data goes
  back to the host between kernels; :func:`describe` says so.

The result carries marks (:mod:`.gpu_marks`) that :mod:`polyc.astgen`
turns into loop nest nodes: :class:`~.gpu_marks.Kernel` above each kernel's
subtree (:class:`polyc.loopnest.Launch`), :class:`~.gpu_marks.Blocks` above
the tile band and :class:`~.gpu_marks.Threads` above the point band (the
loops ``c<depth>`` ... ``c<depth+n-1>`` become loops mapped to block or
thread indices).  A mapped loop strides over the indices (grid-stride and
block-stride loops), so the code is correct for any grid and block size;
:class:`KernelMapping` carries the tight sizes, computed with isl
(``isl_set_dim_max``/``dim_min`` of the tile values), that the launch uses.
Statements that isl prints outside a mapped loop (a degenerate member with
one value) run on index 0 of that axis only.

Legality: block and thread indices come from coincident members only, which
carry no dependence, so no dependence crosses two threads of a launch;
:mod:`polyc.schedule.gpu_verify` proves it (and everything else a launch
needs) before any CUDA is printed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import islpy as isl

from .. import expr as E
from ..errors import ScheduleError
from ..gemm_match import SIMT_FEW_TILES, SIMT_GEMM_DTYPES, SIMT_SMALL_TILE
from ..intrinsics import TENSOR_CORE_THREADS, TENSOR_CORE_TILE
from ..ir import Program
from ..isl_util import ast_expr_to_expr, pw_aff_to_expr
from . import gpu_marks as M
from .gpu_geometry import const_like, member_extents, member_strides
from .gpu_tensorcore import calls_below, group_extent, separate_calls
from .locality import member_scores
from .marks import coincident_members
from .tile import reorder_members

log = logging.getLogger(__name__)

_T = isl.schedule_node_type

#: Reduction kernels: threads per block, and at most this many blocks (their
#: partial results live in a static device array of this size).
REDUCE_THREADS = 256
REDUCE_MAX_BLOCKS = 1024
#: Tile size of the members a promotable kernel runs sequentially (k).
PROMOTE_TILE = 32
#: Shared memory (bytes) the promoted buffers of one kernel may take: CUDA's
#: static limit per block.
SHARED_BUDGET = 48 * 1024

#: The reduction operators a reduction kernel combines.
REDUCE_OPS = ("+", "*", "max", "min")

#: Axis names, innermost mapped member first.
AXES = "xyz"
#: CUDA's limit on the threads of one block.
MAX_THREADS = 1024
#: Default threads per block per mapped member, by number of mapped members
#: (innermost last): 256 threads, 32 along the innermost member (one warp
#: reads 32 consecutive elements).
DEFAULT_BLOCK = {1: (256,), 2: (8, 32), 3: (2, 4, 32)}


@dataclass
class KernelMapping:
    """One kernel of a mapped schedule.

    ``index``: the kernel's number (``polyc_k<index>`` in the CUDA source);
    ``statements``: the statements it runs; ``host_depth``: the schedule
    depth at which it starts (host loops ``c0`` .. ``c<host_depth-1>``
    around it); ``tile``: threads per block per mapped member, outermost
    first (empty: a one-thread kernel); ``n_block``: how many of the tile
    loops map to blocks; ``block_depth``/``thread_depth``: schedule depths of
    the tile and point bands; ``grid``/``block``: per mapped member,
    outermost first, the number of blocks / threads as an ``isl.PwAff`` of
    the size parameters (the tile values' range, tightened by isl; at most
    the tile size for threads); ``reason``: why the kernel maps what it
    maps."""
    index: int
    statements: tuple[str, ...]
    host_depth: int
    tile: tuple[int, ...] = ()
    n_block: int = 0
    block_depth: int = -1
    thread_depth: int = -1
    grid: list = field(default_factory=list)
    block: list = field(default_factory=list)
    reason: str = ""
    #: schedule depth of the k-tile loop of a kernel prepared for promotion
    #: to shared memory (-1: none), and what :func:`promote_shared` did:
    #: per tensor, the buffer and its box, or why it kept the tensor global
    promote_depth: int = -1
    promoted: dict = field(default_factory=dict)
    #: per statement, per mapped index (``"block.x"``, ``"thread.y"``...),
    #: the value that selects the block or thread running an instance, as an
    #: expression of the statement's iterators: the tile index
    #: ``floor(tile value / T)`` for a block (run by block ``index mod
    #: gridDim``), the point value for a thread (run by thread ``value mod
    #: blockDim``); the code generator uses them where isl prints no loop for
    #: a member (one value), so that an instance runs on the same thread
    #: whichever copy of the loop nest isl printed it in
    selectors: dict = field(default_factory=dict)
    #: a reduction kernel: the one update statement whose instances, all
    #: writing one element, are spread over the threads of the whole grid
    #: and combined by a tree in shared memory, then across blocks
    reduction: str = ""
    #: per block-mapped member, the stride of its values (a tile loop's tile
    #: size): the block index of a value is ``floor(value / step)``
    steps: tuple = ()
    #: the same for each thread-mapped member (1 but for a user's band whose
    #: values step, e.g. a tile loop mapped to threads)
    thread_steps: tuple = ()
    #: mapped by the schedule language (polyc.schedule.gpu_schedule), not
    #: automatically
    user: bool = False
    #: a tensor-core launch: the statement tensorized onto the tensor-core
    #: GEMM (``backends/cuda/wmma.py``), whose call every thread of a block
    #: makes; its batch loop (``n_block`` 1) on ``blockIdx.z``
    intrinsic: str = ""
    #: a tensor-core launch's grid (x: tiles of n, y: tiles of m, z: the
    #: batch loop's extent) as expressions of the size parameters
    launch_grid: tuple = ()
    #: a row kernel (polyc.schedule.gpu_rows): per child of its sequence,
    #: how it runs (``thread0``, ``threads``, ``reduce <statement>``), and
    #: per barrier the child it precedes and the dependence behind it
    rows: tuple = ()
    barriers: tuple = ()

    @property
    def block_axes(self) -> tuple[str, ...]:
        """The CUDA axis of each block-mapped member, outermost first."""
        if self.intrinsic:
            return ("z",) * self.n_block
        return tuple(AXES[self.n_block - 1 - j] for j in range(self.n_block))

    @property
    def thread_axes(self) -> tuple[str, ...]:
        if self.intrinsic:
            return ()
        n = len(self.tile)
        return tuple(AXES[n - 1 - j] for j in range(n))

    @property
    def where(self) -> str:
        """Where the kernel is launched from: at the top, or inside host loops."""
        if not self.host_depth:
            return "launched once"
        loops = ", ".join(f"c{d}" for d in range(self.host_depth))
        return f"launched inside {self.host_depth} host loop(s) ({loops}) that carry dependences"

    def launch_sizes(self, program: Program) -> dict:
        """``{"grid": [...], "block": [...]}``: the launch sizes per mapped
        member (outermost first) as text, functions of the size parameters
        (a tensor-core launch: its grid x, y, z and its block)."""
        if self.intrinsic:
            return {"grid": [E.to_text(x) for x in self.launch_grid],
                    "block": [str(t) for t in self.tile]}
        return {what: [E.to_text(pw_aff_to_expr(pa, program.context)) for pa in pas]
                for what, pas in (("grid", self.grid), ("block", self.block))}

    def describe(self) -> str:
        text = self._describe() + f"; {self.where}"
        if self.promoted:
            text += "; " + ", ".join(f"{t} -> {v}" for t, v in sorted(self.promoted.items()))
        return text

    def _describe(self) -> str:
        stmts = ", ".join(self.statements)
        if self.intrinsic:
            batch = ("its outermost batch loop on blockIdx.z, the others in each block"
                     if self.n_block else "no batch loop on blocks")
            bm, bn, bk = TENSOR_CORE_TILE
            simt = "tensor cores" not in self.reason
            unit, part = (("SIMT GEMM", "8 x 8 elements of C each") if simt else
                          ("tensor cores", "8 warps of 64 x 32"))
            small = (f", or {SIMT_SMALL_TILE} x {SIMT_SMALL_TILE} tiles (4 x 4 elements "
                     f"per thread) when a launch has fewer than {SIMT_FEW_TILES} of "
                     f"{bm} x {bn}" if simt else "")
            return (f"kernel {self.index} ({stmts}): {unit}: {self.reason}; blocks of "
                    f"{self.tile[0]} threads ({part}) compute {bm} x {bn} tiles of "
                    f"C over blockIdx.y/x{small}, k in panels of {bk}"
                    f"{f' ({bk // 2} in float64)' if simt else ''} through shared memory; "
                    f"{batch}")
        if self.reduction:
            return (f"kernel {self.index} ({stmts}): reduction of {self.reduction} over the "
                    f"grid: its outermost loop (schedule depth {self.thread_depth}) strided over "
                    f"every thread, {self.tile[0]} threads per block and at most "
                    f"{REDUCE_MAX_BLOCKS} blocks; partial results combined by a tree in shared "
                    "memory, then across blocks by the last block to finish (deterministic)")
        if self.rows:
            axes = "/".join(self.block_axes)
            phases = " | ".join(self.rows)
            bars = "".join(f"; barrier {b}" for b in self.barriers) or "; no barrier needed"
            what = ("phases of a block mapped by the schedule (block loops on "
                    if self.user else "one block per row (row loops on blocks ")
            return (f"kernel {self.index} ({stmts}): {what}{axes}, grid-stride), up to "
                    f"{self.tile[0]} threads on x per block; phases: {phases}{bars}")
        if not self.tile:
            return f"kernel {self.index} ({stmts}): one block of one thread: {self.reason}"
        if self.user:
            axes = (f"blocks {'/'.join(self.block_axes)}, " if self.n_block else "one block, ")
            return (f"kernel {self.index} ({stmts}): {self.reason}; {axes}threads "
                    f"{'/'.join(self.thread_axes)}")
        threads = " x ".join(str(t) for t in self.tile)
        return (f"kernel {self.index} ({stmts}): {len(self.tile)} coincident member(s) at "
                f"schedule depth {self.host_depth} tiled {threads}; tile loops "
                f"{'/'.join(self.block_axes)} -> blocks, point loops "
                f"{'/'.join(self.thread_axes)} -> threads"
                + (f"; {self.reason}" if self.reason else ""))


def block_shape(n: int, requested: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Threads per block for ``n`` mapped members, outermost first:
    ``requested`` (``Config.gpu_block``; outer members it does not cover get
    one thread, its innermost values are kept when it is longer), or
    :data:`DEFAULT_BLOCK`.  Raises :class:`~polyc.errors.ScheduleError` when
    a size is not positive or the product exceeds 1024 threads."""
    if not requested:
        return DEFAULT_BLOCK[n]
    sizes = [1] * max(0, n - len(requested)) + list(requested[-n:])
    if any(int(s) < 1 for s in sizes):
        raise ScheduleError(f"GPU block sizes must be positive, got {tuple(requested)}")
    total = 1
    for s in sizes:
        total *= int(s)
    if total > MAX_THREADS:
        raise ScheduleError(
            f"GPU block {tuple(sizes)} has {total} threads; CUDA allows at most "
            f"{MAX_THREADS} per block: pass smaller Config.gpu_block sizes")
    return tuple(int(s) for s in sizes)


def _ceil_div(e: E.Expr, size: int) -> E.Expr:
    return E.Binary("/", E.Binary("+", e, E.Const(size - 1)), E.Const(size))


def _statements(node: isl.ScheduleNode) -> tuple[str, ...]:
    names: list[str] = []
    node.get_domain().foreach_set(lambda s: names.append(s.get_tuple_name()))
    return tuple(sorted(names))


def _has_parallel(node: isl.ScheduleNode) -> bool:
    """Whether some band in the subtree of ``node`` has a coincident member."""
    if node.get_type() == _T.band and any(coincident_members(node)):
        return True
    return any(_has_parallel(node.child(i)) for i in range(node.n_children()))


def _leading_coincident(band: isl.ScheduleNode) -> int:
    n = 0
    for c in coincident_members(band):
        if not c:
            break
        n += 1
    return n


def reduction_statement(band: isl.ScheduleNode, program: Program) -> str | None:
    """The statement a reduction kernel at ``band`` combines, or ``None``.

    The subtree of ``band`` must run exactly one statement, an update
    ``lhs = lhs op rhs`` with ``op`` in :data:`REDUCE_OPS` whose ``rhs`` does
    not read ``lhs``'s tensor, and all its instances below equal values of
    the loops around ``band`` must write one element (the loops of ``band``
    and below scan reduction iterators only).  Its dependences there are
    then those of the reduction alone, which TC's semantics let polyc
    reassociate."""
    dom = band.get_domain()
    host = band.get_prefix_schedule_union_map().intersect_domain(dom)
    same_host = (host.apply_range(host.reverse()) if band.get_schedule_depth()
                 else isl.UnionMap.from_domain_and_range(dom, dom))
    return one_element_reduction(program, _statements(band), same_host)


def one_element_reduction(program: Program, names: tuple[str, ...],
                          same: isl.UnionMap) -> str | None:
    """The statement of ``names`` when it is one update ``lhs = lhs op rhs``
    (``op`` in :data:`REDUCE_OPS`, ``rhs`` not reading ``lhs``'s tensor)
    whose instances paired by ``same`` all write one element; else
    ``None`` (:func:`reduction_statement`, and the phases of
    :mod:`polyc.schedule.gpu_phases`)."""
    if len(names) != 1:
        return None
    s = program.statement(names[0])
    if (s.kind != "update" or s.op not in REDUCE_OPS
            or s.tensor in {a.tensor for a in E.accesses(s.rhs)}):
        return None
    dom = isl.UnionSet.from_set(s.domain)
    write = isl.UnionMap.from_map(s.write).intersect_domain(dom)
    pairs = same.intersect_domain(dom).intersect_range(dom)
    return s.name if pairs.is_subset(write.apply_range(write.reverse())) else None


class Mapper:
    def __init__(self, program: Program, block: tuple[int, ...], max_members: int,
                 promote: bool = False):
        self.promote = promote
        self.program = program
        self.requested = block
        self.max_members = max_members
        self.kernels: list[KernelMapping] = []

    def walk(self, node: isl.ScheduleNode) -> isl.ScheduleNode:
        """Map the subtree at ``node``; returns the node at the same position."""
        t = node.get_type()
        calls = calls_below(node, self.program)
        if calls and t in (_T.band, _T.leaf):
            if len(_statements(node)) == 1 and (t == _T.leaf or coincident_members(node)[0]):
                return self.tensor_core(node, calls[0])
            if t == _T.leaf:
                return self.single(node, "the statements have no loop")
            if node.band_n_member() > 1:      # a loop around a call and other statements
                node = node.band_split(1)
            return self.walk(node.child(0)).parent()          # a host loop
        if t == _T.band:
            if coincident_members(node)[0] and self.max_members > 0:
                return self.kernel(node)
            if self.max_members > 0:
                red = reduction_statement(node, self.program)
                if red is not None:
                    return self.reduce(node, red)
            if not _has_parallel(node) or self.max_members == 0:
                return self.single(node, "no loop of these statements is parallel "
                                   "(every band member carries a dependence)"
                                   if self.max_members else "mapping turned off")
            if node.band_n_member() > 1:
                node = node.band_split(1)
            return self.walk(node.child(0)).parent()          # a host loop
        if t == _T.leaf:
            return self.single(node, "the statements have no loop")
        if (t in (_T.sequence, _T.set) and not _has_parallel(node)
                and not self._has_reduction(node) and not calls):
            return self.single(node, "no loop of these statements is parallel")
        for i in range(node.n_children()):
            node = self.walk(node.child(i)).parent()
        return node

    def tensor_core(self, node: isl.ScheduleNode, call: str) -> isl.ScheduleNode:
        """A tensor-core launch of ``call`` (a statement tensorized onto the
        tensor-core GEMM) at ``node``: every thread of a block of
        :data:`TENSOR_CORE_THREADS` makes the call, which computes the block's tiles
        of C (``blockIdx.y``/``x``); the outermost loop around the call, if
        any (a batch loop, coincident), on ``blockIdx.z``, the others run in
        each block.  Raises :class:`~polyc.errors.ScheduleError` for a call
        that is not the tensor-core GEMM's."""
        m = self.program.statement(call).intrinsic
        if not getattr(m, "operand_dtype", ""):
            raise ScheduleError(f"statement {call} calls a CPU intrinsic, which target='cuda' "
                                "does not have")
        depth = node.get_schedule_depth()
        batch = node.get_type() == _T.band
        k = KernelMapping(len(self.kernels), (call,), depth, tile=(TENSOR_CORE_THREADS,),
                          n_block=int(batch), intrinsic=call, reason=m.describe())
        extents = [group_extent(self.program, m, group) for group in (m.n, m.m)]
        tiles = [_ceil_div(e, size) for e, size in zip(extents, TENSOR_CORE_TILE[1::-1])]
        z = E.Const(1)
        if batch:
            if node.band_n_member() > 1:
                node = node.band_split(1)
            k.block_depth = depth
            z = pw_aff_to_expr(member_extents(node, 1)[0], self.program.context)
            node = node.insert_mark(M.Batch(depth, 1).id())
        if m.operand_dtype in SIMT_GEMM_DTYPES:
            # the SIMT GEMM takes 64 x 64 tiles when 128 x 128 ones would give
            # few blocks (backends/cuda/wmma.py decides on the device alike)
            few = E.Binary("<", E.Binary("*", E.Binary("*", tiles[0], tiles[1]), z),
                           E.Const(SIMT_FEW_TILES))
            tiles = [E.Select(few, _ceil_div(e, SIMT_SMALL_TILE), t)
                     for e, t in zip(extents, tiles)]
        k.launch_grid = (tiles[0], tiles[1], z)
        self.kernels.append(k)
        return node.insert_mark(M.Kernel(k.index).id())

    def _has_reduction(self, node: isl.ScheduleNode) -> bool:
        """Whether some band below ``node`` starts a reduction kernel."""
        if node.get_type() == _T.band and self.max_members > 0:
            return reduction_statement(node, self.program) is not None
        return any(self._has_reduction(node.child(i)) for i in range(node.n_children()))

    def reduce(self, band: isl.ScheduleNode, statement: str) -> isl.ScheduleNode:
        depth = band.get_schedule_depth()
        ext = member_extents(band, 1)[0]
        t = REDUCE_THREADS
        blocks = ext.add_constant_val(isl.Val.int_from_si(band.get_ctx(), t - 1)).scale_down_val(
            isl.Val.int_from_si(band.get_ctx(), t)).floor()
        k = KernelMapping(len(self.kernels), _statements(band), depth, tile=(t,), n_block=1,
                          block_depth=depth, thread_depth=depth, reduction=statement,
                          grid=[blocks.min(const_like(blocks, REDUCE_MAX_BLOCKS)).coalesce()],
                          block=[ext.min(const_like(ext, t)).coalesce()])
        self.kernels.append(k)
        band = band.insert_mark(M.GridReduce(depth, 1).id())
        return band.insert_mark(M.Kernel(k.index).id())

    def single(self, node: isl.ScheduleNode, reason: str) -> isl.ScheduleNode:
        k = KernelMapping(len(self.kernels), _statements(node), node.get_schedule_depth(),
                          reason=reason)
        self.kernels.append(k)
        return node.insert_mark(M.Kernel(k.index).id())

    def kernel(self, band: isl.ScheduleNode) -> isl.ScheduleNode:
        n = min(_leading_coincident(band), self.max_members, 3)
        band, moved = _coalescing_order(band, self.program, n)
        sizes = block_shape(n, self.requested)
        depth = band.get_schedule_depth()
        k = KernelMapping(len(self.kernels), _statements(band), depth, tile=sizes,
                          n_block=min(n, 2), reason=moved)
        r = band.band_n_member() - n
        if self.promote and n <= 2 and r >= 1 and band.band_get_permutable():
            return self._promotable(band, k, n, r)
        if r > 0:
            band = band.band_split(n)
        extents = member_extents(band, n)
        tiles = band.band_tile(_sizes(band, sizes))
        k.grid = member_extents(tiles, k.n_block)
        k.block = [e.min(const_like(e, s)) for e, s in zip(extents, sizes)]
        if n > k.n_block:
            tiles = tiles.band_split(k.n_block)
            points = tiles.child(0).child(0)
        else:
            points = tiles.child(0)
        k.block_depth, k.thread_depth = depth, points.get_schedule_depth()
        _selectors(k, self.program, tiles, points)
        points = points.insert_mark(M.Threads(k.thread_depth, n).id())
        tiles = points.parent()
        if n > k.n_block:
            tiles = tiles.parent()
        assert tiles.get_type() == _T.band and tiles.get_schedule_depth() == depth
        tiles = tiles.insert_mark(M.Blocks(depth, k.n_block).id())
        self.kernels.append(k)
        return tiles.insert_mark(M.Kernel(k.index).id())

    def _promotable(self, band: isl.ScheduleNode, k: KernelMapping, n: int,
                    r: int) -> isl.ScheduleNode:
        """A permutable band with ``r`` members after its ``n`` mapped ones
        (the ``k`` of a matmul): every member tiled, the ``r`` tile loops
        kept as a sequential loop between the blocks and the threads
        (``tiles(n) -> k-tiles(r) -> points(n) -> points(r)``, PPCG's
        structure), so that one iteration of the k-tile loop reads a
        constant-size box of each input: what :func:`promote_shared` copies
        into shared memory."""
        depth = band.get_schedule_depth()
        extents = member_extents(band, n)
        all_sizes = tuple(k.tile) + (PROMOTE_TILE,) * r
        tiles = band.band_tile(_sizes(band, all_sizes))
        k.grid = member_extents(tiles, k.n_block)
        k.block = [e.min(const_like(e, s)) for e, s in zip(extents, k.tile)]
        tiles = tiles.band_split(n)
        ktiles = tiles.child(0)
        k.promote_depth = ktiles.get_schedule_depth()
        points = ktiles.child(0).band_split(n)
        k.block_depth, k.thread_depth = depth, points.get_schedule_depth()
        _selectors(k, self.program, tiles, points)
        points = points.insert_mark(M.Threads(k.thread_depth, n).id())
        tiles = points.parent().parent()
        assert tiles.get_type() == _T.band and tiles.get_schedule_depth() == depth
        tiles = tiles.insert_mark(M.Blocks(depth, k.n_block).id())
        self.kernels.append(k)
        return tiles.insert_mark(M.Kernel(k.index).id())


def _selectors(k: KernelMapping, program: Program, tiles: isl.ScheduleNode,
               points: isl.ScheduleNode) -> None:
    """Fill ``k.steps``, ``k.thread_steps`` and ``k.selectors`` from the
    tile band mapped to blocks (its first ``k.n_block`` members; values
    ``T * floor(x / T)``: step ``T``) and the point band mapped to threads."""
    k.steps = member_strides(tiles, k.n_block)
    k.thread_steps = member_strides(points, len(k.tile))
    fill_selectors(k, program, tiles.band_get_partial_schedule(),
                   points.band_get_partial_schedule(), k.steps, k.thread_steps)


def fill_selectors(k: KernelMapping, program: Program, blocks: isl.MultiUnionPwAff | None,
                   points: isl.MultiUnionPwAff | None, steps: tuple[int, ...],
                   thread_steps: tuple[int, ...] = ()) -> None:
    """Fill ``k.selectors`` of ``k.statements`` from the partial schedule of
    the band mapped to blocks (its first ``k.n_block`` members, whose values
    step by ``steps``: the tile index is ``floor(value / step)``) and of the
    band mapped to threads (its first ``len(k.tile)`` members, stepping by
    ``thread_steps``, 1 when not given)."""
    for name in k.statements:
        st = program.statement(name)
        build = isl.AstBuild.from_context(st.domain)
        its, params = set(st.iterators), set(program.params)

        def expr(upa: isl.UnionPwAff) -> E.Expr | None:
            pas: list[isl.PwAff] = []
            upa.foreach_pw_aff(pas.append)
            pa = next((p for p in pas
                       if p.get_domain_space().get_tuple_name(isl.dim_type.set) == name), None)
            if pa is None:        # the statement is not below that band
                return None
            e = ast_expr_to_expr(build.expr_from_pw_aff(pa.intersect_domain(st.domain)))
            return E.map_expr(e, lambda x: E.Param(x.name) if isinstance(x, E.Index)
                              and x.name in params and x.name not in its else None)
        sel = {}
        for j, axis in enumerate(k.block_axes):
            w = expr(blocks.get_union_pw_aff(j))
            if w is not None:
                sel[f"block.{axis}"] = (E.Binary("/", w, E.Const(steps[j])) if steps[j] > 1
                                        else w)
        for j, axis in enumerate(k.thread_axes if points is not None else ()):
            w = expr(points.get_union_pw_aff(j))
            step = thread_steps[j] if j < len(thread_steps) else 1
            if w is not None:
                sel[f"thread.{axis}"] = E.Binary("/", w, E.Const(step)) if step > 1 else w
        k.selectors[name] = sel


def _sizes(band: isl.ScheduleNode, sizes) -> isl.MultiVal:
    mv = isl.MultiVal.zero(band.band_get_space())
    for j, v in enumerate(sizes):
        mv = mv.set_val(j, isl.Val.int_from_si(band.get_ctx(), int(v)))
    return mv


def _coalescing_order(band: isl.ScheduleNode, program: Program,
                      n: int) -> tuple[isl.ScheduleNode, str]:
    """``band`` with the one of its ``n`` leading coincident members that
    walks memory with stride 1 in most accesses (:func:`locality.member_scores`)
    moved innermost among them, so that it maps to ``threadIdx.x`` and a
    warp's loads coalesce; and a note saying so (``""`` when nothing moved).
    Permuting coincident members is always legal: every dependence has
    distance 0 on each of them."""
    scores = member_scores(band, program)[:n]
    best = max(range(n), key=lambda j: (scores[j] if scores[j] is not None else -1, j))
    if best == n - 1 or scores[best] is None or scores[best] <= (scores[n - 1] or 0):
        return band, ""
    order = [j for j in range(n) if j != best] + [best] + list(range(n, band.band_n_member()))
    return (reorder_members(band, order),
            f"member {best} moved innermost (threadIdx.x): stride 1 in most accesses")


def map_schedule(schedule: isl.Schedule, program: Program, *,
                 block: tuple[int, ...] = (), max_members: int = 3, promote: bool = False,
                 deps: isl.UnionMap | None = None
                 ) -> tuple[isl.Schedule, list[KernelMapping]]:
    """``schedule`` with every statement in one kernel (see the module
    docstring) and the kernels' :class:`KernelMapping`, in launch order.

    ``block``: threads per block per mapped member (``Config.gpu_block``),
    ``max_members``: how many coincident members may map (``0``: every
    kernel runs on one thread), ``promote``: prepare permutable bands for
    :func:`promote_shared` (their remaining members tiled, the tile loops
    between blocks and threads), ``deps``: every dependence (a band that
    holds a tensor-core call and other statements is distributed where they
    allow it).  Raises :class:`~polyc.errors.ScheduleError`
    for block sizes CUDA cannot launch."""
    if deps is not None:
        schedule = separate_calls(schedule, program, deps)
    mapper = Mapper(program, tuple(block), max_members, promote)
    root = schedule.get_root()
    node = mapper.walk(root.child(0)) if root.n_children() else root
    mapped = node.get_schedule()
    for k in mapper.kernels:
        log.debug("%s", k.describe())
    return mapped, mapper.kernels


def describe(kernels: list[KernelMapping]) -> str:
    """The mapping report: one line per kernel."""
    return "\n".join(k.describe() for k in kernels)
