"""Differential-testing helpers: tolerances, error figures, seeded inputs.

Owns the per-dtype tolerance table every test compares with, the error
figures (:func:`max_errors`), the assertion that reports them
(:func:`assert_close`) and seeded inputs for a :class:`polyc.ir.Program`
(:func:`random_inputs`).  Takes numpy arrays and ``ir.Program``; returns
numbers, arrays, or raises ``AssertionError``.

Tolerances (:data:`TOLERANCES`, :func:`tolerance`)
--------------------------------------------------
An element passes when ``|actual - expected| <= atol + rtol * |expected|``:

* ``rtol = max(floor, base * sqrt(reduction_length))``: rounding errors of a
  sum of ``n`` terms grow like ``sqrt(n)`` (random signs); the floor keeps
  elementwise kernels (``n = 1``) at a few ulps of transcendental functions.
* ``atol = rtol * magnitude`` where ``magnitude`` is the largest finite
  ``|expected|``: an element of a sum that cancels to nearly zero carries an
  error proportional to its terms, not to itself, so the absolute slack is
  relative to the reference's scale, never a fixed number that only holds for
  small arrays.
* integers and booleans compare exactly.

Error figures (:func:`max_errors`)
----------------------------------
``abs = |a - e|`` in float64; ``rel = abs / max(|e|, tiny)`` with ``tiny`` the
smallest normal number of ``expected``'s float type (1 for integers): the
denominator depends on the expected value only, never on the error itself.
Equal values (equal infinities and NaN in both arrays included) have zero
error; a NaN on one side only, or an infinity that the other side lacks, is
an infinite error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import expr as E
from .ir import Program, is_float, numpy_dtype
from .isl_util import eval_pw_aff


@dataclass(frozen=True)
class Tolerance:
    """``base`` relative tolerance per element of the reduction, scaled by
    ``sqrt(reduction_length)``, never below ``floor``.  ``exact`` types
    compare with ``==``."""
    base: float
    floor: float
    exact: bool = False


#: Tolerances by numpy dtype name.
TOLERANCES: dict[str, Tolerance] = {
    "float16": Tolerance(base=1e-3, floor=2e-3),
    "bfloat16": Tolerance(base=8e-3, floor=1.6e-2),
    "float32": Tolerance(base=1e-5, floor=2e-6),
    "float64": Tolerance(base=1e-12, floor=1e-14),
    **{name: Tolerance(0.0, 0.0, exact=True) for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
}


def tolerance(dtype, reduction_length: int = 1) -> tuple[float, float]:
    """``(rtol, atol_factor)`` for ``dtype`` and a reduction of
    ``reduction_length`` terms per output element; ``atol = atol_factor *
    magnitude of the reference``.  Exact types give ``(0, 0)``."""
    name = np.dtype(dtype).name
    if name not in TOLERANCES:
        raise KeyError(f"no tolerance for dtype {name}; add it to polyc.testing.TOLERANCES")
    t = TOLERANCES[name]
    if t.exact:
        return 0.0, 0.0
    rtol = max(t.floor, t.base * math.sqrt(max(int(reduction_length), 1)))
    return rtol, 1.0


def _error_arrays(actual: np.ndarray, expected: np.ndarray):
    """Elementwise ``(abs, rel)`` errors as float64 arrays (see module doc)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:  # never let broadcasting hide a shape error
        raise ValueError(f"shapes differ: actual {a.shape}, expected {e.shape}")
    tiny = np.finfo(e.dtype).tiny if e.dtype.kind in "fc" else 1.0
    af = a.astype(np.float64)
    ef = e.astype(np.float64)
    with np.errstate(all="ignore"):
        same = (af == ef) | (np.isnan(af) & np.isnan(ef))
        if a.dtype.kind in "iub" and e.dtype.kind in "iub":
            same = same & (a == e)  # exact beyond float64's 53 bits
        err = np.abs(af - ef)
        err = np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
        rel = np.where(err == 0.0, 0.0, err / np.maximum(np.abs(ef), tiny))
        rel = np.where(np.isnan(rel), np.inf, rel)
    return err, rel


