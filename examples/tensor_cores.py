"""Half-precision contractions on CUDA tensor cores (docs/cuda.md, "Tensor cores").

A matmul, attention's batched ``Q K^T`` and a 3 x 3 convolution in float16 compile to one
WMMA launch each. Without a GPU (the default here) they run on polyc's CUDA emulator,
which executes the same device code on POSIX threads; ``--device`` runs them on a GPU
through pycuda instead. Each result is checked against numpy in float64.

    python examples/tensor_cores.py [--device]
"""

from __future__ import annotations

import argparse

import numpy as np

import polyc

PROGRAMS = {
    "matmul": ("def mm(half(M,K) A, half(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
               "mk,kn->mn", [(200, 96), (96, 130)], 1.0),
    "attention scores": ("def qk(half(B,M,D) Q, half(B,N,D) Kt) -> (S) "
                         "{ S(b,m,n) +=! 0.125 * Q(b,m,d) * Kt(b,n,d) }",
                         "bmd,bnd->bmn", [(4, 33, 64), (4, 65, 64)], 0.125),
}
CONV = ("def conv(half(N,C,H,W) I, half(F,C,3,3) Wt) -> (O) "
        "{ O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw) where h in 0:H-2, w in 0:W-2 }")


def conv_reference(i: np.ndarray, wt: np.ndarray) -> np.ndarray:
    h, w = i.shape[2] - 2, i.shape[3] - 2
    f = [x.astype(np.float64) for x in (i, wt)]
    return sum(np.einsum("nchw,fc->nfhw", f[0][:, :, a:a + h, b:b + w], f[1][:, :, a, b])
               for a in range(3) for b in range(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", action="store_true", help="run on a GPU through pycuda")
    args = ap.parse_args()
    config = polyc.Config.from_env(target="cuda", emulate=not args.device)
    rng = np.random.default_rng(0)
    cases = [(name, src, shapes, lambda a, b, s=subs, f=scale: f * np.einsum(
        s, a.astype(np.float64), b.astype(np.float64)))
        for name, (src, subs, shapes, scale) in PROGRAMS.items()]
    cases.append(("convolution 3x3", CONV, [(2, 16, 18, 18), (32, 16, 3, 3)], conv_reference))
    for name, src, shapes, reference in cases:
        kernel = polyc.compile(src, config=config)
        a, b = (rng.standard_normal(s).astype(np.float16) for s in shapes)
        got = kernel(a, b).astype(np.float64)
        want = reference(a, b)
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
        launch = kernel.kernels[0]
        print(f"{name}: {len(kernel.kernels)} launch(es), tensor cores: {bool(launch.intrinsic)}, "
              f"grid {' x '.join(launch.launch_sizes(kernel.program)['grid'])}, "
              f"max error {err:.1e} of max |ref|")
        assert launch.intrinsic and err < 2e-3, (name, err)
    print(kernel.explain().split("GPU mapping")[1].strip().splitlines()[1].strip())


if __name__ == "__main__":
    main()
