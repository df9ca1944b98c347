"""Building, checking and timing candidates: the work an executor runs.

Three task functions, module-level so that a process pool or a dask worker
can run them (their payloads are plain dicts of picklable values; a
candidate travels as its recipe, never as a binary):

* :func:`build_task` compiles a candidate (into the disk cache, so the
  measuring process loads it without compiling again);
* :func:`measure_task` checks every candidate not yet checked by running it
  once **in a child process** (``python -m polyc.tune.child``) against the
  reference evaluator's outputs (:func:`polyc.reference.evaluate`) -- a
  crash, a hang (timeout) or a wrong value becomes a failure record and the
  candidate is dropped, the measuring process lives on -- then times the
  survivors round-robin (:func:`round_robin`).

Timing protocol (:func:`round_robin`): every sample repeats the call until it
lasts at least ``min_sample`` seconds (20 ms by default); each round takes
one sample of every kernel in a rotated order, the incumbent twice (first
and last of the round) so that the run measures its own noise; at least five
rounds.  The caller decides on medians of per-round ratios
(:func:`decide`).  A program that reads what it writes from before the call
(:func:`polyc.dependence.carried_in`: an in-place update, a time loop) gets
those arguments restored before every call (:class:`Restore`), untimed, so
that every call of every candidate runs on the same data.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..dependence import carried_in
from ..errors import PolycError

log = logging.getLogger(__name__)

#: Shortest sample (seconds) and fewest rounds.
MIN_SAMPLE = 0.020
MIN_ROUNDS = 5
#: Seconds a child process may take to compile, run and check one candidate.
CHECK_TIMEOUT = 120.0


def compile_candidate(program, recipe, config):
    """The kernel of ``recipe`` on ``program`` (``None``: the automatic
    schedule; ``{"auto": {...}}``: the automatic schedule with those
    ``Config`` options, :func:`polyc.tune.space.auto_recipe`), compiled
    with ``config`` (which must not consult the tuning
    database: the default must stay the default)."""
    from ..pipeline import compile_program, compile_schedule
    from ..schedule.language import Schedule
    from .space import auto_config
    if recipe is None:
        return compile_program(program, config)
    auto = auto_config(recipe, config)
    if auto is not None:            # a variant of the automatic schedule
        return compile_program(program, auto)
    return compile_schedule(Schedule.replay(program, recipe), config)


def build_task(payload: dict) -> dict:
    """Compile one candidate: ``{"program", "recipe", "config"}`` and
    optionally ``"deadline"`` (``time.time()``) -> ``{"ok", "seconds",
    "error"}``, with ``"skipped": True`` when the deadline had passed before
    the task started (a queued build of a session whose budget ran out)."""
    t0 = time.perf_counter()
    if payload.get("deadline") is not None and time.time() > payload["deadline"]:
        return {"ok": False, "skipped": True, "seconds": 0.0,
                "error": "not built: the budget ran out"}
    fault = payload.get("fault")
    if fault and fault.startswith("kill-worker-once:"):      # tests: a worker dies
        marker = Path(fault.split(":", 1)[1])
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os._exit(17)
    try:
        compile_candidate(payload["program"], payload["recipe"], payload["config"])
    except PolycError as e:
        return {"ok": False, "seconds": time.perf_counter() - t0,
                "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
    return {"ok": True, "seconds": time.perf_counter() - t0, "error": ""}


# ------------------------------------------------------------------ checking

_REFERENCES: dict = {}


def reference_data(program, sizes: dict, seed: int, config=None) -> tuple[dict, dict]:
    """Seeded inputs and the reference evaluator's outputs at ``sizes``
    (memoised per program, sizes and seed in this process).  A program with
    a source order of its own (``Program.order``: time loops, imperfect
    nests of ``@polyc.kernel``), which :mod:`polyc.reference` does not
    evaluate, is checked against its automatic schedule's kernel instead."""
    from .. import reference, testing
    key = (program.fingerprint(), tuple(sorted(sizes.items())), seed)
    if key not in _REFERENCES:
        inputs = testing.random_inputs(program, sizes, seed)
        _REFERENCES.clear()          # keep one: the arrays can be large
        if program.order is None:
            expected = reference.evaluate(program, inputs, sizes, inout=True)
        else:
            expected = _default_outputs(program, inputs, sizes, config)
        _REFERENCES[key] = (inputs, expected)
    return _REFERENCES[key]


