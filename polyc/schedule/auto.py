"""The automatic schedule as a recipe: polyc's band optimisation applied as
schedule-language transformations.

:func:`optimize` takes the tree isl's scheduler computed (or the source
order, or a row-fused tree) and decides, band by band, what polyc has always
done with it; every decision is a registered transformation applied through
:meth:`polyc.schedule.language.Schedule.apply`, so the automatic schedule is
a :class:`~polyc.schedule.language.Schedule` whose recipe (the starting tree
and the steps) replays byte for byte, and whose knobs (the ``tile`` sizes,
the ``reorder`` orders, the marks) the tuner perturbs
(:func:`polyc.tune.autorecipe.neighbours`).  The decisions, in order:

1. **sink** (top-down, first pass): when a band with bands below owns the
   coincident stride-1 member of its hot statements (``w`` of a convolution
   whose reduction ``kh, kw`` isl put in a band below) and no band below
   offers one, that member is made the band's last (``reorder``) and moved
   to the leaves (``sink``), where it becomes the vector loop;
1b. **split recurrences** (first pass): a band of step 2a' holding other
   statements besides its recurrences is distributed at its coincident
   member (:meth:`_Auto.split_recurrences`);
2. per band, bottom-up:

   a'. **jam** (first pass): the stride-1 member carries a loop program's
      recurrence (``tmp[i] = tmp[i] + A[i, j] * x[j]``, not reassociated)
      and beats every coincident member: ``unroll_and_jam`` of the
      coincident member by :data:`JAM_FACTOR` (:meth:`_Auto.jam`);
   a. a band that scans only the reduction of one update whose accumulator
      nothing else reads gets ``mark(loop, "vector_reduction")`` on its last
      member (a register accumulator; TC reductions may be reassociated);
   b. **reorder**: in a permutable band (any order is legal, every
      dependence is non-negative in every member), the coincident member
      that makes the most accesses of the hot statements stride-1 goes
      innermost, and in the first pass with it the coincident members that
      walk the dimensions before its in every access, in memory order
      (:func:`polyc.schedule.locality.contiguous_run`: ``h, w`` of a
      tensordot's ``O(n, c1, c3, h, w)``); when that puts a reduction member
      outside the run, the band is **distributed** at the run so that the
      initialisation and the update each own a nest over consecutive
      elements (``distribute``; the C backend prints each as one loop);
   c. otherwise, when the reduction members give the stride-1 accesses
      (``C(m,n) += A(m,k) * B(n,k)``), **distribute the reduction**
      (``reorder`` the common members first, then ``distribute`` at the first
      reduction member into the initialisation, the reduction, the epilogue;
      :func:`polyc.schedule.tile.reduction_groups`), optimise the new bands
      and tile the common band;
   d. **tile** a permutable band of 2 to :data:`~polyc.schedule.tile.MAX_TILED_MEMBERS`
      members when tiling can shorten a reuse distance
      (:func:`polyc.schedule.tile._carries_reuse`) or ``Config.tile_sizes``
      asks for it, sizes from :func:`polyc.schedule.tile.tile_sizes`; with
      ``Config.time_tiling``, run the tiles as a ``wavefront``;
   e. **vectorize** the innermost member when it is the reordered stride-1
      member and no band lies below;
3. **parallel** (``Config.parallel``, top-down): ``mark(loop, "parallel")``
   (``parallel_collapse2`` for two coincident members in a row) on the
   outermost coincident member of every root-to-leaf path.

The steps are applied unchecked (:meth:`Schedule.apply_unchecked`) and the
finished schedule is checked once against the exact dependences, as the
isl-node version of this pass did: a check per step would double the time
of a cold compile.  If the result is illegal (the sinking or the
distribution can make it so), or one of their steps does not apply, the
optimisation is redone without them, checked the same way; if that result
were illegal too, it is redone once more checking every step like a
user's, and a step refused then is left out and logged.  A replayed recipe
checks every step.
"""

from __future__ import annotations

import logging

import islpy as isl

