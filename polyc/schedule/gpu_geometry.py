"""The geometry of a band's values, with isl: how many values each leading
member takes and with which stride (``isl_set_get_stride``), as
``isl.PwAff`` functions of the size parameters.  Used by the GPU mapping
(:mod:`polyc.schedule.gpu_mapping`) for grid and block sizes and by the
schedule language's mapping (:mod:`polyc.schedule.gpu_schedule`)."""

from __future__ import annotations

import islpy as isl


def const_like(pa: isl.PwAff, v: int) -> isl.PwAff:
    """The constant ``v`` on the domain space of ``pa``."""
    zero = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(pa.get_domain_space()))
    return isl.PwAff.from_aff(zero).add_constant_val(isl.Val.int_from_si(pa.get_ctx(), v))


def range_set(band: isl.ScheduleNode) -> isl.Set:
    """The values the members of ``band`` take over the instances that reach
    it, as one set over the size parameters (outer loops projected out)."""
    part = band.band_get_partial_schedule_union_map().intersect_domain(band.get_domain())
    rng = part.range()
    sets: list[isl.Set] = []
    rng.foreach_set(sets.append)
    if not sets:       # no instance reaches the band at any size
        return isl.Set.empty(band.band_get_space())
    out = sets[0]
    for s in sets[1:]:
        out = out.union(s)
    return out.coalesce()


def _strides(rng: isl.Set, n: int) -> tuple[int, ...]:
    if rng.is_empty():
        return (1,) * n
    return tuple(max(1, int(rng.get_stride(j).to_python())) for j in range(n))


def member_strides(band: isl.ScheduleNode, n: int) -> tuple[int, ...]:
    """Per leading member of ``band``: the stride of its values
    (``isl_set_get_stride``; a tile loop's tile size), 1 for a member with
    one value."""
    return _strides(range_set(band), n)


def member_extents(band: isl.ScheduleNode, n: int) -> list[isl.PwAff]:
    """Per leading member of ``band``: how many values it takes,
    ``(max - min) / stride + 1`` (a tile loop: the number of tiles)."""
    return member_strides_extents(band, n)[1]


def member_strides_extents(band: isl.ScheduleNode, n: int
                           ) -> tuple[tuple[int, ...], list[isl.PwAff]]:
    """:func:`member_strides` and :func:`member_extents` of ``band`` from
    one computation of its values (:func:`range_set`)."""
    rng = range_set(band)
    strides = _strides(rng, n)
    if rng.is_empty():
        return strides, [_zero(rng) for _ in range(n)]
    ctx = band.get_ctx()
    out = []
    for j, stride in enumerate(strides):
        span = rng.dim_max(j).sub(rng.dim_min(j))
        if stride > 1:
            span = span.scale_down_val(isl.Val.int_from_si(ctx, stride)).floor()
        out.append(span.add_constant_val(isl.Val.one(ctx)).coalesce())
    return strides, out


def _zero(s: isl.Set) -> isl.PwAff:
    """The constant 0 on the parameters of ``s`` (an empty launch)."""
    return isl.PwAff.from_aff(isl.Aff.zero_on_domain(
        isl.LocalSpace.from_space(s.get_space().params())))


def bounded_extent(band: isl.ScheduleNode, j: int) -> int | None:
    """The most values member ``j`` of ``band`` takes for fixed values of the
    loops around it, when a constant bounds it (a point loop of a tile)."""
    dom = band.get_domain()
    part = band.band_get_partial_schedule_union_map().intersect_domain(dom)
    if band.get_schedule_depth():
        prefix = band.get_prefix_schedule_union_map().intersect_domain(dom)
        pv = prefix.reverse().apply_range(part)
        pairs = pv.reverse().apply_range(pv)
    else:
        pairs = part.reverse().apply_range(part)
    if pairs.is_empty():
        return 1
    deltas = isl.Map.from_union_map(pairs).deltas()
    top = deltas.dim_max_val(j)
    if not top.is_int():
        return None
    return int(top.to_python()) + 1
