"""Candidate fusions of the planner (:func:`polyc.graph.plan.plan`): which
pairs of groups it may try to merge, and which it need not lower again.

A group here is anything with ``nodes`` (:class:`~polyc.graph.core.Node`
list) and ``key`` (the frozenset of their ids), as
:class:`polyc.graph.plan.Group` is.

* producer→consumer pairs are built by the planner itself (the bytes of
  the tensors that would stay inside the group);
* :func:`siblings`: two groups that read the same tensor with no path
  between them;
* :func:`reachability`: the group graph's reachability as bit masks, so
  that a merge that would create a cycle is never proposed;
* :func:`grown_from_refused`: a pair whose merge was refused stays refused
  when one side has since grown only by operations that share no tensor
  with the other side (see its docstring).
"""

from __future__ import annotations

from functools import reduce
from operator import or_

#: per reader of a shared tensor, how many of the next readers (in group
#: order) a sibling candidate is formed with, and how far it looks for them
SIBLING_PARTNERS = 2
SIBLING_WINDOW = 8


def siblings(groups, owner, refused, reaches) -> list[tuple[int, int, int, str]]:
    """Sibling candidates: two groups that read the same tensor (Q/K/V
    projections of one input) with no path between them; the bytes are the
    inputs they share, read once instead of twice when the loops fuse.

    Each reader of a tensor is paired with the next
    :data:`SIBLING_PARTNERS` readers (in group order, within
    :data:`SIBLING_WINDOW`) that it may merge with, not with every other
    reader: a tensor read by k groups (an input that a Python loop over
    output pixels slices k times) gave k^2/2 pairs at every planning step,
    most of a traced LeNet's planning.  Up to three readers (Q/K/V) every
    pair is still a candidate; merged siblings are adjacent to the next."""
    readers: dict[int, set[int]] = {}
    reads: dict[int, set[int]] = {}
    size: dict[int, int] = {}
    for k, g in enumerate(groups):
        for n in g.nodes:
            for i in n.inputs:
                if owner.get(i.id) != k:
                    readers.setdefault(i.id, set()).add(k)
                    reads.setdefault(k, set()).add(i.id)
                    size[i.id] = i.nbytes
    pairs: set[tuple[int, int]] = set()
    for ks in readers.values():
        ks = sorted(ks)
        for a in range(len(ks)):
            found = 0
            for b in range(a + 1, min(len(ks), a + 1 + SIBLING_WINDOW)):
                p, c = ks[a], ks[b]
                if (p, c) in pairs:
                    found += 1
                elif (groups[p].key, groups[c].key) not in refused and \
                        not reaches(p, c, False) and not reaches(c, p, False):
                    pairs.add((p, c))
                    found += 1
                if found == SIBLING_PARTNERS:
                    break
    return [(sum(size[t] for t in reads[p] & reads[c]), p, c, "sibling")
            for p, c in sorted(pairs)]


def reachability(n: int, succ: dict[int, set[int]]) -> list[int]:
    """Per group of the (acyclic) group graph ``succ``: the groups reachable
    from it, itself included, as a bit mask (one pass per planning step
    instead of a search per candidate)."""
    reach, state = [0] * n, [0] * n          # state: 0 new, 1 on the stack, 2 done
    for s in range(n):
        stack = [] if state[s] else [(s, iter(succ.get(s, ())))]
        state[s] = state[s] or 1
        while stack:
            v, it = stack[-1]
            x = next((x for x in it if not state[x]), None)
            if x is None:
                stack.pop()
                reach[v] = reduce(or_, (reach[x] for x in succ.get(v, ())), 1 << v)
                state[v] = 2
            else:
                state[x] = 1
                stack.append((x, iter(succ.get(x, ()))))
    return reach


def _related(xs, ys) -> bool:
    """Whether operations ``xs`` and ``ys`` share a tensor: one reads what
    the other writes, or both read the same tensor."""
    xi = {n.id for n in xs}
    yi = {n.id for n in ys}
    x_in = {i.id for n in xs for i in n.inputs}
    y_in = {i.id for n in ys for i in n.inputs}
    return bool(x_in & yi or y_in & xi or x_in & y_in)


def grown_from_refused(a, b, refused: set[tuple[frozenset, frozenset]]) -> frozenset | None:
    """The refused pair's grown side's old key when the merge of groups
    ``a`` and ``b`` need not be lowered again: some refused pair ``(x, y)``
    (either order) has ``x`` equal to one of them and ``y`` a proper subset
    of the other, and what that side gained since shares no tensor with
    ``x`` (:func:`_related`); ``None`` otherwise.

    ``refused`` holds the pairs refused because isl's scheduler kept them
    in separate nests (rule "no common loop"): operations that touch
    nothing of ``x`` add no dependence to or from ``x``'s statements, so
    they give isl no new reason to fuse ``x`` with the rest.  (Refusals
    that compare the parts' verdicts, such as lost parallel loops, are
    not passed: the grown side's own verdict changed.)  This is a pruning
    rule of the search, not a proof (isl's clustering heuristics see the
    whole group); without it, a long chain that grows one operation at a
    time re-lowers every neighbour it refused at each step (a two-block
    CNN: 20 lowerings of 52-58 operations, 17 of its 23 s of planning)."""
    for x, y in ((a, b), (b, a)):
        for p, q in refused:
            for rx, ry in ((p, q), (q, p)):
                if rx == x.key and ry < y.key:
                    gained = [n for n in y.nodes if n.id not in ry]
                    if not _related(x.nodes, gained):
                        return ry
    return None
