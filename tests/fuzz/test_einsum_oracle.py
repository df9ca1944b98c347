"""The einsum fuzzer's oracle (:func:`fuzzgen.run_einsum`) expects numpy's
behaviour, errors included: where ``numpy.einsum`` raises, ``polyc.einsum``
must raise the same exception class (or a subclass of it) with the same
message, and the case passes; any other outcome fails it (issue 19: a
``DTypeError`` carrying numpy's own message was reported as a failure)."""

from __future__ import annotations

import fuzzgen
import numpy as np
import pytest

import polyc
from polyc.errors import DTypeError, EinsumError


def _case(subscripts, shapes, dtypes, out_mode="none", force_dtype=None, interleaved=False):
    return fuzzgen.EinsumCase(subscripts=subscripts, shapes=(tuple(shapes),),
                              dtypes=tuple(dtypes), config="default", out_mode=out_mode,
                              layouts=("c",) * len(dtypes), seed=0, interleaved=interleaved,
                              force_dtype=force_dtype)


#: numpy raises on each of these (the first: issue 19's case, dtype=float64
#: into a NaN-filled float32 out=, a TypeError)
RAISING = {
    "dtype-into-narrower-out": _case("ij", [(3, 4)], ["float32"], "nan", "float64"),
    "dtype-into-narrower-out-interleaved": _case("ij->ji", [(2, 5)], ["float32"], "nan",
                                                 "float64", interleaved=True),
    "shape-mismatch": _case("ij,jk->ik", [(3, 4), (3, 4)], ["float64", "float64"]),
    "repeated-output-label": _case("ij->ii", [(3, 3)], ["float32"]),
    "label-not-in-input": _case("ij->k", [(3, 3)], ["float32"]),
    "too-many-labels": _case("ijk", [(3, 3)], ["float64"]),
}


def test_issue_19_call_raises_numpys_error():
    a32 = np.ones((3, 4), np.float32)
    out = np.full((3, 4), np.nan, np.float32)
    with pytest.raises(TypeError) as want:
        np.einsum("ij", a32, dtype="float64", out=out)
    with pytest.raises(DTypeError) as got:
        polyc.einsum("ij", a32, dtype="float64", out=out)
    assert isinstance(got.value, TypeError)
    assert str(got.value) == str(want.value)
    assert np.isnan(out).all()


@pytest.mark.parametrize("name", sorted(RAISING))
def test_oracle_passes_when_polyc_raises_like_numpy(name):
    r = fuzzgen.run_einsum(RAISING[name])
    assert r.status == "ok", r.message
    assert r.refused == 1 and r.compared == 0, r


def test_oracle_still_compares_values_when_numpy_does_not_raise():
    r = fuzzgen.run_einsum(_case("ij,jk->ik", [(3, 4), (4, 2)], ["float32", "float32"], "nan"))
    assert r.status == "ok", r.message
    assert r.compared == 1 and r.refused == 0, r


def _raise(exc):
    def einsum(*args, **kw):
        raise exc
    return einsum


@pytest.mark.parametrize("polyc_einsum,what", [
    (_raise(EinsumError("some other message")), "polyc raised EinsumError"),
    (_raise(ValueError("x")), "polyc raised ValueError"),
    (lambda *a, **kw: np.zeros((3, 4)), "polyc did not"),
])
def test_oracle_fails_when_polyc_raises_otherwise(monkeypatch, polyc_einsum, what):
    # numpy raises TypeError here: another class, another message or no error fails
    monkeypatch.setattr(polyc, "einsum", polyc_einsum)
    r = fuzzgen.run_einsum(RAISING["dtype-into-narrower-out"])
    assert r.status == "fail"
    assert "numpy raised TypeError" in r.message and what in r.message, r.message


def test_oracle_fails_on_a_wrong_message_of_the_right_class(monkeypatch):
    monkeypatch.setattr(polyc, "einsum", _raise(DTypeError("cannot cast")))
    r = fuzzgen.run_einsum(RAISING["dtype-into-narrower-out"])
    assert r.status == "fail" and "polyc raised DTypeError('cannot cast')" in r.message
