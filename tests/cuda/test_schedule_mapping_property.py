"""Property: any mapping the schedule language accepts is correct.

Hypothesis draws hand mappings of a few programs (tile sizes, which loops go
to blocks and threads, block shapes, promotions to shared memory and
registers); every step is either refused (``ScheduleError`` /
``IllegalScheduleError``, the schedule unchanged) or kept, and the result,
compiled for ``target="cuda"`` and run by the instrumented emulator (race,
bounds and poisoned-buffer checks) at sizes 1, primes and tile multiples,
must match :func:`polyc.reference.evaluate` within
:func:`polyc.testing.assert_close`'s tolerance."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc
from polyc import reference
from polyc.config import Config
from polyc.errors import IllegalScheduleError, ScheduleError
from polyc.pipeline import compile_schedule
from polyc.testing import assert_close, random_inputs, reduction_length

PROGRAMS = {
    "matmul": ("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
               "isl", [dict(M=1, K=1, N=1), dict(M=37, K=5, N=33), dict(M=16, K=40, N=64)]),
    "two": ("def two(float(M,N) A, float(N) b) -> (C, D) {\n  C(m,n) = A(m,n) * 2.0\n"
            "  D(m) +=! C(m,n) * b(n)\n}", "source",
            [dict(M=1, N=1), dict(M=33, N=17), dict(M=8, N=64)]),
    "stencil": ("def st(float(H,W) I) -> (O) {\n  O(i,j) = I(i,j) + I(i+1,j) + I(i,j+1)"
                " where i in 0:H-1, j in 0:W-1\n}", "source",
                [dict(H=2, W=2), dict(H=19, W=40), dict(H=33, W=9)]),
}
TILES = [1, 2, 3, 8, 32]
THREADS = [1, 2, 5, 8, 32]


def _try(s, op, *args, **kwargs):
    """``s.op(*args)``, or ``s`` unchanged when the schedule language
    refuses it (what a user sees: an error, their schedule intact)."""
    try:
        return s.apply(op, *args, **kwargs), True
    except (ScheduleError, IllegalScheduleError):
        return s, False


@st.composite
def mappings(draw):
    name = draw(st.sampled_from(sorted(PROGRAMS)))
    src, start, sizes = PROGRAMS[name]
    program = polyc.program(src)
    s = polyc.Schedule.from_program(program, start=start)
    loops = s.loops()
    lp = draw(st.sampled_from(loops))
    target = lp.statements[0]
    names = [x.name for x in loops if x.path == lp.path]
    first = names.index(lp.name) if lp.name in names else 0
    n = draw(st.integers(1, min(2, len(names) - first)))
    chosen = [(target, x) for x in names[first:first + n]]
    tiles = [draw(st.sampled_from(TILES)) for _ in chosen]
    s, tiled = _try(s, "tile", chosen, tiles)
    if tiled:
        blocks = [(t, f"{x}_tile") for t, x in chosen]
        points = chosen
    else:
        blocks, points = [], chosen
    if blocks and draw(st.booleans()):
        s, _ = _try(s, "map_to_blocks", blocks[:draw(st.integers(1, len(blocks)))])
    sizes_t = [draw(st.sampled_from(THREADS)) for _ in points] if draw(st.booleans()) else None
    s, threads = _try(s, "map_to_threads", points, **({"sizes": sizes_t} if sizes_t else {}))
    inputs = [t.name for t in program.inputs]
    if threads and blocks and draw(st.booleans()):
        s, _ = _try(s, "promote_shared", draw(st.sampled_from(inputs)), blocks[-1])
    if threads and draw(st.booleans()):
        s, _ = _try(s, "promote_registers", draw(st.sampled_from(
            inputs + [t.name for t in program.outputs])), points[-1])
    return name, s, sizes


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mappings())
def test_an_accepted_mapping_computes_the_reference(case):
    name, s, size_sets = case
    try:
        k = compile_schedule(s, Config.from_env(target="cuda", emulate=True,
                                                emulate_checks=True))
    except ScheduleError as e:       # the one refusal left to compile time
        assert "maps loops to blocks but none to threads" in str(e), e
        return
    base = polyc.program(PROGRAMS[name][0])       # without the promotions' buffers
    for sizes in size_sets:
        ins = random_inputs(base, sizes, seed=1)
        got = k(*[ins[t.name] for t in base.inputs])
        got = got if isinstance(got, tuple) else (got,)
        want = reference.evaluate(base, ins, sizes)
        red = reduction_length(base, sizes)
        for t, g in zip(base.outputs, got):
            assert_close(g, want[t.name], reduction_length=red, name=f"{name} {t.name}")


def test_the_property_reaches_hand_mappings():
    """The strategy is not vacuous: across its examples it maps blocks,
    threads and both promotions (checked on a fixed sample)."""
    seen: set[str] = set()

    @settings(max_examples=30, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mappings())
    def collect(case):
        text = case[1].to_json()
        seen.update(op for op in ("map_to_blocks", "map_to_threads", "promote_shared",
                                  "promote_registers") if f'"{op}"' in text)
    collect()
    assert seen == {"map_to_blocks", "map_to_threads", "promote_shared", "promote_registers"}

