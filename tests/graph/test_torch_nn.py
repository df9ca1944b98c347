"""ATen's neural-network operators through ``torch.compile(backend="polyc")``
(``polyc/graph/torch_nn.py``: convolution, batch norm in inference, max and
average pooling (ceil mode too), adaptive pooling, transposed convolution, group and
instance norm, ``max``/``min`` along a dim,
``linalg_vector_norm``, the fused ``nn.TransformerEncoderLayer`` fast path)
against torch eager, and the pre-norm residual block that the group
lowering once computed wrong, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from .test_ops import F32, check, rand


def _ln(x):
    m = x.mean(-1, keepdims=True)
    d = x - m
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5)


W1 = rand((32, 32), F32, seed=50)
W2 = rand((32, 32), F32, seed=51)


def _pre_norm(x):
    y = x + x @ W1
    return y + _ln(y) @ W2


def test_pre_norm_residual_reads_the_block_input_not_the_centred_value():
    """A regression: the LayerNorm's centring ``y - mean`` reused ``y``'s
    buffer (its last reader in the group's program order), but the residual
    ``y + ...`` folded into the second GEMM's store read ``y`` after it."""
    check(_pre_norm, rand((2, 6, 32), F32, seed=52), reduction_length=32)
    check(_pre_norm, rand((12, 32), F32, seed=53), reduction_length=32)


def _softplus_after_linear(x, w, b):
    y = x @ w + b                      # kept: read by the where in another group
    z = y * 1.0                        # last reader of y's buffer inside the group
    return np.where(z > 20.0, y, np.log1p(np.exp(z)))


def test_kept_gemm_epilogue_keeps_its_buffer():
    """A regression (``nn.Softplus`` after ``nn.Linear``): the bias add,
    computed in the GEMM's buffer and read outside the group, had that
    buffer written over by the next elementwise statement (storage reuse),
    and the group no longer returned it (``KeyError`` at the call)."""
    x, w, b = rand((3, 8), F32, seed=54), rand((8, 16), F32, seed=55), rand((16,), F32, seed=56)
    check(_softplus_after_linear, x, w, b, reduction_length=8)
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(57)
    model = nn.Sequential(nn.Linear(8, 16), nn.Softplus(beta=2.0, threshold=5.0),
                          nn.Linear(16, 4)).eval()
    _compile_matches(model, torch.randn(3, 8) * 3)


def _compile_matches(model, *args, atol=1e-4):
    torch = pytest.importorskip("torch")
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend="polyc")(*args)
        ref = model(*args)
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=atol)


def test_small_cnn():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=2, bias=False)
            self.c3 = nn.Conv1d(4, 6, 3, dilation=2, padding=2)
            self.fc = nn.Linear(8, 10)

        def forward(self, x, s):
            x = torch.relu(self.bn(self.c1(x)))
            x = nn.functional.max_pool2d(x, 2)
            x = torch.relu(self.c2(x))
            a = nn.functional.avg_pool2d(x, 2, stride=1, padding=1)
            x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
            return torch.softmax(self.fc(x), -1), a, nn.functional.max_pool1d(self.c3(s), 3)
    torch.manual_seed(54)
    m = CNN().eval()
    m.bn.running_mean.uniform_(-0.5, 0.5)
    m.bn.running_var.uniform_(0.5, 2.0)
    _compile_matches(m, torch.randn(2, 3, 16, 16), torch.randn(2, 4, 20))


def test_reductions_along_a_dim_and_norms():
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            v, i = x.max(-1)
            w, j = torch.min(x, 1, keepdim=True)
            return v, i, w, j, x.norm(dim=-1), torch.linalg.vector_norm(x, 1, dim=(1, 2)), \
                torch.max(x, -x), x.max()
    torch.manual_seed(55)
    _compile_matches(M().eval(), torch.randn(2, 4, 6))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_layer_fast_path(norm_first, activation):
    torch = pytest.importorskip("torch")
    torch.manual_seed(56)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                             activation=activation, norm_first=norm_first)
    _compile_matches(layer.eval(), torch.randn(2, 6, 32))


