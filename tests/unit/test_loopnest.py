"""LoopNest helpers that need no C compiler: the perfect-nest count that
decides ``collapse(k)`` (:func:`polyc.loopnest.perfect_depth`)."""

from __future__ import annotations

from polyc import expr as E
from polyc import loopnest as L


def test_perfect_depth_counts_only_perfect_rectangular_nests():
    stmt = L.StmtInstance("S0", (E.Index("c0"), E.Index("c1")))

    def loop(it, body, lo=E.Const(0), hi=E.Param("N")):
        return L.For(it, lo, E.Binary("<", E.Index(it), hi), 1, body)

    inner = loop("c1", stmt)
    assert L.perfect_depth(loop("c0", inner), 2) == 2
    assert L.perfect_depth(loop("c0", L.Block((inner,))), 2) == 2
    assert L.perfect_depth(loop("c0", inner), 1) == 1
    # a statement between the headers
    assert L.perfect_depth(loop("c0", L.Block((stmt, inner))), 2) == 1
    # a guard between the headers
    assert L.perfect_depth(loop("c0", L.If(E.Const(1), inner)), 2) == 1
    # a triangular inner loop
    assert L.perfect_depth(loop("c0", loop("c1", stmt, hi=E.Index("c0"))), 2) == 1
    # the loop below is not the band's next member (c1 was degenerate)
    below = loop("c2", stmt)
    assert L.perfect_depth(loop("c0", below), 2, ("c0", "c1")) == 1
    assert L.perfect_depth(loop("c0", below), 2) == 2
