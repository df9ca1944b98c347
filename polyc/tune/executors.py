"""Where the tuner's work runs: one interface, three engines.

An executor has :meth:`build` (compile candidates; any worker, in parallel)
and :meth:`measure` (check and time; one task at a time, on a quiet core),
both taking the payloads of :mod:`polyc.tune.measure` and returning its
result dicts, and :meth:`close`.

* :class:`InlineExecutor` runs everything in this process.
* :class:`PoolExecutor` compiles on a local process pool (``spawn``: a fresh
  interpreter per worker) and measures in this process; a worker that dies
  breaks only the tasks it held (they are reported as failed) and the pool
  is rebuilt.
* :class:`DaskExecutor` runs on ``dask.distributed`` (the ``tune`` extra):
  builds anywhere, measurements only on workers that hold a ``MEASURE``
  resource (``dask worker --resources MEASURE=1``), one at a time per such
  worker.  Tasks carry recipes (JSON) and the pickled program, never
  binaries: each worker compiles into its own cache.  A task whose worker
  dies is retried once elsewhere (``retries=1``), then reported failed.

In every engine a candidate's first run is in a child process
(:func:`polyc.tune.measure.check_in_child`), so a segfaulting kernel takes
down neither a worker nor the session.
"""

from __future__ import annotations

import logging
import os

from ..errors import PolycError
from .measure import build_task, measure_task

log = logging.getLogger(__name__)


class InlineExecutor:
    """Everything in this process, one task after the other."""
    name = "inline"

    def build(self, payloads: list[dict]) -> list[dict]:
        return [build_task(p) for p in payloads]

    def measure(self, payload: dict) -> dict:
        return measure_task(payload)

    def close(self) -> None:
        pass


def _failed(e: BaseException) -> dict:
    return {"ok": False, "seconds": 0.0, "error": f"the worker failed: {type(e).__name__}: {e}"}


def _no_workers() -> str:
    import sys
    main = sys.modules.get("__main__")
    where = (getattr(getattr(main, "__spec__", None), "name", None)
             or getattr(main, "__file__", None))
    hint = (f"; a worker is a fresh interpreter that first re-imports the main module "
            f"({where}), so a script must call polyc.tune under "
            f"`if __name__ == \"__main__\":` (Python's rule for spawned processes)"
            if where else "")
    return (f"executor 'pool': its worker processes died as they started{hint}; "
            f"or tune with executor='inline'")


