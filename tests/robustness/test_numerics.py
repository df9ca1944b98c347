"""Numerics of generated code: IEEE semantics as numpy has them.

* No flag that relaxes IEEE semantics (``-ffast-math``, ``-Ofast``,
  ``-ffinite-math-only``, ...) reaches the compiler.
* NaN and ±Inf propagate through ``+=!``, ``*=!``, ``max=!``, ``min=!``
  reductions (along and across rows, to a scalar, matmul) as through
  ``np.sum`` / ``np.prod`` / ``np.max`` / ``np.min``, on the register
  accumulator path (``omp simd reduction``) and the parallel paths, at one
  and two threads; ``max=!``/``min=!`` propagate NaN wherever it sits.
* Fused elementwise code on every pair of special values (NaN, ±Inf, ±0,
  subnormals, huge) agrees with numpy: ``+ - * /`` and ``%`` (numpy's
  remainder, sign of zero included), comparisons, selects, the ``fmax`` /
  ``fmin`` builtins (and ``max``/``min`` on floats, which are fmax/fmin as
  in the oracle); integer ``/ %`` by zero, ``INT_MIN / -1`` and overflowing
  ``+ - *`` give numpy's results (no SIGFPE, no undefined behaviour).
* Floating constants are exact: literals of TC text, and any double (every
  class, NaN payloads included) put into a Program, come out of compiled
  kernels with numpy's bit patterns in float32 and float64.
* Every reduction kernel is bitwise deterministic: 100 calls with the same
  inputs and thread count give the same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import subprocess
import sys

import numpy as np
import pytest

import polyc
from polyc import expr as E
from polyc.config import Config
from polyc.pipeline import compile_program

UNSAFE_FLAGS = ("-ffast-math", "-Ofast", "-ffinite-math-only", "-fno-honor-nans",
                "-fno-honor-infinities", "-funsafe-math-optimizations",
                "-fassociative-math", "-freciprocal-math", "-fno-signed-zeros",
                "-fcx-limited-range", "-fno-signaling-nans", "-mdaz-ftz")


@functools.lru_cache(maxsize=None)
def kernel(src: str, threads: int | None = None):
    return polyc.compile(src, config=Config.from_env(num_threads=threads))


def test_no_flag_relaxes_ieee_semantics():
    cfg = Config.from_env()
    k = kernel("def f(float(N) A) -> (O) { O(i) = A(i) != A(i) ? 1.0 : 0.0 }")
    argv = list(k.library.command) or list(cfg.cflags)
    for flag in [*cfg.cflags, *argv]:
        assert not flag.startswith(UNSAFE_FLAGS), flag
    # and the compiled code still sees NaN (a finite-math build folds x != x to 0)
    x = np.array([np.nan, 1.0, np.inf, -np.nan], dtype=np.float32)
    np.testing.assert_array_equal(k(x), np.float32([1, 0, 0, 1]))


# ------------------------------------------------------------- reductions

def special_matrix(rng, n, k, dtype):
    """Rows with NaN first / last / in the middle, +Inf and -Inf (alone and
    together), all -Inf, all +Inf, all NaN; one all-NaN column."""
    a = rng.standard_normal((n, k)).astype(dtype)
    a[0, 0] = np.nan
    a[1, k // 2] = np.inf
    a[2, k - 1] = -np.inf
    a[3, 1], a[3, k - 2] = np.inf, -np.inf
    a[4, 0], a[4, k - 1] = np.inf, np.nan
    a[5, :], a[6, :], a[7, :] = -np.inf, np.inf, np.nan
    a[8, k - 1] = np.nan
    a[9, 3] = -np.inf
    a[10:, 5] = np.nan
    return a


def _sum(axis):
    return lambda a: a.astype(np.float64).sum(axis)


REDUCTIONS = {
    "row-sum": ("def f({t}(N, K) A) -> (O) {{ O(n) +=! A(n, k) }}", _sum(1)),
    "col-sum": ("def f({t}(N, K) A) -> (O) {{ O(k) +=! A(n, k) }}", _sum(0)),
    "total-sum": ("def f({t}(N, K) A) -> (O) {{ O() +=! A(n, k) }}", _sum(None)),
    "row-prod": ("def f({t}(N, K) A) -> (O) {{ O(n) *=! A(n, k) }}",
                 lambda a: a.astype(np.float64).prod(1)),
    "row-max": ("def f({t}(N, K) A) -> (O) {{ O(n) max=! A(n, k) }}", lambda a: a.max(1)),
    "col-max": ("def f({t}(N, K) A) -> (O) {{ O(k) max=! A(n, k) }}", lambda a: a.max(0)),
    "row-min": ("def f({t}(N, K) A) -> (O) {{ O(n) min=! A(n, k) }}", lambda a: a.min(1)),
    "col-min": ("def f({t}(N, K) A) -> (O) {{ O(k) min=! A(n, k) }}", lambda a: a.min(0)),
    "total-max": ("def f({t}(N, K) A) -> (O) {{ O() max=! A(n, k) }}", lambda a: a.max()),
    "max-then-sum": ("def f({t}(N, K) A) -> (M, S) {{ M(n) max=! A(n, k)\n"
                     " S(n) +=! A(n, k) - M(n) }}",
                     lambda a: (a.max(1), (a.astype(np.float64) - a.max(1)[:, None]).sum(1))),
}


def assert_ieee_close(actual, expected, rtol):
    """Same NaN positions, same infinities (with sign), finite values close."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg="NaN positions differ")
    inf = np.isinf(expected)
    np.testing.assert_array_equal(actual[inf], expected[inf], err_msg="infinities differ")
    np.testing.assert_array_equal(np.isinf(actual), inf, err_msg="infinities differ")
    fin = ~(nan | inf)
    np.testing.assert_allclose(actual[fin], expected[fin], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_nan_and_inf_propagate_through_reductions(name, dtype):
    src, ref = REDUCTIONS[name]
    rng = np.random.default_rng(3)
    rtol = 1e-4 if dtype == "float32" else 1e-10
    # small: one thread (below the runtime's serial threshold); large: the
    # parallel loops at 1 and 2 threads, lengths no simd width divides
    for n, k in [(16, 37), (203, 301)]:
        a = special_matrix(rng, n, k, dtype)
        if "prod" in name:
            a = np.where(np.isfinite(a), 1 + a / 64, a).astype(dtype)
        with np.errstate(all="ignore"):
            want = ref(a)
        want = want if isinstance(want, tuple) else (want,)
        for threads in (1, 2):
            got = kernel(src.format(t=dtype), threads)(a)
            got = got if isinstance(got, tuple) else (got,)
            for g, w in zip(got, want):
                assert g.dtype == np.dtype(dtype)
                assert_ieee_close(g, w, rtol)


def test_reductions_cover_the_register_accumulator_and_parallel_paths():
    sources = [kernel(src.format(t="float32")).source for src, _ in REDUCTIONS.values()]
    assert any("omp simd reduction(+:polyc_acc)" in s for s in sources)
    assert any("polyc_acc = polyc_max_float(polyc_acc" in s for s in sources)
    assert any("polyc_acc = polyc_min_float(polyc_acc" in s for s in sources)
    assert any("omp parallel for" in s and "polyc_acc" not in s for s in sources)


@pytest.mark.parametrize("form", ["nn", "nt"])
def test_nan_and_inf_propagate_through_matmul(form):
    b_decl, b_read = ("float(K, M) B", "B(k, m)") if form == "nn" else ("float(M, K) B", "B(m, k)")
    src = f"def mm(float(N, K) A, {b_decl}) -> (C) {{ C(n, m) +=! A(n, k) * {b_read} }}"
    rng = np.random.default_rng(5)
    n, k, m = 70, 45, 67
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    a[0, 3], a[1, 0], a[2, k - 1] = np.nan, np.inf, -np.inf
    b[3, 1], b[k - 1, 5], b[0, 7] = 0.0, np.inf, -np.inf     # inf * 0 -> NaN
    b[:, 9] = np.inf
    with np.errstate(all="ignore"):
        want = (a.astype(np.float64)[:, :, None] * b.astype(np.float64)[None]).sum(1)
    for threads in (1, 2):
        got = kernel(src, threads)(a, b if form == "nn" else np.ascontiguousarray(b.T))
        assert_ieee_close(got, want, 1e-4)


# ------------------------------------------------------------ elementwise

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.75, 1e-45, -1e-40,
            3e38, -2.0e-310]

