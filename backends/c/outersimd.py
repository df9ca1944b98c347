"""Outer-loop vectorisation around short inner loops, for the C emitter.

A broadcast-reduce such as RBF's kernel sum,

    t7(i) +=! exp(-t4(i, j))      t4(i, j) +=! (x(i, r) - y(j, r))^2,  r < 3

comes out of scheduling as a loop over ``j`` whose body is a short
reduction over ``r`` (three coordinates) and an update of ``t7(i)``; a
pairwise distance ``D(i, j) +=! (X(i, r) - Y(j, r))^2`` likewise.  The
only vector loop the emitter would print is the one over ``r``, which
runs three times, so the nest ran scalar (RBF: one ``exp`` at a time,
6 ns per pair and core).  gcc does not vectorise the loop around the
short one itself (it vectorises the inner loop first; an ``omp simd``
outer loop stays scalar unless the inner trip count is a constant it can
unroll).  So the emitter does it (outer-loop vectorisation, Nuzman and
Zaks, "Outer-loop vectorization: revisited for short SIMD architectures",
PACT 2008, as strip-mining and interchange): ``j`` runs in strips of
:data:`LANES` iterations, and each part of its body runs for the strip's
iterations as an ``omp simd`` loop over them, *inside* the short loops:

    for (strip = j0; strip + 16 <= j1; strip += 16) {
        float t4[16];
        simd for lane: t4[lane] = 0
        for r: simd for lane: t4[lane] += (x[i, r] - y[strip + lane, r])^2
        simd for lane: acc[lane] += exp(-t4[lane])
    }
    (the remainder strip likewise), then t7(i) += acc[0] + ... + acc[15]

Each iteration of ``j`` still runs its statements in their order; only
iterations of different lanes interleave, which :func:`outer_vector`
proves harmless.  It accepts a sequential loop ``n`` when

* ``n`` holds loops, each a counted sequential loop holding no loop that
  the schedule marked as a vector or reduction loop (``simd``,
  ``reduction``: never under ``Config(simd=False)`` or an identity
  schedule), whose bounds do not move with ``n``, and no call of an intrinsic; an ``if``
  around such a loop does not read ``n``'s iterator;
* every tensor written in ``n``'s body is one of

  - a local buffer of at most :data:`MAX_PRIVATE` elements declared inside
    ``n``'s body, outside the inner loops (private to an iteration: a
    contracted temporary; one copy per lane),
  - the accumulator of one ``+`` or ``*`` update statement directly in
    ``n``'s body, of a floating-point type, at an element that does not
    move with ``n`` or an inner loop, read by no statement of the body: a
    reduction along ``n``, accumulated per lane and combined after the
    loop (the reassociation that the emitter already applies to a vector
    reduction loop; update statements only, never an assignment that
    reads its own element, as a loop program writes it),
  - a tensor that every statement of the body reads and writes at the
    same element, which moves injectively with ``n`` (an index
    ``a * n + b``, ``a != 0``, ``b`` free of ``n`` and the inner loops):
    iterations touch disjoint elements;

* some inner loop is a reduction (a statement in it writes an element that
  does not move with it): a short elementwise loop is a vector loop of
  its own, and strips of the loop around it would scatter its stores;
* the inner loops are short: each constant trip count is below the vector
  loop's minimum (``SIMD_MIN_TRIP``); the others are compared at run time,
  and the nest is printed twice, the strip-mined copy taken when every
  inner trip count is below it.

The plan is data (:class:`OuterVector`); :func:`vector_loop` prints it
through the emitter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import cgen as c

from polyc import expr as E
from polyc import loopnest as L
from polyc.ir import C_TYPES, Statement

from .cexpr import loop_iterator_name, tensor_name
from .hoist import HOISTED
from .loopshape import any_node, coefficient, const_trip, counted, trip_text

#: iterations of the vectorised loop per strip (lanes of its ``simd`` loops)
LANES = 16
#: most elements of a private local expanded to one copy per lane
MAX_PRIVATE = 16
#: update operators kept in a register across the vector loop
_OPS = ("+", "*")
_FLOATS = ("float32", "float64")


@dataclass(frozen=True)
class OuterVector:
    """A loop to vectorise around its short inner loops."""
    loop: L.For
    #: the updates accumulated in registers: (statement, its instance's arguments)
    accumulators: tuple[tuple[str, tuple[E.Expr, ...]], ...]
    #: the inner loops whose trip counts are known only at run time
    runtime_inner: tuple[L.For, ...]


def outer_vector(n: L.For, stmts: dict[str, Statement], dtypes: dict[str, str],
                 min_trip: int) -> OuterVector | None:
    """The plan to vectorise ``n`` around its inner loops (module
    docstring), or ``None``.  ``min_trip``: the fewest iterations of a
    vector inner loop (shorter ones make ``n`` worth vectorising)."""
    if n.parallel or n.simd or n.mapped or n.collapse != 1 or not counted(n) \
            or int(n.step) != 1:
        return None
    if const_trip(n) is not None and const_trip(n) < 4:
        return None
    inner: list[L.For] = []
    insts: list[tuple[L.StmtInstance, L.For | None]] = []
    private: set[str] = set()

    def visit(node: L.Node | None, within: L.For | None) -> bool:
        if node is None:
            return True
        if isinstance(node, L.For):
            if within is not None or node.parallel or node.mapped or node.collapse != 1 \
                    or not counted(node) or not (node.simd or node.reduction):
                return False
            inner.append(node)
            return visit(node.body, node)
        if isinstance(node, L.Block):
            return all(visit(k, within) for k in node.children)
        if isinstance(node, L.If):
            if within is None and n.iterator in E.index_names(node.cond) \
                    and any_node(node, lambda y: isinstance(y, L.For)):
                return False                 # (a strip runs the loops for every lane)
            return visit(node.then, within) and visit(node.otherwise, within)
        if isinstance(node, L.Local):
            private.add(node.name)
            size = 1
            for v in node.sizes:
                size *= int(v)
            # (expanded to one copy per lane: contracted scalars and short rows)
            return within is None and size <= MAX_PRIVATE and visit(node.body, within)
        if isinstance(node, L.StmtInstance):
            insts.append((node, within))
            return stmts[node.statement].kind != "intrinsic"
        return False
    if not visit(n.body, None) or not inner:
        return None
    inner_its = {f.iterator for f in inner}
    runtime = []
    for f in inner:
        used = E.index_names(f.init) | E.index_names(f.cond.rhs)
        if n.iterator in used or used & inner_its:
            return None
        trip = const_trip(f)
        if trip is None:
            runtime.append(f)
        elif trip >= min_trip:
            return None
    # every access in loop iterators: tensor -> [(indices, written, instance, loop)]
    uses: dict[str, list[tuple[tuple, bool, L.StmtInstance, L.For | None]]] = {}
    for inst, within in insts:
        s = stmts[inst.statement]
        sub = dict(zip(s.iterators, inst.args))

        def loopify(e: E.Expr, sub=sub) -> E.Expr:
            return E.map_expr(e, lambda x: sub.get(x.name) if isinstance(x, E.Index) else None)
        uses.setdefault(s.tensor, []).append(
            (tuple(loopify(i) for i in s.lhs.indices), True, inst, within))
        for a in E.accesses(s.rhs):
            uses.setdefault(a.tensor, []).append(
                (tuple(loopify(i) for i in a.indices), False, inst, within))
    # worth it only around a short reduction (a short elementwise loop is a
    # vector loop itself; strips of the loop around it would scatter its stores)
    if not any(f is not None and not any(f.iterator in E.index_names(i)
                                         for i in idx)
               for tensor, acc in uses.items() for idx, written, _, f in acc if written):
        return None
    accumulators = []
    moving = inner_its | {n.iterator}
    for tensor, acc in uses.items():
        writers = [u for u in acc if u[1]]
        if not writers or tensor in private:
            continue
        if any(E.accesses(i) for idx, *_ in acc for i in idx):
            return None                      # a gathered or scattered element
        s = stmts[writers[0][2].statement]
        idx, _, inst, within = writers[0]
        if (len(acc) == 1 and within is None and s.kind == "update" and s.op in _OPS
                and dtypes.get(tensor) in _FLOATS
                and not any(E.index_names(i) & moving for i in idx)):
            accumulators.append((inst.statement, tuple(inst.args)))
            continue
        if any(u[0] != idx for u in acc):
            return None
        if not any(coefficient(i, n.iterator) not in (None, 0)
                   and not E.index_names(i) & inner_its for i in idx):
            return None
    return OuterVector(n, tuple(accumulators), tuple(runtime))


class LoopPrinter(Protocol):
    """What :func:`vector_loop` needs of the C emitter (:class:`.emit._Emitter`)."""
    stmts: dict[str, Statement]
    dtypes: dict[str, str]
    hoisted: int
    #: private locals expanded to one element per lane (``t_T[polyc_lane]...``)
    lanes: set[str]
    loop_printer: object

    def statement(self, inst: L.StmtInstance) -> c.Generable: ...

    def _for(self, n: L.For, body: c.Generable) -> c.For: ...

    def _access(self, tensor: str, idx: list[str]) -> str: ...


def vector_loop(em: LoopPrinter, ov: OuterVector, min_trip: int,
                scalar: c.Generable) -> c.Generable:
    """``ov``'s loop strip-mined by :data:`LANES` iterations, each part of
    its body run for the strip's iterations by an ``omp simd`` loop over
    them (the lanes) inside the inner loops: each private local and each
    accumulator one element per lane (the accumulators' lanes combined in
    lane order after the last strip), full strips with a constant lane
    count, then the remainder; chosen over ``scalar`` (the loop as the
    emitter prints it otherwise) by the inner trip counts at run time."""
    n = ov.loop
    ip = em.loop_printer.index
    saved = dict(em.stmts)
    inits, stores = [], []
    for name, args in ov.accumulators:
        s = em.stmts[name]
        sub = dict(zip(s.iterators, args))
        idx = tuple(E.map_expr(i, lambda x: sub.get(x.name) if isinstance(x, E.Index) else None)
                    for i in s.lhs.indices)
        target = em.loop_printer._access(E.Access(s.tensor, idx))
        acc = f"{HOISTED}{em.hoisted}"
        em.hoisted += 1
        em.dtypes[acc] = dtype = em.dtypes[s.tensor]
        var = em._access(acc, [])
        em.lanes.add(acc)
        ctype = C_TYPES[dtype]
        identity = "0" if s.op == "+" else "1"
        inits.append(c.Line(f"{ctype} {var}[{LANES}];"))
        inits.append(c.Line(f"for (int polyc_l = 0; polyc_l < {LANES}; polyc_l++) "
                            f"{var}[polyc_l] = ({ctype}){identity};"))
        stores.append(c.Block([
            c.Initializer(c.Value(ctype, "polyc_r"), target),
            c.Line(f"for (int polyc_l = 0; polyc_l < {LANES}; polyc_l++) "
                   f"polyc_r = polyc_r {s.op} {var}[polyc_l];"),
            c.Statement(f"{target} = polyc_r")]))
        em.stmts[name] = replace(s, lhs=E.Access(acc, ()))
    it = loop_iterator_name(n.iterator)
    last = f"({ip(n.cond.rhs)})" + (" + INT64_C(1)" if n.cond.op == "<=" else "")

    def lanes(run: list[L.Node], trip: str) -> c.Generable:
        body = [c.Initializer(c.Const(c.Value("int64_t", it)), "polyc_strip + polyc_lane")]
        body += [item for x in run for item in items(x, True, trip)]
        return c.Module([c.Pragma("omp simd"), c.For(
            "int64_t polyc_lane = 0", f"polyc_lane < {trip}", "polyc_lane += 1",
            c.Block(body))])

    def items(x: L.Node | None, in_lane: bool, trip: str) -> list:
        if x is None:
            return []
        if isinstance(x, L.Block):
            if in_lane:
                return [item for k in x.children for item in items(k, True, trip)]
            out, run = [], []
            for k in x.children:             # loop-free statements in runs of lanes
                if _loop_free(k) and not isinstance(k, L.Local):
                    run.append(k)
                    continue
                if run:
                    out.append(lanes(run, trip))
                    run = []
                out += items(k, False, trip)
            return out + ([lanes(run, trip)] if run else [])
        if isinstance(x, L.StmtInstance):
            return [em.statement(x)] if in_lane else [lanes([x], trip)]
        if isinstance(x, L.Local):
            em.lanes.add(x.name)
            dims = "".join(f"[{int(v)}]" for v in x.sizes) or "[1]"
            return [c.Line(f"{C_TYPES[x.dtype]} {tensor_name(x.name)}[{LANES}]{dims};"),
                    *items(x.body, False, trip)]
        if not in_lane and _loop_free(x):
            return [lanes([x], trip)]
        if isinstance(x, L.If):
            then, other = items(x.then, in_lane, trip), items(x.otherwise, in_lane, trip)
            return [c.If(ip(x.cond), c.Block(then), c.Block(other) if other else None)]
        assert isinstance(x, L.For) and not in_lane, x
        return [em._for(x, c.Block(items(x.body, False, trip)))]
    try:
        full = items(n.body, False, str(LANES))
        tail = items(n.body, False, "polyc_nl")
    finally:
        em.stmts.clear()
        em.stmts.update(saved)
        em.lanes.clear()
    strips = [
        c.Initializer(c.Value("int64_t", "polyc_strip"), ip(n.init)),
        c.For("", f"polyc_strip + {LANES} <= {last}", f"polyc_strip += {LANES}",
              c.Block(full)),
        c.If(f"polyc_strip < {last}", c.Block([
            c.Initializer(c.Const(c.Value("int64_t", "polyc_nl")), f"{last} - polyc_strip"),
            *tail]))]
    vector = c.Block([c.Comment(f"vectorised around its short inner loops: strips of {LANES} "
                                f"iterations of {it}, one SIMD lane each"),
                      *inits, *strips, *stores])
    conds = [f"({trip_text(f, ip)}) < INT64_C({min_trip})" for f in ov.runtime_inner]
    if not conds:
        return vector
    return c.If(" && ".join(dict.fromkeys(conds)), vector, scalar)


def _loop_free(x: L.Node) -> bool:
    return not any_node(x, lambda y: isinstance(y, L.For))


