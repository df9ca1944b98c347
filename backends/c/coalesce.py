"""Loop coalescing of nests over contiguous elements (C backend).

A reduction over several trailing dimensions of a row-major tensor (group
norm's ``mean(n, g) +=! I(n, g, r_d, r_h, r_w)``, a global average pool's
sum over ``h`` and ``w``) is a perfect nest of loops whose innermost loop
is often short (48 elements of ``w``).  Printed as it stands, each trip of
the innermost loop is one vector reduction with its set-up and its
horizontal combine, and the accumulator goes through memory between them:
a latency chain that made group norm run at half the STREAM triad.  An
elementwise statement over ``(h, w)`` of 7 x 7 (a ResNet stage's batch
norm and ReLU) runs a vector loop of 7: a vector and a remainder per row.
When the nest walks the elements in memory order, it is one loop over
``H * W`` consecutive elements, vectorised once (loop coalescing:
Polychronopoulos, "Loop coalescing: a compiler transformation for parallel
machines", ICPP 1987; here only where the flat index is the row-major
offset itself, so no division recovers the iterators).

The nest qualifies (:func:`coalesce`) when:

- the loops ``c_1 .. c_k`` (``k >= 2``) are a perfect nest of sequential
  loops from 0 by 1 to bounds that do not move with the nest, ending at
  one statement: an update ``lhs op= rhs`` below a reduction loop, each
  ``c_j`` one of its reduced iterators; or an assignment or update below
  a vector loop, each ``c_j`` an iterator of the element it writes (a
  contraction's update below its reduction loop, ``O(.., h, w) += ..``
  inside ``for r_c2``), reading no element of that tensor but the one it
  writes (so the nest holds no dependence and the one loop is a vector
  loop too);
- every access that moves with the nest (an assignment's write too)
  indexes its last ``k`` dimensions by those iterators, in loop order and
  nothing else, mentions them nowhere else, and its extents ``2 .. k`` of
  those dimensions print as the bounds of ``c_2 .. c_k`` (the same C text
  over the same size parameters: the same values); the iterators occur in
  the statement only there.

Then element ``(.., r_1, .., r_k)`` of each such access is element
``(.., 0, .., 0, f)`` with ``f = (r_1 * t_2 + r_2) * t_3 .. + r_k``: the
row-major offset is linear, so the rewritten access addresses the same
memory; the single loop over ``f`` from 0 to ``t_1 * .. * t_k`` visits
the same iterations in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from polyc import expr as E
from polyc import loopnest as L
from polyc.ir import Statement

from .hoist import HOISTED
from .loopshape import counted, only_instance, perfect_child

#: update operators whose accumulator the C emitter keeps in a register
REDUCTION_OPS = ("+", "*", "max", "min")


@dataclass(frozen=True)
class Coalesced:
    """One loop standing for a coalesced reduction nest: ``loop`` runs the
    flat index (it keeps the innermost loop's iterator) over the one
    instance of ``statement`` (the source statement with its moving reads
    rewritten), which :meth:`_Emitter.reduction_loop` prints as usual."""
    loop: L.For
    statement: Statement
    depth: int
    #: one vector loop over elements (else a reduction loop)
    elementwise: bool = False


def _sequential(n: L.Node) -> bool:
    return isinstance(n, L.For) and not n.parallel and not n.mapped and n.collapse == 1


def _nest(n: L.For) -> list[L.For]:
    """The perfect nest of sequential loops from ``n`` down to the loop
    whose body is one statement instance (``[]`` when there is none)."""
    chain = [n]
    while only_instance(chain[-1]) is None:
        body = perfect_child(chain[-1])
        if not _sequential(body):
            return []
        chain.append(body)
    return chain


def _from_zero(n: L.For, names: set[str]) -> bool:
    """``for (c = 0; c < bound; c += 1)``, the bound fixed in the nest."""
    return (counted(n) and n.cond.op == "<" and isinstance(n.init, E.Const)
            and n.init.value == 0 and int(n.step) == 1
            and not (E.index_names(n.cond.rhs) & names))


def coalesce(n: L.For, stmts: dict[str, Statement], extent: Callable[[str, int], str],
             bound: Callable[[E.Expr], str], locals_: set[str]) -> Coalesced | None:
    """The nest of loops from ``n`` down as one loop, or ``None`` when it
    does not qualify (module docstring).  ``extent(tensor, d)`` prints a
    tensor's extent ``d``, ``bound(expr)`` a loop bound, both as the
    kernel's C text; ``locals_`` are the tensors stored as local arrays
    (indexed per dimension: no flat offset)."""
    if not _sequential(n):
        return None
    chain = _nest(n)
    if len(chain) < 2:
        return None
    inner = chain[-1]
    inst = only_instance(inner)
    s = stmts[inst.statement]
    if s.kind == "update" and s.op in REDUCTION_OPS and inner.reduction:
        elementwise = False
    elif (inner.simd and not inner.reduction
          and (s.kind == "update" or (s.kind in ("assign", "init") and s.op == "="))):
        elementwise = True
    else:
        return None
    loop_names = {x.iterator for x in chain}
    if not all(_from_zero(x, loop_names) for x in chain):
        return None
    # each loop is exactly one iterator of the statement: reduced ones for
    # a reduction, the written element's for an elementwise statement
    its: list[str] = []
    positions: list[int] = []
    for x in chain:
        found = [p for p, a in enumerate(inst.args) if x.iterator in E.index_names(a)]
        if len(found) != 1:
            return None
        p = found[0]
        arg = inst.args[p]
        if not (isinstance(arg, E.Index) and arg.name == x.iterator):
            return None
        if (s.iterators[p] in s.reduction_iterators) == elementwise:
            return None
        its.append(s.iterators[p])
        positions.append(p)
    names = set(its)
    reads = E.accesses(s.rhs)
    if elementwise:
        # the nest writes each element once and reads no element it writes
        # but the one it is writing: no dependence inside the nest, so the
        # one loop stays a vector loop
        if any(a.tensor == s.tensor and a.indices != s.lhs.indices for a in reads):
            return None
        moving = _moving([s.lhs, *reads], its, [bound(x.cond.rhs) for x in chain],
                         extent, locals_)
    else:
        if names & E.index_names(s.lhs):
            return None
        moving = _moving(reads, its, [bound(x.cond.rhs) for x in chain], extent, locals_)
    if not moving:
        return None
    k = len(its)
    uses = sum(1 for e in (s.lhs, s.rhs) for x in e.walk()
               if isinstance(x, E.Index) and x.name in names)
    if uses != k * moving:
        return None              # an iterator read as a value, or a gather's index

    flat = E.Index(its[-1])
    zero = E.Const(0)

    def rewrite(x: E.Expr) -> E.Expr | None:
        if isinstance(x, E.Access) and len(x.indices) >= k and any(
                isinstance(i, E.Index) and i.name in names for i in x.indices):
            return E.Access(x.tensor, x.indices[:-k] + (zero,) * (k - 1) + (flat,), x.span)
        return None

    statement = replace(s, rhs=E.map_expr(s.rhs, rewrite))
    if elementwise:
        statement = replace(statement, lhs=E.map_expr(s.lhs, rewrite))
    args = list(inst.args)
    for p in positions[:-1]:
        args[p] = zero
    total: E.Expr = chain[0].cond.rhs
    for x in chain[1:]:
        total = E.Binary("*", total, x.cond.rhs)
    loop = replace(inner, init=zero, cond=E.Binary("<", E.Index(inner.iterator), total),
                   body=replace(inst, args=tuple(args)))
    return Coalesced(loop, statement, k, elementwise)


def _moving(accesses, its: list[str], trips: list[str], extent, locals_) -> int | None:
    """How many of ``accesses`` move with the nest over ``its`` (``None``
    when one of them moves otherwise than along its last dimensions, in
    loop order, over its whole extents ``2 .. k``)."""
    k = len(its)
    moving = 0
    for a in accesses:
        walks = E.walks_last_dims(a, its)
        if walks is None:
            continue
        if not walks or a.tensor in locals_ or a.tensor.startswith(HOISTED):
            return None
        rank = len(a.indices)
        if any(extent(a.tensor, rank - k + j) != trips[j] for j in range(1, k)):
            return None
        moving += 1
    return moving
