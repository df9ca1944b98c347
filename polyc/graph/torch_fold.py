"""Rewrites of an ATen graph before :mod:`polyc.graph.torch_backend`
interprets it, where ATen's form of an operation would cost polyc a
specialised size.

``nn.Linear`` on an input of more than two dimensions (``x`` of shape
``(B, T, K)``) arrives as ``view(x, [B*T, K])``, ``addmm``/``mm`` and
``view(y, [B, T, N])``.  polyc's reshape that merges ``B`` and ``T``
multiplies by ``T``, so it specialises ``T`` (a guard on the plan): with a
sequence length that changes from call to call, every length would trace
and plan again.  :func:`fold_leading_merges` replaces the three nodes by one
``x @ w (+ bias)`` on the N-dimensional input (numpy's matmul broadcasts
over the leading dimensions), which keeps them symbolic.
"""

from __future__ import annotations

import numpy as np
import torch

aten = torch.ops.aten

_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def linear_nd(x, w, bias=None, beta=1, alpha=1):
    """``bias * beta + (x @ w) * alpha`` for ``x`` of shape ``(..., K)`` and
    ``w`` of shape ``(K, N)``: ``addmm`` (``mm`` without ``bias``) over the
    leading dimensions of ``x``, which are not merged."""
    out = np.matmul(x, w)
    if alpha != 1:
        out = out * alpha
    if bias is None or beta == 0:
        return out
    return (bias if beta == 1 else bias * beta) + out


def _shape(node) -> tuple | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _same(a, b) -> bool:
    """Equal extents, without a guard: equal ints, or the same symbol."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return False


def _erase_if_dead(graph: torch.fx.Graph, node) -> None:
    """Erases ``node`` if nothing reads it, and then the size arithmetic
    (``s0 * s1``, which would specialise a size if interpreted) that only
    it read."""
    if not isinstance(node, torch.fx.Node) or node.users or node.op != "call_function":
        return
    if node.target not in _VIEWS and getattr(node.target, "__module__", None) != "_operator":
        return
    inputs = list(node.all_input_nodes)
    graph.erase_node(node)
    for a in inputs:
        _erase_if_dead(graph, a)


def fold_leading_merges(gm: torch.fx.GraphModule) -> int:
    """Replaces ``view(x, [M, K]) -> mm/addmm -> view(., [*lead, N])``
    (``x`` of shape ``(*lead, K)``, ``K`` a constant) by one
    :func:`linear_nd` node.  Returns how many it replaced."""
    graph = gm.graph
    done = 0
    for mm in list(graph.nodes):
        if mm.op != "call_function" or mm.target not in (aten.mm.default,
                                                         aten.addmm.default):
            continue
        k = 0 if mm.target is aten.mm.default else 1
        merged = mm.args[k]
        if not isinstance(merged, torch.fx.Node) or merged.target not in _VIEWS:
            continue
        x = merged.args[0]
        xs, ms, ws = _shape(x), _shape(merged), _shape(mm.args[k + 1])
        if xs is None or ms is None or ws is None or len(xs) <= 2 or len(ms) != 2 or \
                not isinstance(xs[-1], int) or not _same(ms[1], xs[-1]):
            continue        # (equal numbers of elements and last extents: ms[0] is the rest)
        users = list(mm.users)
        if not users or any(u.target not in _VIEWS or _shape(u) is None
                            or len(_shape(u)) != len(xs)
                            or not all(_same(a, b) for a, b in zip(_shape(u)[:-1], xs[:-1]))
                            for u in users):
            continue
        with graph.inserting_after(mm):
            if k == 0:
                new = graph.call_function(linear_nd, (x, mm.args[1]))
            else:
                kw = {n: v for n, v in mm.kwargs.items() if n in ("beta", "alpha")}
                new = graph.call_function(linear_nd, (x, mm.args[2], mm.args[0]), kw)
        new.meta = dict(users[0].meta)
        for u in users:
            u.replace_all_uses_with(new)
            graph.erase_node(u)
        graph.erase_node(mm)
        _erase_if_dead(graph, merged)
        done += 1
    if done:
        graph.lint()
        gm.recompile()
    return done
