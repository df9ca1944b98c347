"""What a picture of a schedule shows, as data: :func:`picture`.

Takes a :class:`polyc.Schedule` (or a ``Program``, or a ``Kernel``) and a
choice of *view* at fixed, small sizes, and returns a frozen
:class:`Picture`: the statement instances as points, the dependences
between them as arrows (flow, anti, output, reduction), the tiles of a tiled
schedule as groups of points, each point's rank in the execution order and
in the wavefront order, the loops that run in parallel, and a violated
dependence pair (a :class:`~polyc.errors.Witness`) when one is given.
Everything is computed with isl at the given sizes and then enumerated
(``isl_set_foreach_point``); :mod:`polyc.plot` draws a ``Picture`` with
matplotlib.  Nothing here imports matplotlib.

Two views:

* the **statement view** (default): one point per instance of the chosen
  statements, at its iteration vector (loops fixed with ``fix`` are left
  out); the statements must have the same number of loops, at most three;
* the **band view** (``band=``): one point per value of the band's loops
  (at most three) over the instances the band schedules; a point stands for
  every instance of the loops inside it.  Dependence pairs inside one point
  are not arrows; :attr:`Picture.inner_pairs` counts them.

A tile is a group of points with equal values of every *tile loop* above
them (a band member ``T*floor(x/T)`` of the iterators, as ``tile`` and
``split`` make them: ``m_tile``); in the band view only tile loops of the
bands around the viewed band count.  The execution order ranks points by
the schedule's time vector (the first instance's, for a band point); the
wavefront order ranks them by the time before their outermost
``parallel`` loop, so that the points one parallel loop runs at once
share a rank.  :mod:`polyc.schedule.timeline` computes these maps.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import islpy as isl

from .errors import IllegalScheduleError, PlotError, ScheduleError, Witness
from .ir import Program
from .isl_util import CTX, maps_of, param_space, sets_of
from .schedule import registry, timeline
from .schedule import tree as tree_mod

#: A picture draws at most this many points ...
MAX_POINTS = 4000
#: ... and this many dependence arrows.
MAX_ARROWS = 4000
#: ... in at most this many dimensions.
MAX_LOOPS = 3
#: Dependence kinds; an arrow that is several kinds takes the first one's colour.
KINDS = ("reduction", "flow", "anti", "output")


@dataclass(frozen=True)
class Point:
    """One point: ``statement`` (``""`` in the band view), ``coords`` (one
    integer per axis), ``order`` and ``wave`` (dense ranks, 0 first, in the
    execution and the wavefront order), ``tile`` (index into
    :attr:`Picture.tiles`, -1 outside every tile)."""
    statement: str
    coords: tuple[int, ...]
    order: int
    wave: int
    tile: int


@dataclass(frozen=True)
class Arrow:
    """A dependence from point ``source`` to point ``sink`` (indices into
    :attr:`Picture.points`); ``kind`` is the first of :data:`KINDS` in
    ``kinds``, every kind the pair has."""
    source: int
    sink: int
    kind: str
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class Picture:
    """Everything a picture shows.  ``axes``: one name per axis (iterators,
    or the band's loop names); ``parallel``: per axis, the parallel loop
    drawn along it (``None`` if none); ``parallel_loops``: every parallel
    loop over the points (names), drawn on an axis or not; ``tiles``: point
    indices per tile, tiles in execution order; ``witness``: ``(source,
    sink)`` point indices of the violated pair, with ``witness_info``."""
    program: str
    view: str
    statements: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    axes: tuple[str, ...]
    points: tuple[Point, ...]
    arrows: tuple[Arrow, ...]
    tiles: tuple[tuple[int, ...], ...]
    parallel: tuple[str | None, ...]
    parallel_loops: tuple[str, ...]
    inner_pairs: int = 0
    witness: tuple[int, int] | None = None
    witness_info: Witness | None = None

    @property
    def ndim(self) -> int:
        return len(self.axes)

    def sizes_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes)


# ----------------------------------------------------------------- inputs

def schedule_of(target):
    """The :class:`polyc.Schedule` of a Schedule, a ``Program`` (its source
    order) or a compiled ``Kernel`` (the schedule its code came from)."""
    Schedule = registry.schedule_class()
    if isinstance(target, Schedule):
        return target
    if isinstance(target, Program):
        return Schedule.from_program(target)
    sched = getattr(target, "schedule", None)
    if isinstance(sched, Schedule):
        return sched
    raise PlotError(f"cannot draw a {type(target).__name__}: pass a polyc.Schedule, a "
                    f"program (polyc.program(source)) or a compiled kernel")


def _param_set(program: Program, sizes: dict) -> isl.Set:
    """The parameter set ``{ [N, K] : N = 4 and K = 3 }`` of ``sizes``."""
    sizes = dict(sizes or {})
    for name, value in program.fixed_sizes.items():
        if name in sizes and sizes.pop(name) != value:
            raise PlotError(f"size {name} is fixed to {value} in program {program.name}")
    unknown = sorted(set(sizes) - set(program.params))
    if unknown:
        raise PlotError(f"program {program.name} has no size {', '.join(unknown)}; its sizes "
                        f"are {', '.join(program.params) or '(none)'}")
    missing = [p for p in program.params if p not in sizes]
    if missing:
        raise PlotError(f"a picture is drawn at fixed sizes: give {', '.join(missing)} "
                        f"(e.g. {', '.join(p + '=4' for p in missing)})")
    pset = isl.Set.universe(param_space(program.params)).params()
    for i, name in enumerate(program.params):
        try:
            v = operator.index(sizes[name])
        except TypeError:
            raise PlotError(f"size {name} must be an integer, got {sizes[name]!r}") from None
        pset = pset.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(CTX, v))
    if not pset.is_subset(program.parameter_domain()):
        raise PlotError(f"program {program.name} is not defined at "
                        f"{_sizes_text(program, sizes)}: its sizes must satisfy "
                        f"{program.parameter_domain()}")
    return pset


def fill_extents(program: Program, sizes: dict) -> None:
    """Give each missing size that no domain or access relation of the
    program's own statements involves (a loop program's extent ``A_dim1``
    that only bounds an array from below; a promotion's copies may clip to
    it) the least value the parameter domain allows at the given sizes: an
    array just as large as the loops need.  ``sizes`` is updated in place."""
    def involved(i: int) -> bool:
        return any(m.involves_dims(isl.dim_type.param, i, 1)
                   for st in program.statements if st.kind != "copy"
                   for m in (st.domain, st.write, *st.reads))
    free = [i for i, p in enumerate(program.params) if p not in sizes and not involved(i)]
    if not free:
        return
    pd = program.parameter_domain()
    for i, p in enumerate(program.params):
        try:
            if i not in free and p in sizes:      # (a missing one: the caller asks for it)
                v = isl.Val.int_from_si(CTX, operator.index(sizes[p]))
                pd = pd.fix_val(isl.dim_type.param, i, v)
        except TypeError:
            pd = isl.Set.empty(pd.get_space())      # (the caller names the bad size)
    n = len(program.params)
    least = isl.Set.from_params(pd).move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n)
    point = None if least.is_empty() else least.lexmin().sample_point()
    for i in free:      # 0 where no value fits: the caller says where the program is defined
        v = 0 if point is None else point.get_coordinate_val(isl.dim_type.set, i).to_python()
        sizes[program.params[i]] = int(v)


def _sizes_text(program: Program, sizes: dict) -> str:
    return ", ".join(f"{p}={sizes[p]}" for p in program.params)


def _bounded(uset: isl.UnionSet, limit: int, what: str, where: str, hint: str) -> None:
    """Raise :class:`PlotError` unless ``uset`` has at most ``limit``
    points.  The bounding box decides the common case; isl counts exactly
    (``isl_set_count_val``) only when the box is larger but not huge."""
    boxes = []
    for s in sets_of(uset):
        vol = 1
        for i in range(s.dim(isl.dim_type.set)):
            lo, hi = s.dim_min_val(i), s.dim_max_val(i)
            if not (lo.is_int() and hi.is_int()):
                raise PlotError(f"the {what} are unbounded at {where}")
            vol *= int(hi.to_python()) - int(lo.to_python()) + 1
        boxes.append((s, vol))
    total = sum(v for _, v in boxes)
    if total <= limit:
        return
    count = (sum(int(s.count_val().to_python()) for s, _ in boxes)
             if total <= 1000 * limit else None)
    if count is None or count > limit:
        many = f"{count}" if count is not None else f"up to {total}"
        raise PlotError(f"the picture would draw {many} {what} at {where}, more than "
                        f"{limit}: choose smaller sizes{hint}")


def _coords(pt: isl.Point) -> tuple[int, ...]:
    n = pt.get_space().dim(isl.dim_type.set)
    return tuple(int(pt.get_coordinate_val(isl.dim_type.set, i).to_python()) for i in range(n))


def _points_of(uset: isl.UnionSet) -> list[tuple[str, tuple[int, ...]]]:
    """Every point of ``uset`` (finite) as ``(tuple name, coords)``."""
    out: list = []
    uset.foreach_point(lambda pt: out.append(
        (pt.get_space().get_tuple_name(isl.dim_type.set) or "", _coords(pt))))
    return out


def _pairs_of(umap: isl.UnionMap) -> list[tuple[tuple, tuple]]:
    """Every pair of ``umap`` (finite) as ``((name, coords), (name, coords))``."""
    out: list = []
    for m in maps_of(umap):
        src = m.get_tuple_name(isl.dim_type.in_) or ""
        dst = m.get_tuple_name(isl.dim_type.out) or ""
        n = m.dim(isl.dim_type.in_)
        m.wrap().foreach_point(lambda pt, src=src, dst=dst, n=n: out.append(
            ((src, _coords(pt)[:n]), (dst, _coords(pt)[n:]))))
    return out


def _fixed(dom: isl.Set, iterators, fix: dict) -> isl.Set:
    """``dom`` with the iterators named in ``fix`` held at their values."""
    for j, it in enumerate(iterators):
        if it in fix:
            dom = dom.fix_val(isl.dim_type.set, j, isl.Val.int_from_si(CTX, int(fix[it])))
    return dom


# ----------------------------------------------------------------- views

def _named_statements(program: Program, statement) -> list:
    """The statements ``statement`` names: every statement (``None``), a
    statement or a tensor (its statements, :func:`target_statements`), or a
    list of statement names; promotion's copies are never drawn."""
    stmts = [s for s in program.statements if s.kind != "copy"]
    if statement is None:
        return stmts
    if isinstance(statement, str):
        try:
            names = tree_mod.target_statements(program, statement)
        except ScheduleError as e:
            raise PlotError(f"cannot draw {statement!r}: {e}") from None
        return [program.statement(n) for n in names]
    known = {s.name for s in stmts}
    bad = [n for n in statement if n not in known]
    if bad:
        raise PlotError(f"program {program.name} has no statement {', '.join(bad)}; "
                        f"its statements are {', '.join(sorted(known))}")
    return [program.statement(n) for n in statement]


