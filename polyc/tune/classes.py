"""Shape classes in tuning: which classes, tuning each, and which become
versions of the kernel.

A class is tuned on 1-3 representative sizes, in a session of its own
(:func:`polyc.tune.search.run_session`). Every candidate of that session is
compiled under the program's preconditions intersected with the class, so
its code assumes the class. The generic session's best is measured in the
class session's first batch whatever its rank: this is the neighbour's seed.

The class's best (compiled under the class) is then timed round-robin
against the generic version (the generic best, compiled for every size) at
the class's sizes. The class becomes a version only when it is at least
:data:`VERSION_GAIN` faster. Either way a ``best`` record of the class says
so (``version``, ``vs_generic``, ``why``), and
:func:`polyc.pipeline.compile_programs` builds the versions recorded as
such, at most :data:`polyc.versioned.MAX_VERSIONS`.

:func:`lattice` gives the classes a set of observed sizes falls into: per
size parameter ``P``, one of ``P = 1``, ``2 <= P < T`` or ``P >= T``, and
``P mod V = 0`` when the vector width ``V`` divides every observed value of
the cell. ``T`` is the tile size and ``V`` the vector width in elements (of
the program's narrowest floating-point type).
Where some sizes of a cell with a ``P >= T`` parameter have all their
tensors fit in the L2 cache together and others do not, the fitting ones
form a class of their own, bounded by their largest values (``P <= 96`` for
each such ``P``): the box of those bounds fits in L2 as a whole (a
footprint grows with every size), so every size of the class fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import islpy as isl

from ..errors import BindingError
from ..versioned import (
    ALL,
    MAX_VERSIONS,
    ShapeClass,
    canonical_text,
    narrowed,
    ordered,
    shape_class,
)
from .db import key_info, key_of
from .search import knobs_from_json, run_session
from .sizes import is_extent, sizes_list

#: A class version must be at least this much faster than the generic one.
VERSION_GAIN = 1.10
#: Representative sizes tuned per class.
MAX_SIZES = 3


@dataclass
class ClassOutcome:
    """What tuning a class found: ``text``, its ``sizes``, the class
    session's :class:`~polyc.tune.search.TuneResult` (``result``),
    ``vs_generic`` (time of the class best over the generic version's at
    the class sizes), ``version`` (whether it became one) and ``why``."""
    text: str
    sizes: list
    result: object
    vs_generic: float | None
    version: bool
    why: str

    def describe(self) -> str:
        best = self.result.best.label if self.result is not None else "-"
        rel = f"{1 / self.vs_generic:.2f}x the generic version" if self.vs_generic else "?"
        return f"{'version' if self.version else 'no version'} ({best}; {rel}): {self.why}"

    def to_json(self) -> dict:
        return {"class": self.text, "sizes": self.sizes, "vs_generic": self.vs_generic,
                "version": self.version, "why": self.why,
                "best": self.result.best.label if self.result is not None else None,
                "recipe": self.result.best.recipe if self.result is not None else None}


def requested(program, sizes_or_classes, classes) -> dict[str, list[dict]]:
    """``{class text: [sizes...]}`` when the call asks for classes, else
    ``{}``: a dict whose values are size dicts or lists of them, or
    ``classes="lattice"`` with a list of sizes."""
    if classes == "lattice":
        # checked first: a missing or non-integer size was a bare KeyError or ValueError
        return lattice(program, sizes_list(program, sizes_or_classes))
    if classes is not None:
        raise BindingError(f"classes={classes!r}: pass 'lattice', or give a dict from class "
                           f"to sizes as the second argument")
    if isinstance(sizes_or_classes, dict) and sizes_or_classes and all(
            isinstance(v, (dict, list)) for v in sizes_or_classes.values()):
        out = {}
        for text, pts in sizes_or_classes.items():
            pts = [pts] if isinstance(pts, dict) else list(pts)
            if not 1 <= len(pts) <= MAX_SIZES:
                raise BindingError(f"class {text!r}: give 1 to {MAX_SIZES} representative "
                                   f"sizes, not {len(pts)}")
            cls = shape_class(program, text)
            if text != ALL and _is_empty(program, cls.set):
                # (it was "sizes ... are not in class", as if the sizes were wrong)
                raise BindingError(f"shape class {text!r} is empty: no sizes of "
                                   f"{program.name} satisfy it; give a class that some "
                                   f"sizes satisfy, e.g. 'M = 1' or '2 <= M < 32'")
            for p in pts:
                if not cls.contains(p):
                    raise BindingError(f"sizes {p} are not in class {text!r}")
            same = [t for t in out if canonical_text(program, t) == canonical_text(program,
                                                                                 text)]
            if same:
                raise BindingError(f"classes {same[0]!r} and {text!r} are the same class "
                                   f"({canonical_text(program, text)}); give its sizes once")
            out[text] = pts
        specific = [t for t in out if t != ALL]
        if len(specific) > MAX_VERSIONS:
            raise BindingError(f"{len(specific)} classes; a kernel carries at most "
                               f"{MAX_VERSIONS} versions besides the generic one")
        return out
    return {}


def _is_empty(program, cls) -> bool:
    """Whether no sizes the program admits (its preconditions) lie in ``cls``
    (an isl parameter set)."""
    try:
        return cls.intersect_params(program.parameter_domain()).is_empty()
    except isl.Error:       # spaces isl cannot align: the class alone decides
        return cls.is_empty()


def footprint(program, sizes: dict) -> int:
    """Bytes of every argument and temporary tensor of ``program`` at
    ``sizes`` (local buffers left out)."""
    from ..ir import numpy_dtype
    from ..isl_util import eval_pw_aff
    total = 0
    for t in program.tensors:
        if t.role == "local":
            continue
        n = numpy_dtype(t.dtype).itemsize
        for pa in t.shape:
            n *= max(0, eval_pw_aff(pa, sizes))
        total += n
    return total


def lattice(program, points: list[dict], tile: int = 32, vector: int | None = None,
            l2: int | None = None) -> dict[str, list[dict]]:
    """The lattice classes of ``points`` (see the module docstring), each with
    at most :data:`MAX_SIZES` of its points (smallest, largest, middle);
    the most populated :data:`~polyc.versioned.MAX_VERSIONS` classes.
    ``l2``: the L2 cache size in bytes (default: this machine's,
    :func:`polyc.machine.cache_sizes`)."""
    from ..ir import numpy_dtype
    from ..machine import cache_sizes
    from .model import vector_bytes
    # lanes of the program's narrowest element type (a float64 kernel's
    # are 4 with AVX2, not the 8 of float32 that every program was given)
    dts = [numpy_dtype(t.dtype) for t in program.tensors if t.role != "local"]
    widths = [d.itemsize for d in dts if d.kind == "f"] or [d.itemsize for d in dts]
    vector = vector or max(1, vector_bytes() // min(widths or [4]))
    l2 = l2 or cache_sizes().get(2, 1 << 20)
    every = params = [p for p in program.params if p not in program.fixed_sizes]
    # a loop program's array extents (B_dim0) follow its unpacked sizes: a
    # class over them too only narrowed the guards to arrays as large as the
    # loops access
    params = [p for p in params if not is_extent(program, p)] or params
    cells: dict[tuple, list[dict]] = {}
    for pt in points:
        key = []
        for p in params:
            v = int(pt[p])
            key.append((p, "one" if v == 1 else "small" if v < tile else "large"))
        cells.setdefault(tuple(key), []).append(pt)
    for key, pts in list(cells.items()):
        large = [p for p, cell in key if cell == "large"]
        fit = [q for q in pts if footprint(program, q) <= l2]
        if not large or not fit or len(fit) == len(pts):
            continue
        box = {p: max(int(q[p]) for q in fit) for p in every}
        if footprint(program, box) > l2:
            continue        # the fitting sizes' bounds do not fit together
        cells[key] = [q for q in pts if q not in fit]
        cells[key + (("L2", tuple((p, box[p]) for p in large)),)] = fit
    out: dict[str, list[dict]] = {}
    for key, pts in sorted(cells.items(), key=lambda kv: -len(kv[1]))[:MAX_VERSIONS]:
        parts = []
        for p, cell in key:
            if p == "L2":
                parts += [f"{q} <= {bound}" for q, bound in cell]
            elif cell == "one":
                parts.append(f"{p} = 1")
            elif cell == "small":
                parts.append(f"2 <= {p} < {tile}" if all(q[p] >= 2 for q in pts)
                             else f"{p} < {tile}")
            else:
                parts.append(f"{p} >= {tile}")
            if p != "L2" and cell != "one" and all(int(q[p]) % vector == 0 for q in pts):
                parts.append(f"{p} mod {vector} = 0")
        text = " and ".join(parts) or ALL
        pts = sorted(pts, key=lambda q: tuple(q[p] for p in params))
        reps = [pts[0], pts[-1], pts[len(pts) // 2]]
        out[text] = [dict(t) for t in {tuple(sorted(r.items())): r for r in reps}.values()]
    return out


def tune_classes(program, by_class: dict, generic, budget, ex, db, config, seed, progress):
    """Tune each class of ``by_class`` (most specific first) after the
    generic session ``generic``; returns one :class:`ClassOutcome` each and
    records each class's decision."""
    from .. import bounds
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    classes = ordered([shape_class(program, t) for t in by_class if t != ALL])
    seeds = [knobs_from_json(generic.best.knobs)] if generic.best.knobs else []
    out = []
    for cls in classes:
        sizes = sizes_list(program, by_class[cls.text])
        sub = narrowed(program, cls)
        if sub.parameter_domain().is_empty():
            out.append(ClassOutcome(cls.text, sizes, None, None, False,
                                    "no size in the class is valid for the program"))
            continue
        res = run_session(sub, sizes, budget, ex, None, config, seed, progress, None,
                          shape_class=cls.text, seeds=seeds, label=f"{program.name} [{cls.text}]")
        out.append(_decide(program, sub, cls, sizes, res, generic, ex, db, config, seed))
    return out


