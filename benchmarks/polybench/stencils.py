"""PolyBench/C 4.2.1 ``stencils``: adi, fdtd-2d, heat-3d, jacobi-1d,
jacobi-2d, seidel-2d."""

from __future__ import annotations

import numpy as np

import polyc

from . import Bench
from . import arr as _arr

CATEGORY = "stencils"


def _grid(*extents):
    """Open integer index grids (int64) for numpy broadcasting."""
    return np.ix_(*(np.arange(e, dtype=np.int64) for e in extents))


# -------------------------------------------------------------------- adi

@polyc.kernel
def adi(tsteps, u, v, p, q):
    n = u.shape[0]
    DX = 1.0 / n
    DY = 1.0 / n
    DT = 1.0 / tsteps
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for t in range(1, tsteps + 1):
        # column sweep
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = (-d * u[j, i - 1] + (1.0 + 2.0 * d) * u[j, i]
                           - f * u[j, i + 1] - a * q[i, j - 1]) / (a * p[i, j - 1] + b)
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        # row sweep
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = (-a * v[i - 1, j] + (1.0 + 2.0 * a) * v[i, j]
                           - c * v[i + 1, j] - d * q[i, j - 1]) / (d * p[i, j - 1] + e)
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]


def _adi_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _grid(n, n)
    u = (i + n - j) / n
    return (sizes["TSTEPS"], _arr(u, dtype), np.zeros((n, n), dtype),
            np.zeros((n, n), dtype), np.zeros((n, n), dtype))


def _adi_ref(tsteps, u, v, p, q):
    # Every line of a sweep is independent: run the tridiagonal recurrences
    # along j for all interior lines i = 1..n-2 at once.
    n = u.shape[0]
    dx = dy = 1.0 / n
    dt = 1.0 / tsteps
    m1, m2 = 2.0 * dt / dx ** 2, 1.0 * dt / dy ** 2
    a, b, c = -m1 / 2.0, 1.0 + m1, -m1 / 2.0
    d, e, f = -m2 / 2.0, 1.0 + m2, -m2 / 2.0
    I = slice(1, n - 1)
    for _ in range(tsteps):
        v[0, I] = 1.0
        p[I, 0] = 0.0
        q[I, 0] = 1.0
        for j in range(1, n - 1):
            den = a * p[I, j - 1] + b
            p[I, j] = -c / den
            q[I, j] = (-d * u[j, 0:n - 2] + (1.0 + 2.0 * d) * u[j, I]
                       - f * u[j, 2:n] - a * q[I, j - 1]) / den
        v[n - 1, I] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, I] = p[I, j] * v[j + 1, I] + q[I, j]

        u[I, 0] = 1.0
        p[I, 0] = 0.0
        q[I, 0] = 1.0
        for j in range(1, n - 1):
            den = d * p[I, j - 1] + e
            p[I, j] = -f / den
            q[I, j] = (-a * v[0:n - 2, j] + (1.0 + 2.0 * a) * v[I, j]
                       - c * v[2:n, j] - d * q[I, j - 1]) / den
        u[I, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[I, j] = p[I, j] * u[I, j + 1] + q[I, j]


# ---------------------------------------------------------------- fdtd-2d

@polyc.kernel
def fdtd_2d(ex, ey, hz, _fict_):
    nx, ny = ex.shape
    tmax = _fict_.shape[0]
    for t in range(tmax):
        for j in range(ny):
            ey[0, j] = _fict_[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j]
                                             + ey[i + 1, j] - ey[i, j])


def _fdtd_2d_init(sizes, dtype=np.float64):
    tmax, nx, ny = sizes["TMAX"], sizes["NX"], sizes["NY"]
    i, j = _grid(nx, ny)
    ex = i * (j + 1) / nx
    ey = i * (j + 2) / ny
    hz = i * (j + 3) / nx
    fict = np.arange(tmax, dtype=np.float64)
    return (_arr(ex, dtype), _arr(ey, dtype), _arr(hz, dtype), _arr(fict, dtype))


