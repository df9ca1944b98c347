"""Toolchain faults give clear errors that say what to do (issue 6, item 7):
no C compiler, a compiler that fails or crashes or writes nothing, a compile
past ``POLYC_COMPILE_TIMEOUT``, a read-only cache directory, a ``noexec``
cache directory (simulated: ``ctypes.CDLL`` fails with EPERM), and bad
values of the new environment variables.  Fake compilers are small shell
scripts; tests that need the real compiler skip without one."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from polyc import cache
from polyc.backends.c import build as cbuild
from polyc.backends.c.build import build_library, resolve_compiler
from polyc.config import Config
from polyc.errors import (
    CacheWarning,
    CompileError,
    CompileTimeoutError,
    LoadError,
    PolycError,
    ToolMissingError,
)

SRC = "#include <stdint.h>\nint64_t f(int64_t x) { return x + 1; }\n"
FAST = ("-O0", "-fPIC", "-shared")
TC = "def scale(float(N) A) -> (B) { B(i) = A(i) * 2 }"


def real_cc() -> list[str]:
    try:
        return resolve_compiler(Config.from_env().cc)
    except ToolMissingError as e:
        pytest.skip(f"no C compiler: {e}")


pytestmark = pytest.mark.usefixtures("fresh_cache_state")


def fake_cc(tmp_path: Path, body: str, name: str = "fake-cc") -> str:
    """A compiler script: ``--version`` answers, a compile runs ``body``."""
    script = tmp_path / name
    script.write_text(f"""#!/bin/sh
