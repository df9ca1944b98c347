"""Explanations of a schedule: what each loop carries, what may run in
parallel or as SIMD and why not, which statements share a loop nest and
what keeps the others apart, and how much data one tile touches.

Takes a :class:`polyc.schedule.language.Schedule` (``kernel.schedule`` or one
built with the schedule language) and returns plain text (default) or a
JSON-serialisable dict (``as_json=True``).  Every answer comes from isl:

* **loops**: for each band member, outer first, the dependences it carries
  (:func:`polyc.schedule.legality.carried_dependences`: both ends equal on
  every outer loop and different on this one), by kind (flow, anti,
  output), tensor, source and sink statement, with the distance vector
  ``sink - source`` in the statements' iteration space when it is uniform
  (``isl_map_deltas`` is one point, or a few points such as a stencil's
  ``(1, -1), (1, 0), (1, 1)``), and whether it is a reduction dependence
  (``Dependences.reduction``).  A loop is *parallel* when it carries
  nothing; *vectorizable* when it is innermost and carries nothing, or only
  a reduction that may be reordered (``Schedule.with_reassociation`` or an
  ``omp_simd_reduction`` mark).  The ``parallel`` / ``simd`` marks the tree
  holds on the loop are listed.
* **fusion**: each outermost loop nest is a *fusion group* (the statements
  under one outermost band) with the loops its statements share; for two
  neighbouring groups, why they are apart: the fusion strategy of the
  :class:`~polyc.config.Config` (``"min"`` fuses nothing), the source order
  or a ``distribute`` step, and what fusing their outer loops would do:
  ``schedule.fuse`` on the schedule without its parallel/simd marks (the
  :class:`~polyc.errors.IllegalScheduleError` names the dependence), or,
  where that transformation cannot restructure the tree, the same question
  put to isl directly (every dependence between the two groups must still
  run source before sink when instances are ordered by the fused loop
  values, ties by the sequence).  A legal fusion is checked for the
  parallelism it would cost (a dependence the fused loop would carry), and
  deeper fusion (the next members of both outer bands) for the dependence
  that stops it.  The dependences between the two groups are listed.
* **tiles**: for each *tile band* (a band below which another band of the
  same statements lies), the footprint of each tensor in one iteration of
  the band, in elements and bytes: the size of isl's fixed-box hull
  (``isl_map_get_range_simple_fixed_box_hull``) of ``{ prefix schedule ->
  accessed element }``; ``unbounded`` when no box of constant size exists
  (the footprint grows with a size parameter).

Example (matmul under the automatic schedule, abridged)::

    loop k  statements S0, S0_init; depth 4
      carries       flow    C  S0 -> S0  distance (0, 0, 1)  reduction
      parallel      no: it carries the flow dependence on C from S0 to S0 ...
      vectorizable  no: not innermost (loop n lies inside it)
"""

from __future__ import annotations

import ctypes
import functools
import json as _json
import re

import islpy as isl
import numpy as np

from ..errors import IllegalScheduleError, PolycError
from ..isl_util import maps_of
from . import legality, tree
from .marks import SIMD, SIMD_REDUCTION, has_band_below, parse_parallel_mark

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_LEAF = isl.schedule_node_type.leaf

#: At most this many distance vectors are listed for one dependence; more
#: (or infinitely many) make it "non-uniform".
MAX_DISTANCES = 8


# ------------------------------------------------------------ isl helpers

def distances(m: isl.Map, program) -> list[tuple[int, ...]] | None:
    """The distance vectors ``sink - source`` of dependence ``m`` over all
    parameter values, when there are at most :data:`MAX_DISTANCES` of them
    (one: a uniform dependence, :func:`legality.uniform_distance`); ``None``
    when they vary (or the two statements have different iterators)."""
    src = m.get_tuple_name(isl.dim_type.in_)
    dst = m.get_tuple_name(isl.dim_type.out)
    if src == dst:
        one = legality.uniform_distance(m)
        if one is not None:
            return [one]
    else:
        try:
            same = program.statement(src).iterators == program.statement(dst).iterators
        except KeyError:
            same = False
        if not same:
            return None
        m = m.set_tuple_name(isl.dim_type.out, src)
    d = m.deltas()
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    if d.is_empty() or not d.is_bounded():
        return None
    n = d.dim(isl.dim_type.set)
    box = 1
    for i in range(n):
        box *= int(d.dim_max_val(i).to_python()) - int(d.dim_min_val(i).to_python()) + 1
    if box > 8 * MAX_DISTANCES:      # too many to list: do not enumerate them
        return None
    pts: list[tuple[int, ...]] = []

    def add(pt):
        if len(pts) <= MAX_DISTANCES:
            pts.append(tuple(int(pt.get_coordinate_val(isl.dim_type.set, i).to_python())
                             for i in range(n)))
    d.foreach_point(add)
    if not pts or len(pts) > MAX_DISTANCES:
        return None
    return sorted(pts)


