"""``torch.compile(model, backend="polyc")``: a TorchDynamo backend that
compiles a model's inference graph with :func:`polyc.jit`.

Takes the FX ``GraphModule`` TorchDynamo captured and its example inputs;
returns a callable on torch CPU tensors.  The route, in order:

1. **Refuse what is not inference**: an example input that requires grad
   while grad mode is on (a graph that would need a backward) raises
   :class:`~polyc.errors.UnsupportedError`: run the model under
   ``torch.no_grad()`` or ``torch.inference_mode()``.  So do inputs that
   are not on the CPU.
2. **Lower to ATen**: ``aot_autograd`` (``torch._dynamo.backends.common``)
   functionalizes the torch-level graph and decomposes it into ATen
   operators with torch's core-ATen decompositions
   (``torch._decomp.core_aten_decompositions``): ``linear`` arrives as
   ``t``/``addmm``, ``softmax`` as ``_softmax``, ``layer_norm`` as
   ``native_layer_norm``.  Parameters are graph inputs, so a model's
   weights are ordinary arguments of the compiled function.
3. **Check coverage**: every ATen operator must be in :data:`LOWERINGS`;
   otherwise :class:`~polyc.errors.UnsupportedError` names each missing
   operator and the model line that called it.  polyc does not partition
   the graph: a model compiles whole or not at all (the error tells what to
   do: remove the op, or leave that part out of ``torch.compile``).
4. **Interpret with tracers**: the returned function walks the ATen graph
   on numpy values, each ATen operator written as numpy calls
   (:data:`LOWERINGS`), and is wrapped in :func:`polyc.jit`; tracing it
   once here, on zero arrays of the example shapes, turns a lowering that
   polyc cannot trace into a compile-time error.
5. **Run**: each call hands the torch tensors to the jitted function, which
   reads them through DLPack (``np.from_dlpack``, no copy) and returns its
   results as ``torch.from_numpy`` views of polyc's output arrays.  A
   symbolic size (a ``torch.SymInt`` input, when TorchDynamo recompiles
   with dynamic shapes) is not passed: it is read from a tensor input's
   shape, so polyc keeps it symbolic and one trace serves every size.

Importing this module registers the backend with TorchDynamo under the name
``"polyc"``; an installed polyc also declares it as a
``torch_dynamo_backends`` entry point, so ``backend="polyc"`` works without
the import.  Nothing else in polyc imports torch.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np
import torch

from ..errors import PolycError, UnsupportedError
from . import ops as _ops
from . import torch_assign, torch_checks, torch_embedding, torch_layout, torch_math, torch_pool
from . import torch_nn as nn_ops
from .core import Tracer, located
from .jit import Jitted
from .sizes import SizeInt
from .torch_checks import split_input_checks
from .torch_fold import fold_leading_merges, linear_nd
from .torch_search import LOWERINGS as _SEARCHES
from .torch_values import _DTYPES, model_location, nan_to_num
from .torch_values import axes as _axes
from .torch_values import full as _full
from .torch_values import full_like as _full_like
from .torch_values import is_int as _is_int
from .torch_values import is_one as _is_one
from .torch_values import np_dtype as _np_dtype
from .torch_values import reduction as _reduction
from .torch_values import scan as _scan
from .torch_values import symbolic as _symbolic
from .torch_values import take as _take
from .torch_values import var as _var

aten = torch.ops.aten

#: torch dtypes polyc computes in, and their numpy names
# -- helpers on numpy values (tracers or concrete arrays) --------------------------
def _cond(c):
    """A condition usable by ``np.where`` on tracers: polyc takes no boolean
    arrays as inputs, so a concrete mask (a causal mask built from
    ``ones``/``triu``) enters as a float array compared with zero."""
    if isinstance(c, np.ndarray) and c.dtype == np.bool_ and c.ndim > 0:
        return _Lazy(c)
    return c


class _Lazy:
    """A concrete boolean mask waiting for the tracer's graph (see :func:`_cond`)."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = mask

    def on(self, like):
        if isinstance(like, Tracer):
            return _ops.capture(like._graph, self.mask.astype(np.float32)) != 0
        return self.mask


