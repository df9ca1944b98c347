"""The C prelude's ``polyc_expf`` (what a float32 ``exp`` prints as): within
1.1 ulp of the correctly rounded exp on a sweep of every 1021st float of its
range and on the boundaries (overflow, the smallest normal, the denormals,
the underflow to 0), IEEE's special values, and vectorised: a loop of exp
keeps no call.  The speed against libmvec, with and without -inf inputs, is
in benchmarks (docs/tensorize.md, "Transcendentals")."""

from __future__ import annotations

import numpy as np
import pytest

import polyc

EXP = "def f(float(N) I) -> (O) { O(i) = exp(I(i)) }"


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - exp(x)| in units in the last place of float32 at exp(x)
    (computed in float64; a denormal's ulp is the smallest denormal)."""
    want = np.exp(x.astype(np.float64))
    exponent = np.frexp(np.maximum(want, np.finfo(np.float32).tiny))[1]
    ulp = np.ldexp(1.0, exponent - 24)
    return np.abs(got.astype(np.float64) - want) / ulp


@pytest.fixture(scope="module")
def kernel():
    return polyc.compile(EXP)


def test_polyc_expf_is_within_1_ulp_over_its_range(kernel):
    bits = np.arange(0, 2 ** 32, 1021, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (x > -104.0) & (x < 88.72)]
    assert x.size > 10 ** 6 // 2
    assert float(_ulps(kernel(x), x).max()) <= 1.1


@pytest.mark.parametrize("x, want", [
    (np.inf, np.inf), (-np.inf, 0.0), (0.0, 1.0), (-0.0, 1.0), (1e-30, 1.0),
    (88.7229, np.inf), (89.5, np.inf), (1e30, np.inf), (-104.5, 0.0), (-200.0, 0.0),
    (-1e30, 0.0)])
def test_polyc_expf_special_values(kernel, x, want):
    with np.errstate(over="ignore"):
        got = kernel(np.array([x] * 20, np.float32))
    np.testing.assert_array_equal(got, np.float32(want))


def test_polyc_expf_nan_and_boundaries(kernel):
    x = np.array([np.nan, 88.72283, -87.33654, -87.4, -95.0, -103.9, -103.97] * 5, np.float32)
    got = kernel(x)
    assert np.isnan(got[0::7]).all()
    rest = np.isfinite(x)
    assert float(_ulps(got[rest], x[rest]).max()) <= 1.1
    assert got[5] == np.float32(np.exp(np.float64(-103.9)))       # a denormal, rounded


def test_a_float_exp_loop_calls_nothing():
    """The loop of ``exp`` is vectorised without a call (no libmvec, no
    scalar expf), also inside a softmax; a float64 exp keeps libm's."""
    k = polyc.compile(EXP)
    assert "polyc_expf(" in k.source
    body = k.source[k.source.index("polyc_expf(float x)"):]
    assert "expf(" not in body.replace("polyc_expf(", "")
    assert b"expf" not in k.library.path.read_bytes()       # no symbol: inlined, no call
    d = polyc.compile(EXP, dtype="float64")
    assert "polyc_expf(" not in d.source.split("static inline float polyc_expf")[-1]
    assert " exp(" in d.source or "(exp(" in d.source
