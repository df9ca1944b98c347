"""Whole numpy programs: ``@polyc.jit`` against numpy, torch and JAX in one run.

    python -m benchmarks.graph                 # every workload, markdown table
    python -m benchmarks.graph --only softmax attention
    python -m benchmarks.graph --tiny          # tiny sizes (smoke test, seconds)
    python -m benchmarks.graph --json

Each workload is one plain-numpy function (issue 14's list: LayerNorm+GELU,
softmax, relu(XW+b), the BERT FFN, attention plain and causal, the RBF
broadcast-reduce, the BERT-base encoder layer at seq 128 and 512 of
``examples/bert_layer.py``, the ResNet basic block of
``examples/resnet_block.py``).  Peers, on the same seeded inputs in the same process:

* **numpy**: the function itself;
* **jax.jit**: the same function body with ``jax.numpy`` (when jax imports);
* **torch eager** and **torch.compile** (default backend) of the same
  computation written with torch ops (when torch imports).

polyc's output is checked against numpy's before anything is timed.  Times
are medians after a warm-up (``benchmarks.examples.measure``); ``cold s`` is
the first call in an empty polyc cache holding only the intrinsics library,
built once before the workloads (trace, plan, compile); ``kernels``
the number of kernels the plan runs; the rate is GFLOP/s for programs with
contractions (fraction of the measured FMA peak) and GB/s for the others
(every argument read once, the result written once; fraction of the
measured STREAM triad), both from ``benchmarks.peak``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import polyc
from polyc import testing
from polyc.config import Config

from .examples import _wall, fresh_cache, machine, measure, report

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu(xp, y):
    return 0.5 * y * (1.0 + xp.tanh(SQRT_2_OVER_PI * (y + 0.044715 * y * y * y)))


def layernorm_gelu(xp):
    def f(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) * (x - m)).mean(-1, keepdims=True)
        return _gelu(xp, (x - m) / xp.sqrt(v + 1e-5) * g + b)
    return f


def softmax(xp):
    def f(x):
        p = xp.exp(x - x.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True)
    return f


def mlp(xp):
    def f(x, w, b):
        return xp.maximum(x @ w + b, 0.0)
    return f


def ffn(xp):
    def f(x, w1, b1, w2, b2):
        return x + _gelu(xp, x @ w1 + b1) @ w2 + b2
    return f


def attention(xp):
    def f(q, k, v):
        s = q @ k.swapaxes(-1, -2) * 0.125
        p = xp.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v
    return f


def causal_attention(xp):
    def f(q, k, v, mask):
        s = q @ k.swapaxes(-1, -2) * 0.125 + mask
        p = xp.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v
    return f


def rbf(xp):
    def f(x, y):
        d = x[:, None, :] - y[None, :, :]
        return xp.exp(-(d * d).sum(-1)).sum(-1)
    return f


def _torch(name: str):
    import torch

    class NS:
        tanh, exp, sqrt = torch.tanh, torch.exp, torch.sqrt

        @staticmethod
        def maximum(a, b):
            return torch.clamp_min(a, b)
    if name == "softmax":
        return lambda x: torch.softmax(x, -1)
    if name == "layernorm_gelu":
        def f(x, g, b):
            m = x.mean(-1, keepdim=True)
            v = ((x - m) * (x - m)).mean(-1, keepdim=True)
            return _gelu(NS, (x - m) / torch.sqrt(v + 1e-5) * g + b)
        return f
    if name == "rbf":
        def f(x, y):
            d = x[:, None, :] - y[None, :, :]
            return torch.exp(-(d * d).sum(-1)).sum(-1)
        return f
    if name in ("attention", "causal_attention"):
        def f(q, k, v, mask=None):
            s = q @ k.transpose(-1, -2) * 0.125
            if mask is not None:
                s = s + mask
            return torch.softmax(s, -1) @ v
        return f
    return {"mlp": mlp, "ffn": ffn}[name](NS)


@dataclass
class Workload:
    name: str
    make: Callable[[Any], Callable]
    shapes: Callable[[bool], list[tuple[int, ...]]]
    flops: Callable[[list], float] | None = None     # None: memory-bound
    extra: Callable[[list], list] | None = None      # arrays derived from the shapes
    #: the whole argument list (weights scaled as a model's), instead of shapes
    inputs: Callable[[bool], list[np.ndarray]] | None = None
    #: the torch formulation, when it is not _torch(name)
    torch_fn: Callable[[], Callable] | None = None
    jax: bool = True


def _example(name: str):
    """A module of ``examples/`` (not a package), imported by path."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_polyc_example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bert(seq: int) -> Workload:
    def inputs(tiny):
        return _example("bert_layer").make_inputs(16 if tiny else seq, *((96, 384) if tiny
                                                                          else (768, 3072)))

    def flops(_):
        s, d, f = seq, 768, 3072
        return 2.0 * s * d * d * 4 + 4.0 * s * s * d + 4.0 * s * d * f
    return Workload(f"bert_layer_{seq}", lambda xp: _example("bert_layer").bert_layer_numpy,
                    lambda t: [], flops, inputs=inputs,
                    torch_fn=lambda: _example("bert_layer").bert_layer_numpy_torch, jax=False)