class _IslC:
    """isl's ``isl_fixed_box`` accessors, which islpy does not wrap: called
    through ``ctypes`` on the isl that islpy links, in a context of their
    own; maps cross over in isl's text form."""

    def __init__(self):
        import islpy._isl as _isl
        lib = ctypes.CDLL(_isl.__file__)
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        sig = {"isl_ctx_alloc": ([], vp),
               "isl_map_read_from_str": ([vp, cp], vp),
               "isl_map_get_range_simple_fixed_box_hull": ([vp], vp),
               "isl_fixed_box_is_valid": ([vp], ctypes.c_int),
               "isl_fixed_box_get_size": ([vp], vp),
               "isl_fixed_box_to_str": ([vp], vp),
               "isl_multi_val_to_str": ([vp], vp),
               "isl_multi_val_free": ([vp], vp),
               "isl_fixed_box_free": ([vp], vp),
               "isl_map_free": ([vp], vp)}
        for name, (args, res) in sig.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        self.lib = lib
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [vp]
        self.ctx = lib.isl_ctx_alloc()
        if not self.ctx:
            raise OSError("isl_ctx_alloc failed")

    def _string(self, ptr) -> str:
        try:
            return ctypes.string_at(ptr).decode()
        finally:
            self.libc.free(ptr)

    def range_box(self, m: isl.Map) -> tuple[list[int], str] | None:
        """(sizes, offset text) of the range's fixed-box hull, or ``None``."""
        lib = self.lib
        cm = lib.isl_map_read_from_str(self.ctx, m.to_str().encode())
        if not cm:
            raise OSError("isl_map_read_from_str failed")
        box = lib.isl_map_get_range_simple_fixed_box_hull(cm)
        lib.isl_map_free(cm)
        if not box:
            raise OSError("isl_map_get_range_simple_fixed_box_hull failed")
        try:
            if lib.isl_fixed_box_is_valid(box) != 1:
                return None
            mv = lib.isl_fixed_box_get_size(box)
            size_text = self._string(lib.isl_multi_val_to_str(mv))
            lib.isl_multi_val_free(mv)
            text = self._string(lib.isl_fixed_box_to_str(box))
        finally:
            lib.isl_fixed_box_free(box)
        sizes = isl.MultiVal(size_text)
        found = re.search(r'offset: "([^"]*)"', text)
        offset = found.group(1) if found else None
        return ([int(sizes.get_val(i).to_python()) for i in range(sizes.dim(isl.dim_type.set))],
                offset)


@functools.lru_cache(maxsize=1)
def _islc() -> _IslC | None:
    try:
        return _IslC()
    except (OSError, AttributeError):
        return None


def extents(m: isl.Map) -> list[int | None]:
    """The largest extent of the range of ``m`` in each dimension over all
    domain points and parameter values, ``None`` where it is unbounded
    (grows with a size parameter)."""
    n = m.dim(isl.dim_type.out)
    out: list[int | None] = []
    for i in range(n):
        col = m.project_out(isl.dim_type.out, i + 1, n - i - 1).project_out(
            isl.dim_type.out, 0, i)
        diff = col.reverse().apply_range(col).deltas()
        diff = diff.project_out(isl.dim_type.param, 0, diff.dim(isl.dim_type.param))
        if diff.is_empty():
            out.append(0)
        elif not diff.is_bounded():
            out.append(None)
        else:
            out.append(int(diff.dim_max_val(0).to_python()) + 1)
    return out


def range_box(m: isl.Map) -> tuple[list[int], str | None] | None:
    """The sizes (and offset, in isl notation) of isl's fixed-box hull of the
    range of ``m`` for each domain point
    (``isl_map_get_range_simple_fixed_box_hull``); ``None`` when no box of
    constant size contains it."""
    c = _islc()
    if c is not None:
        return c.range_box(m)
    sizes = extents(m)   # without isl's accessors: the per-dimension extents
    return None if None in sizes else (sizes, None)


def _fix_params(m: isl.Map, values: dict) -> isl.Map:
    for i in range(m.dim(isl.dim_type.param)):
        name = m.get_dim_name(isl.dim_type.param, i)
        if name in values:
            m = m.fix_val(isl.dim_type.param, i,
                          isl.Val.int_from_si(m.get_ctx(), int(values[name])))
    return m


# ------------------------------------------------------------ analysis

def _marks_above(band: isl.ScheduleNode) -> list[str]:
    out = []
    node = band
    while node.has_parent() and node.parent().get_type() == _MARK:
        node = node.parent()
        if not tree.is_names_mark(node):
            out.append(node.mark_get_id().get_name())
    return out[::-1]


