"""Smoke test of ``python -m benchmarks.torch_mlp`` at d=32: the block through
``torch.compile(backend="polyc")`` at two batch sizes, checked against torch
eager inside :func:`benchmarks.torch_mlp.run`, the table and the summary."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks import torch_mlp  # noqa: E402


def test_small_block_two_batches():
    out = torch_mlp.run([1, 3], small=True, repeat_time=0.0, inductor=False)
    assert [r["batch"] for r in out["rows"]] == [1, 3]
    assert all(r["polyc_ms"] > 0 and r["torch eager_ms"] > 0 for r in out["rows"])
    assert out["d"] == 32 and out["ff"] == 64
    assert "x torch eager" in out["summary"]
    text = torch_mlp.table(out)
    assert "| 3 |" in text and "polyc x torch eager" in text


def test_bad_batch_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        torch_mlp.main(["--batches", "0"])
    assert exc.value.code == 2
    assert "at least 1" in capsys.readouterr().err
