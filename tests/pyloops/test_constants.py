"""Named constants in ``@polyc.kernel`` bodies (:mod:`polyc.frontend.pyconsts`):
module-level and closure numbers (``TILE = 4`` as a range step, a bound, a
subscript offset or a value) and ``math.pi`` / ``np.inf`` were refused as
unknown names or unsupported attributes.  Results against the same function
run as Python; a changed global compiles again."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polyc
from polyc.errors import UnsupportedError

RNG = np.random.default_rng(41)

STEP = 3
SCALE = 0.5
OFFSET = -2
FLAG = True


def strided(A, B):
    n = A.shape[0]
    for i in range(0, n - 2, STEP):
        B[i] = A[i] * SCALE + A[i - OFFSET] + OFFSET


def circle(A):
    n = A.shape[0]
    for i in range(n):
        A[i] = math.cos(2.0 * math.pi * i / n) + np.e


def rowmax(A, m):
    n, k = A.shape
    for i in range(n):
        m[i] = -np.inf
        for j in range(k):
            m[i] = max(m[i], A[i, j])


def _make(tile):
    def tiled(A, B):
        n = A.shape[0]
        for i in range(0, n, tile):
            for j in range(i, min(i + tile, n)):
                B[j] = A[j] * tile
    return tiled


def _same_as_python(fn, *args):
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    polyc.kernel(fn)(*got)
    fn(*want)
    for g, w in zip(got, want):
        if isinstance(g, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 7, 12])
def test_module_constants_as_step_offset_and_value(n):
    _same_as_python(strided, RNG.standard_normal(n), np.zeros(n))


def test_math_and_numpy_constants():
    _same_as_python(circle, np.zeros(9))
    _same_as_python(rowmax, RNG.standard_normal((4, 6)), np.zeros(4))


@pytest.mark.parametrize("tile", [1, 3, 4])
def test_closure_constants(tile):
    _same_as_python(_make(tile), RNG.standard_normal(10), np.zeros(10))


def test_a_changed_global_compiles_again():
    global STEP
    k = polyc.kernel(strided)
    A = RNG.standard_normal(11)
    for step in (3, 2):
        STEP = step
        got, want = np.zeros(11), np.zeros(11)
        k(A, got)
        strided(A, want)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    STEP = 3


def test_a_local_name_hides_the_global_and_a_bool_is_no_number():
    def shadow(A):
        STEP = A.shape[0]          # noqa: N806 (the global's name on purpose)
        for i in range(STEP):
            A[i] = STEP

    _same_as_python(shadow, np.zeros(4))

    def flagged(A):
        for i in range(A.shape[0]):
            A[i] = FLAG

    with pytest.raises(UnsupportedError, match="unknown name FLAG.*constants of its module"):
        polyc.kernel(flagged)(np.zeros(3))


def test_cli_reads_top_level_constants(tmp_path, capsys):
    from polyc.cli import main
    src = tmp_path / "k.py"
    src.write_text("import math\nimport polyc\n\nTILE = 4\nSCALE = -0.5\n"
                   "STEP = TILE * 2 - 1\nTAU = 2 * math.pi\nNOPE = TILE // 0\n\n\n"
                   "@polyc.kernel\ndef k(A, B):\n    n = A.shape[0]\n"
                   "    for i in range(0, n, STEP):\n"
                   "        B[i] = A[i] * SCALE + TAU\n")
    assert main(["compile", str(src), "--emit", "loopnest"]) == 0
    out = capsys.readouterr().out
    assert "i += 7" in out and "-0.5" in out and "6.28318" in out


def test_numpy_elementwise_extrema():
    # np.maximum / np.minimum / np.fmax / np.fmin were refused as unknown calls
    def clip(x, y):
        for i in range(x.shape[0]):
            y[i] = (np.maximum(x[i], 0.0) + np.minimum(x[i], -0.5) + np.fmax(x[i], 0.1)
                    + np.fmin(x[i], 0.2))

    x = np.array([1.0, -2.0, np.nan, 0.3, -0.7, 0.0, -0.0])
    for dtype in ("float64", "float32"):
        y = np.zeros(7, dtype)
        polyc.kernel(clip)(x.astype(dtype), y)
        xd = x.astype(dtype)
        want = np.maximum(xd, 0.0) + np.minimum(xd, -0.5) + np.fmax(xd, 0.1) + np.fmin(xd, 0.2)
        np.testing.assert_array_equal(y, want.astype(dtype))
