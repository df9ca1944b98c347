"""Array contraction: a temporary that lives only inside one iteration of a
loop becomes a buffer declared in that loop's body (a scalar for one
element), so it is never allocated, written to memory, or read back.

A temporary (``ir.Tensor`` with role ``"temp"``: an intermediate of a fusion
group, or an expanded scalar) is *contractible at loop* ``at`` when

* every statement that accesses it runs below ``at`` (all its instances),
  through affine accesses, and is an ordinary statement (no intrinsic call,
  no promotion copy);
* no read of an iteration of ``at`` takes a value from outside that
  iteration: every read has a source (isl's exact dataflow analysis of the
  tensor), and every flow dependence through the tensor has distance 0 on
  the loops down to ``at`` (the prefix schedule maps its source and sink to
  the same point);
* the elements one iteration accesses fit in a box of constant size
  (``isl_map_get_range_simple_fixed_box_hull``), and all local buffers
  together stay under :data:`~polyc.schedule.promotion.MAX_LOCAL_BYTES`.

Nothing is read after the kernel (a temporary is not a result), so the
values need no copy-out, and none flows in, so none needs a copy-in: the
buffer replaces the tensor outright.  This is promotion
(:mod:`polyc.schedule.promotion`) without its copies: a ``promote:<buffer>``
mark at the body of ``at`` declares the buffer, and the accesses become
``buffer[x - o(p)]`` with ``o`` the box's offset in the prefix ``p``.
No statement instance moves, and the contraction removes only the
storage-related (anti and output) dependences between iterations of
``at``, so the checked schedule stays legal; the buffer is private to the
thread running the iteration.

The automatic pipeline contracts each temporary at the deepest loop that
qualifies (:func:`contract_temporaries`), after the loops and marks are
final; when no loop does, a temporary of constant size (a reduction to one
value in front of its readers) becomes a buffer of the kernel's body.
Sources: Darte & Huard, "New results on array contraction", ASAP 2002
(contraction by distance-0 dependences), and the per-iteration storage of
PPCG's and TVM's ``compute_at``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import islpy as isl
import numpy as np

from ..ir import Program, Statement, Tensor
from ..isl_util import CTX, const_pw_aff, fixed_box_hull, param_space
from . import promotion, surgery
from .marks import parse_parallel_mark
from .tree import band_names, fresh_name

log = logging.getLogger(__name__)

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark


#: The automatic pipeline contracts temporaries to scalars only.  Measured
#: (BERT-base layer, the output projection fused with its LayerNorm, gcc 12,
#: AVX-512): contracting the projection's result to a 768-element buffer per
#: row made that kernel 2x slower than the same loops over the array, with
#: identical loop code; scalars (reduction results: a softmax's row maximum,
#: a LayerNorm's mean, RBF's squared distances) measured as fast or faster.
SCALARS_ONLY = True


@dataclass(frozen=True)
class Contraction:
    """A temporary ``tensor`` replaced by the local ``buffer`` of constant
    ``sizes`` (elements; ``()`` never: a scalar is ``(1, ..., 1)``),
    declared in the body of loop ``loop`` at schedule depth ``depth`` (the
    number of loops outside the buffer; depth 0 and ``loop`` empty: the
    kernel's body)."""
    tensor: str
    buffer: str
    loop: str
    depth: int
    sizes: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.sizes) * np.dtype(self.dtype).itemsize

    @property
    def scalar(self) -> bool:
        return math.prod(self.sizes) == 1

    def describe(self) -> str:
        what = "a scalar" if self.scalar else \
            f"a {'x'.join(map(str, self.sizes))} buffer ({self.nbytes} bytes)"
        where = f"per iteration of loop {self.loop}" if self.depth else "of the kernel's body"
        return f"{self.tensor} -> {what} {where}"

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "buffer": self.buffer, "loop": self.loop,
                "depth": self.depth, "sizes": list(self.sizes), "bytes": self.nbytes}