def _where(c, a, b):
    c = _cond(c)
    if isinstance(c, _Lazy):
        like = a if isinstance(a, Tracer) else b
        c = c.on(like)
    return np.where(c, a, b)


def _erf(x):
    if isinstance(x, Tracer):
        from .numpy_api import UFUNCS
        return UFUNCS["erf"](x._graph, x)
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _gelu(x, approximate: str = "none"):
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + np.tanh(inner))
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _addmm(bias, a, b, beta=1, alpha=1, *, product=np.matmul):
    """``beta * bias + alpha * product(a, b)`` (``addmm addmv addbmm``); with
    ``beta`` 0 the bias is not read (torch ignores its NaNs then)."""
    out = product(a, b)
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        return out
    return (bias if beta == 1 else bias * beta) + out


def _linear(x, w, b=None):
    out = np.matmul(x, np.swapaxes(w, -1, -2) if w.ndim == 2 else w)
    return out if b is None else out + b


def _scaled(b, alpha):
    return b if alpha == 1 else b * alpha


def _any(x, dim=None, keepdim=False):
    """``any`` as a max over 0/1 (the graph layer reduces numbers, not masks)."""
    ones = _where(x if x.dtype == np.bool_ else x != 0, 1.0, 0.0)
    return np.max(ones, axis=_axes(dim, x.ndim), keepdims=keepdim) > 0


def _expand(x, sizes, implicit: bool = False):
    off = len(sizes) - x.ndim
    shape = tuple(x.shape[i - off] if _is_int(s, -1) else s for i, s in enumerate(sizes))
    return np.broadcast_to(x, shape)


def _squeeze(x, dim=None):
    if dim is None:
        dims = [d for d in range(x.ndim) if _is_one(x.shape[d])]
    else:
        dims = [d % max(x.ndim, 1) for d in ((dim,) if isinstance(dim, int) else dim)]
        dims = [d for d in dims if x.ndim and _is_one(x.shape[d])]   # torch: no-op otherwise
    return np.squeeze(x, axis=tuple(dims)) if dims else x


_BIG = 2 ** 62


def _slice(x, dim=0, start=None, end=None, step=1):
    if _is_int(start, 0):
        start = None
    if isinstance(end, (int, np.integer)) and end >= _BIG:
        end = None
    key = (slice(None),) * (dim % x.ndim) + (slice(start, end, step),)
    return x[key]


def _select(x, dim, index):
    return x[(slice(None),) * (dim % x.ndim) + (index,)]


def _split(x, split_size, dim=0):
    n = int(x.shape[dim])
    return _split_sizes(x, [min(split_size, n - s) for s in range(0, n, split_size)], dim)


def _split_sizes(x, sizes, dim=0):
    out, at = [], 0
    for s in sizes:
        out.append(_slice(x, dim, at, at + s))
        at += s
    return out


def _to(x, dtype=None, **kw):
    return x if dtype is None else x.astype(_np_dtype(dtype))


def _arange(*args, dtype=None, like=None, **kw):
    default = np.int64 if all(isinstance(a, (int, SizeInt)) for a in args) else np.float32
    if like is not None and any(_symbolic(a) for a in args):
        # torch.arange(x.shape[1]) of a dynamic size: traced, the size kept symbolic
        return np.arange(*args, dtype=_np_dtype(dtype, default), like=like)
    return np.arange(*args, dtype=_np_dtype(dtype, default))


def _on_mask(fn: Callable, x, *args):
    """``fn(x, *args)``; a traced mask (a causal mask built from ``ones`` of
    a symbolic size) goes through 0/1 integers, since polyc keeps masks as
    comparisons and does not store them."""
    if isinstance(x, Tracer) and x.dtype == np.bool_:
        return fn(np.where(x, 1, 0).astype(np.int32), *args) != 0
    return fn(x, *args)


def _identity(x, *args, **kw):
    return x


def _cmp(fn: Callable) -> Callable:
    return lambda a, b: fn(a, b)


