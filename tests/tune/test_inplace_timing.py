"""Timing in-place programs honestly (polyc.tune.measure): a program that
reads what it writes from before the call (an in-place update, a time loop)
gets its arguments restored before every timed call, so every call of every
candidate runs on the same data and only the calls are timed."""

from __future__ import annotations

import numpy as np

import polyc
from benchmarks.polybench import BENCHMARKS
from polyc.dependence import carried_in
from polyc.tune import measure


def _program(name: str):
    b = BENCHMARKS[name]
    return b.kernel.specialize(*b.init(b.sizes["MINI"], np.float64)).program


def test_carried_in_names_the_tensors_a_call_reads_from_the_last_one():
    assert carried_in(_program("trmm")) == {"B"}            # B := A^T B in place
    assert carried_in(_program("jacobi-1d")) == {"A", "B"}  # a time loop over both
    assert carried_in(_program("gemm")) == {"C"}            # C := alpha A B + beta C
    assert carried_in(_program("2mm")) == {"D"}             # tmp is written before it is read
    tc = polyc.program("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }")
    assert carried_in(tc) == set()                          # +=! initialises C first


def test_round_robin_restores_the_data_before_every_call():
    data = np.ones(4)
    seen: list[float] = []

    def call():
        seen.append(float(data[0]))
        data[:] *= 2.0                  # an in-place kernel

    def reset():
        data[:] = 1.0
    measure.round_robin([call, call], rounds=2, min_sample=1e-4, reset=reset)
    assert seen and set(seen) == {1.0}
    seen.clear()
    measure.round_robin([call], rounds=2, min_sample=1e-4)
    assert len(set(seen)) > 1           # without a reset every call sees other data


def test_a_reset_is_not_timed():
    import time

    def call():
        time.sleep(0.0005)

    def slow_reset():
        time.sleep(0.005)
    rounds = measure.round_robin([call], rounds=2, min_sample=1e-3, reset=slow_reset)
    assert all(4e-4 < t < 4e-3 for r in rounds for t in r), rounds


def test_an_in_place_loop_program_is_measured_on_restored_arguments(tmp_path, monkeypatch):
    program = _program("trmm")
    b = BENCHMARKS["trmm"]
    args = b.init(b.sizes["MINI"], np.float64)
    sizes = {}
    for p, bind in program.param_bindings.items():
        sizes[p] = (args[program.signature.index(p)] if bind is None
                    else args[program.signature.index(bind[0])].shape[bind[1]])
    config = polyc.Config.from_env().replace(cache_dir=str(tmp_path / "cache"))
    seen = []
    real = measure.round_robin

    def spy(fns, **kw):
        seen.append(kw.get("reset"))
        return real(fns, **kw)
    monkeypatch.setattr(measure, "round_robin", spy)
    out = measure.measure_task({"program": program, "recipes": [None], "config": config,
                                "sizes": [sizes], "seed": 0, "rounds": 2,
                                "min_sample": 1e-3})
    assert out["failures"] == {} and out["measured"] == [0]
    rounds = next(iter(out["rounds"].values()))
    assert len(rounds) == 2 and all(t > 0 for r in rounds for t in r)
    # B (read from the last call) is restored before every call
    reset = seen[0]
    assert isinstance(reset, measure.Restore) and len(reset.pairs) == 1
    dst, src = reset.pairs[0]
    assert dst.shape == args[-1].shape and dst is not src
    dst += 1.0
    reset()
    np.testing.assert_array_equal(dst, src)


def test_loop_programs_and_triangles_try_both_parallel_loop_schedules(tmp_path):
    """Config.omp_schedule is a knob of the automatic schedule the tuner
    measures: static blocks or dynamic chunks for every parallel loop (lu's
    triangular loop in its k loop ran 2.5x faster static on this machine,
    cholesky's 1.25x faster dynamic)."""
    from polyc.tune.space import auto_config, auto_recipe, auto_variants
    lu = _program("lu")
    variants = auto_variants(lu)
    assert {"omp_schedule": "static"} in variants and {"omp_schedule": "dynamic"} in variants
    tc = polyc.program("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }")
    assert not any("omp_schedule" in v for v in auto_variants(tc))
    cfg = polyc.Config.from_env().replace(cache_dir=str(tmp_path / "cache"))
    static = auto_config(auto_recipe({"omp_schedule": "static"}), cfg)
    k = measure.compile_candidate(lu, auto_recipe({"omp_schedule": "static"}), cfg)
    assert static.omp_schedule == "static" and "schedule(dynamic" not in k.source
    k = measure.compile_candidate(lu, None, cfg)
    assert "schedule(dynamic" in k.source