def _dep_record(kind: str, m: isl.Map, schedule) -> dict:
    src = m.get_tuple_name(isl.dim_type.in_)
    dst = m.get_tuple_name(isl.dim_type.out)
    red = isl.UnionMap.from_map(m).is_subset(schedule.deps.reduction)
    dist = distances(m, schedule.program)
    return {"kind": kind, "tensor": legality.dependence_tensor(schedule.program, m, kind),
            "source": src, "sink": dst,
            "distance": list(dist[0]) if dist and len(dist) == 1 else None,
            "distances": [list(d) for d in dist] if dist else None,
            "uniform": bool(dist) and len(dist) == 1,
            "reduction": bool(red),
            "example": legality.describe_instance_pair(m)}


def _dep_phrase(d: dict, example: bool = True) -> str:
    extra = []
    if d["distances"]:
        extra.append(("distance " if len(d["distances"]) == 1 else "distances ")
                     + ", ".join(_vec(v) for v in d["distances"]))
    if d["reduction"]:
        extra.append("a reduction")
    text = (f"the {d['kind']} dependence on {d['tensor']} from {d['source']} to {d['sink']}"
            + (f" ({'; '.join(extra)})" if extra else ""))
    return text + (f", e.g. {d['example']}" if example else "")


def _vec(v) -> str:
    return "(" + ", ".join(str(x) for x in v) + ")"


def _carried(band: isl.ScheduleNode, member: int, schedule) -> list[dict]:
    out = []
    for kind, c in legality.carried_dependences(band, member, schedule.deps).items():
        for m in sorted(maps_of(c), key=str):
            out.append(_dep_record(kind, m, schedule))
    kinds = {"flow": 0, "anti": 1, "output": 2}
    out.sort(key=lambda d: (d["reduction"], kinds[d["kind"]], d["tensor"], d["source"],
                            d["sink"]))
    return out


def _inner_loop_name(band: isl.ScheduleNode, member: int, names: list[str],
                     program) -> str | None:
    if member < band.band_n_member() - 1:
        return names[member + 1]
    for node in tree.walk(band):
        if node.get_type() == _BAND and not node.is_equal(band):
            return tree.band_names(node, program)[0]
    return None


def _is_pure_reduction(band: isl.ScheduleNode, member: int, program) -> bool:
    from .tile import _is_pure_reduction_band
    node = band
    if member > 0:
        node = band.band_split(member).child(0)
    return _is_pure_reduction_band(node, program)


def _loop_record(lp: tree.Loop, schedule) -> dict:
    band = tree.node_at(schedule.isl, lp.path)
    n = band.band_n_member()
    names = tree.band_names(band, schedule.program)
    marks = _marks_above(band)
    par_marked = any(lp.member < parse_parallel_mark(mk) for mk in marks)
    simd_marked = lp.member == 0 and SIMD in marks
    simd_red_marked = lp.member == 0 and SIMD_REDUCTION in marks
    other = [mk for mk in marks if not parse_parallel_mark(mk)
             and mk not in (SIMD, SIMD_REDUCTION)] if lp.member == 0 else []
    carried = _carried(band, lp.member, schedule)
    innermost = lp.member == n - 1 and not has_band_below(band)

    parallel = not carried
    why_not_parallel = None if parallel else "it carries " + _dep_phrase(carried[0])

    plain = [d for d in carried if not d["reduction"]]
    vectorizable, vec_note, why_not_vec = False, None, None
    if not innermost:
        inner = _inner_loop_name(band, lp.member, names, schedule.program)
        why_not_vec = "not innermost" + (f" (loop {inner} lies inside it)" if inner else "")
    elif plain:
        why_not_vec = "it carries " + _dep_phrase(plain[0])
    elif carried:
        if simd_red_marked or (schedule.reassociate
                               and _is_pure_reduction(band, lp.member, schedule.program)):
            vectorizable = True
            vec_note = "as a reduction (omp simd reduction): it carries only the reduction on " \
                       + ", ".join(sorted({d["tensor"] for d in carried}))
        elif schedule.reassociate:
            why_not_vec = ("it carries a reduction but does not scan only the reduction of "
                           "one update statement whose accumulator nothing else reads")
        else:
            why_not_vec = ("it carries " + _dep_phrase(carried[0], example=False)
                           + "; vectorizing reorders the reduction: allow it with "
                           "schedule.with_reassociation()")
    else:
        vectorizable = True
    return {"name": lp.name, "statements": list(lp.statements), "path": list(lp.path),
            "member": lp.member, "depth": band.get_schedule_depth() + lp.member,
            "innermost": innermost, "carries": carried,
            "parallel": parallel, "parallel_reason": why_not_parallel,
            "vectorizable": vectorizable, "vectorizable_note": vec_note,
            "vectorizable_reason": why_not_vec,
            "marked_parallel": par_marked, "marked_simd": simd_marked or simd_red_marked,
            "marked_simd_reduction": simd_red_marked, "marks": other}


