"""Cache entries are validated before they are loaded (issue 6, item 6).

Any flipped or truncated byte of an artifact or its sidecar, in 100 entries,
is detected: the entry is discarded, counted, warned about and rebuilt, never
loaded.  The same holds for the lowered-source entries of the pipeline.
Symbolic links in place of entries are refused, and an unsafe cache
directory (another user's, group/world-writable and not ours, read-only)
is replaced by a private temporary one with a warning instead of failing.
"""

from __future__ import annotations

import functools
import json
import os
import random
import stat
import warnings
from pathlib import Path

import pytest

from polyc import cache, cache_entry
from polyc.config import Config
from polyc.errors import CacheWarning

SUFFIX = ".bin"
N_ENTRIES = 100


pytestmark = pytest.mark.usefixtures("fresh_cache_state")


@functools.lru_cache(maxsize=None)
def payload(i: int) -> bytes:
    """The artifact of entry ``i``: a few KiB of deterministic bytes."""
    return random.Random(i).randbytes(2048 + 37 * i)


class Backend:
    """A build/load pair for :func:`cache.get_or_build` without a compiler:
    the artifact is :func:`payload`; loading reads it back and checks it."""

    def __init__(self):
        self.built: list[int] = []

    def get(self, directory: Path | None, i: int) -> bytes:
        key = f"{i:064x}"

        def build(d: Path, out: Path) -> dict:
            out.write_bytes(payload(i))
            self.built.append(i)
            return {"command": ["fake", str(i)]}

        def load(path: Path, meta: dict) -> bytes:
            data = path.read_bytes()
            assert data == payload(i), f"entry {i} loaded with wrong bytes"
            assert meta["command"] == ["fake", str(i)]
            return data

        return cache.get_or_build(key, directory=directory, suffix=SUFFIX,
                                  build=build, load=load)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".corrupting")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def flip(path: Path, rng: random.Random) -> str:
    data = bytearray(path.read_bytes())
    i = rng.randrange(len(data))
    data[i] ^= rng.randrange(1, 256)
    _replace(path, bytes(data))
    return f"flip byte {i} of {path.name}"


def truncate(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    n = rng.randrange(len(data))
    _replace(path, data[:n])
    return f"truncate {path.name} to {n} bytes"


def extend(path: Path, rng: random.Random) -> str:
    _replace(path, path.read_bytes() + bytes([rng.randrange(256)]))
    return f"append a byte to {path.name}"


CORRUPTIONS = [(flip, SUFFIX), (truncate, SUFFIX), (flip, ".json"), (truncate, ".json"),
               (extend, SUFFIX)]


def test_every_damaged_entry_is_detected_and_rebuilt(tmp_path):
    """100 entries, each damaged once (flip, truncate or extend the artifact
    or the sidecar): 100 detected, 0 loaded, 100 rebuilt with the right bytes."""
    directory = tmp_path / "cache"
    backend = Backend()
    for i in range(N_ENTRIES):
        backend.get(directory, i)
    assert sorted(backend.built) == list(range(N_ENTRIES))
    rng = random.Random(6)
    done = []
    for i in range(N_ENTRIES):
        how, suffix = CORRUPTIONS[i % len(CORRUPTIONS)]
        done.append(how(directory / f"{i:064x}{suffix}", rng))
    cache.clear_memory()
    cache.reset_stats()
    backend.built.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(N_ENTRIES):
            assert backend.get(directory, i) == payload(i)
    corrupt_warnings = [w for w in caught
                        if issubclass(w.category, CacheWarning) and "corrupt" in str(w.message)]
    s = cache.stats()
    detected = s.corrupt
    print(f"corruption detection: {detected}/{N_ENTRIES} detected, "
          f"{s.disk_hits} loaded from damaged entries, {s.builds} rebuilt")
    assert detected == N_ENTRIES, "undetected corruption"
    assert s.disk_hits == 0, "a damaged entry was loaded"
    assert sorted(backend.built) == list(range(N_ENTRIES))
    assert len(corrupt_warnings) == N_ENTRIES
    # the rebuilt entries are valid again: a new process would hit them
    cache.clear_memory()
    cache.reset_stats()
    for i in range(N_ENTRIES):
        backend.get(directory, i)
    assert cache.stats().disk_hits == N_ENTRIES and cache.stats().corrupt == 0


def test_every_single_byte_of_a_sidecar_is_covered(tmp_path):
    """Flip each byte of one sidecar in turn (masks alternating): every
    variant is refused; a variant that decodes to the same JSON (e.g. a space
    turned into a newline) is refused too, as the bytes must be canonical."""
    directory = tmp_path / "cache"
    Backend().get(directory, 7)
    side = directory / f"{7:064x}.json"
    original = side.read_bytes()
    undetected = []
    for pos in range(len(original)):
        for mask in ((0x01, 0x2A)[pos % 2],):
            data = bytearray(original)
            data[pos] ^= mask
            _replace(side, bytes(data))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CacheWarning)
                found = cache.lookup(directory, f"{7:064x}", SUFFIX)
            if found is not None:
                undetected.append((pos, mask))
            _replace(side, original)
            if found is None:   # the lookup discarded the artifact: restore it
                _replace(directory / f"{7:064x}{SUFFIX}", payload(7))
    assert undetected == []
    assert cache.lookup(directory, f"{7:064x}", SUFFIX) is not None


