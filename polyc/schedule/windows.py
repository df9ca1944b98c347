"""Thread windows: a temporary whose values live within one iteration of a
parallel loop is stored, by each thread, in one reused window of its array.

Array contraction (:mod:`polyc.schedule.contraction`) turns a temporary
into a buffer of constant size declared in a loop body.  The temporaries of
a row-blocked kernel (attention's score block: ``block x seq`` elements,
written by a GEMM call, read by the softmax rows and by the next GEMM call)
have a parametric extent, and intrinsic calls access them through pointers,
so they stay arrays of the full problem size.  Each parallel iteration then
writes fresh memory: a 512-long attention with 8 heads streams two 4 MiB
temporaries through the caches on every call, where one block of each
(140 KiB) would stay in L2.

A temporary ``T`` qualifies at the outermost parallel band (its parallel
mark's members, the prefix ``p``) when

* every statement accessing ``T`` runs below that band, with affine
  accesses (an intrinsic call's access relation is exact);
* no iteration of ``p`` reads a value another one wrote: every read has a
  source (isl's exact dataflow, as for contraction) and every flow
  dependence through ``T`` has distance 0 on ``p``;
* the elements one iteration accesses lie in rows ``o(p) .. o(p) + rows``
  of dimension ``k`` with every dimension before ``k`` fixed (a box of
  constant size ``1 x ... x 1 x rows`` over dimensions ``0..k``,
  ``isl_map_get_range_simple_fixed_box_hull``), the dimensions after ``k``
  whole: a contiguous run of ``rows * stride_k`` elements in row-major
  order.

The generated code then addresses ``T[x]`` at ``linear(x) + woff`` with
``woff = tid * W - linear(o(p), 0, ...)`` (``W``: the run, rounded up to
whole cache lines plus one, so that two threads' windows share no line):
thread ``tid`` keeps every iteration's values in elements ``[tid * W,
tid * W + run)`` of the array the caller allocated.  Only the addressing
changes, so the schedule and its dependences are untouched; the storage
reuse adds anti and output dependences only between iterations that run on
one thread, in order.  When the team is larger than the array holds windows
(``threads * W`` over its size), ``woff`` is 0 and the array is used as
before.  Sources: storage mapping by modular folding (Lefebvre & Feautrier,
"Automatic storage management for parallel programs", Parallel Computing
1998; Quillere & Rajopadhye, "Optimizing memory usage in the polyhedral
model", TOPLAS 2000), with the window per thread as PPCG's private arrays.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import islpy as isl

from .. import expr as E
from ..ir import Program, Statement
from ..isl_util import CTX, ast_expr_to_expr, fixed_box_hull
from . import contraction, promotion
from .marks import parse_parallel_mark

log = logging.getLogger(__name__)

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark


@dataclass(frozen=True)
class Window:
    """Temporary ``tensor`` stored per thread: its dimensions ``0..dim``
    are fixed to ``offset`` (expressions over the loop iterators ``c0`` ..
    ``c<depth - 1>`` and the size parameters; a :class:`~polyc.expr.Index`
    names an iterator, a :class:`~polyc.expr.Param` a size) plus
    ``0..rows - 1`` along ``dim`` in one iteration of the loops ``c0`` ..
    ``c<depth - 1>``."""
    tensor: str
    depth: int
    dim: int
    rows: int
    offset: tuple

    @property
    def loop(self) -> str:
        """The AST iterator of the innermost loop of the prefix."""
        return f"c{self.depth - 1}"

    def describe(self) -> str:
        return (f"{self.tensor}: one window of {self.rows} row(s) of dimension {self.dim} "
                f"per thread (loops c0..{self.loop})")


def _parallel_bands(schedule: isl.Schedule):
    """``(band, members)`` of every outermost parallel mark's band."""
    found = []

    def visit(node: isl.ScheduleNode) -> None:
        if node.get_type() == _MARK:
            n = parse_parallel_mark(node.mark_get_id().get_name())
            child = node.child(0)
            if n and child.get_type() == _BAND and child.band_n_member() == n:
                found.append(child)
                return
        for k in range(node.n_children()):
            visit(node.child(k))
    visit(schedule.get_root())
    return found


def _users(program: Program, name: str) -> list[Statement] | None:
    users = [st for st in program.statements
             if st.tensor == name or name in st.read_tensors()]
    if any(st.kind != "intrinsic" and not promotion.affine_accesses(st, name) for st in users):
        return None
    return users


def _covered(band: isl.ScheduleNode, users: list[Statement], ctx: isl.Set) -> bool:
    dom = band.get_domain()
    return all(st.domain.intersect_params(ctx).is_subset(
        dom.extract_set(st.domain.get_space())) for st in users)


def _as_expr(aff: isl.Aff, depth: int, params: list[str]) -> E.Expr:
    """``aff`` (over the prefix ``[p0 .. p<depth-1>]``) as an expression of
    the iterators ``c0`` .. and the size parameters."""
    pa = isl.PwAff.from_aff(aff)
    n = pa.dim(isl.dim_type.param)
    pa = pa.move_dims(isl.dim_type.param, n, isl.dim_type.in_, 0, depth)
    for j in range(depth):
        pa = pa.set_dim_id(isl.dim_type.param, n + j, isl.Id(f"c{j}", context=CTX))
    build = isl.AstBuild.from_context(isl.Set.universe(pa.get_domain_space()))
    e = ast_expr_to_expr(build.expr_from_pw_aff(pa))
    sizes = set(params)
    return E.map_expr(e, lambda x: E.Param(x.name)
                      if isinstance(x, E.Index) and x.name in sizes else None)


def _window(band: isl.ScheduleNode, t, users: list[Statement], program: Program):
    uses = contraction.uses_of(t, users, program)
    if uses is None:
        return None
    node = band.child(0)
    footprint = contraction.footprint_at(node, t, uses)
    if footprint is None:
        return None
    depth = node.get_schedule_depth()
    for k in reversed(range(t.ndim)):
        box = fixed_box_hull(footprint.project_out(isl.dim_type.out, k + 1, t.ndim - k - 1))
        if box is None:
            continue
        offset, sizes = box
        if any(int(v) != 1 for v in sizes[:k]):
            continue                       # not one run: try fewer fixed dimensions
        exprs = tuple(_as_expr(offset.get_aff(j), depth, list(program.params))
                      for j in range(k + 1))
        return Window(t.name, depth, k, int(sizes[k]), exprs)
    return None


def thread_windows(schedule: isl.Schedule, program: Program) -> tuple[Window, ...]:
    """The :class:`Window` of every temporary of ``program`` (allocated by
    the caller) that qualifies under ``schedule`` (the final tree, after
    intrinsic marks became calls; module docstring)."""
    bands = _parallel_bands(schedule)
    if not bands:
        return ()
    ctx = program.parameter_domain()
    out = []
    for t in program.tensors:
        if t.role != "temp":
            continue
        users = _users(program, t.name)
        if not users:
            continue
        under = [b for b in bands if _covered(b, users, ctx)]
        if len(under) != 1:
            continue
        try:
            w = _window(under[0], t, users, program)
        except isl.Error as e:             # a footprint isl cannot handle: no window
            log.debug("no thread window for %s: %s", t.name, e)
            w = None
        if w is not None:
            log.debug("thread window: %s", w.describe())
            out.append(w)
    return tuple(out)


__all__ = ["Window", "thread_windows"]