# ---------------------------------------------------------------- fusion

def _outer_nests(schedule) -> list[dict]:
    """The outermost bands (and statements reached without any loop), in
    tree order: ``{"statements", "band"}``."""
    out: list[dict] = []

    def go(node):
        t = node.get_type()
        if t == _BAND:
            out.append({"statements": tree.statements_of(node), "band": node})
            return
        if t == _LEAF:
            stmts = tree.statements_of(node)
            if stmts:
                out.append({"statements": stmts, "band": None})
            return
        for i in range(node.n_children()):
            go(node.child(i))
    go(schedule.isl.get_root())
    return out


def _deps_between(schedule, a, b) -> list[dict]:
    out = []
    sa, sb = set(a), set(b)
    for kind, umap in schedule.deps.by_kind().items():
        for m in sorted(maps_of(umap), key=str):
            src = m.get_tuple_name(isl.dim_type.in_)
            dst = m.get_tuple_name(isl.dim_type.out)
            if (src in sa and dst in sb) or (src in sb and dst in sa):
                out.append(_dep_record(kind, m, schedule))
    return out


def _first_line(e: Exception) -> str:
    return str(e).split("\n")[0]


def _outer_members(band: isl.ScheduleNode, k: int) -> isl.UnionMap:
    """Members ``0 .. k-1`` of ``band`` as a union map (anonymous range) on
    the statements reaching it."""
    mupa = band.band_get_partial_schedule()
    n = band.band_n_member()
    if n > k:
        mupa = mupa.drop_dims(isl.dim_type.set, k, n - k)
    mupa = mupa.reset_tuple_id(isl.dim_type.set)
    return isl.UnionMap.from_multi_union_pw_aff(mupa).intersect_domain(band.get_domain())


def _fuse_check(schedule, band_a: isl.ScheduleNode, band_b: isl.ScheduleNode,
                k: int = 1) -> dict:
    """Whether fusing the first ``k`` loops of two neighbouring nests (``a``
    before ``b`` in one sequence) respects every dependence between them,
    computed here: fused, an instance of ``a`` runs before one of ``b`` when
    its fused loop values are lexicographically smaller or equal, after it
    when greater.  Returns ``{"result": "legal"|"illegal", "dependence":
    record of a violated dependence or None, "carried": record of a
    dependence between them the fused outer loop would carry, or None}``."""
    fa, fb = _outer_members(band_a, k), _outer_members(band_b, k)
    sa = set(tree.statements_of(band_a))
    sb = set(tree.statements_of(band_b))
    late_b = fa.lex_gt_union_map(fb)          # a-instance after b-instance
    late_a = fb.lex_ge_union_map(fa)          # b-instance not after a-instance
    oa, ob = _outer_members(band_a, 1), _outer_members(band_b, 1)
    differ = oa.lex_lt_union_map(ob)          # a before b on the outer loop
    carried = None
    for kind, umap in schedule.deps.by_kind().items():
        for m in sorted(maps_of(umap), key=str):
            src = m.get_tuple_name(isl.dim_type.in_)
            dst = m.get_tuple_name(isl.dim_type.out)
            u = isl.UnionMap.from_map(m)
            if src in sa and dst in sb:
                bad = u.intersect(late_b)
                c = u.intersect(differ)
                if carried is None and not c.is_empty():
                    carried = _dep_record(kind, maps_of(c)[0], schedule)
            elif src in sb and dst in sa:
                bad = u.intersect(late_a)
            else:
                continue
            if not bad.is_empty():
                return {"result": "illegal", "dependence": _dep_record(
                    kind, maps_of(bad)[0], schedule), "carried": None}
    return {"result": "legal", "dependence": None, "carried": carried}


def _runs_before(a: isl.ScheduleNode, b: isl.ScheduleNode) -> bool:
    """Whether every instance below ``a`` runs before every instance below
    ``b`` only because of the sequence (or set) node where their paths part,
    ``a``'s branch first: no band lies above either (they are outermost)."""
    pa, pb = tree.path_of(a), tree.path_of(b)
    k = 0
    while k < min(len(pa), len(pb)) and pa[k] == pb[k]:
        k += 1
    if k >= min(len(pa), len(pb)):
        return False
    lca = tree.node_at(a.get_schedule(), pa[:k])
    return (lca.get_type() in (isl.schedule_node_type.sequence, isl.schedule_node_type.set)
            and pa[k] < pb[k])


