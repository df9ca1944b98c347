"""float16 and bfloat16 (``polyc.halfprec``): TC types ``half``/``float16``
and ``bfloat16``, numpy ``float16`` and ml_dtypes ``bfloat16`` arrays, the C
backend computing in float32 with half storage, reductions accumulated in
float32 and rounded once.

Conversions are checked bit for bit against numpy/ml_dtypes (every one of
the 65536 bit patterns round-trips; float32 values, ties, overflow and
subnormals round to nearest even as ``astype`` does).  Kernels are compared
with :func:`polyc.reference.evaluate` and with numpy in float32, within
:func:`polyc.testing.assert_close`'s tolerance for the half type (float16:
relative 2e-3; bfloat16: 1.6e-2, scaled by the reduction length)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import reference
from polyc.errors import DTypeError, UnsupportedError
from polyc.testing import assert_close, random_inputs

ml_dtypes = pytest.importorskip("ml_dtypes")

TYPES = {"half": np.dtype(np.float16), "float16": np.dtype(np.float16),
         "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def every_pattern(dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


@pytest.mark.parametrize("tc_type", ["half", "bfloat16"])
def test_every_bit_pattern_round_trips(tc_type):
    dt = TYPES[tc_type]
    k = polyc.compile(f"def copy({tc_type}(N) A) -> (B) {{ B(i) = A(i) }}")
    a = every_pattern(dt)
    b = k(a)
    assert b.dtype == dt
    nan = np.isnan(a.astype(np.float32))
    assert np.array_equal(np.isnan(b.astype(np.float32)), nan)
    assert np.array_equal(b.view(np.uint16)[~nan], a.view(np.uint16)[~nan])


@pytest.mark.parametrize("tc_type", ["half", "bfloat16"])
def test_stores_round_to_nearest_even_as_numpy_does(tc_type):
    dt = TYPES[tc_type]
    k = polyc.compile(f"def cvt(float(N) A) -> ({tc_type}(N) B) {{ B(i) = A(i) }}")
    rng = np.random.default_rng(0)
    exps = rng.integers(-30, 30, 20000).astype(np.float32)
    a = (rng.standard_normal(20000).astype(np.float32) * np.exp2(exps)).astype(np.float32)
    # ties (the bit just below the kept mantissa set), overflow, subnormals, zeros
    drop = 13 if dt == np.float16 else 16
    ties = (rng.integers(0x3f800000, 0x40800000, 2000).astype(np.uint32)
            & ~np.uint32((1 << drop) - 1)) | np.uint32(1 << (drop - 1))
    special = np.array([0.0, -0.0, 65504.0, 65520.0, 1e5, -1e5, 6e-8, 3e-8, 1e-45,
                        np.inf, -np.inf, 3.4e38], np.float32)
    a = np.concatenate([a, ties.view(np.float32), special])
    b = k(a)
    with np.errstate(over="ignore"):
        want = a.astype(dt)
    assert np.array_equal(b.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("tc_type", ["half", "float16", "bfloat16"])
@pytest.mark.parametrize("m,k,n", [(33, 70, 20), (1, 1, 1), (64, 257, 3)])
def test_matmul_accumulates_in_float32(tc_type, m, k, n):
    dt = TYPES[tc_type]
    src = f"def mm({tc_type}(M,K) A, {tc_type}(K,N) B) -> (C) {{ C(m,n) +=! A(m,k) * B(k,n) }}"
    kern = polyc.compile(src)
    assert [t.name for t in kern.program.tensors if t.role == "temp"] == ["C_acc"]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    c = kern(a, b)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(dt)
    assert_close(c, want, reduction_length=k, name="C")
    ref = reference.evaluate(kern.program, {"A": a, "B": b}, dict(M=m, K=k, N=n))["C"]
    assert ref.dtype == dt
    assert_close(c, ref, reduction_length=k, name="C vs reference")


def test_a_long_half_sum_keeps_its_digits():
    """4096 terms of 0.1 in float16: rounding at every step would stop near
    256 (where 0.1 is below half an ulp); one float32 accumulator gives
    409.5 (409.6 rounded to float16)."""
    k = polyc.compile("def s(half(N) A) -> (S) { S() +=! A(i) }")
    s = k(np.full(4096, 0.1, np.float16))
    assert s.dtype == np.float16 and float(s) == pytest.approx(409.6, rel=1e-3)


SOFTMAX_HALF = """
def softmax(half(N, C) I) -> (O, maxVal, expDist, expSum) {
    maxVal(n) max=! I(n, c)
    expDist(n, c) = exp(I(n, c) - maxVal(n))
    expSum(n) +=! expDist(n, c)
    O(n, c) = expDist(n, c) / expSum(n)
}
"""


def test_softmax_in_half():
    k = polyc.compile(SOFTMAX_HALF)
    x = np.random.default_rng(2).standard_normal((17, 100)).astype(np.float16)
    o, mx, ed, es = k(x)
    assert o.dtype == mx.dtype == ed.dtype == es.dtype == np.float16
    ref = reference.evaluate(k.program, {"I": x}, dict(N=17, C=100))
    for name, got in zip(("O", "maxVal", "expDist", "expSum"), (o, mx, ed, es)):
        assert_close(got, ref[name], reduction_length=100, name=name)
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(1, keepdims=True))
    assert_close(o, (e / e.sum(1, keepdims=True)).astype(np.float16), name="O vs numpy")


def test_a_recipe_names_half_tensors_as_written():
    """A tensor named in a recipe means every statement computing it,
    including its float32 accumulator's (polyc.halfprec): fusing the
    softmax's four nests by name works in half as in float."""
    from polyc.pipeline import compile_schedule
    s = polyc.Schedule.from_program(polyc.program(SOFTMAX_HALF), start="source")
    s = s.fuse("maxVal", "expDist", "expSum", "O")
    assert str(s).count("band (n)") == 1
    x = np.random.default_rng(3).standard_normal((6, 40)).astype(np.float16)
    o = compile_schedule(s)(x)[0]
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    assert_close(o, (e / e.sum(1, keepdims=True)).astype(np.float16), reduction_length=40)


