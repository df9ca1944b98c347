"""Affine loop transformations of the schedule language: skewing, shifting,
reversal, unrolling, unroll-and-jam and the isolation of full tiles.

Each function takes a :class:`polyc.schedule.language.Schedule` and returns
the new ``isl.Schedule``; :meth:`Schedule.apply` records the step and checks
the result against the dependences, as for every transformation.

*Checked* transformations may change the execution order (``shift``,
``reverse``, ``unroll_and_jam``; ``skew`` never does on its own but decides
which later ``tile``/``parallel`` are legal); *structural* ones only change
the shape of the generated code (``unroll``, ``isolate_full_tiles``): they
are isl AST build options on a band (``{ unroll[k] }``, ``{ isolate[...] }``),
stored in the schedule tree itself so that they survive isl's text form and
recipes (``band_member_set_ast_loop_type`` would not).

``skew``, ``shift`` and ``reverse`` rewrite one member of a band in place
(the band keeps its position, loop names and ``unroll`` options; an
``isolate`` option, whose set is in the old coordinates, is dropped) and then recompute the band's
``permutable`` flag and ``coincident`` members from the exact dependences:
``permutable`` when no dependence inside the band that the outer loops leave
unordered goes backwards along any member (the band may then be tiled),
``coincident`` on the members that carry no dependence (they may run in
parallel).

The examples use the time stencil

.. code-block:: none

    def stencil(float(N) X, float(T) W) -> (A) {
        A(t, i) = X(i) where t in 0:T, i in 0:N                    # S0
        A(t, i) = (A(t-1, i-1) + A(t-1, i) + A(t-1, i+1)) * 0.3333 # S1
            where t in 1:T, i in 1:N-1
    }

and the matmul ``C(m,n) +=! A(m,k) * B(k,n)`` of :mod:`.transforms`.
"""

from __future__ import annotations

import islpy as isl

from ..errors import ScheduleError
from ..isl_util import CTX, maps_of, sets_of
from . import surgery
from .language import transform
from .tree import (
    Loop,
    band_names,
    is_names_mark,
    path_of,
    set_band_names,
    statements_of,
    target_statements,
)

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark

#: The most statement-instance copies one full ``unroll`` may produce per
#: loop (beyond this, give a factor).
MAX_UNROLL = 1024


# ----------------------------------------------------------------- helpers

def _int(value, what: str, *, nonzero: bool = False) -> int:
    """``value`` as an int (numpy integers accepted, bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np
            if not isinstance(value, np.integer):
                raise TypeError
            value = int(value)
        except TypeError:
            raise ScheduleError(f"{what} must be an integer, got {value!r} "
                                f"({type(value).__name__})") from None
    if nonzero and value == 0:
        raise ScheduleError(f"{what} must be a non-zero integer, got 0")
    return int(value)


def _band(s, lp: Loop) -> isl.ScheduleNode:
    return surgery.band_node(s.isl, lp)


def _member(band: isl.ScheduleNode, j: int) -> isl.UnionPwAff:
    return band.band_get_partial_schedule().get_union_pw_aff(j)


def _with_member(s, band: isl.ScheduleNode, j: int, new: isl.UnionPwAff) -> isl.ScheduleNode:
    """``band`` with member ``j`` replaced by ``new`` (every member restricted
    to the instances that reach the band: isl's own schedules define them on
    the universe, where ``band_shift`` could not add a function of an outer
    loop), same position, names and AST options; flags recomputed."""
    dom = band.get_domain()
    mupa = band.band_get_partial_schedule().intersect_domain(dom)
    mupa = mupa.set_union_pw_aff(j, new.intersect_domain(dom))
    opts = band.band_get_ast_build_options()
    names = band_names(band, s.program)
    band = surgery.rebuild_band(band, mupa, names, band.band_get_permutable())
    if not opts.is_empty():
        band = band.band_set_ast_build_options(opts)
    return _update_flags(s, band)


def _outer_and_member(band: isl.ScheduleNode, member: int) -> tuple[isl.UnionMap, isl.UnionMap]:
    """``(outer, this)``: the schedule of the enclosing bands plus members
    ``0 .. member-1`` of ``band``, and that of member ``member``, as union
    maps on the band's domain."""
    domain = band.get_domain()
    outer = band.get_prefix_schedule_union_map().intersect_domain(domain)
    mupa = band.band_get_partial_schedule()
    n = band.band_n_member()
    if member > 0:
        before = isl.UnionMap.from_multi_union_pw_aff(
            mupa.drop_dims(isl.dim_type.set, member, n - member)).intersect_domain(domain)
        outer = outer.flat_range_product(before)
    this = isl.UnionMap.from_multi_union_pw_aff(
        mupa.drop_dims(isl.dim_type.set, member + 1, n - member - 1)
        .drop_dims(isl.dim_type.set, 0, member)).intersect_domain(domain)
    return outer, this


