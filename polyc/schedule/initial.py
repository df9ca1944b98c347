"""Initial schedules: the source order, and isl's automatic scheduler with a
choice of fusion strategy.

Takes an ``ir.Program`` (and its ``Dependences``) and returns an
``isl.Schedule`` tree.  :func:`identity_schedule` is the original sequential
order (a sequence of statements, each scanning its domain lexicographically);
:func:`auto_schedule` runs isl's scheduler (Pluto-style ILP with isl's
extensions; Verdoolaege & Janssens, "Scheduling for PPCG", 2017) with
validity, coincidence and proximity constraints taken from the dependences,
and decides which statements share loops according to ``Config.fusion``
(through isl's scheduler options and, where they are not enough, by
scheduling groups of statements separately and fusing sibling loop nests
with :func:`polyc.schedule.fusion.fuse_subtrees`).
"""

from __future__ import annotations

import contextlib

import islpy as isl

from ..dependence import Dependences
from ..errors import PolycError, ScheduleError
from ..ir import Program, original_schedule
from ..isl_util import CTX, maps_of
from . import isl_worker, legality
from .fusion import exact_flags, fuse_subtrees, head_depth
from .tree import bands, mupa_from_columns, node_at, path_of, statement_filter, statements_of

_T = isl.schedule_node_type
_BAND = _T.band


def identity_schedule(program: Program) -> isl.Schedule:
    """The source order (see :func:`polyc.ir.original_schedule`)."""
    return original_schedule(program)


@contextlib.contextmanager
def _scheduler_options(**opts):
    """Temporarily set isl scheduler options on polyc's isl context."""
    old = {k: getattr(CTX, f"get_{k}")() for k in opts}
    try:
        for k, v in opts.items():
            getattr(CTX, f"set_{k}")(v)
        yield
    finally:
        for k, v in old.items():
            getattr(CTX, f"set_{k}")(v)