from ..config import Config
from ..errors import IllegalScheduleError, ScheduleError
from . import legality
from . import tile as T
from .language import Schedule
from .locality import (
    accumulates_along,
    band_statements,
    contiguous_run,
    hot_statements,
    member_scores,
    reduction_members,
)
from .marks import (
    MAX_COLLAPSE,
    SIMD_REDUCTION,
    coincident_members,
    has_band_below,
    parallel_mark_name,
)
from .tree import find_loop, is_names_mark, loop_at, node_at, path_of

log = logging.getLogger(__name__)

#: recurrences advanced together by step 2a' (``jam``): enough independent
#: chains to cover the latency of a floating-point add (4 cycles) on two
#: pipes, and few enough to stay in registers
JAM_FACTOR = 8

_BAND = isl.schedule_node_type.band


class _Restart(Exception):
    """An aggressive step (sink, distribution) turned out illegal."""


def optimize(start: Schedule, config: Config) -> Schedule:
    """The automatic schedule of ``start`` (a :class:`Schedule` of the tree to
    optimise): ``start`` with the steps of the module docstring applied, so
    ``result.to_recipe()`` is the automatic schedule as a recipe.  Raises
    nothing for a refused step: a step the dependences refuse is left out
    (logged at debug level)."""
    # each run checks its finished schedule once, not every step
    try:
        s = _Auto(start, config, aggressive=True, checked=False).run()
        _check(s)
        return s
    except (_Restart, IllegalScheduleError) as e:
        log.debug("automatic schedule of %s: %s; redone without sinking and "
                  "reduction distribution", start.program.name, e)
    try:
        s = _Auto(start, config, aggressive=False, checked=False).run()
        _check(s)
        return s
    except IllegalScheduleError as e:
        # a step broke a dependence: leave out the steps that do, checking each
        log.debug("automatic schedule of %s: %s; redone checking every step",
                  start.program.name, e)
        return _Auto(start, config, aggressive=False, checked=True).run()


def _check(s: Schedule) -> None:
    """The order of ``s`` against every dependence (its marks are legal by
    construction: they sit on coincident members, which carry none)."""
    legality.check(s.isl, s.deps, s.program, what="the automatic schedule")


def loop_spec(s: Schedule, path: tuple, member: int):
    """How a recipe names member ``member`` of the band at ``path``: the pair
    ``(statement, loop name)`` when that resolves to this very loop, else
    ``{"path": [...], "member": k}``."""
    lp = loop_at(s.isl, s.program, path, member)
    hit = None
    if lp.statements:               # (a band may run no instance at all)
        target, name = lp.statements[0], lp.name.split("|")[0]
        try:
            hit = find_loop(s.isl, s.program, target, name)
        except ScheduleError:       # ambiguous
            pass
    if hit is not None and (hit.path, hit.member) == (lp.path, lp.member):
        return (target, name)
    return {"path": list(path), "member": member}


