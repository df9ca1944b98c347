"""Inputs and results that are not plain contiguous tensors through
``torch.compile(backend="polyc")``: ``channels_last`` models, transposed
and strided inputs, ATen's ``as_strided`` restrides
(``polyc/graph/torch_layout.py``), against torch eager.  Skipped where
torch is not installed."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import polyc.graph.torch_backend  # noqa: E402,F401  (registers backend="polyc")
from polyc.errors import UnsupportedError  # noqa: E402


def _compile_matches(fn, *args, rtol=1e-5, dynamic=None):
    """``fn`` compiled with polyc against eager: shape, dtype, then values."""
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend="polyc", dynamic=dynamic)(*args)
        ref = fn(*args)
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, g.dtype, r.shape, r.dtype)
        np.testing.assert_allclose(g.float().numpy(), r.float().numpy(), rtol=rtol, atol=rtol)
    return got


def test_channels_last_pool_and_flatten():
    """``adaptive_avg_pool2d(x, 1).flatten(1)`` of a ``channels_last`` tensor
    (a ResNet's head) decomposes into ``as_strided`` (a restride to
    channels_last), once refused as an unlowered operator."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(3, 2)).eval().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    _compile_matches(model, x, rtol=1e-4)


def test_as_strided_windows_and_refusal():
    """``as_strided`` in storage order: overlapping windows of a computed
    tensor (a gather), a transposed one (read in torch's storage order);
    a view past the storage is an UnsupportedError naming it."""
    x = torch.arange(10.0)
    _compile_matches(lambda a: ((a * 2).as_strided((3, 4), (2, 1), 1),
                                (a[:6].view(2, 3).t() + 1).as_strided((3, 2), (1, 3))), x)
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="as_strided") as info:
        torch.compile(lambda a: (a + 1).as_strided((6,), (2,)), backend="polyc")(x[:6])
    assert isinstance(getattr(info.value, "inner_exception", info.value), UnsupportedError)


def test_outputs_have_torch_strides():
    """Results torch lays out densely but not contiguously (an elementwise
    function of a ``channels_last`` input, a transposed result) came back
    contiguous; polyc writes them in torch's storage order and returns
    views with torch's strides (the values as before)."""
    torch.manual_seed(1)
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    y = torch.randn(3, 4)
    got = _compile_matches(lambda a, b: (a.relu() + 1, b.t() * 2, b + 1), x, y)
    ref = ((x.relu() + 1), y.t() * 2, y + 1)
    assert [g.stride() for g in got] == [r.stride() for r in ref]
    assert got[0].is_contiguous(memory_format=torch.channels_last)
