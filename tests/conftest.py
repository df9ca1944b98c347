"""Shared test configuration: ``--accept`` for golden files, tool probes that
never raise, and skipping of ``gpu``/``nvcc`` tests when the tool is missing.
The workloads in ``benchmarks/`` at the repository root, which is not
installed, are made importable here for every test file (appended, so the
installed polyc still comes first)."""

from __future__ import annotations

import difflib
import shutil
import sys
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)


def pytest_addoption(parser):
    parser.addoption("--accept", action="store_true", default=False,
                     help="rewrite golden files with the current output")
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help="run the differential fuzzers long (>= 10,000 programs)")


def _has_gpu() -> bool:
    try:
        from polyc.gpu_runtime import has_gpu
    except Exception:
        return False
    return has_gpu()


def _has_cc() -> bool:
    """Whether the configured C compiler exists (never raises)."""
    try:
        from polyc.backends.c.build import resolve_compiler
        from polyc.config import Config
        resolve_compiler(Config.from_env().cc)
        return True
    except Exception:
        return False


#: Test files that handle a missing C compiler themselves.
_CC_AWARE = {"test_toolchain.py", "test_cache_keys.py", "test_cache_integrity.py",
             "test_cache_concurrency.py", "test_sanitize.py", "test_build_cache.py"}


def _needs_cc(item) -> bool:
    path = Path(str(item.fspath))
    if path.name in _CC_AWARE:
        return False
    return path.parent.name in ("cpu", "fuzz", "robustness", "graph", "bench", "cuda", "tune")


def _selects_slow(config) -> bool:
    """Whether ``-m`` asks for the slow tests (``-m slow``)."""
    expr = config.getoption("markexpr") or ""
    return "slow" in expr and "not slow" not in expr


def pytest_collection_modifyitems(config, items):
    nvcc = shutil.which("nvcc") is not None
    gpu = None
    cc = None
    slow = _selects_slow(config)
    for item in items:
        if "slow" in item.keywords and not slow:
            # (the README's plain run stays within CI's 25 minutes on 2 cores;
            # each slow test has a quick sibling that runs instead)
            item.add_marker(pytest.mark.skip(reason="slow: pytest -m slow runs it"))
        if _needs_cc(item):
            if cc is None:
                cc = _has_cc()
            if not cc:
                item.add_marker(pytest.mark.skip(reason="no C compiler (set CC or POLYC_CC)"))
        if "nvcc" in item.keywords and not nvcc:
            item.add_marker(pytest.mark.skip(reason="nvcc not found"))
        if "gpu" in item.keywords:
            if gpu is None:
                gpu = _has_gpu()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


@pytest.fixture
def golden(request):
    """``golden(name, text)``: compare ``text`` with ``tests/golden/<name>``;
    with ``--accept`` (or when the file is missing) write it instead."""
    accept = request.config.getoption("--accept")

    def check(name: str, text: str) -> None:
        path = GOLDEN_DIR / name
        if accept or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if not accept:
                pytest.fail(f"golden file {path} was missing and has been written; "
                            "review it and run again")
            return
        expected = path.read_text()
        if text != expected:
            diff = "".join(difflib.unified_diff(
                expected.splitlines(True), text.splitlines(True),
                fromfile=str(path), tofile="actual"))
            pytest.fail(f"output differs from {path} (rerun with --accept to update):\n{diff}")

    return check


@pytest.fixture
def fresh_cache_state():
    """polyc's in-memory cache state (loaded libraries, build counters)
    cleared before and after the test.  Modules that count builds use it
    for every test: ``pytestmark = pytest.mark.usefixtures("fresh_cache_state")``."""
    from polyc import cache
    cache.clear_memory()
    cache.reset_stats()
    yield
    cache.clear_memory()
