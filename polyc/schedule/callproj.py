"""The calls of a tensorized group and the loops above them.

Takes a :class:`~polyc.ir.Program` and a :class:`~polyc.intrinsics.GemmMatch`
and returns isl maps: :func:`projections` maps each instance of a group's
statements onto the call that computes it (``{ S0[b, m, n, k] -> S0[b] }``);
:func:`prefix_reason` decides with them whether the loops above a schedule
node are a function of the calls' loops (:func:`polyc.schedule.tensorize.mark_band`
requires it).
"""

from __future__ import annotations

import islpy as isl

from ..intrinsics import GemmMatch
from ..ir import Program, Statement
from ..isl_util import CTX

__all__ = ["group_statements", "projections", "prefix_reason"]



def _projection(stmt: Statement, name: str, keep: list[str], alias: list[str],
                block: tuple[str, int] | None = None) -> isl.Map:
    """``{ stmt[iterators] -> name[alias] }`` keeping the iterators ``keep``
    (renamed ``alias``), and with ``block = (i, b)`` a last output
    ``floor(i / b)`` (alias included in ``alias``); built with isl's API:
    the names are user text (``NAN`` or ``infty`` would read as values in
    isl's syntax)."""
    space = stmt.domain.get_space()
    ls = isl.LocalSpace.from_space(space)
    target = isl.Space.set_from_params(space.params()).add_dims(
        isl.dim_type.set, len(keep) + (1 if block else 0))
    target = target.set_tuple_name(isl.dim_type.set, name)
    affs = isl.AffList.alloc(space.get_ctx(), len(keep) + (1 if block else 0))
    for it in keep:
        affs = affs.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, stmt.iterators.index(it)))
    if block:
        var = isl.Aff.var_on_domain(ls, isl.dim_type.set, stmt.iterators.index(block[0]))
        affs = affs.add(var.scale_down_val(isl.Val.int_from_si(CTX, block[1])).floor())
    proj = isl.Map.from_multi_aff(isl.MultiAff.from_aff_list(
        isl.Space.map_from_domain_and_range(space, target), affs))
    for i, a in enumerate(alias):
        proj = proj.set_dim_name(isl.dim_type.out, i, a)
    return proj


def _output_batch(stmt: Statement, other: Statement, batch: list[str]) -> list[str] | None:
    """The iterators of ``other`` (a statement writing the same output with
    plain indices) at the output positions of ``stmt``'s ``batch``."""
    pos = [i.name for i in stmt.lhs.indices]
    idx = [getattr(i, "name", None) for i in other.lhs.indices]
    if len(idx) != len(pos) or None in idx:
        return None
    return [idx[pos.index(b)] for b in batch]


def group_statements(m: GemmMatch) -> tuple[str, ...]:
    """The statements one call computes: the scaling or initialisation
    folded before it, the update, the epilogue after it."""
    return tuple(x for x in (m.init, m.scale, m.statement, m.epilogue) if x) + \
        tuple(st.name for st in getattr(m, "tile", ()))    # (a user intrinsic has none)


def projections(program: Program, m: GemmMatch) -> dict[str, isl.Map]:
    """Per statement of the group, ``{ X[iterators] -> S[batch] }``: the call
    (named after the update ``S``) each instance belongs to."""
    stmt = program.statement(m.statement)
    batch = list(m.batch)
    alias = list(m.loops)
    out = {}
    for name in group_statements(m):
        st = program.statement(name)
        keep = batch if name == m.statement else _output_batch(stmt, st, batch)
        block = None
        if m.block:
            row = m.m[0] if name == m.statement else _output_batch(stmt, st, [m.m[0]])[0]
            block = (row, m.block)
        out[name] = _projection(st, m.call, keep, alias, block)
    return out



def prefix_reason(node: isl.ScheduleNode, program: Program, m: GemmMatch) -> str | None:
    """Why the loops above ``node`` are not a function of the calls' loops
    (``None`` when they are): ``{ call -> prefix }``, the union over the
    group of the projections' inverses composed with the prefix schedule,
    must be single-valued.

    That relation is first built from the prefix schedule without its
    existentially quantified variables (``isl_union_map_remove_divs``: a
    superset); when that one is single-valued, so is the exact one.  The
    exact test runs only otherwise: with the domains of a strided
    convolution (``2*h + 3*w + kh``: existentials over the sizes) it took
    minutes."""
    prefix = node.get_prefix_schedule_union_map()
    proj = projections(program, m)
    relaxed = prefix.remove_divs()
    loose = None
    for pr in proj.values():
        part = isl.UnionMap.from_map(pr).reverse().apply_range(relaxed)
        loose = part if loose is None else loose.union(part)
    if loose is not None and loose.is_single_valued():
        return None
    reach = node.get_domain()

    def q_of(name: str) -> isl.UnionMap:
        dom = isl.UnionSet.from_set(program.statement(name).domain).intersect(reach)
        return isl.UnionMap.from_map(proj[name]).intersect_domain(dom).reverse() \
            .apply_range(prefix.intersect_domain(dom))
    qs = {name: q_of(name) for name in proj}
    q = qs[m.statement]
    if q.is_single_valued():
        for name, part in qs.items():
            q = q.union(part)
            if not q.is_single_valued():
                return (f"{name} does not run at the same point of the loops above the band "
                        f"as the {m.statement} instances it belongs to")
        return None
    stmt = program.statement(m.statement)
    own = prefix.intersect_domain(isl.UnionSet.from_set(stmt.domain))
    for it in m.scanned:
        pos = stmt.iterators.index(it)
        p = isl.Map.identity(isl.Space.map_from_set(stmt.domain.get_space()))
        p = p.project_out(isl.dim_type.out, pos, 1).insert_dims(isl.dim_type.out, pos, 1)
        p = p.set_tuple_name(isl.dim_type.out, stmt.name).intersect_domain(stmt.domain) \
             .intersect_range(stmt.domain)
        if not isl.UnionMap.from_map(p).apply_range(own).is_subset(own):
            return (f"a loop above the band depends on {it}, which the intrinsic scans "
                    f"(it computes whole slices of {m.c}): mark the outermost loop that "
                    f"scans {it}")
    return "the loops above the band are not a function of the call's loops"


