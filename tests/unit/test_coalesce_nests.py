"""coalesce on hand-built loop nests: which nests become one
loop over the flat offset and which keep their loops (the conditions of
backends/c/coalesce.py's docstring, one at a time)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import polyc
from polyc import expr as E
from polyc import loopnest as L
from polyc.backends.c.coalesce import coalesce
from polyc.backends.c.emit import _Emitter

SRC = """def f(float(N, H, W) X) -> (s) {
    s(n) +=! X(n, r_h, r_w) * X(n, r_h, r_w)
}"""


def loop(it, bound, body, **kw):
    return L.For(it, E.Const(0), E.Binary("<", E.Index(it), bound), 1, body, **kw)


def nest(args=("c0", "c1", "c2"), outer_bound=E.Param("H"), inner_bound=E.Param("W"),
         statement="S0", **inner):
    """for c1 < outer_bound: for c2 < inner_bound: statement(args): the
    inner loop a reduction loop, or with ``simd=True`` a vector loop."""
    inst = L.StmtInstance(statement, tuple(E.Index(a) for a in args))
    inner.setdefault("reduction", not inner.get("simd", False))
    inner_loop = loop("c2", inner_bound, inst, **inner)
    return loop("c1", outer_bound, inner_loop)


def run(n, src=SRC):
    em = _Emitter(polyc.program(src))
    return coalesce(n, em.stmts, em.extent_expr, em.loop_printer.index, em.locals)


def test_memory_order_becomes_one_loop():
    flat = run(nest())
    assert flat is not None and flat.depth == 2
    assert flat.loop.iterator == "c2"
    assert E.to_text(flat.loop.cond.rhs) == "H * W"
    assert flat.loop.body.args == (E.Index("c0"), E.Const(0), E.Index("c2"))


def test_every_moving_read_takes_the_flat_offset():
    src = """def f(float(N, H, W) X, float(H, W) v) -> (s) {
        s(n) +=! X(n, r_h, r_w) * v(r_h, r_w)
    }"""
    flat = run(nest(), src)
    assert flat is not None
    reads = {a.tensor: a.indices for a in E.accesses(flat.statement.rhs)}
    assert reads["X"] == (E.Index("n"), E.Const(0), E.Index("r_w"))
    assert reads["v"] == (E.Const(0), E.Index("r_w"))


@pytest.mark.parametrize("why,n", [
    # the loops scan r_w outside r_h: not memory order
    ("transposed", nest(args=("c0", "c2", "c1"), outer_bound=E.Param("W"),
                        inner_bound=E.Param("H"))),
    # the inner loop's bound is not X's extent
    ("bound", nest(inner_bound=E.Binary("-", E.Param("W"), E.Const(1)))),
    # a parallel inner loop
    ("parallel", nest(parallel=True)),
])
def test_nests_that_keep_their_loops(why, n):
    assert run(n) is None, why


def test_a_read_of_the_innermost_dimension_alone_keeps_the_loops():
    """v(r_w) repeats every W elements: no offset of the flat index."""
    src = """def f(float(N, H, W) X, float(W) v) -> (s) {
        s(n) +=! X(n, r_h, r_w) * v(r_w)
    }"""
    assert run(nest(), src) is None


def test_an_iterator_read_as_a_value_keeps_the_loops():
    src = """def f(float(N, H, W) X) -> (s) {
        s(n) +=! X(n, r_h, r_w) * r_h
    }"""
    assert run(nest(), src) is None


def test_outer_loop_not_from_zero():
    n = nest()
    assert run(replace(n, init=E.Const(1))) is None


def test_single_loop_is_left_to_the_reduction_printer():
    inst = L.StmtInstance("S0", (E.Index("c0"), E.Const(0), E.Index("c2")))
    assert run(loop("c2", E.Param("W"), inst, reduction=True)) is None


def test_assignment_is_not_coalesced():
    src = """def f(float(N, H, W) X) -> (s) {
        s(n, h, w) = X(n, h, w)
    }"""
    assert run(nest(statement="S0"), src) is None


ELEMENTWISE = """def f(float(N, H, W) X) -> (O) {
    O(n, h, w) = X(n, h, w) * 2.0
    O(n, h, w) = O(n, h, w) * X(n, h, w)
    O(n, h, w) = O(n, h, w) + O(n, 0, w)
}"""


@pytest.mark.parametrize("statement", ["S0", "S1"])
def test_elementwise_nest_writes_at_the_flat_offset(statement):
    """S1 reads the element it writes: no dependence in the nest either."""
    flat = run(nest(statement=statement, simd=True), ELEMENTWISE)
    assert flat is not None and flat.depth == 2
    assert flat.statement.lhs.indices == (E.Index("n"), E.Const(0), E.Index("w"))
    assert all(a.indices == flat.statement.lhs.indices
               for a in E.accesses(flat.statement.rhs))


def test_elementwise_needs_the_vector_loop():
    assert run(nest(reduction=False), ELEMENTWISE) is None      # not marked simd


def test_elementwise_reading_another_element_it_writes_keeps_the_loops():
    # S2 reads O(n, 0, w), written by the same nest at h = 0
    assert run(nest(statement="S2", simd=True), ELEMENTWISE) is None


UPDATE = """def f(float(N, C, H, W) X, float(C, H, W) V) -> (O) {
    O(n, h, w) +=! X(n, r_c, h, w) * V(r_c, h, w)
}"""


def test_update_below_its_reduction_loop_is_one_vector_loop():
    """O(n, h, w) += ... over (h, w) inside ``for r_c``: each element updated
    once per trip of the nest, so the nest is elementwise too."""
    flat = run(nest(args=("c0", "c1", "c2", "c3"), statement="S0", simd=True), UPDATE)
    assert flat is not None and flat.elementwise and flat.depth == 2
    assert flat.statement.lhs.indices == (E.Index("n"), E.Const(0), E.Index("w"))
    reads = {a.tensor: a.indices for a in E.accesses(flat.statement.rhs)}
    assert reads["V"] == (E.Index("r_c"), E.Const(0), E.Index("w"))


def test_reduction_nest_is_not_elementwise():
    flat = run(nest())
    assert flat is not None and not flat.elementwise