def test_mixed_half_types_compute_and_store_in_float32():
    k = polyc.compile("def mix(half(N) A, bfloat16(N) B) -> (C) { C(i) = A(i) * B(i) }")
    assert k.program.tensor("C").dtype == "float32"
    ins = random_inputs(k.program, {"N": 9})
    assert ins["A"].dtype == np.float16 and ins["B"].dtype == TYPES["bfloat16"]
    c = k(ins["A"], ins["B"])
    assert np.array_equal(c, ins["A"].astype(np.float32) * ins["B"].astype(np.float32))


def test_wrong_dtypes_are_refused_with_the_conversion_to_use():
    k = polyc.compile("def copy(half(N) A) -> (B) { B(i) = A(i) }")
    with pytest.raises(DTypeError, match=r"expected dtype float16.*astype\('float16'\)"):
        k(np.zeros(4, np.float32))
    kb = polyc.compile("def copy(bfloat16(N) A) -> (B) { B(i) = A(i) }")
    with pytest.raises(DTypeError, match="expected dtype bfloat16"):
        kb(np.zeros(4, np.float16))


def test_two_reductions_into_one_half_tensor_are_refused():
    with pytest.raises(UnsupportedError, match="both reduce into the float16 tensor"):
        polyc.compile("def f(half(N, M) A) -> (S) {\n  S(i) +=! A(i, j)\n"
                      "  S(i) += A(i, j) * 2\n}")


@pytest.mark.parametrize("dt", [np.float16, "bfloat16"])
def test_einsum_in_half(dt):
    dt = TYPES["bfloat16"] if dt == "bfloat16" else np.dtype(dt)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((20, 30)).astype(dt)
    b = rng.standard_normal((30, 7)).astype(dt)
    c = polyc.einsum("ij,jk->ik", a, b)
    assert c.dtype == dt
    assert_close(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(dt),
                 reduction_length=30)


def test_a_promoted_half_tensor_gets_a_half_buffer():
    src = "def mm(half(M,K) A, half(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    s = polyc.Schedule.from_program(polyc.program(src), start="isl")
    s = s.tile([("C_acc", "m"), ("C_acc", "n"), ("C_acc", "k")], [8, 8, 8])
    s = s.promote("A", ("C_acc", "k_tile"))
    k = polyc.compile(src, schedule=s)
    assert "polyc_float16 t_A_local[8][8]" in k.source
    rng = np.random.default_rng(4)
    a = rng.standard_normal((19, 23)).astype(np.float16)
    b = rng.standard_normal((23, 11)).astype(np.float16)
    assert_close(k(a, b), (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16),
                 reduction_length=23)


def test_cli_runs_and_checks_a_half_program(tmp_path, capsys):
    from polyc.cli import main
    f = tmp_path / "mm.tc"
    f.write_text("# sizes: M=9 K=40 N=5\n"
                 "def mm(bfloat16(M,K) A, bfloat16(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }\n")
    assert main(["run", str(f), "--check"]) == 0


