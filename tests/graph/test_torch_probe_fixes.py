"""Bugs found by probing ``torch.compile(backend="polyc")`` over torch's own
operator database (each op in a tiny module, compared with eager torch):
one small test per bug, values, shapes and dtypes against eager torch.
Skipped where torch is not installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import polyc.graph.torch_backend  # noqa: E402,F401  (registers backend="polyc")
from polyc.errors import IndexBoundsError  # noqa: E402


def _compiled(f, *args):
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.compile(f, backend="polyc", dynamic=False)(*args)


def _same_bits(got, want) -> None:
    """Equal values, shapes and dtypes; zeros' signs and NaNs as eager's."""
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, torch.Tensor)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        g, w = g.numpy(), w.numpy()
        if w.dtype.kind == "f":
            same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
        else:
            same = g == w
        assert same.all(), f"got {g[~same]}, want {w[~same]}"


def test_relu_clamp_maximum_keep_negative_zero_and_nan():
    """``relu(-0.0)`` was 0.0 (torch: -0.0), as were ``clamp(-0.0, min=0)``,
    ``relu6``, ``hardtanh`` and ``maximum(-0.0, 0.0)``: polyc's maximum of
    two equal values picked the second operand (numpy's choice), torch's
    picks the first."""
    def f(x, z):
        return (torch.relu(x), torch.clamp(x, min=0), F.relu6(x), F.hardtanh(x, 0.0, 1.0),
                torch.maximum(x, z), torch.minimum(z, x), torch.max(x, z), torch.clamp(x, -1, 1))

    nan = math.nan
    x = torch.tensor([-0.0, 0.0, -1.0, nan, 2.0, 0.0])
    z = torch.tensor([0.0, -0.0, nan, 1.0, 3.0, nan])
    _same_bits(_compiled(f, x, z), f(x, z))


def test_graph_without_tensor_inputs_returns_tensors():
    """A graph of creation operators only (``torch.arange(0, n, 2)``) returned
    a numpy array, not a torch tensor."""
    def f(n):
        return torch.arange(0, n, 2), torch.full((2,), 3.0)

    got = _compiled(f, 7)
    _same_bits(got, f(7))


def test_failed_assertion_on_constants_is_a_polyc_error():
    """``F.one_hot`` of constant labels out of range raised a bare
    ``ValueError`` while tracing."""
    def f(x):
        return x + F.one_hot(torch.tensor([0, 5]), 3)

    with pytest.raises(IndexBoundsError, match="num_classes"):
        _compiled(f, torch.zeros(2, 3))


def test_max_pool_indices_of_a_window_with_nan():
    """A NaN in a max-pool window gave the index 2**62 (no element equals
    the NaN maximum); torch gives the position of the window's last NaN."""
    def f(x):
        return (F.max_pool2d(x, 2, return_indices=True)
                + F.adaptive_max_pool2d(x, 1, return_indices=True))

    nan = math.nan
    x = torch.tensor([[[[1.0, nan, 0.5, 0.5], [nan, 2.0, 0.5, 3.0]]]])
    _same_bits(_compiled(f, x), f(x))


def test_out_of_range_scatter_and_index_put_positions_raise():
    """A position outside the axis from an input index tensor (through a
    view: ``y[:, None]``) was dropped by ``scatter``/``index_put`` where eager
    torch raises; it is an ``IndexBoundsError`` at the call, in-range calls
    as eager's."""
    def f(x, i, y):
        return torch.zeros(3, 4).scatter(1, y[:, None], 1.0), x.index_put((i,), x[0])

    x, i, y = torch.randn(3, 4), torch.tensor([0, -1]), torch.tensor([0, 3, 1])
    torch._dynamo.reset()
    with torch.no_grad():
        g = torch.compile(f, backend="polyc", dynamic=False)
        _same_bits(g(x, i, y), f(x, i, y))
        for ii, yy in [(torch.tensor([0, 3]), y), (i, torch.tensor([0, -1, 1]))]:
            with pytest.raises((RuntimeError, IndexError), match="out of bounds"):
                f(x, ii, yy)
            with pytest.raises(IndexBoundsError, match="out of bounds for dimension"):
                g(x, ii, yy)


def test_batch_norm_eval_statistics_and_uneven_adaptive_average():
    """``torch.native_batch_norm(..., training=False)`` returned the running
    mean and 1/std as its saved statistics (torch: empty, shape (0,));
    ``adaptive_avg_pool2d`` to sizes that do not divide the input (8x8 to
    5x7) took 90 s to compile (a slice and reduction per output cell), now
    one small matrix product per axis."""
    def f(x, w, m, v):
        return torch.native_batch_norm(x, w, w, m, v, False, 0.1, 1e-5) + (
            F.adaptive_avg_pool2d(x, (5, 7)),)

    torch.manual_seed(0)
    x, w, m, v = torch.randn(1, 2, 8, 8), torch.randn(2), torch.randn(2), torch.rand(2) + 0.5
    got, want = _compiled(f, x, w, m, v), f(x, w, m, v)
    assert [tuple(g.shape) for g in got] == [tuple(t.shape) for t in want]
    for g, t in zip(got, want):
        torch.testing.assert_close(g, t, rtol=1e-5, atol=1e-6)


def test_indices_of_an_uneven_adaptive_max_pool1d_are_refused():
    """``F.adaptive_max_pool1d(x, 3, return_indices=True)`` of length 4 crashed
    with ``AttributeError: 'PoolIndices' object has no attribute 'ndim'``;
    it is the UnsupportedError that the 2-d case raises."""
    def f(x):
        return F.adaptive_max_pool1d(x, 3, return_indices=True)

    with pytest.raises(Exception, match="indices of aten.adaptive_max_pool") as info:
        _compiled(f, torch.randn(2, 4))
    assert "AttributeError" not in str(info.value)


def test_bucketize_and_searchsorted_as_counts():
    """``torch.bucketize``/``torch.searchsorted`` were refused (not lowered);
    they are counts of the boundaries below each value (a NaN after all)."""
    def f(x, b, s2, v2):
        return (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True),
                torch.searchsorted(b, x, side="right"), torch.searchsorted(s2, v2),
                torch.searchsorted(b, 2.0))

    b = torch.tensor([1.0, 2.0, 2.0, 3.0])
    x = torch.tensor([[0.0, 1.0, 2.0, 2.5], [3.0, 4.0, math.nan, -math.inf]])
    s2, v2 = torch.tensor([[0.0, 1.0, 5.0], [-2.0, -1.0, 0.0]]), torch.tensor([[1.0], [-3.0]])
    _same_bits(_compiled(f, x, b, s2, v2), f(x, b, s2, v2))


