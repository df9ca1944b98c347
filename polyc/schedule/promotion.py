"""Promotion of a tensor's footprint to a local buffer: ``promote(tensor, at=loop)``.

The part of ``tensor`` that the statements below loop ``at`` access during
one iteration of ``at`` (its *footprint*) is copied into a small local
buffer before the loop body and, when those statements write the tensor,
copied back after it; in between, the statements read and write the buffer.
This is TVM's ``cache_read`` / ``cache_write`` and PPCG's promotion to shared
memory, done on the CPU: the buffer is a stack array private to the thread
that runs the iteration, with constant extents and constant strides.

How it is built (isl does every integer-set computation):

* the *prefix* of ``at`` is the schedule of every band member down to and
  including ``at`` (the band is split after ``at`` first): ``P = { S[i] ->
  [p] }`` (``isl_schedule_node_get_prefix_schedule_union_map``);
* the read and write footprints are ``Fr = P^-1 . R`` and ``Fw = P^-1 . W``
  ``{ [p] -> T[x] }`` for the statements' exact read / write access
  relations ``R`` / ``W`` of ``tensor``; the *exposed* reads ``Fe`` are the
  elements of ``Fr`` that some read takes from before the iteration: isl's
  dataflow analysis (``isl_union_access_info_compute_flow``) with the prefix
  added to the data, so that only a write of the same iteration can be the
  source of a read (``C`` of a matmul whose initialisation runs in the
  iteration has none: it is only copied out, a pure ``cache_write``);
* the buffer is isl's fixed-size box hull of ``Fr u Fw``
  (``isl_map_get_range_simple_fixed_box_hull``): an offset ``o(p)``, affine
  in the prefix, and constant sizes.  No such box (an inner loop running
  over a parameter-sized range, for instance), or a box that would take the
  local buffers over :data:`MAX_LOCAL_BYTES`, refuses the promotion;
* the copies are new statements (kind ``"copy"``) ``<buffer>_in[p, x]``
  (``buffer[x - o(p)] = tensor[x]`` for ``x`` in ``Fe(p)``) and
  ``<buffer>_out[p, x]`` (``tensor[x] = buffer[x - o(p)]`` for ``x`` in
  ``Fw(p)``), put into the tree with extension nodes
  (``isl_schedule_node_graft_before`` / ``graft_after`` with the extension
  ``{ [p] -> copy[p, x] }``) over a band scanning ``x``, so that isl's AST
  generator scans them like any statement;
* the accesses of ``tensor`` by the statements below ``at`` become accesses
  of the buffer at ``x - o(P(i))``, an expression of the statement's
  iterators printed by isl's AST builder (``m - 32*floor(m/32)`` prints as
  ``m % 32``);
* a mark ``promote:<buffer>`` above the extension node tells the code
  generator where the buffer lives: the C declares it at the top of the
  body of ``at`` (``{ float t_A_local[32][32] __attribute__((aligned(64)));
  ... }``), so each OpenMP thread has its own.

Why it is correct.  Promotion is *structural*: no original statement
instance moves (:func:`polyc.schedule.legality.check_tree` checks the order
of the original statements on the tree without the extension nodes, and
isl refuses to change a band above an extension, whose copies depend on its
prefix).  Within one iteration ``p`` of ``at``, every read of an element
``x`` either takes the value of a write of the same iteration, which now
wrote the buffer, or a value from before the iteration, which the copy-in
(``Fe(p)``) put into the buffer before the body.  Nothing else touches
``tensor`` during the iteration (every access below ``at`` is redirected),
and the copy-out writes back exactly the elements the iteration wrote,
``Fw(p)``, with their last values, before anything that follows the
iteration.  Because the footprints are exact, an iteration reads and writes
in memory precisely the elements its statements did: when an enclosing loop
runs in parallel, no thread copies in an element another thread writes, nor
copies out one another thread touches (either would be a dependence carried
by the parallel loop, which its legality check refuses).
:func:`check_promotions` re-derives the copies from the current tree and
the original statements and compares.

The loop nests use ``C(m,n) +=! A(m,k) * B(k,n)`` under isl's schedule
(``start="isl"``: one band ``m, n, k`` with the init ``S0_init`` at
``k = 0``), tiled with ``tile([("C","m"), ("C","n"), ("C","k")], [32, 32,
32])``.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import islpy as isl
import numpy as np

from .. import expr as E
from ..errors import ScheduleError
from ..ir import Program, Statement, Tensor
from ..isl_util import (
    CTX,
    NonAffineError,
    aff_from_expr,
    ast_expr_to_expr,
    const_pw_aff,
    fixed_box_hull,
    param_space,
)
from . import surgery
from .legality import without_extensions
from .registry import transform
from .tree import band_names, fresh_name, set_band_names, statements_of

#: Prefix of the mark above a promotion's extension node naming the local
#: buffer whose scope is the subtree below it (``promote:A_local``); the code
#: generator declares the buffer there (:class:`polyc.loopnest.Local`).
LOCAL_MARK = "promote:"

#: The most memory (bytes) the local buffers of one schedule may take
#: together.  They live on the stack of the thread running the loop (worker
#: threads of OpenMP runtimes often get small stacks, 2-8 MiB, sometimes
#: 512 KiB), so promotion is meant for tiles, not whole tensors.
MAX_LOCAL_BYTES = 256 * 1024

_BAND = isl.schedule_node_type.band
_EXT = isl.schedule_node_type.extension


# ------------------------------------------------------------ helpers

def affine_accesses(st: Statement, tensor: str) -> bool:
    """Whether every access of ``st`` to ``tensor`` has affine indices (no
    gather): what rewriting it to a local buffer needs."""
    for acc in E.accesses(st.lhs) + E.accesses(st.rhs):
        if acc.tensor != tensor:
            continue
        try:
            for i in acc.indices:
                aff_from_expr(i, st.domain.get_space())
        except NonAffineError:
            return False
    return True


def _union_map(maps, space: isl.Space) -> isl.UnionMap:
    u = isl.UnionMap.empty(space)
    for m in maps:
        u = u.union(isl.UnionMap.from_map(m))
    return u


#: isl operations the convex hull of a footprint may take (it is only a
#: tidying step; the hull of a stencil's cross-shaped footprint with tile
#: strides can take minutes)
HULL_OPERATIONS = 200_000


def _tidy(m: isl.Map) -> isl.Map:
    """``m`` coalesced, as one convex piece when its simple hull
    (``isl_map_simple_hull``, cheap) or its convex hull (within
    :data:`HULL_OPERATIONS` isl operations) is exactly ``m`` (fewer pieces:
    fewer copy loops); exactness is never given up."""
    m = m.coalesce()
    if m.n_basic_map() <= 1:
        return m
    hull = isl.Map.from_basic_map(m.simple_hull())
    if hull.is_equal(m):
        return hull
    outer = CTX.get_max_operations()
    if not outer:                  # else the caller's budget bounds it
        CTX.set_max_operations(HULL_OPERATIONS)
        CTX.reset_operations()
    try:
        hull = isl.Map.from_basic_map(m.convex_hull())
    except isl.Error:
        if outer:
            raise
        return m
    finally:
        if not outer:
            CTX.set_max_operations(0)
            CTX.reset_operations()
    return hull if hull.is_equal(m) else m


def _expr_of(pa: isl.PwAff, domain: isl.Set, iterators, params) -> E.Expr:
    """``pa`` (a function on ``domain``'s space) as an expression of the
    iterators, printed by isl's AST builder under ``domain``."""
    build = isl.AstBuild.from_context(domain)
    e = ast_expr_to_expr(build.expr_from_pw_aff(pa))
    its, ps = set(iterators), set(params)

    def fix(x):
        if isinstance(x, E.Index):
            if x.name in ps and x.name not in its:
                return E.Param(x.name)
            assert x.name in its, (x.name, iterators)
        return None
    return E.map_expr(e, fix)


def footprints(node: isl.ScheduleNode, users, t: Tensor, program: Program,
                order: isl.Schedule) -> tuple[isl.Map, isl.Map, isl.Map]:
    """``(read, write, exposed)`` footprints ``{ [p] -> T[x] }`` of tensor
    ``t`` in one iteration ``p`` of the prefix schedule at ``node``, for the
    statements ``users``' access relations: ``P^-1 . R``, ``P^-1 . W`` and
    the *upward-exposed* reads, the elements whose value some read of the
    iteration takes from before the iteration (no write of the same
    iteration precedes it: isl's dataflow analysis,
    ``isl_union_access_info_compute_flow`` on the order ``order``, with the
    prefix added to the data so that only writes of the same iteration can
    be sources).  All exact."""
    tensor = t.name
    pspace = param_space(program.params)
    domain = node.get_domain()
    prefix = node.get_prefix_schedule_union_map().intersect_domain(domain)
    inv = prefix.reverse()
    reads = _union_map([r.intersect_domain(st.domain) for st in users for r in st.reads
                        if r.get_tuple_name(isl.dim_type.out) == tensor], pspace)
    writes = _union_map([st.write.intersect_domain(st.domain) for st in users
                         if st.tensor == tensor], pspace)
    ctx = program.parameter_domain()
    space = isl.Space.map_from_domain_and_range(
        isl.Space.set_alloc(CTX, 0, node.get_schedule_depth()).align_params(pspace),
        isl.Space.set_alloc(CTX, 0, t.ndim).align_params(pspace)
        .set_tuple_name(isl.dim_type.set, tensor))
    fr = inv.apply_range(reads).intersect_params(ctx).extract_map(space)
    fw = inv.apply_range(writes).intersect_params(ctx).extract_map(space)
    flow = (isl.UnionAccessInfo.from_sink(prefix.range_product(reads))
            .set_must_source(prefix.range_product(writes))
            .set_schedule(order).compute_flow())
    exposed = isl.Map.from_union_map(flow.get_may_no_source().range().unwrap()) \
        if not flow.get_may_no_source().is_empty() else fr.subtract(fr)
    exposed = exposed.intersect_params(ctx)
    return _tidy(fr), _tidy(fw), _tidy(exposed)


def _identifier_names(wanted: list[str], taken: set[str], fallback: str) -> list[str]:
    out = []
    for k, nm in enumerate(wanted):
        nm = nm.split("|")[0]
        if not nm.isidentifier() or nm in taken or nm in out:
            nm = f"{fallback}{k}"
            while nm in taken or nm in out:
                nm += "_"
        out.append(nm)
    return out


def _prefix_names(node: isl.ScheduleNode, program: Program) -> list[str]:
    """The loop names of the schedule dimensions above ``node``, outermost
    first."""
    depth = node.get_schedule_depth()
    names = [f"p{k}" for k in range(depth)]
    cur = node
    while cur.has_parent():
        cur = cur.parent()
        if cur.get_type() == _BAND:
            d0 = cur.get_schedule_depth()
            for j, nm in enumerate(band_names(cur, program)):
                if d0 + j < depth:
                    names[d0 + j] = nm
    return names


def _copy_statement(name: str, iterators, domain: isl.Set, lhs: E.Access, rhs: E.Access,
                    write: isl.Map, read: isl.Map, text: str) -> Statement:
    return Statement(name=name, iterators=tuple(iterators), domain=domain, lhs=lhs, op="=",
                     rhs=rhs, write=write, reads=(read,), kind="copy", text=text)


def _named_set(fp: isl.Map, name: str, iterators) -> isl.Set:
    """``{ name[p, x] : x in fp(p) }`` with dimensions named ``iterators``."""
    s = fp.wrap().flatten().set_tuple_name(name)
    for k, it in enumerate(iterators):
        s = s.set_dim_name(isl.dim_type.set, k, it)
    return s


def _extension(dom: isl.Set, depth: int, prefix_space: isl.Space) -> isl.UnionMap:
    """``{ [p] -> copy[p, x] }`` for the copy statement domain ``dom``."""
    ident = isl.Map.identity(dom.get_space().map_from_set()).intersect_domain(dom)
    n = dom.dim(isl.dim_type.set)
    ext = ident.project_out(isl.dim_type.in_, depth, n - depth)
    ext = ext.reset_tuple_id(isl.dim_type.in_)
    for k in range(depth):
        ext = ext.set_dim_name(isl.dim_type.in_, k,
                               prefix_space.get_dim_name(isl.dim_type.set, k) or f"p{k}")
    return isl.UnionMap.from_map(ext)


def _graft(dom: isl.Set, depth: int, prefix_space: isl.Space, element_its) -> isl.ScheduleNode:
    """A graft (an extension node over a band scanning the elements) that
    runs the copy statement whose domain is ``dom``."""
    node = isl.ScheduleNode.from_extension(_extension(dom, depth, prefix_space))
    n = len(element_its)
    if n:
        space = dom.get_space()
        ls = isl.LocalSpace.from_space(space)
        cols = isl.UnionPwAffList.alloc(CTX, n)
        for d in range(n):
            aff = isl.Aff.var_on_domain(ls, isl.dim_type.set, depth + d)
            cols = cols.add(isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff)))
        mspace = cols.get_at(0).get_space().add_dims(isl.dim_type.set, n)
        mupa = isl.MultiUnionPwAff.from_union_pw_aff_list(mspace, cols)
        band = node.child(0).insert_partial_schedule(mupa)
        node = set_band_names(band, list(element_its))
    while node.has_parent():
        node = node.parent()
    return node