def _without_marks(schedule):
    """``schedule`` without its mark nodes other than loop names (parallel,
    simd, user marks), as a Schedule of the same program; ``schedule``
    itself when it has none, ``None`` when it cannot be rebuilt."""
    sched = schedule.isl
    found = True
    stripped = False
    while found:
        found = False
        for node in tree.walk(sched.get_root()):
            if node.get_type() == _MARK and not tree.is_names_mark(node):
                sched = node.delete().get_schedule()
                found = stripped = True
                break
    if not stripped:
        return schedule
    try:
        return schedule.from_text(sched.to_str())
    except PolycError:
        return None


def _fuse_call(schedule, band_a, band_b) -> dict:
    """What ``schedule.fuse`` answers for the outer loops of two bands."""
    la, lb = (tree.Loop(tree.path_of(b), 0, tree.band_names(b, schedule.program)[0],
                        tree.statements_of(b)) for b in (band_a, band_b))
    out = {"call": f"schedule.fuse([{_loop_spec(la)}, {_loop_spec(lb)}])", "result": None,
           "message": None, "fused": None}
    try:
        out["fused"] = schedule.fuse([la, lb])
    except IllegalScheduleError as e:
        msg = _first_line(e)
        # "fuse([i, i]) is illegal: it violates ..." -> "it violates ..."
        out.update(result="illegal", message=msg.split(" is illegal: ", 1)[-1])
    except PolycError as e:
        msg = _first_line(e)
        if "unknown transformation" in msg:
            out.update(result="unavailable", message="schedule.fuse is not available")
        else:
            out.update(result="refused", message=msg)
    except Exception as e:  # the transformation broke: say so, do not fail
        out.update(result="unavailable", message=f"{type(e).__name__}: {_first_line(e)}")
    else:
        out["result"] = "legal"
    return out


def _try_fuse(schedule, band_a, band_b, plain, plain_a, plain_b) -> dict:
    """Whether the outer loops of the nests at ``band_a`` and ``band_b`` can
    be fused: ``schedule.fuse`` on ``plain`` (the schedule without marks;
    ``plain_a``/``plain_b`` its bands), else :func:`_fuse_check`.  Also:
    whether the fused loop would lose the parallelism of one of them, and
    (``deeper``) how many loops of the two outer bands could be fused."""
    call = None
    if plain is not None and plain_a is not None:
        call = _fuse_call(plain, plain_a, plain_b)
    own = _fuse_check(schedule, band_a, band_b) if _runs_before(band_a, band_b) else None
    out = {"call": None, "by": None, "result": "unavailable", "message": None,
           "dependence": None, "fuse_message": None, "without_marks": plain is not schedule,
           "deeper": []}
    fused = None
    if call is not None:
        out["fuse_message"] = call["message"]
    if call is not None and call["result"] in ("legal", "illegal"):
        out.update(by="schedule.fuse", result=call["result"], message=call["message"],
                   call=call["call"])
        fused = call["fused"]
    elif own is not None:
        out.update(by="explain", result=own["result"])
    elif call is not None:
        out.update(result=call["result"], message=call["message"])
    if own is not None and own["result"] == out["result"]:
        out["dependence"] = own["dependence"]
    if out["result"] == "illegal" and out["message"] is None and out["dependence"]:
        out["message"] = f"it would violate {_dep_phrase(out['dependence'])}"
    if out["result"] != "legal":
        return out
    # does the fused outer loop keep the parallelism the separate ones had?
    own_carried = [_carried(b, 0, schedule) for b in (band_a, band_b)]
    names = [tree.band_names(b, schedule.program)[0] for b in (band_a, band_b)]
    stmts = [tree.statements_of(b) for b in (band_a, band_b)]
    parallel_before = [i for i in (0, 1) if not own_carried[i]]
    carried = None
    if fused is not None:
        try:
            every = set(stmts[0]) | set(stmts[1])
            loops = [lp for lp in fused.loops() if every <= set(lp.statements)]
            if loops:
                found = _carried(tree.node_at(fused.isl, loops[0].path), loops[0].member,
                                 fused)
                carried = found[0] if found else None
        except PolycError:
            pass
    elif own is not None:
        carried = own["carried"]
        for i in (0, 1):
            if carried is None and own_carried[1 - i] and i in parallel_before:
                carried = own_carried[1 - i][0]
    out["fused_parallel"] = carried is None
    if carried is not None and parallel_before:
        lost = " and ".join(f"{names[i]} of {', '.join(stmts[i])}" for i in parallel_before)
        out["message"] = (f"the fused loop would carry {_dep_phrase(carried, example=False)}, "
                          f"so loop {lost} would no longer run in parallel")
    # deeper fusion: the next members of the two outer bands
    if own is not None:
        names_a = tree.band_names(band_a, schedule.program)
        names_b = tree.band_names(band_b, schedule.program)
        for k in range(2, min(band_a.band_n_member(), band_b.band_n_member()) + 1):
            res = _fuse_check(schedule, band_a, band_b, k)
            out["deeper"].append({"depth": k, "loops": [names_a[k - 1], names_b[k - 1]],
                                  "result": res["result"], "dependence": res["dependence"]})
            if res["result"] != "legal":
                break
    return out


