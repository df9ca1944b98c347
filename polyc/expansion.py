"""Scalar expansion: local scalars of a loop program become arrays indexed
by the loops they do not carry a value across.

A scalar written and read inside a loop (``tmp = 0; for k: tmp += ...;
y[i] = tmp``) creates output and anti dependences between every pair of
iterations of the enclosing loops, which would serialise them.  When every
value read in an iteration of loop ``i`` was written in the same iteration
(every flow dependence on the scalar has distance 0 along ``i``), giving each
iteration its own copy (``tmp[i]``) preserves the program's results and
removes those dependences.  The loops are found with isl's dataflow
analysis (``isl_union_access_info_compute_flow``).

Source: P. Feautrier, "Array expansion", ICS 1988; the privatisation test
of Maydan, Amarasinghe and Lam, "Array data-flow analysis and its use in
array privatization", POPL 1993 (here in its exact, polyhedral form).
"""

from __future__ import annotations

from typing import Sequence

import islpy as isl

from . import expr as E
from .errors import UnsupportedError
from .ir import Program, make_statement
from .isl_util import CTX, maps_of


def _common_prefix(paths: list[list[int]]) -> int:
    n = min(len(p) for p in paths)
    for k in range(n):
        if len({p[k] for p in paths}) != 1:
            return k
    return n


def _keeps_prefix(dep: isl.Map, depth: int) -> bool:
    """Whether every pair of ``dep`` agrees on its first ``depth`` input and
    output coordinates."""
    eq = dep
    for k in range(depth):
        c = isl.Constraint.alloc_equality(isl.LocalSpace.from_space(dep.get_space()))
        c = c.set_coefficient_val(isl.dim_type.in_, k, isl.Val.one(CTX))
        c = c.set_coefficient_val(isl.dim_type.out, k, isl.Val.negone(CTX))
        eq = eq.add_constraint(c)
    return dep.is_subset(eq)


def expand_scalars(program: Program, scalars: Sequence[str],
                   paths: dict[str, list[int]]) -> Program:
    """``program`` with each rank-0 temporary of ``scalars`` expanded along
    the outermost loops (common to all its accesses) across which no value
    flows; ``paths[s]`` identifies the loops enclosing statement ``s``,
    outermost first.  Raises :class:`~polyc.errors.UnsupportedError` when a
    scalar may be read before any assignment."""
    program, scalars = split_webs(program, scalars)
    ctx = program.parameter_domain()
    tensors = {t.name: t for t in program.tensors}
    stmts = list(program.statements)
    for name in scalars:
        users = [s for s in stmts if s.tensor == name or name in s.read_tensors()]
        if not users:
            continue
        flow = _scalar_flow(program.replace(statements=tuple(stmts)), name, users)
        unset = flow.get_must_no_source().intersect_params(ctx)
        if not unset.is_empty():
            bad = maps_of(unset)[0]
            st = program.statement(bad.get_tuple_name(isl.dim_type.in_))
            where = f" ({st.span})" if st.span is not None else ""
            raise UnsupportedError(
                f"local scalar {name} may be read before it is assigned, in statement "
                f"'{st.text}'{where}, e.g. at {bad.domain().sample_point()}; assign it "
                "first on every path")
        deps = maps_of(flow.get_may_dependence().intersect_params(ctx))
        depth = _common_prefix([paths[s.name] for s in users])
        while depth > 0 and not all(_keeps_prefix(d, depth) for d in deps):
            depth -= 1
        extents = []
        for k in range(depth):
            ext = _extent(users, k, ctx)
            if ext is None:
                break
            extents.append(ext)
        depth = len(extents)
        if depth == 0:
            continue
        tensors[name] = tensors[name].__class__(name, tensors[name].dtype, tuple(extents),
                                                tensors[name].role)
        shapes = {t.name: t.shape for t in tensors.values()}
        for i, s in enumerate(stmts):
            if s not in users:
                continue
            idx = tuple(E.Index(v) for v in s.iterators[:depth])

            def sub(e, idx=idx):
                if isinstance(e, E.Access) and e.tensor == name and not e.indices:
                    return E.Access(name, idx, e.span)
                return None
            stmts[i] = make_statement(
                name=s.name, iterators=s.iterators, domain=s.domain,
                lhs=E.map_expr(s.lhs, sub), op=s.op, rhs=E.map_expr(s.rhs, sub),
                shapes=shapes, kind=s.kind,
                reduction_iterators=tuple(v for v in s.reduction_iterators
                                          if v not in s.iterators[:depth]),
                text=s.text, span=s.span)
    return program.replace(tensors=tuple(tensors[t.name] for t in program.tensors),
                           statements=tuple(stmts))


