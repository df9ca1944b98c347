"""The ``"pool"`` executor in a script without a ``__main__`` guard: each
spawned worker re-imports the script and dies; every candidate used to be
recorded as a failure ("BrokenProcessPool"). Now it is one PolycError that
says what to change."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_pool_workers_that_cannot_start_are_one_clear_error(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import polyc
        from polyc.errors import PolycError
        from polyc.tune import PoolExecutor
        p = polyc.program("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }")
        try:
            PoolExecutor(1).build([{"program": p, "config": polyc.Config(), "recipe": None}])
        except PolycError as e:
            print("POLYC_ERROR:", e)
    """))
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("POLYC_ERROR:"))
    assert "worker processes died as they started" in line
    assert str(script) in line and 'if __name__ == "__main__":' in line


def test_pool_builds_under_a_main_guard(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent("""
        import polyc
        from polyc.tune import PoolExecutor
        if __name__ == "__main__":
            ex = PoolExecutor(1)
            p = polyc.program("def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }")
            cfg = polyc.Config.from_env().replace(use_tuned=False)
            (r,) = ex.build([{"program": p, "config": cfg, "recipe": None}])
            ex.close()
            print("BUILT:", r["ok"], r.get("error"))
    """))
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "BUILT: True" in proc.stdout, proc.stdout + proc.stderr
