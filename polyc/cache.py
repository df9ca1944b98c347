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
    <key>.json   sidecar: format, key, sha256 and size of the artifact, the
                 backend's metadata (source hash, command, compiler output) and
                 a checksum of the sidecar itself; canonical compact JSON
    <key>.lock   the file lock that serializes builds of the key
    <key>.c      the source, written by the backend's build callback

Protocol.  Every process takes the in-process lock of the key, then the
file lock ``<key>.lock`` (``flock``: released by the kernel when its holder
dies, so a killed process never leaves a stale lock; waiting is bounded by
:data:`LOCK_TIMEOUT`).  The sidecar is the commit point of an entry: a build
first removes it, writes the artifact to a fresh temporary file
``.<key>.<random>.tmp`` and renames it into place, then writes the sidecar
(to ``.<key>.json.tmp``, renamed).  So an
entry is published as one unit: a process killed at any point leaves either
the old valid entry, or an artifact without sidecar (treated as absent and
rebuilt silently), never a sidecar that vouches for the wrong bytes.  Before
loading, the sidecar is checked (canonical bytes, its own checksum, format,
key) and the artifact is hashed through a descriptor opened with
``O_NOFOLLOW``; after loading, the path must still name the very file that
was hashed.  A damaged entry is discarded, counted as ``corrupt``, reported
with a :class:`~polyc.errors.CacheWarning` and rebuilt: it is never loaded.
Never modify a cached artifact in place: a process that has it loaded maps
that very file (replace it instead).

Safety.  The directory must be a directory of ours (one with looser
permissions is tightened to 0700) and writable; entries must be regular
files, never symbolic links.  Otherwise, and when the file lock cannot be
taken in time, polyc warns (:class:`~polyc.errors.CacheWarning`, naming
``POLYC_CACHE_DIR``) and builds in a private temporary directory of this
process instead of failing.

The lowered-source entries of ``polyc/pipeline.py`` (``<key>.lowered.json``)
and the fusion planner's answers (``<key>.feedback.json``,
:mod:`polyc.graph.feedback_memo`) go through :func:`write_json_entry` /
:func:`read_json_entry`: the same checksum, canonical-bytes and symlink rules.

Sources: loopy ``loopy/codegen/__init__.py`` (data-model version in the key),
jax ``test_util.py::assertCacheMisses`` (counters that tests read); the
process-group kill on timeout follows the ``subprocess`` documentation
(``start_new_session``, ``os.killpg``).
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from filelock import FileLock, Timeout

from . import __version__
from . import cache_entry as entry
from .cache_entry import CACHE_FORMAT, discard, store, write_atomic  # noqa: F401 (re-exported)
from .errors import CacheWarning, PolycError
from .process import run_process, run_quiet  # noqa: F401 (run_process re-exported)

#: Seconds a process waits for another one's build of the same key (the file
#: lock) before it gives up waiting, warns and builds privately.
LOCK_TIMEOUT = 600.0

_HOW = ("set POLYC_CACHE_DIR to a directory of your own (it is created with mode 0700), "
        "or POLYC_NO_DISK_CACHE=1 to build without a disk cache")

T = TypeVar("T")


# --- statistics and the in-memory memo ----------------------------------------

@dataclass(frozen=True)
class CacheStats:
    """Counters of this process since the last :func:`reset_stats`."""
    memory_hits: int = 0
    disk_hits: int = 0
    builds: int = 0
    corrupt: int = 0        # entries found damaged, discarded and rebuilt
    fallbacks: int = 0      # builds moved to the private directory (unsafe dir or entry)
    lock_timeouts: int = 0  # file locks not acquired within LOCK_TIMEOUT


_lock = threading.Lock()
_counts = {"memory_hits": 0, "disk_hits": 0, "builds": 0, "corrupt": 0,
           "fallbacks": 0, "lock_timeouts": 0}
_memo: dict[str, object] = {}
_key_locks: dict[str, threading.Lock] = {}


