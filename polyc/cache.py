"""The kernel cache: content-addressed on disk, memoised in memory.

Owns the cache key (a hash of the generated source, the polyc version, the
compiler's path and version, the flags and the target CPU's features), the
cache directory (``Config.resolved_cache_dir()``, kept at mode 0700), the
entry protocol and the per-process memo.  It knows nothing about C: a backend
passes :func:`get_or_build` a ``build`` callback that writes an artifact and a
``load`` callback that turns its path into a value (``backends/c/build.py``
loads a shared library with ctypes).

Layout of one entry in the cache directory, every name the hex key::

    <key>.so     the artifact (suffix chosen by the backend)
    <key>.json   sidecar: format, key, sha256 and size of the artifact, plus the
                 backend's metadata (source hash, command, compiler output)
    <key>.lock   the file lock that serializes builds of the key
    <key>.c      the source, written by the backend's build callback

Protocol: take ``<key>.lock``; if the artifact's sha256 matches its sidecar and
it loads, that is a disk hit; otherwise the entry is discarded and rebuilt.
Artifacts and sidecars are written to temporary files in the same directory
and ``os.replace``-d into place, so a reader never sees a partial file.
Never modify a cached artifact in place: a process that has it loaded maps
that very file (replace it instead).

Sources: loopy ``loopy/codegen/__init__.py`` (data-model version in the key),
jax ``test_util.py::assertCacheMisses`` (counters that tests read).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from filelock import FileLock

from . import __version__
from .errors import CompileError, PolycError

#: Bump when the entry layout or the meaning of the key changes.
CACHE_FORMAT = "polyc-cache-1"

T = TypeVar("T")


# --- statistics and the in-memory memo ----------------------------------------

@dataclass(frozen=True)
class CacheStats:
    """Counters of this process since the last :func:`reset_stats`."""
    memory_hits: int = 0
    disk_hits: int = 0
    builds: int = 0
    corrupt: int = 0   # entries found damaged, discarded and rebuilt


_lock = threading.Lock()
_counts = {"memory_hits": 0, "disk_hits": 0, "builds": 0, "corrupt": 0}
_memo: dict[str, object] = {}


def _count(name: str) -> None:
    with _lock:
        _counts[name] += 1


def stats() -> CacheStats:
    """The counters of this process (memory hits, disk hits, builds, corrupt)."""
    with _lock:
        return CacheStats(**_counts)


def reset_stats() -> None:
    """Set every counter of :func:`stats` back to zero."""
    with _lock:
        for name in _counts:
            _counts[name] = 0


def clear_memory() -> None:
    """Forget the in-memory memo; the next lookup goes to disk.  Libraries
    already loaded stay loaded (the C runtime never unloads them)."""
    with _lock:
        _memo.clear()


def _memo_get(key: str):
    with _lock:
        value = _memo.get(key)
        if value is not None:
            _counts["memory_hits"] += 1
        return value


# --- the key -------------------------------------------------------------------

def _run_quiet(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, shell=False, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (p.stdout or p.stderr).decode("utf-8", "replace")


@functools.lru_cache(maxsize=None)
def _compiler_version(path: str, mtime_ns: int) -> str:
    out = _run_quiet([path, "--version"]).strip()
    return out.splitlines()[0] if out else "unknown"


def compiler_version(path: str) -> str:
    """First line of ``<path> --version``, memoised per path and modification
    time; ``"unknown"`` when it cannot be run.  Never raises."""
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        mtime = 0
    return _compiler_version(path, mtime)


@functools.lru_cache(maxsize=None)
def cpu_features(compiler: str | None = None) -> str:
    """The target CPU's features: the sorted ``flags`` (x86) or ``Features``
    (Arm) line of /proc/cpuinfo; else a hash of
    ``<compiler> -march=native -Q --help=target``; else ``"unknown"``.
    Memoised; never raises."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip() in ("flags", "Features"):
                    return " ".join(sorted(set(value.split())))
    except OSError:
        pass
    if compiler:
        out = _run_quiet([compiler, "-march=native", "-Q", "--help=target"])
        if out:
            return "target:" + hashlib.sha256(out.encode()).hexdigest()
    return "unknown"


def make_key(source: str, *, compiler: Sequence[str], flags: Sequence[str]) -> str:
    """The hex sha256 naming the artifact built from ``source`` by
    ``[*compiler, *flags]``.  ``compiler[0]`` must be a resolved path
    (``shutil.which``); its version and the CPU features enter the key too."""
    h = hashlib.sha256()
    parts = [("format", CACHE_FORMAT), ("polyc", __version__), ("source", source),
             ("compiler", json.dumps(list(compiler))),
             ("compiler_version", compiler_version(compiler[0])),
             ("flags", json.dumps(list(flags))),
             ("cpu", cpu_features(compiler[0]))]
    for label, text in parts:   # length-prefixed: no two inputs hash alike
        data = text.encode("utf-8", "surrogatepass")
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


# --- the directory -------------------------------------------------------------

