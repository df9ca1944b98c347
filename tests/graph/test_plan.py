"""The fusion planner (polyc.graph.plan): which operations become one kernel,
why, and that a fused group computes what the unfused sequence of per-op
kernels and numpy compute.  Tolerances: polyc.testing.assert_close with the
reduction length of the longest reduction (sums are reassociated)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.graph import trace
from polyc.graph.plan import from_dict
from polyc.graph.plan import plan as make_plan
from polyc.testing import assert_close

RNG = np.random.default_rng(14)


def softmax(x):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def layernorm_gelu(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    y = (x - m) / np.sqrt(v + 1e-5) * g + b
    return 0.5 * y * (1.0 + np.tanh(0.7978845608028654 * (y + 0.044715 * y ** 3)))


def attention(q, k, v):
    s = q @ k.swapaxes(-1, -2) * (1.0 / 8.0)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def rbf(x, y):
    d = x[:, None, :] - y[None, :, :]
    return np.exp(-(d * d).sum(-1)).sum(-1)


def _run_unfused(fn, *args):
    g = trace(fn, *args)
    p = make_plan(g, fuse=False)
    assert len(p.groups) == len(g.ops)
    env = p.run({n.name: a for n, a in zip(g.args, args)},
                {r: v for r, v in enumerate(g.symbols.values)})
    return env[g.outputs[0].name], p


def _fused(fn, *args):
    j = polyc.jit(fn)
    return j(*args), j.plan(*args), j


@pytest.mark.parametrize("shape", [(16, 33), (3, 1, 7), (1, 100), (1, 1, 40)])
def test_softmax_is_one_kernel(shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    out, p, j = _fused(softmax, x)
    assert len(p.groups) == 1
    assert all(d.verdict == "fused" for d in p.decisions)
    assert_close(out, softmax(x), reduction_length=shape[-1])
    ref, unfused = _run_unfused(softmax, x)
    assert len(unfused.groups) == 5
    assert_close(out, ref, reduction_length=shape[-1])
    rec = j.explain(x, json=True)
    assert rec["kernels"] == 1
    assert set(rec["groups"][0]["ops"]) == {"max", "subtract", "exp", "sum", "divide"}
    # the intermediates never leave the kernel
    assert rec["groups"][0]["outputs"] == [p.graph.outputs[0].name]
    # the row maximum and sum are contracted to scalars (of the row loop, or
    # of the kernel's body for a single row)
    stats = {n.name for n in p.graph.ops if n.op in ("max", "sum")}
    contracted = rec["groups"][0]["contracted"]
    assert stats <= set(contracted)
    assert all(contracted[t]["buffer"] == "scalar" and contracted[t]["bytes_after"] == 4
               for t in stats)
    assert not stats & set(rec["groups"][0]["temporaries"])


def test_layernorm_gelu_is_one_kernel_with_parallel_rows():
    x = RNG.standard_normal((24, 64)).astype(np.float32)
    g = RNG.standard_normal(64).astype(np.float32)
    b = RNG.standard_normal(64).astype(np.float32)
    out, p, j = _fused(layernorm_gelu, x, g, b)
    assert len(p.groups) == 1
    src = p.sources[0]
    # elementwise values read once are contracted to scalars; the per-row
    # statistics, read once per element of the row, stay arrays (no recomputation)
    assert len(src.inlined) >= 8
    assert all(n.name not in src.inlined for n in p.graph.ops if n.op in ("mean", "var"))
    # ... and are contracted to scalars of the row loop (array contraction)
    rec = j.explain(x, g, b, json=True)["groups"][0]["contracted"]
    stats = [n.name for n in p.graph.ops if n.op in ("mean", "var")]
    assert all(rec[t]["buffer"] == "scalar" and rec[t]["depth"] >= 1 for t in stats)
    assert "contracted to per-iteration buffers of loop" in j.explain(x, g, b)
    assert "sqrt" in src.text and src.text.count("sqrt(") == 1
    assert all(d.parallel["fused"] >= 1 for d in p.decisions)
    assert out.dtype == np.float32
    assert_close(out, layernorm_gelu(x, g, b), reduction_length=64)
    ref, _ = _run_unfused(layernorm_gelu, x, g, b)
    assert_close(out, ref, reduction_length=64)


def test_attention_is_one_kernel_with_both_products_tensorized():
    q, k, v = (RNG.standard_normal((2, 3, 40, 16)).astype(np.float32) for _ in range(3))
    out, p, j = _fused(attention, q, k, v)
    assert len(p.groups) == 1
    last = p.decisions[-1]
    assert last.verdict == "fused" and last.tensorized["fused"] >= 1
    assert_close(out, attention(q, k, v), reduction_length=40)
    text = j.explain(q, k, v)
    assert "1 kernel" in text and "matmul" in text


def test_broadcast_then_reduce():
    # sum_j exp(-|x_i - y_j|^2): one kernel; the differences are computed
    # where they are read, and the squared distance of each pair (a
    # reduction over the 3 coordinates) is contracted to a scalar of the j
    # loop: the 50x70 matrix is never stored
    x = RNG.standard_normal((50, 3))
    y = RNG.standard_normal((70, 3))
    out, p, j = _fused(rbf, x, y)
    assert_close(out, rbf(x, y), reduction_length=70)
    assert len(p.groups) == 1
    dist = next(n for n in p.graph.ops if n.op == "sum" and len(n.shape) == 2)
    rec = j.explain(x, y, json=True)
    c = rec["groups"][0]["contracted"][dist.name]
    assert c == {"bytes_before": 50 * 70 * 8, "bytes_after": 8, "buffer": "scalar",
                 "loop": c["loop"], "depth": c["depth"]} and c["depth"] >= 1
    assert rec["groups"][0]["temporaries"] == []
    assert any(dist.name in d["contracted"] for d in rec["decisions"])
    assert f"(depth {c['depth']}): {dist.name} (scalar, 28000 -> 8 bytes)" in j.explain(x, y)
    assert dist.name not in p.compile().kernels[0]._source.tensors


def test_refused_fusion_is_recorded_with_its_rule():
    # a column sum consumed row-wise: the consumer needs the whole reduction
    def colnorm(x):
        s = x.sum(axis=0)
        return x / s
    x = RNG.random((30, 20)) + 0.5
    out, p, j = _fused(colnorm, x)
    assert_close(out, colnorm(x), reduction_length=30)
    rec = j.explain(x, json=True)
    for d in rec["decisions"]:
        assert d["verdict"] in ("fused", "kept apart") and d["rule"]
        assert d["lines"] and all("test_plan.py" in line for line in d["lines"])


def test_plan_json_is_stable():
    x = RNG.standard_normal((8, 9)).astype(np.float32)
    a = polyc.jit(softmax).plan(x).to_json()
    b = polyc.jit(softmax).plan(x).to_json()
    assert a == b
    assert json.loads(a)["kernels"] == 1


def test_shape_class_reuses_the_plan():
    j = polyc.jit(softmax)
    for n, c in [(4, 5), (9, 31), (2, 3)]:
        x = RNG.standard_normal((n, c))
        assert_close(j(x), softmax(x), reduction_length=c)
    assert sum(len(v) for v in j._plans.values()) == 1


def test_specialised_size_is_guarded():
    def scaled(q):
        return q / np.sqrt(q.shape[-1])
    j = polyc.jit(scaled)
    for c in (4, 9, 4):
        x = RNG.standard_normal((3, c))
        assert_close(j(x), scaled(x))
    assert sum(len(v) for v in j._plans.values()) == 2
    assert "specialised" in j.explain(x)


def test_plan_json_replays_to_identical_kernels():
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    j = polyc.jit(layernorm_gelu)
    g_, b_ = np.ones(10, np.float32), np.zeros(10, np.float32)
    p = j.plan(x, g_, b_)
    q = from_dict(p.graph, p.to_json())
    assert [s.text for s in q.sources] == [s.text for s in p.sources]


def test_edited_plan_runs_and_matches():
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    j = polyc.jit(softmax)
    p = j.plan(x)
    g = p.graph
    mx, sm = g.ops[0].name, g.ops[3].name          # max, sum
    split = p.edit(keep_apart=[(mx, sm)], materialize=[mx])
    assert len(split.groups) == 2
    assert mx in split.to_dict()["groups"][0]["materialized"]
    j.use_plan(split, x)
    assert_close(j(x), softmax(x), reduction_length=10)
    # the JSON route: one group per operation, edited by hand
    data = json.loads(p.to_json())
    data["groups"] = [{"name": f"g{k}", "tensors": [n.name]} for k, n in enumerate(g.ops)]
    j.use_plan(json.dumps(data), x)
    assert len(j.plan(x).groups) == len(g.ops)
    assert_close(j(x), softmax(x), reduction_length=10)


def test_edited_plan_json_round_trip_and_hand_written_groups():
    """An edited plan's JSON (with a materialized tensor) replays to the same
    kernels; groups written by hand as plain lists of tensor names are
    accepted; malformed JSON is a ScheduleError, never a bare exception."""
    x = RNG.standard_normal((6, 10)).astype(np.float32)
    j = polyc.jit(softmax)
    p = j.plan(x)
    ops = [n.name for n in p.graph.ops]
    split = p.edit(keep_apart=[(ops[0], ops[3])], materialize=[ops[0]])
    again = from_dict(p.graph, split.to_json())
    assert [s.text for s in again.sources] == [s.text for s in split.sources]
    assert again.to_dict()["groups"] == split.to_dict()["groups"]
    j.use_plan(json.dumps({"groups": [[t] for t in ops]}), x)
    assert len(j.plan(x).groups) == len(ops)
    assert_close(j(x), softmax(x), reduction_length=10)
    for bad, why in [("{not json", "plan JSON"), ("[1, 2]", "groups"),
                     ('{"groups": [3]}', "a group is"),
                     ('{"groups": [{"tensors": [1]}]}', "a group is"),
                     (json.dumps({"groups": [{"tensors": ops, "materialized": ["zz"]}]}),
                      "not one of the group's tensors")]:
        with pytest.raises(polyc.ScheduleError, match=why):
            j.use_plan(bad, x)


def test_illegal_plan_edits_are_refused_with_a_witness():
    def diff(x):
        t = np.exp(x)
        return t[1:] - t[:-1]       # reads t one row ahead
    x = RNG.random((5, 4))
    j = polyc.jit(diff)
    assert_close(j(x), diff(x))
    p = j.plan(x)
    p = p.edit(keep_apart=[(p.graph.ops[0].name, p.graph.ops[1].name)]) \
        if len(p.groups) == 1 else p
    s, q = p.graph.ops[0].name, p.graph.ops[1].name
    with pytest.raises(polyc.IllegalScheduleError) as e:
        p.edit(fuse=[(s, q)])
    msg = str(e.value)
    assert "test_plan.py" in msg and "flow" in msg and "->" in msg
    with pytest.raises(polyc.ScheduleError, match="no operation writes"):
        p.edit(fuse=[(s, "nope")])
    data = json.loads(p.to_json())
    data["groups"] = data["groups"][:1]
    with pytest.raises(polyc.ScheduleError, match="no group computes"):
        from_dict(p.graph, data)


def test_sibling_candidates():
    def two_maps(x):
        return np.exp(x), np.tanh(x)          # siblings: both read x

    def qkv(x, wq, wk, wv):
        return x @ wq, x @ wk, x @ wv

    big = RNG.standard_normal((256, 512)).astype(np.float32)
    j = polyc.jit(two_maps)
    a, b = j(big)
    assert_close(a, np.exp(big))
    assert_close(b, np.tanh(big))
    rec = j.explain(big, json=True)
    # isl's scheduler has no reason to fuse two nests that share only a read
    # (no dependence, so no proximity): the planner records it and keeps them apart
    assert [d["kind"] for d in rec["decisions"]] == ["sibling"]
    assert rec["decisions"][0]["verdict"] == "kept apart"
    assert rec["decisions"][0]["rule"].startswith("no common loop")
    # ... unless the group is so small that a kernel call costs as much as its
    # work: then one kernel runs both nests in sequence (a new function: a
    # shape class keeps the plan of its first trace)
    j = polyc.jit(two_maps)
    x = RNG.standard_normal((12, 16)).astype(np.float32)
    a, b = j(x)
    assert_close(a, np.exp(x))
    assert_close(b, np.tanh(x))
    rec = j.explain(x, json=True)
    assert rec["kernels"] == 1 and rec["decisions"][0]["verdict"] == "fused"
    assert rec["decisions"][0]["rule"].startswith("small group")
    ws = [RNG.standard_normal((16, 8)).astype(np.float32) for _ in range(3)]
    j = polyc.jit(qkv)
    for got, w in zip(j(x, *ws), ws):
        assert_close(got, x @ w, reduction_length=16)
    rec = j.explain(x, *ws, json=True)
    sib = [d for d in rec["decisions"] if d["kind"] == "sibling"]
    assert sib and all(d["rule"] for d in sib)
    assert all(set(d["predicted_us"]) == {"apart", "fused"} for d in rec["decisions"])


def test_measured_mode_records_both_times():
    x = RNG.standard_normal((32, 40)).astype(np.float32)
    j = polyc.jit(softmax, config=Config.from_env(plan="measure"))
    assert_close(j(x), softmax(x), reduction_length=40)
    rec = j.explain(x, json=True)
    fused = [d for d in rec["decisions"] if d["measured_us"]]
    assert fused and all(set(d["measured_us"]) == {"apart", "fused"} for d in fused)
    assert all(v > 0 for d in fused for v in d["measured_us"].values())


def test_roofline_figures_come_from_the_config():
    x = RNG.standard_normal((8, 9)).astype(np.float32)
    slow = polyc.jit(softmax, config=Config.from_env(peak_gbs=1.0)).explain(x, json=True)
    fast = polyc.jit(softmax, config=Config.from_env(peak_gbs=100.0)).explain(x, json=True)
    a = slow["decisions"][0]["predicted_us"]["apart"]
    b = fast["decisions"][0]["predicted_us"]["apart"]
    assert a == pytest.approx(100 * b, rel=0.02)     # (microseconds, rounded)
    with pytest.raises(polyc.PolycError, match="POLYC_PLAN"):
        Config(plan="guess")


@pytest.mark.parametrize("optimize, nodes", [(False, 1), (True, 2), ("optimal", 2),
                                             (["einsum_path", (1, 2), (0, 1)], 2)])
def test_traced_einsum_honours_optimize(optimize, nodes):
    def chain(a, b, c, optimize):
        return np.einsum("ij,jk,kl->il", a, b, c, optimize=optimize)
    a, b, c = (RNG.standard_normal((9, 7)), RNG.standard_normal((7, 8)),
               RNG.standard_normal((8, 5)))
    j = polyc.jit(chain, static_argnames=("optimize",))
    opt = tuple(optimize) if isinstance(optimize, list) else optimize   # hashable
    got = j(a, b, c, opt)
    assert_close(got, np.einsum("ij,jk,kl->il", a, b, c), reduction_length=56)
    assert len(j.graph(a, b, c, opt).ops) == nodes


def test_storage_reuse_and_broadcast_reduce_contract():
    # softmax: the division writes the exp values' buffer; only per-row
    # arrays (max, sum) remain
    x = RNG.standard_normal((20, 30)).astype(np.float32)
    p = polyc.jit(softmax).plan(x)
    src = p.sources[0]
    assert len(p.groups) == 1
    assert all(n.nbytes <= 20 * 4 for n in p.graph.ops if n.name in src.temps)
    # sum_j exp(-|x_i - y_j|^2): the difference d, read twice in one
    # statement instance (d * d), is computed where it is read
    x, y = RNG.standard_normal((40, 3)), RNG.standard_normal((50, 3))
    j = polyc.jit(rbf)
    assert_close(j(x, y), rbf(x, y), reduction_length=50)
    src = j.plan(x, y).sources
    d = next(n for n in j.graph(x, y).ops if n.op == "subtract")
    assert any(d.name in s.inlined for s in src)
    assert all(d.name not in s.temps for s in src)


def test_epilogue_rule_only_for_statements_folded_into_the_call():
    """A bias after a GEMM is folded into the call's store, numpy's ReLU
    (NaN kept) into its post-operations; the tanh, multiply and add after
    it (merged among themselves first: the smaller candidate) join the call
    as its tile function; an elementwise operation whose operand is computed
    where it is read removes a statement too, and is recorded as that, not
    as an epilogue."""
    def mlp(x, w, b):
        return np.maximum(x @ w + b, 0.0)

    def chain(x, w):
        h = np.maximum(x @ w, 0.0)
        return np.tanh(h) * 0.5 + h

    x = RNG.standard_normal((48, 40)).astype(np.float32)
    w = RNG.standard_normal((40, 56)).astype(np.float32)
    b = RNG.standard_normal(56).astype(np.float32)
    for fn, args, folded in ((mlp, (x, w, b), {"add"}),
                             (chain, (x, w), {"maximum", "tanh", "multiply", "add"})):
        g = trace(fn, *args)
        ops = {n.name: n.op for n in g.ops}
        # the rule of the merge that brought each operation to the GEMM's group
        # (the planner may first merge elementwise operations among themselves)
        decisions = g.explain(json=True)["decisions"]
        rules = {ops[t]: d["rule"] for d in decisions for t in d["consumer"]
                 if any(ops[s] == "matmul" for s in d["producer"])}
        said = {op for op, r in rules.items() if r.startswith("epilogue folded")}
        tiled = {op for op, r in rules.items() if "its tile function" in r}
        assert said | tiled == folded, rules
        assert tiled == ({"tanh", "multiply", "add"} if fn is chain else set()), rules
        for op in ("multiply",) if fn is chain else ():
            own = next(d["rule"] for d in decisions if any(ops[t] == op for t in d["consumer"]))
            assert own.startswith("computed inside its reader's statement"), decisions
        ref = fn(*(a.astype(np.float64) for a in args))
        assert_close(polyc.jit(fn)(*args), ref, dtype=np.float32, reduction_length=40)


# -- storage reuse reads every element it overwrites --------------------------------
def _times_its_reverse(x):
    y = np.exp(x)
    return y * y[::-1]


def _plus_its_roll(x):
    up = np.repeat(x, 2, 0)
    return up + np.roll(up, 1, axis=0)


def _gemm_plus_its_roll(x, w):
    h = x @ w
    return h + np.roll(h, 1, axis=0)


@pytest.mark.parametrize("fn,nargs", [(_times_its_reverse, 1), (_plus_its_roll, 1),
                                      (_gemm_plus_its_roll, 2)])
def test_a_statement_reading_another_element_is_not_computed_in_place(fn, nargs):
    """``y * y[::-1]`` reads ``y((N0 - 1) - i0, i1)``: a parenthesised index
    the in-place checks did not see, so the product was written into ``y``
    over values the reversed read still needed (and a GEMM's epilogue was
    folded into its store the same way)."""
    x, w = RNG.standard_normal((6, 5)).astype(np.float32), \
        RNG.standard_normal((5, 4)).astype(np.float32)
    args = (x, w)[:nargs]
    assert_close(polyc.jit(fn)(*args), fn(*args), reduction_length=5)


def test_the_graph_printout_shows_each_operations_tc():
    """``print(polyc.graph.trace(...))`` lists each operation with its TC,
    so scalar operands and index offsets show (``multiply(x0)`` alone hid
    the 0.5); size tokens print as the sizes' names."""
    def f(x):
        return np.tanh(x * 0.5)[1:] + 3.0
    text = str(trace(f, RNG.standard_normal((5, 4)).astype(np.float32)))
    assert "t1(i0, i1) = (x0(i0, i1) * 0.5) where i0 in 0:N0, i1 in 0:N1" in text, text
    assert "+ 3.0)" in text and "(1 + i0)" in text and "$" not in text, text
