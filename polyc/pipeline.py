"""The compilation pipeline, in order.  The one place that spells it out.

``compile_program(program, config) -> Kernel``:

1. preconditions (``bounds``): parameter values keeping every access in bounds;
   then tensorization (``schedule.tensorize``, ``Config.tensorize``): a
   statement matching an intrinsic becomes calls of it;
2. dependences (``dependence.compute``): exact flow/anti/output relations;
3. schedule (``schedule.initial``): isl's scheduler, or the source order when
   ``Config.schedule == "identity"``;
4. band optimisation (``schedule.tile``): member order, tiling, simd marks;
5. parallel marks (``schedule.marks``): the outermost coincident loops;
   when no hot statement gets a parallel loop outside its innermost one,
   the source order optimised the same way replaces isl's schedule if it
   walks memory better (``schedule.profile``); then array contraction
   (``schedule.contraction``, ``Config.contract``): a temporary whose
   dependences stay inside one iteration of a loop becomes a buffer
   declared in that loop's body;
6. legality (``schedule.legality.check``) of the final schedule;
7. AST (``astgen``): isl AST -> LoopNest;
8. C source (``backends.c.emit``, through ``backends.base.backend("c")``;
   ``Config.target == "cuda"`` goes through :mod:`polyc.gpu_pipeline` instead);
9. build and load (``backends.c.build``, through the disk cache);
10. the callable ``runtime.Kernel``.

Steps 2-8 are memoised by the content of the program and the code-generation
options (:func:`lowered_key`), in memory and in the disk cache, so a warm
compile costs step 1, a hash and a library load.

With ``Config.dump`` (or ``POLYC_DUMP=1``) every stage is printed to stderr.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

from polyc.backends.base import backend

from . import astgen, bounds, dependence
from .config import Config
from .errors import ScheduleError
from .ir import Program
from .loopnest import format_loopnest
from .lowered import Lowered, with_notes
from .runtime import Kernel
from .schedule import (
    auto,
    callorder,
    contraction,
    initial,
    legality,
    profile,
    rowfuse,
    tensorize,
    tensorize_auto,
    tensorize_recipe,
    windows,
)
from .schedule.language import Schedule
from .schedule.tree import without_names

log = logging.getLogger(__name__)

__all__ = ["Lowered", "with_notes", "lower", "lower_schedule", "lowered_key",
           "compile_program", "compile_schedule", "compile_versioned",
           "code_fingerprint"]


def _dump(config: Config, title: str, text) -> None:
    if config.dump:
        print(f"=== polyc: {title} ===\n{text}", file=sys.stderr)


def _optimized(sched, program: Program, config: Config, deps) -> Schedule:
    """Steps 4-5: the automatic band optimisation and marks of ``sched``, as a
    schedule-language :class:`Schedule` (its recipe: the tree ``sched`` and
    the steps; :mod:`polyc.schedule.auto`)."""
    return auto.optimize(Schedule.from_isl(program, sched, deps), config)


def lower(program: Program, config: Config | None = None, *, probe: bool = False) -> Lowered:
    """Steps 1-7: from an ``ir.Program`` to a checked schedule and its LoopNest.

    ``probe=True`` stops after step 5 (no legality proof, no loop nest:
    ``loopnest`` is ``None``): what the fusion planner reads off a candidate
    group (:mod:`polyc.graph.plan`) before anything is compiled, which then
    goes through every step."""
    config = config or Config.from_env()
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))  # 1
    notes: dict = {}
    row_note = ""
    recipe = checked = None
    source, matches = program, []
    if config.tensorize and config.schedule != "identity":
        # 1b: each statement matching an intrinsic is scheduled as its calls
        matches, notes = tensorize_auto.find(program, config.parallel,
                                             triangle_rows=config.triangle_rows)
        source = program = tensorize_auto.as_updates(program, {m.statement for m in matches})
        program = tensorize_auto.contract(program, matches)
    _dump(config, "program", program)
    deps = (callorder.dependences(program, source, matches) if matches     # 2
            else dependence.compute(program))
    _dump(config, "dependences", deps)
    if config.schedule == "identity":                                         # 3
        sched = initial.identity_schedule(program)
    else:
        sched = initial.auto_schedule(program, deps, config)
        _dump(config, "isl schedule", sched)
        blocked = None
        if config.fusion == "isl":
            # streaming row kernels: one pass per row (polyc.schedule.rowfuse)
            rows = rowfuse.row_fused(sched, program, deps)
            if rows is not None:
                sched = rows
                row_note = rowfuse.describe(rows, program)
                # through GEMM calls: one block of rows at a time (attention)
                blocked = rowfuse.row_blocked(rows, program, source, matches,
                                              config.row_block or rowfuse.default_row_block())
                if blocked is not None:
                    sched, program, deps, matches = blocked
                    row_note = rowfuse.describe_blocked(sched, program, matches)
                    notes = {**notes, **{m.statement: m.describe() for m in matches}}
        recipe = _optimized(sched, program, config, deps)                     # 4, 5
        sched = checked = without_names(recipe.isl)
        found = profile.profile(sched, program) if config.parallel and not blocked else None
        if found is not None and not found.coarse:
            # isl found no coarse parallelism: the source order, optimised the
            # same way, may walk memory better (polyc.schedule.profile)
            src = _optimized(initial.annotate(initial.identity_schedule(program), deps.all()),
                             program, config, deps)
            src_tree = without_names(src.isl)
            if profile.prefer_source_order(found, profile.profile(src_tree, program)):
                sched, recipe, checked = src_tree, src, src_tree
    contracted: tuple = ()
    if config.contract and config.schedule != "identity":                     # 5b
        sched, program, found = contraction.contract_temporaries(
            sched, program, scalars_only=contraction.SCALARS_ONLY)
        contracted = tuple(found)
    _dump(config, "schedule", sched)
    if probe:
        return Lowered(program, deps, sched, None, notes, row_note, contracted)
    if sched is not checked:
        # (the automatic schedule checked its own tree; array contraction or
        # the identity schedule give another one)
        legality.check(sched, deps, program, what="the generated schedule")   # 6
    view = None
    if matches:
        # the tree of the source statements, each group below a tensorize
        # mark (put by the schedule language's own tensorize function), is
        # what the kernel shows (its dependences computed when asked for);
        # code generation lowers the marks back to calls
        view_program = _expanded(program, source, matches)
        marked = tensorize_auto.expand(sched, view_program, matches, config.parallel)
        view = (view_program, marked, functools.partial(dependence.compute, source))
        sched, program, _ = tensorize.lower_marks(marked, view_program, config.parallel,
                                                  known=matches)
        _dump(config, "tensorized schedule", marked)
    nest = astgen.generate(program, sched)                                    # 7
    _dump(config, "loop nest", format_loopnest(nest))
    found_windows: tuple = ()
    if config.contract and config.target == "c" and config.parallel:
        # temporaries of parametric size stored per thread (attention's score block)
        found_windows = windows.thread_windows(sched, program)
    # the code is generated from the automatic recipe's own tree unless
    # tensorization rewrote the program after it; array contraction is
    # redone the same way when the recipe is compiled (lower_schedule), so
    # the recipe of the source program replays to the same code
    auto_schedule = recipe if recipe is not None and not matches else None
    if recipe is not None and matches and not contracted:
        # a tensorized program's automatic schedule as a recipe of the
        # source statements, made when first asked for
        auto_schedule = functools.partial(_tensorized_recipe, recipe, view[0], matches,
                                          config.parallel, view[1], nest)
    return Lowered(program, deps, sched, nest, notes, row_note, contracted, view,
                   auto=auto_schedule, windows=found_windows)


def _tensorized_recipe(auto_schedule, source: Program, matches, parallel: bool,
                       code_tree, nest, deps):
    """The automatic schedule of a tensorized program as a recipe of the
    source statements (:func:`polyc.schedule.tensorize_recipe.source_schedule`),
    kept only when it also lowers, as a user schedule does
    (:func:`lower_schedule`), to the loop nest ``nest`` the code came from;
    ``None`` otherwise."""
    s = tensorize_recipe.source_schedule(auto_schedule, source, matches, parallel,
                                         code_tree, deps)
    if s is None:
        return None
    tree, program, _ = tensorize.lower_marks(without_names(s.isl), s.program, parallel)
    if format_loopnest(astgen.generate(program, tree)) != format_loopnest(nest):
        log.debug("automatic recipe of %s: the replayed tree gives another loop nest; its "
                  "recipe starts from the marked tree", source.name)
        return None
    return s


def _expanded(program: Program, source: Program, matches) -> Program:
    """``program`` (contracted to calls, then array-contracted) with each call
    replaced by the source statements of its group."""
    groups = {m.call: [source.statement(x) for x in tensorize.group_statements(m)]
              for m in matches}
    # (the edges of a split group, the statements' instances no call computes,
    # are in the group's source statements)
    edges = {x for m in matches if m.parts for x in tensorize.group_statements(m)}
    stmts = [x for s in program.statements
             for x in (groups[s.name] if s.kind == "intrinsic" and s.name in groups
                       else [] if s.name in edges else [s])]
    # in the source's order: the program a recipe of this view names is the
    # source program (its fingerprint lists the statements in order)
    rank = {s.name: i for i, s in enumerate(source.statements)}
    stmts.sort(key=lambda s: rank.get(s.name, len(rank)))
    return program.replace(statements=tuple(stmts), order=source.order)


#: Version of the lowered-source cache entries (bump when their meaning changes).
LOWERED_FORMAT = "polyc-lowered-1"
_LOWERED: dict[str, object] = {}


@functools.lru_cache(maxsize=None)
def code_fingerprint() -> str:
    """A hash of polyc's own sources (the compiler itself, and the C headers
    of the intrinsics it pastes into generated code): a lowered entry made by
    other compiler code is never reused."""
    import polyc
    import polyc.backends
    import polyc.frontend
    h = hashlib.sha256()
    roots = {Path(mod.__file__).parent for mod in (polyc, polyc.frontend, polyc.backends)}
    for root in sorted(roots):
        for f in sorted([*root.rglob("*.py"), *root.rglob("*.h")]):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def lowered_key(program: Program, config: Config, schedule_text: str = "") -> str:
    """Content key of everything steps 2-8 depend on: the program's
    :meth:`~polyc.ir.Program.fingerprint` (domains, access relations,
    bodies, signature, preconditions) and its statements' source text (the
    C source quotes it in comments), the code-generation options and, for a
    user schedule, its tree in isl's text form."""
    from . import __version__
    texts = repr([s.text for s in program.statements])
    text = "\0".join([LOWERED_FORMAT, __version__, code_fingerprint(), program.fingerprint(),
                      texts, repr(config.codegen_key()), schedule_text])
    return hashlib.sha256(text.encode()).hexdigest()


