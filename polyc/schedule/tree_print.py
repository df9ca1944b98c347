"""Printing schedule trees as the schedule language shows them
(``Schedule.tree()``, ``Schedule.loop_nest()``): one line per node, loop
names and attributes folded into their band, and the loop nest isl's AST
generator would produce, as pseudo C.
"""

from __future__ import annotations

import re

import islpy as isl

from ..ir import Program
from .marks import SIMD, SIMD_REDUCTION, parse_parallel_mark
from .tree import (
    _BAND,
    _MARK,
    _T,
    NAMES,
    _node_kind,
    band_names,
    bands,
    is_names_mark,
    statements_of,
)


def format_tree(schedule: isl.Schedule, program: Program, detail: bool = False) -> str:
    """An indented rendering of the schedule tree, one line per node; band
    lines list the loop names and attributes (``permutable``, ``coincident``
    members, ``unroll``/``isolate`` options); name marks are folded into their
    band.  With ``detail``, each band member's partial schedule follows in
    isl notation."""
    lines: list[str] = []

    def go(node: isl.ScheduleNode, depth: int) -> None:
        pad = "  " * depth
        t = node.get_type()
        if t == _MARK and is_names_mark(node):
            go(node.child(0), depth)
            return
        if t == _T.domain:
            lines.append(f"{pad}domain: {', '.join(statements_of(node))}")
        elif t == _BAND:
            names = band_names(node, program)
            attrs = []
            if node.band_get_permutable():
                attrs.append("permutable")
            co = [nm for j, nm in enumerate(names) if node.band_member_get_coincident(j)]
            if co:
                attrs.append("coincident: " + " ".join(co))
            opts = node.band_get_ast_build_options()
            if not opts.is_empty():
                attrs.append(f"options: {opts}")
            lines.append(f"{pad}band ({', '.join(names)})"
                         + (f"  [{'; '.join(attrs)}]" if attrs else ""))
            if detail:
                mupa = node.band_get_partial_schedule()
                for j, nm in enumerate(names):
                    lines.append(f"{pad}  | {nm} = {mupa.get_union_pw_aff(j)}")
        elif t in (_T.sequence, _T.set):
            lines.append(f"{pad}{_node_kind(node)}")
        elif t == _T.filter:
            lines.append(f"{pad}filter: {', '.join(statements_of(node.child(0)))}"
                         if node.n_children() else f"{pad}filter")
        elif t == _MARK:
            lines.append(f"{pad}mark: {node.mark_get_id().get_name()}")
        elif t == _T.leaf:
            return
        elif t == _T.extension:
            lines.append(f"{pad}extension: {node.extension_get_extension()}")
        else:
            lines.append(f"{pad}{_node_kind(node)}")
        for i in range(node.n_children()):
            go(node.child(i), depth + 1)

    go(schedule.get_root(), 0)
    return "\n".join(lines) + "\n"


def _loop_names_by_depth(schedule: isl.Schedule, program: Program) -> dict[str, dict[int, str]]:
    """statement -> schedule depth -> loop name, from the bands on the path
    to each statement."""
    out: dict[str, dict[int, str]] = {}
    for band in bands(schedule):
        d0 = band.get_schedule_depth()
        names = band_names(band, program)
        for st in statements_of(band):
            for j, nm in enumerate(names):
                out.setdefault(st, {})[d0 + j] = nm.split("|")[0]
    return out


_ITER = re.compile(r"\bc(\d+)\b")


