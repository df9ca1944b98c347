"""Legality of schedules against exact dependences.

Takes an ``isl.Schedule`` and :class:`polyc.dependence.Dependences`; returns
nothing when every dependence source is scheduled strictly before its sink,
and raises :class:`polyc.errors.IllegalScheduleError` otherwise, naming the
dependence kind, the tensor, the statements and one concrete violated pair of
statement instances (an isl sample point).  Every schedule that reaches code
generation passes through :func:`check`.
"""

from __future__ import annotations

import islpy as isl

from .. import expr as E
from ..dependence import Dependences
from ..errors import IllegalScheduleError, Witness
from ..ir import Program
from ..isl_util import maps_of, sets_of
from .legality_time import carries_in_time, negative_in_time, order_key, respects, union
from .marks import SIMD, SIMD_REDUCTION, parse_parallel_mark
from .tree import band_names


def schedule_order(schedule: isl.Schedule) -> isl.UnionMap:
    """Pairs ``{ a -> b }`` of statement instances with ``a`` scheduled
    strictly before ``b`` (``isl_union_map_lex_lt_union_map`` of the flattened
    schedule)."""
    smap = schedule.get_map()
    return smap.lex_lt_union_map(smap)


def violations(schedule: isl.Schedule, deps: Dependences) -> dict[str, isl.UnionMap]:
    """The dependences, by kind, whose source does not run before its sink.

    The common case, a legal schedule, is decided on the dependence pairs
    mapped into schedule time (:func:`.legality_time.respects`, linear in the
    dependences); only an illegal one pays for the full order of every pair
    of instances (:func:`schedule_order`), which names the violated pairs."""
    key = (order_key(schedule), id(deps))
    hit = _ORDERED.get(key)
    if hit is not None and hit[0] is deps:      # (deps kept alive: its id is not reused)
        return dict(hit[1])
    out = _violations(schedule, deps)
    if len(_ORDERED) >= _ORDERED_MAX:
        _ORDERED.clear()
    _ORDERED[key] = (deps, out)
    return dict(out)


#: (the tree without its marks, id of the dependences) -> (dependences,
#: :func:`violations`): marks do not change the order, and a recipe's
#: ``mark``/``vectorize`` steps, and candidates that share steps, check
#: the same order again.
_ORDERED: dict[tuple[bytes, int], tuple[Dependences, dict]] = {}
_ORDERED_MAX = 2000


def _violations(schedule: isl.Schedule, deps: Dependences) -> dict[str, isl.UnionMap]:
    by_kind = {k: d for k, d in deps.by_kind().items() if not d.is_empty()}
    smap = schedule.get_map()
    if not by_kind or respects(smap, union(by_kind.values())):
        return {}           # (one test of every kind together: the legal case)
    before = smap.lex_lt_union_map(smap)
    out = {}
    for kind, dep in by_kind.items():
        bad = dep.subtract(before)
        if not bad.is_empty():
            out[kind] = bad
    return out


def sample_pair(m: isl.Map) -> tuple[tuple[int, ...], tuple[int, ...],
                                     tuple[tuple[str, int], ...]]:
    """One concrete pair of ``m`` (isl's ``sample_point`` of the wrapped
    map): ``(source point, sink point, ((param, value), ...))``."""
    pt = m.wrap().sample_point()
    space = m.get_space()

    def coord(dt, i):
        return int(pt.get_coordinate_val(dt, i).to_python())
    params = tuple((space.get_dim_name(isl.dim_type.param, i), coord(isl.dim_type.param, i))
                   for i in range(space.dim(isl.dim_type.param)))
    n_in = space.dim(isl.dim_type.in_)
    vals = [coord(isl.dim_type.set, i) for i in range(pt.get_space().dim(isl.dim_type.set))]
    return tuple(vals[:n_in]), tuple(vals[n_in:]), params


