"""Intrinsics, described polyhedrally, and the matching of statements onto them.

An intrinsic is a computation a backend implements by hand, near the
machine's peak.  Its description here is backend-free (see DESIGN.md): an
iteration domain and access relations.  :data:`GEMM` is the contraction

    Gemm[m, n, k] : 0 <= m < M, 0 <= n < N, 0 <= k < K
    C[m, n] += alpha * A[m, k] * B[k, n]     (C scaled by beta first)

implemented by ``backends/c/intrinsics/gemm.h`` (packed panels, a register-
blocked MR x NR micro-kernel for AVX-512, AVX2 or portable C chosen by the
compiler's target macros, OpenMP inside; BLIS's loop structure).  The
operands are addressed through strides, so a transposed operand (``B(n, k)``,
``A(k, m)``) or any dimension order of a row-major tensor matches too.

:func:`match_gemm` matches one statement: a ``+`` reduction update of a
product of two accesses whose indices are integer-affine in the iterators
(so every element address is linear in them), times any scalar factors
(constants, size parameters, rank-0 tensors: the call's alpha).  Its
iterators are classified by the tensors whose address they move (batch: all
three; m: C and A; n: C and B; k: A and B); each role's iterators are the
digits of one GEMM index, addressed through one stride or, for a window
such as a convolution's ``I(c, h + kh, w + kw)``, through a mixed-radix map
the intrinsic gathers while packing (an implicit GEMM, no im2col buffer).  The intrinsic's
access relations are rebuilt from the coefficients and compared with the
statement's by isl map equality, and the domain must be a box of tensor
extents in the iterators the call scans (isl set equality).  A match is
returned as a :class:`GemmMatch`; a mismatch as the reason (a string),
which ``explain`` and the generated source report.  :func:`match_scale` says
which beta the call absorbs from a statement that scales (or zeroes) the
output elements it writes (``C(i, j) *= beta``).

Source: tensorization as matching of access relations, Bondhugula et al.,
"High-performance GPU/CPU tensor contraction via polyhedral tensorization"
and TVM's tensorize; the GEMM itself, Goto and van de Geijn, ACM TOMS 2008.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from . import callbox
from . import expr as E
from .access import make_statement
from .bounds import tensor_box
from .callbox import called_elements  # noqa: F401  (re-exported: polyc.schedule.parts)
from .gemm_match import (  # noqa: F401  (re-exported: the match and its constants)
    GEMM_DTYPES,
    MAX_DIGITS,
    SIMT_GEMM_DTYPES,
    TENSOR_CORE_DTYPES,
    TENSOR_CORE_MIN_ARCH,
    TENSOR_CORE_THREADS,
    TENSOR_CORE_TILE,
    GemmMatch,
    tensor_core_support,
)
from .gemm_post import match_post, match_tile
from .gemm_post import plain_indices as _plain
from .gemm_scale import factors_of as _factors
from .gemm_scale import is_scalar as _is_scalar
from .gemm_scale import is_zero as _is_zero
from .gemm_scale import match_scale  # noqa: F401  (re-exported: polyc.schedule.tensorize)
from .gemm_scale import post_scale as _post_scale
from .gemm_scale import product as _product
from .gemm_scale import tensors_of as _tensors
from .ir import Program, Statement
from .isl_util import (
    aff_from_expr,
    affine_coefficients,
    affine_in_sizes,
    const_pw_aff,
    pw_aff_to_expr,
    zero_based_box,
)


def _linear(stmt: Statement, acc: E.Access) -> list[dict[str, int]] | str:
    """Per dimension of ``acc``, its index's coefficients ``{iterator: c}``
    (non-zero ones), read from the isl affine function; the reason when an
    index is not an integer-affine function of the iterators."""
    out = []
    for idx in acc.indices:
        found = affine_coefficients(idx, stmt.domain.get_space(), stmt.iterators)
        if isinstance(found, str):
            return f"an index of {acc.tensor} {found}"
        out.append(found[0])
    return out


def _relation(stmt: Statement, acc: E.Access, lin: list[dict[str, int]]) -> isl.Map:
    """``{ S[iterators] -> tensor[...] }`` rebuilt from the coefficients
    (plus each index's constant part), the intrinsic's side of the match."""
    space = stmt.domain.get_space()
    ls = isl.LocalSpace.from_space(space)
    rel = isl.Map.from_domain(isl.Set.universe(space))
    for idx, coeffs in zip(acc.indices, lin):
        aff = aff_from_expr(idx, space).get_pieces()[0][1]
        for i in range(len(stmt.iterators)):
            aff = aff.set_coefficient_val(isl.dim_type.in_, i, 0)
        for it, c in coeffs.items():
            var = isl.Aff.var_on_domain(ls, isl.dim_type.set, stmt.iterators.index(it))
            aff = aff.add(var.scale_val(isl.Val.int_from_si(stmt.domain.get_ctx(), c)))
        rel = rel.flat_range_product(isl.Map.from_aff(aff))
    return rel.set_tuple_name(isl.dim_type.out, acc.tensor)


def _kept_run(c_idx: list[str], group: list[str]) -> list[str]:
    """The run of consecutive dimensions of C, all of ``group``, that holds the
    group's innermost one (the rest of the group stays loops)."""
    pos = sorted(c_idx.index(i) for i in group)
    first = pos[-1]
    while first - 1 in pos:
        first -= 1
    return c_idx[first:pos[-1] + 1]


def _is_plain_run(lin: list[dict[str, int]], group: list[str], scanned: set[str]) -> bool:
    """Whether ``group`` indexes an operand (``lin``: its dimensions'
    coefficients) as consecutive dimensions in this order, one iterator
    with coefficient 1 per dimension, and no other dimension: a single
    stride addresses it.  The loops around the call may add to those
    indices (a head's columns, ``Q(b, i, 64 * h + d)``: part of the base
    pointer); another scanned iterator may not (a window: ``I(h + kh)``)."""
    dims = [d for d, coeffs in enumerate(lin) if set(coeffs) & set(group)]
    names = []
    for d in dims:
        mine = [i for i in lin[d] if i in group]
        if len(mine) != 1 or lin[d][mine[0]] != 1 or set(lin[d]) & (scanned - {mine[0]}):
            return False
        names.append(mine[0])
    return names == list(group) and dims == list(range(dims[0], dims[0] + len(dims)))


def _unfilled(program: Program, stmt: Statement, tensor: str, lin: list[dict[str, int]],
              group: list[str]) -> int:
    """The position in ``group`` of its innermost digit, other than the
    first, that does not scan the whole dimension of ``tensor`` it indexes
    (``lin``: the access's coefficients), 0 when every one does.  A run of
    digits is addressed through the stride of its last one only when each
    digit after the first runs over ``0 .. extent - 1`` of its dimension
    (``x[:, :, 0:2]`` summed over its last two axes does not: the digits of
    ``(r0, r1)`` are ``3 * r0 + r1``, not ``2 * r0 + r1``)."""
    ctx = program.parameter_domain()
    dom = stmt.domain.intersect_params(ctx)
    where = dom.params()            # (the sizes for which the statement runs)
    shape = program.tensor(tensor).shape
    for j in range(len(group) - 1, 0, -1):
        pos = stmt.iterators.index(group[j])
        d = next(d for d, coeffs in enumerate(lin) if group[j] in coeffs)
        first = dom.dim_min(pos).intersect_params(where)
        scan = dom.dim_max(pos).add(const_pw_aff(ctx.get_space(), 1)).intersect_params(where)
        ext = shape[d]              # (a function of ``{ [] }``: on the parameters, as scan)
        if not ext.get_domain_space().is_params():
            ext = ext.project_domain_on_params()
        ext = ext.align_params(where.get_space()).intersect_params(where)
        if not (first.is_equal(const_pw_aff(ctx.get_space(), 0).intersect_params(where))
                and scan.is_equal(ext)):
            return j
    return 0


def match_gemm(program: Program, stmt: Statement, *,
               tensor_cores: bool = False, rows: int = 0, split: bool = False,
               band: bool = True) -> GemmMatch | str:
    """Match ``stmt`` onto :data:`GEMM`; the reason it does not match otherwise.

    The indices may be any integer-affine functions of the iterators: every
    element address is then linear in them, so the iterators split into
    roles by the tensors whose address they move (batch: all three; m: C
    and A; n: C and B; k: A and B), and each role's iterators are the digits
    of one GEMM index, addressed through a stride or, for a window such as
    a convolution's ``I(c, h + kh, w + kw)``, a mixed-radix map the
    intrinsic gathers while packing (an implicit GEMM).  The operand sharing
    C's innermost dimension becomes B (the micro-kernel stores rows of C).
    The iteration domain must be the product of the loops' domain and a box
    ``0 <= i < extent`` for every scanned iterator.  Besides the two
    operands, the product (in any association) may have scalar factors:
    constants, size parameters, rank-0 tensor reads (``alpha * A(m, k) *
    B(k, n)``); their product is the call's ``alpha``.

    ``tensor_cores``: match for the CUDA backend's tensor-core GEMM instead:
    A and B of one dtype of :data:`TENSOR_CORE_DTYPES`, C float32 (a half
    output accumulates in a float32 temporary, :mod:`polyc.halfprec`); a
    window (an implicit GEMM) is addressed through its digits as on the CPU.

    ``rows``: one call per block of ``rows`` rows of C (one row iterator):
    the instances of each call must form a box whose bounds may depend on
    the block (:func:`polyc.callbox.call_bounds`: ``stmt`` restricted to
    the full part of a triangular domain); the match's ``bounds`` give
    them.  ``split``: the calls compute only the full part of the row blocks
    (:func:`polyc.callbox.full_rows`; the match's ``parts``), the rest of
    the domain keeps its loops.

    ``band``: a domain that is a band of its box (``lo <= n - m <= hi`` for
    the row iterator ``m`` and the column iterator ``n``, a triangle:
    :func:`polyc.callbox.band`) is one call that stores only the band (the
    match's ``band``; the C backend's ``polyc_gemmt_*``)."""
    if stmt.kind != "update" or stmt.op != "+":
        return "not a += reduction"
    if stmt.domain.intersect_params(program.parameter_domain()).is_empty():
        # (a product over a reduction of constant extent 0: no extent to call with)
        return "the statement runs no instance (an empty iteration domain)"
    terms = _terms(stmt.rhs)
    if len(terms) > 1 and not tensor_cores:
        return _match_sum(program, stmt, terms, rows, split, band)
    factors = _factors(stmt.rhs)
    operands = [f for f in factors if isinstance(f, E.Access) and f.indices]
    scalars = [f for f in factors if not (isinstance(f, E.Access) and f.indices)]
    if stmt.tensor in _tensors(_product(scalars)) or (
            len(operands) > 2 and any(f.tensor == stmt.tensor for f in operands)):
        return f"the output {stmt.tensor} is also a factor of the product"
    if len(operands) != 2 or not all(_is_scalar(f) for f in scalars):
        return "the right-hand side is not a product of two tensor elements"
    rhs = E.Binary("*", operands[0], operands[1])
    alpha = _product(scalars)
    c_idx = _plain(stmt.lhs)
    if c_idx is None:
        return "an index of the output is not a plain iterator"
    # an operand that is also the output (trmm's ``B(i, j) += A(k, i) * B(k, j)``)
    # is taken when no call reads an element it writes (checked below)
    aliased = stmt.tensor in (rhs.lhs.tensor, rhs.rhs.tensor)
    # one tensor may be both operands (A * A^T, read only): roles are per access
    names = {stmt.tensor, rhs.lhs.tensor, rhs.rhs.tensor}
    dtypes = {program.tensor(t).dtype for t in names}
    operand_dtype = ""
    if tensor_cores:
        ab = {program.tensor(t).dtype for t in (rhs.lhs.tensor, rhs.rhs.tensor)}
        if len(ab) != 1 or next(iter(ab)) not in TENSOR_CORE_DTYPES + SIMT_GEMM_DTYPES:
            return (f"operand dtypes {sorted(ab)} (the GPU GEMMs take two "
                    f"{' or two '.join(TENSOR_CORE_DTYPES + SIMT_GEMM_DTYPES)} operands)")
        operand_dtype = ab.pop()
        acc = "float64" if operand_dtype == "float64" else "float32"
        if program.tensor(stmt.tensor).dtype != acc:
            return (f"the accumulator {stmt.tensor} is {program.tensor(stmt.tensor).dtype} "
                    f"({operand_dtype} operands accumulate in {acc} on the GPU)")
        dtypes = {acc}
    elif len(dtypes) != 1 or next(iter(dtypes)) not in GEMM_DTYPES:
        return f"operand dtypes {sorted(dtypes)} (gemm takes one of {', '.join(GEMM_DTYPES)})"
    found = [_linear(stmt, acc) for acc in (stmt.lhs, rhs.lhs, rhs.rhs)]
    bad = next((f for f in found if isinstance(f, str)), None)
    if bad:
        return bad
    lc, la, lb = found

    def moves(lin) -> set[str]:
        return {i for coeffs in lin for i in coeffs}
    a, b = rhs.lhs, rhs.rhs
    if c_idx and c_idx[-1] in moves(la) and c_idx[-1] not in moves(lb):
        a, b, la, lb = b, a, lb, la   # C's innermost dimension is a column of the GEMM
    cs, xs, ys = set(c_idx), moves(la), moves(lb)
    batch = [i for i in stmt.iterators if i in cs and i in xs and i in ys]
    m = [i for i in stmt.iterators if i in cs and i in xs and i not in ys]
    n = [i for i in stmt.iterators if i in cs and i in ys and i not in xs]
    k = [i for i in stmt.iterators if i in xs and i in ys and i not in cs]
    if len(batch) + len(m) + len(n) + len(k) != len(stmt.iterators):
        return "an iterator indexes only one tensor (a sum or broadcast, not a contraction)"
    if not k:
        return "no iterator is summed over both operands (an elementwise product)"
    if not m or not n:
        return "no output dimension comes from one operand alone (an outer or inner " \
               "product shape, not a matrix product)"
    m_keep, n_keep = _kept_run(c_idx, m), _kept_run(c_idx, n)
    # C's rows and columns are addressed through one stride each: digits
    # before one that leaves part of its dimension unscanned stay loops
    m_keep = m_keep[_unfilled(program, stmt, stmt.tensor, lc, m_keep):]
    n_keep = n_keep[_unfilled(program, stmt, stmt.tensor, lc, n_keep):]
    loops = [i for i in stmt.iterators if i in batch or (i in cs and i not in m_keep + n_keep)]
    # (the two tests below are the CPU micro-kernel's, which wants unit strides
    # along its rows; the tensor-core GEMM copies panels through any strides)
    if c_idx[-1] in batch and not tensor_cores:
        return (f"{stmt.tensor}'s innermost dimension {c_idx[-1]} is a batch dimension: each "
                "call would be a small strided product; the loops vectorise along it instead")
    for acc, lin, own in ((a, la, m_keep + k), (b, lb, k + n_keep)):
        if acc.indices and not set(lin[-1]) & set(own) and not tensor_cores:
            return (f"{acc.tensor}'s innermost dimension moves with no iterator the call scans: "
                    "each call would be a small strided product; the loops vectorise instead")
    for acc in (a, b):       # k's digits in an operand's order where it indexes them plainly
        order = [i for i in (_plain(acc) or []) if i in k]
        if len(order) == len(k):
            k = order
            break
    if max(len(m_keep), len(n_keep), len(k)) > MAX_DIGITS:
        return f"more than {MAX_DIGITS} iterators in one role"
    # the intrinsic's access relations, compared with the statement's by isl
    # map equality: the write, then per tensor the union of its reads (A *
    # A^T reads A twice; the output's reads are the accumulator's, and the
    # operand's when the output is also an operand)
    rels = [(acc, _relation(stmt, acc, lin)) for acc, lin in ((stmt.lhs, lc), (a, la), (b, lb))]
    have, wanted = {}, {}
    for r in stmt.reads:
        t = r.get_tuple_name(isl.dim_type.out)
        have[t] = have[t].union(r) if t in have else r
    for acc, rel in rels:
        wanted[acc.tensor] = wanted[acc.tensor].union(rel) if acc.tensor in wanted else rel
    for what, want, got in [("write", rels[0][1], stmt.write)] + [
            ("access", wanted[t], have[t]) for t in dict.fromkeys(acc.tensor for acc, _ in rels)]:
        want, got = want.intersect_domain(stmt.domain), got.intersect_domain(stmt.domain)
        if not want.is_equal(got):
            t = want.get_tuple_name(isl.dim_type.out)
            return (f"the {what} relation of {t} differs from the intrinsic's: "
                    f"{got.subtract(want).coalesce()} are accessed and not the intrinsic's "
                    f"({want})")
    scanned = set(m_keep + n_keep + k)
    gather = not all(_is_plain_run(lin, g, scanned) and not _unfilled(program, stmt, t, lin, g)
                     for t, lin, groups in ((a.tensor, la, (m_keep, k)),
                                            (b.tensor, lb, (k, n_keep)))
                     for g in groups)
    found = GemmMatch(statement=stmt.name, init=_folded_init(program, stmt), dtype=dtypes.pop(),
                      batch=tuple(loops), m=tuple(m_keep), n=tuple(n_keep), k=tuple(k),
                      c=stmt.tensor, a=a.tensor, b=b.tensor,
                      accesses=((stmt.tensor, stmt.lhs), (a.tensor, a), (b.tensor, b)),
                      linear=tuple((acc.tensor, tuple(tuple(sorted(d.items())) for d in lin))
                                   for acc, lin in ((stmt.lhs, lc), (a, la), (b, lb))),
                      gather=gather, alpha=alpha, operand_dtype=operand_dtype)
    if rows:
        return callbox.row_blocks(program, stmt, found, rows, (a, b), split, aliased)
    # every scanned iterator ranges over [0, extent), independently of the
    # others and of the loops: the extent of a dimension it indexes plainly,
    # else its range in the domain (isl dim_max + 1, from 0)
    ctx = program.parameter_domain()
    box = stmt.domain       # the loops' domain, the scanned iterators unconstrained
    for it in m_keep + n_keep + k:
        box = box.eliminate(isl.dim_type.set, stmt.iterators.index(it), 1)
    extents, bounds = [], []
    named = [x for x in (stmt.lhs, a, b) if program.tensor(x.tensor).role != "temp"]  # no C_acc
    for it in m_keep + n_keep + k:
        pos = stmt.iterators.index(it)
        where = next(((acc.tensor, d) for acc in named
                      for d, idx in enumerate(acc.indices)
                      if isinstance(idx, E.Index) and idx.name == it), None)
        own = stmt.domain.intersect_params(ctx).dim_max(pos).add(
            const_pw_aff(ctx.get_space(), 1))
        if where is not None:
            ext = program.tensor(where[0]).shape[where[1]]
            if not ext.intersect_params(ctx).is_equal(own) and affine_in_sizes(own):
                # a loop bound that is another size than the tensor's extent
                # (a loop program's ``range(nj)`` over a ``tmp`` of its own
                # shape): the call scans the loop's extent
                ext = own
                extents.append((it, None, pw_aff_to_expr(own, ctx)))
            else:
                extents.append((it,) + where)
        else:
            ext = own
            extents.append((it, None, pw_aff_to_expr(own, ctx)))
        bounds.append((pos, ext))
    box = zero_based_box(box, bounds)
    if not stmt.domain.intersect_params(ctx).is_equal(box.intersect_params(ctx)):
        extra = box.intersect_params(ctx).subtract(stmt.domain).coalesce()
        reason = ("the iteration domain is not the full box of the tensor extents in the "
                  f"iterators the call scans (the box also holds {extra})")
        if not band or tensor_cores or gather or len(m_keep) != 1 or len(n_keep) != 1 \
                or (aliased and (len(k) != 1 or program.order is None)):
            return reason
        got = callbox.band_match(program, stmt, found, box, bounds, aliased)
        if isinstance(got, str):
            return f"{reason}; {got}"
        return replace(got, extents=tuple(extents))
    if aliased:
        reason = callbox.read_while_written(program, stmt, stmt.domain, found)
        if reason:
            return reason
    return replace(found, extents=tuple(extents))


def _terms(e: E.Expr) -> list[E.Expr]:
    """The terms of a sum in any association (``[e]`` when ``e`` is not a sum)."""
    if isinstance(e, E.Binary) and e.op == "+":
        return _terms(e.lhs) + _terms(e.rhs)
    return [e]


#: The most products one update may add (one call each).
MAX_TERMS = 4


def _match_sum(program: Program, stmt: Statement, terms: list[E.Expr], rows: int,
               split: bool, band: bool = True) -> GemmMatch | str:
    """``C += P1 + P2 + ...`` (each ``P`` a product :func:`match_gemm`
    takes) as one call per product, at the same point of the same loops:
    the first as the match, the others its ``terms``.  Each product is
    matched as the update ``C += P`` alone (its access relations rebuilt
    by isl); they must share C's roles, loops and blocks."""
    if len(terms) > MAX_TERMS:
        return f"the right-hand side adds more than {MAX_TERMS} products"
    shapes = {t.name: t.shape for t in program.tensors}
    found = []
    for i, term in enumerate(terms):
        part = make_statement(name=stmt.name, iterators=stmt.iterators, domain=stmt.domain,
                              lhs=stmt.lhs, op="+", rhs=term, shapes=shapes, kind="update",
                              reduction_iterators=stmt.reduction_iterators)
        alone = program.replace(statements=tuple(part if x.name == stmt.name else x
                                                 for x in program.statements))
        m = match_gemm(alone, part, rows=rows, split=split, band=band)
        if isinstance(m, str):
            return f"the right-hand side is a sum; its term {E.to_text(term)} does not " \
                   f"match: {m}"
        found.append(m)
    first = found[0]
    for m in found[1:]:
        if (m.batch, m.m, m.n, m.block, m.bounds, m.band and m.band.key()) != (
                first.batch, first.m, first.n, first.block, first.bounds,
                first.band and first.band.key()) or len(
                m.parts) != len(first.parts) or not all(
                x.is_equal(y) for (_, x), (_, y) in zip(m.parts, first.parts)):
            return ("the right-hand side is a sum of products whose calls would not share "
                    "their rows, columns and loops")
    return replace(first, terms=tuple(replace(m, init=None) for m in found[1:]))


def _folded_init(program: Program, stmt: Statement) -> str | None:
    """The ``+=!`` initialisation of ``stmt`` that the call can absorb: the
    statement right before it, of kind ``init``, writing exactly the output
    elements ``stmt`` writes, with no other statement in between."""
    stmts = list(program.statements)
    names = [s.name for s in stmts]     # by name: a note's match passes a rewritten copy
    if stmt.name not in names:
        return None
    i = names.index(stmt.name)
    if i == 0:
        return None
    prev = stmts[i - 1]
    if prev.kind != "init" or prev.tensor != stmt.tensor or prev.reads:
        return None
    ctx = program.parameter_domain()
    written = prev.write.range().intersect_params(ctx)
    full = tensor_box(program, prev.tensor).intersect_params(ctx)
    if not (written.is_equal(full) and stmt.write.range().intersect_params(ctx)
            .is_subset(written)):
        return None
    if not _is_zero(prev.rhs):
        return None
    return prev.name


def match_round_store(program: Program, m: GemmMatch) -> GemmMatch:
    """``m`` (on tensor cores) with the rounding store of its float32
    accumulator folded (``X(i, j) = C(i, j)`` right after the update, C a
    temporary that no other statement reads, :mod:`polyc.halfprec`): the
    call then stores each result rounded into X, and C is not needed.
    Needs the ``+=!`` initialisation folded (the call then writes every
    element of C) and a store of every element of C into X."""
    if not m.operand_dtype or m.init is None or m.epilogue or m.scale:
        return m
    stmts = list(program.statements)
    i = stmts.index(program.statement(m.statement))
    if i + 1 >= len(stmts):
        return m
    nxt = stmts[i + 1]
    if (nxt.kind != "assign" or program.tensor(m.c).role != "temp"
            or not isinstance(nxt.rhs, E.Access) or nxt.rhs.tensor != m.c):
        return m
    lhs, rhs = _plain(nxt.lhs), _plain(nxt.rhs)
    if lhs is None or lhs != rhs or not all(
            a.is_equal(b) for a, b in zip(program.tensor(nxt.tensor).shape,
                                          program.tensor(m.c).shape)):
        return m
    if any(s.name not in (m.statement, nxt.name)
           and any(r.get_tuple_name(isl.dim_type.out) == m.c for r in s.reads) for s in stmts):
        return m
    ctx = program.parameter_domain()
    stored = nxt.write.range().set_tuple_name(m.c).intersect_params(ctx)
    if not stored.is_equal(tensor_box(program, m.c).intersect_params(ctx)):
        return m
    return replace(m, epilogue=nxt.name, store=nxt.tensor)


def match_epilogue(program: Program, m: GemmMatch, post: bool = True,
                   tile: bool = True) -> GemmMatch:
    """``m`` with the statement right after it folded into the call's store
    when that statement is ``C = C + bias(n)``, ``C = fmax(C, 0)`` or
    ``C = fmax(C + bias(n), 0)`` over every element of C (an MLP layer's bias
    and ReLU): the call then applies it on the last pass over each C tile
    instead of a second pass over C.  Otherwise, with ``post``, the
    statement as the call's post-operations where it is one
    (:func:`polyc.gemm_post.match_post`: a convolution's batch norm, residual
    and ReLU; not on tensor cores, whose call has none), and the elementwise
    statements on C after those as the call's tile function
    (:func:`polyc.gemm_post.match_tile`: a GELU) unless ``tile`` is false."""
    stmts = list(program.statements)
    i = stmts.index(program.statement(m.statement))
    if i + 1 >= len(stmts) or m.terms:
        return m        # (several products: the store of the first call is not the last)
    if m.band is not None:
        return m        # (polyc_gemmt has no epilogue)
    nxt = stmts[i + 1]
    if nxt.kind != "assign" or nxt.tensor != m.c or _plain(nxt.lhs) is None:
        return m
    found = None if m.gather or len(m.n) != 1 else _bias_relu(program, m, nxt)
    if found is None and post:
        found = match_post(program, m, nxt)
    if not (post and tile):
        return m if found is None else found
    # the elementwise statements after it: the call's tile function
    if found is None:
        return match_tile(program, m, stmts[i + 1:])
    return match_tile(program, found, stmts[i + 2:])


def _bias_relu(program: Program, m: GemmMatch, nxt: Statement) -> GemmMatch | None:
    """``m`` with ``nxt`` folded as a scaling (alpha) or the in-store bias
    and ReLU of :func:`match_epilogue`; ``None`` when it is neither."""
    c_acc = m.accesses[0][1]
    alpha = _post_scale(program, m, nxt)
    if alpha is not None:
        return replace(m, epilogue=nxt.name, alpha=alpha)
    if m.batch:
        return None
    ren = dict(zip((x.name for x in nxt.lhs.indices), (x.name for x in c_acc.indices)))
    n_name = next(k for k, v in ren.items() if v == m.n[0])
    e, relu = nxt.rhs, False
    if isinstance(e, E.Call) and e.fn in ("fmax", "max") and len(e.args) == 2 \
            and _is_zero(e.args[1]):
        e, relu = e.args[0], True
    bias = None
    if isinstance(e, E.Binary) and e.op == "+" and isinstance(e.rhs, E.Access) \
            and len(e.rhs.indices) == 1 and isinstance(e.rhs.indices[0], E.Index) \
            and e.rhs.indices[0].name == n_name and e.rhs.tensor not in (m.c, m.a, m.b) \
            and program.tensor(e.rhs.tensor).dtype == m.dtype:
        bias, e = e.rhs.tensor, e.lhs
    if not (isinstance(e, E.Access) and e.tensor == m.c and e.indices == nxt.lhs.indices):
        return None
    if bias is None and not relu:
        return None
    ctx = program.parameter_domain()
    if not nxt.write.range().intersect_params(ctx).is_equal(
            tensor_box(program, m.c).intersect_params(ctx)):
        return None
    return replace(m, epilogue=nxt.name, bias=bias, relu=relu)


def register(name: str, description: str, implementations: dict, *, config=None):
    """Register a user-defined intrinsic that ``Schedule.tensorize(loop, name)``
    can map a band onto: see :func:`polyc.custom_intrinsics.register` (the
    description is a one-statement TC definition, the implementation C
    source; raises ``IntrinsicError``, ``ParseError`` or ``CompileError``)."""
    from .custom_intrinsics import register as _register
    return _register(name, description, implementations, config=config)
