"""Fusion strategies of the automatic scheduler (``Config.fusion``) and the
``allow_skewing`` / ``outer_coincidence`` options.

Each strategy runs on small multi-statement programs chosen to tell the
strategies apart; the outermost fusion groups (statements sharing their
outermost loop) are compared with the expected ones, every band member
claimed coincident is checked to carry no dependence (parallel marks rely
on it), and the compiled kernels are compared with numpy.
"""

from __future__ import annotations

import islpy as isl
import pytest

import polyc
from polyc import reference, testing
from polyc.config import FUSION_STRATEGIES, Config
from polyc.errors import PolycError
from polyc.schedule import initial, legality
from polyc.schedule.tree import bands, statements_of

from .util import MATMUL, PRODUCER_CONSUMER, STENCIL, program

#: a 1-D producer feeding a 2-D consumer: same SCC structure, different depth
DIMS = """
def dims(float(N, M) A, float(N) x) -> (y, B) {
    y(i) = x(i) * 2.0
    B(i, j) = A(i, j) + y(i)
}
"""

#: a row reduction, its use, and an unrelated 1-D statement
MIXED = """
def mixed(float(N, M) A, float(N) x) -> (s, B, y) {
    s(i) +=! A(i, j)
    B(i, j) = A(i, j) / s(i)
    y(i) = x(i) * 2.0
}
"""

#: no dependence at all between the two statements
INDEP = """
def indep(float(N, M) A, float(N, M) X) -> (B, C) {
    B(i, j) = A(i, j) * 2.0
    C(i, j) = X(i, j) + 1.0
}
"""

#: fusion needs a shift along i and leaves one coincident loop (j) of two
SHIFTED = """
def shifted(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) + T(i+1, j) where i in 0:N-1
}
"""

#: the same in four dimensions: fusion keeps three coincident loops of four
SHIFTED4 = """
def shifted4(float(N, M, P, Q) A) -> (T, B) {
    T(a, b, c, d) = A(a, b, c, d) * 2.0
    B(a, b, c, d) = T(a, b, c, d) + T(a, b, c, d+1) where d in 0:Q-1
}
"""

#: a Gauss-Seidel sweep: isl's scheduler makes i+j its outer (wavefront) loop
SEIDEL = """
def seidel(float(N, M) X) -> (A) {
    A(i, j) = X(i, j) where i in 0:N, j in 0:M
    A(i, j) = A(i-1, j) + A(i, j-1) where i in 1:N, j in 1:M
}
"""

SOURCES = {"pc": PRODUCER_CONSUMER, "dims": DIMS, "mixed": MIXED, "indep": INDEP,
           "shifted": SHIFTED, "shifted4": SHIFTED4, "matmul": MATMUL}

ALL = ("S0", "S1")
#: program -> strategy -> the outermost fusion groups (sorted)
EXPECTED = {
    "pc": dict(isl=[ALL], max=[ALL], min=[("S0",), ("S1",)], smart=[ALL],
               preserve_coincident=[ALL]),
    # smart cuts between the 1-D and the 2-D statement; preserve_coincident
    # refuses to lose the consumer's second parallel loop
    "dims": dict(isl=[ALL], max=[ALL], min=[("S0",), ("S1",)], smart=[("S0",), ("S1",)],
                 preserve_coincident=[("S0",), ("S1",)]),
    "mixed": dict(isl=[("S0", "S0_init", "S1"), ("S2",)],
                  max=[("S0", "S0_init", "S1", "S2")],
                  min=[("S0",), ("S0_init",), ("S1",), ("S2",)],
                  smart=[("S0", "S1"), ("S0_init",), ("S2",)],
                  preserve_coincident=[("S0", "S0_init"), ("S1",), ("S2",)]),
    # isl leaves independent statements apart (a set); max, smart and
    # preserve_coincident fuse them
    "indep": dict(isl=[("S0",), ("S1",)], max=[ALL], min=[("S0",), ("S1",)], smart=[ALL],
                  preserve_coincident=[ALL]),
    "shifted": dict(isl=[ALL], max=[ALL], min=[("S0",), ("S1",)], smart=[ALL],
                    preserve_coincident=[("S0",), ("S1",)]),
    "shifted4": dict(isl=[ALL], max=[ALL], min=[("S0",), ("S1",)], smart=[ALL],
                     preserve_coincident=[ALL]),
    # smart (like Pluto) cuts the 2-D initialisation from the 3-D update
    "matmul": dict(isl=[("S0", "S0_init")], max=[("S0", "S0_init")],
                   min=[("S0",), ("S0_init",)], smart=[("S0",), ("S0_init",)],
                   preserve_coincident=[("S0", "S0_init")]),
}

