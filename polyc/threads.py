"""What idle OpenMP threads of generated kernels do between calls
(``Config.wait_policy``).

GNU libgomp keeps a team's threads spinning after a parallel region ends:
300,000 spins by default (``GOMP_SPINCOUNT``), a millisecond or more on
current x86 cores, before they sleep.  A program that alternates polyc
kernels with numpy (OpenBLAS) or torch calls then has polyc's idle threads
spinning on the cores those libraries need.  libgomp reads its settings once,
when it is loaded, so they must be in the process environment before the
first kernel (which links libgomp) is loaded:

* ``"short"`` (the default): ``GOMP_SPINCOUNT=1000``, microseconds of
  spinning, so kernels called back to back mostly find their team awake;
* ``"passive"``: ``OMP_WAIT_POLICY=PASSIVE``, sleep at once (each parallel
  region then wakes its threads through the kernel: a few microseconds);
* ``"active"``: ``OMP_WAIT_POLICY=ACTIVE``, libgomp's long spinning.

Measured (``python -m benchmarks.threads``, 2-core AMD EPYC): a softmax
kernel alternating with a 256x256 numpy matmul took 8.2 ms per step with
libgomp's default spinning, 1.5 ms with 20,000 spins, 0.33 ms with 1,000
and 0.38-0.43 ms passive; the kernel alone 94, 109 and 180 us.

A user's own ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` always wins.  The
variables are set with libc's ``setenv`` (what libgomp's ``getenv`` reads),
not in ``os.environ``, so processes that Python starts do not inherit them.
Source: the libgomp manual, "OMP_WAIT_POLICY" and "GOMP_SPINCOUNT".
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading

logger = logging.getLogger(__name__)

#: the libgomp variables of each policy
POLICY_ENV = {
    "short": ("GOMP_SPINCOUNT", "1000"),
    "passive": ("OMP_WAIT_POLICY", "PASSIVE"),
    "active": ("OMP_WAIT_POLICY", "ACTIVE"),
}

_lock = threading.Lock()
_applied: str | None = None


def _libgomp_loaded() -> bool:
    """Whether GNU libgomp is already mapped into this process (Linux; other
    systems: assume not)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any(line.rstrip().endswith("/libgomp.so.1") for line in f)
    except OSError:
        return False


def _setenv(name: str, value: str) -> bool:
    try:
        libc = ctypes.CDLL(None)
        return libc.setenv(name.encode(), value.encode(), 0) == 0
    except (OSError, AttributeError):
        return False


def apply_wait_policy(policy: str) -> str:
    """Make ``policy`` (a ``Config.wait_policy``) the OpenMP runtime's, if it
    is not loaded yet; called before a kernel is loaded.  Returns what
    governs the runtime: the policy, ``"environment"`` (the user set
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``), ``"preloaded"`` (libgomp was
    loaded before polyc's first kernel, by another library, with its own
    settings) or the policy applied first (later calls cannot change it; a
    different one is logged).  Never raises: the policy only costs or saves
    time."""
    global _applied
    with _lock:
        if _applied is None:
            if os.environ.get("OMP_WAIT_POLICY") or os.environ.get("GOMP_SPINCOUNT"):
                _applied = "environment"
            elif _libgomp_loaded():
                _applied = "preloaded"
                logger.info("libgomp was loaded before polyc's first kernel; its wait "
                            "policy stays as that library set it (Config.wait_policy=%r "
                            "not applied)", policy)
            else:
                name, value = POLICY_ENV[policy]
                _applied = policy if _setenv(name, value) else "environment"
        elif _applied in POLICY_ENV and policy != _applied:
            logger.info("Config.wait_policy=%r ignored: the OpenMP runtime was started "
                        "with %r, which it keeps for the life of the process",
                        policy, _applied)
        return _applied


#: ``GOMP_SPINCOUNT`` values up to this count as short spinning
SHORT_SPINS = 20000


def spins_long(applied: str) -> bool:
    """Whether the OpenMP runtime governed as ``applied`` (what
    :func:`apply_wait_policy` returned) keeps idle threads spinning long
    after a parallel region: libgomp's default (300,000 spins) when another
    library loaded it first (torch does), ``"active"``, or a user's
    ``OMP_WAIT_POLICY=ACTIVE`` or ``GOMP_SPINCOUNT`` above
    :data:`SHORT_SPINS` (``INFINITE`` included)."""
    if applied == "preloaded" or applied == "active":
        return True
    if applied != "environment":
        return False
    policy = os.environ.get("OMP_WAIT_POLICY", "").strip().upper()
    if policy == "PASSIVE":
        return False
    spins = os.environ.get("GOMP_SPINCOUNT", "").strip().upper()
    if spins:
        if spins in ("INFINITE", "INFINITY"):
            return True
        try:
            return int(spins) > SHORT_SPINS
        except ValueError:
            return policy == "ACTIVE"
    return policy == "ACTIVE"


def gemm_on_team(applied: str) -> bool:
    """Whether the GEMM's multi-threaded calls run on the OpenMP team rather
    than its own thread pool (``gemm.h``, "the thread pool"): when the
    team's idle threads spin long (:func:`spins_long`), they would hold the
    cores the pool needs.  ``POLYC_GEMM_TEAM=1`` or ``0`` decides instead;
    another value raises :class:`polyc.errors.PolycError`."""
    from .errors import PolycError
    forced = os.environ.get("POLYC_GEMM_TEAM")
    if forced is not None:
        if forced.strip() not in ("0", "1"):
            raise PolycError(f"POLYC_GEMM_TEAM={forced!r}: use 1 (GEMM calls on the OpenMP "
                             "team) or 0 (on the GEMM's own thread pool)")
        return forced.strip() == "1"
    return spins_long(applied)