def _deps_in(band: isl.ScheduleNode, deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences between instances the band schedules that the
    enclosing bands leave unordered (equal outer schedule)."""
    domain = band.get_domain()
    prefix = band.get_prefix_schedule_union_map().intersect_domain(domain)
    within = deps.intersect_domain(domain).intersect_range(domain)
    return within.intersect(prefix.apply_range(prefix.reverse()))


def _update_flags(s, band: isl.ScheduleNode) -> isl.ScheduleNode:
    """Recompute ``permutable`` and ``coincident`` of ``band`` exactly (see
    the module docstring)."""
    from . import legality
    inner = _deps_in(band, s.validity())
    mupa = band.band_get_partial_schedule()
    permutable = True
    for j in range(band.band_n_member()):
        m = isl.UnionMap.from_union_pw_aff(mupa.get_union_pw_aff(j))
        dist = inner.apply_domain(m).apply_range(m)
        if not all(_nonneg(mp) for mp in maps_of(dist)):
            permutable = False
    band = band.band_set_permutable(int(permutable))
    every = s.deps.all()
    for j in range(band.band_n_member()):
        free = legality.carried_by_member(band, j, every).is_empty()
        band = band.band_member_set_coincident(j, int(free))
    return band


def _is_isolate(st: isl.Set) -> bool:
    """An ``isolate[...]`` option, or an option of the isolated part
    (``[isolate[] -> unroll[k]]``)."""
    if st.get_tuple_name() == "isolate":
        return True
    return st.is_wrapping() and st.unwrap().get_tuple_name(isl.dim_type.in_) == "isolate"


def _drop_isolate(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """``band`` without its ``isolate`` option (and the options of the
    isolated part): the set of full tiles is in the band's old coordinates
    (apply :func:`isolate_full_tiles` again)."""
    opts = band.band_get_ast_build_options()
    parts = sets_of(opts)
    keep = [st for st in parts if not _is_isolate(st)]
    if len(keep) == len(parts):
        return band
    out = isl.UnionSet.empty(opts.get_space())
    for st in keep:
        out = out.union(isl.UnionSet.from_set(st))
    return band.band_set_ast_build_options(out)


def _reshapeable(band: isl.ScheduleNode, lp: Loop, what: str) -> isl.ScheduleNode:
    """``band`` without its ``isolate`` option, ready to be rebuilt;
    :class:`ScheduleError` when a node below depends on the
    band's values (isl calls the subtree *anchored*: an ``isolate`` option
    or an extension node), which the change would invalidate."""
    band = _drop_isolate(band)
    if band.is_subtree_anchored():
        raise ScheduleError(
            f"loop {lp.name} encloses a node that depends on its values (an "
            f"isolate_full_tiles option or a promotion's extension); apply {what} "
            f"before isolate_full_tiles / promote")
    return band


def _nonneg(m: isl.Map) -> bool:
    """Whether every pair ``[a] -> [b]`` of ``m`` has ``b >= a``."""
    d = m.deltas()
    bad = isl.Set.universe(d.get_space()).upper_bound_val(
        isl.dim_type.set, 0, isl.Val.int_from_si(CTX, -1))
    return d.intersect(bad).is_empty()


def _stmt_filter(program, names) -> isl.UnionSet:
    out = None
    for st in program.statements:
        if st.name in names:
            part = isl.UnionSet.from_set(isl.Set.universe(st.domain.get_space()))
            out = part if out is None else out.union(part)
    return out


# ----------------------------------------------------------------- skew

@transform("skew")
def skew(s, loop, by, factor=1):
    """Skew ``loop`` by an outer loop: ``loop' = loop + factor * by``.

    ``by`` is an earlier member of the same band or a loop of an enclosing
    band (its partial schedule, restricted to the instances of ``loop``'s
    band); ``factor`` a non-zero integer (negative skews the other way).  The
    loop keeps its name, the band its position and AST options (an
    ``isolate_full_tiles`` option is dropped); the band's ``permutable`` and
    ``coincident`` flags are recomputed.  Checked (a skew by an outer loop
    never reorders two instances on its own; it changes which later
    ``tile``/``parallel`` are legal).

    The classic use makes a time stencil tileable: in ``S1`` of the stencil
    (``A(t, i)`` from ``A(t-1, i-1 .. i+1)``) the dependence distance
    ``(1, -1)`` goes backwards along ``i``, so tiling ``(t, i)`` is refused;
    after the skew the distances are ``(1, 0), (1, 1), (1, 2)`` and the band
    is permutable.  Before / after ``skew(("S1","i"), ("S1","t"))``::

        for (t = 1; t < T; t++)                 for (t = 1; t < T; t++)
          for (i = 1; i < N - 1; i++)             for (i = t + 1; i < N + t - 1; i++)
            S1(t, i);                               S1(t, -t + i);

    For a wavefront, then ``tile([("S1","t"), ("S1","i")], [4, 4])``,
    ``skew(("S1","i_tile"), ("S1","t_tile"))`` (``i_tile`` is now the
    wavefront number ``t_tile + i_tile``),
    ``interchange(("S1","t_tile"), ("S1","i_tile"))`` and
    ``parallel(("S1","t_tile"))``: the tiles of one wavefront run in
    parallel::

        for (i_tile = 0; i_tile < N + 2 * T - 3; i_tile += 4)
          #pragma omp parallel for
          for (t_tile = ...; t_tile <= min(T - 1, (i_tile / 2) + 1); t_tile += 4)
            for (t = ...) for (i = ...) S1(t, -t + i);
    """
    lp, bl = s.resolve(loop), s.resolve(by)
    factor = _int(factor, "skew factor", nonzero=True)
    if (lp.path, lp.member) == (bl.path, bl.member):
        raise ScheduleError(f"cannot skew loop {lp.name} by itself; `by` must be an "
                            f"outer loop of {lp.name}")
    outer = (bl.path == lp.path and bl.member < lp.member) or (
        len(bl.path) < len(lp.path) and lp.path[:len(bl.path)] == bl.path)
    if not outer:
        raise ScheduleError(f"loop {bl.name} ({', '.join(bl.statements)}) is not an "
                            f"outer loop of {lp.name} ({', '.join(lp.statements)}); skew "
                            f"by an earlier loop of the same band or a loop enclosing it")
    band = _reshapeable(_band(s, lp), lp, "skew")
    by_band = surgery.band_node(s.isl, bl)
    dom = band.get_domain()
    by_fn = _member(by_band, bl.member).intersect_domain(dom)
    new = _member(band, lp.member).intersect_domain(dom).add(
        by_fn.scale_val(isl.Val.int_from_si(CTX, factor)))
    return _with_member(s, band, lp.member, new).get_schedule()


# ----------------------------------------------------------------- shift

@transform("shift")
def shift(s, statement, loop, amount):
    """Shift ``loop`` for some statements only: ``loop += amount`` for the
    instances of ``statement`` (a statement name, or a written tensor: all
    its statements that ``loop`` runs); the band's other statements keep
    their schedule.  ``amount``: an integer, negative allowed.  Checked.
    Useful after a fusion, to align a consumer with its producer (or to
    undo an alignment a dependence forbids).

    Before / after ``shift("S0", ("C","m"), 1)`` on the matmul (the update
    of row ``m - 1`` runs with the initialisation of row ``m``)::

        for (m = 0; m < M; m++)                 for (m = 0; m <= min(M, M + K - 1); m++)
          for (n = 0; n < N; n++)                 for (n = 0; n < N; n++)
            S0_init(m, n);                          if (M >= m + 1)
            for (k = 0; k < K; k++)                   S0_init(m, n);
              S0(m, n, k);                          if (m >= 1)
                                                      for (k = 0; k < K; k++)
                                                        S0(m - 1, n, k);

    ``shift("S0_init", ("C","m"), 1)`` is refused: the initialisation of row
    ``m`` would run after its updates (the flow dependence on ``C`` from
    ``S0_init`` to ``S0``).
    """
    lp = s.resolve(loop)
    amount = _int(amount, "shift amount")
    stmts = set(target_statements(s.program, str(statement)))
    mine = stmts & set(lp.statements)
    if not mine:
        raise ScheduleError(f"loop {lp.name} does not run {statement} (it runs "
                            f"{', '.join(lp.statements)})")
    band = _reshapeable(_band(s, lp), lp, "shift")
    dom = band.get_domain()
    moved = dom.intersect(_stmt_filter(s.program, mine))
    delta = isl.UnionPwAff.val_on_domain(moved, isl.Val.int_from_si(CTX, amount)).union_add(
        isl.UnionPwAff.val_on_domain(dom.subtract(moved), isl.Val.zero(CTX)))
    new = _member(band, lp.member).intersect_domain(dom).add(delta)
    return _with_member(s, band, lp.member, new).get_schedule()


# ----------------------------------------------------------------- reverse

@transform("reverse")
def reverse(s, loop):
    """Run ``loop`` backwards: ``loop := -loop`` (the loop keeps its name).
    Checked: refused on a loop that carries a dependence, e.g. ``t`` of the
    stencil, or ``k`` of a matmul (the reduction on ``C``) unless
    reassociation is allowed (:meth:`Schedule.with_reassociation`).

    Before / after ``reverse(("S1","i"))`` on the stencil (``i`` carries no
    dependence: ``t`` carries them all)::

        for (t = 1; t < T; t++)                 for (t = 1; t < T; t++)
          for (i = 1; i < N - 1; i++)             for (i = -N + 2; i < 0; i++)
            S1(t, i);                               S1(t, -i);
    """
    lp = s.resolve(loop)
    band = _reshapeable(_band(s, lp), lp, "reverse")
    new = _member(band, lp.member).scale_val(isl.Val.int_from_si(CTX, -1))
    return _with_member(s, band, lp.member, new).get_schedule()


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


def trip_count_bound(band: isl.ScheduleNode, member: int) -> int | None:
    """The most iterations member ``member`` of ``band`` runs for one value of
    the outer loops, over all parameter values; ``None`` when that is not
    bounded by a constant."""
    outer, this = _outer_and_member(band, member)
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


def _fresh(s, lp: Loop, base: str) -> str:
    """``base``, or ``base2``, ``base3``... if a loop of ``lp``'s statements
    already has that name."""
    taken = {nm for x in s.loops() if set(x.statements) & set(lp.statements)
             for nm in x.name.split("|")}
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def _strip_mine(s, lp: Loop, factor: int) -> isl.ScheduleNode:
    """Strip-mine ``lp`` by ``factor`` (a one-loop tile, as
    :func:`.transforms.tile`): the tile loop keeps the name, the point loop
    is ``<name>_unrolled``.  Returns the point band (one member)."""
    band = surgery.isolate(_band(s, lp), lp.member, 1, s.program)
    name = band_names(band, s.program)[0]
    mv = isl.MultiVal.zero(band.band_get_space()).set_val(0, isl.Val.int_from_si(CTX, factor))
    with surgery.tile_options():
        band = band.band_tile(mv)
    inner = _fresh(s, lp, name.split("|")[0] + "_unrolled")
    band = set_band_names(band, [name])
    return set_band_names(band.child(0), [inner])


def _check_ast(s, sched: isl.Schedule, what: str) -> None:
    """Build the AST once, so that an option isl cannot honour is refused
    here rather than at compile time."""
    try:
        isl.AstBuild.from_context(s.program.parameter_domain()).node_from_schedule(sched)
    except isl.Error as e:
        raise ScheduleError(f"isl cannot generate code for {what}: {e}") from None


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
    outer, this = _outer_and_member(band, member)
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
        band = _add_options(band, "{ unroll[0] }")
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
    _check_ast(s, sched, "unroll_and_jam")
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
