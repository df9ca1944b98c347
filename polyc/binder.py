"""The argument binder of every compiled kernel, whatever its target.

:class:`Binder` takes an ``ir.Program`` and binds a call's arguments to its
size parameters and buffers: it checks dtypes, ranks, shape consistency,
the in-bounds preconditions and aliasing, and allocates the outputs.  The
launchers call it: :class:`polyc.runtime.Kernel` (a C library, through
ctypes) and :class:`polyc.gpu_runtime.CudaKernel` (a cubin, through
pycuda); it knows nothing of either.

Calling convention (documented for users in the README):

* arguments follow ``Program.signature``, by position (a keyword argument
  other than ``out`` is a BindingError): input tensors as ``numpy.ndarray``
  of exactly the declared dtype (no implicit casts; a byte-swapped array such
  as ``'>f4'`` is a DTypeError, convert it with ``.astype``), scalar size
  arguments as Python or numpy integers in ``0 .. 2**63 - 1``;
* a rank-0 tensor also takes a numpy scalar (checked like a 0-d array, exact
  dtype) or a Python int or float, converted when the element type holds it
  (no wrap-around, no overflow to infinity; a bool is refused);
* masked arrays are refused (the mask would be ignored);
* non-contiguous, negatively strided or misaligned inputs are copied to
  aligned C order first (the generated code assumes dense row-major buffers);
* outputs are allocated and returned (a tuple when there are several), or
  written into ``out`` (an array, or a tuple or list with one array per
  output); a non-contiguous or misaligned ``out`` is computed into a
  temporary and copied back; ``out`` arrays must be writeable, must not share
  memory with each other and must not overlap themselves (stride 0);
* an input that shares memory with an ``out`` array is copied first, so the
  result is what numpy's copy semantics give;
* an output whose declared shape is larger than what the statements write is
  allocated zero-filled (never uninitialised memory);
* when no statement has anything to execute at the given sizes, the
  generated code is not called at all;
* inputs are never modified;
* a torch CPU tensor, or any other DLPack producer, is accepted wherever an
  array is, read without a copy through ``np.from_dlpack``; when an input
  was a torch tensor the results come back as torch tensors sharing memory
  with polyc's output arrays (``torch.from_numpy``).  Only calls that miss
  the call-plan fast path (:mod:`polyc.callplan`) look for such arguments.
"""

from __future__ import annotations

from typing import Any, Callable

import islpy as isl
import numpy as np

from . import expr as E
from . import output_pool
from .errors import BindingError, DTypeError, ShapeError
from .ir import Program
from .isl_util import pw_aff_to_expr, set_to_condition

#: Below this many statement instances a call runs on one thread: the
#: OpenMP fork/join would cost more than it saves (a work estimate that
#: cannot be expressed counts as this much).
SERIAL_WORK = 1 << 14


def _py(e: E.Expr) -> str:
    """Python source for a parameter expression produced by isl."""
    if isinstance(e, E.Const):
        return repr(int(e.value))
    if isinstance(e, (E.Param, E.Index)):
        return "p_" + e.name
    if isinstance(e, E.Unary):
        return f"(not {_py(e.operand)})" if e.op == "!" else f"(-{_py(e.operand)})"
    if isinstance(e, E.Binary):
        op = {"/": "//", "&&": "and", "||": "or"}.get(e.op, e.op)
        return f"({_py(e.lhs)} {op} {_py(e.rhs)})"
    if isinstance(e, E.Call) and e.fn in ("min", "max"):
        return f"{e.fn}({_py(e.args[0])}, {_py(e.args[1])})"
    if isinstance(e, E.Select):
        return f"({_py(e.then)} if {_py(e.cond)} else {_py(e.otherwise)})"
    raise AssertionError(f"unexpected parameter expression {E.to_text(e)}")


def param_function(e: E.Expr, params: tuple[str, ...]) -> Callable[..., Any]:
    """Compile a parameter expression (from isl, never user text) into a
    Python function of the parameters in ``params`` order."""
    args = ", ".join("p_" + p for p in params)
    return eval(f"lambda {args}: {_py(e)}", {"min": min, "max": max})  # noqa: S307


