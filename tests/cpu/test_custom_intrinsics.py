"""User-defined intrinsics (polyc.intrinsics.register, polyc.custom_intrinsics):
registered, matched through ``Schedule.tensorize``, compiled and checked
against numpy; mismatched bands and malformed registrations refused with
the reason."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import polyc
import polyc.intrinsics
from polyc import custom_intrinsics
from polyc.errors import CompileError, IntrinsicError, ParseError, ScheduleError
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule

OUTER = "def {n}(float(8) a, float(8) b) -> (c) {{ c(i, j) +=! a(i) * b(j) }}"
OUTER_C = r"""
static void {n}(const float *a, int64_t a_s0, const float *b, int64_t b_s0,
                float *c, int64_t c_s0, int64_t c_s1)
{{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            c[i * c_s0 + j * c_s1] += a[i * a_s0] * b[j * b_s0];
}}
"""
MATVEC = "def {n}(double(N, 4) a, double(4) b) -> (c) {{ c(i) +=! a(i, r) * b(r) }}"
MATVEC_C = r"""
void {n}(const double *a, int64_t a_s0, int64_t a_s1, const double *b, int64_t b_s0,
         double *c, int64_t c_s0, int64_t N)
{{
    for (int64_t i = 0; i < N; i++)
        for (int r = 0; r < 4; r++)
            c[i * c_s0] += a[i * a_s0 + r * a_s1] * b[r * b_s0];
}}
"""
BLOCKED = ("def blocked(float(MB, 8, K) A, float(K, NB, 8) B) -> (C) "
           "{ C(mb, i, nb, j) +=! A(mb, i, k) * B(k, nb, j) }")
BATCHED_MV = ("def bmv(double(B, M, 4) A, double(B, 4) X) -> (Y) "
              "{ Y(b, m) +=! A(b, m, r) * X(b, r) }")


@pytest.fixture
def registered():
    """Register intrinsics under fresh names; forget them afterwards."""
    names = []

    def reg(template, source, **kw):
        n = f"t{uuid.uuid4().hex[:10]}"
        names.append(n)
        return polyc.intrinsics.register(n, template.format(n=n), {"c": source.format(n=n)},
                                         **kw)
    yield reg
    for n in names:
        custom_intrinsics.unregister(n)


def _blocked_schedule(name: str) -> Schedule:
    s = Schedule.from_program(polyc.program(BLOCKED)).distribute(("C", "mb"))
    s = s.reorder([("S0", "mb"), ("S0", "nb"), ("S0", "k"), ("S0", "i"), ("S0", "j")])
    return s.tensorize(("S0", "i"), name)


@pytest.mark.parametrize("mb, nb, k", [(1, 1, 1), (3, 2, 5), (4, 5, 17)])
def test_an_outer_product_intrinsic_computes_a_blocked_matmul(registered, mb, nb, k):
    intr = registered(OUTER, OUTER_C)
    s = _blocked_schedule(intr.name)
    assert f"mark: tensorize:{intr.name}:S0" in str(s)
    kernel = compile_schedule(s)
    assert f"{intr.name}(t_A" in kernel.source
    rng = np.random.default_rng(k)
    A = rng.standard_normal((mb, 8, k)).astype(np.float32)
    B = rng.standard_normal((k, nb, 8)).astype(np.float32)
    np.testing.assert_allclose(kernel(A, B), np.einsum("aik,kbj->aibj", A, B),
                               rtol=1e-5, atol=1e-5)
    assert f"tensorized onto {intr.name}" in kernel.explain()


def test_a_size_of_the_description_takes_the_statements_extent(registered):
    intr = registered(MATVEC, MATVEC_C)
    s = Schedule.from_program(polyc.program(BATCHED_MV)).distribute(("Y", "b"))
    s = s.tensorize(("S0", "m"), intr.name)
    kernel = compile_schedule(s)
    rng = np.random.default_rng(0)
    A, X = rng.standard_normal((3, 7, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(kernel(A, X), np.einsum("bmr,br->bm", A, X), rtol=1e-12)
    assert "(int64_t)(p_M)" in kernel.source or "p_M" in kernel.source


VADD = "def {n}(float(N) x) -> (y) {{ y(i) +=! x(i) }}"
VADD_C = r"""
static void {n}(const float *x, int64_t x_s0, float *y, int64_t y_s0, int64_t N)
{{
    for (int64_t i = 0; i < N; i++)
        y[i * y_s0] += x[i * x_s0];
}}
"""


@pytest.mark.parametrize("shape", [(3, 7), (1, 1), (4, 0)])
def test_the_intrinsic_scans_the_iterators_of_the_marked_band(registered, shape):
    """``Y(m, l) += X(m, l)`` onto a one-dimensional intrinsic at loop ``l``:
    the call scans ``l`` (one per row), not ``m``, which the loop above
    runs over (its first correspondence)."""
    intr = registered(VADD, VADD_C)
    src = "def rows(float(M, L) X) -> (Y) { Y(m, l) +=! X(m, l) }"
    s = Schedule.from_program(polyc.program(src)).distribute(("Y", "m"))
    s = s.tensorize(("S0", "l"), intr.name)
    kernel = compile_schedule(s)
    X = np.random.default_rng(0).random(shape).astype(np.float32)
    np.testing.assert_array_equal(kernel(X), X)
    assert polyc.compile(src, schedule=s.to_recipe()).source == kernel.source


def test_a_schedule_whose_intrinsic_was_unregistered_is_refused(registered):
    intr = registered(VADD, VADD_C)
    src = "def rows(float(M, L) X) -> (Y) { Y(m, l) +=! X(m, l) }"
    s = Schedule.from_program(polyc.program(src)).distribute(("Y", "m"))
    s = s.tensorize(("S0", "l"), intr.name)
    custom_intrinsics.unregister(intr.name)
    with pytest.raises(ScheduleError, match=f"does not match {intr.name}: no such intrinsic "
                                            f"is registered now"):
        compile_schedule(s)


def test_recipes_with_a_user_intrinsic_replay(registered):
    intr = registered(OUTER, OUTER_C)
    s = _blocked_schedule(intr.name)
    again = Schedule.replay(polyc.program(BLOCKED), s.to_json())
    assert compile_schedule(again).source == compile_schedule(s).source


def test_a_band_that_does_not_match_is_refused_with_the_reason(registered):
    intr = registered(OUTER, OUTER_C)
    mm = Schedule.from_program(polyc.program(
        "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"))
    mm = mm.distribute(("C", "m")).reorder([("S0", "k"), ("S0", "m"), ("S0", "n")])
    with pytest.raises(ScheduleError, match="description's box"):
        mm.tensorize(("S0", "m"), intr.name)
    minus = Schedule.from_program(polyc.program(
        BLOCKED.replace("A(mb, i, k) * B", "A(mb, i, k) - B")))
    with pytest.raises(ScheduleError, match="operator - is not"):
        minus.distribute(("C", "mb")).tensorize(("S0", "i"), intr.name)
    # the loops above depend on a scanned iterator
    s = Schedule.from_program(polyc.program(BLOCKED)).distribute(("C", "mb"))
    with pytest.raises(ScheduleError):
        s.tensorize(("S0", "k"), intr.name)
    with pytest.raises(ScheduleError, match="unknown intrinsic"):
        s.tensorize(("S0", "i"), "no_such_intrinsic")


def test_registration_errors(registered):
    intr = registered(OUTER, OUTER_C)
    with pytest.raises(IntrinsicError, match="already exists"):
        polyc.intrinsics.register(intr.name, OUTER.format(n=intr.name),
                                  {"c": OUTER_C.format(n=intr.name)})
    with pytest.raises(IntrinsicError, match="already exists"):
        polyc.intrinsics.register("gemm", OUTER.format(n="gemm"), {"c": ""})
    with pytest.raises(IntrinsicError, match="C identifier"):
        polyc.intrinsics.register("polyc_x", OUTER.format(n="x"), {"c": ""})
    with pytest.raises(IntrinsicError, match="implementations"):
        polyc.intrinsics.register("t_ok_name".replace("t_", "u_"), OUTER.format(n="x"), {})
    with pytest.raises(IntrinsicError, match="linear in the iterators"):
        polyc.intrinsics.register("u_shifted", "def s(float(9) a) -> (c) "
                                  "{ c(i) +=! a(i + 1) where i in 0:8 }", {"c": ""})
    with pytest.raises(IntrinsicError, match="box"):
        polyc.intrinsics.register("u_tri", "def t(float(8, 8) a) -> (c) "
                                  "{ c(i) +=! a(i, j) where i in 0:8, j in 1:8 }", {"c": ""})
    with pytest.raises(ParseError):
        polyc.intrinsics.register("u_parse", "def t(float(8) a) -> (c) { c(i) +=! }", {"c": ""})
    with pytest.raises(CompileError) as info:
        registered(OUTER, "static void {n}(const float *a) {{ }}")
    assert "does not compile" in str(info.value)
    assert "error" in (getattr(info.value, "stderr", "") or str(info.value))
    with pytest.raises(CompileError, match="undefined symbol"):
        registered(OUTER, "static void not_it(void) {{ }}")   # defines no {n}


DOT4 = "def {n}(int32(4) a, int32(4) b) -> (c) {{ c() +=! a(r) * b(r) }}"
DOT4_C = r"""
static void {n}(const int32_t *a, int64_t a_s0, const int32_t *b, int64_t b_s0, int32_t *c)
{{
    int32_t s = 0;               /* where a VNNI vpdpbusd would go */
    for (int r = 0; r < 4; r++)
        s += a[r * a_s0] * b[r * b_s0];
    c[0] += s;
}}
"""


def test_an_integer_dot_intrinsic_with_a_scalar_output(registered):
    """A reduction intrinsic (the shape of a VNNI 4-element dot) whose
    output is one element: the call scans the inner 4 of a blocked K."""
    intr = registered(DOT4, DOT4_C)
    p = polyc.program("def mv(int32(M, KB, 4) A, int32(KB, 4) x) -> (y) "
                      "{ y(m) +=! A(m, kb, r) * x(kb, r) }")
    s = Schedule.from_program(p).distribute(("y", "m")).tensorize(("S0", "r"), intr.name)
    kernel = compile_schedule(s)
    assert f"{intr.name}(t_A" in kernel.source
    rng = np.random.default_rng(5)
    A = rng.integers(-50, 50, (5, 7, 4)).astype(np.int32)
    x = rng.integers(-50, 50, (7, 4)).astype(np.int32)
    np.testing.assert_array_equal(kernel(A, x), np.einsum("mkr,kr->m", A, x))


def test_a_user_intrinsic_on_part_of_a_statement_is_refused(registered):
    """A filter that splits a statement's instances (a triangle's full
    row blocks, ``tensorize(split=True)``): a user intrinsic computes all of
    its statement, so a mark on such a band does not hold."""
    from benchmarks.polybench import BENCHMARKS
    intr = registered(OUTER, OUTER_C)
    bench = BENCHMARKS["syrk"]
    kern = bench.kernel.specialize(*bench.init(bench.sizes["MINI"]))
    s = polyc.Schedule.from_program(kern.program).tensorize(("C", "i"), "gemm", split=True)
    text = s.to_text()
    mark = next(w for w in text.split('"') if w.startswith("tensorize:gemm:"))
    with pytest.raises(polyc.errors.ScheduleError, match="computes all the instances"):
        s.from_text(text.replace(mark, f"tensorize:{intr.name}:S1"))
