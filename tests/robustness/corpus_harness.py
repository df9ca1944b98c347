"""Machinery of the hostile-input corpus (``test_corpus_*.py``, ``test_bad_calls.py``).

A *case* is a function of no arguments, registered under an id in a module's
``CASES`` dict; it returns a JSON-serialisable *outcome* dict made by
:func:`capture`: ``{"status": "ok", ...}`` or ``{"status": "raised", "cls":
..., "mro": [...], "message": ..., "line": ..., "column": ..., "excerpt":
...}``.

Cases that execute generated code run in worker subprocesses
(:func:`run_batch`), so that a segfault or a hang inside C kills a worker,
not pytest: the case that was running is reported as ``crashed`` (with the
signal) or ``hung``, and the remaining cases go on in a fresh worker.  Every
case also runs under ``signal.alarm`` (:data:`CASE_TIMEOUT`), which stops
hangs in Python code; the parent's watchdog stops hangs in C.

The worker is this file run as a script: ``python corpus_harness.py
MODULE_PATH`` reads case ids on stdin and answers ``START id`` then ``DONE
<json>`` per case on stdout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"

#: Seconds one case may take (compiling a kernel included) before it is a hang.
CASE_TIMEOUT = int(os.environ.get("POLYC_CORPUS_TIMEOUT", 60))


class CaseTimeout(Exception):
    """Raised by the alarm when a case runs past :data:`CASE_TIMEOUT`."""


def _alarm(signum, frame):
    raise CaseTimeout(f"the case ran for more than {CASE_TIMEOUT} s")


def capture(fn, timeout: int = CASE_TIMEOUT) -> dict:
    """Run ``fn()`` under an alarm; its outcome as a dict.  ``fn`` may
    return a dict of extra fields (e.g. ``{"match": True}``)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        extra = fn()
        out = {"status": "ok"}
        if isinstance(extra, dict):
            out.update(extra)
        return out
    except CaseTimeout as e:
        return {"status": "hung", "message": str(e)}
    except RecursionError as e:
        return _raised(e, status="crashed")
    except BaseException as e:  # noqa: BLE001 - the outcome is the point
        if isinstance(e, KeyboardInterrupt):
            raise
        return _raised(e)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _raised(e: BaseException, status: str = "raised") -> dict:
    return {"status": status, "cls": type(e).__name__,
            "mro": [c.__name__ for c in type(e).__mro__],
            "message": str(e),
            "line": getattr(e, "line", None), "column": getattr(e, "column", None),
            "excerpt": getattr(e, "excerpt", None)}


def describe(outcome: dict) -> str:
    if outcome["status"] == "ok":
        return "no error: " + json.dumps({k: v for k, v in outcome.items() if k != "status"})[:500]
    return (f"{outcome['status']}: {outcome.get('cls', '')}: "
            f"{outcome.get('message', '')[:1500]}")


# ------------------------------------------------------------ expectations
def expect_error(outcome: dict, cls: str, substrings=(), loc=None) -> None:
    """``outcome`` is the polyc error ``cls`` (or a subclass), its message
    holds every one of ``substrings``; for a ParseError (and SemanticError)
    ``loc`` is ``(line, column)`` (``None``: any location, but one must be
    there).  Never a bare Python exception, a crash or a hang."""
    assert outcome["status"] == "raised", f"expected {cls}, got {describe(outcome)}"
    assert "PolycError" in outcome["mro"], f"a bare exception: {describe(outcome)}"
    assert cls in outcome["mro"], f"expected {cls}, got {describe(outcome)}"
    msg = outcome["message"]
    for s in substrings:
        assert s in msg, f"{s!r} is not in the message:\n{msg}"
    if "ParseError" in outcome["mro"]:
        assert outcome["line"] is not None and outcome["column"] is not None, msg
        assert outcome["excerpt"] and "^" in outcome["excerpt"], f"no caret excerpt: {msg}"
        if loc is not None:
            assert (outcome["line"], outcome["column"]) == tuple(loc), (
                f"located at {outcome['line']}:{outcome['column']}, expected "
                f"{loc[0]}:{loc[1]}:\n{msg}")
    elif loc is not None:
        assert msg.startswith(f"<tc>:{loc[0]}:{loc[1]}:") or \
            f":{loc[0]}:{loc[1]}: " in msg.split("\n")[0], f"not located at {loc}:\n{msg}"


