"""The intrinsics library (issue 16, item 6): ``gemm.h`` is compiled once
per machine, compiler and flags into a cached shared library that generated
kernels link, instead of being pasted into every kernel.

* Kernels declare the interface only and share one library; results match
  numpy.
* The library's key follows the compiler, its flags and the CPU (a kernel's
  key follows the library's).
* An entry built for another CPU is never loaded: discarded with a warning,
  rebuilt.  A corrupt or deleted library under a cached kernel is rebuilt
  in a new process and the kernel still runs.
* Two processes that build the first GEMM kernels at once build one library.
* Flags without AVX2/FMA give the portable micro-kernel, and ``explain``
  says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import polyc
from polyc import cache, cache_entry
from polyc.backends.c import intrinsics
from polyc.backends.c.build import (
    intrinsics_isa,
    intrinsics_key,
    intrinsics_library,
    library_key,
    resolve_compiler,
)
from polyc.config import Config
from polyc.errors import CacheWarning


def _cc() -> str:
    """The configured compiler's path (conftest skips this module without one)."""
    return resolve_compiler(Config.from_env().cc)[0]

pytestmark = pytest.mark.usefixtures("fresh_cache_state")

ROOT = Path(__file__).resolve().parents[2]
#: quick to compile; no -march: the portable micro-kernel on x86-64
FAST = ("-O1", "-fopenmp", "-fPIC", "-shared", "-std=c99")
MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
MM_RELU = ("def mmr(double(M,K) A, double(K,N) B) -> (C) "
           "{ C(m,n) +=! A(m,k) * B(k,n)  C(m,n) = fmax(C(m,n), 0.0) }")


def _is_library(path: Path) -> bool:
    return path.read_text(errors="replace").startswith("/* polyc intrinsics library")


