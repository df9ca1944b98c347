"""Facts about the machine polyc generates code for, read once per process:
the data cache sizes (:func:`cache_sizes`) and the GEMM micro-kernel's rows
(:func:`gemm_rows`).  Used by the tiler
(``polyc.schedule.tile``) and by the GEMM's blocking, which the intrinsics
library is built with (``backends/c/intrinsics``)."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.lru_cache(maxsize=None)
def cache_sizes() -> dict[int, int]:
    """Data cache sizes in bytes by level, from
    ``/sys/devices/system/cpu/cpu0/cache``; defaults 32 KiB / 1 MiB / 8 MiB."""
    sizes = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for idx in base.glob("index*"):
            kind = (idx / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((idx / "level").read_text())
            text = (idx / "size").read_text().strip().upper()
            mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
            sizes[level] = int(text.rstrip("KM")) * mult
    except (OSError, ValueError):
        pass
    return sizes


@functools.lru_cache(maxsize=None)
def gemm_rows() -> int:
    """Rows of C per f32 register tile (MR) of the micro-kernel
    ``backends/c/intrinsics/gemm.h`` compiles for this CPU with
    ``-march=native``: 14 with AVX-512, 6 with AVX2 and FMA, 4 for the
    portable kernel (x86 flags of /proc/cpuinfo; 4 when unknown)."""
    from .cache import cpu_features
    flags = set(cpu_features().split())
    if "avx512f" in flags:
        return 14
    if {"avx2", "fma"} <= flags:
        return 6
    return 4
