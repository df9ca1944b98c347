"""numpy lowerings of ATen's neural-network operators for the torch backend
(:data:`polyc.graph.torch_backend.LOWERINGS`): convolution, batch
normalisation in inference, max and average pooling, ``max``/``min`` (with
``dim``: values and indices), ``linalg_vector_norm``, the fused
``nn.TransformerEncoderLayer``, softmax, log-softmax, layer/group/instance
norm, transposed convolution, ``nn.Bilinear``'s trilinear product,
``cdist`` and the checks ``_assert_async`` makes.  Each is written with
the numpy functions :func:`polyc.jit` traces, so a convolution becomes ``pad`` +
``sliding_window_view`` + ``einsum``, the implicit GEMM the tensorizer
matches (``docs/graph.md``), with the bias added in its epilogue.  No torch
import: the functions take and return traced arrays.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import IndexBoundsError, UnsupportedError
from . import torch_math

_LETTERS = "uvwxyz"


def _windows(x, window: Sequence[int], stride: Sequence[int], dilation: Sequence[int]):
    """The windows of the spatial axes of ``x`` (N, C, *spatial), strided
    and dilated: (N, C, *out, *window)."""
    nd = len(window)
    span = tuple((k - 1) * d + 1 for k, d in zip(window, dilation))
    win = sliding_window_view(x, span, axis=tuple(range(2, 2 + nd)))
    if any(s != 1 for s in stride) or any(d != 1 for d in dilation):
        key = (slice(None),) * 2 + tuple(slice(None, None, s) for s in stride) \
            + tuple(slice(None, None, d) for d in dilation)
        win = win[key]
    return win


def unfold(x, dim: int, size: int, step: int):
    """``aten.unfold`` (``Tensor.unfold``: audio frames, image patches): the
    windows of ``size`` every ``step`` along ``dim``, which becomes their
    count, with a new last axis of ``size``; a view, as in torch."""
    if x.ndim == 0:
        raise UnsupportedError("Tensor.unfold of a 0-d tensor is not supported by polyc")
    dim %= x.ndim
    win = sliding_window_view(x, size, axis=dim)
    return win if step == 1 else win[(slice(None),) * dim + (slice(None, None, step),)]


def convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups,
                right=None):
    """``aten.convolution`` (1-D to 3-D, groups, stride, padding, dilation):
    ``sum_{c, k} window(n, c, o, k) * w(f, c, k) + b(f)``; transposed, the
    same convolution over the input with ``stride - 1`` zeros between its
    elements (:func:`_conv_transposed`)."""
    if transposed:
        return _conv_transposed(x, w, b, stride, padding, dilation, output_padding, groups)
    nd = w.ndim - 2
    if not 1 <= nd <= 3 or (isinstance(padding, str)):
        raise UnsupportedError(f"aten.convolution of {nd} spatial dimensions (padding "
                               f"{padding!r}) is not supported by polyc")
    stride, padding, dilation = (tuple(v) * (nd if len(v) == 1 else 1)
                                 for v in (stride, padding, dilation))
    right = padding if right is None else right
    if any(padding) or any(right):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(padding, right)))
    win = _windows(x, tuple(w.shape[2:]), stride, dilation)
    o, k = _LETTERS[:nd], _LETTERS[3:3 + nd]
    if groups == 1:
        out = np.einsum(f"nc{o}{k},fc{k}->nf{o}", win, w)
    else:
        n, c = win.shape[:2]
        f = w.shape[0]
        wg = w.reshape((groups, f // groups) + tuple(w.shape[1:]))
        win = win.reshape((n, groups, c // groups) + tuple(win.shape[2:]))
        out = np.einsum(f"ngc{o}{k},gfc{k}->ngf{o}", win, wg)
        out = out.reshape((n, f) + tuple(out.shape[3:]))
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * nd)
    return out


def _per_dim(v, nd: int) -> tuple:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * nd if len(v) == 1 else v


def _conv_transposed(x, w, b, stride, padding, dilation, output_padding, groups):
    """A transposed convolution (the gradient of a strided convolution) as a
    direct one: ``stride - 1`` zeros inserted between the input's elements
    along each spatial axis, ``dilation * (k - 1) - padding`` of zero
    padding on each side (``+ output_padding`` after), then a stride-1
    convolution with the kernel flipped and its two channel axes swapped per
    group (``w``: (C_in, C_out / groups, *k)).  The inserted zeros cost
    ``stride ** nd`` times the multiply-adds of a scatter formulation."""
    nd = w.ndim - 2
    if not 1 <= nd <= 3:
        raise UnsupportedError(f"aten.convolution transposed of {nd} spatial dimensions "
                               "is not supported by polyc")
    stride, padding, dilation, output_padding = (
        _per_dim(v, nd) for v in (stride, padding, dilation, output_padding))
    k = tuple(w.shape[2:])
    for j, s_ in enumerate(stride):
        if s_ > 1:
            ax = 2 + j
            parts = [x] + [np.zeros_like(x)] * (s_ - 1)
            up = np.stack(parts, axis=ax + 1)
            shape = tuple(x.shape[:ax]) + (x.shape[ax] * s_,) + tuple(x.shape[ax + 1:])
            x = up.reshape(shape)
            n = x.shape[ax] - (s_ - 1)
            x = x[(slice(None),) * ax + (slice(0, n),)]
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
            for kk, p, d, op in zip(k, padding, dilation, output_padding)]
    crop = tuple(slice(max(-lo, 0), None if hi >= 0 else hi) for lo, hi in pads)
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        x = x[(slice(None),) * 2 + crop]
    cin = w.shape[0]
    wg = w.reshape((groups, cin // groups) + tuple(w.shape[1:]))
    wg = np.swapaxes(wg, 1, 2)
    wt = wg.reshape((wg.shape[0] * wg.shape[1], cin // groups) + k)
    wt = np.flip(wt, axis=tuple(range(2, 2 + nd)))
    return convolution(x, wt, b, (1,) * nd, tuple(max(lo, 0) for lo, _ in pads),
                       dilation, False, (0,) * nd, groups, right=tuple(max(hi, 0)
                                                                     for _, hi in pads))


def batch_norm_inference(x, weight, bias, mean, var, momentum, eps):
    """``aten._native_batch_norm_legit_no_training``: ``(x - mean) * invstd
    * weight + bias`` per channel (axis 1), and the two saved statistics
    ATen also returns, empty (shape ``(0,)``) outside training as torch's."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    invstd = 1.0 / np.sqrt(var + eps)
    out = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    empty = np.zeros((0,), dtype=x.dtype)
    return out, empty, empty


