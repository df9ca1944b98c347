"""Concurrent use of the kernel cache (issue 6, item 6).

* N processes x K kernels x R rounds compile and load through one cache
  directory while one process per round is SIGKILLed at a random moment:
  0 corrupt entries, 0 wrong results, no lock left held, no lock wait that
  reached its timeout.  The issue's size (8 x 200 x 5) runs under ``-m slow``;
  the default run is 4 x 20 x 2.  Tiny C sources go straight through
  ``backends.c.build.build_library`` so that the test measures the cache.
* 8 threads of one process asking for one kernel: exactly one compile.
* A lock held past ``cache.LOCK_TIMEOUT``: a warning and a private build.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

from polyc import cache, cache_entry
from polyc.backends.c.build import build_library, resolve_compiler
from polyc.config import Config
from polyc.errors import CacheWarning, ToolMissingError

try:
    REAL_CC = resolve_compiler(Config.from_env().cc)
except ToolMissingError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C compiler: {e}", allow_module_level=True)

FAST = ("-O0", "-fPIC", "-shared")
ROOT = Path(__file__).resolve().parents[2]


def source(i: int) -> str:
    return ("#include <stdint.h>\n"
            f"int64_t f(int64_t x) {{ return x * {i} + {i * i % 1009}; }}\n")


def expected(i: int) -> int:
    return 3 * i + i * i % 1009


pytestmark = pytest.mark.usefixtures("fresh_cache_state")


def counting_cc(tmp_path: Path, sleep: float = 0.0) -> tuple[str, Path]:
    """A compiler wrapper that counts compiles (in ``compiles.txt``) and
    sleeps ``sleep`` seconds in each, as long as ``tmp_path/slow`` exists
    (created here)."""
    counter = tmp_path / "compiles.txt"
    counter.touch()
    flag = tmp_path / "slow"
    flag.touch()
    script = tmp_path / "counting-cc"
    real = " ".join(f"'{w}'" for w in REAL_CC)
    script.write_text(f"""#!/bin/sh
