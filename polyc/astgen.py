"""AST generation: ``isl.Schedule`` -> :class:`polyc.loopnest.Node`.

Runs isl's AST generator (``isl_ast_build_node_from_schedule``; Grosser,
Verdoolaege & Cohen, "Polyhedral AST generation is more than scanning
polyhedra", TOPLAS 2015) under the program's context, then translates the isl
AST into a LoopNest: ``parallel`` / ``vector`` marks become flags on the
outermost ``For`` below the mark, a ``promote:<buffer>`` mark (put by
:func:`polyc.schedule.promotion.promote`) becomes a
:class:`~polyc.loopnest.Local` block owning the local buffer, each user node
becomes a
:class:`~polyc.loopnest.StmtInstance` whose arguments express the statement's
iterators in terms of the AST loop iterators.
"""

from __future__ import annotations

import re
from dataclasses import replace

import islpy as isl

from . import expr as E
from .ir import Program
from .isl_util import ast_expr_to_expr
from .loopnest import (
    Barrier,
    Block,
    BlockReduce,
    For,
    If,
    Launch,
    Local,
    Node,
    StmtInstance,
    merge_split_locals,
    number_launches,
    perfect_depth,
)
from .schedule import gpu_mapping, gpu_marks
from .schedule.marks import SIMD, SIMD_REDUCTION, parse_parallel_mark
from .schedule.promotion import LOCAL_MARK

_T = isl.ast_node_type

#: isl's name for the AST loop of schedule depth ``d``: ``c<d>``, or
#: ``c<d>_<j>`` when a parameter has that name (a TC size named ``c0``).
_LOOP_NAME = re.compile(r"c(\d+)(?:_\d+)?")


def loop_depth(iterator: str) -> int | None:
    """The schedule depth of the isl AST loop over ``iterator`` (``c1`` and
    ``c1_0`` are 1), ``None`` for another name."""
    m = _LOOP_NAME.fullmatch(iterator)
    return int(m.group(1)) if m else None


