"""Fixtures of the differential fuzzer: the worker pool and a summary line
per fuzz test kind (programs, rejection rate, size sets compared)."""

from __future__ import annotations

import os

import fuzzgen
import pytest


@pytest.fixture(scope="session")
def fuzz_runner():
    """Runs cases in ``FUZZ_JOBS`` worker processes (default: up to 2, one
    per core); ``FUZZ_JOBS=1`` runs them in the test process."""
    jobs = int(os.environ.get("FUZZ_JOBS", min(2, os.cpu_count() or 1)))
    runner = fuzzgen.Runner(jobs)
    yield runner
    runner.close()


def pytest_terminal_summary(terminalreporter):
    if not fuzzgen.STATS:
        return
    terminalreporter.section("differential fuzzer")
    for kind, stats in sorted(fuzzgen.STATS.items()):
        terminalreporter.write_line(f"{kind}: {stats.line()}")
