"""Dependences against hand-written isl maps; legality of hand-made schedules."""

import islpy as isl
import programs
import pytest

from polyc import dependence
from polyc.errors import IllegalScheduleError
from polyc.schedule import initial, legality


def umap(text: str) -> isl.UnionMap:
    return isl.UnionMap(text)


def test_matmul_dependences():
    d = dependence.compute(programs.matmul())
    chain = ("[M, N, K] -> { S0[m, n, k] -> S0[m, n, k + 1] : 0 <= m < M and 0 <= n < N "
             "and 0 <= k <= K - 2 }")
    init = "[M, N, K] -> { S0_init[m, n] -> S0[m, n, 0] : 0 <= m < M and 0 <= n < N and K > 0 }"
    assert d.flow.is_equal(umap(chain).union(umap(init)))
    assert d.output.is_equal(umap(chain).union(umap(init)))
    assert d.anti.is_equal(umap(chain))
    assert d.reduction.is_equal(umap(chain))


def test_producer_consumer_dependences():
    d = dependence.compute(programs.producer_consumer())
    assert d.flow.is_equal(umap("[N] -> { S0[i] -> S1[i] : 0 <= i < N }"))
    assert d.anti.is_empty() and d.output.is_empty()


def test_stencil_dependences():
    d = dependence.compute(programs.stencil())
    flow = umap("[N] -> { S0[i] -> S1[i] : 1 <= i <= N - 3; S0[0] -> S1[1] : N >= 4; "
                "S1[i] -> S1[i + 1] : 1 <= i <= N - 4 }")
    assert d.flow.is_equal(flow), d.flow
    assert d.output.is_equal(umap("[N] -> { S0[i] -> S1[i] : 1 <= i <= N - 3 }"))


def test_schedules_from_the_pipeline_are_legal():
    for prog in (programs.matmul(), programs.producer_consumer(), programs.stencil()):
        d = dependence.compute(prog)
        legality.check(initial.identity_schedule(prog), d, prog)
        legality.check(initial.auto_schedule(prog, d), d, prog)


def test_reversed_reduction_is_rejected_with_an_instance_pair():
    prog = programs.matmul()
    d = dependence.compute(prog)
    bad = isl.Schedule(
        '{ domain: "[M, N, K] -> { S0_init[m, n] : 0 <= m < M and 0 <= n < N; '
        'S0[m, n, k] : 0 <= m < M and 0 <= n < N and 0 <= k < K }", '
        'child: { schedule: "[M, N, K] -> [{ S0_init[m, n] -> [(m)]; S0[m, n, k] -> [(m)] }, '
        '{ S0_init[m, n] -> [(n)]; S0[m, n, k] -> [(n)] }, '
        '{ S0_init[m, n] -> [(0)]; S0[m, n, k] -> [(-k)] }]", '
        'child: { sequence: [ { filter: "[M, N, K] -> { S0_init[m, n] }" }, '
        '{ filter: "[M, N, K] -> { S0[m, n, k] }" } ] } } }')
    with pytest.raises(IllegalScheduleError) as e:
        legality.check(bad, d, prog, what="reversing k")
    msg = str(e.value)
    assert "reversing k" in msg and "tensor C" in msg
    assert "S0[m=0, n=0, k=" in msg and "wrong order" in msg


def test_consumer_before_producer_is_rejected():
    prog = programs.producer_consumer()
    d = dependence.compute(prog)
    bad = isl.Schedule('{ domain: "[N] -> { S0[i] : 0 <= i < N; S1[i] : 0 <= i < N }", '
                       'child: { sequence: [ { filter: "{ S1[i] }" }, { filter: "{ S0[i] }" } ] } }')
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor B from "
                       "statement S0 to statement S1"):
        legality.check(bad, d, prog)
