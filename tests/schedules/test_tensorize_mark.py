"""Tensorization as a checked schedule-language transformation
(:mod:`polyc.schedule.tensorize`).

* Every kernel the automatic pipeline tensorizes: its ``schedule`` is an
  ordinary :class:`polyc.Schedule` of the source program with a
  ``tensorize:gemm:<S>`` mark; the same tree without the mark, marked again
  through ``Schedule.tensorize``, compiles to byte-identical C; the kernel's
  recipe replays onto the source program to byte-identical C.
* User schedules: tensorize after tiling, below a parallel batch loop, in
  the source order, against numpy.
* Refusals: the reason (which access differs, which loop depends on a
  scanned iterator, which statement cannot be folded), schedule unchanged.
"""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import polyc
from polyc.pipeline import compile_program, compile_schedule
from polyc.schedule import tensorize as T
from polyc.schedule.language import Schedule

from .util import check, program, refused, start

GEMM = "def gemm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
TBMM = ("def tbmm(float(B, N, K) X, float(B, M, K) Y) -> (Z) "
        "{ Z(b, n, m) +=! X(b, n, kk) * Y(b, m, kk) }")
ACC = ("def acc(float(M, K) A, float(K, N) B, float(M, N) C0) -> (C) "
       "{ C(m, n) = C0(m, n)\n C(m, n) += A(m, k) * B(k, n) }")
CONV = ("def conv(float(N, C, HP, WP) I, float(K, C, KH, KW) W) -> (O) "
        "{ O(n, k, h, w) +=! I(n, c, h + kh, w + kw) * W(k, c, kh, kw) }")
MLP = ("def mlp(float(M, K) A, float(K, N) B, float(N) b) -> (C, D) "
       "{ C(m, n) +=! A(m, k) * B(k, n)\n D(m, n) = fmax(C(m, n) + b(n), 0.0) }")
EPI = ("def epi(float(M, K) A, float(K, N) B, float(N) b) -> (C) "
       "{ C(m, n) +=! A(m, k) * B(k, n)\n C(m, n) = fmax(C(m, n) + b(n), 0.0) }")
CHAIN = ("def chain(float(M, K) A, float(K, N) B, float(N, P) E) -> (C, D) "
         "{ C(m, n) +=! A(m, k) * B(k, n)\n D(m, p) +=! C(m, n) * E(n, p) }")
SOFT = ("def soft(float(M, K) A, float(K, N) B) -> (C, D) "
        "{ C(m, n) +=! A(m, k) * B(k, n)\n D(m, n) = exp(C(m, n)) }")
KRON = (
    "def kron2(float(M, N0, N1, D2) X, float(D1, N1) W1) -> (Y) "
    "{ Y(m, n0, d1, d2) +=! X(m, n0, r_n1, d2) * W1(d1, r_n1) }")
SKEWED = ("def sk(float(M, K) A, float(K, N) B) -> (C) "
          "{ C(m, n) +=! A(m, k) * B(k, n + k) }")

AUTOMATIC = [GEMM, TBMM, ACC, CONV, MLP, EPI, CHAIN, SOFT, KRON]


def _without_tensorize_marks(sched: isl.Schedule) -> tuple[isl.Schedule, list]:
    """The tree with its tensorize marks deleted, and the paths of the bands
    they were on (in the new tree: deleting a mark keeps the paths of the
    nodes above it)."""
    paths = []
    while True:
        found = T.marks(sched)
        if not found:
            return sched, paths
        path = found[0][0]
        node = T.tree.node_at(sched, path).delete()
        paths.append(path)
        sched = node.get_schedule()


@pytest.mark.parametrize("src", AUTOMATIC, ids=lambda s: s.split("(")[0][4:])
def test_the_automatic_schedule_is_the_schedule_language_tensorize(src):
    p = program(src)
    kern = compile_program(p)
    assert "polyc_gemm" in kern.source
    s = kern.schedule
    assert isinstance(s, Schedule)
    assert {st.name for st in s.program.statements} == {st.name for st in p.statements}
    found = T.marks(s.isl)
    assert found and all(i == "gemm" for _, i, _, _ in found)
    assert "mark: tensorize:gemm:" in str(s)
    # the same tree without the marks, tensorized through the language
    bare, paths = _without_tensorize_marks(s.isl)
    again = Schedule.from_isl(s.program, bare, s.deps)
    for path in paths:
        node = T.tree.node_at(again.isl, path)
        while node.get_type() != isl.schedule_node_type.band:
            node = node.child(0)
        again = again.tensorize({"path": list(T.tree.path_of(node)), "member": 0})
    assert again.to_text() == s.to_text()
    assert compile_schedule(again).source == kern.source
    # the kernel's recipe replays onto the source program, byte-identically
    replayed = Schedule.replay(p, s.to_recipe())
    assert compile_schedule(replayed).source == kern.source


