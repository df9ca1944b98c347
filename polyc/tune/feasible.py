"""Which knobs of a tuned band can apply at all: probed once per band on the
starting tree, before candidates are sampled.

:func:`polyc.tune.space.band_choices` generates knobs by rules that do not
look at dependences: a ``parallel`` mark on whichever member the order puts
outermost, a ``simd`` mark on whichever it puts innermost, the GEMM
``tensorize`` knob on any band with a reduction update of three iterators.
Many of those can never be legal: a parallel mark on the reduction loop
``k`` of a matrix product, a simd mark on matvec's ``j`` while the band also
runs the initialisation ``S0_init`` (``vectorize`` takes a reduction loop
only when it scans one update and nothing else), ``tensorize`` on a source
order band below a loop that scans the product's rows.  Proposed anyway,
they fill the model's ranking (their modelled time is the best) and are
refused one by one before anything is compiled, crowding out legal ones.

:func:`probe` asks the schedule language itself, once per band and knob:
the band in its own order with the member in question moved outermost
(``parallel``) or innermost (``vectorize``), untiled; ``tensorize(band,
"gemm")`` (the intrinsic matcher's own check).  The legality of a parallel
mark depends on the set of loops outside it, and that of a simd mark on the
set of loops outside the innermost one, not on their order or tiling, so a
refused probe stands for every candidate with that member there.  Every
candidate is still checked in full when it is built (:func:`polyc.tune.space.build`).
The refusals are kept as :attr:`Feasibility.notes` (``polyc tune --dry-run
--explain`` prints them as "not proposed").

Takes a :class:`polyc.Schedule` and the :class:`~polyc.tune.space.BandInfo`
of its tuned bands; returns one :class:`Feasibility` per band.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import PolycError
from . import space


@dataclass(frozen=True)
class Feasibility:
    """What the probes of one band found: ``parallel``: the members that may
    be the outermost loop with a parallel mark; ``simd``: the members that
    may be the innermost loop with a simd mark; ``tensorize``: whether the
    band matches the GEMM intrinsic; ``notes``: why the other knobs are not
    proposed, one line each (with reassociation: only the simd marks, the
    others do not depend on it); ``untileable``: the runs ``(first, last)``
    of members, in the band's own order, that cannot be tiled together
    (without reassociation: not permutable for the exact dependences, such
    as the source order's ``for k: for i`` of floyd-warshall)."""
    parallel: frozenset
    simd: frozenset
    tensorize: bool
    notes: tuple = ()
    untileable: frozenset = frozenset()


#: The "not proposed" line of a start whose reassociated candidates would
#: repeat the others (:func:`repeats`).
REDUNDANT = ("{start} reassoc: no candidates: every tuned band is permutable or one loop "
             "and reassociating makes no further simd mark legal, so they would repeat "
             "the candidates without it")


def _orders(info: space.BandInfo) -> list[int]:
    """The members a candidate's order may put outermost or innermost."""
    return list(range(len(info.names))) if info.permutable and \
        1 < len(info.names) <= space.MAX_PERMUTED else []


def _try(program, base, infos, i: int, band: space.BandKnobs) -> str:
    """The refusal of ``band`` as the ``i``-th band (the others untouched),
    ``""`` when the language accepts it."""
    bands = tuple(band if j == i else space.BandKnobs(tuple(range(len(x.names))),
                                                      (0,) * len(x.names))
                  for j, x in enumerate(infos))
    try:
        # (base is given: build reads no start off the knobs)
        space.build(program, space.Knobs(base.start, bands), infos, base=base)
    except space.Refused as e:
        return f"{e.kind}: {e.reason}"
    return ""


def probe(program, base, infos: list, start: str, reassociated=None) -> dict:
    """``{False: [Feasibility per band], True: [...]}`` of the starting tree
    ``base`` (a :class:`polyc.Schedule` of ``program``; ``infos``: its tuned
    bands, :func:`polyc.tune.space.analyse`), without and with reassociating
    reductions (``reassociated``: ``base.with_reassociation(True)``, built
    here when ``None``; the ``True`` entry is absent when the program has no
    reduction, or when the language refuses to reassociate this tree: the
    first band's notes say why).  A parallel mark's and the intrinsic's legality does not
    depend on reassociation (reduction dependences still forbid running the
    reduction loop in parallel); a simd mark's does, and one legal without
    it is legal with it."""
    out: dict = {}
    reduction = space.has_reduction(program)
    refused = ""
    if reduction and reassociated is None:
        try:
            reassociated = base.with_reassociation(True)
        except PolycError as e:     # (PolyBench ludcmp: it was the session's error)
            reduction = False
            refused = (f"{start} reassoc: no candidates: the starting tree cannot "
                       f"reassociate its reductions ({str(e).splitlines()[0]})")
    per_band = []
    for i, info in enumerate(infos):
        n = len(info.names)
        members = _orders(info) or [0]
        ident = tuple(range(n))
        par, par_notes = set(), []
        for m in members:
            order = (m,) + tuple(x for x in ident if x != m)
            why = _try(program, base, infos, i, space.BandKnobs(order, (0,) * n, parallel=True))
            if why:
                par_notes.append(f"no parallel candidates with {info.names[m]} outermost "
                                 f"({why})")
            else:
                par.add(m)
        simd: dict = {False: set(), True: set()}
        simd_notes: dict = {False: [], True: []}
        for m in ([] if info.below else (_orders(info) or [n - 1])):
            order = tuple(x for x in ident if x != m) + (m,)
            knobs = space.BandKnobs(order, (0,) * n, vectorize=True)
            why = _try(program, base, infos, i, knobs)
            if not why:
                simd[False].add(m)
                simd[True].add(m)
                continue
            simd_notes[False].append(f"no simd candidates with {info.names[m]} innermost "
                                     f"without reassociation ({why})")
            if reduction:
                why = _try(program, reassociated, infos, i, knobs)
                if why:
                    simd_notes[True].append(f"no simd candidates with {info.names[m]} "
                                            f"innermost with reassociation ({why})")
                else:
                    simd[True].add(m)
        tens, tens_notes = False, []
        if any(len(st.iterators) >= 3 and st.name in info.updates for st in info.statements):
            why = _try(program, base, infos, i, space.BandKnobs(ident, (0,) * n,
                                                                tensorize=True))
            tens = not why
            if why:
                tens_notes.append(f"no tensorize(gemm) candidate ({why})")
        runs, tile_notes = _untileable(program, base, infos, i)
        per_band.append((par, par_notes + tile_notes, simd, simd_notes, tens, tens_notes, runs))
    for r in ([False, True] if reduction else [False]):
        out[r] = [Feasibility(frozenset(par), frozenset(simd[r]), tens,
                              tuple(f"{start}{' reassoc' if r else ''}: band "
                                    f"({', '.join(info.names)}): {line}"
                                    for line in (simd_notes[r] if r else
                                                 par_notes + simd_notes[r] + tens_notes)),
                              untileable=frozenset() if r else runs)
                  for info, (par, par_notes, simd, simd_notes, tens, tens_notes, runs)
                  in zip(infos, per_band)]
    if refused and out[False]:
        out[False][0] = replace(out[False][0], notes=(refused,) + out[False][0].notes)
    return out


def _untileable(program, base, infos, i: int) -> tuple[frozenset, list]:
    """The runs of members of band ``i`` (positions in its own order, two
    or more) that the language refuses to tile together, and why: tiling
    needs the run permutable, whatever the sizes."""
    info = infos[i]
    n = len(info.names)
    runs, notes = set(), []
    for lo in range(n):
        for hi in range(lo + 1, n):
            if any(not [t for t in space.TILE_LADDER if t < info.trips[p]]
                   for p in range(lo, hi + 1)):
                continue            # no tile is proposed there anyway
            tiles = tuple(space.TILE_LADDER[0] if lo <= p <= hi else 0 for p in range(n))
            why = _try(program, base, infos, i, space.BandKnobs(tuple(range(n)), tiles))
            if why:
                runs.add((lo, hi))
                notes.append(f"no tiles over {', '.join(info.names[lo:hi + 1])} ({why})")
    return frozenset(runs), notes


def repeats(infos: list, probed: dict) -> bool:
    """Whether the candidates with reassociation would only repeat the trees
    of those without it (duplicates): on bands that are permutable (or one
    loop) tile and reorder are legal either way, so when the probes found
    the same simd marks (``probed``: :func:`probe`'s), reassociating changes
    no outcome."""
    return True in probed and all(
        info.permutable or len(info.names) == 1 for info in infos) and all(
        a.simd == b.simd for a, b in zip(probed[False], probed[True]))


def admits(band: space.BandKnobs, f: Feasibility) -> bool:
    """Whether the probes leave ``band``'s knobs possible."""
    if band.tensorize:
        return f.tensorize
    if band.parallel and band.order[0] not in f.parallel:
        return False
    tiled = [p for p, t in enumerate(band.tiles) if t]
    if (len(tiled) > 1 and list(band.order) == sorted(band.order)
            and (tiled[0], tiled[-1]) in f.untileable):
        return False
    return not (band.vectorize and band.order[-1] not in f.simd)


def choices(info: space.BandInfo, f: Feasibility, tensorize: bool = True
            ) -> list[space.BandKnobs]:
    """:func:`polyc.tune.space.band_choices` of ``info`` less those the
    probes ``f`` rule out (and the tensorize knob unless ``tensorize``: a
    lone band's tensorized tree is the same with reassociation, so the
    reassociated pool would only repeat it)."""
    return [c for c in space.band_choices(info) if admits(c, f)
            and (tensorize or not c.tensorize)]


def admitted(k: space.Knobs, feasible: dict) -> bool:
    """Whether every band of candidate ``k`` passes :func:`admits`
    (``feasible``: ``(start, reassociate)`` -> Feasibility per band; a
    start it does not hold is not filtered)."""
    addressed = [b for b in k.bands if b.order]        # (not space.UNTOUCHED)
    if k.reassociate and len(addressed) == 1 and addressed[0].tensorize:
        return False        # the tree without reassociation (see choices)
    fs = feasible.get((k.start, k.reassociate))
    return fs is None or all(admits(b, f) for b, f in zip(k.bands, fs))