def auto_schedule(program: Program, deps: Dependences, config=None) -> isl.Schedule:
    """Compute a schedule with isl's scheduler.

    Validity: every dependence.  Coincidence: every dependence too, so a band
    member reported coincident carries no dependence at all (isl only reports
    coincidence relative to the constraints it was given).  Proximity: every
    dependence, which pulls producers and consumers together (fusion) and
    keeps reuse distances short.  isl's ``schedule_maximize_band_depth`` is
    on; ``schedule_outer_coincidence`` follows ``Config.outer_coincidence``
    (default on: isl keeps the outermost member of each band coincident
    where one exists).

    ``Config.fusion`` picks which statements share loops.  The statement
    *components* below are the strongly connected components of the
    statement-level dependence graph, taken in a topological order that
    follows the source order where the dependences leave a choice:

    ``"isl"`` (default)
        isl's own incremental clustering (``schedule_serialize_sccs=0``,
        ``schedule_whole_component=0``): components are scheduled separately
        and two clusters are merged when the merged band keeps its full depth
        and brings some dependence distance down to a small constant.  These
        are the schedules polyc has always generated.
    ``"max"``
        Fuse wherever legal.  Components are merged greedily, in topological
        order, as long as isl (``schedule_whole_component=1``, which
        schedules a set of statements as a whole and splits it, like Pluto's
        cut, only when no common band exists) finds an outer band shared by
        all statements of the merged group; statements that share no
        dependence at all (independent components, which isl leaves in a
        ``set``) are fused by schedule-tree surgery as deep as their outer
        bands go.  An approximation of Pluto's ``--maxfuse``: Pluto searches
        all statements at once, here the merge is greedy over consecutive
        components.
    ``"min"``
        No fusion: isl's ``schedule_serialize_sccs=1``, each component its
        own loop nest (a reduction's initialisation apart from its update).
    ``"smart"``
        Pluto's default ``--smartfuse``: at the outermost level, cut between
        consecutive components (in topological order) whose dimensionality
        (the deepest statement's number of loops) differs, and fuse the
        components of each run of equal dimensionality as ``"max"`` does.
        As in Pluto (``cut_scc_dim_based``), a cut between components taken
        in topological order never reverses a dependence; the result is
        still checked, and ``"max"`` is used if it were illegal.  Pluto's
        later cuts (inner levels, when no more permutable hyperplanes exist)
        are left to isl's own splitting within each group.
    ``"preserve_coincident"``
        Tensor Comprehensions' ``Preserve3Coincident``: components are merged
        greedily, in topological order, only when the merged schedule keeps
        at least three outer coincident (parallel) loops, or at least as many
        as the more parallel of the two parts had.  TC implements it as a
        merge callback inside isl's clustering (which also tries clusters
        connected by no dependence, in a different order); islpy has no such
        callback, so polyc evaluates each candidate merge with a separate isl
        call (``schedule_whole_component=1``) on the merged statements.

    ``Config.allow_skewing=False`` (Tensor Comprehensions' ``allowSkewing``,
    which TC implements with its isl fork's
    ``schedule_unit_max_var_coefficient_sum``, an option upstream isl lacks):
    isl runs with ``schedule_max_coefficient=1``, then every band member
    that still combines several iterators of a statement (``t+i``) is
    rewritten to the one iterator it adds to the outer loops (``i``), which
    keeps the execution order of each statement; the result is checked
    against the dependences.  If a band cannot be rewritten that way
    (``i+j`` as an outermost wavefront), isl is asked again with the other
    ``outer_coincidence`` setting, and as a last resort the source order is
    used.  Band ``coincident``/``permutable`` flags are recomputed from the
    dependences after any rewrite, so parallel marks stay exact.

    If isl fails (it can on a tightly bounded parameter domain), the source
    order is returned: it is always legal.
    """
    fusion = getattr(config, "fusion", "isl") if config is not None else "isl"
    outer = bool(getattr(config, "outer_coincidence", True)) if config is not None else True
    skew = bool(getattr(config, "allow_skewing", True)) if config is not None else True
    all_deps = deps.all()
    opts = dict(schedule_outer_coincidence=int(outer), schedule_serialize_sccs=0,
                schedule_maximize_band_depth=1)
    if not skew:
        opts["schedule_max_coefficient"] = 1
    try:
        sched = _strategy(program, all_deps, fusion, opts)
        if not skew:
            sched = _without_skewing(sched, program, all_deps, fusion, opts)
        elif outer and getattr(config, "time_tiling", False):
            sched = _prefer_time_tiling(sched, program, all_deps, fusion, opts)
        return sched
    except isl.Error:
        # isl's scheduler can fail on a tightly bounded parameter domain
        # ("unable to carry dependences"); the source order is always legal
        return identity_schedule(program)


def _outer_band(sched: isl.Schedule) -> isl.ScheduleNode | None:
    node = sched.get_root().child(0)
    return node if node.get_type() == isl.schedule_node_type.band else None


def _prefer_time_tiling(sched: isl.Schedule, program: Program, all_deps: isl.UnionMap,
                        fusion: str, opts: dict) -> isl.Schedule:
    """Time tiling (Pluto's tiling of time-iterated stencils; Bondhugula et
    al., PLDI 2008): when the outermost loop of ``sched`` spans every
    statement and is sequential (it carries a dependence: a time loop),
    isl is asked again without ``schedule_outer_coincidence``; if it then
    finds an outermost permutable band of at least two members (skewed
    where needed), that schedule is returned: the band tiles, and its tiles
    run as a wavefront (:func:`polyc.schedule.tile.wavefront`)."""
    band = _outer_band(sched)
    if band is None or band.band_member_get_coincident(0):
        return sched
    try:
        alt = _strategy(program, all_deps, fusion,
                        {**opts, "schedule_outer_coincidence": 0})
    except isl.Error:
        return sched
    ab = _outer_band(alt)
    if ab is None or not ab.band_get_permutable() or ab.band_n_member() < 2:
        return sched
    return alt


# ------------------------------------------------------------ isl calls