def batch_norm_batch_stats(x, weight, bias, *rest):
    """``aten._native_batch_norm_legit.no_stats`` (instance norm, and batch
    norm without running statistics): normalised by the mean and biased
    variance over every axis but the channel axis 1.  The overload with
    running statistics uses them when ``training`` is false."""
    if len(rest) == 5 and not rest[2]:
        return batch_norm_inference(x, weight, bias, rest[0], rest[1], rest[3], rest[4])
    eps, x = rest[-1], wide(x)
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    d = x - mean.reshape(shape)
    invstd = 1.0 / np.sqrt((d * d).mean(axis=axes) + eps)
    out = d * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean, invstd


def batch_norm_training(x, weight, bias, running_mean, running_var, training, momentum,
                        eps):
    """``aten._native_batch_norm_legit_functional`` (a batch norm in training
    mode, called under ``no_grad``: the model was not put in ``eval()``):
    normalised by the batch's statistics, as eager torch does, and the
    running statistics updated with ``momentum`` (the variance unbiased);
    returns the output, the batch mean and 1/std, and the new running mean
    and variance, which AOTAutograd copies into the module's buffers."""
    if not training:
        return batch_norm_inference(x, weight, bias, running_mean, running_var, momentum,
                                    eps) + (running_mean, running_var)
    out, mean, invstd = batch_norm_batch_stats(x, weight, bias, eps)
    n = int(np.prod([int(s) for k, s in enumerate(x.shape) if k != 1]))
    d = wide(x) - mean.reshape((1, -1) + (1,) * (x.ndim - 2))
    var = (d * d).sum(axis=(0,) + tuple(range(2, x.ndim))) / max(n - 1, 1)
    new_mean = running_mean * (1.0 - momentum) + mean * momentum
    new_var = running_var * (1.0 - momentum) + var * momentum
    return out, mean, invstd, new_mean, new_var


