"""PolyBench/C 4.2.1 ``linear-algebra/blas``: gemm, gemver, gesummv, symm, syr2k,
syrk, trmm.

Each kernel transcribes PolyBench's ``kernel_*`` loops (same loop order, same
statements); ``init`` follows its ``init_array`` (integer ``%`` before the
conversion to ``DATA_TYPE``, then a ``DATA_TYPE`` division); ``reference`` is
an independent numpy formulation.
"""

from __future__ import annotations

import numpy as np

import polyc

from . import Bench
from . import frac as _frac
from . import ij as _ij

CATEGORY = "linear-algebra/blas"


# ---------------------------------------------------------------- gemm

@polyc.kernel
def gemm(alpha, beta, C, A, B):
    """C := alpha*A*B + beta*C."""
    ni, nj = C.shape
    nk = A.shape[1]
    for i in range(ni):
        for j in range(nj):
            C[i, j] *= beta
        for k in range(nk):
            for j in range(nj):
                C[i, j] += alpha * A[i, k] * B[k, j]


def _gemm_init(sizes, dtype=np.float64):
    ni, nj, nk = sizes["NI"], sizes["NJ"], sizes["NK"]
    i, j = _ij(ni, nj)
    C = _frac((i * j + 1) % ni, ni, dtype)
    i, j = _ij(ni, nk)
    A = _frac(i * (j + 1) % nk, nk, dtype)
    i, j = _ij(nk, nj)
    B = _frac(i * (j + 2) % nj, nj, dtype)
    return 1.5, 1.2, C, A, B


def _gemm_ref(alpha, beta, C, A, B):
    C *= beta
    C += alpha * (A @ B)


# ---------------------------------------------------------------- gemver

@polyc.kernel
def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    """A := A + u1*v1' + u2*v2'; x := x + beta*A'*y + z; w := w + alpha*A*x."""
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            A[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + beta * A[j, i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + alpha * A[i, j] * x[j]


def _gemver_init(sizes, dtype=np.float64):
    n = sizes["N"]
    dtype = np.dtype(dtype).type
    fn = dtype(n)
    i1 = np.arange(n, dtype=np.int64)
    # ((i+1)/fn)/2.0: a DATA_TYPE division, then one by a double literal.
    q = (i1 + 1).astype(dtype) / fn

    def by(d):
        return (q.astype(np.float64) / d).astype(dtype)

    u1 = i1.astype(dtype)
    u2, v1, v2, y, z = by(2.0), by(4.0), by(6.0), by(8.0), by(9.0)
    x = np.zeros(n, dtype=dtype)
    w = np.zeros(n, dtype=dtype)
    i, j = _ij(n, n)
    A = _frac(i * j % n, n, dtype)
    return 1.5, 1.2, A, u1, v1, u2, v2, w, x, y, z


def _gemver_ref(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * (A.T @ y)
    x += z
    w += alpha * (A @ x)


# ---------------------------------------------------------------- gesummv

@polyc.kernel
def gesummv(alpha, beta, A, B, tmp, x, y):
    """y := alpha*A*x + beta*B*x (tmp holds A*x)."""
    n = A.shape[0]
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]
        y[i] = alpha * tmp[i] + beta * y[i]


def _gesummv_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _ij(n, n)
    A = _frac((i * j + 1) % n, n, dtype)
    B = _frac((i * j + 2) % n, n, dtype)
    x = _frac(np.arange(n) % n, n, dtype)
    tmp = np.zeros(n, dtype=dtype)
    y = np.zeros(n, dtype=dtype)
    return 1.5, 1.2, A, B, tmp, x, y


def _gesummv_ref(alpha, beta, A, B, tmp, x, y):
    tmp[:] = A @ x
    y[:] = alpha * tmp + beta * (B @ x)


# ---------------------------------------------------------------- symm

@polyc.kernel
def symm(alpha, beta, C, A, B):
    """C := alpha*A*B + beta*C, A symmetric (only its lower triangle is read)."""
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2


def _symm_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    i, j = _ij(m, n)
    C = _frac((i + j) % 100, m, dtype)
    B = _frac((n + i - j) % 100, m, dtype)
    i, j = _ij(m, m)
    A = _frac((i + j) % 100, m, dtype)
    A[j > i] = -999  # the upper triangle must never be read
    return 1.5, 1.2, C, A, B


def _symm_ref(alpha, beta, C, A, B):
    L = np.tril(A)
    S = L + np.tril(A, -1).T
    C *= beta
    C += alpha * (S @ B)


# ---------------------------------------------------------------- syr2k

@polyc.kernel
def syr2k(alpha, beta, C, A, B):
    """C := alpha*A*B' + alpha*B*A' + beta*C on C's lower triangle."""
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += A[j, k] * alpha * B[i, k] + B[j, k] * alpha * A[i, k]


def _syr2k_init(sizes, dtype=np.float64):
    n, m = sizes["N"], sizes["M"]
    i, j = _ij(n, m)
    A = _frac((i * j + 1) % n, n, dtype)
    B = _frac((i * j + 2) % m, m, dtype)
    i, j = _ij(n, n)
    C = _frac((i * j + 3) % n, m, dtype)
    return 1.5, 1.2, C, A, B


def _syr2k_ref(alpha, beta, C, A, B):
    low = np.tril(np.ones(C.shape, dtype=bool))
    full = beta * C + alpha * (A @ B.T + B @ A.T)
    C[low] = full[low]


# ---------------------------------------------------------------- syrk

@polyc.kernel
def syrk(alpha, beta, C, A):
    """C := alpha*A*A' + beta*C on C's lower triangle."""
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]


def _syrk_init(sizes, dtype=np.float64):
    n, m = sizes["N"], sizes["M"]
    i, j = _ij(n, m)
    A = _frac((i * j + 1) % n, n, dtype)
    i, j = _ij(n, n)
    C = _frac((i * j + 2) % m, m, dtype)
    return 1.5, 1.2, C, A


def _syrk_ref(alpha, beta, C, A):
    low = np.tril(np.ones(C.shape, dtype=bool))
    full = beta * C + alpha * (A @ A.T)
    C[low] = full[low]


# ---------------------------------------------------------------- trmm

@polyc.kernel
def trmm(alpha, A, B):
    """B := alpha*A'*B, A unit lower triangular."""
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]


