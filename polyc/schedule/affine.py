"""Affine loop transformations of the schedule language: skewing, shifting
and reversal (unrolling, unroll-and-jam and the isolation of full tiles are
in :mod:`polyc.schedule.unroll`).

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
from . import legality, surgery
from .registry import transform
from .tree import (
    Loop,
    band_names,
    statement_filter,
    target_statements,
)

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark



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


def _update_flags(s, band: isl.ScheduleNode) -> isl.ScheduleNode:
    """Recompute ``permutable`` and ``coincident`` of ``band`` exactly (see
    the module docstring)."""
    inner = legality.unordered_within(band, s.validity())
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
    moved = dom.intersect(statement_filter(s.program, mine))
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