def test_max_pool_indices():
    """``return_indices=True`` (and ``max_unpool2d`` of them) once failed with
    an AttributeError of a placeholder object; the indices are computed as
    torch's: the first maximum of each window (ties from rounding), padding
    and ``ceil_mode`` windows, an even adaptive pooling.  The indices of an
    uneven adaptive pooling are refused with an UnsupportedError."""
    torch = pytest.importorskip("torch")
    from polyc.errors import UnsupportedError
    F = torch.nn.functional
    torch.manual_seed(3)
    x = (torch.randn(1, 2, 4, 5) * 2).round()
    _compile_matches(lambda a: (*F.max_pool2d(a, 3, 2, padding=1, ceil_mode=True,
                                              return_indices=True),
                                F.adaptive_max_pool2d(a, (2, 5), return_indices=True)[1],
                                F.max_unpool2d(*F.max_pool2d(a[..., :4], 2, return_indices=True),
                                               2)), x)
    torch._dynamo.reset()
    with torch.no_grad(), pytest.raises(Exception, match="adaptive_max_pool") as info:
        torch.compile(lambda a: F.adaptive_max_pool2d(a, (3, 4), return_indices=True),
                      backend="polyc")(x)
    assert isinstance(getattr(info.value, "inner_exception", info.value), UnsupportedError)



@pytest.mark.parametrize("case", ["conv_transpose_2d", "conv_transpose_1d_groups",
                                  "conv_transpose_3d"])
def test_transposed_convolutions(case):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(57)
    model, x = {
        "conv_transpose_2d": (nn.ConvTranspose2d(3, 5, (2, 3), stride=(2, 1), padding=(0, 1),
                                                 output_padding=(1, 0)),
                              torch.randn(2, 3, 4, 5)),
        "conv_transpose_1d_groups": (nn.ConvTranspose1d(4, 6, 3, stride=3, padding=2,
                                                        groups=2, dilation=2),
                                     torch.randn(2, 4, 7)),
        "conv_transpose_3d": (nn.ConvTranspose3d(2, 2, 2, stride=2), torch.randn(1, 2, 3, 3, 3)),
    }[case]
    _compile_matches(model.eval(), x)


def test_group_and_instance_norms_and_ceil_mode_pooling():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gn = nn.GroupNorm(2, 6)
            self.inorm = nn.InstanceNorm2d(6, affine=True)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
            self.amax = nn.AdaptiveMaxPool2d(2)

        def forward(self, x):
            y = self.inorm(self.gn(x))
            return self.pool(y), self.amax(y), nn.functional.group_norm(x, 3)
    torch.manual_seed(58)
    m = M().eval()
    with torch.no_grad():
        m.gn.weight.uniform_(0.5, 1.5)
        m.inorm.bias.uniform_(-0.5, 0.5)
    _compile_matches(m, torch.randn(2, 6, 8, 7))


def test_activations_padding_repeat_and_torch_type_promotion():
    """``float32 * int64`` is float32 in torch (float64 in numpy): the
    interpreter casts each node to the dtype ATen gives it; bilinear
    upsampling mixes them so."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    F = nn.functional

    class M(nn.Module):
        def forward(self, x, i):
            a = F.leaky_relu(x, 0.2) + F.elu(x) + F.selu(x) + F.hardtanh(x, -0.5, 0.5) \
                + F.celu(x, 0.5) + F.relu6(x)
            b = F.pad(x, (-1, 2, 1, 0), value=0.25).repeat(1, 2, 1)
            c = x * i + i / 2
            u = F.interpolate(x.unsqueeze(0), scale_factor=2, mode="bilinear")
            return a, b, c, u
    torch.manual_seed(59)
    _compile_matches(M().eval(), torch.randn(2, 4, 5), torch.randint(-5, 5, (2, 4, 5)))


def test_classification_losses():
    """cross_entropy with label smoothing (its ignore_index mask is a
    bitwise_not), nll_loss, BCE with logits and an accuracy comparison."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            logits = self.fc(x)
            return (F.cross_entropy(logits, y, label_smoothing=0.1),
                    F.nll_loss(F.log_softmax(logits, -1), y),
                    F.binary_cross_entropy_with_logits(logits[:, 0], y.float() / 2),
                    (logits.argmax(-1) == y).float().mean())
    torch.manual_seed(60)
    _compile_matches(M().eval(), torch.randn(6, 4), torch.tensor([0, 2, 1, 1, 0, 2]))