# ------------------------------------------------------------ the transformation

@transform("promote", kind="structural")
def promote(s, tensor, at, name=None):
    """Copy the footprint of ``tensor`` accessed in one iteration of loop
    ``at`` into a local buffer (``<tensor>_local``, or ``name``): copied in
    before the loop body (the elements the body reads before writing them),
    copied back after it (exactly the elements it writes); the statements
    below ``at`` access the buffer instead.  TVM's ``cache_read`` /
    ``cache_write``; PPCG's promotion to shared memory.

    The buffer is isl's fixed-size box hull of the footprint, declared in
    the body of ``at`` (private to each OpenMP thread), aligned to 64 bytes.
    Refused (:class:`ScheduleError`, naming the tensor and the loop) when
    ``tensor`` is not accessed below ``at``; when the footprint has no box of
    constant size (e.g. an inner loop runs over a whole parameter-sized
    dimension: promote inside tiles); when the local buffers would take more
    than :data:`MAX_LOCAL_BYTES` (256 KiB, together: they live on the
    thread's stack); when ``tensor`` is accessed through a gather.

    *Structural*: no statement instance moves, the copies only add
    instances; the module docstring explains why the exact footprints keep
    the result correct, also under an enclosing parallel loop.  Promote once
    the loops at and above ``at`` are final (isl refuses to tile, reorder or
    rebuild a band above a promotion); ``parallel``, ``vectorize``, marks
    and transformations of the loops below ``at`` may follow.

    Before / after ``promote("A", at=("C","k_tile"))`` then
    ``promote("C", at=("C","k_tile"))`` on the tiled matmul (isl peels the
    iteration ``k_tile = 0``, which runs the init)::

        for m_tile: for n_tile:
          for m: for n:
            S0_init(m, n)
            for k in [0, 32): S0(m, n, k)
          for k_tile = 32; k_tile < K; k_tile += 32
            for m: for n: for k: S0(m, n, k)

        for m_tile: for n_tile:
          { float A_local[32][32], C_local[32][32];
            for x0: for x1: A_local_in(m_tile, n_tile, 0, x0, x1)
            for m: for n:
              S0_init(m, n)
              for k in [0, 32): S0(m, n, k)
            for x0: for x1: C_local_out(m_tile, n_tile, 0, x0, x1) }
          for k_tile = 32; k_tile < K; k_tile += 32
            { float A_local[32][32], C_local[32][32];
              for x0: for x1: C_local_in(m_tile, n_tile, k_tile, x0, x1)
              for x0: for x1: A_local_in(m_tile, n_tile, k_tile, x0, x1)
              for m: for n: for k: S0(m, n, k)
              for x0: for x1: C_local_out(m_tile, n_tile, k_tile, x0, x1) }

    with ``A_local_in``: ``A_local(x0 - m_tile, x1 - k_tile) = A(x0, x1)``
    for ``x0`` in ``[m_tile, min(M, m_tile + 32))`` and ``x1`` in
    ``[k_tile, min(K, k_tile + 32))``; ``C_local_out``: ``C(x0, x1) =
    C_local(x0 - m_tile, x1 - n_tile)``; ``S0``: ``C_local(m % 32, n % 32) +=
    A_local(m % 32, k % 32) * B(k, n)``.  The first iteration copies no ``C``
    in: ``S0_init`` writes every element before ``S0`` reads it.
    """
    return promote_loop(s, tensor, at, name)


