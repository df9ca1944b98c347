"""Property test: ``polyc.einsum`` against ``numpy.einsum`` on random valid specs.

hypothesis draws 1-4 operands over a few labels of sizes 1-3: a label
repeated within one operand (a diagonal), labels that only one operand has
(summed in the implicit form), ``...`` with numpy's broadcasting (an operand
may cover fewer of the ellipsis dimensions, or hold 1 where another holds
3), size-1 dimensions that broadcast against a label, implicit and explicit
outputs (including the scalar output ``->``), in float32, float64 and
int32, now and then with one operand of another type.  Every call compiles
a kernel, so the example count stays small.

Tolerance: integers are exact; floats satisfy
``|got - want| <= rtol * einsum(|operands|) + tiny`` (a bound relative to
the magnitude of the summed terms, so that cancellation cannot make it
meaningless), with ``rtol`` (float32 1e-5, float64 1e-13) times the number
of terms (at most 1000).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polyc

LABELS = "abcde"
RTOL = {"float32": 1e-5, "float64": 1e-13}


@st.composite
def einsum_case(draw):
    """``(subscripts, shapes, dtype)`` that numpy accepts."""
    sizes = {c: draw(st.integers(1, 3)) for c in LABELS}
    n = draw(st.integers(1, 4))
    ell = draw(st.lists(st.integers(1, 3), max_size=2)) if draw(st.booleans()) else None
    subs, shapes = [], []
    for _ in range(n):
        labels = draw(st.lists(st.sampled_from(LABELS), max_size=3))
        shape = []
        for c in labels:
            # a size-1 dimension broadcasts against the label (not on a diagonal)
            one = labels.count(c) == 1 and draw(st.integers(0, 5)) == 0
            shape.append(1 if one else sizes[c])
        text = "".join(labels)
        if ell is not None and draw(st.booleans()):
            k = draw(st.integers(0, len(ell)))           # right-aligned, as numpy's
            eshape = [1 if draw(st.integers(0, 3)) == 0 else d for d in ell[len(ell) - k:]]
            at = draw(st.integers(0, len(labels)))
            text = text[:at] + "..." + text[at:]
            shape[at:at] = eshape
        subs.append(text)
        shapes.append(tuple(shape))
    spec = ",".join(subs)
    if draw(st.booleans()):                               # explicit output
        used = sorted({c for s in subs for c in s if c != "."})
        out = draw(st.permutations(used))[:draw(st.integers(0, len(used)))]
        out = "".join(out)
        if any("..." in s for s in subs):
            at = draw(st.integers(0, len(out)))
            out = out[:at] + "..." + out[at:]
        spec += "->" + out
    dtype = draw(st.sampled_from(["float32", "float64", "int32"]))
    # now and then one operand of another type: numpy's promotion decides the result's
    dtypes = [dtype] * n
    if n > 1 and draw(st.integers(0, 3)) == 0:
        dtypes[draw(st.integers(0, n - 1))] = draw(st.sampled_from(["float32", "int32"]))
    return spec, shapes, tuple(dtypes)


def _operands(shapes, dtypes, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, 4, size=s).astype(d) if d == "int32"
            else rng.standard_normal(s).astype(d) for s, d in zip(shapes, dtypes)]


@settings(max_examples=40, deadline=None, derandomize=True, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=einsum_case(), seed=st.integers(0, 2**16))
def test_einsum_matches_numpy(case, seed):
    spec, shapes, dtypes = case
    ops = _operands(shapes, dtypes, seed)
    want = np.einsum(spec, *ops)
    dtype = np.asarray(want).dtype.name
    got = polyc.einsum(spec, *ops)
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.shape == want_a.shape, f"{spec} {shapes}: shape {got_a.shape}"
    assert got_a.dtype == want_a.dtype, f"{spec} {shapes} {dtypes}: dtype {got_a.dtype}"
    assert np.ndim(got) == np.ndim(want)
    if dtype == "int32":
        np.testing.assert_array_equal(got_a, want_a, err_msg=f"{spec} {shapes}")
        return
    scale = np.einsum(spec, *[np.abs(o).astype(np.float64) for o in ops])
    terms = max(1, int(np.prod([d for s in shapes for d in s], dtype=np.int64)))
    bound = RTOL[dtype] * min(terms, 1000) * scale + np.finfo(dtype).tiny
    err = np.abs(got_a.astype(np.float64) - want_a.astype(np.float64))
    worst = np.unravel_index(int(np.argmax(err - bound)), err.shape) if err.ndim else ()
    assert np.all(err <= bound), (f"{spec} {shapes} {dtype}: error {err[worst]} > "
                                  f"{np.asarray(bound)[worst]} at {worst}")
