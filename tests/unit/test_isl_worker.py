"""isl's scheduler in a worker process with a CPU-time limit
(polyc.schedule.isl_worker): a clustering that isl never finishes falls back
to a whole-component schedule, and the kernel is still right."""

import islpy as isl
import numpy as np

import polyc
from polyc.schedule import initial, isl_worker

# three statements of constant extents; the last reads the second split and
# transposed (a reshape to attention heads): isl's clustering spins on it
SPINS = (
    "{ S0[a, b, c] : 0 <= a <= 1 and 0 <= b <= 4 and 0 <= c <= 47;"
    "  S1[a, b, c] : 0 <= a <= 1 and 0 <= b <= 4 and 0 <= c <= 47;"
    "  S2[i0, i1, i2, i3] : 0 <= i0 <= 1 and 0 <= i1 <= 3 and 0 <= i2 <= 4 and 0 <= i3 <= 3 }",
    "{ S1[a, b, c] -> S2[a, i1, b, c - 4i1] : 0 <= a <= 1 and 0 <= b <= 4 and 0 <= i1 <= 3"
    "  and -3 + c <= 4i1 <= c; S0[a, b, c] -> S1[a, b, c] : 0 <= a <= 1 and 0 <= b <= 4"
    "  and 0 <= c <= 47 }")

CLUSTERING = dict(schedule_outer_coincidence=1, schedule_serialize_sccs=0,
                  schedule_maximize_band_depth=1, schedule_whole_component=0)


def _constraints(domain: str, deps: str) -> isl.ScheduleConstraints:
    d = isl.UnionMap(deps)
    return (isl.ScheduleConstraints.on_domain(isl.UnionSet(domain))
            .set_validity(d).set_coincidence(d).set_proximity(d))


def test_worker_gives_the_in_process_schedule():
    sc = _constraints(
        "[N] -> { S0[i, j] : 0 <= i, j < N; S1[i, j] : 0 <= i, j < N; S2[i] : 0 <= i < N }",
        "[N] -> { S0[i, j] -> S1[i, j]; S1[i, j] -> S2[i] }")
    with initial._scheduler_options(**CLUSTERING):
        here = sc.compute_schedule()
    there = isl_worker.compute(sc, CLUSTERING)
    assert there is not None and there.plain_is_equal(here)
    # options not passed are the caller's, not a previous request's
    whole = isl_worker.compute(sc, {**CLUSTERING, "schedule_whole_component": 1})
    again = isl_worker.compute(sc, CLUSTERING)
    assert whole is not None and again.plain_is_equal(here)


def test_spinning_clustering_is_abandoned_and_the_worker_restarts(monkeypatch):
    monkeypatch.setattr(isl_worker, "TIME_LIMIT_S", 1.0)
    assert isl_worker.compute(_constraints(*SPINS), CLUSTERING) is None
    whole = isl_worker.compute(_constraints(*SPINS),
                               {**CLUSTERING, "schedule_whole_component": 1})
    assert whole is not None
    # the whole-component schedule covers every instance and is legal
    assert whole.get_domain().is_equal(isl.UnionSet(SPINS[0]))
    times = whole.get_map()
    later = isl.Map.lex_lt(isl.Set.from_union_set(times.range()).get_space())
    assert isl.UnionMap(SPINS[1]).apply_domain(times).apply_range(times).is_subset(
        isl.UnionMap.from_map(later))


def test_proximity_leaves_out_split_reads_only():
    deps = isl.UnionMap(SPINS[1])
    kept = initial._without_splits(deps)
    assert kept.is_equal(isl.UnionMap(
        "{ S0[a, b, c] -> S1[a, b, c] : 0 <= a <= 1 and 0 <= b <= 4 and 0 <= c <= 47 }"))
    # a broadcast (not a function) and a strided read (no index split) stay
    other = isl.UnionMap("{ S0[a] -> S1[a, b] : 0 <= a, b < 4; S1[a, b] -> S2[i] : a = 2i and"
                         " 0 <= b < 4 and 0 <= i < 2 }")
    assert initial._without_splits(other).is_equal(other)
    sc = _constraints(SPINS[0], SPINS[1]).set_proximity(kept)
    assert isl_worker.compute(sc, CLUSTERING, limit=30) is not None