def _default_outputs(program, inputs: dict, sizes: dict, config) -> dict:
    from .. import testing
    from ..config import Config
    config = (config or Config.from_env()).replace(use_tuned=False)
    kernel = compile_candidate(program, None, config)
    arrays = {k: v.copy() for k, v in inputs.items()}
    got = kernel(*testing.call_args(program, arrays, sizes))
    out = dict(zip([t.name for t in program.outputs], got if isinstance(got, tuple) else (got,)))
    written = {st.tensor for st in program.statements}
    out.update({t.name: arrays[t.name] for t in program.tensors
                if t.role == "inout" and t.name in written})
    return out


def check_in_child(program, recipe, config, sizes: dict, seed: int,
                   timeout: float = CHECK_TIMEOUT, fault: str | None = None) -> str:
    """Run the candidate once in a child process on seeded inputs and compare
    with the reference; returns ``""`` when it passed, else why it failed
    (a signal, a timeout, an exception, the worst error).  ``fault`` injects
    a failure in the child (tests: ``"segfault"``, ``"wrong"``, ``"hang"``)."""
    from ..process import run_process
    inputs, expected = reference_data(program, sizes, seed, config)
    with tempfile.TemporaryDirectory(prefix="polyc-tune-") as d:
        task = Path(d) / "task.pkl"
        data = Path(d) / "data.npz"
        np.savez(data, **{f"in_{k}": v for k, v in inputs.items()},
                 **{f"out_{k}": v for k, v in expected.items()})
        task.write_bytes(pickle.dumps({"program": program, "recipe": recipe,
                                       "config": config, "sizes": sizes,
                                       "data": str(data), "fault": fault}))
        try:
            p = run_process([sys.executable, "-m", "polyc.tune.child", str(task)],
                            timeout=timeout, env=_child_env())
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout:.0f} s"
        except OSError as e:
            return f"could not start the check: {e}"
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    if p.returncode < 0:
        import signal
        try:
            name = signal.Signals(-p.returncode).name
        except ValueError:
            name = str(-p.returncode)
        return f"crashed ({name})"
    try:
        verdict = json.loads(out[-1]) if out else {}
    except json.JSONDecodeError:
        verdict = {}
    if p.returncode != 0 or not verdict.get("ok", False):
        why = verdict.get("error") or p.stderr.decode("utf-8", "replace").strip()[-500:]
        return why or f"exited with status {p.returncode}"
    return ""


def _child_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH", "")) if x)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


# ------------------------------------------------------------------ timing

def _calibrate(fn, min_sample: float, reset=None) -> int:
    _sample(fn, 1, reset)
    reps = 1
    while True:
        dt = _sample(fn, reps, reset) * reps
        if dt >= min_sample or reps >= 1 << 20:
            return reps
        reps = max(reps * 2, int(math.ceil(reps * min_sample / max(dt, 1e-9))))


def _sample(fn, reps: int, reset=None) -> float:
    """Seconds per call of ``fn`` over ``reps`` calls; with ``reset``, which
    runs before every call and is not timed, the calls alone."""
    if reset is None:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps
    total = 0.0
    for _ in range(reps):
        reset()
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
    return total / reps


class Restore:
    """Copies pristine arrays back over the arguments a call changes:
    ``pairs`` of ``(argument, pristine copy)``; called before every timed
    call of an in-place program (:func:`round_robin`'s ``reset``)."""

    def __init__(self, pairs: list):
        self.pairs = pairs

    def __call__(self) -> None:
        for dst, src in self.pairs:
            np.copyto(dst, src)


def round_robin(fns: list, *, rounds: int = MIN_ROUNDS, min_sample: float = MIN_SAMPLE,
                deadline: float | None = None, reset=None) -> list[list[float]]:
    """Per-call seconds of ``fns`` (``fns[0]``: the incumbent), one list per
    round: ``[incumbent_first, f1, ..., fn, incumbent_last]`` in function
    order (the order of the calls is rotated each round).  Stops early,
    after at least two rounds, when ``deadline`` (``time.monotonic()``)
    passes.  ``reset``: run before every call, untimed (an in-place
    program's arguments restored, so every call of every candidate sees the
    same data; a sample then sums the calls' own times)."""
    reps = [_calibrate(f, min_sample, reset) for f in fns]
    out = []
    n = len(fns)
    for r in range(max(rounds, 2)):
        times = [0.0] * (n + 1)
        times[0] = _sample(fns[0], reps[0], reset)
        order = list(range(1, n))
        if order:
            k = r % len(order)
            order = order[k:] + order[:k]
        for i in order:
            times[i] = _sample(fns[i], reps[i], reset)
        times[n] = _sample(fns[0], reps[0], reset)
        out.append(times)
        if deadline is not None and r >= 1 and time.monotonic() > deadline:
            break
    return out