def _select_statements(program: Program, statement, fix: dict) -> list:
    """The statements of the statement view: those ``statement`` names
    (:func:`_named_statements`) that have every loop of ``fix``, the ones
    with the most loops left; refused when that is none or more than
    :data:`MAX_LOOPS`, or when a list names statements of different depths."""
    chosen = _named_statements(program, statement)
    if fix:
        having = [s for s in chosen if set(fix) <= set(s.iterators)]
        if not having:
            raise PlotError(f"fix={fix}: no statement among "
                            f"{', '.join(s.name for s in chosen)} has loops "
                            f"{', '.join(sorted(fix))}")
        chosen = having
    depth = {s.name: len(s.iterators) - len(fix) for s in chosen}
    deepest = max(depth.values())
    if statement is not None and not isinstance(statement, str) and \
            len(set(depth.values())) > 1:
        raise PlotError(f"statements {', '.join(depth)} have different numbers of loops "
                        f"({', '.join(map(str, depth.values()))}); draw them one at a time")
    chosen = [s for s in chosen if depth[s.name] == deepest]
    if deepest == 0:
        s = chosen[0]
        why = (" (a call of a tensorized micro-kernel: draw the source order, or compile "
               "with Config(tensorize=False) / --no-tensorize)" if s.kind == "intrinsic"
               else "")
        raise PlotError(f"statement {s.name} has no loop to draw{why}")
    if deepest > MAX_LOOPS:
        s = chosen[0]
        its = ", ".join(s.iterators)
        keep = [i for i in s.iterators if i not in fix]
        raise PlotError(f"statement {s.name} has {deepest} loops ({its}) to draw; a picture "
                        f"shows at most {MAX_LOOPS}: choose a band (band=('{s.tensor}', "
                        f"'{keep[-1]}')) or fix loops (fix={{'{keep[0]}': 0}})")
    return chosen


