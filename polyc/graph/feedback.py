"""What the pipeline says about a candidate fusion group (:func:`feedback`):
the group is lowered as the plan would compile it, up to the optimised
schedule tree (:func:`polyc.pipeline.lower` with ``probe``), and the
planner (:mod:`polyc.graph.plan`) reads its verdicts off the result: the
parallel loops around the hottest statements, the statements that call an
intrinsic, which bands enclose which statements, the temporaries array
contraction turned into per-iteration buffers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import islpy as isl
import numpy as np

from ..config import Config
from ..errors import PolycError
from ..isl_util import sets_of
from ..schedule.marks import parse_parallel_mark
from . import core
from .core import Node
from .lower import compile_group, group_program, group_source


@dataclass
class Feedback:
    """What the pipeline did with one group: ``parallel`` (parallel loops
    around its hottest statements, the fewest over them), ``tensorized``
    (statements calling an intrinsic), ``loops`` (statement -> the bands
    around it), ``statements`` (after tensorization folded some)."""
    parallel: int
    tensorized: int
    loops: dict[str, tuple[int, ...]]
    writers: dict[str, str]
    nests: int
    statements: int = 0
    inlined: tuple[str, ...] = ()
    #: temporaries contracted to per-iteration buffers, by tensor name
    #: (:class:`polyc.schedule.contraction.Contraction`)
    contracted: dict = field(default_factory=dict)
    error: str = ""
    #: isl's scheduler gave up on the group within the probe's limit
    #: (:func:`polyc.schedule.isl_worker.probing`): it, and every group
    #: holding it, is kept apart unlowered
    abandoned: bool = False
    #: statements the GEMM calls run as their tile functions
    #: (``GemmMatch.tile``: an elementwise chain on each finished block of C)
    tiled: int = 0


_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_LEAF = isl.schedule_node_type.leaf


def _schedule_paths(schedule: isl.Schedule) -> tuple[dict[str, set[int]], dict[str, int]]:
    """Per statement: the bands (numbered in tree order) with at least one
    member above it, and the parallel loops above it (collapse depths of
    ``parallel`` marks)."""
    bands: dict[str, set[int]] = {}
    par: dict[str, int] = {}
    counter = [0]

    def walk(node: isl.ScheduleNode, above: frozenset, npar: int) -> None:
        t = node.get_type()
        if t == _BAND and node.band_n_member() > 0:
            counter[0] += 1
            above = above | {counter[0]}
        elif t == _MARK:
            npar += parse_parallel_mark(node.mark_get_id().get_name())
        if t == _LEAF:
            dom = node.get_domain()
            for st in sets_of(dom):
                name = st.get_tuple_name()
                bands.setdefault(name, set()).update(above)
                par[name] = min(par.get(name, npar), npar)
            return
        for k in range(node.n_children()):
            walk(node.child(k), above, npar)
    walk(schedule.get_root(), frozenset(), 0)
    return bands, par


def feedback(graph: core.Graph, nodes: list[Node], config: Config, keep=frozenset(),
             memo=None) -> Feedback:
    """Lower the group ``nodes`` as the plan would compile it (up to the
    optimised schedule tree and the array contraction:
    :func:`polyc.pipeline.lower` with ``probe``) and read the result;
    ``keep``: ids of further nodes whose tensors stay arrays (materialised);
    ``memo``: a :class:`polyc.graph.feedback_memo.FeedbackMemo` made with
    :func:`source_feedback` (a group seen before under other tensor names is
    answered without lowering)."""
    src = group_source(graph, nodes, kept(graph, nodes) | set(keep), "probe")
    return memo(src) if memo is not None else source_feedback(src, config)


def source_feedback(src, config: Config) -> Feedback:
    """:func:`feedback` of a group's generated source
    (:class:`polyc.graph.lower.GroupSource`).  For ``target="cuda"`` the
    group goes through the CUDA pipeline's lowering instead
    (:func:`polyc.gpu_pipeline.lower_gpu`: tensor-core calls, the mapping
    to blocks and threads): ``parallel`` counts the loops mapped to blocks
    and threads around the hottest statements, ``tensorized`` the
    tensor-core GEMM calls, and nothing is contracted (that pass is the C
    backend's)."""
    from ..pipeline import lower
    from ..schedule import isl_worker
    try:
        with isl_worker.probing() as probe:
            if config.target == "cuda":
                from ..gpu_pipeline import lower_gpu
                low = lower_gpu(group_program(src), config)
            else:
                low = lower(group_program(src), config, probe=True)
    except PolycError as e:
        return Feedback(0, 0, {}, {}, 0, error=str(e).splitlines()[0])
    if probe["abandoned"]:
        return Feedback(0, 0, {}, {}, 0, abandoned=True, error=(
            f"isl's scheduler did not finish within {isl_worker.PROBE_LIMIT_S:g} s of CPU "
            "on it (the planner's limit, POLYC_ISL_PROBE_TIMEOUT)"))
    bands, par_of = _schedule_paths(low.schedule)
    program = low.program
    if config.target == "cuda":     # (the program before promotion's copy statements)
        program = low.view[0]
        par_of = {st: len(k.tile) for k in low.kernels for st in k.statements}

    def node_of(stmt) -> str:
        m = re.match(r"S(\d+)", stmt.name)
        k = int(m.group(1)) if m else -1
        return src.line_nodes[k] if 0 <= k < len(src.line_nodes) else stmt.tensor
    writers = {s.name: node_of(s) for s in program.statements}
    depth = {s.name: len(s.iterators) for s in program.statements}
    hot_depth = max(depth.values(), default=0)
    hot = [s for s, d in depth.items() if d == hot_depth and s in par_of]
    par = min((par_of[s] for s in hot), default=0)
    calls = [s for s in program.statements if s.kind == "intrinsic"]
    tiled = sum(len(getattr(s.intrinsic, "tile", ())) for s in calls)
    return Feedback(par, len(calls), {s: tuple(b) for s, b in bands.items()}, writers, 0,
                    len(program.statements), src.inlined,
                    {c.tensor: c for c in low.contracted}, tiled=tiled)


def contracted_record(graph: core.Graph, fb: Feedback) -> dict[str, dict]:
    """The explain record of the contractions in ``fb``: bytes of the array
    at the traced sizes and of the buffer that replaced it."""
    nodes = {n.name: n for n in graph.ops}
    return {name: {"bytes_before": nodes[name].nbytes if name in nodes else None,
                   "bytes_after": c.nbytes, "loop": c.loop, "depth": c.depth,
                   "buffer": "scalar" if c.scalar else "x".join(map(str, c.sizes))}
            for name, c in sorted(fb.contracted.items())}


def kept(graph: core.Graph, nodes: list[Node]) -> set[int]:
    """Ids of the group's nodes whose tensors leave it (graph outputs, or
    read by another group)."""
    members = {n.id for n in nodes}
    outs = {n.id for n in graph.outputs}
    consumers = graph.consumers()
    return {n.id for n in nodes if n.id in outs or
            any(c.id not in members for c in consumers[n.id])}


def shares_loop(fb: Feedback, a: set[str], b: set[str]) -> bool:
    """Whether some loop of the group in ``fb`` runs statements of the
    operations ``a`` and of the operations ``b`` (a fusion gained)."""
    la = {f for s, fs in fb.loops.items() if fb.writers.get(s, "") in a for f in fs}
    lb = {f for s, fs in fb.loops.items() if fb.writers.get(s, "") in b for f in fs}
    return bool(la & lb)


def measured_seconds(graph: core.Graph, nodes: list[Node], config: Config) -> float:
    """The median time (seconds) of the group's kernel on seeded random
    inputs at the traced sizes (``Config.plan == "measure"``;
    :func:`polyc.testing.median_time`: a warm-up call, then 0.2 s or 5 calls)."""
    from ..testing import median_time
    src = group_source(graph, nodes, kept(graph, nodes), f"{graph.name}_measure")
    kernel = compile_group(src, config)
    rng = np.random.default_rng(0)
    args = [rng.random(tuple(s.value for s in n.shape)).astype(n.dtype) + 0.5
            if n.kind != "captured" else core.mask_input(n.value) for n in src.inputs]
    sizes = [graph.symbols.values[graph.symbols.find(s)] for s in src.size_args]
    return median_time(lambda: kernel(*args, *sizes), min_time=0.2, max_reps=200)[0]