def _domain(program: Program, stmts=None) -> isl.UnionSet:
    context = program.parameter_domain()
    # statement instances outside the parameter domain never run; leaving them
    # in the domain would give isl a band that "drops" them (AST error)
    dom = program.domain().intersect_params(context)
    if stmts is not None:
        dom = dom.intersect(statement_filter(program, stmts))
    return dom



def _compute(program: Program, all_deps: isl.UnionMap, opts: dict, stmts=None,
             **extra) -> isl.Schedule:
    """isl's schedule of ``stmts`` (default: every statement) under ``opts``."""
    full = _domain(program, stmts)
    deps = all_deps.intersect_domain(full).intersect_range(full) if stmts is not None \
        else all_deps
    dom, context = full, program.parameter_domain()
    # sizes no iteration domain depends on (the other extents of an array,
    # bound only by the in-bounds preconditions) cannot matter to a schedule,
    # but every one of them is a dimension of isl's ILP (heat-3d: 11.8 s with
    # five of them, 1.4 s without): project them out (the union over their
    # values of the dependences, a superset of each value's) and put the
    # full domain back on the result
    unused = _unused_params(program)
    for name in unused:
        dom = _project_param(dom, name)
        deps = _project_param(deps, name)
        context = _project_param(context, name)
    options = {**opts, **extra}
    risky = _may_spin(dom, deps, options)
    sc = (isl.ScheduleConstraints.on_domain(dom)
          .set_context(context)
          .set_validity(deps)
          .set_coincidence(deps)
          .set_proximity(_without_splits(deps) if risky else deps))
    # (a planner's probe: the same constraints, in the worker under its limit)
    if risky or (isl_worker.probe_active() and dom.n_set() >= 3
                 and dom.dim(isl.dim_type.param) == 0):
        sched = isl_worker.compute(sc, options)
        if sched is None and not options.get("schedule_whole_component"):
            # isl's clustering did not finish: the whole component as one
            # problem (one ILP per band, no cluster merges) is the next best
            sched = isl_worker.compute(sc, {**options, "schedule_whole_component": 1})
        if sched is None:
            raise isl.Error("isl's scheduler did not finish within "
                            f"{isl_worker.TIME_LIMIT_S:.0f} s")
    else:
        with _scheduler_options(**options):
            sched = sc.compute_schedule()
    return sched.intersect_domain(full) if unused else sched


def _may_spin(dom: isl.UnionSet, deps: isl.UnionMap, options: dict) -> bool:
    """Whether isl's scheduler runs in the worker process with a time limit
    (:mod:`polyc.schedule.isl_worker`): isl's clustering of at least three
    statements of constant extents (no parameter left) connected by a
    dependence between statements of different dimensionality, the shape of
    every known case where it does not terminate.  Other calls run in this
    process, where they cost no process round trip."""
    if options.get("schedule_serialize_sccs") or dom.dim(isl.dim_type.param) > 0:
        return False
    if dom.n_set() < 3:
        return False
    mixed = []

    def visit(m: isl.Map) -> None:
        if m.dim(isl.dim_type.in_) != m.dim(isl.dim_type.out):
            mixed.append(m)
    deps.foreach_map(visit)
    return bool(mixed)


def _without_splits(deps: isl.UnionMap) -> isl.UnionMap:
    """``deps`` less the dependences that split an index: functions onto
    more dimensions than they come from that need an integer division (a
    consumer reading its producer split, ``Z(b, t, 4*h + d)``):
    proximity on them is what makes isl's clustering spin on programs of
    constant extents (:func:`_may_spin`), and fusing across such a split
    rarely shortens a reuse distance anyway.  Validity and coincidence keep
    them; proximity is only the scheduler's cost."""
    kept = []

    def visit(m: isl.Map) -> None:
        divs = []
        if m.dim(isl.dim_type.out) > m.dim(isl.dim_type.in_) and m.is_single_valued():
            isl.PwMultiAff.from_map(m).foreach_piece(
                lambda _, ma: divs.extend(i for i in range(ma.dim(isl.dim_type.out))
                                          if ma.get_at(i).dim(isl.dim_type.div) > 0))
        if not divs:
            kept.append(m)
    deps.foreach_map(visit)
    out = isl.UnionMap.empty(deps.get_space())
    for m in kept:
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _unused_params(program: Program) -> list[str]:
    raw = program.domain()
    used: set[str] = set()

    def visit(st: isl.Set) -> None:
        for i in range(st.dim(isl.dim_type.param)):
            if st.involves_dims(isl.dim_type.param, i, 1):
                used.add(st.get_dim_name(isl.dim_type.param, i))
    raw.foreach_set(visit)
    return [p for p in program.params if p not in used]