def _users(program: Program, name: str) -> list[Statement] | None:
    """The statements accessing ``name``, or ``None`` when one of them
    forbids contraction (an intrinsic call, a copy, a non-affine access)."""
    users = [st for st in program.statements
             if st.tensor == name or name in st.read_tensors()]
    if any(st.kind not in ("assign", "init", "update") or
           not promotion.affine_accesses(st, name) for st in users):
        return None
    return users


def _bands_above(schedule: isl.Schedule, users: list[Statement],
                 ctx: isl.Set) -> list[isl.ScheduleNode]:
    """The bands on the path from the root to the deepest node whose
    instances include every instance of ``users``, outermost first."""
    def covers(node: isl.ScheduleNode) -> bool:
        # (a filter node's domain is what reaches it, before its filter: so
        # below a sequence every child "covers" the users and the search
        # stops there.  Reading the filter too would contract temporaries of
        # separate nests, but then a loop whose statements run over
        # different ranges of it is generated by isl as a loop and a peeled
        # iteration, each piece with its own buffer, and a value written in
        # the loop's last iteration is read from an uninitialised one in the
        # peeled piece (np.corrcoef gave 0): left as it was until the
        # contraction makes such a loop atomic.)
        dom = node.get_domain()
        return all(st.domain.intersect_params(ctx).is_subset(
            dom.extract_set(st.domain.get_space())) for st in users)

    bands = []
    node = schedule.get_root()
    while True:
        if node.get_type() == _BAND and node.band_n_member() > 0:
            bands.append(node)
        if node.n_children() == 0:
            return bands
        if node.n_children() == 1:
            node = node.child(0)
            continue
        nxt = [node.child(k) for k in range(node.n_children()) if covers(node.child(k))]
        if len(nxt) != 1:
            return bands
        node = nxt[0]


def _collapse_of(band: isl.ScheduleNode) -> int:
    """How many members of ``band`` its parallel mark collapses (0: none)."""
    node = band
    while node.has_parent():
        node = node.parent()
        if node.get_type() != _MARK:
            return 0
        n = parse_parallel_mark(node.mark_get_id().get_name())
        if n:
            return n
    return 0


@dataclass(frozen=True)
class _Uses:
    """The accesses of one temporary: its readers' and writers' access
    relations (``isl.UnionMap``, restricted to their domains) and its exact
    dataflow ``flow`` (write instance -> read instance)."""
    reads: isl.UnionMap
    writes: isl.UnionMap
    flow: isl.UnionMap
    #: the instances of the statements accessing the temporary
    domains: isl.UnionSet | None = None


def _order_of(program: Program, users: list[Statement]) -> isl.Schedule:
    """The program's original order restricted to ``users`` (in program
    order): the same order among them, and a schedule tree of their size, not
    the whole program's (a fusion group of 50 statements built and analysed
    the whole tree once per temporary)."""
    if program.order is not None:
        dom = isl.UnionSet.empty(program.order.get_domain().get_space())
        for st in users:
            dom = dom.union(isl.UnionSet.from_set(st.domain))
        return program.order.intersect_domain(dom)
    return program.replace(statements=tuple(users)).original_schedule()


def uses_of(t: Tensor, users: list[Statement], program: Program) -> _Uses | None:
    """:class:`_Uses` of ``t``, or ``None`` when some read takes a value
    from before the kernel.  The dataflow is isl's
    (``isl_union_access_info_compute_flow``) under the program's original
    order; a legal schedule keeps every read's source, so it holds under
    the final schedule too."""
    pspace = param_space(program.params)
    ctx = program.parameter_domain()
    reads = isl.UnionMap.empty(pspace)
    writes = isl.UnionMap.empty(pspace)
    for st in users:
        for r in st.reads:
            if r.get_tuple_name(isl.dim_type.out) == t.name:
                reads = reads.union(isl.UnionMap.from_map(r.intersect_domain(st.domain)))
        if st.tensor == t.name:
            writes = writes.union(isl.UnionMap.from_map(st.write.intersect_domain(st.domain)))
    info = (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
            .set_schedule(_order_of(program, users)).compute_flow())
    if not info.get_may_no_source().intersect_params(ctx).is_empty():
        return None
    domains = isl.UnionSet.empty(pspace)
    for st in users:
        domains = domains.union(isl.UnionSet.from_set(st.domain))
    return _Uses(reads.intersect_params(ctx), writes.intersect_params(ctx),
                 info.get_may_dependence().intersect_params(ctx),
                 domains.intersect_params(ctx))


