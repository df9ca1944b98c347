"""PolyBench/C 4.2.1 ``linear-algebra/solvers``: cholesky, durbin,
gramschmidt, lu, ludcmp, trisolv."""

from __future__ import annotations

import math

import numpy as np

import polyc

from . import Bench
from . import arr as _arr

CATEGORY = "linear-algebra/solvers"

_N_SIZES = {"MINI": {"N": 40}, "SMALL": {"N": 120}, "MEDIUM": {"N": 400},
            "LARGE": {"N": 2000}, "EXTRALARGE": {"N": 4000}}


def _grid(*extents):
    """Open integer index grids (int64) for numpy broadcasting."""
    return np.ix_(*(np.arange(e, dtype=np.int64) for e in extents))


def _psd_matrix(n: int) -> np.ndarray:
    """cholesky/lu/ludcmp's init: a unit lower-triangular A (row i, column
    j <= i holds (-j % n) / n + 1, with C's truncating ``%``: -j for
    0 <= j < n), then A·Aᵀ (PolyBench's B[r][s] = sum_t A[r][t]*A[s][t]),
    at float64."""
    i, j = _grid(n, n)
    low = np.fmod(-j, n) / n + 1.0          # C: (DATA_TYPE)(-j % n) / n + 1
    a = np.where(j <= i, low, 0.0)
    np.fill_diagonal(a, 1.0)
    return a @ a.T


# --------------------------------------------------------------- cholesky

@polyc.kernel
def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = math.sqrt(A[i, i])


def _cholesky_init(sizes, dtype=np.float64):
    return (_arr(_psd_matrix(sizes["N"]), dtype),)


def _cholesky_ref(A):
    # Column by column: when column j is computed every column k < j is
    # final, which is all the C row order needs of row i.
    n = A.shape[0]
    for j in range(n):
        A[j, j] = np.sqrt(A[j, j] - A[j, :j] @ A[j, :j])
        A[j + 1:, j] = (A[j + 1:, j] - A[j + 1:, :j] @ A[j, :j]) / A[j, j]


# ----------------------------------------------------------------- durbin

@polyc.kernel
def durbin(r, y, z):
    """``z`` is PolyBench's local ``DATA_TYPE z[N]``, passed in as scratch."""
    n = r.shape[0]
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        sum = 0.0
        for i in range(k):
            sum += r[k - i - 1] * y[i]
        alpha = -(r[k] + sum) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha


def _durbin_init(sizes, dtype=np.float64):
    n = sizes["N"]
    r = (n + 1 - np.arange(n, dtype=np.int64)).astype(np.float64)
    return (_arr(r, dtype), np.zeros(n, dtype), np.zeros(n, dtype))


def _durbin_ref(r, y, z):
    n = r.shape[0]
    y[0] = -r[0]
    beta, alpha = 1.0, -r[0]
    for k in range(1, n):
        beta = (1.0 - alpha * alpha) * beta
        alpha = -(r[k] + r[k - 1::-1] @ y[:k]) / beta
        y[:k] = y[:k] + alpha * y[k - 1::-1]
        y[k] = alpha


# ------------------------------------------------------------ gramschmidt

@polyc.kernel
def gramschmidt(A, R, Q):
    m, n = A.shape
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = math.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = 0.0
            for i in range(m):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(m):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]


def _gramschmidt_init(sizes, dtype=np.float64):
    m, n = sizes["M"], sizes["N"]
    i, j = _grid(m, n)
    a = ((i * j) % m) / m * 100.0 + 10.0
    return (_arr(a, dtype), np.zeros((n, n), dtype), np.zeros((m, n), dtype))


def _gramschmidt_ref(A, R, Q):
    n = A.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 past column k0
        for k in range(n):
            R[k, k] = np.sqrt(A[:, k] @ A[:, k])
            Q[:, k] = A[:, k] / R[k, k]
            R[k, k + 1:] = Q[:, k] @ A[:, k + 1:]
            A[:, k + 1:] -= np.outer(Q[:, k], R[k, k + 1:])


def gramschmidt_stable_columns(sizes) -> int:
    """The first column of gramschmidt's input A that is (numerically) a
    linear combination of the columns before it: 13, 37, 103, 503, 1003 for
    MINI..EXTRALARGE (M/2 + 3).  Outputs computed before Gram-Schmidt reaches
    that column, R[:k0, :] and Q[:, :k0], are well conditioned; everything
    from it on is rounding noise (see the Bench notes)."""
    a = _gramschmidt_init(sizes)[0]
    d = np.abs(np.diag(np.linalg.qr(a, mode="r")))      # Householder QR
    small = np.nonzero(d <= max(a.shape) * np.finfo(np.float64).eps * d.max())[0]
    return int(small[0]) if small.size else a.shape[1]


# --------------------------------------------------------------------- lu

@polyc.kernel
def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]


def _lu_init(sizes, dtype=np.float64):
    return (_arr(_psd_matrix(sizes["N"]), dtype),)


def _lu_inplace(A, nb=64):
    """Doolittle LU without pivoting, in place (L unit lower, U upper):
    right-looking, blocked by nb columns so the trailing update is a
    matmul."""
    n = A.shape[0]
    for k0 in range(0, n, nb):
        k1 = min(k0 + nb, n)
        for k in range(k0, k1):              # panel A[k0:, k0:k1]
            A[k + 1:, k] /= A[k, k]
            A[k + 1:, k + 1:k1] -= np.outer(A[k + 1:, k], A[k, k + 1:k1])
        for k in range(k0, k1):              # U12 = L11^-1 A12
            A[k + 1:k1, k1:] -= np.outer(A[k + 1:k1, k], A[k, k1:])
        A[k1:, k1:] -= A[k1:, k0:k1] @ A[k0:k1, k1:]


