"""What a tuning session is given, checked: the program to tune
(:func:`resolve_program`: TC source, an ``ir.Program``, a compiled kernel)
and its sizes (:func:`sizes_list`: one dict per tuning point, every size
parameter an integer in ``[0, 2**63)``, no name the program lacks).  Raises
:class:`~polyc.errors.BindingError` / :class:`~polyc.errors.ShapeError`
with what to change."""

from __future__ import annotations

import islpy as isl
import numpy as np

from ..errors import BindingError, ShapeError
from ..ir import Program
from ..isl_util import param_space


def resolve_program(target, name: str | None = None) -> Program:
    """The program to tune from TC source (``name``: which definition), an
    ``ir.Program``, or a compiled kernel (``polyc.compile``,
    ``@polyc.kernel`` after a call)."""
    if isinstance(target, Program):
        return target
    if isinstance(target, str):
        from ..api import program
        return program(target, name)
    prog = getattr(target, "program", None)
    if isinstance(prog, Program):
        return prog
    hint = ""
    if callable(target) and hasattr(target, "__code__"):    # a plain Python function
        hint = (f"; to tune the loops of {getattr(target, '__name__', 'it')}, decorate it "
                f"with @polyc.kernel and call it once")
    raise BindingError(f"polyc.tune: cannot tune a {type(target).__name__}; pass TC source, "
                       f"an einsum string, a compiled kernel, a @polyc.kernel function "
                       f"after its first call or an ir.Program{hint}")


def sizes_list(program: Program, sizes) -> list[dict]:
    if isinstance(sizes, dict):
        sizes = [sizes]
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise BindingError("polyc.tune: give sizes as a dict of size parameters "
                           "(e.g. {'M': 512, 'N': 512, 'K': 512}) or a list of them")
    params = [p for p in program.params if p not in program.fixed_sizes]
    out = []
    for s in sizes:
        if not isinstance(s, dict):
            raise BindingError(f"polyc.tune: sizes {s!r} is not a dict")
        unknown = [k for k in s if k not in program.params and k not in program.fixed_sizes]
        if unknown:         # (a misspelt size was ignored and the program tuned without it)
            raise BindingError(f"polyc.tune: {', '.join(map(str, unknown))} "
                               f"{'is not a size' if len(unknown) == 1 else 'are not sizes'} "
                               f"of {program.name} (its size parameters are "
                               f"{', '.join(params)})")
        missing = [p for p in params if p not in s]
        # an array's extent (B_dim0) defaults once the unpacked sizes are given
        named = [p for p in missing if not is_extent(program, p)] or missing
        if missing:
            raise BindingError(f"polyc.tune: sizes {s} lack {', '.join(named)} (the program's "
                               f"size parameters are {', '.join(params)}"
                               + ("; array extents default to what the loops access"
                                  if named != missing else "") + ")")
        out.append({p: _size_value(p, s[p]) for p in params})
        _check_not_empty(program, out[-1])
    return out


def _check_not_empty(program: Program, sizes: dict[str, int]) -> None:
    """Raise :class:`~polyc.errors.ShapeError` when no statement of
    ``program`` runs at ``sizes`` (every iteration domain empty: a session
    would time an empty call, i.e. noise)."""
    fixed = {**program.fixed_sizes, **sizes}
    ps = isl.Set.universe(param_space(program.params))
    for k, p in enumerate(program.params):
        if p in fixed:
            ps = ps.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(ps.get_ctx(), int(fixed[p])))
    if program.domain().intersect_params(ps).is_empty():
        raise ShapeError(f"polyc.tune: at sizes {sizes} no statement of {program.name} runs "
                         "(every iteration domain is empty): there is nothing to time; "
                         "give sizes of the calls you want to make fast")


def _size_value(name: str, value) -> int:
    """A size of :func:`sizes_list`: an integer in ``[0, 2**63)``; raises
    :class:`~polyc.errors.BindingError` for another type (``64.5`` was
    truncated), :class:`~polyc.errors.ShapeError` for a negative size or
    one past 64 bits (numpy's ValueError escaped from the inputs)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise BindingError(f"polyc.tune: size {name} must be an integer, got {value!r}")
    if not 0 <= int(value) < 2**63:
        raise ShapeError(f"polyc.tune: size {name} must be in 0..2**63-1, got {int(value)}")
    return int(value)


def is_extent(program: Program, name: str) -> bool:
    """Whether size parameter ``name`` is an array extent a loop program
    names after its array (``B_dim0``: ``B.shape[0]``, never unpacked), which
    :func:`polyc.tune.sources.fill_extents` fills in."""
    b = program.param_bindings.get(name)
    return b is not None and name == f"{b[0]}_dim{b[1]}"
