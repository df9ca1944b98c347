"""A BERT-base encoder layer in plain numpy, compiled by ``@polyc.jit``.

    python examples/bert_layer.py                 # seq 128 and 512, checked, timed
    python examples/bert_layer.py --seq 128 --small
    polyc explain examples/bert_layer.py --def bert_layer --shapes 1x128x768,...

The layer: Q/K/V projections, 12-head scaled dot-product attention, the
output projection with residual and LayerNorm, the GELU feed-forward
network (768 -> 3072 -> 768) with residual and LayerNorm.  Weights are
arguments (never literals).  The script checks polyc against numpy (and
torch, when it imports) and prints the plan and the times.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import polyc
from polyc import testing


def _layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * g + b


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _heads(t, b, s, h, dh):
    return t.reshape(b, s, h, dh).transpose(0, 2, 1, 3)


def bert_layer_numpy(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2,
                     heads=12):
    b, s, d = x.shape
    dh = d // heads
    q = _heads(x @ wq + bq, b, s, heads, dh)
    k = _heads(x @ wk + bk, b, s, heads, dh)
    v = _heads(x @ wv + bv, b, s, heads, dh)
    scores = q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(dh))
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
    h = _layernorm(x + (ctx @ wo + bo), g1, be1)
    f = _gelu(h @ w1 + b1) @ w2 + b2
    return _layernorm(h + f, g2, be2)


bert_layer = polyc.jit(bert_layer_numpy, static_argnames=("heads",))


def make_inputs(seq: int, d: int = 768, ff: int = 3072, batch: int = 1, seed: int = 0):
    rng = np.random.default_rng(seed)

    def w(*shape, scale=None):
        scale = scale or 1.0 / math.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    return [x, w(d, d), w(d), w(d, d), w(d), w(d, d), w(d), w(d, d), w(d),
            1 + w(d, scale=0.1), w(d), w(d, ff), w(ff), w(ff, d), w(d),
            1 + w(d, scale=0.1), w(d)]


def _median(fn) -> float:
    return testing.median_time(fn, min_time=0.3)[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, nargs="*", default=[128, 512])
    ap.add_argument("--small", action="store_true", help="d=96, ff=384, 12 heads of 8")
    args = ap.parse_args(argv)
    d, ff = (96, 384) if args.small else (768, 3072)
    for seq in args.seq:
        inputs = make_inputs(seq, d, ff)
        t0 = time.perf_counter()
        out = bert_layer(*inputs)
        cold = time.perf_counter() - t0
        ref = bert_layer_numpy(*inputs)
        testing.assert_close(out, ref, reduction_length=ff)
        print(bert_layer.explain(*inputs))
        tp = _median(lambda: bert_layer(*inputs))
        tn = _median(lambda: bert_layer_numpy(*inputs))
        line = (f"seq {seq}: {len(bert_layer.plan(*inputs).groups)} kernels, first call "
                f"{cold:.1f} s; polyc {tp * 1e3:.2f} ms, numpy {tn * 1e3:.2f} ms "
                f"({tn / tp:.2f}x)")
        try:
            import torch
            tin = [torch.from_numpy(a) for a in inputs]

            def eager():
                with torch.no_grad():
                    return bert_layer_numpy_torch(*tin)
            np.testing.assert_allclose(eager().numpy(), ref, rtol=1e-3, atol=1e-3)
            tt = _median(eager)
            line += f", torch eager {tt * 1e3:.2f} ms ({tt / tp:.2f}x)"
        except ImportError:
            pass
        print(line)


def bert_layer_numpy_torch(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2,
                           be2, heads=12):
    import torch
    f = torch.nn.functional
    b, s, d = x.shape
    dh = d // heads

    def split(t):
        return t.reshape(b, s, heads, dh).transpose(1, 2)
    q, k, v = split(x @ wq + bq), split(x @ wk + bk), split(x @ wv + bv)
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1)
    ctx = (p @ v).transpose(1, 2).reshape(b, s, d)
    h = f.layer_norm(x + ctx @ wo + bo, (d,), g1, be1, eps=1e-12)
    y = f.gelu(h @ w1 + b1, approximate="tanh") @ w2 + b2
    return f.layer_norm(h + y, (d,), g2, be2, eps=1e-12)


if __name__ == "__main__":
    main()
