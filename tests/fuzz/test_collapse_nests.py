"""Generated loop nests around the collapse decision (issue 19).

``#pragma omp parallel for collapse(k)`` is legal C only over ``k`` perfectly
nested loops (nothing between the headers: no statement, declaration,
register accumulator or hoisted load, guard or sibling loop; inner bounds
independent of the outer iterators), and correct only when those loops are
the coincident members of the marked band.  A band member isl prints as no
loop (degenerate: one value, e.g. an output dimension of extent 1, a strided
``2*j + 0`` index into a dimension of size 1, a ``where j in 0:1`` range)
used to let the next loop down, a reduction loop, be counted instead.

Each case is a TC definition built from parts: statements before the nest
(scalar and lower-rank reductions, nested ``?:`` with mixed reductions) that
keep the nest's init statement out of it, the nest itself (a reduction into
an output with a degenerate dimension in varying positions), and statements
after it (an in-place update, a scalar reduction of the result).  Every case
is run through the fuzzer's check (:func:`fuzzgen.run_tc`: NaN-filled
outputs, several size sets including 0 and 1, OpenMP forced on tiny
problems) against ``polyc.reference``, and its LoopNest is checked: every
collapsed loop nest is perfect and runs over consecutive members of one band.
"""

from __future__ import annotations

import random

import fuzzgen
import pytest

from polyc import api, pipeline
from polyc import loopnest as L
from polyc.config import Config

#: B's shape with the extent-1 dimension at each position, and how the nest
#: reads it: (signature, output indices, read of B)
NESTS = [
    ("float(N, 1, K) B", "O(i, j)", "B(i, {j}, k)"),
    ("float(1, N, K) B", "O(j, i)", "B({j}, i, k)"),
    ("float(N, K, 1) B", "O(i, k, j)", "B(i, k, {j})"),
    ("float(N, 1, K) B", "O(i, j, k)", "B(i, {j}, k)"),
]
#: spellings of the degenerate index (range inference gives j the range 0:1)
J_FORMS = ["j", "2*j + 0", "2*j"]
BEFORE = [
    [],
    ["S +=! B(a, b, c)"],
    ["S max=! B(a, b, c)", "T(a) +=! B(a, b, c)"],
    ["R() +=! (B(a, b, c) > 0) ? (B(a, b, c) <= -0.25 ? B(a, b, c) : 0.5) : -0.5"],
    ["S min=! B(a, b, c)", "R +=! S + B(a, b, c)"],
]
AFTER = [
    [],
    ["{out} = {out} * 2"],
    ["U +=! {out} + 1"],
    ["U max=! {out}", "V(i) +=! {out}"],
]
REDUCTIONS = ["+=!", "max=!", "min=!"]
CONFIGS = ["default", "threads3", "tiles235", "notiling", "nosimd"]
N_CASES = 30


def _case_source(rng: random.Random) -> str:
    sig, out, read = rng.choice(NESTS)
    jform = rng.choice(J_FORMS)
    red = rng.choice(REDUCTIONS)
    body = [s for s in rng.choice(BEFORE)]
    body.append(f"{out} {red} {read.format(j=jform)}")
    body += [s.format(out=out) for s in rng.choice(AFTER)]
    outs: list[str] = []
    for s in body:
        name = s.split("(")[0].split(" ")[0]
        if name not in outs:
            outs.append(name)
    return (f"def f({sig}) -> ({', '.join(outs)}) {{\n"
            + "".join(f"    {s}\n" for s in body) + "}\n")


def _cases() -> list[tuple[str, str]]:
    rng = random.Random(19)
    seen: dict[str, str] = {}
    while len(seen) < N_CASES:
        src = _case_source(rng)
        seen.setdefault(src, rng.choice(CONFIGS))
    return list(seen.items())


CASES = _cases()
SIZE_SETS = (
    (("N", 5), ("K", 3)), (("N", 1), ("K", 1)), (("N", 0), ("K", 4)),
    (("N", 33), ("K", 0)), (("N", 17), ("K", 7)),
)


def _collapsed_loops(node: L.Node):
    for n in L.walk(node):
        if isinstance(n, L.For) and n.parallel and n.collapse > 1:
            yield n


def _band_iterators(loop: L.For, k: int) -> list[str]:
    names = [loop.iterator]
    cur = loop
    for _ in range(k - 1):
        body = cur.body
        while isinstance(body, L.Block) and len(body.children) == 1:
            body = body.children[0]
        assert isinstance(body, L.For), f"collapse({k}) over a body that is not a loop"
        names.append(body.iterator)
        cur = body
    return names


@pytest.mark.parametrize("src,config", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_nest_around_collapse_matches_reference(src, config):
    # the LoopNest: each collapse(k) covers k perfectly nested loops c<d>..c<d+k-1>
    low = pipeline.lower(api.program(src, dtype="float32"),
                         fuzzgen.make_config(config))
    for loop in _collapsed_loops(low.loopnest):
        assert L.perfect_depth(loop, loop.collapse) == loop.collapse, src
        names = _band_iterators(loop, loop.collapse)
        first = int(names[0][1:])
        assert names == [f"c{first + q}" for q in range(loop.collapse)], (src, names)
    # compiled, run at several sizes with OpenMP forced, against the reference
    case = fuzzgen.TcCase(src=src, dtype="float32", config=config, sizes=SIZE_SETS,
                          seed=19, serial_work=False)
    result = fuzzgen.run_tc(case)
    assert result.status == "ok", result.message
    assert result.compared >= 3, result


def test_the_cases_reach_the_collapse_decision():
    """The generated set contains nests where isl's scheduler marks two
    coincident members for collapse and one of them is degenerate (the
    situation of issue 19), and nests that keep a real collapse(2)."""
    degenerate = real = 0
    for src, _ in CASES:
        low = pipeline.lower(api.program(src, dtype="float32"), Config.from_env())
        text = str(low.schedule)
        if "parallel_collapse2" not in text:
            continue
        if any(loop.collapse == 2 for loop in _collapsed_loops(low.loopnest)):
            real += 1
        else:
            degenerate += 1
    assert degenerate >= 3 and real >= 1, (degenerate, real)
