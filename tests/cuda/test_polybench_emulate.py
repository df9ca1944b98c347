"""The 30 PolyBench kernels for ``target="cuda"`` on the CPU emulator, at
MINI, against PolyBench's independent numpy references; threads in both
orders.  Random inputs (not PolyBench's near steady states) wherever the
kernel is well conditioned on them.  Tolerance: 1e-9 of the output's
largest magnitude (float64)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.polybench import BENCHMARKS, fresh, max_rel
from polyc.config import Config

TOL = 1e-9



#: Kernels whose numerics need PolyBench's own inputs (factorisations,
#: normalisations, recurrences with divisions).
OWN_INPUTS = {"cholesky", "lu", "ludcmp", "gramschmidt", "durbin", "trisolv", "symm",
              "correlation", "covariance", "nussinov", "deriche", "adi"}


def arguments(bench, sizes):
    args = bench.init(sizes, np.float64)
    if bench.name in OWN_INPUTS:
        return args
    rng = np.random.default_rng(3)
    return tuple(rng.random(a.shape) if isinstance(a, np.ndarray) else a for a in args)


@pytest.mark.parametrize("mode", ["forward", "reverse", "checks"])
@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_polybench_on_the_emulator(name, mode):
    """``checks``: the instrumented emulator, which would raise on any access
    out of bounds or any element two threads of a launch touch, one writing."""
    bench = BENCHMARKS[name]
    sizes = bench.sizes["MINI"]
    config = Config.from_env(target="cuda", emulate=True, emulate_reverse=mode == "reverse",
                             emulate_checks=mode == "checks")
    kernel = bench.kernel.with_config(config)
    args = arguments(bench, sizes)
    got, want = fresh(args), fresh(args)
    kernel(*got)
    bench.reference(*want)
    a = bench.comparable(sizes, [got[i] for i in bench.outputs])
    b = bench.comparable(sizes, [want[i] for i in bench.outputs])
    for i, (x, y) in enumerate(zip(a, b)):
        assert max_rel(x, y) <= TOL, f"{name} output {bench.outputs[i]}"
    compiled = kernel.specialize(*fresh(args))
    assert compiled.kernels and "__global__" in compiled.cuda_source
