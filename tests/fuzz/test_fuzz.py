"""Differential fuzzer: random TC and einsum programs, compiled with the
default schedule and with Config variants, against numpy.

See ``fuzzgen.py`` for the generators and the check.  Each hypothesis
example is a batch of ``BATCH`` programs that the worker processes compile
and run in parallel; on a failure hypothesis shrinks the programs of the
batch to small ones, and the error message
ends with a ready-to-paste reproducer (TC source, sizes, dtype, config).

The default run is derandomized (reproducible in CI) and runs at least
``MIN_TC + MIN_EINSUM`` programs.  ``pytest --fuzz-long -m slow tests/fuzz``
runs the long mode: 10,000 TC and 5,000 einsum programs from a random seed
(``FUZZ_SEED`` fixes it; ``FUZZ_LONG_EXAMPLES`` changes the number of
batches); on failure hypothesis prints the seed and a ``@reproduce_failure``
blob.

``test_fresh_seeds`` (marked ``slow``: ``-m slow``, no ``--fuzz-long`` needed;
a plain run runs the first seed only, ``test_todays_first_seed``) runs the
long fuzzer on ``FUZZ_FRESH_SEEDS`` (default 3) seeds derived from today's
date (``FUZZ_DATE=YYYYMMDD`` replays another day's), ``FUZZ_FRESH_EXAMPLES``
(default 25) batches per kind and seed; it prints the seeds, and a failure
names the command that replays it.  ``docs/testing.md`` has the command for
many seeds in parallel on a bigger machine.  Every failure a fuzzer finds
stays as a regression test in ``test_known_bugs.py``.
"""

from __future__ import annotations

import datetime
import os

import fuzzgen
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

BATCH = 4
#: Default run: hypothesis examples (batches of exactly BATCH programs, so the
#: count does not depend on what hypothesis draws) and the programs they add up to.
#: (75 batches: the CI run of the whole suite must stay under 25 minutes on 2
#: cores; the long run and the fresh seeds below cover more)
TC_EXAMPLES, MIN_TC = 75, 300
EINSUM_EXAMPLES, MIN_EINSUM = 40, 160
#: Long run (--fuzz-long): batches per kind (10,000 TC and 5,000 einsum
#: programs); FUZZ_LONG_EXAMPLES overrides both.
LONG_TC_EXAMPLES = int(os.environ.get("FUZZ_LONG_EXAMPLES", 2500))
LONG_EINSUM_EXAMPLES = int(os.environ.get("FUZZ_LONG_EXAMPLES", 1250))
MAX_REJECTION_RATE = 0.40


def _fuzz(kind, strategy, runner, *, examples, long, seed_value=None):
    """Run ``examples`` batches; ``seed_value`` (long mode) fixes hypothesis's
    seed, else ``FUZZ_SEED`` does, else a random one."""
    label = kind + (" (long)" if long else "") + (
        f" (seed {seed_value})" if seed_value is not None else "")
    stats = fuzzgen.STATS.setdefault(label, fuzzgen.Stats())

    @settings(max_examples=examples, derandomize=not long, deadline=None, database=None,
              print_blob=True, suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(strategy, min_size=BATCH, max_size=BATCH))
    def check(batch):
        results = runner.map(batch)
        for r in results:
            stats.add(r)
        failures = [r for r in results if r.status == "fail"]
        if failures:
            raise AssertionError(f"{len(failures)} of {len(batch)} programs failed; the "
                                 f"first:\n{failures[0].message}")

    if long and seed_value is not None:
        check = seed(seed_value)(check)
    elif long and os.environ.get("FUZZ_SEED"):
        check = seed(int(os.environ["FUZZ_SEED"]))(check)
    check()
    return stats


def _check_totals(stats, minimum):
    assert stats.programs >= minimum, f"only {stats.programs} programs ran: {stats.line()}"
    rate = stats.rejected / stats.programs
    assert rate <= MAX_REJECTION_RATE, (
        f"{rate:.0%} of the random programs were rejected (at most "
        f"{MAX_REJECTION_RATE:.0%} expected): the generator drifted: {stats.line()}")


def test_tc_programs_match_reference(fuzz_runner):
    stats = _fuzz("tc", fuzzgen.tc_cases(), fuzz_runner, examples=TC_EXAMPLES, long=False)
    _check_totals(stats, MIN_TC)


def test_einsum_programs_match_numpy(fuzz_runner):
    stats = _fuzz("einsum", fuzzgen.einsum_cases(), fuzz_runner, examples=EINSUM_EXAMPLES,
                  long=False)
    _check_totals(stats, MIN_EINSUM)