def test_heads_reshape_after_a_gemm_compiles(monkeypatch, caplog):
    """``nn.Linear`` then the first heads of its output viewed as heads, at
    small constant sizes (what ``F.scaled_dot_product_attention`` after a
    fused QKV projection reads): isl's clustering of the GEMM call, the bias
    and the split read never finished."""
    monkeypatch.setattr(isl_worker, "TIME_LIMIT_S", 1.0)
    src = """
    def heads(float(2, 5, 16) X, float(48, 16) W, float(48) b) -> (float Y, float Z, float H) {
        Y(i, t, f) +=! X(i, t, r) * W(f, r)
        Z(i, t, f) = b(f) + Y(i, t, f)
        H(i, h, t, d) = Z(i, t, 4*h + d) * 0.5 where h in 0:4, d in 0:4
    }"""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 16), dtype=np.float32)
    w = rng.standard_normal((48, 16), dtype=np.float32)
    b = rng.standard_normal(48, dtype=np.float32)
    with caplog.at_level("WARNING", logger="polyc.schedule.isl_worker"):
        _, z, h = polyc.compile(src)(x, w, b)
    # isl was not abandoned: proximity without the split read lets it finish
    assert not [r for r in caplog.records if "did not finish" in r.getMessage()]
    ref = x @ w.T + b
    np.testing.assert_allclose(z, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(h, ref[..., :16].reshape(2, 5, 4, 4).transpose(0, 2, 1, 3) * 0.5,
                               rtol=1e-5, atol=1e-5)


def test_without_a_worker_isl_runs_in_this_process(monkeypatch):
    """No interpreter to start the worker with (an embedded Python): the
    schedule is computed here, not replaced by the source order."""
    monkeypatch.setattr(isl_worker, "_worker", None)
    monkeypatch.setattr(isl_worker.sys, "executable", "/nonexistent/python")
    sc = _constraints("[N] -> { S0[i] : 0 <= i < N; S1[i] : 0 <= i < N }",
                      "[N] -> { S0[i] -> S1[i] }")
    with initial._scheduler_options(**CLUSTERING):
        here = sc.compute_schedule()
    before = isl.DEFAULT_CONTEXT.get_schedule_whole_component()
    got = isl_worker.compute(sc, {**CLUSTERING, "schedule_whole_component": 1})
    assert got is not None and got.get_domain().is_equal(here.get_domain())
    assert isl.DEFAULT_CONTEXT.get_schedule_whole_component() == before
    assert isl_worker.compute(sc, CLUSTERING).plain_is_equal(here)


def test_a_probe_runs_isl_in_the_worker_under_the_probe_limit(monkeypatch):
    """Inside ``probing()`` (the fusion planner's candidate groups) a call
    is abandoned after ``PROBE_LIMIT_S`` and counted; scheduling three or
    more statements of constant extents goes to the worker even where
    ``_may_spin`` does not flag it (isl spun in this process, beyond any
    limit, on a Swin block's groups)."""
    monkeypatch.setattr(isl_worker, "PROBE_LIMIT_S", 0.5)
    monkeypatch.setattr(isl_worker, "TIME_LIMIT_S", 60.0)
    with isl_worker.probing() as probe:
        assert isl_worker.probe_active()
        assert isl_worker.compute(_constraints(*SPINS), CLUSTERING) is None
    assert probe["abandoned"] == 1 and not isl_worker.probe_active()
    calls = []
    real = isl_worker.compute
    monkeypatch.setattr(isl_worker, "compute",
                        lambda sc, options, limit=None: calls.append(1) or real(sc, options))
    k = polyc.compile("def f(float(4, 5) A) -> (B, C, D) {\n B(i, j) = A(i, j) * 2\n"
                      " C(i, j) = B(i, j) + 1\n D(i, j) = C(i, j) * B(i, j)\n}")
    from polyc.pipeline import lower
    lower(k.program, polyc.Config())
    assert calls == []                         # not a probe: in this process
    with isl_worker.probing() as probe:
        lower(k.program, polyc.Config())
    assert calls and probe["abandoned"] == 0
