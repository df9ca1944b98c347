"""Code-shape transformations of the schedule language: unrolling,
unroll-and-jam and the isolation of full tiles.

``unroll`` and ``isolate_full_tiles`` are *structural*: isl AST build
options on a band (``{ unroll[k] }``, ``{ isolate[...] }``), stored in the
schedule tree itself so that they survive isl's text form and recipes
(``band_member_set_ast_loop_type`` would not).  ``unroll_and_jam`` is
*checked*: it moves the strip-mined loop innermost.  See
:mod:`polyc.schedule.affine` for the stencil and matmul used in the
examples.
"""

from __future__ import annotations

import islpy as isl

from ..errors import ScheduleError
from ..isl_util import CTX, sets_of
from . import gpu_marks, legality, surgery
from .affine import _band, _drop_isolate, _update_flags
from .registry import transform
from .tree import (
    Loop,
    band_names,
    fresh_name,
    is_names_mark,
    loop_names_near,
    path_of,
    set_band_names,
    statements_of,
    walk,
)

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark

#: The most statement-instance copies one full ``unroll`` may produce per
#: loop (beyond this, give a factor).
MAX_UNROLL = 1024


# ----------------------------------------------------------------- unroll

def _add_options(band: isl.ScheduleNode, text: str | isl.UnionSet) -> isl.ScheduleNode:
    """``band`` with the AST build options ``text`` added.  When the band has
    an ``isolate`` option, each ``unroll``/``separate``/``atomic`` option is
    also given for the isolated part (``[isolate[] -> unroll[k]]``): isl
    applies the plain form to the rest only."""
    opt = text if isinstance(text, isl.UnionSet) else isl.UnionSet.read_from_str(CTX, text)
    old = band.band_get_ast_build_options()
    if not old.is_empty():
        opt = old.union(opt)
    parts = sets_of(opt)
    if any(st.get_tuple_name() == "isolate" for st in parts):
        for st in parts:
            if st.get_tuple_name() in ("unroll", "separate", "atomic"):
                unit = isl.Set.read_from_str(CTX, "{ isolate[] }").align_params(
                    st.get_space())
                wrapped = isl.Map.from_domain_and_range(unit, st).wrap()
                opt = opt.union(isl.UnionSet.from_set(wrapped))
    # in the form isl's text form reads back (so that from_text(to_text())
    # prints the same tree): isl drops redundant constraints when reading
    opt = isl.UnionSet.read_from_str(CTX, opt.coalesce().to_str())
    return band.band_set_ast_build_options(opt)


def fully_unrolled(band: isl.ScheduleNode) -> bool:
    """Whether isl unrolls every member of ``band`` completely (``{ unroll[k]
    }`` on each, also for an isolated part): no loop of it is left in the
    code."""
    return all(member_unrolled(band, k) for k in range(band.band_n_member()))


def member_unrolled(band: isl.ScheduleNode, k: int) -> bool:
    """Whether isl unrolls member ``k`` of ``band`` completely."""
    opts = band.band_get_ast_build_options()
    if opts.is_empty():
        return False
    isolated = any(st.get_tuple_name() == "isolate" for st in sets_of(opts))
    want = [f"{{ unroll[{k}] }}"] + ([f"{{ [isolate[] -> unroll[{k}]] }}"] if isolated else [])
    return all(isl.UnionSet.read_from_str(CTX, w).is_subset(opts) for w in want)


def loop_below(node: isl.ScheduleNode) -> bool:
    """Whether a band strictly below ``node`` leaves a loop in the code (a
    band :func:`fully_unrolled` leaves none, so the loop above is innermost)."""
    found = [False]

    def visit(n):
        if n.get_type() == isl.schedule_node_type.band and not fully_unrolled(n):
            found[0] = True
        return not found[0]
    for i in range(node.n_children()):
        node.child(i).foreach_descendant_top_down(visit)
    return found[0]


def trip_count_bound(band: isl.ScheduleNode, member: int) -> int | None:
    """The most iterations member ``member`` of ``band`` runs for one value of
    the outer loops, over all parameter values; ``None`` when that is not
    bounded by a constant."""
    outer, this = legality.member_maps(band, member)
    rel = outer.range_product(this).range().unwrap()    # [outer] -> [this]
    if rel.is_empty():
        return 0
    same = rel.reverse().apply_range(rel)               # this -> this', same outer
    most = 0
    for d in sets_of(same.deltas()):
        width = d.dim_max_val(0)
        if not width.is_int():
            return None
        most = max(most, int(width.to_python()) + 1)
    return most


