"""How fast ``polyc.tune`` converges: against the best of a random sample of its space, and
against random search on the same space; and, with ``--classes``, what a versioned kernel
keeps of per-size tuning.

    python -m benchmarks.tune                          # the default kernels, table on stdout
    python -m benchmarks.tune --kernels tr mm syr2k    # a subset (any of KERNELS, POLYBENCH)
    python -m benchmarks.tune --kernels syr2k 2mm --dataset LARGE   # PolyBench at LARGE
    python -m benchmarks.tune --seeds 3 --budget 120   # more tuner sessions, 120 s each
    python -m benchmarks.tune --json                   # one JSON object
    python -m benchmarks.tune --kernels tr --quick --space 4 --budget 10   # smoke test
    python -m benchmarks.tune --classes                # the shape-class table instead

The convergence table's kernels: four TC definitions at fixed sizes (``--quick`` shrinks
them) and the PolyBench kernels of :data:`POLYBENCH` (``benchmarks.polybench``, float64, at
``--dataset``, MEDIUM by default, SMALL with ``--quick``): the program tuned is the
``@polyc.kernel``'s specialisation to PolyBench's arguments (arrays updated in place) and
the tuning sizes are its size parameters' values on those arguments.  Without
``--kernels``: :data:`DEFAULT_KERNELS` (the TC ones, heat-3d and jacobi-2d).

For each kernel, in one process:

1. **Space best.** ``--space`` legal, distinct candidates drawn at random from the tuner's
   space (``polyc.tune.space.sample`` over the session's band choices, built with
   ``space.build``; refused and duplicate trees are skipped), plus the variants of the
   automatic schedule where the tuner's space has them (``space.auto_variants``: Config
   options, not scored by the model), are checked and timed round-robin against the
   automatic schedule in one ``measure_task``; ``space best`` is the lowest median ratio to
   the default (1 when nothing beat it).  ``model top-5``: the measured random candidates
   ranked by the tuner's analytical model (``_Session.cost``, i.e. ``polyc.tune.model.cost``
   summed over the sizes); the best measured ratio among the 5 best-scored ones against the
   best measured ratio of all of them (speed of the model's top-5 best over speed of the
   scored sample's best; 1 when the model's top 5 hold it); the issue's target is >= 0.9.
   With ``--space`` 5 or less it is 1 by construction.
2. **Tuner.** ``polyc.tune.tune(src, sizes, budget=..., seed=s, record=False)`` for seeds
   ``0 .. --seeds-1``; its ``history`` (seconds, measured candidates, best ratio so far, after
   each measured batch) gives the measurements and seconds it took to come within 90% and
   95% of the best known speed (best known ratio = the lowest of the space best and the
   tuners' bests; "within 90%" means ratio <= best / 0.9).  The counts are per batch:
   the first batch is ``Budget.first`` candidates.
3. **Random search.** The candidates measured in (1), drawn in a random order (5 orders),
   as many as the tuner measured: the median number of measurements to come within 90%
   and 95% of the best known (``-`` when not reached; 0 when the default already is).

Every phase compiles into its own empty kernel cache, seeded with the intrinsics library
(built once at the start, as on a machine where polyc ran once), so the tuner's seconds
include its compiles.  Ratios are relative to the default measured in the same
``measure_task`` call; times of different phases are not compared directly.

``--classes`` (the issue's shape-class benchmark; the convergence table is not run):
``C(m,n) +=! A(m,k) * B(k,n)`` in float32 with K = N = 768 and M in :data:`CLASS_MS`.
Per M, (a) the **oracle**: ``tune`` at that M alone (``--oracle-budget``, default 15 s,
``record=False``), its best recipe compiled (the default when nothing beat it); (b) the
**versioned** kernel: one ``tune(src, [every M], classes="lattice", budget=--budget)`` into
a fresh cache and tuning database, then ``polyc.compile(src)`` from that database (its
versions, and the seconds of the tune and the compile together); (c) the untuned
**default** kernel; (d) torch eager ``torch.matmul`` and ``torch.compile(dynamic=True)`` on
as many threads as polyc (when torch imports; ``--no-torch`` skips it), with the seconds
of torch.compile's first call at every M summed as its compile time.  The kernels of one M
are checked against numpy, then timed round-robin (``measure.round_robin``: every sample
repeats the call for at least ``--min-sample`` seconds, ``--rounds`` rounds; the oracle
twice a round); each time is the median of its samples, each ratio the median of the
per-round ratios to the oracle.  Target: the versioned kernel's speed at least 0.9x the
oracle's (geometric mean over M) with at most 4 versions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import polyc
from polyc.config import Config
from polyc.tune import measure, space
from polyc.tune.api import tune
from polyc.tune.search import Budget, _Session, budget_of, resolve_program

from .examples import machine
from .tensor import prebuild_intrinsics
from .tune_classes import CLASS_MS, CLASS_NK, classes_table, fresh_config, run_classes

#: name -> (TC source, sizes, --quick sizes)
KERNELS = {
    "tr": ("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }",
           dict(N=2000, M=2000), dict(N=500, M=500)),
    "mm": ("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
           dict(M=512, N=512, K=512), dict(M=128, N=128, K=128)),
    "blur": ("def blur(float(N,M) A) -> (B) "
             "{ B(i,j) = A(i,j) + A(i+1,j) + A(i,j+1) where i in 0:N-1, j in 0:M-1 }",
             dict(N=2000, M=2000), dict(N=500, M=500)),
    "mm2": ("def mm2(float(M,K) A, float(K,N) B, float(N,L) D) -> (C, E) {\n"
            "    C(m,n) +=! A(m,k) * B(k,n)\n    E(m,l) +=! C(m,n) * D(n,l)\n}",
            dict(M=256, N=256, K=256, L=256), dict(M=64, N=64, K=64, L=64)),
}
#: PolyBench kernels (``benchmarks.polybench.BENCHMARKS``) the convergence table takes.
POLYBENCH = ("heat-3d", "jacobi-2d", "syr2k", "2mm")
#: Run without ``--kernels`` (about 10-15 minutes on 2 cores).
DEFAULT_KERNELS = ("tr", "mm", "blur", "mm2", "heat-3d", "jacobi-2d")
#: The targets of the issue: 90% of the best known within this many seconds and measurements.
TARGET_SECONDS, TARGET_MEASURED = 60.0, 10
#: The model's top this-many candidates should hold one within MODEL_TARGET of the best.
MODEL_TOP, MODEL_TARGET = 5, 0.9

#: ``--classes``: the GEMM, its fixed sizes and the M values.
RANDOM_ORDERS = 5


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def param_values(program, args: tuple) -> dict:
    """The values of ``program``'s size parameters on the call arguments ``args`` (in
    ``program.signature`` order): a tensor's extent (``param_bindings[p] = (tensor, dim)``)
    or the scalar argument named ``p`` (``None``)."""
    out = {}
    for p in program.params:
        if p in program.fixed_sizes:
            continue
        bound = program.param_bindings.get(p)
        if bound is None:
            out[p] = int(args[program.signature.index(p)])
        else:
            tensor, dim = bound
            out[p] = int(np.shape(args[program.signature.index(tensor)])[dim])
    return out


def target(name: str, a, library_dir: str) -> tuple:
    """``(TC source or ir.Program, tuning sizes, sizes as printed)`` of kernel ``name``."""
    if name in KERNELS:
        src, full, small = KERNELS[name]
        sizes = small if a.quick else full
        return src, sizes, "x".join(str(v) for v in sizes.values())
    from .polybench import BENCHMARKS
    bench = BENCHMARKS[name]
    args = bench.init(bench.sizes[a.dataset], np.float64)
    # compiles the automatic schedule once, into a throwaway cache
    program = bench.kernel.with_config(fresh_config(library_dir)).specialize(*args).program
    label = a.dataset + " " + " ".join(f"{k}={v}" for k, v in bench.sizes[a.dataset].items())
    return program, param_values(program, args), label


def space_best(src, sizes: dict, n: int, seed: int, config: Config, rounds: int,
               min_sample: float) -> dict:
    """Phase 1: ``n`` random legal candidates (plus the variants of the automatic schedule,
    where the tuner's space has them) timed against the default in one run."""
    t0 = time.monotonic()
    program = resolve_program(src)
    s = _Session(program, [sizes], Budget(math.inf, n, n, n, 0), None, None, config, seed,
                 None, None)
    s.analyse()
    pools = {(st, r): s.choices[(st, r)] for st, r in space.starts(program)
             if (st, r) in s.choices}
    rng = random.Random(seed)
    cands = space.sample(rng, pools, 20 * n)
    rng.shuffle(cands)
    kept, pruned, trees = [], {}, set()       # kept: (label, recipe, model score)
    for k in cands:
        if len(kept) >= n:
            break
        try:
            sched = space.build(program, k, s.infos[k.start][0], base=s.bases[k.start])
        except space.Refused as e:
            pruned[e.kind] = pruned.get(e.kind, 0) + 1
            continue
        text = sched.to_text()
        if text in trees:
            pruned["duplicate"] = pruned.get("duplicate", 0) + 1
            continue
        trees.add(text)
        kept.append((k.label(), sched.to_recipe(), s.cost(k)))
    if hasattr(space, "auto_variants"):       # the automatic pipeline's own options
        for opts in space.auto_variants(program):
            kept.append(("auto: " + ", ".join(f"{k}={v}" for k, v in opts.items()),
                         space.auto_recipe(opts), None))
    res = measure.measure_task({
        "program": program, "recipes": [None] + [r for _, r, _ in kept], "checked": [],
        "config": config, "sizes": [sizes], "seed": seed, "rounds": rounds,
        "min_sample": min_sample})
    failures = {int(i): why for i, why in res["failures"].items()}
    if 0 in failures:
        raise polyc.PolycError(f"the default schedule failed its check: {failures[0]}")
    rounds_ = next(iter(res["rounds"].values()))
    ratios, noise = measure.decide(rounds_)       # columns: res["measured"], then the default
    ratio_of = {i: ratios[pos] for pos, i in enumerate(res["measured"]) if i}
    sample = [{"label": label, "model": score, "ratio": ratio_of.get(i),
               "failed": failures.get(i)} for i, (label, _, score) in enumerate(kept, 1)]
    measured = [c for c in sample if c["ratio"] is not None]
    best = min(measured, key=lambda c: c["ratio"], default={"label": "default", "ratio": 1.0})
    return {"default_s": statistics.median(r[0] for r in rounds_), "noise": noise,
            "candidates": len(kept), "failed": {c["label"]: c["failed"] for c in sample
                                                if c["failed"]},
            "pruned": pruned, "sample": sample, "ratios": [c["ratio"] for c in measured],
            "best_label": best["label"], "best_ratio": min(best["ratio"], 1.0),
            "model": model_quality(sample), "seconds": time.monotonic() - t0}


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):                     # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def model_quality(sample: list[dict], top: int = MODEL_TOP) -> dict | None:
    """How well the model ranks the measured, model-scored candidates of the sample:
    ``quality`` = best ratio of all of them / best ratio of the ``top`` best-scored ones
    (the speed of the model's top-``top`` best over the speed of the sample's best; 1 when
    the model's top holds the best), ``holds`` = quality >= :data:`MODEL_TARGET`, and the
    Spearman rank correlation of score and measured ratio (``None`` under 3 candidates)."""
    scored = [c for c in sample if c["model"] is not None and c["ratio"] is not None]
    if not scored:
        return None
    by_model = sorted(scored, key=lambda c: c["model"])
    best = min(c["ratio"] for c in scored)
    top_best = min(c["ratio"] for c in by_model[:top])
    rho = None
    if len(scored) >= 3:
        rm, rr = _ranks([c["model"] for c in scored]), _ranks([c["ratio"] for c in scored])
        mm, mr = statistics.fmean(rm), statistics.fmean(rr)
        cov = sum((x - mm) * (y - mr) for x, y in zip(rm, rr))
        var = math.sqrt(sum((x - mm) ** 2 for x in rm) * sum((y - mr) ** 2 for y in rr))
        rho = cov / var if var else None
    quality = best / top_best
    return {"quality": quality, "holds": quality >= MODEL_TARGET, "top": top,
            "scored": len(scored), "best": best, "top_best": top_best,
            "top_labels": [c["label"] for c in by_model[:top]], "spearman": rho}


