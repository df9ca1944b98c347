"""``promote(tensor, at=loop)``: copying a footprint into a local buffer.

Golden before/after printouts (tree, loop nest, rewritten statements, the
LoopNest with its ``local`` blocks; ``--accept`` rewrites
``tests/golden/schedules/promote_<case>.txt``), differential checks against
numpy (tiled matmul with A, B and C promoted, a parallel tile loop, sizes
that are not multiples of the tiles, float64, read-only and read-write
tensors, a halo), the refusals (no constant-size box, the size limit, a
tensor not accessed below the loop, gathers), legality on trees with
extension nodes, the generated C (the buffer declared inside the parallel
loop, no argument for it) and recipe round trips.
"""

from __future__ import annotations

import islpy as isl
import pytest

import polyc
from polyc import astgen
from polyc.errors import IllegalScheduleError
from polyc.isl_util import fixed_box_hull
from polyc.loopnest import Local, format_loopnest, walk
from polyc.pipeline import compile_schedule
from polyc.schedule import legality
from polyc.schedule.explain import explain
from polyc.schedule.language import Schedule
from polyc.schedule.promotion import MAX_LOCAL_BYTES
from polyc.schedule.promotion_check import check_promotions

from .util import MATMUL, PRODUCER_CONSUMER, STENCIL, check, program, refused, start

MATMUL64 = MATMUL.replace("float(", "double(")
C_M, C_N, C_K = ("C", "m"), ("C", "n"), ("C", "k")
M_TILE, N_TILE, K_TILE = ("C", "m_tile"), ("C", "n_tile"), ("C", "k_tile")

GATHER = """
def gather(float(N) X, int32(M) I) -> (Y) {
    Y(i) = X(I(i))
}
"""


def tiled(src: str = MATMUL, sizes=(32, 32, 32)) -> Schedule:
    """Matmul under isl's schedule (one band m, n, k), tiled."""
    return start(src, start="isl").tile([C_M, C_N, C_K], list(sizes))


def statements(s: Schedule) -> str:
    """The program's statements, one line each (no isl relations)."""
    from polyc import expr as E
    shapes = ", ".join(f"{t.name}{list(t.constant_shape())}" for t in s.program.locals)
    lines = [f"locals: {shapes}"]
    for st in s.program.statements:
        op = "=" if st.op == "=" else f"{st.op}="
        lines.append(f"{st.name} [{st.kind}]({', '.join(st.iterators)}): "
                     f"{E.to_text(st.lhs)} {op} {E.to_text(st.rhs)}")
    return "\n".join(lines) + "\n"


def printout(before: Schedule, after: Schedule) -> str:
    nest = format_loopnest(astgen.generate(after.program, after.isl))
    return (str(before) + before.loop_nest() + "---\n" + str(after) + after.loop_nest()
            + "---\n" + statements(after) + "---\n" + nest)


# ----------------------------------------------------------------- golden

GOLDEN = [
    ("matmul", lambda: tiled(),
     lambda s: s.promote("A", at=K_TILE).promote("C", at=K_TILE)),
    ("matmul_c_at_n_tile", lambda: tiled(),
     lambda s: s.promote("C", at=N_TILE).promote("A", at=K_TILE).promote("B", at=K_TILE)),
    ("stencil_halo", lambda: start(STENCIL).split(("S1", "i"), 8),
     lambda s: s.promote("A", at=("S1", "i_outer"))),
    ("pc_fused", lambda: start(PRODUCER_CONSUMER, start="isl")
     .tile([("T", "i"), ("T", "j")], [4, 8]),
     lambda s: s.promote("T", at=("T", "j_tile")).promote("A", at=("T", "j_tile"))),
]


