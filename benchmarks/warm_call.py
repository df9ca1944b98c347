"""Warm-call overhead of compiled kernels: the call shim against ctypes.

    python -m benchmarks.warm_call            # every TC workload of benchmarks.tensor
    python -m benchmarks.warm_call kronecker gemm256_f32

A warm call is a call at a signature that already passed the argument
checks (:class:`polyc.callplan.CallPlan`).  Each kernel is called on
arrays whose every extent is 1, so the time is the call's own: finding
the plan, allocating the outputs, the arrays' pointers and the C call.
Times are the best median of 5 (``benchmarks.examples.measure``), in
microseconds, for the call shim (``POLYC_CALL_SHIM=1``, the default) and
for ctypes (``0``), with numpy's ``matmul`` of two 1x1 matrices as the cost
of one small C call from Python in the same run.  Issue 16's target: a warm
call at most 5 us.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import polyc
from polyc.backends.c import callshim
from polyc.config import Config

from . import tensor
from .examples import machine, measure


def _best(fn) -> float:
    return min(measure(fn, 0.2, max_reps=100_000).median_s for _ in range(5))


def warm_call_us(name: str, shim: bool) -> float:
    w = {w.name: w for w in tensor.workloads()}[name]
    os.environ["POLYC_CALL_SHIM"] = "1" if shim else "0"
    callshim._state.clear()
    k = polyc.compile(w.tc, dtype=w.dtype)
    small = [np.ones([1] * len(sh), w.dtype) for sh in w.shapes(w.sizes)]
    k(*small)
    return _best(lambda: k(*small)) * 1e6


def main(argv: list[str]) -> int:
    names = argv or [w.name for w in tensor.workloads() if w.tc]
    print(f"machine: {machine(Config.from_env())}")
    a = np.ones((1, 1), np.float32)
    ref = _best(lambda: np.matmul(a, a)) * 1e6
    print(f"numpy matmul 1x1: {ref:.2f} us\n")
    print("| kernel | shim us | ctypes us | ctypes / shim | shim / numpy call |")
    print("|---|---|---|---|---|")
    before = os.environ.get("POLYC_CALL_SHIM")
    try:
        for name in names:
            s, c = warm_call_us(name, True), warm_call_us(name, False)
            print(f"| {name} | {s:.2f} | {c:.2f} | {c / s:.2f} | {s / ref:.2f} |", flush=True)
    finally:
        if before is None:
            os.environ.pop("POLYC_CALL_SHIM", None)
        else:
            os.environ["POLYC_CALL_SHIM"] = before
        callshim._state.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
