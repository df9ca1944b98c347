"""Loop transformations of the schedule language: tiling, strip-mining,
reordering, and the parallel / vectorize / named marks.

Each function takes a :class:`polyc.schedule.language.Schedule` and returns
the new ``isl.Schedule``; :meth:`Schedule.apply` records the step and checks
the result against the dependences.  The other transformations live in
:mod:`polyc.schedule.fusion` (fuse, distribute), :mod:`polyc.schedule.affine`
(skew, shift, reverse), :mod:`polyc.schedule.unroll` (unroll,
unroll_and_jam, isolate_full_tiles) and
:mod:`polyc.schedule.promotion` (promote); each module registers its own
(:mod:`polyc.schedule.registry`), and :mod:`polyc.schedule.language`
imports them all.

The loop nests in the docstrings use ``C(m,n) +=! A(m,k) * B(k,n)``
(statements ``S0_init`` and ``S0``) in the source order::

    for m: for n: { S0_init(m, n); for k: S0(m, n, k) }
"""

from __future__ import annotations

import re

import islpy as isl

from ..errors import IllegalScheduleError, ScheduleError
from ..isl_util import CTX, is_isl_word, source_spelling
from . import legality, surgery
from .marks import PARALLEL, SIMD, SIMD_REDUCTION, current_name, has_band_below
from .registry import transform
from .tile import _is_pure_reduction_band
from .tile import wavefront as _wavefront
from .tree import (
    band_names,
    fresh_name,
    is_names_mark,
    loop_names_near,
    name_all_bands,
    set_band_names,
    walk,
)
from .unroll import loop_below, member_unrolled

_BAND = isl.schedule_node_type.band


def _identifier(text: str) -> str:
    """``text`` as an identifier: a derived loop name such as ``i+j`` (a
    skewed member) gives ``i_j``."""
    out = re.sub(r"\W+", "_", text).strip("_") or "c"
    return "c" + out if out[0].isdigit() else out


def _names(names, n: int, default, what: str, taken=(), sizes=()) -> list[str]:
    """``names`` checked (``n`` distinct identifiers, none the name of a loop
    in ``taken`` or of a size in ``sizes``, none a word isl reads as a
    keyword), or ``default`` when ``None``."""
    if names is None:
        return [_identifier(d) for d in default]
    if not isinstance(names, (list, tuple)):
        raise ScheduleError(f"{what}: names must be a list of {n} identifier(s), got {names!r}")
    names = list(names)
    if len(names) != n or not all(isinstance(x, str) and x.isidentifier() for x in names):
        raise ScheduleError(f"{what}: names must be {n} identifier(s), got {names!r}")
    if len(set(names)) != n:
        raise ScheduleError(f"{what}: names must be distinct, got {names!r}")
    for x in names:
        why = ("already names a loop of these statements (its loops: "
               f"{', '.join(sorted(taken))})" if x in taken else
               "is a size of the program" if x in sizes else
               "is a word isl reads as a keyword" if is_isl_word(x) else "")
        if why:
            raise ScheduleError(f"{what}: the name {x!r} {why}; name the new loop(s) "
                                f"otherwise (default: {', '.join(map(_identifier, default))})")
    return names


@transform("tile")
def tile(s, loops, sizes, names=None):
    """Tile consecutive loops of one band (``isl_schedule_node_band_tile``).

    ``loops``: loops of one band, or of perfectly nested bands (merged
    first), outermost first; ``sizes``: one positive tile size per loop.  The
    tile loops are named ``<loop>_tile`` (or ``names``) and step through the
    original values (``m_tile = 32*floor(m/32)``); the point loops keep the
    loops' names and values.  Checked.

    Before / after ``tile([("C","m"), ("C","n")], [32, 32])``::

        for m: for n: {...}             for m_tile (step 32): for n_tile (step 32):
                                          for m in [m_tile, m_tile+32): for n ...: {...}
    """
    lps = surgery.resolve_loops(s, loops, "tile")
    if isinstance(sizes, (str, bytes, dict)) or not hasattr(sizes, "__iter__"):
        sizes = [sizes] * len(lps)      # one size for every loop (checked below)
    sizes = list(sizes)
    sizes = [surgery.positive_int(v, "tile size") for v in sizes]
    if len(sizes) != len(lps):
        raise ScheduleError(f"tile: {len(lps)} loop(s) but {len(sizes)} size(s)")
    band, idx = surgery.merge(s.isl, s.program, lps)
    if idx != list(range(idx[0], idx[0] + len(idx))):
        raise ScheduleError(f"tile: loops {', '.join(lp.name for lp in lps)} must be "
                            f"consecutive and outermost first; reorder them first")
    old = band_names(band, s.program)[idx[0]:idx[0] + len(idx)]
    taken = loop_names_near(s.isl, s.program, lps[0].statements)
    tnames = _names(names, len(idx), [fresh_name(f"{source_spelling(n.split('|')[0])}_tile",
                                                 taken)
                                      for n in old], "tile", taken, s.program.params)
    band = surgery.isolate(band, idx[0], len(idx), s.program)
    mv = isl.MultiVal.zero(band.band_get_space())
    for i, v in enumerate(sizes):
        mv = mv.set_val(i, isl.Val.int_from_si(CTX, v))
    with surgery.tile_options():
        band = band.band_tile(mv)
    band = set_band_names(band, tnames)
    point = set_band_names(band.child(0), old)
    return point.get_schedule()


