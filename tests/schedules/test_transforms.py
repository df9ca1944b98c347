"""The core transformations of the schedule language: tile, split, reorder,
interchange, parallel, vectorize, mark.

Per transformation: a golden before/after printout (tree and loop nest;
``--accept`` rewrites ``tests/golden/schedules/<transform>_<case>.txt``), a
differential check against numpy at awkward sizes (1, primes, sizes no tile
size divides, zero extents), illegal uses refused with
:class:`~polyc.errors.IllegalScheduleError` naming the dependence kind, the
tensor and the statements, and the bad-input :class:`~polyc.errors.ScheduleError`
cases.  A refused transformation leaves the schedule the user holds as it
was; a successful one returns a new object.
"""

from __future__ import annotations

import numpy as np
import pytest

from polyc.errors import IllegalScheduleError, ScheduleError
from polyc.schedule.language import METHODS, Schedule

from .util import ANTI, MATMUL, PRODUCER_CONSUMER, RECUR, STENCIL, check, refused, start

#: three loops in one band, no reduction: every permutation is legal
ADD3 = """
def add3(float(B, M, N) X, float(B, M, N) Y) -> (Z) {
    Z(b, m, n) = X(b, m, n) + Y(b, m, n)
}
"""


C_M, C_N, C_K = ("C", "m"), ("C", "n"), ("C", "k")

#: size sets per program: 1, zero extents, primes, sizes that the tile sizes
#: used below (2..5, 32) do not divide
SIZES = {
    "matmul": [dict(M=1, N=1, K=1), dict(M=7, N=13, K=5), dict(M=0, N=3, K=2),
               dict(M=3, N=5, K=0), dict(M=2, N=0, K=3), dict(M=33, N=17, K=11)],
    "pc": [dict(N=1, M=1), dict(N=5, M=7), dict(N=0, M=3), dict(N=9, M=0),
           dict(N=13, M=11)],
    "stencil": [dict(N=1, T=1), dict(N=2, T=3), dict(N=3, T=2), dict(N=0, T=2),
                dict(N=7, T=0), dict(N=11, T=5)],
    "add3": [dict(B=1, M=1, N=1), dict(B=2, M=3, N=5), dict(B=0, M=2, N=2),
             dict(B=3, M=7, N=0), dict(B=5, M=11, N=13)],
    "recur": [dict(N=1, M=1), dict(N=3, M=1), dict(N=5, M=7), dict(N=0, M=3),
              dict(N=11, M=13)],
    "anti": [dict(N=1, M=1), dict(N=2, M=2), dict(N=5, M=7), dict(N=0, M=3),
             dict(N=11, M=13)],
}
SOURCES = {"matmul": MATMUL, "pc": PRODUCER_CONSUMER, "stencil": STENCIL, "add3": ADD3,
           "recur": RECUR, "anti": ANTI}


# ----------------------------------------------------------------- golden

#: (transform, case, program, transformation)
GOLDEN = [
    ("tile", "matmul_mn", "matmul", lambda s: s.tile([C_M, C_N], [32, 32])),
    ("tile", "pc_producer", "pc", lambda s: s.tile([("T", "i"), ("T", "j")], [4, 8])),
    ("tile", "add3_three", "add3", lambda s: s.tile([("Z", "b"), ("Z", "m"), ("Z", "n")],
                                                     [2, 3, 5])),
    ("split", "matmul_k", "matmul", lambda s: s.split(C_K, 4)),
    ("split", "stencil_i", "stencil", lambda s: s.split(("S1", "i"), 3)),
    ("reorder", "add3_nbm", "add3", lambda s: s.reorder([("Z", "n"), ("Z", "b"),
                                                          ("Z", "m")])),
    ("reorder", "matmul_tiled", "matmul",
     lambda s: s.tile([C_M, C_N], [2, 3]).reorder([C_M, ("C", "n_tile")])),
    ("interchange", "matmul_mn", "matmul", lambda s: s.interchange(C_M, C_N)),
    ("interchange", "pc_producer", "pc", lambda s: s.interchange(("T", "i"), ("T", "j"))),
    ("parallel", "matmul_m", "matmul", lambda s: s.parallel(C_M)),
    ("parallel", "matmul_n", "matmul", lambda s: s.parallel(C_N)),
    ("parallel", "stencil_i", "stencil", lambda s: s.parallel(("S1", "i"))),
    ("vectorize", "pc_consumer", "pc", lambda s: s.vectorize(("B", "j"))),
    ("vectorize", "matmul_k_reassociated", "matmul",
     lambda s: s.with_reassociation().vectorize(C_K)),
    ("mark", "matmul_k", "matmul", lambda s: s.mark(C_K, "tensorize_candidate")),
    ("mark", "stencil_t", "stencil", lambda s: s.mark(("S1", "t"), "wavefront")),
]


