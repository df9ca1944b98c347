"""Intrinsic calls over blocks of rows of a domain that is not a box.

A contraction over a triangular domain (PolyBench's ``syrk``: ``C(i, j) +=
alpha * A(i, k) * A(j, k)`` for ``j <= i``) is no GEMM as a whole, but its
instances split into blocks of ``rows`` consecutive rows ``i`` whose *full
part* is a box: the instances ``x`` such that every row of ``x``'s block
(``floor(i / rows)``, within the rows that exist) holds ``x``'s point too.
For ``j <= i`` that is ``j <= rows * floor(i / rows)``: one call of
``rows x (rows * ib + 1) x K`` per block ``ib``; the rest (the diagonal edge,
``rows * ib < j <= i``) keeps its loops.

:func:`full_rows` computes that part with isl (a set difference and a
projection, exact), :func:`call_bounds` checks that the instances of every
call form a box and gives, per iterator the call scans, its first value and
its extent as expressions of the size parameters and the call's loops
(``isl_map_dim_min``/``isl_map_dim_max`` of the instances over the call's
loops, printed by isl's AST builder).

Source: full/partial tile separation (Pluto, PPCG's ``isolate``; Kelly,
Pugh and Rosser, "Code generation for multiple mappings", 1995); the
blocking follows the recursive triangular BLAS-3 kernels of Goto and van de
Geijn ("High-performance implementation of the level-3 BLAS", ACM TOMS 2008),
which run SYRK as GEMMs on full blocks and a small kernel on the diagonal.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from . import expr as E
from .gemm_match import Band, GemmMatch
from .ir import Program, Statement
from .isl_util import CTX, lift_to_set, pw_aff_to_expr, zero_based_box

#: At least this many rows of C per call of a triangular contraction.
MIN_TRIANGLE_ROWS = 24


def triangle_rows() -> int:
    """Rows of C one call of a triangular contraction computes: the
    smallest multiple of the micro-kernel's register tile rows
    (:func:`polyc.machine.gemm_rows`) of at least
    :data:`MIN_TRIANGLE_ROWS` (28 with AVX-512, 24 with AVX2).  The diagonal
    edge left to the loops holds about ``rows / 2`` elements per row, and
    each call packs its whole other operand again: measured on PolyBench's
    ``syrk`` (LARGE, 2 threads, AVX-512) 28 rows ran in 18.8 ms, 42 in 21.8,
    64 in 21.6, 112 in 22.2."""
    from .machine import gemm_rows
    mr = gemm_rows()
    return mr * -(-MIN_TRIANGLE_ROWS // mr)


def _block_map(space: isl.Space, pos: int, rows: int, keep: list[int], name: str,
               names: list[str]) -> isl.Map:
    """``{ S[x] -> name[x_keep..., floor(x_pos / rows)] }`` (the output
    dimensions named ``names``)."""
    ls = isl.LocalSpace.from_space(space)
    target = isl.Space.set_from_params(space.params()).add_dims(
        isl.dim_type.set, len(keep) + 1).set_tuple_name(isl.dim_type.set, name)
    affs = isl.AffList.alloc(CTX, len(keep) + 1)
    for d in keep:
        affs = affs.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
    var = isl.Aff.var_on_domain(ls, isl.dim_type.set, pos)
    affs = affs.add(var.scale_down_val(isl.Val.int_from_si(CTX, rows)).floor())
    out = isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(
        isl.Space.map_from_domain_and_range(space, target), affs))
    for i, n in enumerate(names):
        out = out.set_dim_name(isl.dim_type.out, i, n)
    return out


def full_rows(domain: isl.Set, pos: int, rows: int) -> isl.Set:
    """The instances of ``domain`` whose whole block of ``rows`` rows holds
    their point: ``x`` such that every ``x'`` equal to ``x`` but for
    dimension ``pos``, with ``floor(x'_pos / rows) == floor(x_pos / rows)``
    and ``x'_pos`` a row of ``domain``, is in ``domain``."""
    space = domain.get_space()
    n = space.dim(isl.dim_type.set)
    same = _block_map(space, pos, rows, [d for d in range(n) if d != pos], "blk",
                      [f"x{d}" for d in range(n)])
    same = same.apply_range(same.reverse())            # x -> x' in x's block
    rows_of = domain
    for d in reversed(range(n)):                      # { x : x_pos is a row of domain }
        if d != pos:
            rows_of = rows_of.eliminate(isl.dim_type.set, d, 1)
    bad = same.intersect_domain(domain).intersect_range(rows_of.subtract(domain)).domain()
    return domain.subtract(bad).coalesce()


def call_bounds(part: isl.Set, loops: list[tuple[int, str]], pos: int, rows: int,
                block_iter: str, scanned: list[tuple[int, str]], context: isl.Set,
                sizes) -> tuple[tuple, str | None]:
    """Per scanned iterator ``(name, first, extent)`` of the calls over
    ``part`` (the call's loops: the iterators ``loops`` as ``(position,
    name)`` and ``block_iter = floor(x_pos / rows)``), as expressions of the
    size parameters (``Param``) and the call's loops (``Index``); and
    ``None``, or the reason the instances of a call are not a box (then the
    bounds are empty).  ``context``: the parameter values the code may
    assume; ``sizes``: the size parameters' names."""
    space = part.get_space()
    names = [nm for _, nm in loops] + [block_iter]
    to_call = _block_map(space, pos, rows, [d for d, _ in loops], "call", names)
    per_call = to_call.intersect_domain(part).reverse()       # call -> instances
    calls = per_call.domain()
    ncall = len(names)
    wrapped = per_call.wrap()
    wspace = wrapped.get_space()
    wls = isl.LocalSpace.from_space(wspace)
    proj = isl.MultiAff.from_aff_list(
        isl.Space.map_from_domain_and_range(wspace, calls.get_space()),
        _var_list(wls, range(ncall)))
    box = calls.apply(isl.Map.from_multi_aff(proj).reverse())  # [call -> any x]
    ranges = []
    for d, nm in scanned:
        lo, hi = per_call.dim_min(d), per_call.dim_max(d)
        x = isl.PwAff.from_aff(isl.Aff.var_on_domain(wls, isl.dim_type.set, ncall + d))
        box = box.intersect(x.ge_set(lo.pullback_multi_aff(proj))) \
                 .intersect(x.le_set(hi.pullback_multi_aff(proj)))
        ranges.append((nm, lo, hi))
    for d in range(space.dim(isl.dim_type.set)):
        if d not in {p for p, _ in scanned}:      # a loop around the call: fixed by it
            box = box.intersect(isl.PwAff.from_aff(isl.Aff.var_on_domain(
                wls, isl.dim_type.set, ncall + d)).eq_set(
                    per_call.dim_min(d).pullback_multi_aff(proj)))
    box = box.intersect_params(context)
    if not box.is_equal(wrapped.intersect_params(context)):
        extra = box.subtract(wrapped).unwrap().range().coalesce()
        return (), (f"the instances of one call of a block of {rows} rows are not a box "
                    f"(its bounding box also holds {extra})")
    ctx = calls.intersect_params(context)
    ctx = ctx.move_dims(isl.dim_type.param, ctx.dim(isl.dim_type.param), isl.dim_type.set,
                        0, ncall)
    out = []
    for nm, lo, hi in ranges:
        ext = hi.sub(lo).add(_one(hi))
        out.append((nm, _expr(lo, ncall, ctx, sizes), _expr(ext, ncall, ctx, sizes)))
    return tuple(out), None


def _var_list(ls: isl.LocalSpace, dims) -> isl.AffList:
    dims = list(dims)
    out = isl.AffList.alloc(CTX, len(dims))
    for d in dims:
        out = out.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
    return out


def _one(pa: isl.PwAff) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(pa.get_domain_space())
    return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.int_from_si(CTX, 1)))