def _try(band: isl.ScheduleNode, member: int, t: Tensor, uses: _Uses, program: Program,
         budget: int):
    """The contraction of ``t`` at member ``member`` of ``band``, as
    ``(node below the split band, offset, sizes)``, or ``None``."""
    if member + 1 < band.band_n_member():
        band = surgery.split_band(band, member + 1, program).parent()
        while band.get_type() != _BAND:           # past the inner band's names mark
            band = band.parent()
    return _check(band.child(0), t, uses, program, budget)


def footprint_at(node: isl.ScheduleNode, t: Tensor, uses: _Uses) -> isl.Map | None:
    """The elements of ``t`` each iteration of the prefix schedule at
    ``node`` accesses (``{ [p] -> T[x] }``), or ``None`` when a value
    written in one iteration is read in another, or nothing is accessed."""
    prefix = node.get_prefix_schedule_union_map().intersect_domain(node.get_domain())
    # a value written in one iteration of the prefix and read in another
    cross = uses.flow.apply_domain(prefix).apply_range(prefix)
    if not cross.is_empty():
        m = isl.Map.from_union_map(cross)
        if not m.is_subset(isl.Map.identity(m.get_space())):
            return None
    space = isl.Space.map_from_domain_and_range(
        isl.Space.set_alloc(CTX, 0, node.get_schedule_depth()).align_params(
            uses.reads.get_space()),
        isl.Space.set_alloc(CTX, 0, t.ndim).align_params(uses.reads.get_space())
        .set_tuple_name(isl.dim_type.set, t.name))
    footprint = prefix.reverse().apply_range(uses.reads.union(uses.writes)) \
        .extract_map(space).coalesce()
    return None if footprint.is_empty() else footprint


def _same_ranges(node: isl.ScheduleNode, uses: _Uses) -> bool:
    """Whether every statement accessing the temporary runs over the same
    iterations of the loops down to ``node``.  Where they do not, isl may
    generate one iteration in several pieces (a peeled piece for a 1-D
    statement that a 2-D loop reads: ``a[:, 0] = ...`` then ``a[1:]``),
    each declaring its own buffer, so a value written in one piece was read
    uninitialised in the other (wrong results)."""
    if uses.domains is None or node.get_schedule_depth() == 0:
        return True
    prefix = node.get_prefix_schedule_union_map()
    sets = uses.domains.get_set_list()
    ranges = [prefix.intersect_domain(isl.UnionSet.from_set(sets.get_at(k))).range()
              for k in range(sets.n_set())]
    # (compared where every statement runs: sizes that leave a statement
    # without instances, a reduction over D = 0, generate nothing to split)
    where = ranges[0].params()
    for r in ranges[1:]:
        where = where.intersect(r.params())
    ranges = [r.intersect_params(where) for r in ranges]
    return all(r.is_equal(ranges[0]) for r in ranges[1:])


def _check(node: isl.ScheduleNode, t: Tensor, uses: _Uses, program: Program, budget: int):
    """``(node, offset, sizes)`` when ``t`` contracts to a buffer of the
    body at ``node`` (module docstring), else ``None``."""
    footprint = footprint_at(node, t, uses)
    if footprint is None or not _same_ranges(node, uses):
        return None
    box = fixed_box_hull(footprint)
    if box is None:
        return None
    offset, sizes = box
    if math.prod(sizes) * np.dtype(t.dtype).itemsize > budget:
        return None
    return node, offset, tuple(int(v) for v in sizes)


