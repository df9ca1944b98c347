"""Minimal reproducers of the bugs the differential fuzzer found, one test
each.  An open bug's test is marked ``xfail(strict=True)``: when a fix lands
the test passes, the strict xfail fails the run, and the marker (and the
matching entry of ``fuzzgen.KNOWN_BUGS``, which keeps the fuzzer from
failing on the same bug) are to be removed.  Fixed bugs stay as regression
tests."""

from __future__ import annotations

import numpy as np

import polyc
from polyc import reference, testing
from polyc.config import Config


def _check_tc(src, sizes, config=None, dtype: str | None = "float32"):
    kernel = polyc.compile(src, dtype=dtype, config=config or Config.from_env())
    program = kernel.program
    inputs = testing.random_inputs(program, sizes, seed=0)
    want = reference.evaluate(program, inputs, sizes)
    outs = tuple(np.full(w.shape, np.nan if w.dtype.kind == "f" else np.iinfo(w.dtype).min,
                         w.dtype) for w in want.values())
    got = kernel(*testing.call_args(program, inputs, sizes),
                 out=outs if len(outs) > 1 else outs[0])
    got = got if isinstance(got, tuple) else (got,)
    for t, g in zip(program.outputs, got):
        testing.assert_close(g, want[t.name], dtype=t.dtype,
                             reduction_length=testing.reduction_length(program, sizes),
                             name=t.name)


def test_collapse_over_simd_with_constant_extents():
    # was: '#pragma omp parallel for collapse(2)' over a nest whose inner loop
    # carried '#pragma omp simd' (gcc: not enough perfectly nested loops)
    _check_tc("def f(float(3, 5) A) -> (B) {\n    B(i, j) = A(i, j)\n}\n", {})


# FUZZ_SEED=20261124 (issue 19): a band whose second coincident member isl
# prints as no loop (degenerate: j only takes 0, B's middle extent is 1) got
# collapse(2) over its first loop and the reduction loop of the band below:
# gcc refused the accumulator declared between them ("not enough perfectly
# nested loops before 'int64_t'"), and the reduction loop would have run in
# parallel.  The scalar reduction before it keeps the init statement of O2 out
# of the nest, which is what leaves the reduction loop right under the first.
ISSUE_19 = """
def f(double(M, M) A, double(N, 1, N) B) -> (O0, O1, O2, O3) {
    O0 +=! A(i, i) + A(i, i) + A(i, i)
    O1() +=! (A(m, i) > 0) ? (A(m, i) <= -0.25 ? A(m, i) + A(j, k) : B(l, m, n)) : -0.5
    O2(i, j) +=! B(i, 2*j + 0, k)
    O3 +=! O0 + A(i, j) + A(k, l)
}
"""
ISSUE_19_MINIMAL = """
def f(float(N, 1, K) B) -> (S, O) {
    S +=! B(i, j, k)
    O(i, j) +=! B(i, j, k)
}
"""


def test_collapse_over_degenerate_band_member_issue_19():
    for sizes in ({"M": 3, "N": 4}, {"M": 1, "N": 1}, {"M": 2, "N": 0}, {"M": 5, "N": 17}):
        _check_tc(ISSUE_19, sizes, dtype=None)


def test_collapse_over_degenerate_band_member_minimal():
    for sizes in ({"N": 5, "K": 3}, {"N": 1, "K": 0}, {"N": 33, "K": 7}):
        _check_tc(ISSUE_19_MINIMAL, sizes)
    # threads: the reduction loop must not be one of the collapsed parallel loops
    _check_tc(ISSUE_19_MINIMAL, {"N": 64, "K": 9}, config=Config.from_env(num_threads=3))


def test_reference_wraps_an_integer_reduction_into_a_scalar():
    # fresh seed 2026112403: polyc.reference raised OverflowError storing an
    # int64 sum into a 0-d int32 output (numpy refuses an out-of-range scalar
    # on assignment); the kernel wraps, as numpy's int32 arithmetic does
    src = "def f(int32(N) A) -> (S) {\n    S +=! A(i) * 1000000000\n}\n"
    _check_tc(src, {"N": 31}, dtype=None)
    src = """
def f(int32(N, N) A) -> (O0, O2) {
    O0(i) = A(i, i)
    O0(i) += -A(i, i) + O0(i) + -A(j, i)
    O2 +=! O0(i) + -A(i, i) + O0(i)
}
"""
    _check_tc(src, {"N": 31}, dtype=None)


def test_scheduler_fails_under_bounded_preconditions():
    src = """
def f(float(N, N) A, float(N, N, N) B, float(N, N) C, float(N) D) -> (O0, O1) {
    O0(l) +=! C(i, j) * D(j + j) * B(k, l, k)
    O1(j) +=! A(j + 1, i) * B(j, i, i + j) * D(i + 1)
}
"""
    _check_tc(src, {"N": 3})


def test_einsum_honours_each_calls_num_threads(monkeypatch):
    from polyc import einsum_call, runtime
    seen = []
    call = runtime.Kernel.__call__

    def spy(self, *args, **kw):
        seen.append(self.config.num_threads)
        return call(self, *args, **kw)

    monkeypatch.setattr(runtime.Kernel, "__call__", spy)
    einsum_call.clear_kernels()
    a, b = np.ones((3, 4)), np.ones((4, 5))
    polyc.einsum("ij,jk->ik", a, b, config=Config.from_env(num_threads=1))
    polyc.einsum("ij,jk->ik", a, b, config=Config.from_env(num_threads=3))
    assert seen == [1, 3]


def test_reference_constant_index_without_iterators():
    src = "def f(float(N) B) -> (O) {\n    O = B(1) * 2\n}\n"
    program = polyc.compile(src).program
    b = np.arange(4, dtype=np.float32)
    out = reference.evaluate(program, {"B": b}, {"N": 4})["O"]
    assert out == 2.0


def test_einsum_dtype_is_honoured_where_numpy_returns_a_view():
    """Fresh fuzzer seed 2026112803 (einsum): ``einsum("i", float32 a,
    dtype="float64")``.  numpy takes its view path and returns ``a`` itself,
    ignoring ``dtype``; polyc returns a new float64 array (docs/einsum.md).
    The bug was the oracle's, which expected numpy's dtype there."""
    a = np.linspace(-1, 1, 5, dtype=np.float32)
    for subscripts in ("i", "i->i"):
        got = polyc.einsum(subscripts, a, dtype="float64")
        assert got.dtype == np.float64 and not np.shares_memory(got, a)
        np.testing.assert_array_equal(got, a.astype(np.float64))
        assert np.einsum(subscripts, a, dtype="float64").dtype == np.float32   # numpy's view
