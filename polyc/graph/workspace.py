"""Buffers for a plan's intermediate tensors, kept from one call to the next.

A plan's kernels pass their results to each other through arrays: a BERT
layer at sequence 512 writes about 25 MiB of them per call, a ResNet block
about 4 MiB.  A fresh large array costs the process a page fault, and the
kernel a zero-filled page, for every 4 KiB it touches first (measured: 12%
of a ResNet basic block's time went to page faults and page clearing).  A
:class:`Workspace` gives the plan's kernels the same buffers at every call
of one shape class instead, the way a framework's caching allocator or
XLA's buffer assignment does:

* an *intermediate* is a tensor a kernel of the plan produces that the
  function does not return (what it returns is always a fresh array that
  the caller owns);
* its live range runs from the kernel that produces it to the last kernel
  that reads it; intermediates whose live ranges do not overlap share one
  buffer (a *slot*: greedy best fit in production order, the interval
  assignment of linear-scan allocators), so the workspace holds the
  largest set of simultaneously live intermediates, not all of them;
* a kernel never writes a slot that one of its inputs lives in: a tenant
  frees its slot only after its last reader has run.

The first call of a shape class runs on fresh arrays and records the
intermediates' shapes and dtypes; the workspace for that class is built
from them.  Each call takes a workspace from a pool and returns it after
the last kernel, so concurrent calls of one jitted function (threads) never
share buffers: a call that finds the pool empty builds its own.  At most
:data:`Workspace.MAX_CLASSES` shape classes keep workspaces.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

log = logging.getLogger(__name__)

#: slot alignment in bytes (a cache line; the kernels vectorise on 64 bytes)
ALIGN = 64


class Workspace:
    """The reused buffers of one plan (see the module docstring).

    ``sources``: per kernel in execution order, its inputs and outputs
    (objects with ``.name``; :class:`polyc.graph.lower.GroupSource`);
    ``returned``: the names of the tensors the function returns."""

    #: shape classes (size tuples) whose workspaces are kept, least recently
    #: used dropped first
    MAX_CLASSES = 4

    def __init__(self, sources: Sequence[Any], returned: set[str]) -> None:
        produced: dict[str, int] = {}
        last: dict[str, int] = {}
        for k, src in enumerate(sources):
            for n in src.inputs:
                last[n.name] = k
            for n in src.outputs:
                produced.setdefault(n.name, k)
        #: intermediate -> (producing kernel, last reading kernel)
        self.live = {t: (k, max(k, last.get(t, k))) for t, k in produced.items()
                     if t not in returned}
        self._pools: OrderedDict[tuple, list[dict[str, np.ndarray]]] = OrderedDict()
        self._layouts: dict[tuple, dict[str, tuple]] = {}
        self._lock = threading.Lock()

    # -- buffer assignment -----------------------------------------------------------
    def assign(self, nbytes: dict[str, int]) -> tuple[list[int], dict[str, int]]:
        """Slots for intermediates of ``nbytes`` bytes each: the slots'
        capacities (bytes) and each intermediate's slot.  Two intermediates
        share a slot only when one's last reader runs before the other's
        producer."""
        caps: list[int] = []
        free_after: list[int] = []           # per slot: its tenant's last reader
        where: dict[str, int] = {}
        for t in sorted(self.live, key=lambda t: (self.live[t][0], t)):
            start, end = self.live[t]
            need = -(-nbytes[t] // ALIGN) * ALIGN
            free = [s for s in range(len(caps)) if free_after[s] < start]
            fits = [s for s in free if caps[s] >= need]
            if fits:
                s = min(fits, key=lambda s: (caps[s], s))
            elif free:
                s = max(free, key=lambda s: (caps[s], -s))
                caps[s] = need
            else:
                s = len(caps)
                caps.append(need)
                free_after.append(end)
            free_after[s] = end
            where[t] = s
        return caps, where

    def total_bytes(self, key: tuple) -> int:
        """The bytes one workspace of shape class ``key`` holds (0 before
        its first call)."""
        layout = self._layouts.get(key)
        if not layout:
            return 0
        caps, _ = self.assign({t: n for t, (_, _, n) in layout.items()})
        return sum(caps)

    def _build(self, key: tuple) -> dict[str, np.ndarray]:
        layout = self._layouts[key]
        caps, where = self.assign({t: n for t, (_, _, n) in layout.items()})
        slots = []
        for cap in caps:
            raw = np.empty(cap + ALIGN, dtype=np.uint8)
            off = (-raw.ctypes.data) % ALIGN
            slots.append(raw[off:off + cap])
        return {t: slots[where[t]][:n].view(dt).reshape(shape)
                for t, (shape, dt, n) in layout.items()}

    # -- per call ----------------------------------------------------------------------
    def acquire(self, key: tuple) -> dict[str, np.ndarray] | None:
        """A workspace of shape class ``key`` (intermediate name -> array),
        or ``None`` on the class's first call (its shapes are not known
        yet: the call allocates, and :meth:`release` records them)."""
        if not self.live:
            return None
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                if pool:
                    return pool.pop()
            if key not in self._layouts:
                return None
        return self._build(key)

    def release(self, key: tuple, arrays: dict[str, np.ndarray] | None,
                env: dict[str, Any]) -> None:
        """Return ``arrays`` (from :meth:`acquire`) to the pool of ``key``;
        after a first call (``arrays`` ``None``), record the intermediates'
        shapes and dtypes from ``env`` (name -> the array the call made)."""
        if not self.live:
            return
        with self._lock:
            if arrays is None:
                if key in self._layouts:
                    return
                layout = {}
                for t in self.live:
                    a = env.get(t)
                    if not isinstance(a, np.ndarray):
                        return           # (a kernel that did not run: nothing recorded)
                    layout[t] = (a.shape, a.dtype, a.nbytes)
                self._layouts[key] = layout
                self._pools[key] = []
                while len(self._pools) > self.MAX_CLASSES:
                    old, _ = self._pools.popitem(last=False)
                    self._layouts.pop(old, None)
                log.debug("workspace for sizes %s: %d intermediates in %d bytes", key,
                          len(layout), self.total_bytes(key))
                return
            pool = self._pools.get(key)
            if pool is not None and len(pool) < 2:
                pool.append(arrays)