@pytest.mark.parametrize("transform,case,prog,fn", GOLDEN,
                         ids=[f"{t}_{c}" for t, c, _, _ in GOLDEN])
def test_golden_before_after(golden, transform, case, prog, fn):
    before = start(SOURCES[prog])
    after = fn(before)
    assert after.recipe[-1]["op"] == transform
    golden(f"schedules/{transform}_{case}.txt",
           str(before) + before.loop_nest() + "---\n" + str(after) + after.loop_nest())


def test_every_core_transform_has_a_golden_case():
    core = {"tile", "split", "reorder", "interchange", "parallel", "vectorize", "mark"}
    assert core <= {t for t, _, _, _ in GOLDEN}
    assert core <= set(METHODS)


# ----------------------------------------------------------- differential

#: (id, program, transformation)
DIFFERENTIAL = [
    ("tile_matmul_mn_32", "matmul", lambda s: s.tile([C_M, C_N], [32, 32])),
    ("tile_matmul_mn_3x5", "matmul", lambda s: s.tile([C_M, C_N], [3, 5])),
    ("tile_matmul_m_1", "matmul", lambda s: s.tile([C_M], [1])),
    ("tile_matmul_scalar_size", "matmul", lambda s: s.tile([C_M, C_N], 4)),
    ("tile_matmul_k", "matmul", lambda s: s.tile(C_K, [4])),
    ("tile_pc_both", "pc", lambda s: s.tile([("T", "i"), ("T", "j")], [2, 3])
     .tile([("B", "i"), ("B", "j")], [5, 4])),
    ("tile_add3_three", "add3", lambda s: s.tile([("Z", "b"), ("Z", "m"), ("Z", "n")],
                                                  [2, 3, 5])),
    ("tile_stencil_i", "stencil", lambda s: s.tile([("S1", "i")], [4])),
    ("tile_twice", "matmul", lambda s: s.tile([C_M, C_N], [8, 8]).tile([C_M, C_N], [2, 3])),
    ("split_matmul_k_4", "matmul", lambda s: s.split(C_K, 4)),
    ("split_matmul_all", "matmul", lambda s: s.split(C_M, 2).split(C_N, 3).split(C_K, 5)),
    ("split_matmul_1", "matmul", lambda s: s.split(C_N, 1)),
    ("split_stencil_t_i", "stencil", lambda s: s.split(("S1", "t"), 2).split(("S1", "i"), 3)),
    ("split_recur_j", "recur", lambda s: s.split(("S1", "j"), 3)),
    ("reorder_add3_nbm", "add3", lambda s: s.reorder([("Z", "n"), ("Z", "b"), ("Z", "m")])),
    ("reorder_add3_two", "add3", lambda s: s.reorder([("Z", "n"), ("Z", "b")])),
    ("reorder_matmul_tiled", "matmul",
     lambda s: s.tile([C_M, C_N], [2, 3]).reorder([C_M, ("C", "n_tile")])),
    ("reorder_matmul_tiles_inner", "matmul",
     lambda s: s.tile([C_M, C_N], [4, 3]).reorder([C_M, C_N, ("C", "m_tile"),
                                                   ("C", "n_tile")])),
    ("reorder_recur_i_inner", "recur", lambda s: s.reorder([("S1", "j"), ("S1", "i")])),
    ("interchange_matmul_mn", "matmul", lambda s: s.interchange(C_M, C_N)),
    ("interchange_pc", "pc", lambda s: s.interchange(("T", "i"), ("T", "j"))
     .interchange(("B", "j"), ("B", "i"))),
    ("interchange_stencil_init", "stencil", lambda s: s.interchange(("S0", "t"),
                                                                     ("S0", "i"))),
    ("interchange_add3_split", "add3", lambda s: s.split(("Z", "m"), 2)
     .interchange(("Z", "b"), ("Z", "n"))),
    ("interchange_anti_init", "anti", lambda s: s.interchange(("S0", "i"), ("S0", "j"))),
    ("parallel_matmul_m", "matmul", lambda s: s.parallel(C_M)),
    ("parallel_matmul_n", "matmul", lambda s: s.parallel(C_N)),
    ("parallel_stencil_i", "stencil", lambda s: s.parallel(("S1", "i"))),
    ("parallel_recur_i", "recur", lambda s: s.parallel(("S1", "i"))),
    ("parallel_anti_j", "anti", lambda s: s.parallel(("S1", "j"))),
    ("parallel_tiled", "matmul", lambda s: s.tile([C_M, C_N], [4, 4]).parallel(("C", "m_tile"))
     .parallel(C_M)),
    ("parallel_twice", "pc", lambda s: s.parallel(("T", "i")).parallel(("T", "i"))),
    ("vectorize_pc_j", "pc", lambda s: s.vectorize(("T", "j")).vectorize(("B", "j"))),
    ("vectorize_matmul_k_reassociated", "matmul",
     lambda s: s.with_reassociation().vectorize(C_K)),
    ("vectorize_stencil_i", "stencil", lambda s: s.vectorize(("S1", "i"))),
    ("vectorize_split_point", "pc", lambda s: s.split(("B", "j"), 4).vectorize(("B", "j"))),
    ("vectorize_recur_i", "recur",
     lambda s: s.interchange(("S1", "i"), ("S1", "j")).vectorize(("S1", "i"))),
    ("mark_matmul_k", "matmul", lambda s: s.mark(C_K, "tensorize_candidate")),
    ("mark_everywhere", "stencil", lambda s: s.mark(("S0", "t"), "a").mark(("S1", "i"), "b")
     .mark(("S1", "t"), "c")),
    ("mark_omp_parallel", "matmul", lambda s: s.mark(C_M, "omp_parallel")),
    ("combined_pc", "pc", lambda s: s.tile([("T", "i"), ("T", "j")], [4, 4])
     .parallel(("T", "i_tile")).vectorize(("T", "j"))),
]


