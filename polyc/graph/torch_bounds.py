"""Bounds checks of the positions that a model's input tensors give to
scatters and gathers, for the torch backend
(:mod:`polyc.graph.torch_backend`).

Eager torch raises where ``scatter``, ``scatter_add``, ``scatter_reduce``,
``index_put`` (``y[i] = v``), ``gather``, ``index_select``, ``embedding`` or
``index`` (``x[i]``) meet a position outside the axis.  polyc's kernels
cannot raise: a one-hot scatter drops such a position, a gather clamps it.
So, for each such operator whose index tensor is an input of the graph
seen through views only (``y[:, None]``, ``i.view(-1)``, ``i.long()``),
:func:`add_index_checks` adds an ``aten._assert_async`` of ``lo <= index <
n`` to the ATen graph; :func:`polyc.graph.torch_checks.split_input_checks`
then takes it out and evaluates it in eager torch at each call before
polyc's kernels run, raising :class:`~polyc.errors.IndexBoundsError` with
the model's line.  A constant index is checked while tracing
(:mod:`polyc.graph.torch_assign`); one computed by the model (an
``argmax``) is not checked.
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

aten = torch.ops.aten

#: ATen packet name -> (position of the data tensor, of ``dim`` or None for
#: axis 0 / a list of indices, of the index tensor(s), negative allowed)
_INDEXED = {
    "scatter": (0, 1, 2, False), "scatter_add": (0, 1, 2, False),
    "scatter_reduce": (0, 1, 2, False), "gather": (0, 1, 2, False),
    "index_select": (0, 1, 2, False), "embedding": (0, None, 1, False),
    "index_put": (0, None, 1, True), "index": (0, None, 1, True),
}

#: gathers, whose index tensors polyc.jit checks itself where they are arguments
_GATHERS = {"gather", "index_select", "embedding", "index"}

#: operators an index passes through on its way from an input, checked as it is
_VIEWS = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "expand", "permute",
          "transpose", "t", "slice", "select", "clone", "contiguous", "alias", "detach",
          "_to_copy", "flatten"}


def _name(node) -> str:
    return getattr(getattr(node.target, "overloadpacket", None), "__name__", "")


def _from_input(node) -> bool:
    """Whether ``node`` is a graph input seen through :data:`_VIEWS` only."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" \
            and _name(node) in _VIEWS:
        node = node.args[0]
    return isinstance(node, torch.fx.Node) and node.op == "placeholder"


def _extent(data, d: int) -> int | None:
    val = data.meta.get("val") if isinstance(data, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not val.dim():
        return None
    n = val.shape[d % val.dim()]
    return n if isinstance(n, int) else None        # (a symbolic extent: unchecked)


def _checks(node) -> list[tuple]:
    """``(index node, extent, axis, negative)`` for each index tensor of
    ``node`` that comes from an input."""
    spec = _INDEXED.get(_name(node))
    if spec is None:
        return []
    pos, dim_pos, idx_pos, negative = spec
    if len(node.args) <= idx_pos:
        return []
    data, index = node.args[pos], node.args[idx_pos]
    if dim_pos is not None:
        d = node.args[dim_pos]
        pairs = [(index, d)] if isinstance(d, int) else []
    elif isinstance(index, (list, tuple)):                # index / index_put
        pairs = [(i, d) for d, i in enumerate(index) if i is not None]
    else:                                                 # embedding: rows
        pairs = [(index, 0)]
    out = []
    for i, d in pairs:
        if not isinstance(i, torch.fx.Node) or not _from_input(i):
            continue
        if i.op == "placeholder" and _name(node) in _GATHERS:
            continue          # (polyc.jit checks a gather's index argument, naming the value)
        val = i.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dtype in (torch.bool, torch.uint8):
            continue                                      # (a mask, not positions)
        n = _extent(data, d)
        if n is not None:
            out.append((i, n, d, negative))
    return out


def add_index_checks(gm: torch.fx.GraphModule) -> int:
    """Add to ``gm`` (in place) an ``aten._assert_async`` of ``lo <= index <
    n`` before each scatter or gather whose index tensor comes from a graph
    input (see the module docstring); ``lo`` is ``-n`` where torch counts
    positions from the end (``index``, ``index_put``), else 0.  Returns how
    many it added."""
    added = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        for index, n, d, negative in _checks(node):
            msg = (f"{node.target}: an index is out of bounds for dimension {d} with size {n}"
                   + ("" if negative else " (negative indices are not allowed there)"))
            with gm.graph.inserting_before(node):
                ok = gm.graph.call_function(
                    aten.logical_and.default,
                    (gm.graph.call_function(aten.ge.Scalar, (index, -n if negative else 0)),
                     gm.graph.call_function(aten.lt.Scalar, (index, n))))
                cond = gm.graph.call_function(aten.all.default, (ok,))
                check = gm.graph.call_function(aten._assert_async.msg, (cond, msg))
            for new in (ok, cond, check, *ok.args):
                new.meta["stack_trace"] = node.meta.get("stack_trace")
            added += 1
    if added:
        gm.recompile()
        log.debug("torch backend: %d bounds check(s) of input index tensors", added)
    return added
