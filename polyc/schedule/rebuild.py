"""Schedule subtrees as small Python descriptions, and their rebuilding
with isl's node insertions: what :mod:`polyc.schedule.fusion` rewrites when
it fuses sibling subtrees (isl has no fusion primitive).

:func:`describe` reads the subtree at a node (bands with their partial
schedule, permutable and coincident flags and loop names, sequence/set nodes
with their filters, marks, leaves); :func:`build` inserts a description at a
node; :func:`replace_subtree` swaps a subtree for a description.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from ..errors import ScheduleError
from ..isl_util import CTX
from .tree import is_names_mark, names_mark_id, path_of

_T = isl.schedule_node_type
_BAND = _T.band
_MARK = _T.mark


@dataclass
class _Band:
    mupa: isl.MultiUnionPwAff
    domain: isl.UnionSet
    permutable: bool
    coincident: list
    loop_types: list
    isolate_types: list
    options: isl.UnionSet
    names: list | None
    child: object

    @property
    def n(self) -> int:
        return len(self.coincident)


@dataclass
class _Mark:
    id: isl.Id
    child: object


@dataclass
class _Children:
    kind: str                                   # "sequence" or "set"
    parts: list = field(default_factory=list)   # [(filter, description)]


@dataclass
class _Filter:
    filter: isl.UnionSet
    child: object


class _Leaf:
    pass


def _kind(node: isl.ScheduleNode) -> str:
    return str(node.get_type()).split(".")[-1].rstrip("_")


def describe(node: isl.ScheduleNode):
    """The subtree at ``node`` as a description (see the module docstring).
    Raises :class:`ScheduleError` for node kinds it cannot rebuild
    (extension, expansion, context, guard)."""
    t = node.get_type()
    if t == _MARK and is_names_mark(node) and node.child(0).get_type() == _BAND:
        band = describe(node.child(0))
        band.names = node.mark_get_id().get_name()[len("loops:"):].split(",")
        if len(band.names) != band.n:
            band.names = None
        return band
    if t == _BAND:
        n = node.band_n_member()
        return _Band(
            mupa=node.band_get_partial_schedule(), domain=node.get_domain(),
            permutable=bool(node.band_get_permutable()),
            coincident=[bool(node.band_member_get_coincident(j)) for j in range(n)],
            loop_types=[node.band_member_get_ast_loop_type(j) for j in range(n)],
            isolate_types=[node.band_member_get_isolate_ast_loop_type(j) for j in range(n)],
            options=node.band_get_ast_build_options(), names=None,
            child=describe(node.child(0)))
    if t == _MARK:
        return _Mark(node.mark_get_id(), describe(node.child(0)))
    if t in (_T.sequence, _T.set):
        parts = []
        for i in range(node.n_children()):
            f = node.child(i)
            parts.append((f.filter_get_filter(), describe(f.child(0))))
        return _Children("sequence" if t == _T.sequence else "set", parts)
    if t == _T.filter:
        return _Filter(node.filter_get_filter(), describe(node.child(0)))
    if t == _T.leaf:
        return _Leaf()
    raise ScheduleError(f"cannot restructure a subtree that holds a {_kind(node)} node "
                        f"(at path {list(path_of(node))}); fuse before adding it")


def _filter_list(filters) -> isl.UnionSetList:
    out = isl.UnionSetList.alloc(CTX, len(filters))
    for f in filters:
        out = out.add(f)
    return out


def build(node: isl.ScheduleNode, desc) -> isl.ScheduleNode:
    """Build ``desc`` at ``node`` (a leaf); returns the node at the position
    of the built subtree's root."""
    if isinstance(desc, _Leaf):
        return node
    if isinstance(desc, _Band):
        band = node.insert_partial_schedule(desc.mupa)
        band = build(band.child(0), desc.child).parent()
        band = band.band_set_permutable(int(desc.permutable))
        for j in range(desc.n):
            band = band.band_member_set_coincident(j, int(desc.coincident[j]))
            if desc.loop_types and desc.loop_types[j] != isl.ast_loop_type.default:
                band = band.band_member_set_ast_loop_type(j, desc.loop_types[j])
            if (desc.isolate_types
                    and desc.isolate_types[j] != isl.ast_loop_type.default):
                band = band.band_member_set_isolate_ast_loop_type(j, desc.isolate_types[j])
        if desc.options is not None and not desc.options.is_empty():
            band = band.band_set_ast_build_options(desc.options)
        if desc.names is not None:
            return band.insert_mark(names_mark_id(desc.names))
        return band
    if isinstance(desc, _Mark):
        mark = node.insert_mark(desc.id)
        return build(mark.child(0), desc.child).parent()
    if isinstance(desc, _Filter):
        f = node.insert_filter(desc.filter)
        return build(f.child(0), desc.child).parent()
    if isinstance(desc, _Children):
        filters = _filter_list([f for f, _ in desc.parts])
        seq = (node.insert_sequence(filters) if desc.kind == "sequence"
               else node.insert_set(filters))
        assert seq.n_children() == len(desc.parts), "an empty filter was dropped"
        for i, (_, child) in enumerate(desc.parts):
            seq = build(seq.child(i).child(0), child).parent().parent()
        return seq
    raise AssertionError(desc)


def replace_subtree(node: isl.ScheduleNode, desc) -> isl.ScheduleNode:
    """The tree with the subtree at ``node`` replaced by ``desc``; returns
    the node at ``node``'s position."""
    return build(node.cut(), desc)


def pullback(schedule: isl.Schedule, rel: isl.UnionMap, domain: isl.UnionSet) -> isl.Schedule:
    """``schedule`` (a tree of bands, marks, filters, sequences and sets)
    pulled back onto the instances ``domain`` by ``rel`` (``{ x -> y }``,
    each ``x`` of ``domain`` to the instance ``y`` of ``schedule`` whose
    place it takes), through union maps: what
    ``isl_schedule_pullback_union_pw_multi_aff`` computes, also where two
    parts of one statement's instances map to instances of different
    statements that share a band (isl adds the pulled-back pieces of a
    band member as parts of distinct spaces, and fails there: a split
    group's edge and calls, :mod:`polyc.schedule.tensorize_auto`)."""
    def pull(desc):
        if isinstance(desc, _Band):
            band = isl.UnionMap.from_multi_union_pw_aff(desc.mupa)
            mupa = isl.MultiUnionPwAff.from_union_map(rel.apply_range(band))
            return _Band(mupa, rel.apply_range(isl.UnionMap.from_domain(desc.domain)).domain(),
                         desc.permutable, desc.coincident, desc.loop_types,
                         desc.isolate_types, desc.options, desc.names, pull(desc.child))
        if isinstance(desc, _Mark):
            return _Mark(desc.id, pull(desc.child))
        if isinstance(desc, _Filter):
            return _Filter(rel.intersect_range(desc.filter).domain(), pull(desc.child))
        if isinstance(desc, _Children):
            return _Children(desc.kind, [(rel.intersect_range(f).domain(), pull(c))
                                         for f, c in desc.parts])
        return desc
    rel = rel.intersect_domain(domain)
    desc = pull(describe(schedule.get_root().child(0)))
    return build(isl.Schedule.from_domain(domain).get_root().child(0), desc).get_schedule()
