"""The marks of a GPU-mapped schedule tree, one small dataclass each.

A mark node of an isl schedule tree carries only an ``isl.Id`` name; the
GPU mapping (:mod:`.gpu_mapping`, :mod:`.gpu_rows`, :mod:`.gpu_promotion`,
:mod:`.gpu_schedule`) says with these marks which subtree is a kernel and
which loops run on blocks and threads.  Every mark is built here
(:meth:`GpuMark.id`) and read back here (:func:`parse`, :func:`of`), so no
other module spells or splits a mark's name:

==================  ============================  =====================================
mark                name                          meaning
==================  ============================  =====================================
:class:`Kernel`     ``gpu_kernel:<k>``            the subtree below is launch ``k``
:class:`Blocks`     ``gpu_blocks:<d>:<n>``        loops ``c<d>..c<d+n-1>`` on blockIdx
:class:`Threads`    ``gpu_threads:<d>:<n>``       loops ``c<d>..`` on threadIdx
:class:`GridReduce` ``gpu_reduce:<d>:<n>``        loop ``c<d>`` strided over the grid
:class:`Batch`      ``gpu_batch:<d>:<n>``         a tensor-core launch's batch loop on z
:class:`Copy`       ``gpu_copy:<d>:<n>``          a promotion's copy loops on threadIdx
:class:`Private`    ``gpu_private``               the buffer below is per thread
:class:`Barrier`    ``gpu_barrier:<k>:<i>``       barrier ``i`` of kernel ``k`` first
:class:`BlockReduce` ``gpu_block_reduce=<S>``     the block reduces statement ``S``
:class:`UserBlocks` ``gpu_map_blocks``            ``map_to_blocks`` (schedule language)
:class:`UserThreads` ``gpu_map_threads[:s,..]``   ``map_to_threads`` with its sizes
==================  ============================  =====================================

Loops are named by schedule depth (``c<d>`` in isl's AST), the innermost
mapped member on ``x``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import islpy as isl

from ..isl_util import CTX


@dataclass(frozen=True)
class GpuMark:
    """A GPU mark; its name is ``PREFIX`` followed by its fields."""
    PREFIX: ClassVar[str] = ""
    SEP: ClassVar[str] = ":"

    def name(self) -> str:
        values = [str(getattr(self, f.name)) for f in fields(self)]
        return self.SEP.join([self.PREFIX, *values]) if values else self.PREFIX

    def id(self) -> isl.Id:
        return isl.Id(self.name(), context=CTX)


@dataclass(frozen=True)
class Kernel(GpuMark):
    PREFIX: ClassVar[str] = "gpu_kernel"
    index: int


@dataclass(frozen=True)
class _Loops(GpuMark):
    """Loops ``c<depth>`` .. ``c<depth + n - 1>`` mapped to a CUDA index;
    ``index`` is what they stride over (``block``, ``thread``, ``global``)."""
    depth: int
    n: int
    index: ClassVar[str] = ""


@dataclass(frozen=True)
class Blocks(_Loops):
    PREFIX: ClassVar[str] = "gpu_blocks"
    index: ClassVar[str] = "block"


@dataclass(frozen=True)
class Threads(_Loops):
    PREFIX: ClassVar[str] = "gpu_threads"
    index: ClassVar[str] = "thread"


@dataclass(frozen=True)
class GridReduce(_Loops):
    PREFIX: ClassVar[str] = "gpu_reduce"
    index: ClassVar[str] = "global"


@dataclass(frozen=True)
class Batch(_Loops):
    PREFIX: ClassVar[str] = "gpu_batch"
    index: ClassVar[str] = "block"


@dataclass(frozen=True)
class Copy(_Loops):
    PREFIX: ClassVar[str] = "gpu_copy"
    index: ClassVar[str] = "thread"


@dataclass(frozen=True)
class Private(GpuMark):
    PREFIX: ClassVar[str] = "gpu_private"


@dataclass(frozen=True)
class Barrier(GpuMark):
    PREFIX: ClassVar[str] = "gpu_barrier"
    kernel: int
    number: int


@dataclass(frozen=True)
class BlockReduce(GpuMark):
    PREFIX: ClassVar[str] = "gpu_block_reduce"
    SEP: ClassVar[str] = "="
    statement: str


@dataclass(frozen=True)
class UserBlocks(GpuMark):
    PREFIX: ClassVar[str] = "gpu_map_blocks"


@dataclass(frozen=True)
class UserThreads(GpuMark):
    PREFIX: ClassVar[str] = "gpu_map_threads"
    sizes: tuple[int, ...] = ()

    def name(self) -> str:
        return self.PREFIX + (":" + ",".join(map(str, self.sizes)) if self.sizes else "")


_KINDS = {k.PREFIX: k for k in (Kernel, Blocks, Threads, GridReduce, Batch, Copy, Private,
                                Barrier, BlockReduce, UserBlocks)}


def parse(name: str) -> GpuMark | None:
    """The GPU mark named ``name``, ``None`` for any other mark."""
    if name.startswith(UserThreads.PREFIX):
        rest = name[len(UserThreads.PREFIX):]
        if rest == "":
            return UserThreads()
        if rest.startswith(":"):
            return UserThreads(tuple(int(v) for v in rest[1:].split(",")))
        return None
    if name.startswith(BlockReduce.PREFIX + BlockReduce.SEP):
        return BlockReduce(name[len(BlockReduce.PREFIX) + 1:])
    head, _, rest = name.partition(":")
    kind = _KINDS.get(head)
    if kind is None or kind is BlockReduce:
        return None
    values = rest.split(":") if rest else []
    if len(values) != len(fields(kind)):
        return None
    try:
        return kind(*(int(v) for v in values))
    except ValueError:
        return None


def of(node: isl.ScheduleNode) -> GpuMark | None:
    """The GPU mark of ``node``, ``None`` when it is no GPU mark node."""
    if node.get_type() != isl.schedule_node_type.mark:
        return None
    return parse(node.mark_get_id().get_name())