def _lu_ref(A):
    _lu_inplace(A)


# ----------------------------------------------------------------- ludcmp

@polyc.kernel
def ludcmp(A, b, x, y):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, n):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w
    for i in range(n):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(n - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, n):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]


def _ludcmp_init(sizes, dtype=np.float64):
    n = sizes["N"]
    b = (np.arange(n, dtype=np.int64) + 1) / float(n) / 2.0 + 4.0
    return (_arr(_psd_matrix(n), dtype), _arr(b, dtype),
            np.zeros(n, dtype), np.zeros(n, dtype))


def _ludcmp_ref(A, b, x, y):
    n = A.shape[0]
    _lu_inplace(A)
    for i in range(n):                       # unit lower triangle: L y = b
        y[i] = b[i] - A[i, :i] @ y[:i]
    for i in range(n - 1, -1, -1):           # upper triangle: U x = y
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]


# ---------------------------------------------------------------- trisolv

@polyc.kernel
def trisolv(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]


def _trisolv_init(sizes, dtype=np.float64):
    n = sizes["N"]
    i, j = _grid(n, n)
    low = (i + n - j + 1) * 2.0 / n           # (DATA_TYPE)(i+n-j+1)*2/n
    L = np.where(j <= i, low, 0.0)            # upper triangle: never set in C
    x = np.full(n, -999.0)
    b = np.arange(n, dtype=np.float64)
    return (_arr(L, dtype), _arr(x, dtype), _arr(b, dtype))


def _trisolv_ref(L, x, b):
    n = L.shape[0]
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


BENCHES = [
    Bench(
        name="cholesky", category=CATEGORY, kernel=cholesky,
        sizes=_N_SIZES, init=_cholesky_init, outputs=(0,),
        reference=_cholesky_ref,
        notes="PolyBench prints only the lower triangle (j <= i) of A; the "
              "strict upper triangle is never written and keeps A·Aᵀ. The "
              "input is A0·A0ᵀ with A0 unit lower-triangular, so the factor "
              "is A0's lower triangle up to rounding."),
    Bench(
        name="durbin", category=CATEGORY, kernel=durbin,
        sizes=_N_SIZES, init=_durbin_init, outputs=(1,),
        reference=_durbin_ref,
        notes="The third argument z is PolyBench's kernel-local array z[N], "
              "passed in as scratch (zeros); only y is printed. y is sensitive "
              "to the order of the sum reduction: an exactly rounded sum "
              "changes it by ~3e-13 (MINI), 9e-12 (SMALL), 6e-10 (MEDIUM), "
              "9e-9 (LARGE), 1.2e-8 (EXTRALARGE) relative to max|y|, so a "
              "reassociated reduction needs a looser tolerance from LARGE on."),
    Bench(
        name="gramschmidt", category=CATEGORY, kernel=gramschmidt,
        sizes={"MINI": {"M": 20, "N": 30}, "SMALL": {"M": 60, "N": 80},
               "MEDIUM": {"M": 200, "N": 240},
               "LARGE": {"M": 1000, "N": 1200},
               "EXTRALARGE": {"M": 2000, "N": 2600}},
        init=_gramschmidt_init, outputs=(1, 2),
        reference=_gramschmidt_ref,
        compared=lambda sizes: (np.s_[:gramschmidt_stable_columns(sizes), :],
                                np.s_[:, :gramschmidt_stable_columns(sizes)]),
        notes="PolyBench's input A[i][j] = ((i*j) % M)/M*100 + 10 is rank-"
              "deficient (and N > M): its column k0 = "
              "gramschmidt_stable_columns(sizes) (MINI 13, SMALL 37, MEDIUM "
              "103, LARGE 503, EXTRALARGE 1003) is a combination of the "
              "columns before it. Comparable (stable) outputs: R[:k0, :] (rows "
              "k < k0, all columns) and Q[:, :k0]. When MGS reaches column k0 "
              "what is left of it is rounding noise: R[k0][k0] is ~1e-13 "
              "instead of O(10..100), Q[:, k0] = noise/noise (NaN when the "
              "norm rounds to exactly 0, which numpy's dot products do at "
              "MINI), and every later R row and Q column depends on that noise "
              "(O(1..100) differences between summation orders, or NaN). "
              "Q·R ≈ A0 (original A) still holds wherever the result has no "
              "NaN."),
    Bench(
        name="lu", category=CATEGORY, kernel=lu,
        sizes=_N_SIZES, init=_lu_init, outputs=(0,),
        reference=_lu_ref,
        notes="No pivoting; the input is A0·A0ᵀ (symmetric positive "
              "definite), so L is unit lower and U upper in place."),
    Bench(
        name="ludcmp", category=CATEGORY, kernel=ludcmp,
        sizes=_N_SIZES, init=_ludcmp_init, outputs=(2,),
        reference=_ludcmp_ref,
        notes="Only x is printed; A (LU factors) and y are intermediates."),
    Bench(
        name="trisolv", category=CATEGORY, kernel=trisolv,
        sizes=_N_SIZES, init=_trisolv_init, outputs=(1,),
        reference=_trisolv_ref,
        notes="L's strict upper triangle is never initialised in PolyBench "
              "(zeros here) and never read."),
]