#: ATen operator (packet) -> its numpy lowering, called with the node's
#: arguments; ``docs/torch.md`` lists the same operators.
LOWERINGS: dict[Any, Callable] = {
    # contractions
    aten.mm: np.matmul, aten.bmm: np.matmul, aten.matmul: np.matmul,
    aten.addmm: _addmm, aten.linear: _linear, aten.addmv: _addmm,
    aten.addbmm: lambda *a, **kw: _addmm(*a, **kw,
                                         product=lambda x, y: np.einsum("bij,bjk->ik", x, y)),
    # elementwise
    aten.add: lambda a, b, alpha=1: a + _scaled(b, alpha),
    aten.sub: lambda a, b, alpha=1: a - _scaled(b, alpha),
    aten.rsub: lambda a, b, alpha=1: b - _scaled(a, alpha),
    aten.mul: lambda a, b: a * b,
    aten.div: torch_math.div, aten.true_divide: torch_math.div,
    aten.neg: np.negative, aten.exp: np.exp, aten.log: np.log, aten.sqrt: np.sqrt,
    aten.rsqrt: lambda x: 1.0 / np.sqrt(x), aten.tanh: np.tanh, aten.erf: _erf,
    aten.reciprocal: lambda x: 1.0 / x, aten.abs: np.abs,
    aten.sin: np.sin, aten.cos: np.cos, aten.tan: np.tan, aten.asin: np.arcsin,
    aten.acos: np.arccos, aten.atan: np.arctan, aten.sinh: np.sinh, aten.cosh: np.cosh,
    aten.log1p: np.log1p, aten.expm1: np.expm1, aten.exp2: np.exp2, aten.log2: np.log2,
    aten.log10: np.log10, aten.floor: np.floor, aten.ceil: np.ceil, aten.trunc: np.trunc,
    aten.round: torch_math.round_, aten.sign: torch_math.sign,
    aten.sgn: torch_math.sign, aten.fmax: np.fmax, aten.fmin: np.fmin, aten.signbit: np.signbit,
    aten.atan2: np.arctan2, aten.hypot: np.hypot,
    aten.logaddexp: np.logaddexp,
    aten.floor_divide: np.floor_divide, aten.remainder: torch_math.remainder, aten.fmod: np.fmod,
    aten.copysign: np.copysign, aten.heaviside: np.heaviside, aten.nan_to_num: nan_to_num,
    aten.pow: np.power,
    aten.relu: torch_math.relu, aten.gelu: _gelu, aten.sigmoid: _sigmoid,
    aten.silu: lambda x: x * _sigmoid(x),
    aten.maximum: torch_math.maximum, aten.minimum: torch_math.minimum,
    aten.clamp: torch_math.clamp, aten.clamp_min: torch_math.maximum,
    aten.clamp_max: torch_math.minimum,
    aten.eq: _cmp(operator.eq), aten.ne: _cmp(operator.ne), aten.lt: _cmp(operator.lt),
    aten.le: _cmp(operator.le), aten.gt: _cmp(operator.gt), aten.ge: _cmp(operator.ge),
    aten.logical_not: np.logical_not, aten.logical_and: np.logical_and,
    aten.logical_or: np.logical_or, aten.any: _any,
    aten.bitwise_not: np.invert, aten.bitwise_and: np.bitwise_and, aten.bitwise_or: np.bitwise_or,
    aten.bitwise_xor: np.bitwise_xor, aten.__lshift__: np.left_shift, aten.bitwise_left_shift:
    np.left_shift, aten.__rshift__: np.right_shift, aten.bitwise_right_shift: np.right_shift,
    aten.where: _where,
    aten.masked_fill: lambda x, mask, value: _where(mask, value, x),
    # normalisations
    aten._softmax: nn_ops.softmax,
    aten.softmax: lambda x, dim, dtype=None: nn_ops.softmax(x, dim),
    aten._log_softmax: nn_ops.log_softmax,
    aten.native_layer_norm: nn_ops.layer_norm,
    # reductions
    aten.sum: _reduction(np.sum, True), aten.mean: _reduction(np.mean),
    aten.prod: _reduction(np.prod, True),
    aten.cumsum: _scan(np.cumsum),
    aten.cumprod: _scan(np.cumprod),
    aten.amax: _reduction(np.max), aten.amin: _reduction(np.min),
    aten.var: _var(False), aten.std: _var(True),
    # views and copies
    aten.view: np.reshape, aten._unsafe_view: np.reshape, aten.reshape: np.reshape,
    aten.expand: _expand, aten.permute: np.transpose,
    aten.transpose: np.swapaxes, aten.t: lambda x: np.swapaxes(x, 0, 1) if x.ndim == 2 else x,
    aten.unsqueeze: np.expand_dims, aten.squeeze: _squeeze,
    aten.slice: _slice, aten.select: _select,
    aten.split: _split, aten.split_with_sizes: _split_sizes,
    aten.cat: lambda ts, dim=0: np.concatenate(list(ts), axis=dim),
    aten.unfold: nn_ops.unfold,
    aten.flip: lambda x, dims: np.flip(x, tuple(dims)),
    aten.as_strided: torch_layout.as_strided,
    # neural-network operators (polyc/graph/torch_nn.py)
    aten.convolution: nn_ops.convolution,
    aten._native_batch_norm_legit_no_training: nn_ops.batch_norm_inference,
    aten._native_batch_norm_legit: nn_ops.batch_norm_batch_stats,
    aten._native_batch_norm_legit_functional: nn_ops.batch_norm_training,
    aten.native_group_norm: nn_ops.group_norm,
    aten.constant_pad_nd: nn_ops.constant_pad, aten.repeat: nn_ops.repeat,
    aten.leaky_relu: nn_ops.leaky_relu, aten.elu: nn_ops.elu, aten.hardtanh: nn_ops.hardtanh,
    aten.adaptive_max_pool2d: torch_pool.adaptive_max_pool_with_indices,
    aten.max_pool2d_with_indices: torch_pool.max_pool_with_indices,
    aten.max_pool1d: nn_ops.max_pool, aten.max_pool2d: nn_ops.max_pool,
    aten.max_pool3d_with_indices: torch_pool.max_pool_with_indices,
    aten.avg_pool1d: nn_ops.avg_pool, aten.avg_pool2d: nn_ops.avg_pool,
    aten.avg_pool3d: nn_ops.avg_pool,
    aten._adaptive_avg_pool2d: nn_ops.adaptive_avg_pool,
    aten.adaptive_avg_pool2d: nn_ops.adaptive_avg_pool,
    aten._adaptive_avg_pool3d: nn_ops.adaptive_avg_pool,
    aten.adaptive_avg_pool3d: nn_ops.adaptive_avg_pool,
    aten.adaptive_max_pool3d: torch_pool.adaptive_max_pool_with_indices,
    aten.max: nn_ops.max_any, aten.min: nn_ops.min_any,
    aten.linalg_vector_norm: nn_ops.vector_norm,
    aten._trilinear: nn_ops.trilinear, aten._cdist_forward: nn_ops.cdist,
    aten._transformer_encoder_layer_fwd: lambda *a, **k: nn_ops.transformer_encoder_layer(
        *a, **k, gelu=_gelu),
    # gathers (indices in bounds are checked at each call where they are inputs)
    aten.embedding: lambda w, i, *rest: _take(w, i, 0),
    aten._embedding_bag: torch_embedding.embedding_bag,
    aten._embedding_bag_forward_only: torch_embedding.embedding_bag,
    aten.index_select: lambda x, dim, i: _take(x, i, dim),
    aten.gather: lambda x, dim, i, sparse_grad=False: _take(x, i, dim, along=True),
    aten.index: lambda x, idx: x[tuple(slice(None) if i is None else i for i in idx)],
    aten.roll: lambda x, shifts, dims=(): np.roll(x, tuple(shifts), tuple(dims) or None),
    aten.stack: lambda ts, dim=0: np.stack(list(ts), axis=dim),
    aten.clone: _identity, aten.contiguous: _identity, aten.alias: _identity,
    aten.detach: _identity, aten.lift_fresh_copy: _identity,
    aten._to_copy: _to, torch.ops.prims.convert_element_type: _to,
    aten.triu: lambda x, diagonal=0: _on_mask(np.triu, x, diagonal),
    aten.tril: lambda x, diagonal=0: _on_mask(np.tril, x, diagonal),
    # creation (concrete arrays, captured when a traced value uses them)
    aten.full: _full,
    aten.zeros: lambda size, **kw: _full(size, 0.0, **kw),
    aten.ones: lambda size, **kw: _full(size, 1.0, **kw),
    aten.scalar_tensor: lambda v, **kw: _full((), v, **kw),
    aten.full_like: _full_like,
    aten.zeros_like: lambda x, **kw: _full_like(x, 0, **kw),
    aten.ones_like: lambda x, **kw: _full_like(x, 1, **kw),
    aten.arange: _arange,
    # sizes (dynamic shapes)
    aten.sym_size: lambda x, d: x.shape[d],
    # runtime checks (one_hot's range check) on values known while tracing
    aten._assert_async: lambda c, msg="assertion failed": nn_ops.assert_now(c, msg),
}
# assignment (slice_scatter, index_put...), isnan, var_mean (torch_assign.py), bucketize...
for _table in (torch_assign.LOWERINGS, torch_checks.LOWERINGS, _SEARCHES, torch_math.LOWERINGS):
    LOWERINGS.update({getattr(aten, k): fn for k, fn in _table.items()})


