"""numpy lowerings of ATen's neural-network operators for the torch backend
(:data:`polyc.graph.torch_backend.LOWERINGS`): convolution, batch
normalisation in inference, max and average pooling, ``max``/``min`` (with
``dim``: values and indices), ``linalg_vector_norm`` and the fused
``nn.TransformerEncoderLayer``.  Each is written with the numpy functions
:func:`polyc.jit` traces, so a convolution becomes ``pad`` +
``sliding_window_view`` + ``einsum``, the implicit GEMM the tensorizer
matches (``docs/graph.md``), with the bias added in its epilogue.  No torch
import: the functions take and return traced arrays.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..errors import UnsupportedError

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


def convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """``aten.convolution`` (1-D to 3-D, groups, stride, padding, dilation;
    not transposed): ``sum_{c, k} window(n, c, o, k) * w(f, c, k) + b(f)``."""
    if transposed:
        raise UnsupportedError("aten.convolution transposed is not supported by polyc")
    nd = w.ndim - 2
    if not 1 <= nd <= 3 or (isinstance(padding, str)):
        raise UnsupportedError(f"aten.convolution of {nd} spatial dimensions (padding "
                               f"{padding!r}) is not supported by polyc")
    stride, padding, dilation = (tuple(v) * (nd if len(v) == 1 else 1)
                                 for v in (stride, padding, dilation))
    if any(padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
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


def batch_norm_inference(x, weight, bias, mean, var, momentum, eps):
    """``aten._native_batch_norm_legit_no_training``: ``(x - mean) * invstd
    * weight + bias`` per channel (axis 1), and the two statistics ATen also
    returns."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    invstd = 1.0 / np.sqrt(var + eps)
    out = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, mean, invstd


class PoolIndices:
    """The indices output of ``max_pool*_with_indices``: polyc does not
    compute them (an inference graph uses the values only); a graph that
    reads them fails to trace, naming this type."""


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
    if ceil_mode:
        raise UnsupportedError("aten.max_pool with ceil_mode=True is not supported by polyc")
    k, s, p, d = _pool_args(x, kernel, stride, padding, dilation)
    nd = len(k)
    if any(p):
        x = np.pad(x, ((0, 0),) * (x.ndim - nd) + tuple((q, q) for q in p),
                   constant_values=-np.inf)
    lead = x.ndim - nd
    if lead != 2:
        x = x.reshape((1,) * (2 - lead) + tuple(x.shape))
    win = _windows(x, k, s, d)
    out = win.max(axis=tuple(range(-nd, 0)))
    return out.reshape(tuple(out.shape[2 - lead:])) if lead != 2 else out


def max_pool_with_indices(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    return max_pool(x, kernel, stride, padding, dilation, ceil_mode), PoolIndices()


def avg_pool(x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """``aten.avg_pool{1,2,3}d``: the window's mean (with zero padding
    counted, ATen's default)."""
    k, s, p, _ = _pool_args(x, kernel, stride, padding)
    if ceil_mode or divisor_override is not None or (any(p) and not count_include_pad):
        raise UnsupportedError("aten.avg_pool with ceil_mode, divisor_override or "
                               "count_include_pad=False is not supported by polyc")
    nd = len(k)
    if any(p):
        x = np.pad(x, ((0, 0),) * (x.ndim - nd) + tuple((q, q) for q in p))
    win = _windows(x, k, s, (1,) * nd)
    return win.mean(axis=tuple(range(-nd, 0)))


def adaptive_avg_pool(x, output_size):
    """``aten._adaptive_avg_pool2d``/``adaptive_avg_pool2d`` where each output
    cell averages an equal block (the extents divide): a reshape and a mean."""
    out = tuple(output_size)
    nd = len(out)
    spatial = tuple(x.shape[-nd:])
    if any(int(n) % o for n, o in zip(spatial, out)):
        raise UnsupportedError("aten.adaptive_avg_pool with output sizes that do not "
                               "divide the input is not supported by polyc")
    shape: list[Any] = list(x.shape[:-nd])
    for n, o in zip(spatial, out):
        shape += [o, int(n) // o]
    y = x.reshape(tuple(shape))
    lead = x.ndim - nd
    return y.mean(axis=tuple(lead + 2 * j + 1 for j in range(nd)))


def _extreme(kind: str):
    red, arg, pair = ((np.max, np.argmax, np.maximum) if kind == "max"
                      else (np.min, np.argmin, np.minimum))

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
    """``aten.linalg_vector_norm`` for the orders ``np.linalg.norm`` traces."""
    axis = tuple(dim) if isinstance(dim, (list, tuple)) else dim
    if ord == 2 or ord == 2.0:
        return np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim))
    if ord in (1, 1.0):
        return np.sum(np.abs(x), axis=axis, keepdims=keepdim)
    if ord in (np.inf, -np.inf):
        red = np.max if ord > 0 else np.min
        return red(np.abs(x), axis=axis, keepdims=keepdim)
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
    each block as ``norm_first`` says; without a mask."""
    if mask is not None:
        raise UnsupportedError("aten._transformer_encoder_layer_fwd with a mask is not "
                               "supported by polyc")
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
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        o = (p @ heads(2)).transpose(0, 2, 1, 3).reshape(n, t, e)
        return o @ proj_weight.T + proj_bias

    def ffn(x):
        y = x @ ffn_weight_1.T + ffn_bias_1
        y = gelu(y) if use_gelu else np.maximum(y, 0)
        return y @ ffn_weight_2.T + ffn_bias_2

    if norm_first:
        x = src + attention(layer_norm(src, norm_weight_1, norm_bias_1))
        return x + ffn(layer_norm(x, norm_weight_2, norm_bias_2))
    x = layer_norm(src + attention(src), norm_weight_1, norm_bias_1)
    return layer_norm(x + ffn(x), norm_weight_2, norm_bias_2)
