"""A calibrated background load: another process keeping part of one core
busy while a benchmark measures, the usual state of a shared machine.

    with BackgroundLoad(duty=0.5) as load:   # half of the last core, in 5 ms slices
        ... measure ...
    print(load.report())                      # the duty the process achieved

The load is a child process pinned to one core (the last one the benchmark
may use, ``os.sched_setaffinity``) that spins for ``duty * period`` seconds
and sleeps for the rest of every ``period``; at exit it reports the CPU time
it used over its wall time, which :meth:`BackgroundLoad.report` prints next to
the requested duty (the calibration: on an oversubscribed machine the
achieved duty is lower than the one asked for).  Used by ``--background-load``
of ``python -m benchmarks.tensor`` and ``python -m benchmarks.threads``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

_CHILD = r"""
import json, os, sys, time
duty, period, core = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
try:
    os.sched_setaffinity(0, {core})
except (AttributeError, OSError):
    pass
start_wall, start_cpu = time.perf_counter(), time.process_time()
sys.stdout.write("ready\n"); sys.stdout.flush()
try:
    while True:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < duty * period:
            pass
        rest = period - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)
        if sys.stdin in __import__("select").select([sys.stdin], [], [], 0)[0]:
            break
finally:
    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    sys.stdout.write(json.dumps({"wall_s": wall, "cpu_s": cpu}) + "\n"); sys.stdout.flush()
"""


def _cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


class BackgroundLoad:
    """A process that keeps ``duty`` (0 < duty <= 1) of core ``core`` (default:
    the last core this process may run on) busy, in slices of ``period``
    seconds, while the ``with`` block runs."""

    def __init__(self, duty: float = 0.5, *, period: float = 0.005, core: int | None = None):
        if not 0 < duty <= 1:
            raise ValueError(f"duty must be in (0, 1], got {duty!r}")
        self.duty, self.period = duty, period
        self.core = _cores()[-1] if core is None else core
        self.achieved: float | None = None
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "BackgroundLoad":
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.duty), str(self.period), str(self.core)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        self._proc.stdout.readline()          # "ready": the load runs from here
        time.sleep(3 * self.period)
        return self

    def __exit__(self, *exc) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            out, _ = proc.communicate(input="stop\n", timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return
        self._parse([x for x in out.splitlines() if x.startswith("{")])

    def _parse(self, lines: list[str]) -> None:
        for line in lines:
            try:
                doc = json.loads(line)
                self.achieved = doc["cpu_s"] / doc["wall_s"] if doc["wall_s"] > 0 else None
            except (ValueError, KeyError):
                pass

    def report(self) -> str:
        got = "-" if self.achieved is None else f"{100 * self.achieved:.0f}%"
        return (f"background load: one process on core {self.core}, busy {100 * self.duty:.0f}% "
                f"of every {self.period * 1e3:.0f} ms (achieved {got} of the core)")
