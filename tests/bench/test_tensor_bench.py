"""Smoke tests of ``python -m benchmarks.tensor`` and ``benchmarks/peak.c``
at tiny sizes: every workload compiles, runs, matches numpy (checked inside
the runner with ``polyc.testing.assert_close``) and reports every column."""

from __future__ import annotations

import json

import pytest

from benchmarks import peak, tensor


@pytest.fixture(scope="module")
def limits():
    return peak.measure(quick=True)


def test_peak_measures_every_limit(limits):
    for key in ("fma_gflops_1core_f32", "fma_gflops_1core_f64", "fma_gflops_allcores_f32",
                "fma_gflops_allcores_f64", "stream_triad_gbs_1core",
                "stream_triad_gbs_allcores"):
        assert limits[key] > 0, key
    assert limits["isa"] in ("avx512", "avx2", "scalar") and limits["threads"] >= 1
    # a 2-flop FMA lane per cycle is the least any x86-64 core does at >= 1 GHz
    assert limits["fma_gflops_1core_f64"] > 1


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> str:
    """A cache directory holding the intrinsics library, built once."""
    d = tmp_path_factory.mktemp("intrinsics")
    assert tensor.prebuild_intrinsics(str(d)) > 0
    return str(d)


def test_every_workload_runs_at_tiny_sizes(limits, library):
    """Every workload against numpy and torch eager, each cold compile from an
    empty cache holding the intrinsics library built once, as ``main`` does
    (built per workload, it took 126 of this test's 130 s on 2 cores);
    torch.compile (Inductor compiles each workload for seconds) for two of
    them, one per kind of rate."""
    ws = tensor.workloads()
    assert len({w.name for w in ws}) == len(ws) >= 20
    compiled = {"gemm256_f32", "softmax_4096x1024"}
    rows = [tensor.run_workload(w, 0.0, tiny=True, peak=limits, library_dir=library,
                                torch_compile=w.name in compiled) for w in ws]
    if tensor._torch() is not None:
        assert {r["workload"] for r in rows if "torch_compile_s" in r} == compiled
        assert all(r["torch_s"] > 0 for r in rows)
    for r in rows:
        assert r["error"] is None, r
        assert r["polyc_s"] > 0 and r["numpy_s"] > 0 and r["vs_numpy"] > 0
        assert r["cold_compile_s"] > 0 and r["extra_mib"] >= 0
        assert r["max_rel_err"] < 1e-4
        assert r["fraction_of_peak"] > 0
        assert ("gflops" in r) != ("gbs" in r)
    text = tensor.table(rows)
    assert text.count("\n") == len(rows) + 1 and "failed" not in text


def test_runner_json_and_selection(capsys):
    assert tensor.main(["--tiny", "--no-peak", "--repeat-time", "0", "--json",
                        "--only", "softmax", "gemm256"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["workload"] for r in out["results"]] == ["gemm256_f32", "gemm256_f64",
                                                       "softmax_4096x1024"]
    assert out["tiny"] is True and out["machine"]["peak"] is None


def test_a_wrong_result_is_reported_not_timed(monkeypatch, library):
    w = next(w for w in tensor.workloads() if w.name == "gemm256_f32")
    bad = tensor.Workload(**{**w.__dict__, "numpy": {"A @ B.T": lambda A, B: A @ B + 1}})
    row = tensor.run_workload(bad, 0.0, tiny=True, peak=None, library_dir=library)
    assert row["error"]["stage"] == "check" and "polyc_s" not in row
