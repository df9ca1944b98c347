"""The fusion part of :func:`polyc.schedule.explain.explain`: the fusion
groups of a schedule (the statements sharing each outermost loop nest) and,
for neighbouring groups left apart, what kept them apart -- the fusion
strategy, the dependence that makes fusing their outer loops illegal (found
by trying :func:`polyc.schedule.fusion.fuse` on a copy of the schedule), or
the parallelism a legal fusion would cost.
"""

from __future__ import annotations

import islpy as isl

from ..errors import IllegalScheduleError, PolycError
from ..isl_util import maps_of
from . import tree
from .explain_deps import _BAND, _LEAF, _MARK, _carried, _dep_phrase, _dep_record


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
