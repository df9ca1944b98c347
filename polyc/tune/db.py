"""The tuning database: append-only JSON lines.

One file, ``<cache dir>/tuning.jsonl`` (:meth:`Config.resolved_cache_dir`),
one record per line::

    {"format": "polyc-tune-1", "id": HEX, "time": UNIX, "key": KEYHASH,
     "keyinfo": {...}, "kind": "sample" | "failure" | "best", ...,
     "sum": SHA256_PREFIX}

``keyinfo`` is what a record is valid for: the program's fingerprint
(:func:`polyc.schedule.recipe.program_fingerprint`), the shape class (an isl
set over the size parameters, in isl's text; ``"all"`` for every size the
program accepts), the machine (CPU model, a hash of its feature flags, core
count), the toolchain (the C compiler's version), the target and polyc's
version; ``key`` is its hash.  ``sum`` seals the rest of the line, so a torn
or edited line is detected.

Writers append whole lines under a ``filelock`` lock beside the file, so
concurrent tuning sessions (and processes) never interleave; readers skip a
line that does not parse, has another format or a wrong seal, with a
:class:`TuningWarning` naming the line -- nothing is loaded blindly.  Every
sample and failure is kept; :meth:`Database.best` returns the newest
``best`` record of a key, which :func:`polyc.pipeline.compile_program` uses
when ``Config.use_tuned`` is set.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import uuid
import warnings
from pathlib import Path

from ..errors import PolycError, PolycWarning

FORMAT = "polyc-tune-1"
FILENAME = "tuning.jsonl"
#: The shape class of records that hold for every size the program accepts.
ALL_SIZES = "all"


class TuningWarning(PolycWarning):
    """A tuning database line was skipped (corrupt, foreign, another format)
    or a recorded recipe no longer applies to the program."""


def _canonical(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _seal(doc: dict) -> str:
    return hashlib.sha256(_canonical(doc).encode()).hexdigest()[:24]


@functools.lru_cache(maxsize=None)
def machine() -> dict:
    """This machine as the database keys it: CPU model name, a hash of the
    CPU feature flags, and the cores this process may use."""
    from ..cache import cpu_features
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip() in ("model name", "Model", "cpu model"):
                    model = value.strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cores = os.cpu_count() or 1
    feats = hashlib.sha256(cpu_features().encode()).hexdigest()[:16]
    return {"cpu": model, "features": feats, "cores": cores}


def key_info(program, config, shape_class: str = ALL_SIZES, legacy: bool = False) -> dict:
    """What a record of ``program`` tuned under ``config`` is valid for.
    ``legacy``: keyed by the program's fingerprint with its name, as
    records were before a renamed definition kept its records
    (:func:`polyc.schedule.recipe.legacy_fingerprint`)."""
    from .. import __version__
    from ..cache import compiler_version
    from ..schedule.recipe import legacy_fingerprint, program_fingerprint
    fp = legacy_fingerprint(program) if legacy else program_fingerprint(program)
    return {"program": fp, "name": program.name,
            "class": shape_class, "machine": machine(),
            "toolchain": compiler_version(config.cc), "target": config.target,
            "polyc": __version__}


def key_of(info: dict) -> str:
    """The hash of :func:`key_info`'s dict, without the program's name."""
    return _seal({k: v for k, v in info.items() if k != "name"})


def family_of(info: dict) -> str:
    """The hash of :func:`key_info`'s dict without the program's name and the
    shape class: the records of every class of one program on one machine
    and toolchain share it."""
    return _seal({k: v for k, v in info.items() if k not in ("name", "class")})


#: What a user can do about a database that cannot be written.
WRITABLE_HINT = ("; pass db= a writable file, point POLYC_CACHE_DIR at a writable "
                 "directory, or tune with record=False")


class Database:
    """The records under ``path`` (default: ``tuning.jsonl`` in ``config``'s
    cache directory)."""

    def __init__(self, path: str | os.PathLike | None = None, config=None):
        if path is None:
            from ..config import Config
            config = config or Config.from_env()
            path = Path(config.resolved_cache_dir()) / FILENAME
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"<polyc.tune.Database {self.path}>"

    # -------------------------------------------------------------- writing
    def append(self, records: list[dict]) -> list[dict]:
        """Seal and append ``records`` (each needs ``key``, ``keyinfo`` and
        ``kind``); returns them as written.  Raises :class:`PolycError` when
        the file cannot be written."""
        from filelock import FileLock
        lines, out = [], []
        for r in records:
            doc = {"format": FORMAT, "id": r.get("id") or uuid.uuid4().hex,
                   "time": r.get("time") or time.time(), **r}
            doc.pop("sum", None)
            doc["sum"] = _seal(doc)
            out.append(doc)
            lines.append(_canonical(doc) + "\n")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(self.path) + ".lock", timeout=60):
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT
                             | getattr(os, "O_NOFOLLOW", 0), 0o600)
                try:
                    # a torn last line (a writer killed mid-line, a hand edit)
                    # must not swallow the first record appended after it
                    size = os.fstat(fd).st_size
                    torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                    os.write(fd, ("\n" if torn else "").encode() + "".join(lines).encode())
                finally:
                    os.close(fd)
        except OSError as e:
            raise PolycError(f"cannot write the tuning database {self.path}: "
                             f"{e.strerror or e}{WRITABLE_HINT}") from None
        _read.cache_clear()
        return out

    def check_writable(self) -> None:
        """Raise :class:`PolycError` unless records can be appended to the
        file (and its lock file created): :func:`polyc.tune.tune` checks this
        before it measures anything, so that an unwritable path does not end a
        session after its first measurements.  Creates the directory and an
        empty file when they are missing."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for p in (self.path, Path(str(self.path) + ".lock")):
                os.close(os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                 | getattr(os, "O_NOFOLLOW", 0), 0o600))
        except OSError as e:
            raise PolycError(f"cannot write the tuning database {self.path}: "
                             f"{e.strerror or e}{WRITABLE_HINT}") from None

    # -------------------------------------------------------------- reading
    def records(self, key: str | None = None, kind: str | None = None) -> list[dict]:
        """Every valid record (of ``key`` and ``kind`` when given), oldest
        first; bad lines are skipped with a :class:`TuningWarning`."""
        try:
            st = self.path.stat()
        except OSError:
            return []
        recs, bad = _read(str(self.path), st.st_mtime_ns, st.st_size)
        for line_no, why in bad:
            warnings.warn(f"tuning database {self.path}, line {line_no}: {why}; "
                          f"skipped", TuningWarning, stacklevel=2)
        return [r for r in recs if (key is None or r["key"] == key)
                and (kind is None or r["kind"] == kind)]

    def best(self, key: str) -> dict | None:
        """The newest ``best`` record of ``key``, or ``None``."""
        found = self.records(key, "best")
        return found[-1] if found else None

    def class_bests(self, family: str, canon=None) -> dict[str, dict]:
        """The newest ``best`` record of each shape class of ``family``
        (:func:`family_of`), by class text.  ``canon``: a function from a
        recorded class text to the class's key (its canonical text,
        :func:`polyc.versioned.canonical_text`), so that the records of one
        class written in several spellings (older databases keyed classes
        by the text as given) count as one class."""
        out: dict[str, dict] = {}
        for r in self.records(kind="best"):
            if family_of(r["keyinfo"]) == family:
                text = r["keyinfo"].get("class", ALL_SIZES)
                out[canon(text) if canon is not None else text] = r
        return out

    def keys(self) -> dict[str, dict]:
        """``key -> keyinfo`` of every key with records."""
        return {r["key"]: r["keyinfo"] for r in self.records()}

    # ----------------------------------------------------- export / import
    def export(self, path: str | os.PathLike, keys=None) -> int:
        """Write the records (of ``keys``) to ``path`` as JSON lines;
        returns how many.  Raises :class:`PolycError` when ``path`` cannot
        be written."""
        recs = [r for r in self.records() if keys is None or r["key"] in keys]
        try:
            Path(path).write_text("".join(_canonical(r) + "\n" for r in recs))
        except OSError as e:
            raise PolycError(f"cannot write {path}: {e.strerror or e}") from None
        return len(recs)

    def import_(self, path: str | os.PathLike) -> tuple[int, int]:
        """Append the valid records of ``path`` not already here (by id);
        returns ``(added, skipped)``.  A record from another machine is kept
        under its own key: :meth:`best` on this machine never returns it."""
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise PolycError(f"cannot read {path}: {e.strerror or e}") from None
        recs, bad = _parse(text)
        for line_no, why in bad:
            warnings.warn(f"{path}, line {line_no}: {why}; skipped", TuningWarning,
                          stacklevel=2)
        have = {r["id"] for r in self.records()}
        new = [r for r in recs if r["id"] not in have]
        if new:
            self.append(new)
        return len(new), len(bad) + len(recs) - len(new)


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> tuple[list[dict], list[tuple[int, str]]]:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return [], []
    # a last line without its newline is being appended right now (readers take
    # no lock): not a bad line; once a later append follows it, it is judged
    return _parse(text[:text.rfind("\n") + 1])


_REQUIRED = {"format": str, "id": str, "key": str, "keyinfo": dict, "kind": str,
             "sum": str}


def _parse(text: str) -> tuple[list[dict], list[tuple[int, str]]]:
    recs: list[dict] = []
    bad: list[tuple[int, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            bad.append((n, f"not JSON ({e.msg})"))
            continue
        if not isinstance(doc, dict):
            bad.append((n, "not a record"))
            continue
        wrong = [k for k, t in _REQUIRED.items() if not isinstance(doc.get(k), t)]
        if wrong:
            bad.append((n, f"missing or mistyped field(s) {', '.join(wrong)}"))
            continue
        if doc["format"] != FORMAT:
            bad.append((n, f"format {doc['format']!r}, expected {FORMAT!r}"))
            continue
        body = {k: v for k, v in doc.items() if k != "sum"}
        if _seal(body) != doc["sum"]:
            bad.append((n, "its checksum does not match (a torn or edited line)"))
            continue
        if doc["kind"] not in ("sample", "failure", "best"):
            bad.append((n, f"unknown kind {doc['kind']!r}"))
            continue
        recs.append(doc)
    return recs, bad