#: creation operators whose sizes may be symbolic (see ``torch_values.full``)
_LIKE = (aten.full, aten.zeros, aten.ones, aten.empty, aten.arange)


def _constant(t: torch.Tensor) -> np.ndarray:
    """A constant tensor of the graph (``torch.tensor([1, 0, 2])`` in a
    model's code) as numpy; outside the fake-tensor mode AOTAutograd may
    still have active while the backend compiles."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    with unset_fake_temporarily():
        return np.from_dlpack(t.detach())


#: Python-level targets that appear in ATen graphs (tuple outputs, size arithmetic)
_PY_TARGETS = (operator.getitem, operator.add, operator.sub, operator.mul,
               operator.floordiv, operator.mod, operator.neg, operator.truediv,
               operator.ge, operator.gt, operator.le, operator.lt, operator.eq, operator.ne)


#: symbolic-size functions of dynamic-shape graphs (``F.interpolate``'s output
#: size ``trunc(sym_float(h) * 0.5)``) as the Python ones: a size in float
#: arithmetic is specialised, a plan for each size
_SYM_FUNCS = {torch.sym_float: float, torch.sym_int: int, torch.sym_max: max,
              torch.sym_min: min, math.trunc: math.trunc, math.floor: math.floor,
              math.ceil: math.ceil, torch.sym_ite: lambda c, a, b: a if c else b}


def _lowering(target) -> Callable | None:
    if target in _PY_TARGETS or target is linear_nd:   # (linear_nd: torch_fold.py)
        return target
    if target in _SYM_FUNCS:
        return _SYM_FUNCS[target]
    packet = getattr(target, "overloadpacket", target)
    return LOWERINGS.get(packet)


def _where_in_model(node) -> str:
    """`` (at file:line: source)`` of the model code that made ``node``."""
    lines = (node.meta.get("stack_trace") or "").rstrip().splitlines()
    for k in range(len(lines) - 1, -1, -1):
        text = lines[k].strip()
        if text.startswith("File "):
            code = lines[k + 1].strip() if k + 1 < len(lines) else ""
            return f" (at {text.replace('File ', '', 1)}: {code})"
    return ""


def unsupported_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The ATen operators of ``gm`` that polyc does not lower, each with the
    model line that called it."""
    out = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and _lowering(node.target) is None:
            out.append(f"{node.target}{_where_in_model(node)}")
        elif node.op in ("call_module", "call_method"):
            out.append(f"{node.op} {node.target}")
    return out


