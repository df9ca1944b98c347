"""PolyBench/C 4.2.1 ``linear-algebra/kernels``: 2mm, 3mm, atax, bicg, doitgen,
mvt.

Each kernel transcribes PolyBench's ``kernel_*`` loops (same loop order, same
statements); ``init`` follows its ``init_array`` (integer ``%`` before the
conversion to ``DATA_TYPE``, then a ``DATA_TYPE`` division); ``reference`` is
an independent numpy formulation.  Arrays PolyBench allocates but does not
initialise (kernel outputs and temporaries) start as zeros.
"""

from __future__ import annotations

import numpy as np

import polyc

from . import Bench
from . import frac as _frac
from . import ij as _ij

CATEGORY = "linear-algebra/kernels"


# ---------------------------------------------------------------- 2mm

@polyc.kernel
def k2mm(alpha, beta, tmp, A, B, C, D):
    """D := alpha*A*B*C + beta*D."""
    ni, nj = tmp.shape
    nk = A.shape[1]
    nl = C.shape[1]
    for i in range(ni):
        for j in range(nj):
            tmp[i, j] = 0.0
            for k in range(nk):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(ni):
        for j in range(nl):
            D[i, j] *= beta
            for k in range(nj):
                D[i, j] += tmp[i, k] * C[k, j]


def _2mm_init(sizes, dtype=np.float64):
    ni, nj, nk, nl = sizes["NI"], sizes["NJ"], sizes["NK"], sizes["NL"]
    i, j = _ij(ni, nk)
    A = _frac((i * j + 1) % ni, ni, dtype)
    i, j = _ij(nk, nj)
    B = _frac(i * (j + 1) % nj, nj, dtype)
    i, j = _ij(nj, nl)
    C = _frac((i * (j + 3) + 1) % nl, nl, dtype)
    i, j = _ij(ni, nl)
    D = _frac(i * (j + 2) % nk, nk, dtype)
    tmp = np.zeros((ni, nj), dtype=dtype)
    return 1.5, 1.2, tmp, A, B, C, D


def _2mm_ref(alpha, beta, tmp, A, B, C, D):
    tmp[:] = alpha * (A @ B)
    D *= beta
    D += tmp @ C


# ---------------------------------------------------------------- 3mm

@polyc.kernel
def k3mm(E, A, B, F, C, D, G):
    """E := A*B; F := C*D; G := E*F."""
    ni, nj = E.shape
    nk = A.shape[1]
    nl = F.shape[1]
    nm = C.shape[1]
    for i in range(ni):
        for j in range(nj):
            E[i, j] = 0.0
            for k in range(nk):
                E[i, j] += A[i, k] * B[k, j]
    for i in range(nj):
        for j in range(nl):
            F[i, j] = 0.0
            for k in range(nm):
                F[i, j] += C[i, k] * D[k, j]
    for i in range(ni):
        for j in range(nl):
            G[i, j] = 0.0
            for k in range(nj):
                G[i, j] += E[i, k] * F[k, j]


def _3mm_init(sizes, dtype=np.float64):
    ni, nj, nk = sizes["NI"], sizes["NJ"], sizes["NK"]
    nl, nm = sizes["NL"], sizes["NM"]
    i, j = _ij(ni, nk)
    A = _frac((i * j + 1) % ni, 5 * ni, dtype)
    i, j = _ij(nk, nj)
    B = _frac((i * (j + 1) + 2) % nj, 5 * nj, dtype)
    i, j = _ij(nj, nm)
    C = _frac(i * (j + 3) % nl, 5 * nl, dtype)  # sic: nl, as in PolyBench
    i, j = _ij(nm, nl)
    D = _frac((i * (j + 2) + 2) % nk, 5 * nk, dtype)
    E = np.zeros((ni, nj), dtype=dtype)
    F = np.zeros((nj, nl), dtype=dtype)
    G = np.zeros((ni, nl), dtype=dtype)
    return E, A, B, F, C, D, G


def _3mm_ref(E, A, B, F, C, D, G):
    E[:] = A @ B
    F[:] = C @ D
    G[:] = E @ F


# ---------------------------------------------------------------- atax

@polyc.kernel
def atax(A, x, y, tmp):
    """y := A'*(A*x)."""
    m, n = A.shape
    for i in range(n):
        y[i] = 0.0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]


def _atax_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    t = np.dtype(dtype).type
    # x[i] = 1 + (i / fn), all in DATA_TYPE
    x = t(1) + np.arange(n).astype(t) / t(n)
    i, j = _ij(m, n)
    A = _frac((i + j) % n, 5 * m, dtype)
    y = np.zeros(n, dtype=dtype)
    tmp = np.zeros(m, dtype=dtype)
    return A, x.astype(t), y, tmp


def _atax_ref(A, x, y, tmp):
    tmp[:] = A @ x
    y[:] = A.T @ tmp


# ---------------------------------------------------------------- bicg

@polyc.kernel
def bicg(A, s, q, p, r):
    """s := A'*r; q := A*p."""
    n, m = A.shape
    for i in range(m):
        s[i] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]


def _bicg_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    p = _frac(np.arange(m) % m, m, dtype)
    r = _frac(np.arange(n) % n, n, dtype)
    i, j = _ij(n, m)
    A = _frac(i * (j + 1) % n, n, dtype)
    s = np.zeros(m, dtype=dtype)
    q = np.zeros(n, dtype=dtype)
    return A, s, q, p, r


def _bicg_ref(A, s, q, p, r):
    s[:] = r @ A
    q[:] = A @ p