def group_norm(x, weight, bias, n, c, hw, groups, eps):
    """``aten.native_group_norm``: each sample's channels in ``groups``
    groups, normalised by the group's mean and biased variance, then the
    per-channel affine map; also the (N, groups) mean and 1/std (float16
    computed in float32)."""
    x = wide(x)
    shape = tuple(x.shape)
    y = x.reshape((shape[0], groups, -1))
    mean = y.mean(axis=-1, keepdims=True)
    d = y - mean
    invstd = 1.0 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps)
    out = (d * invstd).reshape(shape)
    cshape = (1, -1) + (1,) * (len(shape) - 2)
    if weight is not None:
        out = out * weight.reshape(cshape)
    if bias is not None:
        out = out + bias.reshape(cshape)
    return out, mean.reshape((shape[0], groups)), invstd.reshape((shape[0], groups))


def constant_pad(x, pad, value=0):
    """``aten.constant_pad_nd``: ``pad`` lists (before, after) pairs from
    the last axis backwards; a negative width crops."""
    pad = list(pad)
    widths = [(0, 0)] * x.ndim
    for j in range(len(pad) // 2):
        widths[x.ndim - 1 - j] = (pad[2 * j], pad[2 * j + 1])
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        x = x[tuple(slice(max(-lo, 0), None if hi >= 0 else hi) for lo, hi in widths)]
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    if not any(lo or hi for lo, hi in widths):
        return x
    return np.pad(x, tuple(widths), constant_values=value)


def repeat(x, repeats):
    """``aten.repeat``: ``np.tile`` (leading repetition counts add axes)."""
    return np.tile(x, tuple(repeats))


def leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * negative_slope)


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    """``aten.elu`` (also SELU's and CELU's decomposition)."""
    neg = np.expm1(x * input_scale) * (alpha * scale) if alpha * scale != 1 \
        else np.expm1(x * input_scale)
    return np.where(x > 0, x * scale if scale != 1 else x, neg)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return torch_math.clamp(x, min_val, max_val)


class PoolIndices:
    """An output polyc does not compute (the indices of an uneven
    ``adaptive_max_pool``, ``_embedding_bag``'s bookkeeping for the
    backward): any use of it, a graph output included, raises
    :class:`~polyc.errors.UnsupportedError` naming ``what``."""

    dtype = None

    def __init__(self, what: str = "an output of this operator") -> None:
        self.what = what

    def refuse(self, *args, **kwargs):
        raise UnsupportedError(f"{self.what} is not computed by polyc (an inference graph "
                               "uses the values only); leave it out of the compiled code")

    shape = ndim = property(refuse)
    __array__ = __array_ufunc__ = __array_function__ = __getitem__ = reshape = astype = refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __lt__ = __le__ = __gt__ = __ge__ = refuse


def _pool_args(x, kernel, stride, padding, dilation=1):
    nd = len(kernel)
    stride = tuple(stride) if stride else tuple(kernel)
    def per(v):
        v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
        return v * nd if len(v) == 1 else v
    return per(kernel), per(stride), per(padding), per(dilation)


