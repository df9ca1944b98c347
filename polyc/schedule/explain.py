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
  ``vector_reduction`` mark).  The ``parallel`` / ``simd`` marks the tree
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

import json as _json

import islpy as isl
import numpy as np

from .. import expr as E
from ..access import condition_set
from ..isl_util import fixed_box_hull, maps_of
from . import legality, tree
from .explain_deps import _BAND, _MARK, MAX_DISTANCES, _carried, _dep_phrase, _vec, distances
from .explain_fusion import _fusion as _fusion_groups
from .language import Schedule
from .marks import SIMD, SIMD_REDUCTION, parse_parallel_mark
from .recipe import step_text
from .tensorize import parse_mark
from .tile import _is_pure_reduction_band
from .unroll import loop_below, member_unrolled

# ------------------------------------------------------------ isl helpers


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
    try:
        box = fixed_box_hull(m)
    except isl.Error:
        box = None
    if box is not None:
        return box[1], str(box[0])
    return None


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



def _inner_loop_name(band: isl.ScheduleNode, member: int, names: list[str],
                     program) -> str | None:
    if member < band.band_n_member() - 1:
        return names[member + 1]
    for node in tree.walk(band):
        if node.get_type() == _BAND and not node.is_equal(band):
            return tree.band_names(node, program)[0]
    return None


def _is_pure_reduction(band: isl.ScheduleNode, member: int, program) -> bool:
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
    innermost = all(member_unrolled(band, k) for k in range(lp.member + 1, n)) \
        and not loop_below(band)

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


def _guarded_reads(program) -> list[dict]:
    """The reads inside a branch of ``c ? a : b``: where the condition is
    affine, the read happens only where its branch is taken (its access
    relation, the in-bounds preconditions and the dependences use that part
    of the domain: :func:`polyc.ir.guarded_accesses`); otherwise the read is
    assumed on the whole domain, an over-approximation."""
    out: list[dict] = []
    for st in program.statements:
        if st.kind in ("copy", "intrinsic"):
            continue
        space = st.domain.get_space()

        def visit(x: E.Expr, guards: tuple) -> None:
            if isinstance(x, E.Select):
                visit(x.cond, guards)
                cond = E.to_text(x.cond)
                affine = condition_set(x.cond, space) is not None
                visit(x.then, guards + ((cond, affine, True),))
                visit(x.otherwise, guards + ((cond, affine, False),))
                return
            if isinstance(x, E.Access) and guards:
                out.append({
                    "statement": st.name, "read": E.to_text(x),
                    "conditions": [c if taken else f"!({c})" for c, _, taken in guards],
                    "restricted": all(a for _, a, _ in guards),
                    "not_affine": [c for c, a, _ in guards if not a]})
            for c in x.children():
                visit(c, guards)
        visit(st.rhs, ())
    return out


# ------------------------------------------------------------------ entry

def analyse(schedule, config=None, sizes: dict | None = None) -> dict:
    """The explanation of ``schedule`` as a JSON-serialisable dict (see the
    module docstring); ``config`` (a :class:`~polyc.config.Config`) supplies
    the fusion strategy the automatic schedule was made with; ``sizes``
    (values of every size parameter) adds, for each footprint that grows
    with the sizes, its box at those sizes."""
    if tree.has_extension(schedule.isl):
        # promotion's copy statements hang below extension nodes, which isl's
        # domain queries refuse: explain the loops of the original statements
        schedule = Schedule(schedule.program, schedule.deps,
                            legality.without_extensions(schedule.isl), start=schedule.start,
                            reassociate=schedule.reassociate, base=schedule.base)
    loops = [_loop_record(lp, schedule) for lp in schedule.loops()]
    return {"program": schedule.program.name, "start": schedule.start,
            "reassociate": bool(schedule.reassociate),
            "steps": [step_text(st) for st in schedule.recipe],
            "statements": [s.name for s in schedule.program.statements],
            "loops": loops, "sizes": dict(sizes) if sizes else None,
            "fusion": _fusion_groups(schedule, config), "tiles": _tiles(schedule, sizes),
            "guarded_reads": _guarded_reads(schedule.program)}


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
    if data.get("steps"):
        lines.append(f"  recipe ({len(data['steps'])} step(s), "
                     f"schedule.to_recipe() replays them):")
        lines += [f"    {i}. {st}" for i, st in enumerate(data["steps"], 1)]
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
        for m in lp["marks"]:
            found = parse_mark(m)
            marked.append(f"tensorized: one {found[0]} call computes {found[1]} below it per "
                          f"iteration of the loops above (mark {m})" if found else f"mark {m}")
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
    if data.get("guarded_reads"):
        lines.append("")
        lines.append("guarded reads (inside a branch of ?:)")
        for g in data["guarded_reads"]:
            where = " && ".join(g["conditions"])
            if g["restricted"]:
                note = f"only where {where} (bounds and dependences use that part of the domain)"
            else:
                note = (f"condition {', '.join(g['not_affine'])} is not affine: assumed on the "
                        f"whole domain (an over-approximation of its bounds and dependences)")
            lines.append(f"  {g['statement']}: {g['read']}  {note}")
    return "\n".join(lines) + "\n"


__all__ = ["explain", "analyse", "format_text", "distances", "range_box", "extents",
           "MAX_DISTANCES"]