def _decide(program, sub, cls: ShapeClass, sizes, res, generic, ex, db, config, seed):
    if res.trials[0].status != "measured":
        why = res.note or "nothing was measured"
        outcome = ClassOutcome(cls.text, sizes, res, None, False, why)
    else:
        m = ex.measure({"program": program, "programs": [program, sub],
                        "recipes": [generic.best.recipe, res.best.recipe], "checked": [0, 1],
                        "config": config, "sizes": sizes, "seed": seed})
        ratio, noise = _ratio(m)
        need = version_gain(noise)
        if ratio is None:
            why = f"the comparison failed: {m['failures']}"
            outcome = ClassOutcome(cls.text, sizes, res, None, False, why)
        elif 1 / ratio >= need:
            outcome = ClassOutcome(cls.text, sizes, res, ratio, True,
                                   f"{1 / ratio:.2f}x the generic version at {sizes}")
        else:
            because = (f"; {100 * noise:.0f}% noise in that comparison"
                       if need > VERSION_GAIN else "")
            outcome = ClassOutcome(cls.text, sizes, res, ratio, False,
                                   f"only {1 / ratio:.2f}x the generic version at {sizes} "
                                   f"(a version needs {need:.2f}x{because})")
    if db is not None and outcome.result is not None and res.trials[0].status == "measured":
        # (a class whose session measured nothing decided nothing: no record,
        # which would hide an earlier decision)
        info = key_info(program, config, canonical_text(program, cls.text))
        best = res.best if res is not None else None
        # keyed by the class's canonical text, so that its spellings share the
        # records; the text as given is kept to be shown
        db.append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                    "class_text": cls.text,
                    "label": best.label if best else None,
                    "recipe": best.recipe if best else None,
                    "knobs": best.knobs if best else None, "sizes": sizes,
                    "version": outcome.version, "vs_generic": outcome.vs_generic,
                    "speedup": (1 / outcome.vs_generic) if outcome.vs_generic else None,
                    "why": outcome.why}])
    return outcome


def version_gain(noise: float) -> float:
    """The speedup over the generic version a class's best needs to become a
    version: :data:`VERSION_GAIN`, or twice the noise measured in the same
    comparison when that is more (as a candidate's win in a session: a
    1.11x measured with 110% noise is no evidence)."""
    return max(VERSION_GAIN, math.exp(2 * noise))


def _ratio(m: dict) -> tuple[float | None, float]:
    """The class best's time over the generic version's (geometric mean over
    the sizes) from a two-recipe measurement, and the measurement's noise
    (the largest over the sizes, :func:`polyc.tune.measure.decide`)."""
    from .measure import decide
    if m["failures"] or not m["rounds"]:
        return None, 0.0
    logs, noise = [], 0.0
    for rounds in m["rounds"].values():
        ratios, nz = decide(rounds)
        logs.append(math.log(ratios[1]))
        noise = max(noise, nz)
    return math.exp(sum(logs) / len(logs)), noise
