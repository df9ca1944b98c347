"""PolyBench/C 4.2.1 through ``@polyc.kernel``, against gcc -O3 and LLVM Polly.

    python -m benchmarks.polybench                      # LARGE, every kernel, markdown
    python -m benchmarks.polybench --dataset MINI --only gemm lu
    python -m benchmarks.polybench --json               # one JSON object
    python -m benchmarks.polybench --guard              # exit 2 if a kernel is below gcc -O3
    python -m benchmarks.polybench --background-load    # also with one core half busy

For each kernel (``benchmarks/polybench``), on the same PolyBench inputs:

* **polyc**: the kernel compiled by polyc (isl scheduling, tiling, skewing,
  OpenMP on the machine's cores; ``POLYC_NUM_THREADS`` to change);
* **gcc -O3**: the same loop nest untransformed (polyc's identity schedule,
  the source order) compiled with ``gcc -O3 -march=native``, one thread:
  the classic reference;
* **Polly**: that same untransformed C compiled with ``clang -O3
  -march=native -mllvm -polly -mllvm -polly-parallel`` (Polly's GNU OpenMP
  backend, the machine's cores).  Debian 12: ``apt-get install clang-16``
  (its Polly is built in); the column is skipped when no clang with Polly
  is found (``POLLY_CC`` names one).

Times are medians over runs of at least ``--repeat-time`` seconds in all
(each run on a fresh copy of the inputs: the kernels update them in place;
the copy is not timed).  ``compile s`` is polyc's cold compile (dependences,
isl scheduling, code generation and the C compiler, in an empty cache).
``err`` is the largest relative difference (scaled by each output's largest
magnitude) of polyc's outputs from the gcc -O3 baseline's.

Every column, polyc's included, runs in a child process of its own, one
per kernel and column (:mod:`benchmarks.isolate`): the columns are measured
in the same conditions, and a build that crashes (Polly's packed arrays can
overflow an 8 MB stack on ``2mm`` at LARGE) or runs past ``--peer-timeout``
gets a cell that says so (``crashed (SIGSEGV)``, ``timed out after 900 s``)
and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from polyc.config import Config

from ..isolate import DEFAULT_TIMEOUT, run_isolated
from . import BENCHMARKS, DATASETS

BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c99")
POLLY_FLAGS = ("-mllvm", "-polly", "-mllvm", "-polly-parallel", "-lgomp")
INSTALL_POLLY = ("no clang with Polly found: on Debian 12 `apt-get install clang-16` "
                 "(Polly is built in), or set POLLY_CC")


def find_polly() -> str | None:
    """A clang that accepts ``-mllvm -polly`` (``POLLY_CC``, else ``clang``,
    ``clang-19`` ... ``clang-14``), or ``None``."""
    names = [os.environ["POLLY_CC"]] if os.environ.get("POLLY_CC") else [
        "clang", *(f"clang-{v}" for v in range(19, 13, -1))]
    for name in names:
        path = shutil.which(name)
        if not path:
            continue
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "t.c")
            with open(src, "w") as f:
                f.write("void f(double *a, long n) { for (long i = 0; i < n; i++) a[i] = i; }\n")
            r = subprocess.run([path, *BASE_FLAGS, *POLLY_FLAGS, src, "-o",
                                os.path.join(d, "t.so")], capture_output=True)
            if r.returncode == 0:
                return path
    return None


def variants(polly_cc: str | None, cache_dir: str) -> dict[str, Config]:
    """The compiler configurations compared, by column name."""
    base = Config.from_env().replace(cache_dir=cache_dir)
    out = {"polyc": base,
           "gcc -O3": base.replace(schedule="identity", parallel=False, simd=False,
                                   num_threads=1, cc="gcc", cflags=BASE_FLAGS)}
    if polly_cc:
        out["Polly"] = base.replace(schedule="identity", parallel=False, simd=False,
                                    cc=polly_cc, cflags=BASE_FLAGS + POLLY_FLAGS)
    return out


def fresh(args: tuple) -> tuple:
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def measure(kernel, args: tuple, repeat_time: float, max_runs: int) -> tuple[float, tuple]:
    """Median seconds of ``kernel.__call__`` on fresh copies of ``args`` and
    the outputs of the last run, after one untimed call (the first call of a
    kernel in a process took 12-18 ms more than the next ones for atax at
    LARGE, polyc's and the gcc -O3 build's alike: with ``--max-runs 3`` it
    was one of the three samples)."""
    kernel(*fresh(args))
    times, out = [], args
    total = 0.0
    while len(times) < max_runs and (len(times) < 1 or total < repeat_time):
        out = fresh(args)
        t0 = time.perf_counter()
        kernel(*out)
        dt = time.perf_counter() - t0
        times.append(dt)
        total += dt
    return statistics.median(times), out


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return 0.0 if np.array_equal(a, b, equal_nan=True) else math.inf
    return float(np.max(np.abs(a - b))) / scale if scale > 0 else float(np.max(np.abs(a)))


def measure_peer(name: str, dataset: str, config: Config, repeat_time: float,
                 max_runs: int, dtype: str) -> tuple[float, list, float]:
    """Build ``name``'s kernel with ``config`` (polyc's, or a peer's: gcc -O3,
    Polly) and measure it on PolyBench's inputs: median seconds, its
    comparable outputs and the seconds :meth:`specialize` took (the cold
    compile, in ``config``'s cache).  Runs in a child process
    (:func:`benchmarks.isolate.run_isolated`), so it rebuilds the inputs
    there (``init`` is deterministic)."""
    bench = BENCHMARKS[name]
    sizes = bench.sizes[dataset]
    args = bench.init(sizes, np.dtype(dtype))
    k = bench.kernel.with_config(config)
    t0 = time.perf_counter()
    k.specialize(*args)
    compile_s = time.perf_counter() - t0
    t, res = measure(k, args, repeat_time, max_runs)
    return t, bench.comparable(sizes, [res[i] for i in bench.outputs]), compile_s


def run_one(bench, dataset: str, configs: dict, repeat_time: float, max_runs: int,
            dtype, peer_timeout: float = DEFAULT_TIMEOUT) -> dict:
    """One row: every column (polyc's build and each peer compiler's build
    of the same loop nest) measured in a child process of its own, so that
    the columns run in the same conditions (in the harness's process, after
    the kernels before it, atax measured 8.7 ms against 4.2 ms alone: the
    state that earlier kernels leave behind in a process), and a build that
    crashes or hangs becomes a cell saying so (``errors[col]``:
    ``"crashed (SIGSEGV)"``, ``"timed out after 900 s"``) instead of the end
    of the run."""
    sizes = bench.sizes[dataset]
    row = {"kernel": bench.name, "category": bench.category, "sizes": sizes}
    outs = {}
    for col, cfg in configs.items():
        # (--peer-timeout bounds the peers; polyc's column gets at least the default)
        limit = peer_timeout if col != "polyc" else max(peer_timeout, DEFAULT_TIMEOUT)
        got = run_isolated(measure_peer, bench.name, dataset, cfg, repeat_time,
                           max_runs, np.dtype(dtype).name, timeout=limit)
        if got.ok:
            row[col], outs[col], compile_s = got.value
            if col == "polyc":
                row["compile_s"] = compile_s
        else:
            row[col] = None
            row.setdefault("errors", {})[col] = got.error
    if "polyc" in outs and "gcc -O3" in outs:
        row["err"] = max(rel_err(a, b) for a, b in zip(outs["polyc"], outs["gcc -O3"]))
    for base in ("gcc -O3", "Polly"):
        if row.get(base) and row.get("polyc"):
            row[f"vs {base}"] = row[base] / row["polyc"]
    return row


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def table(rows: list[dict], cols: list[str]) -> str:
    head = ["kernel", "polyc ms", *(f"{c} ms" for c in cols if c != "polyc"),
            *(f"speedup vs {c}" for c in cols if c != "polyc"), "compile s", "err"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ms(r, c):
        v = r.get(c)
        if v is not None:
            return f"{v * 1e3:.2f}"
        why = r.get("errors", {}).get(c, "")
        return why if why.startswith(("crashed", "timed out")) else "fail"
    for r in rows:
        cells = [r["kernel"], ms(r, "polyc")]
        cells += [ms(r, c) for c in cols if c != "polyc"]
        cells += [f"{r[f'vs {c}']:.2f}x" if r.get(f"vs {c}") else "-"
                  for c in cols if c != "polyc"]
        cells += [f"{r['compile_s']:.2f}" if "compile_s" in r else "-",
                  f"{r['err']:.1e}" if "err" in r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    gm = ["**geomean**", "", *["" for c in cols if c != "polyc"]]
    gm += [f"**{g:.2f}x**" if (g := geomean([r.get(f'vs {c}') for r in rows])) else "-"
           for c in cols if c != "polyc"]
    gm += ["", ""]
    lines.append("| " + " | ".join(gm) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.polybench",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="LARGE", choices=DATASETS)
    ap.add_argument("--only", nargs="*", help="kernel names (PolyBench's: gemm, 2mm, ...)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--repeat-time", type=float, default=1.0,
                    help="time each variant for at least this many seconds (default 1)")
    ap.add_argument("--max-runs", type=int, default=7)
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--no-polly", action="store_true", help="skip the Polly column")
    ap.add_argument("--peer-timeout", type=float, default=DEFAULT_TIMEOUT,
                    help="seconds a peer (gcc -O3, Polly) may take for one kernel, build "
                         f"and runs, before its cell says it timed out (default "
                         f"{DEFAULT_TIMEOUT:g})")
    ap.add_argument("--background-load", type=float, nargs="?", const=0.5, default=None,
                    metavar="DUTY",
                    help="measure every kernel twice: quiet, then with another process "
                         "keeping DUTY (default 0.5) of one core busy "
                         "(benchmarks/background.py); prints both tables")
    ap.add_argument("--guard", type=float, nargs="?", const=1.0, default=None,
                    metavar="RATIO",
                    help="the regression guard: exit with status 2 when a kernel's speedup "
                         "over gcc -O3 is below RATIO (default 1.0), naming each one")
    ap.add_argument("--variants", nargs="*", metavar="COLUMN",
                    help="measure only these columns (polyc, 'gcc -O3', Polly)")
    a = ap.parse_args(argv)
    names = a.only or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"unknown kernel(s) {', '.join(unknown)}; choose from "
                 f"{', '.join(BENCHMARKS)}")
    polly = None if a.no_polly else find_polly()
    threads = Config.from_env().num_threads or os.cpu_count()
    notes = [f"dataset {a.dataset}, {a.dtype}, polyc and Polly on {threads} thread(s), "
             f"gcc -O3 on 1 thread; machine: {os.cpu_count()} cores"]
    if polly is None and not a.no_polly:
        notes.append(INSTALL_POLLY)
    elif polly:
        ver = subprocess.run([polly, "--version"], capture_output=True, text=True)
        notes.append(f"Polly: {polly} ({ver.stdout.splitlines()[0]})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="polyc-polybench-") as cache_dir:
        configs = variants(polly, cache_dir)
        if a.variants:
            configs = {k: v for k, v in configs.items() if k in a.variants}
        for n in names:
            print(f"[polybench] {n} ...", file=sys.stderr, flush=True)
            rows.append(run_one(BENCHMARKS[n], a.dataset, configs, a.repeat_time,
                                a.max_runs, np.dtype(a.dtype), a.peer_timeout))
            print(f"[polybench] {json.dumps(rows[-1], default=str)}", file=sys.stderr,
                  flush=True)
        loaded, load_text = [], ""
        if a.background_load:
            from ..background import BackgroundLoad
            with BackgroundLoad(a.background_load) as load:
                for n in names:
                    print(f"[polybench] {n} (loaded) ...", file=sys.stderr, flush=True)
                    loaded.append(run_one(BENCHMARKS[n], a.dataset, configs, a.repeat_time,
                                          a.max_runs, np.dtype(a.dtype), a.peer_timeout))
            load_text = load.report()
    cols = list(configs)
    failed = [r for r in rows + loaded
              if r.get("errors") or not (r.get("err", 0) <= 1e-6)]
    if a.json:
        print(json.dumps({"notes": notes, "rows": rows, "loaded": loaded,
                          "background_load": load_text,
                          "geomean": {c: geomean([r.get(f"vs {c}") for r in rows])
                                      for c in cols if c != "polyc"}}, indent=1,
                         default=str))
    else:
        print("\n".join(f"- {n}" for n in notes) + "\n")
        print(table(rows, cols))
        if loaded:
            print(f"\nWith a {load_text}:\n")
            print(table(loaded, cols))
        for r in failed:
            print(f"\n{r['kernel']}: " + "; ".join(
                f"{c}: {e}" for c, e in r.get("errors", {}).items())
                + (f" max rel err {r.get('err')}" if "err" in r else ""))
    if failed:
        return 1
    if a.guard is not None:
        slow = [r for r in rows if r.get("vs gcc -O3") is not None
                and r["vs gcc -O3"] < a.guard]
        for r in slow:
            print(f"[polybench] guard: {r['kernel']} runs at {r['vs gcc -O3']:.2f}x gcc -O3, "
                  f"below {a.guard:g}x", file=sys.stderr)
        if slow:
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