def _strip_mine(s, lp: Loop, factor: int) -> isl.ScheduleNode:
    """Strip-mine ``lp`` by ``factor`` (a one-loop tile, as
    :func:`.transforms.tile`): the tile loop keeps the name, the point loop
    is ``<name>_unrolled``.  Returns the point band (one member)."""
    band = surgery.isolate(_band(s, lp), lp.member, 1, s.program)
    name = band_names(band, s.program)[0]
    mv = isl.MultiVal.zero(band.band_get_space()).set_val(0, isl.Val.int_from_si(CTX, factor))
    with surgery.tile_options():
        band = band.band_tile(mv)
    inner = fresh_name(name.split("|")[0] + "_unrolled",
                       loop_names_near(s.isl, s.program, lp.statements))
    band = set_band_names(band, [name])
    return set_band_names(band.child(0), [inner])


def _check_ast(s, sched: isl.Schedule, what: str, strip=None) -> None:
    """Build the AST once, so that an option isl cannot honour is refused
    here rather than at compile time.

    ``strip``: ``(band, member, tile, factor)`` when the unrolled member is
    the point loop of a strip-mine by ``factor`` whose tile loop (outside
    it) has the partial schedule ``tile``.  isl unrolls a loop when it
    finds a lower bound ``l`` of it, over the loops outside, with the loop
    in ``[l, l + n)`` for a finite ``n`` (``find_unroll_lower_bound`` in
    isl's AST generator); when :func:`_strip_bounded` proves ``tile <=
    loop < tile + factor`` on every instance and the band has no other
    build option, that bound exists and isl unrolls it, so the AST (0.3 to
    1 s for a band of several statements over PolyBench's sizes, once per
    unrolled candidate of the tuner) is not built."""
    if strip is not None and _strip_bounded(*strip):
        return
    try:
        isl.AstBuild.from_context(s.program.parameter_domain()).node_from_schedule(sched)
    except isl.Error as e:
        raise ScheduleError(f"isl cannot generate code for {what}: {e}") from None


def _strip_bounded(band: isl.ScheduleNode, member: int, tile: isl.UnionPwAff,
                   factor: int) -> bool:
    """Whether member ``member`` of ``band`` runs within ``[tile, tile +
    factor)`` on every instance that reaches ``band`` (``tile``: the tile
    loop's partial schedule), and ``band``'s only build option is the
    unroll of that member."""
    want = isl.UnionSet.from_set(isl.Set.universe(
        isl.Space.set_alloc(CTX, 0, 1).set_tuple_name(isl.dim_type.set, "unroll"))
        .fix_val(isl.dim_type.set, 0, isl.Val.int_from_si(CTX, member)))
    if not band.band_get_ast_build_options().is_equal(want):
        return False
    point = band.band_get_partial_schedule().get_union_pw_aff(member)
    offset = isl.UnionMap.from_union_pw_aff(point.sub(tile)).intersect_domain(
        band.get_domain())
    window = (isl.Set.universe(isl.Space.set_alloc(CTX, 0, 1))
              .lower_bound_val(isl.dim_type.set, 0, isl.Val.int_from_si(CTX, 0))
              .upper_bound_val(isl.dim_type.set, 0, isl.Val.int_from_si(CTX, factor - 1)))
    return all(r.align_params(window.get_space()).is_subset(
        window.align_params(r.get_space())) for r in sets_of(offset.range()))


def _tile_schedule(point: isl.ScheduleNode) -> isl.UnionPwAff:
    """The partial schedule of the tile loop of a strip-mine: the band
    above ``point`` (through ``loops:`` marks)."""
    node = point.parent()
    while node.get_type() != _BAND:
        node = node.parent()
    return node.band_get_partial_schedule().get_union_pw_aff(0)


def _unroll_member(s, band: isl.ScheduleNode, member: int, name: str) -> isl.ScheduleNode:
    bound = trip_count_bound(band, member)
    if bound is None:
        params = _bound_params(band, member)
        on = f" (it depends on {', '.join(params)})" if params else ""
        raise ScheduleError(
            f"loop {name} has no constant trip count{on}, so it cannot be unrolled "
            f"completely; unroll it by a factor instead, e.g. unroll(loop, 4)")
    if bound > MAX_UNROLL:
        raise ScheduleError(f"loop {name} runs up to {bound} iterations; full unrolling "
                            f"is limited to {MAX_UNROLL}; give a factor")
    return _add_options(band, f"{{ unroll[{member}] }}")