def test_tensorize_in_the_source_order_matches_numpy():
    s = start(GEMM).tensorize(("C", "m"), "gemm")
    assert s.recipe[-1]["op"] == "tensorize"
    k = check(s, dict(M=37, N=19, K=23))
    assert "polyc_gemm" in k.source
    assert "initialisation folded" in k.explain()


def test_tensorize_after_tiling_and_reordering():
    s = start(GEMM).tile([("C", "m"), ("C", "n")], [8, 8]).tensorize(("C", "m_tile"))
    k = check(s, dict(M=20, N=13, K=9))
    assert "polyc_gemm" in k.source


def test_batched_calls_below_a_parallel_loop():
    s = start(TBMM).parallel(("Z", "b")).tensorize(("Z", "n"))
    k = check(s, dict(B=3, N=9, M=7, K=5))
    text = k.source
    assert "polyc_gemm" in text and "omp parallel for" in text
    assert "tensorize:gemm:S0" in str(k.schedule)


def test_a_tensorized_user_schedule_explains_its_mark():
    s = start(MLP).tensorize(("C", "m"))
    k = check(s, dict(M=6, N=5, K=4))
    text = k.explain()
    assert "tensorized" in text and "gemm" in text


def test_the_epilogue_folds_when_it_runs_below_the_mark():
    s = start(EPI).fuse(("S0", "m"), ("S1", "m")).fuse(("S0", "n"), ("S1", "n"))
    s = s.tensorize(("C", "m"))
    k = check(s, dict(M=9, N=7, K=5))
    assert "epilogue" in k.explain()


def test_a_loop_above_that_depends_on_a_scanned_iterator_is_refused():
    msg = refused(start(GEMM), lambda s: s.tensorize(("C", "k")))
    assert "depends on m" in msg and "outermost loop" in msg
    # tiled: the tile loops scan m and n; marking the point loops is refused
    tiled = start(GEMM).tile([("C", "m"), ("C", "n")], [8, 8])
    msg = refused(tiled, lambda s: s.tensorize(("C", "m")))
    assert "depends on" in msg


def test_a_mismatched_access_is_refused_with_the_reason():
    src = ("def st(float(M, K2) A, float(K, N) B) -> (C) "
           "{ C(m, n) +=! A(m, 2 * k + 1) * B(k, n) }")
    msg = refused(start(src), lambda s: s.tensorize(("C", "m")))
    assert "does not match gemm" in msg and "full box" in msg
    ew = "def ew(float(M, K) A, float(M, K) B) -> (C) { C(m, k) +=! A(m, k) * B(m, k) }"
    msg = refused(start(ew), lambda s: s.tensorize(("C", "m")))
    assert "does not match gemm" in msg


def test_other_statements_below_the_band_are_refused():
    s = start(SOFT).fuse(("S0", "m"), ("S1", "m"))
    msg = refused(s, lambda s: s.tensorize(("C", "m")))
    assert "also runs below the band" in msg and "S1" in msg
    s = start(CHAIN).fuse(("S0", "m"), ("S1", "m"))
    msg = refused(s, lambda s: s.tensorize(("C", "m")))
    assert "2 contractions" in msg


def test_an_unknown_intrinsic_is_refused():
    msg = refused(start(GEMM), lambda s: s.tensorize(("C", "m"), "conv3x3"))
    assert "unknown intrinsic" in msg and "gemm" in msg


def test_recipes_of_tensorized_user_schedules_replay():
    s = start(SKEWED).tensorize(("C", "m"))
    again = Schedule.replay(program(SKEWED), s.to_json())
    assert again.to_text() == s.to_text()
    a = compile_schedule(s).source
    assert a == compile_schedule(again).source and "polyc_gemm" in a
    check(again, dict(M=5, K=4, N=11))


