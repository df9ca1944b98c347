"""An independent numpy evaluator of :class:`polyc.ir.Program`: the oracle.

Owns :func:`evaluate`, which takes an ``ir.Program``, numpy inputs and the
values of the size parameters and returns the output arrays.  It never uses
the scheduler, the AST generator or generated code: it runs the statements
in their original sequential order (the order of ``Program.statements``, each
scanning its whole domain lexicographically) directly with numpy, so that
differential tests compare the compiler with something that shares none of
its machinery beyond the IR and isl.

How a statement is evaluated
----------------------------
* **Domain.**  The parameters are fixed to ``sizes`` and projected out with
  isl; each iterator gets its bounding interval (``dim_min_val`` /
  ``dim_max_val``) and one numpy axis, in ``Statement.iterators`` order.  When
  the domain is not exactly that box, a boolean mask is built from the
  domain's basic sets and their constraints (``get_coefficient_val``); local
  (``div``) dimensions are evaluated from their explicit ``floor`` expressions,
  and a div without one raises ``NotImplementedError``.
* **Body.**  The :mod:`polyc.expr` tree is evaluated with numpy broadcasting:
  an ``Index`` is an ``arange`` along its own axis, a read whose indices are
  linear in the index variables (``A(m, k)``, ``I(n, c, h + kh)``) is a
  strided view of the tensor (no copy), any other read (gathers: an index
  that reads a tensor, cast to ``int64`` as C would; floor divisions) uses
  fancy indexing.  Indices are checked: an out-of-range index at a
  point that is actually evaluated raises ``IndexError``; points outside the
  domain, or in the branch of ``?:``, ``&&``, ``||`` that C would not
  evaluate, are clipped instead.  Types follow C: integer ``/`` is floor
  division and ``%`` the matching remainder (TC's rounding; on floats ``%`` is
  ``np.remainder``), mixing an integer with a float converts the integer to
  that float type, float literals take the statement's float type (the output
  tensor's dtype when it is a float, else float64), so float32 work stays
  float32.  Builtins: ``exp log sqrt tanh`` (integers converted to the
  statement's float type first), ``rsqrt`` = ``1/sqrt``, ``sigmoid`` =
  ``1/(1+exp(-x))``, ``abs fabs``, ``fmax fmin`` (``np.fmax``/``np.fmin``),
  ``max min`` (as ``fmax``/``fmin`` on floats, ``np.maximum``/``np.minimum``
  on integers), ``pow`` (integer operands computed in floating point).
  Floating-point warnings are silenced: inf and NaN are values, as in C.
* **Writes.**  The left-hand side's indices must be plain index variables.
  ``op == "="`` writes the value at every domain point.  A reduction
  (``op`` in ``+ * max min``) reduces the right-hand side over the axes of the
  iterators that do not appear on the left (the ``reduction_iterators`` of a
  well-formed statement) with ``np.add``/``np.multiply``/``np.maximum``/
  ``np.minimum`` (so a NaN input propagates through ``max=``/``min=``; points
  outside the domain contribute the identity) and combines the result with
  the current values: ``lhs = lhs op reduced``.
* **Sequential semantics.**  Vectorising a statement is only valid when no
  point reads what another point of the same statement wrote, and (for
  ``=``) no two points write the same element.  When the statement reads the
  tensor it writes (other than its own accumulation), or an ``=`` statement
  has iterators absent from its left-hand side, isl computes those
  dependences and the evaluator runs the shortest prefix of iterators that
  carries all of them sequentially, one value at a time, and vectorises the
  rest.  A recurrence such as ``A(i) = A(i - 1) + B(i)`` is thus exact.
* **Memory.**  The box is cut into chunks, along the outermost iterators that
  appear on the left-hand side first and then the reduction iterators, so
  that no temporary exceeds ``chunk_elements`` elements (default 32 Mi);
  reductions accumulate chunk by chunk.
* **Fast path.**  An ``op == "+"`` reduction on a box domain whose right-hand
  side is a product of tensor reads (and scalar constants or sizes) is
  contracted without forming the product over the whole box: two factors go
  through one batched ``np.matmul`` (BLAS even when a label is shared by
  both operands and the output, where ``np.einsum`` would fall back to its C
  loops), one or three and more through ``np.einsum(..., optimize=True)``;
  so the numpy time benchmarks compare with is numpy's best.  Each factor is
  materialised over its own iterators only (a sliding window ``h + kh`` is
  unfolded, im2col style), which the chunk size accounts for.
  ``use_einsum=False`` turns the fast path off (tests compare both paths).

Inputs are converted to their tensor's dtype.  Outputs are allocated with the
output tensors' shapes evaluated at ``sizes`` and filled with NaN (floats) or
the dtype's minimum (integers) so that a missed write shows, or copied from
``outputs`` when given (the caller's arrays are not modified).  The returned
dict holds every output tensor by name.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import islpy as isl
import numpy as np

from . import expr as E
from .access import access_relation
from .errors import BindingError, ShapeError
from .ir import HALF_DTYPES, Program, Statement, identity, is_float, numpy_dtype
from .isl_util import CTX, eval_pw_aff
from .refeval import Env, as_ndim, dtype_of, eval_expr, numeric, promote_dtype

#: Largest temporary, in elements, that one chunk may create.
DEFAULT_CHUNK_ELEMENTS = 32 * 1024 * 1024

_REDUCE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def evaluate(program: Program, inputs: Mapping[str, np.ndarray], sizes: Mapping[str, int],
             outputs: Mapping[str, np.ndarray] | None = None, *,
             chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
             use_einsum: bool = True, inout: bool = False) -> dict[str, np.ndarray]:
    """Evaluate ``program`` with numpy and return its outputs by name (with
    ``inout``, also the final values of the in-place arrays it writes).

    ``sizes`` gives every parameter's value (names in ``program.fixed_sizes``
    may be given and must agree; other extra names are ignored).  Raises
    :class:`~polyc.errors.BindingError` for a missing input,
    :class:`~polyc.errors.ShapeError` for a wrong shape or sizes outside the
    program's context or preconditions, ``IndexError`` for an out-of-range
    read (e.g. a gather index), ``NotImplementedError`` for a domain isl
    describes with a div that has no explicit expression.
    """
    values = _param_values(program, sizes)
    arrays: dict[str, np.ndarray] = {}
    written = {s.tensor for s in program.statements}
    half = {t.name: numpy_dtype(t.dtype) for t in program.tensors if t.dtype in HALF_DTYPES}
    for t in program.tensors:
        shape = tuple(eval_pw_aff(pa, values) for pa in t.shape)
        dtype = numpy_dtype(t.dtype)
        if t.role == "output":
            given = None if outputs is None else outputs.get(t.name)
            if given is None:
                fill = np.nan if is_float(t.dtype) else np.iinfo(t.dtype).min
                arr = np.full(shape, fill, dtype=dtype)
            else:
                arr = np.array(given, dtype=dtype, copy=True)
        elif t.role == "temp":           # scratch (a half reduction's accumulator)
            arr = np.zeros(shape, dtype=dtype)
        else:
            if t.name not in inputs:
                raise BindingError(f"reference.evaluate: no array for input {t.name!r}")
            arr = np.asarray(inputs[t.name], dtype=dtype)
            if t.name in written:
                arr = arr.copy()
        if arr.shape != shape:
            raise ShapeError(f"reference.evaluate: {t.name} has shape {arr.shape}, the "
                             f"program expects {shape} at sizes {dict(values)}")
        # a half-precision tensor is held in float32, the type its values are
        # computed in, and rounded to its type after each statement writes it
        arrays[t.name] = arr.astype(np.float32) if t.name in half else arr
    shapes = {t.name: t.shape for t in program.tensors}
    with np.errstate(all="ignore"):
        for stmt in program.statements:
            _run_statement(stmt, arrays, values, shapes, chunk_elements, use_einsum)
            if stmt.tensor in half:
                arr = arrays[stmt.tensor]
                arr[...] = arr.astype(half[stmt.tensor]).astype(np.float32)
    results = [t for t in program.tensors if t.role == "output"
               or (inout and t.role == "inout" and t.name in written)]
    return {t.name: (arrays[t.name].astype(half[t.name]) if t.name in half
                     else arrays[t.name]) for t in results}


# ----------------------------------------------------------------- parameters

def _param_values(program: Program, sizes: Mapping[str, int]) -> dict[str, int]:
    missing = [p for p in program.params if p not in sizes]
    if missing:
        raise BindingError(f"reference.evaluate: no value for size(s) {', '.join(missing)}")
    values = {p: int(sizes[p]) for p in program.params}
    for name, v in program.fixed_sizes.items():
        if name in sizes and int(sizes[name]) != int(v):
            raise ShapeError(f"reference.evaluate: size {name}={sizes[name]} but the "
                             f"program was specialised to {name}={v}")
        values[name] = int(v)
    for what, s in (("context", program.context), ("preconditions", program.preconditions)):
        if s is not None and not _param_point(s.get_space(), values).is_subset(s.params()):
            raise ShapeError(f"reference.evaluate: sizes {values} are outside the "
                             f"program's {what} {s}")
    return values


def _param_point(space: isl.Space, values: Mapping[str, int]) -> isl.Set:
    """The parameter-only set fixing every parameter of ``space``."""
    pt = isl.Set.universe(space.params())
    for i, name in enumerate(pt.get_space().get_var_names(isl.dim_type.param)):
        pt = pt.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(CTX, values[name]))
    return pt


def _fix(obj, values):
    """``obj`` (an ``isl.Set`` or ``isl.Map``) with its parameters fixed to
    ``values`` and projected out."""
    obj = obj.intersect_params(_param_point(obj.get_space(), values))
    return obj.project_out(isl.dim_type.param, 0, obj.dim(isl.dim_type.param))


# ------------------------------------------------------------ domain analysis

def _box(dom: isl.Set) -> tuple[list[int], list[int], bool]:
    """The bounding box ``lo``, ``hi`` (inclusive) of a parameter-free
    ``dom``, and whether ``dom`` is exactly that box."""
    lo, hi = [], []
    box = isl.Set.universe(dom.get_space())
    for k in range(dom.dim(isl.dim_type.set)):
        a, b = dom.dim_min_val(k), dom.dim_max_val(k)
        if not (a.is_int() and b.is_int()):
            raise ShapeError(f"reference.evaluate: iterator {k} of {dom} is unbounded")
        box = box.lower_bound_val(isl.dim_type.set, k, a).upper_bound_val(isl.dim_type.set, k, b)
        lo.append(int(a.to_python()))
        hi.append(int(b.to_python()))
    return lo, hi, box.is_subset(dom)


def _ints(vals) -> list[int]:
    return [int(v.to_python()) for v in vals]


def _mask_program(dom: isl.Set) -> list[tuple[list, list]]:
    """Per basic set: its divs ``(coeffs, div coeffs, const, denominator)``
    meaning ``floor((coeffs.x + div coeffs.divs + const) / denominator)``, and
    its constraints ``(coeffs, div coeffs, const, is_equality)``."""
    n = dom.dim(isl.dim_type.set)
    out = []
    for bs in dom.get_basic_sets():
        nd = bs.dim(isl.dim_type.div)
        divs = []
        for k in range(nd):
            aff = bs.get_div(k)
            if aff.is_nan():
                raise NotImplementedError(
                    f"reference.evaluate: the domain {dom} has an existentially "
                    "quantified variable without an explicit floor expression")
            d = aff.get_denominator_val()
            divs.append((_ints(aff.get_coefficient_val(isl.dim_type.in_, q).mul(d)
                               for q in range(n)),
                         _ints(aff.get_coefficient_val(isl.dim_type.div, j).mul(d)
                               for j in range(nd)),
                         int(aff.get_constant_val().mul(d).to_python()),
                         int(d.to_python())))
        cons = [(_ints(c.get_coefficient_val(isl.dim_type.set, q) for q in range(n)),
                 _ints(c.get_coefficient_val(isl.dim_type.div, j) for j in range(nd)),
                 int(c.get_constant_val().to_python()), c.is_equality())
                for c in bs.get_constraints()]
        out.append((divs, cons))
    return out


def _eval_mask(program, grids: list[np.ndarray]):
    def affine(coeffs, dcoeffs, const, divvals):
        return sum((c * g for c, g in zip(coeffs + dcoeffs, grids + divvals) if c),
                   np.int64(const))

    mask = np.zeros((), bool)
    for divs, cons in program:
        divvals: list = []
        for coeffs, dcoeffs, const, den in divs:
            divvals.append(np.floor_divide(affine(coeffs, dcoeffs, const, divvals), den))
        m = np.ones((), bool)
        for coeffs, dcoeffs, const, eq in cons:
            v = affine(coeffs, dcoeffs, const, divvals)
            m = m & ((v == 0) if eq else (v >= 0))
        mask = mask | m
    return mask


def _sequential_depth(stmt: Statement, values, shapes, absent: list[str]) -> int:
    """The shortest prefix of iterators that carries every dependence between
    two points of ``stmt`` (0 when the statement is fully parallel)."""
    self_reads = [a for a in E.accesses(stmt.rhs) if a.tensor == stmt.tensor]
    if not self_reads and not (stmt.op == "=" and absent):
        return 0
    dom = _fix(stmt.domain, values)
    write = _fix(stmt.write, values)
    before = isl.Map.lex_lt(dom.get_space())
    deps = isl.Map.empty(before.get_space())
    for acc in self_reads:
        read = _fix(access_relation(stmt.domain, acc, shapes[acc.tensor]), values)
        deps = deps.union(write.apply_range(read.reverse()).intersect(before))
    if stmt.op == "=":
        deps = deps.union(write.apply_range(write.reverse()).intersect(before))
    same = isl.Map.universe(before.get_space())
    for p in range(len(stmt.iterators) + 1):
        if deps.intersect(same).is_empty():
            return p
        same = same.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    raise AssertionError("a dependence between a point and itself")


# ----------------------------------------------------------------- statements

def _factors(e: E.Expr) -> list[E.Expr]:
    if isinstance(e, E.Binary) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _einsum_factors(stmt: Statement, masked: bool, n: int):
    """The factors of ``stmt``'s right-hand side when the einsum fast path
    applies, else ``None``."""
    if stmt.op != "+" or masked or n > len(_LETTERS):
        return None
    fs = _factors(stmt.rhs)
    if not any(isinstance(f, E.Access) for f in fs):
        return None
    if not all(isinstance(f, (E.Access, E.Param))
               or (isinstance(f, E.Const) and not isinstance(f.value, bool)) for f in fs):
        return None
    return fs


def _run_statement(stmt, arrays, values, shapes, chunk_elements, use_einsum):
    its = list(stmt.iterators)
    n = len(its)
    for i in stmt.lhs.indices:
        if not (isinstance(i, E.Index) and i.name in its):
            raise NotImplementedError(f"reference.evaluate: statement {stmt.name} writes "
                                      f"{E.to_text(stmt.lhs)}; left-hand side indices must "
                                      "be index variables")
    dom = _fix(stmt.domain, values)
    if dom.is_empty():
        return
    lo, hi, is_box = _box(dom)
    maskprog = None if is_box else _mask_program(dom)
    lhs_names = [i.name for i in stmt.lhs.indices]
    kept = [k for k in range(n) if its[k] in lhs_names]
    absent = [k for k in range(n) if its[k] not in lhs_names]
    seq = _sequential_depth(stmt, values, shapes, [its[k] for k in absent])
    factors = (_einsum_factors(stmt, maskprog is not None, n) if use_einsum else None)

    def cost(ext):
        if factors is None:
            return int(np.prod(ext, dtype=np.int64))
        c = int(np.prod([ext[k] for k in kept], dtype=np.int64))
        for f in factors:
            if isinstance(f, E.Access):
                used = E.index_names(f)
                c = max(c, int(np.prod([ext[k] for k in range(n) if its[k] in used],
                                       dtype=np.int64)))
        return c

    ext = [1 if k < seq else hi[k] - lo[k] + 1 for k in range(n)]
    for k in kept + absent:
        if cost(ext) <= chunk_elements:
            break
        if k < seq:
            continue
        ext[k] = 1
        if cost(ext) > chunk_elements:
            continue
        a, b = 1, hi[k] - lo[k] + 1  # largest c in [a, b) with cost <= limit
        while b - a > 1:
            mid = (a + b) // 2
            ext[k] = mid
            a, b = (mid, b) if cost(ext) <= chunk_elements else (a, mid)
        ext[k] = a
        break

    env = Env(arrays, values, _float_type(arrays[stmt.tensor].dtype), its)
    env.copy_views = factors is None
    starts = [range(lo[k], hi[k] + 1, ext[k]) for k in range(n)]
    for start in itertools.product(*starts):
        clo = list(start)
        chi = [min(hi[k], clo[k] + ext[k] - 1) for k in range(n)]
        env.set_chunk(clo, chi)
        mask = None
        if maskprog is not None:
            mask = np.broadcast_to(_eval_mask(maskprog, env.grid_list), env.shape)
            if not mask.any():
                continue
        _run_chunk(stmt, env, mask, kept, absent, factors, lhs_names)


def _float_type(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _run_chunk(stmt, env, mask, kept, absent, factors, lhs_names):
    out = env.arrays[stmt.tensor]
    ndim = len(env.shape)
    if factors is not None:
        red = _einsum(factors, env, kept, absent)
    else:
        val = as_ndim(eval_expr(stmt.rhs, env, mask), ndim)
        if stmt.op == "=":
            _assign(stmt, env, mask, out, val, kept, absent, lhs_names)
            return
        (val,) = numeric(val)  # bools count as integers
        if out.dtype.kind == "f" and val.dtype.kind != "f":
            val = val.astype(out.dtype)
        full = np.broadcast_to(val, env.shape)
        if mask is not None:
            full = np.where(mask, full, np.asarray(identity(stmt.op, dtype_of(full).name),
                                                   dtype=dtype_of(full)))
        red = _REDUCE[stmt.op].reduce(full, axis=tuple(absent)) if absent else full
    # red: one axis per kept iterator, in iterator order
    kept_names = [env.iterators[k] for k in kept]
    combine = _REDUCE[stmt.op]
    # the combined values are stored with a C cast (integers wrap, as the
    # generated code's do): an int64 sum stored into int32 wraps instead of
    # raising OverflowError when the result is a numpy scalar (a 0-d output)
    if len(set(lhs_names)) == len(lhs_names):
        view = _lhs_view(out, lhs_names, env)
        np.copyto(view, combine(view, np.transpose(red, [kept_names.index(x)
                                                         for x in lhs_names])),
                  casting="unsafe")
    else:
        idx = tuple(np.arange(env.lo[env.axis[x]], env.hi[env.axis[x]] + 1)
                    .reshape([-1 if kept_names[a] == x else 1 for a in range(len(kept))])
                    for x in lhs_names)
        out[idx] = np.asarray(combine(out[idx], red)).astype(out.dtype, copy=False)


def _lhs_view(out, lhs_names, env):
    if out.ndim == 0:
        return out
    return out[tuple(slice(env.lo[env.axis[x]], env.hi[env.axis[x]] + 1) for x in lhs_names)]


def _assign(stmt, env, mask, out, val, kept, absent, lhs_names):
    if not absent and len(set(lhs_names)) == len(lhs_names):
        perm = [env.axis[x] for x in lhs_names]
        view = _lhs_view(out, lhs_names, env)
        if not env.shape and np.size(val) == 1:
            val = np.reshape(val, ())      # a statement without index variables
        src = np.transpose(np.broadcast_to(val, env.shape), perm)
        where = True if mask is None else np.transpose(mask, perm)
        np.copyto(view, src, casting="unsafe", where=where)
        return
    # points of the chunk write distinct elements (no output dependence)
    m = np.ones(env.shape, bool) if mask is None else mask
    idx = tuple(np.broadcast_to(env.grids[x], env.shape)[m] for x in lhs_names)
    out[idx] = np.broadcast_to(val, env.shape)[m]


def _einsum(factors, env, kept, absent):
    n = len(env.shape)
    ops, subs, scale = [], [], []
    used: set[int] = set()
    for f in factors:
        if not isinstance(f, E.Access):
            scale.append(eval_expr(f, env, None))
            continue
        v = as_ndim(eval_expr(f, env, None), n)
        names = E.index_names(f)
        axes = [k for k in range(n) if env.iterators[k] in names and v.shape[k] == env.shape[k]]
        assert all(v.shape[k] == 1 for k in range(n) if k not in axes)
        ops.append(v[tuple(slice(None) if k in axes else 0 for k in range(n))])
        subs.append("".join(_LETTERS[k] for k in axes))
        used.update(axes)
    target = promote_dtype([o.dtype for o in ops] + [dtype_of(s) for s in scale])
    out_axes = [k for k in kept if k in used]
    spec = ",".join(subs) + "->" + "".join(_LETTERS[k] for k in out_axes)
    ops = [o.astype(target, copy=False) for o in ops]
    if len(ops) == 2:
        res = _contract2(ops[0], subs[0], ops[1], subs[1], spec.split("->")[1])
    else:
        res = np.einsum(spec, *ops, optimize=True)
    for s in scale:
        res = res * target.type(s)
    count = int(np.prod([env.shape[k] for k in absent if k not in used], dtype=np.int64))
    if count != 1:
        res = res * target.type(count)
    res = np.asarray(res).reshape([env.shape[k] if k in used else 1 for k in kept])
    return np.broadcast_to(res, [env.shape[k] for k in kept])


def _contract2(a, sa: str, b, sb: str, out: str):
    """``np.einsum(f"{sa},{sb}->{out}", a, b)`` as one batched ``np.matmul``
    (numpy's einsum falls back to its C loops when a label is shared by both
    operands and the output; matmul keeps BLAS for those batch labels)."""
    def presum(x, s, other):
        drop = tuple(i for i, x_ in enumerate(s) if x_ not in other and x_ not in out)
        if drop:
            x, s = x.sum(axis=drop), "".join(c for i, c in enumerate(s) if i not in drop)
        return x, s
    a, sa = presum(a, sa, sb)
    b, sb = presum(b, sb, sa)
    size = {**dict(zip(sa, a.shape)), **dict(zip(sb, b.shape))}
    batch = [c for c in sa if c in sb and c in out]
    contr = [c for c in sa if c in sb and c not in out]
    fa = [c for c in sa if c not in sb]
    fb = [c for c in sb if c not in sa]

    def prod(letters):
        return int(np.prod([size[c] for c in letters], dtype=np.int64))
    am = a.transpose([sa.index(c) for c in batch + fa + contr]).reshape(
        prod(batch), prod(fa), prod(contr))
    bm = b.transpose([sb.index(c) for c in batch + contr + fb]).reshape(
        prod(batch), prod(contr), prod(fb))
    res = np.matmul(am, bm).reshape([size[c] for c in batch + fa + fb])
    cur = batch + fa + fb
    return res.transpose([cur.index(c) for c in out])


# ---------------------------------------------------------------- expressions