def _statement_view(program: Program, stmts, fix: dict, params: isl.Set):
    """``(instances, view map, axis names)`` of the statement view: each
    statement's instances (``fix`` applied) and the map from them to their
    iteration vectors without the fixed loops, tuple names kept."""
    inst = view = None
    axes: list[list[str]] = []
    for s in stmts:
        dom = _fixed(s.domain.intersect_params(params), s.iterators, fix)
        keep = [j for j, it in enumerate(s.iterators) if it not in fix]
        m = isl.Map.identity(dom.get_space().map_from_set())
        for j in reversed(range(len(s.iterators))):
            if j not in keep:
                m = m.project_out(isl.dim_type.out, j, 1)
        m = m.set_tuple_name(isl.dim_type.out, s.name).intersect_domain(dom)
        udom, umap = isl.UnionSet.from_set(dom), isl.UnionMap.from_map(m)
        inst = udom if inst is None else inst.union(udom)
        view = umap if view is None else view.union(umap)
        for a, j in enumerate(keep):
            if a == len(axes):
                axes.append([])
            if s.iterators[j] not in axes[a]:
                axes[a].append(s.iterators[j])
    return inst, view, tuple("|".join(a) for a in axes)


def _band_view(schedule, band, stmts, fix: dict, params: isl.Set, instances: isl.UnionSet):
    """``(instances, view map, axis names, band node)`` of the band view."""
    loop = schedule.resolve(band)
    node = tree_mod.node_at(schedule.isl, loop.path)
    n = node.band_n_member()
    names = tree_mod.band_names(node, schedule.program)
    if n > MAX_LOOPS:
        raise PlotError(f"the band of loop {loop.name} has {n} loops ({', '.join(names)}); a "
                        f"picture shows at most {MAX_LOOPS}: split the band "
                        f"(schedule.split / tile) or choose a statement")
    wanted = set(tree_mod.statements_of(node))
    if stmts is not None:
        wanted &= {s.name for s in stmts}
    inst = isl.UnionSet.empty(instances.get_space())
    for st in sets_of(instances):
        if st.get_tuple_name() in wanted:
            its = schedule.program.statement(st.get_tuple_name()).iterators
            inst = inst.union(isl.UnionSet.from_set(_fixed(st, its, fix)))
    view = isl.UnionMap.from_multi_union_pw_aff(
        node.band_get_partial_schedule()).intersect_domain(inst)
    return inst, view, tuple(names), node