SIZES = {"pc": [dict(N=1, M=1), dict(N=5, M=7)], "dims": [dict(N=1, M=3), dict(N=7, M=5)],
         "mixed": [dict(N=1, M=1), dict(N=6, M=5)], "indep": [dict(N=3, M=0), dict(N=5, M=7)],
         "shifted": [dict(N=1, M=2), dict(N=7, M=5)],
         "shifted4": [dict(N=2, M=3, P=2, Q=5)],
         "matmul": [dict(M=1, N=1, K=1), dict(M=7, N=5, K=3)],
         "stencil": [dict(N=1, T=1), dict(N=7, T=5), dict(N=11, T=2)],
         "seidel": [dict(N=1, M=1), dict(N=6, M=7)]}


def prepared(src: str):
    from polyc import bounds, dependence
    p = program(src)
    if p.preconditions is None:
        p = p.replace(preconditions=bounds.preconditions(p))
    return p, dependence.compute(p)


def outer_groups(sched: isl.Schedule) -> list[tuple[str, ...]]:
    """The statements sharing each outermost loop, sorted."""
    def go(node):
        t = node.get_type()
        if t == isl.schedule_node_type.band:
            return [statements_of(node)]
        if t in (isl.schedule_node_type.sequence, isl.schedule_node_type.set):
            out = []
            for i in range(node.n_children()):
                out += go(node.child(i).child(0))
            return out
        if node.n_children() == 1:
            return go(node.child(0))
        return [statements_of(node)]
    return sorted(go(sched.get_root().child(0)))


def assert_flags_exact(sched: isl.Schedule, deps) -> None:
    """Every member claimed coincident carries no dependence; every band
    claimed permutable has no negative distance left to it."""
    from polyc.schedule.fusion import nonnegative_member
    every = deps.all()
    for band in bands(sched):
        for j in range(band.band_n_member()):
            if band.band_member_get_coincident(j):
                assert legality.carried_by_member(band, j, every).is_empty(), (band, j)
            if band.band_get_permutable():
                assert nonnegative_member(band, j, every), (band, j)


def run(src: str, config: Config, sizes: dict) -> None:
    kernel = polyc.compile(src, config=config)
    prog = kernel.program
    inputs = testing.random_inputs(prog, sizes, 0)
    got = kernel(*testing.call_args(prog, inputs, sizes))
    got = got if isinstance(got, tuple) else (got,)
    want = reference.evaluate(prog, inputs, sizes)
    for t, g in zip(prog.outputs, got):
        testing.assert_close(g, want[t.name], dtype=t.dtype,
                             reduction_length=testing.reduction_length(prog, sizes))


def single_iterators(sched: isl.Schedule, prog) -> bool:
    return not initial.skewed_members(sched, prog)


# ------------------------------------------------------------ config

def test_config_fields():
    c = Config()
    assert (c.fusion, c.allow_skewing, c.outer_coincidence) == ("isl", True, True)
    key = dict(c.codegen_key())
    assert key["fusion"] == "isl" and key["allow_skewing"] is True
    assert key["outer_coincidence"] is True
    assert Config(fusion="smart").codegen_key() != c.codegen_key()
    assert set(FUSION_STRATEGIES) == {"isl", "max", "min", "smart", "preserve_coincident"}


@pytest.mark.parametrize("kw,expect", [
    (dict(fusion="maximal"), "Config.fusion must be one of isl, max, min, smart, "
                             "preserve_coincident, got 'maximal'"),
    (dict(fusion=None), "Config.fusion must be one of"),
    (dict(allow_skewing="no"), "Config.allow_skewing must be True or False"),
    (dict(outer_coincidence=1), "Config.outer_coincidence must be True or False"),
])
def test_config_rejects(kw, expect):
    with pytest.raises(PolycError) as info:
        Config(**kw)
    assert expect in str(info.value)


def test_config_from_env(monkeypatch):
    monkeypatch.setenv("POLYC_FUSION", "min")
    assert Config.from_env().fusion == "min"
    assert Config.from_env(fusion="max").fusion == "max"
    monkeypatch.setenv("POLYC_FUSION", "everything")
    with pytest.raises(PolycError, match="POLYC_FUSION='everything' is not a fusion"):
        Config.from_env()
    monkeypatch.delenv("POLYC_FUSION")
    assert Config.from_env().fusion == "isl"


# ------------------------------------------------------------ strategies