def test_a_loop_program_over_half_arrays():
    """@polyc.kernel: each statement computes in float32 and rounds its store
    (the loops update the arrays in place, so reductions are not widened)."""
    @polyc.kernel
    def saxpy(a, X, Y):
        n = X.shape[0]
        for i in range(n):
            Y[i] = a * X[i] + Y[i]

    x = np.linspace(0, 1, 50).astype(np.float16)
    y = np.ones(50, np.float16)
    want = (np.float32(2.5) * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)
    saxpy(2.5, x, y)
    assert y.dtype == np.float16 and np.array_equal(y, want)


@pytest.mark.parametrize("target", ["c", "cuda"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_an_in_place_half_sum_rounds_at_every_step_on_every_target(dt, target):
    """``s[i] += A[i, j]`` on half arrays rounds to half at every step, as the
    Python function does (3000 ones stop at 2048 in float16); the C backend
    kept the sum in a float32 register (3000) while CUDA's row kernels
    rounded.  A max update is order-free and stays a reduction."""
    import ml_dtypes  # noqa: F401  (bfloat16's numpy dtype)
    dtype = np.dtype(dt)

    def rows(A, s, m):
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                s[i] += A[i, j]
                m[i] = np.maximum(m[i], A[i, j])

    def total(A, s):
        for i in range(A.shape[0]):
            s[0] += A[i] * 0.5

    config = polyc.Config.from_env(target=target, emulate=target == "cuda")
    a = np.ones((3, 3000), dtype) * np.array([[1], [0.1], [3]]).astype(dtype)
    got = [np.zeros(3, dtype), np.full(3, -np.inf, dtype)]
    want = [x.copy() for x in got]
    polyc.kernel(rows, config=config)(a, *got)
    rows(a, *want)
    for g, w in zip(got, want):
        assert np.array_equal(g, w), (g, w)
    b = np.full(5000, 0.1, dtype)
    got, want = np.zeros(1, dtype), np.zeros(1, dtype)
    polyc.kernel(total, config=config)(b, got)
    total(b, want)
    assert np.array_equal(got, want), (got, want)


def test_cli_dtype_options(capsys):
    from pathlib import Path

    from polyc.cli import main
    matmul = str(Path(__file__).resolve().parents[2] / "examples" / "matmul.tc")
    assert main(["run", matmul, "--dtype", "float16", "--sizes",
                 "M=20,K=33,N=9", "--check"]) == 0
    assert main(["einsum", "ij,jk->ik", "--shapes", "20x30,30x7", "--dtype", "bfloat16",
                 "--check"]) == 0
    assert main(["run", matmul, "--dtype", "bfloat16", "--sizes",
                 "M=20,K=33,N=9", "--target", "cuda", "--emulate", "--check"]) == 0


def test_jit_traces_float16_numpy_code_with_numpy_dtypes():
    """polyc.jit over float16 arrays: the same result dtypes as numpy (a
    numpy float64 scalar promotes, NEP 50), values within float16's
    tolerance of a float32 evaluation; bfloat16 is refused with a hint."""
    @polyc.jit
    def layernorm(x, g, b):
        m = x.mean(axis=-1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * g + b

    @polyc.jit
    def attention(q, k, v):
        s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 64)).astype(np.float16)
    g = rng.standard_normal(64).astype(np.float16)
    b = rng.standard_normal(64).astype(np.float16)
    y = layernorm(x, g, b)
    want = layernorm.__wrapped__(*(a.astype(np.float32) for a in (x, g, b)))
    assert y.dtype == layernorm.__wrapped__(x, g, b).dtype == np.float16
    assert_close(y, want.astype(np.float16), reduction_length=64)
    q, k, v = (rng.standard_normal((2, 16, 32)).astype(np.float16) for _ in range(3))
    o = attention(q, k, v)
    assert o.dtype == attention.__wrapped__(q, k, v).dtype
    want = attention.__wrapped__(*(a.astype(np.float32) for a in (q, k, v)))
    # q @ k rounds to float16 (numpy's dtype), then promotes to float64
    assert_close(o.astype(np.float16), want.astype(np.float16), reduction_length=32)
    with pytest.raises(DTypeError, match="bfloat16 compiles from TC"):
        layernorm(*(a.astype(TYPES["bfloat16"]) for a in (x, g, b)))


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_an_empty_reduction_into_half_still_stores_its_zeros(target):
    """``C +=! A . B`` with K = 0 is all zeros: the rounding store covers
    every element the initialisation writes, not only those an update
    reaches (into ``out=``, whose old contents must not survive)."""
    config = polyc.Config.from_env(target=target, emulate=True)
    k = polyc.compile("def mm(float16(M,K) A, float16(K,N) B) -> (C) "
                      "{ C(m,n) +=! A(m,k) * B(k,n) }", config=config)
    out = np.full((3, 4), 7, np.float16)
    k(np.ones((3, 0), np.float16), np.ones((0, 4), np.float16), out=out)
    assert not out.any()