def max_errors(actual, expected) -> tuple[float, float]:
    """``(max_abs, max_rel)`` over all elements of two same-shaped arrays
    (``(0.0, 0.0)`` for empty ones); see the module doc for the figures.
    Raises ``ValueError`` when the shapes differ."""
    err, rel = _error_arrays(actual, expected)
    if err.size == 0:
        return 0.0, 0.0
    return float(err.max()), float(rel.max())


def error_relative_to_max(max_abs: float, expected: np.ndarray) -> float:
    """``max_abs`` divided by the largest finite ``|expected|``: the error
    relative to the output's scale (the elementwise relative error of
    :func:`max_errors` is large wherever the reference is near zero)."""
    ref = np.asarray(expected)
    finite = np.abs(ref[np.isfinite(ref)]) if ref.size else np.zeros(0)
    scale = float(finite.max()) if finite.size else 0.0
    if scale > 0:
        return max_abs / scale
    return 0.0 if max_abs == 0 else float("inf")


def assert_close(actual, expected, *, dtype=None, reduction_length: int = 1,
                 name: str = "", magnitude: float | None = None) -> None:
    """Assert that ``actual`` matches ``expected`` within the tolerance of
    ``dtype``.

    Checks, in order: the shape; the dtype (``actual.dtype`` must be
    ``dtype``, by default ``expected.dtype``; pass ``dtype`` when the
    reference was computed in a wider type); then the values (see
    :func:`tolerance`; ``reduction_length`` is the number of terms summed into
    each element).  The failure message gives ``name``, how many elements
    fail, the worst element's index with both values, and the max abs and rel
    errors with their indices.  ``magnitude``: the scale the absolute
    tolerance is relative to, by default the reference's largest finite
    element; pass the scale of the terms where a result cancels (a variance
    computed as E[x^2] - E[x]^2 is 0 up to the rounding of the squares).
    """
    a = np.asarray(actual)
    e = np.asarray(expected)
    label = f"{name}: " if name else ""
    if a.shape != e.shape:
        raise AssertionError(f"{label}shape {a.shape} differs from the expected shape {e.shape}")
    want = np.dtype(dtype) if dtype is not None else e.dtype
    if a.dtype != want:
        raise AssertionError(f"{label}dtype {a.dtype} differs from the expected dtype {want}")
    if a.size == 0:
        return
    rtol, atol_factor = tolerance(want, reduction_length)
    err, rel = _error_arrays(a, e)
    ef = np.abs(e.astype(np.float64))
    finite = ef[np.isfinite(ef)]
    if magnitude is None:
        magnitude = float(finite.max()) if finite.size else 0.0
    atol = atol_factor * rtol * magnitude
    with np.errstate(all="ignore"):
        allowed = atol + rtol * ef
        excess = np.where(np.isinf(err), np.inf, err - allowed)
    bad = excess > 0
    nbad = int(np.count_nonzero(bad))
    if nbad == 0:
        return
    worst = np.unravel_index(int(np.argmax(excess)), a.shape)
    i_abs = np.unravel_index(int(np.argmax(err)), a.shape)
    i_rel = np.unravel_index(int(np.argmax(rel)), a.shape)
    tol = ("exact comparison" if TOLERANCES[want.name].exact else
           f"rtol={rtol:.3g}, atol={atol:.3g}, reduction length {reduction_length}")
    raise AssertionError(
        f"{label}{nbad} of {a.size} elements differ ({want.name}, {tol})\n"
        f"  worst element at index {_fmt(worst)}: actual {a[worst]!r}, "
        f"expected {e[worst]!r}\n"
        f"  max abs error {float(err[i_abs]):.6g} at index {_fmt(i_abs)}, "
        f"max rel error {float(rel[i_rel]):.6g} at index {_fmt(i_rel)}")


def _fmt(index) -> str:
    return "(" + ", ".join(str(int(i)) for i in index) + ")"