def _bound_params(band: isl.ScheduleNode, member: int) -> list[str]:
    """The parameters the trip count of member ``member`` depends on."""
    outer, this = legality.member_maps(band, member)
    rel = outer.range_product(this).range().unwrap()
    names: list[str] = []
    for d in sets_of(rel.reverse().apply_range(rel).deltas()):
        for _, aff in d.dim_max(0).get_pieces():
            for i in range(aff.dim(isl.dim_type.param)):
                nm = aff.get_dim_name(isl.dim_type.param, i)
                if aff.involves_dims(isl.dim_type.param, i, 1) and nm not in names:
                    names.append(nm)
    return names


@transform("unroll", kind="structural")
def unroll(s, loop, factor=None):
    """Unroll ``loop``: one copy of its body per iteration.

    ``factor=None``: unroll completely; the loop must have a constant trip
    count (at most :data:`MAX_UNROLL` iterations for any value of the outer
    loops and of the sizes), else :class:`ScheduleError`.  ``factor=f``:
    strip-mine the loop by ``f`` as :func:`.transforms.split` does -- the
    outer loop keeps the name and steps by ``f``, the inner loop is named
    ``<loop>_unrolled`` -- and unroll the inner loop (a last partial strip
    gets guarded copies).  Implemented as isl's AST build option
    ``{ unroll[k] }`` on the band (member ``k``), which isl's text form and
    recipes keep.  Structural.  With a factor, a following
    ``isolate_full_tiles(loop)`` gives the full strips unguarded copies and a
    remainder after them.

    Before / after ``unroll(("C","k"), 2)`` on the matmul::

        for (k = 0; k < K; k++)                 for (k = 0; k < K; k += 2)
          S0(m, n, k);                            S0(m, n, k);
                                                  if (K >= k + 2)
                                                    S0(m, n, k + 1);

    and ``unroll(("B","j"))`` on ``B(i, j) = A(i, j) * 2.0`` with ``A`` of
    size ``N x 4``::

        for (i = 0; i < N; i++)                 for (i = 0; i < N; i++)
          for (j = 0; j <= 3; j++)                S0(i, 0); S0(i, 1);
            S0(i, j);                             S0(i, 2); S0(i, 3);
    """
    lp = s.resolve(loop)
    if factor is None:
        band = _unroll_member(s, _band(s, lp), lp.member, lp.name)
    else:
        factor = surgery.positive_int(factor, "unroll factor")
        if factor > MAX_UNROLL:
            raise ScheduleError(f"unroll factor {factor} exceeds {MAX_UNROLL}")
        band = _strip_mine(s, lp, factor)
        tile = _tile_schedule(band)
        band = _add_options(band, "{ unroll[0] }")
        _check_ast(s, band.get_schedule(), "unroll", (band, 0, tile, factor))
        return band.get_schedule()
    sched = band.get_schedule()
    _check_ast(s, sched, "unroll")
    return sched


# ----------------------------------------------------------- unroll and jam