@pytest.mark.parametrize("prog,fn", [(p, f) for _, p, f in DIFFERENTIAL],
                         ids=[i for i, _, _ in DIFFERENTIAL])
def test_differential(prog, fn):
    s = fn(start(SOURCES[prog]))
    for seed, sizes in enumerate(SIZES[prog]):
        check(s, sizes, seed=seed)


@pytest.mark.parametrize("prog", sorted(SOURCES))
def test_source_order_differential(prog):
    """The untransformed start schedules themselves."""
    for sizes in SIZES[prog]:
        check(start(SOURCES[prog]), sizes)


# ---------------------------------------------------------------- illegal

#: (id, program, transformation, kind, tensor, source stmt, sink stmt)
ILLEGAL = [
    ("parallel_matmul_k", "matmul", lambda s: s.parallel(C_K), "flow", "C", "S0", "S0"),
    ("parallel_stencil_t", "stencil", lambda s: s.parallel(("S1", "t")), "flow", "A",
     "S1", "S1"),
    ("parallel_recur_j", "recur", lambda s: s.parallel(("S1", "j")), "flow", "A", "S1", "S1"),
    ("parallel_anti_i", "anti", lambda s: s.parallel(("S1", "i")), "anti", "A", "S1", "S1"),
    ("parallel_split_outer", "matmul", lambda s: s.split(C_K, 2).parallel(("C", "k_outer")),
     "flow", "C", "S0", "S0"),
    ("interchange_stencil", "stencil", lambda s: s.interchange(("S1", "t"), ("S1", "i")),
     "flow", "A", "S1", "S1"),
    ("interchange_anti", "anti", lambda s: s.interchange(("S1", "i"), ("S1", "j")),
     "anti", "A", "S1", "S1"),
    ("reorder_stencil", "stencil", lambda s: s.reorder([("S1", "i"), ("S1", "t")]),
     "flow", "A", "S1", "S1"),
    ("tile_stencil", "stencil", lambda s: s.tile([("S1", "t"), ("S1", "i")], [2, 3]),
     "flow", "A", "S1", "S1"),
    ("tile_anti", "anti", lambda s: s.tile([("S1", "i"), ("S1", "j")], [2, 2]),
     "anti", "A", "S1", "S1"),
    ("split_then_interchange", "stencil",
     lambda s: s.split(("S1", "i"), 2).interchange(("S1", "t"), ("S1", "i_outer")),
     "flow", "A", "S1", "S1"),
    ("vectorize_recur_j", "recur", lambda s: s.vectorize(("S1", "j")), "flow", "A",
     "S1", "S1"),
    ("vectorize_matmul_k", "matmul", lambda s: s.vectorize(C_K), "reduction", "C",
     "S0", "S0"),
    ("vectorize_after_split", "matmul", lambda s: s.split(C_K, 4).vectorize(C_K),
     "reduction", "C", "S0", "S0"),
    ("mark_omp_parallel_k", "matmul", lambda s: s.mark(C_K, "omp_parallel"), "flow", "C",
     "S0", "S0"),
    ("mark_omp_simd_recur", "recur", lambda s: s.mark(("S1", "j"), "omp_simd"), "flow", "A",
     "S1", "S1"),
    ("reassociated_parallel_k", "matmul", lambda s: s.with_reassociation().parallel(C_K),
     "flow", "C", "S0", "S0"),
    ("wavefront_unskewed_stencil", "stencil", lambda s: s.wavefront(("S1", "t")),
     "flow", "A", "S1", "S1"),
]


