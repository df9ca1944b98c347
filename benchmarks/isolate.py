"""Run one measurement of a peer program in a child process.

A peer (a gcc or Polly build of a benchmark, a measurement program) may
crash (a segfault, a stack overflow: Polly's packed arrays overflow an 8 MB
stack on PolyBench ``2mm`` at LARGE on some machines) or hang.  In the
harness's own process either ends the whole run and loses every row measured
so far; in a child it becomes an :class:`Outcome` whose ``error`` says what
happened (``"crashed (SIGSEGV)"``, ``"timed out after 600 s"``), and the
harness prints it in the peer's cell.

The child is spawned (not forked: the parent's OpenMP runtime may already
have threads, and GNU OpenMP does not survive a fork), so ``fn`` and its
arguments must be picklable (a module-level function and plain data), and
the child imports ``fn``'s module afresh.  The result travels back pickled.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import traceback
from dataclasses import dataclass
from typing import Any, Callable

log = logging.getLogger(__name__)

#: Default limit for one peer measurement (build, load and the timed runs).
DEFAULT_TIMEOUT = 900.0


@dataclass(frozen=True)
class Outcome:
    """What a child returned (``value``), or why it returned nothing
    (``error``: ``"crashed (SIGSEGV)"``, ``"timed out after N s"``, or the
    exception the child raised, ``"RuntimeError: ..."``)."""
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _child(conn, fn: Callable, args: tuple) -> None:
    try:
        result = ("ok", fn(*args))
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        log.debug("peer measurement raised:\n%s", traceback.format_exc())
        result = ("error", f"{type(err).__name__}: {err}")
    conn.send(result)
    conn.close()


def signal_name(code: int) -> str:
    """``SIGSEGV`` for 11 (``"signal 99"`` for a number with no name)."""
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def run_isolated(fn: Callable, *args, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
    """``fn(*args)`` in a spawned child process, at most ``timeout`` seconds.

    Returns ``Outcome(value=...)``, or ``Outcome(error=...)`` when the child
    raised, was killed by a signal (``"crashed (SIGSEGV)"``), exited without
    a result (``"exited with status 3"``) or ran past ``timeout`` (killed:
    ``"timed out after 5 s"``).  Never raises for what the child does."""
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            proc.kill()
            proc.join()
            return Outcome(error=f"timed out after {timeout:g} s")
        try:
            status, payload = recv.recv()
        except (EOFError, OSError):
            status, payload = None, None
    finally:
        recv.close()
    proc.join()
    if status == "ok":
        return Outcome(value=payload)
    if status == "error":
        return Outcome(error=payload)
    code = proc.exitcode
    if code is not None and code < 0:
        return Outcome(error=f"crashed ({signal_name(-code)})")
    return Outcome(error=f"exited with status {code} without a result")