@transform("split")
def split(s, loop, factor, names=None):
    """Strip-mine one loop by ``factor``: an outer loop ``<loop>_outer``
    stepping by ``factor`` and the inner loop keeping the name (a one-loop
    :func:`tile`).  Checked (always legal on its own).

    Before / after ``split(("C","k"), 4)``::

        for k: S0(m, n, k)              for k_outer (step 4): for k in [k_outer, k_outer+4): S0
    """
    lp = s.resolve(loop)
    factor = surgery.positive_int(factor, "split factor")
    nm = source_spelling(lp.name.split("|")[0])
    taken = loop_names_near(s.isl, s.program, lp.statements)
    outer = _names(names, 1, [fresh_name(f"{nm}_outer", taken)], "split", taken,
                   s.program.params)
    return tile(s, [lp], [factor], names=outer)


@transform("reorder")
def reorder(s, loops):
    """Permute loops of one band, or of perfectly nested bands (merged into
    one first): the listed loops take the positions they occupy, in the
    given order; other loops stay where they are.  Checked.

    Before / after ``reorder([("C","k"), ("C","m")])`` on ``for m: for n: for k``
    (one band after a fusion of the init)::

        for m: for n: for k: S0         for k: for n: for m: S0
    """
    lps = surgery.resolve_loops(s, loops, "reorder")
    if len(lps) < 2:
        raise ScheduleError("reorder: give at least two loops")
    band, idx = surgery.merge(s.isl, s.program, lps)
    n = band.band_n_member()
    slots = sorted(idx)
    order = list(range(n))
    for slot, j in zip(slots, idx):
        order[slot] = j
    mupa = band.band_get_partial_schedule()
    new = mupa
    for k, j in enumerate(order):
        new = new.set_union_pw_aff(k, mupa.get_union_pw_aff(j))
    names = band_names(band, s.program)
    # in a permutable band a member's coincidence does not depend on the
    # order of the members (every dependence live at the band is
    # non-negative in each), so the flags move with their members
    perm = band.band_get_permutable()
    coinc = [band.band_member_get_coincident(j) for j in order] if perm else None
    band = surgery.rebuild_band(band, new, [names[j] for j in order], perm, coinc)
    return band.get_schedule()


@transform("interchange")
def interchange(s, a, b):
    """Swap two loops of one band or of perfectly nested bands.  Checked.

    Before / after ``interchange(("C","m"), ("C","n"))``::

        for m: for n: S                 for n: for m: S
    """
    la, lb = s.resolve(a), s.resolve(b)
    # reorder puts the listed loops on the positions they occupy, in the given
    # order: list the inner one first (in a band chain, the outer band's path
    # is the shorter one), whatever the order of the arguments
    outer, inner = sorted([la, lb], key=lambda lp: (len(lp.path), lp.member))
    return reorder(s, [inner, outer])


def _own_band(s, lp):
    """Split the band of ``lp`` so ``lp`` is its first member; returns the band."""
    band = surgery.band_node(s.isl, lp)
    return surgery.split_band(band, lp.member, s.program)


def _already(top: isl.ScheduleNode, name: str) -> bool:
    node = top.parent() if top.has_parent() else None
    while node is not None and node.get_type() == isl.schedule_node_type.mark:
        if node.mark_get_id().get_name() == name:
            return True
        node = node.parent() if node.has_parent() else None
    return False