@pytest.mark.parametrize("prog,fn,kind,tensor,src,dst",
                         [x[1:] for x in ILLEGAL], ids=[x[0] for x in ILLEGAL])
def test_illegal_refused(prog, fn, kind, tensor, src, dst):
    s = start(SOURCES[prog])
    msg = refused(s, fn, IllegalScheduleError)
    assert f"{kind} dependence on tensor {tensor}" in msg, msg
    assert f"from statement {src} to statement {dst}" in msg, msg
    # one concrete instance pair: S1[t=1, i=2] -> S1[t=2, i=1]
    assert f"{src}[" in msg and f"-> {dst}[" in msg, msg


def test_illegal_message_names_the_transformation():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.parallel(C_K), IllegalScheduleError)
    assert msg.startswith("parallel(C.k) is illegal"), msg
    assert "loop k cannot run parallel" in msg
    assert "distance (0, 0, 1)" in msg
    msg = refused(start(STENCIL), lambda s: s.interchange(("S1", "t"), ("S1", "i")),
                  IllegalScheduleError)
    assert msg.startswith("interchange(S1.t, S1.i) is illegal"), msg
    assert "would run in the wrong order" in msg
    msg = refused(s, lambda s: s.vectorize(C_K), IllegalScheduleError)
    assert "with_reassociation()" in msg


def test_illegal_in_the_middle_keeps_earlier_schedule():
    s = start(STENCIL).split(("S1", "i"), 2)
    refused(s, lambda s: s.interchange(("S1", "t"), ("S1", "i_outer")), IllegalScheduleError)
    assert [st["op"] for st in s.recipe] == ["split"]


# -------------------------------------------------------------- bad input

def test_unknown_loop_lists_existing_loops():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.split(("C", "q"), 2))
    assert "no loop 'q' runs C; its loops are: m, n, k" in msg, msg
    msg = refused(s, lambda s: s.loop("C", "q"))
    assert "its loops are: m, n, k" in msg
    msg = refused(s, lambda s: s.parallel(("S0_init", "k")))
    assert "its loops are: m, n" in msg, msg
    msg = refused(s, lambda s: s.tile([C_M, ("C", "x")], [2, 2]))
    assert "'x'" in msg and "m, n, k" in msg