def describe_instance_pair(m: isl.Map) -> str:
    """One concrete pair of ``m`` as text: ``S0[m=0, k=1] -> S0[m=0, k=0]
    (with M=1, K=2)``."""
    src, dst, params = sample_pair(m)
    space = m.get_space()

    def side(dt, vs):
        names = [space.get_dim_name(dt, i) or f"i{i}" for i in range(len(vs))]
        tup = space.get_tuple_name(dt)
        return f"{tup}[{', '.join(f'{n}={v}' for n, v in zip(names, vs))}]"
    text = f"{side(isl.dim_type.in_, src)} -> {side(isl.dim_type.out, dst)}"
    with_ = ", ".join(f"{k}={v}" for k, v in params)
    return text + (f" (with {with_})" if with_ else "")


def witness(kind: str, reason: str, violated: isl.UnionMap, program: Program | None,
            tensor_kind: str | None = None) -> Witness:
    """The :class:`~polyc.errors.Witness` of the violated (or carried)
    dependences ``violated`` of ``kind``: one sample pair of its first map,
    and all of it as isl text.  ``tensor_kind`` is the kind that decides the
    tensor's name (a reduction dependence is named like a flow one)."""
    m = maps_of(violated)[0]
    src, dst, params = sample_pair(m)
    return Witness(kind=kind, reason=reason,
                   tensor=dependence_tensor(program, m, tensor_kind or kind),
                   source=m.get_tuple_name(isl.dim_type.in_),
                   sink=m.get_tuple_name(isl.dim_type.out),
                   source_point=src, sink_point=dst, params=params,
                   violated=violated.to_str())


def _tensor_of(program: Program | None, src: str, dst: str, kind: str) -> str:
    if program is None:
        return "?"
    s, d = program.statement(src), program.statement(dst)
    if kind == "flow":
        cands = set([s.tensor]) & set(d.read_tensors())
    elif kind == "anti":
        cands = set(s.read_tensors()) & set([d.tensor])
    else:
        cands = set([s.tensor]) & set([d.tensor])
    return ", ".join(sorted(cands)) or "?"


def order_note(program: Program | None, src: str, dst: str) -> str:
    """Why the updates of ``src`` keep their order when a dependence of
    ``src`` on itself is refused (the end of the message), or ``""``: a
    max/min written with a builtin (``x = max(x, e)``), or a reduction whose
    partial values are read inside its loop.  (``x[i] = x[i] + e`` is the
    update ``x[i] += e`` already when it can be one: ``pysource.augmented_form``.)"""
    if program is None or src != dst or src not in {s.name for s in program.statements}:
        return ""
    st = program.statement(src)
    rhs, text = st.rhs, st.text.strip() or src
    if st.kind == "assign" and isinstance(rhs, E.Call) and rhs.fn in (
            "fmax", "fmin", "max", "min") and st.lhs in rhs.args:
        return (f" ({src} is the assignment {text}, whose steps keep their order; with "
                f"np.maximum / np.minimum it is a max / min reduction update, which "
                f"with_reassociation() may reorder)")
    if st.kind == "update" and src in interleaved_reductions(program):
        return (f" (other statements read the partial values of {src} inside its loop, so "
                f"its updates keep their order even with reassociation)")
    return ""


def check(schedule: isl.Schedule, deps: Dependences, program: Program | None = None,
          what: str = "schedule") -> None:
    """Raise :class:`IllegalScheduleError` if ``schedule`` violates a dependence.

    ``what`` names the transformation or pass that produced the schedule (it
    starts the message).  The message names the dependence kind, the tensor,
    the source and sink statements, and a sample violated instance pair.
    """
    bad = violations(schedule, deps)
    if not bad:
        return
    kind = next(iter(bad))
    m = maps_of(bad[kind])[0]
    src, dst = m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out)
    tensor = _tensor_of(program, src, dst, kind)
    raise IllegalScheduleError(
        f"{what} is illegal: it violates the {kind} dependence on tensor {tensor} "
        f"from statement {src} to statement {dst}; for example instance "
        f"{describe_instance_pair(m)} would run in the wrong order"
        f"{order_note(program, src, dst)}.\n"
        f"violated dependences: {bad[kind]}",
        witness=witness(kind, "order", bad[kind], program))