def interpreter(gm: torch.fx.GraphModule, sizes: dict[int, tuple[int, int]] | None = None
                ) -> Callable:
    """A function of the graph's inputs (numpy arrays, tracers, ints) that
    evaluates ``gm``'s ATen graph with :data:`LOWERINGS`.

    ``sizes`` maps a placeholder's position to ``(position of a tensor
    placeholder, dimension)``: that placeholder is a symbolic size, read from
    the tensor's shape (so polyc keeps it symbolic) and not passed; to
    ``None``: a symbolic stride nothing in the graph reads, not passed."""
    graph = gm.graph
    sizes = sizes or {}
    orders = torch_layout.output_orders(gm)     # (torch's layouts of the outputs)

    def run(*args):
        env: dict = {}
        # creation operators of a symbolic size are made like= a traced argument
        like = next((a for a in args if isinstance(a, Tracer)), None)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        given = iter(args)
        for k, node in enumerate(placeholders):
            if k not in sizes:
                env[node] = next(given)
        for k, src in sizes.items():
            if src is not None:
                env[placeholders[k]] = env[placeholders[src[0]]].shape[src[1]]

        def value(a):
            return torch.fx.node.map_arg(a, lambda n: env[n])

        for node in graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                attr = gm
                for part in node.target.split("."):
                    attr = getattr(attr, part)
                env[node] = _constant(attr) if isinstance(attr, torch.Tensor) else attr
            elif node.op == "call_function":
                args_, kwargs = value(node.args), value(node.kwargs)
                kwargs = {k: v for k, v in kwargs.items()
                          if k not in ("device", "layout", "pin_memory", "memory_format",
                                       "non_blocking")}
                if like is not None and getattr(node.target, "overloadpacket", None) in _LIKE:
                    kwargs["like"] = like
                if getattr(node.target, "overloadpacket", None) is aten.as_strided:
                    kwargs["base"] = node.args[0].meta["val"]   # (torch_layout: its strides)
                try:
                    with located(model_location(node)):
                        env[node] = _torch_dtype(_lowering(node.target)(*args_, **kwargs),
                                                 node.meta.get("val"))
                    assert env[node] is not None or not isinstance(
                        node.meta.get("val"), torch.Tensor), f"{node.target} lowered to None"
                except PolycError as e:
                    raise type(e)(f"lowering {node.target}{_where_in_model(node)}: {e}") \
                        from None
            elif node.op == "output":
                outs = tuple(value(node.args[0]))
                for o in outs:
                    if isinstance(o, nn_ops.PoolIndices):
                        o.refuse()        # (an output polyc does not compute)
                return torch_layout.in_storage_order(outs, orders)
            else:
                raise UnsupportedError(f"FX node {node.op} {node.target} is not supported")
        raise AssertionError("an FX graph without output")
    run.__name__ = "torch_graph"
    return run


