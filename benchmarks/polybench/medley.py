"""PolyBench/C 4.2.1 ``medley``: deriche, floyd-warshall, nussinov."""

from __future__ import annotations

import math

import numpy as np

import polyc

from . import Bench

CATEGORY = "medley"


def _grid(*extents):
    """Open integer index grids (int64) for numpy broadcasting."""
    return np.ix_(*(np.arange(e, dtype=np.int64) for e in extents))


# ---------------------------------------------------------------- deriche

@polyc.kernel
def deriche(alpha, imgIn, imgOut, y1, y2):
    w, h = imgIn.shape
    k = (1.0 - math.exp(-alpha)) * (1.0 - math.exp(-alpha)) / (
        1.0 + 2.0 * alpha * math.exp(-alpha) - math.exp(2.0 * alpha))
    a1 = k
    a5 = k
    a2 = k * math.exp(-alpha) * (alpha - 1.0)
    a6 = a2
    a3 = k * math.exp(-alpha) * (alpha + 1.0)
    a7 = a3
    a4 = -k * math.exp(-2.0 * alpha)
    a8 = a4
    b1 = math.pow(2.0, -alpha)
    b2 = -math.exp(-2.0 * alpha)
    c1 = 1.0
    c2 = 1.0
    for i in range(w):
        ym1 = 0.0
        ym2 = 0.0
        xm1 = 0.0
        for j in range(h):
            y1[i, j] = a1 * imgIn[i, j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1 = imgIn[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for i in range(w):
        yp1 = 0.0
        yp2 = 0.0
        xp1 = 0.0
        xp2 = 0.0
        for j in range(h - 1, -1, -1):
            y2[i, j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2 = xp1
            xp1 = imgIn[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(w):
        for j in range(h):
            imgOut[i, j] = c1 * (y1[i, j] + y2[i, j])
    for j in range(h):
        tm1 = 0.0
        ym1 = 0.0
        ym2 = 0.0
        for i in range(w):
            y1[i, j] = a5 * imgOut[i, j] + a6 * tm1 + b1 * ym1 + b2 * ym2
            tm1 = imgOut[i, j]
            ym2 = ym1
            ym1 = y1[i, j]
    for j in range(h):
        tp1 = 0.0
        tp2 = 0.0
        yp1 = 0.0
        yp2 = 0.0
        for i in range(w - 1, -1, -1):
            y2[i, j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2
            tp2 = tp1
            tp1 = imgOut[i, j]
            yp2 = yp1
            yp1 = y2[i, j]
    for i in range(w):
        for j in range(h):
            imgOut[i, j] = c2 * (y1[i, j] + y2[i, j])


def _deriche_init(sizes, dtype=np.float64):
    w, h = sizes["W"], sizes["H"]
    i, j = _grid(w, h)
    # C: (DATA_TYPE)((313*i+991*j)%65536) / 65535.0f, in DATA_TYPE.
    img = ((313 * i + 991 * j) % 65536).astype(dtype) / np.asarray(65535.0, dtype)
    return (0.25, np.ascontiguousarray(img, dtype=dtype),
            np.zeros((w, h), dtype), np.zeros((w, h), dtype),
            np.zeros((w, h), dtype))


def _deriche_ref(alpha, imgIn, imgOut, y1, y2):
    # The same recursive filters, one column (resp. row) of the image at a
    # time, vectorised over the other axis.
    ea, e2a = np.exp(-alpha), np.exp(-2.0 * alpha)
    k = (1.0 - ea) ** 2 / (1.0 + 2.0 * alpha * ea - np.exp(2.0 * alpha))
    a1, a2, a3, a4 = k, k * ea * (alpha - 1.0), k * ea * (alpha + 1.0), -k * e2a
    b1, b2 = 2.0 ** (-alpha), -e2a

    def causal(x, y, ca, cb):                     # along axis 1 of x, y
        xm1 = np.zeros(x.shape[0], x.dtype)
        ym1, ym2 = xm1.copy(), xm1.copy()
        for j in range(x.shape[1]):
            y[:, j] = ca * x[:, j] + cb * xm1 + b1 * ym1 + b2 * ym2
            xm1, ym2, ym1 = x[:, j].copy(), ym1, y[:, j].copy()

    def anticausal(x, y, ca, cb):
        xp1 = np.zeros(x.shape[0], x.dtype)
        xp2, yp1, yp2 = xp1.copy(), xp1.copy(), xp1.copy()
        for j in range(x.shape[1] - 1, -1, -1):
            y[:, j] = ca * xp1 + cb * xp2 + b1 * yp1 + b2 * yp2
            xp2, xp1, yp2, yp1 = xp1, x[:, j].copy(), yp1, y[:, j].copy()

    causal(imgIn, y1, a1, a2)
    anticausal(imgIn, y2, a3, a4)
    imgOut[...] = y1 + y2
    causal(imgOut.T, y1.T, a1, a2)        # vertical pass: transposed views
    anticausal(imgOut.T, y2.T, a3, a4)
    imgOut[...] = y1 + y2


# --------------------------------------------------------- floyd-warshall

@polyc.kernel
def floyd_warshall(path):
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i, j] = (path[i, j] if path[i, j] < path[i, k] + path[k, j]
                              else path[i, k] + path[k, j])


def _floyd_warshall_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _grid(n, n)
    p = i * j % 7 + 1
    p = np.where(((i + j) % 13 == 0) | ((i + j) % 7 == 0) | ((i + j) % 11 == 0),
                 999, p)
    return (np.ascontiguousarray(p, dtype=dtype),)


def _floyd_warshall_ref(path):
    # Row k and column k do not change in step k (path[k][k] >= 0), so the
    # whole step is one elementwise minimum.
    for k in range(path.shape[0]):
        np.minimum(path, path[:, k:k + 1] + path[k:k + 1, :], out=path)


# --------------------------------------------------------------- nussinov

@polyc.kernel
def nussinov(seq, table):
    """PolyBench's macros written out: max_score(s1, s2) is
    ``s1 if s1 >= s2 else s2``, match(b1, b2) is ``1 if b1 + b2 == 3 else 0``."""
    n = seq.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i, j] = (table[i, j] if table[i, j] >= table[i, j - 1]
                               else table[i, j - 1])
            if i + 1 < n:
                table[i, j] = (table[i, j] if table[i, j] >= table[i + 1, j]
                               else table[i + 1, j])
            if j - 1 >= 0 and i + 1 < n:
                # don't allow adjacent elements to bond
                if i < j - 1:
                    table[i, j] = (table[i, j]
                                   if table[i, j] >= table[i + 1, j - 1]
                                   + (1.0 if seq[i] + seq[j] == 3.0 else 0.0)
                                   else table[i + 1, j - 1]
                                   + (1.0 if seq[i] + seq[j] == 3.0 else 0.0))
                else:
                    table[i, j] = (table[i, j]
                                   if table[i, j] >= table[i + 1, j - 1]
                                   else table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = (table[i, j]
                               if table[i, j] >= table[i, k] + table[k + 1, j]
                               else table[i, k] + table[k + 1, j])


def _nussinov_init(sizes, dtype=np.float64):
    n = sizes["N"]
    seq = (np.arange(n, dtype=np.int64) + 1) % 4       # bases AGCT as 0..3
    return (np.ascontiguousarray(seq, dtype=dtype), np.zeros((n, n), dtype))


def _nussinov_ref(seq, table):
    n = seq.shape[0]
    pair = (seq[:, None] + seq[None, :] == 3).astype(table.dtype)
    for i in range(n - 2, -1, -1):
        below = table[i + 1]                 # row i+1 is final
        for j in range(i + 1, n):
            best = max(table[i, j], below[j])
            if j - 1 >= i + 1:
                best = max(best, table[i, j - 1],
                           below[j - 1] + pair[i, j],
                           np.max(table[i, i + 1:j] + table[i + 2:j + 1, j]))
            else:                            # j == i + 1: no bond, no split
                best = max(best, table[i, j - 1], below[j - 1])
            table[i, j] = best


BENCHES = [
    Bench(
        name="deriche", category=CATEGORY, kernel=deriche,
        sizes={"MINI": {"W": 64, "H": 64}, "SMALL": {"W": 192, "H": 128},
               "MEDIUM": {"W": 720, "H": 480},
               "LARGE": {"W": 4096, "H": 2160},
               "EXTRALARGE": {"W": 7680, "H": 4320}},
        init=_deriche_init, outputs=(2,), reference=_deriche_ref,
        notes="PolyBench's DATA_TYPE here is float (expf/powf); this runs in "
              "the dtype given to init (float64 by default). imgOut, y1 and "
              "y2 are uninitialised in C (zeros here); only imgOut is "
              "printed. b1 = pow(2, -alpha) as in PolyBench."),
    Bench(
        name="floyd-warshall", category=CATEGORY, kernel=floyd_warshall,
        sizes={"MINI": {"N": 60}, "SMALL": {"N": 180}, "MEDIUM": {"N": 500},
               "LARGE": {"N": 2800}, "EXTRALARGE": {"N": 5600}},
        init=_floyd_warshall_init, outputs=(0,),
        reference=_floyd_warshall_ref,
        notes="PolyBench's DATA_TYPE is int; here the init dtype (float64): "
              "all values are small integers, so results are exact."),
    Bench(
        name="nussinov", category=CATEGORY, kernel=nussinov,
        sizes={"MINI": {"N": 60}, "SMALL": {"N": 180}, "MEDIUM": {"N": 500},
               "LARGE": {"N": 2500}, "EXTRALARGE": {"N": 5500}},
        init=_nussinov_init, outputs=(1,), reference=_nussinov_ref,
        notes="PolyBench's seq is char and table int; both are the init "
              "dtype here (small integers, exact). PolyBench prints only the "
              "upper triangle (j >= i) of table; the rest stays 0."),
]
