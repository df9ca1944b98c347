"""Build step of the C backend: C source text -> a loaded shared library.

Takes the source text produced by ``backends/c/emit.py`` and a
:class:`polyc.config.Config`; returns a :class:`Library` (path, cache key, the
``ctypes.CDLL``).  Compiles with the system compiler (``Config.cc``, from
``CC``/``POLYC_CC``) and ``Config.cflags`` (``-fopenmp`` by default: the
library then depends on libgomp, which the dynamic loader finds by itself),
through :mod:`polyc.cache`: one build per key across processes, memoised per
process.  Thread counts are the runtime's business (``Config.num_threads``);
nothing here sets them.

Sources: the subprocess/ctypes usage follows the Python documentation;
loopy's ``loopy/target/c/c_execution.py`` builds and loads C the same way.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from polyc import cache
from polyc.config import Config
from polyc.errors import CompileError, ToolMissingError

SUFFIX = ".so"
_INSTALL_HINT = ("set CC or POLYC_CC (Config.cc) to a C compiler, "
                 "or install one (Debian/Ubuntu: apt-get install gcc)")


@dataclass(frozen=True, eq=False)
class Library:
    """A loaded shared library built by :func:`build_library`.

    ``path`` is the file it was loaded from, ``key`` its cache key (hex sha256),
    ``cdll`` the ``ctypes.CDLL`` and ``command`` the compiler argv that built
    it (as recorded when it was built)."""
    path: Path
    key: str
    cdll: ctypes.CDLL
    command: tuple[str, ...] = ()

    def function(self, name: str, argtypes: Sequence, restype=None):
        """A fresh ctypes function object for the symbol ``name`` with
        ``argtypes`` and ``restype`` set (fresh, so two callers never share
        settings).  Raises ``AttributeError`` if the library lacks ``name``,
        which means the emitter and its caller disagree (a polyc bug)."""
        try:
            fn = self.cdll[name]
        except AttributeError as e:
            raise AttributeError(f"{self.path} defines no function {name!r}") from e
        fn.argtypes = list(argtypes)
        fn.restype = restype
        return fn


def resolve_compiler(cc: str) -> list[str]:
    """The compiler argv prefix for ``Config.cc``: ``[resolved path]``, or for
    a command with arguments such as ``"ccache gcc"`` the path of its first
    word followed by the rest.  Raises :class:`ToolMissingError` naming
    CC/POLYC_CC and what to install when nothing executable is found."""
    path = shutil.which(cc)
    if path:
        return [os.path.abspath(path)]
    try:
        words = shlex.split(cc)
    except ValueError:
        words = []
    first = shutil.which(words[0]) if len(words) > 1 else None
    if first:
        return [os.path.abspath(first), *words[1:]]
    raise ToolMissingError(f"C compiler {cc!r} not found (Config.cc); {_INSTALL_HINT}")


def library_key(source: str, *, config: Config) -> str:
    """The cache key :func:`build_library` uses for ``source`` under ``config``.
    Raises :class:`ToolMissingError` like :func:`resolve_compiler`."""
    return cache.make_key(source, compiler=resolve_compiler(config.cc),
                          flags=config.cflags)


def build_library(source: str, *, config: Config) -> Library:
    """Compile ``source`` into a shared library and load it, or return the one
    already built for the same key (memory memo, then the disk cache unless
    ``config.disk_cache`` is off, in which case it builds into a private
    temporary directory).

    Runs ``[*cc, *config.cflags, "-o", <tmp>, <dir>/<key>.c]`` with
    ``shell=False``; the source file stays next to the library for inspection.

    Raises :class:`ToolMissingError` when the compiler is missing,
    :class:`CompileError` (with ``command`` and ``stderr``) when it fails or the
    result does not load, :class:`polyc.errors.PolycError` for an unusable
    cache directory."""
    compiler = resolve_compiler(config.cc)
    flags = list(config.cflags)
    key = cache.make_key(source, compiler=compiler, flags=flags)

    def build(directory: Path, out: Path) -> dict:
        src = directory / f"{key}.c"
        cache.write_atomic(src, source.encode("utf-8"))
        argv = [*compiler, *flags, "-o", str(out), str(src)]
        return _compile(argv, source=source, src=src)

    def load(path: Path) -> Library:
        cdll = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        return Library(path=path, key=key, cdll=cdll, command=_recorded_command(path))

    directory = config.resolved_cache_dir() if config.disk_cache else None
    return cache.get_or_build(key, directory=directory, suffix=SUFFIX,
                              build=build, load=load)


def _compile(argv: list[str], *, source: str, src: Path) -> dict:
    try:
        proc = subprocess.run(argv, shell=False, capture_output=True)
    except OSError as e:   # vanished, not executable, ...
        raise ToolMissingError(f"cannot run the C compiler {argv[0]!r}: {e}; "
                               f"{_INSTALL_HINT}", command=argv) from e
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        raise CompileError(f"the C compiler failed (exit status {proc.returncode}) "
                           f"on generated source {src}", command=argv, stderr=stderr)
    return {"command": argv, "compiler_output": stderr,
            "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest()}


def _recorded_command(path: Path) -> tuple[str, ...]:
    try:
        return tuple(json.loads(path.with_suffix(".json").read_text())["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()