def test_loop_programs_are_tensorized_through_the_schedule_language():
    @polyc.kernel
    def mm(A, B, C):
        ni, nj = C.shape
        nk = A.shape[1]
        for i in range(ni):
            for j in range(nj):
                C[i, j] = 0.0
                for k in range(nk):
                    C[i, j] += A[i, k] * B[k, j]
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((12, 7)), rng.standard_normal((7, 9))
    C = np.zeros((12, 9))
    kk = mm.specialize(A, B, C)
    s = Schedule.from_program(kk.program).tensorize(("C", "i"))
    k = compile_schedule(s)
    assert "polyc_gemm" in k.source
    out = C.copy()
    k(A, B, out)
    np.testing.assert_allclose(out, A @ B, rtol=1e-12)


def test_a_mark_that_does_not_hold_is_refused_in_a_tree_read_from_text():
    s = start(GEMM)
    good = s.tensorize(("C", "m")).to_text()
    assert "tensorize:gemm:S0" in s.from_text(good).to_text()
    # the mark put by hand onto the k band: the loops above scan m and n
    k_band = T.surgery.top_of_band(T.surgery.band_node(s.isl, s.loop("C", "k")))
    bad = k_band.insert_mark(isl.Id("tensorize:gemm:S0")).get_schedule().to_str()
    msg = refused(s, lambda s: s.from_text(bad))
    assert "no longer holds" in msg and "depends on m" in msg


@polyc.kernel
def _mm_then_copy(A, B, C, D):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            for k in range(nk):
                C[i, j] += A[i, k] * B[k, j]
            D[i, j] = C[i, j] * 2.0            # reads the final C(i, j)


@polyc.kernel
def _mm_then_peek(A, B, C, D):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj - 1):
            for k in range(nk):
                C[i, j] += A[i, k] * B[k, j]
            D[i, j] = C[i, j + 1]              # reads C(i, j + 1) before its update


@polyc.kernel
def _mm_then_both(A, B, C, D):
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj - 1):
            for k in range(nk):
                C[i, j] += A[i, k] * B[k, j]
            D[i, j] = C[i, j] + C[i, j + 1]    # after C(i, j)'s update, before C(i, j + 1)'s


def test_loop_programs_run_statements_between_a_calls_instances_before_or_after_it():
    rng = np.random.default_rng(4)
    A, B, C0 = rng.standard_normal((9, 5)), rng.standard_normal((5, 8)), rng.standard_normal((9, 8))
    C, D = C0.copy(), np.zeros((9, 8))
    kern = _mm_then_copy.specialize(A, B, C, D)
    assert "polyc_gemm_f64(" in kern.source
    kern(A, B, C, D)
    np.testing.assert_allclose(C, C0 + A @ B, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D, 2 * C, rtol=1e-12)
    # a statement the call depends on, that depends on none of its
    # instances: it runs before the call
    want = C0.copy()
    want[:, :-1] += A @ B[:, :-1]
    C, D = C0.copy(), np.zeros((9, 8))
    kern = _mm_then_peek.specialize(A, B, C, D)
    assert "polyc_gemm_f64(" in kern.source
    kern(A, B, C, D)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D[:, :-1], C0[:, 1:], rtol=1e-12)
    # one that reads what some instances wrote and what others overwrite:
    # no call, and why
    C, D = C0.copy(), np.zeros((9, 8))
    kern = _mm_then_both.specialize(A, B, C, D)
    assert "polyc_gemm" not in kern.source
    assert "the call depends on them" in kern.explain()
    kern(A, B, C, D)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(D[:, :-1], want[:, :-1] + C0[:, 1:], rtol=1e-12)


SCALED = ("def scaled(float(M, K) A, float(K, N) B) -> (C) "
          "{ C(m, n) +=! A(m, k) * B(k, n)\n C(m, n) = C(m, n) * 0.5 }")


def test_a_scaling_after_the_update_is_alpha_not_beta():
    # the statement after the update scales the product (alpha); a scaling
    # before it would scale C's previous value (beta)
    s = start(SCALED).fuse(("S0", "m"), ("S1", "m")).fuse(("S0", "n"), ("S1", "n"))
    k = check(s.tensorize(("C", "m")), dict(M=9, N=7, K=5))
    assert "alpha = 0.5" in k.explain() and "beta" not in k.explain().split("tensorization")[1]