def _torch_dtype(result, val):
    """``result`` cast to the dtype ATen gives the node (``val``, its fake
    tensor): torch's type promotion differs from numpy's where a float
    tensor meets an integer one or a 0-d tensor (``float32 - int64`` is
    float32 in torch, float64 in numpy)."""
    if isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
        return type(result)(_torch_dtype(r, v) for r, v in zip(result, val))
    want = _DTYPES.get(getattr(val, "dtype", None))
    have = getattr(result, "dtype", None)
    if want is None or have is None or have == want or have == np.bool_:
        return result
    return result.astype(want)


def _size_sources(gm: torch.fx.GraphModule, example_inputs
                  ) -> dict[int, tuple[int, int] | None]:
    """For each symbolic-size example input (a ``torch.SymInt`` when
    TorchDynamo compiles with dynamic shapes), a tensor input and dimension
    of that size; ``None`` for a symbol that is only a stride (a transposed
    input's) and that no node reads."""
    out: dict[int, tuple[int, int] | None] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for k, x in enumerate(example_inputs):
        if not isinstance(x, torch.SymInt):
            continue
        for j, t in enumerate(example_inputs):
            if isinstance(t, torch.Tensor):
                d = next((d for d, s in enumerate(t.shape) if isinstance(s, torch.SymInt)
                          and s.node.expr == x.node.expr), None)
                if d is not None:
                    out[k] = (j, d)
                    break
        else:
            if k < len(placeholders) and placeholders[k].users:
                raise UnsupportedError(f"the graph reads the symbolic size {x}, which is no "
                                       "input tensor's extent (a stride?): polyc cannot bind "
                                       "it; compile with dynamic=False")
            out[k] = None
    return out


