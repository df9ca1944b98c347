"""What polyc's threads cost the programs around them (issue 16, item 4).

    python -m benchmarks.threads                    # quiet
    python -m benchmarks.threads --background-load  # and with one core half busy

For each ``Config.wait_policy`` (``short``, ``passive``, ``active``) and for
libgomp's own default (``GOMP_SPINCOUNT=300000``, what polyc got before it
set a policy), in a fresh process each (the OpenMP runtime reads its policy
once): the median time of

* a polyc softmax (512 x 1024 f32) called back to back,
* a numpy matmul (256 x 256 f32, OpenBLAS on every core) back to back,
* one step of a pipeline that alternates the two (the usual shape of a
  program that mixes polyc kernels with library calls: idle threads that
  keep spinning after a call take the cores the next call needs),

and the ratio of the pipeline's step to the sum of the two calls alone
(1.0: they do not disturb each other).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, time
import numpy as np
import polyc
k = polyc.compile(open(%(tc)r).read())
x = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
A = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
def med(f, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]
def step():
    k(x); A @ A
for f in (lambda: k(x), lambda: A @ A, step):
    med(f, 50)
out = {"kernel_s": med(lambda: k(x), 400), "matmul_s": med(lambda: A @ A, 400),
       "step_s": med(step, 400)}
print(json.dumps(out))
"""

#: name -> the environment of the child (None: remove the variable)
POLICIES = {
    "short (default)": {"POLYC_WAIT_POLICY": "short"},
    "passive": {"POLYC_WAIT_POLICY": "passive"},
    "active": {"POLYC_WAIT_POLICY": "active"},
    "libgomp default": {"GOMP_SPINCOUNT": "300000"},
}


def measure(policy: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "POLYC_WAIT_POLICY")}
    env.update(POLICIES[policy])
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    code = _CHILD % {"tc": str(ROOT / "examples" / "softmax.tc")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{policy}: {out.stderr.strip().splitlines()[-1:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["policy"] = policy
    row["interference"] = row["step_s"] / (row["kernel_s"] + row["matmul_s"])
    return row


def table(rows: list[dict]) -> str:
    lines = ["| wait policy | softmax alone us | matmul alone us | alternating step us | "
             "step / (softmax + matmul) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['policy']} | {r['kernel_s'] * 1e6:.0f} | {r['matmul_s'] * 1e6:.0f} "
                     f"| {r['step_s'] * 1e6:.0f} | {r['interference']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.threads",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--background-load", type=float, nargs="?", const=0.5, default=None,
                    metavar="DUTY", help="also measure with DUTY of one core busy")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    quiet = [measure(p) for p in POLICIES]
    loaded, text = [], ""
    if a.background_load:
        from .background import BackgroundLoad
        with BackgroundLoad(a.background_load) as load:
            loaded = [measure(p) for p in POLICIES]
        text = load.report()
    if a.json:
        print(json.dumps({"quiet": quiet, "loaded": loaded, "background_load": text}, indent=1))
        return 0
    print(table(quiet))
    if loaded:
        print(f"\nWith a {text}:\n")
        print(table(loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
