"""The fusion planner: which operations of a :class:`~polyc.graph.core.Graph`
compile together into one kernel, decided from polyhedral feedback.

Every operation starts as its own group.  Candidates are producer→consumer
pairs of groups (a group reads a tensor the other writes) whose merge
creates no cycle, ordered by the bytes of the intermediate tensors that
would stay inside the group (computed at the traced sizes).  For each
candidate the merged group is lowered through the real pipeline
(:func:`polyc.pipeline.lower`: exact dependences, isl's scheduler, row
fusion, tiling, tensorization, parallel marks) and the verdict is read off
the result, never off an op-pattern list:

* **fused**: some loop of the merged nest encloses statements of both
  parts (otherwise isl kept them in separate nests, and nothing is gained);
* **parallelism**: the parallel loops around the merged group's hottest
  statements are at least those of the poorer part (fusion never turns a
  parallel nest sequential);
* **tensorization**: every contraction that reached the GEMM micro-kernel
  in a part still does in the merged group.

The first accepted candidate merges; candidates are recomputed and the
search repeats until none is accepted.  Every decision is a record of
:class:`Decision` (``Plan.explain()``, ``Plan.to_dict()``).  The schedule
of a merged group is legal by construction (the pipeline checks it
against the exact dependences with :mod:`polyc.schedule.legality`).
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import Config
from ..errors import PolycError
from ..loopnest import Block, For, If, Local, StmtInstance
from .core import Graph, Node
from .lower import GroupSource, compile_group, group_program, group_source


@dataclass
class Feedback:
    """What the pipeline did with one group: ``parallel`` (parallel loops
    around its hottest statements, the fewest over them), ``tensorized``
    (statements calling an intrinsic), ``loops`` (statement -> ids of the
    loops around it), ``nests`` (outermost loop nests)."""
    parallel: int
    tensorized: int
    loops: dict[str, tuple[int, ...]]
    writers: dict[str, str]
    nests: int
    error: str = ""


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

    def to_dict(self) -> dict:
        return {"producer": self.producer, "consumer": self.consumer, "verdict": self.verdict,
                "rule": self.rule, "bytes_kept_in_group": self.bytes_kept,
                "parallel_loops": self.parallel, "tensorized": self.tensorized,
                "lines": self.lines}


@dataclass
class Group:
    nodes: list[Node]

    @property
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
                 config: Config) -> None:
        self.graph, self.groups, self.decisions, self.config = graph, groups, decisions, config
        self.sources: list[GroupSource] = []
        outs = {n.id for n in graph.outputs}
        consumers = graph.consumers()
        for k, g in enumerate(groups):
            members = g.key
            keep = {n.id for n in g.nodes if n.id in outs or
                    any(c.id not in members for c in consumers[n.id])}
            self.sources.append(group_source(graph, g.nodes, keep, f"{graph.name}_g{k}"))
        self.kernels: list[Any] | None = None

    # -- compile and run --------------------------------------------------------------
    def compile(self) -> Plan:
        if self.kernels is None:
            self.kernels = [compile_group(s, self.config) for s in self.sources]
        return self

    def run(self, arrays: dict[str, Any], sizes: dict[int, int]) -> dict[str, Any]:
        """Execute the kernels; ``arrays``: argument/captured tensor name ->
        array; ``sizes``: symbol representative -> extent.  Returns every
        tensor produced, by name."""
        self.compile()
        env = dict(arrays)
        for src, kernel in zip(self.sources, self.kernels):
            args = [np.reshape(env[n.name], (1,)) if not n.shape and n.dtype.kind in "iu"
                    else env[n.name] for n in src.inputs]      # see lower.group_source
            args += [sizes[s] for s in src.size_args]
            res = kernel(*args)
            if len(src.outputs) == 1:
                res = (res,)
            for n, r in zip(src.outputs, res):
                env[n.name] = r
        return env

    # -- explain ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        groups = []
        for g, s in zip(self.groups, self.sources):
            groups.append({
                "name": s.name, "ops": [n.op for n in g.nodes],
                "tensors": [n.name for n in g.nodes],
                "lines": sorted({str(n.location) for n in g.nodes}),
                "inputs": [n.name for n in s.inputs], "outputs": [n.name for n in s.outputs],
                "temporaries": list(s.temps)})
        specialised = {f"N{r}": {"value": self.graph.symbols.values[r], "why": why}
                       for r, why in sorted(self.graph.symbols.fixed.items())}
        return {"graph": self.graph.name, "kernels": len(self.groups), "groups": groups,
                "decisions": [d.to_dict() for d in self.decisions],
                "specialised_sizes": specialised}

    def to_json(self) -> str:
        return _json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def explain(self) -> str:
        d = self.to_dict()
        lines = [f"graph {d['graph']}: {d['kernels']} kernel(s)"]
        for g in d["groups"]:
            lines.append(f"  kernel {g['name']}: {' -> '.join(g['ops'])}  "
                         f"(lines {', '.join(g['lines'])})")
            if g["temporaries"]:
                lines.append(f"    internal tensors: {', '.join(g['temporaries'])}")
        lines.append("decisions (largest intermediate first):")
        for rec in self.decisions:
            lines.append(f"  {'+'.join(rec.producer)} -> {'+'.join(rec.consumer)}: "
                         f"{rec.verdict} ({rec.rule}; {rec.bytes_kept} bytes)")
        if d["specialised_sizes"]:
            lines.append("specialised sizes:")
            for k, v in d["specialised_sizes"].items():
                lines.append(f"  {k} = {v['value']}: {v['why']}")
        return "\n".join(lines)


# -- feedback ---------------------------------------------------------------------------
def _loops(nest) -> dict[str, list[For]]:
    out: dict[str, list[For]] = {}

    def walk(node, stack):
        if isinstance(node, For):
            walk(node.body, stack + [node])
        elif isinstance(node, If):
            walk(node.then, stack)
            if node.otherwise is not None:
                walk(node.otherwise, stack)
        elif isinstance(node, Block):
            for c in node.children:
                walk(c, stack)
        elif isinstance(node, Local):
            walk(node.body, stack)
        elif isinstance(node, StmtInstance):
            out.setdefault(node.statement, stack)
    walk(nest, [])
    return out


def feedback(graph: Graph, nodes: list[Node], config: Config) -> Feedback:
    """Lower the group ``nodes`` (all of its tensors kept) and read the result."""
    from ..pipeline import lower
    src = group_source(graph, nodes, {n.id for n in nodes}, "probe")
    try:
        low = lower(group_program(src), config)
    except PolycError as e:
        return Feedback(0, 0, {}, {}, 0, error=str(e).splitlines()[0])
    loops = _loops(low.loopnest)
    writers = {s.name: s.tensor for s in low.program.statements}
    depth = {s.name: len(s.iterators) for s in low.program.statements}
    hot_depth = max(depth.values(), default=0)
    hot = [s for s, d in depth.items() if d == hot_depth and s in loops]
    par = min((sum(f.collapse if f.parallel else 0 for f in loops[s]) for s in hot), default=0)
    tens = sum(1 for s in low.program.statements if s.kind == "intrinsic")
    nests = len(low.loopnest.children) if isinstance(low.loopnest, Block) else 1
    return Feedback(par, tens, {s: tuple(id(f) for f in fs) for s, fs in loops.items()},
                    writers, nests)


def _tensors(nodes: list[Node]) -> set[str]:
    return {n.name for n in nodes} | {h for n in nodes for h, _ in n.helpers}


def _shares_loop(fb: Feedback, a: set[str], b: set[str]) -> bool:
    la = {f for s, fs in fb.loops.items() if fb.writers.get(s, "") in a for f in fs}
    lb = {f for s, fs in fb.loops.items() if fb.writers.get(s, "") in b for f in fs}
    return bool(la & lb)


def plan(graph: Graph, config: Config | None = None) -> Plan:
    """The fusion plan of ``graph`` (see the module docstring)."""
    config = config or Config.from_env()
    groups = [Group([n]) for n in graph.ops]
    decisions: list[Decision] = []
    cache: dict[frozenset, Feedback] = {}
    refused: set[tuple[frozenset, frozenset]] = set()

    def fb(g: Group) -> Feedback:
        if g.key not in cache:
            cache[g.key] = feedback(graph, g.nodes, config)
        return cache[g.key]

    outputs = {n.id for n in graph.outputs}
    while True:
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

        def reaches(a: int, b: int, skip_direct: bool) -> bool:
            stack = [x for x in succ.get(a, ()) if not (skip_direct and x == b)]
            seen = set()
            while stack:
                x = stack.pop()
                if x == b:
                    return True
                if x in seen:
                    continue
                seen.add(x)
                stack.extend(succ.get(x, ()))
            return False

        cands = sorted(((b, p, c) for (p, c), b in edges.items()
                        if (groups[p].key, groups[c].key) not in refused
                        and not reaches(p, c, True)),
                       key=lambda t: (-t[0], t[1], t[2]))
        merged = False
        for nbytes, p, c in cands:
            P, C = groups[p], groups[c]
            M = Group(sorted(P.nodes + C.nodes, key=lambda n: n.id))
            fp, fc, fm = fb(P), fb(C), fb(M)
            rec = Decision([n.name for n in P.nodes], [n.name for n in C.nodes], "kept apart",
                           "", nbytes,
                           {"producer": fp.parallel, "consumer": fc.parallel, "fused": fm.parallel},
                           {"producer": fp.tensorized, "consumer": fc.tensorized,
                            "fused": fm.tensorized},
                           sorted({str(n.location) for n in M.nodes}))
            if fm.error:
                rec.rule = f"the merged group does not compile: {fm.error}"
            elif not _shares_loop(fm, _tensors(P.nodes), _tensors(C.nodes)):
                rec.rule = ("no common loop: isl's scheduler keeps them in separate nests "
                            "(no fusion that respects the dependences and keeps the "
                            "parallelism)")
            elif fm.parallel < min(fp.parallel, fc.parallel):
                rec.rule = (f"fusion would lose parallel loops ({fm.parallel} < "
                            f"{min(fp.parallel, fc.parallel)})")
            elif fm.tensorized < fp.tensorized + fc.tensorized:
                rec.rule = "a contraction would leave the GEMM micro-kernel"
            else:
                rec.verdict = "fused"
                rec.rule = (f"common loop nest, {fm.parallel} parallel loop(s) kept"
                            + (", contractions still tensorized" if fm.tensorized else ""))
            decisions.append(rec)
            if rec.verdict == "fused":
                groups[p] = M
                groups.pop(c)
                merged = True
                break
            refused.add((P.key, C.key))
        if not merged:
            break
    order = sorted(groups, key=lambda g: min(n.id for n in g.nodes))
    del outputs
    return Plan(graph, _toposort(order), decisions, config)


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
