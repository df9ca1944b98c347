"""What :func:`polyc.tune.tune` tunes: the program of TC source, of an
einsum string, of a compiled kernel or an ``ir.Program``, exactly as
``polyc.compile``, ``polyc.einsum`` or the kernel compiles it, so that the
record it writes is the one their compile looks up."""

from __future__ import annotations

import os
import re

from ..errors import BindingError, ShapeError
from .sizes import _size_value, resolve_program

#: An einsum subscript string (numpy's grammar): labels, ',', '...', '->'.
_EINSUM = re.compile(r"[\sA-Za-z.,]*(->[\sA-Za-z.]*)?")


def tuned_program(target, name, sizes_or_classes, dtype=None):
    """``(program, sizes_or_classes)`` to tune.  TC source is lowered with
    ``dtype`` (``polyc.compile(dtype=)``), and a definition whose indices
    scale by a size (``h*S + kh``, which ``polyc.compile`` specialises per
    value of ``S``) with the value the sizes give that size.  An einsum
    string is lowered as ``polyc.einsum`` lowers it for operands of
    ``dtype`` (default float64) at those sizes, and sizes given per label
    (``{"i": 512}``) become its parameters' (``d_i``).  Raises
    :class:`BindingError` for sizes that lack a needed value or give a
    specialised size several values, ``dtype`` with a kernel or program,
    :class:`~polyc.errors.EinsumError` for a malformed einsum."""
    if not isinstance(target, str):
        if dtype is not None:
            raise BindingError("polyc.tune: dtype= applies to TC source or an einsum "
                               "string; a kernel or program has its types")
        program = resolve_program(target, name)
        return program, _with_extents(program, sizes_or_classes)
    if "(" not in target and _EINSUM.fullmatch(target):
        return _einsum(target, sizes_or_classes, dtype)
    from ..api import program
    from ..frontend import tc
    module = tc.require_definitions(tc.parse(target, "<tc>"))
    defs = [d for d in module.defs if name is None or d.name == name]
    needs = tc.needs_specialization(defs[0]) if len(defs) == 1 else frozenset()
    if not needs:
        if dtype is None:
            return resolve_program(target, name), sizes_or_classes
        return resolve_program(program(target, name, dtype=dtype)), sizes_or_classes
    fixed = {}
    for n in sorted(needs):
        values = {q.get(n) for q in _points(sizes_or_classes)}
        if None in values or not values:
            raise BindingError(f"polyc.tune: {defs[0].name} scales an index by size {n} "
                               f"(a kernel per value of {n}): give {n} in the sizes")
        if len(values) > 1:
            raise BindingError(f"polyc.tune: {defs[0].name} is compiled once per value of "
                               f"{n}; tune each value on its own, not {sorted(values)}")
        fixed[n] = _size_value(n, values.pop())
    return program(target, defs[0].name, sizes=fixed, dtype=dtype), sizes_or_classes


def _with_extents(program, sizes_or_classes):
    """``sizes_or_classes`` with each size dict completed by
    :func:`fill_extents` (the same structure; other values as given)."""
    def fill(q):
        return fill_extents(program, q) if isinstance(q, dict) else q
    if isinstance(sizes_or_classes, dict) and sizes_or_classes and all(
            isinstance(v, (dict, list)) for v in sizes_or_classes.values()):
        return {k: fill(v) if isinstance(v, dict) else [fill(q) for q in v]
                for k, v in sizes_or_classes.items()}
    if isinstance(sizes_or_classes, (list, tuple)):
        return [fill(q) for q in sizes_or_classes]
    return fill(sizes_or_classes)