def test_typos_suggest_the_name_meant():
    s = start(MATMUL)
    msg = refused(s.tile([C_M], [4]), lambda s: s.parallel(("C", "m_tiel")))
    assert "no loop 'm_tiel' runs C (did you mean 'm_tile'?)" in msg, msg
    msg = refused(s, lambda s: s.parallel(("SO", "m")))
    assert "named 'SO' in matmul (did you mean 'S0'?)" in msg, msg
    msg = refused(s, lambda s: s.parallel(("c", "m")))
    assert "(did you mean 'C'?)" in msg, msg
    msg = refused(s, lambda s: s.apply("tiel", C_M, 4))
    assert "unknown transformation 'tiel' (did you mean 'tile'?)" in msg, msg
    with pytest.raises(ScheduleError, match=r"'paralel' \(did you mean 'parallel'\?\)"):
        Schedule.replay(s.program, [{"op": "paralel", "args": [["C", "m"]]}])
    # nothing close: no guess
    assert "did you mean" not in refused(s, lambda s: s.parallel(("C", "x")))
    # the case as written counts first: S4 is closer to S0 than to a tensor s
    from polyc.schedule.registry import did_you_mean
    assert did_you_mean("S4", ["s", "S0_init", "S0"]) == " (did you mean 'S0'?)"


def test_numpy_sizes_tc_source_and_message_arguments():
    s = start(MATMUL)
    t = s.tile([C_M, C_N], np.array([4, 8]))            # numpy sizes record as integers
    assert t.to_recipe()["steps"][0]["args"][1] == [4, 8]
    assert Schedule.replay(s.program, t.to_json()).to_text() == t.to_text()
    check(t, dict(M=9, N=10, K=3))
    # TC source and compiled kernels are accepted where a program is
    assert Schedule.from_program(MATMUL).to_text() == s.to_text()
    assert "from_program: expected a program" in refused(s, lambda _: Schedule.from_program(3))
    # duplicate names are refused, and lists of names are shown as lists
    msg = refused(s, lambda s: s.tile([C_M, C_N], [4, 4], names=["x", "x"]))
    assert "names=['x', 'x']): tile: names must be distinct" in msg, msg
    pc = start(PRODUCER_CONSUMER).fuse("T", "B")
    msg = refused(pc, lambda s: s.distribute(("B", "i"), ["S0", "S1"], ["S1"]))
    assert msg.startswith("distribute(B.i, ['S0', 'S1'], ['S1']): "), msg


SCALE4 = "def scale(float(N, 4) A) -> (B) { B(i, j) = A(i, j) * 2.0 + A(i, 3 - j) }"


def test_a_loop_above_a_completely_unrolled_one_is_innermost():
    s = start(SCALE4)
    v = s.unroll(("B", "j")).vectorize(("B", "i"))     # j leaves no loop in the code
    assert "#pragma omp simd\nfor (i = 0; i < N; i++)" in v.loop_nest()
    for n in (0, 1, 7, 33):
        check(v, dict(N=n))
    # unrolled by a factor, j stays a loop: i is not innermost
    msg = refused(s, lambda s: s.unroll(("B", "j"), 2).vectorize(("B", "i")))
    assert "loop i is not innermost" in msg


def test_unknown_statement_or_tensor():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.parallel(("Z", "m")))
    assert "no statement or written tensor named 'Z' in matmul" in msg, msg
    assert "statements: S0_init, S0" in msg and "written tensors: C" in msg
    # A is read, not written: not a target
    msg = refused(s, lambda s: s.vectorize(("A", "m")))
    assert "'A'" in msg


def test_ambiguous_loop_name():
    s = start(STENCIL)
    msg = refused(s, lambda s: s.parallel(("A", "t")))
    assert "loop 't' of A is ambiguous" in msg, msg
    assert "(S0)" in msg and "(S1)" in msg
    assert "path" in msg
    # naming the statement resolves it
    assert s.parallel(("S1", "i")).recipe[-1]["op"] == "parallel"


@pytest.mark.parametrize("bad", [1.5, 2.0, True, False, "4", None, 0, -3, [2]],
                         ids=repr)
def test_bad_tile_sizes(bad):
    s = start(MATMUL)
    msg = refused(s, lambda s: s.tile([C_M, C_N], [bad, 2]))
    assert "tile size must be a positive integer" in msg, msg
    assert repr(bad) in msg or str(bad) in msg


@pytest.mark.parametrize("bad", [1.5, 2.0, True, "3", None, 0, -1], ids=repr)
def test_bad_split_factor(bad):
    s = start(MATMUL)
    msg = refused(s, lambda s: s.split(C_K, bad))
    assert "split factor must be a positive integer" in msg, msg