def _depth_marks(schedule: isl.Schedule) -> isl.Schedule:
    """Loop marks (parallel, simd) renamed ``<mark>@<depth>``, the schedule
    depth of the band they mark: isl names that band's loop ``c<depth>``,
    and when the loop is degenerate (one iteration for the outer values,
    e.g. one tile) isl emits no loop for it, so the mark must not land on
    the next loop below."""
    def fn(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != _T_MARK:
            return node
        name = node.mark_get_id().get_name()
        if not (parse_parallel_mark(name) or name in (SIMD, SIMD_REDUCTION)):
            return node
        depth = node.child(0).get_schedule_depth()
        return node.delete().insert_mark(isl.Id(f"{name}@{depth}"))
    return schedule.map_schedule_node_bottom_up(fn)


def build_ast(program: Program, schedule: isl.Schedule) -> isl.AstNode:
    build = isl.AstBuild.from_context(program.parameter_domain())
    return build.node_from_schedule(_depth_marks(schedule))


_T_MARK = isl.schedule_node_type.mark


def _fix_params(e: E.Expr, params: frozenset[str]) -> E.Expr:
    return E.map_expr(e, lambda x: E.Param(x.name)
                      if isinstance(x, E.Index) and x.name in params else None)


def _map_outer_fors(node: Node, depth: int | None, fn) -> Node:
    """``node`` with every outermost For ``f`` replaced by ``fn(f)`` (only
    those of schedule depth ``depth``, when given: the marked band's own loop)."""
    if isinstance(node, For):
        return node if depth is not None and loop_depth(node.iterator) != depth else fn(node)
    if isinstance(node, Block):
        return Block(tuple(_map_outer_fors(c, depth, fn) for c in node.children))
    if isinstance(node, If):
        return If(node.cond, _map_outer_fors(node.then, depth, fn),
                  None if node.otherwise is None
                  else _map_outer_fors(node.otherwise, depth, fn))
    if isinstance(node, Local):
        return replace(node, body=_map_outer_fors(node.body, depth, fn))
    return node


def _flag_outer_fors(node: Node, depth: int | None = None, **flags) -> Node:
    """Set ``flags`` on every outermost For of ``node`` (only those of
    schedule depth ``depth``, when given)."""
    return _map_outer_fors(node, depth, lambda f: replace(f, **flags))


def _band_iterators(f: For, depth: int, n: int) -> tuple[str, ...]:
    """The iterators of ``f`` and the loops nested in it that run members
    ``depth``, ``depth + 1``, ... of its band (at most ``n``), by isl's names."""
    out: list[str] = []
    cur: Node = f
    while len(out) < n and isinstance(cur, For) and loop_depth(cur.iterator) == depth + len(out):
        out.append(cur.iterator)
        cur = cur.body
        while isinstance(cur, Block) and len(cur.children) == 1:
            cur = cur.children[0]
    return tuple(out)


def _flag_parallel(node: Node, depth: int | None, collapse: int) -> Node:
    """Flag parallel the outermost For(s) of the band marked at schedule
    depth ``depth`` (``None``: every outermost For), each with the collapse
    count its own loops allow (:func:`polyc.loopnest.perfect_depth`): at
    most ``collapse``, and only over loops ``c<depth>``, ``c<depth+1>``, ...
    (the marked band's coincident members) that nest perfectly.  isl prints
    no loop for a degenerate member (``O2(i, j)`` with ``j`` fixed to 0), so
    counting the Fors below instead would collapse a loop of the band below,
    which may carry a dependence, and whose accumulator declarations sit
    between the loops."""
    return _map_outer_fors(node, depth, lambda f: replace(
        f, parallel=True, collapse=perfect_depth(
            f, collapse, None if depth is None else _band_iterators(f, depth, collapse))))


def _map_fors(node: Node, fn) -> Node:
    """``node`` with every For ``f`` (at any depth) replaced by ``fn(f)``."""
    if isinstance(node, For):
        return fn(replace(node, body=_map_fors(node.body, fn)))
    if isinstance(node, Block):
        return Block(tuple(_map_fors(c, fn) for c in node.children))
    if isinstance(node, If):
        return If(node.cond, _map_fors(node.then, fn),
                  None if node.otherwise is None else _map_fors(node.otherwise, fn))
    if isinstance(node, (Local, Launch, BlockReduce)):
        return replace(node, body=_map_fors(node.body, fn))
    return node


def _gpu_mapped(mark: gpu_marks.GpuMark, body: Node) -> Node:
    """The loop nest below a GPU mark (:mod:`polyc.schedule.gpu_marks`):
    a :class:`Launch` for a kernel; for loops mapped at depth ``d`` over
    ``n`` members, the loops ``c<d>`` ... ``c<d+n-1>`` mapped to the block
    (thread) indices, the innermost on ``x``; a tensor-core launch's batch
    loop on ``block.z``; a loop strided over every thread of the grid
    (``global.x``) for a reduction kernel.  isl prints no loop for a member
    with one value; the CUDA printer runs what lies outside a loop of an
    axis on index 0 of that axis.  A barrier before its subtree, a block
    reduction around it."""
    if isinstance(mark, gpu_marks.Kernel):
        return Launch(mark.index, body)
    if isinstance(mark, gpu_marks.Private):
        return replace(body, private=True) if isinstance(body, Local) else body
    if isinstance(mark, gpu_marks.Barrier):
        return Block((Barrier(mark.kernel, mark.number), body))
    if isinstance(mark, gpu_marks.BlockReduce):
        return BlockReduce(mark.statement, body)
    if isinstance(mark, gpu_marks.Batch):           # a tensor-core launch's batch loop
        return _map_fors(body, lambda f: replace(f, mapped="block.z")
                         if loop_depth(f.iterator) == mark.depth else f)
    if not isinstance(mark, (gpu_marks.Blocks, gpu_marks.Threads, gpu_marks.GridReduce,
                             gpu_marks.Copy)):
        return body                                  # the schedule language's own marks
    axes = {mark.depth + j: f"{mark.index}.{gpu_mapping.AXES[mark.n - 1 - j]}"
            for j in range(mark.n)}
    return _map_fors(body, lambda f: replace(f, mapped=axes[loop_depth(f.iterator)])
                     if loop_depth(f.iterator) in axes else f)


def to_loopnest(ast: isl.AstNode, params: frozenset[str],
                local_tensors: dict | None = None) -> Node:
    """Translate an isl AST into a LoopNest.  ``local_tensors``: the local
    buffers (``ir.Tensor`` with role ``"local"``) by name, for the
    ``promote:`` marks."""
    local_tensors = local_tensors or {}
    def ex(x: isl.AstExpr) -> E.Expr:
        return _fix_params(ast_expr_to_expr(x), params)

    def go(n: isl.AstNode) -> Node:
        t = n.get_type()
        if t == _T.for_:
            inc = n.for_get_inc()
            step = int(inc.get_val().to_python())
            it = n.for_get_iterator().get_id().get_name()
            return For(it, ex(n.for_get_init()), ex(n.for_get_cond()), step,
                       go(n.for_get_body()))
        if t == _T.if_:
            other = go(n.if_get_else_node()) if n.if_has_else_node() else None
            return If(ex(n.if_get_cond()), go(n.if_get_then_node()), other)
        if t == _T.block:
            kids = n.block_get_children()
            return Block(tuple(go(kids.get_at(i)) for i in range(kids.n_ast_node())))
        if t == _T.user:
            call = n.user_get_expr()
            name = call.get_op_arg(0).get_id().get_name()
            args = tuple(ex(call.get_op_arg(i)) for i in range(1, call.get_op_n_arg()))
            return StmtInstance(name, args)
        if t == _T.mark:
            mark = n.mark_get_id().get_name()
            body = go(n.mark_get_node())
            depth = None
            if "@" in mark:
                mark, at = mark.rsplit("@", 1)
                depth = int(at)
            collapse = parse_parallel_mark(mark)
            if collapse:
                return _flag_parallel(body, depth, collapse)
            if mark == SIMD:
                return _flag_outer_fors(body, depth, simd=True)
            if mark == SIMD_REDUCTION:
                return _flag_outer_fors(body, depth, reduction=True)
            gpu = gpu_marks.parse(mark)
            if gpu is not None:
                return _gpu_mapped(gpu, body)
            if mark.startswith(LOCAL_MARK):
                t = local_tensors[mark[len(LOCAL_MARK):]]
                return Local(t.name, t.dtype, t.constant_shape(), body)
            return body
        raise AssertionError(f"unexpected isl AST node {t}")

    return go(ast)


def generate(program: Program, schedule: isl.Schedule) -> Node:
    """The LoopNest of ``program`` under ``schedule``."""
    local = {t.name: t for t in program.tensors if t.role == "local"}
    nest = to_loopnest(build_ast(program, schedule), frozenset(program.params), local)
    return number_launches(merge_split_locals(nest))
