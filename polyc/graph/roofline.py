"""A roofline time for a fusion group: the larger of its arithmetic at the
machine's FMA peak and its memory traffic at the machine's bandwidth
(Williams, Waterman, Patterson, "Roofline", CACM 2009).

Traffic counts the bytes of the tensors that cross the group's boundary
(inputs read once, results written once) plus its internal arrays when they
do not fit the per-core cache (written and read back), unless array
contraction turned them into per-iteration buffers.  The machine's
figures are ``Config.peak_gflops`` / ``Config.peak_gbs`` (``POLYC_PEAK_GFLOPS``
/ ``POLYC_PEAK_GBS``, e.g. what ``python -m benchmarks.peak`` prints), by
default those of a 2-core AVX2 machine (150 GFLOP/s fp32, 20 GB/s), with
1 MiB of cache per core.
"""

from __future__ import annotations

from ..config import Config
from .core import Graph, Node

CACHE_BYTES = 1 << 20

#: Below this roofline time (seconds) a group's work is comparable to the
#: cost of one kernel call (argument binding, allocation of the results, the
#: OpenMP fork: 2-10 us measured warm), so the planner merges two such groups
#: into one kernel even when their nests share no loop.
SMALL_GROUP_S = 20e-6


def traffic(graph: Graph, nodes: list[Node], contracted=()) -> int:
    """Bytes a group moves to and from memory (see the module docstring);
    the internal arrays named in ``contracted`` live in per-iteration
    buffers (:mod:`polyc.schedule.contraction`) and move nothing."""
    members = {n.id for n in nodes}
    consumers = graph.consumers()
    outs = {n.id for n in graph.outputs}
    inputs = {i.id: i.nbytes for n in nodes for i in n.inputs if i.id not in members}
    total = sum(inputs.values())
    for n in nodes:
        leaves = n.id in outs or any(c.id not in members for c in consumers[n.id])
        if leaves:
            total += n.nbytes
        elif n.nbytes > CACHE_BYTES and n.name not in contracted:
            total += 2 * n.nbytes
    return total


def seconds(graph: Graph, nodes: list[Node], config: Config, contracted=()) -> float:
    """The group's roofline time in seconds (``contracted``: see :func:`traffic`)."""
    work = sum(n.flops for n in nodes)
    return max(work / (config.peak_gflops * 1e9),
               traffic(graph, nodes, contracted) / (config.peak_gbs * 1e9))
