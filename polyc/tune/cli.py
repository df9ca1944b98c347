"""``polyc tune``: the tuner from the command line.

::

    polyc tune FILE.tc|FILE.py [--def NAME] --sizes M=512,N=512 [--sizes ...]
               [--classes lattice]
               [--budget quick|max|SECONDS] [--executor inline|pool|dask://HOST:PORT]
               [--seed N] [--json] [--dry-run [--count N]] [--explain]
    polyc tune --show [--json]
    polyc tune --export FILE | --import FILE

``--classes lattice`` groups the ``--sizes`` into shape classes
(:func:`polyc.tune.classes.lattice`) and tunes each: a class measured at least
10% faster than the generic version becomes a version of the kernel.
``--dry-run`` compiles nothing: it prints the candidates in the model's
order with their scores and whether the schedule language accepts them
(``--explain``: why each refused one was refused, and the knobs not
proposed; ``--json``: one object with ``candidates``, ``not_proposed`` and
``classes``).  ``--show`` lists the
database's keys and best records.
"""

from __future__ import annotations

import json
import sys

from ..cli_input import UsageError, _load, _parse_sizes, _show_warning, int_at_least, seed_arg


def add_parser(sub) -> None:
    p = sub.add_parser("tune", help="search schedule recipes for the fastest on this "
                       "machine and record it (polyc.tune)")
    p.add_argument("file", nargs="?", help="a .tc file, or a .py file with a "
                   "@polyc.kernel function")
    p.add_argument("--def", dest="def_name", help="the definition to tune")
    p.add_argument("--sizes", action="append",
                   help="tuning sizes, e.g. M=512,N=512,K=512 (repeat for several)")
    p.add_argument("--dtype", choices=("float32", "float64", "float16", "bfloat16"),
                   help="element type of floating-point arguments")
    p.add_argument("--classes", choices=("lattice",),
                   help="group the --sizes into shape classes and tune a version per class")
    p.add_argument("--budget", default="quick", help="quick (60 s), max (600 s) or seconds")
    p.add_argument("--executor", default="inline",
                   help="inline, pool (build on a process pool) or dask://HOST:PORT")
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--dry-run", action="store_true",
                   help="print the ranked candidates and the pruning; compile nothing")
    p.add_argument("--count", type=int_at_least(1), help="with --dry-run: how many (20)")
    p.add_argument("--explain", action="store_true",
                   help="say why each pruned candidate was pruned")
    p.add_argument("--show", action="store_true", help="list the tuning database")
    p.add_argument("--export", metavar="FILE", help="write the database's records to FILE")
    p.add_argument("--import", dest="import_", metavar="FILE",
                   help="add FILE's records to the database")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args) -> int:
    import warnings
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _cmd_tune(args)


def _cmd_tune(args) -> int:
    from .db import Database
    if args.show or args.export or args.import_:
        return _database(args, Database())
    if not args.file:
        raise UsageError("polyc tune: give a .tc or .py file (or --show)")
    size_texts = args.sizes or []
    program, header = _load(_Args(args, size_texts[0] if size_texts else None))
    sizes = [{**header, **_parse_sizes(t)} for t in size_texts] or [header]
    if not sizes[0] and any(p not in program.fixed_sizes for p in program.params):
        raise UsageError("polyc tune: give the tuning sizes with --sizes M=512,N=512,... "
                         "(or a '# sizes:' line in the file)")
    from .api import candidates, tune
    if args.count is not None and not args.dry_run:    # was ignored: a full session ran
        raise UsageError("polyc tune: --count says how many candidates --dry-run prints; "
                         "add --dry-run (the budget bounds a session: --budget)")
    if args.dry_run:
        notes: list[str] = []
        trials = candidates(program, sizes, budget=args.budget, seed=args.seed,
                            count=args.count or 20, notes=notes)
        groups = {}
        if args.classes:        # the classes a session would tune (not ranked per class)
            from .classes import requested
            from .sources import fill_extents  # (a .py program's B_dim0...: as tune does)
            groups = requested(program, [fill_extents(program, q) for q in sizes], args.classes)
        if args.json:       # everything the text prints, --explain's lines included
            doc = {"candidates": [vars(t) for t in trials], "not_proposed": notes,
                   "classes": groups}
            print(json.dumps(doc, indent=2, default=str))
            return 0
        for text, pts in groups.items():
            print(f"class {text}: sizes {pts}")
        for t in trials:
            why = f"  ({t.reason})" if args.explain and t.reason else ""
            score = f"{t.model:11.4g}" if t.model is not None else f"{'-':>11s}"
            print(f"{score}  {t.status:12s} {t.label}{why}")
        for line in notes if args.explain else ():
            print(f"not proposed: {line}")
        return 0
    result = tune(program, sizes, budget=args.budget, executor=args.executor,
                  seed=args.seed, progress=None if not args.json else False,
                  classes=args.classes)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=str))
    else:
        print(result.report(explain=args.explain))
        if result.measured or result.failed or result.classes:
            print(f"recorded in {result.database}")
        else:
            print("nothing was measured within the budget, so nothing was recorded")
    return 0


class _Args:
    """The attributes :func:`polyc.cli_input._load` reads."""

    def __init__(self, args, sizes):
        self.file, self.def_name, self.dtype, self.sizes = (
            args.file, args.def_name, args.dtype, sizes)


def _database(args, db) -> int:
    if args.import_:
        added, skipped = db.import_(args.import_)
        print(f"imported {added} record(s) into {db.path}; skipped {skipped}")
    if args.export:
        n = db.export(args.export)
        print(f"wrote {n} record(s) of {db.path} to {args.export}")
    if args.show:
        recs = db.records()
        keys: dict = {}
        for r in recs:
            k = keys.setdefault(r["key"], {"keyinfo": r["keyinfo"], "samples": 0,
                                          "failures": 0, "best": None})
            if r["kind"] == "sample":
                k["samples"] += 1
            elif r["kind"] == "failure":
                k["failures"] += 1
            else:
                k["best"] = {"label": r.get("label"), "speedup": r.get("speedup"),
                             "sizes": r.get("sizes"), "id": r["id"]}
                if "version" in r:          # a shape class's decision
                    k["best"]["version"] = r["version"]
        if args.json:
            print(json.dumps({"database": str(db.path), "keys": keys}, indent=2))
            return 0
        print(f"{db.path}: {len(recs)} record(s), {len(keys)} key(s)")
        for key, k in keys.items():
            info, best = k["keyinfo"], k["best"]
            cls = info.get("class", "all")
            where = f" [{cls}]" if cls != "all" else ""      # classes were told apart by key
            line = (f"  {key[:12]} {info.get('name', '?')}{where} on "
                    f"{info['machine'].get('cpu')} "
                    f"({k['samples']} samples, {k['failures']} failures)")
            if best:
                speedup = best.get("speedup")
                ratio = f"{speedup:.2f}x" if speedup is not None else "not measured"
                line += f": best {best['label']} ({ratio}) at {best['sizes']}"
                if "version" in best:
                    line += "; a version" if best["version"] else "; no version"
            print(line)
    sys.stdout.flush()
    return 0