def test_calls_per_block_of_rows_below_a_row_tile():
    s = start(GEMM).tile([("C", "m")], [8]).tensorize(("C", "m"), rows=8)
    assert s.recipe[-1]["op"] == "tensorize"
    assert "tensorize:gemm:S0:8" in str(s)
    k = check(s, dict(M=21, N=13, K=9))
    assert "(8 rows of m per call)" in k.explain()
    assert "polyc_min(INT64_C(8), " in k.source
    replayed = Schedule.replay(program(GEMM), s.to_json())
    assert compile_schedule(replayed).source == k.source


def test_calls_per_block_of_rows_refusals():
    # a tile of 8 rows holds two calls of 4 (legal), not half a call of 16
    s = start(GEMM).tile([("C", "m")], [8]).tensorize(("C", "m"), rows=4)
    check(s, dict(M=13, N=5, K=3))
    msg = refused(start(GEMM).tile([("C", "m")], [8]), lambda s: s.tensorize(("C", "m"), rows=16))
    assert "depends on m" in msg
    msg = refused(start(CONV), lambda s: s.tensorize(("O", "k"), rows=4))
    assert "per block of rows" in msg or "rows" in msg
    msg = refused(start(GEMM), lambda s: s.tensorize(("C", "m"), rows=-1))
    assert "rows must be" in msg


def test_the_automatic_row_blocked_schedule_replays():
    src = ("def att(float(B, M, D) Q, float(B, N, D) K, float(B, N, E) V) -> (S, mx, P, O) {\n"
           "  S(b, i, j) +=! Q(b, i, d) * K(b, j, d)\n"
           "  mx(b, i) max=! S(b, i, j)\n"
           "  P(b, i, j) = exp(S(b, i, j) - mx(b, i))\n"
           "  O(b, i, e) +=! P(b, i, j) * V(b, j, e)\n}")
    kern = compile_program(program(src))
    assert "tensorize:gemm:S0:" in str(kern.schedule)
    replayed = Schedule.replay(program(src), kern.schedule.to_json())
    assert compile_schedule(replayed).source == kern.source


def test_a_causal_products_recipe_replays_byte_identically():
    """A guarded (causal) product is one call over its band with the ``+=!``
    initialisation folded; replayed, the call absorbed the initialisation as
    beta 0 and described it so, and the source differed in that comment."""
    src = ("def att(float(M, D) Q, float(M, D) K, float(M, E) V) -> (S, O) {\n"
           "  S(i, j) +=! j <= i ? Q(i, d) * K(j, d) : 0.0\n"
           "  O(i, e) +=! S(i, j) * V(j, e)\n}")
    kern = polyc.compile(src)
    assert "polyc_gemmt_f32" in kern.source
    again = polyc.compile(src, schedule=kern.schedule.to_recipe())
    assert again.source == kern.source
    assert compile_schedule(Schedule.replay(program(src), kern.schedule.to_json())).source \
        == kern.source
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((13, 5)).astype(np.float32) for _ in range(3))
    s = np.tril(q.astype(np.float64) @ k.T.astype(np.float64))
    np.testing.assert_allclose(again(q, k, v)[1], s @ v, rtol=1e-4, atol=1e-4)


def test_steps_on_the_loops_a_call_computes_are_refused():
    """The loops of a tensorized band are the call's: a tile or parallel
    there changed nothing in the code and was accepted silently; the loops
    above the mark still transform."""
    bmm = ("def bmm(float(B, M, K) A, float(B, K, N) Bm) -> (C) "
           "{ C(b, m, n) +=! A(b, m, k) * Bm(b, k, n) }")
    s = polyc.compile(bmm).schedule
    for step in (lambda s: s.parallel(("C", "m")), lambda s: s.unroll(("C", "k"), 2),
                 lambda s: s.tile([("C", "m"), ("C", "n")], [8, 8])):
        with pytest.raises(polyc.ScheduleError, match="computed by the gemm call of S0"):
            step(s)
    t = s.tile([("C", "b")], [2])
    kern = compile_schedule(t)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 6, 7)), rng.standard_normal((5, 7, 3))
    np.testing.assert_allclose(kern(a.astype(np.float32), b.astype(np.float32)), a @ b,
                               rtol=1e-4, atol=1e-4)
