"""The BERT-base encoder layer over many sequence lengths: one ``@polyc.jit``
plan per shape class against torch eager and ``torch.compile(dynamic=True)``.

    python -m benchmarks.bert_sweep                  # seq 1..128, then every 8th to 512
    python -m benchmarks.bert_sweep --seqs 1 7 64 100 384
    python -m benchmarks.bert_sweep --small --seqs 1 2 3 --json   # d=96 (smoke test)

Issue 17's shape-class sweep on the graph layer: a serving system sees every
token count, and a compiler that recompiles per size (Inductor without
``dynamic=True``) or pads to buckets pays for it.  ``polyc.jit`` traces
``examples/bert_layer.py``'s numpy function once per *shape class*: the
sequence length is an isl parameter of every kernel, so one compile serves
every length the class admits (the class of length 1 is its own: unit
dimensions broadcast).

For each length, in one process on the same seeded inputs: the first call
(trace and compile when the length opens a new class, else a warm call
that also builds the call plans and the workspace of that size) and the
median of warm calls (:func:`polyc.testing.median_time`) of polyc, torch
eager and ``torch.compile(dynamic=True)`` (default backend), each checked
against numpy first.  The summary gives the geometric mean and the worst
of polyc's ratio to each peer, the number of traces (polyc) and of compiled
graphs (Dynamo's ``unique_graphs``), and the seconds spent in first calls.
The rate is GFLOP/s of the layer's products (projections, attention, FFN).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from polyc import testing
from polyc.config import Config

from .examples import fresh_cache, machine, ratio_lines, ratio_summary, report, time_calls


def _example():
    path = Path(__file__).resolve().parents[1] / "examples" / "bert_layer.py"
    spec = importlib.util.spec_from_file_location("_polyc_example_bert_sweep", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def default_seqs() -> list[int]:
    """1..128, then every 8th length to 512 (issue 17)."""
    return list(range(1, 129)) + list(range(136, 513, 8))


def flops(seq: int, d: int, ff: int) -> float:
    """The layer's multiply-adds times 2: Q/K/V and output projections,
    scores and context, the two FFN products."""
    return 2.0 * seq * d * d * 4 + 4.0 * seq * seq * d + 4.0 * seq * d * ff


def _torch_peers(mod, args: list[np.ndarray], state: dict) -> dict[str, Callable[[], Any]]:
    """torch eager and one ``torch.compile(dynamic=True)`` of the layer
    (kept in ``state`` across lengths); ``{}`` without torch."""
    try:
        import torch
    except ImportError:
        return {}
    targs = [torch.from_numpy(a) for a in args]
    fn = mod.bert_layer_numpy_torch
    if "compiled" not in state:
        state["compiled"] = torch.compile(fn, dynamic=True)
    tc = state["compiled"]

    def eager():
        with torch.no_grad():
            return fn(*targs).numpy()

    def compiled():
        with torch.no_grad():
            return tc(*targs).numpy()
    return {"torch eager": eager, "torch.compile": compiled}


def _torch_graphs() -> int | None:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return int(counters["stats"]["unique_graphs"])


def run(seqs: list[int], small: bool, repeat_time: float, progress: bool) -> dict:
    mod = _example()
    d, ff = (96, 384) if small else (768, 3072)
    rows: list[dict] = []
    first_s: dict[str, float] = {}
    state: dict = {}
    it = seqs
    if progress:
        from tqdm import tqdm
        it = tqdm(seqs, desc="bert sweep", unit="len")
    for seq in it:
        args = mod.make_inputs(seq, d, ff)
        ref = mod.bert_layer_numpy(*args)
        row: dict[str, Any] = {"seq": seq}
        calls: dict[str, Callable[[], Any]] = {"polyc": lambda: mod.bert_layer(*args)}
        calls.update(_torch_peers(mod, args, state))
        firsts = time_calls(calls, lambda name, out: testing.assert_close(
            np.asarray(out), ref, reduction_length=ff, name=name), repeat_time, row)
        for name, first in firsts.items():
            first_s[name] = first_s.get(name, 0.0) + first
        row["gflops"] = flops(seq, d, ff) / (row["polyc_ms"] / 1e3) / 1e9
        rows.append(row)
    summary: dict[str, Any] = {
        "lengths": len(rows),
        "polyc_traces": sum(len(v) for v in mod.bert_layer._plans.values()),
        "torch_compile_graphs": _torch_graphs(),
        "first_call_s": {k: round(v, 3) for k, v in first_s.items()}}
    summary.update(ratio_summary(rows, "seq"))
    return {"rows": rows, "summary": summary, "d": d, "ff": ff}


def _table(result: dict) -> str:
    rows = result["rows"]
    peers = [p for p in ("torch eager", "torch.compile") if any(f"{p}_ms" in r for r in rows)]
    head = ["seq", "polyc ms"] + [f"{p} ms" for p in peers] + [f"x {p}" for p in peers] + \
        ["GFLOP/s", "polyc first ms"] + [f"{p} first ms" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["seq"]), f"{r['polyc_ms']:.3f}"]
        cells += [f"{r[f'{p}_ms']:.3f}" for p in peers]
        cells += [f"{r[f'ratio_{p}']:.2f}" for p in peers]
        cells += [f"{r['gflops']:.1f}", f"{r['polyc_first_ms']:.1f}"]
        cells += [f"{r[f'{p}_first_ms']:.1f}" for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    s = result["summary"]
    lines.append("")
    lines.append(f"lengths {s['lengths']}; polyc traces {s['polyc_traces']}; "
                 f"torch.compile graphs {s['torch_compile_graphs']}; "
                 f"seconds in first calls {s['first_call_s']}")
    lines += ratio_lines(s, "seq")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=int, nargs="*", help="sequence lengths (default: issue "
                    "17's sweep, 1..128 then every 8th to 512)")
    ap.add_argument("--small", action="store_true", help="d=96, ff=384 (smoke test)")
    ap.add_argument("--repeat-time", type=float, default=0.15,
                    help="seconds of warm calls per length and system")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    seqs = args.seqs or default_seqs()
    if any(s < 1 for s in seqs):
        ap.error("sequence lengths must be positive")
    with fresh_cache("polyc-bench-bert-sweep-"):
        result = run(seqs, args.small, args.repeat_time,
                     progress=sys.stderr.isatty() and not args.json)
        result["machine"] = machine(Config.from_env())
        report(result, args.json, f"machine: {result['machine']}\n\n{_table(result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
