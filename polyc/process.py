"""Running external tools (compilers) without a shell, with a timeout that
kills the whole process group.  Used by :mod:`polyc.cache` (compiler
versions, CPU features) and the backends' build steps."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Sequence


def run_process(argv: Sequence[str], *, timeout: float | None = None,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` (``shell=False``) in a new session, capturing stdout and
    stderr as bytes.  On timeout (or an interrupt) the whole process group is
    killed, so a compiler driver's children (``cc1``, ``ld``, a wrapper's
    ``sleep``) cannot keep running or hold the pipes open; then
    ``subprocess.TimeoutExpired`` is raised with the output so far.  Raises
    ``OSError`` when ``argv[0]`` cannot be executed."""
    argv = list(argv)
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _kill_group(p)
        raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err) from None
    except BaseException:
        _kill_group(p)
        raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def _kill_group(p: subprocess.Popen) -> tuple[bytes, bytes]:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        p.kill()
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:   # a grandchild left the group: stop reading
        out, err = b"", b""
        for f in (p.stdout, p.stderr):
            if f:
                f.close()
        p.wait()
    return out or b"", err or b""


def run_quiet(argv: list[str]) -> str:
    try:
        p = run_process(argv, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (p.stdout or p.stderr).decode("utf-8", "replace")