def _expr(pa: isl.PwAff, ncall: int, ctx: isl.Set, sizes) -> E.Expr:
    """``pa`` (a function of the call's loops) as an expression: the loops
    as ``Index``, the size parameters as ``Param``."""
    pa = pa.move_dims(isl.dim_type.param, pa.dim(isl.dim_type.param), isl.dim_type.in_,
                      0, ncall).align_params(ctx.get_space())
    sizes = set(sizes)
    return E.map_expr(pw_aff_to_expr(pa, ctx),
                      lambda e: E.Param(e.name) if isinstance(e, E.Index)
                      and e.name in sizes else None)


def band(domain: isl.Set, box: isl.Set, roles: dict, context: isl.Set
         ) -> tuple[str, isl.PwAff | None, isl.PwAff | None] | str:
    """The band of ``box`` (the domain's bounding box of scanned iterators,
    :func:`polyc.intrinsics.match_gemm`) that ``domain`` is: ``(pair, lo,
    hi)`` with ``domain == box ∩ { lo <= d <= hi }``, where ``d`` is
    ``n - m`` (pair ``"mn"``: a triangle of C), ``k - m`` (``"mk"``: a
    triangle of A, in the reduction) or ``k - n`` (``"nk"``), tried in this
    order; ``roles``: ``{"m": pos, "n": pos, "k": pos or None}``, the
    positions of the single row, column and reduction iterators (``k``
    ``None``: several, only ``"mn"`` is tried), ``"reduction"``: the
    positions of all reduction iterators.  Each bound is a function of
    the parameters (``isl_set_dim_min``/``dim_max`` of ``d`` over the
    domain; for ``"mn"`` with the constraints on the reduction dropped: with
    an empty reduction the call still scales the band), or ``None`` where
    the box's own bound is as tight.  Else the reason the domain is no such
    band.  A triangle ``j <= i`` is ``("mn", None, 0)``: one call of
    BLIS's gemmt (``polyc_gemmt_*``).

    Source: the SYRK/GEMMT and TRMM macro-kernels of BLIS (Van Zee and van
    de Geijn, ACM TOMS 41(3), 2015): micro-tiles outside a stored triangle
    are skipped and those crossing its diagonal masked; a triangular operand
    is packed with zeros outside its triangle and each micro-tile runs over
    the part of the reduction its rows reach."""
    dom, bx = domain.intersect_params(context), box.intersect_params(context)
    reduction = roles["reduction"]
    pairs = [("mn", roles["m"], roles["n"])]
    if roles["k"] is not None:
        pairs += [("mk", roles["m"], roles["k"]), ("nk", roles["n"], roles["k"])]
    why = []
    for pair, p0, p1 in pairs:
        free = (lambda x: dropped(x, reduction)) if pair == "mn" else (lambda x: x)
        got = _band_of(dom, bx, p0, p1, free(domain).intersect_params(context))
        if isinstance(got, str):
            why.append(f"{pair}: {got}")
            continue
        return (pair, *got)
    return "nor a band of its box (" + "; ".join(why) + ")"