_INT64_MAX = 2 ** 63 - 1


def _dtype_text(dt: np.dtype) -> str:
    """A dtype for a message; a byte-swapped one says so (``>f4`` prints as
    ``float32`` in numpy's ``name``, which would read as the expected type)."""
    if not dt.isnative:
        return f"{dt.str} (non-native byte order: {dt.name} stored byte-swapped)"
    return str(dt)


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` share an element (exact for interleaved views
    such as ``buf[::2]`` and ``buf[1::2]``; assumed when too costly to tell)."""
    if not (a.size and b.size and np.may_share_memory(a, b)):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except getattr(np, "exceptions", np).TooHardError:     # numpy < 1.25: np.TooHardError
        return True


def _self_overlapping(arr: np.ndarray) -> bool:
    """Whether two elements of ``arr`` may share memory (a stride-0 or
    otherwise overlapping view).  Sufficient test: sorted by stride, each
    stride must step over the whole extent of the smaller ones; a layout
    that fails it is treated as overlapping."""
    if arr.size <= 1:
        return False
    dims = sorted((abs(st), n) for st, n in zip(arr.strides, arr.shape) if n > 1)
    reach = arr.itemsize
    for stride, n in dims:
        if stride < reach:
            return True
        reach = stride * (n - 1) + reach
    return False


class Binder:
    """Checks call arguments against a Program and prepares the C call."""

    def __init__(self, program: Program):
        self.program = program
        p = program
        self.inputs = {t.name: t for t in p.arguments}
        self.outputs = p.outputs
        self.temps = tuple(t for t in p.tensors if t.role == "temp")
        ctx = p.context
        self.out_shapes = [
            [param_function(pw_aff_to_expr(d, ctx), p.params) for d in t.shape]
            for t in self.outputs]
        self.in_shapes = {
            t.name: [param_function(pw_aff_to_expr(d, ctx), p.params) for d in t.shape]
            for t in p.arguments}
        self.temp_shapes = [
            [param_function(pw_aff_to_expr(d, ctx), p.params) for d in t.shape]
            for t in self.temps]
        self.gathers, self.gather_casts = self._direct_gathers(p)
        #: per signature entry: the input's dtype, or None for a size argument
        self.signature_kinds = tuple(
            np.dtype(self.inputs[name].dtype) if name in self.inputs else None
            for name in p.signature)
        self.work = self._work_estimate(p)
        self.partial = self._partially_written(p)
        self.check = None
        if p.preconditions is not None and not p.preconditions.is_equal(ctx.params()):
            self.check = param_function(set_to_condition(p.preconditions, ctx), p.params)

    @staticmethod
    def _partially_written(p: Program) -> frozenset[str]:
        """Outputs that some parameter values leave partly unwritten (a
        declared shape larger than the statements' ranges): those are
        allocated zero-filled instead of with uninitialised memory."""
        from .bounds import tensor_box
        partial = set()
        ctx = p.parameter_domain()
        for t in p.outputs:
            box = tensor_box(p, t.name)
            for s in p.statements:
                if s.tensor == t.name:
                    box = box.subtract(s.write.intersect_domain(s.domain).range())
            if not box.intersect_params(ctx).is_empty():
                partial.add(t.name)
        return frozenset(partial)

    def all_empty(self, pvals: list[int]) -> bool:
        """Whether every statement domain is empty at these parameter
        values (exact, with isl; called only when the work estimate is 0)."""
        p = self.program
        for s in p.statements:
            dom = s.domain
            for name, v in zip(p.params, pvals):
                pos = dom.find_dim_by_name(isl.dim_type.param, name)
                if pos >= 0:
                    dom = dom.fix_val(isl.dim_type.param, pos,
                                      isl.Val.int_from_si(dom.get_ctx(), v))
            if not dom.is_empty():
                return False
        return True

    @staticmethod
    def _work_estimate(p: Program):
        """A function of the sizes giving the number of statement instances
        (each domain's bounding box), to run tiny problems on one thread."""
        terms = []
        for s in p.statements:
            if s.domain.is_empty():
                continue
            dims = []
            for i in range(s.domain.dim(isl.dim_type.set)):
                ext = s.domain.dim_max(i).sub(s.domain.dim_min(i))
                try:
                    dims.append(param_function(pw_aff_to_expr(ext, p.context), p.params))
                except isl.Error:      # not expressible: assume the work is large
                    dims = [lambda *_: SERIAL_WORK]
                    break
            terms.append(dims)

        def work(*pvals) -> int:
            total = 0
            for dims in terms:
                n = 1
                for fn in dims:
                    try:
                        n *= max(0, fn(*pvals) + 1)
                    except (TypeError, ZeroDivisionError):
                        n = 0          # an empty domain at these sizes (isl gives NaN)
                total += n
            return total
        return work

    @staticmethod
    def _direct_gathers(p: Program) -> tuple[list[tuple[str, str, int]], dict]:
        """``(index tensor, gathered tensor, dim)`` for every read whose index
        ``d`` is directly a read of an input index tensor (``LUT(I(b), d)``),
        or an integer conversion of one (TC's ``L(m, int32(Codes(n, m)))``);
        and for each, the conversions its values go through (``None``: none)."""
        found: list[tuple[str, str, int]] = []
        casts: dict[tuple[str, str, int], set] = {}
        for s in p.statements:
            for acc in E.accesses(s.rhs):
                for d, idx in enumerate(acc.indices):
                    cast = None
                    if isinstance(idx, E.Call) and idx.fn.startswith("cast_") \
                            and "float" not in idx.fn:
                        cast, idx = idx.fn[5:], idx.args[0]
                    if isinstance(idx, E.Access) and p.tensor(idx.tensor).role == "input":
                        item = (idx.tensor, acc.tensor, d)
                        if item not in found:
                            found.append(item)
                        casts.setdefault(item, set()).add(cast)
        return found, casts

    def _check_gathers(self, arrays: dict, pvals: list[int], shapes: dict) -> None:
        """Index tensors must hold valid indices: a bad one would make the
        generated code read out of bounds, so it is refused here."""
        for index, target, d in self.gathers:
            if arrays[index].size == 0:
                continue
            extent = shapes[target][d]
            for cast in sorted(self.gather_casts[(index, target, d)], key=str):
                arr = arrays[index]
                if cast is not None:
                    with np.errstate(invalid="ignore"):     # NaN, inf: some integer
                        arr = arr.astype(cast)
                lo, hi = int(arr.min()), int(arr.max())
                if lo < 0 or hi >= extent:
                    bad = lo if lo < 0 else hi
                    valid = f"0..{extent - 1}" if extent else "none: its extent is 0"
                    how = f" (its value converted to {cast})" if cast is not None else ""
                    raise BindingError(f"argument {index}: holds index {bad}{how}, but it "
                                       f"indexes dimension {d} of {target}, whose valid "
                                       f"indices are {valid}")

    def _count(self, args: tuple) -> None:
        p = self.program
        if len(args) != len(p.signature):
            raise BindingError(
                f"{p.name}() takes {len(p.signature)} argument(s) "
                f"({', '.join(p.signature)}), got {len(args)}")

    def bind(self, args: tuple, out) -> tuple[list[int], list[np.ndarray], list, list]:
        """Returns (parameter values, buffers in tensor order (local tensors
        left out), results to return, (temporary, destination) pairs to copy
        back)."""
        p = self.program
        self._count(args)
        values: dict[str, int] = {}
        where: dict[str, str] = {}
        arrays: dict[str, np.ndarray] = {}
        for name, arg in zip(p.signature, args):
            if name in self.inputs:
                arrays[name] = self._array(name, arg)
            else:
                values[name] = self._size(name, arg)
                where[name] = f"argument {name}"
        pvals, shapes = self._sizes({n: a.shape for n, a in arrays.items()}, values, where)
        if self.gathers:
            all_shapes = {n: a.shape for n, a in arrays.items()}
            all_shapes.update({t.name: sh for t, sh in zip(self.outputs, shapes)})
            self._check_gathers(arrays, pvals, all_shapes)
        results, copies = self._outputs(shapes, out, arrays)
        inplace = self._in_place(args, arrays)
        # local tensors (promoted buffers) live in the generated code: no argument
        tensors = [t for t in p.tensors if t.role != "local"]
        buffers = [arrays[t.name] if t.role in ("input", "inout") else None
                   for t in tensors]
        k = j = 0
        for i, t in enumerate(tensors):
            if t.role == "output":
                buffers[i] = copies[k][0] if copies[k] else results[k]
                k += 1
            elif t.role == "temp":
                shape = tuple(max(0, int(fn(*pvals))) for fn in self.temp_shapes[j])
                buffers[i] = np.empty(shape, dtype=t.dtype)
                j += 1
        return pvals, buffers, results, [c for c in copies if c] + inplace

    def _sizes(self, in_shapes: dict[str, tuple], values: dict[str, int],
               where: dict[str, str]) -> tuple[list[int], list[tuple[int, ...]]]:
        """The parameter values (``values``: those given as size arguments,
        the rest read from the inputs' shapes ``in_shapes``) and the
        outputs' shapes; checks that every input's shape agrees with the
        sizes and that the sizes meet the preconditions
        (:class:`~polyc.errors.ShapeError` naming the culprit)."""
        p = self.program
        for fixed, v in p.fixed_sizes.items():
            if fixed in values and values[fixed] != v:
                raise ShapeError(f"size {fixed} is {values[fixed]}, but this kernel was "
                                 f"specialised for {fixed}={v}")
        for param, src in p.param_bindings.items():
            if src is None or param in values:
                continue
            tname, dim = src
            values[param] = int(in_shapes[tname][dim])
            where[param] = f"{tname}.shape[{dim}]"
        pvals = [values[q] for q in p.params]
        # every input dimension must agree with the sizes
        for name, shape in in_shapes.items():
            for d, fn in enumerate(self.in_shapes[name]):
                want = fn(*pvals)
                if shape[d] != want:
                    culprit = next((q for q, s in p.param_bindings.items()
                                    if s == (name, d)), None)
                    declared = p.tensor(name).shape[d]
                    why = "" if culprit else " (declared so)" if declared.is_cst() else \
                        " (from " + ", ".join(f"{q}={values[q]} set by {where[q]}"
                                              for q in p.params) + ")"
                    raise ShapeError(f"argument {name}: dimension {d} has extent "
                                     f"{shape[d]}, expected {want}{why}")
        if self.check is not None and not self.check(*pvals):
            raise ShapeError(self._precondition_message(values, where))
        shapes = [tuple(int(fn(*pvals)) for fn in fns) for fns in self.out_shapes]
        if any(x < 0 for s in shapes for x in s):
            raise ShapeError(f"sizes {values} give a negative output extent {shapes}")
        return pvals, shapes

    def bind_shapes(self, args: tuple) -> tuple[list[int], list[tuple[int, ...]]]:
        """For arguments whose tensors live elsewhere (on a GPU): each tensor
        argument given as ``(shape, dtype)``, each size as an integer.
        Checks dtypes, ranks, shapes and preconditions as :meth:`bind` does;
        returns the parameter values and the outputs' shapes."""
        p = self.program
        self._count(args)
        values: dict[str, int] = {}
        where: dict[str, str] = {}
        in_shapes: dict[str, tuple] = {}
        for name, arg in zip(p.signature, args):
            if name not in self.inputs:
                values[name] = self._size(name, arg)
                where[name] = f"argument {name}"
                continue
            t = self.inputs[name]
            shape, dtype = arg
            if np.dtype(dtype) != np.dtype(t.dtype):
                raise DTypeError(f"argument {name}: expected dtype {t.dtype}, got "
                                 f"{_dtype_text(np.dtype(dtype))}")
            if len(shape) != t.ndim:
                raise BindingError(f"argument {name}: expected {t.ndim} dimension(s), "
                                   f"got {len(shape)} (shape {tuple(shape)})")
            in_shapes[name] = tuple(int(x) for x in shape)
        return self._sizes(in_shapes, values, where)

    def _in_place(self, args: tuple, arrays: dict) -> list:
        """Checks the in-place (``inout``) arguments, all before anything is
        written: each must be writable and share memory with no other
        in-place argument; an input that shares memory with one is copied
        first (it is read as it was at the call).  Returns the (contiguous
        temporary, caller's array) pairs to copy back after the call, for
        in-place arrays that are not C-contiguous and aligned."""
        p = self.program
        given = dict(zip(p.signature, args))
        inout = [t.name for t in p.tensors if t.role == "inout"]
        back = []
        for k, name in enumerate(inout):
            arg = given[name]
            if isinstance(arg, np.ndarray) and not arg.flags.writeable:
                raise BindingError(f"argument {name}: the kernel updates it in place, but "
                                   "the array is read-only")
            if _self_overlapping(arrays[name]):
                raise BindingError(f"argument {name}: its elements overlap in memory, and "
                                   "the kernel updates it in place")
            for other in inout[:k]:
                if np.may_share_memory(given[other], arg):
                    raise BindingError(f"arguments {other} and {name} share memory, and the "
                                       "kernel updates both in place; pass distinct arrays")
            for other, a in list(arrays.items()):
                if (other not in inout and isinstance(given[other], np.ndarray)
                        and np.may_share_memory(given[other], arg)):
                    arrays[other] = a.copy()
            if arrays[name] is not arg:           # a contiguous copy was made
                back.append((arrays[name], arg))
        return back

    def _array(self, name: str, arg) -> np.ndarray:
        t = self.inputs[name]
        if isinstance(arg, np.generic):
            arg = np.asarray(arg)          # a numpy scalar: checked as a 0-d array
        elif (t.ndim == 0 and isinstance(arg, (int, float))
                and not isinstance(arg, bool)):
            return self._python_scalar(name, t.dtype, arg)
        if isinstance(arg, np.ma.MaskedArray):
            raise BindingError(f"argument {name}: masked arrays are not supported (the mask "
                               "would be ignored); pass arr.filled(value) or arr.data")
        if not isinstance(arg, np.ndarray):
            want = (f"a number or a 0-d numpy.ndarray of {t.dtype}" if t.ndim == 0 else
                    f"a numpy.ndarray of {t.dtype} with {t.ndim} dimension(s)")
            raise BindingError(f"argument {name}: expected {want}, got {type(arg).__name__}")
        if arg.dtype != np.dtype(t.dtype):
            raise DTypeError(f"argument {name}: expected dtype {t.dtype}, got "
                             f"{_dtype_text(arg.dtype)} (convert with .astype('{t.dtype}'))")
        if arg.ndim != t.ndim:
            raise BindingError(f"argument {name}: expected {t.ndim} dimension(s), "
                               f"got {arg.ndim} (shape {arg.shape})")
        if not (arg.flags.c_contiguous and arg.flags.aligned):
            arg = np.ascontiguousarray(arg)
        return arg

    @staticmethod
    def _python_scalar(name: str, dtype: str, value) -> np.ndarray:
        """A Python int or float for a rank-0 tensor: converted when the
        element type represents it (no wrap-around, no silent truncation)."""
        dt = np.dtype(dtype)
        if dt.kind in "iu" and isinstance(value, float):
            raise DTypeError(f"argument {name}: expected an integer for {dtype}, got the "
                             f"float {value!r}")
        try:
            with np.errstate(over="raise"):
                arr = np.asarray(value, dtype=dt)
        except (OverflowError, FloatingPointError):
            raise DTypeError(f"argument {name}: {value!r} cannot be represented in "
                             f"{dtype}") from None
        if dt.kind == "f" and not np.isfinite(arr) and np.isfinite(float(value)):
            raise DTypeError(f"argument {name}: {value!r} overflows {dtype}")
        return arr

    @staticmethod
    def _size(name: str, arg) -> int:
        if isinstance(arg, np.ndarray) and arg.ndim == 0 and arg.dtype.kind in "iu":
            arg = arg[()]                  # a 0-d integer array, as TC's callers pass one
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, np.integer)):
            got = (f"a {arg.dtype} array of shape {arg.shape}" if isinstance(arg, np.ndarray)
                   else type(arg).__name__)
            raise BindingError(f"argument {name}: expected an integer size (a Python or "
                               f"numpy integer, or a 0-d integer array), got {got}")
        if int(arg) < 0:
            raise ShapeError(f"argument {name}: size must be >= 0, got {int(arg)}")
        if int(arg) > _INT64_MAX:
            raise ShapeError(f"argument {name}: size {int(arg)} does not fit in 64 bits")
        return int(arg)

    def _outputs(self, shapes, out, arrays):
        outs = self.outputs
        if out is None:
            try:
                return ([(output_pool.zeros if t.name in self.partial else output_pool.empty)(
                    s, t.dtype) for s, t in zip(shapes, outs)], [None] * len(outs))
            except ValueError as err:          # "array is too big"
                raise ShapeError(f"the outputs' shapes {shapes} cannot be allocated: "
                                 f"{err}") from None
        if isinstance(out, tuple) or (isinstance(out, list) and out
                                      and all(isinstance(x, np.ndarray) for x in out)):
            given = tuple(out)           # one array per output (a list of arrays too)
        else:
            given = (out,)
        if len(given) != len(outs):
            raise BindingError(f"out: expected {len(outs)} array(s) "
                               f"({', '.join(t.name for t in outs)}), got {len(given)}")
        results, copies = [], []
        for arr, shape, t in zip(given, shapes, outs):
            if isinstance(arr, np.ma.MaskedArray):
                raise BindingError(f"out {t.name}: masked arrays are not supported")
            if not isinstance(arr, np.ndarray):
                raise BindingError(f"out {t.name}: expected a numpy.ndarray, "
                                   f"got {type(arr).__name__}")
            if arr.dtype != np.dtype(t.dtype):
                raise DTypeError(f"out {t.name}: expected dtype {t.dtype}, got "
                                 f"{_dtype_text(arr.dtype)}")
            if arr.shape != shape:
                raise ShapeError(f"out {t.name}: expected shape {shape}, got {arr.shape}")
            if not arr.flags.writeable:
                raise BindingError(f"out {t.name}: array is read-only")
            if _self_overlapping(arr):
                raise BindingError(f"out {t.name}: its elements overlap in memory (strides "
                                   f"{arr.strides} for shape {arr.shape}); pass an array "
                                   "whose elements are distinct")
            for other, prev in zip(outs, results):
                if _overlap(prev, arr):
                    raise BindingError(f"out {t.name} and out {other.name} share memory; "
                                       "each output needs its own array")
            for name, a in list(arrays.items()):
                if np.may_share_memory(a, arr):
                    arrays[name] = a.copy()
            results.append(arr)
            zero = t.name in self.partial     # as a fresh output would be
            if arr.flags.c_contiguous and arr.flags.aligned:
                if zero:
                    arr.fill(0)
                copies.append(None)
            else:
                copies.append(((np.zeros if zero else np.empty)(shape, dtype=t.dtype), arr))
        return results, copies

    def _precondition_message(self, values: dict[str, int], where=None) -> str:
        import islpy as isl

        from .bounds import out_of_bounds
        where = where or {}
        sizes = ", ".join(f"{k}={v}" + (f" ({where[k]})" if k in where else "")
                          for k, v in values.items())
        ctx = self.program.context.params()
        for oob in out_of_bounds(self.program):
            pt = oob.params
            for i, name in enumerate(self.program.params):
                val = isl.Val.int_from_si(pt.get_ctx(), values[name])
                pt = pt.fix_val(isl.dim_type.param, i, val)
            if not pt.is_empty():
                what = oob.statement.text or oob.statement.name
                if ctx.is_subset(oob.params):
                    return (f"statement '{what}' reads or writes tensor {oob.tensor} out of "
                            "bounds whatever the sizes are, so no call can succeed; check "
                            "the definition's constant sizes and where ranges")
                return (f"sizes {sizes} make statement '{what}' read or write tensor "
                        f"{oob.tensor} out of bounds; the kernel needs sizes outside "
                        f"{oob.params}")
        return f"sizes {sizes} violate the kernel's in-bounds conditions"
