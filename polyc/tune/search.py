"""``polyc.tune``: search the schedule recipes of a program for the fastest on
this machine, and record the result.

The search, in order (:func:`tune`):

1. **Space.** From each starting tree (isl's scheduler, the source order;
   with and without reassociating reductions), the knobs of
   :mod:`polyc.tune.space` per outermost band; a random sample of the
   combinations when the space is larger than the budget's.
2. **Rank.** Every sampled candidate is scored by the analytical model
   (:mod:`polyc.tune.model`), summed over the tuning sizes.
3. **Prune.** In rank order, each candidate is built as a checked
   :class:`polyc.Schedule`; the ones the schedule language refuses
   (``illegal``: a dependence broken, with its witness; ``inapplicable``) are
   counted and dropped before anything is compiled, and candidates whose
   tree equals one already kept are dropped as duplicates, until the
   budget's number of legal candidates is reached.  Variants of the
   automatic schedule itself (``Config`` options: the source order
   untransformed, time tiling, maximal or no fusion, no tensorization;
   :func:`polyc.tune.space.auto_variants`) join them, and so do
   perturbations of the automatic schedule's recipe (a tile size halved or
   doubled, a step dropped; :mod:`polyc.tune.autorecipe`), replayed and
   checked step by step like the others.
4. **Measure.** The automatic schedule (the default) and the legal
   candidates are compiled in parallel by the executor, checked once each in
   a child process against the reference evaluator, and timed round-robin
   against the default (:mod:`polyc.tune.measure`).  A candidate wins only
   when its median per-round ratio beats the incumbent by more than the
   noise measured in the same run (``max(MIN_WIN, 2 x noise)``).
5. **Local search.** The neighbours of the best (one knob changed) are
   ranked by the model, pruned the same way, and measured against the
   incumbent, while the budget lasts.  When the best is the default or a
   perturbation of its recipe, the neighbours are that recipe's.
6. **Record.** Every sample and failure, and the session's best, go to the
   tuning database (:mod:`polyc.tune.db`) as soon as they are measured, so an
   interrupted session keeps what it measured.  ``polyc.compile`` then uses
   the best recipe of the program (``Config.use_tuned``).
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PolycError
from . import autorecipe, feasible, model, space
from .db import ALL_SIZES, key_info, key_of
from .measure import decide
from .sizes import resolve_program, sizes_list  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

#: A win must beat the incumbent by at least this fraction.
MIN_WIN = 0.02


@dataclass(frozen=True)
class Budget:
    """How much a session may do: wall ``seconds``, ``measured`` candidates,
    ``sampled`` candidates ranked by the model, ``first`` candidates of the
    model measured in the first batch, ``neighbours`` per local-search
    step, ``batch``: the first batch's size with the variants of the
    automatic schedule (at most :data:`MAX_AUTO` of them; the model's
    candidates make room for them, down to two)."""
    seconds: float
    measured: int
    sampled: int
    first: int
    neighbours: int
    batch: int = 10


BUDGETS = {"quick": Budget(seconds=60, measured=12, sampled=3000, first=6, neighbours=2,
                           batch=10),
           "max": Budget(seconds=600, measured=60, sampled=20000, first=12, neighbours=4,
                         batch=16)}
#: Variants of the automatic schedule measured per session.
MAX_AUTO = 4
#: Shares of a session's seconds that ranking by the model, and choosing the
#: first batch's legal candidates, may take (the rest builds and measures).
RANK_SHARE = 0.1
ADMIT_SHARE = 0.35


def budget_of(spec) -> Budget:
    """``"quick"``, ``"max"`` or a number of seconds (the ``"max"`` limits
    otherwise).  Raises :class:`PolycError` for anything else."""
    if isinstance(spec, Budget):
        return spec
    if isinstance(spec, str) and spec in BUDGETS:      # (a list is not hashable)
        return BUDGETS[spec]
    try:
        if isinstance(spec, (bool, np.bool_)):      # True is not one second
            raise TypeError(spec)
        seconds = float(spec)
    except (TypeError, ValueError):
        raise PolycError(f"budget {spec!r}: choose quick, max or a number of seconds") from None
    if not 0 < seconds < math.inf:
        raise PolycError(f"budget {spec!r}: the number of seconds must be positive and finite")
    b = BUDGETS["max"]
    # a short budget ranks fewer samples: the model's cost of one is about
    # 0.2 ms, and ranking takes at most RANK_SHARE of the seconds anyway
    sampled = min(b.sampled, max(1000, int(500 * seconds)))
    return Budget(seconds, b.measured, sampled, b.first, b.neighbours, b.batch)


@dataclass
class Trial:
    """One candidate: ``label``, ``knobs`` (JSON; ``None`` for the default),
    ``recipe`` (``None`` for the default), ``model`` (modelled seconds),
    ``status`` (``"measured"``, ``"failed"``, ``"illegal"``,
    ``"inapplicable"``, ``"duplicate"``, ``"unmeasured"``), ``ratio`` (median
    time relative to the default, geometric mean over the sizes),
    ``seconds`` (median per call, per sizes), ``reason``."""
    label: str
    knobs: dict | None
    recipe: dict | None
    model: float | None = None
    status: str = "unmeasured"
    ratio: float | None = None
    seconds: dict = field(default_factory=dict)
    reason: str = ""


@dataclass
class TuneResult:
    """What :func:`tune` found.  ``best`` is a :class:`Trial` (the default
    when nothing beat it by more than the noise); ``speedup`` is
    ``1 / best.ratio``; ``pruned`` counts refused candidates by kind;
    ``history`` holds ``(seconds, measured, best ratio)`` after each
    measurement batch; ``note`` says why the default was kept, if it was."""
    program: str
    key: str
    sizes: list
    best: Trial
    trials: list
    pruned: dict
    measured: int
    failed: int
    seconds: float
    noise: float
    history: list
    database: str
    note: str = ""
    #: the shape classes tuned (:class:`polyc.tune.classes.ClassOutcome`)
    classes: list = field(default_factory=list)

    @property
    def recipe(self) -> dict | None:
        """The best recipe (``None``: the automatic schedule)."""
        return self.best.recipe

    @property
    def speedup(self) -> float:
        return 1.0 / self.best.ratio if self.best.ratio else 1.0

    def to_json(self) -> dict:
        return {"program": self.program, "key": self.key, "sizes": self.sizes,
                "best": vars(self.best), "speedup": self.speedup, "pruned": self.pruned,
                "measured": self.measured, "failed": self.failed, "seconds": self.seconds,
                "noise": self.noise, "history": self.history, "database": self.database,
                "note": self.note, "trials": [vars(t) for t in self.trials],
                "classes": [c.to_json() for c in self.classes]}

    def report(self, explain: bool = False) -> str:
        """A text summary; ``explain`` adds every pruned candidate's reason."""
        lines = [f"{self.program}: best {self.best.label} — {self.speedup:.2f}x the default "
                 f"({self.measured} measured, {self.failed} failed, "
                 f"{sum(self.pruned.values())} pruned"
                 + "".join(f"{', ' if i else ': '}{n} {k}"
                           for i, (k, n) in enumerate(sorted(self.pruned.items())))
                 + f"; {self.seconds:.1f} s; noise {100 * self.noise:.1f}%)"]
        if self.note:
            lines.append(f"  note: {self.note}")
        for c in self.classes:
            lines.append(f"  class {c.text}: {c.describe()}")
        for t in sorted((t for t in self.trials if t.status == "measured"),
                        key=lambda t: t.ratio):
            score = f"{t.model:9.3g}" if t.model is not None else "        -"
            lines.append(f"  {t.ratio:6.3f}  model {score}  {t.label}")
        for t in self.trials:
            if t.status == "failed" or (explain and t.status in
                                        ("illegal", "inapplicable", "duplicate")):
                lines.append(f"  {t.status:12s} {t.label}: {t.reason}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


class _Session:
    """The state of one tuning session (see :func:`tune`)."""

    def __init__(self, program, sizes, budget, executor, db, config, seed, progress, faults,
                 shape_class: str = ALL_SIZES):
        self.program, self.sizes, self.budget = program, sizes, budget
        self.executor, self.db, self.config = executor, db, config
        self.seed, self.faults = seed, faults or {}
        self.t0 = time.monotonic()
        self.info = key_info(program, config, shape_class)
        self.key = key_of(self.info)
        self.trials: list[Trial] = []
        self.pruned: dict[str, int] = {}
        self.trees: set[str] = set()
        self.history: list = []
        self.noise = 0.0
        self.measured = 0
        self.bar = progress

    # ---------------------------------------------------------------- space
    def analyse(self):
        from ..schedule.language import Schedule
        self.bases, self.infos, self.choices, self.feasible = {}, {}, {}, {}
        self._cost_memo: dict[str, list[dict]] = {}     # model.cost's, per start and sizes
        for start in ("isl", "source"):
            try:
                base = Schedule.from_program(self.program, start=start)
            except PolycError as e:
                log.info("start %s: %s", start, e)
                continue
            self.bases[start] = base
            self.infos[start] = [space.analyse(base, s) for s in self.sizes]
            # the knobs the schedule language can accept at all, per reassociation
            probed = feasible.probe(self.program, base, self.infos[start][0], start)
            for r, fs in probed.items():
                self.feasible[(start, r)] = fs
                if r and feasible.repeats(self.infos[start][0], probed):
                    continue            # its candidates would repeat the others
                # a lone band's tensorized tree (the bands below it untouched)
                # is the same with reassociation
                lone = sum(b.parent is None for b in self.infos[start][0]) == 1
                self.choices[(start, r)] = [
                    feasible.choices(b, f, not (r and lone and b.parent is None))
                    for b, f in zip(self.infos[start][0], fs)]

    def ranked(self, rng: random.Random) -> list[tuple[float, space.Knobs]]:
        pools = {(st, r): self.choices[(st, r)] for st, r in space.starts(self.program)
                 if (st, r) in self.choices}
        cands = list(dict.fromkeys(
            space.normalise(k, self.infos[k.start][0])
            for k in space.sample(rng, pools, self.budget.sampled)
            if not space.nested_parallel(k, self.infos[k.start][0])))
        # the GEMM intrinsic is one knob among thousands of a band's: a random
        # sample missed isl's tensorize(gemm) of a batched matmul; each pool's
        # tensorized candidate (its other bands untransformed) is always ranked,
        # first (before the ranking's share of the budget can run out)
        for (st, r), bands in pools.items():
            gemm = tuple(next((c for c in cs if c.tensorize), cs[0]) for cs in bands)
            k = space.normalise(space.Knobs(st, gemm, r), self.infos[st][0])
            if any(c.tensorize for c in gemm):
                cands = [k] + [c for c in cands if c != k]
        # the samples come in random order: those ranked before the ranking's
        # share of the budget runs out are a random subset of them
        scored = []
        for k in cands:
            if len(scored) >= 64 and self.out_of_time(RANK_SHARE):
                log.info("ranked %d of %d samples within %.0f%% of the budget",
                         len(scored), len(cands), 100 * RANK_SHARE)
                break
            scored.append((self.cost(k), k))
        return sorted(scored, key=lambda x: x[0])

    def cost(self, k: space.Knobs) -> float:
        """The model's time of ``k`` summed over the sizes; ``inf`` for a
        start with no tunable band (the source order of a single loop):
        the model costs only the statements of tuned bands, so such a
        candidate would cost 0 and rank first; it is listed unscored, last."""
        if not any(self.infos[k.start]):
            return math.inf
        memo = self._cost_memo.setdefault(k.start, [{} for _ in self.infos[k.start]])
        return sum(model.cost(k, infos, memo=m) for infos, m in zip(self.infos[k.start], memo))

    def legal(self, ranked, want: int, share: float = 1.0) -> list[Trial]:
        """The first ``want`` legal, distinct candidates of ``ranked``, as
        many as are found within ``share`` of the budget's seconds."""
        return self._admit(((Trial(k.label(), k.to_json(), None,
                                   None if math.isinf(score) else score),
                             lambda k=k: space.build(self.program, k, self.infos[k.start][0],
                                                     base=self.bases[k.start]))
                            for score, k in ranked), want, share)

    def legal_recipes(self, items, want: int) -> list[Trial]:
        """The first ``want`` legal, distinct recipes of ``items``
        (``(label, recipe)`` pairs: perturbations of the automatic recipe,
        :mod:`polyc.tune.autorecipe`), pruned like :meth:`legal`."""
        return self._admit(((Trial(label, None, None, None),
                             lambda r=recipe: autorecipe.build(self.program, r))
                            for label, recipe in items), want)

    def _admit(self, candidates, want: int, share: float = 1.0) -> list[Trial]:
        """Build each ``(trial, build)`` until ``want`` are legal and
        distinct: a refused one is counted by kind, one whose tree equals a
        kept one's is a duplicate; the kept ones get their recipe."""
        out = []
        for t, build in candidates:
            if len(out) >= want or self.out_of_time(share):
                break
            self.trials.append(t)
            try:
                s = build()
            except space.Refused as e:
                t.status, t.reason = e.kind, f"{e.step}: {e.reason}"
                self.pruned[e.kind] = self.pruned.get(e.kind, 0) + 1
                continue
            text = s.to_text()
            if text in self.trees:
                t.status, t.reason = "duplicate", "the same tree as a candidate already kept"
                self.pruned["duplicate"] = self.pruned.get("duplicate", 0) + 1
                continue
            self.trees.add(text)
            t.recipe = s.to_recipe()
            out.append(t)
        return out

    def out_of_time(self, share: float = 1.0) -> bool:
        """Whether ``share`` of the budget's seconds has passed."""
        return time.monotonic() - self.t0 > share * self.budget.seconds

    def deadline(self) -> float:
        """The session's end as a wall-clock time (``time.time()``: build and
        measurement tasks may run in other processes and on other machines)."""
        return time.time() + self.budget.seconds - (time.monotonic() - self.t0)

    # ---------------------------------------------------------- measuring
    def run(self, incumbent: Trial, challengers: list[Trial]) -> list[Trial]:
        """Build, check and time ``challengers`` against ``incumbent``;
        updates each trial and records it.  Returns the measured ones."""
        payload = {"program": self.program, "config": self.config}
        end = self.deadline()
        builds = self.executor.build([{**payload, "recipe": t.recipe, "deadline": end,
                                       "fault": self.faults.get("build")}
                                      for t in challengers])
        ok = []
        for t, b in zip(challengers, builds):
            if b["ok"]:
                ok.append(t)
            elif b.get("skipped"):
                t.reason = b["error"]           # stays "unmeasured"
            else:
                t.status, t.reason = "failed", b["error"]
        recipes = [incumbent.recipe] + [t.recipe for t in ok]
        # injected failures (tests): by position among the first batch's challengers
        faults = {} if self.history else {
            i + 1: self.faults[challengers.index(t)] for i, t in enumerate(ok)
            if challengers.index(t) in self.faults}
        remaining = max(1.0, self.budget.seconds - (time.monotonic() - self.t0))
        res = self.executor.measure({
            **payload, "recipes": recipes, "checked": [0] if incumbent.status == "measured"
            else [], "sizes": self.sizes, "seed": self.seed, "faults": faults,
            "deadline_s": remaining, "deadline": end,
            "check_timeout": self.faults.get("timeout")})
        failures = {int(i): why for i, why in res["failures"].items()}
        for i in res.get("skipped", ()):
            ok[int(i) - 1].reason = "not checked: the budget ran out"   # "unmeasured"
        if 0 in failures:
            incumbent.status, incumbent.reason = "failed", failures[0]
            raise PolycError(f"the incumbent {incumbent.label} failed its check: "
                             f"{failures[0]}")
        measured = []
        for i, t in enumerate(ok, 1):
            if i in failures:
                t.status, t.reason = "failed", failures[i]
        logs = []
        noise = []
        for sizes_text, rounds in res["rounds"].items():
            # columns: the measured indices in order (the incumbent first), then the
            # incumbent again
            ratios, nz = decide(rounds)
            noise.append(nz)
            inc_secs = sorted(r[0] for r in rounds)[len(rounds) // 2]
            incumbent.seconds.setdefault(sizes_text, inc_secs)
            for pos, i in enumerate(res["measured"]):
                if i == 0:
                    continue
                t = ok[i - 1]
                t.seconds[sizes_text] = inc_secs * ratios[pos]
                logs.append((t, math.log(ratios[pos])))
        self.noise = max([self.noise] + noise)
        per: dict[int, list[float]] = {}
        for t, lr in logs:
            per.setdefault(id(t), []).append(lr)
        for t in ok:
            if t.status == "failed" or id(t) not in per:
                continue
            rel = math.exp(sum(per[id(t)]) / len(per[id(t)]))
            t.ratio = rel * (incumbent.ratio or 1.0)
            t.status = "measured"
            measured.append(t)
        self.measured += len(measured)
        self.record(challengers)
        best = min([t.ratio for t in self.trials if t.status == "measured"] + [1.0])
        self.history.append((time.monotonic() - self.t0, self.measured, best))
        if self.bar is not None:
            self.bar.update(len(challengers))
        return measured

    def record(self, trials: list[Trial]) -> None:
        recs = []
        for t in trials:
            base = {"key": self.key, "keyinfo": self.info, "label": t.label,
                    "recipe": t.recipe, "knobs": t.knobs, "sizes": self.sizes}
            if t.status == "measured":
                recs.append({**base, "kind": "sample", "ratio": t.ratio,
                             "seconds": t.seconds, "model": t.model})
            elif t.status == "failed":
                recs.append({**base, "kind": "failure", "reason": t.reason})
        if recs and self.db is not None:
            self.db.append(recs)

    def accept(self, incumbent: Trial, measured: list[Trial]) -> Trial:
        threshold = max(MIN_WIN, 2 * self.noise)
        wins = [t for t in measured if t.ratio < (incumbent.ratio or 1.0) * (1 - threshold)]
        return min(wins, key=lambda t: t.ratio) if wins else incumbent


def run_session(program, sizes, b: Budget, ex, db, config, seed, progress, faults=None, *,
                shape_class: str = ALL_SIZES, seeds: list | None = None,
                label: str = "") -> TuneResult:
    """One tuning session of ``program`` (whose preconditions may narrow it to
    ``shape_class``) at ``sizes``: the steps of the module docstring.
    ``seeds``: knobs measured in the first batch whatever their rank."""
    bar = None
    if progress or (progress is None and sys.stderr.isatty()):
        try:
            from tqdm import tqdm
            bar = tqdm(total=b.measured, desc=f"tuning {label or program.name}", unit="cand",
                       leave=False)
        except ImportError:
            bar = None
    s = _Session(program, sizes, b, ex, db, config, seed, bar, faults, shape_class)
    default = Trial("default (automatic schedule)", None, None, None)
    s.trials.append(default)
    note = ""
    try:
        s.analyse()
        rng = random.Random(seed)
        ranked = s.ranked(rng)
        if seeds:       # the neighbour's best, where this tree has the same bands
            ranked = [(s.cost(k), k) for k in seeds if _fits(k, s.infos.get(k.start))] + ranked
        autos = space.auto_variants(program)[:MAX_AUTO]
        # the automatic schedule's own knobs: its recipe with one knob changed
        # (not for a shape class: its tree carries the class's constraints,
        # and a version's recipe must replay on the generic program)
        auto = _automatic_recipe(program, config) if shape_class == ALL_SIZES else None
        n_rec = max(1, b.first // 3) if auto is not None else 0
        first = s.legal(ranked, max(0, min(b.first, b.measured - n_rec,
                                           max(2, b.batch - len(autos) - n_rec))),
                        ADMIT_SHARE)
        # the automatic pipeline's own options (Config) as candidates too
        for opts in autos[:max(0, b.measured - len(first) - n_rec)]:
            label = "auto: " + ", ".join(f"{k}={v}" for k, v in opts.items())
            first.append(Trial(label, None, space.auto_recipe(opts), None))
            s.trials.append(first[-1])
        if auto is not None:
            s.trees.add(autorecipe.build(program, auto).to_text())
            first += s.legal_recipes(autorecipe.neighbours(auto),
                                     max(0, min(n_rec, b.measured - len(first))))
        best = default
        if s.out_of_time():
            note = (f"the budget ({b.seconds:g} s) ran out before anything was measured; "
                    f"the default schedule stays")
        elif not first:
            note = "no legal candidate in the space"
        else:
            measured = s.run(default, first)
            default.status, default.ratio = "measured", 1.0
            best = s.accept(default, measured)
            tried = {json.dumps(t.knobs, sort_keys=True) for t in s.trials if t.knobs}
            tried |= {t.label for t in s.trials if t.label.startswith("auto recipe")}
            while not s.out_of_time() and s.measured < b.measured:
                want = min(b.neighbours, b.measured - s.measured)
                if best.knobs:
                    k = knobs_from_json(best.knobs)
                    near = [(s.cost(n), n) for n in space.neighbours(
                        k, {st: i[0] for st, i in s.infos.items()},
                        space.has_reduction(program))
                        if json.dumps(n.to_json(), sort_keys=True) not in tried
                        and (n.start, n.reassociate) in s.choices
                        and feasible.admitted(n, s.feasible)]
                    for _, n in near:
                        tried.add(json.dumps(n.to_json(), sort_keys=True))
                    near.sort(key=lambda x: x[0])
                    step = s.legal(near, want)
                elif auto is not None and (best is default
                                           or best.label.startswith("auto recipe")):
                    # around the automatic schedule, or the perturbation of it
                    # that won: its recipe with one more knob changed
                    base = auto if best is default else best.recipe
                    near = [(label, r) for label, r in autorecipe.neighbours(base)
                            if label not in tried]
                    tried |= {label for label, _ in near}
                    step = s.legal_recipes(near, want)
                else:
                    break
                if not step:
                    break
                new_best = s.accept(best, s.run(best, step))
                if new_best is best:
                    break
                best = new_best
    except KeyboardInterrupt:
        log.warning("tuning of %s interrupted; %d measured candidates are recorded",
                    program.name, s.measured)
        raise
    finally:
        if bar is not None:
            bar.close()
    if best is default and not note and not s.measured and s.out_of_time():
        note = (f"the budget ({b.seconds:g} s) ran out before a candidate was measured; "
                f"the default schedule stays")
    if best is default and not note:
        note = (f"no candidate beat the default by more than "
                f"{100 * max(MIN_WIN, 2 * s.noise):.1f}% (the noise threshold)")
    failed = sum(1 for t in s.trials if t.status == "failed")
    # a best only when a candidate was measured or failed: a session whose budget
    # ran out before that decided nothing, and its record would hide an earlier best
    if (db is not None and default.status == "measured" and shape_class == ALL_SIZES
            and (s.measured or failed)):
        db.append([{"key": s.key, "keyinfo": s.info, "kind": "best", "label": best.label,
                    "recipe": best.recipe, "knobs": best.knobs, "ratio": best.ratio,
                    "speedup": 1.0 / (best.ratio or 1.0), "sizes": sizes,
                    "default_seconds": default.seconds, "seconds": best.seconds}])
    return TuneResult(program.name, s.key, sizes, best, s.trials, dict(s.pruned), s.measured,
                      failed, time.monotonic() - s.t0, s.noise, s.history,
                      str(db.path) if db is not None else "", note)


def _automatic_recipe(program, config) -> dict | None:
    """The automatic schedule's recipe (:func:`polyc.tune.autorecipe.automatic`),
    ``None`` when there is none or it cannot be computed."""
    try:
        return autorecipe.automatic(program, config)
    except PolycError as e:
        log.info("no automatic recipe for %s: %s", program.name, e)
        return None


def _fits(k: space.Knobs, infos) -> bool:
    """Whether knobs made for another tree apply to the bands ``infos``."""
    if not infos or len(infos[0]) != len(k.bands):
        return False
    # (a band below a tensorized one has no knobs: space.UNTOUCHED)
    return all(len(b.order) in (0, len(i.names)) for b, i in zip(k.bands, infos[0]))


def knobs_from_json(data: dict) -> space.Knobs:
    return space.Knobs(data["start"], tuple(space.BandKnobs(
        tuple(b["order"]), tuple(b["tiles"]), b["parallel"], b["vectorize"], b["unroll"],
        b.get("tensorize", False))
        for b in data["bands"]), data["reassociate"])