def contract(schedule: isl.Schedule, program: Program, name: str, budget: int):
    """Contract temporary ``name`` at the deepest loop that qualifies (see
    the module docstring): ``(schedule, program, Contraction)``, or ``None``
    when no loop does."""
    t = program.tensor(name)
    users = _users(program, name)
    if not users:
        return None
    uses = uses_of(t, users, program)
    if uses is None:
        return None
    ctx = program.parameter_domain()
    bands = _bands_above(schedule, users, ctx)
    for band in reversed(bands):
        collapsed = _collapse_of(band)
        for member in reversed(range(band.band_n_member())):
            if member + 1 < collapsed:
                continue              # a buffer between collapsed loops would end the collapse
            found = _try(band, member, t, uses, program, budget)
            if found is None:
                continue
            node, offset, sizes = found
            return _apply(node, offset, sizes, t, users, program,
                          band_names(band, program)[member].split("|")[0])
    # no loop qualifies: the body of the kernel itself (all threads share it),
    # for a temporary of constant extents
    if all(pa.is_cst() for pa in t.shape):
        found = _check(schedule.get_root().child(0), t, uses, program, budget)
        if found is not None:
            node, offset, sizes = found
            return _apply(node, offset, sizes, t, users, program, "")
    return None


def _apply(node: isl.ScheduleNode, offset: isl.MultiAff, sizes: tuple[int, ...], t: Tensor,
           users: list[Statement], program: Program, loop: str):
    taken = {x.name for x in program.tensors}
    buf = fresh_name(f"{t.name}_c", taken, "_")
    pspace = param_space(program.params)
    local = Tensor(name=buf, dtype=t.dtype, shape=tuple(const_pw_aff(pspace, v) for v in sizes),
                   role="local", origin=t.name)
    prefix_pma = node.get_prefix_schedule_union_pw_multi_aff()
    rewritten = {st.name: promotion.rewrite(st, t.name, buf, offset, prefix_pma, program.params)
                 for st in users}
    depth = node.get_schedule_depth()
    node = node.insert_mark(isl.Id(promotion.LOCAL_MARK + buf, context=CTX))
    tensors = tuple(local if x.name == t.name else x for x in program.tensors)
    stmts = tuple(rewritten.get(st.name, st) for st in program.statements)
    info = Contraction(t.name, buf, loop, depth, sizes, t.dtype)
    log.debug("contracted %s", info.describe())
    return node.get_schedule(), program.replace(tensors=tensors, statements=stmts), info


def contract_temporaries(schedule: isl.Schedule, program: Program,
                         budget: int = promotion.MAX_LOCAL_BYTES, *,
                         scalars_only: bool = False):
    """Contract every temporary of ``program`` that some loop of
    ``schedule`` allows, each at the deepest such loop, while the local
    buffers take at most ``budget`` bytes together: ``(schedule, program,
    [Contraction, ...])``.  ``scalars_only``: only to one element (what the
    automatic pipeline asks for, see :data:`SCALARS_ONLY`).  The schedule
    must be final (tiled, marked): the buffers are declared in the bodies of
    its loops."""
    done: list[Contraction] = []
    used = sum(math.prod(lt.constant_shape()) * np.dtype(lt.dtype).itemsize
               for lt in program.locals)
    for t in [x for x in program.tensors if x.role == "temp"]:
        try:
            room = budget - used
            if scalars_only:
                room = min(room, np.dtype(t.dtype).itemsize)
            got = contract(schedule, program, t.name, room)
        except isl.Error as e:           # a footprint isl cannot handle: keep the array
            log.debug("no contraction of %s: %s", t.name, e)
            got = None
        if got is None:
            continue
        schedule, program, info = got
        used += info.nbytes
        done.append(info)
    return schedule, program, done


__all__ = ["Contraction", "contract", "contract_temporaries", "footprint_at", "uses_of"]