@pytest.mark.parametrize("reduce, include_self", [("prod", False), ("mean", True),
                                                   ("amax", False)])
def test_scatter_reduce(reduce, include_self):
    """``scatter_reduce`` (sum prod mean amax amin, with and without
    ``include_self``) was refused; an index smaller than ``x`` on the other
    axes writes that corner."""
    def f(x, i, s):
        return x.scatter_reduce(1, i[:2], s, reduce, include_self=include_self)

    torch.manual_seed(0)
    x, s = torch.randn(3, 5), torch.randn(3, 4)
    i = torch.tensor([[0, 2, 2, 4], [1, 1, 1, 1], [4, 3, 2, 0]])
    g, w = _compiled(f, x, i, s), f(x, i, s)
    assert g.dtype == w.dtype and g.shape == w.shape
    torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_more_elementwise_lowerings_and_zero_dim_argmax():
    """``acosh asinh atanh logical_xor erfc lgamma angle ldexp triu_indices``
    and ``view_copy`` were
    refused (not lowered); ``argmax``, ``index_select`` and reductions
    along dim 0 (``sum amax logsumexp any``) of a 0-d tensor were refused
    (AxisError) or crashed: numpy has no axis 0 there, torch takes it.  ``erfc`` is
    C's, not ``1 - erf`` (its tail at x = 5 is 1.5e-12, not 0)."""
    def f(x, s, i):
        return (torch.erfc(x), torch.lgamma(x + 6), torch.acosh(x + 6), torch.asinh(x),
                torch.atanh(x / 10), torch.logical_xor(x > 0, x > 1), torch.argmax(s),
                torch.index_select(s, 0, i), torch.ops.aten.view_copy(x, (2, 2)),
                s.sum(0), s.amax(-1), torch.logsumexp(s, 0), (s > 0).any(0),
                torch.angle(x), torch.ldexp(x, i), torch.triu_indices(3, 4, 1))

    x = torch.tensor([-1.0, 0.5, 3.0, 5.0])
    s, i = torch.tensor(2.5), torch.tensor([0])
    got, want = _compiled(f, x, s, i), f(x, s, i)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=1e-5, atol=0)
