"""Whether a schedule's promotions still hold (:func:`check_promotions`).

A promotion (:mod:`polyc.schedule.promotion`) copies one iteration's
footprint of a tensor in and out around the loops below its ``promote:``
mark.  A transformation of the loops at or above it, applied afterwards,
can leave the copies scanning other elements than those an iteration
reads and writes; the schedule language's check
(:meth:`~polyc.schedule.language.Schedule.check`) calls this after the
order check and refuses such a schedule with the reason.
"""

from __future__ import annotations

import islpy as isl

from ..errors import IllegalScheduleError
from ..ir import Program, Statement
from .legality import without_extensions
from .promotion import LOCAL_MARK, footprints
from .tree import statements_of, walk

_EXT = isl.schedule_node_type.extension


def _copies_of(program: Program, buf: str) -> dict[str, Statement]:
    """The copy statements of local buffer ``buf``: ``{"in": ..., "out": ...}``."""
    out = {}
    for st in program.statements:
        if st.kind == "copy" and st.tensor == buf:
            out["in"] = st
        elif st.kind == "copy" and buf in st.read_tensors():
            out["out"] = st
    return out


def check_promotions(s, what: str = "schedule") -> None:
    """Raise :class:`IllegalScheduleError` when a promotion's copies no
    longer fit the loops around them: for every ``promote:`` extension of
    ``s`` (a :class:`~polyc.schedule.language.Schedule`), the copy-in and
    copy-out must scan exactly the read and write footprints of one
    iteration of the current prefix schedule (computed from the original
    statements, ``s.base``), and every redirected access must hit the
    buffer element its copies use.  A transformation of the loops at or
    above a promotion after it (e.g. an interchange of the tile loops)
    breaks that; :meth:`Schedule.check` calls this after the order check."""
    program: Program = s.program
    ctx = program.parameter_domain()
    order = without_extensions(s.isl)
    for ext in walk(s.isl.get_root()):
        if ext.get_type() != _EXT:
            continue
        mark = ext.parent()
        assert mark.get_type() == isl.schedule_node_type.mark, "extension without a mark"
        buf = mark.mark_get_id().get_name()[len(LOCAL_MARK):]
        local = program.tensor(buf)
        t = program.tensor(local.origin)
        copies = _copies_of(program, buf)
        names = statements_of(ext)
        users = [program.statement(nm) for nm in names]
        users = [st for st in users if st.kind != "copy" and (
            st.tensor == buf or buf in st.read_tensors())]
        base = [s.base.statement(st.name) for st in users]
        _, fw, fr = footprints(ext, base, t, program, order)
        problem = None
        executed = ext.extension_get_extension()
        for kind, fp in (("in", fr), ("out", fw)):
            st = copies.get(kind)
            if st is None:
                if not fp.is_empty():
                    problem = f"{buf} has no copy-{kind}"
                continue
            glob = st.reads[0] if kind == "in" else st.write
            ext_map = executed.extract_map(isl.Space.map_from_domain_and_range(
                fp.get_space().domain(), st.domain.get_space()))
            if not ext_map.apply_range(glob).intersect_params(ctx).is_equal(fp):
                problem = (f"the copy-{kind} of {buf} no longer scans the elements of "
                           f"{t.name} one iteration of the loops around it "
                           f"{'reads' if kind == 'in' else 'writes'}")
                break
        for st, orig in zip(users, base):
            if problem:
                break
            prefix = ext.get_prefix_schedule_union_map().extract_map(
                isl.Space.map_from_domain_and_range(
                    st.domain.get_space(), fr.get_space().domain()))
            rels = [("in", orig_r, now_r) for orig_r, now_r in zip(orig.reads, st.reads)
                    if orig_r.get_tuple_name(isl.dim_type.out) == t.name]
            if orig.tensor == t.name:
                rels.append(("out", orig.write, st.write))
            # every access of an iteration is to an element it copies in
            # (an exposed read) or out (a write, or a read of a value written
            # before it in the iteration)
            local_rel = None
            for kind, cp in copies.items():
                rel = (cp.write if kind == "in" else cp.reads[0]).reset_tuple_id(
                    isl.dim_type.in_)
                local_rel = rel if local_rel is None else local_rel.union(rel)
            for kind, orig_r, now_r in rels:
                pair = prefix.range_product(orig_r.intersect_domain(st.domain)).flatten_range()
                want = pair.apply_range(local_rel).intersect_params(ctx)
                if not want.is_equal(now_r.intersect_domain(st.domain).intersect_params(ctx)):
                    problem = (f"statement {st.name} no longer accesses the element of "
                               f"{buf} that its copy-{kind} uses")
                    break
        if problem:
            raise IllegalScheduleError(
                f"{what} is illegal: it breaks the promotion of {t.name} to {buf}: "
                f"{problem}; promote after the loops around the promotion are final "
                f"(parallel, vectorize and marks may follow)")