def dropped(s: isl.Set, dims) -> isl.Set:
    """``s`` without its constraints on the dimensions ``dims``."""
    for pos in dims:
        s = s.drop_constraints_involving_dims(isl.dim_type.set, pos, 1)
    return s


def _band_of(dom: isl.Set, bx: isl.Set, p0: int, p1: int, over: isl.Set):
    """``(lo, hi)`` of ``d = x_p1 - x_p0`` over ``over`` when ``dom == bx ∩
    { lo <= d <= hi }`` (``None`` for a side the box bounds as tightly),
    else the reason."""
    ls = isl.LocalSpace.from_space(dom.get_space())
    diff = isl.Map.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, p1).sub(
        isl.Aff.var_on_domain(ls, isl.dim_type.set, p0)))           # { x -> [d] }
    vals = over.apply(diff)
    below = vals.apply(isl.Map.lex_ge(vals.get_space()))            # d <= max
    above = vals.apply(isl.Map.lex_le(vals.get_space()))            # d >= min
    banded = bx.intersect(below.intersect(above).apply(diff.reverse()))
    if not dom.is_equal(banded):
        extra = banded.subtract(dom).union(dom.subtract(banded)).coalesce()
        return f"the domain and the box's band differ by {extra}"
    spans = bx.apply(diff)
    lo = vals.dim_min(0) if not spans.subtract(above).is_empty() else None
    hi = vals.dim_max(0) if not spans.subtract(below).is_empty() else None
    if lo is None and hi is None:
        return "the domain is its box"
    # a bound in pieces (a window j > i - 40: -39, or 1 - T where T < 40)
    # becomes one of its pieces' affine functions when that bound alone
    # still cuts the box to the domain
    space = vals.get_space()
    d = isl.PwAff.from_aff(isl.Aff.var_on_domain(isl.LocalSpace.from_space(space),
                                                  isl.dim_type.set, 0))

    def cuts(lo_, hi_) -> bool:
        keep = isl.Set.universe(space)
        if lo_ is not None:
            keep = keep.intersect(d.ge_set(lift_to_set(lo_, space)))
        if hi_ is not None:
            keep = keep.intersect(d.le_set(lift_to_set(hi_, space)))
        return bx.intersect(keep.apply(diff.reverse())).is_equal(dom)
    for side in (0, 1):
        pa = (lo, hi)[side]
        if pa is None or len(pa.get_pieces()) < 2:
            continue
        for _, aff in pa.get_pieces():
            one = isl.PwAff.from_aff(aff)
            if cuts(*((one, hi) if side == 0 else (lo, one))):
                lo, hi = (one, hi) if side == 0 else (lo, one)
                break
    return lo, hi


