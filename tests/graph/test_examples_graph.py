"""The graph layer's examples run at small sizes: each checks itself
against numpy (``polyc.testing.assert_close`` inside the script) and
prints its plan and times."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name, argv", [("bert_layer", ["--seq", "16", "--small"]),
                                        ("resnet_block", ["--small"])])
def test_example_runs_and_checks(name, argv, capsys):
    _load(name).main(argv)
    out = capsys.readouterr().out
    assert "kernels" in out and "numpy" in out and "decisions" in out


def test_bert_layer_plan_keeps_weights_as_inputs():
    mod = _load("bert_layer")
    inputs = mod.make_inputs(8, 96, 384)
    g = mod.bert_layer.graph(*inputs)
    assert len(g.args) == len(inputs) and not g.captured
    plan = mod.bert_layer.plan(*inputs)
    # every product reaches the GEMM micro-kernel or is fused where it stays one
    assert len(plan.groups) <= 14
