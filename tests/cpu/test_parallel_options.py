"""How generated kernels share work between threads (issue 16, item 4):
``Config.omp_schedule`` (dynamic chunks by default, static on request),
``Config.wait_policy`` (what idle OpenMP threads do between calls, applied
before libgomp loads) and clear errors for invalid thread settings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.errors import PolycError

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = (ROOT / "examples" / "softmax.tc").read_text()


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@polyc.kernel
def smooth_steps(A, B):
    """A time loop around two even parallel loops: static under 'auto'."""
    n = A.shape[0]
    for t in range(4):
        for i in range(1, n - 1):
            B[i] = 0.5 * (A[i - 1] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = B[i]


@polyc.kernel
def triangle_steps(L, x):
    """A sequential loop around a triangular parallel loop: dynamic."""
    n = L.shape[0]
    for t in range(3):
        for i in range(n):
            for j in range(i + 1):
                L[i, j] = L[i, j] * 0.5 + x[j]


def _kinds(source: str) -> list[str]:
    """The schedule kinds of the parallel loops (``omp parallel for``, or
    ``omp for`` in a parallel region around a sequential loop)."""
    import re
    return re.findall(r"omp (?:parallel )?for[^\n]*?schedule\((\w+)", source)


def test_auto_is_dynamic_for_one_shot_and_uneven_loops_static_in_a_time_loop(tmp_path):
    from polyc.pykernel import PyKernel
    cfg = Config(cache_dir=str(tmp_path))
    soft = polyc.compile(SOFTMAX, config=cfg)
    assert set(_kinds(soft.source)) == {"dynamic"}        # runs once per call
    rng = np.random.default_rng(4)
    A = rng.standard_normal(300)
    smooth = PyKernel(smooth_steps.py_func, cfg)
    got = A.copy()
    smooth(got, np.zeros(300))
    want = A.copy()
    smooth_steps.py_func(want, np.zeros(300))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert _kinds(smooth.source) and set(_kinds(smooth.source)) == {"static"}
    tri = PyKernel(triangle_steps.py_func, cfg)
    L0, x = rng.standard_normal((90, 90)), rng.standard_normal(90)
    got = L0.copy()
    tri(got, x)
    want = L0.copy()
    triangle_steps.py_func(want, x)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert "dynamic" in _kinds(tri.source)


def test_a_collapsed_loop_around_gemm_calls_hands_out_small_chunks(tmp_path):
    """Row-blocked attention: the collapsed (batch, row block) loop runs once
    per call, around one GEMM call per iteration: dynamic, about 16 chunks
    per thread of the product of the trip counts (a thread on a core that
    another process slows takes fewer blocks; measured with
    benchmarks.background.BackgroundLoad(0.5) on 8x512x64 attention:
    5.4-6.4 ms against 7.0-8.2 ms static)."""
    import re
    cfg = Config(cache_dir=str(tmp_path))
    att = polyc.compile("""