def test_tile_sizes_past_32_bits_are_refused():
    # a tile of 2**40 reached the C emitter's assertion on loop steps (an
    # internal AssertionError when compiling)
    msg = refused(start(MATMUL), lambda s: s.tile([C_M, C_N], [2**40, 2]))
    assert "tile size 1099511627776 is too large" in msg, msg
    msg = refused(start(MATMUL), lambda s: s.split(C_K, 2**31))
    assert "split factor 2147483648 is too large" in msg, msg
    check(start(MATMUL).tile([C_M], [2**31 - 1]), dict(M=7, N=13, K=5))


@pytest.mark.parametrize("bad", [0, -2, 1.0, True])
def test_bad_scalar_tile_size(bad):
    msg = refused(start(MATMUL), lambda s: s.tile([C_M, C_N], bad))
    assert "tile size must be a positive integer" in msg, msg


def test_numpy_integer_sizes_accepted():
    s = start(MATMUL)
    a = s.tile([C_M, C_N], [np.int64(2), np.int32(3)])
    b = s.tile([C_M, C_N], [2, 3])
    assert a.to_text() == b.to_text()
    assert s.split(C_K, np.int64(4)).to_text() == s.split(C_K, 4).to_text()


@pytest.mark.parametrize("sizes", [[3], [3, 4, 5], []], ids=str)
def test_tile_length_mismatch(sizes):
    msg = refused(start(MATMUL), lambda s: s.tile([C_M, C_N], sizes))
    assert "2 loop(s) but" in msg and f"{len(sizes)} size(s)" in msg, msg


def test_tile_non_consecutive_or_misordered():
    msg = refused(start(ADD3), lambda s: s.tile([("Z", "b"), ("Z", "n")], [2, 2]))
    assert "must be consecutive and outermost first" in msg, msg
    msg = refused(start(MATMUL), lambda s: s.tile([C_N, C_M], [2, 2]))
    assert "must be consecutive and outermost first" in msg, msg


def test_not_perfectly_nested():
    s = start(MATMUL)
    # the init S0_init sits between n and k
    for fn in (lambda s: s.interchange(C_N, C_K), lambda s: s.reorder([C_K, C_M]),
               lambda s: s.tile([C_N, C_K], [2, 2]),
               lambda s: s.reorder([C_M, C_N, C_K])):
        msg = refused(s, fn)
        assert "not in one perfectly nested band chain" in msg, msg
    # statements in sequence: loops of different statements
    msg = refused(start(PRODUCER_CONSUMER), lambda s: s.interchange(("T", "i"), ("B", "j")))
    assert "not in one perfectly nested band chain" in msg


def test_mark_between_bands_is_refused_by_name():
    s = start(MATMUL).parallel(C_N)        # splits (m, n): the mark sits between
    msg = refused(s, lambda s: s.interchange(C_M, C_N))
    assert "the mark parallel lies between them" in msg, msg


def test_loop_given_twice():
    s = start(MATMUL)
    assert "given twice" in refused(s, lambda s: s.interchange(C_M, C_M))
    assert "given twice" in refused(s, lambda s: s.reorder([C_M, "C.m"]))
    assert "given twice" in refused(s, lambda s: s.tile([C_M, s.loop("C", "m")], [2, 2]))


def test_reorder_needs_two_loops():
    assert "at least two loops" in refused(start(MATMUL), lambda s: s.reorder([C_M]))


def test_vectorize_not_innermost():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.vectorize(C_M))
    assert "loop m is not innermost" in msg, msg
    msg = refused(start(STENCIL), lambda s: s.vectorize(("S1", "t")))
    assert "not innermost" in msg


@pytest.mark.parametrize("name", ["3bad", "loops_x", "loops:m", "has space", "", 5, None],
                         ids=repr)
def test_bad_mark_names(name):
    msg = refused(start(MATMUL), lambda s: s.mark(C_K, name))
    assert "mark: the name must be an identifier" in msg, msg


