"""Smoke test of ``python -m benchmarks.graph`` at tiny sizes: the workloads
compile, match numpy (checked inside the runner) and report their columns."""

from __future__ import annotations

import numpy as np

from benchmarks import graph


def test_graph_workloads_run_at_tiny_sizes(monkeypatch):
    # numpy as the only peer here: torch.compile's and jax's own compiles
    # take longer than the smoke test should
    monkeypatch.setattr(graph, "_peers", lambda w, args: {"numpy": lambda: w.make(np)(*args)})
    names = {w.name for w in graph.WORKLOADS}
    assert {"softmax", "layernorm_gelu", "attention", "bert_layer_128", "resnet_block"} <= names
    ws = [w for w in graph.WORKLOADS if w.name in ("softmax", "mlp", "resnet_block")]
    rows = [graph.run_workload(w, True, 0.0, None) for w in ws]
    for r in rows:
        assert r["kernels"] >= 1 and r["polyc_ms"] > 0 and r["numpy_ms"] > 0
        assert r["ratio_numpy"] > 0 and r["jit_overhead_us"] >= 0
    assert "| softmax |" in graph._table(rows)