case " $* " in *" -o "*) echo compile >> '{counter}'; [ -e '{flag}' ] && sleep {sleep};; esac
exec {real} "$@"
""")
    script.chmod(0o755)
    return str(script), counter


# --- threads of one process -------------------------------------------------------

@pytest.mark.parametrize("disk_cache", [True, False], ids=["disk", "private"])
def test_threads_requesting_one_kernel_compile_it_once(tmp_path, disk_cache):
    cc, counter = counting_cc(tmp_path, sleep=0.3)
    cfg = Config(cc=cc, cflags=FAST, cache_dir=str(tmp_path / "cache"), disk_cache=disk_cache)
    barrier = threading.Barrier(8)
    results, errors = [None] * 8, []

    def worker(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            lib = build_library(source(5), config=cfg)
            results[n] = (lib, lib.function("f", [ctypes.c_int64], ctypes.c_int64)(3))
        except BaseException as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    compiles = len(counter.read_text().splitlines())
    s = cache.stats()
    print(f"8 threads, one kernel: {compiles} compile(s), stats {s}")
    assert compiles == 1
    assert s.builds == 1 and s.memory_hits == 7 and s.disk_hits == 0
    assert len({id(lib) for lib, _ in results}) == 1
    assert all(v == expected(5) for _, v in results)


def test_threads_requesting_different_kernels_do_not_serialize(tmp_path):
    """The in-process lock is per key: 4 kernels whose compiles each sleep
    0.5 s take far less than 2 s together."""
    cc, counter = counting_cc(tmp_path, sleep=0.5)
    cfg = Config(cc=cc, cflags=FAST, cache_dir=str(tmp_path / "cache"))
    start = time.monotonic()
    threads = [threading.Thread(target=build_library, args=(source(i),),
                                kwargs={"config": cfg}) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    elapsed = time.monotonic() - start
    assert len(counter.read_text().splitlines()) == 4
    assert elapsed < 1.8, f"builds of different keys serialized ({elapsed:.2f} s)"


# --- a lock held too long -----------------------------------------------------------

def test_lock_held_past_its_timeout_falls_back(tmp_path, monkeypatch):
    """Another holder (here: this test, through its own descriptor) keeps the
    key's lock: after ``LOCK_TIMEOUT`` the build goes to the private
    directory with a warning, instead of waiting forever."""
    import fcntl
    cfg = Config(cflags=FAST, cache_dir=str(tmp_path / "cache"))
    from polyc.backends.c.build import library_key
    key = library_key(source(8), config=cfg)
    directory = cache.ensure_cache_dir(tmp_path / "cache")
    fd = os.open(directory / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    monkeypatch.setattr(cache, "LOCK_TIMEOUT", 0.4)
    try:
        start = time.monotonic()
        with pytest.warns(CacheWarning, match="held .* for more than 0.4 s"):
            lib = build_library(source(8), config=cfg)
        waited = time.monotonic() - start
    finally:
        os.close(fd)
    assert lib.function("f", [ctypes.c_int64], ctypes.c_int64)(3) == expected(8)
    assert cache.is_private(lib.path.parent)
    assert cache.stats().lock_timeouts == 1
    assert 0.4 <= waited < 5


def test_lock_is_released_when_its_holder_is_killed(tmp_path):
    directory = cache.ensure_cache_dir(tmp_path / "cache")
    lock = directory / ("0" * 64 + ".lock")
    code = (f"import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
            f"fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        held = cache._EntryLock(lock)
        assert not held.acquire(0.1)
        p.kill()
        p.wait(timeout=10)
        assert held.acquire(2.0), "a dead process's lock must be free"
        held.release()
    finally:
        p.kill()
        p.wait()


def test_process_killed_inside_a_compile(tmp_path):
    """SIGKILL a process while its compiler runs (holding the key's lock):
    the lock is free at once, the next process builds the key, and the
    orphaned compiler, which outlives its parent and finishes later, does
    not clobber the new entry."""
    cc, counter = counting_cc(tmp_path, sleep=1.5)
    cache_dir = tmp_path / "cache"
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from polyc.backends.c.build import build_library\n"
            "from polyc.config import Config\n"
            "build_library(%r, config=Config(cc=%r, cflags=%r, cache_dir=%r))\n"
            % (str(ROOT), source(9), cc, FAST, str(cache_dir)))
    victim = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not counter.read_text() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert counter.read_text(), "the victim never started compiling"
    victim.kill()
    assert victim.wait(timeout=10) == -9
    (tmp_path / "slow").unlink()      # our own compile is fast
    cfg = Config(cc=cc, cflags=FAST, cache_dir=str(cache_dir))
    start = time.monotonic()
    lib = build_library(source(9), config=cfg)
    assert time.monotonic() - start < 1.2, "waited for the dead process's lock"
    assert lib.function("f", [ctypes.c_int64], ctypes.c_int64)(3) == expected(9)
    assert cache.stats().builds == 1 and len(counter.read_text().split()) == 2
    time.sleep(1.6)    # the orphaned compiler finishes meanwhile
    cache.clear_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        again = build_library(source(9), config=cfg)
    assert again.key == lib.key and cache.stats().disk_hits == 1 and cache.stats().corrupt == 0


def test_forked_child_keeps_its_parents_private_directory(tmp_path):
    """A child forked while a private directory exists makes its own and, on
    exit, does not remove its parent's."""
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from polyc import cache
        from polyc.backends.c.build import build_library
        from polyc.config import Config
        cfg = Config(cflags={FAST!r}, disk_cache=False)
        src = lambda i: "int f(int x) {{ return x + %d; }}\\n" % i
        parent_dir = build_library(src(1), config=cfg).path.parent
        pid = os.fork()
        if pid == 0:
            child_dir = build_library(src(2), config=cfg).path.parent
            assert child_dir != parent_dir, (child_dir, parent_dir)
            sys.exit(0)                       # runs atexit handlers
        assert os.waitpid(pid, 0)[1] == 0
        assert parent_dir.is_dir(), "the child removed its parent's private directory"
        assert build_library(src(3), config=cfg).path.parent == parent_dir
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


# --- processes, with one killed per round -----------------------------------------

WORKER = r'''
import ctypes, json, os, random, sys, time, warnings
sys.path.insert(0, {root!r})
from polyc import cache
from polyc.backends.c.build import build_library
from polyc.config import Config

cache_dir, first, count, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
cache.LOCK_TIMEOUT = float(sys.argv[6])
cfg = Config(cflags={fast!r}, cache_dir=cache_dir)
order = list(range(first, first + count))
random.Random(seed).shuffle(order)
wrong, waits = [], []
progress = open(out + ".progress", "w")
print("ready", flush=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for n, i in enumerate(order):
        src = ("#include <stdint.h>\n"
               f"int64_t f(int64_t x) {{{{ return x * {{i}} + {{i * i % 1009}}; }}}}\n")
        t0 = time.monotonic()
        lib = build_library(src, config=cfg)
        waits.append(time.monotonic() - t0)
        got = lib.function("f", [ctypes.c_int64], ctypes.c_int64)(3)
        if got != 3 * i + i * i % 1009:
            wrong.append((i, got))
        if n % 3 == 2:
            cache.clear_memory()      # later requests go through the disk again
        progress.write(f"{{i}}\n")
        progress.flush()
s = cache.stats()
json.dump({{"wrong": wrong, "builds": s.builds, "disk_hits": s.disk_hits,
           "corrupt": s.corrupt, "fallbacks": s.fallbacks, "lock_timeouts": s.lock_timeouts,
           "max_wait": max(waits, default=0.0),
           "warnings": [str(w.message) for w in caught]}}, open(out, "w"))
sys.stdin.read()    # stay alive until the parent closes stdin: a SIGKILL always lands
'''


def run_race(tmp_path: Path, n_procs: int, n_kernels: int, rounds: int,
             lock_timeout: float = 60.0) -> dict:
    cache_dir = tmp_path / "cache"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(root=str(ROOT), fast=FAST))
    rng = random.Random(2026)
    summary = {"rounds": 0, "killed": 0, "wrong": 0, "corrupt_seen": 0, "lock_timeouts": 0,
               "builds": 0, "disk_hits": 0, "max_wait": 0.0, "warnings": [], "killed_after": []}
    for r in range(rounds):
        first = r * (n_kernels // 2)     # half of each round's kernels are new
        procs, outs = [], []
        for p in range(n_procs):
            out = tmp_path / f"round{r}-proc{p}.json"
            outs.append(out)
            procs.append(subprocess.Popen(
                [sys.executable, str(script), str(cache_dir), str(first), str(n_kernels),
                 str(r * 1000 + p), str(out), str(lock_timeout)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        victim = rng.randrange(n_procs)
        assert procs[victim].stdout.readline().strip() == b"ready"
        # kill it inside its work: once it has finished a random number of
        # kernels, after a random extra delay (within a build, a load, ...)
        target = rng.randrange(int(0.9 * n_kernels))
        progress = Path(str(outs[victim]) + ".progress")
        deadline = time.monotonic() + 300
        while (len(progress.read_text().split()) < target and procs[victim].poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.05))
        procs[victim].kill()               # SIGKILL, wherever it is
        for p, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:  # pragma: no cover - a hang is a failure
                proc.kill()
                raise AssertionError(f"round {r}: worker {p} hung (a lock never released?)")
            if p == victim:
                continue
            assert proc.returncode == 0, f"round {r} worker {p}:\n{err.decode()}"
            res = json.loads(outs[p].read_text())
            summary["wrong"] += len(res["wrong"])
            summary["corrupt_seen"] += res["corrupt"]
            summary["lock_timeouts"] += res["lock_timeouts"]
            summary["builds"] += res["builds"]
            summary["disk_hits"] += res["disk_hits"]
            summary["max_wait"] = max(summary["max_wait"], res["max_wait"])
            summary["warnings"] += res["warnings"]
        summary["killed"] += procs[victim].returncode == -9
        done = Path(str(outs[victim]) + ".progress").read_text().split()
        summary["killed_after"].append(f"{len(done)}/{n_kernels}")
        summary["rounds"] += 1
    summary["final"] = check_directory(cache_dir, rounds * (n_kernels // 2) + n_kernels // 2)
    return summary


def check_directory(cache_dir: Path, n_total: int) -> dict:
    """Every published entry is valid and computes the right value; every
    lock is free; an artifact without sidecar (a killed build) is absent."""
    import fcntl
    valid = corrupt = orphans = 0
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for side in cache_dir.glob("*.json"):
            if side.name.endswith(".lowered.json"):
                continue
            key = side.name[:-5]
            found = cache_entry.verify(cache_dir, key, ".so")
            if isinstance(found, cache_entry.Verified):
                valid += 1
            else:
                corrupt += 1
        for so in cache_dir.glob("*.so"):
            if not (cache_dir / (so.name[:-3] + ".json")).exists():
                orphans += 1
    held = 0
    for lock in cache_dir.glob("*.lock"):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held += 1
        finally:
            os.close(fd)
    cache.clear_memory()
    cfg = Config(cflags=FAST, cache_dir=str(cache_dir))
    wrong = sum(build_library(source(i), config=cfg)
                .function("f", [ctypes.c_int64], ctypes.c_int64)(3) != expected(i)
                for i in range(n_total))
    return {"valid": valid, "corrupt": corrupt, "orphans": orphans, "locks_held": held,
            "wrong_after": wrong}


def assert_race_clean(summary: dict, rounds: int) -> None:
    final = summary["final"]
    print(f"race: {summary['rounds']} rounds, {summary['killed']} processes SIGKILLed "
          f"(after {', '.join(summary['killed_after'])} kernels), "
          f"{summary['builds']} builds, {summary['disk_hits']} disk hits, "
          f"{summary['wrong']} wrong results, {summary['corrupt_seen']} corrupt entries seen, "
          f"{summary['lock_timeouts']} lock timeouts (max wait {summary['max_wait']:.2f} s); "
          f"final directory: {final}")
    assert summary["rounds"] == rounds and summary["killed"] == rounds
    assert summary["wrong"] == 0
    assert summary["corrupt_seen"] == 0, summary["warnings"]
    assert summary["lock_timeouts"] == 0
    assert final["corrupt"] == 0 and final["locks_held"] == 0 and final["wrong_after"] == 0
    assert not [w for w in summary["warnings"] if "corrupt" in w]


def test_processes_race_with_one_killed_per_round(tmp_path):
    """4 processes x 20 kernels x 2 rounds, one process SIGKILLed per round."""
    assert_race_clean(run_race(tmp_path, 4, 20, 2), 2)


@pytest.mark.slow
def test_processes_race_full_size(tmp_path):
    """The issue's size: 8 processes x 200 kernels x 5 rounds."""
    assert_race_clean(run_race(tmp_path, 8, 200, 5, lock_timeout=300.0), 5)
