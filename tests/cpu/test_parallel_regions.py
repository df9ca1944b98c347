"""One OpenMP parallel region around a sequential loop whose body is static
parallel nests (a stencil's time loop): every thread runs the time loop and
the nests are worksharing ``omp for`` loops whose barriers order the steps,
instead of a fork and join per nest and step (backends/c/emit.py,
``_Emitter.region``).  Results against numpy on 1, 2 and 3 threads; where
no region is printed (a dynamic loop, a statement between the nests, a call)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polyc
from benchmarks.polybench import BENCHMARKS, fresh, max_rel
from polyc.config import Config


@polyc.kernel
def smooth2d(A, B):
    """jacobi-2d's shape: a time loop around two parallel nests."""
    n = A.shape[0]
    for t in range(5):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


@polyc.kernel
def smooth2d_counted(A, B, steps):
    """The same with a statement between the nests: no region."""
    n = A.shape[0]
    for t in range(5):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.25 * (A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        steps[t] = B[1, 1]
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = B[i, j]


def _reference(A, B):
    for _ in range(5):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                               + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                               + B[:-2, 1:-1])


def _regions(source: str) -> int:
    return len(re.findall(r"#pragma omp parallel num_threads", source))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_time_loop_runs_in_one_region_and_matches_numpy(threads, tmp_path):
    rng = np.random.default_rng(threads)
    A, B = rng.standard_normal((37, 37)), np.zeros((37, 37))
    cfg = Config(num_threads=threads, cache_dir=str(tmp_path))
    k = polyc.kernel(smooth2d.py_func, config=cfg).specialize(A, B)
    src = k.source
    assert _regions(src) == 1 and src.count("#pragma omp for schedule(static)") == 2, src
    assert "omp parallel for" not in src
    # the region encloses the time loop: its pragma comes right before it
    assert re.search(r"#pragma omp parallel num_threads\(polyc_team\)\n\s*for \(int64_t c0", src)
    a, b = A.copy(), B.copy()
    k(a, b)
    ra, rb = A.copy(), B.copy()
    _reference(ra, rb)
    np.testing.assert_allclose(a, ra, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b, rb, rtol=1e-12, atol=1e-12)


def test_no_region_around_a_statement_between_the_nests():
    rng = np.random.default_rng(0)
    A, B, s = rng.standard_normal((20, 20)), np.zeros((20, 20)), np.zeros(5)
    src = smooth2d_counted.specialize(A, B, s).source
    assert _regions(src) == 0 and "omp for " not in src


@pytest.mark.parametrize("name", ["jacobi-2d", "heat-3d", "fdtd-2d"])
def test_polybench_stencils_run_their_time_loop_in_one_region(name):
    bench = BENCHMARKS[name]
    args = bench.init(bench.sizes["SMALL"])
    k = bench.kernel.specialize(*fresh(args))
    assert _regions(k.source) == 1, k.source
    got, want = fresh(args), fresh(args)
    k(*got)
    bench.reference(*want)
    for o in bench.outputs:
        assert max_rel(got[o], want[o]) < 1e-10, o


def test_dynamic_loops_keep_their_own_region(tmp_path):
    """lu's k loop around a triangular (dynamic) loop: a worksharing dynamic
    loop in a region measured slower than a fork per step."""
    bench = BENCHMARKS["lu"]
    k = bench.kernel.specialize(*fresh(bench.init(bench.sizes["SMALL"])))
    assert _regions(k.source) == 0 and "omp parallel for schedule(dynamic" in k.source
    forced = polyc.kernel(bench.kernel.py_func, config=Config(
        omp_schedule="static", cache_dir=str(tmp_path)))
    args = bench.init(bench.sizes["SMALL"])
    k2 = forced.specialize(*fresh(args))
    assert _regions(k2.source) == 1         # static on request: one region
    got, want = fresh(args), fresh(args)
    k2(*got)
    bench.reference(*want)
    for o in bench.outputs:
        assert max_rel(got[o], want[o]) < 1e-10, o


def test_a_short_loop_in_a_region_is_worksharing_not_a_sequential_copy():
    """fdtd-2d's ``ey[0, j] = fict[t]``: outside a region a short parallel
    loop is printed twice (parallel from 16384 iterations); in a region the
    sequential copy would run on every thread, so it is one ``omp for``."""
    bench = BENCHMARKS["fdtd-2d"]
    src = bench.kernel.specialize(*fresh(bench.init(bench.sizes["SMALL"]))).source
    assert "#pragma omp for simd schedule(static)" in src
    assert "INT64_C(16384)" not in src


def test_one_level_loops_alone_keep_the_short_loop_rule():
    """jacobi-1d: two short one-level loops per step; barriers would cost
    more than their work, so no region (and the 16384-iteration rule)."""
    bench = BENCHMARKS["jacobi-1d"]
    src = bench.kernel.specialize(*fresh(bench.init(bench.sizes["SMALL"]))).source
    assert _regions(src) == 0 and "INT64_C(16384)" in src