# ----------------------------------------------------------------- ranks

def _first_per_point(view: isl.UnionMap, per_instance: isl.UnionMap) -> dict:
    """For each view point, the lexicographically first value of
    ``per_instance`` over the instances drawn at it."""
    best: dict = {}
    for src, (_, val) in _pairs_of(view.reverse().apply_range(per_instance).lexmin()):
        if src not in best or val < best[src]:
            best[src] = val
    return best


def _ranks(values: dict) -> dict:
    order = {v: r for r, v in enumerate(sorted(set(values.values())))}
    return {k: order[v] for k, v in values.items()}


# ----------------------------------------------------------------- the picture

def picture(target, *, sizes: dict | None = None, statement=None, band=None,
            fix: dict | None = None, witness=None) -> Picture:
    """The :class:`Picture` of ``target`` at ``sizes``.

    ``target``: a :class:`polyc.Schedule`, a ``Program`` (its source order)
    or a compiled ``Kernel``.  ``sizes``: every size parameter, e.g.
    ``{"N": 8, "K": 6}``.  ``statement``: a statement name (``"S0"``), a
    tensor (its statements with the most loops) or a list of statement
    names; default every statement with the most loops.  ``band``: a loop
    (``("C", "m")``, ``"C.m"``, a ``Loop``) whose band's loops are the axes
    (band view).  ``fix``: iterator values (``{"k": 0}``) that select a
    slice; fixed loops are not axes.  ``witness``: a
    :class:`~polyc.errors.Witness` or the :class:`IllegalScheduleError`
    that carries one; a violated pair of it inside the picture is marked.

    Raises :class:`~polyc.errors.PlotError` for more than three axes, more
    than :data:`MAX_POINTS` points or :data:`MAX_ARROWS` arrows, sizes that
    are missing or outside the program's parameter domain, an unknown
    statement, and a witness with no pair inside the picture.
    """
    schedule = schedule_of(target)
    program = schedule.program
    sizes, fix = dict(sizes or {}), dict(fix or {})
    fill_extents(program, sizes)
    params = _param_set(program, sizes)
    where = "sizes " + _sizes_text(program, sizes)
    time = timeline.time_map(schedule.isl)
    instances = time.domain().intersect_params(params)
    if band is None:
        stmts = _select_statements(program, statement, fix)
        inst, view, axes = _statement_view(program, stmts, fix, params)
        band_node = None
    else:
        stmts = _named_statements(program, statement) if statement is not None else None
        inst, view, axes, band_node = _band_view(schedule, band, stmts, fix, params, instances)
    hint = ""
    if band is None and len(axes) > 1:
        it = axes[-1].split("|")[0]
        hint = f", or draw a slice (fix={{'{it}': 0}}; --fix {it}=0 on the command line)"
    _bounded(view.range(), MAX_POINTS, "points", where, hint)
    pos = {s.name: i for i, s in enumerate(program.statements)}
    raw = sorted(_points_of(view.range()), key=lambda p: (pos.get(p[0], -1), p[1]))
    if not raw:
        raise PlotError(f"nothing to draw: no instance at {where}"
                        + (f" with {fix}" if fix else ""))
    index = {p: i for i, p in enumerate(raw)}
    names_in_view = {st.get_tuple_name() for st in sets_of(inst)}

    time = time.intersect_domain(inst)
    order = _ranks(_first_per_point(view, time))
    wave = _ranks(_first_per_point(view, timeline.wavefront_map(schedule.isl, time)))
    parallel_loops: list[str] = []
    par_axis: list[str | None] = [None] * len(axes)
    for node, k in timeline.parallel_bands(schedule.isl):
        here = set(tree_mod.statements_of(node)) & names_in_view
        if not here:
            continue
        lnames = tree_mod.band_names(node, program)
        parallel_loops += [lnames[j] for j in range(k) if lnames[j] not in parallel_loops]
        for j in range(k):
            axis = _parallel_axis(node, j, here, program, fix, band_node)
            if axis is not None and par_axis[axis] is None:
                par_axis[axis] = lnames[j]

    tile_of, tiles = _tiles(schedule, view, inst, names_in_view, band_node, order, index)
    arrows = _arrows(schedule, params, inst, view, index, where)
    inner = _count_inner(schedule.deps.all().intersect_params(params), view) \
        if band is not None else 0
    points = tuple(Point(statement=s, coords=c, order=order[(s, c)], wave=wave[(s, c)],
                         tile=tile_of.get((s, c), -1)) for s, c in raw)
    info = _witness_info(witness)
    pair = _witness_pair(info, params, inst, view, index, where) if info else None
    return Picture(program=program.name, view="band" if band is not None else "statement",
                   statements=tuple(sorted(names_in_view)),
                   sizes=tuple((p, int(sizes[p])) for p in program.params), axes=axes,
                   points=points, arrows=arrows, tiles=tiles, parallel=tuple(par_axis),
                   parallel_loops=tuple(parallel_loops), inner_pairs=inner,
                   witness=pair, witness_info=info)


