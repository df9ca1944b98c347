"""Random triangular contractions in loop programs against the same
function run as plain Python (``kernel.py_func``): the domains, loop
orders, foldable scalings and sums of products that :mod:`polyc.callbox`
turns into one call over their band (the default) or into calls over full
row blocks and a diagonal edge (``Config.triangle_rows``), at sizes below,
at and above one block; and random in-place triangular products (trmm's
relatives, rows ascending or descending), whose output is also an operand.

``POLYC_TRI_PROGRAMS`` (default 16) sets how many programs; the seed is
the program's index.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import numpy as np
import pytest

import polyc

N_PROGRAMS = int(os.environ.get("POLYC_TRI_PROGRAMS", "16"))

#: bounds of the column loop ``j`` (over C's second dimension, extent n)
J_RANGES = ["range(i + 1)", "range(i)", "range(i, n)", "range(i + 1, n)",
            "range(min(i + 3, n))", "range(max(i - 2, 0), n)"]
#: bounds of the reduction loop ``k`` (extent m) that keep its terms in order
K_RANGES = ["range(m)", "range(1, m)"]
PRODUCTS = ["A[i, k] * B[k, j]", "A[i, k] * A[j, k]", "alpha * A[j, k] * B2[i, k]",
            "A[i, k] * (2.0 * B[k, j])"]


def _source(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    jr = rng.choice(J_RANGES)
    kr = rng.choice(K_RANGES)
    prod = rng.choice(PRODUCTS)
    if rng.random() < 0.3:                       # a sum of two products
        prod = f"{prod} + {rng.choice(PRODUCTS)}"
    scale = rng.choice(["", "C[i, j] *= beta", "C[i, j] = 0.0"])
    name = f"tri{seed}"
    body = ["    n = C.shape[0]", "    m = A.shape[1]", "    for i in range(n):"]
    if scale:
        body += [f"        for j in {jr}:", f"            {scale}"]
    if rng.random() < 0.5:                       # k outside j, as PolyBench's syrk
        body += [f"        for k in {kr}:", f"            for j in {jr}:",
                 f"                C[i, j] += {prod}"]
    else:
        body += [f"        for j in {jr}:", f"            for k in {kr}:",
                 f"                C[i, j] += {prod}"]
    src = f"def {name}(alpha, beta, C, A, B, B2):\n" + "\n".join(body) + "\n"
    return name, src


def _load(tmp_path, name: str, src: str):
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, name)


@pytest.mark.parametrize("mode", ["band", "rows"])
@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_triangular_contraction(seed, mode, tmp_path):
    name, src = _source(seed)
    fn = _load(tmp_path, name, src)
    from polyc.callbox import triangle_rows
    kern = polyc.kernel(fn, config=polyc.Config(
        triangle_rows=triangle_rows() if mode == "rows" else 0))
    rng = np.random.default_rng(seed)
    for n, m in ((0, 3), (5, 2), (29, 4), (61, 7)):
        C = rng.standard_normal((n, n))
        A, B = rng.standard_normal((n, m)), rng.standard_normal((m, n))
        B2 = rng.standard_normal((n, m))
        want, got = C.copy(), C.copy()
        fn(0.5, 1.5, want, A, B, B2)
        kern(0.5, 1.5, got, A, B, B2)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11,
                                   err_msg=f"{src}\nn={n} m={m}\n{kern.explain()}")
    # every program says what became of its update
    text = kern.specialize(0.5, 1.5, C, A, B, B2).explain()
    assert "tensorized onto gemm" in text or "not tensorized" in text


#: in-place triangular products (PolyBench's trmm and its relatives): the
#: reduction's range over the rows of B, which the update both reads and writes
IN_PLACE_K = ["range(i + 1, m)", "range(i)", "range(i, m)", "range(i + 1)"]
IN_PLACE_A = ["A[k, i]", "A[i, k]"]


def _in_place_source(seed: int) -> tuple[str, str]:
    rng = random.Random(1000 + seed)
    kr, a = rng.choice(IN_PLACE_K), rng.choice(IN_PLACE_A)
    name = f"trm{seed}"
    rows = "range(m)" if rng.random() < 0.7 else "range(m - 1, -1, -1)"
    body = ["    m = B.shape[0]", "    n = B.shape[1]", f"    for i in {rows}:"]
    if rng.random() < 0.5:
        body += ["        for j in range(n):", f"            for k in {kr}:",
                 f"                B[i, j] += {a} * B[k, j]"]
        if rng.random() < 0.5:
            body += ["            B[i, j] = alpha * B[i, j]"]
    else:
        body += [f"        for k in {kr}:", "            for j in range(n):",
                 f"                B[i, j] += {a} * B[k, j]"]
    return name, f"def {name}(alpha, A, B):\n" + "\n".join(body) + "\n"


@pytest.mark.parametrize("seed", range(N_PROGRAMS // 2))
def test_random_in_place_triangular_product(seed, tmp_path):
    name, src = _in_place_source(seed)
    fn = _load(tmp_path, name, src)
    kern = polyc.kernel(fn)
    rng = np.random.default_rng(seed)
    for m, n in ((0, 3), (5, 2), (29, 4), (61, 7)):
        A, B = 0.1 * rng.standard_normal((m, m)), rng.standard_normal((m, n))
        want, got = B.copy(), B.copy()
        fn(1.5, A, want)
        kern(1.5, A, got)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11,
                                   err_msg=f"{src}\nm={m} n={n}\n{kern.explain()}")
    text = kern.specialize(1.5, A, B).explain()
    assert "tensorized onto gemm" in text or "not tensorized" in text
