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

from ..dependence import Dependences
from ..errors import IllegalScheduleError
from ..ir import Program
from ..isl_util import maps_of


def schedule_order(schedule: isl.Schedule) -> isl.UnionMap:
    """Pairs ``{ a -> b }`` of statement instances with ``a`` scheduled
    strictly before ``b`` (``isl_union_map_lex_lt_union_map`` of the flattened
    schedule)."""
    smap = schedule.get_map()
    return smap.lex_lt_union_map(smap)


def violations(schedule: isl.Schedule, deps: Dependences) -> dict[str, isl.UnionMap]:
    """The dependences, by kind, whose source does not run before its sink."""
    before = schedule_order(schedule)
    out = {}
    for kind, dep in deps.by_kind().items():
        bad = dep.subtract(before)
        if not bad.is_empty():
            out[kind] = bad
    return out


def describe_instance_pair(m: isl.Map) -> str:
    """One concrete pair of ``m`` as text: ``S0[m=0, k=1] -> S0[m=0, k=0]
    (with M=1, K=2)``."""
    pt = m.wrap().sample_point()
    space = m.get_space()
    def coord(dt, i):
        return int(pt.get_coordinate_val(dt, i).to_python())
    params = [f"{space.get_dim_name(isl.dim_type.param, i)}={coord(isl.dim_type.param, i)}"
              for i in range(space.dim(isl.dim_type.param))]
    n_in = space.dim(isl.dim_type.in_)
    wrapped = pt.get_space()
    vals = [coord(isl.dim_type.set, i) for i in range(wrapped.dim(isl.dim_type.set))]

    def side(dt, vs):
        names = [space.get_dim_name(dt, i) or f"i{i}" for i in range(len(vs))]
        tup = space.get_tuple_name(dt)
        return f"{tup}[{', '.join(f'{n}={v}' for n, v in zip(names, vs))}]"
    text = f"{side(isl.dim_type.in_, vals[:n_in])} -> {side(isl.dim_type.out, vals[n_in:])}"
    return text + (f" (with {', '.join(params)})" if params else "")


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
        f"{describe_instance_pair(m)} would run in the wrong order.\n"
        f"violated dependences: {bad[kind]}")


def carried_at(schedule_prefix: isl.UnionMap, deps: isl.UnionMap) -> isl.UnionMap:
    """The dependences not already ordered by ``schedule_prefix`` (a partial
    schedule as a union map): those equal on the prefix."""
    eq = schedule_prefix.apply_range(schedule_prefix.reverse())
    return deps.intersect(eq)
