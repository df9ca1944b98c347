"""Exact dependences of a :class:`polyc.ir.Program`.

Takes an ``ir.Program`` and returns :class:`Dependences`: flow (read after
write), anti (write after read) and output (write after write) relations
between statement instances, as ``isl.UnionMap`` s, computed by isl's
dataflow analysis (``isl_union_access_info_compute_flow``, Feautrier's
array dataflow analysis as implemented in isl) against the program's original
sequential schedule.  Reduction dependences (the self-dependences of a
reduction update through its accumulator) are also reported separately so that
later passes may treat them specially; in this version they stay validity
constraints.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from .ir import Program
from .isl_util import maps_of, param_space

KINDS = ("flow", "anti", "output")


@dataclass(frozen=True)
class Dependences:
    """Dependence relations ``{ S[i] -> T[j] }`` (``S[i]`` runs first in the
    original program).  ``reduction`` is the part of ``flow | anti | output``
    between instances of one reduction update through its own accumulator."""
    flow: isl.UnionMap
    anti: isl.UnionMap
    output: isl.UnionMap
    reduction: isl.UnionMap

    def all(self) -> isl.UnionMap:
        """Every dependence: the validity constraints of any schedule."""
        return self.flow.union(self.anti).union(self.output)

    def by_kind(self) -> dict[str, isl.UnionMap]:
        return {"flow": self.flow, "anti": self.anti, "output": self.output}

    def between(self, src: str, dst: str) -> dict[str, isl.UnionMap]:
        """The dependences from statement ``src`` to statement ``dst``, by kind."""
        out = {}
        for kind, umap in self.by_kind().items():
            sel = isl.UnionMap.empty(umap.get_space())
            for m in maps_of(umap):
                if (m.get_tuple_name(isl.dim_type.in_) == src
                        and m.get_tuple_name(isl.dim_type.out) == dst):
                    sel = sel.union(isl.UnionMap.from_map(m))
            out[kind] = sel
        return out

    def __str__(self) -> str:
        lines = []
        for kind, umap in self.by_kind().items():
            lines.append(f"{kind}:")
            maps = sorted(str(m) for m in maps_of(umap))
            lines.extend(f"  {m}" for m in maps) if maps else lines.append("  (none)")
        return "\n".join(lines)



def carried_in(program: Program) -> set[str]:
    """The tensors ``program`` both writes and reads from before it runs
    (a read with no source in the program, ``isl_union_flow_get_may_no_source``,
    of a tensor some statement writes): calling it again on the same arrays
    reads what the last call wrote (an in-place update, a time-stepped
    stencil), so its results and its speed drift from call to call."""
    flow = (isl.UnionAccessInfo.from_sink(program.reads())
            .set_must_source(program.writes())
            .set_schedule(program.original_schedule()).compute_flow())
    exposed = flow.get_may_no_source().intersect_params(program.parameter_domain())
    read: set[str] = set()
    exposed.foreach_map(lambda m: read.add(m.get_tuple_name(isl.dim_type.out))
                        if not m.is_empty() else None)
    return read & {s.tensor for s in program.statements}


def compute(program: Program) -> Dependences:
    """Compute the exact dependences of ``program``.

    * flow: sinks are the reads, must-sources the writes (all writes of a
      program are exact);
    * output: sinks and must-sources the writes (only the last writer before
      each write: the rest follows by transitivity);
    * anti: sinks the writes, may-sources the reads, later writes killing
      (so each read depends only on the next write of the element).

    Only parameter values in ``program.parameter_domain()`` (the context and
    the in-bounds preconditions) are kept.

    Source: isl manual, "Dependence Analysis" (``isl_union_access_info``).

    Equal programs (equal :meth:`~polyc.ir.Program.fingerprint`) share one
    result (:data:`_COMPUTED`, the last few): the tuner rebuilds each
    candidate's schedule from the same program.
    """
    key = program.fingerprint()
    if key not in _COMPUTED:
        if len(_COMPUTED) >= 16:
            _COMPUTED.pop(next(iter(_COMPUTED)))
        _COMPUTED[key] = _compute(program)
    return _COMPUTED[key]


#: fingerprint -> the :class:`Dependences` of that program (immutable).
_COMPUTED: dict[str, Dependences] = {}


def _compute(program: Program) -> Dependences:
    sched = program.original_schedule()
    reads, writes = program.reads(), program.writes()

    flow = (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
            .set_schedule(sched).compute_flow())
    flow_dep = flow.get_may_dependence()

    out = (isl.UnionAccessInfo.from_sink(writes).set_must_source(writes)
           .set_schedule(sched).compute_flow())
    output_dep = out.get_may_dependence()

    anti = (isl.UnionAccessInfo.from_sink(writes).set_may_source(reads)
            .set_kill(writes).set_schedule(sched).compute_flow())
    anti_dep = anti.get_may_dependence()

    reduction = isl.UnionMap.empty(param_space(program.params))
    for s in program.statements:
        if s.kind == "update" and s.reduction_iterators:
            self_space = s.domain.get_space().map_from_set()
            for dep in (flow_dep, anti_dep, output_dep):
                part = dep.extract_map(self_space)
                reduction = reduction.union(isl.UnionMap.from_map(part))

    # only parameter values the program is defined for (context and in-bounds
    # preconditions) matter: schedules are computed under the same assumption
    ctx = program.parameter_domain()
    return Dependences(flow=flow_dep.intersect_params(ctx).coalesce(),
                       anti=anti_dep.intersect_params(ctx).coalesce(),
                       output=output_dep.intersect_params(ctx).coalesce(),
                       reduction=reduction.intersect_params(ctx).coalesce())