ELEMENTWISE = """def f({t}(N) A, {t}(N) B) -> (S, D, P, Q, R, FX, FN, MX, MN, SEL, NEG, CMP, ANY) {{
    S(i) = A(i) + B(i)
    D(i) = A(i) - B(i)
    P(i) = A(i) * B(i)
    Q(i) = A(i) / B(i)
    R(i) = A(i) % B(i)
    FX(i) = fmax(A(i), B(i))
    FN(i) = fmin(A(i), B(i))
    MX(i) = max(A(i), B(i))
    MN(i) = min(A(i), B(i))
    SEL(i) = A(i) > B(i) ? A(i) : B(i)
    NEG(i) = -A(i)
    CMP(i) = (A(i) == B(i)) + (A(i) != B(i)) * 2 + (A(i) < B(i)) * 4 + (A(i) >= B(i)) * 8
    ANY(i) = A(i) && B(i) || !A(i)
}}"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_special_values_match_numpy(dtype):
    x = np.array(SPECIALS, dtype=dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    got = kernel(ELEMENTWISE.format(t=dtype))(a, b)
    with np.errstate(all="ignore"):
        cmp = (a == b) + (a != b) * 2 + (a < b) * 4 + (a >= b) * 8
        truth = np.logical_or(np.logical_and(a != 0, b != 0), a == 0)
        want = {"S": a + b, "D": a - b, "P": a * b, "Q": a / b, "R": np.remainder(a, b),
                "FX": np.fmax(a, b), "FN": np.fmin(a, b), "MX": np.fmax(a, b),
                "MN": np.fmin(a, b), "SEL": np.where(a > b, a, b), "NEG": -a,
                "CMP": cmp.astype(dtype), "ANY": truth.astype(dtype)}
    names = ["S", "D", "P", "Q", "R", "FX", "FN", "MX", "MN", "SEL", "NEG", "CMP", "ANY"]
    for name, g in zip(names, got):
        w = want[name]
        assert g.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(g, w, err_msg=name)        # NaN == NaN here
        nn = ~np.isnan(w)
        if name not in ("FX", "FN", "MX", "MN"):   # fmax(+0, -0): C leaves the sign open
            np.testing.assert_array_equal(np.signbit(g[nn]), np.signbit(w[nn]),
                                          err_msg=f"{name}: sign of zero")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_transcendentals_propagate_nan_and_inf(dtype):
    src = ("def f({t}(N) A, {t}(N) B) -> (O) "
           "{{ O(i) = exp(A(i)) * B(i) + sqrt(fabs(A(i))) - tanh(B(i)) / A(i) "
           "+ log(fabs(B(i))) + rsqrt(fabs(A(i)) + 1.0) + sigmoid(A(i)) }}").format(t=dtype)
    x = np.array(SPECIALS, dtype=dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    got = kernel(src)(a, b)
    one = np.dtype(dtype).type(1)
    with np.errstate(all="ignore"):
        want = (np.exp(a) * b + np.sqrt(np.abs(a)) - np.tanh(b) / a + np.log(np.abs(b))
                + one / np.sqrt(np.abs(a) + one) + one / (one + np.exp(-a)))
    assert_ieee_close(got, want, 1e-5 if dtype == "float32" else 1e-12)


_INTEGER_SCRIPT = r"""
import sys
import numpy as np
import polyc
dtype = sys.argv[1]
info = np.iinfo(dtype)
a = np.array([7, -7, 7, -7, 0, info.min, info.min, info.max, 5, info.max, info.min, -1],
             dtype=dtype)
