"""``fuse`` and ``distribute`` (loop fusion and fission) in the schedule
language.

Per transformation: golden before/after printouts (tree and loop nest;
``--accept`` rewrites ``tests/golden/schedules/fuse_*.txt`` /
``distribute_*.txt``), differential checks against numpy at awkward sizes
(1, 0, primes), illegal uses refused with the dependence named, every
bad-input :class:`~polyc.errors.ScheduleError`, and recipe replay.  A
refused transformation leaves the schedule the user holds unchanged.
"""

from __future__ import annotations

import pytest

from polyc.config import Config
from polyc.errors import IllegalScheduleError
from polyc.schedule import initial
from polyc.schedule.language import Schedule

from .util import MATMUL, PRODUCER_CONSUMER, check, refused, start

#: a consumer reading the row its producer computes one iteration later
SHIFT = """
def shifted(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) + T(i+1, j) where i in 0:N-1
}
"""

#: T and U independent, B reads both
THREE = """
def three(float(N, M) A) -> (T, U, B) {
    T(i, j) = A(i, j) * 2.0
    U(i, j) = A(i, j) + 3.0
    B(i, j) = T(i, j) + U(i, j)
}
"""

#: B reads only T: T and B can be fused around U
SKIP = """
def skip(float(N, M) A) -> (T, U, B) {
    T(i, j) = A(i, j) * 2.0
    U(i, j) = A(i, j) + 3.0
    B(i, j) = T(i, j) + 1.0
}
"""

#: a chain T -> U -> B where B also reads T
CHAIN = """
def chain(float(N, M) A) -> (T, U, B) {
    T(i, j) = A(i, j) * 2.0
    U(i, j) = T(i, j) + 1.0
    B(i, j) = T(i, j) * U(i, j)
}
"""

#: B's rows from 1 on read the previous row of T
LAG = """
def lag(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) where i in 0:N, j in 0:M
    B(i, j) = T(i, j) + T(i-1, j) where i in 1:N, j in 0:M
}
"""

#: no dependence at all: isl's scheduler leaves the two nests in a set
INDEP = """
def indep(float(N, M) A, float(N, M) X) -> (B, C) {
    B(i, j) = A(i, j) * 2.0
    C(i, j) = X(i, j) + 1.0
}
"""

SIZES_2D = [dict(N=1, M=1), dict(N=0, M=3), dict(N=4, M=0), dict(N=5, M=7),
            dict(N=13, M=2)]
SIZES_MM = [dict(M=1, N=1, K=1), dict(M=7, N=13, K=5), dict(M=0, N=3, K=2),
            dict(M=3, N=5, K=0)]


def printout(s: Schedule) -> str:
    return str(s) + s.loop_nest()


def before_after(before: Schedule, after: Schedule) -> str:
    return printout(before) + "---\n" + printout(after)


def same_loop(a, b) -> bool:
    return (a.path, a.member) == (b.path, b.member)


def same_order(a: Schedule, b: Schedule) -> bool:
    """The same execution order and the same loop nest."""
    return a.isl.get_map().is_equal(b.isl.get_map()) and a.loop_nest() == b.loop_nest()


def check_all(s: Schedule, sizes) -> None:
    for sz in sizes:
        check(s, sz)


def replays(s: Schedule) -> None:
    """The recipe of ``s`` rebuilds the identical tree."""
    again = Schedule.replay(s._base, s.to_json())
    assert again.to_text() == s.to_text()


# ------------------------------------------------------------------ fuse

def test_fuse_loops_producer_consumer(golden):
    s = start(PRODUCER_CONSUMER)
    f = s.fuse(("T", "i"), ("B", "i"))
    golden("schedules/fuse_pc_loops.txt", before_after(s, f))
    assert f is not s and s.to_text() == start(PRODUCER_CONSUMER).to_text()
    assert same_loop(f.loop("T", "i"), f.loop("B", "i"))          # one loop runs both
    assert not same_loop(f.loop("T", "j"), f.loop("B", "j"))      # the j loops stay apart
    check_all(f, SIZES_2D)
    replays(f)


def test_fuse_statements_as_deep_as_possible(golden):
    s = start(PRODUCER_CONSUMER)
    f = s.fuse("T", "B")
    golden("schedules/fuse_pc_statements.txt", before_after(s, f))
    assert same_loop(f.loop("T", "j"), f.loop("B", "j"))
    check_all(f, SIZES_2D)
    replays(f)
    # statement names and tensor names mean the same here
    assert s.fuse("S0", "S1").to_text() == f.to_text()
    assert s.fuse(["T", "B"]).to_text() == f.to_text()


def test_fuse_name(golden):
    s = start(PRODUCER_CONSUMER)
    f = s.fuse(("T", "i"), ("B", "i"), name="row")
    assert [lp.name for lp in f.loops()] == ["row", "j", "j"]
    assert f.loop("B", "row").statements == ("S0", "S1")
    g = s.fuse("T", "B", name=["r", "c"])
    assert [lp.name for lp in g.loops()] == ["r", "c"]
    replays(f)
    replays(g)


