"""Schedule-tree surgery shared by the transformations: splitting, isolating
and merging bands while keeping their loop names, and finding where a mark
goes.  Every function takes an ``isl.ScheduleNode`` and returns a node of the
new tree (isl trees are values: each operation yields a new tree).
"""

from __future__ import annotations

import contextlib

import islpy as isl

from ..errors import ScheduleError
from ..isl_util import CTX
from .tree import Loop, band_names, is_names_mark, node_at, path_of, set_band_names

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark


def band_node(schedule: isl.Schedule, loop: Loop) -> isl.ScheduleNode:
    node = node_at(schedule, loop.path)
    assert node.get_type() == _BAND, loop
    return node


def top_of_band(band: isl.ScheduleNode) -> isl.ScheduleNode:
    """The node to insert a mark above ``band``: its ``loops:`` mark if it
    has one, else the band itself."""
    if band.has_parent() and is_names_mark(band.parent()):
        return band.parent()
    return band


def below_names(node: isl.ScheduleNode) -> isl.ScheduleNode:
    """From a ``loops:`` mark (or the band itself) down to the band."""
    while is_names_mark(node):
        node = node.child(0)
    return node


def split_band(band: isl.ScheduleNode, pos: int, program) -> isl.ScheduleNode:
    """Split ``band`` before member ``pos`` (``isl_schedule_node_band_split``),
    naming both parts; returns the inner band.  ``pos`` 0 or ``n`` leaves the
    band whole and returns it."""
    n = band.band_n_member()
    if pos <= 0 or pos >= n:
        return band
    names = band_names(band, program)
    outer = band.band_split(pos)
    outer = _fewer_collapsed(set_band_names(outer, names[:pos]), pos)
    inner = outer.child(0)
    return set_band_names(inner, names[pos:])


def _fewer_collapsed(band: isl.ScheduleNode, n: int) -> isl.ScheduleNode:
    """``band`` (the outer part of a split, ``n`` members) with a
    ``parallel_collapse<k>`` mark above it, ``k > n``, reduced to collapse
    ``n`` loops: the loops it collapsed still carry nothing, but only ``n``
    of them remain in the band (a kernel's collapsed tile band refused
    ``parallel``, ``split``, ``tile`` and ``unroll`` of its members, saying
    the mark asked for more loops than the band had)."""
    from .marks import parallel_mark_name, parse_parallel_mark
    node, up = top_of_band(band), 0
    while node.has_parent() and node.parent().get_type() == _MARK:
        node, up = node.parent(), up + 1
        k = parse_parallel_mark(node.mark_get_id().get_name())
        if k > n:
            node = node.delete().insert_mark(isl.Id(parallel_mark_name(n), context=CTX))
            break
    else:
        return band
    for _ in range(up):         # back down to the band
        node = node.child(0)
    return below_names(node)


def isolate(band: isl.ScheduleNode, first: int, count: int, program) -> isl.ScheduleNode:
    """Split ``band`` so that members ``first .. first+count-1`` form a band
    of their own; returns that band."""
    band = split_band(band, first, program)
    n = band.band_n_member()
    if count < n:
        band = split_band(band, count, program)
        band = top_of_band(band).parent()       # back to the outer part
        assert band.get_type() == _BAND
    return band


def rebuild_band(band: isl.ScheduleNode, mupa: isl.MultiUnionPwAff, names,
                 permutable: bool, coincident=None) -> isl.ScheduleNode:
    """Replace ``band`` by a band with partial schedule ``mupa`` (same
    position; ``loops:`` mark updated); returns the new band."""
    if not band.band_get_ast_build_options().is_empty():
        raise ScheduleError(
            f"the band ({', '.join(names)}) carries AST options "
            f"({band.band_get_ast_build_options()}) from unroll / isolate_full_tiles, "
            f"which this transformation would drop; apply unroll and "
            f"isolate_full_tiles after the loops are in their final order")
    top = top_of_band(band)
    if top is not band:
        band = top.delete()
        assert band.get_type() == _BAND
    node = band.delete().insert_partial_schedule(mupa).band_set_permutable(bool(permutable))
    for j, c in enumerate(coincident or []):
        node = node.band_member_set_coincident(j, bool(c))
    return set_band_names(node, names)


