"""The ``polyc`` command line (argparse), over the public API.

Commands::

    polyc run FILE.tc [--def NAME] [--sizes M=128,K=1024] [--dtype float32]
                      [--check] [--bench] [--json] [--seed N]
                      [--schedule RECIPE.json] [SCHEDULER OPTIONS]
    polyc compile FILE.tc [--def NAME] [--sizes ...]
                      [--emit program|deps|schedule|loopnest|recipe|ast|c]
                      [--schedule RECIPE.json] [SCHEDULER OPTIONS]
    polyc explain FILE.tc [--def NAME] [--sizes ...] [--json]
                      [--schedule RECIPE.json] [SCHEDULER OPTIONS]
                      [--plot OUT.png|OUT.svg [--statement S] [--band C.m]
                       [--fix k=0] [--color order|wavefront]]
    polyc compile|explain KERNELS.py [--def FUNCTION] [--dtype float32] ...
                      (a @polyc.kernel function; arrays of --dtype, float64 by default)
    polyc explain PROGRAM.py --def FUNCTION --shapes 8x512x64,8x512x64 [--dtype float32]
                      [--json]   (a numpy function or @polyc.jit: its fusion plan)
    polyc einsum SUBSCRIPTS --shapes 128x64,64x32 [--dtype float32] [--target cuda --emulate]
                            [--check] [--bench] [--json]
    polyc tune FILE.tc|FILE.py [--def NAME] --sizes M=512,... [--budget quick|max|S]
                            [--executor inline|pool|dask://HOST:PORT] [--dry-run]
                            [--explain] [--json]      (see polyc.tune.cli)
    polyc tune --show | --export FILE | --import FILE

Scheduler options (the automatic schedule; ``Config`` fields)::

    --fusion isl|max|min|smart|preserve_coincident   Config.fusion
    --no-skewing                                     Config.allow_skewing = False
    --no-outer-coincidence                           Config.outer_coincidence = False
    --no-tensorize                                   Config.tensorize = False
    --row-block N                                    Config.row_block (1: off)
    --triangle-rows N                                Config.triangle_rows (1: off)

``--schedule RECIPE.json`` compiles (runs, explains) under a recipe saved with
``polyc.Schedule.to_json`` / ``polyc compile --emit recipe`` instead of the
automatic schedule; a recipe of another program, or one whose transformations
break a dependence, is a user error naming the program or the dependence.
``--emit schedule`` prints the schedule tree with loop names, ``--emit
loopnest`` the loop nest it produces, ``--emit recipe`` the recipe as JSON
(``--schedule`` takes it back: the automatic schedule's recipe carries isl's
tree and lists its steps, ``tensorize`` among them). ``explain`` prints, for
each loop, the dependences it carries and whether it is parallel or
vectorizable and why not, the fusion groups and tile footprints
(:mod:`polyc.schedule.explain`); ``--json`` prints the same as one JSON object.
``--plot OUT.png`` also draws the schedule at the sizes (``--sizes`` or the
file's ``# sizes:`` line) with :func:`polyc.plot.draw`: the instances of
``--statement`` (default: the statements with the most loops) or the points of
``--band``, with ``--fix`` loops held at a value, coloured by execution order
or ``--color wavefront``.

``polyc --version`` prints the version.  Exit status: 0 on success, 1 when
``--check`` finds a mismatch, 2 on a user error (message on stderr, no
traceback), 3 on an internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from . import __version__
from .cli_input import (  # noqa: F401
    UsageError,
    _arrow_subscripts,
    _check_explain_options,
    _checked_gpu,
    _gpu_overrides,
    _load,
    _load_python,
    _output_failed,
    _parse_shapes,
    _parse_sizes,
    _select_def,
    _show_warning,
    seed_arg,
)
from .config import FUSION_STRATEGIES
from .errors import PolycError


def _threads() -> int:
    from .config import Config
    return Config.from_env().num_threads or len(os.sched_getaffinity(0))


def _time(fn) -> float:
    """Median wall time of ``fn()`` in seconds (see testing.median_time)."""
    from .testing import median_time
    return median_time(fn, min_time=0.5, min_reps=5, max_reps=100)[0]


def _fmt_time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 1 else f"{s:.3f} s"


#: ``Config`` fields set by the scheduler options, by argparse destination.
_SCHEDULER_FIELDS = {"fusion": "fusion", "no_skewing": "allow_skewing",
                     "no_outer_coincidence": "outer_coincidence",
                     "no_tensorize": "tensorize", "row_block": "row_block",
                     "triangle_rows": "triangle_rows"}


def _config(args):
    """``Config.from_env`` with the scheduler options of the command line."""
    from dataclasses import fields

    from .config import Config
    have = {f.name for f in fields(Config)}
    overrides: dict = {}
    for dest, name in _SCHEDULER_FIELDS.items():
        value = getattr(args, dest, None)
        if value is None or value is False:
            continue
        if name not in have:
            flag = "--" + dest.replace("_", "-")
            raise UsageError(f"{flag}: this polyc has no Config.{name}")
        overrides[name] = value if dest in ("fusion", "row_block", "triangle_rows") else False
    overrides.update(_gpu_overrides(args))
    return _checked_gpu(Config.from_env(**overrides), args)


def _gpu_lowered(program, config, user):
    """The GPU lowering of ``program`` (``--target cuda``): automatic, or
    the mapping of the user schedule ``user`` (``--schedule``)."""
    from .gpu_pipeline import lower_gpu, lower_gpu_schedule
    return lower_gpu(program, config) if user is None else lower_gpu_schedule(user, config)


def _user_schedule(args, program, config):
    """The :class:`polyc.Schedule` replayed from ``--schedule``, or ``None``.
    A recipe of the program as the automatic pipeline compiles it
    (:func:`polyc.pipeline.prepared`: a loop program's accumulator expanded
    for GEMM calls, as ``--emit recipe`` records it) replays onto that."""
    if getattr(args, "schedule", None) is None:
        return None
    from .errors import ScheduleError
    from .pipeline import prepared
    from .schedule.language import Schedule
    if not Path(args.schedule).is_file():
        raise UsageError(f"--schedule: no recipe file {args.schedule}")
    try:
        return Schedule.replay(program, args.schedule)
    except ScheduleError:
        full = prepared(program, config)
        if len(full.tensors) == len(program.tensors):
            raise                   # nothing expanded: the same program
        try:
            return Schedule.replay(full, args.schedule)
        except ScheduleError:
            pass
        raise


def _automatic_schedule(program, config):
    """The automatic schedule (and its lowering) as a :class:`polyc.Schedule`."""
    from . import pipeline
    low = pipeline.lower(pipeline.prepared(program, config), config)
    return low.as_schedule(), low


def cmd_run(args) -> int:
    from . import reference, testing
    from .cli_input import checked_reference, random_run_inputs
    from .pipeline import compile_program, compile_schedule
    if Path(args.file).suffix == ".py":
        raise UsageError("polyc run takes .tc files; call a @polyc.kernel function from "
                         "Python, or inspect it with polyc compile / polyc explain")
    program, sizes = _load(args)
    missing = [p for p in program.params if p not in sizes]
    if missing:
        raise UsageError(f"give sizes for {', '.join(missing)} with --sizes "
                         "or a '# sizes:' line in the file")
    config = _config(args)
    t0 = time.perf_counter()
    user = _user_schedule(args, program, config)
    kernel = (compile_program(program, config) if user is None
              else compile_schedule(user, config))
    compile_s = time.perf_counter() - t0
    inputs, ref = random_run_inputs(program, sizes, args.seed)
    call_args = testing.call_args(program, inputs, sizes)
    outs = kernel(*call_args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    report: dict = {"file": args.file, "def": program.name, "sizes": sizes,
                    "dtypes": {t.name: t.dtype for t in program.tensors},
                    "threads": _threads(), "compile_s": compile_s}
    if user is not None:
        report["schedule"] = args.schedule
    status = 0
    if args.check:
        ref = ref if ref is not None else checked_reference(program, inputs, sizes)
        red = testing.reduction_length(program, sizes)
        checks = {}
        for t, got in zip(program.outputs, outs):
            max_abs, max_rel = testing.max_errors(got, ref[t.name])
            try:
                testing.assert_close(got, ref[t.name], dtype=t.dtype,
                                     reduction_length=red, name=t.name)
                ok = True
            except AssertionError:
                ok = False
            checks[t.name] = {"max_abs": max_abs, "max_rel": max_rel, "ok": ok,
                              "rel_to_max": testing.error_relative_to_max(max_abs, ref[t.name]),
                              "shape": list(got.shape)}
            status = status or (0 if ok else 1)
        report["check"] = {"passed": status == 0, "outputs": checks}
    if args.bench:
        polyc_s = _time(lambda: kernel(*call_args))
        numpy_s = _time(lambda: reference.evaluate(program, inputs, sizes))
        report["bench"] = {"polyc_s": polyc_s, "numpy_s": numpy_s,
                           "speedup_vs_numpy": numpy_s / polyc_s if polyc_s else None}
    _print_report(report, args.json)
    return status


def _print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=None, sort_keys=True, default=float))
        return
    if "subscripts" in report:
        shapes = ",".join("x".join(map(str, s)) or "()" for s in report["shapes"])
        print(f"einsum {report['subscripts']!r}  shapes: {shapes}  "
              f"threads: {report['threads']}")
    else:
        sizes = " ".join(f"{k}={v}" for k, v in report["sizes"].items())
        print(f"{report['file']} def {report['def']}  sizes: {sizes or '-'}  "
              f"threads: {report['threads']}")
    print(f"  compile: {report['compile_s']:.3f} s")
    if "check" in report:
        for name, c in report["check"]["outputs"].items():
            verdict = "ok" if c["ok"] else "MISMATCH"
            print(f"  check {name}{tuple(c['shape'])}: max abs err {c['max_abs']:.3g}, "
                  f"max rel err {c['max_rel']:.3g} (elementwise), "
                  f"{c['rel_to_max']:.3g} of max |ref|  {verdict}")
    if "bench" in report:
        b = report["bench"]
        print(f"  bench: polyc {_fmt_time(b['polyc_s'])}  numpy {_fmt_time(b['numpy_s'])}  "
              f"speedup vs numpy {b['speedup_vs_numpy']:.2f}x")


def cmd_compile(args) -> int:
    from . import pipeline
    program, _ = _load(args)
    config = _config(args)
    user = _user_schedule(args, program, config)
    if args.emit == "program":
        print(program, end="")
        return 0
    if config.target == "cuda" and args.emit in ("ast", "c", "cuda"):
        from polyc.backends.base import backend
        low = _gpu_lowered(program, config, user)
        if args.emit == "ast":
            from .loopnest import format_loopnest
            print(format_loopnest(low.loopnest), end="")
        else:
            print(backend("cuda").emit(low.program, low.loopnest, config,
                                       kernels=low.kernels).text, end="")
        return 0
    if args.emit == "cuda":
        raise UsageError("--emit cuda needs --target cuda")
    if user is not None:
        schedule, low = user, None
    else:
        schedule, low = _automatic_schedule(program, config)
    if args.emit == "deps":
        print(schedule.deps)
    elif args.emit == "schedule":
        print(schedule, end="")
    elif args.emit == "loopnest":
        print(schedule.loop_nest(), end="")
    elif args.emit == "recipe":
        print(json.dumps(schedule.to_recipe(), indent=2))
    else:
        if low is None:
            low = pipeline.lower_schedule(schedule, config)
        if args.emit == "ast":
            from .loopnest import format_loopnest
            print(format_loopnest(low.loopnest), end="")
        else:  # c
            from polyc.backends.c import emit
            print(emit.emit(low.program, low.loopnest, omp_schedule=config.omp_schedule,
                            windows=low.windows).text, end="")
    return 0


def _explain_graph(args) -> int:
    """``polyc explain FILE.py --def FN --shapes ...``: import the file, trace
    the numpy function ``FN`` (plain or ``@polyc.jit``) on seeded random
    arrays of those shapes, and print its fusion plan."""
    import importlib.util

    from .graph.jit import Jitted, jit
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"cannot read {path}")
    if path.suffix != ".py":    # importing it failed: "'NoneType' object has no attribute 'loader'"
        raise UsageError(f"--shapes traces a numpy function of a .py file, not {path}: "
                         "explain a TC definition at --sizes")
    if not args.def_name:
        raise UsageError("name the function with --def")
    spec = importlib.util.spec_from_file_location(f"_polyc_explain_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except PolycError:
        raise
    except Exception as e:
        raise UsageError(f"importing {path} failed: {type(e).__name__}: {e}") from None
    fn = getattr(module, args.def_name, None)
    if fn is None:
        raise UsageError(f"{path} defines no {args.def_name}")
    if not callable(fn):
        raise UsageError(f"{args.def_name} in {path} is a {type(fn).__name__}, not a "
                         "function: --def names the numpy function to trace")
    if not isinstance(fn, Jitted):
        fn = jit(fn)
    from .ir import numpy_dtype
    rng = np.random.default_rng(args.seed)
    arrays = [rng.standard_normal(s).astype(numpy_dtype(args.dtype or "float32"))
              for s in _parse_shapes(args.shapes)]
    import inspect
    try:
        inspect.signature(fn.fn).bind(*arrays)
    except TypeError as e:
        raise UsageError(f"--shapes gives {len(arrays)} array(s) for {args.def_name}"
                         f"{inspect.signature(fn.fn)}: {e}") from None
    except ValueError:          # no signature to check (a builtin): the call says
        pass
    result = fn.explain(*arrays, json=args.json)
    print(json.dumps(result, indent=2) if args.json else result)
    return 0


def _plot(args, schedule, sizes: dict) -> dict:
    """Draw ``schedule`` for ``--plot``; a summary of what was drawn."""
    from .picture import fill_extents
    from .plot import draw
    sizes = dict(sizes)
    fill_extents(schedule.program, sizes)       # (extents that only bound an array)
    missing = [p for p in schedule.program.params if p not in sizes]
    if missing:
        raise UsageError(f"--plot draws at fixed sizes: give {', '.join(missing)} with "
                         f"--sizes (e.g. --sizes {','.join(p + '=6' for p in missing)})")
    options = {"statement": args.statement, "band": args.band,
               "fix": _parse_sizes(args.fix, "--fix"), "color": args.color}
    folder = os.path.dirname(os.path.abspath(args.plot))
    if not os.path.isdir(folder):
        raise UsageError(f"--plot: cannot write {args.plot}: the folder {folder} does not exist")
    try:
        pic = draw(schedule, sizes={p: v for p, v in sizes.items()
                                    if p in schedule.program.params},
                   path=args.plot, dpi=args.dpi, **options).polyc_picture
    except OSError as e:
        raise UsageError(f"--plot: cannot write {args.plot}: {e.strerror or e}") from None
    return {"path": args.plot, "statements": list(pic.statements), "axes": list(pic.axes),
            "points": len(pic.points), "arrows": len(pic.arrows), "tiles": len(pic.tiles),
            "parallel": list(pic.parallel_loops)}


def cmd_explain(args) -> int:
    from .schedule.explain import explain
    _check_explain_options(args)
    if getattr(args, "shapes", None):
        return _explain_graph(args)
    program, sizes = _load(args)
    config = _config(args)
    schedule = _user_schedule(args, program, config)
    low = gpu = None
    tuning = ""
    if schedule is None and config.target == "c" and config.use_tuned:
        from .tune.use import tuned_schedule
        schedule, tuning = tuned_schedule(program, config)
        if isinstance(schedule, dict):      # the automatic schedule with other options
            from .tune.space import auto_config
            config, schedule = auto_config(schedule, config), None
    if config.target == "cuda":
        gpu = _gpu_lowered(program, config, schedule)
        if schedule is None:
            schedule = gpu.as_schedule()
    elif schedule is None:
        schedule, low = _automatic_schedule(program, config)
    drawn = _plot(args, schedule, sizes) if args.plot else None
    result = explain(schedule, as_json=args.json, config=config, sizes=sizes or None)
    if gpu is not None:
        from .lowered import with_mapping
        result = with_mapping(result, gpu, emulated=config.emulate)
    else:
        from .pipeline import with_notes
        result = with_notes(result, low)
    if tuning:
        if args.json:
            result["tuning"] = tuning
        else:
            result = f"{result}\n{tuning}\n"
    if args.json:
        if drawn is not None:
            result["plot"] = drawn
        print(json.dumps(result, indent=2))
    else:
        print(result, end="")
        if drawn is not None:
            print(f"picture: {drawn['path']} ({', '.join(drawn['statements'])}: "
                  f"{drawn['points']} points, {drawn['arrows']} dependence arrows, "
                  f"{drawn['tiles']} tile(s))")
    return 0


def cmd_einsum(args) -> int:
    from . import testing
    from .einsum_call import einsum
    shapes = _parse_shapes(args.shapes)
    rng = np.random.default_rng(args.seed)
    from .ir import numpy_dtype
    ops = [rng.uniform(-1, 1, size=s).astype(numpy_dtype(args.dtype or "float32"))
           for s in shapes]
    config = _config(args)
    t0 = time.perf_counter()
    got = einsum(args.subscripts, *ops, config=config)
    compile_s = time.perf_counter() - t0
    report: dict = {"subscripts": args.subscripts.strip(), "shapes": [list(s) for s in shapes],
                    "def": "einsum", "sizes": {}, "threads": _threads(),
                    "compile_s": compile_s}
    status = 0
    if args.check:
        from .frontend.einsum import parse
        if args.dtype in ("float16", "bfloat16"):
            # numpy sums half operands in half (and has no bfloat16 einsum):
            # the reference sums in float32 and rounds once, as polyc does
            want = np.asarray(np.einsum(args.subscripts, *[o.astype(np.float32) for o in ops])
                              ).astype(ops[0].dtype)
        else:
            want = np.asarray(np.einsum(args.subscripts, *ops))
        max_abs, max_rel = testing.max_errors(np.asarray(got), want)
        spec = parse(args.subscripts, shapes)
        red = int(np.prod([spec.label_sizes[x] for x in spec.reduction_labels], dtype=np.int64))
        try:
            testing.assert_close(np.asarray(got), want, dtype=str(want.dtype),
                                 reduction_length=red, name="out")
            ok = True
        except AssertionError:
            ok = False
        status = 0 if ok else 1
        report["check"] = {"passed": ok, "outputs": {"out": {
            "max_abs": max_abs, "max_rel": max_rel, "ok": ok,
            "rel_to_max": testing.error_relative_to_max(max_abs, want),
            "shape": list(np.shape(got))}}}
    if args.bench:
        polyc_s = _time(lambda: einsum(args.subscripts, *ops, config=config))
        numpy_s = _time(lambda: np.einsum(args.subscripts, *ops, optimize=True))
        report["bench"] = {"polyc_s": polyc_s, "numpy_s": numpy_s,
                           "speedup_vs_numpy": numpy_s / polyc_s if polyc_s else None}
    _print_report(report, args.json)
    return status


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="polyc", description="polyc: a polyhedral compiler for tensor programs "
        "(Tensor Comprehensions, einsum, Python loop nests) to OpenMP C and CUDA.")
    ap.add_argument("--version", action="version", version=f"polyc {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("file", help="a .tc source file, or a .py file with a "
                                    "@polyc.kernel function (compile and explain)")
        p.add_argument("--def", dest="def_name", help="the definition to use")
        p.add_argument("--sizes", help="sizes, e.g. M=128,K=1024 (override '# sizes:')")
        p.add_argument("--dtype", choices=("float32", "float64", "float16", "bfloat16"),
                       help="element type of floating-point arguments")

    def scheduling(p):
        p.add_argument("--schedule", metavar="RECIPE.json",
                       help="use this recipe (polyc.Schedule.to_json) instead of the "
                       "automatic schedule")
        p.add_argument("--fusion", choices=FUSION_STRATEGIES,
                       help="fusion strategy of the automatic schedule (Config.fusion)")
        p.add_argument("--no-skewing", action="store_true",
                       help="no loop skewing in the automatic schedule "
                       "(Config.allow_skewing=False)")
        p.add_argument("--no-outer-coincidence", action="store_true",
                       help="do not ask isl to keep the outermost loop parallel "
                       "(Config.outer_coincidence=False)")
        p.add_argument("--no-tensorize", action="store_true",
                       help="keep contractions as loops instead of calls of the GEMM "
                       "intrinsic (Config.tensorize=False)")
        p.add_argument("--row-block", type=int, metavar="N",
                       help="rows per block of a row-blocked chain through GEMM calls "
                       "such as attention (Config.row_block; 0: automatic, 1: off)")
        p.add_argument("--triangle-rows", type=int, metavar="N",
                       help="rows of C per GEMM call over a triangular domain, its "
                       "diagonal edge left to loops (Config.triangle_rows; 0: automatic: a "
                       "band of its box is one call over the band; 1: off)")
        gpu(p)

    def gpu(p):
        p.add_argument("--target", choices=("c", "cuda"),
                       help="generate C/OpenMP (default) or CUDA (Config.target)")
        p.add_argument("--emulate", action="store_true",
                       help="--target cuda, run on the CPU emulator (Config.emulate)")
        p.add_argument("--gpu-block", metavar="Y,X",
                       help="with --target cuda: threads per block per mapped loop, "
                       "innermost last (Config.gpu_block)")

    run = sub.add_parser("run", help="compile, run on seeded random inputs, check, time")
    common(run)
    scheduling(run)
    run.add_argument("--check", action="store_true",
                     help="compare with an independent numpy evaluation")
    run.add_argument("--bench", action="store_true", help="median times vs numpy")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--seed", type=seed_arg, default=0)
    run.set_defaults(func=cmd_run)

    comp = sub.add_parser("compile", help="print a stage of the compilation")
    common(comp)
    scheduling(comp)
    comp.add_argument("--emit", choices=("program", "deps", "schedule", "loopnest",
                                         "recipe", "ast", "c", "cuda"), default="c",
                      help="schedule: the tree with loop names; loopnest: the loops it "
                      "produces; recipe: the transformations as JSON")
    comp.set_defaults(func=cmd_compile)

    exp = sub.add_parser("explain", help="explain the schedule: carried dependences, "
                         "parallel and vector loops, fusion, tile footprints")
    common(exp)
    scheduling(exp)
    exp.add_argument("--json", action="store_true", help="print one JSON object")
    exp.add_argument("--shapes", help="with a .py file: trace the numpy function --def "
                     "on arrays of these shapes (e.g. 8x512x64,8x512x64) and explain its "
                     "fusion plan")
    exp.add_argument("--seed", type=seed_arg, default=0)
    exp.add_argument("--plot", metavar="OUT.png",
                     help="also draw the schedule at the sizes into OUT.png or OUT.svg "
                     "(needs matplotlib: pip install \"polyc[plot]\")")
    exp.add_argument("--statement", help="with --plot: the statement (or tensor) to draw")
    exp.add_argument("--band", metavar="C.m",
                     help="with --plot: draw the points of the band of this loop")
    exp.add_argument("--fix", metavar="k=0", help="with --plot: hold these loops at a value")
    exp.add_argument("--color", choices=("order", "wavefront"), default="order",
                     help="with --plot: colour points by execution order or wavefront")
    exp.add_argument("--dpi", type=float, default=100, help="with --plot: resolution")
    exp.set_defaults(func=cmd_explain)

    ein = sub.add_parser("einsum", help="run an einsum on random operands")
    ein.add_argument("subscripts", help="numpy einsum subscripts, e.g. 'ij,jk->ik'")
    ein.add_argument("--shapes", required=True, help="operand shapes, e.g. 128x64,64x32")
    ein.add_argument("--dtype", choices=("float32", "float64", "float16", "bfloat16"),
                     default="float32")
    ein.add_argument("--check", action="store_true", help="compare with numpy.einsum")
    ein.add_argument("--bench", action="store_true", help="median times vs numpy.einsum")
    ein.add_argument("--json", action="store_true", help="print one JSON object")
    ein.add_argument("--seed", type=seed_arg, default=0)
    gpu(ein)
    ein.set_defaults(func=cmd_einsum)

    from .tune.cli import add_parser as add_tune_parser
    add_tune_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_arrow_subscripts(argv))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            status = args.func(args)
            sys.stdout.flush()      # a full disk under > FILE fails here, or at exit
            return status
    except PolycError as e:
        print(f"polyc: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        print("polyc: error: out of memory (the sizes need more memory than this machine "
              "gives; use smaller --sizes or --shapes)", file=sys.stderr)
        return 2
    except BrokenPipeError:         # stdout closed early (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:  # an internal error: say so, briefly
        if _output_failed(e):
            return 2
        if os.environ.get("POLYC_DEBUG") == "1":
            raise
        print(f"polyc: internal error: {type(e).__name__}: {e}\n"
              "(this is a polyc bug; rerun with POLYC_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