@transform("parallel")
def parallel(s, loop):
    """Run ``loop`` as ``#pragma omp parallel for`` (a mark above it).
    Checked: the loop must carry no dependence at its depth (its iterations
    must be independent once the outer loops are fixed); otherwise
    :class:`IllegalScheduleError` names the carried dependence, e.g. the
    reduction over ``k`` of a matmul.

    Before / after ``parallel(("C","m"))``::

        for m: for n: S                 #pragma omp parallel for
                                        for m: for n: S
    """
    lp = s.resolve(loop)
    band = _own_band(s, lp)
    top = surgery.top_of_band(band)
    if _already(top, PARALLEL):
        return top.get_schedule()
    return top.insert_mark(isl.Id(PARALLEL, context=CTX)).get_schedule()


@transform("vectorize")
def vectorize(s, loop):
    """Vectorize an innermost loop (``#pragma omp simd``).  Checked: the loop
    must be innermost and carry no dependence; a loop that carries only the
    reduction of one update (``k`` of a matmul) is vectorized as a reduction
    (register accumulator, ``omp simd reduction``) when reassociation is
    allowed (:meth:`Schedule.with_reassociation`).

    Before / after ``vectorize(("C","n"))`` on ``for m: for k: for n``::

        for m: for k: for n: S0         for m: for k: #pragma omp simd
                                                      for n: S0
    """
    lp = s.resolve(loop)
    band = surgery.band_node(s.isl, lp)
    if any(not member_unrolled(band, k) for k in range(lp.member + 1, band.band_n_member())) \
            or loop_below(band):
        raise ScheduleError(f"vectorize: loop {lp.name} is not innermost; make it the "
                            f"innermost loop first (reorder / interchange)")
    band = _own_band(s, lp)
    carried = legality.carried_dependences(band, 0, s.deps, exclude=s.deps.reduction)
    reduction_only = not carried and not legality.carried_by_member(
        band, 0, s.deps.reduction).is_empty()
    name = SIMD
    if reduction_only:
        if not s.reassociate:
            c = legality.carried_by_member(band, 0, s.deps.reduction)
            m = legality.maps_of(c)[0]
            raise IllegalScheduleError(
                f"loop {lp.name} carries the reduction dependence on tensor "
                f"{legality.dependence_tensor(s.program, m, 'flow')} "
                f"{legality.describe_carried(c, s.program)}; vectorizing it reorders the "
                f"reduction: allow that with schedule.with_reassociation() first",
                witness=legality.witness("reduction", "vectorized", c, s.program, "flow"))
        if not _is_pure_reduction_band(band, s.program):
            raise IllegalScheduleError(
                f"loop {lp.name} carries a reduction but does not scan only the reduction "
                f"of one update statement whose accumulator nothing else reads, so it "
                f"cannot be vectorized as a reduction")
        name = SIMD_REDUCTION
    top = surgery.top_of_band(band)
    if _already(top, name):
        return top.get_schedule()
    return top.insert_mark(isl.Id(name, context=CTX)).get_schedule()


@transform("sink")
def sink(s, loop):
    """Move the innermost loop of a band down to the leaves of the subtree
    below it (``isl_schedule_node_band_sink``): every nest below gets it as
    its innermost loop, where it can be vectorized.  The loop must be the
    last member of its band (reorder first).  Checked.

    Before / after ``sink(("O","w"))`` on a convolution whose reduction loops
    ``c, kh, kw`` are a band below ``n, h, w``::

        for n: for h: for w:            for n: for h:
          for c: for kh: for kw: S          for c: for kh: for kw: for w: S
    """
    lp = s.resolve(loop)
    band = surgery.band_node(s.isl, lp)
    if lp.member != band.band_n_member() - 1:
        raise ScheduleError(f"sink: loop {lp.name} is not the innermost loop of its band; "
                            f"reorder it innermost first")
    if not has_band_below(band):
        raise ScheduleError(f"sink: no loop lies below {lp.name}; nothing to sink it under")
    band = _own_band(s, lp)
    for node in walk(band):
        if node.get_type() == _BAND and not node.band_get_ast_build_options().is_empty():
            # (an unrolled loop below would no longer have a constant trip
            # count, and isl would fail at code generation)
            raise ScheduleError(
                f"sink: a loop at or below {lp.name} carries AST options "
                f"({node.band_get_ast_build_options()}) from unroll / isolate_full_tiles, "
                f"which sinking {lp.name} would invalidate; apply unroll and "
                f"isolate_full_tiles after the loops are in their final order")
    if band.has_parent() and is_names_mark(band.parent()):
        band = band.parent().delete()
    return name_all_bands(band.band_sink().get_schedule(), s.program)


