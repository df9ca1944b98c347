"""The fusion planner: which operations of a :class:`~polyc.graph.core.Graph`
compile together into one kernel, decided from polyhedral feedback.

Every operation starts as its own group.  Candidates are producer→consumer
pairs of groups (a group reads a tensor the other writes) whose merge
creates no cycle, ordered by the bytes of the intermediate tensors that
would stay inside the group (computed at the traced sizes), then by the
merged group's operations, fewest first (cheap lowerings that repeat).
For each candidate the merged group is lowered through the real pipeline
(:func:`polyc.pipeline.lower`: exact dependences, isl's scheduler, row
fusion, tiling, tensorization, parallel marks) and the verdict is read off
the result, never off an op-pattern list:

* **fused**: some loop of the merged nest encloses statements of both
  parts (otherwise isl kept them in separate nests, and nothing is gained);
* **parallelism**: the parallel loops around the merged group's hottest
  statements are at least those of the poorer part (fusion never turns a
  parallel nest sequential);
* **tensorization**: every contraction that reached the GEMM micro-kernel
  (for CUDA: a GEMM call) in a part still does in the merged group.

What a candidate group is lowered to is read by :mod:`polyc.graph.feedback`
(for ``target="cuda"`` through the CUDA pipeline: loops mapped to blocks
and threads count as parallel).
The first accepted candidate merges; candidates are recomputed and the
search repeats until none is accepted.  Every decision is a record of
:class:`Decision` (``Plan.explain()``, ``Plan.to_dict()``).  The schedule
of a merged group is legal by construction (the pipeline checks it
against the exact dependences with :mod:`polyc.schedule.legality`).
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..config import Config
from . import core
from . import roofline as roof
from .candidates import grown_from_refused, reachability, siblings
from .core import Node, mask_input
from .feedback import (
    Feedback,
    contracted_record,
    feedback,
    kept,
    measured_seconds,
    shares_loop,
    source_feedback,
)
from .feedback_memo import FeedbackMemo
from .lower import compile_groups, group_program, group_source
from .workspace import Workspace

#: The most operations one fusion group may hold.  Every candidate merge is
#: lowered through the whole pipeline, whose cost grows with the group, so
#: without a limit a long program (a time loop traced step by step) that
#: fuses into one group costs time quadratic in its length to plan; with it,
#: linear.  A larger candidate is kept apart without lowering it.
MAX_GROUP_OPS = 64


class Graph(core.Graph):
    """A traced graph (:class:`polyc.graph.core.Graph`) that explains its
    fusion plan; what :func:`polyc.graph.trace` returns."""

    def explain(self, json: bool = False, config: Config | None = None):
        """The fusion plan of this graph (:func:`plan`), as text or, with
        ``json=True``, a dict of records."""
        p = plan(self, config)
        return p.to_dict() if json else p.explain()


@dataclass
class Decision:
    """One candidate and its verdict."""
    producer: list[str]
    consumer: list[str]
    verdict: str                 # "fused" | "kept apart"
    rule: str
    bytes_kept: int
    parallel: dict[str, int] = field(default_factory=dict)
    tensorized: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    kind: str = "producer-consumer"      # or "sibling", "user edit"
    #: roofline times (seconds) of the two groups apart and of the merge
    predicted_s: dict[str, float] = field(default_factory=dict)
    #: measured times (seconds; ``Config.plan == "measure"``)
    measured_s: dict[str, float] = field(default_factory=dict)
    #: tensors of the merged group contracted to per-iteration buffers:
    #: name -> {"bytes_before", "bytes_after", "loop", "depth"}
    contracted: dict[str, dict] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "producer": self.producer, "consumer": self.consumer,
                "verdict": self.verdict, "rule": self.rule,
                "bytes_kept_in_group": self.bytes_kept, "parallel_loops": self.parallel,
                "tensorized": self.tensorized, "lines": self.lines,
                "predicted_us": {k: round(v * 1e6, 3) for k, v in self.predicted_s.items()},
                "measured_us": {k: round(v * 1e6, 3) for k, v in self.measured_s.items()},
                "contracted": self.contracted}


@dataclass
class Group:
    nodes: list[Node]         # never changed: a merge makes a new group

    @cached_property
    def key(self) -> frozenset[int]:
        return frozenset(n.id for n in self.nodes)

    @property
    def label(self) -> str:
        return "+".join(n.op for n in self.nodes)


class Plan:
    """The groups of a graph, in execution order, with the decisions that
    made them.  :meth:`compile` builds one kernel per group; :meth:`run`
    executes them."""

    def __init__(self, graph: Graph, groups: list[Group], decisions: list[Decision],
                 config: Config, keep: set[int] = frozenset(),
                 feedback: dict | None = None) -> None:
        self.graph, self.groups, self.decisions, self.config = graph, groups, decisions, config
        self.extra_keep = set(keep)
        #: the planner's feedback per group (node ids), reused by explain
        self._feedback = dict(feedback or {}) if not keep else {}
        self.sources = [group_source(graph, g.nodes, kept(graph, g.nodes) | (
            self.extra_keep & g.key), f"{graph.name}_g{k}") for k, g in enumerate(groups)]
        self.kernels: list[Any] | None = None
        self._workspace: Workspace | None = None

    # -- compile and run --------------------------------------------------------------
    def compile(self) -> Plan:
        if self.kernels is None:
            self.kernels = compile_groups(self.sources, self.config)
        return self

    def run(self, arrays: dict[str, Any], sizes: dict[int, int], *,
            reuse: bool = False) -> dict[str, Any]:
        """Execute the kernels; ``arrays``: argument/captured tensor name ->
        array; ``sizes``: symbol representative -> extent.  Returns every
        tensor produced, by name.  ``reuse=True`` (what ``@polyc.jit`` calls
        do) places the intermediates, the tensors the function does not
        return, in buffers kept for the next call of this shape class
        (:mod:`polyc.graph.workspace`): their arrays in the result are then
        valid only until that call."""
        self.compile()
        env = {k: mask_input(v) for k, v in arrays.items()}
        ws = self.workspace if reuse else None
        key = tuple(sorted(sizes.items()))
        buffers = ws.acquire(key) if ws is not None else None
        try:
            for src, kernel in zip(self.sources, self.kernels):
                args = [np.reshape(env[n.name], (1,)) if not n.shape and n.dtype.kind in "iu"
                        else env[n.name] for n in src.inputs]      # see lower.group_source
                args += [sizes[s] for s in src.size_args]
                into = getattr(kernel, "call_into", None) if buffers is not None else None
                if into is not None:
                    res = into(tuple(args), [buffers.get(n.name) for n in src.outputs])
                else:
                    res = kernel(*args)
                if len(src.outputs) == 1:
                    res = (res,)
                for n, r in zip(src.outputs, res):
                    env[n.name] = r
        finally:
            if ws is not None:
                ws.release(key, buffers, env)
        return env

    @property
    def workspace(self) -> Workspace:
        """The buffers kept for the intermediates between calls."""
        if self._workspace is None:
            self._workspace = Workspace(self.sources, {n.name for n in self.graph.outputs})
        return self._workspace

    # -- explain ----------------------------------------------------------------------
    def _group_feedback(self, g: Group) -> Feedback:
        if g.key not in self._feedback:
            self._feedback[g.key] = feedback(self.graph, g.nodes, self.config,
                                             self.extra_keep & g.key)
        return self._feedback[g.key]

    def to_dict(self) -> dict:
        groups = []
        for g, s in zip(self.groups, self.sources):
            fb = self._group_feedback(g)
            groups.append({
                "name": s.name, "ops": [n.op for n in g.nodes],
                "tensors": [n.name for n in g.nodes],
                "lines": sorted({str(n.location) for n in g.nodes}),
                "inputs": [n.name for n in s.inputs], "outputs": [n.name for n in s.outputs],
                "materialized": sorted(n.name for n in g.nodes if n.id in self.extra_keep),
                "temporaries": [t for t in s.temps if t not in fb.contracted],
                "inlined": list(s.inlined), "contracted": contracted_record(self.graph, fb),
                "windows": self._windows(len(groups))})
        specialised = {f"N{r}": {"value": self.graph.symbols.values[r], "why": why}
                       for r, why in sorted(self.graph.symbols.fixed.items())}
        return {"graph": self.graph.name, "kernels": len(self.groups), "groups": groups,
                "decisions": [d.to_dict() for d in self.decisions],
                "specialised_sizes": specialised}

    def _windows(self, k: int) -> list[dict]:
        """The thread windows of kernel ``k`` (:mod:`polyc.schedule.windows`),
        once the kernels are compiled; ``[]`` before."""
        if self.kernels is None or not hasattr(self.kernels[k], "_low"):
            return []
        return [{"tensor": w.tensor, "rows": w.rows, "dim": w.dim, "loop": w.loop}
                for w in self.kernels[k]._low().windows]

    def to_json(self) -> str:
        """The plan as JSON text; :func:`from_dict` replays it (byte-identical
        kernels), possibly after a hand edit of its ``groups``."""
        return _json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def edit(self, *, fuse=(), keep_apart=(), materialize=()) -> Plan:
        """See :func:`edit`."""
        return edit(self, fuse=fuse, keep_apart=keep_apart, materialize=materialize)

    def explain(self) -> str:
        d = self.to_dict()
        lines = [f"graph {d['graph']}: {d['kernels']} kernel(s)"]
        for g in d["groups"]:
            lines.append(f"  kernel {g['name']}: {' -> '.join(g['ops'])}  "
                         f"(lines {', '.join(g['lines'])})")
            if g["temporaries"]:
                lines.append(f"    internal arrays: {', '.join(g['temporaries'])}")
            if g["windows"]:
                lines.append("    one window per thread (rows of the parallel loops' iteration): "
                             + ", ".join(f"{w['tensor']} ({w['rows']} rows of dim {w['dim']}, "
                                         f"loops c0..{w['loop']})" for w in g["windows"]))
            if g["inlined"]:
                lines.append(f"    contracted to scalars (computed where read once): "
                             f"{', '.join(g['inlined'])}")
            by_loop: dict[tuple, list[str]] = {}
            for t, c in g["contracted"].items():
                size = (f"{c['bytes_before']} -> {c['bytes_after']} bytes"
                        if c["bytes_before"] is not None else f"{c['bytes_after']} bytes")
                by_loop.setdefault((c["loop"], c["depth"]), []).append(
                    f"{t} ({c['buffer']}, {size})")
            for (loop, depth), items in by_loop.items():
                where = (f"per-iteration buffers of loop {loop} (depth {depth})" if depth
                         else "buffers of the kernel's body (no loop around them)")
                lines.append(f"    contracted to {where}: {', '.join(items)}")
        lines.append("decisions (largest intermediate first):")
        for rec in self.decisions:
            arrow = " & " if rec.kind == "sibling" else " -> "
            pred = (f"; roofline {rec.predicted_s['apart'] * 1e6:.1f} -> "
                    f"{rec.predicted_s['fused'] * 1e6:.1f} us") if rec.predicted_s else ""
            lines.append(f"  {'+'.join(rec.producer)}{arrow}{'+'.join(rec.consumer)}: "
                         f"{rec.verdict} ({rec.rule}; {rec.bytes_kept} bytes{pred})")
        if d["specialised_sizes"]:
            lines.append("specialised sizes:")
            for k, v in d["specialised_sizes"].items():
                lines.append(f"  {k} = {v['value']}: {v['why']}")
        return "\n".join(lines)


# -- feedback ---------------------------------------------------------------------------
def _tensors(nodes: list[Node]) -> set[str]:
    """The nodes' names (statements are mapped to the node they compute)."""
    return {n.name for n in nodes}