def _project_param(obj, name: str):
    """``obj`` (an isl set, map or union) with parameter ``name`` projected
    out (``isl_*_project_out`` on the parameter dimension)."""
    i = obj.get_space().find_dim_by_name(isl.dim_type.param, name)
    return obj if i < 0 else obj.project_out(isl.dim_type.param, i, 1)


# ------------------------------------------------------------ strategies

def _strategy(program: Program, all_deps: isl.UnionMap, fusion: str,
              opts: dict) -> isl.Schedule:
    if fusion == "isl":
        return _compute(program, all_deps, opts)
    if fusion == "min":
        return _compute(program, all_deps, opts, schedule_serialize_sccs=1)
    if fusion not in ("max", "smart", "preserve_coincident"):
        raise PolycError(f"unknown fusion strategy {fusion!r}")
    comps = components(program, all_deps)
    if len(comps) < 2:
        return _compute(program, all_deps, opts, schedule_whole_component=1)
    joint = _Joint(program, all_deps, opts)
    if fusion == "smart":
        groups: list[list] = []
        for comp in comps:
            if groups and _dimension(program, groups[-1][-1]) == _dimension(program, comp):
                groups[-1].append(comp)
            else:
                groups.append([comp])
        sched = _sequence([joint(_flat(g)) for g in groups])
        if legality.violations(sched, _deps_obj(all_deps)):
            return _strategy(program, all_deps, "max", opts)
        return sched
    groups = [[comps[0]]]
    for comp in comps[1:]:
        cur = _flat(groups[-1])
        cand = joint(cur + list(comp))
        if _fused(cand) and (fusion == "max" or _preserves(joint(cur), joint(list(comp)),
                                                           cand)):
            groups[-1].append(comp)
        else:
            groups.append([comp])
    return _sequence([joint(_flat(g)) for g in groups])


def _flat(group) -> list[str]:
    return [st for comp in group for st in comp]


def _deps_obj(all_deps: isl.UnionMap) -> Dependences:
    empty = isl.UnionMap.empty(all_deps.get_space())
    return Dependences(flow=all_deps, anti=empty, output=empty, reduction=empty)


def _sequence(parts: list[isl.Schedule]) -> isl.Schedule:
    sched = parts[0]
    for p in parts[1:]:
        sched = sched.sequence(p)
    return sched


class _Joint:
    """Schedules of groups of statements, each computed as a whole
    (``schedule_whole_component=1``), with independent parts fused; memoised
    by the statement set."""

    def __init__(self, program: Program, all_deps: isl.UnionMap, opts: dict):
        self.program, self.deps, self.opts = program, all_deps, opts
        self.memo: dict[tuple, isl.Schedule] = {}

    def __call__(self, stmts) -> isl.Schedule:
        key = tuple(sorted(stmts))
        if key not in self.memo:
            sched = _compute(self.program, self.deps, self.opts, list(stmts),
                             schedule_whole_component=1)
            try:
                sched = fuse_independent(sched, self.deps)
            except ScheduleError:
                pass            # a tree fusion cannot rebuild: keep isl's
            self.memo[key] = sched
        return self.memo[key]


