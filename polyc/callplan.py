"""Call plans: the fast path of a warm kernel call (:class:`CallPlan`).

:meth:`polyc.runtime.Kernel.__call__` checks every argument through
:class:`polyc.binder.Binder`; what those checks derive depends only on the
argument *signature* (shapes, dtypes, sizes).  A call whose signature
already passed them reuses what they derived and pays only for the output
allocation and the C call.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Callable, Protocol, Sequence

import numpy as np

from . import output_pool
from .ir import Program, Tensor

_addressof = ctypes.addressof
_c_char = ctypes.c_char


class BinderLike(Protocol):
    """What a plan reads of the checks of one kernel's arguments
    (:class:`polyc.binder.Binder` provides it; this module does not import
    the runtime)."""

    program: Program
    #: ``(index tensor, gathered tensor, dim)`` per gather (data-dependent checks)
    gathers: Sequence[tuple[str, str, int]]
    #: per call argument: its dtype (a tensor) or ``None`` (a size)
    signature_kinds: Sequence[np.dtype | None]
    #: the outputs, and per output / temporary one extent function per
    #: dimension (of the parameter values)
    outputs: Sequence[Tensor]
    out_shapes: Sequence[Sequence[Callable[..., int]]]
    temp_shapes: Sequence[Sequence[Callable[..., int]]]
    #: the outputs some sizes leave partly unwritten (allocated zero-filled)
    partial: frozenset[str]


class CallPlan:
    """What a call at one argument signature needs once its checks passed:
    the parameter array, the outputs' and temporaries' shapes, where each
    buffer comes from, the thread count.  A later call with the same
    signature (the same shapes, dtypes and sizes; C-contiguous, aligned
    arrays; ``out=`` arrays that :meth:`plain_outs` accepts) skips
    :meth:`polyc.runtime.Binder.bind`'s checks, which depend on nothing
    else, and pays only for the allocation and the C call.

    Kernels whose checks depend on the data (gathers through index tensors,
    in-place arguments that may share memory) have no plans."""

    #: Signatures remembered per kernel (a kernel called at many sizes keeps
    #: the first ones; the others take the checked path).
    MAX_PLANS = 64

    #: Temporaries of at most this many bytes per call are kept between
    #: calls (per plan and thread, like a caching allocator): a fresh large
    #: array costs a page fault per 4 KiB page on its first touch, every call.
    SCRATCH_BYTES = 64 << 20

    __slots__ = ("params", "params_at", "allocs", "layout", "threads", "run_c", "single",
                 "scratch", "shim", "entry", "slots", "pairs")

    @staticmethod
    def cache_for(program: Program, binder: BinderLike) -> dict | None:
        if binder.gathers or any(t.role == "inout" for t in program.tensors):
            return None
        return {}

    @staticmethod
    def key(binder: BinderLike, args: tuple, shim=None):
        """The plan key of ``args`` (per argument its value, a size, or its
        shape), or ``None`` when an argument keeps the call on the checked
        path; through the call shim's C ``key`` when ``shim`` is given."""
        kinds = binder.signature_kinds
        if shim is not None:
            return shim.key(args, kinds)
        if len(args) != len(kinds):
            return None
        key = []
        for arg, dt in zip(args, kinds):
            if dt is None:
                if type(arg) is not int:
                    return None
                key.append(arg)
            else:
                if type(arg) is not np.ndarray or arg.dtype != dt:
                    return None
                flags = arg.flags
                if not (flags.c_contiguous and flags.aligned):
                    return None
                key.append(arg.shape)
        return tuple(key)

    def __init__(self, binder: BinderLike, pvals: list[int], run: bool, threads: int,
                 shim=None, entry: int | None = None):
        """``shim`` (:mod:`polyc.backends.c.callshim`) with ``entry``, the
        generated function's address: :meth:`run` calls it in C instead of
        through ctypes."""
        p = binder.program
        self.params = np.array(pvals or [0], dtype=np.int64)
        self.params_at = self.params.ctypes.data
        shapes = [tuple(int(fn(*pvals)) for fn in fns) for fns in binder.out_shapes]
        self.allocs = [((output_pool.zeros if t.name in binder.partial else output_pool.empty), sh,
                        np.dtype(t.dtype)) for sh, t in zip(shapes, binder.outputs)]
        temps = [tuple(max(0, int(fn(*pvals))) for fn in fns) for fns in binder.temp_shapes]
        position = {name: i for i, name in enumerate(p.signature)}
        layout = []
        k = j = 0
        for t in p.tensors:
            if t.role == "input":
                layout.append(("arg", position[t.name], None))
            elif t.role == "output":
                layout.append(("out", k, None))
                k += 1
            elif t.role == "temp":
                layout.append(("temp", temps[j], np.dtype(t.dtype)))
                j += 1
        self.layout = layout
        temp_bytes = sum(int(np.prod(i)) * dt.itemsize for kind, i, dt in layout
                         if kind == "temp")
        self.scratch = threading.local() if 0 < temp_bytes <= self.SCRATCH_BYTES else None
        self.threads = threads
        self.run_c = run
        self.single = len(self.allocs) == 1
        self.shim = shim if entry else None
        self.entry = entry
        # per pointer: (0 argument | 1 output | 2 temporary, its index there)
        src = {"arg": 0, "out": 1, "temp": 2}
        pairs, t = [], 0
        for kind, i, _ in layout:
            pairs.append((src[kind], t if kind == "temp" else i))
            t += kind == "temp"
        self.pairs = tuple(pairs)
        self.slots = np.array(pairs, dtype=np.int32).reshape(-1).tobytes()

    def run(self, fn, args: tuple, outs: Sequence | None = None):
        """Call ``fn`` on ``args``; the outputs are fresh arrays, or the
        arrays of ``outs`` (per output an array or ``None``) that have the
        output's exact shape and dtype and are C-contiguous (a caller's
        reused buffers: :mod:`polyc.graph.workspace`; those of a partly
        written output are zero-filled first, as a fresh one would be)."""
        if outs is None:
            results = [alloc(shape, dt) for alloc, shape, dt in self.allocs]
        else:
            results = [self._reuse(o, alloc, shape, dt)
                       for o, (alloc, shape, dt) in zip(outs, self.allocs)]
        if self.run_c:
            temps = self._temps()
            if self.shim is not None:
                self.shim.run(self.entry, self.params_at, self.threads, self.slots, args,
                              results, temps)
            else:
                source = (args, results, temps)
                ptrs = (ctypes.c_void_p * max(len(self.layout), 1))()
                for j, (s, i) in enumerate(self.pairs):
                    a = source[s][i]
                    try:     # a writable, non-empty buffer: 5x faster than the array interface
                        ptrs[j] = _addressof(_c_char.from_buffer(a))
                    except (TypeError, ValueError):
                        ptrs[j] = a.__array_interface__["data"][0]
                fn(self.params_at, _addressof(ptrs), self.threads)
        if not results:
            return None
        return results[0] if self.single else tuple(results)

    def plain_outs(self, out, args: tuple) -> list | None:
        """The arrays of a caller's ``out=`` (one array, or a tuple or list
        of one per output) when the fast path can write into them as the
        checked path would: each of its output's exact shape and dtype,
        C-contiguous, aligned and writeable, sharing no memory with an
        argument or another output (bounds only: ``np.may_share_memory``);
        else ``None`` (the checked path copies overlapping inputs, or
        raises the error a wrong ``out`` deserves)."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(self.allocs):
            return None
        for k, (o, (_, shape, dt)) in enumerate(zip(outs, self.allocs)):
            if not (type(o) is np.ndarray and o.shape == shape and o.dtype == dt):
                return None
            flags = o.flags
            if not (flags.c_contiguous and flags.aligned and flags.writeable):
                return None
            if any(type(a) is np.ndarray and np.may_share_memory(a, o) for a in args) or any(
                    np.may_share_memory(p, o) for p in outs[:k]):
                return None
        return outs

    @staticmethod
    def _reuse(o, alloc, shape, dt):
        if not (type(o) is np.ndarray and o.shape == shape and o.dtype == dt
                and o.flags.c_contiguous and o.flags.writeable):
            return alloc(shape, dt)
        if alloc is output_pool.zeros:
            o.fill(0)
        return o

    def _temps(self) -> list:
        """The temporaries of this call: this thread's of earlier calls, or
        fresh ones."""
        if self.scratch is None:
            return [np.empty(i, dtype=dt) for kind, i, dt in self.layout if kind == "temp"]
        keep = getattr(self.scratch, "temps", None)
        if keep is None:
            keep = self.scratch.temps = [np.empty(i, dtype=dt)
                                         for kind, i, dt in self.layout if kind == "temp"]
        return keep
