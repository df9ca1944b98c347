"""PolyBench/C 4.2.1 ``datamining``: correlation, covariance.

Each kernel transcribes PolyBench's ``kernel_*`` loops (same loop order, same
statements); ``init`` follows its ``init_array``; ``reference`` is an
independent numpy formulation.  Arrays PolyBench allocates but does not
initialise (the kernels' outputs) start as zeros.
"""

from __future__ import annotations

import math

import numpy as np

import polyc

from . import Bench

CATEGORY = "datamining"


# ---------------------------------------------------------------- correlation

@polyc.kernel
def correlation(float_n, data, corr, mean, stddev):
    """Pearson correlation matrix of data's columns."""
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])
        stddev[j] /= float_n
        stddev[j] = math.sqrt(stddev[j])
        # PolyBench's guard against near-zero deviations (eps = 0.1)
        stddev[j] = 1.0 if stddev[j] <= 0.1 else stddev[j]
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
            data[i, j] /= math.sqrt(float_n) * stddev[j]
    for i in range(m - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, m):
            corr[i, j] = 0.0
            for k in range(n):
                corr[i, j] += data[k, i] * data[k, j]
            corr[j, i] = corr[i, j]
    corr[m - 1, m - 1] = 1.0


def _correlation_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    t = np.dtype(dtype).type
    i = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(m, dtype=np.int64)[None, :]
    # (DATA_TYPE)(i*j)/M + i, in DATA_TYPE
    data = (i * j).astype(t) / t(m) + i.astype(t)
    corr = np.zeros((m, m), dtype=t)
    mean = np.zeros(m, dtype=t)
    stddev = np.zeros(m, dtype=t)
    return float(n), np.ascontiguousarray(data, dtype=t), corr, mean, stddev


def _correlation_ref(float_n, data, corr, mean, stddev):
    mean[:] = data.sum(axis=0) / float_n
    sd = np.sqrt(((data - mean) ** 2).sum(axis=0) / float_n)
    stddev[:] = np.where(sd <= 0.1, 1.0, sd)
    data -= mean
    data /= np.sqrt(float_n) * stddev
    corr[:] = data.T @ data
    np.fill_diagonal(corr, 1.0)


# ---------------------------------------------------------------- covariance

@polyc.kernel
def covariance(float_n, data, cov, mean):
    """Covariance matrix of data's columns."""
    n, m = data.shape
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i, j]
        mean[j] /= float_n
    for i in range(n):
        for j in range(m):
            data[i, j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = 0.0
            for k in range(n):
                cov[i, j] += data[k, i] * data[k, j]
            cov[i, j] /= float_n - 1.0
            cov[j, i] = cov[i, j]


def _covariance_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    t = np.dtype(dtype).type
    i = np.arange(n, dtype=np.int64)[:, None]
    j = np.arange(m, dtype=np.int64)[None, :]
    # ((DATA_TYPE) i*j) / M: i converted first, then DATA_TYPE product and quotient
    data = (i.astype(t) * j.astype(t)) / t(m)
    cov = np.zeros((m, m), dtype=t)
    mean = np.zeros(m, dtype=t)
    return float(n), np.ascontiguousarray(data, dtype=t), cov, mean


def _covariance_ref(float_n, data, cov, mean):
    mean[:] = data.sum(axis=0) / float_n
    data -= mean
    cov[:] = (data.T @ data) / (float_n - 1.0)


_SIZES = {
    "MINI": {"M": 28, "N": 32},
    "SMALL": {"M": 80, "N": 100},
    "MEDIUM": {"M": 240, "N": 260},
    "LARGE": {"M": 1200, "N": 1400},
    "EXTRALARGE": {"M": 2600, "N": 3000},
}

BENCHES = [
    Bench(
        name="correlation", category=CATEGORY, kernel=correlation,
        sizes={k: dict(v) for k, v in _SIZES.items()},
        init=_correlation_init, outputs=(2,), reference=_correlation_ref,
        notes="stddev <= eps (0.1) is replaced by 1.0 with a value select; the last "
              "diagonal entry corr[m-1, m-1] is a statement outside every loop.",
    ),
    Bench(
        name="covariance", category=CATEGORY, kernel=covariance,
        sizes={k: dict(v) for k, v in _SIZES.items()},
        init=_covariance_init, outputs=(2,), reference=_covariance_ref,
    ),
]
