"""Which bands of a starting tree the tuner's knobs address
(:func:`tunable`), and how a recipe names their members (:func:`spec`).

Every band is tuned: the outermost ones, and the bands below a sequence or
set inside them (the second statement's nest of a distributed program, the
inner loops of a fused producer and consumer, the source order's ``for k``
below ``for i: for j``), each with knobs of its own.  A chain of perfectly
nested bands (the source order's one-loop bands) is one tuned band, as the
language's ``tile`` and ``reorder`` merge them.  A band of one member that
carries a dependence and has bands below it (a time loop around several
nests) gets no knobs (it can be neither parallel nor reordered) and the
bands below it are tuned, unless none lies below it (the source order's
innermost loop of an imperfect nest: matvec's ``for j`` beside its
initialisation).  Takes isl schedule nodes; returns
``(chain, untuned bands above, parent)`` triples, ``parent`` the index of
the tuned band whose subtree holds the chain (``None``: outermost).
"""

from __future__ import annotations

import islpy as isl

from ..errors import ScheduleError
from ..ir import Program
from ..schedule import legality, tree


def spec(schedule, target: str, name: str, band: isl.ScheduleNode, member: int
         ) -> tuple[str, str]:
    """How a recipe names member ``member`` of ``band`` for statement
    ``target``: the first part of a merged name (``j`` of ``j|k``) when that
    finds this loop, else the whole name (PolyBench 2mm from isl's
    scheduler: ``j`` answers to both ``j|k`` and ``k|j``)."""
    short = name.split("|")[0]
    try:
        lp = schedule.loop(target, short)
    except ScheduleError:
        return (target, name)
    here = (tuple(tree.path_of(band)), member)
    return (target, short) if (tuple(lp.path), lp.member) == here else (target, name)


def loops_below(band: isl.ScheduleNode, program: Program) -> tuple[str, ...]:
    """``S.loop`` of each band strictly below ``band`` that leaves a loop in
    the code (:func:`polyc.schedule.unroll.loop_below`'s test)."""
    from ..schedule.unroll import fully_unrolled
    out: list[str] = []

    def visit(n):
        if n.get_type() == isl.schedule_node_type.band and not fully_unrolled(n):
            st = tree.statements_of(n)[0]
            out.extend(f"{st}.{nm.split('|')[0]}" for nm in tree.band_names(n, program))
        return True
    for i in range(band.n_children()):
        band.child(i).foreach_descendant_top_down(visit)
    return tuple(dict.fromkeys(out))


def _band_below(band: isl.ScheduleNode) -> isl.ScheduleNode | None:
    """The band that is ``band``'s only child, through marks (loop names)."""
    node = band
    while node.n_children() == 1:
        node = node.child(0)
        if node.get_type() == isl.schedule_node_type.band:
            return node
        if node.get_type() != isl.schedule_node_type.mark:
            return None
    return None


def _bands_below(band: isl.ScheduleNode) -> bool:
    """Whether a band node lies strictly below ``band``."""
    found = []

    def visit(n):
        if n.get_type() == isl.schedule_node_type.band:
            found.append(n)
        return not found
    for i in range(band.n_children()):
        band.child(i).foreach_descendant_top_down(visit)
    return bool(found)


def tunable(root: isl.ScheduleNode, deps: isl.UnionMap) -> list[tuple]:
    """``(chain, untuned bands above, parent)`` of every band the knobs
    address below ``root``, outer bands first (see the module docstring);
    ``deps``: the dependences that make a one-member band sequential."""
    out: list[tuple] = []
    _walk(root, (), None, deps, out)
    return out


def _walk(node: isl.ScheduleNode, above: tuple, parent, deps, out: list) -> None:
    if node.get_type() == isl.schedule_node_type.band:
        chain = [node]
        while (below := _band_below(chain[-1])) is not None:
            chain.append(below)
        if (len(chain) > 1 or node.band_n_member() > 1 or node.band_member_get_coincident(0)
                or not _bands_below(chain[-1]) or not legality.carries(node, 0, deps)):
            out.append((chain, above, parent))
            me = len(out) - 1
            last = chain[-1]
            for i in range(last.n_children()):
                _walk(last.child(i), above, me, deps, out)
            return
        above = above + (node,)         # a time loop: the bands below it are tuned
    for i in range(node.n_children()):
        _walk(node.child(i), above, parent, deps, out)
