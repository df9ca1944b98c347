"""The cache key changes with everything the artifact depends on (issue 6,
item 6): the generated source, the compiler's path, its version, the flags
(the sanitizer flags among them), the CPU features and polyc's version; and
with nothing else.  A changed key means a new build, never a stale hit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polyc import cache
from polyc.backends.c.build import (
    LINK_LIBS,
    build_library,
    compile_flags,
    library_key,
    resolve_compiler,
)
from polyc.config import Config
from polyc.errors import ToolMissingError

try:
    REAL_CC = resolve_compiler(Config.from_env().cc)
except ToolMissingError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C compiler: {e}", allow_module_level=True)

SRC = "#include <stdint.h>\nint64_t f(int64_t x) { return x + 1; }\n"
FAST = ("-O0", "-fPIC", "-shared")


pytestmark = pytest.mark.usefixtures("fresh_cache_state")


def wrapper(path: Path, version: str, mtime_ns: int | None = None) -> str:
    """A compiler wrapper whose ``--version`` says ``version``; compiles with
    the real compiler."""
    real = " ".join(f"'{w}'" for w in REAL_CC)
    path.write_text(f"""#!/bin/sh
case "$1" in --version) echo "fakecc {version}"; exit 0;; esac
exec {real} "$@"
""")
    path.chmod(0o755)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return str(path)


def key(source=SRC, **kw) -> str:
    return library_key(source, config=Config(cflags=FAST, **kw))


def test_key_is_deterministic():
    assert key() == key() == cache.make_key(SRC, compiler=resolve_compiler(Config().cc),
                                            flags=[*FAST, *LINK_LIBS])


def test_key_changes_with_the_source():
    assert key() != key(SRC + " ") != key(SRC.replace("+ 1", "+ 2"))


def test_key_changes_with_the_flags():
    base = key()
    assert library_key(SRC, config=Config(cflags=FAST + ("-DX=1",))) != base
    assert library_key(SRC, config=Config(cflags=("-O1",) + FAST[1:])) != base
    # flag order is part of the command line
    assert library_key(SRC, config=Config(cflags=FAST[::-1])) != base


def test_key_changes_with_the_sanitizers():
    plain, asan = key(), key(sanitize=("address",))
    both = key(sanitize=("address", "undefined"))
    assert len({plain, asan, both}) == 3
    assert "-fsanitize=address,undefined" in compile_flags(
        Config(sanitize=("address", "undefined")))


def test_key_changes_with_the_compiler_path(tmp_path):
    a = wrapper(tmp_path / "cc-a", "1.0")
    b = wrapper(tmp_path / "cc-b", "1.0")
    assert key(cc=a) != key(cc=b)
    assert key(cc=a) == key(cc=a)


def test_key_changes_with_the_compiler_version(tmp_path):
    cc = tmp_path / "cc"
    wrapper(cc, "1.0", mtime_ns=1_000_000_000_000_000_000)
    old = key(cc=str(cc))
    assert cache.compiler_version(str(cc)) == "fakecc 1.0"
    # an upgrade in place: same path, new binary (so a new modification time)
    wrapper(cc, "2.0", mtime_ns=1_000_000_001_000_000_000)
    assert cache.compiler_version(str(cc)) == "fakecc 2.0"
    assert key(cc=str(cc)) != old


def test_key_changes_with_the_cpu_features(monkeypatch):
    base = key()
    real = cache.cpu_features(REAL_CC[0])
    monkeypatch.setattr(cache, "cpu_features", lambda compiler=None: real + " avx9000")
    assert key() != base
    monkeypatch.setattr(cache, "cpu_features", lambda compiler=None: real)
    assert key() == base


def test_key_changes_with_the_polyc_version(monkeypatch):
    base = key()
    monkeypatch.setattr(cache, "__version__", "999.0")
    assert key() != base


def test_key_changes_with_the_cache_format(monkeypatch):
    base = key()
    monkeypatch.setattr(cache, "CACHE_FORMAT", "polyc-cache-test")
    assert key() != base


def test_key_ignores_options_that_do_not_change_the_artifact(tmp_path):
    base = key()
    assert key(cache_dir=str(tmp_path)) == base
    assert key(num_threads=3) == base
    assert key(compile_timeout=5.0) == base
    assert key(disk_cache=False) == base


def test_a_changed_key_is_a_new_build_not_a_stale_hit(tmp_path, monkeypatch):
    """On disk: the same source after a CPU change and after a polyc upgrade
    is compiled again and kept next to the old entry."""
    cfg = Config(cflags=FAST, cache_dir=str(tmp_path / "cache"))
    first = build_library(SRC, config=cfg)
    cache.clear_memory()
    assert build_library(SRC, config=cfg).key == first.key
    assert cache.stats().builds == 1 and cache.stats().disk_hits == 1

    real = cache.cpu_features(REAL_CC[0])
    monkeypatch.setattr(cache, "cpu_features", lambda compiler=None: real + " newfeature")
    cache.clear_memory()
    other_cpu = build_library(SRC, config=cfg)
    monkeypatch.setattr(cache, "__version__", "999.0")
    cache.clear_memory()
    other_version = build_library(SRC, config=cfg)
    assert len({first.key, other_cpu.key, other_version.key}) == 3
    assert cache.stats().builds == 3
    sidecars = sorted(p.name for p in (tmp_path / "cache").glob("*.json"))
    assert sidecars == sorted(k + ".json" for k in (first.key, other_cpu.key,
                                                    other_version.key))


def test_codegen_key_and_lowered_key():
    import programs  # tests/programs.py (tests/ is on sys.path via conftest)

    from polyc import pipeline
    prog = programs.matmul()
    base = pipeline.lowered_key(prog, Config())
    assert pipeline.lowered_key(prog, Config(sanitize=("address",))) != base
    assert pipeline.lowered_key(prog, Config(compile_timeout=3.0)) == base
    names = [n for n, _ in Config().codegen_key()]
    assert "sanitize" in names and "compile_timeout" not in names


def test_lowered_key_follows_the_program_fingerprint_and_statement_text():
    """The key is the program's content (Program.fingerprint) plus the
    statements' source text, which the C source quotes in comments: a
    definition written with other spacing gets its own lowered source."""
    from polyc import pipeline
    from polyc.api import program
    tight = program("def f(float(N) X) -> (Y) { Y(n) = X(n) + 1.0 }")
    spaced = program("def f(float(N) X) -> (Y) { Y(n)  =  X(n) + 1.0 }")
    assert tight.fingerprint() == spaced.fingerprint()
    assert tight.statements[0].text != spaced.statements[0].text
    assert pipeline.lowered_key(tight, Config()) != pipeline.lowered_key(spaced, Config())
    again = program("def f(float(N) X) -> (Y) { Y(n) = X(n) + 1.0 }")
    assert pipeline.lowered_key(again, Config()) == pipeline.lowered_key(tight, Config())
    other = program("def f(float(N) X) -> (Y) { Y(n) = X(n) + 2.0 }")
    assert pipeline.lowered_key(other, Config()) != pipeline.lowered_key(tight, Config())