def format_loop_nest(schedule: isl.Schedule, program: Program) -> str:
    """The loop nest ``schedule`` produces, as pseudo-C from isl's AST
    (``isl_ast_build_node_from_schedule``).  Loop iterators carry the loop
    names; statement calls show the statement's iterators and its source
    text; parallel / simd / unroll marks appear as pragmas."""
    build = isl.AstBuild.from_context(program.parameter_domain())
    ast = build.node_from_schedule(schedule)
    names = _loop_names_by_depth(schedule, program)
    texts = {s.name: s.text or "" for s in program.statements}
    reserved = set(program.params) | {t.name for t in program.tensors}
    lines: list[str] = []

    def rename(text: str, env: dict[str, str]) -> str:
        return _ITER.sub(lambda m: env.get(m.group(0), m.group(0)), text)

    def stmts_below(n: isl.AstNode) -> list[str]:
        found: list[str] = []
        t = n.get_type()
        if t == isl.ast_node_type.user:
            found.append(n.user_get_expr().get_op_arg(0).get_id().get_name())
        elif t == isl.ast_node_type.for_:
            found += stmts_below(n.for_get_body())
        elif t == isl.ast_node_type.if_:
            found += stmts_below(n.if_get_then_node())
            if n.if_has_else_node():
                found += stmts_below(n.if_get_else_node())
        elif t == isl.ast_node_type.block:
            kids = n.block_get_children()
            for i in range(kids.n_ast_node()):
                found += stmts_below(kids.get_at(i))
        elif t == isl.ast_node_type.mark:
            found += stmts_below(n.mark_get_node())
        return found

    def go(n: isl.AstNode, depth: int, env: dict[str, str], pragma: str | None) -> None:
        pad = "  " * depth
        t = n.get_type()
        if t == isl.ast_node_type.for_:
            it = n.for_get_iterator().get_id().get_name()
            m = _ITER.fullmatch(it)
            label = it
            if m:
                for st in stmts_below(n):
                    nm = names.get(st, {}).get(int(m.group(1)))
                    if nm:
                        label = nm
                        break
            if label in reserved or label in env.values():
                label = it
            env = {**env, it: label}
            init = rename(n.for_get_init().to_C_str(), env)
            cond = rename(n.for_get_cond().to_C_str(), env)
            inc = rename(n.for_get_inc().to_C_str(), env)
            if pragma:
                lines.append(f"{pad}#pragma {pragma}")
            step = f"{label}++" if inc == "1" else f"{label} += {inc}"
            lines.append(f"{pad}for ({label} = {init}; {cond}; {step})")
            go(n.for_get_body(), depth + 1, env, None)
        elif t == isl.ast_node_type.if_:
            lines.append(f"{pad}if ({rename(n.if_get_cond().to_C_str(), env)})")
            go(n.if_get_then_node(), depth + 1, env, pragma)
            if n.if_has_else_node():
                lines.append(f"{pad}else")
                go(n.if_get_else_node(), depth + 1, env, pragma)
        elif t == isl.ast_node_type.block:
            kids = n.block_get_children()
            for i in range(kids.n_ast_node()):
                go(kids.get_at(i), depth, env, pragma)
        elif t == isl.ast_node_type.mark:
            mark = n.mark_get_id().get_name()
            nxt = pragma
            if parse_parallel_mark(mark):       # shown as the C backend prints it
                nxt = "omp parallel for"
                if parse_parallel_mark(mark) > 1:
                    nxt += f" collapse({parse_parallel_mark(mark)})"
            elif mark == SIMD:
                nxt = "omp simd"
            elif mark == SIMD_REDUCTION:
                nxt = "omp simd reduction"
            elif not mark.startswith(NAMES):
                lines.append(f"{pad}// mark: {mark}")
            go(n.mark_get_node(), depth, env, nxt)
        elif t == isl.ast_node_type.user:
            call = n.user_get_expr()
            st = call.get_op_arg(0).get_id().get_name()
            args = ", ".join(rename(call.get_op_arg(i).to_C_str(), env)
                             for i in range(1, call.get_op_n_arg()))
            note = f"  // {texts[st]}" if texts.get(st) else ""
            lines.append(f"{pad}{st}({args});{note}")
        else:
            lines.append(f"{pad}{n.to_C_str().strip()}")

    go(ast, 0, {}, None)
    return "\n".join(lines) + "\n"
