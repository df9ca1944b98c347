"""Multi-operand einsum: polyc's pairwise path against numpy's, and against one loop nest.

    python -m benchmarks.einsum_chain                 # ij,jk,kl->il at n=200 and n=400
    python -m benchmarks.einsum_chain --sizes 64 128  # other sizes
    python -m benchmarks.einsum_chain --no-single     # skip the O(n^4) single nest
    python -m benchmarks.einsum_chain --json          # one JSON object

For each size, in one process, on the same seeded float64 inputs (issue 14):

* **polyc path**: ``polyc.einsum("ij,jk,kl->il", A, B, C, optimize=True)``,
  two pairwise contractions along opt_einsum's greedy path, each its own
  compiled kernel, the intermediate allocated by polyc;
* **numpy path**: ``np.einsum(..., optimize=True)``, numpy's greedy path with
  each pair on BLAS (``np.matmul``);
* **polyc single nest**: ``polyc.einsum(..., optimize=False)``, the whole
  call as one O(n^4) loop nest (numpy's and polyc's default).

Each time is the median after one warm-up call (``benchmarks.examples.measure``;
the single nest runs at least twice, it takes seconds at n=400). The
kernels are compiled (or loaded from the disk cache) by the warm-up call, so
the times are calls, not compiles; ``compile s`` is the first call's
wall time. Results are checked against ``A @ B @ C`` before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import polyc
from polyc import testing
from polyc.config import Config

from .examples import _wall, machine, measure

SUBSCRIPTS = "ij,jk,kl->il"


def run(n: int, repeat_time: float, single: bool, seed: int = 0) -> dict:
    """The row of size ``n``: times in seconds, ratios, the path's steps."""
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal((n, n)) for _ in range(3))
    want = a @ b @ c
    row: dict = {"n": n, "subscripts": SUBSCRIPTS}
    path_fn = lambda: polyc.einsum(SUBSCRIPTS, a, b, c, optimize=True)  # noqa: E731
    got, row["compile_s"] = _wall(path_fn)
    testing.assert_close(got, want, reduction_length=n * n, name=f"path n={n}")
    row["steps"] = polyc.einsum_path(SUBSCRIPTS, a, b, c, optimize=True)[0][1:]
    row["polyc_path_s"] = measure(path_fn, repeat_time, min_reps=3, max_reps=200).median_s
    row["numpy_path_s"] = measure(lambda: np.einsum(SUBSCRIPTS, a, b, c, optimize=True),
                                  repeat_time, min_reps=3, max_reps=200).median_s
    row["vs_numpy"] = row["numpy_path_s"] / row["polyc_path_s"]
    if single:
        single_fn = lambda: polyc.einsum(SUBSCRIPTS, a, b, c, optimize=False)  # noqa: E731
        testing.assert_close(single_fn(), want, reduction_length=n * n, name=f"single n={n}")
        row["polyc_single_s"] = measure(single_fn, repeat_time, min_reps=2,
                                        max_reps=20).median_s
        row["vs_single"] = row["polyc_single_s"] / row["polyc_path_s"]
    return row


def table(rows: list[dict]) -> str:
    cols = ["subscripts", "n", "polyc optimize=True ms", "numpy optimize=True ms",
            "polyc optimize=False ms", "vs numpy", "vs single nest", "path", "compile s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        single = r.get("polyc_single_s")
        lines.append("| " + " | ".join([
            r["subscripts"], str(r["n"]), f"{r['polyc_path_s'] * 1e3:.3f}",
            f"{r['numpy_path_s'] * 1e3:.3f}",
            f"{single * 1e3:.1f}" if single else "-",
            f"{r['vs_numpy']:.2f}x",
            f"{r['vs_single']:.1f}x" if single else "-",
            " ".join(str(tuple(s)) for s in r["steps"]), f"{r['compile_s']:.2f}"]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.einsum_chain",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 400],
                    help="n of the n x n operands (default 200 400)")
    ap.add_argument("--no-single", action="store_true",
                    help="skip the single loop nest (O(n^4): seconds at n=400)")
    ap.add_argument("--repeat-time", type=float, default=0.5,
                    help="seconds each measurement runs for at least (default 0.5)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    mach = machine(Config.from_env())
    rows = []
    for n in a.sizes:
        print(f"[einsum_chain] n={n} ...", file=sys.stderr, flush=True)
        rows.append(run(n, a.repeat_time, not a.no_single))
    if a.json:
        print(json.dumps({"machine": mach, "repeat_time_s": a.repeat_time, "results": rows},
                         indent=1))
    else:
        print(f"- {mach['cpu']}, {mach['cores']} cores; polyc on {mach['polyc_threads']} "
              f"thread(s); numpy {mach['numpy']} ({mach['blas']})")
        print()
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