def ensure_cache_dir(path: Path) -> Path:
    """Create ``path`` with mode 0700, or check an existing one: a directory of
    ours with looser permissions is tightened to 0700.

    Raises :class:`PolycError` when ``path`` is not a directory, belongs to
    another user, or cannot be created or tightened."""
    path = Path(path)
    how = ("set POLYC_CACHE_DIR to a directory of your own, or "
           "POLYC_NO_DISK_CACHE=1 to build without a disk cache")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise PolycError(f"cache directory {path} is not a directory; {how}")
        if st.st_uid != os.getuid():
            raise PolycError(f"cache directory {path} belongs to user id {st.st_uid}, "
                             f"not to you ({os.getuid()}); polyc loads code from it, "
                             f"so it refuses to use it; {how}")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as e:
        raise PolycError(f"cannot prepare cache directory {path}: {e}; {how}") from e
    return path


_private: list[Path] = []


def private_dir() -> Path:
    """This process's own temporary directory (mode 0700), used when
    ``Config.disk_cache`` is off; removed when the process exits."""
    with _lock:
        if not _private:
            _private.append(Path(tempfile.mkdtemp(prefix="polyc-")))
            atexit.register(shutil.rmtree, _private[0], True)
        return _private[0]


# --- entries -------------------------------------------------------------------

def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _temp_path(directory: Path, key: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=directory)
    os.close(fd)
    return Path(name)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it."""
    tmp = _temp_path(path.parent, path.name.split(".")[0])
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def discard(directory: Path, key: str, suffix: str) -> None:
    """Remove the artifact and sidecar of ``key`` (the lock and source stay)."""
    for name in (f"{key}.json", f"{key}{suffix}"):
        (directory / name).unlink(missing_ok=True)


def store(directory: Path, key: str, suffix: str, artifact: Path, meta: dict) -> Path:
    """Move ``artifact`` (a file in ``directory``) into place as the entry of
    ``key`` and write its sidecar; returns the artifact's final path.  The
    caller holds the key's lock."""
    final = directory / f"{key}{suffix}"
    side = dict(meta, format=CACHE_FORMAT, key=key, sha256=_sha256_file(artifact),
                size=artifact.stat().st_size)
    os.chmod(artifact, 0o700)
    os.replace(artifact, final)
    write_atomic(directory / f"{key}.json", json.dumps(side, indent=1).encode())
    return final


def lookup(directory: Path, key: str, suffix: str) -> Path | None:
    """The artifact of ``key`` if present and its sidecar vouches for it.  A
    damaged entry (missing or unreadable sidecar, wrong checksum or size) is
    discarded, counted as ``corrupt`` and reported as absent."""
    art, side = directory / f"{key}{suffix}", directory / f"{key}.json"
    if not art.exists() and not side.exists():
        return None
    try:
        meta = json.loads(side.read_text())
        ok = (meta.get("format") == CACHE_FORMAT and meta.get("key") == key
              and meta.get("size") == art.stat().st_size
              and meta.get("sha256") == _sha256_file(art))
    except (OSError, ValueError, AttributeError):
        ok = False
    if ok:
        return art
    discard(directory, key, suffix)
    _count("corrupt")
    return None


def get_or_build(key: str, *, directory: Path | None, suffix: str,
                 build: Callable[[Path, Path], dict],
                 load: Callable[[Path], T]) -> T:
    """The value of ``key``: from the memo, else from disk, else built.

    ``build(directory, out)`` writes the artifact to the file ``out`` (any
    other file it writes in ``directory`` must be named by the key) and
    returns JSON-able metadata for the sidecar; it raises what it raises
    (``CompileError``).  ``load(path)`` raises ``OSError`` when the artifact
    cannot be loaded: a disk entry that does not load is rebuilt.  With
    ``directory=None`` the artifact goes to :func:`private_dir` and nothing
    is shared between processes.

    Raises :class:`CompileError` when a freshly built artifact does not load,
    :class:`PolycError` for an unusable cache directory."""
    value = _memo_get(key)
    if value is not None:
        return value
    if directory is None:
        directory = private_dir()
        with FileLock(directory / f"{key}.lock", mode=0o600):
            value = _build_and_load(directory, key, suffix, build, load)
    else:
        directory = ensure_cache_dir(directory)
        with FileLock(directory / f"{key}.lock", mode=0o600):
            value = _memo_get(key)   # another thread may have finished it
            if value is not None:
                return value
            value = _load_from_disk(directory, key, suffix, load)
            if value is None:
                value = _build_and_load(directory, key, suffix, build, load)
    with _lock:
        return _memo.setdefault(key, value)


def _load_from_disk(directory: Path, key: str, suffix: str, load: Callable[[Path], T]):
    path = lookup(directory, key, suffix)
    if path is None:
        return None
    try:
        value = load(path)
    except OSError:
        discard(directory, key, suffix)
        _count("corrupt")
        return None
    _count("disk_hits")
    return value


def _build_and_load(directory: Path, key: str, suffix: str,
                    build: Callable[[Path, Path], dict], load: Callable[[Path], T]) -> T:
    discard(directory, key, suffix)
    tmp = _temp_path(directory, key)
    try:
        meta = build(directory, tmp)
        path = store(directory, key, suffix, tmp, meta)
    finally:
        tmp.unlink(missing_ok=True)
    _count("builds")
    try:
        return load(path)
    except OSError as e:
        discard(directory, key, suffix)
        raise CompileError(f"built {path} but could not load it: {e}",
                           command=meta.get("command")) from e
