"""``polyc.schedule.explain``: carried dependences, parallel / vector loops,
fusion groups with the reasons statements stay apart, tile footprints; as
text and as JSON.  No C compiler needed (schedules are lowered, not built).
"""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from polyc import pipeline
from polyc.config import Config
from polyc.schedule.explain import analyse, explain
from polyc.schedule.language import Schedule

from . import util


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

#: consumer reads the producer one element ahead: fusing the loops is illegal
SHIFT = """
def shift(float(N) A) -> (T, B) {
    T(i) = A(i) * 2.0
    B(i) = T(i+1) + 1.0 where i in 0:N-1
}
"""


def auto(src: str, config: Config | None = None) -> Schedule:
    """The automatic schedule (what ``kernel.schedule`` is), with fixed tile
    sizes so that the result does not depend on this machine's caches."""
    config = config or Config.from_env(tile_sizes=(32,))
    low = pipeline.lower(util.program(src), config)
    return Schedule.from_isl(low.program, low.schedule, low.deps)


def loops(data: dict, name: str, stmt: str | None = None) -> list[dict]:
    out = [lp for lp in data["loops"] if lp["name"] == name
           and (stmt is None or stmt in lp["statements"])]
    assert out, (name, [lp["name"] for lp in data["loops"]])
    return out


def carried(lp: dict, kind: str, tensor: str) -> dict:
    hits = [d for d in lp["carries"] if d["kind"] == kind and d["tensor"] == tensor]
    assert len(hits) == 1, lp["carries"]
    return hits[0]


def block(text: str, loop: str, nth: int = 0) -> str:
    """The text block of the ``nth`` loop called ``loop``."""
    parts = text.split("\n  loop ")
    mine = [p for p in parts[1:] if p.split()[0] == loop]
    return mine[nth].split("\n\n")[0]


# ------------------------------------------------------------------ matmul

@pytest.mark.parametrize("make", [lambda: util.start(util.MATMUL), lambda: auto(util.MATMUL)],
                         ids=["source", "automatic"])
def test_matmul_k_carries_the_reduction_m_n_parallel(make):
    s = make()
    data = explain(s, as_json=True)
    json.dumps(data)
    for name in ("m", "n"):
        for lp in loops(data, name):
            assert lp["carries"] == [] and lp["parallel"] and lp["parallel_reason"] is None
    (k,) = loops(data, "k")
    assert not k["parallel"]
    flow = carried(k, "flow", "C")
    assert (flow["source"], flow["sink"]) == ("S0", "S0")
    assert flow["distance"] == [0, 0, 1] and flow["uniform"] and flow["reduction"]
    assert {d["kind"] for d in k["carries"]} == {"flow", "anti", "output"}
    assert all(d["reduction"] for d in k["carries"])
    assert "flow dependence on C from S0 to S0" in k["parallel_reason"]
    assert "S0[" in flow["example"]

    text = explain(s)
    kb = block(text, "k")
    assert "flow    C  S0 -> S0  distance (0, 0, 1)  reduction" in kb
    assert "parallel      no: it carries the flow dependence on C from S0 to S0" in kb
    for name in ("m", "n"):
        b = block(text, name)
        assert "carries       nothing" in b and "parallel      yes" in b


def test_matmul_source_vectorization_needs_reassociation():
    s = util.start(util.MATMUL)
    (k,) = loops(explain(s, as_json=True), "k")
    assert k["innermost"] and not k["vectorizable"]
    assert "with_reassociation" in k["vectorizable_reason"]
    (m,) = loops(explain(s, as_json=True), "m")
    assert m["vectorizable_reason"] == "not innermost (loop n lies inside it)"
    (k,) = loops(explain(s.with_reassociation(), as_json=True), "k")
    assert k["vectorizable"] and "reduction" in k["vectorizable_note"]
    assert not k["parallel"]        # reassociation does not make it parallel


def test_matmul_automatic_marks_and_tile_footprint():
    data = explain(auto(util.MATMUL), as_json=True)
    marked = [lp["name"] for lp in data["loops"] if lp["marked_parallel"]]
    assert marked and all(not loops(data, n)[0]["carries"] for n in marked)
    simd = [lp for lp in data["loops"] if lp["marked_simd"]]
    assert simd and all(lp["innermost"] and lp["vectorizable"] for lp in simd)
    # the tile band of 32 x 32 x 32 tiles: each tensor's tile is 32 x 32
    (tile,) = [t for t in data["tiles"] if all(n.endswith("_tile") for n in t["band"])]
    fps = {f["tensor"]: f for f in tile["footprints"]}
    assert set(fps) == {"A", "B", "C"}
    for f in fps.values():
        assert f["bounded"] and f["box"] == [32, 32]
        assert f["elements"] == 1024 and f["bytes"] == 4096
    assert tile["total_bytes"] == 3 * 4096
    text = explain(auto(util.MATMUL))
    assert "    A      32 x 32  1024 elements  4096 bytes" in text
    assert "    total           3072 elements  12288 bytes" in text