def _cached_source(key: str, config: Config):
    """The C ``Source`` lowered earlier for ``key`` (memory, then disk).  The
    disk entry ``<key>.lowered.json`` is sealed (checksum, canonical bytes)
    by :func:`polyc.cache.write_json_entry`; a damaged one is discarded with a
    ``CacheWarning``, a symbolic link is refused, and lowering runs again."""
    from polyc.backends.base import Source

    from . import cache
    if key in _LOWERED:
        return _LOWERED[key]
    if not config.disk_cache:
        return None
    directory = cache.usable_dir(config.resolved_cache_dir())
    data = cache.read_json_entry(directory, f"{key}.lowered.json", key=key,
                                 fmt=LOWERED_FORMAT)
    if data is None:
        return None               # absent, refused or corrupt: lower again
    try:
        text, entry = data["text"], data["entry"]
        params, tensors = tuple(data["params"]), tuple(data["tensors"])
        if not (isinstance(text, str) and isinstance(entry, str)
                and all(isinstance(x, str) for x in params + tensors)):
            return None
        src = Source(text=text, entry=entry, params=params, tensors=tensors)
    except (KeyError, TypeError, ValueError):
        return None
    _LOWERED[key] = src
    return src


def _store_source(key: str, source, config: Config) -> None:
    """Keep ``source`` in memory and, with the disk cache, as the sealed entry
    ``<key>.lowered.json`` (best effort: a directory that cannot be written
    only costs lowering again later)."""
    from . import cache
    _LOWERED[key] = source
    if not config.disk_cache:
        return
    directory = cache.usable_dir(config.resolved_cache_dir())
    data = {"text": source.text, "entry": source.entry,
            "params": list(source.params), "tensors": list(source.tensors)}
    try:
        cache.write_json_entry(directory, f"{key}.lowered.json", data, key=key,
                               fmt=LOWERED_FORMAT)
    except OSError:
        pass