class PoolExecutor(InlineExecutor):
    """Builds on a local pool of ``workers`` processes (default: the cores),
    measures in this process."""
    name = "pool"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._pool = None

    def _get(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            from concurrent.futures.process import BrokenProcessPool
            pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            try:        # a worker that cannot start fails every task: say why, once
                pool.submit(os.getpid).result()
            except BrokenProcessPool:
                pool.shutdown(wait=False, cancel_futures=True)
                raise PolycError(_no_workers()) from None
            self._pool = pool
        return self._pool

    def build(self, payloads: list[dict]) -> list[dict]:
        from concurrent.futures.process import BrokenProcessPool
        futures = [self._get().submit(build_task, p) for p in payloads]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except BrokenProcessPool as e:
                out.append(_failed(e))
                self._pool = None            # rebuilt on the next call
            except Exception as e:           # noqa: BLE001 (a task's own failure)
                out.append(_failed(e))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _probe(address: str, host: str, port: int, timeout: float) -> None:
    """Fail at once when nothing listens at ``host:port`` (a refused
    connection, an unknown host): distributed's Client retries those until
    its whole timeout has passed.  A scheduler that is slow to answer (a
    connect that times out here) is left to the Client's own timeout."""
    import socket
    try:
        with socket.create_connection((host, port), timeout=min(timeout, 2.0)):
            pass
    except (socket.timeout, TimeoutError):
        return
    except socket.gaierror as e:
        raise PolycError(f"cannot reach the dask scheduler at {address}: unknown host "
                         f"{host!r} ({e.strerror or e}); give the scheduler's address as "
                         f"dask://HOST:PORT or pass --executor pool") from None
    except OSError as e:        # ConnectionRefusedError, network unreachable
        raise PolycError(f"cannot reach the dask scheduler at {address}: "
                         f"{e.strerror or e}: nothing listens there; start one with "
                         f"`dask scheduler --host {host} --port {port}` or pass "
                         f"--executor pool") from None


class DaskExecutor:
    """Builds and measurements on a ``dask.distributed`` cluster.

    ``client``: a ``distributed.Client``, or the scheduler's address
    (``"tcp://HOST:PORT"``; ``"dask://HOST:PORT"`` is accepted too).
    Raises :class:`PolycError` when dask is not installed, the scheduler
    cannot be reached within ``timeout`` seconds, or no worker holds a
    ``MEASURE`` resource."""
    name = "dask"

    def __init__(self, client, timeout: float = 10.0):
        try:
            import distributed
        except ImportError:
            raise PolycError("the dask executor needs dask.distributed: "
                             "pip install 'polyc[tune]'") from None
        self._own = False
        if isinstance(client, str):
            address = client.replace("dask://", "tcp://", 1)
            if "://" not in address:
                address = "tcp://" + address
            host, _, port = address.split("://", 1)[1].rpartition(":")
            if not host or not port.isdigit():      # (distributed's bare ValueError)
                raise PolycError(f"executor {client!r}: give the dask scheduler's address "
                                 f"as dask://HOST:PORT, e.g. dask://127.0.0.1:8786")
            _probe(address, host.strip("[]"), int(port), timeout)
            try:
                client = distributed.Client(address, timeout=timeout)
            except (OSError, TimeoutError) as e:
                raise PolycError(f"cannot reach the dask scheduler at {address}: {e}; "
                                 f"start one with `dask scheduler` or pass "
                                 f"--executor pool") from None
            self._own = True
        self.client = client
        if getattr(client, "status", "running") in ("closed", "closing"):
            raise PolycError("the dask Client given as executor is closed; pass an open "
                             "Client or its scheduler's address (dask://HOST:PORT)")
        try:
            workers = client.scheduler_info().get("workers", {})
        except (OSError, RuntimeError, TimeoutError) as e:     # the scheduler went away
            self.close()
            raise PolycError(f"cannot reach the dask scheduler of {client}: "
                             f"{type(e).__name__}: {e}") from None
        if not any((w.get("resources") or {}).get("MEASURE") for w in workers.values()):
            self.close()
            raise PolycError("no dask worker holds a MEASURE resource: start the "
                             "measuring workers with `dask worker ... --resources "
                             "MEASURE=1` (one per quiet machine)")

    def build(self, payloads: list[dict]) -> list[dict]:
        futures = self.client.map(build_task, payloads, pure=False, retries=1)
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except Exception as e:           # noqa: BLE001 (KilledWorker, a task's failure)
                out.append(_failed(e))
        return out

    def measure(self, payload: dict) -> dict:
        f = self.client.submit(measure_task, payload, pure=False, retries=1,
                               resources={"MEASURE": 1})
        try:
            return f.result()
        except Exception as e:               # noqa: BLE001
            log.warning("a measurement task failed: %s", e)
            n = len(payload["recipes"])
            return {"failures": {i: f"the measuring worker failed: {type(e).__name__}: {e}"
                                 for i in range(n)},
                    "rounds": {}, "measured": [], "host": "?"}

    def close(self) -> None:
        if self._own:
            self.client.close()


def make_executor(spec) -> object:
    """An executor from ``spec``: ``None``/``"inline"``, ``"pool"``, a
    ``dask://`` or ``tcp://`` address, a ``distributed.Client``, or an
    executor object (returned as is)."""
    if spec is None or spec == "inline":
        return InlineExecutor()
    if spec == "pool":
        return PoolExecutor()
    if isinstance(spec, str):
        if spec.startswith(("dask://", "tcp://")):
            return DaskExecutor(spec)
        raise PolycError(f"executor {spec!r}: choose inline, pool or dask://HOST:PORT")
    if hasattr(spec, "build") and hasattr(spec, "measure"):
        return spec
    if type(spec).__name__ == "Client":
        return DaskExecutor(spec)
    raise PolycError(f"executor {spec!r}: choose inline, pool or dask://HOST:PORT")