def _resnet() -> Workload:
    def inputs(tiny):
        return _example("resnet_block").make_inputs(*((16, 14) if tiny else (64, 56)))

    def torch_block():
        import torch
        f = torch.nn.functional

        def block(x, w1, s1, b1, w2, s2, b2):
            y = torch.relu(f.conv2d(x[None], w1, padding=1)[0] * s1[:, None, None]
                           + b1[:, None, None])
            y = f.conv2d(y[None], w2, padding=1)[0] * s2[:, None, None] + b2[:, None, None]
            return torch.relu(y + x)
        return block
    return Workload("resnet_block", lambda xp: _example("resnet_block").resnet_block_numpy,
                    lambda t: [], lambda s: 2 * 2.0 * 64 * 64 * 9 * 56 * 56, inputs=inputs,
                    torch_fn=torch_block, jax=False)


def _causal_mask(shapes):
    s = shapes[0][-2]
    return [np.triu(np.full((s, s), -np.inf, np.float32), 1)]


WORKLOADS = [
    Workload("layernorm_gelu", layernorm_gelu,
             lambda t: [(64, 96), (96,), (96,)] if t else [(4096, 1024), (1024,), (1024,)]),
    Workload("softmax", softmax, lambda t: [(64, 96)] if t else [(4096, 1024)]),
    Workload("mlp", mlp, lambda t: [(64, 48), (48, 32), (32,)] if t else
             [(1024, 1024), (1024, 1024), (1024,)],
             lambda s: 2.0 * s[0][0] * s[0][1] * s[1][1]),
    Workload("ffn", ffn, lambda t: [(32, 48), (48, 96), (96,), (96, 48), (48,)] if t else
             [(512, 768), (768, 3072), (3072,), (3072, 768), (768,)],
             lambda s: 4.0 * s[0][0] * s[0][1] * s[1][1]),
    Workload("attention", attention, lambda t: [(2, 32, 16)] * 3 if t else [(8, 512, 64)] * 3,
             lambda s: 4.0 * s[0][0] * s[0][1] * s[0][1] * s[0][2]),
    Workload("causal_attention", causal_attention,
             lambda t: [(2, 32, 16)] * 3 if t else [(12, 512, 64)] * 3,
             lambda s: 4.0 * s[0][0] * s[0][1] * s[0][1] * s[0][2], _causal_mask),
    Workload("rbf", rbf, lambda t: [(64, 3), (96, 3)] if t else [(4096, 3), (4096, 3)],
             lambda s: 9.0 * s[0][0] * s[1][0]),
    _bert(128),
    _bert(512),
    _resnet(),
]


def _peers(w: Workload, args: list[np.ndarray]) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {"numpy": lambda: w.make(np)(*args)}
    try:
        if not w.jax:
            raise ImportError
        import jax
        import jax.numpy as jnp
        jargs = [jnp.asarray(a) for a in args]
        jf = jax.jit(w.make(jnp))
        out["jax.jit"] = lambda: jf(*jargs).block_until_ready()
    except ImportError:
        pass
    try:
        import torch
        targs = [torch.from_numpy(a) for a in args]
        tf = w.torch_fn() if w.torch_fn else _torch(w.name)

        def eager():
            with torch.no_grad():
                return tf(*targs)
        out["torch eager"] = eager
        tc = torch.compile(tf)

        def compiled():
            with torch.no_grad():
                return tc(*targs)
        out["torch.compile"] = compiled
    except ImportError:
        pass
    return out