def plan(graph: Graph, config: Config | None = None, *, fuse: bool = True) -> Plan:
    """The fusion plan of ``graph`` (see the module docstring); ``fuse=False``
    gives one kernel per operation (the unfused baseline)."""
    config = config or Config.from_env()
    groups = [Group([n]) for n in graph.ops]
    decisions: list[Decision] = []
    cache: dict[frozenset, Feedback] = {}
    refused: set[tuple[frozenset, frozenset]] = set()
    # (the refusals because isl kept the parts in separate nests: the ones a
    # side's growth by unrelated operations leaves standing)
    separate: set[tuple[frozenset, frozenset]] = set()
    memo = FeedbackMemo(lambda src: source_feedback(src, config), config)
    gemm = "GEMM call" if config.target == "cuda" else "GEMM micro-kernel"
    abandoned: list[frozenset] = []      # groups isl's scheduler gave up on

    def fb(g: Group) -> Feedback:
        if g.key not in cache:     # (a group holding one of them: refused unlowered)
            held = next((k for k in abandoned if k <= g.key), None)
            f = cache[g.key] = cache[held] if held else feedback(graph, g.nodes, config, memo=memo)
            if f.abandoned and held is None:
                abandoned.append(g.key)
        return cache[g.key]

    while fuse:
        owner = {n.id: k for k, g in enumerate(groups) for n in g.nodes}
        edges: dict[tuple[int, int], int] = {}
        for k, g in enumerate(groups):
            for n in g.nodes:
                for i in dict.fromkeys(n.inputs):
                    if i.id in owner and owner[i.id] != k:
                        p = owner[i.id]
                        edges[(p, k)] = edges.get((p, k), 0) + i.nbytes
        succ: dict[int, set[int]] = {}
        for p, c in edges:
            succ.setdefault(p, set()).add(c)

        reach = reachability(len(groups), succ)

        def reaches(a: int, b: int, skip_direct: bool) -> bool:
            return any(reach[x] >> b & 1 for x in succ.get(a, ())
                       if not (skip_direct and x == b))

        cands = [(b, p, c, "producer-consumer") for (p, c), b in edges.items()
                 if (groups[p].key, groups[c].key) not in refused
                 and not reaches(p, c, True)]
        cands += siblings(groups, owner, refused, reaches)
        cands.sort(key=lambda t: (-t[0], len(groups[t[1]].nodes + groups[t[2]].nodes),
                                  t[1], t[2]))
        merged = False
        for nbytes, p, c, kind in cands:
            P, C = groups[p], groups[c]
            M = Group(sorted(P.nodes + C.nodes, key=lambda n: n.id))
            if len(M.nodes) > MAX_GROUP_OPS:
                decisions.append(Decision(
                    [n.name for n in P.nodes], [n.name for n in C.nodes], "kept apart",
                    f"the merged group would have {len(M.nodes)} operations, more than "
                    f"the planner's limit of {MAX_GROUP_OPS}", nbytes,
                    lines=sorted({str(n.location) for n in M.nodes}), kind=kind))
                refused.add((P.key, C.key))
                continue
            before = grown_from_refused(P, C, separate)
            if before is not None:
                grown = P if before < P.key else C
                side = ("one group" if kind != "producer-consumer"
                        else "the producer" if grown is P else "the consumer")
                decisions.append(Decision(
                    [n.name for n in P.nodes], [n.name for n in C.nodes], "kept apart",
                    f"no common loop when refused before; since then {side}"
                    " gained only operations that share no tensor with the other side ("
                    + ", ".join(n.name for n in grown.nodes if n.id not in before)
                    + "), so the merge is not lowered again",
                    nbytes, lines=sorted({str(n.location) for n in M.nodes}), kind=kind))
                refused.add((P.key, C.key))
                separate.add((P.key, C.key))
                continue
            fp, fc, fm = fb(P), fb(C), fb(M)
            rec = Decision([n.name for n in P.nodes], [n.name for n in C.nodes], "kept apart",
                           "", nbytes,
                           {"producer": fp.parallel, "consumer": fc.parallel, "fused": fm.parallel},
                           {"producer": fp.tensorized, "consumer": fc.tensorized,
                            "fused": fm.tensorized},
                           sorted({str(n.location) for n in M.nodes}), kind=kind,
                           predicted_s={"apart": roof.seconds(graph, P.nodes, config,
                                                              fp.contracted)
                                        + roof.seconds(graph, C.nodes, config, fc.contracted),
                                        "fused": roof.seconds(graph, M.nodes, config,
                                                              fm.contracted)},
                           contracted=contracted_record(graph, fm))
            newly = sorted(set(fm.contracted) - set(fp.contracted) - set(fc.contracted))
            # (each tensor newly computed where it is read removes its statement)
            inlined_now = set(fm.inlined) - set(fp.inlined) - set(fc.inlined)
            if fm.error:
                rec.rule = f"the merged group does not compile: {fm.error}"
            elif fm.tensorized and fm.tiled > fp.tiled + fc.tiled and \
                    fm.statements + len(inlined_now) < fp.statements + fc.statements:
                rec.verdict = "fused"
                rec.rule = ("elementwise chain run by the GEMM call on each finished block "
                            "of C (its tile function)")
            elif fm.tensorized and \
                    fm.statements + len(inlined_now) < fp.statements + fc.statements:
                rec.verdict = "fused"
                rec.rule = f"epilogue folded into the {gemm}'s store"
            elif (_tensors(P.nodes) | _tensors(C.nodes)) & set(fm.inlined) - \
                    set(fp.inlined) - set(fc.inlined) and fm.parallel >= min(
                        fp.parallel, fc.parallel):
                rec.verdict = "fused"
                rec.rule = ("computed inside its reader's statement (contracted to a scalar), "
                            f"{fm.parallel} parallel loop(s) kept")
            elif not shares_loop(fm, _tensors(P.nodes), _tensors(C.nodes)) and \
                    rec.predicted_s["fused"] < roof.SMALL_GROUP_S and \
                    fm.parallel >= min(fp.parallel, fc.parallel) and \
                    fm.tensorized >= fp.tensorized + fc.tensorized:
                rec.verdict = "fused"
                rec.rule = (f"small group (roofline {rec.predicted_s['fused'] * 1e6:.1f} us < "
                            f"{roof.SMALL_GROUP_S * 1e6:.0f} us): one kernel call instead of "
                            f"two, its nests in sequence (no common loop)")
            elif not shares_loop(fm, _tensors(P.nodes), _tensors(C.nodes)):
                rec.rule = ("no common loop: isl's scheduler keeps them in separate nests "
                            "(no fusion that respects the dependences and keeps the "
                            "parallelism)")
            elif fm.parallel < min(fp.parallel, fc.parallel):
                rec.rule = (f"fusion would lose parallel loops ({fm.parallel} < "
                            f"{min(fp.parallel, fc.parallel)})")
            elif fm.tensorized < fp.tensorized + fc.tensorized:
                rec.rule = f"a contraction would leave the {gemm}"
            elif rec.predicted_s["fused"] > rec.predicted_s["apart"] * 1.0001:
                rec.rule = "the roofline predicts the fused group slower"
            else:
                rec.verdict = "fused"
                rec.rule = (f"common loop nest, {fm.parallel} parallel loop(s) kept"
                            + (", contractions still tensorized" if fm.tensorized else "")
                            + "".join(f", {fm.contracted[t].describe()}" for t in newly))
            if rec.verdict == "fused" and config.plan == "measure":
                rec.measured_s = {"apart": measured_seconds(graph, P.nodes, config)
                                  + measured_seconds(graph, C.nodes, config),
                                  "fused": measured_seconds(graph, M.nodes, config)}
                if rec.measured_s["fused"] > rec.measured_s["apart"]:
                    rec.verdict = "kept apart"
                    rec.rule = "measured slower fused: " + rec.rule
            decisions.append(rec)
            if rec.verdict == "fused":
                groups[p] = M
                groups.pop(c)
                merged = True
                break
            refused.add((P.key, C.key))
            if rec.rule.startswith("no common loop"):
                separate.add((P.key, C.key))
        if not merged:
            break
    order = sorted(groups, key=lambda g: min(n.id for n in g.nodes))
    return Plan(graph, _toposort(order), decisions, config, feedback=cache)


