"""Kernels with versions by shape class.

A **shape class** is a set of size-parameter values, an ``isl.Set`` with no
set dimensions (``[M, N, K] -> { : M = 1 }``).  A versioned kernel holds one
version per class plus the generic version.  Each version is lowered with
the program's preconditions intersected with its class. isl's scheduler and
AST generator (``isl_ast_build_from_context``) then know the class: they
print no remainder code for sizes it rules out, and a trip count the class
fixes becomes a constant.

The generated C tests the versions' guards in order, most specific first, and
falls back to the generic version (:mod:`polyc.backends.c.versions`). A guard
is the class set printed by isl as a condition on the sizes, simplified under
the program's preconditions (``isl_ast_build_expr_from_set``).

:func:`compile_versioned` builds such a kernel. Its ``versions`` attribute
lists each class with its guard and the reason it exists, and
:meth:`~polyc.runtime.Kernel.explain` prints them. :mod:`polyc.tune` decides
which versions exist (``polyc.tune(..., classes=...)``), and
:func:`polyc.pipeline.compile_programs` builds them from the tuning database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import islpy as isl

from . import bounds
from .config import Config
from .errors import CompileError, ScheduleError
from .ir import Program
from .isl_util import CTX, set_to_condition

#: At most this many class versions besides the generic one.
MAX_VERSIONS = 4
#: The class of every size the program accepts.
ALL = "all"


@dataclass(frozen=True)
class ShapeClass:
    """A set of size-parameter values: ``text`` as the user wrote it (isl
    constraint syntax over the parameters, e.g. ``"M = 1"``, ``"M < 16 and N
    mod 8 = 0"``, or ``"all"``) and ``set``, the ``isl.Set``."""
    text: str
    set: isl.Set

    def contains(self, sizes: dict) -> bool:
        """Whether the parameter values ``sizes`` lie in the class."""
        point = self.set
        for i in range(point.dim(isl.dim_type.param)):
            name = point.get_dim_name(isl.dim_type.param, i)
            if name in sizes:
                point = point.fix_val(isl.dim_type.param, i,
                                      isl.Val.int_from_si(CTX, int(sizes[name])))
        return not point.is_empty()


def shape_class(program: Program, text: str) -> ShapeClass:
    """The class ``text`` over ``program``'s size parameters.  Raises
    :class:`ScheduleError` for a text isl cannot read or that names another
    parameter."""
    text = str(text).strip()
    params = ", ".join(program.params)
    if text == ALL:
        return ShapeClass(ALL, isl.Set(f"[{params}] -> {{ : }}", context=CTX))
    used = set(re.findall(r"[A-Za-z_]\w*", text)) - {"and", "or", "not", "mod",
                                                     "floor", "ceil", "min", "max"}
    unknown = sorted(used - set(program.params))
    if unknown:
        raise ScheduleError(f"shape class {text!r}: {', '.join(unknown)} is not a size "
                            f"parameter of {program.name} ({params})")
    try:
        s = isl.Set(f"[{params}] -> {{ : {text} }}", context=CTX)
    except isl.Error as e:
        raise ScheduleError(f"shape class {text!r} is not an isl constraint over "
                            f"{params}: {e}") from None
    return ShapeClass(text, s)


def ordered(classes: list[ShapeClass]) -> list[ShapeClass]:
    """``classes``, a class before every class that contains it (most
    specific first); otherwise in the given order."""
    def supersets(c):
        return sum(1 for d in classes if d is not c and c.set.is_subset(d.set))
    return sorted(classes, key=lambda c: -supersets(c))


@dataclass
class Version:
    """One version: its class, the recipe it is compiled with (``None``: the
    automatic schedule under the class) and why it exists."""
    cls: ShapeClass
    recipe: dict | None
    why: str = ""


def _lower(program: Program, recipe, config: Config):
    from .pipeline import lower, lower_schedule
    if recipe is None:
        return lower(program, config)
    from .schedule.language import Schedule
    return lower_schedule(Schedule.replay(program, recipe), config)


def compile_versioned(program: Program, versions: list[Version], generic: Version,
                      config: Config | None = None):
    """A kernel of ``program`` with one version per entry of ``versions`` (at
    most :data:`MAX_VERSIONS`; reordered most specific first) and
    ``generic`` for every other size.  A class disjoint from the program's
    preconditions is dropped.  Raises :class:`ScheduleError` for too many
    versions, :class:`CompileError` when the versions' code does not fit one
    kernel, and what the pipeline raises."""
    from polyc.backends.base import backend
    from polyc.backends.c.versions import emit_versions, guard_text

    from .pipeline import _cached_source, _dump, _store_source, lowered_key
    from .runtime import Kernel
    config = (config or Config.from_env()).replace(use_tuned=False)
    if len(versions) > MAX_VERSIONS:
        raise ScheduleError(f"{program.name}: {len(versions)} versions; a kernel carries at "
                            f"most {MAX_VERSIONS} besides the generic one")
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    pre = program.parameter_domain()
    by_class = {v.cls.set.to_str(): v for v in versions}
    kept = []
    for cls in ordered([v.cls for v in versions]):
        narrowed = pre.intersect(cls.set.align_params(pre.get_space()))
        if narrowed.is_empty():
            continue
        kept.append((by_class[cls.set.to_str()], narrowed))
    parts = [(v, program.replace(preconditions=narrowed),
              set_to_condition(narrowed, pre)) for v, narrowed in kept]
    parts.append((generic, program, None))
    from .custom_intrinsics import registry_fingerprint
    spec = json.dumps([[v.cls.text, v.recipe] for v, _, _ in parts], sort_keys=True)
    key = lowered_key(program, config, "versions\0" + spec + registry_fingerprint())
    source = None if config.dump else _cached_source(key, config)
    low_generic = None
    if source is None:
        lowered = [(_lower(p, v.recipe, config), g) for v, p, g in parts]
        low_generic = lowered[-1][0]
        notes = [f"{v.cls.text}: {v.why}" if v.why else v.cls.text for v, _, _ in parts]
        source = emit_versions([(low.program, low.loopnest, g) for low, g in lowered],
                               omp_schedule=config.omp_schedule, notes=notes)
        _store_source(key, source, config)
    _dump(config, "C source", source.text)
    lib = backend("c").build(source.text, config)
    kernel = Kernel(program, source, lib, config, lowered=low_generic,
                    relower=lambda: _lower(program, generic.recipe, config))
    kernel.versions = [{"class": v.cls.text,
                        "guard": guard_text(g) if g is not None else "(otherwise)",
                        "recipe": v.recipe is not None, "why": v.why}
                       for v, _, g in parts]
    if len(kernel.versions) > MAX_VERSIONS + 1:      # pragma: no cover (checked above)
        raise CompileError("too many versions")
    lines = [f"versions by shape class ({len(parts)}, tested in this order):"]
    for k, d in enumerate(kernel.versions):
        lines.append(f"  {k}: {d['class']} [{d['guard']}]"
                     + (f" — {d['why']}" if d["why"] else ""))
    kernel.tuning = "\n".join(lines)
    return kernel
