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


def _causal(n):
    return torch.triu(torch.full((n, n), float("-inf")), 1)


def test_a_tensor_read_as_a_python_bool():
    """``nn.TransformerEncoder(x, mask=...)`` detects a causal mask with
    ``bool((mask == causal).all())`` (``_local_scalar_dense``, ``sym_ite``
    and ``_assert_scalar`` on its range), once refused as unlowered
    operators: on constants it is read while tracing; on an input its
    range assertions run in eager torch; a value read as a Python number
    that the graph then uses is an UnsupportedError naming the line."""
    from polyc.errors import UnsupportedError

    def dead_flag(x, m):
        bool((m == _causal(3)).all())         # as _detect_is_causal_mask
        return x + m

    def const_flag(x):
        bool((_causal(3) == 0).all())
        return x + _causal(3)

    def used_flag(x, m):
        return x + m, torch.full((1,), bool((m == _causal(3)).all()))

    x = torch.randn(3, 3)
    with torch.no_grad():
        for fn, args in ((dead_flag, (x, _causal(3))), (const_flag, (x,))):
            torch._dynamo.reset()
            got = torch.compile(fn, backend="polyc", fullgraph=True)(*args)
            np.testing.assert_array_equal(got.numpy(), fn(*args).numpy())
        torch._dynamo.reset()
        with pytest.raises(Exception, match="read as a Python number") as info:
            torch.compile(used_flag, backend="polyc", fullgraph=True)(x, _causal(3))
    assert isinstance(getattr(info.value, "inner_exception", None), UnsupportedError)
    assert "used_flag" in str(info.value)
