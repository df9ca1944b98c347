"""The C build step and the kernel cache: build, load and call through ctypes;
memory and disk hits counted; corrupt entries rebuilt (with a warning);
compiler errors; one compile across concurrent processes; the cache
directory's mode and names.  Harder cases (races with killed processes,
byte-level corruption, unsafe directories, toolchain faults, sanitizers)
are in ``tests/robustness/``."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import re
import stat
from pathlib import Path

import pytest

from polyc import cache
from polyc.backends.c.build import Library, build_library, library_key, resolve_compiler
from polyc.config import Config
from polyc.errors import CacheWarning, CompileError, ToolMissingError

try:
    REAL_CC = resolve_compiler(Config.from_env().cc)
except ToolMissingError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C compiler: {e}", allow_module_level=True)

ADD = """#include <stdint.h>
void add(int64_t n, double *x) { for (int64_t i = 0; i < n; ++i) x[i] += 1.0; }
"""
ADD_ARGS = [ctypes.c_int64, ctypes.POINTER(ctypes.c_double)]
ENTRY_NAME = re.compile(r"^[0-9a-f]{64}\.(so|json|lock|c)$")


pytestmark = pytest.mark.usefixtures("fresh_cache_state")


def counting_cc(tmp_path: Path, sleep: float = 0.0) -> tuple[str, Path]:
    """A compiler wrapper that appends a line to a counter file per compile
    (not per ``--version`` probe), then runs the real compiler."""
    counter = tmp_path / "compiles.txt"
    counter.touch()
    script = tmp_path / "counting-cc"
    real = " ".join(f"'{w}'" for w in REAL_CC)
    script.write_text(f"""#!/bin/sh
case " $* " in *" -o "*) echo compile >> '{counter}'; sleep {sleep};; esac
exec {real} "$@"
""")
    script.chmod(0o755)
    return str(script), counter


def compiles(counter: Path) -> int:
    return len(counter.read_text().splitlines())


def config(tmp_path: Path, **kw) -> Config:
    return Config.from_env(cache_dir=str(tmp_path / "cache"), **kw)


def call_add(lib: Library, values: list[float]) -> list[float]:
    arr = (ctypes.c_double * len(values))(*values)
    lib.function("add", ADD_ARGS)(len(values), arr)
    return list(arr)


def test_build_and_call(tmp_path):
    lib = build_library(ADD, config=config(tmp_path))
    assert call_add(lib, [1.0, 2.5, -3.0]) == [2.0, 3.5, -2.0]
    assert lib.path.parent == tmp_path / "cache" and lib.path.name == lib.key + ".so"
    assert lib.command[0] == REAL_CC[0] and "-o" in lib.command
    assert cache.stats() == cache.CacheStats(builds=1)


def test_memory_hit_disk_hit_and_misses(tmp_path):
    cc, counter = counting_cc(tmp_path)
    cfg = config(tmp_path, cc=cc)
    first = build_library(ADD, config=cfg)
    assert (cache.stats().builds, compiles(counter)) == (1, 1)

    assert build_library(ADD, config=cfg) is first
    assert cache.stats() == cache.CacheStats(memory_hits=1, builds=1)

    cache.clear_memory()
    again = build_library(ADD, config=cfg)
    assert again.key == first.key and again is not first
    assert cache.stats() == cache.CacheStats(memory_hits=1, disk_hits=1, builds=1)
    assert compiles(counter) == 1, "a disk hit must not run the compiler"
    assert call_add(again, [0.0]) == [1.0]

    other_flags = build_library(ADD, config=cfg.replace(cflags=cfg.cflags + ("-DUNUSED=1",)))
    other_source = build_library(ADD + "\n/* changed */\n", config=cfg)
    assert len({first.key, other_flags.key, other_source.key}) == 3
    assert cache.stats().builds == 3 and compiles(counter) == 3


def test_a_cache_dir_with_commas_links_the_gemm_library(tmp_path):
    """A kernel calling the GEMM links the intrinsics library with an rpath to
    the cache directory; -Wl,-rpath,DIR split a directory named with commas
    into linker inputs (``ld: cannot find 16``)."""
    import numpy as np

    import polyc
    cfg = Config.from_env(cache_dir=str(tmp_path / "cache,16,64"))
    k = polyc.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                      config=cfg)
    a = np.random.default_rng(0).random((40, 30), dtype=np.float32)
    b = np.random.default_rng(1).random((30, 20), dtype=np.float32)
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)


def test_cache_dir_created_0700(tmp_path):
    cfg = Config.from_env(cache_dir=str(tmp_path / "a" / "b" / "cache"))
    build_library(ADD, config=cfg)
    assert stat.S_IMODE(os.stat(cfg.resolved_cache_dir()).st_mode) == 0o700


def test_loose_cache_dir_is_tightened(tmp_path):
    loose = tmp_path / "cache"
    loose.mkdir()
    loose.chmod(0o777)
    build_library(ADD, config=config(tmp_path))
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700


def test_cache_dir_that_is_a_file_is_refused(tmp_path):
    """Refused with a warning naming POLYC_CACHE_DIR; the build still works,
    in the process's private directory."""
    (tmp_path / "cache").write_text("not a directory")
    with pytest.warns(CacheWarning, match="not a directory.*POLYC_CACHE_DIR"):
        lib = build_library(ADD, config=config(tmp_path))
    assert call_add(lib, [1.0]) == [2.0]
    assert cache.is_private(lib.path.parent)
    assert (tmp_path / "cache").read_text() == "not a directory"
    assert cache.stats().fallbacks == 1