def test_bilinear_and_cdist():
    """``nn.Bilinear`` (``aten._trilinear``: one einsum of three operands)
    and ``torch.cdist`` (``aten._cdist_forward``) of several orders."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bil = torch.nn.Bilinear(4, 5, 3)

        def forward(self, x, y, a, b):
            return (self.bil(x, y), torch.cdist(a, b), torch.cdist(a, b, p=1),
                    torch.cdist(a, b, p=float("inf")), torch.cdist(a, b, p=3))
    torch.manual_seed(61)
    _compile_matches(M().eval(), torch.randn(2, 6, 4), torch.randn(2, 6, 5),
                     torch.randn(2, 3, 8), torch.randn(2, 5, 8))


def test_average_pooling_options_and_unbatched_inputs():
    """``AvgPool`` with ``count_include_pad=False``, ``ceil_mode`` (a last
    window past the padding is divided by its part inside), a
    ``divisor_override``, and on an unbatched (C, H, W) input, which crashed
    in ``sliding_window_view`` (the windows were taken from axis 2 on)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class M(nn.Module):
        def forward(self, x, u):
            return (nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                    nn.functional.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
                    nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                    nn.functional.avg_pool2d(x, 3, 2, 1, divisor_override=4),
                    nn.functional.avg_pool2d(u, 2),
                    nn.functional.avg_pool1d(u[0], 3, 2, 1, ceil_mode=True))
    torch.manual_seed(62)
    _compile_matches(M().eval(), torch.randn(2, 3, 7, 7), torch.randn(3, 8, 8))


def test_transformer_encoder_layer_fast_path_with_padding_masks():
    """``src_key_padding_mask`` (bool, or float as _canonical_mask makes it)
    reaches the fused ``_transformer_encoder_layer_fwd`` as its mask, which
    was refused."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(63)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                             norm_first=True, activation="gelu").eval()

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, x, kpm, fpm):
            return self.layer(x, src_key_padding_mask=kpm), \
                self.layer(x, src_key_padding_mask=fpm)
    kpm = torch.zeros(2, 5, dtype=torch.bool)
    kpm[0, 3:] = True
    _compile_matches(M(), torch.randn(2, 5, 16), kpm, torch.where(kpm, -1e4, 0.0))


def test_vector_norms_of_any_order():
    """``x.norm(p=3)``, ``F.normalize(p=1)`` next to orders 0 and 0.5 (only
    1, 2 and inf were lowered)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    class M(torch.nn.Module):
        def forward(self, x):
            return (x.norm(p=3, dim=-1), F.normalize(x, p=1, dim=1),
                    torch.linalg.vector_norm(x, 0.5, dim=0),
                    torch.linalg.vector_norm(x.round(), 0, dim=1))
    torch.manual_seed(64)
    _compile_matches(M(), torch.randn(4, 6))


def test_embedding_bag_and_truncating_integer_division():
    """``nn.EmbeddingBag`` on a 2-D input (``aten._embedding_bag``, bags of
    one length; sum with per-sample weights, mean, max) and ``torch.div(i,
    k, rounding_mode="trunc")`` on integers were refused."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bags = nn.ModuleList(nn.EmbeddingBag(10, 4, mode=m) for m in ("sum", "mean",
                                                                               "max"))

        def forward(self, i, w, n):
            return (self.bags[0](i, per_sample_weights=w), self.bags[1](i), self.bags[2](i),
                    torch.div(n, 3, rounding_mode="trunc"),
                    torch.div(n, -n.abs() - 1, rounding_mode="trunc"))
    torch.manual_seed(65)
    _compile_matches(M().eval(), torch.randint(0, 10, (3, 5)), torch.rand(3, 5),
                     torch.randint(-9, 9, (4, 5)))


def test_embedding_bag_with_offsets_and_padding():
    """``bag(indices, offsets)`` with offsets an input (bags of different
    lengths, an empty one) and ``padding_idx`` were refused; they are a
    one-hot contraction with each element's bag (sum, mean, max; an empty
    bag is zeros, the mean counts the elements that are not padding)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mean = nn.EmbeddingBag(10, 3, mode="mean", padding_idx=2)
            self.max = nn.EmbeddingBag(10, 3, mode="max", padding_idx=2)

        def forward(self, i, o):
            return self.mean(i, o), self.max(i, o)
    torch.manual_seed(66)
    _compile_matches(M().eval(), torch.tensor([1, 2, 4, 5, 2, 3, 2, 9]),
                     torch.tensor([0, 3, 3, 6]))


