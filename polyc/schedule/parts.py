"""The statement instances a group of intrinsic calls computes.

A call over a triangular domain computes only the full part of its blocks
of rows (:mod:`polyc.callbox`, ``GemmMatch.parts``); the other instances of
its statements (the diagonal edge) keep their loops.  These helpers restrict
a program's statements to such parts, give the edges, and read which
instances of a statement reach a node of a schedule tree (a filter above it
may split them).  :func:`as_updates` reads a loop program's ``X = X + e``
as the update it is, so that a call can compute it.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from .. import expr as E
from ..access import condition_set, make_statement
from ..intrinsics import GemmMatch, called_elements
from ..ir import Program, Statement
from ..isl_util import NonAffineError


def restricted(program: Program, m: GemmMatch) -> Program:
    """``program`` with the statements of ``m``'s group restricted to the
    instances its calls compute (``GemmMatch.parts``; ``program`` itself
    when the calls compute all of them)."""
    if not m.parts:
        return program
    return with_domains(program, dict(m.parts))


def with_domains(program: Program, domains: dict) -> Program:
    """``program`` with statement ``name``'s domain (and access relations)
    restricted to ``domains[name]``."""
    def cut(s: Statement) -> Statement:
        d = domains.get(s.name)
        if d is None:
            return s
        return replace(s, domain=d, write=s.write.intersect_domain(d),
                       reads=tuple(r.intersect_domain(d) for r in s.reads))
    return program.replace(statements=tuple(cut(s) for s in program.statements))


def edges(program: Program, m: GemmMatch) -> dict:
    """Per statement of ``m``'s group whose calls compute only part of it
    (``GemmMatch.parts``), its other instances (they keep their loops)."""
    return {name: program.statement(name).domain.subtract(part).coalesce()
            for name, part in m.parts}


def written_part(program: Program, m: GemmMatch, st: Statement) -> isl.Set:
    """The instances of ``st`` that write an element the calls of ``m``
    (over its ``parts``) write (also where the reduction is empty)."""
    written = called_elements(restricted(program, m), m).range()
    return st.domain.intersect(st.write.intersect_range(written).domain()).coalesce()


def reached(program: Program, names, node: isl.ScheduleNode) -> dict:
    """Per statement of ``names`` that only part of reaches ``node`` (a
    filter above it splits the statement's instances: the full part of a
    triangular domain, :mod:`polyc.callbox`), the instances that do."""
    reach = node.get_domain()
    ctx = program.parameter_domain()
    out = {}
    for name in names:
        st = program.statement(name)
        got = reach.extract_set(st.domain.get_space())
        if not got.intersect_params(ctx).is_equal(st.domain.intersect_params(ctx)):
            out[name] = got.coalesce()
    return out


def guarded_product(program: Program, s: Statement) -> Statement | None:
    """``s`` (``C += (cond ? P : 0)``, ``cond`` affine: a causal mask) as the
    update ``C += P`` over the instances where ``cond`` holds (the others
    add 0), or ``None``."""
    rhs = s.rhs
    if s.kind != "update" or s.op != "+" or not isinstance(rhs, E.Select) \
            or not (isinstance(rhs.otherwise, E.Const) and float(rhs.otherwise.value) == 0.0):
        return None
    cond = condition_set(rhs.cond, s.domain.get_space())
    if cond is None:
        return None
    dom = s.domain.intersect(cond).coalesce()
    shapes = {t.name: t.shape for t in program.tensors}
    try:
        return make_statement(name=s.name, iterators=s.iterators, domain=dom, lhs=s.lhs,
                              op="+", rhs=rhs.then, shapes=shapes, kind="update",
                              reduction_iterators=s.reduction_iterators,
                              text=f"{E.to_text(rhs.cond)}", span=s.span)
    except NonAffineError:
        return None


def as_updates(program: Program, names=None) -> Program:
    """``program`` with each assignment ``X[i] = X[i] + e`` where ``e``
    reads ``X`` too (of ``names``: all when ``None``) as the update ``X[i]
    += e`` with no reduction
    iterators: the same instances, accesses and dependences (a loop
    program writes ``+=`` as an assignment when ``e`` reads ``X`` too:
    PolyBench's ``trmm``), so that :func:`polyc.intrinsics.match_gemm`
    can match it.  The call then sums in the micro-kernel's order, as
    for any tensorized reduction."""
    def update(s: Statement) -> Statement:
        if s.kind != "assign" or not accumulates(s) or (names is not None
                                                         and s.name not in names) \
                or s.tensor not in {a.tensor for a in E.accesses(s.rhs.rhs)}:
            return s
        return replace(s, kind="update", op="+", rhs=s.rhs.rhs, reduction_iterators=())
    return program.replace(statements=tuple(update(s) for s in program.statements))


def accumulates(s: Statement) -> bool:
    """Whether assignment ``s`` is ``X[i] = X[i] + e``."""
    return (isinstance(s.rhs, E.Binary) and s.rhs.op == "+" and isinstance(s.rhs.lhs, E.Access)
            and s.rhs.lhs.tensor == s.tensor and s.rhs.lhs.indices == s.lhs.indices)


def updates_read(program: Program) -> list[str]:
    """The statements of ``program`` that :func:`as_updates` may have made:
    updates ``X[i] += e`` without reduction iterators whose ``e`` reads
    ``X`` (a recipe records them, so that its replay onto the loop program
    reads them the same way)."""
    return [s.name for s in program.statements
            if s.kind == "update" and s.op == "+" and not s.reduction_iterators
            and s.tensor in {a.tensor for a in E.accesses(s.rhs)}]