def _fdtd_2d_ref(ex, ey, hz, fict):
    for t in range(fict.shape[0]):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


# ---------------------------------------------------------------- heat-3d

@polyc.kernel
def heat_3d(tsteps, A, B):
    n = A.shape[0]
    for t in range(1, tsteps + 1):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                                  + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                                  + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1])
                                  + A[i, j, k])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    A[i, j, k] = (0.125 * (B[i + 1, j, k] - 2.0 * B[i, j, k] + B[i - 1, j, k])
                                  + 0.125 * (B[i, j + 1, k] - 2.0 * B[i, j, k] + B[i, j - 1, k])
                                  + 0.125 * (B[i, j, k + 1] - 2.0 * B[i, j, k] + B[i, j, k - 1])
                                  + B[i, j, k])


def _heat_3d_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j, k = _grid(n, n, n)
    a = (i + j + (n - k)) * 10.0 / n
    return (sizes["TSTEPS"], _arr(a, dtype), _arr(a, dtype).copy())


def _heat_3d_ref(tsteps, A, B):
    def step(src, dst):
        c = src[1:-1, 1:-1, 1:-1]
        dst[1:-1, 1:-1, 1:-1] = (
            0.125 * (src[2:, 1:-1, 1:-1] - 2.0 * c + src[:-2, 1:-1, 1:-1])
            + 0.125 * (src[1:-1, 2:, 1:-1] - 2.0 * c + src[1:-1, :-2, 1:-1])
            + 0.125 * (src[1:-1, 1:-1, 2:] - 2.0 * c + src[1:-1, 1:-1, :-2])
            + c)

    for _ in range(tsteps):
        step(A, B)
        step(B, A)


# -------------------------------------------------------------- jacobi-1d

@polyc.kernel
def jacobi_1d(tsteps, A, B):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def _jacobi_1d_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i = np.arange(n, dtype=np.float64)
    return (sizes["TSTEPS"], _arr((i + 2) / n, dtype), _arr((i + 3) / n, dtype))


def _jacobi_1d_ref(tsteps, A, B):
    for _ in range(tsteps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


# -------------------------------------------------------------- jacobi-2d

@polyc.kernel
def jacobi_2d(tsteps, A, B):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, 1 + j] + A[1 + i, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, 1 + j] + B[1 + i, j] + B[i - 1, j])


def _jacobi_2d_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _grid(n, n)
    return (sizes["TSTEPS"], _arr((i * (j + 2) + 2) / n, dtype),
            _arr((i * (j + 3) + 3) / n, dtype))


def _jacobi_2d_ref(tsteps, A, B):
    def step(src, dst):
        dst[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
                                 + src[2:, 1:-1] + src[:-2, 1:-1])

    for _ in range(tsteps):
        step(A, B)
        step(B, A)


# -------------------------------------------------------------- seidel-2d

@polyc.kernel
def seidel_2d(tsteps, A):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0


def _seidel_2d_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _grid(n, n)
    return (sizes["TSTEPS"], _arr((i * (j + 2) + 2) / n, dtype))


def _seidel_2d_ref(tsteps, A):
    # Row i needs the new row i-1 and the old row i+1 (both whole rows), and
    # within the row the new A[i, j-1]: sum everything else with numpy, then
    # run the one left-to-right recurrence x[j] = (s[j] + x[j-1]) / 9.
    n = A.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            up, row, down = A[i - 1], A[i], A[i + 1]
            s = (up[:-2] + up[1:-1] + up[2:] + row[1:-1] + row[2:]
                 + down[:-2] + down[1:-1] + down[2:]).tolist()
            left = float(row[0])
            out = []
            for sj in s:
                left = (sj + left) / 9.0
                out.append(left)
            row[1:-1] = out


