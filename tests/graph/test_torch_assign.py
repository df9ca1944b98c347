"""Assignment in a model's code through ``torch.compile(backend="polyc")``
(``polyc/graph/torch_assign.py``: ``slice_scatter``, ``select_scatter``,
``copy``, ``index_put``, ``empty``), ``torch.bool`` inputs, and the small
operators that came with them (``isnan``, ``var_mean``, ``diagonal``,
reductions with ``dtype=``), against torch eager: float32 to rtol 1e-5
(atol 1e-5 on values of order 1), float64 to 1e-12."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional


def _matches(model, *calls, rtol=1e-5, atol=1e-5):
    """``model`` compiled and eager agree on each tuple of inputs in ``calls``."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="polyc")
    for args in calls:
        with torch.no_grad():
            got, ref = compiled(*args), model(*args)
        got = got if isinstance(got, tuple) else (got,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=atol)


class _SetItem(nn.Module):
    """Slices, a column, stepped slices and an in-place add into a clone,
    and a buffer from torch.empty filled column by column."""

    def forward(self, x, y):
        z = torch.zeros(x.shape[0], 2 * x.shape[1] + 1)
        z[:, 1::2] = x
        z[:, 0:-1:2] = y * 2
        z[:, -1] = 1.0
        w = x.clone()
        w[:, 0] = w[:, 0] * 2
        w[1:, 2:] += 1
        e = torch.empty(x.shape[0], 2)
        e[:, 0] = x.sum(-1)
        e[:, 1] = y.amax(-1)
        return z, w, e


def test_slice_and_select_assignments():
    """``y[:, ::2] = x`` and friends were refused (``slice_scatter``,
    ``select_scatter``, ``copy``, ``empty`` had no lowering); ``w[:, 0] =
    ...; w[1:, 2:] += 1`` then computed column 0 as zeros (a contracted
    temporary read uninitialised, see test_contraction)."""
    torch.manual_seed(0)
    _matches(_SetItem(), (torch.randn(3, 4), torch.randn(3, 4)),
             (torch.randn(5, 6), torch.randn(5, 6)))


class _PositionalEncoding(nn.Module):
    def forward(self, x):
        t, d = x.shape[1], x.shape[2]
        pe = torch.zeros(t, d)
        pos = torch.arange(t).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return x + pe


def test_sinusoidal_positional_encoding_and_circular_padding():
    torch.manual_seed(1)
    _matches(_PositionalEncoding(), (torch.randn(2, 5, 8),), (torch.randn(3, 7, 8),))
    conv = nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular").eval()
    _matches(conv, (torch.randn(2, 3, 6, 5),))


class _IndexPut(nn.Module):
    def forward(self, x, i, v, m):
        a = x.clone()
        a[:, i] += v                        # accumulate on axis 1
        b = x.clone()
        b[i] = 0.5                          # a value on axis 0
        c = torch.zeros(6, 3).index_add(0, i, v[:3])
        d = x.clone()
        d[m > 0.5] = -1.0                   # a mask over every element
        r = x.clone()
        r[m[:, 0] > 0.5] = 2.0              # a mask over the rows
        return a, b, c, d, r


def test_index_put_with_a_mask_or_one_index_tensor():
    torch.manual_seed(2)
    _matches(_IndexPut(), (torch.randn(6, 6), torch.tensor([0, 4, 3]), torch.randn(6, 3),
                           torch.rand(6, 6)))


def test_index_put_with_index_tensors_on_adjacent_axes():
    """``x[i, j] = v``, ``x[:, i, j] += v`` (repeated and negative
    positions) and ``F.fold`` (overlapping blocks summed) were refused
    ("several index tensors"); the indexed axes merge into one indexed by
    ``i * n_j + j``.  Index tensors on axes apart are refused, naming them."""
    def adjacent(x, i, j, v, blocks):
        a = x.clone()
        a[i, j] = 7.0
        b = x[None].repeat(2, 1, 1)
        b[:, i, j] += v
        return a, b, F.fold(blocks, (3, 4), (2, 3), padding=(1, 1))

    torch.manual_seed(4)
    _matches(adjacent, (torch.randn(3, 5), torch.tensor([0, 2, 0]), torch.tensor([4, -1, 4]),
                        torch.randn(3), torch.randn(1, 6, 16)))

    def apart(x, i, j):
        a = x.clone()
        a[i, :, j] = 7.0
        return a
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="axes apart"):
        torch.compile(apart, backend="polyc")(torch.randn(2, 3, 4), torch.tensor([0, 1]),
                                              torch.tensor([1, 3]))


