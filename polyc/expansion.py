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
from .access import make_statement
from .errors import UnsupportedError
from .ir import Program
from .isl_util import CTX, maps_of, pw_aff_to_expr


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


def expand_array(program: Program, name: str) -> Program | str:
    """``program`` (a loop program, with a source order) with array ``name``
    expanded along the outermost loops around all its accesses across which
    no value of it flows: ``sum(p)`` written and read inside ``for r: for
    q:`` becomes the temporary ``sum_x(r, q, p)`` (PolyBench's ``doitgen``,
    whose one-dimensional accumulator keeps each ``(r, q)`` iteration a
    vector-matrix product: expanded, all of them are one matrix product).
    When ``name`` is an argument, a last statement copies the last
    iteration's values back (every iteration must write the same elements).
    Returns the reason instead when a read of ``name`` may see a value from
    before the loops or from another iteration, or the loops do not start
    at 0.

    Source: Feautrier, "Array expansion", ICS 1988 (the privatisation test
    on isl's exact dataflow, as :func:`expand_scalars`)."""
    if program.order is None:
        return "the program has no source order"
    ctx = program.parameter_domain()
    users = [s for s in program.statements if s.tensor == name or name in s.read_tensors()]
    times = program.order.get_map()
    depth = min(len(s.iterators) for s in users)
    for s in users:             # the loops around every access: leading time dims
        tm = maps_of(times.intersect_domain(isl.UnionSet.from_set(s.domain)))[0]
        depth = min(depth, tm.dim(isl.dim_type.out))
        while depth > 0 and not _keeps_prefix(tm, depth):
            depth -= 1
    flow = _scalar_flow(program, name, users)
    if not flow.get_may_no_source().intersect_params(ctx).is_empty():
        return f"a read of {name} may see a value from before the program"
    deps = maps_of(flow.get_may_dependence().intersect_params(ctx))
    while depth > 0 and not all(_keeps_prefix(d, depth) for d in deps):
        depth -= 1
    extents = [_extent(users, k, ctx) for k in range(depth)]
    if depth == 0 or any(e is None for e in extents):
        return f"a value of {name} flows from one iteration of the loops around it to another"
    tensor = program.tensor(name)
    taken = {t.name for t in program.tensors} | set(program.params)
    new = f"{name}_x"
    while new in taken:
        new += "_"
    tensors = list(program.tensors) + [tensor.__class__(new, tensor.dtype,
                                                        tuple(extents) + tuple(tensor.shape),
                                                        "temp")]
    shapes = {t.name: t.shape for t in tensors}
    stmts = []
    for s in program.statements:
        if s not in users:
            stmts.append(s)
            continue
        idx = tuple(E.Index(v) for v in s.iterators[:depth])

        def sub(e, idx=idx):
            if isinstance(e, E.Access) and e.tensor == name:
                return E.Access(new, idx + tuple(e.indices), e.span)
            return None
        stmts.append(make_statement(
            name=s.name, iterators=s.iterators, domain=s.domain, lhs=E.map_expr(s.lhs, sub),
            op=s.op, rhs=E.map_expr(s.rhs, sub), shapes=shapes, kind=s.kind,
            reduction_iterators=tuple(v for v in s.reduction_iterators
                                      if v not in s.iterators[:depth]),
            text=f"{s.text} ({name} expanded to {new})", span=s.span))
    program = program.replace(tensors=tuple(tensors), statements=tuple(stmts))
    if tensor.role == "temp":
        return program
    return _copy_back(program, name, new, depth, extents)


def _copy_back(program: Program, name: str, new: str, depth: int, extents) -> Program | str:
    """``program`` with a last statement ``name(e) = new(last..., e)``: the
    values of the last iteration of the ``depth`` expanded loops (extents
    ``extents``) back into the argument ``name``, over the elements every
    iteration writes (the reason instead when iterations write different
    elements)."""
    ctx = program.parameter_domain()
    written = None           # { [loops] -> name[e] }
    for s in program.statements:
        if s.tensor != new:
            continue
        w = s.write.intersect_domain(s.domain)
        w = w.project_out(isl.dim_type.in_, depth, w.dim(isl.dim_type.in_) - depth) \
            .reset_tuple_id(isl.dim_type.in_)
        w = w.project_out(isl.dim_type.out, 0, depth).set_tuple_name(isl.dim_type.out, name)
        written = w if written is None else written.union(w)
    elements = written.range()
    if not written.intersect_params(ctx).is_equal(isl.Map.from_domain_and_range(
            written.domain(), elements).intersect_params(ctx)):
        return f"the iterations of the loops around {name} write different elements of it"
    ndim = elements.dim(isl.dim_type.set)
    taken = set(program.params) | {t.name for t in program.tensors}
    iters = []
    for d in range(ndim):
        it = f"e{d}"
        while it in taken:
            it += "_"
        iters.append(it)
    stname = f"S{len(program.statements)}"
    while stname in {s.name for s in program.statements}:
        stname += "_"
    domain = elements.set_tuple_name(stname)
    for d, it in enumerate(iters):
        domain = domain.set_dim_name(isl.dim_type.set, d, it)
    runs = ctx              # only where every expanded loop runs at least once
    for ext in extents:
        runs = runs.intersect(ext.ge_set(_one_param(ext)))
    domain = domain.intersect_params(runs)
    sizes = set(program.params)
    last = [E.map_expr(pw_aff_to_expr(ext.sub(_one_param(ext)).gist_params(runs), runs),
                       lambda e: E.Param(e.name) if isinstance(e, E.Index)
                       and e.name in sizes else None)
            for ext in extents]
    idx = tuple(E.Index(it) for it in iters)
    shapes = {t.name: t.shape for t in program.tensors}
    st = make_statement(name=stname, iterators=iters, domain=domain.coalesce(),
                        lhs=E.Access(name, idx), op="=",
                        rhs=E.Access(new, tuple(last) + idx), shapes=shapes,
                        text=f"{name}[...] = {new}[last iteration, ...] (array expansion)")
    band = isl.Schedule.from_domain(isl.UnionSet.from_set(st.domain))
    if ndim:
        ident = isl.MultiAff.identity(st.domain.get_space().map_from_set())
        band = band.insert_partial_schedule(isl.MultiUnionPwAff.from_union_pw_multi_aff(
            isl.UnionPwMultiAff.from_multi_aff(ident)).intersect_domain(
                isl.UnionSet.from_set(st.domain)))
    return program.replace(statements=program.statements + (st,),
                           order=program.order.sequence(band))


def _one_param(pa: isl.PwAff) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(pa.get_domain_space())
    return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.one(CTX)))
