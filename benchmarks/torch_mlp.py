"""``torch.compile(model, backend="polyc")`` on a transformer's MLP block
over batch sizes, against torch eager and ``torch.compile`` (Inductor).

    python -m benchmarks.torch_mlp                        # batch 1, 2, 4, 8, 16, 64, 256
    python -m benchmarks.torch_mlp --batches 1 16 --json
    python -m benchmarks.torch_mlp --small --no-inductor  # d=32 (smoke test)

The block is what a PyTorch user writes: ``x + fc2(gelu(fc1(layer_norm(x))))``
with ``torch.nn.Linear`` layers (d = 768, ff = 3072, BERT-base's sizes).
``Linear`` stores its weight as out x in, so every product is ``x @ W.T``;
at a few tokens it is a matrix-vector product whose time is how fast the
weights stream (docs/tensorize.md, "Few rows").  polyc's backend lowers the
ATen graph to numpy calls traced by :func:`polyc.jit`
(``polyc/graph/torch_backend.py``); each compiled function is made once and
called with every batch size, so TorchDynamo decides when to recompile
(automatic dynamic shapes after the second size).

For each batch size, in one process on the same seeded input, under
``torch.no_grad()``: the first call (compiles when the size needs it) and the
median of warm calls (:func:`polyc.testing.median_time`) of polyc, torch eager
and Inductor, each checked against eager first.  The summary gives the
geometric mean and the worst of polyc's ratio to each peer.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from polyc import testing
from polyc.config import Config

from .examples import machine, ratio_lines, ratio_summary, report, time_calls


def _block(torch, d: int, ff: int):
    nn = torch.nn

    class MLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ff)
            self.fc2 = nn.Linear(ff, d)

        def forward(self, x):
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln(x))))
    torch.manual_seed(0)
    return MLPBlock().eval()


def flops(batch: int, d: int, ff: int) -> float:
    """The block's multiply-adds times 2 (the two products)."""
    return 4.0 * batch * d * ff


def run(batches: list[int], small: bool, repeat_time: float, inductor: bool = True) -> dict:
    import torch

    import polyc.graph.torch_backend  # noqa: F401  (registers backend="polyc")
    d, ff = (32, 64) if small else (768, 3072)
    model = _block(torch, d, ff)
    compiled = {"polyc": torch.compile(model, backend="polyc")}
    if inductor:
        compiled["torch.compile"] = torch.compile(model)
    rows: list[dict] = []
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for batch in batches:
            x = torch.randn(batch, d, generator=gen)
            ref = model(x).numpy()
            calls: dict[str, Callable[[], Any]] = {
                name: (lambda f=f: f(x)) for name, f in compiled.items()}
            calls["torch eager"] = lambda: model(x)
            row: dict[str, Any] = {"batch": batch}
            time_calls(calls, lambda name, out: testing.assert_close(
                out.numpy(), ref, reduction_length=ff, name=name), repeat_time, row)
            row["gflops"] = flops(batch, d, ff) / (row["polyc_ms"] / 1e3) / 1e9
            rows.append(row)
    summary = {"batches": len(rows), **ratio_summary(rows, "batch")}
    return {"rows": rows, "summary": summary, "d": d, "ff": ff}


def table(result: dict) -> str:
    """The markdown table and the summary lines."""
    rows = result["rows"]
    peers = [p for p in ("torch eager", "torch.compile") if any(f"{p}_ms" in r for r in rows)]
    head = ["batch", "polyc ms", *(f"{p} ms" for p in peers), *(f"x {p}" for p in peers),
            "GFLOP/s", "polyc first ms", *(f"{p} first ms" for p in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [str(r["batch"]), f"{r['polyc_ms']:.3f}",
                 *(f"{r[f'{p}_ms']:.3f}" for p in peers),
                 *(f"{r[f'ratio_{p}']:.2f}" for p in peers),
                 f"{r['gflops']:.1f}", f"{r['polyc_first_ms']:.1f}",
                 *(f"{r[f'{p}_first_ms']:.1f}" for p in peers)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *ratio_lines(result["summary"], "batch")])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="*", default=[1, 2, 4, 8, 16, 64, 256])
    ap.add_argument("--small", action="store_true", help="d=32, ff=64 (smoke test)")
    ap.add_argument("--no-inductor", action="store_true", help="leave torch.compile out")
    ap.add_argument("--repeat-time", type=float, default=0.2,
                    help="seconds each median runs for at least (default 0.2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        ap.error("this benchmark needs torch: pip install torch==2.13.0")
    if any(b < 1 for b in a.batches):
        ap.error("batch sizes must be at least 1")
    result = run(a.batches, a.small, a.repeat_time, inductor=not a.no_inductor)
    info = {"machine": machine(Config.from_env()), **result}
    report(info, a.json, f"machine: {info['machine']}\n\n{table(result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
