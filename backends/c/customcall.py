"""The call of a user-defined intrinsic (:mod:`polyc.custom_intrinsics`)
that a tensorized statement becomes: per tensor of the description, in its
signature order, the base pointer at the point of the loops around the call
(the statement's index with the scanned iterators at 0) and one row-major
stride per dimension, then the extents bound to the description's sizes.
"""

from __future__ import annotations

import cgen as c

from polyc import expr as E
from polyc.custom_intrinsics import get
from polyc.ir import Statement

from .gemmcall import as_param, base_pointer, row_major_stride
from .printer import StatementPrinter as Emitter


def custom_call(em: Emitter, s: Statement) -> c.Statement:
    """``<name>(t_X + offset, strides..., sizes...)`` for one point of the
    loops around the call."""
    m = s.intrinsic
    intr = get(m.intrinsic)
    scanned = set(m.scanned)
    args = []
    for tensor, acc, dims in m.tensors:
        args.append(base_pointer(em, tensor, acc, scanned))
        args += [f"(int64_t)({row_major_stride(em, tensor, d)})" for d in dims]
    args += [f"(int64_t)({em.loop_printer.index(E.map_expr(e, as_param))})" for _, e in m.sizes]
    return c.Statement(f"{intr.name}({', '.join(args)})")