def _innermost_chain(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """The innermost band of the perfectly nested chain starting at ``band``
    (each band the only child of the previous, through ``loops:`` marks)."""
    node = band
    while node.n_children() == 1:
        child = node.child(0)
        while is_names_mark(child):
            child = child.child(0)
        if child.get_type() != _BAND:
            break
        node = child
    return node


@transform("unroll_and_jam")
def unroll_and_jam(s, loop, factor):
    """Unroll ``loop`` by ``factor`` and jam the copies: strip-mine it (the
    outer loop keeps the name and steps by ``factor``, the inner one is
    ``<loop>_unrolled``), move the inner loop innermost in its perfectly
    nested band chain (the bands merged into one) and unroll it there, so
    that each innermost iteration runs ``factor`` consecutive iterations of
    ``loop``.  Checked (moving the loop inwards reorders instances: on the
    stencil, ``unroll_and_jam(("S1","t"), 2)`` is refused for the flow
    dependence on ``A``; after a skew of ``i`` by ``t`` it is legal).

    Before / after ``unroll_and_jam(("C","m"), 2)`` on the matmul scheduled
    by isl (``m, n, k`` one band above the statements)::

        for (m = 0; m < M; m++)                 for (m = 0; m < M; m += 2)
          for (n = 0; n < N; n++)                 for (n = 0; n < N; n++)
            for (k = 0; k < K; k++)                 for (k = 0; k < K; k++)
              if (k == 0)                             if (k == 0)
                S0_init(m, n);                          S0_init(m, n);
              S0(m, n, k);                            S0(m, n, k);
                                                      if (M >= m + 2)
                                                        if (k == 0)
                                                          S0_init(m + 1, n);
                                                        S0(m + 1, n, k);
    """
    lp = s.resolve(loop)
    factor = surgery.positive_int(factor, "unroll_and_jam factor")
    if factor > MAX_UNROLL:
        raise ScheduleError(f"unroll_and_jam factor {factor} exceeds {MAX_UNROLL}")
    point = _strip_mine(s, lp, factor)
    tile = _tile_schedule(point)
    inner = _innermost_chain(point)
    sched = point.get_schedule()
    if path_of(inner) != path_of(point):
        last = Loop(path_of(inner), inner.band_n_member() - 1, "", statements_of(inner))
        first = Loop(path_of(point), 0, "", statements_of(point))
        point, _ = surgery.merge(sched, s.program, [first, last])
    n = point.band_n_member()
    names = band_names(point, s.program)
    if n > 1:
        mupa = point.band_get_partial_schedule()
        order = list(range(1, n)) + [0]
        new = mupa
        for k, j in enumerate(order):
            new = new.set_union_pw_aff(k, mupa.get_union_pw_aff(j))
        point = surgery.rebuild_band(point, new, [names[j] for j in order],
                                     point.band_get_permutable())
        point = _update_flags(s, point)
    point = _add_options(point, f"{{ unroll[{n - 1}] }}")
    sched = point.get_schedule()
    _check_ast(s, sched, "unroll_and_jam", (point, n - 1, tile, factor))
    return sched


# ------------------------------------------------------- isolate full tiles

def _point_band(tile_band: isl.ScheduleNode) -> isl.ScheduleNode | None:
    """The band right below ``tile_band`` (through marks only)."""
    if tile_band.n_children() != 1:
        return None
    node = tile_band.child(0)
    while node.get_type() == _MARK and node.n_children() == 1:
        node = node.child(0)
    return node if node.get_type() == _BAND else None


def tile_sizes(tile_band: isl.ScheduleNode) -> tuple[list[int], list[int]] | None:
    """For a band of tile loops made by ``tile``/``split`` (member ``j`` is
    ``s_j * floor(p/s_j)`` of a member ``p`` of the band below): the sizes
    ``s_j`` and the point-band member matching each tile member; ``None``
    when ``tile_band`` is not such a band."""
    point = _point_band(tile_band)
    if point is None:
        return None
    dom = tile_band.get_domain()
    tiles = tile_band.band_get_partial_schedule()
    pts = point.band_get_partial_schedule()
    sizes, match = [], []
    for j in range(tile_band.band_n_member()):
        upa = tiles.get_union_pw_aff(j).intersect_domain(dom)
        found = None
        for size in _candidate_sizes(upa):
            sv = isl.Val.int_from_si(CTX, size)
            for p in range(point.band_n_member()):
                if p in match:
                    continue
                pu = pts.get_union_pw_aff(p).intersect_domain(dom)
                if _plain_equal(pu.scale_down_val(sv).floor().scale_val(sv), upa):
                    found = (size, p)
                    break
            if found:
                break
        if found is None:
            return None
        sizes.append(found[0])
        match.append(found[1])
    return sizes, match


def _candidate_sizes(upa: isl.UnionPwAff) -> list[int]:
    """Possible tile sizes of a tile loop: the denominators of the integer
    divisions in its pieces (1 when there are none: a size-1 tile)."""
    out: list[int] = []
    for pa in _pw_affs(upa):
        for _, aff in pa.get_pieces():
            for k in range(aff.dim(isl.dim_type.div)):
                v = int(aff.get_div(k).get_denominator_val().to_python())
                if v >= 1 and v not in out:
                    out.append(v)
    return out or [1]


def _pw_affs(upa: isl.UnionPwAff) -> list[isl.PwAff]:
    out: list[isl.PwAff] = []
    upa.foreach_pw_aff(out.append)
    return out


def _plain_equal(a: isl.UnionPwAff, b: isl.UnionPwAff) -> bool:
    """Equality of two functions as relations (robust to different piece
    decompositions)."""
    return isl.UnionMap.from_union_pw_aff(a).is_equal(isl.UnionMap.from_union_pw_aff(b))


def full_tiles(tile_band: isl.ScheduleNode, sizes: list[int], match: list[int]) -> isl.Set:
    """The full tiles of ``tile_band``: the values ``[outer] -> [tile loops]``
    (as one set ``[outer, tiles]``) all of whose ``prod(sizes)`` points hold
    statement instances."""
    point = _point_band(tile_band)
    d = tile_band.get_schedule_depth()
    n = tile_band.band_n_member()
    dom = point.get_domain()
    prefix = point.get_prefix_schedule_union_map().intersect_domain(dom)  # [outer, tiles]
    pts = point.band_get_partial_schedule()
    cols = None
    for p in match:
        m = isl.UnionMap.from_union_pw_aff(pts.get_union_pw_aff(p)).intersect_domain(dom)
        cols = m if cols is None else cols.flat_range_product(m)
    rng = prefix.flat_range_product(cols).range()              # [outer, tiles, points]
    r = _one_set(rng)
    tiles = r.project_out(isl.dim_type.set, d + n, n)          # [outer, tiles]
    # every point of each tile: tile_j <= x_j < tile_j + size_j
    box = tiles.add_dims(isl.dim_type.set, n)
    for j, size in enumerate(sizes):
        c = isl.Constraint.inequality_alloc(isl.LocalSpace.from_space(box.get_space()))
        c = c.set_coefficient_val(isl.dim_type.set, d + n + j, isl.Val.one(CTX))
        c = c.set_coefficient_val(isl.dim_type.set, d + j, isl.Val.negone(CTX))
        box = box.add_constraint(c)                            # x - t >= 0
        c = isl.Constraint.inequality_alloc(isl.LocalSpace.from_space(box.get_space()))
        c = c.set_coefficient_val(isl.dim_type.set, d + n + j, isl.Val.negone(CTX))
        c = c.set_coefficient_val(isl.dim_type.set, d + j, isl.Val.one(CTX))
        c = c.set_constant_val(isl.Val.int_from_si(CTX, size - 1))
        box = box.add_constraint(c)                            # t + size - 1 - x >= 0
    missing = box.subtract(r).project_out(isl.dim_type.set, d + n, n)
    return tiles.subtract(missing).coalesce()


def _one_set(u: isl.UnionSet) -> isl.Set:
    parts = sets_of(u)
    out = parts[0]
    for p in parts[1:]:
        out = out.union(p)
    return out


@transform("isolate_full_tiles", kind="structural")
def isolate_full_tiles(s, loop_or_band):
    """Generate full tiles apart from partial ones (PPCG's and Polly's
    full/partial tile separation).  ``loop_or_band``: a tile loop (any member
    of a band of tile loops made by :func:`.transforms.tile` or ``split``,
    directly above its point loops).  The full tiles -- tiles all of whose
    points hold statement instances, computed with isl -- become isl's
    ``isolate`` AST build option on the tile band, so the point loops of a
    full tile have constant trip counts (no ``min``/``max`` in their bounds)
    and the partial tiles at the borders get code of their own.  A tile
    band whose loops were later skewed or reordered is not a tile band any
    more.  Structural.

    Before / after ``isolate_full_tiles(("C","m_tile"))`` after
    ``tile([("C","m")], [4])`` on the matmul::

        for (m_tile = 0; m_tile < M; m_tile += 4)      for (m_tile = 0; m_tile < M - 3; m_tile += 4)
          for (m = m_tile;                               for (m = m_tile; m <= m_tile + 3; m++)
               m <= min(M - 1, m_tile + 3); m++)           for (n = 0; n < N; n++) {...}
            for (n = 0; n < N; n++) {...}              for (m = -(M % 4) + M; m < M; m++)
                                                         for (n = 0; n < N; n++) {...}
    """
    lp = s.resolve(loop_or_band)
    band = _band(s, lp)
    info = tile_sizes(band)
    if info is None:
        above = band.parent() if band.has_parent() else None
        while above is not None and above.get_type() == _MARK:
            above = above.parent() if above.has_parent() else None
        hint = ""
        if above is not None and above.get_type() == _BAND and tile_sizes(above):
            hint = (f"; {lp.name} is a point loop, pass a tile loop such as "
                    f"{band_names(above, s.program)[0]}")
        elif any(gpu_marks.of(x) is not None for x in walk(s.isl.get_root())):
            hint = ("; the GPU mapping (map_to_blocks, map_to_threads) split the tile "
                    "bands: isolate full tiles before mapping")
        raise ScheduleError(
            f"the band of loop {lp.name} "
            f"({', '.join(band_names(band, s.program))}) is not a tile band (tile loops "
            f"made by tile() or split() directly above their point loops){hint}")
    sizes, match = info
    full = full_tiles(band, sizes, match)
    d = band.get_schedule_depth()
    n = band.band_n_member()
    rel = isl.Map.from_domain(full).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, d, n)
    iso = rel.wrap().set_tuple_name("isolate")
    band = _add_options(_drop_isolate(band), isl.UnionSet.from_set(iso))
    sched = band.get_schedule()
    _check_ast(s, sched, "isolate_full_tiles")
    return sched
