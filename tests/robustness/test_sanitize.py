"""Sanitized execution (issue 6, item 2): ``Config.sanitize`` /
``POLYC_SANITIZE=address,undefined`` builds generated C with
``-fsanitize=address,undefined -fno-sanitize-recover=all
-fno-omit-frame-pointer -g``.  The kernels run in a subprocess whose Python
was started with the ASan runtime preloaded (``sanitizer_env()``:
``LD_PRELOAD`` = libasan and libstdc++, ``ASAN_OPTIONS=detect_leaks=0``).

* every ``examples/*.tc`` (header sizes / 8, at least 1) and a sample of the
  random programs of ``tests/cpu/test_random_programs.py`` run with zero
  sanitizer reports (exit status 0, no "ERROR: AddressSanitizer", no
  "runtime error:"), and match the reference;
* positive controls: an out-of-bounds write and a signed overflow in C are
  reported and abort the subprocess, so "zero reports" means something;
* without the preload, loading a sanitized kernel is a ``SanitizerError``
  that names the variables to set, not a crash of the interpreter.

Skipped when there is no C compiler or no libasan.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polyc import cache
from polyc.backends.c import build as cbuild
from polyc.config import Config
from polyc.errors import PolycError, SanitizerError, ToolMissingError

ROOT = Path(__file__).resolve().parents[2]
SAN = ("address", "undefined")

try:
    cbuild.resolve_compiler(Config.from_env().cc)
except ToolMissingError as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"no C compiler: {e}", allow_module_level=True)


def asan_env() -> dict[str, str]:
    if cbuild.sanitizer_runtime("address", config=Config.from_env()) is None:
        pytest.skip("libasan not found by the C compiler (cc -print-file-name=libasan.so)")
    return cbuild.sanitizer_env(Config.from_env(sanitize=SAN))


def run_sanitized(tmp_path: Path, script: str, timeout: float = 540) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh Python with the sanitizer runtime preloaded
    and POLYC_SANITIZE set; the cache directory is private to the test."""
    env = dict(os.environ)
    env.update(asan_env())
    env.update(POLYC_SANITIZE=",".join(SAN), POLYC_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT / "tests" / "cpu"),
                                           env.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="2")
    path = tmp_path / "sanitized_run.py"
    path.write_text(textwrap.dedent(script))
    return subprocess.run([sys.executable, str(path)], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))


def assert_no_reports(proc: subprocess.CompletedProcess) -> None:
    reports = [line for line in proc.stderr.splitlines()
               if "ERROR: AddressSanitizer" in line or "runtime error:" in line
               or "ERROR: LeakSanitizer" in line]
    assert proc.returncode == 0 and not reports, (
        f"exit status {proc.returncode}, sanitizer reports:\n" + "\n".join(reports)
        + "\n--- stderr ---\n" + proc.stderr[-6000:])


# --- configuration ------------------------------------------------------------------

def test_sanitize_config_and_flags(monkeypatch):
    monkeypatch.setenv("POLYC_SANITIZE", "address, undefined")
    cfg = Config.from_env()
    assert cfg.sanitize == SAN
    flags = cbuild.compile_flags(cfg)
    assert flags[: len(cfg.cflags)] == list(cfg.cflags)
    for f in ("-fsanitize=address,undefined", "-fno-sanitize-recover=all",
              "-fno-omit-frame-pointer", "-g"):
        assert f in flags
    assert ("sanitize", SAN) in cfg.codegen_key()
    assert cbuild.compile_flags(Config()) == list(Config().cflags)
    monkeypatch.setenv("POLYC_SANITIZE", "address,-O0")
    with pytest.raises(PolycError, match="'-O0' is not a sanitizer name"):
        Config.from_env()
    assert Config(sanitize="undefined").sanitize == ("undefined",)


def test_sanitized_library_without_preload_is_a_clear_error(tmp_path):
    """This pytest process has no ASan runtime: building and loading a
    sanitized kernel must raise (before compiling), not abort Python."""
    import ctypes
    if hasattr(ctypes.CDLL(None), "__asan_init"):
        pytest.skip("this process already runs with the ASan runtime")
    env = asan_env()
    cfg = Config.from_env(sanitize=SAN, cache_dir=str(tmp_path / "cache"))
    cache.reset_stats()
    with pytest.raises(SanitizerError) as info:
        cbuild.build_library("int f(void) { return 1; }\n", config=cfg)
    msg = str(info.value)
    assert env["LD_PRELOAD"].split()[0] in msg and "LD_PRELOAD=" in msg
    assert "ASAN_OPTIONS=detect_leaks=0" in msg and "POLYC_SANITIZE" in msg
    assert cache.stats().builds == 0, "checked before compiling"
    # through the public API too
    import polyc
    with pytest.raises(SanitizerError):
        polyc.compile("def s(float(N) A) -> (B) { B(i) = A(i) * 2 }", config=cfg)