def max_pool(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    """``aten.max_pool{1,2,3}d``: the maximum over each window, padding by
    ``-inf`` (values only)."""
    k, s, p, d = _pool_args(x, kernel, stride, padding, dilation)
    nd = len(k)
    right = _ceil_extra(x, k, s, p, d) if ceil_mode else (0,) * nd
    if any(p) or any(right):
        x = np.pad(x, ((0, 0),) * (x.ndim - nd) + tuple((q, q + r) for q, r in zip(p, right)),
                   constant_values=-np.inf)
    lead = x.ndim - nd
    if lead != 2:
        x = x.reshape((1,) * (2 - lead) + tuple(x.shape))
    win = _windows(x, k, s, d)
    out = win.max(axis=tuple(range(-nd, 0)))
    return out.reshape(tuple(out.shape[2 - lead:])) if lead != 2 else out


def _ceil_extra(x, k, s, p, d) -> tuple[int, ...]:
    """The padding after each spatial axis that ``ceil_mode=True`` adds: the
    last window may start in the input or its left padding and run past the
    end (ATen's ``pooling_output_shape``)."""
    extra = []
    for n, kk, ss, pp, dd in zip(x.shape[-len(k):], k, s, p, d):
        n = int(n)
        span = dd * (kk - 1) + 1
        out = -(-(n + 2 * pp - span) // ss) + 1
        if (out - 1) * ss >= n + pp:
            out -= 1
        extra.append(max((out - 1) * ss + span - (n + 2 * pp), 0))
    return tuple(extra)


def avg_pool(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """``aten.avg_pool{1,2,3}d``: each window's sum over its size, as ATen
    counts it: the zero padding counts where ``count_include_pad``, the
    part of a ``ceil_mode`` window past the padding never does; a
    ``divisor_override`` replaces the size.  The sizes are the same window
    sums over ``ones_like(x)``, padded with ones or zeros."""
    k, s, p, _ = _pool_args(x, kernel, stride, padding)
    nd = len(k)
    lead = x.ndim - nd
    if lead != 2:
        x = x.reshape((1,) * (2 - lead) + tuple(x.shape))
    ones, axes = (1,) * nd, tuple(range(-nd, 0))
    right = _ceil_extra(x, k, s, p, ones) if ceil_mode else (0,) * nd
    widths = ((0, 0),) * 2 + tuple((q, q + e) for q, e in zip(p, right))
    padded = np.pad(x, widths) if any(p) or any(right) else x
    if divisor_override is None and not any(right) and (count_include_pad or not any(p)):
        out = _windows(padded, k, s, ones).mean(axis=axes)
    else:
        total = _windows(padded, k, s, ones).sum(axis=axes)
        if divisor_override is not None:
            out = total / divisor_override
        else:
            count = np.ones_like(x)
            if count_include_pad and any(p):
                count = np.pad(count, ((0, 0),) * 2 + tuple((q, q) for q in p),
                               constant_values=1.0)
                widths = ((0, 0),) * 2 + tuple((0, e) for e in right)
            if any(lo or hi for lo, hi in widths):
                count = np.pad(count, widths)
            out = total / _windows(count, k, s, ones).sum(axis=axes)
    return out.reshape(tuple(out.shape[2 - lead:])) if lead != 2 else out


def adaptive_avg_pool(x, output_size):
    """``aten._adaptive_avg_pool2d``/``adaptive_avg_pool2d`` where each output
    cell averages an equal block (the extents divide): a reshape and a mean."""
    return _adaptive(x, output_size, "avg")


def _adaptive(x, output_size, kind: str):
    """Adaptive pooling: output cell ``i`` of an axis of extent ``n`` pools
    ``[floor(i n / o), ceil((i + 1) n / o))`` (ATen's ``start_index`` and
    ``end_index``).  Where ``o`` divides ``n`` a reshape and one reduction;
    otherwise each axis is pooled in turn (the windows are rectangles, so
    the mean and the maximum separate): the mean as a product with a
    constant matrix, the maximum one slice per output cell."""
    out = tuple(output_size)
    nd = len(out)
    spatial = tuple(int(n) for n in x.shape[-nd:])
    lead = x.ndim - nd
    red = np.mean if kind == "avg" else np.max
    if not any(n % o for n, o in zip(spatial, out)):
        shape: list[Any] = list(x.shape[:-nd])
        for n, o in zip(spatial, out):
            shape += [o, n // o]
        return red(x.reshape(tuple(shape)), axis=tuple(lead + 2 * j + 1 for j in range(nd)))
    if kind == "avg":
        return _adaptive_avg_uneven(x, out, spatial, lead)
    if sum(out) > 256:
        raise UnsupportedError(f"aten.adaptive_{kind}_pool to {out} from {spatial}: output "
                               "sizes that do not divide the input are supported up to 256 "
                               "cells per axis in all")
    for j, (n, o) in enumerate(zip(spatial, out)):
        ax = lead + j
        cells = [red(x[(slice(None),) * ax + (slice(i * n // o, -(-(i + 1) * n // o)),)],
                     axis=ax, keepdims=True) for i in range(o)]
        x = np.concatenate(cells, axis=ax) if o > 1 else cells[0]
    return x


def _adaptive_avg_uneven(x, out: tuple, spatial: tuple, lead: int):
    """Adaptive average pooling where an output size does not divide its
    extent: each axis in turn contracted with the constant ``(n, o)``
    matrix of ``1 / len(cell)`` over each cell's positions (one small
    matrix product per axis, instead of one slice and reduction per cell)."""
    x = wide(x)
    for j, (n, o) in enumerate(zip(spatial, out)):
        ax = lead + j
        w = np.zeros((n, o), dtype=np.float64)
        for i in range(o):
            lo, hi = i * n // o, -(-(i + 1) * n // o)
            w[lo:hi, i] = 1.0 / (hi - lo)
        x = np.moveaxis(np.matmul(np.moveaxis(x, ax, -1), w.astype(x.dtype)), -1, ax)
    return x


def _extreme(kind: str):
    red, arg, pair = ((np.max, np.argmax, torch_math.maximum) if kind == "max"
                      else (np.min, np.argmin, torch_math.minimum))

    def run(x, dim=None, keepdim=False):
        """``aten.max``/``aten.min``: of all elements; along ``dim`` the
        values and the first index of each; of two tensors elementwise."""
        if dim is None:
            return red(x)
        if not isinstance(dim, (int, np.integer)):
            return pair(x, dim)               # (max.other: a second tensor)
        return red(x, axis=dim, keepdims=keepdim), arg(x, axis=dim, keepdims=keepdim)
    return run


max_any, min_any = _extreme("max"), _extreme("min")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``aten.linalg_vector_norm``: orders 0 (the nonzero count), 1, 2,
    ``±inf`` and any ``p > 0`` (``sum |x|^p ^ (1/p)``); others raise
    :class:`~polyc.errors.UnsupportedError`."""
    axis = tuple(dim) if isinstance(dim, (list, tuple)) else dim
    x = wide(x)                        # (float16: in float32, as ATen)
    if ord == 2 or ord == 2.0:
        return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
    if ord in (1, 1.0):
        return np.sum(np.abs(x), axis=axis, keepdims=keepdim)
    if ord in (np.inf, -np.inf):
        red = np.max if ord > 0 else np.min
        return red(np.abs(x), axis=axis, keepdims=keepdim)
    if ord == 0:
        return np.sum(np.where(x != 0, 1.0, 0.0), axis=axis, keepdims=keepdim).astype(x.dtype)
    if isinstance(ord, (int, float)) and ord > 0:
        return np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdim) ** (1.0 / ord)
    raise UnsupportedError(f"aten.linalg_vector_norm of order {ord} is not supported by polyc")


def transformer_encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                              proj_bias, use_gelu, norm_first, eps, norm_weight_1,
                              norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                              ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None,
                              *, gelu):
    """``aten._transformer_encoder_layer_fwd``, the fused fast path of
    ``nn.TransformerEncoderLayer`` in inference (batch first): the packed
    Q/K/V projection, scaled dot-product attention over ``num_heads``
    heads, the output projection, the feed-forward network (``gelu``: the
    backend's exact GELU, or ReLU) and the two LayerNorms, before or after
    each block as ``norm_first`` says.  ``mask`` (``mask_type`` 0: (S, S),
    1: a key padding mask (N, S), 2: (N, H, S, S)) masks the scores where it
    is True, or is added to them where it is a float mask."""
    e, h = int(embed_dim), int(num_heads)
    dh = e // h

    def layer_norm(x, w, b):
        m = x.mean(-1, keepdims=True)
        d = x - m
        return d / np.sqrt((d * d).mean(-1, keepdims=True) + eps) * w + b

    def attention(x):
        n, t = x.shape[0], x.shape[1]
        qkv = x @ qkv_weight.T + qkv_bias
        def heads(k):
            return qkv[..., k * e:(k + 1) * e].reshape(n, t, h, dh).transpose(0, 2, 1, 3)
        s = heads(0) @ heads(1).transpose(0, 1, 3, 2) * (1.0 / math.sqrt(dh))
        if mask is not None:
            m = mask.reshape((mask.shape[0], 1, 1, mask.shape[1])) if mask_type == 1 \
                else mask
            s = np.where(m, -np.inf, s) if m.dtype == np.bool_ else s + m
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        o = (p @ heads(2)).transpose(0, 2, 1, 3).reshape(n, t, e)
        return o @ proj_weight.T + proj_bias

    def ffn(x):
        y = x @ ffn_weight_1.T + ffn_bias_1
        y = gelu(y) if use_gelu else torch_math.relu(y)
        return y @ ffn_weight_2.T + ffn_bias_2

    if norm_first:
        x = src + attention(layer_norm(src, norm_weight_1, norm_bias_1))
        return x + ffn(layer_norm(x, norm_weight_2, norm_bias_2))
    x = layer_norm(src + attention(src), norm_weight_1, norm_bias_1)
    return layer_norm(x + ffn(x), norm_weight_2, norm_bias_2)

def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """``aten._trilinear`` (``nn.Bilinear``'s ``x1 W x2``): each input with
    axes of extent 1 inserted at its ``expand`` dimensions, the three
    multiplied and summed over ``sumdim``, written as one ``einsum``."""
    n = i1.ndim + len(expand1)
    letters = "abcdefghijklmnopqrstuvwxyz"[:n]

    def sub(expand) -> str:
        return "".join(letters[d] for d in range(n) if d not in expand)
    out = "".join(letters[d] for d in range(n) if d not in sumdim)
    return np.einsum(f"{sub(expand1)},{sub(expand2)},{sub(expand3)}->{out}", i1, i2, i3)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """``aten._cdist_forward``: the ``p``-norm distance of every row of
    ``x1`` (..., P, M) to every row of ``x2`` (..., R, M), from the
    differences (exact, where torch's ``compute_mode`` may use a GEMM)."""
    d = np.expand_dims(x1, -2) - np.expand_dims(x2, -3)
    if p == 2:
        return np.sqrt(np.sum(d * d, axis=-1))
    if p == 1:
        return np.sum(np.abs(d), axis=-1)
    if p == math.inf:
        return np.max(np.abs(d), axis=-1)
    if p == 0:
        return np.sum(np.where(d != 0, 1.0, 0.0), axis=-1).astype(d.dtype)
    return np.sum(np.abs(d) ** p, axis=-1) ** (1.0 / p)


def softmax(x, dim: int, half_to_float: bool = False):
    """``aten._softmax``: the maximum subtracted, as numpy programs write it."""
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax(x, dim: int, half_to_float: bool = False):
    """``aten._log_softmax``."""
    s = x - np.max(x, axis=dim, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


def wide(x):
    """``x`` in float32 where it is float16: ATen computes the statistics of
    a half norm, sum, mean or variance in float32 (``(x - mean)^2``
    overflows half from 256 on); the interpreter casts the outputs back to
    the node's dtype."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def layer_norm(x, normalized_shape, weight, bias, eps: float):
    """``aten.native_layer_norm``: the output, mean and 1/std (of a float16
    input computed in float32)."""
    x = wide(x)
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    rstd = 1.0 / np.sqrt(np.mean(d * d, axis=axes, keepdims=True) + eps)
    out = d * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def assert_now(cond, msg: str) -> None:
    """``aten._assert_async`` where the condition is a constant (made from
    literals): checked while tracing.  On a traced value polyc would have to
    check it at every call: refused, rather than dropped."""
    if isinstance(cond, (bool, np.bool_, np.ndarray, int, np.integer)):
        if not bool(np.all(cond)):
            raise IndexBoundsError(f"torch assertion failed while tracing, on values known "
                                   f"then (constants of the model): {msg}")
        return None
    raise UnsupportedError(f"a runtime assertion on computed values ({msg}) is not "
                           "supported by polyc; assert outside the compiled module")