# ---------------------------------------------------------------- doitgen

@polyc.kernel
def doitgen(A, C4, sum):
    """A[r, q, :] := A[r, q, :] * C4 for every (r, q), through the buffer sum."""
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                sum[p] = 0.0
                for s in range(np_):
                    sum[p] += A[r, q, s] * C4[s, p]
            for p in range(np_):
                A[r, q, p] = sum[p]


def _doitgen_init(sizes, dtype=np.float64):
    nr, nq, np_ = sizes["NR"], sizes["NQ"], sizes["NP"]
    i = np.arange(nr, dtype=np.int64)[:, None, None]
    j = np.arange(nq, dtype=np.int64)[None, :, None]
    k = np.arange(np_, dtype=np.int64)[None, None, :]
    A = _frac((i * j + k) % np_, np_, dtype)
    i, j = _ij(np_, np_)
    C4 = _frac(i * j % np_, np_, dtype)
    sum_ = np.zeros(np_, dtype=dtype)
    return A, C4, sum_


def _doitgen_ref(A, C4, sum_):
    out = np.einsum("rqs,sp->rqp", A, C4)
    sum_[:] = out[-1, -1]
    A[:] = out


# ---------------------------------------------------------------- mvt

@polyc.kernel
def mvt(x1, x2, y_1, y_2, A):
    """x1 := x1 + A*y_1; x2 := x2 + A'*y_2."""
    n = A.shape[0]
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y_1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y_2[j]


def _mvt_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i1 = np.arange(n, dtype=np.int64)
    x1 = _frac(i1 % n, n, dtype)
    x2 = _frac((i1 + 1) % n, n, dtype)
    y_1 = _frac((i1 + 3) % n, n, dtype)
    y_2 = _frac((i1 + 4) % n, n, dtype)
    i, j = _ij(n, n)
    A = _frac(i * j % n, n, dtype)
    return x1, x2, y_1, y_2, A


def _mvt_ref(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += A.T @ y_2


BENCHES = [
    Bench(
        name="2mm", category=CATEGORY, kernel=k2mm,
        sizes={
            "MINI": {"NI": 16, "NJ": 18, "NK": 22, "NL": 24},
            "SMALL": {"NI": 40, "NJ": 50, "NK": 70, "NL": 80},
            "MEDIUM": {"NI": 180, "NJ": 190, "NK": 210, "NL": 220},
            "LARGE": {"NI": 800, "NJ": 900, "NK": 1100, "NL": 1200},
            "EXTRALARGE": {"NI": 1600, "NJ": 1800, "NK": 2200, "NL": 2400},
        },
        init=_2mm_init, outputs=(6,), reference=_2mm_ref,
    ),
    Bench(
        name="3mm", category=CATEGORY, kernel=k3mm,
        sizes={
            "MINI": {"NI": 16, "NJ": 18, "NK": 20, "NL": 22, "NM": 24},
            "SMALL": {"NI": 40, "NJ": 50, "NK": 60, "NL": 70, "NM": 80},
            "MEDIUM": {"NI": 180, "NJ": 190, "NK": 200, "NL": 210, "NM": 220},
            "LARGE": {"NI": 800, "NJ": 900, "NK": 1000, "NL": 1100, "NM": 1200},
            "EXTRALARGE": {"NI": 1600, "NJ": 1800, "NK": 2000, "NL": 2200, "NM": 2400},
        },
        init=_3mm_init, outputs=(6,), reference=_3mm_ref,
        notes="init_array scales C by NL (not NM), as PolyBench does.",
    ),
    Bench(
        name="atax", category=CATEGORY, kernel=atax,
        sizes={
            "MINI": {"M": 38, "N": 42},
            "SMALL": {"M": 116, "N": 124},
            "MEDIUM": {"M": 390, "N": 410},
            "LARGE": {"M": 1900, "N": 2100},
            "EXTRALARGE": {"M": 1800, "N": 2200},
        },
        init=_atax_init, outputs=(2,), reference=_atax_ref,
    ),
    Bench(
        name="bicg", category=CATEGORY, kernel=bicg,
        sizes={
            "MINI": {"M": 38, "N": 42},
            "SMALL": {"M": 116, "N": 124},
            "MEDIUM": {"M": 390, "N": 410},
            "LARGE": {"M": 1900, "N": 2100},
            "EXTRALARGE": {"M": 1800, "N": 2200},
        },
        init=_bicg_init, outputs=(1, 2), reference=_bicg_ref,
    ),
    Bench(
        name="doitgen", category=CATEGORY, kernel=doitgen,
        sizes={
            "MINI": {"NQ": 8, "NR": 10, "NP": 12},
            "SMALL": {"NQ": 20, "NR": 25, "NP": 30},
            "MEDIUM": {"NQ": 40, "NR": 50, "NP": 60},
            "LARGE": {"NQ": 140, "NR": 150, "NP": 160},
            "EXTRALARGE": {"NQ": 220, "NR": 250, "NP": 270},
        },
        init=_doitgen_init, outputs=(0,), reference=_doitgen_ref,
        notes="The size NP is spelled np_ in the kernel (np is numpy).",
    ),
    Bench(
        name="mvt", category=CATEGORY, kernel=mvt,
        sizes={
            "MINI": {"N": 40},
            "SMALL": {"N": 120},
            "MEDIUM": {"N": 400},
            "LARGE": {"N": 2000},
            "EXTRALARGE": {"N": 4000},
        },
        init=_mvt_init, outputs=(0, 1), reference=_mvt_ref,
    ),
]