def run_workload(w: Workload, tiny: bool, repeat_time: float, peak: dict | None) -> dict:
    rng = np.random.default_rng(0)
    if w.inputs:
        args = w.inputs(tiny)
        shapes = [a.shape for a in args]
    else:
        shapes = w.shapes(tiny)
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if w.extra:
        args += w.extra(shapes)
    fn = polyc.jit(w.make(np))
    out, cold = _wall(lambda: fn(*args))
    ref = w.make(np)(*args)
    testing.assert_close(out, ref, reduction_length=max(s[-1] for s in shapes if s))
    row: dict[str, Any] = {"workload": w.name, "shapes": shapes,
                           "kernels": len(fn.plan(*args).groups), "cold_s": cold}
    row["polyc_ms"] = measure(lambda: fn(*args), repeat_time).median_s * 1e3
    for name, call in _peers(w, args).items():
        call()
        row[f"{name}_ms"] = measure(call, repeat_time).median_s * 1e3
        row[f"ratio_{name}"] = row[f"{name}_ms"] / row["polyc_ms"]
    # the jitted call's own overhead: the call minus its kernels called directly (both on
    # the workspace of intermediates, polyc/graph/workspace.py)
    p = fn.plan(*args)
    env_args = dict(zip([n.name for n in p.graph.args], args))
    env_args.update({n.name: n.value for n in p.graph.captured})
    sizes = {r: v for r, v in enumerate(p.graph.symbols.values)}
    kernels_ms = measure(lambda: p.run(env_args, sizes, reuse=True), repeat_time).median_s * 1e3
    row["jit_overhead_us"] = max(row["polyc_ms"] - kernels_ms, 0.0) * 1e3
    seconds = row["polyc_ms"] / 1e3
    if w.flops and not (tiny and w.inputs):
        row["gflops"] = w.flops(shapes) / seconds / 1e9
        if peak and peak.get("fma_gflops_allcores_f32"):
            row["fraction_of_peak"] = row["gflops"] / peak["fma_gflops_allcores_f32"]
    else:
        nbytes = sum(a.nbytes for a in args) + ref.nbytes
        row["gbs"] = nbytes / seconds / 1e9
        if peak and peak.get("stream_triad_gbs_allcores"):
            row["fraction_of_peak"] = row["gbs"] / peak["stream_triad_gbs_allcores"]
    return row


def _table(rows: list[dict]) -> str:
    peers = [p for p in ("numpy", "jax.jit", "torch eager", "torch.compile")
             if any(f"{p}_ms" in r for r in rows)]
    head = ["workload", "kernels", "cold s", "polyc ms"] + [f"{p} ms" for p in peers] + \
           [f"x {p}" for p in peers] + ["rate", "of peak"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        rate = f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r else f"{r.get('gbs', 0):.1f} GB/s"
        cells = [r["workload"], str(r["kernels"]), f"{r['cold_s']:.2f}", f"{r['polyc_ms']:.3f}"]
        cells += [f"{r[f'{p}_ms']:.3f}" if f"{p}_ms" in r else "-" for p in peers]
        cells += [f"{r[f'ratio_{p}']:.2f}" if f"ratio_{p}" in r else "-" for p in peers]
        cells += [rate, f"{100 * r['fraction_of_peak']:.0f}%" if "fraction_of_peak" in r
                  else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="workload names")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat-time", type=float, default=None)
    args = ap.parse_args(argv)
    repeat = args.repeat_time if args.repeat_time is not None else (0.02 if args.tiny else 0.5)
    with fresh_cache("polyc-bench-graph-") as directory:
        # the intrinsics library is built once per machine: the workloads' cold
        # compiles start from a cache that holds it, as benchmarks.tensor's do
        from .tensor import prebuild_intrinsics
        library_s = prebuild_intrinsics(directory)
        peak = None
        if not args.tiny:
            from .peak import measure as peak_measure
            peak = peak_measure()
        rows = [run_workload(w, args.tiny, repeat, peak) for w in WORKLOADS
                if not args.only or w.name in args.only]
        info = {"machine": machine(Config.from_env()), "peak": peak, "rows": rows,
                "intrinsics_library_s": library_s}
        report(info, args.json, f"machine: {info['machine']}\npeak: {peak}\n"
               f"intrinsics library built in {library_s:.1f} s (before the cold compiles)\n\n"
               f"{_table(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
