"""isl's scheduler in a child process, with a time limit.

isl's clustering scheduler (``isl_schedule_constraints_compute_schedule``
with ``schedule_whole_component=0``) can spin without end inside one integer
lexmin (``isl_tab_basic_set_non_trivial_lexmin`` under
``isl_schedule_node_compute_wcc_band``); isl's operation quota
(``isl_ctx_set_max_operations``) is not checked there, and a thread cannot
be interrupted inside C.  The smallest known trigger is three statements of
constant extents: an elementwise producer, an elementwise consumer, and a
read of the consumer split and transposed the way a reshape to attention
heads reads it (``t7(b,h,t,d) = t6(b,t,4*h+d)``): proximity on the split
dependence makes a merge ILP of the isl in islpy 2026.2.2 run for more
than ten minutes, while the same program with parametric sizes schedules in
10 ms.

:func:`compute` runs ``isl.ScheduleConstraints.compute_schedule`` in a
persistent worker process (this file run as a script: it imports nothing but
islpy), exchanging the constraints and the schedule as isl's own text
(``isl_schedule_constraints_read_from_str``, ``isl_schedule_read_from_str``),
and returns ``None`` when the worker does not answer within the limit (in
CPU seconds); the worker is then killed and a new one starts on the next
call.  The caller
decides what to do instead (:func:`polyc.schedule.initial._compute` asks isl
for a whole-component schedule, then falls back to the source order).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time

import islpy as isl

log = logging.getLogger(__name__)

#: CPU seconds one scheduler call may take in the worker before it is
#: abandoned (wall-clock seconds where the CPU time cannot be read; at most
#: four times as many wall-clock seconds in any case).  Finite clusterings
#: of polyc's graph groups take up to about 10 s where they run long; a
#: whole-component schedule of the same group takes under 1 s, so waiting
#: longer rarely buys a better schedule.
TIME_LIMIT_S = float(os.environ.get("POLYC_ISL_SCHEDULE_TIMEOUT", "5"))

#: CPU seconds one scheduler call may take while the fusion planner probes a
#: candidate group (:func:`probing`).  A probe's group is one of hundreds the
#: planner tries; one whose schedule takes longer is refused, not waited for.
PROBE_LIMIT_S = float(os.environ.get("POLYC_ISL_PROBE_TIMEOUT", "2"))

_probe: contextvars.ContextVar[dict | None] = contextvars.ContextVar("isl_probe",
                                                                    default=None)


@contextlib.contextmanager
def probing():
    """While active, every scheduler call of :func:`polyc.schedule.initial`
    on three or more statements runs in the worker under
    :data:`PROBE_LIMIT_S` (isl's clustering can spin on problems
    :func:`~polyc.schedule.initial._may_spin` does not recognise, and a
    spinning call in this process cannot be interrupted: a Swin block's
    candidate group ran for minutes).  Yields a record whose ``abandoned``
    counts the calls given up on."""
    record = {"abandoned": 0}
    token = _probe.set(record)
    try:
        yield record
    finally:
        _probe.reset(token)


def probe_active() -> bool:
    """Whether a :func:`probing` block is active in this context."""
    return _probe.get() is not None


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.buf = b""
        self.owner = os.getpid()     # a forked child starts its own worker

    def ask(self, request: dict, limit: float) -> dict | None:
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        start, cpu0 = time.monotonic(), self._cpu_s()
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            if not select.select([fd], [], [], 0.5)[0]:
                cpu = self._cpu_s()
                used = cpu - cpu0 if cpu is not None and cpu0 is not None \
                    else time.monotonic() - start
                # CPU seconds where /proc has them: on a loaded machine a
                # slow but finite schedule must not be taken for a hang
                if used > limit or time.monotonic() - start > 4 * limit:
                    return None
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:           # the worker died
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def _cpu_s(self) -> float | None:
        """The worker's user + system CPU seconds (Linux ``/proc``), or None."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.SubprocessError):
            pass


#: every isl scheduler option polyc sets: the worker gets the caller's value
#: of each, so no setting of an earlier request stays behind
_OPTIONS = ("schedule_outer_coincidence", "schedule_serialize_sccs",
            "schedule_maximize_band_depth", "schedule_whole_component",
            "schedule_max_coefficient", "schedule_max_constant_term",
            "schedule_maximize_coincidence", "schedule_treat_coalescing",
            "schedule_separate_components", "schedule_split_scaled")

_lock = threading.Lock()
_worker: _Worker | None = None


def compute(sc: isl.ScheduleConstraints, options: dict[str, int],
            limit: float | None = None) -> isl.Schedule | None:
    """``sc.compute_schedule()`` under isl scheduler ``options`` (names
    without ``set_``, e.g. ``schedule_whole_component``; the others as set
    on ``sc``'s context), run in the worker process; ``None`` when it takes
    longer than ``limit`` CPU seconds (default :data:`TIME_LIMIT_S`,
    :data:`PROBE_LIMIT_S` inside :func:`probing`) or the
    worker dies.  Where no worker can start, isl runs in this process
    (without a limit).  Raises ``isl.Error``
    when isl itself fails on the constraints, as the in-process call does."""
    global _worker
    probe = _probe.get()
    if limit is None:
        limit = PROBE_LIMIT_S if probe is not None else TIME_LIMIT_S
    ctx = sc.get_ctx()
    caller = {name: getattr(ctx, f"get_{name}")() for name in _OPTIONS}
    settings = {name: int(options.get(name, caller[name])) for name in _OPTIONS}
    request = {"sc": str(sc), "options": settings}
    with _lock:
        if _worker is None or _worker.owner != os.getpid() or _worker.proc.poll() is not None:
            try:
                _worker = _Worker()
            except (OSError, ValueError) as e:
                # (no interpreter to run it, e.g. an embedded Python): isl in
                # this process, as without the worker, rather than no schedule
                log.warning("cannot start the isl scheduler worker (%s); scheduling in "
                            "this process, without a time limit", e)
                for name, value in settings.items():
                    getattr(ctx, f"set_{name}")(value)
                try:
                    return sc.compute_schedule()
                finally:
                    for name in settings:
                        getattr(ctx, f"set_{name}")(caller[name])
        reply = _worker.ask(request, limit)
        if reply is None:
            if probe is not None:
                probe["abandoned"] += 1
                log.info("isl's scheduler did not finish within %g s on a probed group; "
                         "abandoned", limit)
            else:
                log.warning("isl's scheduler did not finish within %.0f s; abandoned", limit)
            _worker.kill()
            _worker = None
            return None
    if "error" in reply:
        raise isl.Error(reply["error"])
    return isl.Schedule.read_from_str(ctx, reply["schedule"])


def _serve() -> None:        # pragma: no cover (runs in the worker process)
    ctx = isl.DEFAULT_CONTEXT
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            for name, value in request["options"].items():
                getattr(ctx, f"set_{name}")(value)
            sc = isl.ScheduleConstraints.read_from_str(ctx, request["sc"])
            reply = {"schedule": str(sc.compute_schedule())}
        except isl.Error as e:
            reply = {"error": str(e)}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