def _loop_spec(lp: tree.Loop) -> str:
    st = lp.statements[0]
    return f"({st!r}, {lp.name.split('|')[0]!r})"


def _strategy_reason(strategy: str | None, a: dict, b: dict) -> str:
    """What the automatic scheduler's fusion strategy says about two nests."""
    if strategy == "min":
        return ("the fusion strategy 'min' (Config.fusion) keeps every strongly "
                "connected component in its own loop nest")
    if strategy == "smart":
        da, db = len(a["loops"]), len(b["loops"])
        if da != db:
            return (f"the fusion strategy 'smart' cuts between nests of different loop "
                    f"depth ({da} and {db} loops)")
        return "the fusion strategy 'smart' did not fuse them"
    if strategy == "preserve_coincident":
        return ("the fusion strategy 'preserve_coincident' fuses only while at least three "
                "outer parallel loops (or as many as the statements had) survive")
    if strategy == "max":
        return ("the fusion strategy 'max' fuses sibling nests as deep as their loops go "
                "where that is legal, and did not fuse these")
    return "isl's scheduler did not fuse them" + (
        f" (fusion strategy {strategy!r})" if strategy and strategy != "isl" else "")


def _fusion(schedule, config) -> dict:
    nests = _outer_nests(schedule)
    all_lp = schedule.loops()
    groups = []
    for k, nest in enumerate(nests):
        stmts = nest["statements"]
        loops = []
        if nest["band"] is not None:
            base = tree.path_of(nest["band"])
            loops = [lp.name for lp in all_lp if lp.path[:len(base)] == base
                     and set(lp.statements) == set(stmts)]
        groups.append({"statements": list(stmts), "loops": loops,
                       "band_path": None if nest["band"] is None
                       else list(tree.path_of(nest["band"]))})
    strategy = getattr(config, "fusion", None) if config is not None else None
    apart = []
    plain, plain_nests = None, []
    for k in range(len(nests) - 1):
        a, b = nests[k], nests[k + 1]
        reasons = []
        if any(st.get("op") == "distribute" for st in schedule.recipe):
            reasons.append("this schedule distributes them (a distribute step of its recipe)")
        elif schedule.start == "source" and not any(
                st.get("op") == "fuse" for st in schedule.recipe):
            reasons.append("the source order puts them in separate loop nests and this "
                           "schedule does not fuse them")
        elif schedule.start == "isl":
            reasons.append(_strategy_reason(strategy, groups[k], groups[k + 1]))
        fuse = None
        if a["band"] is not None and b["band"] is not None:
            if plain is None:
                plain = _without_marks(schedule) or False
                plain_nests = _outer_nests(plain) if plain else []
                if [n["statements"] for n in plain_nests] != [n["statements"] for n in nests]:
                    plain_nests = []
            pa = plain_nests[k]["band"] if plain_nests else None
            pb = plain_nests[k + 1]["band"] if plain_nests else None
            fuse = _try_fuse(schedule, a["band"], b["band"], plain or None, pa, pb)
            how = ""
            if fuse["by"] == "schedule.fuse":
                how = (" (schedule.fuse on this schedule without its marks)"
                       if fuse["without_marks"] else f": {fuse['call']}")
            if fuse["result"] == "illegal":
                reasons.append(f"fusing their outer loops is illegal: {fuse['message']}")
            elif fuse["result"] == "refused":
                reasons.append(f"their outer loops cannot be fused: {fuse['message']}")
            elif fuse["result"] == "legal":
                if fuse.get("message"):
                    reasons.append(f"fusing their outer loops is legal, but {fuse['message']}")
                else:
                    reasons.append(f"fusing their outer loops is legal{how}")
                for d in fuse["deeper"]:
                    if d["result"] == "illegal":
                        reasons.append(f"fusing loops {' and '.join(d['loops'])} as well is "
                                       f"illegal: it would violate "
                                       f"{_dep_phrase(d['dependence'])}")
            else:
                reasons.append(f"whether their outer loops can be fused is not known: "
                               f"{fuse['message']}")
        else:
            reasons.append("one of them runs outside any loop")
        apart.append({"statements": [list(a["statements"]), list(b["statements"])],
                      "reasons": reasons, "fuse": fuse,
                      "dependences": _deps_between(schedule, a["statements"],
                                                   b["statements"])})
    return {"strategy": strategy, "groups": groups, "apart": apart}


# ----------------------------------------------------------------- tiles

def _tile_bands(schedule) -> list[isl.ScheduleNode]:
    out = []
    for band in tree.bands(schedule.isl):
        stmts = tree.statements_of(band)
        for node in tree.walk(band.child(0)):
            if node.get_type() == _BAND and tree.statements_of(node) == stmts:
                out.append(band)
                break
    return out