def _count(name: str) -> None:
    with _lock:
        _counts[name] += 1


def stats() -> CacheStats:
    """The counters of this process (memory hits, disk hits, builds, corrupt,
    fallbacks, lock timeouts)."""
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


def forget(key: str) -> None:
    """Forget the memo of ``key`` only (its artifact vanished from disk: the
    next lookup rebuilds it).  A loaded library stays loaded."""
    with _lock:
        _memo.pop(key, None)


def _memo_get(key: str):
    with _lock:
        value = _memo.get(key)
        if value is not None:
            _counts["memory_hits"] += 1
        return value


def _key_lock(key: str) -> threading.Lock:
    """The in-process lock of ``key``: threads of one process build a key once."""
    with _lock:
        return _key_locks.setdefault(key, threading.Lock())


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=4)


# --- the key -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _compiler_version(path: str, mtime_ns: int) -> str:
    out = run_quiet([path, "--version"]).strip()
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
        out = run_quiet([compiler, "-march=native", "-Q", "--help=target"])
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
    ours loses its group and world permissions (0777 becomes 0700; a
    read-only 0500 stays read-only and is refused as not writable).  ``path``
    itself may be a symbolic link to such a directory.

    Raises :class:`PolycError` when ``path`` is not a directory, belongs to
    another user, cannot be created or tightened, or is not writable.
    :func:`usable_dir` turns these errors into a warning and a fallback."""
    path = Path(path)
    try:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:   # a file (or a dangling link) of that name
            pass
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise PolycError(f"cache directory {path} is not a directory; {_HOW}")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            loose = " and is writable by others" if st.st_mode & 0o022 else ""
            raise PolycError(f"cache directory {path} belongs to user id {st.st_uid}, "
                             f"not to you ({os.getuid()}){loose}; polyc loads code from "
                             f"it, so it refuses to use it; {_HOW}")
        if st.st_mode & 0o077:   # group/world bits: tighten (0777 -> 0700)
            os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PolycError(f"cache directory {path} is not writable (read-only "
                             f"file system or permissions); {_HOW}")
    except OSError as e:
        raise PolycError(f"cannot prepare cache directory {path}: {e}; {_HOW}") from e
    return path


_private: list[Path] = []
_warned: set[str] = set()


def private_dir() -> Path:
    """This process's own temporary directory (mode 0700, in ``TMPDIR``), used
    when ``Config.disk_cache`` is off or the cache directory is unsafe;
    removed when the process exits.  Raises :class:`PolycError` when it
    cannot be created."""
    with _lock:
        if not _private:
            try:
                _private.append(Path(tempfile.mkdtemp(prefix="polyc-")))
            except OSError as e:
                raise PolycError(
                    f"cannot create a private temporary directory in "
                    f"{tempfile.gettempdir()}: {e}; set TMPDIR to a writable directory, "
                    f"or POLYC_CACHE_DIR to a cache directory of your own") from e
            atexit.register(_remove_private, _private[0], os.getpid())
        return _private[0]


def _remove_private(path: Path, pid: int) -> None:
    if os.getpid() == pid:   # not in a forked child: the directory is its parent's
        shutil.rmtree(path, True)


def _after_fork_in_child() -> None:
    """A forked child starts with fresh locks (a thread of the parent may
    have held one) and makes its own private directory when it needs one."""
    global _lock
    _lock = threading.Lock()
    _key_locks.clear()
    _private.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def is_private(directory: Path) -> bool:
    """Whether ``directory`` is this process's :func:`private_dir`."""
    with _lock:
        return bool(_private) and Path(directory) == _private[0]


def _fall_back(reason: str) -> Path:
    """Count a fallback, warn (once per reason and process) and return the
    private directory."""
    private = private_dir()
    _count("fallbacks")
    with _lock:
        seen = reason in _warned
        _warned.add(reason)
    if not seen:
        _warn(f"polyc: {reason}; building in the private temporary directory {private} "
              f"instead (kernels are neither shared nor kept). To fix: {_HOW}.")
    return private


