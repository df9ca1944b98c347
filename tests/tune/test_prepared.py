"""A @polyc.kernel whose compiled program is rewritten before scheduling
(an accumulator expanded for GEMM calls, PolyBench's doitgen:
:func:`polyc.pipeline.prepared`): ``polyc.tune(kernel)`` tunes and records
``kernel.program``, the rewritten one, and the next compile of that kernel
must find the record (it looked up the program as written, and never found
it) and compute what numpy computes."""

from __future__ import annotations

import numpy as np

import polyc
from polyc.tune import Database
from polyc.tune.db import ALL_SIZES, key_info, key_of


@polyc.kernel
def doitgen(A, C4, acc):
    nr, nq, np_ = A.shape
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                acc[p] = 0.0
                for s in range(np_):
                    acc[p] += A[r, q, s] * C4[s, p]
            for p in range(np_):
                A[r, q, p] = acc[p]


def _args(nr, nq, np_, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((nr, nq, np_)), rng.random((np_, np_)), np.zeros(np_)


def test_a_tuned_kernel_with_an_expanded_accumulator_uses_its_record(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    doitgen._kernels.clear()
    cfg = polyc.Config.from_env()
    kernel = doitgen.specialize(*_args(4, 3, 8))
    program = kernel.program                      # what polyc.tune(doitgen) tunes
    assert any(t.name.startswith("acc_") or t.name.endswith("_x") for t in program.tensors), \
        [t.name for t in program.tensors]         # the accumulator was expanded
    recipe = kernel.schedule.to_recipe()
    info = key_info(program, cfg.replace(use_tuned=False), ALL_SIZES)
    Database(config=cfg).append([{"key": key_of(info), "keyinfo": info, "kind": "best",
                                  "recipe": recipe, "label": "recorded", "speedup": 1.3}])
    doitgen._kernels.clear()
    for nr, nq, np_ in [(1, 1, 1), (2, 3, 7), (4, 3, 8), (5, 1, 17)]:
        A, C4, acc = _args(nr, nq, np_, seed=nr * 100 + np_)
        want = np.einsum("rqs,sp->rqp", A, C4)
        doitgen(A, C4, acc)
        np.testing.assert_allclose(A, want, rtol=1e-12)
    tuned = doitgen.specialize(*_args(2, 2, 2)).tuning
    assert tuned and tuned.startswith("tuned: schedule recipe from") and "recorded" in tuned