def att(float(B, M, D) Q, float(B, N, D) K, float(B, N, E) V) -> (S, mx, P, O) {
    S(b, i, j) +=! Q(b, i, d) * K(b, j, d)
    mx(b, i) max=! S(b, i, j)
    S(b, i, j) = exp(S(b, i, j) - mx(b, i))
    P(b, i) +=! S(b, i, j)
    S(b, i, j) = S(b, i, j) / P(b, i)
    O(b, i, e) +=! S(b, i, j) * V(b, j, e)
}""", config=cfg)
    assert re.search(r"omp parallel for collapse\(2\) schedule\(dynamic, "
                     r"polyc_chunk\(\(.*\) \* \(.*\), 4 \* polyc_team\)\)", att.source)
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((3, 150, 16)).astype(np.float32) for _ in range(3))
    s = np.einsum("bid,bjd->bij", q, k)
    p = np.exp(s - s.max(-1, keepdims=True))
    from polyc.testing import assert_close
    assert_close(att(q, k, v)[3], (p / p.sum(-1, keepdims=True)) @ v, reduction_length=150)


def test_a_tile_loop_in_a_sequential_loop_over_even_work_is_static(tmp_path):
    """PolyBench's gramschmidt and atax: a parallel loop over tiles inside a
    sequential loop.  Its point loops' bounds move with the tile
    (``c3 = c1 .. min(c1 + 63, m - 1)``), but every tile does the same work:
    static, so each thread keeps its columns in its caches (gramschmidt
    LARGE took 2.4x longer with dynamic chunks).  The triangular loop
    above stays dynamic.  (atax has one such loop, in ``y = A^T tmp``; its
    ``tmp = A x`` runs jammed rows, polyc/schedule/auto.py ``jam``.)"""
    from benchmarks.polybench import BENCHMARKS, fresh
    from polyc.pykernel import PyKernel
    cfg = Config(cache_dir=str(tmp_path))
    for name, loops in (("gramschmidt", 2), ("atax", 1)):
        bench = BENCHMARKS[name]
        args = bench.init(bench.sizes["SMALL"])
        k = PyKernel(bench.kernel.py_func, cfg).specialize(*fresh(args))
        assert "c1 + INT64_C(63)" in k.source             # point loops of tiles of c1
        # the parallel loops over tiles inside the sequential loop
        assert _kinds(k.source).count("static") == loops, k.source


def test_tile_bounds_that_move_together_are_even_work():
    from backends.c.loopshape import tile_of as _tile_of
    from polyc import expr as E
    c1, m = E.Index("c1"), E.Param("m")
    tile_hi = E.Call("min", (E.Binary("-", m, E.Const(1)), E.Binary("+", c1, E.Const(63))))
    assert _tile_of("c1", c1, tile_hi)                                   # a point loop
    assert _tile_of("c1", E.Call("max", (E.Index("c0"), c1)), tile_hi)  # clipped below
    assert not _tile_of("c1", c1, m)                                     # a triangle
    assert not _tile_of("c1", E.Const(0), c1)
    assert not _tile_of("c1", c1, E.Binary("*", E.Const(2), c1))         # 2 c1 - c1


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_omp_schedule_is_printed_and_both_compute_the_same(tmp_path, kind):
    k = polyc.compile(SOFTMAX, config=Config(omp_schedule=kind, cache_dir=str(tmp_path)))
    dynamic = "schedule(dynamic, polyc_chunk(" in k.source
    assert dynamic == (kind == "dynamic")
    assert ("schedule(static)" in k.source) == (kind == "static")
    x = np.random.default_rng(1).standard_normal((67, 301)).astype(np.float32)
    out = k(x)
    got = out[0]                                  # O, then the temporaries
    np.testing.assert_allclose(got, _softmax(x), rtol=1e-5, atol=1e-6)


def test_the_default_is_auto_and_the_cli_prints_static(tmp_path):
    assert Config().omp_schedule == "auto"
    env = dict(os.environ, PYTHONPATH=str(ROOT), POLYC_OMP_SCHEDULE="static",
               POLYC_CACHE_DIR=str(tmp_path))
    src = tmp_path / "softmax.tc"
    src.write_text(SOFTMAX)
    out = subprocess.run([sys.executable, "-m", "polyc.cli", "compile", str(src), "--emit", "c"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "schedule(static)" in out.stdout and "schedule(dynamic" not in out.stdout


@pytest.mark.parametrize("var, value, needle", [
    ("POLYC_NUM_THREADS", "two", "POLYC_NUM_THREADS='two' is not a positive number"),
    ("POLYC_NUM_THREADS", "0", "POLYC_NUM_THREADS='0'"),
    ("POLYC_NUM_THREADS", "-3", "POLYC_NUM_THREADS='-3'"),
    ("POLYC_OMP_SCHEDULE", "guided",
     "POLYC_OMP_SCHEDULE='guided' is not one of auto, dynamic, static"),
    ("POLYC_WAIT_POLICY", "spin", "POLYC_WAIT_POLICY='spin' is not one of short, passive"),
])
def test_invalid_thread_settings_are_clear_errors(monkeypatch, var, value, needle):
    monkeypatch.setenv(var, value)
    with pytest.raises(PolycError, match=needle.replace("(", r"\(")):
        Config.from_env()


@pytest.mark.parametrize("kw", [dict(num_threads=0), dict(num_threads=-1),
                                dict(num_threads=2.5), dict(num_threads=True),
                                dict(omp_schedule="guided"), dict(wait_policy="yield")])
def test_invalid_config_values_are_clear_errors(kw):
    with pytest.raises(PolycError, match=f"Config.{next(iter(kw))} must be"):
        Config(**kw)


def test_openmp_list_syntax_and_case(monkeypatch):
    monkeypatch.delenv("POLYC_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")
    assert Config.from_env().num_threads == 3
    monkeypatch.setenv("POLYC_WAIT_POLICY", "PASSIVE")
    assert Config.from_env().wait_policy == "passive"


PROBE = textwrap.dedent("""
    import ctypes, os, sys
    import numpy as np
    import polyc
    from polyc import threads
    k = polyc.compile("def add(float(N) A) -> (B) { B(i) = A(i) + 1 }")
    assert (k(np.zeros(3, np.float32)) == 1).all()
    getenv = ctypes.CDLL(None).getenv
    getenv.restype = ctypes.c_char_p
    val = lambda n: (getenv(n.encode()) or b"").decode()
    print(threads.apply_wait_policy("passive"), val("GOMP_SPINCOUNT"),
          val("OMP_WAIT_POLICY"), "GOMP_SPINCOUNT" in os.environ)
""")


@pytest.mark.parametrize("env, expected", [
    ({}, "short 1000  False"),
    ({"POLYC_WAIT_POLICY": "passive"}, "passive  PASSIVE False"),
    ({"POLYC_WAIT_POLICY": "active"}, "active  ACTIVE False"),
    ({"OMP_WAIT_POLICY": "passive"}, "environment  passive False"),   # the user's wins
])
def test_the_wait_policy_is_set_before_libgomp_loads(tmp_path, env, expected):
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "POLYC_WAIT_POLICY")}
    full = dict(base, PYTHONPATH=str(ROOT), POLYC_CACHE_DIR=str(tmp_path), **env)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=full, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == expected
