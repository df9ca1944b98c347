"""Promotion to shared memory of a mapped GPU kernel's inputs.

Takes the schedule that :func:`polyc.schedule.gpu_mapping.map_schedule`
prepared with ``promote=True`` (a permutable band tiled completely, its
sequential tile loops ``k`` between the blocks and the threads) and, for
each tensor such a kernel only reads, copies the box of it that one
iteration of the k-tile loop reads into a buffer in shared memory, which
the kernel's statements then read instead (PPCG's promotion to shared
memory; Verdoolaege et al., TACO 2013, section 4).  The footprints, the
box (``isl_map_get_range_simple_fixed_box_hull``), the copy statements and
the rewritten accesses are those of the CPU promotion,
:func:`polyc.schedule.promotion.promote_at`; what is GPU-specific:

* which tensors: read but not written by the kernel (so a copy-in suffices
  and no thread's write can be missed), through affine accesses, whose box
  is at most half the accesses of one k-tile iteration (each element is
  read at least twice, by several threads or iterations: the copy pays);
* the budget: 48 KiB of static shared memory per kernel
  (:data:`gpu_mapping.SHARED_BUDGET`);
* the copies run on every thread of the block: their innermost loops carry
  a :class:`~.gpu_marks.Copy` mark that maps them to thread indices (the
  innermost on ``x``: consecutive threads copy consecutive elements);
* the code generator puts a barrier after the copies and at the end of each
  k-tile iteration (:mod:`backends.cuda.emit`): every value a thread reads
  from the buffer was copied before the first barrier, and no copy of the
  next iteration overwrites it before the second.

Every promotion decision, taken or not, is recorded in the kernel's
``promoted`` report.
"""

from __future__ import annotations

import math

import islpy as isl
import numpy as np

from ..errors import ScheduleError
from ..ir import Program
from ..isl_util import CTX
from . import gpu_marks as M
from .gpu_mapping import (
    PROMOTE_TILE,
    SHARED_BUDGET,
    KernelMapping,
)
from .legality import without_extensions
from .promotion import affine_accesses, promote_at
from .tree import walk

_T = isl.schedule_node_type

#: isl operations one promotion's analysis may take (``isl_ctx_set_max_operations``):
#: the footprints of a skewed or many-statement kernel can take minutes; such
#: a kernel keeps its tensors in global memory.
MAX_OPERATIONS = 300_000


def _kernel_node(schedule: isl.Schedule, index: int) -> isl.ScheduleNode:
    """The ``gpu_kernel`` mark of kernel ``index``."""
    return next(n for n in walk(schedule.get_root()) if M.of(n) == M.Kernel(index))


def _ktile_band(schedule: isl.Schedule, k: KernelMapping) -> isl.ScheduleNode:
    """The k-tile band of kernel ``k``: kernel mark -> blocks mark -> tile
    band -> k-tile band."""
    node = _kernel_node(schedule, k.index).child(0).child(0).child(0)
    assert node.get_type() == _T.band and node.get_schedule_depth() == k.promote_depth
    return node


def _candidates(program: Program, k: KernelMapping) -> list[str]:
    stmts = [program.statement(s) for s in k.statements]
    written = {s.tensor for s in stmts}
    read = sorted({t for s in stmts for t in s.read_tensors()} - written)
    return [t for t in read if program.tensor(t).role != "local" and program.tensor(t).ndim
            and all(affine_accesses(s, t) for s in stmts if t in s.read_tensors())]


def promote_shared(schedule: isl.Schedule, program: Program,
                   kernels: list[KernelMapping]) -> tuple[isl.Schedule, Program]:
    """``schedule`` and ``program`` with the promotable inputs of each
    prepared kernel in shared memory (see the module docstring); each
    kernel's ``promoted`` says what happened to every candidate."""
    copies: dict[str, KernelMapping] = {}
    for k in kernels:
        if k.promote_depth < 0:
            continue
        accesses = math.prod(k.tile) * PROMOTE_TILE
        for tensor in _candidates(program, k):
            band = _ktile_band(schedule, k)
            old = CTX.get_max_operations()
            CTX.set_max_operations(MAX_OPERATIONS)
            CTX.reset_operations()
            try:
                taken = {t.name for t in program.tensors}
                name = next(nm for nm in (f"{tensor}_shared", *(f"{tensor}_shared{i}"
                                                                for i in range(len(taken) + 1)))
                            if nm not in taken)
                new_sched, new_prog = promote_at(
                    band, program, tensor, name=name,
                    where=f"GPU kernel {k.index}, tensor {tensor}", loop="the k-tile loop",
                    order=without_extensions(schedule), max_bytes=SHARED_BUDGET,
                    memory="shared memory (static, per block)")
            except ScheduleError as e:
                k.promoted[tensor] = f"global ({str(e).split(': ', 1)[-1]})"
                continue
            except isl.Error:
                k.promoted[tensor] = (f"global (the footprint analysis went over its budget "
                                      f"of {MAX_OPERATIONS} isl operations)")
                continue
            finally:
                CTX.set_max_operations(old)
                CTX.reset_operations()
            buf = new_prog.tensors[-1]
            box = buf.constant_shape()
            if 2 * math.prod(box) > accesses:
                k.promoted[tensor] = (f"global (its box {'x'.join(map(str, box))} is read "
                                      "less than twice per element: no reuse to exploit)")
                continue
            schedule, program = new_sched, new_prog
            nbytes = math.prod(box) * np.dtype(buf.dtype).itemsize
            k.promoted[tensor] = (f"shared {buf.name}[{']['.join(map(str, box))}] "
                                  f"({nbytes} bytes, copied in per k-tile iteration)")
            for st in program.statements:
                if st.kind == "copy" and st.tensor == buf.name:
                    copies[st.name] = k
    return (mark_copies(schedule, program, copies) if copies else schedule), program


def mark_copies(schedule: isl.Schedule, program: Program,
                 copies: dict[str, KernelMapping]) -> isl.Schedule:
    """A ``gpu_copy`` mark above each innermost copy band: its innermost
    members (as many as the kernel has thread axes) map to the thread
    indices.  A copy band with another copy band below it (a user's
    ``tile`` of the copy loops) runs in every thread: marking both put
    two nested loops on ``threadIdx.x``, and most elements were copied by
    no thread."""
    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != _T.band:
            return node
        names: list[str] = []
        node.band_get_partial_schedule().domain().foreach_set(
            lambda s: names.append(s.get_tuple_name()))
        if not names or any(nm not in copies for nm in names):
            return node
        if _copy_mark_below(node.child(0)):
            return node
        k = copies[names[0]]
        n = node.band_n_member()
        na = min(n, len(k.tile))
        depth = node.get_schedule_depth() + n - na
        return node.insert_mark(M.Copy(depth, na).id())
    return schedule.map_schedule_node_bottom_up(fn)


def _copy_mark_below(node: isl.ScheduleNode) -> bool:
    """Whether the subtree at ``node`` holds a ``gpu_copy`` mark."""
    if node.get_type() == _T.mark and isinstance(M.of(node), M.Copy):
        return True
    return any(_copy_mark_below(node.child(i)) for i in range(node.n_children()))