def dependence_tensor(program: Program | None, m: isl.Map, kind: str) -> str:
    """The tensor(s) through which dependence ``m`` (one isl map) of ``kind``
    arises."""
    return _tensor_of(program, m.get_tuple_name(isl.dim_type.in_),
                      m.get_tuple_name(isl.dim_type.out), kind)


def uniform_distance(m: isl.Map) -> tuple[int, ...] | None:
    """The distance vector ``sink - source`` of a dependence between two
    instances of one statement, when it is the same for every pair
    (``isl_map_deltas`` is a single point); ``None`` otherwise."""
    if m.get_tuple_name(isl.dim_type.in_) != m.get_tuple_name(isl.dim_type.out):
        return None
    d = m.deltas()
    if d.is_empty() or not d.is_singleton():
        return None
    pt = d.sample_point()
    return tuple(int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
                 for i in range(d.dim(isl.dim_type.set)))


def member_maps(node: isl.ScheduleNode, member: int) -> tuple[isl.UnionMap, isl.UnionMap]:
    """``(outer, this)`` for band member ``member`` of band ``node``: the
    schedule of the enclosing bands plus members ``0 .. member-1``, and that
    of member ``member``, as union maps on the band's domain."""
    domain = node.get_domain()
    outer = node.get_prefix_schedule_union_map().intersect_domain(domain)
    mupa = node.band_get_partial_schedule()
    n = node.band_n_member()
    if member > 0:
        before = isl.UnionMap.from_multi_union_pw_aff(
            mupa.drop_dims(isl.dim_type.set, member, n - member)).intersect_domain(domain)
        outer = outer.flat_range_product(before)
    this = isl.UnionMap.from_multi_union_pw_aff(
        mupa.drop_dims(isl.dim_type.set, member + 1, n - member - 1)
        .drop_dims(isl.dim_type.set, 0, member)).intersect_domain(domain)
    return outer, this