def band_match(program: Program, stmt: Statement, found: GemmMatch, box: isl.Set, bounds,
               aliased: bool) -> GemmMatch | str:
    """``found`` (a match of ``stmt`` whose domain is not its zero-based
    ``box``; ``bounds``: ``(position, extent)`` of the scanned iterators)
    as one call over the band the domain is (:func:`band`), or the reason
    it is none.  A folded ``+=!`` initialisation stays when it writes
    exactly the elements the call writes; ``aliased`` (the output is also
    an operand): in place when :func:`inplace_reason` allows, with beta 1."""
    ctx = program.parameter_domain()
    pos = stmt.iterators.index
    k = found.k
    got = band(stmt.domain, box, {"m": pos(found.m[0]), "n": pos(found.n[0]),
                                  "k": pos(k[0]) if len(k) == 1 else None,
                                  "reduction": [pos(it) for it in k]}, ctx)
    if isinstance(got, str):
        return got
    pair, lo, hi = got
    # the elements of C the call writes: its box of rows and columns (also
    # where the reduction is empty: beta * C), within the band for a band
    # of C; the extents as total functions of the sizes
    rows_of = zero_based_box(dropped(stmt.domain, [pos(it) for it in k]),
                             [(p, _total(e)) for p, e in bounds
                              if p in (pos(found.m[0]), pos(found.n[0]))])
    found = replace(found, band=Band(pair, *(None if pa is None else pw_aff_to_expr(pa, ctx)
                                             for pa in (lo, hi)), rows=rows_of))
    if found.init and not program.statement(found.init).write.range().intersect_params(
            ctx).is_equal(called_elements(program, found).range().intersect_params(ctx)):
        # the call overwrites the band only: the rest of the initialisation
        # runs as its own statement
        found = replace(found, init=None)
    if aliased:
        # in place (trmm): the call packs each panel of the reduction before
        # it writes C, the panels in ascending order (beta 1)
        why = inplace_reason(program, stmt, found)
        if why:
            return f"over its band {why}"
        return replace(found, init=None, inplace=True)
    return found