case "$1" in --version) echo "fake-cc 1.0"; exit 0;; esac
{body}
""")
    script.chmod(0o755)
    return str(script)


def cfg(tmp_path: Path, **kw) -> Config:
    kw.setdefault("cflags", FAST)
    return Config(cache_dir=str(tmp_path / "cache"), **kw)


# --- no compiler ---------------------------------------------------------------------

def test_missing_compiler_path(tmp_path):
    with pytest.raises(ToolMissingError) as info:
        build_library(SRC, config=cfg(tmp_path, cc=str(tmp_path / "no-such-cc")))
    msg = str(info.value)
    assert "no-such-cc" in msg and "POLYC_CC" in msg and "apt-get install gcc" in msg


def test_no_compiler_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # an empty PATH
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("POLYC_CC", raising=False)
    with pytest.raises(ToolMissingError, match=r"C compiler 'cc' not found.*CC or POLYC_CC"):
        build_library(SRC, config=Config.from_env(cache_dir=str(tmp_path / "cache")))


def test_no_compiler_end_to_end(tmp_path, monkeypatch):
    """``polyc.compile`` without a compiler: the same clear error, and no
    half-made cache entry."""
    import polyc
    monkeypatch.setenv("POLYC_CC", str(tmp_path / "nowhere" / "gcc"))
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ToolMissingError, match="nowhere/gcc.*apt-get install gcc"):
        polyc.compile(TC)
    assert not list((tmp_path / "cache").glob("*.so"))


def test_compiler_that_is_not_executable(tmp_path):
    script = Path(fake_cc(tmp_path, "exit 0"))
    script.chmod(0o644)
    if os.access(script, os.X_OK):   # pragma: no cover - e.g. odd mounts
        pytest.skip("cannot make a file non-executable here")
    with pytest.raises(ToolMissingError, match="not found"):
        build_library(SRC, config=cfg(tmp_path, cc=str(script)))


def test_compiler_vanishing_after_resolution(tmp_path, monkeypatch):
    cc = fake_cc(tmp_path, "exit 0")
    real_resolve = cbuild.resolve_compiler
    monkeypatch.setattr(cbuild, "resolve_compiler",
                        lambda name: [str(tmp_path / "gone")] if name == cc else real_resolve(name))
    with pytest.raises(ToolMissingError, match="cannot run the C compiler.*POLYC_CC"):
        build_library(SRC, config=cfg(tmp_path, cc=cc))


# --- a compiler that fails ------------------------------------------------------------

def test_compiler_that_fails(tmp_path):
    cc = fake_cc(tmp_path, 'echo "fake-cc: fatal error: out of cheese" >&2; exit 3')
    with pytest.raises(CompileError) as info:
        build_library(SRC, config=cfg(tmp_path, cc=cc))
    err = info.value
    assert not isinstance(err, ToolMissingError)
    assert "exit status 3" in str(err) and "out of cheese" in str(err)
    assert err.command[0] == cc and "-o" in err.command
    assert cache.stats().builds == 0
    assert not list((tmp_path / "cache").glob("*.so")) and not list(
        (tmp_path / "cache").glob("*.json"))


def test_compiler_killed_by_a_signal(tmp_path):
    cc = fake_cc(tmp_path, "kill -SEGV $$")
    with pytest.raises(CompileError, match="killed by signal 11"):
        build_library(SRC, config=cfg(tmp_path, cc=cc))


def test_compiler_that_writes_nothing(tmp_path):
    cc = fake_cc(tmp_path, "exit 0")
    with pytest.raises(CompileError, match="reported success but wrote no library"):
        build_library(SRC, config=cfg(tmp_path, cc=cc))
    assert not list((tmp_path / "cache").glob("*.json"))


def test_compiler_that_writes_garbage(tmp_path):
    cc = fake_cc(tmp_path, 'while [ "$1" != "-o" ]; do shift; done; echo garbage > "$2"')
    with pytest.raises(LoadError, match="could not load"):
        build_library(SRC, config=cfg(tmp_path, cc=cc))
    assert not list((tmp_path / "cache").glob("*.json")), "a library that does not load is no entry"


# --- a compile that takes too long -------------------------------------------------------

def test_compile_timeout(tmp_path):
    pidfile = tmp_path / "sleeper.pid"
    cc = fake_cc(tmp_path, f"sleep 30 & echo $! > '{pidfile}'; wait")
    start = time.monotonic()
    with pytest.raises(CompileTimeoutError) as info:
        build_library(SRC, config=cfg(tmp_path, cc=cc, compile_timeout=0.5))
    elapsed = time.monotonic() - start
    msg = str(info.value)
    assert elapsed < 10, f"the timeout did not stop the compile ({elapsed:.1f} s)"
    assert info.value.timeout == 0.5 and isinstance(info.value, CompileError)
    assert "within 0.5 s" in msg and "POLYC_COMPILE_TIMEOUT" in msg and "unset it" in msg
    # the compiler's own children (here: the sleep) are killed too
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the compiler's child survived the timeout"
    # and the lock is free again: a later build of the key proceeds
    ok = fake_cc(tmp_path, f"exec {' '.join(real_cc())} \"$@\"", name="fast-cc")
    lib = build_library(SRC, config=cfg(tmp_path, cc=ok, compile_timeout=60))
    assert lib.function("f", [ctypes.c_int64], ctypes.c_int64)(1) == 2


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"    # a zombie is dead
    except FileNotFoundError:
        return False


def test_compile_timeout_from_the_environment(monkeypatch):
    monkeypatch.setenv("POLYC_COMPILE_TIMEOUT", "2.5")
    assert Config.from_env().compile_timeout == 2.5
    monkeypatch.setenv("POLYC_COMPILE_TIMEOUT", "soon")
    with pytest.raises(PolycError, match="POLYC_COMPILE_TIMEOUT='soon' is not a number"):
        Config.from_env()
    monkeypatch.setenv("POLYC_COMPILE_TIMEOUT", "-1")
    with pytest.raises(PolycError, match="positive number of seconds"):
        Config.from_env()
    monkeypatch.delenv("POLYC_COMPILE_TIMEOUT")
    assert Config.from_env().compile_timeout is None


def test_a_generous_timeout_does_not_disturb_a_real_compile(tmp_path):
    real_cc()
    lib = build_library(SRC, config=cfg(tmp_path, compile_timeout=120))
    assert lib.function("f", [ctypes.c_int64], ctypes.c_int64)(41) == 42


# --- cache directories that cannot be used -------------------------------------------------

def read_only_dir(tmp_path, monkeypatch) -> Path:
    """A cache directory polyc cannot write: mode 0500 and, as root (whom
    permissions do not bind), ``os.access`` (what the check uses) reporting
    it read-only."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o500)
    if os.geteuid() == 0:
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
            False if Path(p) == directory and mode & os.W_OK else real_access(p, mode, **kw)))
    return directory


def test_read_only_cache_directory(tmp_path, monkeypatch):
    """Builds still work, privately, with a warning that names
    POLYC_CACHE_DIR.  As root permissions do not bind, so the read-only
    mount is simulated through ``os.access`` (what the check uses)."""
    real_cc()
    directory = read_only_dir(tmp_path, monkeypatch)
    try:
        with pytest.warns(CacheWarning, match="not writable.*POLYC_CACHE_DIR"):
            lib = build_library(SRC, config=cfg(tmp_path))
        assert lib.function("f", [ctypes.c_int64], ctypes.c_int64)(1) == 2
        assert cache.is_private(lib.path.parent)
    finally:
        directory.chmod(0o700)