def promote_loop(s, tensor, at, name=None, *, max_bytes: int = MAX_LOCAL_BYTES,
                 memory: str = "local buffers (they live on each thread's stack)",
                 suffix: str = "_local", used: int | None = None
                 ) -> tuple[isl.Schedule, Program]:
    """:func:`promote` with a budget of ``max_bytes`` for the buffers
    (``used`` of it taken by earlier buffers; default: every local buffer of
    the program), described as ``memory`` when they do not fit, and default
    buffer names ``<tensor><suffix>`` (the GPU promotions,
    :mod:`polyc.schedule.gpu_schedule`, pass shared memory's and the
    registers')."""
    program: Program = s.program
    lp = s.resolve(at)
    if not isinstance(tensor, str):
        raise ScheduleError(f"the tensor to promote must be given by name, got {tensor!r}")
    try:
        t = program.tensor(tensor)
    except KeyError:
        names = ", ".join(x.name for x in program.tensors if x.role != "local")
        raise ScheduleError(f"no tensor named {tensor!r} in {program.name}; its tensors "
                            f"are: {names}") from None
    where = f"tensor {tensor} at loop {lp.name}"
    if t.role == "local":
        raise ScheduleError(f"{where}: {tensor} is already a local buffer")
    copies = [nm for nm in lp.statements if program.statement(nm).kind == "copy"]
    if copies:
        raise ScheduleError(f"{where}: loop {lp.name} runs the copy statements "
                            f"{', '.join(copies)} of an earlier promotion; promote at a "
                            f"loop of the original statements")
    if name is not None and (not isinstance(name, str)
                             or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name)):
        raise ScheduleError(f"{where}: the buffer name must be an ASCII identifier, got "
                            f"{name!r}")

    # the node just below `at`: split the band after it
    band = surgery.band_node(s.isl, lp)
    if lp.member + 1 < band.band_n_member():
        band = surgery.top_of_band(surgery.split_band(band, lp.member + 1, program)).parent()
    assert band.get_type() == _BAND
    return promote_at(band, program, tensor, name=name, where=where, loop=lp.name,
                      order=without_extensions(s.isl), max_bytes=max_bytes, memory=memory,
                      suffix=suffix, used=used)


