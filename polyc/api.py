"""The user API: :func:`compile`, :func:`einsum`, :class:`Kernel`.

``polyc.compile(tc_source)`` parses Tensor Comprehensions source, lowers each
definition to an ``ir.Program`` and compiles it through
:func:`polyc.pipeline.compile_program`; ``polyc.einsum`` is numpy-compatible
(see :mod:`polyc.einsum_call`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from .config import Config
from .einsum_call import einsum
from .errors import BindingError, UnsupportedError
from .frontend import tc
from .pipeline import compile_program
from .runtime import Kernel

__all__ = ["compile", "einsum", "Kernel", "SpecializingKernel", "lower_def"]

_FLOAT_TYPES = ("float", "double", "float32", "float64", "half", "float16")


def _retype(defn, dtype: str | None):
    """``defn`` with every floating-point argument type replaced by
    ``dtype`` (``--dtype`` of the CLI); integer (index) types are kept."""
    if dtype is None:
        return defn
    if dtype not in ("float32", "float64"):
        raise UnsupportedError(f"dtype {dtype!r}: choose float32 or float64")
    params = tuple(replace(p, type=replace(p.type, scalar=dtype))
                   if p.type.scalar in _FLOAT_TYPES else p for p in defn.params)
    return replace(defn, params=params)


def lower_def(defn, fixed_sizes: Mapping[str, int] | None = None, *,
              dtype: str | None = None, source: str = ""):
    """Lower one parsed TC definition to an ``ir.Program``."""
    return tc.lower(_retype(defn, dtype), fixed_sizes or {}, source=source)


class SpecializingKernel:
    """A TC definition whose index expressions multiply an index by a size
    (``h*S + kh``): isl needs that size as a constant, so this kernel lowers
    and compiles one specialised :class:`Kernel` per distinct value, on the
    first call that uses it (or through :meth:`specialize`)."""

    def __init__(self, defn, needs: frozenset[str], source: str, config: Config,
                 dtype: str | None = None):
        self.defn, self.needs, self.source_text = defn, needs, source
        self.config, self.dtype = config, dtype
        self._kernels: dict[tuple, Kernel] = {}
        self._where: dict[str, tuple[int, int | None]] = {}
        for pos, p in enumerate(defn.params):
            dims = p.type.dims
            if not dims and p.name in needs:
                self._where.setdefault(p.name, (pos, None))
            for d, dim in enumerate(dims):
                name = getattr(dim, "name", None)
                if name in needs:
                    self._where.setdefault(name, (pos, d))

    @property
    def name(self) -> str:
        return self.defn.name

    def specialize(self, **sizes: int) -> Kernel:
        """The kernel specialised for ``sizes`` (each name in ``self.needs``)."""
        missing = sorted(self.needs - sizes.keys())
        if missing:
            raise BindingError(f"{self.name}: give a value for {', '.join(missing)}")
        key = tuple(sorted((k, int(sizes[k])) for k in self.needs))
        if key not in self._kernels:
            program = lower_def(self.defn, dict(key), dtype=self.dtype, source=self.source_text)
            self._kernels[key] = compile_program(program, self.config)
        return self._kernels[key]

    def __call__(self, *args, out=None):
        sizes = {}
        for name, (pos, dim) in self._where.items():
            if pos >= len(args):
                raise BindingError(f"{self.name}() takes {len(self.defn.params)} arguments, "
                                   f"got {len(args)}")
            a = args[pos]
            try:
                sizes[name] = int(a) if dim is None else int(a.shape[dim])
            except (TypeError, AttributeError, IndexError):
                raise BindingError(f"argument {self.defn.params[pos].name}: cannot read "
                                   f"size {name} from {type(a).__name__}") from None
        return self.specialize(**sizes)(*args, out=out)

    def _only(self) -> Kernel:
        if len(self._kernels) != 1:
            raise BindingError(
                f"{self.name} is compiled per value of {', '.join(sorted(self.needs))}; "
                f"inspect kernel.specialize({', '.join(f'{n}=...' for n in sorted(self.needs))})")
        return next(iter(self._kernels.values()))

    @property
    def source(self) -> str:
        """The C source of the only specialisation compiled so far."""
        return self._only().source

    @property
    def schedule(self) -> str:
        return self._only().schedule

    @property
    def program(self):
        return self._only().program

    def __repr__(self) -> str:
        return f"<polyc.SpecializingKernel {self.name} (specialised on {sorted(self.needs)})>"


def compile(source: str, *, target: str = "c", schedule: Any = None,  # noqa: A001
            config: Config | None = None, dtype: str | None = None,
            filename: str = "<tc>") -> Kernel | dict[str, Kernel]:
    """Compile Tensor Comprehensions ``source``.

    Returns a :class:`Kernel` when the source holds one ``def``, else a dict
    name -> Kernel (in source order).  Each kernel is parametric in the sizes:
    one compiled kernel serves every shape.  ``dtype`` ("float32"/"float64")
    overrides the floating-point argument types.  Raises
    :class:`~polyc.errors.ParseError` / ``SemanticError`` (with line, column
    and a caret excerpt), :class:`~polyc.errors.UnsupportedError`,
    :class:`~polyc.errors.CompileError`.
    """
    if target != "c":
        raise UnsupportedError(f"target {target!r} is not supported yet; use target='c'")
    if schedule is not None:
        raise UnsupportedError("user schedules are not supported yet; pass schedule=None")
    config = config or Config.from_env()
    module = tc.parse(source, filename)
    kernels: dict[str, Any] = {}
    for defn in module.defs:
        needs = tc.needs_specialization(defn)
        if needs:
            kernels[defn.name] = SpecializingKernel(defn, needs, source, config, dtype)
        else:
            kernels[defn.name] = compile_program(
                lower_def(defn, dtype=dtype, source=source), config)
    if len(kernels) == 1:
        return next(iter(kernels.values()))
    return kernels
