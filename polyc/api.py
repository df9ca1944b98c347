"""The user API: :func:`compile`, :func:`einsum`, :func:`einsum_path`, :class:`Kernel`.

``polyc.compile(tc_source)`` parses Tensor Comprehensions source, lowers each
definition to an ``ir.Program`` and compiles it through
:func:`polyc.pipeline.compile_program`; ``polyc.einsum`` is numpy-compatible
(see :mod:`polyc.einsum_call`), and ``polyc.einsum_path`` shows the pairwise
contractions it takes with ``optimize=`` (see :mod:`polyc.einsum_plan`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from .config import Config, config_or_env
from .einsum_call import einsum
from .einsum_plan import einsum_path
from .errors import BindingError, RecipeMismatchError, ScheduleError, UnsupportedError
from .frontend import tc
from .pipeline import compile_program
from .runtime import Kernel

__all__ = ["compile", "einsum", "einsum_path", "Kernel", "SpecializingKernel", "lower_def",
           "program"]

_FLOAT_TYPES = ("float", "double", "float32", "float64", "half", "float16", "bfloat16")


def _retype(defn, dtype: str | None):
    """``defn`` with every floating-point argument type replaced by
    ``dtype`` (``--dtype`` of the CLI); integer (index) types are kept."""
    if dtype is None:
        return defn
    dtype = _float_dtype(dtype)
    params = tuple(replace(p, type=replace(p.type, scalar=dtype))
                   if p.type.scalar in _FLOAT_TYPES else p for p in defn.params)
    return replace(defn, params=params)


def _float_dtype(dtype) -> str:
    """The name of ``dtype``: a name (numpy's, or TC's ``float``, ``double``,
    ``half``) or anything ``numpy.dtype`` reads (``np.float64``); raises
    :class:`UnsupportedError` unless it is float32, float64, float16 or
    bfloat16."""
    name = {"float": "float32", "double": "float64", "half": "float16"}.get(dtype, dtype) \
        if isinstance(dtype, str) else None
    if name is None:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = None
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise UnsupportedError(f"dtype {dtype!r}: choose float32, float64, float16 or bfloat16")
    return name


def lower_def(defn, fixed_sizes: Mapping[str, int] | None = None, *,
              dtype: str | None = None, source: str = ""):
    """Lower one parsed TC definition to an ``ir.Program``."""
    return tc.lower(_retype(defn, dtype), fixed_sizes or {}, source=source)


def program(source: str, name: str | None = None, *, dtype: str | None = None,
            sizes: Mapping[str, int] | None = None, filename: str = "<tc>"):
    """The ``ir.Program`` of one TC definition (``name``, or the only one):
    what :meth:`polyc.Schedule.from_program` takes.  ``sizes`` fixes size
    parameters to constants (needed for ``h*S + kh`` indices).  Raises
    :class:`~polyc.errors.ParseError` / ``SemanticError`` (``ParseError``
    too for a source without a ``def``) and
    :class:`~polyc.errors.BindingError` for an unknown ``name``."""
    module = tc.require_definitions(tc.parse(source, filename))
    defs = {d.name: d for d in module.defs}
    if name is None:
        if len(defs) != 1:
            raise BindingError(f"the source has {len(defs)} definitions "
                               f"({', '.join(defs)}); name one")
        name = next(iter(defs))
    if name not in defs:
        raise BindingError(f"no definition {name!r}; the source defines {', '.join(defs)}")
    missing = sorted(tc.needs_specialization(defs[name]) - set(sizes or {}))
    if missing:
        raise UnsupportedError(
            f"{name}: its indices multiply by (or divide by) size(s) {', '.join(missing)}, "
            f"which isl needs as constants: pass polyc.program(source, sizes="
            f"{{{', '.join(repr(m) + ': ...' for m in missing)}}})")
    return lower_def(defs[name], sizes, dtype=dtype, source=source)


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
    def schedule(self):
        return self._only().schedule

    def explain(self, json: bool = False):
        return self._only().explain(json=json)

    @property
    def program(self):
        return self._only().program

    def __repr__(self) -> str:
        return f"<polyc.SpecializingKernel {self.name} (specialised on {sorted(self.needs)})>"


def _schedules_by_def(schedule, names: list[str]) -> dict:
    """``schedule`` (a Schedule, a recipe, or a dict def name -> either) as a
    dict by definition name."""
    if schedule is None:
        return {}
    from .schedule.language import Schedule
    if (isinstance(schedule, dict) and "steps" not in schedule and "format" not in schedule
            and not ("auto" in schedule and "auto" not in names)):
        unknown = sorted(set(schedule) - set(names))
        if unknown:
            raise ScheduleError(f"schedule given for {unknown[0]!r}, which is not a "
                                f"definition of this source ({', '.join(names)})")
        return dict(schedule)
    if len(names) != 1:
        if isinstance(schedule, Schedule) and schedule.program.name in names:
            return {schedule.program.name: schedule}
        if not isinstance(schedule, Schedule):
            from .schedule.recipe import load
            data = load(schedule)           # a recipe names the definition it was made for
            if data.get("program") in names:
                return {data["program"]: data}
        raise ScheduleError(f"the source has {len(names)} definitions; pass schedule= as a "
                            f"dict from definition name to schedule or recipe")
    return {names[0]: schedule}


def compile_with_schedule(program, schedule, config: Config):
    """Compile ``program`` under ``schedule``: a :class:`polyc.Schedule` of
    the same program, or a recipe (dict, list of steps, JSON text or file
    path) replayed on it, or an automatic-schedule recipe of
    :func:`polyc.tune` (``{"auto": {option: value}}``: the automatic
    schedule with those ``Config`` options)."""
    from .pipeline import compile_schedule
    from .schedule.language import Schedule
    from .schedule.recipe import program_fingerprint
    if isinstance(schedule, dict) and "auto" in schedule and "steps" not in schedule:
        # polyc.tune's automatic-schedule recipe (TuneResult.recipe): Config options
        from .tune.space import auto_config
        return compile_program(program, auto_config(schedule, config).replace(use_tuned=False))
    if isinstance(schedule, Schedule):
        if program_fingerprint(schedule.base) != program_fingerprint(program):
            raise RecipeMismatchError(f"the schedule was made for program "
                                f"{schedule.base.name!r}, not for this definition "
                                f"{program.name!r}; build it from this kernel's program")
        return compile_schedule(schedule, config)
    return compile_schedule(Schedule.replay(program, schedule), config)


def compile(source: str, *, target: str | None = None, schedule: Any = None,  # noqa: A001
            config: Config | None = None, dtype: str | None = None,
            filename: str = "<tc>") -> Kernel | dict[str, Kernel]:
    """Compile Tensor Comprehensions ``source``.

    Returns a :class:`Kernel` when the source holds one ``def``, else a dict
    name -> Kernel (in source order).  Each kernel is parametric in the sizes:
    one compiled kernel serves every shape.  ``dtype`` ("float32"/"float64")
    overrides the floating-point argument types.  Raises
    :class:`~polyc.errors.ParseError` / ``SemanticError`` (with line, column
    and a caret excerpt; a ``ParseError`` without them when the source holds
    no ``def``), :class:`~polyc.errors.UnsupportedError`,
    :class:`~polyc.errors.CompileError`.

    ``target``: ``"c"`` (C with OpenMP) or ``"cuda"`` (CUDA kernels mapped
    from the schedule tree, :mod:`polyc.schedule.gpu_mapping`; built with
    nvcc and run with pycuda, or on the CPU with ``Config(emulate=True)``);
    ``None`` keeps ``config.target``.  Raises
    :class:`~polyc.errors.PolycError` for another name,
    :class:`~polyc.errors.ToolMissingError` without nvcc or pycuda,
    :class:`~polyc.errors.DeviceError` without a GPU.

    ``schedule``: compile under a user schedule instead of the automatic one:
    a :class:`polyc.Schedule` (e.g. ``kernel.schedule.tile(...)``) or a
    recipe (:meth:`polyc.Schedule.to_recipe`, its JSON text, or a path to a
    ``.json`` file); with several definitions, a dict from definition name
    to schedule.  Raises :class:`~polyc.errors.ScheduleError` for a recipe
    of another program, :class:`~polyc.errors.IllegalScheduleError` for an
    illegal one.
    """
    config = config_or_env(config, "polyc.compile")
    if target is not None:
        config = config.replace(target=target)
    module = tc.require_definitions(tc.parse(source, filename))
    names = [d.name for d in module.defs]
    schedules = _schedules_by_def(schedule, names)
    kernels: dict[str, Any] = {}
    for defn in module.defs:
        needs = tc.needs_specialization(defn)
        if needs:
            if defn.name in schedules:
                raise UnsupportedError(
                    f"{defn.name}: a user schedule needs a definition without size-scaled "
                    f"indices ({', '.join(sorted(needs))}); write those sizes as constants in "
                    f"the source, or build the schedule on polyc.program(source, sizes="
                    f"{{...}}) and compile it with polyc.pipeline.compile_schedule")
            kernels[defn.name] = SpecializingKernel(defn, needs, source, config, dtype)
        elif defn.name in schedules:
            program = lower_def(defn, dtype=dtype, source=source)
            kernels[defn.name] = compile_with_schedule(program, schedules[defn.name], config)
        else:
            kernels[defn.name] = compile_program(
                lower_def(defn, dtype=dtype, source=source), config)
    if len(kernels) == 1:
        return next(iter(kernels.values()))
    return kernels
