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
"""

from __future__ import annotations

import os

import fuzzgen
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

BATCH = 4
#: Default run: hypothesis examples (batches of exactly BATCH programs, so the
#: count does not depend on what hypothesis draws) and the programs they add up to.
TC_EXAMPLES, MIN_TC = 100, 400
EINSUM_EXAMPLES, MIN_EINSUM = 40, 160
#: Long run (--fuzz-long): batches per kind (10,000 TC and 5,000 einsum
#: programs); FUZZ_LONG_EXAMPLES overrides both.
LONG_TC_EXAMPLES = int(os.environ.get("FUZZ_LONG_EXAMPLES", 2500))
LONG_EINSUM_EXAMPLES = int(os.environ.get("FUZZ_LONG_EXAMPLES", 1250))
MAX_REJECTION_RATE = 0.40


def _fuzz(kind, strategy, runner, *, examples, long):
    stats = fuzzgen.STATS.setdefault(kind + (" (long)" if long else ""), fuzzgen.Stats())

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

    if long and os.environ.get("FUZZ_SEED"):
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