BENCHES = [
    Bench(
        name="adi", category=CATEGORY, kernel=adi,
        sizes={"MINI": {"TSTEPS": 20, "N": 20}, "SMALL": {"TSTEPS": 40, "N": 60},
               "MEDIUM": {"TSTEPS": 100, "N": 200},
               "LARGE": {"TSTEPS": 500, "N": 1000},
               "EXTRALARGE": {"TSTEPS": 1000, "N": 2000}},
        init=_adi_init, outputs=(1,), reference=_adi_ref,
        notes="v, p, q are uninitialised scratch in C (zeros here); only u "
              "is printed. The kernel's coefficients DX = 1/N, DT = 1/TSTEPS "
              "use the sizes as floating values."),
    Bench(
        name="fdtd-2d", category=CATEGORY, kernel=fdtd_2d,
        sizes={"MINI": {"TMAX": 20, "NX": 20, "NY": 30},
               "SMALL": {"TMAX": 40, "NX": 60, "NY": 80},
               "MEDIUM": {"TMAX": 100, "NX": 200, "NY": 240},
               "LARGE": {"TMAX": 500, "NX": 1000, "NY": 1200},
               "EXTRALARGE": {"TMAX": 1000, "NX": 2000, "NY": 2600}},
        init=_fdtd_2d_init, outputs=(0, 1, 2), reference=_fdtd_2d_ref,
        notes="TMAX is _fict_'s extent, so the kernel reads it from "
              "_fict_.shape rather than taking it as an argument."),
    Bench(
        name="heat-3d", category=CATEGORY, kernel=heat_3d,
        sizes={"MINI": {"TSTEPS": 20, "N": 10}, "SMALL": {"TSTEPS": 40, "N": 20},
               "MEDIUM": {"TSTEPS": 100, "N": 40},
               "LARGE": {"TSTEPS": 500, "N": 120},
               "EXTRALARGE": {"TSTEPS": 1000, "N": 200}},
        init=_heat_3d_init, outputs=(1,), reference=_heat_3d_ref,
        notes="PolyBench's initial A = B = (i + j + N - k)*10/N is linear, so "
              "it is a fixed point of the stencil: the printed A equals the "
              "input up to rounding and a kernel that does nothing passes an "
              "output comparison. Check implementations on random inputs too."),
    Bench(
        name="jacobi-1d", category=CATEGORY, kernel=jacobi_1d,
        sizes={"MINI": {"TSTEPS": 20, "N": 30}, "SMALL": {"TSTEPS": 40, "N": 120},
               "MEDIUM": {"TSTEPS": 100, "N": 400},
               "LARGE": {"TSTEPS": 500, "N": 2000},
               "EXTRALARGE": {"TSTEPS": 1000, "N": 4000}},
        init=_jacobi_1d_init, outputs=(1,), reference=_jacobi_1d_ref,
        notes="The weight is PolyBench's literal 0.33333, not 1/3."),
    Bench(
        name="jacobi-2d", category=CATEGORY, kernel=jacobi_2d,
        sizes={"MINI": {"TSTEPS": 20, "N": 30}, "SMALL": {"TSTEPS": 40, "N": 90},
               "MEDIUM": {"TSTEPS": 100, "N": 250},
               "LARGE": {"TSTEPS": 500, "N": 1300},
               "EXTRALARGE": {"TSTEPS": 1000, "N": 2800}},
        init=_jacobi_2d_init, outputs=(1,), reference=_jacobi_2d_ref),
    Bench(
        name="seidel-2d", category=CATEGORY, kernel=seidel_2d,
        sizes={"MINI": {"TSTEPS": 20, "N": 40}, "SMALL": {"TSTEPS": 40, "N": 120},
               "MEDIUM": {"TSTEPS": 100, "N": 400},
               "LARGE": {"TSTEPS": 500, "N": 2000},
               "EXTRALARGE": {"TSTEPS": 1000, "N": 4000}},
        init=_seidel_2d_init, outputs=(1,), reference=_seidel_2d_ref,
        notes="PolyBench's initial A = (i*(j+2) + 2)/N is discrete-harmonic "
              "for the 9-point average, so it is a fixed point: the printed A "
              "equals the input up to rounding and a kernel that does nothing "
              "passes an output comparison. Check implementations on random "
              "inputs too."),
]
