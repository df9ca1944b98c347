"""A roofline time for a fusion group: the larger of its arithmetic at the
machine's FMA peak and its memory traffic at the machine's bandwidth
(Williams, Waterman, Patterson, "Roofline", CACM 2009).

Traffic counts the bytes of the tensors that cross the group's boundary
(inputs read once, results written once) plus its internal arrays when they
do not fit the per-core cache (written and read back).  The machine's
figures are ``Config.peak_gflops`` / ``Config.peak_gbs`` (``POLYC_PEAK_GFLOPS``
/ ``POLYC_PEAK_GBS``, e.g. what ``python -m benchmarks.peak`` prints), by
default those of a 2-core AVX2 machine (150 GFLOP/s fp32, 20 GB/s), with
1 MiB of cache per core.
"""

from __future__ import annotations

from ..config import Config
from .core import Graph, Node

CACHE_BYTES = 1 << 20


def traffic(graph: Graph, nodes: list[Node]) -> int:
    """Bytes a group moves to and from memory (see the module docstring)."""
    members = {n.id for n in nodes}
    consumers = graph.consumers()
    outs = {n.id for n in graph.outputs}
    inputs = {i.id: i.nbytes for n in nodes for i in n.inputs if i.id not in members}
    total = sum(inputs.values())
    for n in nodes:
        leaves = n.id in outs or any(c.id not in members for c in consumers[n.id])
        if leaves:
            total += n.nbytes
        elif n.nbytes > CACHE_BYTES:
            total += 2 * n.nbytes
    return total


def seconds(graph: Graph, nodes: list[Node], config: Config) -> float:
    """The group's roofline time in seconds."""
    work = sum(n.flops for n in nodes)
    return max(work / (config.peak_gflops * 1e9), traffic(graph, nodes) / (config.peak_gbs * 1e9))
