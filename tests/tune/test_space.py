"""The tuner's search space (polyc.tune.space) and model (polyc.tune.model):
candidates are checked recipes, illegal ones are pruned with the reason, the
counts match hand-checked cases, and the model orders obvious pairs right.
Nothing here is timed."""

from __future__ import annotations

import random

import pytest

import polyc
from polyc import Schedule
from polyc.tune import model, space

MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
SIZES = {"M": 512, "N": 512, "K": 512}


@pytest.fixture(scope="module")
def mm():
    p = polyc.program(MM)
    base = Schedule.from_program(p, start="isl")
    return p, base, space.analyse(base, SIZES)


def test_analysis_reads_band_and_accesses(mm):
    _, _, infos = mm
    (band,) = infos
    assert band.names == ["m", "n", "k"] and band.permutable
    assert band.coincident == [True, True, False]
    assert band.trips == [512, 512, 512]
    s0 = next(s for s in band.statements if s.name == "S0")
    coefs = {a.tensor: a.coefs for a in s0.accesses if not a.write}
    assert coefs["A"] == [{"m": 1}, {"k": 1}] and coefs["B"] == [{"k": 1}, {"n": 1}]
    assert band.updates == ("S0",)


def _kind(p, base, infos, knobs):
    try:
        space.build(p, knobs, infos, base=base)
        return "legal"
    except space.Refused as e:
        return e.kind


def test_pruning_matches_hand_checked_cases(mm):
    p, base, infos = mm
    B = space.BandKnobs
    cases = {
        # k carries the reduction: a parallel k loop is illegal
        B((2, 0, 1), (0, 0, 0), parallel=True): "illegal",
        # k innermost with a simd mark reorders the reduction without reassociation
        B((0, 1, 2), (0, 0, 0), vectorize=True): "illegal",
        B((0, 2, 1), (32, 32, 32), parallel=True, vectorize=True, unroll=4): "legal",
        B((1, 0, 2), (64, 64, 0), parallel=True): "legal",
        B((0, 1, 2), (0, 0, 0), tensorize=True): "legal",
    }
    got = {k: _kind(p, base, infos, space.Knobs("isl", (k,))) for k in cases}
    assert got == cases
    # with reassociation it is legal: the band also runs the initialisation,
    # which gets its own copy of k first (k then scans only the reduction)
    s = space.build(p, space.Knobs("isl", (B((0, 1, 2), (0, 0, 0), vectorize=True),), True),
                    infos, base=base)
    assert [st["op"] for st in s.to_recipe()["steps"]] == [
        "with_reassociation", "distribute", "vectorize"]


def test_refusal_names_the_dependence(mm):
    p, base, infos = mm
    with pytest.raises(space.Refused) as e:
        space.build(p, space.Knobs("isl", (space.BandKnobs((2, 0, 1), (0, 0, 0),
                                                            parallel=True),)), infos, base=base)
    assert e.value.step == "parallel" and "C" in e.value.reason


def test_candidate_recipe_replays_to_the_same_source():
    from polyc.pipeline import compile_schedule
    p = polyc.program(MM)
    base = Schedule.from_program(p, start="isl")
    infos = space.analyse(base, SIZES)
    k = space.Knobs("isl", (space.BandKnobs((0, 2, 1), (32, 64, 16), True, True, 2),), True)
    s = space.build(p, k, infos, base=base)
    # replayed on a freshly lowered program (isl may simplify shared sets in
    # place, so compare what the trees generate)
    again = Schedule.replay(polyc.program(MM), s.to_recipe())
    cfg = polyc.Config.from_env().replace(use_tuned=False)
    assert compile_schedule(again, cfg).source == compile_schedule(s, cfg).source
    ops = [st["op"] for st in s.to_recipe()["steps"]]
    assert ops == ["with_reassociation", "reorder", "tile", "vectorize", "parallel", "unroll"]


