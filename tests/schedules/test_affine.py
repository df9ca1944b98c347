"""The affine transformations of the schedule language: skew, shift, reverse,
unroll, unroll_and_jam, isolate_full_tiles (:mod:`polyc.schedule.affine`,
:mod:`polyc.schedule.unroll`).

Per transformation: a golden before/after printout (tree and loop nest;
``--accept`` rewrites ``tests/golden/schedules/<transform>_<case>.txt``), a
differential check against numpy at awkward sizes (1, zero extents, primes,
sizes the factors do not divide), illegal uses refused with the dependence
named (kind, tensor, statements), the bad-input errors, the recipe round trip
(same tree, byte-identical C) and the isl text round trip (AST options
included).  The documented wavefront of the time stencil (skew, tile, skew the
tile loops, interchange, parallel) runs end to end; its illegal variants are
refused.  The generated C is inspected for unrolled copies and for the
constant bounds of isolated full tiles.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyc
from polyc.errors import IllegalScheduleError
from polyc.pipeline import compile_schedule
from polyc.schedule.language import Schedule

from .util import MATMUL, PRODUCER_CONSUMER, STENCIL, check, refused, start

#: a loop with a constant trip count (the 4 columns of A)
FOUR = """
def four(float(N, 4) A) -> (B) {
    B(i, j) = A(i, j) * 2.0
}
"""

C_M, C_N, C_K = ("C", "m"), ("C", "n"), ("C", "k")
S1_T, S1_I = ("S1", "t"), ("S1", "i")

SOURCES = {"matmul": MATMUL, "pc": PRODUCER_CONSUMER, "stencil": STENCIL, "four": FOUR}

#: size sets per program: 1, zero extents, primes, sizes that the factors
#: used below (2, 3, 4, 8) do not divide
SIZES = {
    "matmul": [dict(M=1, N=1, K=1), dict(M=7, N=13, K=5), dict(M=0, N=3, K=2),
               dict(M=3, N=5, K=0), dict(M=2, N=0, K=3), dict(M=17, N=11, K=9)],
    "pc": [dict(N=1, M=1), dict(N=5, M=7), dict(N=0, M=3), dict(N=13, M=11)],
    "stencil": [dict(N=1, T=1), dict(N=2, T=3), dict(N=3, T=2), dict(N=0, T=2),
                dict(N=7, T=0), dict(N=11, T=5), dict(N=17, T=13)],
    "four": [dict(N=1), dict(N=0), dict(N=7)],
}


def wavefront(s: Schedule) -> Schedule:
    """The documented wavefront of the time stencil."""
    return (s.skew(S1_I, S1_T)
            .tile([S1_T, S1_I], [4, 4])
            .skew(("S1", "i_tile"), ("S1", "t_tile"))
            .interchange(("S1", "t_tile"), ("S1", "i_tile"))
            .parallel(("S1", "t_tile")))


def tiled_isolated(s: Schedule) -> Schedule:
    return s.tile([C_M, C_N], [4, 8]).isolate_full_tiles(("C", "m_tile"))


# ----------------------------------------------------------------- golden

#: (transform, case, program, preparation, transformation)
GOLDEN = [
    ("skew", "stencil", "stencil", None, lambda s: s.skew(S1_I, S1_T)),
    ("skew", "stencil_factor_2", "stencil", None, lambda s: s.skew(S1_I, S1_T, 2)),
    ("skew", "wavefront", "stencil", None, wavefront),
    ("shift", "matmul_update", "matmul", None, lambda s: s.shift("S0", C_M, 1)),
    ("shift", "pc_negative", "pc", None, lambda s: s.shift("B", ("B", "j"), -2)),
    ("reverse", "stencil_i", "stencil", None, lambda s: s.reverse(S1_I)),
    ("reverse", "matmul_k_reassociated", "matmul", lambda s: s.with_reassociation(),
     lambda s: s.reverse(C_K)),
    ("unroll", "matmul_k_by_3", "matmul", None, lambda s: s.unroll(C_K, 3)),
    ("unroll", "four_full", "four", None, lambda s: s.unroll(("B", "j"))),
    ("unroll", "matmul_point_full", "matmul", lambda s: s.split(C_K, 4),
     lambda s: s.unroll(C_K)),
    ("unroll_and_jam", "matmul_m", "matmul", None, lambda s: s.unroll_and_jam(C_M, 2)),
    ("unroll_and_jam", "stencil_skewed_t", "stencil", lambda s: s.skew(S1_I, S1_T),
     lambda s: s.unroll_and_jam(S1_T, 2)),
    ("isolate", "matmul_m", "matmul", lambda s: s.tile([C_M], [4]),
     lambda s: s.isolate_full_tiles(("C", "m_tile"))),
    ("isolate", "matmul_mn", "matmul", lambda s: s.tile([C_M, C_N], [4, 8]),
     lambda s: s.isolate_full_tiles(("C", "n_tile"))),
    ("isolate", "pc_split", "pc", lambda s: s.split(("B", "j"), 4),
     lambda s: s.isolate_full_tiles(("B", "j_outer"))),
    ("isolate", "matmul_unrolled_k", "matmul", lambda s: s.unroll(C_K, 4),
     lambda s: s.isolate_full_tiles(C_K)),
]


@pytest.mark.parametrize("transform,case,prog,prep,fn", GOLDEN,
                         ids=[f"{t}_{c}" for t, c, _, _, _ in GOLDEN])
def test_golden_before_after(golden, transform, case, prog, prep, fn):
    before = start(SOURCES[prog])
    if prep is not None:
        before = prep(before)
    after = fn(before)
    assert transform == "isolate" or any(st["op"] == transform for st in after.recipe)
    golden(f"schedules/{transform}_{case}.txt",
           str(before) + before.loop_nest() + "---\n" + str(after) + after.loop_nest())


def test_unroll_and_jam_golden_on_isl_schedule(golden):
    before = start(MATMUL, start="isl")
    after = before.unroll_and_jam(C_M, 2)
    golden("schedules/unroll_and_jam_matmul_isl_m.txt",
           str(before) + before.loop_nest() + "---\n" + str(after) + after.loop_nest())


# ----------------------------------------------------------- differential

#: (id, program, transformation)
DIFFERENTIAL = [
    ("skew", "stencil", lambda s: s.skew(S1_I, S1_T)),
    ("skew_negative", "stencil", lambda s: s.skew(S1_I, S1_T, -1)),
    ("skew_factor_3", "stencil", lambda s: s.skew(S1_I, S1_T, 3)),
    ("skew_enclosing", "matmul", lambda s: s.skew(C_K, C_M, 2)),
    ("skew_tiled", "stencil", lambda s: s.skew(S1_I, S1_T).tile([S1_T, S1_I], [3, 5])),
    ("wavefront", "stencil", wavefront),
    ("shift", "matmul", lambda s: s.shift("S0", C_M, 1)),
    ("shift_negative", "matmul", lambda s: s.shift("S0_init", C_N, -3)),
    ("shift_tensor", "pc", lambda s: s.shift("B", ("B", "i"), -2)),
    ("shift_both", "matmul", lambda s: s.shift("C", C_M, 5)),
    ("reverse", "stencil", lambda s: s.reverse(S1_I)),
    ("reverse_pc", "pc", lambda s: s.reverse(("T", "i")).reverse(("B", "j"))),
    ("reverse_k", "matmul", lambda s: s.with_reassociation().reverse(C_K)),
    ("unroll_k_3", "matmul", lambda s: s.unroll(C_K, 3)),
    ("unroll_m_4", "matmul", lambda s: s.unroll(C_M, 4)),
    ("unroll_stencil", "stencil", lambda s: s.unroll(S1_I, 2)),
    ("unroll_full", "four", lambda s: s.unroll(("B", "j"))),
    ("unroll_point", "matmul", lambda s: s.tile([C_M, C_N], [3, 2]).unroll(C_N)),
    ("unroll_and_jam_m", "matmul", lambda s: s.unroll_and_jam(C_M, 2)),
    ("unroll_and_jam_m3", "matmul", lambda s: s.unroll_and_jam(C_M, 3)),
    ("unroll_and_jam_isl", "matmul",
     lambda s: Schedule.from_program(s.program, start="isl").unroll_and_jam(C_M, 3)),
    ("unroll_and_jam_k", "matmul",
     lambda s: Schedule.from_program(s.program, start="isl").interchange(C_M, C_K)
     .unroll_and_jam(C_K, 2)),
    ("unroll_and_jam_skewed", "stencil",
     lambda s: s.skew(S1_I, S1_T).unroll_and_jam(S1_T, 2)),
    ("unroll_and_jam_i", "stencil", lambda s: s.unroll_and_jam(S1_I, 3)),
    ("isolate_m", "matmul", lambda s: s.tile([C_M], [4]).isolate_full_tiles(("C", "m_tile"))),
    ("isolate_mn", "matmul", tiled_isolated),
    ("isolate_split", "pc",
     lambda s: s.split(("B", "j"), 4).isolate_full_tiles(("B", "j_outer"))),
    ("isolate_size_1", "matmul",
     lambda s: s.tile([C_M, C_N], [1, 3]).isolate_full_tiles(("C", "n_tile"))),
    ("isolate_skewed", "stencil",
     lambda s: s.skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4])
     .isolate_full_tiles(("S1", "t_tile"))),
    ("isolate_unroll", "matmul", lambda s: tiled_isolated(s).unroll(C_N)),
    ("unroll_isolate", "matmul", lambda s: s.unroll(C_K, 4).isolate_full_tiles(C_K)),
]


@pytest.mark.parametrize("prog,fn", [(p, f) for _, p, f in DIFFERENTIAL],
                         ids=[i for i, _, _ in DIFFERENTIAL])
def test_differential(prog, fn):
    s = fn(start(SOURCES[prog]))
    for sizes in SIZES[prog]:
        check(s, sizes)


# ------------------------------------------------------------- wavefront

def test_wavefront_end_to_end():
    w = wavefront(start(STENCIL))
    nest = w.loop_nest()
    # the wavefront loop outside, the parallel tile loop inside it
    assert re.search(r"for \(i_tile = 0;.*\n\s*#pragma omp parallel for\n\s*for \(t_tile",
                     nest), nest
    kernel = check(w, dict(N=19, T=9))
    # the wavefront loop runs in one parallel region, the tile loop a
    # worksharing loop of it (backends/c/emit.py, _Emitter.region)
    assert re.search(r"#pragma omp parallel num_threads\(polyc_team\)\n\s*for \(int64_t c0",
                     kernel.source), kernel.source
    assert "#pragma omp for schedule(static)" in kernel.source
    assert [st["op"] for st in w.recipe] == ["skew", "tile", "skew", "interchange",
                                             "parallel"]


def _seidel1d(tsteps, A):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0


def test_wavefront_of_tiled_loop_program_bands():
    """A loop program's source order has one band per loop: tile merges
    ``t`` and ``i`` into a band without the permutable flag, which
    wavefront checks exactly instead of refusing it."""
    k = polyc.kernel(_seidel1d)
    A0 = np.random.default_rng(3).random(23)
    s = Schedule.from_program(k.specialize(7, A0.copy()).program)
    s = s.skew(("S0", "i"), ("S0", "t")).tile([("S0", "t"), ("S0", "i")], [2, 4])
    w = s.wavefront(("S0", "t_tile")).parallel(("S0", "i_tile"))
    assert "#pragma omp parallel for\n" in w.loop_nest()
    for T in (0, 1, 7):
        want, got = A0.copy(), A0.copy()
        _seidel1d(T, want)
        k.with_schedule(w.to_recipe())(T, got)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    # a band that is not permutable is still refused, naming the dependence
    msg = refused(start(STENCIL), lambda s: s.wavefront(S1_T), IllegalScheduleError)
    assert "loop i runs backwards along the flow dependence on tensor A" in msg, msg


def test_skew_makes_the_stencil_band_permutable():
    s = start(STENCIL)
    assert "permutable" not in str(s)
    k = s.skew(S1_I, S1_T)
    assert "band (t, i)  [permutable; coincident: i]" in str(k)
    # skewing the other way leaves a backward dependence: not permutable
    assert "band (t, i)  [coincident: i]" in str(s.skew(S1_I, S1_T, -1))


def test_unskewed_tile_refused():
    msg = refused(start(STENCIL), lambda s: s.tile([S1_T, S1_I], [4, 4]),
                  IllegalScheduleError)
    assert msg.startswith("tile([S1.t, S1.i], [4, 4]) is illegal")
    assert "flow dependence on tensor A from statement S1 to statement S1" in msg


def test_negative_skew_then_tile_refused():
    k = start(STENCIL).skew(S1_I, S1_T, -1)          # legal on its own
    msg = refused(k, lambda s: s.tile([S1_T, S1_I], [4, 4]), IllegalScheduleError)
    assert "tile([S1.t, S1.i], [4, 4]) is illegal" in msg
    assert "flow dependence on tensor A from statement S1 to statement S1" in msg
    assert re.search(r"instance S1\[t=\d+, i=\d+\] -> S1\[t=\d+, i=\d+\]", msg), msg


@pytest.mark.parametrize("loop", ["t_tile", "i_tile"])
def test_parallel_on_unskewed_tile_loop_refused(loop):
    tiled = start(STENCIL).skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4])
    msg = refused(tiled, lambda s: s.parallel(("S1", loop)), IllegalScheduleError)
    assert f"loop {loop} cannot run parallel" in msg
    assert "flow dependence on tensor A from statement S1 to statement S1" in msg


def test_parallel_on_the_wavefront_loop_refused():
    w = (start(STENCIL).skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4])
         .skew(("S1", "i_tile"), ("S1", "t_tile"))
         .interchange(("S1", "t_tile"), ("S1", "i_tile")))
    msg = refused(w, lambda s: s.parallel(("S1", "i_tile")), IllegalScheduleError)
    assert "loop i_tile cannot run parallel" in msg
    assert "flow dependence on tensor A from statement S1 to statement S1" in msg


# ------------------------------------------------------------ illegal uses

#: (id, program, preparation, transformation, kind, tensor, source, sink)
ILLEGAL = [
    ("shift_init_after_update", "matmul", None, lambda s: s.shift("S0_init", C_M, 1),
     "flow", "C", "S0_init", "S0"),
    ("shift_update_before_init", "matmul", None, lambda s: s.shift("S0", C_N, -1),
     "flow", "C", "S0_init", "S0"),
    ("reverse_k", "matmul", None, lambda s: s.reverse(C_K), "flow", "C", "S0", "S0"),
    ("reverse_t", "stencil", None, lambda s: s.reverse(S1_T), "flow", "A", "S1", "S1"),
    ("reverse_tiled_t", "stencil", lambda s: s.skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4]),
     lambda s: s.reverse(("S1", "t_tile")), "flow", "A", "S1", "S1"),
    ("skewed_interchange", "stencil", lambda s: s.skew(S1_I, S1_T, -1),
     lambda s: s.interchange(S1_T, S1_I), "flow", "A", "S1", "S1"),
    ("unroll_and_jam_t", "stencil", None, lambda s: s.unroll_and_jam(S1_T, 2),
     "flow", "A", "S1", "S1"),
]


@pytest.mark.parametrize("prog,prep,fn,kind,tensor,src,dst",
                         [c[1:] for c in ILLEGAL], ids=[c[0] for c in ILLEGAL])
def test_illegal_refused(prog, prep, fn, kind, tensor, src, dst):
    s = start(SOURCES[prog])
    if prep is not None:
        s = prep(s)
    msg = refused(s, fn, IllegalScheduleError)
    assert " is illegal" in msg
    assert f"the {kind} dependence on tensor {tensor} from statement {src} to " \
           f"statement {dst}" in msg, msg
    assert re.search(rf"instance {src}\[[^]]*\] -> {dst}\[", msg), msg


def test_reverse_reduction_allowed_with_reassociation():
    s = start(MATMUL)
    refused(s, lambda s: s.reverse(C_K), IllegalScheduleError)
    r = s.with_reassociation().reverse(C_K)
    assert "for (k = -K + 1; k <= 0; k++)" in r.loop_nest()
    check(r, dict(M=3, N=5, K=7))


# ----------------------------------------------------------- generated C

def _body(kernel) -> str:
    return kernel.source[kernel.source.index("void polyc_kernel"):]


def test_unroll_copies_in_c():
    kernel = check(start(MATMUL).unroll(C_K, 3), dict(M=2, N=3, K=7))
    body = _body(kernel)
    # one initialisation and three update copies, one loop over k stepping by 3
    assert body.count("/* C(m, n) +=! A(m, k) * B(k, n) */") == 4
    assert len(re.findall(r"for \(int64_t c\d+ = ", body)) == 3
    assert re.search(r"c2 < p_K; c2 \+= 3\)", body), body
    for k in (r"c2", r"\(c2 \+ INT64_C\(1\)\)", r"\(c2 \+ INT64_C\(2\)\)"):
        assert re.search(rf"int64_t const i_k = {k};", body), k


def test_unrolled_full_strips_unguarded_in_c():
    kernel = check(start(MATMUL).unroll(C_K, 4).isolate_full_tiles(C_K),
                   dict(M=2, N=3, K=11))
    body = _body(kernel)
    loop = re.search(r"for \(int64_t (c\d+) = INT64_C\(0\); \1 < \(p_K - INT64_C\(3\)\); "
                     r"\1 \+= 4\)", body)
    assert loop, body
    strip = _block(body, loop.start())
    assert "if (" not in strip and strip.count("/* C(m, n) +=! A(m, k) * B(k, n) */") == 4


def test_full_unroll_in_c():
    kernel = check(start(FOUR).unroll(("B", "j")), dict(N=5))
    body = _body(kernel)
    assert body.count("/* B(i, j) = A(i, j) * 2.0 */") == 4
    assert len(re.findall(r"for \(int64_t ", body)) == 1
    for j in range(4):
        assert f"int64_t const i_j = INT64_C({j});" in body


def _block(body: str, at: int) -> str:
    """The C statement starting at ``at``: through its matching ``}``."""
    depth, i = 0, body.index("{", at)
    while True:
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        if depth == 0:
            return body[at:i + 1]
        i += 1


def test_isolated_full_tiles_have_constant_bounds():
    kernel = check(tiled_isolated(start(MATMUL)), dict(M=9, N=13, K=3))
    body = _body(kernel)
    # a full tile: both point loops from the tile origin to origin + size - 1
    full = re.search(r"for \(int64_t (c\d+) = (c\d+); \1 <= \(\2 \+ INT64_C\(3\)\); "
                     r"\1 \+= 1\)\s*\{\s*"
                     r"for \(int64_t (c\d+) = (c\d+); \3 <= \(\4 \+ INT64_C\(7\)\); "
                     r"\3 \+= 1\)", body)
    assert full, body
    nest = _block(body, full.start())
    assert "polyc_min" not in nest and "polyc_max" not in nest, nest
    assert nest.count("/* C(m, n) +=! A(m, k) * B(k, n) */") == 2
    # the partial tiles are generated separately, with min bounds
    assert "polyc_min" in body.replace(nest, "")


def test_isolate_option_is_the_set_of_full_tiles():
    import islpy as isl

    from polyc.schedule.tree import node_at
    s = tiled_isolated(start(MATMUL))
    band = node_at(s.isl, s.loop("C", "m_tile").path)
    want = isl.UnionSet("[M, K, N] -> { isolate[[] -> [m, n]] : m mod 4 = 0 and "
                        "n mod 8 = 0 and 0 <= m <= M - 4 and 0 <= n <= N - 8 }")
    assert band.band_get_ast_build_options().is_equal(want)


# ------------------------------------------------------------- bad input

@pytest.mark.parametrize("bad", [0, 1.5, "2", None, True])
def test_bad_skew_factor(bad):
    msg = refused(start(STENCIL), lambda s: s.skew(S1_I, S1_T, bad))
    assert "skew factor must be" in msg
    assert ("got 0" in msg) if bad == 0 and bad is not True else (f"got {bad!r}" in msg)


def test_skew_by_not_an_outer_loop():
    s = start(STENCIL)
    msg = refused(s, lambda s: s.skew(S1_T, S1_I))
    assert "loop i (S1) is not an outer loop of t (S1)" in msg
    msg = refused(s, lambda s: s.skew(S1_I, ("S0", "t")))
    assert "loop t (S0) is not an outer loop of i (S1)" in msg
    msg = refused(s, lambda s: s.skew(S1_I, S1_I))
    assert "cannot skew loop i by itself" in msg
    msg = refused(start(MATMUL), lambda s: s.skew(C_M, C_K))
    assert "loop k (S0) is not an outer loop of m" in msg


@pytest.mark.parametrize("op,args", [
    ("skew", (("S1", "q"), S1_T)), ("skew", (S1_I, ("S1", "q"))),
    ("shift", ("S1", ("S1", "q"), 1)), ("reverse", (("S1", "q"),)),
    ("unroll", (("S1", "q"),)), ("unroll_and_jam", (("S1", "q"), 2)),
    ("isolate_full_tiles", (("S1", "q"),))])
def test_unknown_loop(op, args):
    msg = refused(start(STENCIL), lambda s: getattr(s, op)(*args))
    assert "no loop 'q' runs S1; its loops are: t, i" in msg
    assert msg.startswith(f"{op}(")


@pytest.mark.parametrize("bad", [1.5, "1", None, True])
def test_bad_shift_amount(bad):
    msg = refused(start(MATMUL), lambda s: s.shift("S0", C_M, bad))
    assert f"shift amount must be an integer, got {bad!r}" in msg


def test_shift_statement_not_in_loop_or_unknown():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.shift("S0_init", C_K, 1))
    assert "loop k does not run S0_init (it runs S0)" in msg
    msg = refused(s, lambda s: s.shift("S7", C_M, 1))
    assert "no statement or written tensor named 'S7'" in msg


def test_shift_zero_is_identity():
    s = start(MATMUL)
    assert s.shift("S0", C_M, 0).loop_nest() == s.loop_nest()


@pytest.mark.parametrize("bad", [0, -2, 2.5, "4", True])
def test_bad_unroll_factor(bad):
    msg = refused(start(MATMUL), lambda s: s.unroll(C_K, bad))
    assert "unroll factor must be a positive integer" in msg


@pytest.mark.parametrize("bad", [0, -1, 1.0, None])
def test_bad_unroll_and_jam_factor(bad):
    msg = refused(start(MATMUL), lambda s: s.unroll_and_jam(C_M, bad))
    assert "unroll_and_jam factor must be a positive integer" in msg


def test_huge_unroll_factor_refused():
    msg = refused(start(MATMUL), lambda s: s.unroll(C_K, 100000))
    assert "exceeds" in msg


def test_full_unroll_needs_constant_trip_count():
    msg = refused(start(MATMUL), lambda s: s.unroll(C_K))
    assert "loop k has no constant trip count (it depends on K)" in msg
    assert "unroll it by a factor" in msg
    msg = refused(start(STENCIL), lambda s: s.unroll(S1_T))
    assert "loop t has no constant trip count (it depends on T)" in msg
    # a point loop has one: at most the tile size
    check(start(MATMUL).split(C_K, 4).unroll(C_K), dict(M=2, N=2, K=7))


def test_isolate_needs_a_tile_band():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.isolate_full_tiles(C_M))
    assert "the band of loop m (m, n) is not a tile band" in msg
    t = s.tile([C_M, C_N], [4, 4])
    msg = refused(t, lambda s: s.isolate_full_tiles(C_M))
    assert "m is a point loop, pass a tile loop such as m_tile" in msg
    # skewed tile loops are not a tile band any more
    w = start(STENCIL).skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4]).skew(
        ("S1", "i_tile"), ("S1", "t_tile"))
    msg = refused(w, lambda s: s.isolate_full_tiles(("S1", "t_tile")))
    assert "is not a tile band" in msg
    # the GPU mapping splits tile bands: the message says to isolate first
    g = start(MATMUL, start="isl").tile(
        [C_M, C_N, C_K], [8, 8, 8]).map_to_blocks(
        [("C", "m_tile"), ("C", "n_tile")]).map_to_threads([C_M, C_N])
    msg = refused(g, lambda s: s.isolate_full_tiles(("C", "k_tile")))
    assert "isolate full tiles before mapping" in msg


def test_isolate_twice_keeps_one_option():
    s = tiled_isolated(start(MATMUL))
    again = s.isolate_full_tiles(("C", "n_tile"))
    assert str(again).count("isolate[") == 1
    assert again.to_text() == s.to_text()


def test_skew_drops_a_stale_isolate_option():
    s = start(STENCIL).skew(S1_I, S1_T).tile([S1_T, S1_I], [4, 4]).isolate_full_tiles(
        ("S1", "t_tile"))
    assert "isolate[" in str(s)
    w = s.skew(("S1", "i_tile"), ("S1", "t_tile"))
    assert "isolate[" not in str(w)
    check(w, dict(N=9, T=6))


def test_outer_change_over_an_isolated_band_refused():
    s = start(PRODUCER_CONSUMER).split(("B", "j"), 4).isolate_full_tiles(("B", "j_outer"))
    for fn in (lambda s: s.reverse(("B", "i")), lambda s: s.shift("B", ("B", "i"), 1)):
        msg = refused(s, fn)
        assert "loop i encloses a node that depends on its values" in msg
        assert "before isolate_full_tiles" in msg


def test_unroll_in_isolated_full_tiles():
    # options of an isolated band apply to the isolated part only in the
    # form [isolate[] -> unroll[k]]: both forms are set, in either order
    s = start(FOUR).tile([("B", "i"), ("B", "j")], [3, 2])
    for t in (s.isolate_full_tiles(("B", "i_tile")).unroll(("B", "j_tile")),
              s.unroll(("B", "j_tile")).isolate_full_tiles(("B", "i_tile"))):
        assert "[isolate[] -> unroll[1]]" in str(t)
        assert "j_tile" not in t.loop_nest()           # unrolled everywhere
        for sizes in SIZES["four"]:
            check(t, sizes)


# ------------------------------------------------------------ names

def test_unroll_names():
    s = start(MATMUL).unroll(C_K, 2)
    names = [lp.name for lp in s.loops()]
    assert names == ["m", "n", "k", "k_unrolled"]
    # the outer keeps the name: it can be transformed further
    assert "k += 2" in s.loop_nest()
    again = s.unroll(C_K, 2)
    assert [lp.name for lp in again.loops()][-2:] == ["k_unrolled2", "k_unrolled"]
    j = start(MATMUL).unroll_and_jam(C_M, 2)
    assert [lp.name for lp in j.loops()] == ["m", "n", "m_unrolled", "k"]


def test_skew_shift_reverse_keep_names():
    s = start(STENCIL)
    for t in (s.skew(S1_I, S1_T), s.shift("S1", S1_I, 3), s.reverse(S1_I)):
        assert [lp.name for lp in t.loops()] == ["t", "i", "t", "i"]


# --------------------------------------------------- recipes and text form

#: (id, program, transformation): each replays and round-trips
ROUND_TRIP = [
    ("skew", "stencil", lambda s: s.skew(S1_I, S1_T, 2)),
    ("wavefront", "stencil", wavefront),
    ("shift", "matmul", lambda s: s.shift("S0_init", C_N, -2)),
    ("reverse", "stencil", lambda s: s.reverse(S1_I)),
    ("reverse_reassociated", "matmul", lambda s: s.with_reassociation().reverse(C_K)),
    ("unroll", "matmul", lambda s: s.unroll(C_K, 3)),
    ("unroll_full", "four", lambda s: s.unroll(("B", "j"))),
    ("unroll_and_jam", "matmul", lambda s: s.unroll_and_jam(C_M, 2)),
    ("isolate", "matmul", tiled_isolated),
    ("isolate_unroll", "matmul", lambda s: tiled_isolated(s).unroll(C_N)),
    ("unroll_isolate", "matmul", lambda s: s.unroll(C_K, 4).isolate_full_tiles(C_K)),
]


@pytest.mark.parametrize("prog,fn", [(p, f) for _, p, f in ROUND_TRIP],
                         ids=[i for i, _, _ in ROUND_TRIP])
def test_recipe_round_trip(prog, fn):
    s = fn(start(SOURCES[prog]))
    again = Schedule.replay(s.program, s.to_recipe())
    assert again.to_text() == s.to_text()
    assert again.recipe == s.recipe
    assert compile_schedule(again).source == compile_schedule(s).source


@pytest.mark.parametrize("prog,fn", [(p, f) for _, p, f in ROUND_TRIP],
                         ids=[i for i, _, _ in ROUND_TRIP])
def test_text_round_trip_keeps_the_tree(prog, fn):
    s = fn(start(SOURCES[prog]))
    back = s.from_text(s.to_text())
    # same tree (the printout shows names, flags and unroll/isolate options),
    # same order, same code; isl may list the pieces of a union in another
    # order, so compare the trees rather than the text
    assert str(back) == str(s)
    assert back.isl.get_map().is_equal(s.isl.get_map())
    assert back.loop_nest() == s.loop_nest()
    assert compile_schedule(back).source == compile_schedule(s).source
    if "unroll" in s.to_text() or "isolate" in s.to_text():
        assert ("options:" in back.to_text()) and ("options:" in str(back))


def test_options_survive_the_text_form():
    for s in (start(MATMUL).unroll(C_K, 2), tiled_isolated(start(MATMUL))):
        text = s.to_text()
        assert 'options: "' in text
        back = s.from_text(text)
        assert ("unroll[0]" in text) == ("unroll[0]" in back.to_text())
        assert ("isolate[" in text) == ("isolate[" in back.to_text())


# ------------------------------------------------------------ docstrings

@pytest.mark.parametrize("op,kind", [("skew", "Checked"), ("shift", "Checked"),
                                     ("reverse", "Checked"), ("unroll", "Structural"),
                                     ("unroll_and_jam", "Checked"),
                                     ("isolate_full_tiles", "Structural")])
def test_docstrings(op, kind):
    from polyc.schedule.language import KINDS
    doc = getattr(Schedule, op).__doc__ or ""
    assert "Before / after" in doc, op
    assert kind in doc, op
    assert KINDS[op] == kind.lower(), op