def lower_schedule(schedule, config: Config | None = None) -> Lowered:
    """Steps 6-7 for a user schedule (a :class:`polyc.schedule.language.Schedule`):
    legality, then the loop nest.  No automatic tiling or marks are added:
    the schedule is compiled as written, except that temporaries are
    contracted and stored in thread windows as in :func:`lower` (step 5b,
    ``Config.contract``; neither moves a statement instance), so the recipe
    of an automatic schedule gives the code that schedule gave."""
    config = config or Config.from_env()
    _dump(config, "program", schedule.program)
    _dump(config, "user schedule", schedule)
    schedule.check("the user schedule")                                       # 6
    # (the loop names are the schedule language's: a ``loops:`` mark above a
    # band would also change where isl's AST builder puts guards)
    sched, program, calls = tensorize.lower_marks(without_names(schedule.isl),
                                                  schedule.program, config.parallel)
    contracted: tuple = ()
    if config.contract and not calls and any(t.role == "temp" for t in program.tensors):
        contracted_sched, program, found = contraction.contract_temporaries(      # 5b
            sched, program, scalars_only=contraction.SCALARS_ONLY)
        if found:           # (no instance moved: the check above still holds)
            sched, contracted = contracted_sched, tuple(found)
    nest = astgen.generate(program, sched)                                    # 7
    _dump(config, "loop nest", format_loopnest(nest))
    found_windows: tuple = ()
    if config.contract and config.target == "c" and config.parallel:
        found_windows = windows.thread_windows(sched, program)      # as lower() does
    view = (schedule.program, schedule.isl, schedule.deps) if calls else None
    return Lowered(program, schedule.deps, sched, nest,
                   {m.statement: m.describe() for m in calls}, contracted=contracted,
                   view=view, windows=found_windows)


