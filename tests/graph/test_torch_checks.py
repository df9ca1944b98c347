"""torch's assertions on a model's input values (``F.one_hot(labels, n)``'s
range check) through ``torch.compile(backend="polyc")``: computed in eager
torch at each call (``polyc/graph/torch_checks.py``), the model in polyc.
Skipped where torch is not installed."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import polyc.graph.torch_backend  # noqa: E402,F401  (registers backend="polyc")
from polyc.errors import IndexBoundsError  # noqa: E402


class OneHot(torch.nn.Module):
    def forward(self, x, labels):
        return (x * F.one_hot(labels, 5)).sum(-1) + F.one_hot(labels, 5).float() @ x.t()


def test_one_hot_of_an_input_is_checked_at_each_call():
    """A regression: ``F.one_hot`` of an input tensor was refused ("a
    runtime assertion on computed values is not supported")."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = OneHot()
    f = torch.compile(m, backend="polyc")
    x = torch.randn(3, 5)
    with torch.no_grad():
        for labels in ([0, 4, 2], [1, 1, 3]):
            lab = torch.tensor(labels)
            np.testing.assert_allclose(f(x, lab).numpy(), m(x, lab).numpy(), rtol=1e-5,
                                       atol=1e-6)
        with pytest.raises(IndexBoundsError, match="smaller than num_classes"):
            f(x, torch.tensor([0, 5, 1]))
        with pytest.raises(IndexBoundsError, match="non-negative"):
            f(x, torch.tensor([0, -1, 1]))
        lab = torch.tensor([3, 2, 0])
        np.testing.assert_allclose(f(x, lab).numpy(), m(x, lab).numpy(), rtol=1e-5, atol=1e-6)
