"""Build step of the C backend: C source text -> a loaded shared library.

Takes the source text produced by ``backends/c/emit.py`` and a
:class:`polyc.config.Config`; returns a :class:`Library` (path, cache key, the
``ctypes.CDLL``).  Compiles with the system compiler (``Config.cc``, from
``CC``/``POLYC_CC``) and :func:`compile_flags` (``Config.cflags``,
``-fopenmp`` by default: the library then depends on libgomp, which the
dynamic loader finds by itself; plus the sanitizer flags of
``Config.sanitize``), through :mod:`polyc.cache`: one build per key across
processes, memoised per process.  The compiler runs at most
``Config.compile_timeout`` seconds (``POLYC_COMPILE_TIMEOUT``).  Thread counts
are the runtime's business (``Config.num_threads``); nothing here sets them.

Sanitized execution.  ``Config.sanitize=("address", "undefined")``
(``POLYC_SANITIZE=address,undefined``) builds with ``-fsanitize=address,undefined
-fno-sanitize-recover=all -fno-omit-frame-pointer -g``: any sanitizer report
aborts the process.  AddressSanitizer's runtime must be the first library of
the process, so Python itself must be started with it preloaded::

    LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libstdc++.so.6)" \
    ASAN_OPTIONS=detect_leaks=0 python ...

(``detect_leaks=0``: the interpreter itself keeps memory until exit;
libstdc++ because ASan's ``__cxa_throw`` interceptor aborts at islpy's first
C++ exception when libstdc++ is loaded after it).  The compiler runs without
these preloads.
:func:`sanitizer_env` returns exactly these variables for a subprocess.
Loading a sanitized library without them would abort the interpreter, so
:func:`build_library` checks first and raises
:class:`~polyc.errors.SanitizerError` naming them.  UndefinedBehaviorSanitizer
alone needs no preload.

Sources: the subprocess/ctypes usage follows the Python documentation;
loopy's ``loopy/target/c/c_execution.py`` builds and loads C the same way.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from polyc import cache
from polyc.backends.c import intrinsics
from polyc.config import Config
from polyc.errors import (
    CompileError,
    CompileTimeoutError,
    LoadError,
    SanitizerError,
    ToolMissingError,
)
from polyc.process import run_process
from polyc.threads import apply_wait_policy, gemm_on_team

log = logging.getLogger(__name__)

SUFFIX = ".so"
_INSTALL_HINT = ("set CC or POLYC_CC (Config.cc) to a C compiler, "
                 "or install one (Debian/Ubuntu: apt-get install gcc)")

#: Sanitizers whose runtime must be loaded before anything else in the
#: process: name -> (runtime library file names to ask the compiler for, a
#: symbol the runtime defines).  The clang names follow compiler-rt.
_PRELOADED_RUNTIMES = {
    "address": (("libasan.so", "libclang_rt.asan-x86_64.so",
                 "libclang_rt.asan-aarch64.so"), "__asan_init"),
    "thread": (("libtsan.so", "libclang_rt.tsan-x86_64.so",
                "libclang_rt.tsan-aarch64.so"), "__tsan_init"),
    "hwaddress": (("libhwasan.so", "libclang_rt.hwasan-aarch64.so"), "__hwasan_init"),
    "leak": (("liblsan.so", "libclang_rt.lsan-x86_64.so"), "__lsan_init"),
}


@dataclass(frozen=True, eq=False)
class Library:
    """A loaded shared library built by :func:`build_library`.

    ``path`` is the file it was loaded from, ``key`` its cache key (hex sha256),
    ``cdll`` the ``ctypes.CDLL``, ``command`` the compiler argv that built
    it (as recorded when it was built) and ``needs`` the libraries it links
    (the intrinsics library), loaded before it and kept alive with it."""
    path: Path
    key: str
    cdll: ctypes.CDLL
    command: tuple[str, ...] = ()
    needs: tuple["Library", ...] = ()

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


def sanitize_flags(sanitize: Sequence[str]) -> list[str]:
    """The compiler flags of ``Config.sanitize``: none when empty, else
    ``-fsanitize=<names> -fno-sanitize-recover=all -fno-omit-frame-pointer -g``."""
    if not sanitize:
        return []
    return [f"-fsanitize={','.join(sanitize)}", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer", "-g"]


#: Libraries every kernel links, after its source (``--as-needed`` linkers
#: drop a library named before the objects that use it): libm, whose GNU
#: linker script also brings in glibc's vector math library (libmvec) for
#: the SIMD variants of ``expf``/``logf``/... that vectorised loops call.
LINK_LIBS = ("-lm",)


def compile_flags(config: Config) -> list[str]:
    """Every flag :func:`build_library` passes: ``Config.cflags`` then
    :func:`sanitize_flags`.  All of them enter the cache key."""
    return [*config.cflags, *sanitize_flags(config.sanitize)]


def library_key(source: str, *, config: Config) -> str:
    """The cache key :func:`build_library` uses for ``source`` under ``config``
    (a source that links the intrinsics library: with that library's key;
    nothing is built).  Raises :class:`ToolMissingError` like
    :func:`resolve_compiler`."""
    compiler, flags = resolve_compiler(config.cc), compile_flags(config)
    if intrinsics.LINK_MARK in source:
        flags = [*flags, f"polyc-intrinsics={intrinsics_key(config=config)}"]
    return _key(source, compiler, flags)


def intrinsics_key(*, config: Config) -> str:
    """The cache key of :func:`intrinsics_library` under ``config``, without
    building anything: the library's source, the compiler and its version, the
    flags, the CPU's features and polyc's version."""
    return _key(intrinsics.library_source(), resolve_compiler(config.cc),
                compile_flags(config))


def _key(source: str, compiler: list[str], flags: list[str]) -> str:
    return cache.make_key(source, compiler=compiler, flags=[*flags, *LINK_LIBS])


@functools.lru_cache(maxsize=None)
def _print_file_name(compiler: str, name: str) -> str | None:
    try:
        out = run_process([compiler, f"-print-file-name={name}"], timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    path = out.stdout.decode("utf-8", "replace").strip()
    # an unknown file is echoed back as the bare name
    return path if out.returncode == 0 and os.path.isabs(path) and os.path.exists(path) \
        else None


def sanitizer_runtime(sanitizer: str, *, config: Config | None = None) -> str | None:
    """The path of the runtime library that ``sanitizer`` (``"address"``, ...)
    needs preloaded, as the configured compiler reports it
    (``cc -print-file-name=libasan.so``); ``None`` when the sanitizer needs
    no preload or its runtime is not installed.  Never raises."""
    config = config or Config.from_env()
    names = _PRELOADED_RUNTIMES.get(sanitizer, ((), ""))[0]
    try:
        compiler = resolve_compiler(config.cc)[0]
    except ToolMissingError:
        return None
    for name in names:
        path = _print_file_name(compiler, name)
        if path:
            return path
    return None


def _needs_preload(sanitize: Sequence[str]) -> list[str]:
    names = [s for s in sanitize if s in _PRELOADED_RUNTIMES]
    if "address" in names and "leak" in names:   # ASan's runtime includes LSan
        names.remove("leak")
    return names


def sanitizer_env(config: Config | None = None) -> dict[str, str]:
    """The environment variables a process needs to load kernels built with
    ``config.sanitize``: ``LD_PRELOAD`` (the runtimes, space-separated,
    then ``libstdc++.so.6``, without which ASan aborts at the first C++
    exception thrown inside islpy),
    ``ASAN_OPTIONS=detect_leaks=0`` (the interpreter's own allocations are
    not leaks) and ``UBSAN_OPTIONS=print_stacktrace=1``.  Merge it into the
    environment of a *new* process; preloading cannot happen after start.
    Raises :class:`SanitizerError` when a runtime is not installed."""
    config = config or Config.from_env()
    env: dict[str, str] = {}
    preload = []
    for name in _needs_preload(config.sanitize):
        path = sanitizer_runtime(name, config=config)
        if path is None:
            raise SanitizerError(_missing_runtime(name, config))
        preload.append(path)
    if preload:
        # ASan intercepts __cxa_throw; when libstdc++ is only dlopen-ed later
        # (islpy is C++), the interceptor finds no real function and aborts
        # at the first C++ exception.  Preloading libstdc++ too avoids that.
        cxx = _print_file_name(resolve_compiler(config.cc)[0], "libstdc++.so.6")
        env["LD_PRELOAD"] = " ".join(preload + ([cxx] if cxx else []))
    if "address" in config.sanitize or "leak" in config.sanitize:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    if "undefined" in config.sanitize:
        env["UBSAN_OPTIONS"] = "print_stacktrace=1"
    return env


def _missing_runtime(name: str, config: Config) -> str:
    files = " or ".join(_PRELOADED_RUNTIMES[name][0][:2])
    return (f"Config.sanitize / POLYC_SANITIZE asks for the {name} sanitizer, but the "
            f"compiler {config.cc!r} does not find its runtime ({files}); install it "
            f"(Debian/Ubuntu: apt-get install gcc, which brings libasan/libubsan), or "
            f"unset POLYC_SANITIZE")


def check_sanitizer_runtime(config: Config) -> None:
    """Raise :class:`SanitizerError` unless every runtime that
    ``config.sanitize`` needs is already loaded in this process (found by its
    symbol, e.g. ``__asan_init``, in ``ctypes.CDLL(None)``).  Loading an
    AddressSanitizer library without it would abort the interpreter."""
    missing = [n for n in _needs_preload(config.sanitize)
               if not hasattr(ctypes.CDLL(None), _PRELOADED_RUNTIMES[n][1])]
    if not missing:
        return
    paths = {n: sanitizer_runtime(n, config=config) for n in missing}
    absent = [n for n, p in paths.items() if p is None]
    if absent:
        raise SanitizerError(_missing_runtime(absent[0], config))
    env = sanitizer_env(config)
    setting = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    raise SanitizerError(
        f"kernels built with Config.sanitize={config.sanitize} (POLYC_SANITIZE) need the "
        f"{' and '.join(missing)} sanitizer runtime loaded before anything else in the "
        f"process, and this Python was started without it (loading the kernel would "
        f"abort the interpreter). Start Python with\n    {setting} python ...\n"
        f"(the library path is `{config.cc} -print-file-name="
        f"{_PRELOADED_RUNTIMES[missing[0]][0][0]}`; "
        f"polyc.backends.c.build.sanitizer_env() returns these variables), or unset "
        f"POLYC_SANITIZE")


def build_library(source: str, *, config: Config) -> Library:
    """Compile ``source`` into a shared library and load it, or return the one
    already built for the same key (memory memo, then the disk cache unless
    ``config.disk_cache`` is off, in which case it builds into a private
    temporary directory).

    Runs ``[*cc, *compile_flags(config), "-o", <tmp>, <dir>/<key>.c]`` with
    ``shell=False`` and at most ``config.compile_timeout`` seconds; the
    source file stays next to the library for inspection.

    Raises :class:`ToolMissingError` when the compiler is missing,
    :class:`CompileError` (with ``command`` and ``stderr``) when it fails,
    :class:`CompileTimeoutError` when it runs too long, :class:`LoadError`
    when the result does not load (e.g. a ``noexec`` cache directory),
    :class:`SanitizerError` when ``config.sanitize`` needs a runtime that is
    not preloaded, :class:`polyc.errors.PolycError` when no directory at all
    can be written."""
    compiler, flags = _toolchain(config)
    needs: tuple[Library, ...] = ()
    link: list[str] = []
    key_flags = flags
    if intrinsics.LINK_MARK in source:
        lib = intrinsics_library(config=config)
        if not lib.path.exists():
            # removed since this process loaded it (`polyc cache clear`, another
            # process's cleanup): the linker needs the file, so build it again
            cache.forget(lib.key)
            lib = intrinsics_library(config=config)
        needs = (lib,)
        # the library's soname is its file name: the dynamic loader matches the
        # kernel's DT_NEEDED entry against the copy loaded above (any directory)
        # (-Xlinker passes the directory whole: -Wl, would split it at commas)
        link = [str(lib.path), "-Xlinker", "-rpath", "-Xlinker", str(lib.path.parent)]
        key_flags = [*flags, f"polyc-intrinsics={lib.key}"]
    return get_or_build(source, _key(source, compiler, key_flags), [*compiler, *flags],
                        link, needs, config)


def _toolchain(config: Config) -> tuple[list[str], list[str]]:
    """The compiler argv prefix and flags of ``config``, after the checks every
    build makes first: the sanitizer runtimes, and the OpenMP wait policy
    (set before the first library loads libgomp)."""
    compiler = resolve_compiler(config.cc)
    flags = compile_flags(config)
    if config.sanitize:
        check_sanitizer_runtime(config)
    apply_wait_policy(config.wait_policy)
    return compiler, flags


def get_or_build(source: str, key: str, command: list[str], after: list[str],
                 needs: tuple[Library, ...], config: Config, load=None):
    """The library of ``key`` through the cache, built by ``[*command, "-o",
    out, <dir>/<key>.c, *after, *LINK_LIBS]`` and loaded by ``load(path,
    sidecar)`` (default: as a :class:`Library` that links ``needs``)."""
    def build(directory: Path, out: Path) -> dict:
        src = directory / f"{key}.c"
        cache.write_atomic(src, source.encode("utf-8"))
        argv = [*command, "-o", str(out), str(src), *after, *LINK_LIBS]
        return _compile(argv, source=source, src=src, out=out, config=config)

    directory = config.resolved_cache_dir() if config.disk_cache else None
    if load is None:
        load = functools.partial(_load, key=key, needs=needs)
    return cache.get_or_build(key, directory=directory, suffix=SUFFIX, build=build, load=load)


def intrinsics_library(*, config: Config) -> Library:
    """The intrinsics library for ``config`` (compiler, flags, sanitizers):
    ``gemm.h``'s entry points built once into a shared library that kernels
    link (:func:`polyc.backends.c.intrinsics.library_source`), memoised per
    process and kept in the disk cache like kernels, under a key made of its
    source, the compiler and its version, the flags, the CPU's features and
    polyc's version.  An entry whose sidecar names another CPU or compiler
    than this one is never loaded: it is discarded with a
    :class:`~polyc.errors.CacheWarning` and rebuilt.  Raises what
    :func:`build_library` raises."""
    compiler, flags = _toolchain(config)
    source = intrinsics.library_source()
    key = _key(source, compiler, flags)
    # the soname is the entry's file name, the same in any cache directory
    lib = get_or_build(source, key, [*compiler, *flags, f"-Wl,-soname,{key}{SUFFIX}"],
                       [], (), config)
    if lib.key not in _TEAM_SET:
        on = gemm_on_team(apply_wait_policy(config.wait_policy))
        lib.function("polyc_gemm_set_team", [ctypes.c_int])(int(on))
        _TEAM_SET.add(lib.key)
        if on:
            log.info("GEMM calls run on the OpenMP team: its idle threads spin long "
                     "(libgomp loaded by another library first, or the environment)")
    return lib


#: intrinsics libraries whose thread placement is set (polyc.threads.gemm_on_team)
_TEAM_SET: set[str] = set()


def intrinsics_isa(library: Library) -> str | None:
    """The micro-kernel the intrinsics library that ``library`` links was
    built for (``polyc_gemm_isa()``: ``"avx512"``, ``"avx2"`` or
    ``"portable"``, the last on a CPU or with flags that lack AVX2 and FMA);
    ``None`` when ``library`` links none."""
    for need in library.needs:
        fn = need.function("polyc_gemm_isa", [], ctypes.c_char_p)
        return fn().decode("ascii")
    return None


def _load(path: Path, meta: dict, *, key: str, needs: tuple[Library, ...]) -> Library:
    """Load a built library (``cache.get_or_build``'s ``load``): ``OSError``
    (the entry is discarded and rebuilt) when its sidecar says it was built
    for another CPU or by another compiler version."""
    command = meta.get("command")
    compiler = command[0] if isinstance(command, list) and command \
        and isinstance(command[0], str) else None
    for field, now in (("cpu", cache.cpu_features(compiler)),
                       ("compiler_version",
                        cache.compiler_version(compiler) if compiler else None)):
        if field in meta and now is not None and meta[field] != now:
            raise OSError(errno.ENOEXEC, f"it was built for another {field.replace('_', ' ')} "
                          f"({meta[field]!r}, this machine: {now!r})")
    try:
        cdll = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
    except OSError as e:
        if _looks_noexec(e):
            raise LoadError(_noexec_message(path, e), command=meta.get("command")) from e
        raise
    return Library(path=path, key=key, cdll=cdll,
                   command=tuple(command) if isinstance(command, list) else (), needs=needs)


def _looks_noexec(e: OSError) -> bool:
    text = str(e)
    return (e.errno in (errno.EPERM, errno.EACCES)
            or "failed to map segment" in text or "Operation not permitted" in text)


def _noexec_message(path: Path, e: OSError) -> str:
    where = path.parent
    if cache.is_private(where):
        fix = (f"the private build directory {where} is in TMPDIR; set TMPDIR, or "
               f"POLYC_CACHE_DIR with the disk cache on, to a directory on a file "
               f"system that allows executable mappings")
    else:
        fix = ("set POLYC_CACHE_DIR to a directory on a file system that allows "
               "executable mappings (e.g. under your home directory), or "
               "POLYC_NO_DISK_CACHE=1 to build in TMPDIR instead")
    return (f"cannot load the compiled kernel {path}: {e}. The directory {where} is "
            f"probably on a file system mounted noexec (shared libraries there cannot be "
            f"mapped executable); {fix}")


_RUNTIME_PREFIXES = ("libasan", "libtsan", "liblsan", "libhwasan", "libubsan",
                     "libclang_rt.", "libstdc++")


def _compiler_env() -> dict | None:
    """The compiler's environment: ours, less the sanitizer runtimes (and
    libstdc++) preloaded for sanitized kernels, which only slow the compiler
    down.  ``None`` (inherit) when nothing of the kind is preloaded."""
    preload = os.environ.get("LD_PRELOAD", "")
    words = preload.replace(":", " ").split()
    if not any(os.path.basename(w).startswith(_RUNTIME_PREFIXES[:-1]) for w in words):
        return None
    env = dict(os.environ)
    keep = [w for w in words if not os.path.basename(w).startswith(_RUNTIME_PREFIXES)]
    if keep:
        env["LD_PRELOAD"] = " ".join(keep)
    else:
        del env["LD_PRELOAD"]
    return env


def _compile(argv: list[str], *, source: str, src: Path, out: Path, config: Config) -> dict:
    timeout = config.compile_timeout
    try:
        proc = run_process(argv, timeout=timeout, env=_compiler_env())
    except subprocess.TimeoutExpired as e:
        partial = (e.stderr or b"").decode("utf-8", "replace")
        raise CompileTimeoutError(
            f"the C compiler did not finish within {timeout:g} s on generated source {src} "
            f"and was killed (Config.compile_timeout, from POLYC_COMPILE_TIMEOUT); raise "
            f"the limit, e.g. POLYC_COMPILE_TIMEOUT={max(300, int(4 * timeout))}, or "
            f"unset it for no limit", timeout=timeout, command=argv, stderr=partial) from None
    except OSError as e:   # vanished, not executable, ...
        raise ToolMissingError(f"cannot run the C compiler {argv[0]!r}: {e}; "
                               f"{_INSTALL_HINT}", command=argv) from e
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        how = (f"exit status {proc.returncode}" if proc.returncode > 0
               else f"killed by signal {-proc.returncode}")
        hint = ""
        if config.sanitize and ("asan" in stderr or "ubsan" in stderr or "sanitize" in stderr):
            hint = ("; the sanitizer runtime may be missing (Debian/Ubuntu: apt-get "
                    "install gcc, which brings libasan and libubsan), or unset "
                    "POLYC_SANITIZE")
        raise CompileError(f"the C compiler failed ({how}) on generated source {src}{hint}",
                           command=argv, stderr=stderr)
    try:
        size = out.stat().st_size
    except OSError:
        size = 0
    if size == 0:
        raise CompileError(f"the C compiler reported success but wrote no library to {out} "
                           f"(from {src}); check Config.cc / CC and Config.cflags "
                           f"(-shared -fPIC are needed)", command=argv, stderr=stderr)
    return {"command": argv, "compiler_output": stderr,
            "source_sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
            "cpu": cache.cpu_features(argv[0]),
            "compiler_version": cache.compiler_version(argv[0])}