def decide(rounds: list[list[float]]) -> tuple[list[float], float]:
    """``(median ratio to the incumbent per function, noise)`` from
    :func:`round_robin`'s output; the incumbent's own ratio is 1.  The noise
    is the median of ``|log(first / last)|`` over the rounds: how much the
    incumbent differs from itself within one round."""
    n = len(rounds[0]) - 1
    ratios = [1.0]
    for i in range(1, n):
        per = [r[i] / math.sqrt(r[0] * r[n]) for r in rounds]
        ratios.append(statistics.median(per))
    noise = statistics.median(abs(math.log(r[0] / r[n])) for r in rounds)
    return ratios, noise


def measure_task(payload: dict) -> dict:
    """Check (in a child process) and time candidates against an incumbent.

    ``payload``: ``program``, ``recipes`` (the incumbent's first; ``None``
    is the automatic schedule), ``programs`` (optional: the program each
    recipe compiles, e.g. narrowed to a shape class; the same computation),
    ``checked`` (indices already checked),
    ``config``, ``sizes`` (a list of size dicts), ``seed``, ``rounds``,
    ``min_sample``, ``deadline_s`` (seconds the timing may take after the
    checks) or ``deadline`` (the session's end, ``time.time()``: candidates
    not yet checked then are skipped, and the timing stops after two
    rounds), ``faults`` (index -> fault, tests only).  Returns
    ``{"failures": {index: reason}, "rounds": {sizes_json:
    [[seconds...]...]}, "measured": [indices], "skipped": [indices], "host":
    name}``: the incumbent must pass, or every index fails."""
    import socket

    from .. import testing
    program, recipes, config = payload["program"], payload["recipes"], payload["config"]
    faults = payload.get("faults") or {}
    checked = set(payload.get("checked", ()))
    failures: dict[int, str] = {}
    kernels: dict[int, object] = {}
    sizes_list = payload["sizes"]
    programs = payload.get("programs") or [program] * len(recipes)
    wall_end = payload.get("deadline")
    skipped = []
    for i, recipe in enumerate(recipes):
        if i and wall_end is not None and time.time() > wall_end:
            skipped.append(i)
            continue
        try:
            kernels[i] = compile_candidate(programs[i], recipe, config)
        except PolycError as e:
            failures[i] = f"does not compile: {str(e).splitlines()[0]}"
            continue
        if i in checked and i not in faults:
            continue
        for sizes in sizes_list:
            why = check_in_child(programs[i], recipe, config, sizes, payload.get("seed", 0),
                                 timeout=payload.get("check_timeout") or CHECK_TIMEOUT,
                                 fault=faults.get(i))
            if why:
                failures[i] = f"{why} (sizes {sizes})"
                kernels.pop(i, None)
                break
    alive = [i for i in range(len(recipes)) if i in kernels]
    result = {"failures": failures, "rounds": {}, "measured": alive, "skipped": skipped,
              "host": socket.gethostname()}
    if 0 not in kernels:
        return result
    deadline = payload.get("deadline_s")
    end = time.monotonic() + deadline if deadline else None
    if wall_end is not None:
        end = min(end or math.inf, time.monotonic() + wall_end - time.time())
    # an in-place program (it reads what it writes from before the call)
    # gets its arguments restored before every call: repeated calls would
    # otherwise drift the data (to infinities or denormals, whose arithmetic
    # is slow) and time each candidate on other values
    carried = sorted(carried_in(program))
    for sizes in sizes_list:
        inputs, _ = reference_data(program, sizes, payload.get("seed", 0), config)
        # time on copies, so the inputs (and the outputs expected from
        # them) stay as they were
        arrays = {k: v.copy() for k, v in inputs.items()}
        args = testing.call_args(program, arrays, sizes)
        fns = [(lambda k=kernels[i]: k(*args)) for i in alive]
        restore = Restore([(arrays[name], inputs[name]) for name in carried
                           if name in arrays])
        rounds = round_robin(fns, rounds=payload.get("rounds", MIN_ROUNDS),
                             min_sample=payload.get("min_sample", MIN_SAMPLE), deadline=end,
                             reset=restore if restore.pairs else None)
        result["rounds"][json.dumps(sizes, sort_keys=True)] = rounds
    return result