b = np.array([2, 2, -2, -2, 0, -1, 1, 0, 0, info.max, -info.max, info.min], dtype=dtype)
src = (f"def f({dtype}(N) A, {dtype}(N) B) -> (Q, R, S, P, D, M, X) {{\n"
       " Q(i) = A(i) / B(i)\n R(i) = A(i) % B(i)\n S(i) = A(i) + B(i)\n"
       " P(i) = A(i) * B(i)\n D(i) = A(i) - B(i)\n M(i) = -A(i)\n X(i) = abs(A(i)) }")
got = polyc.compile(src)(a, b)
with np.errstate(all="ignore"):
    want = [np.floor_divide(a, b), np.remainder(a, b), a + b, a * b, a - b, -a, np.abs(a)]
for name, g, w in zip("QRSPDMX", got, want):
    if g.dtype != np.dtype(dtype) or not np.array_equal(g, w):
        sys.exit(f"{name}: got {g!r}, numpy gives {w!r}")
"""


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_by_zero_and_overflow_match_numpy(dtype):
    """In a child process: a regression (SIGFPE on a zero divisor or on
    INT_MIN / -1) must fail this test, not kill the test session."""
    proc = subprocess.run([sys.executable, "-c", _INTEGER_SCRIPT, dtype],
                          capture_output=True, text=True, timeout=600)
    died = f"killed by signal {-proc.returncode}\n" if proc.returncode < 0 else ""
    assert proc.returncode == 0, died + proc.stdout + proc.stderr[-3000:]


def test_mixed_types_compute_as_c_and_the_oracle_do():
    """C's usual arithmetic conversions, as in the oracle: a float64 input
    into a float32 output is computed in double and rounded once; integer
    operands stay integers (floor division) until they meet a float; a float
    computation stored into an integer output is truncated once, at the
    store."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal(200) * 100
    i = rng.integers(-50, 50, size=200).astype(np.int32)
    k = kernel("def f(double(N) A, int32(N) I) -> (float(N) O) "
               "{ O(i) = A(i) * 0.1 + I(i) / 2 }")
    want = (a * np.float64(np.float32(0.1)) + np.floor_divide(i, 2)).astype(np.float32)
    np.testing.assert_array_equal(k(a, i), want)
    k = kernel("def g(double(N) A, int32(N) I) -> (int64(N) O) { O(i) = A(i) * I(i) }")
    np.testing.assert_array_equal(k(a, i), (a * i).astype(np.int64))
    k = kernel("def h(float(N) A, double(K) B) -> (float(N) O) { O(n) +=! A(n) * B(k) }")
    b = rng.standard_normal(7)
    got = k(a.astype(np.float32), b)
    want = (a.astype(np.float32).astype(np.float64)[:, None] * b[None, :]).sum(1)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)


