"""The values of ATen's operators where they differ from numpy's
(:mod:`polyc.graph.torch_math`): compared with eager torch bit for bit,
signs of zeros and NaNs included."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import polyc.graph.torch_backend  # noqa: E402,F401  (registers backend="polyc")


def test_torch_semantics_where_they_differ_from_numpys():
    """ATen's values, not numpy's: ``sign``/``sgn`` of NaN is 0 (was NaN);
    integer ``div(rounding_mode="trunc")`` of INT64_MIN was computed from
    ``|a|``, which wraps (INT64_MIN / 7 came out positive); a zero float
    ``remainder`` keeps the dividend's sign; ``round(decimals=1)`` raised a
    TypeError from inside polyc; ``fmax fmin signbit`` were not lowered."""
    def f(x, y, a, b):
        return (torch.sign(x), torch.sgn(x), torch.remainder(x, y),
                torch.round(x * 3.3, decimals=1), torch.fmax(x, y), torch.fmin(x, y),
                torch.signbit(x), torch.div(a, b, rounding_mode="trunc"),
                torch.div(a, b, rounding_mode="floor"), torch.remainder(a, b))

    nan, inf = math.nan, math.inf
    x = torch.tensor([nan, -nan, inf, -inf, -0.0, 0.0, 1.5, -1.5, 2.5, -2.5, 0.5, -0.5, 3.0, -7.25])
    y = torch.tensor([1.0, nan, 0.0, -0.0, 0.0, -0.0, -2.0, 2.0, -0.0, 3.0, nan, inf, -inf, 2.0])
    y = torch.where(y == 0, torch.tensor(0.75, dtype=y.dtype), y)    # (no 0/0 remainder)
    a = torch.tensor([-2**63, -2**63, -7, 7, -7, 7, 0, 2**63 - 1])
    b = torch.tensor([7, 2, 2, -2, -2, 3, -3, -1])
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(f, backend="polyc", dynamic=False)(x, y, a, b)
    want = f(x, y, a, b)
    names = "sign sgn remainder round fmax fmin signbit trunc floor remainder_int".split()
    for g, w, what in zip(got, want, names):
        g, w = g.numpy(), w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, what
        same = (g == w) & (np.signbit(g) == np.signbit(w)) if w.dtype.kind == "f" else g == w
        if w.dtype.kind == "f":
            same |= np.isnan(g) & np.isnan(w)
        assert same.all(), f"{what}: got {g[~same]}, want {w[~same]}"
