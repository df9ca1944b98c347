"""All 30 PolyBench/C 4.2.1 kernels compiled by polyc against their
independent numpy references (``benchmarks/polybench``): MINI in the default
run, SMALL marked slow.  Tolerance: float64, the largest absolute difference
at most 1e-9 of the output's largest magnitude (gramschmidt: its
numerically determined part, see ``Bench.compared``)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.polybench import BENCHMARKS, fresh, max_rel

NAMES = list(BENCHMARKS)
TOL = 1e-9




def check(bench, args, sizes):
    got, want = fresh(args), fresh(args)
    assert bench.kernel(*got) is None
    bench.reference(*want)
    outs_got = bench.comparable(sizes, [got[i] for i in bench.outputs])
    outs_want = bench.comparable(sizes, [want[i] for i in bench.outputs])
    for i, (a, b) in enumerate(zip(outs_got, outs_want)):
        assert a.shape == b.shape and a.dtype == b.dtype
        err = max_rel(a, b)
        assert err <= TOL, f"{bench.name} output {bench.outputs[i]}: rel err {err:.2e}"


def run(name, dataset):
    bench = BENCHMARKS[name]
    sizes = bench.sizes[dataset]
    check(bench, bench.init(sizes, np.float64), sizes)


def test_thirty_kernels():
    assert len(BENCHMARKS) == 30
    for b in BENCHMARKS.values():
        assert set(b.sizes) == {"MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"}


@pytest.mark.parametrize("name", NAMES)
def test_mini(name):
    run(name, "MINI")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_small(name):
    run(name, "SMALL")


# PolyBench's inputs for these are (near) steady states, so the reference
# comparison alone cannot tell a kernel that does nothing: random inputs too.
@pytest.mark.parametrize("name", ["heat-3d", "seidel-2d", "jacobi-1d", "jacobi-2d",
                                  "fdtd-2d", "adi", "floyd-warshall"])
def test_random_inputs(name):
    bench = BENCHMARKS[name]
    sizes = bench.sizes["MINI"]
    rng = np.random.default_rng(3)
    args = tuple(rng.random(a.shape) if isinstance(a, np.ndarray) else a
                 for a in bench.init(sizes, np.float64))
    before = fresh(args)
    check(bench, args, sizes)
    got = fresh(args)
    bench.kernel(*got)
    assert any(not np.array_equal(got[i], before[i]) for i in bench.outputs)


def test_float32():
    bench = BENCHMARKS["gemm"]
    sizes = bench.sizes["MINI"]
    args = bench.init(sizes, np.float32)
    got, want = fresh(args), fresh(args)
    bench.kernel(*got)
    bench.reference(*want)
    assert got[2].dtype == np.float32
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4)


def test_benchmark_runner_smoke(capsys):
    """``python -m benchmarks.polybench`` at MINI on two kernels: the table,
    the geometric mean and a zero exit status (outputs equal to the gcc -O3
    baseline's)."""
    from benchmarks.polybench.run import main
    rc = main(["--dataset", "MINI", "--only", "gemm", "jacobi-1d", "--repeat-time", "0",
               "--max-runs", "1", "--no-polly"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| gemm |" in out and "| jacobi-1d |" in out and "geomean" in out
    assert "speedup vs gcc -O3" in out


def test_benchmark_runner_json(capsys):
    import json

    from benchmarks.polybench.run import main
    rc = main(["--dataset", "MINI", "--only", "atax", "--repeat-time", "0", "--max-runs", "1",
               "--no-polly", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    row = data["rows"][0]
    assert row["kernel"] == "atax" and row["polyc"] > 0 and row["gcc -O3"] > 0
    assert row["err"] <= 1e-9 and row["compile_s"] > 0


#: PolyBench's BLAS kernels that reach the GEMM micro-kernel, with the
#: number of calls (issue 15, item 3); the others say why in explain().
#: syrk's and syr2k's (two calls: a sum of two products) triangles of C,
#: symm's two updates and trmm's (triangles of A in the reduction) are one
#: call each over their band (polyc_gemmt, polyc.callbox.band; symm's update
#: of C runs where its last instance did; trmm's output is also its operand
#: B: in place, polyc.callbox.inplace_reason); doitgen's accumulator is
#: expanded first (polyc.expansion.expand_array).
TENSORIZED = {"gemm": 1, "2mm": 2, "3mm": 3, "syrk": 1, "syr2k": 1, "symm": 2, "trmm": 1,
              "doitgen": 1}
#: the kernels whose calls are over a band, and the band's kind
BANDED = {"syrk": "POLYC_GEMM_BAND_MN", "syr2k": "POLYC_GEMM_BAND_MN",
          "symm": "POLYC_GEMM_BAND_MK", "trmm": "POLYC_GEMM_BAND_MK"}
#: Matrix-vector kernels keep their loops, and explain says why.
NOT_TENSORIZED = {"atax": "not a matrix product", "mvt": "not a matrix product"}


@pytest.mark.parametrize("dataset", ["MINI", pytest.param("SMALL", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(TENSORIZED))
def test_blas_kernels_call_the_micro_kernel(name, dataset):
    bench = BENCHMARKS[name]
    sizes = bench.sizes[dataset]
    args = bench.init(sizes, np.float64)
    kern = bench.kernel.specialize(*fresh(args))
    if name in BANDED:
        assert "polyc_gemmt_f64(" in kern.source and BANDED[name] in kern.source
        assert "polyc_gemm_f64(" not in kern.source
    else:
        assert "polyc_gemm_f64(" in kern.source
    text = kern.explain()
    assert text.count("tensorized onto gemm") == TENSORIZED[name]
    assert "tensorize:gemm:" in str(kern.schedule)
    check(bench, args, sizes)


@pytest.mark.parametrize("name", sorted(NOT_TENSORIZED))
def test_blas_kernels_that_keep_their_loops_say_why(name):
    bench = BENCHMARKS[name]
    kern = bench.kernel.specialize(*bench.init(bench.sizes["MINI"], np.float64))
    assert "polyc_gemm" not in kern.source
    assert NOT_TENSORIZED[name] in kern.explain()


@pytest.mark.parametrize("beta", [0.0, 1.2])
def test_a_folded_scaling_keeps_the_loops_semantics_for_nan_and_inf(beta):
    """``C *= beta`` folded into the call: with beta 0 at run time the loops
    compute C * 0 (NaN for NaN and inf elements), not BLAS's beta 0."""
    bench = BENCHMARKS["gemm"]
    alpha, _, C, A, B = bench.init(bench.sizes["MINI"], np.float64)
    C[0, 0], C[1, 1] = np.nan, np.inf
    kern = bench.kernel.specialize(alpha, beta, C.copy(), A, B)
    assert "polyc_gemm_f64(" in kern.source
    got = C.copy()
    kern(alpha, beta, got, A, B)
    with np.errstate(invalid="ignore"):
        want = C * beta + alpha * (A @ B)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-12)