def test_bad_tile_names():
    s = start(MATMUL)
    assert "names must be 2 identifier(s)" in refused(
        s, lambda s: s.tile([C_M, C_N], [2, 2], names=["a"]))
    assert "names must be 2 identifier(s)" in refused(
        s, lambda s: s.tile([C_M, C_N], [2, 2], names=["a", "1b"]))
    assert "names must be 1 identifier(s)" in refused(
        s, lambda s: s.split(C_K, 2, names=["k o"]))
    t = s.tile([C_M, C_N], [2, 2], names=["mm", "nn"])
    assert "band (mm, nn)" in str(t)
    assert t.loop("C", "mm").name == "mm"
    # a name a loop of these statements has, a size's, or an isl keyword:
    # refused (the tree would hold two loops answering to one name)
    msg = refused(s, lambda s: s.tile([C_M], [2], names=["n"]))
    assert "the name 'n' already names a loop of these statements (its loops: k, m, n)" in msg
    assert "default: m_tile" in msg, msg
    assert "already names a loop" in refused(t, lambda t: t.split(C_K, 2, names=["mm"]))
    assert "the name 'K' is a size" in refused(s, lambda s: s.split(C_K, 2, names=["K"]))
    assert "isl reads as a keyword" in refused(s, lambda s: s.tile([C_M], [2], names=["min"]))
    # split twice: the second outer loop gets a fresh name
    twice = s.split(C_K, 4).split(C_K, 2)
    assert [lp.name for lp in twice.loops() if lp.name.startswith("k_")] == ["k_outer",
                                                                            "k_outer2"]


def test_bad_loop_specs():
    s = start(MATMUL)
    assert "does not name a loop" in refused(s, lambda s: s.parallel(42))
    assert "expected a loop or a list of loops" in refused(s, lambda s: s.tile(42, [2]))
    assert "member 5 does not exist" in refused(s, lambda s: s.loop(path=(0, 0), member=5))
    assert "does not exist" in refused(s, lambda s: s.loop(path=(0, 9)))
    assert "not a band" in refused(s, lambda s: s.loop(path=(0,)))
    assert "does not exist" in refused(s, lambda s: s.parallel({"path": [0, 0], "member": 3}))
    assert "give a statement or tensor" in refused(s, lambda s: s.loop("C"))


def test_unknown_transformation():
    msg = refused(start(MATMUL), lambda s: s.apply("frobnicate", C_M))
    assert "unknown transformation 'frobnicate'" in msg
    assert "tile" in msg and "parallel" in msg


def test_wrong_argument_count_is_a_type_error_not_a_crash_inside():
    # Python's own signature check: nothing reaches isl
    s = start(MATMUL)
    with pytest.raises(TypeError):
        s.split(C_K)
    with pytest.raises(TypeError):
        s.interchange(C_M)


# ------------------------------------------------ addressing and identity

def test_loop_addressing_forms_agree():
    s = start(MATMUL)
    forms = [("C", "m"), ["C", "m"], "C.m", s.loop("C", "m"), s.loop("S0", "m"),
             {"path": [0, 0], "member": 0}, s.loop(path=(0, 0), member=0), s.loops()[0]]
    texts = {s.tile([f, C_N], [2, 3]).to_text() for f in forms}
    assert len(texts) == 1
    texts = {s.parallel(f).to_text() for f in forms}
    assert len(texts) == 1


def test_loop_handle_from_an_earlier_schedule():
    s = start(MATMUL)
    m = s.loop("C", "m")
    t = s.split(C_K, 4).parallel(m)
    assert "mark: parallel" in str(t)


def test_transforms_return_new_objects():
    s = start(MATMUL)
    text, recipe = s.to_text(), s.recipe
    for t in (s.tile([C_M, C_N], [2, 2]), s.split(C_K, 3), s.interchange(C_M, C_N),
              s.reorder([C_N, C_M]), s.parallel(C_M), s.with_reassociation().vectorize(C_K),
              s.mark(C_K, "hook")):
        assert t is not s
        assert isinstance(t, Schedule)
        assert t.to_text() != text
        assert len(t.recipe) > len(recipe)
        assert t.program is s.program or t.program.name == s.program.name
    assert s.to_text() == text and s.recipe == recipe == ()
    assert str(s) == str(start(MATMUL))


