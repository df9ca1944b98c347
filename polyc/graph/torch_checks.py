"""Runtime assertions on a model's input values (``aten._assert_async`` whose
condition is computed from graph inputs: ``F.one_hot(labels, n)`` checks
``0 <= labels < n``) for the torch backend (:mod:`polyc.graph.torch_backend`).

polyc's traced graph computes no assertions; such a check is taken out of
the ATen graph and evaluated in eager torch on the call's tensors before
polyc's kernels run (a comparison and a reduction over the checked tensors,
nothing else of the model), raising
:class:`~polyc.errors.IndexBoundsError` with torch's message and the model's
line where it fails, as torch raises at that call.  An assertion on
constants stays in the graph (checked once, while tracing)."""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import torch

from ..errors import IndexBoundsError, ShapeError, UnsupportedError
from .torch_bounds import add_index_checks
from .torch_values import model_location

log = logging.getLogger(__name__)

_ASSERTS = ("_assert_async", "_assert_scalar")


def local_scalar(x):
    """``aten._local_scalar_dense`` (``t.item()``, ``bool(t)``, the
    ``is_causal`` detection of ``nn.TransformerEncoder``): the value of a
    one-element tensor made from constants, read while tracing.  The value
    of a computed tensor is data for polyc's kernels, not a Python number:
    :class:`~polyc.errors.UnsupportedError`."""
    if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
        return np.asarray(x).item()
    raise UnsupportedError("a tensor's value read as a Python number (t.item(), bool(t), "
                           "`if t:`) of a tensor computed from the model's inputs is not "
                           "supported by polyc (its kernels cannot return to Python "
                           "mid-graph); compute it outside the compiled module")


def assert_scalar(cond, msg: str = "assertion failed") -> None:
    """``aten._assert_scalar`` on a value known while tracing: checked then
    (those on input values are taken out by :func:`split_input_checks`)."""
    if not bool(cond):
        raise ShapeError(f"torch assertion failed while tracing, on sizes or values known "
                         f"then: {msg}")


#: ATen operator name -> lowering (registered by :mod:`polyc.graph.torch_backend`)
LOWERINGS = {"_local_scalar_dense": local_scalar, "_assert_scalar": assert_scalar}


def _is_assert(node) -> bool:
    return node.op == "call_function" and \
        getattr(getattr(node.target, "overloadpacket", None), "__name__", "") in _ASSERTS


def _cone(node) -> list | None:
    """The nodes ``node`` is computed from (itself included), in graph order,
    or ``None`` where none is a placeholder (a constant condition) or one is
    not a plain ATen call."""
    seen: dict = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n.op not in ("placeholder", "call_function", "get_attr"):
            return None
        seen[n] = True
        stack.extend(n.all_input_nodes)
    if not any(n.op == "placeholder" for n in seen):
        return None
    order = {n: k for k, n in enumerate(node.graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def split_input_checks(gm: torch.fx.GraphModule) -> Callable | None:
    """Take the assertions on input values out of ``gm`` (in place), with
    the bounds checks of input index tensors that
    :func:`~polyc.graph.torch_bounds.add_index_checks` adds first.

    Returns ``check(args)``, which evaluates them in eager torch on the
    graph's inputs ``args`` (tensors and sizes, in placeholder order) and
    raises :class:`~polyc.errors.IndexBoundsError` where one fails, or
    ``None`` where ``gm`` has none."""
    add_index_checks(gm)
    asserts = []
    for node in gm.graph.nodes:
        if _is_assert(node) and node.args:
            cond = node.args[0]
            cone = _cone(cond) if isinstance(cond, torch.fx.Node) else None
            if cone is not None:
                asserts.append((node, cone))
    if not asserts:
        return None
    g = torch.fx.Graph()
    env: dict = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n in placeholders:
        env[n] = g.node_copy(n, env.__getitem__)
    conds, messages = [], []
    for node, cone in asserts:
        for n in cone:
            if n not in env:
                env[n] = g.node_copy(n, env.__getitem__)
        conds.append(env[node.args[0]])
        msg = node.args[1] if len(node.args) > 1 else node.kwargs.get("assert_msg", "")
        loc = model_location(node)
        messages.append(f"{loc}: {msg}" if loc is not None else str(msg or "assertion failed"))
    g.output(tuple(conds))
    checks = torch.fx.GraphModule(gm, g)
    for node, cone in asserts:          # out of polyc's graph, with what only they read
        gm.graph.erase_node(node)
    for node, cone in asserts:
        for n in reversed(cone):
            if n.op != "placeholder" and n.graph is gm.graph and not n.users:
                gm.graph.erase_node(n)
    gm.recompile()
    log.debug("torch backend: %d assertion(s) on input values checked in eager torch",
              len(asserts))

    def check(args) -> None:
        with torch.no_grad():
            results = checks(*args)
        for ok, msg in zip(results, messages):
            if not bool(ok):
                raise IndexBoundsError(f"{msg} (a torch assertion on the model's input "
                                       "values, checked at each call)")
    return check