@transform("wavefront")
def wavefront(s, loop):
    """Run the iterations of a permutable band whose outer loop carries
    dependences as a wavefront: ``loop`` (the band's first member) becomes
    ``loop + next`` (the next member), a loop of its own, and ``next`` below
    it carries no dependence between iterations of one wavefront (parallel).
    Used on the tile loops of a time-tiled stencil.  Checked.  Source:
    Pluto's tile wavefront (Bondhugula et al., PLDI 2008, section 5.2).

    Before / after ``wavefront(("S1","t_tile"))``::

        for t_tile: for i_tile: ...     for t_tile (= t_tile + i_tile):
                                          for i_tile: ...       # parallel
    """
    lp = s.resolve(loop)
    band = surgery.band_node(s.isl, lp)
    if lp.member != 0 or band.band_n_member() < 2:
        raise ScheduleError(f"wavefront: loop {lp.name} must be the first of a band of at "
                            f"least two loops")
    if not band.band_get_permutable():
        # the flag is only a claim: bands merged by tile (a source-order
        # chain) or rebuilt without flags may be permutable all the same
        _refuse_wavefront(s, band, lp.name)
        band = band.band_set_permutable(1)
    names = band_names(band, s.program)
    if band.has_parent() and is_names_mark(band.parent()):
        band = band.parent().delete()
    node = _wavefront(band)
    if node.band_n_member() == len(names):     # unchanged (first member coincident)
        return set_band_names(node, names).get_schedule()
    node = set_band_names(node, names[:1])
    return set_band_names(node.child(0), names[1:]).get_schedule()


def _refuse_wavefront(s, band: isl.ScheduleNode, name: str) -> None:
    """Raises :class:`IllegalScheduleError` when ``band`` is not permutable
    (exactly: a dependence the outer loops leave unordered has a negative
    distance along one of its loops), naming that dependence: the reason
    its tiles cannot run as wavefronts.  Returns when there is none."""
    inner = legality.unordered_within(band, s.validity())
    mupa = band.band_get_partial_schedule()
    for j in range(band.band_n_member()):
        m = isl.UnionMap.from_union_pw_aff(mupa.get_union_pw_aff(j))
        backwards = inner.intersect(m.lex_gt_union_map(m))
        for kind, deps in s.deps.by_kind().items():
            bad = backwards.intersect(deps)
            if not bad.is_empty():
                member = band_names(band, s.program)[j]
                tensor = legality.dependence_tensor(s.program, legality.maps_of(bad)[0], kind)
                raise IllegalScheduleError(
                    f"wavefront: the band of {name} is not permutable, so its tiles cannot "
                    f"run as wavefronts: loop {member} runs backwards along the {kind} "
                    f"dependence on tensor {tensor} "
                    f"{legality.describe_carried(bad, s.program)}; skew it first",
                    witness=legality.witness(kind, "wavefront", bad, s.program))


_MARK_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@transform("mark", kind="structural")
def mark(s, loop, name):
    """Put a mark node named ``name`` above ``loop`` (a hook for later passes
    such as tensorization; the code generator ignores unknown marks).
    Structural: no instance moves.  ``parallel`` / ``vector`` marks
    are checked like :func:`parallel` / :func:`vectorize`.

    Before / after ``mark(("C","k"), "tensorize_candidate")``::

        for k: S0                       // mark: tensorize_candidate
                                        for k: S0
    """
    if not isinstance(name, str) or not _MARK_NAME.match(name) or name.startswith("loops"):
        raise ScheduleError(f"mark: the name must be an identifier not starting with "
                            f"'loops', got {name!r}")
    name = current_name(name)               # omp_parallel, omp_simd: the old names
    lp = s.resolve(loop)
    band = _own_band(s, lp)
    top = surgery.top_of_band(band)
    return top.insert_mark(isl.Id(name, context=CTX)).get_schedule()
