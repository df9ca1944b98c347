"""The type a traced sum accumulates in.

A float32 sum adds each element to a float32 accumulator (a few SIMD lanes
of them).  Over a long reduction the accumulator grows until each addition
rounds away a large part of the element: ``x.sum()`` of 4M values near 100
was 0.17% off, and ``x.var()`` of the same values 33% off, where numpy's
pairwise summation is within 1e-7.  A float32 ``sum``, ``mean``, ``var``
or ``std`` of at least :data:`WIDE_FROM` elements therefore accumulates in
float64 and rounds once to float32: within one float32 rounding of the
exact value, closer than numpy's own, still about twice as fast as numpy's
on 4M elements.  Shorter reductions (a softmax or layer norm row) keep
float32, and their plan is guarded to extents that keep them short (a
plan traced on a small array is not reused for a large one: that call
traces again, and accumulates in float64).  A sum of the products of two
arrays (``(a[:, :, None] * b[None]).sum(1)``) keeps float32: that is a
contraction, which numpy's matmul and BLAS accumulate in float32 too, and
which may run on the GEMM micro-kernel."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .sizes import Size

#: the shortest float32 reduction (elements, at the traced sizes) that
#: accumulates in float64
WIDE_FROM = 1 << 14


def integer_total(dtype: Any, what: str) -> np.dtype:
    """numpy's default result type of a ``sum``/``prod``/``cumsum`` of
    integers or booleans of ``dtype``: int64, except for the unsigned types,
    whose totals numpy gives as uint64, which polyc does not compute in:
    a :class:`~polyc.errors.DTypeError` at the user's line asking for a
    ``dtype=``."""
    from ..errors import DTypeError
    from .core import user_location
    if np.dtype(dtype).kind == "u":
        raise DTypeError(f"{user_location()}: numpy's {what} of {np.dtype(dtype).name} values "
                         "is uint64, which polyc does not compute in; pass dtype=np.int64 "
                         "(the same values) or convert first, e.g. x.astype(np.int64)")
    return np.dtype("int64")


def sum_dtype(dtype: Any, sizes: Sequence[Size], x: Any) -> np.dtype:
    """The accumulator type of a sum into ``dtype`` over the reduced extents
    ``sizes`` of tracer ``x``: float64 for a long float32 sum (see the
    module), else ``dtype``.  A short float32 sum guards its plan (on its
    symbol table) to extents at most ``(WIDE_FROM / n) ** (1 / k)`` times
    the traced ones (``n`` elements over ``k`` symbolic extents), so that a
    reused plan never sums more than ``WIDE_FROM`` elements in float32."""
    dtype = np.dtype(dtype)
    if dtype != np.float32:
        return dtype
    nodes = getattr(x, "_nodes", ())
    if len(nodes) == 1 and nodes[0].op == "multiply" and len(nodes[0].inputs) >= 2:
        return dtype            # a contraction written as a product and a sum
    n = count(sizes)
    if n >= WIDE_FROM:
        return np.dtype("float64")
    free = [s for s in sizes if not s.is_constant]
    if free and n > 0:
        m = max(1, int((WIDE_FROM / n) ** (1.0 / len(free)) + 1e-9))
        for s in free:
            s.table.require(Size.constant(s.table, s.value * m) - s,
                            f"a float32 sum of {n} elements stays shorter than {WIDE_FROM}")
    return dtype


def accumulated(out: str, acc: str, update: str, where: str, wide: bool) -> list[str]:
    """The TC statements of a reduction ``out update`` (``update``: the
    operator, the value and its ``where`` clause); ``wide``: into the
    helper tensor ``acc`` (element ``acc`` of the float64 helper), then
    ``out = acc`` over ``where`` (the output's ranges)."""
    if not wide:
        return [f"{out} {update}"]
    return [f"{acc} {update}", f"{out} = {acc}{where}"]


def count(shape: Sequence[Size]) -> int:
    """The number of elements of ``shape`` at the traced sizes."""
    n = 1
    for s in shape:
        n *= max(0, s.value)
    return n