def test_chained_transforms_record_each_step():
    s = start(MATMUL)
    t = s.tile([C_M, C_N], [4, 4]).split(C_K, 2).parallel(("C", "m_tile"))
    assert [st["op"] for st in t.recipe] == ["tile", "split", "parallel"]
    # loops given as (target, name) pairs are recorded by name, not by path
    assert t.recipe[0] == {"op": "tile", "args": [[["C", "m"], ["C", "n"]], [4, 4]],
                           "kwargs": {}}
    assert s.split(s.loop("C", "k"), 2).recipe[0]["args"][0] == {"loop": ["C", "k"]}
    assert s.split(s.loops()[2], 2).recipe[0]["args"][0] == {"path": [0, 0, 0, 1, 0, 0],
                                                            "member": 0}


def test_identity_reorder_is_identity():
    s = start(MATMUL)
    assert s.reorder([C_M, C_N]).to_text() == s.to_text()
    assert s.interchange(C_M, C_N).interchange(C_M, C_N).to_text() == s.to_text()
    assert s.interchange(C_M, C_N).interchange(C_N, C_M).to_text() == s.to_text()


def test_interchange_swaps_whatever_the_argument_order():
    s = start(ADD3)
    b, m, n = ("Z", "b"), ("Z", "m"), ("Z", "n")
    assert "band (n, m, b)" in str(s.interchange(b, n))
    assert "band (n, m, b)" in str(s.interchange(n, b))
    t = s.split(m, 2)          # b | m_outer | m, n: two bands apart
    assert "band (m, m_outer, b)\n    band (n)" in str(t.interchange(b, m))
    assert t.interchange(b, m).to_text() == t.interchange(m, b).to_text()
    check(t.interchange(m, b), dict(B=3, M=5, N=2))


def test_parallel_and_mark_are_idempotent():
    s = start(MATMUL)
    p = s.parallel(C_M)
    assert p.parallel(C_M).to_text() == p.to_text()
    v = start(PRODUCER_CONSUMER).vectorize(("B", "j"))
    assert v.vectorize(("B", "j")).to_text() == v.to_text()


def test_loop_nest_shows_pragmas_and_marks():
    s = start(MATMUL)
    assert "#pragma omp parallel for\nfor (m = 0" in s.parallel(C_M).loop_nest()
    assert "#pragma omp simd reduction" in s.with_reassociation().vectorize(C_K).loop_nest()
    assert "// mark: hook" in s.mark(C_K, "hook").loop_nest()
    assert "k_outer += 4" in s.split(C_K, 4).loop_nest()


@pytest.mark.parametrize("op", ["tile", "split", "reorder", "interchange", "parallel",
                                "vectorize", "mark"])
def test_docstrings(op):
    doc = getattr(Schedule, op).__doc__ or ""
    assert "Before / after" in doc, op
    assert "Checked" in doc or "Structural" in doc, op


def test_default_names_of_derived_loops_are_identifiers():
    """Regression (found by the property test): a loop isl's scheduler skewed
    is named ``i+j``; splitting or tiling it used to be refused because the
    default name ``i+j_outer`` is not an identifier."""
    s = Schedule.from_program(start(ANTI).program, start="isl")
    assert s.loops()[0].name == "i+j"
    t = s.split(s.loops()[0], 2)
    assert "band (i_j_outer)" in str(t)
    u = s.tile([s.loops()[0], s.loops()[1]], [2, 3])
    assert "band (i_j_tile, i_tile)" in str(u)
    for sizes in SIZES["anti"]:
        check(t, sizes)
        check(u, sizes)


def test_sink_below_an_unrolled_loop_is_refused():
    """unroll_and_jam leaves an unroll option on the point loop; sinking the
    outer loop below it took away the point loop's constant trip count, and
    isl failed at code generation (an internal error).  Refused, saying to
    unroll last."""
    s = start(RECUR).unroll_and_jam(("S1", "i"), 2)
    msg = refused(s, lambda s: s.sink(("S1", "i")))
    assert "unroll" in msg and "final order" in msg
    check(s, {"N": 7, "M": 6})


def test_loops_of_a_tree_are_its_own_after_a_transformation():
    """``tree.all_loops`` remembers the last trees' loops (by identity): the
    tiled tree has its tile loops, the tree it came from still has none."""
    s = start(MATMUL)
    before = [lp.name for lp in s.loops()]
    tiled = s.tile([C_M, C_N], [32, 32])
    assert [lp.name for lp in tiled.loops()] != before
    assert any("tile" in lp.name for lp in tiled.loops())
    assert [lp.name for lp in s.loops()] == before == [lp.name for lp in s.loops()]
