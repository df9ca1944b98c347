"""The shape-class benchmark of ``python -m benchmarks.tune --classes`` (see
``benchmarks/tune.py`` and ``benchmarks/README.md``): ``C(m,n) +=! A(m,k) * B(k,n)``
with K = N = 768 over the token counts of a BERT-base projection, the versioned kernel
against a per-size oracle, the untuned default, torch eager and ``torch.compile(dynamic=True)``.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import polyc
from polyc import cache, testing
from polyc.config import Config
from polyc.tune import measure
from polyc.tune.api import tune
from polyc.versioned import shape_class

from .tensor import _seed_cache

CLASS_SRC = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
CLASS_NK = 768
CLASS_MS = (1, 2, 3, 7, 16, 17, 64, 100, 128, 333, 512)
#: Targets: versioned >= this fraction of the oracle's speed (geometric mean) with at most
#: this many versions.
CLASS_TARGET, CLASS_MAX_VERSIONS = 0.9, 4


def fresh_config(library_dir: str) -> Config:
    """A config without the tuning database, on a fresh kernel cache (a new directory beside
    ``library_dir``) holding the intrinsics library."""
    tmp = tempfile.mkdtemp(prefix="cache-", dir=os.path.dirname(library_dir))
    _seed_cache(library_dir, tmp)
    cache.clear_memory()
    # measure.reference_data memoises the seeded inputs per program and sizes, and timing
    # calls update "inout" arrays (PolyBench's) in place: start every phase from fresh ones
    getattr(measure, "_REFERENCES", {}).clear()
    return Config.from_env(cache_dir=tmp).replace(use_tuned=False)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _version_of(kernel, sizes: dict) -> str:
    """The class of the version ``kernel`` runs at ``sizes`` (``all``: the generic version
    of a versioned kernel; ``generic``: the kernel has no versions)."""
    for d in kernel.versions or []:
        if shape_class(kernel.program, d["class"]).contains(sizes):
            return d["class"]
    return "generic"


def _geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def run_classes(a, library_dir: str, threads: int) -> dict:
    """The ``--classes`` benchmark (module docstring): per M, the oracle, the versioned, the
    default kernel and torch, checked against numpy and timed round-robin."""
    src, nk = CLASS_SRC, CLASS_NK
    points = [{"M": m, "N": nk, "K": nk} for m in a.ms_]
    out: dict = {"source": src, "ms": a.ms_, "threads": threads, "rows": [], "error": None}
    stage = "versioned: tune"
    try:
        # (b) the versioned kernel: one lattice tuning session into a fresh database
        cfg_v = fresh_config(library_dir)
        t0 = time.monotonic()
        r = tune(src, points, classes="lattice", budget=a.budget_, config=cfg_v,
                 record=True, seed=0, progress=False)
        tune_s = time.monotonic() - t0
        print(f"[tune] versioned: tuned in {tune_s:.0f} s: generic {r.best.label}; "
              + "; ".join(f"{c.text}: {'version' if c.version else 'no version'}"
                          for c in r.classes), file=sys.stderr, flush=True)
        stage = "versioned: compile"
        cache.clear_memory()
        t0 = time.monotonic()
        kv = polyc.compile(src, config=cfg_v.replace(use_tuned=True))
        compile_s = time.monotonic() - t0
        out["versioned"] = {
            "tune_s": tune_s, "compile_s": compile_s, "total_s": tune_s + compile_s,
            "versions": max(len(kv.versions) - 1, 0) if kv.versions else 0,
            "kernel_versions": kv.versions, "generic_best": r.best.label,
            "generic_ratio": r.best.ratio, "classes": [c.to_json() for c in r.classes]}
        # (c) the untuned default
        stage = "default: compile"
        kd = polyc.compile(src, config=fresh_config(library_dir))
        # (a) the oracles: a session per M (one shared kernel cache, nothing recorded)
        cfg_o = fresh_config(library_dir)
        program = polyc.program(src)
        oracles = {}
        for pt in points:
            stage = f"oracle M={pt['M']}"
            ro = tune(src, pt, budget=a.oracle_budget_, config=cfg_o, record=False, seed=0,
                      progress=False)
            oracles[pt["M"]] = (ro, measure.compile_candidate(program, ro.best.recipe, cfg_o))
            print(f"[tune] oracle M={pt['M']}: {ro.best.label} ({1 / (ro.best.ratio or 1):.2f}x "
                  f"the default, {ro.measured} measured, {ro.seconds:.0f} s)", file=sys.stderr,
                  flush=True)
    except Exception as e:  # noqa: BLE001 (reported)
        out["error"] = {"stage": stage, "type": type(e).__name__, "message": str(e)}
        return out
    torch = None if a.no_torch else _torch()
    compiled, out["torch"] = None, None
    if torch is not None:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        compiled = torch.compile(lambda x, y: torch.matmul(x, y), dynamic=True)
        out["torch"] = {"version": torch.__version__, "threads": threads, "compile_s": 0.0}
    try:
        for pt in points:
            m = pt["M"]
            ro, ko = oracles[m]
            row = {"M": m, "version": _version_of(kv, pt), "oracle_best": ro.best.label,
                   "oracle_ratio": ro.best.ratio, "oracle_measured": ro.measured,
                   "oracle_tune_s": ro.seconds, "error": None}
            out["rows"].append(row)
            stage = "check"
            try:
                rng = np.random.default_rng(m)
                A = rng.standard_normal((m, nk)).astype(np.float32)
                B = rng.standard_normal((nk, nk)).astype(np.float32)
                expected = A.astype(np.float64) @ B.astype(np.float64)
                fns = {"oracle": lambda: ko(A, B), "versioned": lambda: kv(A, B),
                       "default": lambda: kd(A, B)}
                for name, fn in fns.items():
                    testing.assert_close(fn(), expected, dtype="float32", reduction_length=nk,
                                         name=f"{name} M={m}")
                if torch is not None:
                    try:        # a torch failure leaves the row without its torch columns
                        tA, tB = torch.from_numpy(A), torch.from_numpy(B)
                        with torch.no_grad():
                            testing.assert_close(torch.matmul(tA, tB).numpy(), expected,
                                                 dtype="float32", reduction_length=nk,
                                                 name=f"torch M={m}")
                            fns["torch"] = lambda: torch.matmul(tA, tB)
                            t0 = time.monotonic()
                            got = compiled(tA, tB)
                            out["torch"]["compile_s"] += time.monotonic() - t0
                            testing.assert_close(got.numpy(), expected, dtype="float32",
                                                 reduction_length=nk,
                                                 name=f"torch.compile M={m}")
                            fns["torch.compile"] = lambda: compiled(tA, tB)
                    except Exception as e:  # noqa: BLE001 (reported in the row)
                        row["torch_error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                stage = "time"
                names = list(fns)
                if torch is not None:
                    with torch.no_grad():
                        rounds = measure.round_robin(list(fns.values()), rounds=a.rounds,
                                                     min_sample=a.min_sample)
                else:
                    rounds = measure.round_robin(list(fns.values()), rounds=a.rounds,
                                                 min_sample=a.min_sample)
                ratios, row["noise"] = measure.decide(rounds)
                n = len(names)
                row["us"] = {names[0]: 1e6 * statistics.median([r[0] for r in rounds]
                                                               + [r[n] for r in rounds])}
                for i in range(1, n):
                    row["us"][names[i]] = 1e6 * statistics.median(r[i] for r in rounds)
                # speed relative to the oracle's (median of the per-round time ratios)
                row["vs_oracle"] = {names[i]: 1 / ratios[i] for i in range(n)}
            except Exception as e:  # noqa: BLE001 (reported in the row)
                row["error"] = {"stage": stage, "type": type(e).__name__, "message": str(e)}
            print(f"[tune] M={m}: " + ("failed" if row["error"] else
                                       f"versioned {row['vs_oracle']['versioned']:.2f}x the "
                                       f"oracle"), file=sys.stderr, flush=True)
    finally:
        if torch is not None:
            torch.set_num_threads(before)
    ok = [r for r in out["rows"] if not r["error"]]
    speeds = [r["vs_oracle"]["versioned"] for r in ok]
    worst = min(ok, key=lambda r: r["vs_oracle"]["versioned"], default=None)
    geo = _geomean(speeds)
    out["summary"] = {
        "versioned_geomean": geo, "versioned_worst": worst and worst["vs_oracle"]["versioned"],
        "versioned_worst_M": worst and worst["M"],
        "default_geomean": _geomean([r["vs_oracle"]["default"] for r in ok]),
        "torch_geomean": _geomean([r["vs_oracle"]["torch"] for r in ok if "torch" in
                                   r["vs_oracle"]]),
        "torch_compile_geomean": _geomean([r["vs_oracle"]["torch.compile"] for r in ok
                                           if "torch.compile" in r["vs_oracle"]]),
        "versions": out["versioned"]["versions"],
        "holds": bool(geo is not None and len(ok) == len(out["rows"]) and geo >= CLASS_TARGET
                      and out["versioned"]["versions"] <= CLASS_MAX_VERSIONS)}
    return out


def _us(v) -> str:
    return "-" if v is None else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def classes_table(res: dict) -> str:
    if res.get("error"):
        e = res["error"]
        return f"failed at {e['stage']}: {e['type']}: {e['message']}"
    cols = ["M", "version", "oracle µs", "versioned µs", "default µs", "torch µs",
            "torch.compile µs", "versioned / oracle", "default / oracle",
            "torch.compile / oracle", "oracle's best"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in res["rows"]:
        if r["error"]:
            e = r["error"]
            lines.append(f"| {r['M']} | {r['version']} | failed at {e['stage']}: {e['type']}: "
                         f"{e['message'].splitlines()[0][:120]} |" + " |" * (len(cols) - 3))
            continue
        us, vs = r["us"], r["vs_oracle"]
        x = (lambda k: f"{vs[k]:.2f}x" if k in vs else "-")
        lines.append("| " + " | ".join([
            str(r["M"]), r["version"], _us(us["oracle"]), _us(us["versioned"]),
            _us(us["default"]), _us(us.get("torch")), _us(us.get("torch.compile")),
            x("versioned"), x("default"), x("torch.compile"),
            f"{r['oracle_best']} ({1 / (r['oracle_ratio'] or 1):.2f}x default)"]) + " |")
    for r in res["rows"]:
        if r.get("torch_error"):
            lines.append(f"\ntorch failed at M = {r['M']}: {r['torch_error']}")
    s, v = res["summary"], res["versioned"]
    f = (lambda x: "-" if x is None else f"{x:.2f}x")
    lines += ["", f"- versioned kernel: {v['versions']} version(s) besides the generic one; "
              f"tune {v['tune_s']:.0f} s + compile {v['compile_s']:.1f} s = "
              f"{v['total_s']:.0f} s; generic best {v['generic_best']}"]
    for c in v["classes"]:
        lines.append(f"  - class `{c['class']}` (sizes M = "
                     f"{', '.join(str(p['M']) for p in c['sizes'])}): "
                     f"{'version' if c['version'] else 'no version'} ({c['best']}): {c['why']}")
    lines.append(f"- versioned / oracle: geomean {f(s['versioned_geomean'])}, worst "
                 f"{f(s['versioned_worst'])} at M = {s['versioned_worst_M']}; default / "
                 f"oracle geomean {f(s['default_geomean'])}; torch / oracle "
                 f"{f(s['torch_geomean'])}; torch.compile / oracle "
                 f"{f(s['torch_compile_geomean'])}")
    if res.get("torch"):
        lines.append(f"- torch {res['torch']['version']} on {res['torch']['threads']} "
                     f"thread(s); torch.compile(dynamic=True): {res['torch']['compile_s']:.1f} s "
                     f"of first calls (compiles) over all M")
    lines.append(f"- target (versioned >= {CLASS_TARGET}x the oracle, geomean, with <= "
                 f"{CLASS_MAX_VERSIONS} versions): {'yes' if s['holds'] else 'no'}")
    return "\n".join(lines)