def unordered_within(node: isl.ScheduleNode, deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences of ``deps`` between instances band ``node`` schedules
    that the enclosing bands leave unordered (equal prefix schedule)."""
    domain = node.get_domain()
    prefix = node.get_prefix_schedule_union_map().intersect_domain(domain)
    within = deps.intersect_domain(domain).intersect_range(domain)
    return within.intersect(prefix.apply_range(prefix.reverse()))


def carried_by_member(node: isl.ScheduleNode, member: int,
                      deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences of ``deps`` that band member ``member`` of band
    ``node`` carries: both ends scheduled by the band, equal on every outer
    schedule dimension (enclosing bands and members ``0..member-1``), and
    different on ``member``.  A loop that carries none may run in parallel."""
    outer, this = member_maps(node, member)
    domain = node.get_domain()
    within = deps.intersect_domain(domain).intersect_range(domain)
    same_outer = within.intersect(outer.apply_range(outer.reverse()))
    return same_outer.subtract(this.apply_range(this.reverse()))


def carries(node: isl.ScheduleNode, member: int, deps: isl.UnionMap) -> bool:
    """Whether band member ``member`` of band ``node`` carries a dependence
    of ``deps``: :func:`carried_by_member` is not empty.  Decided on the
    dependence pairs mapped into schedule time (outer dimensions, then the
    member), linear in the dependences, where :func:`carried_by_member`
    relates every pair of instances with equal outer schedule (quadratic in
    the band's statements); it is the fallback when the times do not share
    one space."""
    domain = node.get_domain()
    within = deps.intersect_domain(domain).intersect_range(domain)
    if within.is_empty():
        return False
    outer, this = member_maps(node, member)
    time = outer.flat_range_product(this)
    found = carries_in_time(within, time)
    if found is None:
        return not carried_by_member(node, member, deps).is_empty()
    return found


def nonnegative(node: isl.ScheduleNode, member: int, deps: isl.UnionMap) -> bool:
    """Whether every dependence of ``deps`` between instances band ``node``
    schedules that the enclosing bands leave unordered has a non-negative
    distance along member ``member`` (the band may be permuted with it
    outermost).  Decided on the dependence pairs mapped into schedule time
    (prefix, then the member), linear in the dependences; the pairs of
    equal prefix (:func:`unordered_within`, quadratic) are the fallback when
    the times do not share one space."""
    domain = node.get_domain()
    within = deps.intersect_domain(domain).intersect_range(domain)
    if within.is_empty():
        return True
    prefix = node.get_prefix_schedule_union_map().intersect_domain(domain)
    this = member_maps(node, member)[1]
    found = negative_in_time(within, prefix.flat_range_product(this))
    if found is not None:
        return not found
    dist = unordered_within(node, deps).apply_domain(this).apply_range(this).deltas()
    return all(s.upper_bound_val(isl.dim_type.set, 0, isl.Val.int_from_si(s.get_ctx(), -1))
               .is_empty() for s in sets_of(dist))


def carried_at(schedule_prefix: isl.UnionMap, deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences not already ordered by ``schedule_prefix`` (a partial
    schedule as a union map): those equal on the prefix."""
    eq = schedule_prefix.apply_range(schedule_prefix.reverse())
    return deps.intersect(eq)



def describe_carried(carried: isl.UnionMap, program: Program | None) -> str:
    """``the flow dependence on tensor C from S0 to S0 (distance (0, 0, 1)),
    e.g. S0[m=0, n=0, k=0] -> S0[m=0, n=0, k=1]`` for one map of ``carried``."""
    kinds = []
    for m in maps_of(carried):
        src = m.get_tuple_name(isl.dim_type.in_)
        dst = m.get_tuple_name(isl.dim_type.out)
        dist = uniform_distance(m)
        kinds.append((src, dst, m, dist))
    src, dst, m, dist = kinds[0]
    d = f" (distance {dist})" if dist is not None else ""
    return (f"from statement {src} to statement {dst}{d}, "
            f"e.g. {describe_instance_pair(m)}")


def carried_dependences(node: isl.ScheduleNode, member: int, deps: Dependences,
                        exclude: isl.UnionMap | None = None) -> dict[str, isl.UnionMap]:
    """The dependences band member ``member`` of ``node`` carries, by kind
    (``flow``/``anti``/``output``), empty kinds left out."""
    by_kind = deps.by_kind()
    if exclude is not None:
        by_kind = {kind: dep.subtract(exclude) for kind, dep in by_kind.items()}
    if not carries(node, member, union(by_kind.values())):
        return {}           # the common case, decided without the pairs
    out = {}
    for kind, dep in by_kind.items():
        c = carried_by_member(node, member, dep)
        if not c.is_empty():
            out[kind] = c
    return out


def _outer_bands(node: isl.ScheduleNode) -> list[isl.ScheduleNode]:
    """The first band on every path down from ``node`` (``node`` itself when
    it is a band)."""
    if node.get_type() == isl.schedule_node_type.band:
        return [node]
    out = []
    for i in range(node.n_children()):
        out += _outer_bands(node.child(i))
    return out


def _mark_loops(name: str) -> tuple[str, int]:
    """``("parallel", k)`` / ``("simd", 1)`` / ``("simd_reduction", 1)`` for a
    mark the code generator turns into a pragma; ``("", 0)`` otherwise."""
    k = parse_parallel_mark(name)
    if k:
        return "parallel", k
    if name == SIMD:
        return "simd", 1
    if name == SIMD_REDUCTION:
        return "simd_reduction", 1
    return "", 0


def check_marks(schedule: isl.Schedule, deps: Dependences, program: Program | None = None,
                what: str = "schedule") -> None:
    """Raise :class:`IllegalScheduleError` when a ``parallel`` or ``simd``
    mark sits on a loop that carries a dependence (an ``vector_reduction``
    loop may carry only its own reduction dependences)."""
    problems: list[str] = []
    witnesses: list[Witness] = []

    def visit(node):
        if problems or node.get_type() != isl.schedule_node_type.mark:
            return True
        kind, k = _mark_loops(node.mark_get_id().get_name())
        if not kind:
            return True
        # the code generator flags the outermost loop(s) on every path below
        # the mark: check each of them
        for band in _outer_bands(node.child(0)) if node.n_children() else []:
            if band.band_n_member() < k:
                problems.append(
                    f"{what} is illegal: mark {node.mark_get_id().get_name()} asks for "
                    f"{k} collapsed loops but the band below has "
                    f"{band.band_n_member()}")
                return False
            if not _check_band(band, kind, k):
                return False
        return True

    def _check_band(band, kind, k) -> bool:
        names = band_names(band, program) if program is not None else None
        exclude = deps.reduction if kind == "simd_reduction" else None
        for j in range(min(k, band.band_n_member())):
            carried = carried_dependences(band, j, deps, exclude)
            if carried:
                dep_kind, c = next(iter(carried.items()))
                m = maps_of(c)[0]
                loop = names[j] if names else f"member {j}"
                label = {"parallel": "parallel", "simd": "vectorized",
                         "simd_reduction": "vectorized"}[kind]
                problems.append(
                    f"{what} is illegal: loop {loop} cannot run {label}: it carries the "
                    f"{dep_kind} dependence on tensor {dependence_tensor(program, m, dep_kind)} "
                    f"{describe_carried(c, program)}"
                    f"{order_note(program, *(m.get_tuple_name(t) for t in _ENDS))}")
                witnesses.append(witness(dep_kind, label, c, program))
                return False
        return True
    schedule.get_root().foreach_descendant_top_down(visit)
    if problems:
        raise IllegalScheduleError(problems[0], witness=witnesses[0] if witnesses else None)


def without_extensions(schedule: isl.Schedule) -> isl.Schedule:
    """``schedule`` with its extension nodes deleted: the copy statements of
    promotion (:mod:`polyc.schedule.promotion`) leave the tree, the original
    statements keep their order exactly (their filters are unchanged; the
    copies' filters then select nothing).  isl computes no schedule map of a
    tree with extension nodes, and the dependences are those of the original
    statements only."""
    def first(node: isl.ScheduleNode) -> isl.ScheduleNode | None:
        if node.get_type() == isl.schedule_node_type.extension:
            return node
        for i in range(node.n_children()):
            hit = first(node.child(i))
            if hit is not None:
                return hit
        return None
    while (ext := first(schedule.get_root())) is not None:
        schedule = ext.delete().get_schedule()
    return schedule


_INTERLEAVED: dict[str, frozenset[str]] = {}
_ENDS = (isl.dim_type.in_, isl.dim_type.out)


def interleaved_reductions(program: Program) -> frozenset[str]:
    """The reduction updates whose accumulator another statement accesses
    between two updates of one element in the source order (a running sum
    read inside its loop: ``B[i, j] = s[i]`` after ``s[i] += A[i, j]``).
    Their partial values are observed, so their updates keep their order
    even when reassociation is allowed."""
    key = program.fingerprint()
    if key in _INTERLEAVED:
        return _INTERLEAVED[key]
    ctx = program.parameter_domain()
    order = program.original_schedule().get_map().intersect_params(ctx)
    out = set()
    for s in program.statements:
        if s.kind != "update" or not s.reduction_iterators:
            continue
        acc = [isl.UnionMap.from_map(m) for t in program.statements
               if t.name != s.name and t.kind != "copy" for m in (t.write, *t.reads)
               if m.get_tuple_name(isl.dim_type.out) == s.tensor]
        if not acc:
            continue
        others = acc[0]
        for m in acc[1:]:
            others = others.union(m)
        same = isl.UnionMap.from_map(s.write).apply_range(others.reverse())  # S[u] -> X[x]
        mine = order.intersect_domain(same.domain().union(same.range()))
        before = mine.lex_lt_union_map(mine)
        after_one = same.intersect(before).range()
        before_one = same.reverse().intersect(before).domain()
        if not after_one.intersect(before_one).is_empty():
            out.add(s.name)
    _INTERLEAVED[key] = frozenset(out)
    return _INTERLEAVED[key]


def reassociable(deps: Dependences, program: Program | None) -> isl.UnionMap:
    """The reduction dependences that reassociation releases: those of
    ``deps.reduction`` but of :func:`interleaved_reductions`."""
    red = deps.reduction
    if program is not None:
        for name in interleaved_reductions(program):
            red = red.subtract(red.intersect_domain(
                isl.UnionSet.from_set(program.statement(name).domain)))
    return red


def reassociated(deps: Dependences, program: Program | None) -> Dependences:
    """The order constraints when a reduction's updates may run in any order.

    The reduction dependences (an update through its own accumulator) are
    dropped; what they ordered transitively is added back explicitly: a
    dependence through the accumulator tensor from another statement ``X``
    to one update of an element (``S0_init -> S0[k=0]``) now reaches every
    update of that element (``S0_init -> S0[k]`` for all ``k``), and one from
    an update to another statement (``S0[k=K-1] -> S1``) now leaves every
    update of the element.  "Same element" is ``W . W^-1`` of the update's
    write access relation (isl ``apply_range``), exact, no transitive
    closure needed."""
    red = reassociable(deps, program)
    kinds = {k: d.subtract(red) for k, d in deps.by_kind().items()}
    if program is not None:
        keep = interleaved_reductions(program)
        for s in program.statements:
            if s.kind != "update" or not s.reduction_iterators or s.name in keep:
                continue
            same = isl.UnionMap.from_map(s.write.apply_range(s.write.reverse()))
            own = isl.UnionSet.from_set(s.domain)
            others = isl.UnionSet.empty(own.get_space())
            for t in program.statements:
                if t.name != s.name and s.tensor in {t.tensor, *t.read_tensors()}:
                    others = others.union(isl.UnionSet.from_set(t.domain))
            for k, d in kinds.items():
                into = d.intersect_domain(others).intersect_range(own)
                out = d.intersect_domain(own).intersect_range(others)
                kinds[k] = d.union(into.apply_range(same)).union(same.apply_range(out))
    return Dependences(flow=kinds["flow"], anti=kinds["anti"], output=kinds["output"],
                       reduction=red)


#: id of the dependences -> (them, the program, :func:`reassociated`): one
#: object per program, so that :func:`violations` remembers its answers.
_REASSOCIATED: dict[int, tuple] = {}


def check_tree(schedule: isl.Schedule, deps: Dependences, program: Program | None = None,
               what: str = "schedule", reassociate: bool = False) -> None:
    """:func:`check` (the order; reduction dependences left out when
    ``reassociate``) then :func:`check_marks`, on the tree without the
    promotion copies (:func:`without_extensions`)."""
    schedule = without_extensions(schedule)
    full = deps
    if reassociate:
        hit = _REASSOCIATED.get(id(deps))
        if hit is None or hit[0] is not deps or hit[1] is not program:
            if len(_REASSOCIATED) >= 64:
                _REASSOCIATED.clear()
            hit = _REASSOCIATED[id(deps)] = (deps, program, reassociated(deps, program))
        deps = hit[2]
    check(schedule, deps, program, what)
    check_marks(schedule, full, program, what)