def promote_at(band: isl.ScheduleNode, program: Program, tensor: str, *,
               name: str | None = None, where: str, loop: str, order: isl.Schedule,
               max_bytes: int = MAX_LOCAL_BYTES,
               memory: str = "local buffers (they live on each thread's stack)",
               suffix: str = "_local", used: int | None = None
               ) -> tuple[isl.Schedule, Program]:
    """The core of :func:`promote`: promote ``tensor``'s footprint in one
    iteration of the prefix ending with ``band`` (whose last member is the
    loop ``loop``; ``where`` names both in messages), with the statements'
    original order ``order`` for the dataflow analysis and at most
    ``max_bytes`` of local buffers.  Returns the new schedule and program;
    raises :class:`ScheduleError` as :func:`promote` documents.  Also the
    GPU mapping's promotion to shared memory
    (:func:`polyc.schedule.gpu_mapping.promote_shared`)."""
    t = program.tensor(tensor)
    node = band.child(0)
    depth = node.get_schedule_depth()
    domain = node.get_domain()
    below = [program.statement(nm) for nm in statements_of(band)]

    # the statements below `at` that access the tensor
    ctx = program.parameter_domain()
    users = [st for st in below
             if st.tensor == tensor or tensor in st.read_tensors()]
    if not users:
        bufs = [x.name for x in program.tensors if x.origin == tensor]
        known = (f"; {tensor} is already promoted to {', '.join(bufs)}, which those "
                 f"statements access instead" if bufs else "")
        raise ScheduleError(f"{where}: no statement below loop {loop} accesses "
                            f"{tensor} (statements there: "
                            f"{', '.join(st.name for st in below) or 'none'}){known}")
    for st in users:
        dom_here = domain.extract_set(st.domain.get_space())
        if not st.domain.intersect_params(ctx).is_subset(dom_here):
            raise ScheduleError(f"{where}: statement {st.name} also runs outside loop "
                                f"{loop}; promotion rewrites all its accesses")
        if not affine_accesses(st, tensor):
            raise ScheduleError(f"{where}: statement {st.name} accesses {tensor} "
                                f"through a non-affine index (a gather); promotion "
                                f"needs affine accesses")

    # footprints { [p] -> T[x] } of one iteration of the prefix
    fr_all, fw, fr = footprints(node, users, t, program, order)
    footprint = _tidy(fr_all.union(fw))
    pspace = param_space(program.params)
    prefix_space = node.get_prefix_schedule_multi_union_pw_aff().get_space()

    if footprint.is_empty():
        raise ScheduleError(f"{where}: the statements below loop {loop} access no "
                            f"element of {tensor} for any sizes")
    box = fixed_box_hull(footprint)
    if box is None:
        raise ScheduleError(
            f"{where}: the elements of {tensor} accessed in one iteration of "
            f"{loop} do not fit in a box of constant size (an inner loop runs over "
            f"a parameter-sized range); promote at a loop inside the tiles, e.g. the "
            f"innermost tile loop after tile(...)")
    offset, sizes = box
    itemsize = np.dtype(t.dtype).itemsize
    nbytes = math.prod(sizes) * itemsize
    if used is None:
        used = sum(math.prod(lt.constant_shape()) * np.dtype(lt.dtype).itemsize
                   for lt in program.locals)
    if nbytes + used > max_bytes:
        dims = "x".join(str(v) for v in sizes) or "1"
        more = f" plus {used} bytes of buffers promoted earlier" if used else ""
        raise ScheduleError(
            f"{where}: the local buffer would hold {dims} {t.dtype} elements "
            f"({nbytes} bytes){more}, over the limit of {_size(max_bytes)} of "
            f"{memory}; promote at an inner loop or use smaller tiles")

    # names
    tensor_names = {x.name for x in program.tensors}
    stmt_names = {st.name for st in program.statements}
    buf = name if name is not None else f"{tensor}{suffix}"
    if name is not None and name in tensor_names:
        raise ScheduleError(f"{where}: a tensor named {name!r} already exists")
    buf = fresh_name(buf, tensor_names, "_")
    reserved = set(program.params) | tensor_names | {buf}
    pnames = _identifier_names(_prefix_names(node, program), reserved, "p")
    xnames = _identifier_names([f"x{d}" for d in range(t.ndim)], reserved | set(pnames), "x")
    its = pnames + xnames

    local = Tensor(name=buf, dtype=t.dtype,
                   shape=tuple(const_pw_aff(pspace, v) for v in sizes), role="local",
                   origin=tensor)

    # x - o(p) on the copy statements' space
    def copy_index(dom: isl.Set, shift: bool) -> isl.MultiAff:
        """``copy[p, x] -> [x - o(p)]`` (``shift``) or ``[x]``."""
        space = dom.get_space()
        ls = isl.LocalSpace.from_space(space)
        proj = isl.MultiAff.zero(isl.Space.map_from_domain_and_range(
            space, offset.get_space().domain()))
        for k in range(depth):
            proj = proj.set_aff(k, isl.Aff.var_on_domain(ls, isl.dim_type.set, k))
        off = offset.pullback_multi_aff(proj)
        idx = isl.MultiAff.zero(isl.Space.map_from_domain_and_range(
            space, isl.Space.set_alloc(CTX, 0, t.ndim).align_params(space)))
        for d in range(t.ndim):
            x = isl.Aff.var_on_domain(ls, isl.dim_type.set, depth + d)
            idx = idx.set_aff(d, x.sub(off.get_aff(d)) if shift else x)
        return idx

    def copy_access(dom: isl.Set, target: str, shift: bool) -> tuple[E.Access, isl.Map]:
        idx = copy_index(dom, shift)
        exprs = tuple(_expr_of(isl.PwAff.from_aff(idx.get_aff(d)), dom, its, program.params)
                      for d in range(t.ndim))
        rel = isl.Map.from_multi_aff(idx).intersect_domain(dom).set_tuple_name(
            isl.dim_type.out, target)
        return E.Access(target, exprs), rel

    new_stmts: list[Statement] = []
    grafts = []
    for kind, fp in (("in", fr), ("out", fw)):
        if fp.is_empty():
            continue
        cname = fresh_name(f"{buf}_{kind}", stmt_names, "_")
        stmt_names.add(cname)
        dom = _named_set(fp, cname, its)
        glob, gmap = copy_access(dom, tensor, False)
        loc, lmap = copy_access(dom, buf, True)
        if kind == "in":
            st = _copy_statement(cname, its, dom, loc, glob, lmap, gmap,
                                 f"{buf} <- {tensor} (copy-in)")
        else:
            st = _copy_statement(cname, its, dom, glob, loc, gmap, lmap,
                                 f"{tensor} <- {buf} (copy-out)")
        new_stmts.append(st)
        grafts.append((kind, _graft(dom, depth, prefix_space, xnames)))

    # rewrite the statements below `at`
    prefix_pma = node.get_prefix_schedule_union_pw_multi_aff()
    rewritten = {st.name: rewrite(st, tensor, buf, offset, prefix_pma, program.params)
                 for st in users}

    # graft the copies around the body, then the mark above the extension
    for kind, g in grafts:
        node = node.graft_before(g) if kind == "in" else node.graft_after(g)
    ext = node
    while ext.get_type() != _EXT:
        ext = ext.parent()
    ext = ext.insert_mark(isl.Id(LOCAL_MARK + buf, context=CTX))

    stmts = tuple(rewritten.get(st.name, st) for st in program.statements) + tuple(new_stmts)
    new_program = program.replace(tensors=program.tensors + (local,), statements=stmts)
    return ext.get_schedule(), new_program