# ---------------------------------------------------------- exact constants

def _bits(values, dtype):
    with np.errstate(all="ignore"):
        arr = np.array(values, dtype=np.float64).astype(dtype)
    return arr.view(np.uint32 if dtype == "float32" else np.uint64)


def _select_chain(n: int) -> str:
    return " ".join(f"i == {k} ? {k}.5 :" for k in range(n)) + " 0.25"


#: decimal literals as TC text (each within float32's range: the frontend
#: refuses a literal that overflows the statement's type)
TC_LITERALS = ["0.1", "0.3333333333333333", "1e-45", "1.4e-45", "7e-46", "7.1e-46",
               "1e-40", "1.1754942e-38", "1.17549435e-38", "3.4028234e38",
               "3.4028234663852886e38", "16777217", "9007199254740993", "0", "0.0",
               "123456789012345678", "2.5e-7", "6.02214076e23"]
TC_LITERALS_F64 = TC_LITERALS + ["1e-320", "5e-324", "2.5e-324", "2.4e-324",
                                 "2.225073858507201e-308", "2.2250738585072014e-308",
                                 "1.7976931348623157e308", "1e308"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tc_literals_are_exact(dtype):
    lits = TC_LITERALS if dtype == "float32" else TC_LITERALS_F64
    chain = " ".join(f"i == {k} ? {v} :" for k, v in enumerate(lits)) + " -0.0"
    ct = "float" if dtype == "float32" else "double"
    k = kernel(f"def lits(int64 N) -> ({ct}(N) O) {{ O(i) = {chain} }}")
    got = k(len(lits) + 1)
    want = [np.array(int(v), np.int64).astype(dtype) if v.isdigit() else float(v)
            for v in lits] + [-0.0]
    np.testing.assert_array_equal(got.view(_bits([0.0], dtype).dtype), _bits(want, dtype))


def _payload_doubles() -> list[float]:
    def d(bits):
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    edge = [0.0, -0.0, 5e-324, -5e-324, 2.225073858507201e-308, 2.2250738585072014e-308,
            1.7976931348623157e308, -1.7976931348623157e308, float("inf"), float("-inf"),
            float("nan"), -float("nan"), d(0x7FF0000000000001), d(0xFFF4000000000000),
            d(0x7FF8000000000123), d(0x7FF8000020000000), d(0xFFFFFFFFFFFFFFFF),
            0.1, 1 / 3, 1e-310, 1.4e-45, 7.006492321624085e-46, 7.006492321624087e-46,
            1.1754942e-38, 3.4028234663852886e38, 3.4028235677973366e38,
            3.402823567797337e38, 1e39, -1e39, 2.0 ** -149, 2.0 ** -150, 2.0 ** -151]
    rng = np.random.default_rng(11)
    rand = rng.integers(0, 2 ** 64, size=24, dtype=np.uint64, endpoint=False)
    return edge + [d(int(r)) for r in rand]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_any_double_constant_round_trips_bit_for_bit(dtype):
    """Constants that TC text cannot spell (NaN payloads, signalling NaNs,
    overflow to infinity in float32, every random bit pattern) are put into a
    Program directly; the kernel must store numpy's conversion of each."""
    values = _payload_doubles()
    ct = "float" if dtype == "float32" else "double"
    program = polyc.api.lower_def(polyc.frontend.tc.parse(
        f"def consts(int64 N) -> ({ct}(N) O) {{ O(i) = {_select_chain(len(values))} }}").defs[0])
    swap = {k + 0.5: v for k, v in enumerate(values)}

    def replace(e):
        if isinstance(e, E.Const) and isinstance(e.value, float) and e.value in swap:
            return E.Const(swap[e.value])
        return None
    (stmt,) = program.statements
    stmt = dataclasses.replace(stmt, rhs=E.map_expr(stmt.rhs, replace))
    program = dataclasses.replace(program, statements=(stmt,))
    got = compile_program(program, Config.from_env())(len(values))
    want = _bits(values, dtype)
    got_bits = got.view(want.dtype)
    bad = [(i, hex(int(g)), hex(int(w))) for i, (g, w) in enumerate(zip(got_bits, want))
           if g != w]
    assert not bad, bad


# ------------------------------------------------------------- determinism

def test_reductions_are_bitwise_deterministic():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((203, 301)).astype(np.float32)
    b = rng.standard_normal((301, 150)).astype(np.float32)
    cases = [(src.format(t="float32"), (a,)) for src, _ in REDUCTIONS.values()]
    cases.append(("def mm(float(N, K) A, float(K, M) B) -> (C) { C(n, m) +=! A(n, k) * B(k, m) }",
                  (a, b)))
    cases.append(("def mm(float(N, K) A, float(M, K) B) -> (C) { C(n, m) +=! A(n, k) * B(m, k) }",
                  (a, np.ascontiguousarray(b.T))))
    for src, args in cases:
        k = kernel(src, 2)
        first = None
        for _ in range(100):
            out = k(*args)
            data = b"".join(o.tobytes() for o in (out if isinstance(out, tuple) else (out,)))
            if first is None:
                first = data
            assert data == first, f"not deterministic: {src}"