def _parallel_axis(node, j: int, stmts: set, program: Program, fix: dict,
                   band_node) -> int | None:
    """The axis along which parallel member ``j`` of ``node`` runs: in the
    band view, the member itself when ``node`` is the viewed band; in the
    statement view, the one drawn iterator the member's schedule depends on
    (``m`` or ``m_tile``), for every drawn statement it schedules."""
    if band_node is not None:
        same = tree_mod.path_of(node) == tree_mod.path_of(band_node)
        return j if same else None
    axes = set()
    for name in stmts:
        s = program.statement(name)
        used = timeline.iterators_used(timeline.member_pw_aff(node, j, s),
                                       len(s.iterators))
        kept = [i for i in range(len(s.iterators)) if s.iterators[i] not in fix]
        used_kept = {kept.index(u) for u in used if u in kept}
        if len(used_kept) != 1 or any(u not in kept for u in used):
            return None
        axes |= used_kept
    return axes.pop() if len(axes) == 1 else None


def _tiles(schedule, view, inst, names, band_node, order, index):
    """``(point -> tile index, tiles)``: points grouped by the values of the
    tile loops above them (in the band view, of the bands around it), tiles
    ordered by their first point in execution order."""
    within = None
    if band_node is not None:
        within = {tree_mod.path_of(a) for a in timeline.nodes_above(band_node)}
    keys = timeline.tile_map(schedule.isl, schedule.program, names, within)
    if keys is None:
        return {}, ()
    groups: dict = {}
    for p, key in _first_per_point(view, keys.intersect_domain(inst)).items():
        groups.setdefault(key, []).append(p)
    ordered = sorted(groups.values(), key=lambda ps: min(order[p] for p in ps))
    tile_of = {p: t for t, ps in enumerate(ordered) for p in ps}
    return tile_of, tuple(tuple(sorted(index[p] for p in ps)) for ps in ordered)