def test_fuse_non_adjacent_siblings(golden):
    s = start(SKIP)
    f = s.fuse(("T", "i"), ("B", "i"))
    golden("schedules/fuse_skip_non_adjacent.txt", before_after(s, f))
    check_all(f, SIZES_2D)
    replays(f)


def test_fuse_nested(golden):
    s = start(THREE).fuse(("T", "i"), ("U", "i"))
    f = s.fuse(("T", "j"), ("U", "j"))
    golden("schedules/fuse_three_nested.txt", before_after(s, f))
    # the result runs as fusing the statements directly does
    assert same_order(f, start(THREE).fuse("T", "U"))
    check_all(f, SIZES_2D)
    replays(f)


def test_fuse_set_of_independent_nests(golden):
    """From isl's schedule: the nests sit in a set; the fused band's
    coincident members and permutable flag are recomputed exactly."""
    s = start(INDEP, start="isl")
    f = s.fuse(("B", "i"), ("C", "i"))
    golden("schedules/fuse_indep_isl.txt", before_after(s, f))
    check_all(f, SIZES_2D)
    g = s.fuse("B", "C")
    assert "band (i, j)  [permutable; coincident: i j]" in str(g)
    check_all(g, SIZES_2D[:3])
    # a parallel fused loop is accepted: nothing is carried
    check(g.parallel(("B", "i")), dict(N=5, M=3))


def test_fused_loop_coincidence_is_recomputed():
    """From isl's min-fusion schedule every nest claims i and j coincident;
    fused, i carries the flow dependence T(i-1, j) -> S2, so the fused band
    keeps only j coincident, and parallel(i) is refused."""
    base = start(LAG)
    auto = initial.auto_schedule(base.program, base.deps, Config(fusion="min"))
    s = Schedule.from_isl(base.program, auto, base.deps)
    assert str(s).count("coincident: i j") == 3
    f = s.fuse("T", "B")
    assert "band (i, j)  [permutable; coincident: j]" in str(f), str(f)
    check_all(f, SIZES_2D)
    check(f.parallel(("S2", "j")), dict(N=5, M=7))
    msg = refused(f, lambda f: f.parallel(("S2", "i")), IllegalScheduleError)
    assert "carries the flow dependence on tensor T from statement S0 to statement S2" in msg


def test_fuse_illegal_consumer_reads_later_row():
    s = start(SHIFT)
    msg = refused(s, lambda s: s.fuse(("T", "i"), ("B", "i")), IllegalScheduleError)
    assert msg.startswith("fuse(T.i, B.i) is illegal")
    assert "flow dependence on tensor T from statement S0 to statement S1" in msg
    assert "S0[i=1, j=0] -> S1[i=0, j=0]" in msg
    msg = refused(s, lambda s: s.fuse("T", "B"), IllegalScheduleError)
    assert "flow dependence on tensor T" in msg


def test_fuse_illegal_non_adjacent_moves_a_consumer_before_its_producer():
    s = start(THREE)
    msg = refused(s, lambda s: s.fuse(("T", "i"), ("B", "i")), IllegalScheduleError)
    assert "flow dependence on tensor U from statement S1 to statement S2" in msg


@pytest.mark.parametrize("src,call,expect", [
    (PRODUCER_CONSUMER, lambda s: s.fuse(), "give at least two loops or statements, got 0"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(("T", "i")), "give at least two"),
    (PRODUCER_CONSUMER, lambda s: s.fuse("T"), "give at least two"),
    (PRODUCER_CONSUMER, lambda s: s.fuse("T", ("B", "i")), "either loops"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(3, 4), "is neither a loop nor"),
    (PRODUCER_CONSUMER, lambda s: s.fuse("T", "X"), "no statement or written tensor named 'X'"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(("T", "q"), ("B", "i")), "no loop 'q' runs T"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(("T", "j"), ("B", "j")),
     "loop j is not the outermost loop of its band (i, j)"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(("T", "i"), ("T", "i")), "in the same subtree"),
    (PRODUCER_CONSUMER, lambda s: s.fuse(("T", "i"), ("B", "i"), name="3x"),
     "name must be an identifier"),
    (PRODUCER_CONSUMER, lambda s: s.fuse("T", "B", name=["a", "b", "c"]),
     "3 name(s) given for 2 fused loop(s)"),
    (PRODUCER_CONSUMER, lambda s: s.parallel(("T", "i")).fuse(("T", "i"), ("B", "i")),
     "the mark parallel sits above loop i"),
    (THREE, lambda s: s.fuse(("T", "i"), ("U", "i")).fuse(("T", "j"), ("B", "i")),
     "a fuse of loops with different parents"),
    (MATMUL, lambda s: s.fuse(("C", "m"), ("S0", "k")),
     "loop m (S0, S0_init) is not the outermost loop of one of several sibling subtrees"),
    (MATMUL, lambda s: s.fuse("S0_init", "S0"), "S0_init has no loop of its own"),
    (PRODUCER_CONSUMER, lambda s: s.fuse("T", "B").fuse("T", "B"),
     "S0 has no loop of its own below the sequence at path [0, 0, 0]: nothing to fuse"),
])
def test_fuse_bad_input(src, call, expect):
    s = start(src)
    msg = refused(s, call)
    assert expect in msg, msg


