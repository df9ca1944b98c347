"""``@polyc.kernel``: every accepted construct compiled and compared with the
same function run as plain Python; every refused construct with its message.

Tolerance: float64, relative 1e-12 of the output's magnitude (the compiled
code may reassociate nothing here but the C compiler may contract a*b+c
into an FMA)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.errors import BindingError, DTypeError, ShapeError, UnsupportedError

RNG = np.random.default_rng(7)


def run_both(k, *args):
    """Run ``k`` compiled and as plain Python on copies of ``args``; assert
    every array argument ends equal (rel 1e-12)."""
    a1 = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    a2 = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    assert k(*a1) is None
    k.py_func(*a2)
    for x, y in zip(a1, a2):
        if isinstance(x, np.ndarray):
            scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-300)
            assert np.max(np.abs(x - y), initial=0.0) <= 1e-12 * scale, (x, y)
    return a1


# ------------------------------------------------------------------ accepted

@polyc.kernel
def steps(A, B):
    n = A.shape[0]
    for i in range(n - 1, -1, -1):          # negative step: a backward recurrence
        B[i] = A[i] + (B[i + 1] if i + 1 < n else 0.0)
    for i in range(1, n, 3):                # positive non-unit step
        B[i] *= 2.0
    for i in range(n - 2, 0, -2):           # negative non-unit step
        B[i] -= 1.0


def test_kernel_of_a_kernel_wraps_its_python_function():
    """``polyc.kernel(k)`` of an ``@polyc.kernel`` function (a benchmark
    re-wrapping a decorated kernel with another config) compiles the same
    Python function (it was an AttributeError, before that an
    UnsupportedError asking for the source of a PyKernel)."""
    again = polyc.kernel(steps, config=Config(parallel=False))
    assert again.py_func is steps.py_func and again.config.parallel is False
    assert polyc.kernel(steps).py_func is steps.py_func
    A = RNG.random(9)
    B, want = np.zeros(10), np.zeros(10)
    again(A, B)
    steps.py_func(A, want)
    np.testing.assert_allclose(B, want, rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 30])
def test_steps(n):
    A = RNG.random(n)
    B = np.zeros(n + 1)
    out = run_both(steps, A, B)
    if n:
        assert out[1][0] == pytest.approx(A.sum())       # the backward recurrence


@polyc.kernel
def triangular(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


@pytest.mark.parametrize("n", [1, 5, 40])
def test_triangular_solve(n):
    L = np.tril(RNG.random((n, n))) + n * np.eye(n)
    b = RNG.random(n)
    x = np.zeros(n)
    out = run_both(triangular, L, x, b)
    np.testing.assert_allclose(out[1], np.linalg.solve(L, b), rtol=1e-10)


@polyc.kernel
def upper_bounds(A, B):
    n, m = A.shape
    for i in range(n // 2):
        for j in range(max(0, i - 2), min(m, i + 3)):
            if (j != i and not j > i + 1) or i == 0:
                B[i, j] = A[i, j] + A[2 * i, m - 1 - j]
            else:
                B[i, j] = -A[i, j]
    for i in range(n):
        if 1 <= i < n - 1:
            B[i, 0] += 1.0


@pytest.mark.parametrize("shape", [(1, 1), (6, 4), (9, 13)])
def test_bounds_and_conditions(shape):
    run_both(upper_bounds, RNG.random(shape), np.zeros(shape))


@polyc.kernel
def values(alpha, A, B, tsteps):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(n):
            s = A[i] * alpha
            s += 1.0
            s -= 0.25
            s *= 2.0
            s /= 3.0
            B[i] = (max(s, 0.5) + min(s, A[i], 0.75) + abs(-s) + math.sqrt(s)
                    + np.exp(-s) + math.log(1.0 + s) + pow(s, 2.0) + s ** 3
                    + (s if A[i] > 0.5 and s < 2.0 else -s) + i / n + t)
            A[i] = B[i] * 0.01


@pytest.mark.parametrize("n,tsteps", [(0, 3), (1, 1), (17, 3)])
def test_values(n, tsteps):
    run_both(values, 1.5, RNG.random(n), np.zeros(n), tsteps)


@polyc.kernel
def row_dot(A, x, y):
    m, n = A.shape
    for i in range(m):
        t = 0.0
        for j in range(n):
            t += A[i, j] * x[j]
        y[i] = t


def test_scalar_is_privatized_along_the_rows():
    A, x, y = RNG.random((70, 50)), RNG.random(50), np.zeros(70)
    out = run_both(row_dot, A, x, y)
    np.testing.assert_allclose(out[2], A @ x, rtol=1e-12)
    prog = row_dot.program
    t = prog.tensor("t")
    assert t.role == "temp" and t.ndim == 1          # t -> t[i]
    assert "omp parallel for" in row_dot.source       # the i loop stays parallel


@polyc.kernel
def running_sum(A, B):
    n = A.shape[0]
    s = 0.0
    for i in range(n):
        s += A[i]
        B[i] = s


def test_scalar_carried_across_iterations_is_kept():
    A, B = RNG.random(100), np.zeros(100)
    out = run_both(running_sum, A, B)
    np.testing.assert_allclose(out[1], np.cumsum(A), rtol=1e-12)
    assert running_sum.program.tensor("s").ndim == 0


@polyc.kernel
def two_sweeps(X, Y, Z):
    h, w = X.shape
    for i in range(h):                        # a recurrence along each row
        acc = 0.0
        for j in range(w):
            acc = 0.5 * acc + X[i, j]
            Y[i, j] = acc
    for j in range(w):                        # then along each column, same scalar
        acc = 0.0
        for i in range(h):
            acc = 0.25 * acc + Y[i, j]
            Z[i, j] = acc


def test_a_scalar_reused_by_independent_nests_is_renamed_per_web():
    X = RNG.random((30, 40))
    out = run_both(two_sweeps, X, np.zeros_like(X), np.zeros_like(X))
    assert np.all(out[2] > 0)
    prog = two_sweeps.program
    acc, acc1 = prog.tensor("acc"), prog.tensor("acc_1")
    assert acc.role == acc1.role == "temp" and acc.ndim == acc1.ndim == 1
    # each sweep runs parallel across its rows (columns)
    assert two_sweeps.source.count("omp parallel for") >= 2, two_sweeps.source


@polyc.kernel
def smooth(A, B):
    n, m = A.shape
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            B[i, j] = 0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1])


def _tile_steps(source: str) -> list[int]:
    import re
    return [int(v) for v in re.findall(r"\+= (\d+)\)", source) if int(v) > 1]


def test_only_bands_with_reuse_across_a_loop_are_tiled():
    A = RNG.random((50, 60))
    out = run_both(smooth, A, np.zeros_like(A))
    np.testing.assert_allclose(out[1][1:-1, 1:-1], 0.25 * (A[:-2, 1:-1] + A[2:, 1:-1]
                                                          + A[1:-1, :-2] + A[1:-1, 2:]))
    # every access moves with both loops: neighbour reuse only, no tiles, and
    # the parallel loop keeps its n - 2 iterations
    assert _tile_steps(smooth.source) == []
    B, C = RNG.random((60, 70)), np.zeros((50, 70))
    # (gemm is defined with the bad calls below; by default it is one call of
    # the GEMM intrinsic, so its loops are looked at with tensorization off)
    loops = gemm.with_config(Config.from_env(tensorize=False))
    run_both(loops, C, A, B)
    assert "polyc_gemm_" not in loops.source
    assert _tile_steps(loops.source)           # A[i, k] is reused along j: tiled


@polyc.kernel
def reductions(A, x, y, z):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            y[i] += A[i, j] * x[j]           # a sum reduction over j
            z[i] -= A[i, j]                  # -= is += of the negated term
    for i in range(1, n):
        y[i] += y[i - 1]                     # reads its own array: a recurrence


def test_augmented_assignments_become_reduction_updates():
    A, x = RNG.random((40, 300)), RNG.random(300)
    y, z = RNG.random(40), RNG.random(40)
    out = run_both(reductions, A, x, y, z)
    np.testing.assert_allclose(out[2], np.cumsum(y + A @ x), rtol=1e-12)
    np.testing.assert_allclose(out[3], z - A.sum(axis=1), rtol=1e-12)
    s_y, s_z, s_rec = reductions.program.statements
    assert (s_y.kind, s_y.op, s_y.reduction_iterators) == ("update", "+", ("j",))
    assert (s_z.kind, s_z.op, s_z.reduction_iterators) == ("update", "+", ("j",))
    assert s_rec.kind == "assign" and s_rec.op == "="
    # the j loops keep their accumulator in a register and are vectorised
    assert "omp simd reduction(+:" in reductions.source


@polyc.kernel
def levinson_like(r, y, z):
    n = r.shape[0]
    for k in range(1, n):
        for i in range(k):
            z[i] = y[i] + r[k] * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]


@polyc.kernel
def sweeps(A, B, tsteps: int):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.5 * (A[i - 1] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = B[i] + 0.001 * t


def test_small_parallel_loops_inside_a_sequential_loop_fork_only_when_long():
    r, y, z = RNG.random(50) * 0.1, RNG.random(50), np.zeros(50)
    run_both(levinson_like, r, y, z)
    two = sweeps.with_config(polyc.Config.from_env().replace(num_threads=2))
    for n in (100, 40000):                  # both copies run, and agree with Python
        run_both(two, RNG.random(n), np.zeros(n), 3)
    # each inner loop is printed twice: forked from 16384 iterations, else
    # sequential (no call into the OpenMP runtime)
    for k in (levinson_like, two):
        assert k.source.count("omp parallel for") == 2, k.source
        assert k.source.count(">= INT64_C(16384)") == 2, k.source


@polyc.kernel
def shapes_kinds(A, B, C):
    n = A.shape[0]
    _, m = B.shape
    k = C.shape[-1]
    for i in range(n):
        for j in range(m):
            for l in range(k):
                C[i, j, l] = A[i] + B[i, j] * l


def test_shape_unpacking_forms_and_dtype_specialisation():
    for dt in ("float64", "float32"):
        A, B = RNG.random(3).astype(dt), RNG.random((3, 4)).astype(dt)
        C = np.zeros((3, 4, 5), dtype=dt)
        shapes_kinds(A, B, C)
        np.testing.assert_allclose(C, A[:, None, None] + B[:, :, None] * np.arange(5),
                                   rtol=1e-6)
    k64 = shapes_kinds.specialize(np.zeros(2), np.zeros((2, 2)), np.zeros((2, 2, 2)))
    again = shapes_kinds.specialize(np.zeros(9), np.zeros((9, 3)), np.zeros((9, 3, 1)))
    assert k64 is again                      # sizes are parameters: no recompilation


@polyc.kernel
def inline_sizes(A, x, y):
    for i in range(A.shape[0]):
        y[i] = A.shape[-1] + len(x)
        for j in range(len(x)):
            y[i] += A[i, j] * x[j] + math.copysign(math.fmod(x[j], 0.25), A[i, j])


@polyc.kernel
def numpy_spellings(A, y):
    for i in range(A.shape[0]):
        y[i] = (np.arctan2(A[i], 1.5) + np.arcsinh(A[i]) + np.arctanh(A[i] * 0.5)
                + np.arccosh(np.absolute(A[i]) + 1.0) + np.power(A[i], 2))


def test_inline_shape_reads_and_two_argument_math_functions():
    A, x = RNG.standard_normal((5, 3)), RNG.standard_normal(3)
    y = run_both(inline_sizes, A, x, np.zeros(5))[2]
    want = 6 + A @ x + np.copysign(np.fmod(x, 0.25), A).sum(1)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    # numpy's names of the functions (docs/pyloops.md: the np. spellings)
    a = RNG.uniform(-0.9, 0.9, 7)
    y = run_both(numpy_spellings, a, np.zeros(7))[1]
    want = (np.arctan2(a, 1.5) + np.arcsinh(a) + np.arctanh(a * 0.5)
            + np.arccosh(np.abs(a) + 1.0) + a ** 2)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    with pytest.raises(ShapeError, match=r"A.shape\[2\] does not exist"):
        polyc.kernel(k_missing_dim)(np.zeros((2, 2)))


@polyc.kernel
def int_and_float_division(A, B, X, Y, Q, R, F, G, H):
    for i in range(A.shape[0]):
        Q[i] = A[i] / B[i]                 # Python's true division of ints
        R[i] = A[i] // B[i] + A[i] % B[i] * 100 + (A[i] + i) // 3
        F[i] = X[i] // Y[i]
        G[i] = X[i] % Y[i]
        H[i] = X[-1] + A[-2] + X[i] // 2.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_division_operators_and_negative_literal_indices_as_python(dtype):
    """``/`` of integer elements is true division, ``//`` floors (floats as
    CPython's float_divmod, bit for bit), ``%`` takes the divisor's sign,
    and a literal ``A[-1]`` reads from the end, as the same code on numpy
    arrays computes."""
    rng = np.random.default_rng(3)
    A = np.array([7, -7, 5, 0, 9, -3], np.int64)
    B = np.array([2, 2, -3, 4, -4, 5], np.int64)
    X = (rng.standard_normal(6) * 10).astype(dtype)
    Y = (rng.standard_normal(6) * 3).astype(dtype)
    X[:3], Y[:3] = [0.3, -5.0, 7.0], [0.1, 1.5, -0.7]
    args = (A, B, X, Y, np.zeros(6), np.zeros(6, np.int64), *(np.zeros(6, dtype),) * 3)
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    int_and_float_division(*got)
    int_and_float_division.py_func(*want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@polyc.kernel
def and_or_values(A, B, C, I, J):
    for i in range(A.shape[0]):
        C[i, 0] = A[i] and B[i]
        C[i, 1] = A[i] or B[i] or 2.5
        C[i, 2] = (A[i] > 0.0) and B[i]
        C[i, 3] = A[i] > 0.0 and B[i] > 0.0 or not A[i]
        J[i] = I[i] and I[i] - 1 or -7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_and_or_of_values_are_pythons(dtype):
    """``a and b`` is ``b if a else a``, ``a or b`` ``a if a else b``
    (``2.0 and 3.0`` is 3.0; it was C's ``&&``, 1.0), on floats and ints."""
    A = np.array([0.0, 1.0, 2.0, 0.0, -1.5, np.nan], dtype)
    B = np.array([5.0, 0.0, 3.0, 0.0, 7.0, 0.5], dtype)
    I = np.array([0, 1, 2, 5, -3, 1], np.int64)
    args = (A, B, np.zeros((6, 4), dtype), I, np.zeros(6, np.int64))
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    and_or_values(*got)
    and_or_values.py_func(*want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@polyc.kernel
def unpacking(A, T, F, B, C):
    n = A.shape[0]
    for i in range(n // 2):
        A[i], A[n - 1 - i] = A[n - 1 - i], A[i]
    for i in range(T.shape[0]):
        for j in range(i + 1, T.shape[0]):
            T[i, j], T[j, i] = T[j, i], T[i, j]
    a, b = 0, 1
    for i in range(F.shape[0]):
        F[i] = a
        a, b = b, a + b
    for i in range(n):
        B[i], C[i] = C[i] * 2, B[i] + C[i]


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_unpacking_assignments_evaluate_every_value_first(dtype):
    """``A[i], A[j] = A[j], A[i]`` swaps (every value is read before any
    target is written, as Python does; it was refused); integers stay exact
    (above 2**53)."""
    base = 2**60 if dtype == np.int64 else 0.5
    args = (np.arange(11, dtype=dtype) + base, RNG.integers(0, 100, (6, 6)).astype(dtype),
            np.zeros(40, dtype), np.arange(11, dtype=dtype), np.arange(11, dtype=dtype) + base)
    got = [a.copy() for a in args]
    want = [a.copy() for a in args]
    unpacking(*got)
    unpacking.py_func(*want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@polyc.kernel
def prefix_sum(A, B):
    a = 0.0
    for i in range(A.shape[0]):
        a = a + A[i]
        B[i] = a


def test_too_small_array_next_to_a_contracted_scalar_is_a_shape_error():
    """The binder's program lacks the temporaries the C code allocates (the
    carried scalar ``a``): the out-of-bounds message skipped them (it was a
    bare KeyError: 'a')."""
    with pytest.raises(ShapeError, match=r"A_dim0=5 \(A.shape\[0\]\), B_dim0=3 .*'B\[i\] = a'"):
        prefix_sum(np.arange(5.0), np.zeros(3))
    B = np.zeros(5)
    prefix_sum(np.arange(5.0), B)
    np.testing.assert_array_equal(B, np.cumsum(np.arange(5.0)))


@polyc.kernel
def scaled_add(x, y, alpha=2.0, shift=1):
    for i in range(x.shape[0]):
        y[i] += alpha * x[i] + shift


def test_keyword_arguments_and_defaults_bind_as_in_python():
    """``k(x=..., y=...)`` and parameters with defaults (a bare TypeError
    and an UnsupportedError before); a wrong binding is a BindingError."""
    x = np.arange(5.0)
    for call, want in ((lambda y: scaled_add(x, y), 2 * x + 1),
                       (lambda y: scaled_add(y=y, x=x, shift=-3), 2 * x - 3),
                       (lambda y: scaled_add(x, y, 0.5), 0.5 * x + 1),
                       (lambda y: scaled_add.specialize(x, y=y)(x, y, 2.0, 1), 2 * x + 1)):
        y = np.zeros(5)
        call(y)
        np.testing.assert_array_equal(y, want)
    with pytest.raises(BindingError, match="unexpected keyword argument 'beta'"):
        scaled_add(x, np.zeros(5), beta=1.0)
    with pytest.raises(BindingError, match=r"scaled_add\(\) takes 4 argument\(s\) \(x, y, "
                                           r"alpha, shift\): missing a required argument: 'y'"):
        scaled_add(x)


@polyc.kernel
def reversed_loops(U, b, x, B, lo, hi):
    n = U.shape[0]
    for i in reversed(range(n)):                  # back substitution
        s = b[i]
        for j in range(i + 1, n):
            s -= U[i, j] * x[j]
        x[i] = s / U[i, i]
    for i in reversed(range(lo, hi, 3)):
        B[i] = B[i] + B[i + 1] * 0.5
    for i in reversed(range(hi, lo, -2)):
        B[i] = B[i] * 2.0 + i


@pytest.mark.parametrize("lo,hi", [(0, 10), (2, 11), (3, 3), (5, 2), (4, 12)])
def test_reversed_range_runs_backwards(lo, hi):
    """``for i in reversed(range(lo, hi, step))`` (it was refused), in
    Python's order: the recurrences read what the earlier iterations wrote."""
    U = np.triu(RNG.random((9, 9))) + 3 * np.eye(9)
    run_both(reversed_loops, U, RNG.random(9), np.zeros(9), RNG.random(14), lo, hi)


@polyc.kernel
def conversions(A, B, C):
    n = A.shape[0]
    for i in range(n):
        B[i] = round(A[i]) + int(-A[i]) * 10 + float(A[i] // 2) / 7 + float(i) / n
        C[i] = int(A[i] * 0.5) + round(A[i] * 0.5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_float_int_round_conversions_are_pythons(dtype):
    """``float(x)``, ``int(x)`` (toward zero) and ``round(x)`` (half to
    even) of one value; they were refused as unknown calls."""
    A = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 3.49, 7.0]).astype(dtype)
    args = (A, np.zeros(8, A.dtype if dtype != np.int64 else np.float64), np.zeros(8, np.int64))
    if dtype != np.float32:
        run_both(conversions, *args)
        return
    # float32: Python's float() of an element computes the rest in float64
    # (rel 1e-6 of the magnitude); the integer results are exact
    got, want = [a.copy() for a in args], [a.copy() for a in args]
    conversions(*got)
    conversions.py_func(*want)
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6 * np.abs(want[1]).max())
    np.testing.assert_array_equal(got[2], want[2])


def k_mod_by_size(A, B):
    n = A.shape[0]
    for i in range(n):
        B[i] = A[0] + A[i % n]


def test_a_non_affine_subscript_points_at_its_culprit():
    """The caret is under ``i % n`` (it was under the statement's start)."""
    with pytest.raises(UnsupportedError) as info:
        polyc.kernel(k_mod_by_size)(np.ones(4), np.zeros(4))
    msg = str(info.value)
    line = "        B[i] = A[0] + A[i % n]"
    assert f":{line.index('i % n') + 1}: a non-affine subscript" in msg, msg
    assert "positive integer constant): i % n;" in msg, msg
    assert msg.endswith("\n" + " " * (4 + line.index("i % n")) + "^"), msg


@polyc.kernel
def sizes_in_a_tuple(A, B):
    n, m = A.shape[0], B.shape[1]
    for i in range(n):
        for j in range(m):
            B[i, j] = A[i] * j


def test_sizes_unpacked_from_a_tuple_of_shape_reads():
    """``n, m = A.shape[0], B.shape[1]`` reads two sizes, as two
    ``n = A.shape[0]`` lines do (not two local scalars)."""
    run_both(sizes_in_a_tuple, RNG.random(4), np.zeros((4, 5)))


def k_missing_dim(A):
    for i in range(A.shape[2]):
        A[i, i] = 1.0


def test_kernel_introspection():
    row_dot(RNG.random((4, 3)), RNG.random(3), np.zeros(4))
    assert "for" in row_dot.source
    assert "t[i]" in str(row_dot.program) or "t(i)" in str(row_dot.program)
    text = row_dot.explain()
    assert "parallel" in text
    assert row_dot.schedule.loop_nest()


# ------------------------------------------------------------------ refused

def _refused(fn, args, *fragments):
    k = polyc.kernel(fn)
    with pytest.raises(UnsupportedError) as err:
        k(*args)
    msg = str(err.value)
    assert "test_frontend.py:" in msg                 # file and line
    for f in fragments:
        assert f in msg, msg
    return msg


def k_call(A):
    n = A.shape[0]
    for i in range(n):
        A[i] = np.heaviside(A[i], 1.0)


def k_numpy_ufunc(A):
    n = A.shape[0]
    for i in range(n):
        A[i] = np.logaddexp(A[i], 0.0)


def k_nonaffine_subscript(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i * j] = 0.0


def k_nonaffine_bound(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i * i):
            A[j] = 0.0


def k_while(A):
    i = 0
    while i < 3:
        A[i] = 0.0


def k_data_if(A):
    n = A.shape[0]
    for i in range(n):
        if A[i] > 0.0:
            A[i] = 0.0


def k_indirect(A, idx):
    n = A.shape[0]
    for i in range(n):
        A[idx[i]] = 1.0


def k_slice(A):
    n = A.shape[0]
    for i in range(n):
        A[0:2] = 1.0


def k_chained(A):
    n = A.shape[0]
    for i in range(n):
        A[i][0] = 1.0


def k_return(A):
    return A


def k_unassigned(A):
    n = A.shape[0]
    for i in range(n):
        A[i] = q  # noqa: F821 (the construct under test)
        q = 1.0  # noqa: F841


def k_list_loop(A):
    for i in [0, 1]:
        A[i] = 1.0


def k_print(A):
    print(A)


def k_float_div_bound(A):
    n = A.shape[0]
    for i in range(n / 2):
        A[i] = 1.0


REFUSED = [
    (k_call, "a call to np.heaviside", "a kernel may call"),
    (k_numpy_ufunc, "a call to np.logaddexp", "a kernel may call"),
    (k_nonaffine_subscript, "non-affine", "i * j"),
    (k_nonaffine_bound, "non-affine", "affine in loop variables"),
    (k_while, "a while loop", "range(lo, hi, step)"),
    (k_data_if, "a data-dependent if condition", "a if cond else b"),
    (k_slice, "slicing", "write the loop"),
    (k_chained, "chained subscripts", "A[i, j]"),
    (k_return, "a return statement", "in place"),
    (k_unassigned, "read before it is assigned"),
    (k_list_loop, "a loop over something other than range"),
    (k_print, "a call to print", "a kernel body holds"),
    (k_float_div_bound, "not integer affine arithmetic", "//"),
]


@pytest.mark.parametrize("fn,fragments", [(r[0], r[1:]) for r in REFUSED],
                         ids=[r[0].__name__ for r in REFUSED])
def test_refused_construct(fn, fragments):
    _refused(fn, (np.zeros(4),), *fragments)


def test_refused_indirect_access():
    _refused(k_indirect, (np.zeros(4), np.zeros(4, dtype=np.int64)), "reads data")


# ------------------------------------------------------------------ bad calls

@polyc.kernel
def gemm(C, A, B):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            for k in range(nk):
                C[i, j] += A[i, k] * B[k, j]


def test_contradicting_shapes_name_both_arrays():
    C, A, B = np.zeros((4, 5)), np.ones((4, 3)), np.ones((2, 5))
    with pytest.raises(ShapeError) as err:
        gemm(C, A, B)
    msg = str(err.value)
    assert "B" in msg and "A.shape[1]" in msg and "B.shape[0]" in msg, msg
    assert not C.any()                       # nothing written


def test_dtype_and_kind_errors():
    with pytest.raises(DTypeError, match="complex128"):
        gemm(np.zeros((2, 2), complex), np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(DTypeError, match="tsteps"):
        values(1.5, np.zeros(3), np.zeros(3), 2.0)   # a float for a loop bound
    with pytest.raises(DTypeError, match="(unpacked|indexed) as an array"):
        gemm(np.zeros((2, 2)), 1.0, np.zeros((2, 2)))
    with pytest.raises(ShapeError, match="dimension"):
        gemm(np.zeros((2, 2)), np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(BindingError, match="3 argument"):
        gemm(np.zeros((2, 2)))


def test_read_only_array_is_refused_before_any_write():
    C = np.zeros((3, 3))
    A = np.ones((3, 3))
    C.flags.writeable = False
    with pytest.raises(BindingError, match="read-only"):
        gemm(C, A, A)
    assert not C.any()


def test_non_contiguous_in_place_array_is_updated():
    big = np.zeros((6, 8))
    C = big[::2, ::2]                       # a strided view: updated through a copy
    A, B = RNG.random((3, 5)), RNG.random((5, 4))
    gemm(C, A, B)
    np.testing.assert_allclose(big[::2, ::2], A @ B, rtol=1e-12)
    assert not big[1::2].any()


def test_input_aliasing_an_in_place_array_reads_the_old_values():
    A = RNG.random((4, 4))
    C = A.copy()
    expect = C + A @ A
    gemm(A, A.copy(), A.copy())               # distinct: fine
    C2 = C.copy()
    gemm(C2, C2, C2.copy())                   # C2 read while it is updated: copied first
    np.testing.assert_allclose(C2, expect, rtol=1e-12)


@polyc.kernel
def _offset_by(A, t, k, alpha):
    for s in range(t):
        for i in range(A.shape[0]):
            A[i] = A[i] + k * s + k // 2
    for i in range(A.shape[0]):
        A[i] = A[i] * alpha


def test_int_argument_read_only_as_a_value_may_be_negative():
    """``k`` never bounds a loop or indexes: an int64 scalar, negative too
    (``t`` bounds a loop: a size, >= 0); a float argument of an integer
    program is a double, the product stored truncated as numpy's astype."""
    for dtype in (np.int64, np.float64):
        A = np.arange(5, dtype=dtype)
        want = ((A + sum(-3 * s + (-3) // 2 for s in range(2))) * 1.5).astype(dtype)
        _offset_by(A, 2, -3, 1.5)
        np.testing.assert_array_equal(A, want)
    with pytest.raises(ShapeError, match="argument t: size must be >= 0"):
        _offset_by(np.zeros(3), -1, 2, 1.0)


def test_a_zero_dimensional_array_read_as_a_value():
    # np.array(5.0) passed for a scalar was refused: "the whole array a used
    # as a value; read one element: a[i, ...]" (it has no element to index)
    def scale(a, x):
        for i in range(x.shape[0]):
            x[i] = x[i] * a + a

    for dtype in ("float64", "float32"):
        x = np.arange(4.0).astype(dtype)
        polyc.kernel(scale)(np.array(2.5, dtype), x)
        np.testing.assert_array_equal(x, (np.arange(4.0) * 2.5 + 2.5).astype(dtype))
