"""einsum calls numpy rejects: polyc rejects each with numpy's own message.

For every case numpy.einsum is called on the same arguments first; polyc
must raise a :class:`~polyc.errors.PolycError` whose text is numpy's and
which is also the builtin class numpy raised (``EinsumError`` is a
``ValueError``, ``BindingError`` and ``DTypeError`` are ``TypeError``s).
The subscripts come from a hand-written list and from every one-character
edit (deletion, insertion of a character from the grammar and a few from
outside it) of valid subscripts; edits numpy accepts must parse to numpy's
output shape.  Nothing here executes generated code (the calls that do are
in ``test_bad_calls.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402

import polyc  # noqa: E402
from polyc.frontend import einsum as fe  # noqa: E402


def _ops(*shapes, dtype=np.float64):
    return [np.ones(s, dtype=dtype) for s in shapes]


#: (id, subscripts, operand shapes, keyword arguments)
HAND = [
    ("too-few-operands", "ij,jk->ik", [(2, 3)], {}),
    ("too-many-operands", "ij->ij", [(2, 3), (3, 4)], {}),
    ("too-many-letters", "ijk,jk->ik", [(2, 3), (3, 4)], {}),
    ("too-few-letters", "i,jk->ik", [(2, 3), (3, 4)], {}),
    ("lone-dot", "i.j,jk->ik", [(2, 3), (3, 4)], {}),
    ("two-dots", "..ij,jk->ik", [(2, 3), (3, 4)], {}),
    ("two-ellipses", "...i...,j->ij", [(2, 3), (3,)], {}),
    ("dot-in-output", "ij,jk->i.k", [(2, 3), (3, 4)], {}),
    ("digit", "i1,jk->ik", [(2, 3), (3, 4)], {}),
    ("underscore", "i_,jk->ik", [(2, 3), (3, 4)], {}),
    ("dash-without-gt", "ij,jk-ik", [(2, 3), (3, 4)], {}),
    ("gt-without-dash", "ij,jk>ik", [(2, 3), (3, 4)], {}),
    ("double-arrow", "ij,jk->ik->i", [(2, 3), (3, 4)], {}),
    ("space-inside-arrow", "ij,jk- >ik", [(2, 3), (3, 4)], {}),
    ("repeated-output", "ij,jk->ii", [(2, 3), (3, 4)], {}),
    ("output-not-in-input", "ij,jk->iz", [(2, 3), (3, 4)], {}),
    ("ellipsis-dropped", "...ij,jk->ik", [(5, 2, 3), (3, 4)], {}),
    ("diagonal-mismatch", "ii->i", [(2, 3)], {}),
    ("diagonal-mismatch-two-operands", "ii,i->i", [(2, 3), (2,)], {}),
    ("contraction-mismatch", "ij,jk->ik", [(2, 3), (4, 5)], {}),
    ("broadcast-mismatch", "...i,...i->...i", [(2, 3), (4, 3)], {}),
    ("semicolon", "ij;jk->ik", [(2, 3), (3, 4)], {}),
    ("empty-with-operand", "", [(2, 3)], {}),
    ("only-arrow", "->", [(2, 3)], {}),
    ("only-comma", ",", [(2, 3), (3,)], {}),
    ("non-ascii", "i\u00e9,jk->ik", [(2, 3), (3, 4)], {}),
    ("tab", "i\tj,jk->ik", [(2, 3), (3, 4)], {}),
    ("newline", "ij,jk->ik\n", [(2, 3), (3, 4)], {}),
    ("out-wrong-rank", "ij,jk->ik", [(2, 3), (3, 4)], {"out": (2, 4, 1)}),
    ("out-requires-reduction", "ij,jk->ik", [(2, 3), (3, 4)], {"out": (1, 4)}),
    ("out-wrong-size", "ij,jk->ik", [(2, 3), (3, 4)], {"out": (2, 5)}),
    ("out-readonly", "ij,jk->ik", [(2, 3), (3, 4)], {"out": "readonly"}),
    ("out-not-array", "ij,jk->ik", [(2, 3), (3, 4)], {"out": "list"}),
    ("out-wrong-dtype", "ij,jk->ik", [(2, 3), (3, 4)], {"out": "int64"}),
    ("casting-no", "ij,jk->ik", [(2, 3), (3, 4)], {"dtype": "float32", "casting": "no"}),
    ("casting-bogus", "ij,jk->ik", [(2, 3), (3, 4)], {"casting": "bogus"}),
    ("casting-not-str", "ij,jk->ik", [(2, 3), (3, 4)], {"casting": 5}),
    ("dtype-bogus", "ij,jk->ik", [(2, 3), (3, 4)], {"dtype": "bogus"}),
    ("unknown-keyword", "ij,jk->ik", [(2, 3), (3, 4)], {"foo": 1}),
    ("no-operands", "ij", [], {}),
    ("64-operands", ",".join(["i"] * 64), [(2,)] * 64, {}),
    ("ragged-list", "ij", "ragged", {}),
    ("none-operand", "ij", "none", {}),
]

#: The interleaved form: (id, args)
SUBLISTS = [
    ("sublist-float", lambda: (np.ones((2, 3)), [0, 1.5])),
    ("sublist-out-of-range", lambda: (np.ones((2, 3)), [0, 60])),
    ("sublist-negative", lambda: (np.ones((2, 3)), [0, -1])),
    ("sublist-not-a-list", lambda: (np.ones((2, 3)), 5)),
    ("sublist-repeated-output", lambda: (np.ones((2, 3)), [0, 1], [0, 0])),
    ("sublist-string-items", lambda: (np.ones((2, 3)), ["i", "j"])),
    ("sublist-array-as-subscripts", lambda: (5, np.ones((2, 3)))),
    ("sublist-none-subscripts", lambda: (None, np.ones((2, 3)))),
    ("sublist-bool-items", lambda: (np.ones((2, 3)), [True, False])),
]


def _call(fn, subscripts, spec, kwargs):
    if spec == "ragged":
        ops = [[[1, 2], [3]]]
    elif spec == "none":
        ops = [None]
    else:
        ops = _ops(*spec)
    kw = dict(kwargs)
    if "out" in kw:
        what = kw["out"]
        if what == "readonly":
            out = np.empty((2, 4))
            out.flags.writeable = False
        elif what == "list":
            out = [[0.0] * 4] * 2
        elif what == "int64":
            out = np.empty((2, 4), np.int64)
        else:
            out = np.empty(what)
        kw["out"] = out
    return fn(subscripts, *ops, **kw)


def _numpy_error(thunk):
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 - what numpy raises is the reference
        return e
    return None


def _compare(np_thunk, pc_thunk):
    want = _numpy_error(np_thunk)
    assert want is not None, "numpy accepts this call; it does not belong in this corpus"
    outcome = H.capture(lambda: pc_thunk() and None)
    H.expect_error(outcome, "PolycError")
    assert type(want).__name__ in outcome["mro"] or any(
        c.__name__ in outcome["mro"] for c in type(want).__mro__[:-2]), (
        f"numpy raised {type(want).__name__}, polyc {outcome['cls']}")
    assert outcome["message"] == str(want), (
        f"message differs from numpy's:\n polyc: {outcome['message']}\n numpy: {want}")


@pytest.mark.parametrize("case", HAND, ids=[c[0] for c in HAND])
def test_einsum_rejected_like_numpy(case):
    _, subscripts, spec, kwargs = case
    _compare(lambda: _call(np.einsum, subscripts, spec, kwargs),
             lambda: _call(polyc.einsum, subscripts, spec, kwargs))


@pytest.mark.parametrize("case", SUBLISTS, ids=[c[0] for c in SUBLISTS])
def test_einsum_sublists_rejected_like_numpy(case):
    _, make = case
    _compare(lambda: np.einsum(*make()), lambda: polyc.einsum(*make()))


# ------------------------------------------------- one-character edits of valid calls
VALID = [("ij,jk->ik", [(2, 3), (3, 4)]), ("...i,i->...", [(4, 2, 3), (3,)]),
         ("ii->i", [(3, 3)]), ("i,j", [(2,), (3,)])]
INSERT = [",", "-", ">", ".", " ", "i", "k", "Z", "1", "\u00e9", "\0", "("]


def _edits():
    out = []
    for v, (sub, shapes) in enumerate(VALID):
        for pos in range(len(sub) + 1):
            if pos < len(sub):
                out.append((f"v{v}-delete-{pos}", sub[:pos] + sub[pos + 1:], shapes))
            for ch in INSERT:
                name = {"\0": "nul", "\u00e9": "e-acute", " ": "space"}.get(ch, ch)
                out.append((f"v{v}-insert-{name}-at-{pos}", sub[:pos] + ch + sub[pos:], shapes))
    # one id per distinct (subscripts, shapes)
    seen, unique = set(), []
    for cid, sub, shapes in out:
        key = (sub, tuple(shapes))
        if key not in seen:
            seen.add(key)
            unique.append((cid, sub, shapes))
    return unique


EDITS = _edits()


@pytest.mark.parametrize("case", EDITS, ids=[c[0] for c in EDITS])
def test_einsum_edit(case):
    _, sub, shapes = case
    ops = _ops(*shapes)
    want = _numpy_error(lambda: np.einsum(sub, *ops))
    if "\0" in sub:
        # documented difference: numpy truncates at NUL, polyc refuses it
        H.expect_error(H.capture(lambda: fe.parse(sub, shapes) and None), "EinsumError",
                       ("invalid subscript '\\x00'",))
        return
    if want is None:
        spec = fe.parse(sub, shapes)
        assert spec.output_shape == np.einsum(sub, *ops).shape
        return
    _compare(lambda: np.einsum(sub, *ops), lambda: polyc.einsum(sub, *ops))