def compile_schedule(schedule, config: Config | None = None):
    """Compile ``program`` under a user :class:`~polyc.schedule.language.Schedule`
    to a :class:`polyc.runtime.Kernel` (steps 6-10; the lowering is memoised
    by the program and the schedule tree's text).  For ``target="cuda"``:
    :func:`polyc.gpu_pipeline.compile_gpu` with the schedule's mapping."""
    config = config or Config.from_env()
    if config.target == "cuda":
        from .gpu_pipeline import compile_gpu
        return compile_gpu(schedule.program, config,
                           key=lowered_key(schedule.program, config, schedule.to_text()),
                           schedule=schedule)
    from .custom_intrinsics import registry_fingerprint
    program = schedule.program
    # a user intrinsic's implementation is part of the code a mark lowers to
    key = lowered_key(program, config, schedule.to_text() + registry_fingerprint())
    source = None if config.dump else _cached_source(key, config)
    low = None
    if source is None:
        low = lower_schedule(schedule, config)
        source = backend("c").emit(low.program, low.loopnest, config, windows=low.windows)
        _store_source(key, source, config)
    _dump(config, "C source", source.text)
    lib = backend("c").build(source.text, config)
    return Kernel(program, source, lib, config, lowered=low,
                  relower=lambda: lower_schedule(schedule, config), user_schedule=schedule)


def compile_program(program: Program, config: Config | None = None):
    """Compile ``program`` to a callable :class:`polyc.runtime.Kernel`.

    Steps 2-8 are skipped when the same program was lowered before with the
    same code-generation options (in this process or, through the disk
    cache, in another): the C source is reused, and the schedule and loop
    nest are recomputed only if the kernel's ``schedule``/``loopnest`` are
    inspected.  Raises :class:`~polyc.errors.IllegalScheduleError` (a polyc
    bug if the automatic schedule is wrong), :class:`~polyc.errors.CompileError`
    when the C compiler fails, :class:`~polyc.errors.ToolMissingError` without
    one.
    """
    return compile_programs([program], config)[0]