def test_fuse_different_parents_message():
    s = start(THREE).fuse(("T", "i"), ("U", "i"))
    msg = refused(s, lambda s: s.fuse(("T", "j"), ("B", "i")))
    assert msg.startswith("fuse(T.j, B.i): a fuse of loops with different parents: "
                          "loop j (S0) below the node at path"), msg


# ------------------------------------------------------------ distribute

def test_distribute_matmul_then_interchange(golden):
    s = start(MATMUL)
    d = s.distribute(("C", "n"))
    x = d.interchange(("S0", "n"), ("S0", "k"))
    golden("schedules/distribute_matmul_n.txt", before_after(s, d) + "---\n" + printout(x))
    # the interchange needs the distribution: n and k are not in one band before
    refused(s, lambda s: s.interchange(("S0", "n"), ("S0", "k")))
    check_all(d, SIZES_MM)
    check_all(x, SIZES_MM)
    replays(x)


def test_distribute_undoes_fuse():
    s = start(PRODUCER_CONSUMER)
    assert s.fuse("T", "B").distribute(("T", "i")).to_text() == s.to_text()
    # after a one-loop fuse, the distributed nests keep i and j in two bands
    assert same_order(s.fuse(("T", "i"), ("B", "i")).distribute(("T", "i")), s)
    s3 = start(THREE)
    assert s3.fuse("T", "U").distribute(("U", "i")).to_text() == s3.to_text()


def test_distribute_inner_loop(golden):
    s = start(PRODUCER_CONSUMER).fuse("T", "B")
    d = s.distribute(("B", "j"))
    golden("schedules/distribute_pc_inner.txt", before_after(s, d))
    check_all(d, SIZES_2D)
    replays(d)


def test_distribute_groups(golden):
    s = start(CHAIN).fuse("T", "U", "B")
    d = s.distribute(("T", "i"), ["T"], ["U"])          # B forms the last group
    golden("schedules/distribute_chain_groups.txt", before_after(s, d))
    check_all(d, SIZES_2D)
    replays(d)
    # the same groups by statement names, and as one list argument
    assert s.distribute(("T", "i"), "S0", "S1").to_text() == d.to_text()
    assert s.distribute(("T", "i"), [["T"], ["U"], ["B"]]).to_text() == d.to_text()
    # two groups: T+U together, then B
    e = s.distribute(("T", "i"), ["T", "U"])
    assert [lp.statements for lp in e.loops() if lp.name == "i"] == [("S0", "S1"), ("S2",)]
    check(e, dict(N=3, M=5))


def test_distribute_illegal_exchange_both_ways():
    """Inside the fused loop, {T, B} feeds U and U feeds {T, B}'s B: either
    order of the two groups breaks a flow dependence."""
    s = start(CHAIN).fuse("T", "U", "B")
    msg = refused(s, lambda s: s.distribute(("T", "i"), ["T", "B"], ["U"]),
                  IllegalScheduleError)
    assert "flow dependence on tensor U from statement S1 to statement S2" in msg
    msg = refused(s, lambda s: s.distribute(("T", "i"), ["U"], ["T", "B"]),
                  IllegalScheduleError)
    assert "flow dependence on tensor T from statement S0 to statement S1" in msg


def test_distribute_illegal_update_before_init():
    s = start(MATMUL)
    msg = refused(s, lambda s: s.distribute(("C", "n"), ["S0"], ["S0_init"]),
                  IllegalScheduleError)
    assert msg.startswith("distribute(C.n, ['S0'], ['S0_init']) is illegal")
    assert "dependence on tensor C from statement S0_init to statement S0" in msg


@pytest.mark.parametrize("call,expect", [
    (lambda s: s.distribute(("C", "n"), ["S0"], ["S0"]), "statement S0 is in group 1 and group 2"),
    (lambda s: s.distribute(("C", "n"), ["S0", "C"]), "statement S0 is in group 1 and group 1"),
    (lambda s: s.distribute(("S0", "k"), ["S0_init"]), "S0_init does not run in loop k"),
    (lambda s: s.distribute(("C", "n"), ["X"]), "no statement or written tensor named 'X'"),
    (lambda s: s.distribute(("C", "n"), ["S0_init", "S0"]),
     "nothing to distribute: loop n runs S0_init, S0, all in one group"),
    (lambda s: s.distribute(("C", "n"), "C"), "nothing to distribute"),
    (lambda s: s.distribute(("S0", "k")), "nothing to distribute: loop k runs only S0"),
    (lambda s: s.distribute(("C", "n"), []), "group 1 must be a statement or tensor name"),
    (lambda s: s.distribute(("C", "n"), [3]), "group 1 must be"),
    (lambda s: s.distribute(("C", "q")), "no loop 'q' runs C"),
    (lambda s: s.distribute("nonsense"), "does not name a loop"),
])
def test_distribute_bad_input(call, expect):
    s = start(MATMUL)
    msg = refused(s, call)
    assert expect in msg, msg