def _footprint(m: isl.Map, itemsize: int | None) -> dict:
    box = range_box(m)
    if box is None:
        return {"bounded": False, "box": None, "offset": None, "elements": None,
                "bytes": None}
    sizes, offset = box
    elements = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    return {"bounded": True, "box": sizes, "offset": offset, "elements": elements,
            "bytes": None if itemsize is None else elements * itemsize}


def _footprints(schedule, band: isl.ScheduleNode, sizes: dict | None) -> list[dict]:
    program = schedule.program
    domain = band.get_domain()
    prefix = band.child(0).get_prefix_schedule_union_map().intersect_domain(domain)
    access = program.reads().union(program.writes()).intersect_domain(domain)
    per_tile = prefix.reverse().apply_range(access).intersect_params(
        program.parameter_domain())
    known = sizes is not None and all(p in sizes for p in program.params)
    out = []
    for m in sorted(maps_of(per_tile), key=lambda m: m.get_tuple_name(isl.dim_type.out)):
        m = m.coalesce()
        name = m.get_tuple_name(isl.dim_type.out)
        try:
            itemsize = int(np.dtype(program.tensor(name).dtype).itemsize)
        except (KeyError, TypeError):
            itemsize = None
        rec = {"tensor": name, "itemsize": itemsize, **_footprint(m, itemsize)}
        if not rec["bounded"]:
            rec["extents"] = extents(m)
            if known:
                fixed = _fix_params(m, sizes)
                if not fixed.is_empty():
                    rec["at_sizes"] = _footprint(fixed, itemsize)
        out.append(rec)
    return out


def _tiles(schedule, sizes: dict | None = None) -> list[dict]:
    out = []
    for band in _tile_bands(schedule):
        fps = _footprints(schedule, band, sizes)
        bounded = all(f["bounded"] and f["bytes"] is not None for f in fps)
        rec = {"band": tree.band_names(band, schedule.program),
               "path": list(tree.path_of(band)),
               "statements": list(tree.statements_of(band)), "footprints": fps,
               "total_elements": sum(f["elements"] for f in fps) if bounded else None,
               "total_bytes": sum(f["bytes"] for f in fps) if bounded else None}
        if not bounded and sizes:
            at = [f if f["bounded"] else f.get("at_sizes") for f in fps]
            if all(a is not None and a["bounded"] and a["bytes"] is not None for a in at):
                rec["total_at_sizes"] = {"elements": sum(a["elements"] for a in at),
                                         "bytes": sum(a["bytes"] for a in at)}
        out.append(rec)
    return out


# ------------------------------------------------------------------ entry

def analyse(schedule, config=None, sizes: dict | None = None) -> dict:
    """The explanation of ``schedule`` as a JSON-serialisable dict (see the
    module docstring); ``config`` (a :class:`~polyc.config.Config`) supplies
    the fusion strategy the automatic schedule was made with; ``sizes``
    (values of every size parameter) adds, for each footprint that grows
    with the sizes, its box at those sizes."""
    loops = [_loop_record(lp, schedule) for lp in schedule.loops()]
    return {"program": schedule.program.name, "start": schedule.start,
            "reassociate": bool(schedule.reassociate),
            "statements": [s.name for s in schedule.program.statements],
            "loops": loops, "sizes": dict(sizes) if sizes else None,
            "fusion": _fusion(schedule, config), "tiles": _tiles(schedule, sizes)}


def explain(schedule, as_json: bool = False, config=None, sizes: dict | None = None):
    """Explain ``schedule``: text (default) or, with ``as_json``, a
    JSON-serialisable dict.  ``config`` is the :class:`~polyc.config.Config`
    the schedule was made under (names the fusion strategy); ``sizes`` gives
    footprints that grow with the sizes at those values."""
    data = analyse(schedule, config, sizes)
    if as_json:
        _json.dumps(data)  # fails loudly here rather than in the caller
        return data
    return format_text(data)


# ----------------------------------------------------------------- text

