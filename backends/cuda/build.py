"""Build step of the CUDA backend: CUDA source text -> a cubin, with the
resources ptxas reports.

``nvcc`` is found from ``CUDA_HOME``/``CUDA_PATH``, ``/usr/local/cuda/bin``,
then ``PATH``; :class:`~polyc.errors.ToolMissingError` names what to install
when there is none.  It compiles for ``Config.cuda_arch`` (``sm_90`` by
default, ``POLYC_CUDA_ARCH``) with ``-O3 -Xptxas -v``; ptxas's report
(registers, shared and constant memory, stack, spills per kernel) is parsed
into :class:`Resources`, and a kernel whose resources cannot launch
(more than 255 registers per thread, more than 48 KiB of static shared
memory, or more registers than a block of its threads may hold) is refused
with a :class:`~polyc.errors.CompileError` before anything is launched.

Cubins are cached on disk (:mod:`polyc.cache`, sealed JSON entries, with
ptxas's report, parsed again when loaded) under a key of the source, the
architecture, the flags and nvcc's version.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from polyc import cache
from polyc.config import Config
from polyc.errors import CompileError, CompileTimeoutError, ToolMissingError

log = logging.getLogger(__name__)

#: Version of the cubin cache entries.
CUBIN_FORMAT = "polyc-cubin-2"
#: Registers per thread and per block, static shared memory per block
#: (bytes), on every architecture from sm_75 on.
MAX_REGISTERS = 255
REGISTERS_PER_BLOCK = 65536
STATIC_SHARED = 48 * 1024


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel: ``registers`` per thread,
    ``shared`` and ``constant`` memory (bytes), ``stack`` frame (bytes) and
    spilled bytes (``spill_stores``, ``spill_loads``)."""
    registers: int = 0
    shared: int = 0
    constant: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0

    def __str__(self) -> str:
        return (f"{self.registers} registers, {self.shared} B shared, {self.stack} B stack, "
                f"spills {self.spill_stores}/{self.spill_loads} B")


@dataclass(frozen=True)
class Cubin:
    """A built module: the ``cubin`` bytes, the ``arch``, per kernel its
    :class:`Resources`, the ``command`` that built it."""
    cubin: bytes
    arch: str
    resources: dict
    command: tuple[str, ...]


def find_nvcc() -> str:
    """The path of ``nvcc``; raises :class:`~polyc.errors.ToolMissingError`."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        return "/usr/local/cuda/bin/nvcc"
    found = shutil.which("nvcc")
    if found:
        return found
    raise ToolMissingError(
        "target='cuda' needs nvcc, the CUDA compiler, and none was found in CUDA_HOME, "
        "CUDA_PATH, /usr/local/cuda/bin or on PATH: install the CUDA toolkit (or set "
        "CUDA_HOME to it); without a GPU, Config(emulate=True) runs the kernels on the CPU")


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolMissingError(f"{nvcc} --version failed: {e}") from None
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def command(nvcc: str, arch: str, src: Path, out: Path) -> list[str]:
    return [nvcc, "-cubin", f"-arch={arch}", "-O3", "-std=c++17", "-Xptxas", "-v",
            "-o", str(out), str(src)]


_ENTRY = re.compile(r"Compiling entry function '([A-Za-z_0-9]+)'")
_FUNC = re.compile(r"Function properties for ([A-Za-z_0-9]+)")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(text: str) -> dict[str, Resources]:
    """Per kernel, the :class:`Resources` in ptxas's ``-v`` report."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        m = _FUNC.search(line)
        if m:   # a device function's properties are not a kernel's
            current = out.get(m.group(1))
            continue
        if current is None:
            continue
        m = _STACK.search(line)
        if m:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        m = _USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            current["shared"] = int(s.group(1)) if s else 0
            k = _CMEM.search(line)
            current["constant"] = int(k.group(1)) if k else 0
    return {name: Resources(**vals) for name, vals in out.items()}