def _compile_aten(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    missing = unsupported_ops(gm)
    if missing:
        raise UnsupportedError(
            "torch.compile(backend='polyc'): polyc does not lower these operators: "
            + "; ".join(dict.fromkeys(missing)) + ". polyc compiles a graph whole (no "
            "fallback to torch for parts of it): rewrite them with supported operations "
            "(docs/torch.md), or keep that code outside the compiled module")
    for k, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor):
            _np_dtype(x.dtype)       # (a torch.bool mask enters as polyc.jit's masks do)
    fold_leading_merges(gm)
    check = split_input_checks(gm) or (lambda args: None)
    sizes = _size_sources(gm, example_inputs)
    jitted, orders = Jitted(interpreter(gm, sizes)), torch_layout.output_orders(gm)
    shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in example_inputs]
    if all(s is None or all(isinstance(d, int) for d in s) for s in shapes):
        # trace now, on zero arrays of the example shapes: an operator polyc
        # cannot trace fails at compile time; the first call reuses the plan
        dummies = [np.zeros(s, dtype=_np_dtype(x.dtype)) if s is not None else x
                   for k, (s, x) in enumerate(zip(shapes, example_inputs)) if k not in sizes]
        jitted.plan(*dummies)

    def compiled(*args):
        check(args)
        # parameters require grad even under no_grad; DLPack refuses those
        return torch_layout.restride(jitted(*[
            a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a
            for k, a in enumerate(args) if k not in sizes]), orders)
    compiled.jitted = jitted
    return compiled


def polyc_backend(gm: torch.fx.GraphModule, example_inputs, **options) -> Callable:
    """The TorchDynamo backend ``"polyc"`` (see the module docstring).

    Raises :class:`~polyc.errors.UnsupportedError` (TorchDynamo wraps it in
    ``BackendCompilerFailed``) for a graph that needs a backward, inputs
    off the CPU, and ATen operators polyc does not lower."""
    from torch._dynamo.backends.common import aot_autograd

    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        raise UnsupportedError(
            "torch.compile(backend='polyc') compiles inference only, but this graph "
            "needs gradients (an input or parameter requires grad and grad mode is on); "
            "call the model under torch.no_grad() or torch.inference_mode()")
    for x in tensors:
        if x.device.type != "cpu":
            raise UnsupportedError(f"torch.compile(backend='polyc') runs on the CPU; got "
                                   f"a tensor on {x.device}")
    # without oneDNN, torch decomposes nn.LSTM into its cell's ATen operators
    # (with it, into aten.mkldnn_rnn_layer, which polyc does not lower)
    # (torch.backends.mkldnn.flags warns about TF32 on Intel GPUs: set the one flag)
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        return aot_autograd(fw_compiler=_compile_aten,
                            decompositions=_decompositions())(gm, example_inputs)
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _decompositions() -> dict:
    """torch's core-ATen decompositions, less those of operators polyc lowers
    itself (``triu`` stays ``triu``, ``gelu`` stays ``gelu``)."""
    from torch._decomp import core_aten_decompositions
    return {op: fn for op, fn in core_aten_decompositions().items()
            if getattr(op, "overloadpacket", None) not in LOWERINGS}


def _register() -> None:
    """Registers ``polyc_backend`` under the name "polyc", unless the
    ``torch_dynamo_backends`` entry point is loading this module (TorchDynamo
    registers it then) or it is registered already."""
    from torch._dynamo.backends import registry
    known = getattr(registry, "_BACKENDS", {})
    if known.get("polyc") is not None or "polyc" in getattr(registry, "_COMPILER_FNS", {}):
        return
    registry.register_backend(polyc_backend, name="polyc")


_register()
