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

:func:`polyc.pipeline.compile_versioned` builds such a kernel. Its ``versions`` attribute
lists each class with its guard and the reason it exists, and
:meth:`~polyc.runtime.Kernel.explain` prints them. :mod:`polyc.tune` decides
which versions exist (``polyc.tune(..., classes=...)``), and
:func:`polyc.pipeline.compile_programs` builds them from the tuning database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from .errors import ScheduleError
from .ir import Program
from .isl_util import CTX, param_space

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
        return ShapeClass(ALL, isl.Set.universe(param_space(program.params)))
    used = set(re.findall(r"[A-Za-z_]\w*", text)) - {"and", "or", "not", "mod",
                                                     "floor", "ceil", "min", "max"}
    unknown = sorted(used - set(program.params))
    if unknown:
        raise ScheduleError(f"shape class {text!r}: {', '.join(unknown)} is not a size "
                            f"parameter of {program.name} ({params})")
    try:    # the class is written in isl's own constraint syntax: isl's parser reads it
        s = isl.Set.read_from_str(CTX, "[" + params + "] -> { : " + text + " }")
    except isl.Error as e:
        raise ScheduleError(f"shape class {text!r} is not an isl constraint over "
                            f"{params}: {e}") from None
    return ShapeClass(text, s)


def canonical_text(program: Program, text: str) -> str:
    """The class ``text`` as isl prints its set (coalesced, redundant
    constraints removed): ``"M=1"``, ``" M = 1 "`` and ``"1 = M"`` are all
    ``"M = 1"``, ``"M >= 2 and M < 32"`` is ``"2 <= M <= 31"``.  The tuning
    database keys a class's records by it, so equivalent spellings share
    them; :func:`shape_class` reads it back.  ``"all"`` stays ``"all"``; a
    set isl prints without constraints keeps ``text`` (stripped).  Raises
    :class:`ScheduleError` as :func:`shape_class` does."""
    cls = shape_class(program, text)
    if cls.text == ALL:
        return ALL
    printed = cls.set.coalesce().remove_redundancies().to_str()
    body = printed[printed.index("{") + 1:printed.rindex("}")].strip()
    body = body[1:].strip() if body.startswith(":") else ""
    return body or cls.text


def narrowed(program: Program, cls: ShapeClass) -> Program:
    """``program`` with its preconditions (:func:`polyc.bounds.preconditions`
    when it has none) intersected with ``cls``: the program a class's
    version is tuned as (:mod:`polyc.tune.classes`), replayed on
    (:func:`polyc.tune.use.tuned`) and lowered as
    (:func:`polyc.pipeline.compile_versioned`).  Its parameter domain is
    empty when no size of the class is valid for ``program``."""
    from . import bounds
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    pre = program.parameter_domain()
    return program.replace(preconditions=pre.intersect(cls.set.align_params(pre.get_space())))


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