def prepared(program: Program, config: Config) -> Program:
    """``program`` as :func:`compile_program` compiles it: with its in-bounds
    preconditions, and, when the automatic schedule tensorizes, with an
    accumulator expanded where that makes its update a matrix product
    (:func:`polyc.schedule.tensorize_auto.expanded_for_calls`, PolyBench's
    ``doitgen``: the kernel allocates the expanded temporary).  :func:`lower`
    of the program as given does not expand it."""
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    if config.tensorize and config.schedule != "identity" and program.order is not None:
        program = tensorize_auto.expanded_for_calls(program, config.parallel,
                                                    config.triangle_rows)
    return program


def _lowered_source(program: Program, config: Config):
    """Steps 1-8 of one program: (the program :func:`prepared`, Source,
    Lowered or None when the source came from the cache)."""
    program = prepared(program, config)                                       # 1
    key = lowered_key(program, config)
    source = None if config.dump else _cached_source(key, config)
    low = None
    if source is None:
        low = lower(program, config)                                          # 2-7
        source = backend("c").emit(low.program, low.loopnest, config,
                                   windows=low.windows)                       # 8
        _store_source(key, source, config)
    _dump(config, "C source", source.text)
    return program, source, low


def _compile_tuned(programs: list[Program], config: Config) -> list:
    """:func:`compile_programs` with the tuning database consulted
    (:func:`polyc.tune.use.tuned`): a program with recorded versions by shape
    class compiles to a versioned kernel (:mod:`polyc.versioned`), one with
    a recorded best recipe under it, the others as usual; each kernel's
    ``tuning`` note says which (``explain`` prints it)."""
    from .tune.use import tuned
    plain = config.replace(use_tuned=False)
    found = []
    for p in programs:
        if p.preconditions is None:
            p = p.replace(preconditions=bounds.preconditions(p))
        got = tuned(p, config)
        if got == (None, [], ""):
            # polyc.tune(kernel) tunes the program as compiled (kernel.program):
            # prepared, with an accumulator expanded for GEMM calls (doitgen)
            q = prepared(p, plain)
            if q is not p and (again := tuned(q, config)) != (None, [], ""):
                p, got = q, again
        found.append((p, *got))
    rest = [p for p, s, vs, _ in found if s is None and not vs]
    kernels = iter(compile_programs(rest, plain) if rest else [])
    out = []
    for p, sched, versions, note in found:
        auto = isinstance(sched, dict)      # the automatic schedule with other options
        if versions:
            from .versioned import ALL, Version, shape_class
            recipe = sched if auto else sched.to_recipe() if sched is not None else None
            generic = Version(shape_class(p, ALL), recipe, "tuned" if sched else "")
            k = compile_versioned(p, versions, generic, plain)
            k.tuning = "\n".join(x for x in (note, k.tuning) if x)
        elif auto:
            from .tune.space import auto_config
            k = compile_programs([p], auto_config(sched, plain))[0]
            k.tuning = note or None
        else:
            k = compile_schedule(sched, plain) if sched is not None else next(kernels)
            k.tuning = note or None
        out.append(k)
    return out