class _Auto:
    def __init__(self, s: Schedule, config: Config, aggressive: bool, checked: bool):
        self.s, self.config, self.aggressive, self.checked = s, config, aggressive, checked
        self.program = s.program

    def run(self) -> Schedule:
        if self.aggressive:
            self.sink(())
            self.split_recurrences()
        self.walk(())
        if self.config.parallel:
            self.mark_parallel(())
        return self.s

    # ---------------------------------------------------------------- steps
    def node(self, path) -> isl.ScheduleNode:
        return node_at(self.s.isl, tuple(path))

    def loop(self, path, member: int):
        return loop_spec(self.s, tuple(path), member)

    def step(self, op: str, *args, aggressive: bool = False) -> bool:
        """Apply ``op``; ``False`` when it is refused.  A refused step of the
        aggressive run restarts the optimisation without sinking and
        distribution (``aggressive=True`` marks the steps that are theirs)."""
        try:
            if self.checked:
                self.s = self.s.apply(op, *args)
            else:
                self.s = self.s.apply_unchecked(op, *args)
            return True
        except IllegalScheduleError as e:
            if self.aggressive:
                raise _Restart(str(e)) from None
            log.debug("automatic schedule of %s: step %s refused: %s",
                      self.program.name, op, e)
        except ScheduleError as e:
            if aggressive and self.aggressive:
                raise _Restart(str(e)) from None
            log.debug("automatic schedule of %s: step %s not applicable: %s",
                      self.program.name, op, e)
        return False

    def band_path(self, path) -> tuple:
        """The path of the band at or just below ``path`` (past a ``loops:``
        mark)."""
        node = self.node(path)
        while is_names_mark(node):
            node = node.child(0)
        return path_of(node)

    def first_band(self, path):
        """The path of the first band at or below ``path`` (pre-order)."""
        node = self.node(path)
        while node.get_type() != _BAND:
            if node.n_children() != 1:
                return None
            node = node.child(0)
        return path_of(node)

    def to_last(self, path, best: int) -> bool:
        """``reorder`` member ``best`` of the band at ``path`` innermost."""
        n = self.node(path).band_n_member()
        if best == n - 1:
            return True
        order = [j for j in range(best, n) if j != best] + [best]
        return self.step("reorder", [self.loop(path, j) for j in order])

    def to_inner(self, path, run: list[int]) -> bool:
        """``reorder`` the members ``run`` innermost, in that order, the
        others outside them in their order (step 2b's contiguous run)."""
        n = self.node(path).band_n_member()
        order = [j for j in range(n) if j not in run] + run
        if order == list(range(n)):
            return True
        return self.step("reorder", [self.loop(path, j) for j in order], aggressive=True)

    def distribute_run(self, path, k: int) -> bool:
        """Step 2b, a contiguous run below a reduction member: ``distribute``
        at the run's first member, so that the initialisation (guarded at
        the reduction's first value) and the update each get the run's loops
        to themselves (a nest of one statement, which the C backend prints
        as one loop over consecutive elements); optimise the new bands and
        tile the common one.  ``False`` (nothing applied) when every member
        outside the run is coincident or the band holds one statement."""
        node = self.node(path)
        n = node.band_n_member()
        coinc = coincident_members(node)
        if all(coinc[:n - k]) or len(band_statements(node, self.program)) < 2:
            return False
        top = path_of(node.parent()) if is_names_mark(node.parent()) else path
        if not self.step("distribute", self.loop(path, n - k), aggressive=True):
            return False
        self.optimise_distributed(top, n - k)
        return True

    def optimise_distributed(self, top, n_common: int) -> None:
        """After a ``distribute`` of the band at ``top`` that kept
        ``n_common`` members shared: optimise the new bands below the common
        band and tile it (or, with none shared, everything at ``top``)."""
        if n_common:
            common = self.first_band(top)
            below = self.node(common)
            for i in range(below.n_children()):
                self.walk(common + (i,))
            self.tile(common, simd_last=False)
        else:
            self.walk(top)

    # ----------------------------------------------------------- 1. sinking
    def sink(self, path) -> None:
        node = self.node(path)
        if node.get_type() == _BAND and has_band_below(node) and node.band_get_permutable():
            n = node.band_n_member()
            coinc = coincident_members(node)
            scores = member_scores(node, self.program)
            cands = [j for j in range(n) if coinc[j] and (scores[j] or 0) > 0]
            if cands and n >= 2 and not T._below_offers_stride(node, self.program):
                best = max(cands, key=lambda j: (scores[j], j))
                if self.to_last(path, best):
                    self.step("sink", self.loop(path, n - 1), aggressive=True)
                path = self.band_path(path)
        node = self.node(path)
        for i in range(node.n_children()):
            self.sink(tuple(path) + (i,))

    # -------------------------------------------------------- 2. the bands
    def walk(self, path) -> None:
        for i in range(self.node(path).n_children()):
            self.walk(tuple(path) + (i,))
        if self.node(path).get_type() == _BAND:
            self.band(tuple(path))

    def band(self, path) -> None:
        program, config = self.program, self.config
        node = self.node(path)
        n = node.band_n_member()
        innermost = not has_band_below(node)
        coinc = coincident_members(node)
        scores = member_scores(node, program)
        if innermost and T._is_pure_reduction_band(node, program):
            if config.simd:
                self.step("mark", self.loop(path, n - 1), SIMD_REDUCTION)
            return
        if innermost and self.aggressive and self.jam(path, coinc, scores):
            return
        best = None
        cands = [j for j in range(n) if coinc[j] and scores[j] is not None and scores[j] > 0]
        if cands and (node.band_get_permutable() or n == 1):
            best = max(cands, key=lambda j: (scores[j], j))
            run = (contiguous_run(node, program, best, coinc)
                   if self.aggressive and n > 1 else [best])
            if len(run) > 1:
                if not self.to_inner(path, run):
                    best = None
                elif self.distribute_run(path, len(run)):
                    return
                else:
                    best = n - 1
            else:
                best = n - 1 if self.to_last(path, best) else None
        elif self.aggressive and innermost:
            red = reduction_members(node, program)
            if red and any((scores[j] or 0) > 0 for j in red):
                if self.distribute(path, red):
                    return
        self.tile(path, simd_last=(best == n - 1 and innermost))

    def distribute(self, path, red: list[int]) -> bool:
        """Step 2c; ``False`` (nothing applied) when the band has another shape."""
        node = self.node(path)
        found = T.reduction_groups(node, self.program, red)
        if found is None:
            return False
        order, groups = found
        n_common = node.band_n_member() - len(red)
        top = path_of(node.parent()) if is_names_mark(node.parent()) else path
        if len(groups) == 1:
            # only the reduction itself: nothing to distribute, the reduction
            # loops become a band of their own with a register accumulator
            inner = T.reorder_members(node, order).band_split(n_common).child(0)
            if not (self.config.simd and T._is_pure_reduction_band(inner, self.program)):
                return False
            if order != list(range(len(order))):
                self.step("reorder", [self.loop(path, j) for j in order], aggressive=True)
            self.step("mark", self.loop(path, n_common), SIMD_REDUCTION, aggressive=True)
            self.tile(path, simd_last=False)
            return True
        if order != list(range(len(order))):
            self.step("reorder", [self.loop(path, j) for j in order], aggressive=True)
        self.step("distribute", self.loop(path, n_common), *groups, aggressive=True)
        self.optimise_distributed(top, n_common)
        return True

    def jam_members(self, node: isl.ScheduleNode, coinc: list[bool] | None = None,
                    scores: list[int | None] | None = None) -> tuple[int, int] | None:
        """``(c, r)`` for an innermost permutable band of step 2a' (:meth:`jam`):
        ``c`` the coincident member step 2b would make the vector loop (the
        best stride score), ``r`` a non-coincident member with a better one
        along which each hot statement accumulates into an element that
        ``c`` moves (a recurrence, not reassociated: the statements are not
        TC reductions); ``None`` when the band has another shape.
        ``coinc``, ``scores``: the band's coincidence flags and
        :func:`member_scores`, when the caller has them."""
        n = node.band_n_member()
        if n < 2 or not node.band_get_permutable() or has_band_below(node):
            return None
        coinc = coinc if coinc is not None else coincident_members(node)
        scores = scores if scores is not None else member_scores(node, self.program)
        par = [j for j in range(n) if coinc[j] and scores[j] is not None]
        # a band of one reduction takes step 2a's register accumulator or 2c;
        # several (gesummv's tmp[i] and y[i] along j) are jammed as recurrences
        if not par or (reduction_members(node, self.program)
                       and len(hot_statements(band_statements(node, self.program))) < 2):
            return None
        c = max(par, key=lambda j: (scores[j], j))
        seq = [j for j in range(n) if not coinc[j] and scores[j] is not None
               and scores[j] > max(scores[c], 0)]
        if not seq:
            return None
        r = max(seq, key=lambda j: (scores[j], j))
        return (c, r) if accumulates_along(node, self.program, r, c) else None

    def to_jam_order(self, path, c: int, r: int) -> bool:
        n = self.node(path).band_n_member()
        order = [j for j in range(n) if j not in (c, r)] + [c, r]
        if order == list(range(n)):
            return True
        return self.step("reorder", [self.loop(path, j) for j in order], aggressive=True)

    def split_recurrences(self) -> None:
        """Step 1b (first pass, after sinking): a band of step 2a' that holds
        other statements besides its recurrences (the initialisation
        ``tmp[i] = 0``, a final ``y[i] = alpha * tmp[i] + beta * y[i]``) is
        distributed at ``c`` into the statements before the recurrences,
        the recurrences, and those after them (in program order; checked
        here, and left as it is when refused), so that the recurrences'
        band is perfect when :meth:`jam` reaches it.  The bands are found
        first and split from the last to the first (a split renumbers only
        the paths after it)."""
        found = []

        def visit(node):
            if node.get_type() == _BAND and self.jam_members(node) is not None \
                    and len(band_statements(node, self.program)) > 1:
                found.append(path_of(node))
            return True
        self.s.isl.get_root().foreach_descendant_top_down(visit)
        for path in reversed(found):
            node = self.node(path)
            c, r = self.jam_members(node)
            stmts = band_statements(node, self.program)
            hot = {s.name for s in hot_statements(stmts)}
            at = [k for k, s in enumerate(stmts) if s.name in hot]
            if at != list(range(at[0], at[-1] + 1)):
                continue                 # another statement between the recurrences
            names = [s.name for s in stmts]
            groups = [g for g in (names[:at[0]], names[at[0]:at[-1] + 1], names[at[-1] + 1:])
                      if g]
            if len(groups) < 2 or not self.to_jam_order(path, c, r):
                continue
            n = node.band_n_member()
            # checked here: a refused split leaves the band as it is (the
            # aggressive pass is not restarted for it)
            try:
                self.s = self.s.apply("distribute", self.loop(path, n - 2), *groups)
            except ScheduleError as e:   # IllegalScheduleError included
                log.debug("automatic schedule of %s: recurrences not split: %s",
                          self.program.name, e)

    def jam(self, path, coinc: list[bool], scores: list[int | None]) -> bool:
        """Step 2a' (first pass): the member with the most stride-1 accesses
        carries a recurrence that may not be reassociated (a loop program's
        ``tmp[i] = tmp[i] + A[i, j] * x[j]``, summed in source order) and the
        coincident members walk the accesses with a stride.  Vectorising the
        coincident member makes every load a gather (atax ran at 13 GB/s);
        instead the stride-1 member ``r`` goes innermost with a coincident
        member ``c`` just outside it, and ``c``
        is unrolled by :data:`JAM_FACTOR` and jammed (``unroll_and_jam``):
        each iteration of ``r`` advances that many independent recurrences,
        each along its own row and in its own source order (the results do
        not change).  The band is not tiled: the rows stream through whole
        (atax's first product took 1.8-2.3 ms with tiles of 64 x 64 and
        1.5 ms without, LARGE, 2 cores), and what a row reuses (``x``) is
        one row long.  The band must hold recurrences only (gesummv's two
        are jammed together); one holding other statements was split by
        :meth:`split_recurrences`.
        ``False`` (nothing applied) when the band has another shape."""
        node = self.node(path)
        found = self.jam_members(node, coinc, scores)
        stmts = band_statements(node, self.program)
        if found is None or len(hot_statements(stmts)) < len(stmts):
            return False
        n = node.band_n_member()
        if not self.to_jam_order(path, *found):
            return False
        self.step("unroll_and_jam", self.loop(path, n - 2), JAM_FACTOR, aggressive=True)
        return True

    def tile(self, path, simd_last: bool) -> None:
        config, program = self.config, self.program
        node = self.node(path)
        n = node.band_n_member()
        if (config.tiling and 2 <= n <= T.MAX_TILED_MEMBERS and node.band_get_permutable()
                and (config.tile_sizes or T._carries_reuse(node, program))):
            sizes = T.tile_sizes(node, program, config)
            if self.step("tile", [self.loop(path, j) for j in range(n)], sizes):
                point = self.first_band(path + (0,))
                if config.simd and simd_last and point is not None:
                    self.step("vectorize", self.loop(point, n - 1))
                if (self.aggressive and getattr(config, "time_tiling", False)
                        and not self.node(path).band_member_get_coincident(0)):
                    self.step("wavefront", self.loop(path, 0), aggressive=True)
                return
        if config.simd and simd_last:
            self.step("vectorize", self.loop(path, n - 1))

    # ----------------------------------------------------------- 3. marks
    def mark_parallel(self, path) -> None:
        node = self.node(path)
        if node.get_type() == _BAND:
            coinc = coincident_members(node)
            if any(coinc):
                p = coinc.index(True)
                run = 0
                while p + run < len(coinc) and coinc[p + run]:
                    run += 1
                self.step("mark", self.loop(path, p),
                          parallel_mark_name(min(run, MAX_COLLAPSE)))
                return
        for i in range(node.n_children()):
            self.mark_parallel(tuple(path) + (i,))