def usable_dir(path: Path) -> Path:
    """:func:`ensure_cache_dir` of ``path``, or, when that refuses it, the
    :func:`private_dir` with a :class:`~polyc.errors.CacheWarning` (once per
    directory and reason).  Raises only when no private directory can be made."""
    try:
        return ensure_cache_dir(path)
    except PolycError as e:
        return _fall_back(str(e).split(f"; {_HOW}")[0])


def _report_corrupt(directory: Path, key: str, suffix: str, why: str) -> None:
    discard(directory, key, suffix)
    _count("corrupt")
    _warn(f"polyc: cache entry {key}{suffix} in {directory} is corrupt ({why}); "
          f"it was discarded and is rebuilt, never loaded")


def lookup(directory: Path, key: str, suffix: str) -> Path | None:
    """The artifact of ``key`` if present and its sidecar vouches for it.  A
    damaged entry (unreadable or altered sidecar, wrong checksum or size) is
    discarded, counted as ``corrupt``, reported with a
    :class:`~polyc.errors.CacheWarning` and reported as absent."""
    found = entry.verify(Path(directory), key, suffix)
    if isinstance(found, str):
        _report_corrupt(Path(directory), key, suffix, found)
        return None
    return None if found is None else found.path


# --- the file lock ---------------------------------------------------------------

class _EntryLock:
    """An exclusive lock on ``<key>.lock`` with a timeout (``filelock``: an
    ``flock`` that the kernel releases when its holder dies).  A lock path that
    is a symbolic link is refused (``OSError``); the file is never removed."""

    def __init__(self, path: Path):
        self.path = path
        self._lock: FileLock | None = None

    def acquire(self, timeout: float) -> bool:
        if self.path.is_symlink():
            raise OSError(errno.ELOOP, "lock file is a symbolic link", str(self.path))
        self._lock = FileLock(str(self.path), mode=0o600)
        try:
            self._lock.acquire(timeout=timeout)
        except Timeout:
            return False
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


# --- the protocol ----------------------------------------------------------------

def get_or_build(key: str, *, directory: Path | None, suffix: str,
                 build: Callable[[Path, Path], dict],
                 load: Callable[[Path, dict], T],
                 lock_timeout: float | None = None) -> T:
    """The value of ``key``: from the memo, else from disk, else built.

    ``build(directory, out)`` writes the artifact to the file ``out`` (any
    other file it writes in ``directory`` must be named by the key) and
    returns JSON-able metadata for the sidecar; it raises what it raises
    (``CompileError``).  ``load(path, meta)`` (``meta``: the sidecar) raises
    ``OSError`` when the artifact cannot be loaded: a disk entry that does not
    load is rebuilt; other exceptions propagate.  With ``directory=None`` the
    artifact goes to :func:`private_dir` and nothing is shared between
    processes.  Threads of one process build a key once (in-process lock);
    processes serialize on the key's file lock, waiting at most
    ``lock_timeout`` (default :data:`LOCK_TIMEOUT`) seconds before they warn
    and build privately.  An unsafe directory or entry also falls back to the
    private directory with a :class:`~polyc.errors.CacheWarning`.

    Raises :class:`~polyc.errors.LoadError` (a ``CompileError``) when a
    freshly built artifact does not load, :class:`PolycError` when not even a
    private directory can be made."""
    value = _memo_get(key)
    if value is not None:
        return value
    with _key_lock(key):
        value = _memo_get(key)   # another thread may have finished it
        if value is not None:
            return value
        value = _lookup_or_build(key, directory, suffix, build, load,
                                 LOCK_TIMEOUT if lock_timeout is None else lock_timeout)
        with _lock:
            _memo[key] = value
        return value