def test_artifact_without_sidecar_is_absent_not_loaded(tmp_path):
    """A build interrupted before its commit point (the sidecar) leaves an
    artifact that is silently rebuilt, never loaded."""
    directory = tmp_path / "cache"
    backend = Backend()
    backend.get(directory, 3)
    (directory / f"{3:064x}.json").unlink()
    _replace(directory / f"{3:064x}{SUFFIX}", b"half-written")
    cache.clear_memory()
    backend.built.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert backend.get(directory, 3) == payload(3)
    assert backend.built == [3] and cache.stats().corrupt == 0


def test_stale_temporary_files_of_a_killed_build_are_harmless(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    key = f"{5:064x}"
    (directory / f".{key}.abc123.tmp").write_bytes(b"leftover")
    (directory / f".{key}.json.tmp").write_bytes(b"{leftover")
    assert Backend().get(directory, 5) == payload(5)
    assert not (directory / f".{key}.json.tmp").exists()
    cache.clear_memory()
    assert Backend().get(directory, 5) == payload(5) and cache.stats().disk_hits == 1


# --- the lowered-source entries (polyc/pipeline.py) -------------------------------

def test_lowered_json_entries_are_validated(tmp_path):
    rng = random.Random(1)
    fmt = "polyc-lowered-test"
    docs = {f"{i:064x}": {"text": "x" * (50 + i), "entry": "polyc_kernel",
                          "params": ["N"], "tensors": ["A", "B"]} for i in range(N_ENTRIES)}
    for k, d in docs.items():
        cache.write_json_entry(tmp_path, f"{k}.lowered.json", d, key=k, fmt=fmt)
    for k, d in docs.items():
        assert cache.read_json_entry(tmp_path, f"{k}.lowered.json", key=k, fmt=fmt) == d
    for n, k in enumerate(docs):
        (flip if n % 2 else truncate)(tmp_path / f"{k}.lowered.json", rng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [cache.read_json_entry(tmp_path, f"{k}.lowered.json", key=k, fmt=fmt)
               for k in docs]
    assert got == [None] * N_ENTRIES
    assert sum(issubclass(w.category, CacheWarning) for w in caught) == N_ENTRIES
    assert cache.stats().corrupt == N_ENTRIES
    assert not list(tmp_path.glob("*.lowered.json")), "corrupt entries are removed"
    # an entry of another key (e.g. renamed) is not trusted either
    a, b = list(docs)[:2]
    cache.write_json_entry(tmp_path, f"{a}.lowered.json", docs[a], key=a, fmt=fmt)
    os.replace(tmp_path / f"{a}.lowered.json", tmp_path / f"{b}.lowered.json")
    with pytest.warns(CacheWarning, match="another key"):
        assert cache.read_json_entry(tmp_path, f"{b}.lowered.json", key=b, fmt=fmt) is None
    # another format (an older or newer polyc) is silently ignored, not deleted
    cache.write_json_entry(tmp_path, f"{a}.lowered.json", docs[a], key=a, fmt="other")
    assert cache.read_json_entry(tmp_path, f"{a}.lowered.json", key=a, fmt=fmt) is None
    assert (tmp_path / f"{a}.lowered.json").exists()


def test_pipeline_ignores_a_corrupt_or_linked_lowered_entry(tmp_path, monkeypatch):
    """End to end through ``compile_program``: a lowered source whose C text
    was altered on disk is not used (it would compile to a wrong kernel)."""
    pytest.importorskip("islpy")
    import numpy as np
    import programs

    from polyc import pipeline
    from polyc.backends.c.build import resolve_compiler
    from polyc.errors import ToolMissingError
    try:
        resolve_compiler(Config.from_env().cc)
    except ToolMissingError as e:
        pytest.skip(f"no C compiler: {e}")
    cfg = Config.from_env(cache_dir=str(tmp_path))
    pipeline._LOWERED.clear()
    k = pipeline.compile_program(programs.producer_consumer(), cfg)
    (entry,) = tmp_path.glob("*.lowered.json")
    doc = json.loads(entry.read_bytes())
    # a plausible tampering: the C text changes, the JSON stays well-formed
    # (a kernel compiled from it would compute something else)
    original = doc["payload"]["text"]
    doc["payload"]["text"] = original.replace("t_C[", "t_C[1 + ", 1)
    assert doc["payload"]["text"] != original
    bad = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    entry.write_bytes(bad)
    pipeline._LOWERED.clear()
    cache.clear_memory()
    calls = []
    real_lower = pipeline.lower
    monkeypatch.setattr(pipeline, "lower", lambda *a, **kw: calls.append(1) or real_lower(*a, **kw))
    with pytest.warns(CacheWarning, match="corrupt"):
        again = pipeline.compile_program(programs.producer_consumer(), cfg)
    assert calls == [1] and again.source == k.source
    A = np.arange(9, dtype="float64")
    np.testing.assert_allclose(again(A)[1], A * 2 + 1)
    # a symbolic link in place of the entry is refused and left alone
    (entry,) = tmp_path.glob("*.lowered.json")
    target = tmp_path / "elsewhere.json"
    os.replace(entry, target)
    entry.symlink_to(target)
    pipeline._LOWERED.clear()
    calls.clear()
    with pytest.warns(CacheWarning, match="symbolic link"):
        pipeline.compile_program(programs.producer_consumer(), cfg)
    assert calls == [1]


# --- unsafe entries and directories ----------------------------------------------

@pytest.mark.parametrize("name", [SUFFIX, ".json", ".lock"])
def test_symlinked_entry_is_refused(tmp_path, name):
    """A link in place of an entry's artifact, sidecar or lock is never
    followed (nor written through): the key is built privately, with a
    warning, and the link and its target stay untouched."""
    directory = tmp_path / "cache"
    backend = Backend()
    backend.get(directory, 1)
    key = f"{1:064x}"
    target = tmp_path / f"target{name}"
    os.replace(directory / f"{key}{name}", target)
    before = target.read_bytes()
    (directory / f"{key}{name}").symlink_to(target)
    cache.clear_memory()
    with pytest.warns(CacheWarning, match="symbolic link.*POLYC_CACHE_DIR"):
        assert backend.get(directory, 1) == payload(1)
    assert os.path.islink(directory / f"{key}{name}")
    assert target.read_bytes() == before
    assert cache.stats().fallbacks == 1 and cache.stats().disk_hits == 0


def test_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    """Simulated with a fake uid: a directory that is not ours is never used
    (nor chmod-ed), even if it holds a valid entry."""
    directory = tmp_path / "cache"
    backend = Backend()
    backend.get(directory, 2)
    directory.chmod(0o777)
    cache.clear_memory()
    backend.built.clear()
    monkeypatch.setattr(os, "getuid", lambda: os.stat(directory).st_uid + 4242)
    with pytest.warns(CacheWarning, match=r"belongs to user id \d+.*writable by others"):
        assert backend.get(directory, 2) == payload(2)
    assert backend.built == [2], "built privately, not loaded from the foreign directory"
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o777, "not ours to change"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown a directory")
def test_directory_really_owned_by_another_user_is_refused(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o775)
    os.chown(directory, 4242, 4242)
    backend = Backend()
    with pytest.warns(CacheWarning, match="belongs to user id 4242"):
        assert backend.get(directory, 4) == payload(4)
    assert cache.is_private(cache.usable_dir(directory)) and not list(directory.iterdir())


def test_loose_directory_of_ours_is_tightened(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir()
    directory.chmod(0o777)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        Backend().get(directory, 0)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700


def test_read_only_directory_falls_back(tmp_path, monkeypatch):
    """A directory we cannot write (read-only mount or permissions): warn,
    build privately.  As root, permissions do not bind, so the read-only
    mount is simulated through ``os.access``."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    directory.chmod(0o500)
    if os.geteuid() == 0:
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
            False if Path(p) == directory and mode & os.W_OK else real_access(p, mode, **kw)))
    try:
        with pytest.warns(CacheWarning, match="not writable.*POLYC_CACHE_DIR"):
            assert Backend().get(directory, 9) == payload(9)
        assert not list(directory.iterdir())
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o500, "left as the user set it"
    finally:
        directory.chmod(0o700)


def test_fallback_warns_once_per_directory(tmp_path):
    (tmp_path / "cache").write_text("a file")
    backend = Backend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(5):
            backend.get(tmp_path / "cache", 100 + i)
    assert sum(issubclass(w.category, CacheWarning) for w in caught) == 1
    assert cache.stats().fallbacks == 5


def test_library_loading_checks_the_file_it_hashed(tmp_path, monkeypatch):
    """If the artifact is swapped between the hash check and the load (a
    process outside the protocol), the value is not used."""
    directory = tmp_path / "cache"
    backend = Backend()
    backend.get(directory, 11)
    cache.clear_memory()
    key = f"{11:064x}"
    real_verify = cache_entry.verify

    def verify_then_swap(*a):
        found = real_verify(*a)
        os.replace(directory / f"{key}{SUFFIX}", tmp_path / "moved")
        (directory / f"{key}{SUFFIX}").write_bytes(payload(11))   # same bytes, other file
        return found

    monkeypatch.setattr(cache_entry, "verify", verify_then_swap)
    backend.built.clear()
    with pytest.warns(CacheWarning, match="changed while it was loaded"):
        assert backend.get(directory, 11) == payload(11)
    assert backend.built == [11]


def test_private_dir_is_0700():
    assert stat.S_IMODE(os.stat(cache.private_dir()).st_mode) == 0o700
    assert cache.is_private(cache.private_dir())


def test_fifo_in_place_of_an_entry_does_not_block(tmp_path):
    directory = tmp_path / "cache"
    backend = Backend()
    backend.get(directory, 12)
    key = f"{12:064x}"
    (directory / f"{key}.json").unlink()
    os.mkfifo(directory / f"{key}.json")
    cache.clear_memory()
    with pytest.warns(CacheWarning, match="not a regular file"):
        assert backend.get(directory, 12) == payload(12)
    os.mkfifo(tmp_path / "x.lowered.json")
    with pytest.warns(CacheWarning, match="not a regular file"):
        assert cache.read_json_entry(tmp_path, "x.lowered.json", key="x", fmt="f") is None


def test_disk_full_is_a_clear_error(tmp_path, monkeypatch):
    import errno

    from polyc.errors import PolycError

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(cache_entry, "store_entry", full)
    with pytest.raises(PolycError, match="No space left.*POLYC_CACHE_DIR"):
        Backend().get(tmp_path / "cache", 13)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix in (SUFFIX, ".json")]
