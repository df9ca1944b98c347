"""What the C emitter reads off a loop of the LoopNest before it prints it:
the statement that is a loop's whole body, whether a node holds some kind
of node, and whether an iteration's work depends on the iterator (a
triangle or a skew: dynamic OpenMP chunks; the point loops of a tile: even
work, static chunks keep each thread's data in its caches), and the
parallel loops that are a sequential loop's whole body (one parallel region
around the sequential loop), and a collapsed loop's inner headers made
plain for its ``collapse(k)`` pragma.  Expressions are :mod:`polyc.expr` trees as
isl's AST builder printed them."""

from __future__ import annotations

from dataclasses import replace

from polyc import expr as E
from polyc import loopnest as L


def perfect_child(n: L.For) -> L.Node:
    """The node that is ``n``'s whole body (blocks of one child looked through)."""
    body = n.body
    while isinstance(body, L.Block) and len(body.children) == 1:
        body = body.children[0]
    return body


def only_instance(n: L.For) -> L.StmtInstance | None:
    """The one statement instance that is ``n``'s whole body, or ``None``."""
    body = perfect_child(n)
    return body if isinstance(body, L.StmtInstance) else None


def counted(n: L.For) -> bool:
    """Whether ``n``'s condition is ``iterator < bound`` or ``<=``."""
    cond = n.cond
    return (isinstance(cond, E.Binary) and cond.op in ("<", "<=")
            and isinstance(cond.lhs, E.Index) and cond.lhs.name == n.iterator)


def const_trip(n: L.For) -> int | None:
    """``n``'s number of iterations when its bounds are constants (unit
    step), else ``None``."""
    if counted(n) and int(n.step) == 1 and isinstance(n.cond.rhs, E.Const) \
            and isinstance(n.init, E.Const):
        return int(n.cond.rhs.value) - int(n.init.value) + (n.cond.op == "<=")
    return None


def trip_text(n: L.For, index) -> str | None:
    """The C expression of ``n``'s trip count, its bounds printed by
    ``index`` (``None`` when its condition is not ``iterator < bound`` or
    ``<=``)."""
    if not counted(n):
        return None
    cond = n.cond
    trip = f"({index(cond.rhs)}) - ({index(n.init)})" + (
        " + INT64_C(1)" if cond.op == "<=" else "")
    step = int(n.step)
    if step != 1:
        trip = f"({trip}) / INT64_C({step})"
    return trip


def collapsed_trip(n: L.For, index) -> str | None:
    """The trip count of the ``n.collapse`` loops from ``n`` down (a
    perfect rectangular nest, :func:`polyc.loopnest.perfect_depth`)."""
    trips, cur = [], n
    for k in range(n.collapse):
        trip = trip_text(cur, index)
        if trip is None:
            return None
        trips.append(f"({trip})")
        if k + 1 < n.collapse:
            cur = perfect_child(cur)
            if not isinstance(cur, L.For):
                return None
    return " * ".join(trips)


def any_node(n: L.Node | None, pred) -> bool:
    """Whether ``pred`` holds for ``n`` or a node below it."""
    if n is None:
        return False
    if pred(n):
        return True
    if isinstance(n, (L.For, L.Local)):
        return any_node(n.body, pred)
    if isinstance(n, L.If):
        return any_node(n.then, pred) or any_node(n.otherwise, pred)
    if isinstance(n, L.Block):
        return any(any_node(k, pred) for k in n.children)
    return False


def uneven(n: L.For) -> bool:
    """Whether the work of an iteration of ``n`` depends on its iterator: a
    loop bound or a guard below ``n`` mentions it (a triangular or skewed
    nest).  A point loop of a tile of ``n`` (``c3`` from ``max(c1, ...)`` to
    ``min(c1 + 63, ...)``: a lower and an upper bound that move with ``n``
    alike) runs at most a constant number of times whatever ``n`` is: that
    is even work (only the last tile is shorter)."""
    def mentions(x: L.Node) -> bool:
        if isinstance(x, L.For):
            if n.iterator not in E.index_names(x.init) | E.index_names(x.cond):
                return False
            return not (isinstance(x.cond, E.Binary)
                        and tile_of(n.iterator, x.init, x.cond.rhs))
        if isinstance(x, L.If):
            return n.iterator in E.index_names(x.cond)
        return False
    return any_node(n.body, mentions)


def tile_of(it: str, lo: E.Expr, hi: E.Expr) -> bool:
    """Whether some lower bound among ``lo``'s ``max`` arguments and some
    upper bound among ``hi``'s ``min`` arguments are affine with the same
    nonzero coefficient of ``it`` (their difference, a bound on the trip
    count, does not depend on ``it``)."""
    def parts(e: E.Expr, fn: str) -> list[E.Expr]:
        if isinstance(e, E.Call) and e.fn == fn:
            return [x for a in e.args for x in parts(a, fn)]
        return [e]
    lows = {coefficient(x, it) for x in parts(lo, "max")}
    return any(c for c in {coefficient(x, it) for x in parts(hi, "min")} & lows)