def fuse_independent(sched: isl.Schedule, all_deps: isl.UnionMap) -> isl.Schedule:
    """Fuse the outer bands of the children of a ``set`` node at the top of
    ``sched`` (isl's independent components, which share no dependence, so
    any fusion of them is legal) as deep as their leading bands all go."""
    top = sched.get_root().child(0)
    if top.get_type() != _T.set:
        return sched
    depths = {i: head_depth(top.child(i)) for i in range(top.n_children())}
    positions = [i for i, d in depths.items() if d > 0]
    if len(positions) < 2:
        return sched
    depth = min(depths[i] for i in positions)
    new, _ = fuse_subtrees(sched, (0,), positions, depth, all_deps)
    return new


def _fused(sched: isl.Schedule) -> bool:
    """Whether every statement of ``sched`` shares its outermost loop."""
    return sched.get_root().child(0).get_type() == _BAND


def outer_coincident(sched: isl.Schedule) -> int:
    """The number of leading coincident loops that every statement of
    ``sched`` shares (bands reached from the root through bands only)."""
    node = sched.get_root().child(0)
    n = 0
    while node.get_type() == _BAND:
        for j in range(node.band_n_member()):
            if not node.band_member_get_coincident(j):
                return n
            n += 1
        node = node.child(0)
    return n


def _preserves(a: isl.Schedule, b: isl.Schedule, merged: isl.Schedule) -> bool:
    """TC's Preserve3Coincident test for merging the parts ``a`` and ``b``."""
    n = outer_coincident(merged)
    return n >= 3 or n >= max(outer_coincident(a), outer_coincident(b))


def _dimension(program: Program, comp) -> int:
    """The dimensionality of a component: its deepest statement's loop count."""
    return max(program.statement(st).domain.dim(isl.dim_type.set) for st in comp)