def test_matmul_golden_text(golden):
    s = (util.start(util.MATMUL).tile([("C", "m"), ("C", "n")], [32, 32])
         .split(("C", "k"), 8).parallel(("C", "m_tile")))
    golden("schedules/explain_matmul.txt", explain(s))


def test_unbounded_footprint_and_its_size_at_given_sizes():
    s = util.start(util.MATMUL).tile([("C", "m"), ("C", "n")], [32, 32])
    data = explain(s, as_json=True, sizes={"M": 100, "N": 100, "K": 50})
    (tile,) = data["tiles"]
    fps = {f["tensor"]: f for f in tile["footprints"]}
    # a tile of m and n reads whole rows of A and columns of B: K grows
    assert not fps["A"]["bounded"] and fps["A"]["extents"] == [32, None]
    assert not fps["B"]["bounded"] and fps["B"]["extents"] == [None, 32]
    assert fps["C"]["box"] == [32, 32]
    assert fps["A"]["at_sizes"]["box"] == [32, 50]
    assert fps["B"]["at_sizes"]["bytes"] == 50 * 32 * 4
    assert tile["total_bytes"] is None
    assert tile["total_at_sizes"]["elements"] == 2 * 32 * 50 + 32 * 32
    text = explain(s)
    assert "    A      32 x *   unbounded" in text


# ----------------------------------------------------------------- stencil

@pytest.mark.parametrize("make", [lambda: util.start(util.STENCIL),
                                  lambda: auto(util.STENCIL)], ids=["source", "automatic"])
def test_stencil_t_carries_the_flow_on_A_i_parallel(make):
    s = make()
    data = explain(s, as_json=True)
    (t,) = loops(data, "t", "S1")
    assert not t["parallel"]
    flow = carried(t, "flow", "A")
    assert (flow["source"], flow["sink"]) == ("S1", "S1")
    assert flow["distances"] == [[1, -1], [1, 0], [1, 1]]
    assert flow["distance"] is None and not flow["uniform"] and not flow["reduction"]
    (i,) = loops(data, "i", "S1")
    assert i["parallel"] and i["carries"] == [] and i["innermost"] and i["vectorizable"]
    text = explain(s)
    tb = block(text, "t", nth=[lp["name"] for lp in data["loops"]].count("t") - 1)
    assert "flow  A  S1 -> S1  distances (1, -1), (1, 0), (1, 1)" in tb
    assert "parallel      no: it carries the flow dependence on A from S1 to S1" in tb


def test_stencil_row_footprint_is_unbounded():
    data = explain(auto(util.STENCIL), as_json=True, sizes={"N": 10, "T": 4})
    (row,) = [t for t in data["tiles"] if t["statements"] == ["S1"]]
    (a,) = [f for f in row["footprints"] if f["tensor"] == "A"]
    assert not a["bounded"] and a["extents"][0] == 2 and a["extents"][1] is None
    assert a["at_sizes"]["box"] == [2, 10]


# ------------------------------------------------------------------ fusion

def test_producer_consumer_automatic_is_one_fusion_group():
    data = explain(auto(util.PRODUCER_CONSUMER), as_json=True)
    fusion = data["fusion"]
    assert [g["statements"] for g in fusion["groups"]] == [["S0", "S1"]]
    assert fusion["groups"][0]["loops"][-2:] == ["i", "j"]
    assert fusion["apart"] == []
    assert "every statement runs in one loop nest" in explain(auto(util.PRODUCER_CONSUMER))


def test_source_order_keeps_producer_and_consumer_apart():
    s = util.start(util.PRODUCER_CONSUMER)
    data = explain(s, as_json=True)
    assert [g["statements"] for g in data["fusion"]["groups"]] == [["S0"], ["S1"]]
    (apart,) = data["fusion"]["apart"]
    assert apart["statements"] == [["S0"], ["S1"]]
    assert any("source order" in r for r in apart["reasons"])
    assert apart["fuse"]["result"] == "legal"
    (dep,) = apart["dependences"]
    assert (dep["kind"], dep["tensor"], dep["source"], dep["sink"]) == ("flow", "T", "S0", "S1")
    text = explain(s)
    assert "  S0 | S1 kept apart:" in text
    assert "fusing their outer loops is legal" in text