def _scalar_flow(program: Program, name: str, users) -> isl.UnionAccessInfo:
    reads = isl.UnionMap.empty(program.context.get_space())
    writes = isl.UnionMap.empty(program.context.get_space())
    for s in users:
        for r in s.reads:
            if r.get_tuple_name(isl.dim_type.out) == name:
                reads = reads.union(isl.UnionMap.from_map(r))
        if s.tensor == name:
            writes = writes.union(isl.UnionMap.from_map(s.write))
    return (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
            .set_schedule(program.original_schedule()).compute_flow())


def split_webs(program: Program, scalars: Sequence[str]) -> tuple[Program, list[str]]:
    """Give each *web* of a reused local scalar its own name.

    A web is a set of statements that write or read the scalar, closed under
    the flow dependences between them (isl dataflow): every value a statement
    reads was written in its web.  A scalar reused by independent loop nests
    (deriche's ``ym1`` in four sweeps) has several webs; renamed apart, each
    is expanded along its own loops by :func:`expand_scalars`, instead of
    one name tying the nests together.  Returns the program and the scalar
    names (the first web keeps the original name).

    Source: webs as in S. Muchnick, *Advanced Compiler Design and
    Implementation*, section 16.3 (du-chains joined at common uses); here the
    du-chains are isl's exact flow dependences."""
    ctx = program.parameter_domain()
    taken = {t.name for t in program.tensors} | set(program.params)
    tensors = list(program.tensors)
    stmts = list(program.statements)
    out: list[str] = []
    for name in scalars:
        users = [s for s in stmts if s.tensor == name or name in s.read_tensors()]
        parent = {s.name: s.name for s in users}

        def find(a: str) -> str:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a
        for d in maps_of(_scalar_flow(program.replace(statements=tuple(stmts)), name, users)
                         .get_may_dependence().intersect_params(ctx)):
            a, b = (find(d.get_tuple_name(t)) for t in (isl.dim_type.in_, isl.dim_type.out))
            parent[a] = b
        webs: dict[str, list[str]] = {}
        for s in users:                                  # program order
            webs.setdefault(find(s.name), []).append(s.name)
        out.append(name)
        tensor = next(t for t in tensors if t.name == name)
        for k, web in enumerate(list(webs.values())[1:], start=1):
            new = f"{name}_{k}"
            while new in taken:
                new += "_"
            taken.add(new)
            out.append(new)
            tensors.append(tensor.__class__(new, tensor.dtype, tensor.shape, tensor.role))
            shapes = {t.name: t.shape for t in tensors}

            def sub(e, new=new):
                if isinstance(e, E.Access) and e.tensor == name:
                    return E.Access(new, e.indices, e.span)
                return None
            for i, s in enumerate(stmts):
                if s.name in web:
                    stmts[i] = make_statement(
                        name=s.name, iterators=s.iterators, domain=s.domain,
                        lhs=E.map_expr(s.lhs, sub), op=s.op, rhs=E.map_expr(s.rhs, sub),
                        shapes=shapes, kind=s.kind,
                        reduction_iterators=s.reduction_iterators, text=s.text, span=s.span)
    return program.replace(tensors=tuple(tensors), statements=tuple(stmts)), out


def _extent(users, k: int, ctx: isl.Set) -> isl.PwAff | None:
    """``1 + max`` of loop coordinate ``k`` over the users' domains (0 when
    they are empty), or ``None`` when the coordinate may be negative."""
    vals = None
    for s in users:
        d = s.domain
        n = d.dim(isl.dim_type.set)
        proj = d.project_out(isl.dim_type.set, k + 1, n - k - 1).project_out(
            isl.dim_type.set, 0, k).reset_tuple_id()
        vals = proj if vals is None else vals.union(proj)
    vals = vals.intersect_params(ctx).coalesce()
    negative = isl.Set.universe(vals.get_space()).upper_bound_val(
        isl.dim_type.set, 0, isl.Val.negone(CTX))
    if not vals.intersect(negative).is_empty():
        return None
    top = vals.dim_max(0).add(_one(vals))
    zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(ctx.get_space()))
    ext = top.union_max(zero.intersect_domain(ctx)).gist_params(ctx).coalesce()
    return ext


def _one(s: isl.Set) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(s.get_space().params())
    return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.one(CTX)))