def _top_accesses(e: E.Expr):
    """Reads in ``e`` that are not nested inside another read of ``e``."""
    if isinstance(e, E.Access):
        yield e
        return
    for c in e.children():
        yield from _top_accesses(c)


def gather_ranges(program: Program, sizes: Mapping[str, int]) -> dict[str, int]:
    """For each tensor used as a gather index (a read ``X(...)`` forming an
    index of another read ``T(..., X(...), ...)`` at dimension ``d``), the
    smallest extent ``T.shape[d]`` it indexes: its values must lie in
    ``[0, extent)``."""
    values = {**program.fixed_sizes, **sizes}
    extents = {t.name: [eval_pw_aff(pa, values) for pa in t.shape] for t in program.tensors}
    ranges: dict[str, int] = {}
    for s in program.statements:
        for node in list(s.rhs.walk()) + list(s.lhs.walk()):
            if not isinstance(node, E.Access):
                continue
            for d, ie in enumerate(node.indices):
                for inner in _top_accesses(ie):
                    ext = extents[node.tensor][d]
                    ranges[inner.tensor] = min(ranges.get(inner.tensor, ext), ext)
    return ranges


def random_inputs(program: Program, sizes: Mapping[str, int], seed: int = 0
                  ) -> dict[str, np.ndarray]:
    """Seeded inputs for every input and in-place tensor of ``program`` at
    ``sizes``.

    Floats are uniform in ``[-1, 1)``.  Integer tensors used as gather
    indices are uniform in ``[0, extent)`` of the dimension they index (when
    the index is the read itself; an index such as ``X(i) + 1`` may then go
    out of range: pass such inputs by hand); other integers are uniform in
    ``[0, 10)``.  The same program, sizes and seed give the same arrays.
    """
    rng = np.random.default_rng(seed)
    values = {**program.fixed_sizes, **sizes}
    ranges = gather_ranges(program, sizes)
    out = {}
    for t in program.arguments:          # inputs and in-place (inout) arrays
        shape = tuple(eval_pw_aff(pa, values) for pa in t.shape)
        dt = numpy_dtype(t.dtype)
        if is_float(t.dtype):
            x = rng.random(shape, dtype=np.float64 if dt.itemsize == 8 else np.float32)
            out[t.name] = (2 * x - 1).astype(dt, copy=False)
        else:
            hi = ranges.get(t.name, 10)
            out[t.name] = rng.integers(0, max(hi, 1), size=shape, dtype=dt)
        out[t.name] = np.asarray(out[t.name])     # rank 0: a 0-d array, not a scalar
    return out


def reduction_length(program: Program, sizes: Mapping[str, int]) -> int:
    """The longest reduction (terms per output element) of any statement of
    ``program`` at ``sizes``: the length tolerances scale with."""
    from .isl_util import dim_range
    values = {**program.fixed_sizes, **sizes}
    longest = 1
    for s in program.statements:
        n = 1
        for it in s.reduction_iterators:
            r = dim_range(s.domain, s.iterators.index(it), values)
            n *= 1 if r is None else max(1, r[1] - r[0] + 1)
        longest = max(longest, n)
    return longest


def call_args(program: Program, inputs: Mapping[str, np.ndarray],
              sizes: Mapping[str, int]) -> list:
    """The arguments of a kernel call in signature order: input arrays, and
    scalar size arguments from ``sizes`` (or the program's fixed sizes: the
    stride ``S`` of a kernel specialised per value of ``S``)."""
    values = {**program.fixed_sizes, **sizes}
    return [inputs[n] if n in inputs else values[n] for n in program.signature]


def median_time(fn, min_time: float = 0.5, min_reps: int = 5,
                max_reps: int = 1000) -> tuple[float, float, int]:
    """Call ``fn`` once (warm-up), then time it at least ``min_reps`` times and
    until ``min_time`` seconds have passed or ``max_reps`` calls were made.
    Returns ``(median, minimum, calls)`` in seconds."""
    import time
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_time
                                    and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(min(times)), len(times)

