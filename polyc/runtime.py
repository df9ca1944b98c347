"""Kernel: a compiled program bound to Python.

Takes the stage objects of one compilation (``ir.Program``, the schedule, the
LoopNest, the C ``Source`` and the loaded library) and exposes a callable:
``kernel(*args, out=None)`` binds numpy arrays to the size parameters and
buffers, checks dtypes, ranks, shape consistency and aliasing, allocates the
outputs and runs the generated code.

Calling convention (documented for users in the README):

* arguments follow ``Program.signature``: input tensors as ``numpy.ndarray``
  of exactly the declared dtype (no implicit casts), scalar size arguments as
  Python ints;
* non-contiguous inputs are copied to C order first (the generated code
  assumes dense row-major buffers);
* outputs are allocated and returned (a tuple when there are several), or
  written into ``out`` (an array, or a tuple with one array per output); a
  non-contiguous ``out`` is computed into a temporary and copied back;
* an input that shares memory with an ``out`` array is copied first, so the
  result is what numpy's copy semantics give;
* inputs are never modified.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import islpy as isl
import numpy as np

from . import expr as E
from .errors import BindingError, DTypeError, ShapeError
from .ir import Program
from .isl_util import pw_aff_to_expr, set_to_condition


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


class Binder:
    """Checks call arguments against a Program and prepares the C call."""

    def __init__(self, program: Program):
        self.program = program
        p = program
        self.inputs = {t.name: t for t in p.inputs}
        self.outputs = p.outputs
        ctx = p.context
        self.out_shapes = [
            [param_function(pw_aff_to_expr(d, ctx), p.params) for d in t.shape]
            for t in self.outputs]
        self.in_shapes = {
            t.name: [param_function(pw_aff_to_expr(d, ctx), p.params) for d in t.shape]
            for t in p.inputs}
        self.gathers = self._direct_gathers(p)
        self.work = self._work_estimate(p)
        self.check = None
        if p.preconditions is not None and not p.preconditions.is_equal(ctx.params()):
            self.check = param_function(set_to_condition(p.preconditions, ctx), p.params)

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
                    dims = [lambda *_: Kernel.SERIAL_WORK]
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
    def _direct_gathers(p: Program) -> list[tuple[str, str, int]]:
        """``(index tensor, gathered tensor, dim)`` for every read whose index
        ``d`` is directly a read of an input index tensor (``LUT(I(b), d)``)."""
        found = []
        for s in p.statements:
            for acc in E.accesses(s.rhs):
                for d, idx in enumerate(acc.indices):
                    if isinstance(idx, E.Access) and p.tensor(idx.tensor).role == "input":
                        item = (idx.tensor, acc.tensor, d)
                        if item not in found:
                            found.append(item)
        return found

    def _check_gathers(self, arrays: dict, pvals: list[int], shapes: dict) -> None:
        """Index tensors must hold valid indices: a bad one would make the
        generated code read out of bounds, so it is refused here."""
        for index, target, d in self.gathers:
            arr = arrays[index]
            if arr.size == 0:
                continue
            extent = shapes[target][d]
            lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= extent:
                bad = lo if lo < 0 else hi
                raise BindingError(f"argument {index}: holds index {bad}, but it indexes "
                                   f"dimension {d} of {target}, whose valid indices are "
                                   f"0..{extent - 1}")

    def bind(self, args: tuple, out) -> tuple[list[int], list[np.ndarray], list, list]:
        """Returns (parameter values, buffers in tensor order, results to
        return, (temporary, destination) pairs to copy back)."""
        p = self.program
        if len(args) != len(p.signature):
            raise BindingError(
                f"{p.name}() takes {len(p.signature)} argument(s) "
                f"({', '.join(p.signature)}), got {len(args)}")
        values: dict[str, int] = {}
        where: dict[str, str] = {}
        arrays: dict[str, np.ndarray] = {}
        for name, arg in zip(p.signature, args):
            if name in self.inputs:
                arrays[name] = self._array(name, arg)
            else:
                values[name] = self._size(name, arg)
                where[name] = f"argument {name}"
        for fixed, v in p.fixed_sizes.items():
            if fixed in values and values[fixed] != v:
                raise ShapeError(f"size {fixed} is {values[fixed]}, but this kernel was "
                                 f"specialised for {fixed}={v}")
        for param, src in p.param_bindings.items():
            if src is None or param in values:
                continue
            tname, dim = src
            values[param] = int(arrays[tname].shape[dim])
            where[param] = f"{tname}.shape[{dim}]"
        pvals = [values[q] for q in p.params]
        # every input dimension must agree with the sizes
        for name, arr in arrays.items():
            for d, fn in enumerate(self.in_shapes[name]):
                want = fn(*pvals)
                if arr.shape[d] != want:
                    culprit = next((q for q, s in p.param_bindings.items()
                                    if s == (name, d)), None)
                    why = "" if culprit else " (from " + ", ".join(
                        f"{q}={values[q]} set by {where[q]}" for q in p.params) + ")"
                    raise ShapeError(f"argument {name}: dimension {d} has extent "
                                     f"{arr.shape[d]}, expected {want}{why}")
        if self.check is not None and not self.check(*pvals):
            raise ShapeError(self._precondition_message(values))
        shapes = [tuple(int(fn(*pvals)) for fn in fns) for fns in self.out_shapes]
        if any(x < 0 for s in shapes for x in s):
            raise ShapeError(f"sizes {values} give a negative output extent {shapes}")
        if self.gathers:
            all_shapes = {n: a.shape for n, a in arrays.items()}
            all_shapes.update({t.name: sh for t, sh in zip(self.outputs, shapes)})
            self._check_gathers(arrays, pvals, all_shapes)
        results, copies = self._outputs(shapes, out, arrays)
        buffers = [arrays[t.name] if t.role == "input" else None for t in p.tensors]
        k = 0
        for i, t in enumerate(p.tensors):
            if t.role == "output":
                buffers[i] = copies[k][0] if copies[k] else results[k]
                k += 1
        return pvals, buffers, results, [c for c in copies if c]

    def _array(self, name: str, arg) -> np.ndarray:
        t = self.inputs[name]
        if t.ndim == 0 and isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return np.asarray(arg, dtype=t.dtype)
        if t.ndim == 0 and isinstance(arg, np.generic):
            arg = np.asarray(arg)          # a numpy scalar: checked as a 0-d array
        if not isinstance(arg, np.ndarray):
            raise BindingError(f"argument {name}: expected a numpy.ndarray of {t.dtype} "
                               f"with {t.ndim} dimension(s), got {type(arg).__name__}")
        if arg.dtype != np.dtype(t.dtype):
            raise DTypeError(f"argument {name}: expected dtype {t.dtype}, got {arg.dtype}"
                             " (convert with .astype)")
        if arg.ndim != t.ndim:
            raise BindingError(f"argument {name}: expected {t.ndim} dimension(s), "
                               f"got {arg.ndim} (shape {arg.shape})")
        if not (arg.flags.c_contiguous and arg.flags.aligned):
            arg = np.ascontiguousarray(arg)
        return arg

    @staticmethod
    def _size(name: str, arg) -> int:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, np.integer)):
            raise BindingError(f"argument {name}: expected an integer size, "
                               f"got {type(arg).__name__}")
        if int(arg) < 0:
            raise ShapeError(f"argument {name}: size must be >= 0, got {int(arg)}")
        return int(arg)

    def _outputs(self, shapes, out, arrays):
        outs = self.outputs
        if out is None:
            return [np.empty(s, dtype=t.dtype) for s, t in zip(shapes, outs)], [None] * len(outs)
        given = out if isinstance(out, tuple) else (out,)
        if len(given) != len(outs):
            raise BindingError(f"out: expected {len(outs)} array(s) "
                               f"({', '.join(t.name for t in outs)}), got {len(given)}")
        results, copies = [], []
        for arr, shape, t in zip(given, shapes, outs):
            if not isinstance(arr, np.ndarray):
                raise BindingError(f"out {t.name}: expected a numpy.ndarray, "
                                   f"got {type(arr).__name__}")
            if arr.dtype != np.dtype(t.dtype):
                raise DTypeError(f"out {t.name}: expected dtype {t.dtype}, got {arr.dtype}")
            if arr.shape != shape:
                raise ShapeError(f"out {t.name}: expected shape {shape}, got {arr.shape}")
            if not arr.flags.writeable:
                raise BindingError(f"out {t.name}: array is read-only")
            for name, a in list(arrays.items()):
                if np.may_share_memory(a, arr):
                    arrays[name] = a.copy()
            results.append(arr)
            if arr.flags.c_contiguous and arr.flags.aligned:
                copies.append(None)
            else:
                copies.append((np.empty(shape, dtype=t.dtype), arr))
        return results, copies

    def _precondition_message(self, values: dict[str, int]) -> str:
        import islpy as isl

        from .bounds import out_of_bounds
        sizes = ", ".join(f"{k}={v}" for k, v in values.items())
        for oob in out_of_bounds(self.program):
            pt = oob.params
            for i, name in enumerate(self.program.params):
                val = isl.Val.int_from_si(pt.get_ctx(), values[name])
                pt = pt.fix_val(isl.dim_type.param, i, val)
            if not pt.is_empty():
                what = oob.statement.text or oob.statement.name
                return (f"sizes {sizes} make statement '{what}' read or write tensor "
                        f"{oob.tensor} out of bounds; the kernel needs sizes outside "
                        f"{oob.params}")
        return f"sizes {sizes} violate the kernel's in-bounds conditions"


class Kernel:
    """A compiled polyc kernel.  Call it with the inputs in signature order.

    Attributes: ``program`` (the ``ir.Program``; ``str()`` prints it),
    ``schedule`` (the isl schedule tree, as text), ``isl_schedule`` (the
    ``isl.Schedule``), ``loopnest``, ``source`` (the C text), ``library``.
    When the C source came from the cache, the schedule and loop nest are
    recomputed (``relower``) the first time they are asked for.
    """

    def __init__(self, program: Program, source, library, config, *, lowered=None,
                 relower=None):
        self.program = program
        self._lowered = lowered
        self._relower = relower
        self._source = source
        self.library = library
        self.config = config
        self.binder = Binder(program)
        self._fn = library.function(source.entry, [ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_int32])
        self._nthreads = int(config.num_threads or 0)

    #: Below this many statement instances a call runs on one thread: the
    #: OpenMP fork/join would cost more than it saves.
    SERIAL_WORK = 1 << 14

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def source(self) -> str:
        return self._source.text

    def _low(self):
        if self._lowered is None:
            self._lowered = self._relower()
        return self._lowered

    @property
    def isl_schedule(self):
        """The checked ``isl.Schedule`` the C code was generated from."""
        return self._low().schedule

    @property
    def loopnest(self):
        return self._low().loopnest

    @property
    def schedule(self) -> str:
        """The schedule tree in isl's notation."""
        return str(self.isl_schedule)

    def __call__(self, *args, out=None):
        pvals, buffers, results, copies = self.binder.bind(args, out)
        params = np.array(pvals or [0], dtype=np.int64)
        ptrs = np.array([b.__array_interface__["data"][0] for b in buffers] or [0],
                        dtype=np.uintp)
        small = self.binder.work(*pvals) < self.SERIAL_WORK
        self._fn(params.ctypes.data, ptrs.ctypes.data, 1 if small else self._nthreads)
        for tmp, dst in copies:
            dst[...] = tmp
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        sig = ", ".join(self.program.signature)
        outs = ", ".join(t.name for t in self.program.outputs)
        return f"<polyc.Kernel {self.name}({sig}) -> ({outs})>"