def _toposort(groups: list[Group]) -> list[Group]:
    owner = {n.id: k for k, g in enumerate(groups) for n in g.nodes}
    deps = {k: {owner[i.id] for n in g.nodes for i in n.inputs
                if i.id in owner and owner[i.id] != k} for k, g in enumerate(groups)}
    out, done = [], set()
    while len(out) < len(groups):
        for k in range(len(groups)):
            if k not in done and deps[k] <= done:
                out.append(groups[k])
                done.add(k)
                break
        else:
            raise AssertionError("cycle among fusion groups")
    return out


# -- plans as data: replay and edits ----------------------------------------------------
def from_dict(graph: Graph, data: dict | str, config: Config | None = None) -> Plan:
    """The plan whose groups ``data`` lists (:meth:`Plan.to_dict` or its
    JSON, possibly edited by hand), rebuilt on ``graph``: the same groups
    give byte-identical kernels.  Raises :class:`~polyc.errors.ScheduleError`
    when a group names an unknown tensor, leaves an operation out, names one
    twice, or when the groups depend on each other in a cycle, and for JSON
    of another form.  A group is a dict as :meth:`Plan.to_dict` writes it
    (its ``"tensors"``, and its ``"materialized"`` tensors kept in memory)
    or, written by hand, just the list of the tensors it computes."""
    from ..errors import ScheduleError
    if isinstance(data, str):
        try:
            data = _json.loads(data)
        except ValueError as e:
            raise ScheduleError(f"plan JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("groups", []), list):
        raise ScheduleError("plan JSON: expected an object whose \"groups\" is a list "
                            "(what plan.to_json() writes)")
    by_name = {n.name: n for n in graph.ops}
    seen: set[str] = set()
    groups, keep = [], set()
    for g in data.get("groups", []):
        if isinstance(g, list):
            g = {"tensors": g}
        names, kept_names = (g.get("tensors", []), g.get("materialized", [])) \
            if isinstance(g, dict) else (None, None)
        if not isinstance(names, list) or not isinstance(kept_names, list) or not all(
                isinstance(t, str) for t in names + kept_names):
            raise ScheduleError(f"plan JSON: a group is a list of tensor names or an object "
                                f"with a \"tensors\" list of names, not {g!r:.80}")
        nodes = []
        for t in names:
            if t not in by_name:
                raise ScheduleError(f"plan group {g.get('name', '?')}: no operation writes "
                                    f"{t!r} in graph {graph.name} (operations: "
                                    f"{', '.join(by_name)})")
            if t in seen:
                raise ScheduleError(f"plan: {t!r} is in two groups")
            seen.add(t)
            nodes.append(by_name[t])
        for t in kept_names:
            if t not in names:
                raise ScheduleError(f"plan group {g.get('name', '?')}: materialized tensor "
                                    f"{t!r} is not one of the group's tensors")
            keep.add(by_name[t].id)
        if nodes:
            groups.append(Group(sorted(nodes, key=lambda n: n.id)))
    missing = [t for t in by_name if t not in seen]
    if missing:
        raise ScheduleError(f"plan: no group computes {', '.join(missing)}")
    order = _toposort_checked(groups)
    return Plan(graph, order, [], config or Config.from_env(), keep=keep)


def _toposort_checked(groups: list[Group]) -> list[Group]:
    from ..errors import ScheduleError
    try:
        return _toposort(groups)
    except AssertionError:
        owner = {n.id: k for k, g in enumerate(groups) for n in g.nodes}
        cyc = [g.label for k, g in enumerate(groups)
               if any(owner.get(i.id, k) != k for n in g.nodes for i in n.inputs)]
        raise ScheduleError("plan: these groups depend on each other in a cycle (a group "
                            "would have to run both before and after another): "
                            + "; ".join(cyc)) from None


def edit(p: Plan, *, fuse: tuple = (), keep_apart: tuple = (),
         materialize: tuple = ()) -> Plan:
    """``p`` with user decisions applied and re-checked.

    ``fuse``: pairs of tensors whose groups become one; the fusion of their
    loops is checked against the exact dependences with the schedule
    language's ``fuse`` (:mod:`polyc.schedule.fusion`), and an illegal one
    raises :class:`~polyc.errors.IllegalScheduleError` naming the violated
    dependence with an instance pair.  ``keep_apart``: pairs ``(a, b)`` in
    one group; ``b`` and everything in the group computed from it move to a
    group of their own.  ``materialize``: tensors that must leave their
    group (written to memory and returned to the plan).  Raises
    :class:`~polyc.errors.ScheduleError` for unknown tensors or a cycle."""
    from ..errors import IllegalScheduleError, ScheduleError
    from ..schedule.language import Schedule
    groups = [Group(list(g.nodes)) for g in p.groups]
    by_name = {n.name: n for n in p.graph.ops}

    def node(t: str) -> Node:
        if t not in by_name:
            raise ScheduleError(f"plan edit: no operation writes {t!r} (operations: "
                                f"{', '.join(by_name)})")
        return by_name[t]

    def owner(n: Node) -> int:
        return next(k for k, g in enumerate(groups) if n in g.nodes)
    decisions = list(p.decisions)
    for a, b in fuse:
        na, nb = node(a), node(b)
        ka, kb = owner(na), owner(nb)
        if ka == kb:
            continue
        merged = Group(sorted(groups[ka].nodes + groups[kb].nodes, key=lambda n: n.id))
        src = group_source(p.graph, merged.nodes, kept(p.graph, merged.nodes), "edit")
        prog = group_program(src)
        try:
            Schedule.from_program(prog).fuse(a, b)
        except IllegalScheduleError as e:
            lines = sorted({str(n.location) for n in (na, nb)})
            raise IllegalScheduleError(f"plan edit fuse({a!r}, {b!r}) at "
                                       f"{', '.join(lines)}: {e}") from None
        groups = [g for k, g in enumerate(groups) if k not in (ka, kb)] + [merged]
        decisions.append(Decision([a], [b], "fused", "user edit: fuse (checked)", 0))
    for a, b in keep_apart:
        na, nb = node(a), node(b)
        k = owner(na)
        if owner(nb) != k:
            continue
        moved = {nb.id}
        for n in groups[k].nodes:
            if any(i.id in moved for i in n.inputs):
                moved.add(n.id)
        if na.id in moved:
            raise ScheduleError(f"plan edit keep_apart({a!r}, {b!r}): {a} is computed from "
                                f"{b}; name the producer first")
        rest = [n for n in groups[k].nodes if n.id not in moved]
        out = [n for n in groups[k].nodes if n.id in moved]
        groups[k] = Group(rest)
        groups.append(Group(out))
        decisions.append(Decision([a], [b], "kept apart", "user edit: keep_apart", 0))
    new = Plan(p.graph, _toposort_checked(groups), decisions, p.config,
               keep={node(t).id for t in materialize} | p.extra_keep)
    return new