def _size(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB" if nbytes % 1024 == 0 else f"{nbytes} bytes"


def rewrite(st: Statement, tensor: str, buf: str, offset: isl.MultiAff,
             prefix_pma: isl.UnionPwMultiAff, params) -> Statement:
    """``st`` accessing ``buf[x - o(P(i))]`` wherever it accessed
    ``tensor[x]``: expressions and access relations."""
    space = st.domain.get_space()
    p_space = isl.Space.map_from_domain_and_range(
        space, offset.get_space().domain())
    p_of_i = prefix_pma.extract_pw_multi_aff(p_space)
    off = isl.PwMultiAff.from_multi_aff(offset).pullback_pw_multi_aff(p_of_i)
    off = off.intersect_domain(st.domain)

    def local_index(acc: E.Access) -> tuple[E.Expr, ...]:
        out = []
        for d, idx in enumerate(acc.indices):
            try:
                pa = aff_from_expr(idx, space)
            except NonAffineError:      # checked by the caller
                raise AssertionError(idx) from None
            out.append(_expr_of(pa.sub(off.get_pw_aff(d)).intersect_domain(st.domain)
                                .coalesce(), st.domain, st.iterators, params))
        return tuple(out)

    def fn(x: E.Expr):
        if isinstance(x, E.Access) and x.tensor == tensor:
            return E.Access(buf, local_index(x), x.span)
        return None

    def rel(m: isl.Map) -> isl.Map:
        if m.get_tuple_name(isl.dim_type.out) != tensor:
            return m
        shifted = m.sum(isl.Map.from_pw_multi_aff(off.neg()))
        return shifted.set_tuple_name(isl.dim_type.out, buf)

    return replace(st, lhs=E.map_expr(st.lhs, fn), rhs=E.map_expr(st.rhs, fn),
                   write=rel(st.write), reads=tuple(rel(r) for r in st.reads))


__all__ = ["promote", "promote_loop", "fixed_box_hull", "MAX_LOCAL_BYTES", "LOCAL_MARK",
           "footprints", "rewrite"]
