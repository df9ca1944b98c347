"""Benchmark every ``examples/*.tc`` against the independent numpy evaluation.

Run from the repository root::

    python -m benchmarks.examples [--json] [--only NAME ...] [--repeat-time SECONDS]

For each example, at the sizes of its ``# sizes:`` header and in this one
process: cold and warm compile times (a fresh disk cache, then a disk hit),
the median time of a kernel call and of :func:`polyc.reference.evaluate`
(numpy, BLAS for contractions) on the same seeded inputs, their ratio, the
errors against the reference, and the warm call overhead on the smallest
legal inputs.  Prints a markdown table with the machine noted above it, or one
JSON object with ``--json``.  Exit status 1 when an example fails (an error at
any stage, or a result outside the tolerance of ``polyc.testing``), 2 on a bad
command line.  See ``benchmarks/README.md`` for the protocol and the columns.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

import polyc
from polyc import cache, pipeline, reference, testing
from polyc.api import lower_def
from polyc.config import Config
from polyc.errors import PolycError
from polyc.frontend import tc
from polyc.isl_util import eval_pw_aff

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


# --------------------------------------------------------------------- timing

@dataclass(frozen=True)
class Timing:
    """Median, minimum and number of timed calls (after one warm-up call)."""
    median_s: float
    min_s: float
    reps: int


def measure(fn: Callable[[], Any], repeat_time: float, min_reps: int = 5,
            max_reps: int = 1000) -> Timing:
    """Warm-up, then the median of repeated calls (``testing.median_time``)."""
    return Timing(*testing.median_time(fn, repeat_time, min_reps, max_reps))


def _wall(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


# -------------------------------------------------------------------- machine

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip() in ("model name", "Model", "Hardware"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _blas() -> str:
    try:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except (AttributeError, KeyError, TypeError):
        return "unknown"


def _git_revision() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "unknown") + (" (modified)" if dirty else "")


def machine(config: Config) -> dict:
    """What the figures were measured on (printed above the table)."""
    cc = shutil.which(config.cc) or config.cc
    cores = len(os.sched_getaffinity(0))
    return {
        "cpu": _cpu_model(), "cores": cores, "cpu_count": os.cpu_count(),
        "POLYC_NUM_THREADS": os.environ.get("POLYC_NUM_THREADS"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "polyc_threads": config.num_threads or cores,
        "compiler": cc, "compiler_version": cache.compiler_version(cc),
        "cflags": list(config.cflags),
        "python": platform.python_version(), "numpy": np.__version__, "blas": _blas(),
        "polyc": polyc.__version__, "git": _git_revision(),
        "load_average": _load(),
    }


def _load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other processes competing for the
    cores make OpenMP teams wait (see README.md)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ------------------------------------------------------------------- examples

@dataclass
class Result:
    """The measurements of one example (``None`` where a stage did not run)."""
    name: str
    file: str
    sizes: dict[str, int] = field(default_factory=dict)
    cold_compile_s: float | None = None
    lower_s: float | None = None          # pipeline.lower alone, timed separately
    codegen_build_s: float | None = None  # cold_compile_s - lower_s: emit, cc, load
    warm_compile_s: float | None = None
    warm_was_disk_hit: bool | None = None
    polyc: Timing | None = None
    numpy: Timing | None = None
    speedup_vs_numpy: float | None = None   # numpy / polyc: > 1 means polyc is faster
    reduction_length: int | None = None
    outputs: dict[str, dict] = field(default_factory=dict)
    check_passed: bool | None = None
    overhead_sizes: dict[str, int] | None = None
    call_overhead: Timing | None = None
    error: dict | None = None
    load_average: list[float] | None = None   # when the example finished

    @property
    def failed(self) -> bool:
        return self.error is not None or self.check_passed is False


def load_example(path: Path):
    """``(ir.Program, sizes)`` of the single def of ``path`` at its header's
    sizes (sizes that index arithmetic needs as constants are fixed, as
    ``polyc run`` does)."""
    text = path.read_text()
    module = tc.parse(text, str(path))
    if len(module.defs) != 1:
        raise PolycError(f"{path.name} defines {len(module.defs)} defs; "
                         "the benchmark expects one")
    defn = module.defs[0]
    sizes = tc.sizes_header(text)
    needs = tc.needs_specialization(defn)
    missing = sorted(needs - sizes.keys())
    if missing:
        raise PolycError(f"{path.name}: no '# sizes:' value for {', '.join(missing)}")
    program = lower_def(defn, {k: sizes[k] for k in needs}, source=text)
    missing = [p for p in program.params if p not in sizes]
    if missing:
        raise PolycError(f"{path.name}: no '# sizes:' value for {', '.join(missing)}")
    return program, sizes


def smallest_sizes(program, kernel, header: dict[str, int], seed: int):
    """The first of: every size 1, every size 3, the header sizes divided by
    64 (rounded up), that gives non-empty outputs and that the kernel accepts;
    returns ``(sizes, args)`` or ``None``.  Specialised sizes keep their
    value."""
    params = program.params
    candidates = [{p: 1 for p in params}, {p: 3 for p in params},
                  {p: max(1, math.ceil(header[p] / 64)) for p in params}]
    for cand in candidates:
        sizes = {**cand, **program.fixed_sizes}
        try:
            if any(eval_pw_aff(d, sizes) <= 0 for t in program.outputs for d in t.shape):
                continue
            inputs = testing.random_inputs(program, sizes, seed=seed)
            args = testing.call_args(program, inputs, sizes)
            kernel(*args)
        except (PolycError, ValueError):
            continue
        return cand, args
    return None


@contextlib.contextmanager
def fresh_cache(prefix: str):
    """``POLYC_CACHE_DIR`` set to a new temporary directory while the block
    runs (cold compiles measured as a new user meets them), removed after."""
    directory = tempfile.mkdtemp(prefix=prefix)
    os.environ["POLYC_CACHE_DIR"] = directory
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


PEERS = ("torch eager", "torch.compile")


def time_calls(calls: dict[str, Callable[[], Any]], check: Callable[[str, Any], None],
               repeat_time: float, row: dict) -> dict[str, float]:
    """Each call in order: the first call timed and its result passed to
    ``check(name, result)`` (which raises when it is wrong), then the median
    of warm calls (:func:`polyc.testing.median_time`, at least
    ``repeat_time`` seconds) into ``row["<name>_first_ms"]`` and
    ``row["<name>_ms"]``; then ``row["ratio_<name>"]``, the name's time over
    polyc's, for every other name.  Returns the first calls' seconds."""
    first: dict[str, float] = {}
    for name, call in calls.items():
        out, first[name] = _wall(call)
        check(name, out)
        row[f"{name}_first_ms"] = first[name] * 1e3
        row[f"{name}_ms"] = testing.median_time(call, min_time=repeat_time)[0] * 1e3
    for name in calls:
        if name != "polyc":
            row[f"ratio_{name}"] = row[f"{name}_ms"] / row["polyc_ms"]
    return first


def ratio_summary(rows: list[dict], key: str) -> dict:
    """For each peer with a ``ratio_<peer>`` in the rows (peer time over
    polyc's): ``{"x <peer>": {"geomean", "worst", "worst_<key>"}}``, the
    worst row named by its ``key`` (``seq``, ``batch``)."""
    out = {}
    for peer in PEERS:
        pairs = [(r[f"ratio_{peer}"], r[key]) for r in rows if f"ratio_{peer}" in r]
        if pairs:
            worst = min(pairs)
            out[f"x {peer}"] = {
                "geomean": math.exp(sum(math.log(x) for x, _ in pairs) / len(pairs)),
                "worst": worst[0], f"worst_{key}": worst[1]}
    return out


def ratio_lines(summary: dict, key: str) -> list[str]:
    """The lines ``polyc x <peer>: geomean G, worst W (<key> K)``."""
    return [f"polyc x {p}: geomean {x['geomean']:.2f}, worst {x['worst']:.2f} "
            f"({key} {x[f'worst_{key}']})" for p in PEERS if (x := summary.get(f"x {p}"))]


def report(info: dict, as_json: bool, text: str) -> None:
    """Print a benchmark's result: ``info`` as JSON, or the header lines
    ``text`` (its table)."""
    print(json.dumps(info, indent=2, default=str) if as_json else text)


def bench_example(path: Path, repeat_time: float, seed: int) -> Result:
    res = Result(name=path.stem, file=os.path.relpath(path, ROOT))
    stage = "load"
    tmp = tempfile.mkdtemp(prefix="polyc-bench-")
    try:
        program, sizes = load_example(path)
        res.sizes = sizes
        config = Config.from_env(cache_dir=tmp, disk_cache=True)

        stage = "cold compile"
        cache.clear_memory()
        kernel, res.cold_compile_s = _wall(lambda: pipeline.compile_program(program, config))
        stage = "lower"
        _, res.lower_s = _wall(lambda: pipeline.lower(program, config))
        res.codegen_build_s = res.cold_compile_s - res.lower_s
        stage = "warm compile"
        cache.clear_memory()
        hits = cache.stats().disk_hits
        _, res.warm_compile_s = _wall(lambda: pipeline.compile_program(program, config))
        res.warm_was_disk_hit = cache.stats().disk_hits == hits + 1

        stage = "check"
        inputs = testing.random_inputs(program, sizes, seed=seed)
        args = testing.call_args(program, inputs, sizes)
        outs = kernel(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        ref = reference.evaluate(program, inputs, sizes)
        res.reduction_length = testing.reduction_length(program, sizes)
        res.check_passed = True
        for t, got in zip(program.outputs, outs):
            max_abs, max_rel = testing.max_errors(got, ref[t.name])
            try:
                testing.assert_close(got, ref[t.name], dtype=t.dtype,
                                     reduction_length=res.reduction_length, name=t.name)
                ok, why = True, ""
            except AssertionError as e:
                ok, why = False, str(e)
                res.check_passed = False
            res.outputs[t.name] = {"shape": list(got.shape), "dtype": t.dtype,
                                   "max_abs": max_abs, "max_rel": max_rel, "ok": ok,
                                   "rel_to_max": testing.error_relative_to_max(
                                       max_abs, ref[t.name]),
                                   **({"mismatch": why} if why else {})}
        del outs, ref

        stage = "time polyc"
        res.polyc = measure(lambda: kernel(*args), repeat_time)
        stage = "time numpy"
        res.numpy = measure(lambda: reference.evaluate(program, inputs, sizes), repeat_time)
        res.speedup_vs_numpy = res.numpy.median_s / res.polyc.median_s

        stage = "call overhead"
        small = smallest_sizes(program, kernel, sizes, seed)
        if small is not None:
            res.overhead_sizes, small_args = small
            res.call_overhead = measure(lambda: kernel(*small_args), repeat_time,
                                        max_reps=100_000)
    except Exception as e:  # report it in the row and go on with the next example
        msg = str(e)
        res.error = {"stage": stage, "type": type(e).__name__, "message": msg}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # loaded libraries stay mapped
        res.load_average = _load()
    return res


# ------------------------------------------------------------------- printing

def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _row(r: Result) -> list[str]:
    sizes = " ".join(f"{k}={v}" for k, v in r.sizes.items()) or "-"
    if r.outputs:
        worst = max(o["rel_to_max"] for o in r.outputs.values())
        err = f"{worst:.2g} " + ("ok" if r.check_passed else "**MISMATCH**")
    else:
        err = "-"
    cells = [r.name, sizes, err,
             _num(r.polyc.median_s * 1e3) if r.polyc else "-",
             _num(r.numpy.median_s * 1e3) if r.numpy else "-",
             f"{r.speedup_vs_numpy:.2f}x" if r.speedup_vs_numpy else "-",
             (f"{_num(r.cold_compile_s)} ({_num(r.lower_s)})"
              if r.lower_s is not None else _num(r.cold_compile_s)),
             _num(r.warm_compile_s) + ("" if r.warm_was_disk_hit in (None, True)
                                       else " (no disk hit)"),
             _num(r.call_overhead.median_s * 1e6) if r.call_overhead else "-"]
    if r.error:
        first = r.error["message"].strip().splitlines()[0] if r.error["message"] else ""
        cells[-1] += f" **ERROR** in {r.error['stage']}: {r.error['type']}: {first[:120]}"
    return [c.replace("|", "\\|") for c in cells]


def print_markdown(mach: dict, results: list[Result], repeat_time: float) -> None:
    env = ", ".join(f"{k}={mach[k] or 'unset'}" for k in
                    ("POLYC_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    print("## polyc examples vs numpy\n")
    print(f"- machine: {mach['cpu']}, {mach['cores']} cores available "
          f"(cpu_count {mach['cpu_count']}); polyc threads {mach['polyc_threads']} ({env})")
    print(f"- compiler: {mach['compiler']}: {mach['compiler_version']}; "
          f"flags {' '.join(mach['cflags'])}")
    load_end = _load()
    print(f"- load average (1/5/15 min): {mach['load_average']} at the start, "
          f"{load_end} at the end")
    print(f"- python {mach['python']}, numpy {mach['numpy']} (BLAS {mach['blas']}), "
          f"polyc {mach['polyc']} (git {mach['git']})")
    print(f"- protocol: one process; one warm-up call, then medians of at least 5 calls "
          f"over >= {repeat_time:g} s; speedup = numpy / polyc (> 1: polyc faster); "
          "cold compile = isl + C compiler into an empty cache (pipeline.lower alone in "
          "parentheses), warm = a disk-cache hit\n")
    head = ["example", "sizes", "max err / max|ref|", "polyc ms", "numpy ms", "speedup",
            "cold compile s (lower)", "warm compile s", "call overhead us"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i < 2 else "--:" for i in range(len(head))) + "|")
    for r in results:
        print("| " + " | ".join(_row(r)) + " |")
    notes = [r for r in results if r.failed]
    if notes:
        print()
    for r in notes:
        if r.error:
            print(f"- {r.name}: {r.error['type']} in {r.error['stage']}:\n"
                  + "\n".join("    " + line for line in r.error["message"].splitlines()))
        for name, o in r.outputs.items():
            if not o["ok"]:
                print(f"- {r.name}: output {name} outside the tolerance:\n"
                      + "\n".join("    " + line for line in o["mismatch"].splitlines()))


def _jsonable(r: Result) -> dict:
    d = asdict(r)
    d["failed"] = r.failed
    return d


# ----------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.examples",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--only", nargs="+", action="extend", metavar="NAME", default=[],
                    help="benchmark only these examples (file names without .tc)")
    ap.add_argument("--repeat-time", type=float, default=0.5, metavar="SECONDS",
                    help="time each measurement for at least this long (default 0.5)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    args = ap.parse_args(argv)

    paths = sorted(EXAMPLES.glob("*.tc"))
    if args.only:
        known = {p.stem for p in paths}
        unknown = sorted(set(args.only) - known)
        if unknown:
            ap.error(f"no example named {', '.join(unknown)}; "
                     f"choose from {', '.join(sorted(known))}")
        paths = [p for p in paths if p.stem in args.only]

    config = Config.from_env()
    mach = machine(config)
    cache.cpu_features(shutil.which(config.cc))  # memoised: not part of any compile time
    results = []
    for path in paths:
        print(f"benchmarking {path.stem} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        r = bench_example(path, args.repeat_time, args.seed)
        print(f"  done in {time.perf_counter() - t0:.1f} s"
              + (f" ({r.error['type']} in {r.error['stage']})" if r.error else ""),
              file=sys.stderr, flush=True)
        results.append(r)

    if args.json:
        print(json.dumps({"machine": mach, "repeat_time_s": args.repeat_time,
                          "seed": args.seed, "results": [_jsonable(r) for r in results]},
                         default=float))
    else:
        print_markdown(mach, results, args.repeat_time)
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