def test_float16_norms_of_large_values():
    """A float16 LayerNorm, GroupNorm and InstanceNorm of values around 100:
    ``(x - mean)^2`` overflowed half (the output was all zeros); ATen
    computes their statistics in float32, so does polyc now."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln, self.gn, self.inorm = nn.LayerNorm(64), nn.GroupNorm(2, 4), \
                nn.InstanceNorm1d(4)

        def forward(self, x, y):
            return self.ln(x), self.gn(y), self.inorm(y)
    torch.manual_seed(66)
    m = M().half().eval()
    x, y = (torch.randn(4, 64) * 100).half(), (torch.randn(2, 4, 32) * 100).half()
    torch._dynamo.reset()
    with torch.no_grad():
        got, ref = torch.compile(m, backend="polyc")(x, y), m(x, y)
    for g, r in zip(got, ref):
        assert g.dtype == torch.float16
        np.testing.assert_allclose(g.float().numpy(), r.float().numpy(), rtol=1e-2, atol=1e-2)


def test_float16_reductions_accumulate_past_the_half_range():
    """``x.var()``, ``x.norm()``, ``x.mean()`` of float16 values whose sums
    of squares (or sums) pass 65504 were inf; ATen accumulates them in
    float32 and only the result is half."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            return (x.var(-1), x.std(0), torch.var_mean(x, -1), x.norm(dim=-1),
                    (x.abs() + 1000).mean(-1))
    torch.manual_seed(67)
    x = (torch.randn(4, 64) * 60).half()
    torch._dynamo.reset()
    with torch.no_grad():
        got, ref = torch.compile(M(), backend="polyc")(x), M()(x)
    for g, r in zip(got[:2] + got[2] + got[3:], ref[:2] + ref[2] + ref[3:]):
        assert g.dtype == torch.float16 and torch.isfinite(g).all()
        np.testing.assert_allclose(g.float().numpy(), r.float().numpy(), rtol=2e-3)


def test_adaptive_pooling_3d():
    """``nn.AdaptiveAvgPool3d``/``AdaptiveMaxPool3d`` (a video or volume
    model's global pooling) were refused as operators polyc does not lower;
    they are the 2-d lowering with three spatial axes."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(60)
    model = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1),
                          nn.Flatten(), nn.Linear(4, 3)).eval()
    _compile_matches(model, torch.randn(2, 2, 4, 6, 6))
    _compile_matches(nn.AdaptiveAvgPool3d((None, 2, 4)), torch.randn(2, 3, 4, 4, 6))
    _compile_matches(nn.AdaptiveMaxPool3d((2, 3, 2)), torch.randn(1, 2, 4, 5, 6))


def test_batch_norm_left_in_training_mode():
    """A model compiled under ``no_grad`` without ``eval()``: its batch
    norms normalise by the batch's statistics and update their running
    statistics, as eager torch does (``_native_batch_norm_legit_functional``
    was refused as an operator polyc does not lower)."""
    import copy
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch._dynamo.reset()
    torch.manual_seed(61)
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4, momentum=0.3), nn.ReLU()).train()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 3, 5, 5)
    with torch.no_grad():
        compiled = torch.compile(model, backend="polyc")
        for _ in range(2):
            np.testing.assert_allclose(compiled(x).numpy(), ref(x).numpy(), rtol=1e-4,
                                       atol=1e-5)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(model[1], name).numpy(),
                                   getattr(ref[1], name).numpy(), rtol=1e-5, atol=1e-6)


def test_lstm_module_with_allow_rnn(monkeypatch):
    """``nn.LSTM`` (TorchDynamo captures RNN modules with ``allow_rnn``)
    arrived as ``aten.mkldnn_rnn_layer`` where torch has oneDNN, refused as an
    operator polyc does not lower; AOTAutograd traces with oneDNN off, so it
    decomposes into the cell's matmuls, sigmoids and tanhs."""
    torch = pytest.importorskip("torch")
    import polyc.graph.torch_backend as tb
    nn = torch.nn
    torch._dynamo.reset()
    made = []
    compile_aten = tb._compile_aten
    monkeypatch.setattr(tb, "_compile_aten",
                        lambda gm, ex: made.append(compile_aten(gm, ex)) or made[-1])

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 8, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(16, 3)

        def forward(self, x, h0, c0):
            y, (h, c) = self.rnn(x, (h0, c0))
            return self.fc(y), h, c

    torch.manual_seed(62)
    args = (torch.randn(2, 5, 4), torch.randn(4, 2, 8), torch.randn(4, 2, 8))
    enabled = torch._C._get_mkldnn_enabled()
    with torch._dynamo.config.patch(allow_rnn=True):
        _compile_matches(Tagger().eval(), *args)
    assert made, "polyc did not compile the LSTM"
    assert torch._C._get_mkldnn_enabled() == enabled