def compile_programs(programs: list[Program], config: Config | None = None) -> list:
    """:func:`compile_program` for several programs: steps 1-8 run one
    program after the other (isl is not shared between threads), the C
    compiler runs for all of them at once on the machine's cores (step 9),
    so a fusion plan's kernels build in parallel.  Same errors."""
    from concurrent.futures import ThreadPoolExecutor

    config = config or Config.from_env()
    if config.target == "cuda":
        from .gpu_pipeline import compile_gpu
        out = []
        for p in programs:
            if p.preconditions is None:
                p = p.replace(preconditions=bounds.preconditions(p))
            out.append(compile_gpu(p, config, key=lowered_key(p, config)))
        return out
    if config.use_tuned:
        return _compile_tuned(programs, config)
    staged = [_lowered_source(p, config) for p in programs]
    texts = [src.text for _, src, _ in staged]
    if len(texts) > 1:
        workers = min(len(texts), os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            libs = list(pool.map(lambda t: backend("c").build(t, config), texts))
    else:
        libs = [backend("c").build(t, config) for t in texts]                       # 9
    return [Kernel(p, src, lib, config, lowered=low,                              # 10
                   relower=(lambda p=p: lower(p, config)))
            for (p, src, low), lib in zip(staged, libs)]


def _lower_recipe(program: Program, recipe, config: Config) -> Lowered:
    """:func:`lower` (``recipe`` ``None``) or :func:`lower_schedule` of the
    recipe replayed on ``program``."""
    if recipe is None:
        return lower(program, config)
    if "auto" in recipe:                # the automatic schedule with other options
        from .tune.space import auto_config
        return lower(program, auto_config(recipe, config))
    from .schedule.language import Schedule
    return lower_schedule(Schedule.replay(program, recipe), config)


def compile_versioned(program: Program, versions: list, generic, config: Config | None = None):
    """A kernel of ``program`` with one version (:class:`polyc.versioned.Version`)
    per entry of ``versions`` (at most :data:`polyc.versioned.MAX_VERSIONS`;
    reordered most specific first, :mod:`polyc.versioned`) and
    ``generic`` for every other size.  A class disjoint from the program's
    preconditions is dropped.  Raises :class:`ScheduleError` for too many
    versions, :class:`CompileError` when the versions' code does not fit one
    kernel, and what the pipeline raises."""
    from polyc.backends.c.versions import emit_versions, guard_text

    from .isl_util import set_to_condition
    from .versioned import MAX_VERSIONS, narrowed, ordered
    config = (config or Config.from_env()).replace(use_tuned=False)
    if len(versions) > MAX_VERSIONS:
        raise ScheduleError(f"{program.name}: {len(versions)} versions; a kernel carries at "
                            f"most {MAX_VERSIONS} besides the generic one")
    if program.preconditions is None:
        program = program.replace(preconditions=bounds.preconditions(program))
    pre = program.parameter_domain()
    by_class = {v.cls.set.to_str(): v for v in versions}
    parts = []
    for cls in ordered([v.cls for v in versions]):
        sub = narrowed(program, cls)
        if sub.parameter_domain().is_empty():
            continue
        parts.append((by_class[cls.set.to_str()], sub,
                      set_to_condition(sub.parameter_domain(), pre)))
    parts.append((generic, program, None))
    from .custom_intrinsics import registry_fingerprint
    spec = json.dumps([[v.cls.text, v.recipe] for v, _, _ in parts], sort_keys=True)
    key = lowered_key(program, config, "versions\0" + spec + registry_fingerprint())
    source = None if config.dump else _cached_source(key, config)
    low_generic = None
    if source is None:
        lowered = [(_lower_recipe(p, v.recipe, config), g) for v, p, g in parts]
        low_generic = lowered[-1][0]
        notes = [f"{v.cls.text}: {v.why}" if v.why else v.cls.text for v, _, _ in parts]
        source = emit_versions([(low.program, low.loopnest, g) for low, g in lowered],
                               omp_schedule=config.omp_schedule, notes=notes)
        _store_source(key, source, config)
    _dump(config, "C source", source.text)
    lib = backend("c").build(source.text, config)
    kernel = Kernel(program, source, lib, config, lowered=low_generic,
                    relower=lambda: _lower_recipe(program, generic.recipe, config))
    kernel.versions = [{"class": v.cls.text,
                        "guard": guard_text(g) if g is not None else "(otherwise)",
                        "recipe": v.recipe is not None, "why": v.why}
                       for v, _, g in parts]
    lines = [f"versions by shape class ({len(parts)}, tested in this order):"]
    for k, d in enumerate(kernel.versions):
        lines.append(f"  {k}: {d['class']} [{d['guard']}]"
                     + (f" — {d['why']}" if d["why"] else ""))
    kernel.tuning = "\n".join(lines)
    return kernel