def expect_ok(outcome: dict) -> None:
    """``outcome`` ran without error and its result matched (``match``)."""
    assert outcome["status"] == "ok", f"expected success, got {describe(outcome)}"
    assert outcome.get("match", True), f"wrong result: {outcome.get('detail', '')}"


# ----------------------------------------------------------- batch runner
def selected_ids(request, param: str = "case_id") -> list[str]:
    """The ids of this module's parametrized cases that pytest will run."""
    ids = []
    for item in request.session.items:
        if getattr(item, "module", None) is request.module and hasattr(item, "callspec"):
            cid = item.callspec.params.get(param)
            if cid is not None and cid not in ids:
                ids.append(cid)
    return ids


def run_batch(module_path: str | Path, ids: list[str], workers: int = 2,
              timeout: int = CASE_TIMEOUT + 30) -> dict[str, dict]:
    """Run the cases ``ids`` of the module at ``module_path`` in worker
    subprocesses (``workers`` in parallel); returns id -> outcome, with
    ``crashed``/``hung`` outcomes for a case that killed or stalled its
    worker."""
    ids = list(ids)
    # contiguous chunks: cases of one kernel stay together, so each worker
    # compiles (or loads from the disk cache) about half of the kernels
    n = len(ids)
    chunks = [ids[k * n // workers:(k + 1) * n // workers] for k in range(workers)]
    results: dict[str, dict] = {}
    lock = threading.Lock()

    def drive(chunk: list[str]) -> None:
        todo = list(chunk)
        while todo:
            got = _run_worker(str(module_path), todo, timeout)
            with lock:
                results.update(got)
            todo = [c for c in todo if c not in got]

    threads = [threading.Thread(target=drive, args=(c,)) for c in chunks if c]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _run_worker(module_path: str, ids: list[str], timeout: int) -> dict[str, dict]:
    """One worker process over ``ids``; stops at the first crash or hang
    (reported for that case) and returns what it has."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), module_path],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
    proc.stdin.write("\n".join(ids) + "\n")
    proc.stdin.close()
    results: dict[str, dict] = {}
    current = None
    buf = ""
    deadline = time.monotonic() + timeout + 30      # the start: imports
    stderr_chunks: list[str] = []
    err_thread = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()))
    err_thread.start()
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            proc.wait()
            if current is not None:
                results[current] = {"status": "hung",
                                    "message": f"no answer within {timeout} s (killed)"}
            else:
                _fail_rest(results, ids, "hung", "the worker did not start")
            break
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        data = os.read(fd, 1 << 16).decode("utf-8", "replace")
        if not data:                                # EOF: the worker ended
            rc = proc.wait()
            if current is not None:
                why = (f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
                err_thread.join(5)
                results[current] = {"status": "crashed", "message":
                                    f"the worker died ({why}) during this case:\n"
                                    + "".join(stderr_chunks)[-3000:]}
            elif rc != 0 and not results:
                err_thread.join(5)
                _fail_rest(results, ids, "crashed",
                           f"the worker failed (exit {rc}): " + "".join(stderr_chunks)[-3000:])
            break
        buf += data
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            if line.startswith("START "):
                current = line[6:]
                deadline = time.monotonic() + timeout
            elif line.startswith("DONE "):
                outcome = json.loads(line[5:])
                results[current] = outcome
                current = None
    err_thread.join(5)
    return results


def _fail_rest(results, ids, status, message):
    for c in ids:
        results.setdefault(c, {"status": status, "message": message})


def _load(module_path: str):
    spec = importlib.util.spec_from_file_location("_corpus_cases", module_path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_corpus_cases"] = mod
    spec.loader.exec_module(mod)
    return mod


def _worker(module_path: str) -> None:
    import faulthandler
    faulthandler.enable()
    # the protocol gets its own copy of stdout; anything a case (or the C
    # code, or the compiler) prints goes to stderr instead
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    mod = _load(module_path)
    cases = mod.CASES
    for line in sys.stdin.read().split("\n"):
        cid = line.strip()
        if not cid:
            continue
        out.write(f"START {cid}\n")
        out.flush()
        fn = cases.get(cid)
        if fn is None:
            outcome = {"status": "crashed", "message": f"no case {cid!r} in the worker"}
        else:
            outcome = capture(fn)
        out.write("DONE " + json.dumps(outcome, default=repr) + "\n")
        out.flush()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    _worker(sys.argv[1])