def run_tuner(src, sizes: dict, budget, seed: int, config: Config) -> dict:
    """Phase 2: one tuning session."""
    r = tune(src, sizes, budget=budget, config=config, record=False, seed=seed,
             progress=False)
    return {"seed": seed, "best_ratio": r.best.ratio or 1.0, "best_label": r.best.label,
            "measured": r.measured, "failed": r.failed, "pruned": r.pruned,
            "seconds": r.seconds, "noise": r.noise, "note": r.note,
            "history": [list(h) for h in r.history]}


def reach(history: list, target: float) -> tuple[int | None, float | None]:
    """(measured, seconds) at the first batch whose best ratio is within ``target``."""
    for seconds, measured, best in history:
        if best <= target:
            return measured, seconds
    return None, None


def random_search(ratios: list[float], draws: int, target: float, seed: int) -> float | None:
    """Median over :data:`RANDOM_ORDERS` random orders of the measurements it takes to come
    within ``target`` (0: the default already is; ``None``: not within ``draws``)."""
    counts = []
    for o in range(RANDOM_ORDERS):
        order = random.Random(1000 * seed + o).sample(ratios, len(ratios))[:draws]
        hit = 0 if target >= 1.0 else next(
            (i + 1 for i, r in enumerate(order) if r <= target), math.inf)
        counts.append(hit)
    m = statistics.median(counts)
    return None if math.isinf(m) else m


