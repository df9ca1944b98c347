"""One entry of the kernel cache on disk (:mod:`polyc.cache`): the artifact
and its sealed sidecar, written so that an entry is published as one unit and
verified before anything loads it.

:func:`store_entry` moves a built artifact into place and writes the sidecar
last (the commit point); :func:`verify` reads the sidecar through
``O_NOFOLLOW`` and non-blocking opens, checks its own checksum, format and
key, and hashes the artifact; :func:`seal` and :func:`unseal` are the
sidecar's canonical JSON with a checksum of itself.  The protocol around
them (locks, the memo, fallbacks, warnings) is :mod:`polyc.cache`'s.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Bump when the entry layout or the meaning of the key changes.
CACHE_FORMAT = "polyc-cache-2"


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Open flags for reading an entry: never through a link, never blocking on
#: a FIFO planted in its place (``fstat`` then refuses anything irregular).
_O_READ = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _sha256_fd(fd: int) -> str:
    h = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return h.hexdigest()
        h.update(block)


def read_nofollow(path: Path) -> bytes:
    fd = os.open(path, _O_READ)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                return b"".join(chunks)
            chunks.append(block)
    finally:
        os.close(fd)


def temp_path(directory: Path, key: str) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=directory)
    os.close(fd)
    return Path(name)


def _fresh_file(path: Path) -> Path:
    """Create ``path`` empty (mode 0600, exclusively, never through a link),
    removing a leftover of an interrupted build first.  For names that only
    the holder of the key's lock writes."""
    path.unlink(missing_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                     0o600))
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file next to ``path``, then rename it
    (a symbolic link at ``path`` is replaced, never followed)."""
    tmp = temp_path(path.parent, path.name.split(".")[0])
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _canonical(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False).encode("ascii")


def seal(doc: dict) -> bytes:
    """``doc`` plus a ``checksum`` of itself, as canonical JSON bytes."""
    doc = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = hashlib.sha256(_canonical(doc)).hexdigest()
    return _canonical(doc)


def unseal(data: bytes) -> dict:
    """The document sealed by :func:`seal`; ``ValueError`` saying what is
    wrong when ``data`` is not exactly such bytes (any changed byte is)."""
    try:
        doc = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"unreadable ({e.__class__.__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("checksum"), str):
        raise ValueError("no checksum")
    try:
        body = {k: v for k, v in doc.items() if k != "checksum"}
        if hashlib.sha256(_canonical(body)).hexdigest() != doc["checksum"]:
            raise ValueError("checksum mismatch")
        if _canonical(doc) != data:
            raise ValueError("not in canonical form")
    except (TypeError, ValueError) as e:
        raise ValueError(str(e) or "invalid") from None
    return doc


def discard(directory: Path, key: str, suffix: str) -> None:
    """Remove the sidecar, then the artifact of ``key`` (the lock and source
    stay).  The sidecar goes first: without it the entry is absent."""
    for name in (f"{key}.json", f"{key}{suffix}"):
        try:
            (directory / name).unlink()
        except FileNotFoundError:
            pass
        except IsADirectoryError:   # not ours to remove; lookup refuses it
            pass


def store_entry(directory: Path, key: str, suffix: str, artifact: Path,
                meta: dict) -> tuple[Path, dict]:
    """:func:`store`, also returning the sidecar's document as written."""
    final = directory / f"{key}{suffix}"
    fd = os.open(artifact, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    try:
        digest, size = _sha256_fd(fd), os.fstat(fd).st_size
    finally:
        os.close(fd)
    side = dict(meta, format=CACHE_FORMAT, key=key, sha256=digest, size=size)
    data = seal(side)
    os.chmod(artifact, 0o700)
    (directory / f"{key}.json").unlink(missing_ok=True)
    os.replace(artifact, final)
    tmp = _fresh_file(directory / f".{key}.json.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, directory / f"{key}.json")     # the commit point
    finally:
        tmp.unlink(missing_ok=True)
    return final, unseal(data)


def store(directory: Path, key: str, suffix: str, artifact: Path, meta: dict) -> Path:
    """Move ``artifact`` (a file in ``directory``) into place as the entry of
    ``key`` and write its sidecar last; returns the artifact's final path.
    The caller holds the key's lock."""
    return store_entry(Path(directory), key, suffix, Path(artifact), meta)[0]


def unsafe_entry(directory: Path, key: str, suffix: str) -> str | None:
    """Why an entry of ``key`` must not be touched: a name that is a symbolic
    link or no regular file.  ``None`` when every name is absent or regular."""
    for name in (f"{key}{suffix}", f"{key}.json", f"{key}.lock", f"{key}.c"):
        try:
            st = os.lstat(directory / name)
        except FileNotFoundError:
            continue
        except OSError as e:
            return f"{directory / name} cannot be examined ({e})"
        if stat.S_ISLNK(st.st_mode):
            return f"cache entry {directory / name} is a symbolic link, which polyc refuses"
        if not stat.S_ISREG(st.st_mode):
            return f"cache entry {directory / name} is not a regular file"
    return None


@dataclass(frozen=True)
class Verified:
    path: Path
    meta: dict
    ident: tuple   # (device, inode, size, mtime) of the bytes that were hashed


def ident(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def verify(directory: Path, key: str, suffix: str) -> Verified | str | None:
    """The verified entry of ``key``; ``None`` when absent (no sidecar: never
    published, or interrupted before its commit point); else a string saying
    why the entry is corrupt."""
    art, side = directory / f"{key}{suffix}", directory / f"{key}.json"
    try:
        data = read_nofollow(side)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"sidecar unreadable: {e}"
    try:
        meta = unseal(data)
    except ValueError as e:
        return f"sidecar {e}"
    if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
        return "sidecar of another format or key"
    try:
        fd = os.open(art, _O_READ)
    except OSError as e:
        return f"artifact missing or unreadable: {e}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "artifact is not a regular file"
        if st.st_size != meta.get("size"):
            return f"artifact has {st.st_size} bytes, its sidecar says {meta.get('size')}"
        if _sha256_fd(fd) != meta.get("sha256"):
            return "artifact's sha256 differs from its sidecar's"
        return Verified(art, meta, ident(st))
    except OSError as e:
        return f"artifact unreadable: {e}"
    finally:
        os.close(fd)