def test_choices_and_neighbours(mm):
    _, _, infos = mm
    choices = space.band_choices(infos[0])
    assert len(set(choices)) == len(choices)
    assert any(c.tensorize for c in choices)
    # tiles on one contiguous run only, sizes below the trip count
    for c in choices:
        run = [i for i, t in enumerate(c.tiles) if t]
        assert run == list(range(run[0], run[-1] + 1)) if run else True
        assert all(t < 512 for t in c.tiles)
    k = space.Knobs("isl", (space.BandKnobs((0, 1, 2), (32, 32, 32), True, False, 2),))
    near = space.neighbours(k, {"isl": infos}, reductions=True)
    assert k not in near and len(set(near)) == len(near)
    diffs = {sum(a != b for a, b in zip(vars(n.bands[0]).values(), vars(k.bands[0]).values()))
             + (n.reassociate != k.reassociate) for n in near}
    assert diffs == {1}


def test_sample_is_exhaustive_on_small_spaces_and_seeded(mm):
    _, _, infos = mm
    pools = {("isl", False): [space.band_choices(infos[0])[:7]]}
    assert len(space.sample(random.Random(0), pools, 100)) == 7
    big = {("isl", False): [space.band_choices(infos[0])]}
    a = space.sample(random.Random(3), big, 50)
    assert a == space.sample(random.Random(3), big, 50) and len(set(a)) == 50


def test_model_orders_obvious_pairs():
    p = polyc.program(MM)
    infos = space.analyse(Schedule.from_program(p, start="isl"), {"M": 1024, "N": 1024,
                                                                  "K": 1024})
    B = space.BandKnobs

    def cost(b, reassociate=False):
        return model.cost(space.Knobs("isl", (b,), reassociate), infos, cores=2)
    naive = cost(B((0, 1, 2), (0, 0, 0)))
    ikj = cost(B((0, 2, 1), (0, 0, 0)))
    tiled = cost(B((0, 2, 1), (32, 64, 256), parallel=True, vectorize=True))
    gemm = cost(B((0, 1, 2), (0, 0, 0), tensorize=True))
    assert gemm < tiled < ikj < naive
    # a parallel loop halves the compute on two cores
    assert cost(B((0, 2, 1), (32, 64, 256), parallel=True)) < cost(B((0, 2, 1), (32, 64, 256)))


def test_model_prefers_tiled_transpose():
    p = polyc.program("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }")
    infos = space.analyse(Schedule.from_program(p, start="isl"), {"N": 4096, "M": 4096})
    B = space.BandKnobs
    untiled = model.cost(space.Knobs("isl", (B((0, 1), (0, 0)),)), infos, cores=1)
    tiled = model.cost(space.Knobs("isl", (B((0, 1), (32, 32)),)), infos, cores=1)
    assert tiled < untiled


def test_knobs_without_a_tuned_band_are_labelled():
    """A start with no tuned band (the source order of one loop: no
    coincidence flags) gave the label ``"source: "``."""
    from polyc.tune.space import Knobs
    assert Knobs("source", ()).label() == "source: untransformed"
    assert Knobs("source", (), True).label() == "source reassoc: untransformed"


#: the source order's tuned band is the chain (i, j); the k loop of the
#: update runs below it, so no member of the band is an innermost loop
IMPERFECT = """
import polyc


@polyc.kernel
def matmul_scaled(A, B, C):
    n, m = A.shape
    for i in range(n):
        for j in range(m):
            C[i, j] = 0.0
            for k in range(m):
                C[i, j] += A[i, k] * B[k, j]
            C[i, j] = C[i, j] * 0.5
"""


def test_no_simd_knob_on_a_band_with_loops_below(tmp_path):
    """... and the band below the sequence in it (``for k``, beside the
    statements before and after it) gets knobs of its own: it got none."""
    from types import SimpleNamespace

    from polyc.cli_input import _load
    (tmp_path / "imperfect_mm.py").write_text(IMPERFECT)
    p, _ = _load(SimpleNamespace(file=str(tmp_path / "imperfect_mm.py"),
                                 def_name="matmul_scaled", dtype=None, sizes=None))
    sizes = {q: 64 for q in p.params}
    base = Schedule.from_program(p, start="source")
    band, inner = space.analyse(base, sizes)
    assert band.names == ["i", "j"] and band.below == ("S1.k",) and band.parent is None
    assert inner.names == ["k"] and inner.below == () and inner.parent == 0
    assert not any(c.vectorize for c in space.band_choices(band))
    assert any(c.vectorize for c in space.band_choices(inner))
    plain = space.BandKnobs((0,), (0,))
    knobs = space.Knobs("source", (space.BandKnobs((0, 1), (0, 0), parallel=True), plain))
    near = space.neighbours(knobs, {"source": [band, inner]})
    assert not any(n.bands[0].vectorize for n in near)
    assert any(n.bands[1].unroll > 1 for n in near)
    assert not any(n.bands[1].parallel for n in near)     # no parallel region in one
    notes: list[str] = []
    trials = polyc.tune.candidates(p, sizes, count=8, notes=notes)
    assert not [t for t in trials if "vectorize" in (t.reason or "")
                and "not innermost" in t.reason]
    assert any("source: band (i, j): no simd candidates" in n and "S1.k runs below" in n
               for n in notes)


