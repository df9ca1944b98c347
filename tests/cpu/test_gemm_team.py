"""Where the GEMM's multi-threaded calls run (polyc.threads.gemm_on_team,
gemm.h's polyc_gemm_set_team): on its own thread pool by default, on the
OpenMP team when the team's idle threads spin long (libgomp loaded first by
torch, OMP_WAIT_POLICY=ACTIVE).  Results are the same either way: the items
and their order of summation do not depend on who runs them.  Tolerance:
polyc.testing.assert_close with the contraction length."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc import threads
from polyc.backends.c import build
from polyc.config import Config
from polyc.errors import PolycError
from polyc.testing import assert_close

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(31)


@pytest.mark.parametrize("applied, env, expected", [
    ("short", {}, False),
    ("passive", {}, False),
    ("active", {}, True),
    ("preloaded", {}, True),
    ("environment", {"OMP_WAIT_POLICY": "passive"}, False),
    ("environment", {"OMP_WAIT_POLICY": "ACTIVE"}, True),
    ("environment", {"GOMP_SPINCOUNT": "1000"}, False),
    ("environment", {"GOMP_SPINCOUNT": "300000"}, True),
    ("environment", {"GOMP_SPINCOUNT": "infinite"}, True),
    ("environment", {"GOMP_SPINCOUNT": "lots"}, False),
])
def test_spins_long(monkeypatch, applied, env, expected):
    for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "POLYC_GEMM_TEAM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert threads.spins_long(applied) is expected
    assert threads.gemm_on_team(applied) is expected


def test_gemm_team_setting(monkeypatch):
    monkeypatch.setenv("POLYC_GEMM_TEAM", "1")
    assert threads.gemm_on_team("short") is True
    monkeypatch.setenv("POLYC_GEMM_TEAM", "0")
    assert threads.gemm_on_team("preloaded") is False
    monkeypatch.setenv("POLYC_GEMM_TEAM", "yes")
    with pytest.raises(PolycError, match="POLYC_GEMM_TEAM"):
        threads.gemm_on_team("short")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_on_the_team_equal_the_pool(dtype):
    config = Config.from_env()
    lib = build.intrinsics_library(config=config)
    set_team = lib.function("polyc_gemm_set_team", [build.ctypes.c_int])
    k = polyc.compile("def mm(float(M, K) A, float(K, N) B) -> (C) "
                      "{ C(m, n) +=! A(m, k) * B(k, n) }", dtype=np.dtype(dtype).name)
    shapes = [(1, 7, 5), (13, 33, 65), (70, 129, 96), (257, 300, 190)]
    try:
        for m, kk, n in shapes:
            a = RNG.standard_normal((m, kk)).astype(dtype)
            b = RNG.standard_normal((kk, n)).astype(dtype)
            set_team(0)
            pool = k(a, b)
            set_team(1)
            team = k(a, b)
            np.testing.assert_array_equal(team, pool)    # same items, same sums
            assert_close(team, a.astype(np.float64) @ b.astype(np.float64), dtype=dtype,
                         reduction_length=kk)
    finally:
        set_team(int(threads.gemm_on_team(threads.apply_wait_policy(config.wait_policy))))


PROBE = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    import torch  # loads its libgomp first, with libgomp's default spinning
    import numpy as np
    import polyc
    k = polyc.compile("def mm(float(M, K) A, float(K, N) B) -> (C) "
                      "{ C(m, n) +=! A(m, k) * B(k, n) }")
    a = np.ones((200, 300), np.float32); b = np.ones((300, 100), np.float32)
    assert (k(a, b) == 300).all()
""")


def test_torch_first_puts_gemm_calls_on_the_team(tmp_path):
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "POLYC_WAIT_POLICY",
                        "POLYC_GEMM_TEAM")}
    env.update(PYTHONPATH=str(ROOT), POLYC_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "GEMM calls run on the OpenMP team" in out.stdout, out.stdout
