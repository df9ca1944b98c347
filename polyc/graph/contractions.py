"""Contractions in traced code: ``@``/``np.matmul`` (batch broadcasting,
1-D operands), ``np.dot``, ``np.tensordot`` and ``np.einsum`` (numpy's
grammar through :func:`polyc.frontend.einsum.parse`; ``optimize=`` honoured
through :func:`polyc.einsum_plan.plan_contraction`).  Each becomes a
``+=!`` statement (:func:`polyc.graph.ops.contraction`) that the pipeline
may tensorize onto the GEMM micro-kernel.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from . import ops, views
from .core import Tracer, user_location
from .ops import Scalar, operand
from .outparam import store_out
from .sizes import Size
from .ufuncs import UFUNCS


def _of_masks(a, b) -> bool:
    return isinstance(a, Tracer) and isinstance(b, Tracer) and \
        a.dtype.kind == "b" and b.dtype.kind == "b"


def _any_of(g, t: Tracer) -> Tracer:
    """A product of two masks as numpy's boolean one: ``t`` (their int32
    counts of true pairs) ``!= 0``."""
    return ops.elementwise(g, "matmul", lambda x: f"({x} != 0)", [t], np.dtype(bool),
                           lazy=True, compute_dtype=t.dtype)


def matmul(g, a, b) -> Tracer:
    a, b = operand(g, a), operand(g, b)
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        raise ValueError("matmul: Input operand does not have enough dimensions")
    if _of_masks(a, b):     # numpy's logical or of ands: a count of true pairs, != 0
        return _any_of(g, matmul(g, ops.materialize(g, a, "astype", np.int32), b))
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = views.expand_dims(a, 0)
    if b_vec:
        b = views.expand_dims(b, 1)
    if a._shape[-1].value != b._shape[-2].value:
        loc = user_location()
        raise ops.ShapeError(
            f"{loc}: matmul: Input operand 1 has a mismatch in its core dimension 0, with "
            f"gufunc signature (n?,k),(k,m?)->(n?,m?) (size {b._shape[-2].value} is different "
            f"from {a._shape[-1].value})\n    {loc.text}")
    g.symbols.unify(a._shape[-1], b._shape[-2], "matmul's contracted dimension")
    batch = ops.broadcast(g, [a._shape[:-2], b._shape[:-2]], "matmul")
    nb = len(batch)
    blabels = [f"b{k}" for k in range(nb)]
    la = blabels[nb - (a.ndim - 2):] + ["m", "k"]
    lb = blabels[nb - (b.ndim - 2):] + ["k", "n"]
    sizes = dict(zip(blabels, batch))
    sizes.update(m=a._shape[-2], k=a._shape[-1], n=b._shape[-1])
    out = blabels + (["m"] if not a_vec else []) + (["n"] if not b_vec else [])
    return ops.contraction(g, "matmul", a, b, la, lb, out, sizes)


def _sublist_labels(sub) -> str:
    """numpy's letters for an einsum sublist (``[0, 1, Ellipsis]``): 0-25
    are ``A-Z``, 26-51 ``a-z``."""
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 <= s < 52:
            out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
        else:
            raise ValueError("subscript is not within the valid range [0, 52)")
    return "".join(out)


def _sublists(first, rest) -> tuple[str, tuple]:
    """numpy's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as a
    subscripts string and the operands."""
    args = (first,) + tuple(rest)
    ops_, subs = args[0:len(args) - len(args) % 2:2], args[1::2]
    out = _sublist_labels(args[-1]) if len(args) % 2 else None
    spec = ",".join(_sublist_labels(s) for s in subs)
    return spec + (f"->{out}" if out is not None else ""), tuple(ops_)


def einsum(g, subscripts, *operands, **kw):
    """``np.einsum`` in traced code.  ``True``, ``'greedy'``, ``'optimal'``
    or an explicit path are pairwise contractions along that path
    (:func:`polyc.einsum_plan.plan_contraction`, opt_einsum's paths), each
    an operation the planner may fuse.  ``False`` is one loop nest over
    every label.  Not given (numpy's default is ``False``), three operands
    or more are one nest unless the greedy path costs less than half of it
    (``ij,jk,kl->il``: 2 n^3 against n^4), as a compiler should choose; the
    sums are then associated differently from numpy's, within rounding."""
    from ..frontend import einsum as fe
    loc = user_location()
    optimize = kw.pop("optimize", None)          # None: not given
    dtype = kw.pop("dtype", None)
    if kw.pop("out", None) is not None or kw:
        raise UnsupportedError(f"{loc}: np.einsum with {', '.join(kw) or 'out'}= is not "
                               f"supported in traced code")
    if not isinstance(subscripts, str):
        subscripts, operands = _sublists(subscripts, operands)
    ops_ = [operand(g, o) for o in operands]
    ts = [o if isinstance(o, Tracer) else ops.materialize(
        g, Tracer(g, o.literal(o.dtype), (), (), o.dtype)) for o in ops_]
    if dtype is None and all(t.dtype.kind == "b" for t in ts):
        # numpy's einsum of booleans is boolean (sums are or): count, then != 0
        ts[0] = ops.materialize(g, ts[0], "astype", np.int32)
        return _any_of(g, einsum(g, subscripts, *ts, optimize=optimize))
    spec = fe.parse(subscripts, [tuple(s.value for s in t._shape) for t in ts])
    sizes: dict[str, Size] = {}
    for t, labels, bc in zip(ts, spec.input_labels, spec.broadcast):
        for s, lab, is_bc in zip(t._shape, labels, bc):
            if is_bc:
                g.symbols.unify(s, Size.constant(g.symbols, 1), "einsum broadcasting")
                continue
            if lab in sizes:
                g.symbols.unify(sizes[lab], s, f"einsum label {lab}")
            else:
                sizes[lab] = s
    for lab, v in spec.sizes:
        sizes.setdefault(lab, Size.constant(g.symbols, v))
    if len(ts) >= 3 and optimize is None:
        steps = _path(spec, ts, "greedy", dtype)
        if len(steps) > 1 and _naive_points(spec, ts) > 2 * sum(st.flops for st in steps):
            return _einsum_path(g, spec, ts, sizes, steps)
    if len(ts) <= 2 or optimize is False or optimize is None:
        return ops.contraction(g, "einsum", ts[0], ts[1] if len(ts) >= 2 else None,
                               spec.input_labels[0],
                               spec.input_labels[1] if len(ts) >= 2 else None,
                               spec.output_labels, sizes, dtype,
                               more=list(zip(ts[2:], spec.input_labels[2:])))
    return _einsum_path(g, spec, ts, sizes, _path(spec, ts, optimize, dtype))


def _letters(spec) -> dict:
    pool = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return {lab: next(pool) for lab in spec.labels}


def _path(spec, ts, optimize, dtype) -> list:
    """The pairwise steps of :func:`polyc.einsum_plan.plan_contraction`
    (opt_einsum's paths) for these traced operands."""
    from ..einsum_plan import plan_contraction
    letters = _letters(spec)
    inputs = ["".join(letters[x] for x in ls) for ls in spec.input_labels]
    output = "".join(letters[x] for x in spec.output_labels)
    shapes = [tuple(s.value for s in t._shape) for t in ts]
    return plan_contraction(",".join(inputs) + "->" + output, shapes,
                            [t.dtype for t in ts], optimize, dtype=dtype)


def _naive_points(spec, ts) -> int:
    """The cost of one loop nest over every label, in the model of
    :attr:`ContractionStep.flops`: its iterations times the operand count
    (the multiplications and the addition of each term)."""
    ext = {lab: s.value for t, ls in zip(ts, spec.input_labels) for s, lab in zip(t._shape, ls)}
    return int(np.prod([float(v) for v in ext.values()]) * len(ts))


def _einsum_path(g, spec, ts, sizes, steps):
    """Three or more operands along a path: each pairwise step a node (an
    operation the planner may fuse)."""
    back = {v: k for k, v in _letters(spec).items()}
    cur = list(ts)
    for step in steps:
        picked = [cur[i] for i in step.operands]
        for i in sorted(step.operands, reverse=True):
            cur.pop(i)
        ins, out_sub = step.subscripts.split("->")
        labs = [[back[c] for c in x] for x in ins.split(",")]
        t = ops.contraction(g, "einsum", picked[0], picked[1] if len(picked) > 1 else None,
                            labs[0], labs[1] if len(picked) > 1 else None,
                            [back[c] for c in out_sub], sizes, step.dtype,
                            more=list(zip(picked[2:], labs[2:])))
        cur.append(t)
    return cur[-1]


def tensordot(g, a, b, axes=2):
    # numpy converts its operands with asarray: a Python scalar is a 0-d array
    # of its default dtype (not weak)
    a, b = (ops.materialize(g, Tracer(g, o.literal(np.asarray(o.value).dtype), (), (),
                                      np.asarray(o.value).dtype))
            if isinstance(o, ops.Scalar) else o for o in (operand(g, a), operand(g, b)))
    if _of_masks(a, b):
        return _any_of(g, tensordot(g, ops.materialize(g, a, "astype", np.int32), b, axes))
    if isinstance(axes, int):
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = [list(np.atleast_1d(x)) for x in axes]
        ax_a = [ops.normalize_axis(int(x), a.ndim) for x in ax_a]
        ax_b = [ops.normalize_axis(int(x), b.ndim) for x in ax_b]
    la = [f"a{k}" for k in range(a.ndim)]
    lb = [f"b{k}" for k in range(b.ndim)]
    for x, y in zip(ax_a, ax_b):
        if a._shape[x].value != b._shape[y].value:
            raise ValueError("shape-mismatch for sum")
        lb[y] = la[x]
    sizes = dict(zip(la, a._shape))
    for lab, s in zip(lb, b._shape):
        if lab in sizes:
            g.symbols.unify(sizes[lab], s, "tensordot")
        else:
            sizes[lab] = s
    out = [la[k] for k in range(a.ndim) if k not in ax_a] + \
          [lb[k] for k in range(b.ndim) if k not in ax_b]
    return ops.contraction(g, "tensordot", a, b, la, lb, out, sizes)


def dot(g, a, b, out=None):
    if out is not None:
        return store_out(g, out, dot(g, a, b), "np.dot")
    a, b = operand(g, a), operand(g, b)
    if isinstance(a, Scalar) or isinstance(b, Scalar) or a.ndim == 0 or b.ndim == 0:
        # np.dot converts a Python scalar to an array: its dtype is not weak
        # (np.dot(float32 x, 2.0) is float64, np.dot(int32 x, 2) int64)
        a, b = (Scalar(np.asarray(v.value)[()]) if isinstance(v, Scalar) and v.weak else v
                for v in (a, b))
        return UFUNCS["multiply"](g, a, b)
    if b.ndim <= 2:
        return matmul(g, a, b)
    return tensordot(g, a, b, axes=([a.ndim - 1], [b.ndim - 2]))


# -- other functions ----------------------------------------------------------------


def multi_dot(g, arrays, *, out=None):
    """``np.linalg.multi_dot``: the chain of ``np.dot`` products in numpy's
    order (the cheapest parenthesisation at the traced extents: numpy's cost
    for three operands, its dynamic programme for more).  A 1-D first
    operand is a row, a 1-D last one a column, as numpy treats them; every
    other operand must be 2-D (``ValueError``).  A shape class whose later
    extents favour another order keeps the traced one (sums associated
    differently from numpy's, within rounding)."""
    if out is not None:
        return store_out(g, out, multi_dot(g, arrays), "np.linalg.multi_dot")
    ts = [operand(g, a) for a in arrays]
    n = len(ts)
    if n < 2:
        raise ValueError("Expecting at least two arrays.")
    if n == 2:
        return dot(g, ts[0], ts[1])
    if any(isinstance(t, Scalar) for t in ts):
        raise ValueError("0-dimensional array given. Array must be two-dimensional")
    first, last = ts[0].ndim, ts[-1].ndim
    if first == 1:
        ts[0] = views.expand_dims(ts[0], 0)
    if last == 1:
        ts[-1] = views.expand_dims(ts[-1], 1)
    for t in ts:
        if t.ndim != 2:
            raise ValueError(f"{t.ndim}-dimensional array given. Array must be two-dimensional")
    p = [t._shape[0].value for t in ts] + [ts[-1]._shape[1].value]
    cost = {(i, i): 0 for i in range(n)}
    split = {}
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i, j] = float("inf")
            for k in range(i, j):
                q = cost[i, k] + cost[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i, j]:
                    cost[i, j], split[i, j] = q, k
    if n == 3:      # numpy's own test for three (ties go right, as its strict '<')
        left = p[0] * p[2] * (p[1] + p[3]) < p[1] * p[3] * (p[0] + p[2])
        split[0, 2] = 1 if left else 0

    def chain(i, j):
        return ts[i] if i == j else dot(g, chain(i, split[i, j]), chain(split[i, j] + 1, j))
    r = chain(0, n - 1)
    if first == 1 and last == 1:
        return views.getitem(r, (0, 0))
    if first == 1 or last == 1:
        return views.reshape(r, (-1,))
    return r
