"""Large kernel outputs whose memory comes back to polyc when freed.

A kernel's outputs are fresh arrays that the caller owns.  A large one
costs, at every call, a page fault and a zero-filled page from the
operating system for every 4 KiB the kernel writes first: glibc's malloc
serves an allocation above its mmap threshold (at most 32 MiB) with a
fresh ``mmap``, and below it returns the top of the heap to the system
whenever more than twice that threshold is free there, so a program that
frees two 16 MiB outputs per call (TC's softmax: ``O`` and ``expDist``)
faults all 32 MiB back in at the next call.  Measured on a 2-core VM: the
softmax over 4096 x 1024 took 5.4 ms a call against 1.5 ms into
preallocated outputs, TC's group norm (151 MiB out) 15.0 against 10.3.

An output of at least :data:`MIN_BYTES` is therefore a view of a block
that a :class:`_Lease` holds: numpy keeps the lease alive as long as the
array or any view of it lives (it is the array's ``base``), and when the
last one goes the lease's finaliser puts the block back into a pool
instead of freeing it; the next output of that size takes it, its pages
already mapped.  This is what a framework's caching allocator does
(PyTorch's CUDA allocator keeps freed blocks the same way).  No block is
reused while anything refers to it: the lease exists until then.

The pool keeps at most :data:`capacity` bytes of free blocks (the least
recently freed dropped first; ``POLYC_OUTPUT_POOL_MIB``, default 512;
``0`` turns the pool off) and :func:`release` empties it.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections import OrderedDict

import numpy as np

log = logging.getLogger(__name__)

#: the smallest output (bytes) taken from the pool: a smaller one comes from
#: numpy's allocator (glibc keeps freed blocks of a few MiB in its heap; a
#: lease costs about 3 us, a few percent of writing 4 MiB)
MIN_BYTES = 4 << 20
#: blocks are whole pages, so outputs of nearby sizes share them
PAGE = 4096
#: the offset of an output in its block: a cache line
ALIGN = 64


def _capacity_from_env() -> int:
    text = os.environ.get("POLYC_OUTPUT_POOL_MIB", "").strip()
    if not text:
        return 512 << 20
    try:
        mib = int(text)
    except ValueError:
        mib = -1
    if mib < 0:
        log.warning("POLYC_OUTPUT_POOL_MIB=%r is not a non-negative integer (MiB; 0 turns "
                    "the pool off): the default 512 MiB is used", text)
        return 512 << 20
    return mib << 20


class _Pool:
    """Free blocks in freeing order: a request takes the most recently
    freed block of its size; over capacity, the least recently freed go."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        #: id -> (block, its aligned start address)
        self.free: OrderedDict[int, tuple[np.ndarray, int]] = OrderedDict()
        self.bytes = 0

    def take(self, size: int) -> tuple[np.ndarray, int] | None:
        """A free block of exactly ``size`` bytes and its aligned start, or
        ``None``."""
        with self.lock:
            for key in reversed(self.free):
                if self.free[key][0].nbytes == size:
                    self.bytes -= size
                    return self.free.pop(key)
        return None

    def put(self, entry: tuple[np.ndarray, int]) -> None:
        size = entry[0].nbytes
        with self.lock:
            if size > self.capacity:
                return
            self.free[id(entry[0])] = entry
            self.bytes += size
            while self.bytes > self.capacity:
                _, (old, _) = self.free.popitem(last=False)
                self.bytes -= old.nbytes

    def release(self) -> int:
        with self.lock:
            freed, self.bytes = self.bytes, 0
            self.free.clear()
        return freed


_POOL = _Pool(_capacity_from_env())


class _Lease:
    """The owner of one output's block while any array uses it: numpy's
    array interface gives the bytes, ``__del__`` returns the block."""

    __slots__ = ("entry", "pool", "__array_interface__")

    def __init__(self, entry: tuple[np.ndarray, int], nbytes: int, pool: _Pool) -> None:
        self.entry = entry
        self.pool = pool            # the pool it came from, whichever is current later
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                    "data": (entry[1], False), "version": 3}

    def __del__(self) -> None:
        try:
            self.pool.put(self.entry)
        except Exception:           # interpreter shutdown: the pool may be gone
            pass


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    return math.prod(int(s) for s in shape) * dtype.itemsize


def _pooled(nbytes: int, dtype: np.dtype) -> bool:
    return nbytes >= MIN_BYTES and _POOL.capacity > 0 and not dtype.hasobject


def _leased(shape: tuple, dtype: np.dtype, nbytes: int) -> np.ndarray:
    size = (nbytes + ALIGN + PAGE - 1) // PAGE * PAGE
    pool = _POOL
    entry = pool.take(size)
    if entry is None:
        block = np.empty(size, dtype=np.uint8)
        start = block.ctypes.data
        entry = (block, start + -start % ALIGN)
    # every view of the output leads to the lease through its bases, so the
    # block returns when the last of them goes
    return np.asarray(_Lease(entry, nbytes, pool)).view(dtype).reshape(shape)


def empty(shape: tuple, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the pool when it is large (module
    docstring).  Raises ``ValueError`` as numpy does for a size too large."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = _nbytes(shape, dtype)
    if not _pooled(nbytes, dtype):
        return np.empty(shape, dtype=dtype)
    return _leased(shape, dtype, nbytes)


def zeros(shape: tuple, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)``, from the pool when it is large."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = _nbytes(shape, dtype)
    if not _pooled(nbytes, dtype):
        return np.zeros(shape, dtype=dtype)
    out = _leased(shape, dtype, nbytes)
    out.fill(0)
    return out


def release() -> int:
    """Free every block the pool holds (returns their bytes)."""
    return _POOL.release()


def pooled_bytes() -> int:
    """Bytes of free blocks the pool holds now."""
    return _POOL.bytes
