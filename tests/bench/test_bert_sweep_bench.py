"""Smoke test of ``python -m benchmarks.bert_sweep`` at d=96: every length
checked against numpy, one trace for the lengths above 1, the summary."""

from __future__ import annotations

from benchmarks import bert_sweep


def test_default_lengths():
    seqs = bert_sweep.default_seqs()
    assert seqs[:3] == [1, 2, 3] and 128 in seqs and 136 in seqs and seqs[-1] == 512
    assert len(seqs) == 128 + 48


def test_small_sweep_without_peers(monkeypatch):
    """Lengths 3 and 5 (one shape class; the suite's cache holds its kernels
    once examples/bert_layer.py --small ran), no torch peers."""
    monkeypatch.setattr(bert_sweep, "_torch_peers", lambda mod, args, state: {})
    out = bert_sweep.run([3, 5], small=True, repeat_time=0.0, progress=False)
    assert [r["seq"] for r in out["rows"]] == [3, 5]
    assert all(r["polyc_ms"] > 0 and r["gflops"] > 0 for r in out["rows"])
    assert out["summary"]["polyc_traces"] == 1
    assert out["d"] == 96 and out["ff"] == 384
    text = bert_sweep._table(out)
    assert "| 3 |" in text and "polyc traces 1" in text
