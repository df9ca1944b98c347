"""PolyBench/C 4.2.1 as ``@polyc.kernel`` Python functions (written for polyc).

Each kernel module defines ``BENCHES``, a list of :class:`Bench`: the kernel
(PolyBench's ``kernel_*`` body as an affine loop program in Python, arrays
updated in place), PolyBench's ``init_array`` formulas, its five datasets and
an independent numpy reference.  :data:`BENCHMARKS` collects them by name in
PolyBench's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: PolyBench's dataset names, smallest first.
DATASETS = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE")


@dataclass(frozen=True)
class Bench:
    """One PolyBench kernel.

    ``kernel`` is a :func:`polyc.kernel` (``kernel.py_func`` is the plain
    Python function); ``sizes[dataset]`` maps PolyBench's size names (``NI``,
    ``TSTEPS``...) to values; ``init(sizes, dtype)`` returns the kernel's
    arguments as a tuple in call order, built with PolyBench's ``init_array``
    formulas (arrays of ``dtype``, float scalars as Python floats, time steps
    as ints); ``outputs`` names the arguments PolyBench prints (its
    ``print_array``), as indices into that tuple; ``reference(*args)``
    updates the arrays of a fresh ``init`` tuple in place the way the kernel
    does, written independently with numpy.  ``category`` is PolyBench's
    directory (``linear-algebra/blas``...).
    """
    name: str
    category: str
    kernel: Any
    sizes: dict
    init: Callable[..., tuple]
    outputs: tuple[int, ...]
    reference: Callable[..., None]
    notes: str = field(default="")
    compared: Callable[[dict], tuple] | None = None

    def comparable(self, sizes: dict, outputs: list) -> list:
        """The parts of ``outputs`` (arrays in ``self.outputs`` order) that
        are numerically determined by the input: all of each, unless
        ``compared(sizes)`` gives one index (e.g. a slice tuple) per output
        (gramschmidt's rank-deficient input)."""
        if self.compared is None:
            return list(outputs)
        return [o[ix] for o, ix in zip(outputs, self.compared(sizes))]


def fresh(args: tuple) -> tuple:
    """``args`` with every array copied (a kernel updates its arrays in place)."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def max_rel(a: np.ndarray, b: np.ndarray) -> float:
    """The largest absolute difference of ``a`` and ``b`` relative to the
    largest magnitude of ``b`` (both must be finite)."""
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))
    return float(np.max(np.abs(a - b), initial=0.0)) / max(scale, 1e-300)


def frac(num, den, dtype) -> np.ndarray:
    """``(DATA_TYPE) num / den`` with ``num`` an integer array: the integer is
    converted to ``dtype`` and divided in ``dtype`` (as C does)."""
    t = np.dtype(dtype).type
    return np.ascontiguousarray(np.asarray(num).astype(t) / t(den), dtype=t)


def ij(n0: int, n1: int):
    """Row and column index grids (int64) for ``init_array`` formulas."""
    return np.arange(n0, dtype=np.int64)[:, None], np.arange(n1, dtype=np.int64)[None, :]


def arr(x, dtype) -> np.ndarray:
    """``x`` as a C-contiguous array of ``dtype``."""
    return np.ascontiguousarray(x, dtype=dtype)


def _collect() -> dict[str, Bench]:
    from . import (
        datamining,
        linear_algebra_blas,
        linear_algebra_kernels,
        linear_algebra_solvers,
        medley,
        stencils,
    )
    out: dict[str, Bench] = {}
    for mod in (datamining, linear_algebra_blas, linear_algebra_kernels,
                linear_algebra_solvers, medley, stencils):
        for b in mod.BENCHES:
            out[b.name] = b
    return out


def __getattr__(name):
    if name == "BENCHMARKS":
        value = _collect()
        globals()["BENCHMARKS"] = value
        return value
    raise AttributeError(name)