def _trmm_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    dtype = np.dtype(dtype).type
    i, j = _ij(m, m)
    # PolyBench leaves A's upper triangle uninitialised (never read): zeros here.
    A = np.where(j < i, _frac((i + j) % m, m, dtype), dtype(0)).astype(dtype)
    np.fill_diagonal(A, 1.0)
    i, j = _ij(m, n)
    B = _frac((n + (i - j)) % n, n, dtype)
    return 1.5, A, B


def _trmm_ref(alpha, A, B):
    U = np.tril(A, -1) + np.eye(A.shape[0], dtype=A.dtype)  # unit diagonal
    B[:] = alpha * (U.T @ B)


BENCHES = [
    Bench(
        name="gemm", category=CATEGORY, kernel=gemm,
        sizes={
            "MINI": {"NI": 20, "NJ": 25, "NK": 30},
            "SMALL": {"NI": 60, "NJ": 70, "NK": 80},
            "MEDIUM": {"NI": 200, "NJ": 220, "NK": 240},
            "LARGE": {"NI": 1000, "NJ": 1100, "NK": 1200},
            "EXTRALARGE": {"NI": 2000, "NJ": 2300, "NK": 2600},
        },
        init=_gemm_init, outputs=(2,), reference=_gemm_ref,
    ),
    Bench(
        name="gemver", category=CATEGORY, kernel=gemver,
        sizes={
            "MINI": {"N": 40},
            "SMALL": {"N": 120},
            "MEDIUM": {"N": 400},
            "LARGE": {"N": 2000},
            "EXTRALARGE": {"N": 4000},
        },
        init=_gemver_init, outputs=(7,), reference=_gemver_ref,
    ),
    Bench(
        name="gesummv", category=CATEGORY, kernel=gesummv,
        sizes={
            "MINI": {"N": 30},
            "SMALL": {"N": 90},
            "MEDIUM": {"N": 250},
            "LARGE": {"N": 1300},
            "EXTRALARGE": {"N": 2800},
        },
        init=_gesummv_init, outputs=(6,), reference=_gesummv_ref,
    ),
    Bench(
        name="symm", category=CATEGORY, kernel=symm,
        sizes={
            "MINI": {"M": 20, "N": 30},
            "SMALL": {"M": 60, "N": 80},
            "MEDIUM": {"M": 200, "N": 240},
            "LARGE": {"M": 1000, "N": 1200},
            "EXTRALARGE": {"M": 2000, "N": 2600},
        },
        init=_symm_init, outputs=(2,), reference=_symm_ref,
        notes="temp2 is a scalar local reset per (i, j); A's upper triangle is -999 "
              "(PolyBench's marker for never-read entries).",
    ),
    Bench(
        name="syr2k", category=CATEGORY, kernel=syr2k,
        sizes={
            "MINI": {"M": 20, "N": 30},
            "SMALL": {"M": 60, "N": 80},
            "MEDIUM": {"M": 200, "N": 240},
            "LARGE": {"M": 1000, "N": 1200},
            "EXTRALARGE": {"M": 2000, "N": 2600},
        },
        init=_syr2k_init, outputs=(2,), reference=_syr2k_ref,
        notes="Only C's lower triangle is updated; the whole of C is printed.",
    ),
    Bench(
        name="syrk", category=CATEGORY, kernel=syrk,
        sizes={
            "MINI": {"M": 20, "N": 30},
            "SMALL": {"M": 60, "N": 80},
            "MEDIUM": {"M": 200, "N": 240},
            "LARGE": {"M": 1000, "N": 1200},
            "EXTRALARGE": {"M": 2000, "N": 2600},
        },
        init=_syrk_init, outputs=(2,), reference=_syrk_ref,
        notes="Only C's lower triangle is updated; the whole of C is printed.",
    ),
    Bench(
        name="trmm", category=CATEGORY, kernel=trmm,
        sizes={
            "MINI": {"M": 20, "N": 30},
            "SMALL": {"M": 60, "N": 80},
            "MEDIUM": {"M": 200, "N": 240},
            "LARGE": {"M": 1000, "N": 1200},
            "EXTRALARGE": {"M": 2000, "N": 2600},
        },
        init=_trmm_init, outputs=(2,), reference=_trmm_ref,
        notes="A's upper triangle is uninitialised in PolyBench and never read; "
              "zeros here.",
    ),
]