def test_default_is_todays_schedule():
    """The default strategy is the isl call polyc always made."""
    for src in list(SOURCES.values()) + [STENCIL, SEIDEL]:
        p, deps = prepared(src)
        every = deps.all()
        ctx = p.parameter_domain()
        sc = (isl.ScheduleConstraints.on_domain(p.domain().intersect_params(ctx))
              .set_context(ctx).set_validity(every).set_coincidence(every)
              .set_proximity(every))
        with initial._scheduler_options(schedule_outer_coincidence=1,
                                        schedule_serialize_sccs=0,
                                        schedule_maximize_band_depth=1):
            today = sc.compute_schedule().to_str()
        assert initial.auto_schedule(p, deps).to_str() == today
        assert initial.auto_schedule(p, deps, Config()).to_str() == today


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("fusion", FUSION_STRATEGIES)
def test_fusion_groups(name, fusion):
    p, deps = prepared(SOURCES[name])
    sched = initial.auto_schedule(p, deps, Config(fusion=fusion))
    legality.check(sched, deps, p, what=f"fusion={fusion}")
    assert outer_groups(sched) == sorted(EXPECTED[name][fusion])
    assert_flags_exact(sched, deps)


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("fusion", FUSION_STRATEGIES)
def test_fusion_results_equal_numpy(name, fusion):
    for sizes in SIZES[name]:
        run(SOURCES[name], Config.from_env(fusion=fusion), sizes)


def test_strategies_printout(golden):
    """The automatic schedule of MIXED under each strategy (before polyc's
    band optimisation)."""
    from polyc.schedule.tree_print import format_tree
    p, deps = prepared(MIXED)
    text = ""
    for fusion in FUSION_STRATEGIES:
        text += f"--- fusion={fusion}\n"
        text += format_tree(initial.auto_schedule(p, deps, Config(fusion=fusion)), p)
    golden("schedules/fusion_strategies_mixed.txt", text)


def test_components_in_topological_source_order():
    p, deps = prepared(MIXED)
    assert initial.components(p, deps.all()) == [("S0_init",), ("S0",), ("S1",), ("S2",)]


def test_preserve_coincident_counts():
    """The numbers behind the preserve_coincident decisions above: fusing
    SHIFTED keeps 1 of 2 parallel loops (refused), SHIFTED4 keeps 3 of 4
    (accepted)."""
    p, deps = prepared(SHIFTED)
    assert initial.outer_coincident(initial.auto_schedule(p, deps, Config(fusion="max"))) == 1
    p, deps = prepared(SHIFTED4)
    fused = initial.auto_schedule(p, deps, Config(fusion="preserve_coincident"))
    assert initial.outer_coincident(fused) == 3


def test_max_fuses_independent_components():
    p, deps = prepared(INDEP)
    assert initial.auto_schedule(p, deps).get_root().child(0).get_type() == \
        isl.schedule_node_type.set
    fused = initial.auto_schedule(p, deps, Config(fusion="max"))
    top = fused.get_root().child(0)
    assert top.get_type() == isl.schedule_node_type.band
    assert [top.band_member_get_coincident(j) for j in range(2)] == [True, True]
    assert top.band_get_permutable()


# ------------------------------------------------------------ skewing

@pytest.mark.parametrize("src,outer", [(STENCIL, False), (SEIDEL, True)])
def test_isl_skews_these(src, outer):
    p, deps = prepared(src)
    sched = initial.auto_schedule(p, deps, Config(outer_coincidence=outer))
    assert not single_iterators(sched, p)


@pytest.mark.parametrize("name,src", [("stencil", STENCIL), ("seidel", SEIDEL)])
@pytest.mark.parametrize("fusion", FUSION_STRATEGIES)
@pytest.mark.parametrize("outer", [True, False])
def test_no_skewing(name, src, fusion, outer):
    p, deps = prepared(src)
    config = Config(fusion=fusion, allow_skewing=False, outer_coincidence=outer)
    sched = initial.auto_schedule(p, deps, config)
    legality.check(sched, deps, p)
    assert single_iterators(sched, p), initial.skewed_members(sched, p)
    assert_flags_exact(sched, deps)


def test_no_skewing_stencil_keeps_time_outer():
    """Without skewing, the fused stencil runs t outermost and i inside it,
    i parallel (every dependence is carried by t), the band not permutable
    (the i-1 neighbour has a negative distance along i)."""
    p, deps = prepared(STENCIL)
    sched = initial.auto_schedule(p, deps, Config(allow_skewing=False,
                                                   outer_coincidence=False))
    top = sched.get_root().child(0)
    assert top.get_type() == isl.schedule_node_type.band
    mupa = top.band_get_partial_schedule()
    assert "(t)" in str(mupa.get_union_pw_aff(0)) and "(i)" in str(mupa.get_union_pw_aff(1))
    assert [top.band_member_get_coincident(j) for j in range(2)] == [False, True]
    assert not top.band_get_permutable()


@pytest.mark.parametrize("name,src", [("stencil", STENCIL), ("seidel", SEIDEL)])
@pytest.mark.parametrize("outer", [True, False])
def test_no_skewing_equals_numpy(name, src, outer):
    for skew in (True, False):
        for sizes in SIZES[name]:
            run(src, Config.from_env(allow_skewing=skew, outer_coincidence=outer), sizes)