def test_undefined_alone_needs_no_preload(tmp_path):
    """UBSan's runtime loads as a normal dependency: it works in-process."""
    import ctypes
    if cbuild.sanitizer_runtime("address", config=Config.from_env()) is None:
        pytest.skip("no sanitizer runtimes installed")
    cfg = Config.from_env(sanitize=("undefined",), cache_dir=str(tmp_path / "cache"),
                          cflags=("-O0", "-fPIC", "-shared"))
    lib = cbuild.build_library("int f(int x) { return x + 1; }\n", config=cfg)
    assert lib.function("f", [ctypes.c_int], ctypes.c_int)(41) == 42
    assert "-fsanitize=undefined" in lib.command


# --- positive controls: the sanitizers do report ------------------------------------

CONTROL = """
    import ctypes, sys
    from polyc.backends.c.build import build_library
    from polyc.config import Config
    lib = build_library(sys.argv[1] if len(sys.argv) > 1 else {src!r},
                        config=Config.from_env(cflags=("-O1", "-fPIC", "-shared")))
    fn = lib.function("f", [ctypes.c_int], ctypes.c_int)
    print("result", fn({arg}), flush=True)
"""


def test_control_heap_overflow_is_reported(tmp_path):
    src = ("#include <stdlib.h>\n"
           "int f(int n) { int *a = malloc(n * sizeof *a); a[n] = 1; int r = a[0]; "
           "free(a); return r; }\n")
    proc = run_sanitized(tmp_path, CONTROL.format(src=src, arg=4), timeout=120)
    assert proc.returncode != 0 and "ERROR: AddressSanitizer: heap-buffer-overflow" in proc.stderr
    assert "result" not in proc.stdout


def test_control_signed_overflow_is_reported(tmp_path):
    src = "int f(int x) { return x + 2147483647; }\n"
    proc = run_sanitized(tmp_path, CONTROL.format(src=src, arg=5), timeout=120)
    assert proc.returncode != 0 and "runtime error: signed integer overflow" in proc.stderr
    assert "result" not in proc.stdout


# --- generated code under the sanitizers ----------------------------------------------

PROGRAMS = """
    import json, random, sys
    import numpy as np
    import polyc
    from polyc import reference, testing
    from polyc.errors import PolycError, ShapeError
    from polyc.frontend import tc
    from test_random_programs import random_program
    from test_examples import reduction_length

    import ctypes
    assert hasattr(ctypes.CDLL(None), "__asan_init"), "the ASan runtime is not preloaded"
    examples, n_random, seed = json.loads(sys.argv[1]) if len(sys.argv) > 1 else ({examples!r}, {n_random}, {seed})
    ran = []

    def run(name, text, sizes, dtype=None):
        kw = {{"dtype": dtype}} if dtype else {{}}
        k = polyc.compile(text, **kw)
        assert "-fsanitize=address,undefined" in k.library.command, k.library.command
        program = k.program
        inputs = testing.random_inputs(program, sizes, seed=0)
        args = testing.call_args(program, inputs, sizes)
        want = reference.evaluate(program, inputs, sizes)
        with np.errstate(all="ignore"):
            got = k(*args)
        got = got if isinstance(got, tuple) else (got,)
        red = reduction_length(program, sizes)
        for t, g in zip(program.outputs, got):
            testing.assert_close(g, want[t.name], dtype=t.dtype, reduction_length=red,
                                 name=f"{{name}}: {{t.name}} at {{sizes}}")
        ran.append(name)

    for path in examples:
        text = open(path).read()
        sizes = {{n: max(1, v // 8) for n, v in tc.sizes_header(text).items()}}
        run(path, text, sizes)

    rng = random.Random(seed)
    tried = 0
    while tried < n_random:
        src = random_program(rng)
        try:
            polyc.compile(src, dtype="float64")
        except PolycError:
            continue                  # not valid TC: the generator's misses
        tried += 1
        for N, M in ((1, 1), (7, 13), (17, 3)):
            try:
                run(f"random program {{tried}}:\\n{{src}}", src, {{"N": N, "M": M}}, "float64")
            except (ShapeError, OverflowError, FloatingPointError):
                pass                  # sizes outside the program's preconditions
    print(json.dumps(ran))
"""


def examples() -> list[str]:
    return sorted(str(p) for p in (ROOT / "examples").glob("*.tc"))


def test_matmul_example_and_random_programs_run_clean(tmp_path):
    """The quick version: one example and three random programs."""
    script = PROGRAMS.format(examples=[str(ROOT / "examples" / "matmul.tc")], n_random=3,
                             seed=11)
    proc = run_sanitized(tmp_path, script)
    assert_no_reports(proc)
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ran[0].endswith("matmul.tc") and len(ran) >= 4


@pytest.mark.slow
def test_every_example_and_a_sample_of_random_programs_run_clean(tmp_path):
    """Every ``examples/*.tc`` at its header sizes / 8 and 12 random programs."""
    script = PROGRAMS.format(examples=examples(), n_random=12, seed=2026)
    proc = run_sanitized(tmp_path, script)
    assert_no_reports(proc)
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sum(r.endswith(".tc") for r in ran) == len(examples()) >= 9
    assert len(ran) - len(examples()) >= 12
