"""Affine loop programs written in Python, compiled by polyc (``@polyc.kernel``).

    python examples/loops.py                      # run, check against numpy, time
    polyc explain examples/loops.py --def jacobi_1d
    polyc compile examples/loops.py --def gemm --emit schedule
"""

import time

import numpy as np

import polyc


@polyc.kernel
def gemm(alpha, beta, C, A, B):
    """C = alpha * A @ B + beta * C, PolyBench's loop order (i, k, j)."""
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            C[i, j] *= beta
        for k in range(nk):
            for j in range(nj):
                C[i, j] += alpha * A[i, k] * B[k, j]


@polyc.kernel
def jacobi_1d(tsteps, A, B):
    """A time-iterated 3-point stencil: the time loop stays sequential around
    parallel, vectorised space loops (``Config(time_tiling=True)`` skews and
    tiles it instead)."""
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


@polyc.kernel
def row_norms(A, out):
    """A scalar temporary per row: expanded, so the rows stay parallel."""
    m, n = A.shape
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += A[i, j] * A[i, j]
        out[i] = np.sqrt(s)


def main():
    rng = np.random.default_rng(0)
    A, B, C = rng.random((500, 600)), rng.random((600, 700)), rng.random((500, 700))
    expect = 1.5 * A @ B + 0.5 * C
    t0 = time.perf_counter()
    gemm(1.5, 0.5, C, A, B)                       # first call compiles
    print(f"gemm: first call {time.perf_counter() - t0:.2f} s, "
          f"max error {np.abs(C - expect).max():.1e}")

    A = rng.random(2000)
    B = A.copy()
    ref_a, ref_b = A.copy(), B.copy()
    for _ in range(100):
        ref_b[1:-1] = 0.33333 * (ref_a[:-2] + ref_a[1:-1] + ref_a[2:])
        ref_a[1:-1] = 0.33333 * (ref_b[:-2] + ref_b[1:-1] + ref_b[2:])
    jacobi_1d(100, A, B)
    print(f"jacobi_1d: max error {np.abs(A - ref_a).max():.1e}")

    M = rng.random((300, 400))
    out = np.zeros(300)
    row_norms(M, out)
    print(f"row_norms: max error {np.abs(out - np.linalg.norm(M, axis=1)).max():.1e}")


if __name__ == "__main__":
    main()
