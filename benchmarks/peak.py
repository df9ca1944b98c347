"""Measure this CPU's physical limits, to report benchmark results as a fraction of peak.

Run from the repository root::

    python -m benchmarks.peak [--quick]

Compiles ``benchmarks/peak.c`` with ``$CC`` (default ``gcc``) and
``-O3 -march=native -fopenmp -std=c99``, runs it and returns or prints its
JSON object:

* ``fma_gflops_{1core,allcores}_{f32,f64}``: FMA peak in GFLOP/s (1e9 flop/s),
  2 flops per FMA lane, from 12 independent accumulator chains of the widest
  vector FMA the build targets (``isa``: ``avx512``, ``avx2`` or ``scalar``);
  best of 3 runs of about 0.25 s each.
* ``stream_triad_gbs_{1core,allcores}``: bandwidth in GB/s (1e9 bytes/s) of
  the STREAM triad ``a[i] = b[i] + s * c[i]`` over three 64 MiB double arrays,
  counted by McCalpin's STREAM convention (https://www.cs.virginia.edu/stream/):
  24 bytes per element, i.e. the write-allocate read of ``a`` is not counted;
  best of 5 runs.
* ``threads``: the OpenMP thread count of the ``allcores`` figures.

``--quick`` shrinks run times and array sizes about 10x (the arrays may then fit
in the last-level cache), for tests.

``peak.c`` runs as a child process: when it crashes or runs past
:data:`TIMEOUT` seconds, :func:`measure` raises :class:`PeakError` saying so
(``crashed (SIGSEGV)``, ``timed out after 300 s``), and ``python -m
benchmarks.tensor`` goes on without the fractions of peak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .isolate import signal_name

SOURCE = Path(__file__).with_name("peak.c")
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-std=c99"]
#: Seconds ``peak.c`` may run (about 10 s on 2 cores).
TIMEOUT = 300.0


class PeakError(RuntimeError):
    """``peak.c`` could not be built, crashed, timed out or printed no result."""


def measure(quick: bool = False, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """Build and run ``peak.c``; return its measurements (see the module
    docstring).  ``flags``: more compiler flags (``-mno-avx512f`` measures
    the AVX2 peak of an AVX-512 machine)."""
    cc = os.environ.get("CC", "gcc")
    with tempfile.TemporaryDirectory(prefix="polyc-peak-") as tmp:
        exe = Path(tmp) / "peak"
        try:
            build = subprocess.run(
                [cc, *CFLAGS, *flags, str(SOURCE), "-o", str(exe), "-lm"],
                capture_output=True,
                text=True,
            )
        except OSError as err:
            raise PeakError(f"cannot run the C compiler {cc!r}: {err}") from err
        if build.returncode != 0:
            raise PeakError(f"{cc} failed to build {SOURCE}:\n{build.stderr}")
        try:
            run = subprocess.run([str(exe), *(["quick"] if quick else [])],
                                 capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise PeakError(f"{SOURCE.name} timed out after {TIMEOUT:g} s") from None
    if run.returncode < 0:
        raise PeakError(f"{SOURCE.name} crashed ({signal_name(-run.returncode)})")
    if run.returncode != 0:
        raise PeakError(f"{SOURCE.name} exited with status {run.returncode}:\n{run.stderr}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as err:
        raise PeakError(f"{SOURCE.name} printed no JSON object: {err}") from None


if __name__ == "__main__":
    print(json.dumps(measure(quick="--quick" in sys.argv[1:]), indent=2))
