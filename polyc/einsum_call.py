"""``polyc.einsum``: numpy.einsum's results, computed by a compiled kernel.

Owns the call-time half of the einsum frontend: operand conversion, numpy's
dtype rules (``dtype=``, ``casting=``, ``out=``), and a memo of compiled
kernels keyed by the program's structure and the code-generation options, so
that calls with the same labels, ranks, broadcast pattern and dtypes but other
sizes reuse one parametric kernel.  Takes numpy arrays (anything
``np.asarray`` accepts); builds an :class:`~polyc.frontend.einsum.EinsumSpec`
and a :class:`~polyc.ir.Program` with :mod:`polyc.frontend.einsum` and
compiles it with :func:`polyc.pipeline.compile_program`; returns numpy arrays.
With ``optimize=``, :mod:`polyc.einsum_plan` gives the pairwise contractions
and each runs here as an einsum of its own (its own memoised kernel).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import ir
from .config import Config, config_or_env
from .einsum_plan import ContractionStep, normalize_optimize, plan_for_spec
from .errors import BindingError, DTypeError, EinsumError
from .frontend.einsum import EinsumSpec, lower, parse, subscripts_from_sublists

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")

#: Compiled kernels by ``(spec.key, config)``.  Module-level on
#: purpose (a memo of pure results, not state that changes behaviour); tests
#: read its size to count compilations.
_KERNELS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


def einsum(subscripts: Any, *operands: Any, out: np.ndarray | None = None,
           dtype: Any = None, casting: str = "safe", optimize: Any = False,
           config: Config | None = None, target: str | None = None,
           **unsupported: Any) -> Any:
    """Evaluate the Einstein summation ``subscripts`` on ``operands`` as
    ``numpy.einsum`` does (same subscript grammar, including the interleaved
    ``einsum(op0, sublist0, op1, sublist1, ..., [sublist_out])`` form, same
    result shape and dtype, same errors).

    ``dtype`` forces the computation type (inputs are cast under
    ``casting``, default ``'safe'``); ``out`` receives the result (its shape
    must match, as numpy requires, and the computation type must cast to its
    dtype under ``casting``).  The computation type must be float32,
    float64, int32 or int64.  Returns a new array (a numpy scalar for a 0-d
    result) or ``out``; never a view of an operand.

    ``target``: ``"c"`` or ``"cuda"`` (see :func:`polyc.compile`); ``None``
    keeps ``config.target``.

    ``optimize`` is numpy's: ``False`` (the default, as in numpy) compiles
    the whole call into one loop nest; ``True``, ``'greedy'``, ``'optimal'``,
    ``(name, memory_limit)`` or an explicit ``['einsum_path', (0, 1), ...]``
    contract the operands pairwise along that path (opt_einsum's search, see
    :mod:`polyc.einsum_plan`), each step its own compiled einsum kernel and
    each intermediate allocated by polyc.  A chain such as
    ``"ij,jk,kl->il"`` is O(n^4) as one nest and O(n^3) pairwise: pass
    ``optimize=True`` for three operands or more.

    Raises :class:`~polyc.errors.EinsumError` (a ``ValueError``) where numpy
    raises ``ValueError``, :class:`~polyc.errors.DTypeError` (a
    ``TypeError``) for casts numpy refuses and for unsupported element
    types, :class:`~polyc.errors.BindingError` (a ``TypeError``) for a
    non-array ``out``, a malformed subscript list or an ``optimize`` numpy
    does not understand, and the :class:`~polyc.errors.EinsumPathError`
    classes for paths numpy rejects.
    """
    if unsupported:
        key = next(iter(unsupported))
        if key == "order":
            raise BindingError("polyc.einsum does not support order=: the result is always "
                               "a new C-ordered array (or out=)")
        raise BindingError(f"einsum() got an unexpected keyword argument '{key}'")
    if not isinstance(subscripts, (str, bytes)):
        subscripts, operands = subscripts_from_sublists((subscripts,) + operands)
    if not operands:
        raise EinsumError("must specify the einstein sum subscripts string and at least "
                          "one operand")
    if not isinstance(casting, str):
        raise BindingError(f"casting must be str, not {type(casting).__name__}")
    if casting not in CASTINGS:
        raise EinsumError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', "
                          f"'unsafe' (got {casting!r})")
    if out is not None and not isinstance(out, np.ndarray):
        raise BindingError("keyword parameter out must be an array for einsum")
    opt = normalize_optimize(optimize)
    arrays = [_operand(k, op) for k, op in enumerate(operands)]
    if dtype is not None:
        try:
            dtype = np.dtype(dtype)
        except TypeError as err:           # numpy: "data type 'x' not understood"
            raise DTypeError(str(err)) from None
    spec = _parse(subscripts, tuple(a.shape for a in arrays),
                  None if out is None else out.shape)
    if out is not None and not out.flags.writeable:
        raise EinsumError("operand array with iterator write flag set is read-only")
    compute = _compute_dtype(arrays, out, dtype, casting)
    config = config_or_env(config, "polyc.einsum")
    if target is not None:
        config = config.replace(target=target)
    steps = () if opt.strategy is None else plan_for_spec(
        spec, tuple(a.dtype for a in arrays), opt, compute.name, dtype is not None)
    if len(steps) > 1:
        arrays = _intermediates(steps[:-1], arrays, config)
        spec = _parse(steps[-1].subscripts, tuple(a.shape for a in arrays),
                      None if out is None else out.shape)
    spec = _with_dtype(spec, compute.name)
    kernel = _kernel_for(spec, config)
    inputs = [a.astype(compute, copy=False) for a in arrays]

    if out is None:
        result = kernel(*inputs)
        return result[()] if result.ndim == 0 else result
    if (out.dtype == compute and out.shape == spec.output_shape
            and out.flags.c_contiguous and not any(np.may_share_memory(out, a) for a in arrays)):
        kernel(*inputs, out=out)
        return out
    # out broadcasts the result, has another dtype or layout, or overlaps an input
    np.copyto(out, kernel(*inputs), casting="unsafe")
    return out


def _intermediates(steps: Sequence[ContractionStep], arrays: list[np.ndarray],
                   config: Config) -> list[np.ndarray]:
    """The operands left after ``steps`` (all but a path's last): each
    step's operands replaced by its result, a new array from its kernel."""
    current = list(arrays)
    for step in steps:
        ops = [current[p] for p in step.operands]
        current = [a for p, a in enumerate(current) if p not in step.operands]
        spec = _with_dtype(_parse(step.subscripts, tuple(a.shape for a in ops), None),
                           step.dtype)
        kernel = _kernel_for(spec, config)
        current.append(kernel(*[a.astype(step.dtype, copy=False) for a in ops]))
    return current


def _operand(k: int, op: Any) -> np.ndarray:
    """``np.asarray(op)``, numpy's conversion errors as polyc errors (a
    ragged list is numpy's ValueError text, as an EinsumError)."""
    if isinstance(op, np.ma.MaskedArray):
        raise BindingError(f"operand {k}: masked arrays are not supported (the mask would "
                           "be ignored); pass arr.filled(value) or arr.data")
    try:
        return np.asarray(op)
    except ValueError as err:
        raise EinsumError(str(err)) from None
    except TypeError as err:
        raise BindingError(f"operand {k}: {err}") from None


@functools.lru_cache(maxsize=1024)
def _parse(subscripts: str | bytes, shapes: tuple, out_shape: tuple | None) -> EinsumSpec:
    """:func:`~polyc.frontend.einsum.parse`, remembered: a hot einsum call
    repeats the same subscripts and shapes (errors are not remembered)."""
    return parse(subscripts, shapes, out_shape=out_shape)


@functools.lru_cache(maxsize=1024)
def _with_dtype(spec: EinsumSpec, dtype: str) -> EinsumSpec:
    return spec.with_dtypes([dtype] * spec.nop, dtype)


def _compute_dtype(arrays: list[np.ndarray], out: np.ndarray | None, dtype: Any,
                   casting: str) -> np.dtype:
    """numpy.einsum's computation type: ``dtype``, else the common type of
    the operands and ``out``; checks the casts numpy's iterator checks."""
    if dtype is None:
        compute = np.result_type(*arrays, *([] if out is None else [out]))
    else:
        compute = np.dtype(dtype)
    for k, a in enumerate(arrays):
        if not np.can_cast(a.dtype, compute, casting):
            raise DTypeError(f"Iterator operand {k} dtype could not be cast from "
                             f"{a.dtype!r} to {compute!r} according to the rule '{casting}'")
    if out is not None and not np.can_cast(compute, out.dtype, casting):
        raise DTypeError(f"Iterator requested dtype could not be cast from {compute!r} "
                         f"to {out.dtype!r}, the operand {len(arrays)} dtype, according "
                         f"to the rule '{casting}'")
    if compute.name not in ir.C_TYPES:
        raise DTypeError(
            f"polyc.einsum does not compute in {compute.name}: the computation type must "
            f"be one of {', '.join(ir.C_TYPES)} (pass dtype= or convert the operands "
            "with .astype)")
    return np.dtype(compute.name)  # native byte order


def _kernel_for(spec: EinsumSpec, config: Config):
    """The compiled kernel of ``spec``, compiled once per structure and options."""
    key = (spec.key, config)   # the whole (frozen) config: threads and cache too
    kernel = _KERNELS.get(key)
    if kernel is None:
        from . import pipeline  # a later stage: imported at call time only
        with _LOCK:
            kernel = _KERNELS.get(key)
            if kernel is None:
                kernel = pipeline.compile_program(lower(spec), config)
                _KERNELS[key] = kernel
    return kernel


def clear_kernels() -> None:
    """Forget every memoised kernel (the disk cache is untouched)."""
    with _LOCK:
        _KERNELS.clear()