def test_cache_dir_may_be_a_link_to_a_directory_of_ours(tmp_path):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "cache").symlink_to(tmp_path / "real")
    lib = build_library(ADD, config=config(tmp_path))
    assert lib.path.resolve().parent == tmp_path / "real"
    assert cache.stats().fallbacks == 0


def _truncate(so: Path, side: Path) -> None:
    _replace(so, so.read_bytes()[: so.stat().st_size // 2])


def _flip(so: Path, side: Path) -> None:
    data = bytearray(so.read_bytes())
    for i in range(64, len(data), 97):
        data[i] ^= 0xFF
    _replace(so, bytes(data))


def _bad_sidecar(so: Path, side: Path) -> None:
    text = side.read_text()
    assert '"sha256":"' in text
    _replace(side, text.replace('"sha256":"', '"sha256":"0').encode())


def _replace(path: Path, data: bytes) -> None:
    # Never modify a loaded library in place: this process maps that file.
    tmp = path.with_name("tmp-corrupt")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.mark.parametrize("corrupt", [_truncate, _flip, _bad_sidecar],
                         ids=["truncated", "flipped", "sidecar"])
def test_corrupt_entry_is_rebuilt(tmp_path, corrupt):
    cfg = config(tmp_path)
    lib = build_library(ADD, config=cfg)
    corrupt(lib.path, lib.path.with_suffix(".json"))
    cache.clear_memory()
    cache.reset_stats()
    with pytest.warns(CacheWarning, match="corrupt"):
        rebuilt = build_library(ADD, config=cfg)
    assert cache.stats() == cache.CacheStats(builds=1, corrupt=1)
    assert call_add(rebuilt, [41.0]) == [42.0]
    assert cache.lookup(cfg.resolved_cache_dir(), lib.key, ".so") == lib.path


def test_entry_that_does_not_load_is_rebuilt(tmp_path):
    """Checksum and sidecar agree, but the file is no shared library."""
    cfg = config(tmp_path)
    source = ADD + "\n/* never loaded in this process */\n"
    key = library_key(source, config=cfg)
    directory = cache.ensure_cache_dir(cfg.resolved_cache_dir())
    garbage = directory / "garbage"
    garbage.write_bytes(b"\x7fELF this is not a shared library")
    cache.store(directory, key, ".so", garbage, {"command": []})
    with pytest.warns(CacheWarning, match="does not load"):
        lib = build_library(source, config=cfg)
    assert cache.stats() == cache.CacheStats(builds=1, corrupt=1)
    assert call_add(lib, [1.0]) == [2.0]


def test_syntax_error_raises_compile_error(tmp_path):
    with pytest.raises(CompileError) as info:
        build_library("void broken(int n) { return n +; }\n", config=config(tmp_path))
    err = info.value
    assert err.stderr and "error" in err.stderr
    assert err.command[0] == REAL_CC[0] and "-o" in err.command
    assert err.stderr.strip().splitlines()[-1] in str(err)
    assert " ".join(err.command) in str(err)
    assert not isinstance(err, ToolMissingError)
    assert cache.stats().builds == 0


def test_missing_compiler(tmp_path):
    with pytest.raises(ToolMissingError) as info:
        build_library(ADD, config=config(tmp_path, cc="/nonexistent/cc"))
    msg = str(info.value)
    assert "/nonexistent/cc" in msg and "POLYC_CC" in msg and "CC" in msg
    assert "apt-get install gcc" in msg


def test_file_names_contain_no_user_text(tmp_path):
    cfg = config(tmp_path)
    build_library(ADD.replace("add", "zz_user_marker"), config=cfg)
    names = os.listdir(cfg.resolved_cache_dir())
    assert names and all(ENTRY_NAME.match(n) for n in names), names
    assert not any("marker" in n for n in names)


def test_disk_cache_off_builds_privately(tmp_path):
    cfg = config(tmp_path, disk_cache=False)
    lib = build_library(ADD, config=cfg)
    assert call_add(lib, [1.0]) == [2.0]
    assert not (tmp_path / "cache").exists()
    assert build_library(ADD, config=cfg) is lib


def test_openmp_library_loads_and_runs(tmp_path):
    source = """#include <stdint.h>
#include <omp.h>
double psum(int64_t n) {
  double s = 0.0;
  #pragma omp parallel for reduction(+:s)
  for (int64_t i = 0; i < n; ++i) s += (double)i;
  return s;
}
int threads(void) { return omp_get_max_threads(); }
"""
    assert "-fopenmp" in Config().cflags
    lib = build_library(source, config=config(tmp_path))
    assert lib.function("psum", [ctypes.c_int64], ctypes.c_double)(1000) == 499500.0
    assert lib.function("threads", [], ctypes.c_int)() >= 1


def test_function_objects_are_independent(tmp_path):
    lib = build_library(ADD, config=config(tmp_path))
    a = lib.function("add", ADD_ARGS)
    b = lib.function("add", [ctypes.c_int64, ctypes.c_void_p])
    assert a.argtypes == ADD_ARGS and a is not b
    with pytest.raises(AttributeError, match="nope"):
        lib.function("nope", [])


def _concurrent_build(cc: str, cache_dir: str, barrier, results) -> None:
    from polyc import cache as child_cache
    from polyc.backends.c.build import build_library as child_build
    barrier.wait(timeout=60)
    lib = child_build(ADD, config=Config.from_env(cc=cc, cache_dir=cache_dir))
    arr = (ctypes.c_double * 2)(1.0, 2.0)
    lib.function("add", ADD_ARGS)(2, arr)
    s = child_cache.stats()
    results.put((list(arr), s.builds, s.disk_hits))


def test_concurrent_processes_compile_once(tmp_path):
    cc, counter = counting_cc(tmp_path, sleep=0.5)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_concurrent_build,
                         args=(cc, str(tmp_path / "cache"), barrier, results))
             for _ in range(3)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(values == [2.0, 3.0] for values, _, _ in outcomes)
    assert sum(b for _, b, _ in outcomes) == 1
    assert sum(d for _, _, d in outcomes) == 2
    assert compiles(counter) == 1