def coefficient(e: E.Expr, it: str) -> int | None:
    """The coefficient of ``it`` in ``e`` when ``e`` is affine in it (sums,
    differences, products by constants; other names are constants here),
    else ``None``."""
    if isinstance(e, E.Index):
        return 1 if e.name == it else 0
    if isinstance(e, (E.Const, E.Param)):
        return 0
    if isinstance(e, E.Unary) and e.op == "-":
        c = coefficient(e.operand, it)
        return None if c is None else -c
    if isinstance(e, E.Binary) and e.op in ("+", "-"):
        a, b = coefficient(e.lhs, it), coefficient(e.rhs, it)
        return None if a is None or b is None else a + b if e.op == "+" else a - b
    if isinstance(e, E.Binary) and e.op == "*":
        for k, x in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(k, E.Const) and float(k.value).is_integer():
                c = coefficient(x, it)
                return None if c is None else int(k.value) * c
    return None if it in E.index_names(e) else 0


def parallel_body(n: L.For) -> list[L.For] | None:
    """The loops of ``n``'s body when they are its whole body (through
    blocks), each is parallel, and one of them at least holds a loop itself
    (or collapses several): a time step of a stencil, parallel nests.
    ``None`` when anything else is there (a statement, a guard, a local
    buffer, a sequential loop), or when every loop is a short one-level
    loop (jacobi-1d: its barriers would cost more than its work)."""
    out: list[L.For] = []

    def visit(x: L.Node) -> bool:
        if isinstance(x, L.Block):
            return all(visit(k) for k in x.children)
        if isinstance(x, L.For) and x.parallel:
            out.append(x)
            return True
        return False
    if not visit(n.body) or not any(
            x.collapse > 1 or any_node(x.body, lambda y: isinstance(y, L.For)) for x in out):
        return None
    return out


def fold_collapsed_simd(n: L.For) -> tuple[L.For, bool]:
    """``n`` with the loops its ``collapse(k)`` covers made plain loops, and
    whether one had the ``simd`` flag.  Nothing may come between collapsed
    loop headers (gcc: "not enough perfectly nested loops"): no ``simd``
    pragma (the simd goes onto the combined ``parallel for simd
    collapse(k)``), and no register accumulator or hoisted load that
    ``emit._Emitter.reduction_loop`` / ``hoisted_loop`` would
    declare around a ``reduction`` / ``simd`` loop.  The LoopNest promises
    that ``k`` loops nest perfectly (:func:`polyc.loopnest.perfect_depth`)."""
    assert L.perfect_depth(n, n.collapse) == n.collapse, L.format_loopnest(n)

    def strip(f: L.Node, depth: int) -> tuple[L.Node, bool]:
        if depth == 0:
            return f, False
        if isinstance(f, L.Block):
            (only,) = f.children
            body, found = strip(only, depth)
            return L.Block((body,)), found
        assert isinstance(f, L.For), f
        body, found = strip(f.body, depth - 1)
        return replace(f, body=body, simd=False, reduction=False), found or f.simd
    body, found = strip(n.body, n.collapse - 1)
    return replace(n, body=body), found


def schedule_clause(n: L.For, kind: str, trip: str | None, sequential: bool,
                    calls: bool) -> str:
    """The ``schedule`` clause of parallel loop ``n`` (its trip count ``trip``
    printed, or ``None``; ``sequential``: inside a sequential loop; ``calls``:
    around intrinsic calls).  A dynamic loop
    hands out chunks of ``polyc_chunk(trip, team)`` iterations (about
    four per thread) as threads become free, so a thread slowed by
    another process, or given the long rows of a triangular loop, does
    fewer of them; a static loop gives each thread one contiguous block,
    the same block in every iteration of the loops around it, so what a
    thread wrote stays in its core's caches.  ``Config.omp_schedule``:
    ``"auto"`` (the default) is dynamic where that affinity cannot
    matter or the work is uneven: a loop inside no sequential loop (it
    runs once per call), or one whose inner loop bounds or guards depend
    on its iterator; static inside a sequential loop (a stencil's time
    loop, a factorisation's k loop) over even work.  ``"dynamic"`` and
    ``"static"`` force one kind; a loop whose trip count the emitter
    cannot print is static.  A collapsed loop's trip count is the
    product of its loops' (a rectangular nest).  A dynamic loop around
    intrinsic calls hands out smaller chunks (about 16 per thread, one
    call each for attention's 64 (batch, row block) iterations on two
    threads): each iteration is a whole GEMM call, and a core that
    another process slows then takes fewer of them (8x512x64 attention
    with half a core busy elsewhere: 5.4-6.4 ms against 7.0-8.2 ms
    static); one call per chunk cost 6% on 500 tiny calls (bmm
    500x26x72x26)."""
    if kind == "auto":
        kind = "dynamic" if not sequential or uneven(n) else "static"
    if kind != "dynamic" or trip is None:
        return "schedule(static)"
    if calls:
        return f"schedule(dynamic, polyc_chunk({trip}, 4 * polyc_team))"
    return f"schedule(dynamic, polyc_chunk({trip}, polyc_team))"