#: GPU variants (target="cuda" on the CPU emulator): batches per kind
#: (FUZZ_GPU_EXAMPLES overrides both).
GPU_TC_EXAMPLES = int(os.environ.get("FUZZ_GPU_EXAMPLES", 30))
GPU_EINSUM_EXAMPLES = int(os.environ.get("FUZZ_GPU_EXAMPLES", 15))


def test_tc_programs_on_the_gpu_emulator(fuzz_runner):
    stats = _fuzz("tc cuda", fuzzgen.tc_cases(configs=list(fuzzgen.CUDA_CONFIGS)),
                  fuzz_runner, examples=GPU_TC_EXAMPLES, long=False)
    _check_totals(stats, BATCH * GPU_TC_EXAMPLES)


def test_einsum_programs_on_the_gpu_emulator(fuzz_runner):
    stats = _fuzz("einsum cuda", fuzzgen.einsum_cases(configs=list(fuzzgen.CUDA_CONFIGS)),
                  fuzz_runner, examples=GPU_EINSUM_EXAMPLES, long=False)
    _check_totals(stats, BATCH * GPU_EINSUM_EXAMPLES)


@pytest.fixture
def fuzz_long(request):
    if not request.config.getoption("--fuzz-long"):
        pytest.skip("long fuzzing runs with --fuzz-long")


@pytest.mark.slow
def test_tc_programs_long(fuzz_long, fuzz_runner):
    stats = _fuzz("tc", fuzzgen.tc_cases(), fuzz_runner, examples=LONG_TC_EXAMPLES, long=True)
    _check_totals(stats, BATCH * LONG_TC_EXAMPLES)


@pytest.mark.slow
def test_einsum_programs_long(fuzz_long, fuzz_runner):
    stats = _fuzz("einsum", fuzzgen.einsum_cases(), fuzz_runner,
                  examples=LONG_EINSUM_EXAMPLES, long=True)
    _check_totals(stats, BATCH * LONG_EINSUM_EXAMPLES)


FRESH_SEEDS = int(os.environ.get("FUZZ_FRESH_SEEDS", 3))
FRESH_EXAMPLES = int(os.environ.get("FUZZ_FRESH_EXAMPLES", 25))


def fresh_seeds(day: str | None = None, n: int = FRESH_SEEDS) -> list[int]:
    """``n`` seeds for the day ``day`` (``YYYYMMDD``; ``FUZZ_DATE``, else
    today, UTC): ``YYYYMMDD * 100 + k``, k = 1..n (2026-11-24: 2026112401,
    2026112402, ...), so a run on a given day is reproducible from its date,
    and no day's seeds are another day's."""
    day = day or os.environ.get("FUZZ_DATE") or \
        datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    return [int(day) * 100 + k for k in range(1, n + 1)]


def test_fresh_seeds_differ_per_day():
    assert fresh_seeds("20261124", 3) == [2026112401, 2026112402, 2026112403]
    assert not set(fresh_seeds("20261124")) & set(fresh_seeds("20261125"))


@pytest.mark.slow
@pytest.mark.parametrize("k", range(FRESH_SEEDS))
@pytest.mark.parametrize("kind", ["tc", "einsum"])
def test_fresh_seeds(kind, k, fuzz_runner):
    """The long fuzzer on one of today's seeds (:func:`fresh_seeds`)."""
    _fresh_seed(kind, k, fuzz_runner)


@pytest.mark.parametrize("kind", ["tc", "einsum"])
def test_todays_first_seed(kind, fuzz_runner):
    """The plain run's share of :func:`test_fresh_seeds` (``-m slow`` runs
    them all): today's first seed, so every day's suite tries new programs
    at a bounded cost (a day's three seeds took 140 s of CI time on 2026-11-29)."""
    _fresh_seed(kind, 0, fuzz_runner)


def _fresh_seed(kind: str, k: int, fuzz_runner) -> None:
    value = fresh_seeds()[k]
    replay = (f"FUZZ_SEED={value} FUZZ_LONG_EXAMPLES={FRESH_EXAMPLES} python -m pytest -q "
              f"--fuzz-long -m slow tests/fuzz/test_fuzz.py -k {kind}_programs_long")
    print(f"fresh fuzzer seed {value} ({kind}); replay: {replay}")
    strategy = fuzzgen.tc_cases() if kind == "tc" else fuzzgen.einsum_cases()
    try:
        stats = _fuzz(kind, strategy, fuzz_runner, examples=FRESH_EXAMPLES, long=True,
                      seed_value=value)
    except Exception as e:
        raise AssertionError(f"seed {value} found a failure; replay with:\n  {replay}\n"
                             f"then add the minimal reproducer to test_known_bugs.py") from e
    _check_totals(stats, BATCH * FRESH_EXAMPLES)
