"""Differential test: random multi-statement TC programs, compiled with the
default schedule passes (fusion, sinking, reduction distribution, tiling,
collapse), against the independent numpy reference, at random sizes
including 0, 1, primes and sizes that no tile size divides.  Outputs are
pre-filled with NaN so that a missed write fails.  ``FUZZ_SEED`` and
``FUZZ_N`` (environment) choose another or a longer sequence of programs."""

import os
import random

import numpy as np
import pytest

import polyc
from polyc import reference, testing
from polyc.errors import PolycError, ShapeError

N_PROGRAMS = int(os.environ.get("FUZZ_N", 120))
SIZES = (0, 1, 2, 3, 7, 13, 17, 67, 70)
OPS = ("=", "+=!", "max=!", "min=!", "*=!")
FUNCS = ("exp", "tanh", "fabs", "sigmoid")


def _index(rng, vs):
    v = rng.choice(vs)
    r = rng.random()
    if r < 0.6:
        return v
    if r < 0.75:
        return f"{v} + {rng.choice(vs)}"
    if r < 0.85:
        return f"2*{v} + {rng.randint(0, 1)}"
    return f"{v} / 2"


def _value(rng, vs, tensors):
    name, rank = rng.choice(tensors)
    acc = f"{name}({', '.join(_index(rng, vs) for _ in range(rank))})"
    r = rng.random()
    if r < 0.15:
        return f"{rng.choice(FUNCS)}({acc})"
    if r < 0.25:
        return f"({acc} > 0 ? {acc} : 0.5 * {acc})"
    return acc


def random_program(rng) -> str:
    """One def with 1-3 statements; later statements may read earlier outputs."""
    tensors = [("A", 2), ("B", 2), ("V", 1)]
    stmts, outs = [], []
    for k in range(rng.randint(1, 3)):
        vs = ["i", "j", "k"][: rng.randint(1, 3)]
        if outs and rng.random() < 0.25:
            # update an earlier output in place: '=' or a reduction without '!'
            out, rank = rng.choice([t for t in tensors if t[0] in outs])
            vs = ["i", "j", "k"][: max(rank, len(vs))]
            lhs = vs[:rank]
            ops = ("=", "+=", "max=") if set(vs) - set(lhs) else ("=", "+=")
            op = rng.choice(ops[1:] if set(vs) - set(lhs) else ops)
        else:
            out = f"O{k}"
            lhs = rng.sample(vs, rng.randint(1, len(vs)))
            op = rng.choice(OPS) if set(vs) - set(lhs) else rng.choice(["=", "+=!"])
        terms = [_value(rng, vs, tensors) for _ in range(rng.randint(1, 3))]
        rhs = rng.choice([" * ", " + "]).join(terms)
        stmts.append(f"    {out}({', '.join(lhs)}) {op} {rhs}")
        if out not in outs:
            tensors.append((out, len(lhs)))
            outs.append(out)
    return ("def f(float(N, M) A, float(M, N) B, float(N) V) -> ("
            + ", ".join(outs) + ") {\n" + "\n".join(stmts) + "\n}")


def _programs():
    rng = random.Random(int(os.environ.get("FUZZ_SEED", 2026)))
    return [random_program(rng) for _ in range(N_PROGRAMS)]


@pytest.mark.parametrize("index", range(N_PROGRAMS))
def test_random_program_matches_reference(index):
    src = _programs()[index]
    try:
        kernel = polyc.compile(src, dtype="float64")
    except PolycError:
        pytest.skip("the random program is not valid TC (e.g. no range for an index)")
    program = kernel.program
    rng = np.random.default_rng(index)
    compared = 0
    for _ in range(3):
        sizes = {"N": int(rng.choice(SIZES)), "M": int(rng.choice(SIZES))}
        inputs = testing.random_inputs(program, sizes, seed=index)
        args = testing.call_args(program, inputs, sizes)
        try:
            want = reference.evaluate(program, inputs, sizes)
        except (ShapeError, OverflowError, FloatingPointError):
            continue                    # sizes outside the preconditions
        outs = tuple(np.full(w.shape, np.nan) for w in want.values())
        with np.errstate(all="ignore"):
            got = kernel(*args, out=outs if len(outs) > 1 else outs[0])
        got = got if isinstance(got, tuple) else (got,)
        red = testing.reduction_length(program, sizes)
        for t, g in zip(program.outputs, got):
            testing.assert_close(g, want[t.name], dtype="float64", reduction_length=red,
                                 name=f"{t.name} of\n{src}\nat {sizes}")
        compared += 1
    if not compared:
        pytest.skip("no size among SIZES satisfies this program's preconditions")
