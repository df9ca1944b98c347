"""Tensorization: statements that match an intrinsic become calls of it.

Each statement is matched against the intrinsics of :mod:`polyc.intrinsics`
by its access relations (isl map equality, up to the order of the
dimensions and the transposition of the operands).  A matched statement is
replaced by an ``intrinsic`` statement whose iteration domain keeps only the
loops around the call (the batch iterators of a batched matmul) and whose
access relations are the whole slices the call reads and writes (isl
projections of the original relations), so the dependences, the scheduler,
fusion and the legality check see the call as what it is; a ``+=!``
initialisation right before it is folded into the call.  Statements that do
not match keep their loops; :func:`tensorize` returns why, and the
generated source and ``explain`` report it.

Before::

    S0_init: C[m, n] = 0                     for m, n
    S0:      C[m, n] += A[m, k] * B[k, n]    for m, n, k

After::

    S0: polyc_gemm(C <- A . B)               once (no loop left)

Source: TVM's ``tensorize`` schedule primitive and the polyhedral matching
of Bondhugula et al. (see :mod:`polyc.intrinsics`).
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from .. import expr as E
from ..intrinsics import GemmMatch, match_epilogue, match_gemm
from ..ir import Program, Statement


def _projection(stmt: Statement, name: str, keep: list[str], alias: list[str]) -> isl.Map:
    """``{ stmt[iterators] -> name[alias] }`` keeping the iterators ``keep``
    (renamed ``alias``), built with isl's API: the names are user text
    (``NAN`` or ``infty`` would read as values in isl's syntax)."""
    space = stmt.domain.get_space()
    ls = isl.LocalSpace.from_space(space)
    target = isl.Space.set_from_params(space.params()).add_dims(isl.dim_type.set, len(keep))
    target = target.set_tuple_name(isl.dim_type.set, name)
    affs = isl.AffList.alloc(space.get_ctx(), len(keep))
    for it in keep:
        affs = affs.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, stmt.iterators.index(it)))
    proj = isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(
        isl.Space.map_from_domain_and_range(space, target), affs))
    for i, a in enumerate(alias):
        proj = proj.set_dim_name(isl.dim_type.out, i, a)
    return proj


def _call(program: Program, m: GemmMatch) -> Statement:
    stmt = program.statement(m.statement)
    init = program.statement(m.init) if m.init else None
    batch = list(m.batch)
    proj = _projection(stmt, stmt.name, batch, batch)
    # the calls run wherever the output has elements: with the
    # initialisation folded, also when the reduction is empty (K = 0)
    if init is not None:
        c_pos = [i.name for i in stmt.lhs.indices]
        init_batch = [init.lhs.indices[c_pos.index(b)].name for b in batch]
        write = init.write.apply_domain(_projection(init, stmt.name, init_batch, batch))
        domain = write.domain()
    else:
        write = stmt.write.apply_domain(proj)
        domain = stmt.domain.apply(proj)
    reads = [r.apply_domain(proj) for r in stmt.reads
             if init is None or r.get_tuple_name(isl.dim_type.out) != stmt.tensor]
    if m.bias:
        bias = program.statement(m.epilogue)
        reads += [r.apply_domain(_projection(bias, stmt.name, [], [])) for r in bias.reads
                  if r.get_tuple_name(isl.dim_type.out) == m.bias]
    return Statement(name=stmt.name, iterators=tuple(batch), domain=domain.coalesce(),
                     lhs=E.Access(stmt.tensor, ()), op="=", rhs=E.Const(0.0),
                     write=write.coalesce(), reads=tuple(r.coalesce() for r in reads),
                     kind="intrinsic", text=f"{stmt.text} [{m.describe()}]",
                     span=stmt.span, intrinsic=m)


def tensorize(program: Program, parallel: bool = True) -> tuple[Program, dict[str, str]]:
    """``program`` with every statement that matches an intrinsic replaced by
    calls of it, and per update statement what happened (the match, or why
    it did not match).  ``parallel=False`` makes every call run on one
    thread (``Config.parallel``).  Programs with an explicit source order (loop
    programs, ``Program.order``) are left alone: a call there would need the
    order tree rewritten around it."""
    notes: dict[str, str] = {}
    if program.order is not None:
        return program, {s.name: f"{s.name} not tensorized: loop programs are not "
                                 "tensorized yet" for s in program.statements
                         if s.kind == "update"}
    matches: list[GemmMatch] = []
    for s in program.statements:
        if s.kind != "update":
            continue
        m = match_gemm(program, s)
        if isinstance(m, GemmMatch):
            m = replace(match_epilogue(program, m), parallel=parallel)
            matches.append(m)
            notes[s.name] = m.describe()
        else:
            notes[s.name] = f"{s.name} not tensorized: {m}"
    if not matches:
        return program, notes
    folded = {m.init for m in matches if m.init} | {m.epilogue for m in matches if m.epilogue}
    calls = {m.statement: _call(program, m) for m in matches}
    stmts = tuple(calls.get(s.name, s) for s in program.statements if s.name not in folded)
    return program.replace(statements=stmts), notes