def _total(pa: isl.PwAff) -> isl.PwAff:
    """A one-piece ``pa`` (an extent such as ``N - 1``, defined where the
    domain is not empty) as that affine function everywhere."""
    pieces = pa.get_pieces()
    return isl.PwAff.from_aff(pieces[0][1]) if len(pieces) == 1 else pa


def called_elements(program: Program, m: GemmMatch) -> isl.Map:
    """The elements of C the call writes: the update's, also where its
    reduction is empty (``K = 0``: the call still sets ``C = beta * C``).
    Calls over blocks whose bounds come from their instances
    (``GemmMatch.bounds``, :mod:`polyc.callbox`) write exactly the update's
    elements: a row whose reduction is empty in a triangle (``k < i`` at
    ``i = 0``) is in no call's box."""
    stmt = program.statement(m.statement)
    called = stmt.write.intersect_domain(stmt.domain)
    if m.bounds:
        return called
    if m.band is not None:          # the band's elements, or the box's (callbox.band)
        called = stmt.write
    for it in m.k:
        called = called.drop_constraints_involving_dims(
            isl.dim_type.in_, stmt.iterators.index(it), 1)
    return called if m.band is None else called.intersect_domain(m.band.rows)


def inplace_reason(program: Program, stmt: Statement, m: GemmMatch) -> str | None:
    """Why one call of ``m`` over its band (``GemmMatch.band``; the output
    ``m.c`` is also an operand, the reduction one iterator) would not
    compute what the source order does, ``None`` when it does.  The call
    (``polyc_gemmt``) packs the operands of each panel of the reduction
    before it writes C, the panels in ascending order, and C accumulates
    (beta 1).  So for every element read through the operand at reduction
    index ``k_r`` and written by an instance at ``k_w`` (isl, exact, under
    the parameter context): ``k_w >= k_r`` (the panel that reads it is
    packed before any panel writes it), and the source order writes it
    after it reads it (the source reads the element's value from before
    the call, as the call does).  PolyBench's ``trmm`` (``B(i, j) += A(k,
    i) * B(k, j)`` for ``k > i``, ``i`` ascending) passes; the same update
    with ``i`` descending reads rows the source has already updated.  The
    output may be only the B operand (``k x n``): A is packed again for
    every block of columns of C, after earlier blocks wrote it."""
    if m.a == m.c:
        return (f"{m.c} is also the call's A operand, which is packed again for every block "
                "of columns (after earlier blocks wrote it)")
    its = list(stmt.iterators)
    kp = its.index(m.k[0])
    ctx = program.parameter_domain()
    reads = [r for r in stmt.reads if r.get_tuple_name(isl.dim_type.out) == m.c
             and not r.is_equal(stmt.write)]
    if len(reads) != 1:
        return f"{m.c} is read through more than one operand access"
    write = stmt.write.intersect_domain(stmt.domain)
    pairs = reads[0].intersect_domain(stmt.domain).apply_range(write.reverse())  # r -> w
    pairs = pairs.intersect_params(ctx)
    early = pairs.order_gt(isl.dim_type.in_, kp, isl.dim_type.out, kp)         # k_r > k_w
    if not early.is_empty():
        return (f"an element of {m.c} read at one reduction index is written at a smaller "
                f"one ({early.coalesce()}): a panel would be packed after it is written")
    order = program.order.get_map().intersect_domain(isl.UnionSet.from_set(stmt.domain))
    before = order.lex_lt_union_map(order)                                       # x -> later y
    flow = isl.UnionMap.from_map(pairs.reverse()).intersect(before)              # w before r
    if not flow.is_empty():
        return (f"the source reads elements of {m.c} after it updates them "
                f"({flow.coalesce()}): the call would read them before")
    return None