def test_read_only_cache_directory_for_the_pipeline(tmp_path, monkeypatch):
    """``polyc.compile`` end to end (the lowered-source entry too)."""
    real_cc()
    import numpy as np

    import polyc
    from polyc import pipeline
    directory = read_only_dir(tmp_path, monkeypatch)
    monkeypatch.setenv("POLYC_CACHE_DIR", str(directory))
    pipeline._LOWERED.clear()
    try:
        with pytest.warns(CacheWarning, match="POLYC_CACHE_DIR"):
            k = polyc.compile(TC)
        A = np.arange(5, dtype=np.float32)
        np.testing.assert_array_equal(k(A), A * 2)
        assert not list(directory.iterdir())
    finally:
        directory.chmod(0o700)


def _noexec_cdll(directory: Path):
    real = ctypes.CDLL

    def cdll(name, *a, **kw):
        if name is not None and Path(name).parent == directory:
            raise OSError(errno.EPERM, f"{name}: failed to map segment from shared object")
        return real(name, *a, **kw)
    return cdll


def test_noexec_cache_directory(tmp_path, monkeypatch):
    """Simulated: loading from the cache directory fails with EPERM, as on a
    ``noexec`` mount.  The error says so and names POLYC_CACHE_DIR; the
    valid entry is kept (it is not corrupt)."""
    real_cc()
    directory = tmp_path / "cache"
    monkeypatch.setattr(ctypes, "CDLL", _noexec_cdll(directory))
    with pytest.raises(LoadError) as info:
        build_library(SRC, config=cfg(tmp_path))
    msg = str(info.value)
    assert "noexec" in msg and "POLYC_CACHE_DIR" in msg and str(directory) in msg
    assert "failed to map segment" in msg
    # a disk hit on the same directory: the same message, no rebuild loop
    cache.clear_memory()
    cache.reset_stats()
    with pytest.raises(LoadError, match="noexec.*POLYC_CACHE_DIR"):
        build_library(SRC, config=cfg(tmp_path))
    assert cache.stats().builds == 0 and cache.stats().corrupt == 0


def test_noexec_private_directory(tmp_path, monkeypatch):
    """Without a disk cache the private directory is in TMPDIR: the message
    names TMPDIR and POLYC_CACHE_DIR."""
    real_cc()
    monkeypatch.setattr(ctypes, "CDLL", _noexec_cdll(cache.private_dir()))
    with pytest.raises(LoadError, match="TMPDIR.*POLYC_CACHE_DIR"):
        build_library(SRC, config=cfg(tmp_path, disk_cache=False))


def test_private_directory_that_cannot_be_created(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_private", [])
    monkeypatch.setattr(cache.tempfile, "mkdtemp", lambda **kw: (_ for _ in ()).throw(
        PermissionError(errno.EACCES, "Permission denied", str(tmp_path))))
    with pytest.raises(PolycError, match="TMPDIR.*POLYC_CACHE_DIR"):
        cache.private_dir()


def test_real_read_only_directory(tmp_path):
    """The real thing, where permissions bind: as a normal user directly, as
    root in a subprocess without CAP_DAC_OVERRIDE (``setpriv``)."""
    real_cc()
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            pytest.skip("root ignores directory permissions and setpriv is missing")
        caps = "-dac_override,-dac_read_search,-fowner"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o500)
    code = textwrap.dedent(f"""
        import ctypes, json, warnings
        from polyc import cache
        from polyc.backends.c.build import build_library
        from polyc.config import Config
        try:
            open({str(directory / "probe")!r}, "w")
            writable = True
        except OSError:
            writable = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib = build_library({SRC!r}, config=Config(cflags={FAST!r},
                                                       cache_dir={str(directory)!r}))
        print(json.dumps({{"writable": writable,
                          "value": lib.function("f", [ctypes.c_int64], ctypes.c_int64)(1),
                          "private": cache.is_private(lib.path.parent),
                          "warnings": [str(w.message) for w in caught]}}))
    """)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                              text=True, timeout=120)
        if prefix and proc.returncode != 0 and "setpriv" in proc.stderr:
            pytest.skip(f"setpriv cannot drop capabilities here: {proc.stderr.strip()}")
        assert proc.returncode == 0, proc.stderr
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        assert res["writable"] is False, "the directory should be read-only for the test"
        assert res["value"] == 2 and res["private"]
        assert any("not writable" in w and "POLYC_CACHE_DIR" in w for w in res["warnings"])
        assert not list(directory.iterdir())
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o500
    finally:
        directory.chmod(0o700)


def test_cc_on_path_is_found_without_a_full_path(tmp_path, monkeypatch):
    """``CC=mycc`` with ``mycc`` on PATH works (and ``CC='mycc -O1'`` too)."""
    real = real_cc()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mycc").symlink_to(real[0])
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert resolve_compiler("mycc") == [str(bindir / "mycc")]
    assert resolve_compiler("mycc -O1") == [str(bindir / "mycc"), "-O1"]
    assert shutil.which("mycc")