def components(program: Program, all_deps: isl.UnionMap) -> list[tuple[str, ...]]:
    """The strongly connected components of the statement-level dependence
    graph (an edge from the source to the sink statement of every non-empty
    dependence), in a topological order that takes the component holding
    the earliest source statement first whenever several are ready."""
    names = [s.name for s in program.statements]
    index = {n: i for i, n in enumerate(names)}
    succ: dict[str, set] = {n: set() for n in names}
    for m in maps_of(all_deps):
        a = m.get_tuple_name(isl.dim_type.in_)
        b = m.get_tuple_name(isl.dim_type.out)
        if a != b and a in succ and b in succ and not m.is_empty():
            succ[a].add(b)
    # Tarjan
    order, low, num, stack, on, comps = [0], {}, {}, [], set(), []

    def visit(v):
        num[v] = low[v] = order[0]
        order[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v], key=index.get):
            if w not in num:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], num[w])
        if low[v] == num[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(tuple(sorted(comp, key=index.get)))
    for v in names:
        if v not in num:
            visit(v)
    comp_of = {st: k for k, c in enumerate(comps) for st in c}
    preds = {k: set() for k in range(len(comps))}
    for a in names:
        for b in succ[a]:
            if comp_of[a] != comp_of[b]:
                preds[comp_of[b]].add(comp_of[a])
    done, out = set(), []
    while len(out) < len(comps):
        ready = [k for k in range(len(comps)) if k not in done and preds[k] <= done]
        k = min(ready, key=lambda k: index[comps[k][0]])
        done.add(k)
        out.append(comps[k])
    return out


# ------------------------------------------------------------ no skewing

def _pieces(upa: isl.UnionPwAff, stmt) -> list:
    space = isl.Space.from_domain(stmt.domain.get_space()).add_dims(isl.dim_type.out, 1)
    return upa.extract_pw_aff(space).get_pieces()


def _iterator_coefficients(aff: isl.Aff) -> dict[int, int]:
    n = aff.dim(isl.dim_type.in_)
    out = {}
    for i in range(n):
        c = int(aff.get_coefficient_val(isl.dim_type.in_, i).to_python())
        if c:
            out[i] = c
    return out


def skewed_members(sched: isl.Schedule, program: Program) -> list[tuple]:
    """``(band path, member, statement)`` for every band member that combines
    several iterators of a statement (a skewed loop such as ``t+i``)."""
    out = []
    for band in bands(sched):
        mupa = band.band_get_partial_schedule()
        stmts = statements_of(band)
        for j in range(band.band_n_member()):
            upa = mupa.get_union_pw_aff(j)
            for st in stmts:
                for _, aff in _pieces(upa, program.statement(st)):
                    if len(_iterator_coefficients(aff)) > 1:
                        out.append((path_of(band), j, st))
                        break
    return out


class _CannotUnskew(Exception):
    pass


def _unskew_band(band: isl.ScheduleNode, program: Program, all_deps: isl.UnionMap
                 ) -> isl.ScheduleNode:
    """Rewrite every skewed member of ``band`` to the single iterator it adds
    to the enclosing loops, per statement; flags recomputed."""
    mupa = band.band_get_partial_schedule()
    prefix = band.get_prefix_schedule_multi_union_pw_aff()
    n = band.band_n_member()
    cols = [None] * n
    for st in statements_of(band):
        stmt = program.statement(st)
        used: set[int] = set()
        for k in range(prefix.dim(isl.dim_type.set)):
            for _, aff in _pieces(prefix.get_union_pw_aff(k), stmt):
                used |= set(_iterator_coefficients(aff))
        for j in range(n):
            pieces = _pieces(mupa.get_union_pw_aff(j), stmt)
            if len(pieces) != 1 or pieces[0][1].dim(isl.dim_type.div):
                raise _CannotUnskew(st)
            aff = pieces[0][1]
            coeffs = _iterator_coefficients(aff)
            if len(coeffs) > 1:
                new = [i for i in coeffs if i not in used]
                if len(new) != 1:
                    raise _CannotUnskew(st)
                k = new[0]
                for i in coeffs:
                    aff = aff.set_coefficient_val(
                        isl.dim_type.in_, i,
                        isl.Val.int_from_si(CTX, (1 if coeffs[i] > 0 else -1) if i == k else 0))
                coeffs = {k: coeffs[k]}
            used |= set(coeffs)
            part = isl.UnionPwAff.from_pw_aff(isl.PwAff.from_aff(aff))
            cols[j] = part if cols[j] is None else cols[j].union_add(part)
    node = band.delete().insert_partial_schedule(mupa_from_columns(cols))
    return exact_flags(node, all_deps)


def unskew(sched: isl.Schedule, program: Program, all_deps: isl.UnionMap) -> isl.Schedule:
    """``sched`` with every skewed band rewritten (see :func:`auto_schedule`);
    raises :class:`_CannotUnskew` when a band cannot be, or when the result
    breaks a dependence."""
    while True:
        found = skewed_members(sched, program)
        if not found:
            break
        path = min(p for p, _, _ in found)
        sched = _unskew_band(node_at(sched, path), program, all_deps).get_schedule()
        if any(p == path for p, _, _ in skewed_members(sched, program)):
            raise _CannotUnskew(path)
    if legality.violations(sched, _deps_obj(all_deps)):
        raise _CannotUnskew("order")
    return sched


def _without_skewing(sched: isl.Schedule, program: Program, all_deps: isl.UnionMap,
                     fusion: str, opts: dict) -> isl.Schedule:
    try:
        return unskew(sched, program, all_deps)
    except _CannotUnskew:
        pass
    other = dict(opts, schedule_outer_coincidence=1 - opts["schedule_outer_coincidence"])
    try:
        return unskew(_strategy(program, all_deps, fusion, other), program, all_deps)
    except (_CannotUnskew, isl.Error):
        pass
    return annotate(identity_schedule(program), all_deps)


def annotate(sched: isl.Schedule, all_deps: isl.UnionMap) -> isl.Schedule:
    """``sched`` with the ``coincident`` members and ``permutable`` flag of
    every band computed from the dependences."""
    for path in [path_of(b) for b in bands(sched)]:
        sched = exact_flags(node_at(sched, path), all_deps).get_schedule()
    return sched