def test_scatter_of_repeated_positions_keeps_the_last_write():
    """A multi-hot encoding ``zeros.scatter_(1, tokens, 1.0)`` of repeated
    tokens gave their counts (3.0 where eager gives 1.0): the one-hot
    scatter summed the writes; ``scatter`` keeps the last one (a tensor of
    values too), ``scatter_add`` still sums.  An index smaller than the
    tensor on the other axes (refused before) writes that corner."""
    tokens = torch.tensor([[1, 3, 1, 1], [0, 2, 2, 4]])
    torch.manual_seed(5)
    _matches(lambda t, s: (torch.zeros(2, 6).scatter_(1, t, 1.0),
                           torch.zeros(2, 6).scatter(1, t, s),
                           torch.zeros(2, 6).scatter_add(1, t, s),
                           torch.ones(3, 6).scatter(1, t[:, :3], s)),
             (tokens, torch.randn(2, 4)))


def test_index_put_refuses_values_under_a_mask():
    class M(nn.Module):
        def forward(self, x, v):
            y = x.clone()
            y[x > 0] = v
            return y
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="depends on the data"):
        torch.compile(M(), backend="polyc", dynamic=False)(torch.ones(2, 3), torch.ones(6))


class _BoolMask(nn.Module):
    def forward(self, x, mask):
        return (x.masked_fill(~mask, float("-inf")).softmax(-1), torch.where(mask, x, 0.0),
                mask.float().sum(-1))


def test_bool_mask_inputs():
    """A ``torch.bool`` input (a padding mask) was refused."""
    torch.manual_seed(3)
    m = torch.rand(3, 6) > 0.3
    m[:, 0] = True
    _matches(_BoolMask(), (torch.randn(3, 6), m), (torch.randn(3, 6), ~m | (torch.arange(6) == 0)))


class _More(nn.Module):
    def forward(self, x, y):
        v, m = torch.var_mean(x, -1, keepdim=True)
        s, n = torch.std_mean(x, (0, 2), correction=0)
        lp = y.log_softmax(-1)
        target = F.softmax(y.flip(0), -1)
        return ((x - m) / torch.sqrt(v + 1e-5), s, n, torch.diagonal(x, 0, 1, 2),
                F.kl_div(lp, target, reduction="batchmean"), torch.isnan(y / y.abs()),
                torch.isfinite(y / (y > 0).float()))


def test_var_mean_diagonal_isnan_and_kl_div():
    torch.manual_seed(4)
    y = torch.randn(4, 5)
    y[1, 2] = 0.0
    _matches(_More(), (torch.randn(4, 5, 5), y))


def test_reduction_dtype_converts_before_reducing():
    """``x.mean(-1, dtype=torch.float64)`` reduced in float32, then
    converted: float64 results off by 1e-7."""
    class M(nn.Module):
        def forward(self, x):
            return x.sum(-1, dtype=torch.float64), x.mean(0, dtype=torch.float64)
    torch.manual_seed(5)
    _matches(M(), (torch.randn(50, 300) * 100,), rtol=1e-12, atol=1e-12)


class _Scatter(nn.Module):
    def forward(self, x, y, i):
        onehot = torch.zeros(y.shape[0], 5).scatter_(1, y[:, None], 1.0)
        first = torch.zeros_like(x).scatter(1, y[:, None], x[:, :1])
        added = torch.zeros(3, 5).scatter_add(0, i, x[:3])
        rows = x.scatter_add(1, y[:, None].expand(-1, 3), x[:, :3])
        return onehot, first, added, rows, -(onehot * x.log_softmax(-1)).sum(-1).mean()


def test_scatter_and_scatter_add():
    """``zeros.scatter_(1, y[:, None], 1.0)`` (the usual one-hot) and
    ``scatter_add`` were refused; they are one-hot comparisons summed."""
    torch.manual_seed(6)
    _matches(_Scatter(), (torch.randn(6, 5), torch.randint(0, 5, (6,)),
                          torch.randint(0, 3, (3, 5))))


class _BoolLike(nn.Module):
    def forward(self, x, m):
        a = torch.zeros_like(x, dtype=torch.bool) | (x > 0)
        b = torch.ones_like(m) & (x < 1)
        return (torch.where(a, x, 0.0), torch.where(b, x, -1.0),
                torch.where(torch.zeros_like(m), 1.0, x))


def test_boolean_full_like_of_traced_values():
    """``torch.zeros_like(x, dtype=torch.bool)`` (a mask to accumulate
    into) failed: numpy's full_like would materialise a boolean array."""
    torch.manual_seed(7)
    _matches(_BoolLike(), (torch.randn(3, 4), torch.rand(3, 4) > 0.5))