def _table(rows: list[list[str]], pad: str) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(pad + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def _dep_row(d: dict) -> list[str]:
    if d["distances"]:
        dist = ("distance " if len(d["distances"]) == 1 else "distances ") + \
            ", ".join(_vec(v) for v in d["distances"])
    else:
        dist = "non-uniform"
    return [d["kind"], d["tensor"], f"{d['source']} -> {d['sink']}", dist,
            "reduction" if d["reduction"] else ""]


def _bytes(n) -> str:
    return "" if n is None else f"{n} byte{'' if n == 1 else 's'}"


def _elements(n) -> str:
    return f"{n} element{'' if n == 1 else 's'}"


def format_text(data: dict) -> str:
    """The text form of :func:`analyse`'s dict."""
    lines: list[str] = []
    start = {"isl": "the automatic (isl) schedule", "source": "the source order"}.get(
        data["start"], data["start"])
    n_groups = len(data["fusion"]["groups"])
    lines.append(f"explain {data['program']}: {len(data['loops'])} loop(s), "
                 f"{n_groups} fusion group(s), {len(data['tiles'])} tile band(s)")
    lines.append(f"  starting from {start}; reduction reordering "
                 f"{'allowed' if data['reassociate'] else 'not allowed'}")
    if data.get("sizes"):
        lines.append("  sizes: " + " ".join(f"{k}={v}" for k, v in data["sizes"].items()))
    lines.append("")
    lines.append("loops (outer first)")
    key = 14
    for lp in data["loops"]:
        lines.append(f"  loop {lp['name']}  statements {', '.join(lp['statements'])}; "
                     f"depth {lp['depth']}")
        if lp["carries"]:
            rows = _table([_dep_row(d) for d in lp["carries"]], "")
            lines.append(f"    {'carries'.ljust(key)}{rows[0]}")
            lines.extend(f"    {''.ljust(key)}{r}" for r in rows[1:])
        else:
            lines.append(f"    {'carries'.ljust(key)}nothing")
        par = "yes" if lp["parallel"] else f"no: {lp['parallel_reason']}"
        lines.append(f"    {'parallel'.ljust(key)}{par}")
        if lp["vectorizable"]:
            vec = "yes" + (f", {lp['vectorizable_note']}" if lp["vectorizable_note"] else "")
        else:
            vec = f"no: {lp['vectorizable_reason']}"
        lines.append(f"    {'vectorizable'.ljust(key)}{vec}")
        marked = []
        if lp["marked_parallel"]:
            marked.append("parallel (omp parallel for)")
        if lp["marked_simd_reduction"]:
            marked.append("simd reduction (omp simd reduction)")
        elif lp["marked_simd"]:
            marked.append("simd (omp simd)")
        marked += [f"mark {m}" for m in lp["marks"]]
        lines.append(f"    {'marked'.ljust(key)}{', '.join(marked) or '-'}")
    lines.append("")
    fusion = data["fusion"]
    head = "fusion"
    if fusion["strategy"]:
        head += f" (strategy {fusion['strategy']})"
    lines.append(head)
    rows = []
    for k, g in enumerate(fusion["groups"]):
        loops = f"loops {', '.join(g['loops'])}" if g["loops"] else "outside any loop"
        rows.append([f"group {k + 1}", ", ".join(g["statements"]), loops])
    lines.extend(_table(rows, "  "))
    if not fusion["apart"]:
        lines.append("  every statement runs in one loop nest" if len(fusion["groups"]) == 1
                     else "  (no statements)")
    for ap in fusion["apart"]:
        a, b = (", ".join(x) for x in ap["statements"])
        lines.append(f"  {a} | {b} kept apart:")
        lines.extend(f"    - {r}" for r in ap["reasons"])
        if ap["dependences"]:
            lines.append("    dependences between them:")
            lines.extend(_table([_dep_row(d) for d in ap["dependences"]], "      "))
        else:
            lines.append("    no dependence between them")
    lines.append("")
    lines.append("tiles (footprint of one iteration of the tile band)")
    if not data["tiles"]:
        lines.append("  no tile band (no band has a band of the same statements below it)")
    for t in data["tiles"]:
        lines.append(f"  band ({', '.join(t['band'])})  statements {', '.join(t['statements'])}")
        rows = []
        for f in t["footprints"]:
            if f["bounded"]:
                rows.append([f["tensor"], " x ".join(str(x) for x in f["box"]) or "scalar",
                             _elements(f["elements"]), _bytes(f["bytes"]), ""])
                continue
            shape = " x ".join("*" if e is None else str(e) for e in f["extents"])
            at = f.get("at_sizes")
            note = ""
            if at and at["bounded"]:
                note = (f"at the sizes: {' x '.join(str(x) for x in at['box'])}, "
                        f"{_elements(at['elements'])}" + (f", {_bytes(at['bytes'])}"
                                                        if at["bytes"] is not None else ""))
            rows.append([f["tensor"], shape, "unbounded", "", note])
        if t["total_bytes"] is not None:
            rows.append(["total", "", _elements(t["total_elements"]),
                         _bytes(t["total_bytes"]), ""])
        else:
            at = t.get("total_at_sizes")
            note = (f"at the sizes: {_elements(at['elements'])}, {_bytes(at['bytes'])}"
                    if at else "")
            rows.append(["total", "", "unbounded", "", note])
        lines.extend(_table(rows, "    "))
    return "\n".join(lines) + "\n"


__all__ = ["explain", "analyse", "format_text", "distances", "range_box", "extents"]
