"""``Program.fingerprint``, ``Program.rename_statements`` /
``rename_tensors`` and ``ir.merge_programs`` (no C compiler needed; the
merged programs are compiled in ``tests/cpu/test_merge_programs.py``)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import islpy as isl
import pytest

from polyc import ir
from polyc.api import program
from polyc.errors import DTypeError, ShapeError
from polyc.schedule.recipe import program_fingerprint

ROOT = Path(__file__).resolve().parents[2]

ADD_BIAS = "def a(float(N,K) X, float(K) b) -> (Y) { Y(n,k) = X(n,k) + b(k) }"
ROW_SUM = "def b(float(N,K) Y) -> (Z) { Z(n) +=! Y(n,k) }"
SCALE = "def s(float(N) X) -> (Y) { Y(n) = X(n) * 2.0 }"


def _bounded(p: ir.Program, limit: int) -> ir.Program:
    """``p`` with its first statement's domain cut at ``n < limit``."""
    s = p.statements[0]
    cut = isl.Set(f"[N] -> {{ {s.name}[n] : n < {limit} }}")
    cut = cut.align_params(s.domain.get_space())
    return p.replace(statements=(replace(s, domain=s.domain.intersect(cut)),)
                     + p.statements[1:])


def test_same_source_same_fingerprint():
    assert program(ADD_BIAS).fingerprint() == program(ADD_BIAS).fingerprint()
    assert len(program(ADD_BIAS).fingerprint()) == 64


def test_fingerprint_is_stable_across_processes():
    code = ("from polyc.api import program; "
            f"print(program({ROW_SUM!r}).fingerprint())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.strip()
    assert out == program(ROW_SUM).fingerprint()


@pytest.mark.parametrize("other", [
    SCALE.replace("float(N) X", "double(N) X"),            # a tensor dtype
    SCALE.replace("2.0", "3.0"),                            # a body constant
    SCALE.replace("2.0", "2"),                              # its type
    SCALE.replace("-> (Y)", "-> (W)").replace("Y(n)", "W(n)"),   # a tensor name
], ids=["dtype", "constant", "constant-type", "tensor-name"])
def test_fingerprint_tells_apart(other):
    base, changed = program(SCALE), program(other)
    assert str(base) != str(changed)
    assert base.fingerprint() != changed.fingerprint()


def test_fingerprint_tells_apart_reduction_ops():
    base = program(ROW_SUM)
    for op in ("max=!", "min=!", "*=!"):
        changed = program(ROW_SUM.replace("+=!", op))
        assert str(base) != str(changed)
        assert base.fingerprint() != changed.fingerprint()


def test_fingerprint_tells_apart_a_domain_bound():
    base = program(SCALE)
    cut, cut2 = _bounded(base, 10), _bounded(base, 11)
    assert len({str(base), str(cut), str(cut2)}) == 3
    assert len({base.fingerprint(), cut.fingerprint(), cut2.fingerprint()}) == 3


def test_fingerprint_ignores_parameter_order_of_isl_objects():
    """An object printed with its parameters in another order (isl keeps the
    order it was built with) gives the same fingerprint."""
    base = program(ADD_BIAS)
    s = base.statements[0]
    swapped = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=[], params=["K", "N"])
    other = base.replace(statements=(replace(s, domain=s.domain.align_params(swapped)),))
    assert other.statements[0].domain.to_str() != s.domain.to_str()
    assert other.fingerprint() == base.fingerprint()


def test_recipe_fingerprint_ignores_preconditions():
    from polyc import bounds
    p = program(ADD_BIAS)
    with_pre = p.replace(preconditions=bounds.preconditions(p))
    assert program_fingerprint(p) == program_fingerprint(with_pre)


def test_fingerprint_survives_pickling_a_loop_program():
    """The tuner ships programs to worker processes by pickling them; a loop
    program's isl objects read back from text lose redundant constraints
    (``0 <= i`` beside ``0 <= j < i``), which must not change the
    fingerprint (its recipes would be refused by the workers), with or
    without the preconditions derived from the bounds."""
    import pickle

    from benchmarks.polybench import BENCHMARKS
    from polyc import bounds
    from polyc.schedule.language import Schedule
    b = BENCHMARKS["lu"]
    p = b.kernel.specialize(*b.init(b.sizes["MINI"])).program.replace(preconditions=None)
    for q in (p, p.replace(preconditions=bounds.preconditions(p))):
        back = pickle.loads(pickle.dumps(q))
        assert back.fingerprint() == q.fingerprint()
        assert program_fingerprint(back) == program_fingerprint(p)
        recipe = Schedule.from_program(q).to_recipe()
        # (refused before: "the recipe was made for program 'lu' (fingerprint ...)")
        assert Schedule.replay(back, recipe).loop_nest() == Schedule.from_program(q).loop_nest()


# ------------------------------------------------------------------ renaming

