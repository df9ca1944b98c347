"""Property: random sequences of schedule transformations on random small
programs either are refused (:class:`~polyc.errors.IllegalScheduleError` or
:class:`~polyc.errors.ScheduleError`, the schedule unchanged) or compile to
code whose results equal numpy's.  Never a wrong result, never another
exception type.

Programs: the schedule-test programs (matmul, producer/consumer, stencil)
and a few fixed ones with recurrences and anti dependences, plus random
multi-statement TC programs from :func:`small_programs` (maps, reductions,
matmul-like contractions, in-place updates, recurrences with distances
``(0, 1)``, ``(1, 0)``, ``(1, -1)``, anti dependences) and, in the slow
variant, the structured templates of ``tests/fuzz/fuzzgen.py``.

Transformations: 1 to 5 steps, each drawn over the loops that exist at that
step: tile / split (small sizes), interchange / reorder (loops of one band
chain, mostly), parallel, vectorize, mark, and skew, shift, reverse, unroll,
unroll_and_jam, isolate_full_tiles, fuse, distribute, promote once they are
registered; ``with_reassociation`` now and then.  After every accepted step
the schedule is compiled and run at small random sizes (0 and 1 included)
with ``out=`` arrays pre-filled with NaN and OpenMP forced on, and compared
with :func:`polyc.reference.evaluate`.  A loop accepted by ``parallel`` or
``vectorize`` (it carries no dependence) must also be reversible (the exact
order check agrees).  The final schedule's recipe must replay to the same
tree.

The default run is derandomized, 100 examples (well under a minute on two
cores; ``SCHEDULE_PROPERTY_QUICK`` changes the count);
``pytest -m slow tests/schedules/test_property.py`` runs the long, random
variant with the fuzzer's templates too (600 examples,
``SCHEDULE_PROPERTY_EXAMPLES`` overrides).  ``SCHEDULE_PROPERTY_SKIP_OPS=a,b``
leaves transformations out of the draw; ``SCHEDULE_PROPERTY_VERBOSE=1``
prints every refusal.  A failure prints a ready-to-paste reproducer.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import polyc
import polyc.schedule.transforms  # noqa: F401  (registers the transformations)
from polyc import reference, testing
from polyc.errors import IllegalScheduleError, PolycError, ScheduleError, ShapeError
from polyc.pipeline import compile_schedule
from polyc.schedule.language import TRANSFORMS, Schedule

from .util import ANTI, MATMUL, PRODUCER_CONSUMER, RECUR, STENCIL

CHAIN = """
def chain(float(N, M) A, float(M, K) B, float(K) v) -> (T, Y) {
    T(i, k) +=! A(i, j) * B(j, k)
    Y(i) +=! T(i, k) * v(k)
}
"""

WAVE = """
def wave(float(N, M) X) -> (P) {
    P(i, j) = X(i, j)
    P(i, j) = P(i - 1, j) + 0.5 * P(i, j - 1) + X(i, j) where i in 1:N, j in 1:M
}
"""

FIXED = [MATMUL, PRODUCER_CONSUMER, STENCIL, RECUR, ANTI, CHAIN, WAVE]

#: sizes drawn for every size parameter: small, 0 and 1 included
SMALL_SIZES = (1, 2, 3, 4, 5, 7, 0)


# ------------------------------------------------------------ programs

def _expr(draw, leaves: list[str]) -> str:
    """Combine ``leaves`` with + - * and a scale (values stay moderate)."""
    nodes = list(leaves)
    while len(nodes) > 1:
        a = nodes.pop(draw(st.integers(0, len(nodes) - 1)))
        b = nodes.pop(draw(st.integers(0, len(nodes) - 1)))
        op = draw(st.sampled_from(("+", "-", "*", "+")))
        nodes.insert(0, f"({a} {op} {b})" if op != "*" else f"{a} * {b}")
    text = nodes[0]
    if draw(st.integers(0, 9)) < 2:
        text = f"{draw(st.sampled_from(('0.5', '2.0', '-1.0')))} * {text}"
    if draw(st.integers(0, 9)) < 1:
        text = f"tanh({text})"
    return text


@st.composite
def small_programs(draw) -> str:
    """One TC definition of 1 to 4 statements over ``N`` x ``M`` (and ``N``
    x ``N`` for contractions): new outputs by maps, reductions and
    matmul-like contractions; in-place updates and recurrences on earlier
    outputs."""
    nm: list[str] = []          # outputs indexed (i, j), i < N, j < M
    n1: list[str] = []          # outputs indexed (i), i < N
    nn: list[str] = []          # outputs indexed (i, l), i, l < N
    outputs: list[str] = []
    lines: list[str] = []

    def reads_nm() -> list[str]:
        return ["A(i, j)", "B(j, i)", "X(i)"] + [f"{p}(i, j)" for p in nm] + \
               [f"{q}(i)" for q in n1]

    def leaves(cands, lo=1, hi=2) -> list[str]:
        k = draw(st.integers(lo, hi))
        return [draw(st.sampled_from(cands)) for _ in range(k)]

    def anchored(ls: list[str]) -> list[str]:
        """``ls`` with a read that gives ``j`` its range (i, j both plain)."""
        if not any("(i, j)" in x or "(j, i)" in x for x in ls):
            ls = ls + [draw(st.sampled_from(["A(i, j)", "B(j, i)"] +
                                            [f"{p}(i, j)" for p in nm]))]
        return ls

    nstmts = draw(st.integers(1, 4))
    for k in range(nstmts):
        name = f"O{k}"
        kinds = ["map2", "red1", "mm", "map1"]
        if nm:
            kinds += ["inplace2", "recur_j", "recur_i", "recur_diag", "anti2", "acc1"]
        if n1:
            kinds += ["recur1"]
        if nn:
            kinds += ["inplace_nn"]
        kind = draw(st.sampled_from(kinds))
        if kind == "map2":
            lines.append(f"{name}(i, j) = {_expr(draw, anchored(leaves(reads_nm())))}")
            nm.append(name)
        elif kind == "red1":
            op = draw(st.sampled_from(("+=!", "+=!", "max=!")))
            lines.append(f"{name}(i) {op} {_expr(draw, anchored(leaves(reads_nm())))}")
            n1.append(name)
        elif kind == "mm":
            left = draw(st.sampled_from(["A"] + nm))
            lines.append(f"{name}(i, l) +=! {left}(i, j) * B(j, l)")
            nn.append(name)
        elif kind == "map1":
            cands = ["X(i)"] + [f"{q}(i)" for q in n1]
            lines.append(f"{name}(i) = {_expr(draw, leaves(cands))}")
            n1.append(name)
        elif kind == "inplace2":
            p = draw(st.sampled_from(nm))
            rhs = _expr(draw, [f"{p}(i, j)"] + leaves(reads_nm(), 1, 1))
            lines.append(f"{p}(i, j) = {rhs}")
            continue
        elif kind in ("recur_j", "recur_i", "recur_diag", "anti2"):
            p = draw(st.sampled_from(nm))
            read, where = {
                "recur_j": (f"{p}(i, j - 1)", "i in 0:N, j in 1:M"),
                "recur_i": (f"{p}(i - 1, j)", "i in 1:N, j in 0:M"),
                "recur_diag": (f"{p}(i - 1, j + 1)", "i in 1:N, j in 0:M - 1"),
                "anti2": (f"{p}(i + 1, j - 1)", "i in 0:N - 1, j in 1:M"),
            }[kind]
            other = draw(st.sampled_from(["A(i, j)", "X(i)", "B(j, i)"]))
            lines.append(f"{p}(i, j) = 0.5 * {read} + {other} where {where}")
            continue
        elif kind == "acc1":
            q = draw(st.sampled_from(n1)) if n1 else None
            if q is None:
                lines.append(f"{name}(i) +=! {_expr(draw, anchored(leaves(reads_nm())))}")
                n1.append(name)
            else:
                lines.append(f"{q}(i) += {_expr(draw, anchored([]))}")
                continue
        elif kind == "recur1":
            q = draw(st.sampled_from(n1))
            lines.append(f"{q}(i) = {q}(i - 1) * 0.5 + X(i) where i in 1:N")
            continue
        elif kind == "inplace_nn":
            p = draw(st.sampled_from(nn))
            lines.append(f"{p}(i, l) = {p}(i, l) * 0.5 + {p}(l, i)")
            continue
        outputs.append(name)
    if not outputs:                             # pragma: no cover (first is new)
        lines.insert(0, "O9(i, j) = A(i, j)")
        outputs.append("O9")
    body = "\n".join(f"    {ln}" for ln in lines)
    return (f"def rnd(float(N, M) A, float(M, N) B, float(N) X) -> "
            f"({', '.join(outputs)}) {{\n{body}\n}}\n")


def _fuzz_templates():
    """The structured templates of the differential fuzzer, without the
    size-specialised ones (a user schedule needs plain sizes)."""
    here = str(Path(__file__).resolve().parent.parent / "fuzz")
    if here not in sys.path:
        sys.path.insert(0, here)
    import fuzzgen
    return fuzzgen.tc_templates().filter(lambda src: "int64 S" not in src)


def programs(with_templates: bool):
    strategies = [st.sampled_from(FIXED), small_programs()]
    if with_templates:
        strategies.append(_fuzz_templates())
    return st.one_of(*strategies)


# --------------------------------------------------------- transformations

#: the transformations the property draws, in the order hypothesis shrinks to
OPS = ("split", "tile", "interchange", "reorder", "parallel", "vectorize", "mark",
       "skew", "shift", "reverse", "unroll", "unroll_and_jam", "isolate_full_tiles",
       "fuse", "distribute", "promote", "with_reassociation")


def _chain_related(a, b) -> bool:
    """Whether loops ``a`` and ``b`` could be in one band chain."""
    if a.path == b.path:
        return a.member != b.member
    short, long_ = (a, b) if len(a.path) < len(b.path) else (b, a)
    return long_.path[:len(short.path)] == short.path


def _innermost(a, loops) -> bool:
    """Whether ``a`` is the last member of its band with no band below."""
    return not any((x.path == a.path and x.member > a.member) or
                   (len(x.path) > len(a.path) and x.path[:len(a.path)] == a.path)
                   for x in loops)


def _outer_of(a, b) -> bool:
    """Whether ``b`` is an outer loop of ``a``."""
    if a.path == b.path:
        return b.member < a.member
    return len(b.path) < len(a.path) and a.path[:len(b.path)] == b.path


class Step:
    """One drawn step: ``op``, positional ``args`` and ``kwargs``, and the
    Python text of the call (for the reproducer)."""

    def __init__(self, op, args=(), kwargs=None):
        self.op, self.args, self.kwargs = op, tuple(args), dict(kwargs or {})

    def code(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        if self.op == "with_reassociation":
            return "s = s.with_reassociation()"
        return f"s = s.{self.op}({', '.join(parts)})"

    def apply(self, s: Schedule) -> Schedule:
        if self.op == "with_reassociation":
            return s.with_reassociation()
        return getattr(s, self.op)(*self.args, **self.kwargs)


def _spec(data, lp):
    """A loop argument for ``lp``: its path (always unique) or, now and then,
    its name (which may be ambiguous: a ScheduleError is fine)."""
    if data.draw(st.integers(0, 9), label="by name?") < 2:
        return (lp.statements[0], lp.name.split("|")[0])
    return {"path": list(lp.path), "member": lp.member}


def _binds(op: str, args, kwargs) -> bool:
    """Whether the registered transformation takes these arguments (the
    signatures of transformations still being written may differ)."""
    try:
        inspect.signature(TRANSFORMS[op]).bind(None, *args, **kwargs)
        return True
    except TypeError:
        return False


#: transformations left out of the draw (comma-separated names), e.g. while
#: one is being written
SKIP_OPS = set(filter(None, os.environ.get("SCHEDULE_PROPERTY_SKIP_OPS", "").split(",")))


def draw_step(data, s: Schedule) -> Step | None:
    assert "tile" in TRANSFORMS
    ops = [op for op in OPS if (op in TRANSFORMS or op == "with_reassociation")
           and op not in SKIP_OPS]
    op = data.draw(st.sampled_from(ops), label="op")
    loops = s.loops()
    if op == "with_reassociation":
        return Step(op)
    if not loops:
        return None
    # loops where the transformation can apply, drawn mostly (not always:
    # the refusals are part of the property)
    preferred = {
        "vectorize": [x for x in loops if _innermost(x, loops)],
        "distribute": [x for x in loops if len(x.statements) > 1],
        "isolate_full_tiles": [x for x in loops if x.name.endswith(("_tile", "_outer"))],
        "fuse": [x for x in loops if x.member == 0],
        "unroll": [x for x in loops if _innermost(x, loops)],
    }.get(op, [])
    pool = preferred if preferred and data.draw(st.integers(0, 9), label="prefer") < 8 \
        else loops
    lp = data.draw(st.sampled_from(pool), label="loop")
    small = st.sampled_from((2, 3, 1, 4, 5))
    if op == "tile":
        same = [x for x in loops if x.path == lp.path and x.member >= lp.member]
        n = data.draw(st.integers(1, min(3, len(same))), label="tile count")
        chosen = same[:n]
        if data.draw(st.integers(0, 9), label="random tile loops?") == 0:
            chosen = data.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=2,
                                        unique_by=lambda x: (x.path, x.member)))
        sizes = [data.draw(small, label="tile size") for _ in chosen]
        step = Step("tile", ([_spec(data, x) for x in chosen], sizes))
    elif op == "split":
        step = Step("split", (_spec(data, lp), data.draw(small, label="factor")))
    elif op in ("interchange", "reorder"):
        related = [x for x in loops if _chain_related(lp, x)]
        pool = related if related and data.draw(st.integers(0, 9)) < 8 else \
            [x for x in loops if (x.path, x.member) != (lp.path, lp.member)]
        if not pool:
            return None
        if op == "interchange":
            other = data.draw(st.sampled_from(pool), label="other loop")
            step = Step(op, (_spec(data, lp), _spec(data, other)))
        else:
            k = data.draw(st.integers(1, min(2, len(pool))), label="reorder count")
            others = data.draw(st.permutations(pool))[:k]
            chosen = data.draw(st.permutations([lp] + list(others)))
            step = Step(op, ([_spec(data, x) for x in chosen],))
    elif op in ("parallel", "vectorize", "reverse"):
        step = Step(op, (_spec(data, lp),))
    elif op == "mark":
        step = Step(op, (_spec(data, lp), data.draw(st.sampled_from(("hook", "tensorize")))))
    elif op == "skew":
        outer = [x for x in loops if _outer_of(lp, x)]
        if not outer:
            return None
        by = data.draw(st.sampled_from(outer), label="skew by")
        factor = data.draw(st.sampled_from((1, -1, 2)), label="skew factor")
        step = Step(op, (_spec(data, lp), _spec(data, by), factor))
    elif op == "shift":
        stmt = data.draw(st.sampled_from(lp.statements), label="statement")
        amount = data.draw(st.sampled_from((1, -1, 2, 0, -3)), label="amount")
        step = Step(op, (stmt, _spec(data, lp), amount))
    elif op == "unroll":
        factor = data.draw(st.sampled_from((2, 3, None)), label="unroll factor")
        step = Step(op, (_spec(data, lp),) if factor is None else (_spec(data, lp), factor))
    elif op == "unroll_and_jam":
        step = Step(op, (_spec(data, lp), data.draw(st.sampled_from((2, 3)))))
    elif op == "isolate_full_tiles":
        step = Step(op, (_spec(data, lp),))
    elif op == "fuse":
        others = [x for x in preferred or loops
                  if not set(x.statements) & set(lp.statements)]
        if not others:
            return None
        other = data.draw(st.sampled_from(others), label="fuse with")
        if data.draw(st.integers(0, 9), label="fuse statements?") < 3:
            step = Step(op, (lp.statements[0], other.statements[0]))
        else:
            step = Step(op, (_spec(data, lp), _spec(data, other)))
    elif op == "distribute":
        stmts = list(lp.statements)
        if len(stmts) >= 2 and data.draw(st.booleans(), label="distribute groups?"):
            stmts = data.draw(st.permutations(stmts), label="group order")
            cut = data.draw(st.integers(1, len(stmts) - 1), label="distribute cut")
            step = Step(op, (_spec(data, lp), list(stmts[:cut]), list(stmts[cut:])))
        else:
            step = Step(op, (_spec(data, lp),))
    elif op == "promote":
        tensors = [t.name for t in s.program.tensors]
        tensor = data.draw(st.sampled_from(tensors), label="tensor")
        step = Step(op, (tensor,), {"at": _spec(data, lp)})
    else:                                        # pragma: no cover
        return None
    if not _binds(step.op, step.args, step.kwargs):
        return None
    return step


# --------------------------------------------------------------- checking

def _sizes(data, prog) -> list[dict]:
    """Two size sets: drawn small values (0 and 1 included), and all 3."""
    names = list(prog.params)
    drawn = {n: data.draw(st.sampled_from(SMALL_SIZES), label=f"size {n}") for n in names}
    return [drawn, {n: 3 for n in names}]


def _run(kernel, base, sizes: dict, seed: int) -> str | None:
    """Compare ``kernel`` with numpy at ``sizes``; ``None`` if equal (or the
    sizes are outside the program's preconditions, for both), else the
    mismatch."""
    inputs = testing.random_inputs(base, sizes, seed)
    try:
        want = reference.evaluate(base, inputs, sizes)
    except ShapeError:
        want = None
    except (IndexError, NotImplementedError, MemoryError):
        return None         # e.g. a gather into an empty dimension: nothing to compare
    args = testing.call_args(base, inputs, sizes)
    outs = None
    if want is not None:
        outs = [np.full(want[t.name].shape, np.nan, dtype=want[t.name].dtype)
                for t in base.outputs]
    try:
        got = kernel(*args, out=None if outs is None else
                     (tuple(outs) if len(outs) > 1 else outs[0]))
    except ShapeError as e:
        return None if want is None else f"the kernel refused sizes numpy accepts: {e}"
    except polyc.BindingError as e:
        if "its extent is 0" in str(e):
            return None     # a gather into an empty dimension (as the fuzzer)
        return f"the kernel call raised {type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001
        return f"the kernel call raised {type(e).__name__}: {e}"
    if want is None:
        return "the kernel accepted sizes the reference refuses"
    got = got if isinstance(got, tuple) else (got,)
    red = testing.reduction_length(base, sizes)
    for t, g in zip(base.outputs, got):
        try:
            testing.assert_close(g, want[t.name], dtype=t.dtype, reduction_length=red)
        except AssertionError as e:
            return f"output {t.name} differs at sizes {sizes}: {e}"
    return None


def _reproducer(src: str, start: str, steps: list[Step], sizes, what: str) -> str:
    code = "\n".join(st.code() for st in steps)
    how = "" if start == "source" else f", start={start!r}"
    return (f"{what}\n--- reproducer ---\nimport polyc\nfrom polyc.schedule.language import "
            f"Schedule\nfrom tests.schedules.util import check\nSRC = '''{src}'''\n"
            f"s = Schedule.from_program(polyc.program(SRC){how})\n{code}\n"
            f"check(s, {sizes!r})\n")


#: schedules (program source, tree text, sizes) already compared: equal
#: trees need no second compile within one session
_CHECKED: set = set()


def run_property(data, src: str) -> None:
    try:
        prog = polyc.program(src)
    except PolycError as e:     # a generated program polyc rejects: not our subject
        if src in FIXED:
            raise
        from hypothesis import reject
        print(f"rejected program: {e}")
        reject()
    start = data.draw(st.sampled_from(("source", "isl")), label="start")
    s = Schedule.from_program(prog, start=start)
    size_sets = _sizes(data, prog)
    steps: list[Step] = []

    def fail(what: str, tail: list[Step] = (), sizes=None, exc: bool = False):
        text = what + ("\n" + traceback.format_exc() if exc else "")
        return AssertionError(_reproducer(src, start, steps + list(tail),
                                          sizes or size_sets[0], text))

    nsteps = data.draw(st.integers(1, 5), label="steps")
    for _ in range(nsteps):
        # (failures are raised outside the except blocks: hypothesis compares
        # exception contexts, and islpy's isl.Error has no equality)
        problem = None
        try:
            step = draw_step(data, s)       # queries the schedule: s.loops()
        except Exception as e:  # noqa: BLE001 - an accepted schedule must answer
            problem = fail(f"s.loops() on the accepted schedule raised {type(e).__name__}: "
                           f"{e}", exc=True)
        if problem is not None:
            raise problem
        if step is None:
            continue
        before_text, before_recipe = s.to_text(), s.recipe
        new = None
        try:
            new = step.apply(s)
        except (IllegalScheduleError, ScheduleError) as e:
            event(f"{step.op}: refused ({type(e).__name__})")
            if os.environ.get("SCHEDULE_PROPERTY_VERBOSE"):
                print(f"REFUSED {step.code()}: {str(e).splitlines()[0][:300]}")
            if s.to_text() != before_text or s.recipe != before_recipe:
                problem = fail("a refused transformation changed the schedule", [step])
        except Exception as e:          # noqa: BLE001 - any other type is a bug
            problem = fail(f"{step.code()} raised {type(e).__name__}: {e}", [step], exc=True)
        if problem is not None:
            raise problem
        if new is None:
            continue
        event(f"{step.op}: accepted")
        steps.append(step)
        s = new
        if step.op in ("parallel", "vectorize") and "reverse" in TRANSFORMS:
            # a loop that carries no dependence can also run backwards: the
            # parallel / simd check and the exact order check must agree
            back = Step("reverse", step.args[:1])
            try:
                back.apply(s)
            except IllegalScheduleError as e:
                problem = fail(f"{step.code()} was accepted (no dependence carried) but "
                               f"reversing that loop is refused: {e}", [back])
            except ScheduleError:
                pass
            if problem is not None:
                raise problem
        key = (src, s.to_text(), repr(size_sets))
        if key in _CHECKED:
            continue
        kernel = None
        try:
            kernel = compile_schedule(s)
        except Exception as e:  # noqa: BLE001 - an accepted schedule must compile
            problem = fail(f"compiling the accepted schedule raised {type(e).__name__}: {e}",
                           exc=True)
        if problem is not None:
            raise problem
        kernel.SERIAL_WORK = 0          # run the OpenMP code even on tiny problems
        for k, sizes in enumerate(size_sets):
            bad = _run(kernel, s._base, sizes, seed=k)
            if bad is not None:
                raise fail(f"WRONG RESULT: {bad}\nschedule:\n{s}\n{s.loop_nest()}",
                           sizes=sizes)
        _CHECKED.add(key)
    if steps:
        # the recipe replays to the same tree
        r = problem = None
        try:
            r = Schedule.replay(prog, s.to_json())
        except Exception as e:  # noqa: BLE001
            problem = fail(f"replaying the recipe raised {type(e).__name__}: {e}", exc=True)
        if problem is not None:
            raise problem
        if r.to_text() != s.to_text():
            raise fail("the recipe replays to another tree")


_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much,
                                        HealthCheck.function_scoped_fixture])


@settings(max_examples=int(os.environ.get("SCHEDULE_PROPERTY_QUICK", 100)),
          derandomize=True, **_SETTINGS)
@given(data=st.data(), src=programs(with_templates=False))
def test_random_transform_sequences(data, src):
    run_property(data, src)


@pytest.fixture
def long_run(request):
    """The long variant runs when asked for: ``-m slow`` (or
    ``SCHEDULE_PROPERTY_EXAMPLES`` set), not in a plain run of the suite."""
    expr = request.config.getoption("markexpr") or ""
    if not (("slow" in expr and "not slow" not in expr)
            or os.environ.get("SCHEDULE_PROPERTY_EXAMPLES")):
        pytest.skip("long property run: pytest -m slow tests/schedules/test_property.py")


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("SCHEDULE_PROPERTY_EXAMPLES", 600)),
          derandomize=False, **_SETTINGS)
@given(data=st.data(), src=programs(with_templates=True))
def test_random_transform_sequences_long(long_run, data, src):
    run_property(data, src)


def test_generated_programs_are_accepted():
    """The random program generator makes programs polyc accepts (so the
    property does not silently test nothing)."""
    from hypothesis import find
    for kind in ("j - 1)", "max=!", "+=!", "(i, l)", "j + 1)", "i + 1,", "(i - 1) * 0.5"):
        src = find(small_programs(), lambda s, k=kind: k in s,
                   settings=settings(database=None, max_examples=2000, derandomize=True))
        Schedule.from_program(polyc.program(src))


# ----------------------------------------------- regressions it found

def test_regression_distribute_above_promotion_is_refused():
    """Found by the long property run: a distribution of the loops around a
    promotion duplicated the copies into both halves (the second half with
    no copy-in: an uninitialised local buffer, wrong results).  The
    promotion's copies are now re-checked after every transformation."""
    from .util import check, start
    s = start(MATMUL).tile([("S0", "m")], [2]).promote("C", at=("S0", "n"))
    check(s, dict(M=3, K=3, N=3))
    for loop in (("S0", "m_tile"), ("S0", "m"), ("S0", "n")):
        before = s.to_text()
        with pytest.raises(IllegalScheduleError, match="breaks the promotion of C"):
            s.distribute(loop)
        assert s.to_text() == before


def test_regression_reassociation_keeps_the_init_first():
    """Found by the long property run.  isl's schedule runs the init of
    ``O0(i) +=! A(i, j)`` inside the ``j`` loop (at ``j == 0``); with
    reassociation allowed, reversing ``j`` used to be accepted although the
    init then runs after the updates ``j = M-1 .. 1`` (wrong results): the
    exact dataflow has only ``S0_init[i] -> S0[i, 0]``, and once the
    reduction dependences were dropped nothing ordered the init before the
    other updates.  Under reassociation, a dependence into (out of) one
    update of a reduction holds for all its updates of the same element."""
    from .util import check, start
    src = "def rnd(float(N, M) A) -> (O0) {\n    O0(i) +=! A(i, j)\n}\n"
    s = Schedule.from_program(polyc.program(src), start="isl").with_reassociation()
    before = s.to_text()
    with pytest.raises(IllegalScheduleError, match="S0_init"):
        s.reverse(s.loops()[1])
    assert s.to_text() == before
    # reassociation still allows reordering the updates among themselves
    m = start(MATMUL).with_reassociation()
    for t in (m.reverse(("C", "k")), m.vectorize(("C", "k")),
              m.split(("C", "k"), 2).interchange(("C", "k_outer"), ("C", "k"))):
        check(t, dict(M=3, N=4, K=5))