def _libraries(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.c") if _is_library(p))


def test_kernels_declare_the_interface_and_share_one_library(tmp_path):
    cfg = Config(cache_dir=str(tmp_path))
    mm = polyc.compile(MM, config=cfg)
    mmr = polyc.compile(MM_RELU, config=cfg)
    for k in (mm, mmr):
        assert intrinsics.LINK_MARK in k.source
        assert "polyc_gemm_ukr" not in k.source          # gemm.h is not pasted
        assert len(k.source.splitlines()) < 400      # the prelude; gemm.h alone has 1880 lines
        assert len(k.library.needs) == 1
    assert mm.library.needs[0].key == mmr.library.needs[0].key == intrinsics_key(config=cfg)
    assert len(_libraries(tmp_path)) == 1
    assert cache.stats().builds == 3                     # the library, then two kernels
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((37, 29), np.float32), rng.standard_normal((29, 41), np.float32)
    np.testing.assert_allclose(mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    a, b = rng.standard_normal((17, 70)), rng.standard_normal((70, 5))
    np.testing.assert_allclose(mmr(a, b), np.maximum(a @ b, 0), rtol=1e-12, atol=1e-12)
    # a kernel without a GEMM links nothing
    add = polyc.compile("def add(float(N) A) -> (B) { B(i) = A(i) + 1 }", config=cfg)
    assert add.library.needs == () and intrinsics.LINK_MARK not in add.source
    assert intrinsics_isa(add.library) is None


def test_the_library_key_follows_flags_cpu_and_compiler(tmp_path, monkeypatch):
    base = intrinsics_key(config=Config(cflags=FAST))
    assert intrinsics_key(config=Config(cflags=FAST)) == base
    assert intrinsics_key(config=Config(cflags=(*FAST, "-mavx2"))) != base
    assert intrinsics_key(config=Config(cflags=FAST, sanitize=("undefined",))) != base
    real = cache.cpu_features(_cc())
    src = polyc.compile(MM, config=Config(cflags=FAST, cache_dir=str(tmp_path))).source
    kernel = library_key(src, config=Config(cflags=FAST))
    monkeypatch.setattr(cache, "cpu_features", lambda compiler=None: real + " newfeature")
    assert intrinsics_key(config=Config(cflags=FAST)) != base
    assert library_key(src, config=Config(cflags=FAST)) != kernel
    monkeypatch.undo()
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\ncase \"$1\" in --version) echo fakecc 9; exit 0;; esac\n"
                    f"exec {_cc()} \"$@\"\n")
    fake.chmod(0o755)
    assert intrinsics_key(config=Config(cflags=FAST, cc=str(fake))) != base


def _reseal(side: Path, **changes) -> None:
    meta = cache_entry.unseal(side.read_bytes())
    meta.update(changes)
    for k in ("format", "key", "sha256", "size"):
        meta.setdefault(k, None)
    side.write_bytes(cache_entry.seal(meta))


def test_an_entry_built_for_another_cpu_is_never_loaded(tmp_path):
    cfg = Config(cflags=FAST, cache_dir=str(tmp_path))
    lib = intrinsics_library(config=cfg)
    _reseal(tmp_path / f"{lib.key}.json", cpu="fpu vme de pse tsc (another machine)")
    cache.clear_memory()
    with pytest.warns(CacheWarning, match="built for another cpu"):
        again = intrinsics_library(config=cfg)
    assert again.key == lib.key
    assert cache.stats().builds == 2 and cache.stats().corrupt == 1
    assert cache_entry.unseal((tmp_path / f"{lib.key}.json").read_bytes())["cpu"] == \
        cache.cpu_features(_cc())


RUN = textwrap.dedent("""
    import sys, warnings
    import numpy as np
    import polyc
    from polyc.config import Config
    warnings.simplefilter("always")
    cfg = Config(cflags={flags!r}, cache_dir=sys.argv[1])
    k = polyc.compile({src!r}, config=cfg)
    rng = np.random.default_rng(int(sys.argv[2]))
    a = rng.standard_normal((23, 19), np.float32)
    b = rng.standard_normal((19, 31), np.float32)
    assert np.allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)
    print("ok", k.library.needs[0].key)
""")


def _run(directory: Path, seed: int, src: str = MM) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", RUN.format(flags=FAST, src=src),
                           str(directory), str(seed)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_damaged_or_deleted_library_under_a_cached_kernel_is_rebuilt(tmp_path):
    first = _run(tmp_path, 0)
    assert first.returncode == 0, first.stderr
    key = first.stdout.split()[1]
    so = tmp_path / f"{key}.so"
    so.write_bytes(so.read_bytes()[:1000])                # truncated by a crash or a disk
    second = _run(tmp_path, 1)
    assert second.returncode == 0, second.stderr
    assert "corrupt" in second.stderr and key in second.stderr
    for suffix in (".so", ".json"):                      # removed by hand
        (tmp_path / f"{key}{suffix}").unlink()
    third = _run(tmp_path, 2)
    assert third.returncode == 0, third.stderr
    assert len(_libraries(tmp_path)) == 1


def test_concurrent_first_builds_make_one_library(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    srcs = [MM, MM.replace("def mm", "def mm2").replace("C(m,n) +=!", "C(m,n) +=! 2 *")]
    procs = [subprocess.Popen([sys.executable, "-c", RUN.format(flags=FAST, src=s)
                               .replace("a @ b,", "a @ b * (2 if 'mm2' in k.name else 1),"),
                               str(tmp_path), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i, s in enumerate(srcs)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert len({out.split()[1] for out, _ in outs}) == 1
    assert len(_libraries(tmp_path)) == 1


def test_flags_without_avx2_give_the_portable_kernel_and_explain_says_so(tmp_path):
    if os.uname().machine not in ("x86_64", "AMD64"):
        pytest.skip("the portable-kernel flags are x86 flags")
    cfg = Config(cflags=(*FAST, "-mno-avx2", "-mno-fma", "-mno-avx512f"),
                 cache_dir=str(tmp_path))
    k = polyc.compile(MM, config=cfg)
    assert intrinsics_isa(k.library) == "portable"
    assert "portable C" in k.explain() and k.explain(json=True)["isa"] == "portable"
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((9, 33), np.float32), rng.standard_normal((33, 13), np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        native = polyc.compile(MM, config=Config(cache_dir=str(tmp_path)))
    if " avx2" in cache.cpu_features(_cc()) and " fma" in cache.cpu_features(_cc()):
        assert intrinsics_isa(native.library) in ("avx2", "avx512")


def test_the_blocking_follows_the_cache_sizes(tmp_path, monkeypatch):
    """MC and NC come from the machine's L2 and L3 (the library's source
    names them, so its key follows them); a tiny L2 and L3 (many small
    blocks and panels) still multiply right."""
    from polyc import machine
    base = intrinsics_key(config=Config(cflags=FAST))
    src = intrinsics.library_source()
    assert f"#define POLYC_GEMM_L2_BYTES {machine.cache_sizes()[2]}" in src
    monkeypatch.setattr(machine, "cache_sizes", lambda: {1: 32768, 2: 65536, 3: 262144})
    assert "#define POLYC_GEMM_L2_BYTES 65536" in intrinsics.library_source()
    assert intrinsics_key(config=Config(cflags=FAST)) != base
    cfg = Config(cache_dir=str(tmp_path))
    k = polyc.compile(MM_RELU, config=cfg)
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((301, 517)), rng.standard_normal((517, 1203))
    np.testing.assert_allclose(k(a, b), np.maximum(a @ b, 0), rtol=1e-11, atol=1e-10)


def test_a_library_removed_while_loaded_is_rebuilt_for_the_next_kernel(tmp_path):
    """The process holds the library (memoised), then its files vanish (a
    `polyc cache clear` elsewhere): the next GEMM kernel rebuilds it to link."""
    cfg = Config(cflags=FAST, cache_dir=str(tmp_path))
    polyc.compile(MM, config=cfg)
    for f in _libraries(tmp_path):
        for suffix in (".so", ".json", ".c"):
            f.with_suffix(suffix).unlink(missing_ok=True)
    assert not _libraries(tmp_path)
    k = polyc.compile(MM_RELU, config=cfg)
    a, b = np.ones((5, 3)), -np.ones((3, 4))
    np.testing.assert_array_equal(k(a, b), np.zeros((5, 4)))
    assert k.library.needs[0].path.exists() and len(_libraries(tmp_path)) == 1