def test_an_exact_loop_name_wins_over_a_merged_one():
    """PolyBench lu from isl's scheduler: S0 runs below a member named
    ``k|j`` and one named ``j``; ``vectorize(("S0", "j"))`` was refused as
    ambiguous, so every simd candidate of that band was 'inapplicable' for
    a reason that was not the real one (j carries a dependence)."""
    from benchmarks.polybench import BENCHMARKS
    b = BENCHMARKS["lu"]
    p = b.kernel.specialize(*b.init(b.sizes["MINI"])).program
    from polyc.tune.sources import fill_extents
    base = Schedule.from_program(p, start="isl")
    (info,) = space.analyse(base, fill_extents(p, {"n": 120}))
    knobs = space.Knobs("isl", (space.BandKnobs((0, 1, 2), (16, 16, 0), True, True, 8),))
    with pytest.raises(space.Refused) as e:
        space.build(p, knobs, [info], base=base)
    assert "ambiguous" not in e.value.reason
    assert e.value.kind == "illegal" and "cannot run vectorized" in e.value.reason


def test_members_merged_crosswise_are_named_whole():
    """PolyBench 2mm from isl's scheduler: S1 runs below members named
    ``j|k`` and ``k|j``, and ``j`` or ``k`` answers to both: every candidate
    of the band was 'inapplicable: ambiguous' (all 20 of ``--dry-run``).
    The recipe names such a member in full; its unroll is proved bounded by
    its strip-mine instead of building the AST (1 s per candidate here)."""
    from pathlib import Path
    from types import SimpleNamespace

    from polyc.cli_input import _load
    from polyc.schedule import unroll
    from polyc.tune.sources import fill_extents
    path = Path(__file__).parents[2] / "benchmarks" / "polybench" / "linear_algebra_kernels.py"
    p, _ = _load(SimpleNamespace(file=str(path), def_name="k2mm", dtype=None, sizes=None))
    base = Schedule.from_program(p, start="isl")
    (info,) = space.analyse(base, fill_extents(p, {"ni": 16, "nj": 18, "nk": 20, "nl": 22}))
    assert info.specs == [("S1", "i"), ("S1", "j|k"), ("S1", "k|j")]
    proved = []
    orig = unroll._strip_bounded
    unroll._strip_bounded = lambda *a: proved.append(orig(*a)) or proved[-1]
    try:
        knobs = space.Knobs("isl", (space.BandKnobs((0, 2, 1), (8, 0, 0), True, False, 4),))
        s = space.build(p, knobs, [info], base=base)
    finally:
        unroll._strip_bounded = orig
    assert proved == [True] and "unroll" in str(s.to_recipe())
    band = [n for n in unroll.walk(s.isl.get_root())
            if n.get_type() == unroll._BAND and unroll.member_unrolled(n, 0)][0]
    tile = unroll._tile_schedule(band)
    assert not unroll._strip_bounded(band, 0, tile, 3)      # a window too narrow


MV = "def mv(float(N,M) A, float(M) x) -> (y) { y(i) +=! A(i,j) * x(j) }"


