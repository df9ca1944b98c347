"""Every ``Config`` field is classified: a field that changes the schedule or
the generated C is ``codegen`` and changes :meth:`Config.codegen_key` and
:func:`polyc.pipeline.lowered_key`; any other field leaves both, and the
lowered C, alone (issue 15, item 6: ``time_tiling`` was not ``codegen``, so a
compile with it returned the code cached without it)."""

from __future__ import annotations

from dataclasses import fields

import programs
import pytest

from polyc import pipeline
from polyc.backends.c import emit
from polyc.config import Config

#: codegen fields -> a valid value other than the default.  A new codegen
#: field fails test_every_field_is_classified until it is added here.
CODEGEN_ALTERNATIVES = {
    "tile_sizes": (8, 16),
    "tiling": False,
    "parallel": False,
    "simd": False,
    "schedule": "identity",
    "cc": "gcc-not-the-default",
    "cflags": ("-O1", "-fPIC", "-shared"),
    "sanitize": ("undefined",),
    "fusion": "max",
    "allow_skewing": False,
    "outer_coincidence": False,
    "time_tiling": True,
    "tensorize": False,
    "contract": False,     # array contraction: not yet a field on every branch
    "row_block": 1,
    "triangle_rows": 56,
    "omp_schedule": "static",
    "target": "cuda",
    "emulate": True,
    "emulate_reverse": True,
    "emulate_checks": True,
    "gpu_block": (16, 16),
    "gpu_promote": False,
    "gpu_rows": False,
    "gpu_tensor_cores": False,
    "gpu_simt_gemm": False,
    "cuda_arch": "sm_80",
}

#: fields that never change the code of a kernel -> (another valid value, why).
NOT_CODEGEN = {
    "cache_dir": ("/tmp/polyc-elsewhere", "where built kernels are kept"),
    "disk_cache": (False, "whether built kernels are kept on disk"),
    "num_threads": (3, "a run-time argument of every call (polyc_nthreads)"),
    "dump": (True, "prints the stages to stderr"),
    "wait_policy": ("passive", "the OpenMP runtime's environment, set before it loads"),
    "compile_timeout": (5.0, "how long the C compiler may run"),
    "gpu_sync": (True, "whether a call on device arrays waits for its launches"),
    "plan": ("measure", "polyc.jit's planner: which groups fuse, not their code"),
    "peak_gflops": (1.0, "polyc.jit's roofline: which groups fuse, not their code"),
    "peak_gbs": (1.0, "polyc.jit's roofline: which groups fuse, not their code"),
    "use_tuned": (False, "which schedule compile_program picks from the tuning database; "
                         "a tuned kernel is keyed by its schedule's text like a user's"),
}


def _fields() -> dict[str, bool]:
    return {f.name: bool(f.metadata.get("codegen")) for f in fields(Config)}


def test_every_field_is_classified():
    have = _fields()
    codegen = {n for n, c in have.items() if c}
    other = set(have) - codegen
    listed = set(CODEGEN_ALTERNATIVES) & set(have)
    assert codegen == listed, ("a codegen field without an alternative value here, or "
                               f"one here that is not codegen: {sorted(codegen ^ listed)}")
    assert other == set(NOT_CODEGEN), (
        f"classify these Config fields in this file: {sorted(other ^ set(NOT_CODEGEN))}")


def test_schedule_options_are_codegen():
    have = _fields()
    for name in ("time_tiling", "fusion", "allow_skewing", "outer_coincidence",
                 "tensorize", "tile_sizes", "tiling", "schedule", "parallel", "simd"):
        assert have[name], f"Config.{name} changes the schedule but is not codegen"


@pytest.mark.parametrize("name", sorted(n for n, c in _fields().items() if c))
def test_codegen_field_changes_the_keys(name):
    base = Config()
    flipped = base.replace(**{name: CODEGEN_ALTERNATIVES[name]})
    assert getattr(flipped, name) != getattr(base, name)
    assert flipped.codegen_key() != base.codegen_key()
    program = programs.stencil()
    assert pipeline.lowered_key(program, flipped) != pipeline.lowered_key(program, base)


@pytest.mark.parametrize("name", sorted(NOT_CODEGEN))
def test_other_field_keeps_the_keys_and_the_code(name, capsys):
    base = Config()             # lower() below neither reads nor writes a cache
    flipped = base.replace(**{name: NOT_CODEGEN[name][0]})
    assert getattr(flipped, name) != getattr(base, name)
    assert flipped.codegen_key() == base.codegen_key()
    program = programs.stencil()
    assert pipeline.lowered_key(program, flipped) == pipeline.lowered_key(program, base)

    def c_source(config: Config) -> str:
        low = pipeline.lower(program, config)
        return emit.emit(low.program, low.loopnest).text
    assert c_source(flipped) == c_source(base)


def test_time_tiling_lowers_a_time_loop_differently():
    """The reason time_tiling is codegen: on a stencil with a time loop the
    schedule, and so the C, differ."""
    program = programs.jacobi_1d()
    base = Config()
    lows = [pipeline.lower(program, base.replace(time_tiling=flag)) for flag in (False, True)]
    texts = [emit.emit(low.program, low.loopnest).text for low in lows]
    assert texts[0] != texts[1]
    assert str(lows[0].schedule) != str(lows[1].schedule)


@pytest.mark.parametrize("make", [lambda **kw: Config(**kw), lambda **kw: Config().replace(**kw),
                                  lambda **kw: Config.from_env(**kw)])
def test_an_unknown_option_names_the_one_meant(make):
    """``Config(threads=2)`` (README's word for the option) was a bare
    dataclass ``TypeError``; it is a ``BindingError`` (still a ``TypeError``)
    naming ``num_threads``, and real options still work."""
    from polyc.errors import BindingError
    with pytest.raises(BindingError, match=r"no option 'threads' \(did you mean num_threads\?\)"):
        make(threads=2)
    with pytest.raises(TypeError, match=r"'tiling_sizes' \(did you mean tile_sizes\?\)"):
        make(tiling_sizes=(8, 8))
    assert make(num_threads=2).num_threads == 2