def run_kernel(name: str, a, library_dir: str) -> dict:
    row: dict = {"kernel": name, "sizes": None, "label": name, "error": None}
    stage = "setup"
    try:
        src, sizes, row["label"] = target(name, a, library_dir)
        row["sizes"] = sizes
        stage = "space"
        sp = space_best(src, sizes, a.space, a.space_seed, fresh_config(library_dir), a.rounds,
                        a.min_sample)
        row["space"] = sp
        mq = sp["model"]
        print(f"[tune] {name}: space best {sp['best_ratio']:.3f} of {sp['candidates']}, model "
              f"top-{MODEL_TOP} {'-' if mq is None else format(mq['quality'], '.2f')} "
              f"({sp['seconds']:.0f} s)", file=sys.stderr, flush=True)
        stage = "tuner"
        runs = []
        for seed in range(a.seeds):
            runs.append(run_tuner(src, sizes, a.budget_, seed, fresh_config(library_dir)))
            print(f"[tune] {name}: tuner seed {seed}: {runs[-1]['best_ratio']:.3f} after "
                  f"{runs[-1]['measured']} measured, {runs[-1]['seconds']:.0f} s",
                  file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 (reported in the row)
        row["error"] = {"stage": stage, "type": type(e).__name__, "message": str(e)}
        return row
    best = min([sp["best_ratio"]] + [r["best_ratio"] for r in runs])
    row.update(best_known=best, tuner=runs)
    # as many draws as the tuner measured (median over seeds), at most the sample's size
    draws = min(round(statistics.median(r["measured"] for r in runs)), len(sp["ratios"]))
    for pct in (90, 95):
        target_ = best / (pct / 100)
        for r in runs:
            r[f"measured_{pct}"], r[f"seconds_{pct}"] = reach(r["history"], target_)
        row[f"random_{pct}"] = random_search(sp["ratios"], draws, target_, a.space_seed)
    row["random_draws"] = draws
    row["targets_hold"] = all(
        r["measured_90"] is not None and r["measured_90"] <= TARGET_MEASURED
        and r["seconds_90"] <= TARGET_SECONDS for r in runs)
    return row


def _med(values):
    """Median of the values, ``None`` when any is ``None`` (a seed that never got there)."""
    vals = list(values)
    return None if not vals or any(v is None for v in vals) else statistics.median(vals)


def _n(v, fmt="{:g}") -> str:
    return "-" if v is None else fmt.format(v)


def table(rows: list[dict]) -> str:
    cols = ["kernel", "sizes", "default ms", "space best (n)", f"model top-{MODEL_TOP}",
            "tuner best", "tuner speedup", "tuner meas 90/95%", "tuner s 90/95%",
            "random meas 90/95% (of n)",
            f"90% in {TARGET_SECONDS:g} s & {TARGET_MEASURED} meas"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        sz = r["label"]
        if r.get("error"):
            e = r["error"]
            lines.append(f"| {r['kernel']} | {sz} | failed at {e['stage']}: {e['type']}: "
                         f"{e['message'].splitlines()[0][:120]} |" + " |" * (len(cols) - 3))
            continue
        sp, runs = r["space"], r["tuner"]
        mq = sp["model"]
        tb = statistics.median(t["best_ratio"] for t in runs)
        lines.append("| " + " | ".join([
            r["kernel"], sz, f"{sp['default_s'] * 1e3:.3f}",
            f"{sp['best_ratio']:.3f} ({sp['candidates']})",
            "-" if mq is None else f"{mq['quality']:.2f} ({'yes' if mq['holds'] else 'no'})",
            f"{tb:.3f}", f"{1 / tb:.2f}x",
            " / ".join(_n(_med(t[f"measured_{p}"] for t in runs)) for p in (90, 95)),
            " / ".join(_n(_med(t[f"seconds_{p}"] for t in runs), "{:.0f}") for p in (90, 95)),
            " / ".join(_n(r[f"random_{p}"]) for p in (90, 95)) + f" ({r['random_draws']})",
            "yes" if r["targets_hold"] else "no"]) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ --classes

def main(argv: list[str] | None = None) -> int:
    from .polybench import DATASETS
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", nargs="*", choices=list(KERNELS) + list(POLYBENCH),
                    default=list(DEFAULT_KERNELS),
                    help=f"kernels to run (default: {' '.join(DEFAULT_KERNELS)})")
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (the TC kernels' small sizes; PolyBench SMALL unless "
                         "--dataset)")
    ap.add_argument("--dataset", choices=DATASETS, default=None,
                    help="PolyBench dataset (default MEDIUM; SMALL with --quick)")
    ap.add_argument("--space", type=int, default=24,
                    help="random legal candidates measured for the space best (default 24)")
    ap.add_argument("--space-seed", type=int, default=0, help="seed of the space sample")
    ap.add_argument("--budget", default="quick",
                    help="the tuner's budget: quick (60 s, first batch 6), max, or seconds "
                         "(with max's limits: first batch 12); default quick.  With "
                         "--classes: the versioned kernel's tuning, per session")
    ap.add_argument("--seeds", type=int, default=1, help="tuner sessions, seeds 0.. (default 1)")
    ap.add_argument("--rounds", type=int, default=measure.MIN_ROUNDS,
                    help=f"timing rounds (default {measure.MIN_ROUNDS})")
    ap.add_argument("--min-sample", type=float, default=measure.MIN_SAMPLE,
                    help=f"seconds per timing sample (default {measure.MIN_SAMPLE})")
    ap.add_argument("--classes", action="store_true",
                    help="the shape-class benchmark (GEMM, K=N=768, M in "
                         f"{','.join(map(str, CLASS_MS))}) instead of the convergence table")
    ap.add_argument("--oracle-budget", default="15",
                    help="--classes: the per-M oracle's budget (default 15 s)")
    ap.add_argument("--no-torch", action="store_true", help="--classes: skip torch")
    ap.add_argument("--ms", default=None, help=argparse.SUPPRESS)    # --classes: other Ms
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    a.dataset = a.dataset or ("SMALL" if a.quick else "MEDIUM")
    try:
        a.budget_ = b = budget_of(a.budget)
        a.oracle_budget_ = budget_of(a.oracle_budget)
        a.ms_ = [int(m) for m in a.ms.split(",")] if a.ms else list(CLASS_MS)
    except (polyc.PolycError, ValueError) as e:
        ap.error(str(e))
    mach = machine(Config.from_env())
    print(f"[tune] load average at the start: {mach['load_average']}", file=sys.stderr)
    work = tempfile.mkdtemp(prefix="polyc-tunebench-")     # every phase's cache, removed at the end
    library_dir = os.path.join(work, "intrinsics")
    os.mkdir(library_dir)
    rows, res = [], None
    try:
        mach["intrinsics_library_build_s"] = prebuild_intrinsics(library_dir)
        if a.classes:
            res = run_classes(a, library_dir, mach["polyc_threads"])
        else:
            for name in a.kernels:
                print(f"[tune] {name} ...", file=sys.stderr, flush=True)
                rows.append(run_kernel(name, a, library_dir))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    end_load = _load()
    head = (f"- {mach['cpu']}, {mach['cores']} cores, polyc on {mach['polyc_threads']} "
            f"thread(s); load average {mach['load_average']} at the start, {end_load} at "
            f"the end")
    if a.classes:
        if a.json:
            print(json.dumps({"machine": mach, "load_average_end": end_load,
                              "budget": vars(b), "oracle_budget": vars(a.oracle_budget_),
                              "rounds": a.rounds, "min_sample": a.min_sample,
                              "classes": res}, indent=1, default=str))
        else:
            print(head)
            print(f"- C(m,n) +=! A(m,k) * B(k,n), float32, K = N = {CLASS_NK}; oracle: tune at "
                  f"each M alone, budget {a.oracle_budget}; versioned: one lattice tune over "
                  f"every M, budget {a.budget} per session; times are medians of "
                  f"{a.rounds} round-robin rounds (samples >= {a.min_sample * 1e3:g} ms); "
                  f"X / oracle = oracle time / X time (higher is better)\n")
            print(classes_table(res))
        failed = res.get("error") or any(r["error"] for r in res["rows"])
        return 1 if failed else 0
    if a.json:
        print(json.dumps({"machine": mach, "load_average_end": end_load,
                          "budget": vars(b), "space": a.space, "seeds": a.seeds,
                          "quick": a.quick, "dataset": a.dataset, "results": rows}, indent=1))
    else:
        print(head)
        print(f"- tuner budget {a.budget} ({b.seconds:g} s, at most {b.measured} measured, "
              f"first batch {b.first}, {b.neighbours} neighbours a step), {a.seeds} "
              f"seed(s); space sample of {a.space}; ratios are times over the default's "
              f"(lower is better); PolyBench kernels in float64\n")
        print(table(rows))
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