def test_probes_drop_knobs_that_can_never_apply(mm):
    """band_choices proposed a parallel mark on the reduction loop k, and simd
    on k without reassociation: they ranked among the first and were refused
    one by one.  The probes rule them out before sampling and say why."""
    from polyc.tune import feasible
    p, base, infos = mm
    probed = feasible.probe(p, base, infos, "isl")
    f = probed[False][0]
    assert f.parallel == {0, 1} and f.simd == {0, 1} and f.tensorize
    assert probed[True][0].simd == {0, 1, 2}
    assert not feasible.repeats(infos, probed)
    assert any("no parallel candidates with k outermost (illegal" in n for n in f.notes)
    kept = feasible.choices(infos[0], f)
    assert kept and all(c.tensorize or (not (c.parallel and c.order[0] == 2)
                                        and not (c.vectorize and c.order[-1] == 2))
                        for c in kept)
    assert any(c.tensorize for c in kept)
    # the local search's reassociation toggle of a lone tensorized band only
    # repeats its tree
    gemm = space.BandKnobs((0, 1, 2), (0, 0, 0), tensorize=True)
    by_pool = {("isl", r): fs for r, fs in probed.items()}
    assert feasible.admitted(space.Knobs("isl", (gemm,)), by_pool)
    assert not feasible.admitted(space.Knobs("isl", (gemm,), True), by_pool)
    # the first ranked candidates are legal
    notes: list[str] = []
    trials = polyc.tune.candidates(MM, SIZES, count=5, notes=notes)
    assert {t.status for t in trials if t.knobs} <= {"legal", "duplicate"}
    assert any("no simd candidates with k innermost without reassociation" in n
               for n in notes)


def test_matvec_simd_reduction_candidates_are_legal_and_correct(tmp_path):
    """matvec: the model's best candidates (simd on the reduction loop j,
    with reassociation) were all refused because S0_init shares the band.
    The initialisation gets its own copy of j (distribute) and the candidate
    computes A @ x."""
    import numpy as np

    from polyc.tune import measure
    notes: list[str] = []
    trials = polyc.tune.candidates(MV, {"N": 64, "M": 48}, count=8, notes=notes)
    ranked = [t for t in trials if t.knobs]
    assert ranked and all(t.status == "legal" for t in ranked), [t.reason for t in ranked]
    assert "reassoc" in ranked[0].label and "simd" in ranked[0].label
    # isl's band (i, j) also runs S0_init (the source order's j band does not)
    top = next(t for t in ranked if t.label.startswith("isl reassoc") and "simd" in t.label)
    ops = [st["op"] for st in top.recipe["steps"]]
    assert ops.index("distribute") < ops.index("vectorize")
    assert any("no simd candidates with j innermost without reassociation" in n
               for n in notes)
    cfg = polyc.Config.from_env().replace(use_tuned=False, cache_dir=str(tmp_path))
    k = measure.compile_candidate(polyc.program(MV), top.recipe, cfg)
    rng = np.random.default_rng(0)
    A, x = rng.random((37, 21), dtype=np.float32), rng.random(21, dtype=np.float32)
    np.testing.assert_allclose(k(A, x), A @ x, rtol=1e-5)


def test_tensorize_is_not_proposed_where_the_intrinsic_cannot_match(tmp_path):
    """The source order of a @polyc.kernel gemm (``for i: for k: for j``):
    tensorize(gemm) on the (k, j) band below ``for i`` can never apply (the
    intrinsic computes whole slices of C), yet it ranked first in
    --dry-run and was pruned as inapplicable.  (The program is read as
    ``polyc tune gemm.py`` reads it: compiling it took 20 s of the test.)"""
    from types import SimpleNamespace

    from polyc.cli_input import _load
    (tmp_path / "loop_gemm.py").write_text(LOOP_GEMM)
    p, _ = _load(SimpleNamespace(file=str(tmp_path / "loop_gemm.py"), def_name="gemm",
                                 dtype=None, sizes=None))
    notes: list[str] = []
    sizes = {q: 64 for q in p.params}
    trials = polyc.tune.candidates(p, sizes, count=6, notes=notes)
    assert not [t for t in trials if t.status == "inapplicable"], \
        [t.reason for t in trials if t.status == "inapplicable"]
    # (the band ``for i`` above it is tuned too, and its tensorize matches;
    # the bands below it keep no knobs, and such knobs still seed a class)
    from polyc.tune.search import _fits, knobs_from_json
    source = [t for t in trials if t.label.startswith("source") and "tensorize" in t.label]
    assert source and all(t.status == "legal" and t.recipe["steps"][0]["args"][0] == ["S1", "i"]
                          for t in source)
    infos = space.analyse(Schedule.from_program(p, start="source"), sizes)
    for t in source:
        k = knobs_from_json(t.knobs)
        assert [b.order for b in k.bands[1:]] == [()] * (len(infos) - 1)
        assert _fits(k, [infos])
    assert any(n.startswith("source: band (k, j): no tensorize(gemm) candidate") and
               "depends on i" in n for n in notes)