def test_illegal_fusion_names_the_dependence():
    data = explain(util.start(SHIFT), as_json=True)
    (apart,) = data["fusion"]["apart"]
    assert apart["fuse"]["result"] == "illegal"
    dep = apart["fuse"]["dependence"]
    assert (dep["kind"], dep["tensor"], dep["source"], dep["sink"]) == ("flow", "T", "S0", "S1")
    reason = [r for r in apart["reasons"] if "illegal" in r]
    assert reason and "flow dependence on" in reason[0] and " T " in reason[0]
    assert "S0" in reason[0] and "S1" in reason[0]
    text = explain(util.start(SHIFT))
    assert "fusing their outer loops is illegal" in text
    assert "flow  T  S0 -> S1  distance (-1)" in text


def test_fusion_that_would_cost_parallelism_is_explained():
    # isl keeps the stencil's initialisation apart: fused, the outer loop
    # would carry the stencil's dependences
    data = explain(auto(util.STENCIL), as_json=True)
    assert [g["statements"] for g in data["fusion"]["groups"]] == [["S0"], ["S1"]]
    (apart,) = data["fusion"]["apart"]
    assert apart["fuse"]["result"] == "legal" and not apart["fuse"]["fused_parallel"]
    assert any("no longer run in parallel" in r and "S0" in r for r in apart["reasons"])
    kinds = {(d["kind"], d["tensor"]) for d in apart["dependences"]}
    assert kinds == {("flow", "A"), ("output", "A")}


def test_deeper_fusion_is_blocked_by_the_dependence():
    # two chained matmuls: their m loops fuse, their n and p loops cannot
    src = """
def mm2(float(M, K) A, float(K, N) B, float(N, P) D) -> (C, E) {
    C(m, n) +=! A(m, k) * B(k, n)
    E(m, p) +=! C(m, n) * D(n, p)
}
"""
    data = explain(util.start(src), as_json=True)
    (apart,) = data["fusion"]["apart"]
    deeper = apart["fuse"]["deeper"]
    assert apart["fuse"]["result"] == "legal"
    assert deeper and deeper[-1]["result"] == "illegal"
    assert deeper[-1]["dependence"]["tensor"] == "C"


def _has_config_field(name: str) -> bool:
    return name in {f.name for f in fields(Config)}


@pytest.mark.skipif(not _has_config_field("fusion"), reason="Config.fusion not there yet")
def test_fusion_strategy_min_is_named_as_the_reason():
    config = Config.from_env(tile_sizes=(32,), fusion="min")
    s = auto(util.PRODUCER_CONSUMER, config)
    data = analyse(s, config)
    assert data["fusion"]["strategy"] == "min"
    assert len(data["fusion"]["groups"]) == 2
    (apart,) = data["fusion"]["apart"]
    assert any("'min'" in r for r in apart["reasons"])
    assert "(strategy min)" in explain(s, config=config)


# ------------------------------------------------------------------- form

def test_text_has_one_aligned_block_per_loop():
    s = auto(util.MATMUL)
    text = explain(s)
    assert text.count("\n  loop ") == len(s.loops())
    for b in text.split("\n  loop ")[1:]:
        keys = [line[4:18] for line in b.split("\n\n")[0].splitlines()[1:]
                if line.startswith("    ") and line[4] != " "]
        assert [k.strip() for k in keys] == ["carries", "parallel", "vectorizable", "marked"]


def test_json_is_serialisable_and_complete():
    for src in (util.MATMUL, util.STENCIL, util.PRODUCER_CONSUMER):
        data = explain(auto(src), as_json=True)
        back = json.loads(json.dumps(data))
        assert back == data
        assert set(data) >= {"program", "loops", "fusion", "tiles"}
        lp = data["loops"][0]
        assert set(lp) >= {"name", "statements", "carries", "parallel", "parallel_reason",
                           "vectorizable", "vectorizable_reason", "marked_parallel",
                           "marked_simd", "innermost", "depth"}


def test_explain_leaves_the_schedule_unchanged():
    s = util.start(util.PRODUCER_CONSUMER)
    before = (s.to_text(), s.recipe)
    explain(s)
    assert (s.to_text(), s.recipe) == before
