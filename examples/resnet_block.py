"""A ResNet basic block in plain numpy, compiled by ``@polyc.jit``.

    python examples/resnet_block.py             # 56x56x64 (N=1), checked, timed
    python examples/resnet_block.py --small     # 14x14x16

conv3x3 -> BN -> ReLU -> conv3x3 -> BN -> add -> ReLU, channels first
(C, H, W).  Each convolution is written the numpy way, ``np.pad`` then
``sliding_window_view`` then ``np.einsum``: polyc folds the window view into
the einsum's access relations (no im2col buffer) and the contraction reaches
the implicit-GEMM micro-kernel; batch norm (inference: a scale and a shift
per channel), the residual add and the ReLU are the GEMM call's
post-operations, applied to each tile of the output as it is finished
(docs/tensorize.md, "Post-operations"): four kernels, two pads and two
convolutions.  Weights are arguments.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import polyc
from polyc import testing


def conv3x3(x, w):
    """``x``: (C, H, W); ``w``: (K, C, 3, 3); zero padding 1, stride 1 -> (K, H, W)."""
    win = sliding_window_view(np.pad(x, ((0, 0), (1, 1), (1, 1))), (3, 3), axis=(1, 2))
    return np.einsum("chwij,kcij->khw", win, w)


def resnet_block_numpy(x, w1, s1, b1, w2, s2, b2):
    y = np.maximum(conv3x3(x, w1) * s1[:, None, None] + b1[:, None, None], 0.0)
    y = conv3x3(y, w2) * s2[:, None, None] + b2[:, None, None]
    return np.maximum(y + x, 0.0)


resnet_block = polyc.jit(resnet_block_numpy)


def make_inputs(c: int, hw: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((c, hw, hw)).astype(np.float32)
    scale = 1.0 / np.sqrt(9 * c)
    w1 = (rng.standard_normal((c, c, 3, 3)) * scale).astype(np.float32)
    w2 = (rng.standard_normal((c, c, 3, 3)) * scale).astype(np.float32)
    s1, b1, s2, b2 = (rng.standard_normal(c).astype(np.float32) for _ in range(4))
    return [x, w1, s1, b1, w2, s2, b2]


def _median(fn) -> float:
    return testing.median_time(fn, min_time=0.3)[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args(argv)
    c, hw = (16, 14) if args.small else (64, 56)
    inputs = make_inputs(c, hw)
    t0 = time.perf_counter()
    out = resnet_block(*inputs)
    cold = time.perf_counter() - t0
    ref = resnet_block_numpy(*inputs)
    testing.assert_close(out, ref, reduction_length=9 * c)
    print(resnet_block.explain(*inputs))
    tp, tn = _median(lambda: resnet_block(*inputs)), _median(lambda: resnet_block_numpy(*inputs))
    print(f"{c}x{hw}x{hw}: {len(resnet_block.plan(*inputs).groups)} kernels, first call "
          f"{cold:.1f} s; polyc {tp * 1e3:.2f} ms, numpy {tn * 1e3:.2f} ms ({tn / tp:.2f}x)")


if __name__ == "__main__":
    main()