@pytest.mark.parametrize("case,before,fn", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_before_after(golden, case, before, fn):
    b = before()
    a = fn(b)
    assert a.recipe[-1]["op"] == "promote"
    golden(f"schedules/promote_{case}.txt", printout(b, a))


def test_matmul_rewrites_and_copies():
    s = tiled().promote("A", at=K_TILE).promote("C", at=K_TILE)
    p = s.program
    assert [t.name for t in p.locals] == ["A_local", "C_local"]
    assert [t.constant_shape() for t in p.locals] == [(32, 32), (32, 32)]
    assert {t.origin for t in p.locals} == {"A", "C"}
    kinds = {st.name: st.kind for st in p.statements}
    assert kinds == {"S0_init": "init", "S0": "update", "A_local_in": "copy",
                     "C_local_in": "copy", "C_local_out": "copy"}
    s0 = p.statement("S0")
    assert s0.tensor == "C_local" and set(s0.read_tensors()) == {"C_local", "A_local", "B"}
    # the loops are still found by the output tensor's name
    assert s.loop("C", "k").statements == ("S0", "S0_init")
    assert p.writers("C") == ("S0_init", "S0")
    # the original schedule is untouched; its program has no locals
    assert not tiled().program.locals


# ----------------------------------------------------------- differential

MATMUL_SIZES = [dict(M=1, N=1, K=1), dict(M=7, N=7, K=7), dict(M=33, N=33, K=33),
                dict(M=33, N=7, K=1), dict(M=0, N=3, K=2), dict(M=3, N=5, K=0),
                dict(M=2, N=0, K=3), dict(M=65, N=34, K=40)]

DIFFERENTIAL = [
    ("matmul_abc_k_tile", MATMUL, lambda: tiled(),
     lambda s: s.promote("A", at=K_TILE).promote("B", at=K_TILE).promote("C", at=K_TILE)),
    ("matmul_c_n_tile_ab_k_tile", MATMUL, lambda: tiled(),
     lambda s: s.promote("C", at=N_TILE).promote("A", at=K_TILE).promote("B", at=K_TILE)),
    ("matmul_parallel_then_promote", MATMUL, lambda: tiled(),
     lambda s: s.parallel(M_TILE).promote("C", at=N_TILE).promote("A", at=K_TILE)
     .promote("B", at=K_TILE)),
    ("matmul_promote_then_parallel", MATMUL, lambda: tiled(),
     lambda s: s.promote("C", at=K_TILE).promote("B", at=K_TILE).parallel(M_TILE)
     .parallel(N_TILE)),
    ("matmul_outer_after_inner", MATMUL, lambda: tiled(sizes=(8, 8, 8)),
     lambda s: s.promote("A", at=K_TILE).promote("C", at=N_TILE)),
    ("matmul_small_tiles", MATMUL, lambda: tiled(sizes=(4, 8, 2)),
     lambda s: s.promote("A", at=K_TILE).promote("B", at=K_TILE).promote("C", at=K_TILE)),
    ("matmul_point_loop", MATMUL, lambda: tiled(sizes=(4, 8, 2)),
     lambda s: s.promote("B", at=C_M).promote("C", at=C_N)),
    ("matmul_float64", MATMUL64, lambda: tiled(MATMUL64),
     lambda s: s.promote("C", at=N_TILE).promote("A", at=K_TILE).promote("B", at=K_TILE)
     .parallel(M_TILE)),
    ("matmul_float64_source_order", MATMUL64,
     lambda: start(MATMUL64).tile([C_M, C_N], [8, 8]).split(C_K, 4),
     lambda s: s.promote("C", at=N_TILE).promote("A", at=("C", "k_outer"))
     .promote("B", at=("C", "k_outer"))),
]


@pytest.mark.parametrize("src,before,fn", [d[1:] for d in DIFFERENTIAL],
                         ids=[d[0] for d in DIFFERENTIAL])
def test_differential_matmul(src, before, fn):
    s = fn(before())
    for seed, sizes in enumerate(MATMUL_SIZES):
        check(s, sizes, seed=seed)


def test_differential_read_write_stencil():
    """A is read (with a halo) and written in the same loop nest; the init
    S0 is not promoted."""
    s = start(STENCIL).split(("S1", "i"), 8).promote("A", at=("S1", "i_outer"))
    for seed, sizes in enumerate([dict(N=1, T=1), dict(N=2, T=3), dict(N=3, T=2),
                                  dict(N=7, T=0), dict(N=33, T=5), dict(N=17, T=9)]):
        check(s, sizes, seed=seed)


def test_differential_producer_consumer():
    """T is written then read in the same iteration (no copy-in); A is read
    only; then each nest separately, T twice (in two sibling nests)."""
    fused = (start(PRODUCER_CONSUMER, start="isl").tile([("T", "i"), ("T", "j")], [4, 8])
             .promote("T", at=("T", "j_tile")).promote("A", at=("T", "j_tile"))
             .parallel(("T", "i_tile")).vectorize(("T", "j")))
    apart = (start(PRODUCER_CONSUMER).tile([("T", "i"), ("T", "j")], [4, 4])
             .tile([("B", "i"), ("B", "j")], [3, 5])
             .promote("T", at=("T", "j_tile")).promote("A", at=("T", "j_tile"))
             .promote("T", at=("B", "j_tile")).promote("B", at=("B", "j_tile")))
    assert {t.name for t in apart.program.locals} == {"T_local", "A_local", "T_local_2",
                                                      "B_local"}
    for sizes in (dict(N=1, M=1), dict(N=5, M=7), dict(N=0, M=3), dict(N=13, M=11),
                  dict(N=300, M=70)):
        check(fused, sizes)
        check(apart, sizes)


def test_rank0_tensors():
    src = """
    def sc(float(N) X, float s) -> (Y, Z) {
        Y(i) = X(i) * s
        Z() +=! X(i)
    }
    """
    s = (Schedule.from_program(polyc.program(src)).split(("Y", "i"), 4)
         .promote("s", at=("Y", "i_outer")).promote("Z", at=("Z", "i")))
    assert [t.constant_shape() for t in s.program.locals] == [(), ()]
    for n in (0, 1, 9):
        check(s, {"N": n})


# --------------------------------------------------------------- refusals

def test_refused_without_a_constant_size_box():
    msg = refused(start(MATMUL), lambda s: s.promote("A", at=C_M))
    assert "tensor A at loop m" in msg and "box of constant size" in msg
    msg = refused(tiled(), lambda s: s.promote("A", at=M_TILE))
    assert "tensor A at loop m_tile" in msg and "box of constant size" in msg
    # C's footprint at n_tile is a tile, but B's runs over all of K
    msg = refused(tiled(), lambda s: s.promote("B", at=N_TILE))
    assert "tensor B at loop n_tile" in msg


def test_refused_over_the_size_limit():
    assert MAX_LOCAL_BYTES == 256 * 1024
    msg = refused(tiled(sizes=(512, 512, 8)), lambda s: s.promote("C", at=K_TILE))
    assert "tensor C at loop k_tile" in msg and "256 KiB" in msg and "1048576 bytes" in msg
    # 160 000 bytes each: one fits, two do not
    s = tiled(sizes=(200, 200, 200)).promote("C", at=K_TILE)
    msg = refused(s, lambda s: s.promote("A", at=K_TILE))
    assert "tensor A at loop k_tile" in msg and "promoted earlier" in msg
    # float64 doubles the bytes
    refused(tiled(MATMUL64, sizes=(200, 200, 8)), lambda s: s.promote("C", at=K_TILE))


def test_refused_when_not_accessed_below_the_loop():
    s = start(PRODUCER_CONSUMER)
    msg = refused(s, lambda s: s.promote("A", at=("B", "j")))
    assert "tensor A at loop j" in msg and "no statement below loop j accesses A" in msg
    msg = refused(tiled(), lambda s: s.promote("X", at=K_TILE))
    assert "no tensor named 'X'" in msg and "promote('X', at=C.k_tile)" in msg
    # already promoted at an inner loop: the statements access the buffer
    inner = tiled().promote("A", at=K_TILE)
    msg = refused(inner, lambda s: s.promote("A", at=N_TILE))
    assert "already promoted to A_local" in msg
    msg = refused(inner, lambda s: s.promote("A_local", at=K_TILE))
    assert "already a local buffer" in msg


def test_refused_gather_and_bad_names():
    s = Schedule.from_program(polyc.program(GATHER)).split(("Y", "i"), 4)
    msg = refused(s, lambda s: s.promote("X", at=("Y", "i_outer")))
    assert "gather" in msg and "tensor X at loop i_outer" in msg
    refused(tiled(), lambda s: s.promote("A", at=K_TILE, name="not an identifier"))
    refused(tiled(), lambda s: s.promote("A", at=K_TILE, name="B"))
    named = tiled().promote("A", at=K_TILE, name="Atile")
    assert [t.name for t in named.program.locals] == ["Atile"]
    check(named, dict(M=33, N=7, K=40))


def test_loops_above_a_promotion_are_fixed():
    """isl refuses to rebuild a band above an extension (an anchored
    subtree); loops below the promotion may still change."""
    s = tiled(sizes=(8, 8, 8)).promote("A", at=K_TILE)
    refused(s, lambda s: s.interchange(M_TILE, N_TILE))
    refused(s, lambda s: s.tile([M_TILE], [16]))
    below = s.interchange(C_M, C_K)
    check_promotions(below)
    check(below, dict(M=17, N=9, K=20))


# ----------------------------------------------------------------- legality

def test_legality_on_trees_with_extensions():
    s = tiled()
    p = s.promote("C", at=N_TILE).promote("A", at=K_TILE)
    p.check()
    # the order of the original statements is exactly the unpromoted one
    order = legality.schedule_order(legality.without_extensions(p.isl))
    assert order.is_equal(legality.schedule_order(s.isl))
    with pytest.raises(isl.Error):
        p.isl.get_map()              # isl cannot: hence without_extensions
    # marks are still checked: k_tile carries the reduction
    msg = refused(p, lambda s: s.parallel(K_TILE), IllegalScheduleError)
    assert "k_tile" in msg and "flow" in msg


def test_check_promotions_catches_copies_that_do_not_fit():
    p = tiled(sizes=(8, 8, 8)).promote("A", at=K_TILE)
    check_promotions(p)
    text = p.to_text()
    assert "x0 <= 7 + p0" in text
    bad = isl.Schedule.read_from_str(p.isl.get_ctx(), text.replace("x0 <= 7 + p0",
                                                                   "x0 <= 6 + p0"))
    broken = Schedule(p.program, p.deps, bad, base=p._base)
    legality.check_tree(bad, p.deps, p.program)   # the order is fine...
    with pytest.raises(IllegalScheduleError, match="copy-in of A_local"):
        check_promotions(broken)     # ...but the copy-in misses a row


def test_fixed_box_hull():
    box = fixed_box_hull(isl.Map("[N] -> { [p, q] -> A[x, y] : p <= x < p + 4 and "
                                 "q - 1 <= y <= q + 1 and 0 <= x < N }"))
    assert box is not None
    off, sizes = box
    assert sizes == [4, 3]
    assert off.get_aff(1).get_constant_val().to_python() == -1
    assert fixed_box_hull(isl.Map("[N] -> { [p] -> A[x] : p <= x < N }")) is None


# ----------------------------------------------------------- generated C

def test_buffers_declared_inside_the_parallel_loop_and_not_arguments():
    s = (tiled().parallel(M_TILE).promote("C", at=N_TILE).promote("A", at=K_TILE)
         .promote("B", at=K_TILE))
    k = check(s, dict(M=70, N=66, K=40))
    src = k.source
    par = src.index("#pragma omp parallel for")
    decl = src.index("float t_C_local[32][32] __attribute__((aligned(64)));")
    assert par < decl
    assert "t_A_local[" in src and "polyc_buffers[3]" not in src
    assert k._source.tensors == ("A", "B", "C")
    nest = astgen.generate(s.program, s.isl)
    assert {n.name for n in walk(nest) if isinstance(n, Local)} == {"A_local", "B_local",
                                                                   "C_local"}


def test_programs_without_promotion_are_unchanged():
    """No local tensor, no Local node, the same source as before promotion
    existed (the golden tests of the emitter check the bytes)."""
    s = tiled()
    assert not any(isinstance(n, Local) for n in walk(astgen.generate(s.program, s.isl)))
    assert "aligned(64)" not in compile_schedule(s).source


# ----------------------------------------------------------------- recipes

def test_recipe_round_trip():
    s = (tiled().promote("C", at=N_TILE).promote("A", at=K_TILE, name="Atile")
         .parallel(M_TILE))
    r = Schedule.replay(program(MATMUL), s.to_recipe())
    assert str(r) == str(s) and r.to_text() == s.to_text()
    assert compile_schedule(r).source == compile_schedule(s).source
    j = Schedule.replay(program(MATMUL), s.to_json())
    assert j.to_text() == s.to_text()
    assert s.recipe[1] == {"op": "promote", "args": ["C"], "kwargs": {"at": ["C", "n_tile"]}}


def test_compile_through_the_api():
    s = tiled().promote("C", at=N_TILE).promote("A", at=K_TILE)
    k = polyc.compile(MATMUL, schedule=s)
    import numpy as np
    rng = np.random.default_rng(0)
    A = rng.standard_normal((37, 19)).astype("float32")
    B = rng.standard_normal((19, 41)).astype("float32")
    np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-4, atol=1e-4)
    k2 = polyc.compile(MATMUL, schedule=s.to_recipe())
    assert k2.source == k.source


def test_explain_a_promoted_schedule():
    """explain() describes the loops of the original statements (the copies
    hang below extension nodes) and still sees the reduction on k."""
    s = tiled().promote("A", at=K_TILE).promote("C", at=K_TILE)
    data = explain(s, as_json=True)
    names = [lp["name"] for lp in data["loops"]]
    assert "k" in names and "m_tile" in names
    k = next(lp for lp in data["loops"] if lp["name"] == "k")
    assert not k["parallel"]
    assert "loop k" in explain(s)