def _arrows(schedule, params, inst, view, index, where) -> tuple[Arrow, ...]:
    """The dependence arrows between distinct points, one per pair of
    points, coloured by the first of :data:`KINDS` the pair has."""
    deps = schedule.deps
    by_kind = {"reduction": deps.reduction, "flow": deps.flow, "anti": deps.anti,
               "output": deps.output}
    kinds: dict = {}
    for kind, dep in by_kind.items():
        dep = dep.intersect_params(params).intersect_domain(inst).intersect_range(inst)
        drawn = dep.apply_domain(view).apply_range(view)
        _bounded(drawn.wrap(), MAX_ARROWS, "dependence arrows", where, "")
        for src, dst in _pairs_of(drawn):
            if src != dst:
                kinds.setdefault((src, dst), set()).add(kind)
    if len(kinds) > MAX_ARROWS:
        raise PlotError(f"the picture would draw {len(kinds)} dependence arrows at {where}, "
                        f"more than {MAX_ARROWS}: choose smaller sizes")
    arrows = [Arrow(index[src], index[dst], next(k for k in KINDS if k in ks),
                    tuple(k for k in KINDS if k in ks))
              for (src, dst), ks in kinds.items()]
    return tuple(sorted(arrows, key=lambda a: (a.source, a.sink)))


def _count_inner(dep: isl.UnionMap, view: isl.UnionMap) -> int:
    """Instance pairs of ``dep`` whose ends are drawn at the same point."""
    same = view.apply_range(view.reverse())
    total = 0
    for s in sets_of(dep.intersect(same).wrap()):
        total += int(s.count_val().to_python())
    return total


def _witness_info(witness) -> Witness | None:
    if witness is None:
        return None
    if isinstance(witness, IllegalScheduleError):
        if witness.witness is None:
            raise PlotError(f"this refusal names no dependence pair to draw: {witness}")
        return witness.witness
    if isinstance(witness, Witness):
        return witness
    raise PlotError(f"witness= takes an IllegalScheduleError or its .witness, not "
                    f"{type(witness).__name__}")


def _witness_pair(info: Witness, params, inst, view, index, where) -> tuple[int, int]:
    """The first violated pair of ``info`` between two points drawn apart."""
    violated = isl.UnionMap.read_from_str(CTX, info.violated).intersect_params(params)
    violated = violated.intersect_domain(inst).intersect_range(inst)
    pairs = sorted((index[a], index[b]) for a, b in
                   _pairs_of(violated.apply_domain(view).apply_range(view).lexmin())
                   if a != b)
    if not pairs:
        raise PlotError(f"the violated {info.kind} dependence ({info}) has no pair between "
                        f"two points of this picture at {where}: draw statements "
                        f"{info.source} and {info.sink}, at sizes where it has one")
    return pairs[0]