def _lookup_or_build(key, directory, suffix, build, load, lock_timeout):
    if directory is None:
        return _build_and_load(private_dir(), key, suffix, build, load)
    directory = usable_dir(directory)
    if is_private(directory):
        return _build_and_load(directory, key, suffix, build, load)
    unsafe = entry.unsafe_entry(directory, key, suffix)
    if unsafe:
        return _build_and_load(_fall_back(unsafe), key, suffix, build, load)
    lock = _EntryLock(directory / f"{key}.lock")
    try:
        acquired = lock.acquire(lock_timeout)
    except OSError as e:
        private = _fall_back(f"cannot take the lock {lock.path} ({e})")
        return _build_and_load(private, key, suffix, build, load)
    if not acquired:
        _count("lock_timeouts")
        private = _fall_back(f"another process has held {lock.path} for more than "
                             f"{lock_timeout:g} s (cache.LOCK_TIMEOUT)")
        return _build_and_load(private, key, suffix, build, load)
    try:
        value = _load_from_disk(directory, key, suffix, load)
        if value is None:
            value = _build_and_load(directory, key, suffix, build, load)
        return value
    finally:
        lock.release()


def _load_from_disk(directory: Path, key: str, suffix: str, load: Callable):
    found = entry.verify(directory, key, suffix)
    if found is None:
        return None
    if isinstance(found, str):
        _report_corrupt(directory, key, suffix, found)
        return None
    try:
        value = load(found.path, found.meta)
    except OSError as e:
        _report_corrupt(directory, key, suffix, f"it does not load: {e}")
        return None
    try:
        same = entry.ident(os.lstat(found.path)) == found.ident
    except OSError:
        same = False
    if not same:   # replaced behind the lock's back between hash and load
        _report_corrupt(directory, key, suffix, "the file changed while it was loaded")
        return None
    _count("disk_hits")
    return value


def _build_and_load(directory: Path, key: str, suffix: str,
                    build: Callable[[Path, Path], dict], load: Callable):
    tmp = None
    try:
        discard(directory, key, suffix)
        # a unique name: the compiler of a killed process may still be writing
        # to the temporary file it was given (it outlives its parent)
        tmp = entry.temp_path(directory, key)
        meta = build(directory, tmp)
        path, side = entry.store_entry(directory, key, suffix, tmp, meta)
    except OSError as e:
        raise PolycError(f"cannot write the cache entry {key}{suffix} in {directory}: {e}; "
                         f"free some space there, or {_HOW}") from e
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    _count("builds")
    try:
        return load(path, side)
    except OSError as e:
        discard(directory, key, suffix)
        from .errors import LoadError
        raise LoadError(f"built {path} but could not load it: {e}",
                        command=meta.get("command")) from e


# --- JSON entries (the lowered-source cache of polyc/pipeline.py) ---------------

def write_json_entry(directory: Path, name: str, payload: dict, *, key: str,
                     fmt: str) -> None:
    """Write ``payload`` as the sealed entry ``directory/name`` (format,
    key, checksum; atomically renamed into place, replacing and never
    following a link).  Raises ``OSError`` when it cannot be written."""
    write_atomic(Path(directory) / name,
                 entry.seal({"format": fmt, "key": key, "payload": payload}))


def read_json_entry(directory: Path, name: str, *, key: str, fmt: str) -> dict | None:
    """The payload written by :func:`write_json_entry`, or ``None``: when
    absent or of another format (silently), when it is a link or no regular
    file (refused, with a warning, left alone), or when damaged (counted as
    ``corrupt``, removed, with a warning)."""
    path = Path(directory) / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        _warn(f"polyc: cache entry {path} is {what}; polyc refuses it and recomputes")
        return None
    try:
        doc = entry.unseal(entry.read_nofollow(path))
        if doc.get("format") != fmt:
            return None
        if doc.get("key") != key or not isinstance(doc.get("payload"), dict):
            raise ValueError("of another key")
    except (OSError, ValueError) as e:
        try:
            path.unlink()
        except OSError:
            pass
        _count("corrupt")
        _warn(f"polyc: cache entry {path} is corrupt ({e}); it was discarded and is "
              f"recomputed")
        return None
    return doc["payload"]