def chain(schedule: isl.Schedule, program, loops: list[Loop]) -> list[isl.ScheduleNode]:
    """The bands from the outermost to the innermost band holding ``loops``,
    checked to be perfectly nested (each reached from the previous through
    ``loops:`` marks only)."""
    paths = sorted({lp.path for lp in loops}, key=len)
    outer = band_node(schedule, Loop(paths[0], 0, "", ()))
    out = [outer]
    node = outer
    inner_path = paths[-1]
    for p in paths:
        if p[:len(paths[0])] != paths[0]:
            raise ScheduleError(_not_nested(loops))
    while len(out) < 64:
        if path_of(node) == inner_path:
            return out
        if node.n_children() != 1:
            raise ScheduleError(_not_nested(loops))
        node = node.child(0)
        if node.get_type() == _MARK and not is_names_mark(node):
            raise ScheduleError(f"{_not_nested(loops)}: the mark "
                                f"{node.mark_get_id().get_name()} lies between them; "
                                f"apply parallel/vectorize/mark after the loop structure "
                                f"is final")
        node = below_names(node)
        if node.get_type() != _BAND:
            raise ScheduleError(_not_nested(loops))
        out.append(node)
    raise ScheduleError(_not_nested(loops))


def _not_nested(loops) -> str:
    return (f"loops {', '.join(lp.name for lp in loops)} are not in one perfectly nested "
            f"band chain (a sequence, filter or statement lies between them)")


def merge(schedule: isl.Schedule, program, loops: list[Loop]) -> tuple[isl.ScheduleNode, list[int]]:
    """Merge the perfectly nested bands holding ``loops`` into one band;
    returns it and the member index of each loop in it."""
    bands_ = chain(schedule, program, loops)
    offsets, total = {}, 0
    for b in bands_:
        offsets[path_of(b)] = total
        total += b.band_n_member()
    index = [offsets[lp.path] + lp.member for lp in loops]
    if len(bands_) == 1:
        return bands_[0], index
    names, coinc, perm = [], [], True
    mupa = None
    for b in bands_:
        names += band_names(b, program)
        coinc += [b.band_member_get_coincident(j) for j in range(b.band_n_member())]
        perm = perm and b.band_get_permutable()
        part = b.band_get_partial_schedule()
        mupa = part if mupa is None else mupa.flat_range_product(part)
    # delete the inner bands (and their names), bottom-up
    node = bands_[-1]
    for _ in range(len(bands_) - 1):
        node = top_of_band(node)
        if is_names_mark(node):
            node = node.delete()
        node = node.delete().parent()
        node = below_names(node) if node.get_type() == _MARK else node
        while node.get_type() != _BAND:
            node = node.parent()
    return rebuild_band(node, mupa, names, perm, coinc), index


def resolve_loops(s, loops, what: str) -> list[Loop]:
    """The :class:`Loop` of one loop spec or of each of a list of them (for
    the schedule ``s``); raises :class:`ScheduleError` naming ``what`` for an
    empty list or a loop given twice."""
    single = (isinstance(loops, (str, Loop, dict))
              or (isinstance(loops, (tuple, list)) and len(loops) == 2
                  and all(isinstance(x, str) and "." not in x for x in loops)))
    if single:
        loops = [loops]
    if not isinstance(loops, (list, tuple)):
        raise ScheduleError(f"{what}: expected a loop or a list of loops, got {loops!r}")
    out = [s.resolve(lp) for lp in loops]
    if not out:
        raise ScheduleError(f"{what}: give at least one loop")
    seen = set()
    for lp in out:
        if (lp.path, lp.member) in seen:
            raise ScheduleError(f"{what}: loop {lp.name} is given twice")
        seen.add((lp.path, lp.member))
    return out


@contextlib.contextmanager
def tile_options(scale: bool = True, shift: bool = False):
    """isl's tiling options for user tiles: tile loops step through the
    original values (``32*floor(m/32)``), point loops keep them (``m``)."""
    old = (CTX.get_tile_scale_tile_loops(), CTX.get_tile_shift_point_loops())
    CTX.set_tile_scale_tile_loops(int(scale))
    CTX.set_tile_shift_point_loops(int(shift))
    try:
        yield
    finally:
        CTX.set_tile_scale_tile_loops(old[0])
        CTX.set_tile_shift_point_loops(old[1])


def positive_int(value, what: str) -> int:
    """``value`` as a positive int below 2**31, else :class:`ScheduleError`
    naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np
            if isinstance(value, np.integer):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise ScheduleError(f"{what} must be a positive integer, got {value!r} "
                                f"({type(value).__name__})") from None
    if value <= 0:
        raise ScheduleError(f"{what} must be a positive integer, got {value}")
    if value >= 2**31:      # loop steps and strides of the generated code are 32-bit
        raise ScheduleError(f"{what} {value} is too large (at most {2**31 - 1})")
    return int(value)