def fill_extents(program, sizes: dict) -> dict:
    """``sizes`` with the extents a loop program names after its arrays
    (``B_dim0``: ``B.shape[0]``, where the function never unpacks it) that
    it lacks set to the smallest the program accepts with the other sizes:
    arrays as large as the loops access.  ``polyc.tune(kernel, {"n": 512,
    "m": 512})`` of ``C[i, j] = A[i, j] + B[i, j]`` with ``n, m = A.shape``
    was refused for lacking ``B_dim0, B_dim1, C_dim0, C_dim1``.  Sizes that
    are not integers, or a program that accepts no such values, are left to
    :func:`polyc.tune.sizes.sizes_list` to refuse."""
    import islpy as isl
    auto = [p for p, b in program.param_bindings.items()
            if p not in sizes and p not in program.fixed_sizes and b is not None
            and p == f"{b[0]}_dim{b[1]}"]
    if not auto or any(p not in sizes and p not in auto for p in program.params if
                       p not in program.fixed_sizes):
        return sizes
    given = {**program.fixed_sizes, **sizes}
    import numpy as np
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
               for p, v in given.items() if p in program.params):
        return sizes
    if program.preconditions is None:       # (a program lowered from a file has none yet)
        from ..bounds import preconditions
        program = program.replace(preconditions=preconditions(program))
    dom = program.parameter_domain()
    for p, v in given.items():
        i = dom.find_dim_by_name(isl.dim_type.param, p)
        if i >= 0:
            dom = dom.fix_val(isl.dim_type.param, i,
                              isl.Val.int_from_si(dom.get_ctx(), int(v)))
    for p in auto:
        i = dom.find_dim_by_name(isl.dim_type.param, p)
        dom = dom.move_dims(isl.dim_type.set, dom.dim(isl.dim_type.set), isl.dim_type.param, i, 1)
    least = dom.lexmin()
    if least.is_empty():
        return sizes
    pt = least.sample_point()
    return {**sizes, **{p: int(pt.get_coordinate_val(isl.dim_type.set, j).to_python())
                        for j, p in enumerate(auto)}}


def _points(sizes_or_classes) -> list[dict]:
    """Every size dict of a dict, a list of them or a dict of shape classes."""
    if isinstance(sizes_or_classes, dict) and sizes_or_classes and all(
            isinstance(v, (dict, list)) for v in sizes_or_classes.values()):
        out = [q for v in sizes_or_classes.values() for q in ([v] if isinstance(v, dict)
                                                               else v)]
    elif isinstance(sizes_or_classes, (list, tuple)):
        out = list(sizes_or_classes)
    else:
        out = [sizes_or_classes]
    return [q for q in out if isinstance(q, dict)]


def _einsum(subscripts: str, sizes_or_classes, dtype):
    import numpy as np

    from ..frontend.einsum import lower, parse
    if "..." in subscripts:
        raise BindingError(f"polyc.tune: einsum {subscripts!r}: name the dimensions of "
                           f"'...' with labels to tune it")
    operands = [op.replace(" ", "") for op in subscripts.split("->")[0].split(",")]
    labels = sorted({c for op in operands for c in op})
    points = _points(sizes_or_classes)

    def value(q, lab):
        return q.get(lab, q.get(f"d_{lab}"))
    missing = [lab for lab in labels if not points or value(points[0], lab) is None]
    if missing:
        raise BindingError(f"polyc.tune: einsum {subscripts!r}: give a size per label "
                           f"(e.g. {{{', '.join(repr(x) + ': 512' for x in labels)}}}); "
                           f"missing {', '.join(missing)}")
    shapes = tuple(tuple(_size_value(lab, value(points[0], lab)) for lab in op)
                   for op in operands)
    spec = parse(subscripts, shapes)
    dt = np.dtype(dtype if dtype is not None else "float64").name
    program = lower(spec.with_dtypes([dt] * len(operands), dt))

    def renamed(q):
        return {(f"d_{k}" if k in labels else k): v for k, v in q.items()}
    if isinstance(sizes_or_classes, dict) and sizes_or_classes and all(
            isinstance(v, (dict, list)) for v in sizes_or_classes.values()):
        def text(t):        # a class over the labels ("i = 1") is over their parameters
            return re.sub(r"\b([A-Za-z])\b",
                          lambda m: f"d_{m[1]}" if m[1] in labels else m[1], t)
        return program, {text(t): renamed(v) if isinstance(v, dict) else [renamed(q) for q in v]
                         for t, v in sizes_or_classes.items()}
    if isinstance(sizes_or_classes, (list, tuple)):
        return program, [renamed(q) if isinstance(q, dict) else q for q in sizes_or_classes]
    return program, renamed(sizes_or_classes) if isinstance(sizes_or_classes, dict) \
        else sizes_or_classes


def check_memory(program, sizes: list[dict]) -> None:
    """Raise :class:`ShapeError` when the tensors of ``program`` at one of the
    tuning ``sizes`` cannot be held twice (the seeded inputs and the
    reference's outputs, besides each candidate's own) in this machine's
    memory: numpy's bare MemoryError came out of the first check."""
    from .classes import footprint
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):       # not a POSIX system
        return
    for s in sizes:
        need = footprint(program, {**program.fixed_sizes, **s})
        if 2 * need > total:
            raise ShapeError(f"polyc.tune: the tensors of {program.name} at {s} take "
                             f"{need / 2**30:.1f} GiB; a session holds them at least twice, "
                             f"more than this machine's {total / 2**30:.1f} GiB: tune at "
                             f"smaller sizes")