LOOP_GEMM = """
import polyc


@polyc.kernel
def gemm(C, A, B, alpha, beta):
    n, m = C.shape
    q = A.shape[1]
    for i in range(n):
        for j in range(m):
            C[i, j] *= beta
        for k in range(q):
            for j in range(m):
                C[i, j] += alpha * A[i, k] * B[k, j]
"""


def test_each_start_ranks_its_tensorized_candidate():
    """A batched matmul's isl band has four members: tensorize(gemm) is one
    of its thousands of knob settings and the random sample missed it, so
    --dry-run ranked only the source order's.  The reassociated pool of a
    lone band repeated the tensorized tree (a duplicate)."""
    src = "def bmm(float(B,M,K) X, float(B,K,N) Y) -> (Z) { Z(b,m,n) +=! X(b,m,k) * Y(b,k,n) }"
    trials = polyc.tune.candidates(src, {"B": 2, "M": 64, "K": 64, "N": 64}, count=3)
    gemm = [t for t in trials if "tensorize(gemm)" in t.label]
    assert {t.label for t in gemm} == {"isl: tensorize(gemm)", "source: tensorize(gemm)"}, \
        [t.label for t in trials]
    assert all(t.status == "legal" for t in gemm)


def test_a_tree_that_cannot_reassociate_gets_no_reassociated_pool():
    """PolyBench ludcmp: with_reassociation(True) of a starting tree is
    refused (a flow dependence on A it would reorder), and that refusal
    escaped polyc.tune and its dry run: the program could not be tuned.
    That start has no reassociated candidates, and the dry run says why."""
    from pathlib import Path
    from types import SimpleNamespace

    from polyc.cli_input import _load
    from polyc.tune.sources import fill_extents
    path = Path(__file__).parents[2] / "benchmarks" / "polybench" / "linear_algebra_solvers.py"
    p, _ = _load(SimpleNamespace(file=str(path), def_name="ludcmp", dtype=None, sizes=None))
    from polyc.tune import feasible
    sizes = fill_extents(p, {"n": 10})
    refused = []
    for start in ("isl", "source"):
        base = Schedule.from_program(p, start=start)
        probed = feasible.probe(p, base, space.analyse(base, sizes), start)
        notes = [n for n in probed[False][0].notes if "cannot reassociate" in n]
        assert (True in probed) == (not notes)
        refused += notes
    assert refused and "flow dependence on tensor A" in refused[0]


def test_runs_that_cannot_be_tiled_together_are_not_proposed():
    """floyd-warshall's source order ``for k: for i: for j``: tiles over k
    and i (not permutable: k carries the flow dependence on path) filled the
    ranking and were pruned as illegal one by one.  A probe per run of
    members finds them, and the dry run says why."""
    from pathlib import Path
    from types import SimpleNamespace

    from polyc.cli_input import _load
    from polyc.tune import feasible
    path = Path(__file__).parents[2] / "benchmarks" / "polybench" / "medley.py"
    p, _ = _load(SimpleNamespace(file=str(path), def_name="floyd_warshall", dtype=None,
                                 sizes=None))
    base = Schedule.from_program(p, start="source")
    infos = space.analyse(base, {"n": 40, "path_dim1": 40})
    (f,) = feasible.probe(p, base, infos, "source")[False]
    assert (0, 1) in f.untileable and (0, 2) in f.untileable
    assert any("no tiles over k, i (illegal" in n for n in f.notes)
    kept = feasible.choices(infos[0], f)
    assert not [c for c in kept if c.tiles[0] and c.tiles[1]]
    assert any(c.tiles[1] and c.tiles[2] for c in kept) == ((1, 2) not in f.untileable)