def check_resources(resources: dict[str, Resources], threads: dict[str, int]) -> None:
    """Refuse a kernel that cannot launch with ``threads[name]`` threads per
    block; :class:`~polyc.errors.CompileError` says which limit and what to do."""
    for name, r in sorted(resources.items()):
        t = threads.get(name, 1)
        problem = None
        if r.registers > MAX_REGISTERS:
            problem = f"{r.registers} registers per thread (at most {MAX_REGISTERS})"
        elif r.registers * t > REGISTERS_PER_BLOCK:
            problem = (f"{r.registers} registers x {t} threads = {r.registers * t} per block "
                       f"(at most {REGISTERS_PER_BLOCK})")
        elif r.shared > STATIC_SHARED:
            problem = f"{r.shared} B of static shared memory (at most {STATIC_SHARED})"
        if problem:
            raise CompileError(f"CUDA kernel {name} cannot launch: it needs {problem}; "
                               "pass smaller Config.gpu_block sizes")


def cubin_key(text: str, arch: str, nvcc: str) -> str:
    h = hashlib.sha256()
    for part in (CUBIN_FORMAT, text, arch, " ".join(command("nvcc", arch, Path("s"), Path("o"))),
                 nvcc_version(nvcc)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def build_cubin(text: str, *, config: Config, arch: str | None = None,
                threads: dict[str, int] | None = None) -> Cubin:
    """Compile CUDA ``text`` for ``arch`` (default ``Config.cuda_arch``).
    Raises :class:`~polyc.errors.ToolMissingError` without nvcc,
    :class:`~polyc.errors.CompileError` with nvcc's command and stderr, or
    when a kernel's resources cannot launch (``threads``: threads per block
    by kernel name), :class:`~polyc.errors.CompileTimeoutError` past
    ``Config.compile_timeout``."""
    arch = arch or config.cuda_arch
    nvcc = find_nvcc()
    key = cubin_key(text, arch, nvcc)
    directory = None
    if config.disk_cache:
        directory = cache.usable_dir(config.resolved_cache_dir())
        data = cache.read_json_entry(directory, f"{key}.cubin.json", key=key, fmt=CUBIN_FORMAT)
        if data is not None:
            try:
                built = Cubin(base64.b64decode(data["cubin"]), data["arch"],
                              parse_ptxas(data["ptxas"]), tuple(data["command"]))
                check_resources(built.resources, threads or {})
                return built
            except (KeyError, TypeError, ValueError):
                pass
    with tempfile.TemporaryDirectory(prefix="polyc-nvcc-") as tmp:
        src, out = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        src.write_text(text)
        argv = command(nvcc, arch, src, out)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=config.compile_timeout)
        except subprocess.TimeoutExpired:
            raise CompileTimeoutError(
                f"nvcc ran past Config.compile_timeout={config.compile_timeout} s and was "
                "killed; raise POLYC_COMPILE_TIMEOUT", timeout=config.compile_timeout,
                command=argv) from None
        except OSError as e:
            raise ToolMissingError(f"nvcc could not run: {e}", command=argv) from None
        if proc.returncode != 0 or not out.exists():
            raise CompileError(f"nvcc failed (exit status {proc.returncode}) on the "
                               "generated CUDA source; this is a polyc bug",
                               command=argv, stderr=proc.stderr + proc.stdout)
        report = proc.stderr + proc.stdout
        resources = parse_ptxas(report)
        built = Cubin(out.read_bytes(), arch, resources, tuple(argv))
    log.debug("nvcc %s: %s", arch, {k: str(v) for k, v in resources.items()})
    check_resources(resources, threads or {})
    if directory is not None:
        payload = {"cubin": base64.b64encode(built.cubin).decode(), "arch": arch,
                   "ptxas": report,
                   "command": list(built.command)}
        try:
            cache.write_json_entry(directory, f"{key}.cubin.json", payload, key=key,
                                   fmt=CUBIN_FORMAT)
        except OSError:
            pass
    return built
