"""A two-layer MLP with GELU, written in plain numpy and compiled by ``@polyc.jit``.

    python examples/mlp_numpy.py            # check against numpy, print times
    polyc explain examples/mlp_numpy.py --def mlp --shapes 256x512,512x1024,1024,1024x512,512

The function is traced once per shape class; the planner groups its eight
numpy calls into kernels (see ``mlp.explain(...)``) and each group runs as
one OpenMP C kernel, the products on polyc's GEMM micro-kernel.
"""

from __future__ import annotations

import math
import time

import numpy as np

import polyc
from polyc import testing


@polyc.jit
def mlp(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    h = 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
    return h @ w2 + b2


def reference(x, w1, b1, w2, b2):
    return mlp.__wrapped__(x, w1, b1, w2, b2)


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    w1 = (rng.standard_normal((512, 1024)) / 23).astype(np.float32)
    b1 = rng.standard_normal(1024).astype(np.float32)
    w2 = (rng.standard_normal((1024, 512)) / 32).astype(np.float32)
    b2 = rng.standard_normal(512).astype(np.float32)
    args = (x, w1, b1, w2, b2)
    t0 = time.perf_counter()
    out = mlp(*args)
    cold = time.perf_counter() - t0
    ref = reference(*args)
    testing.assert_close(out, ref, reduction_length=1024)
    print(mlp.explain(*args))

    tp = testing.median_time(lambda: mlp(*args), min_time=0.3)[0]
    tn = testing.median_time(lambda: reference(*args), min_time=0.3)[0]
    print(f"checked against numpy; first call (trace, plan, compile) {cold:.2f} s; "
          f"polyc {tp * 1e3:.2f} ms, numpy {tn * 1e3:.2f} ms ({tn / tp:.2f}x)")


if __name__ == "__main__":
    main()