def read_while_written(program: Program, stmt: Statement, part: isl.Set, m: GemmMatch,
                       rows: int = 0) -> str | None:
    """Why one call of ``m`` would read an element of its output that it
    writes (``None`` when no call does): the output is also an operand
    (PolyBench's ``trmm``, ``B(i, j) += A(k, i) * B(k, j)``), and a call
    packs its operands while it writes C, so the elements a call (the
    instances ``part`` of ``stmt`` over the same loops, and with ``rows``
    the same block of rows) reads through the operand and those it writes
    must be disjoint (isl, under the parameter context).  Between calls
    the dependences order them as any other statements."""
    its = list(stmt.iterators)
    keep = [its.index(b) for b in m.batch]
    if rows:
        to_call = _block_map(part.get_space(), its.index(m.m[0]), rows, keep, "call",
                             list(m.batch) + [m.block_iter or "blk"])
    else:
        to_call = part.identity()
        for d in reversed(range(len(its))):
            if d not in keep:
                to_call = to_call.project_out(isl.dim_type.out, d, 1)
    per_call = to_call.intersect_domain(part).reverse()
    operand = next(acc for t, acc in m.accesses[1:] if t == m.c)
    # the operand's own relation: the reads of C but the accumulator's
    reads = [r for r in stmt.reads if r.get_tuple_name(isl.dim_type.out) == m.c
             and not r.is_equal(stmt.write)]
    if len(reads) != 1:
        return f"an operand is also the output, through {E.to_text(operand)}"
    both = per_call.apply_range(stmt.write.intersect_domain(part)).intersect(
        per_call.apply_range(reads[0].intersect_domain(part)))
    both = both.intersect_params(program.parameter_domain())
    if not both.is_empty():
        return (f"an operand is also the output: one call would read through "
                f"{E.to_text(operand)} elements of {m.c} it writes ({both.range().coalesce()})")
    return None


def row_blocks(program: Program, stmt: Statement, m: GemmMatch, rows: int, operands,
                split: bool = False, aliased: bool = False) -> GemmMatch | str:
    """``m`` (a match of ``stmt`` whose operands are the accesses
    ``operands``, :func:`polyc.intrinsics.match_gemm`) as one call per block
    of ``rows`` rows over ``stmt``'s domain (each call's instances a box,
    :func:`call_bounds`), or the reason it cannot be; ``split``: over the
    full part of the blocks (:func:`full_rows`, the match's ``parts``);
    ``aliased``: the output is also an operand (:func:`read_while_written`)."""
    if len(m.m) != 1 or m.gather:
        return ("only a GEMM whose rows are one iterator with a plain stride can be called "
                "per block of rows")
    its = list(stmt.iterators)
    parts = ()
    if split:
        ctx = program.parameter_domain()
        part = full_rows(stmt.domain, its.index(m.m[0]), rows)
        if part.intersect_params(ctx).is_empty():
            return f"no block of {rows} rows of {m.m[0]} is full"
        if not part.intersect_params(ctx).is_equal(stmt.domain.intersect_params(ctx)):
            parts = ((stmt.name, part),)
            stmt = replace(stmt, domain=part)
    taken = set(its) | set(m.batch)
    block_iter, n = f"{m.m[0]}_blk", 2
    while block_iter in taken:                    # as tree.fresh_name
        block_iter, n = f"{m.m[0]}_blk{n}", n + 1
    bounds, reason = call_bounds(
        stmt.domain, [(its.index(b), b) for b in m.batch], its.index(m.m[0]), rows,
        block_iter, [(its.index(x), x) for x in m.scanned], program.parameter_domain(),
        program.params)
    if reason:
        return reason
    if aliased:
        reason = read_while_written(program, stmt, stmt.domain, m, rows)
        if reason:
            return reason
    # the extents of the scanned iterators' tensor dimensions (the packing's
    # bounds) are those of the whole tensors
    extents = []
    for it in m.scanned:
        where = next(((acc.tensor, d) for acc in (stmt.lhs, *operands)
                      for d, idx in enumerate(acc.indices)
                      if isinstance(idx, E.Index) and idx.name == it), None)
        ext = next(e for x, _, e in bounds if x == it)
        extents.append((it,) + where if where else (it, None, ext))
    return replace(m, extents=tuple(extents), block=rows, block_iter=block_iter, bounds=bounds,
                   parts=parts)