def test_interpolate_with_changing_image_sizes():
    """``F.interpolate(scale_factor=...)`` at a second image size: TorchDynamo's
    dynamic graph computes the output size with ``sym_float`` and
    ``math.trunc``, which the backend refused as operators polyc does not
    lower (the second call failed); they are Python's float and trunc
    (the size specialised, one plan per size)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch._dynamo.reset()
    torch.manual_seed(63)

    class Up(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            y = nn.functional.interpolate(self.c(x), scale_factor=1.5, mode="bilinear")
            return nn.functional.interpolate(y, scale_factor=0.5, mode="nearest")

    m = Up().eval()
    with torch.no_grad():
        c = torch.compile(m, backend="polyc")
        for h in (6, 8, 10):
            x = torch.randn(2, 3, h, h + 1)
            np.testing.assert_allclose(c(x).numpy(), m(x).numpy(), rtol=1e-4, atol=1e-5)


def _fn(fn):
    """``fn`` as a module."""
    torch = pytest.importorskip("torch")

    class Fn(torch.nn.Module):
        def forward(self, *args):
            return fn(*args)
    return Fn()


def test_tensor_unfold_frames_and_patches():
    """``Tensor.unfold`` (audio frames, image patches) was refused
    (``aten.unfold`` not lowered)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(60)
    r = torch.randn
    _compile_matches(_fn(lambda x: x.unfold(-1, 8, 4) * torch.hann_window(8)), r(2, 40))
    _compile_matches(_fn(lambda x: x.unfold(2, 4, 4).unfold(3, 4, 4)
                         .permute(0, 2, 3, 1, 4, 5).reshape(2, 4, -1)), r(2, 3, 8, 8))
    _compile_matches(_fn(lambda x: x.unfold(0, 3, 2).sum(-1)), r(7, 5))
    _compile_matches(_fn(lambda x: x.unfold(1, 3, 3)), r(2, 10))


def test_addmv_and_addbmm():
    """``torch.addmv`` and ``torch.addbmm`` were refused (not lowered); with
    ``beta=0`` the bias is not read (its NaNs ignored, as in torch)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(61)
    r = torch.randn
    _compile_matches(_fn(lambda c, a, b: torch.addmv(c, a, b, beta=0.5, alpha=3)),
                     r(1), r(3, 4), r(4))
    _compile_matches(_fn(lambda c, a, b: torch.addbmm(c, a, b, beta=2)),
                     r(5), r(2, 3, 4), r(2, 4, 5))
    _compile_matches(_fn(lambda c, a, b: torch.addbmm(c, a, b, beta=0, alpha=0.5)),
                     torch.full((3, 5), float("nan")), r(2, 3, 4), r(2, 4, 5))
