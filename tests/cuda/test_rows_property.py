"""Property: a random chain of row statements (reductions over the row of
any operator, elementwise statements reading earlier results, per-row
scalars) compiles to a row kernel whose barriers the proof accepts, and the
instrumented emulator (races between threads of a phase, bounds), with the
block's threads in both orders, matches :func:`polyc.reference.evaluate`.

The chains are what softmax, the norms and their variants are made of;
each statement reads the input ``X`` and the results before it, at the
same row (``n``) and either the same element (``c``) or the row's scalar."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc
from polyc import reference
from polyc.config import Config
from polyc.testing import assert_close, random_inputs

REDUCTIONS = ["+", "max", "min"]
UNARY = ["{}", "exp({})", "tanh({})", "({} * 0.5)"]
BINARY = ["({} + {})", "({} - {})", "({} * {})"]


@st.composite
def row_programs(draw):
    """A TC definition over rows ``n`` and row elements ``c``."""
    full = ["X(n, c)"]          # tensors (n, c) readable at (n, c)
    scal = []                   # tensors (n) readable at n
    lines, outs = [], []
    for i in range(draw(st.integers(2, 5))):
        kind = draw(st.sampled_from(["reduce", "elem", "scalar"] if scal else ["reduce", "elem"]))
        a = draw(st.sampled_from(full))
        term = draw(st.sampled_from(UNARY)).format(a)
        if scal and draw(st.booleans()):
            term = draw(st.sampled_from(BINARY)).format(term, draw(st.sampled_from(scal)))
        name = f"t{i}"
        if kind == "reduce":
            op = draw(st.sampled_from(REDUCTIONS))
            lines.append(f"{name}(n) {op}=! {term}")
            scal.append(f"{name}(n)")
        elif kind == "elem":
            lines.append(f"{name}(n, c) = {term}")
            full.append(f"{name}(n, c)")
        else:
            s = draw(st.sampled_from(scal))
            lines.append(f"{name}(n) = {s} * 0.5 + 1.0")
            scal.append(f"{name}(n)")
        outs.append(name)
    if not any(line.split("(")[0] in [f.split("(")[0] for f in full[1:]] for line in lines):
        # end with an elementwise pass, as a row program does
        lines.append(f"y(n, c) = X(n, c) - {scal[-1] if scal else 'X(n, c)'}")
        outs.append("y")
    body = "\n    ".join(lines)
    return f"def rows(float(N, C) X) -> ({', '.join(outs)}) {{\n    {body}\n}}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=row_programs(), reverse=st.booleans())
def test_random_row_programs_on_the_instrumented_emulator(src, reverse):
    cfg = Config.from_env(target="cuda", emulate=True, emulate_checks=True,
                          emulate_reverse=reverse)
    k = polyc.compile(src, config=cfg)
    program = k.program
    # a chain with a reduction over its rows is a row kernel (one launch)
    assert ("=!" not in src) or [bool(m.rows) for m in k.kernels] == [True], src
    for sizes in ({"N": 1, "C": 1}, {"N": 3, "C": 37}, {"N": 2, "C": 300}):
        inputs = random_inputs(program, sizes, seed=sizes["C"])
        got = k(inputs["X"])
        got = got if isinstance(got, tuple) else (got,)
        want = reference.evaluate(program, inputs, sizes)
        for t, g in zip(program.outputs, got):
            assert_close(g, want[t.name], dtype=t.dtype, reduction_length=sizes["C"],
                         name=f"{t.name} at {sizes} of\n{src}")