def test_rename_statements_changes_nothing_else():
    p = program(ROW_SUM)
    assert [s.name for s in p.statements] == ["S0_init", "S0"]
    r = p.rename_statements({"S0": "T", "S0_init": "T_init"})
    assert [s.name for s in r.statements] == ["T_init", "T"]
    assert str(r) == str(p).replace("S0", "T")
    assert r.fingerprint() != p.fingerprint()
    for s in r.statements:
        assert s.domain.get_tuple_name() == s.name
        assert s.write.get_tuple_name(isl.dim_type.in_) == s.name
        assert all(m.get_tuple_name(isl.dim_type.in_) == s.name for m in s.reads)
    back = r.rename_statements({"T": "S0", "T_init": "S0_init"})
    assert back.fingerprint() == p.fingerprint()
    assert r.tensors == p.tensors and r.params == p.params


def test_rename_statements_swaps_and_refuses():
    p = program(ROW_SUM)
    swapped = p.rename_statements({"S0": "S0_init", "S0_init": "S0"})
    assert [s.name for s in swapped.statements] == ["S0", "S0_init"]
    assert p.rename_statements({}) is p
    with pytest.raises(KeyError, match="S7"):
        p.rename_statements({"S7": "T"})
    with pytest.raises(ValueError, match="S0_init"):
        p.rename_statements({"S0": "S0_init"})


def test_rename_tensors():
    p = program(ROW_SUM)
    r = p.rename_tensors({"Y": "W"})
    assert [t.name for t in r.tensors] == ["W", "Z"]
    assert r.signature == ("W",)
    assert all(b is None or b[0] == "W" for b in r.param_bindings.values())
    assert str(r) == str(p).replace("Y", "W")
    assert r.rename_tensors({"W": "Y"}).fingerprint() == p.fingerprint()
    with pytest.raises(KeyError):
        p.rename_tensors({"Q": "R"})
    with pytest.raises(ValueError, match="Z"):
        p.rename_tensors({"Y": "Z"})


# ------------------------------------------------------------------ merging

def test_merge_two_definitions():
    a, b = program(ADD_BIAS), program(ROW_SUM)
    m = ir.merge_programs([a, b])
    assert m.name == "a_b"
    assert [s.name for s in m.statements] == ["a_S0", "b_S0_init", "b_S0"]
    assert [(t.name, t.role) for t in m.tensors] == [
        ("X", "input"), ("b", "input"), ("Z", "output"), ("Y", "temp")]
    assert m.signature == ("X", "b")
    assert m.params == ("N", "K")
    assert m.param_bindings == {"N": ("X", 0), "K": ("X", 1)}
    assert m.preconditions is None and m.order is None
    # the consumer's read of Y is the producer's write of Y
    writes = m.writes().range()
    reads = m.reads().range()
    assert not writes.intersect(reads).is_empty()


def test_merge_keeps_requested_outputs_in_order():
    a, b = program(ADD_BIAS), program(ROW_SUM)
    m = ir.merge_programs([a, b], outputs=["Z", "Y"])
    assert [t.name for t in m.outputs] == ["Z", "Y"]
    assert not [t for t in m.tensors if t.role == "temp"]
    with pytest.raises(ValueError, match="'X'"):
        ir.merge_programs([a, b], outputs=["X"])


def test_merge_gives_colliding_statements_distinct_names():
    p = program(SCALE)
    q = program(SCALE.replace("def s", "def t").replace("(Y)", "(V)").replace("Y(n)", "V(n)"))
    m = ir.merge_programs([p, q])
    names = [s.name for s in m.statements]
    assert names == ["s_S0", "t_S0"]
    same = ir.merge_programs([p, p.rename_tensors({"Y": "V"})])   # both named s
    assert [s.name for s in same.statements] == ["p0_S0", "p1_S0"]
    custom = ir.merge_programs([p, q], prefixes=["first_", "second_"])
    assert [s.name for s in custom.statements] == ["first_S0", "second_S0"]
    with pytest.raises(ValueError, match="prefixes"):
        ir.merge_programs([p, q], prefixes=["x_"])
    with pytest.raises(ValueError, match="s_S0"):
        ir.merge_programs([p, q], prefixes=["s_", "s_"])


def test_merge_refuses_what_cannot_be_combined():
    a, b = program(ADD_BIAS), program(ROW_SUM)
    with pytest.raises(ValueError, match="before"):
        ir.merge_programs([b, a])                    # consumer first
    with pytest.raises(ValueError, match="written by"):
        ir.merge_programs([a, a.rename_statements({"S0": "T0"})])
    with pytest.raises(DTypeError, match="Y"):
        ir.merge_programs([a, program(ROW_SUM.replace("float(N,K) Y", "double(N,K) Y"))])
    with pytest.raises(ShapeError, match="Y"):
        ir.merge_programs([a, program(ROW_SUM.replace("float(N,K) Y", "float(N,M) Y")
                                      .replace("Y(n,k)", "Y(n,m)"))])
    with pytest.raises(ValueError):
        ir.merge_programs([])


def test_merge_unites_parameters_and_contexts():
    a = program(SCALE)
    b = program("def c(float(M) P) -> (Q) { Q(m) = P(m) + 1.0 }")
    m = ir.merge_programs([a, b])
    assert m.params == ("N", "M")
    assert m.signature == ("X", "P")
    for s in m.statements:
        assert s.domain.get_space().get_var_names(isl.dim_type.param) == ["N", "M"]
    assert m.context.get_space().get_var_names(isl.dim_type.param) == ["N", "M"]
