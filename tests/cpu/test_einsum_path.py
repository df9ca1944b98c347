"""``polyc.einsum(..., optimize=...)`` end to end (C/OpenMP) against
``numpy.einsum`` with the same ``optimize``: multi-operand networks contracted
pairwise, each step its own compiled kernel; dtypes, ``out=``, caching.
Values within :mod:`polyc.testing`'s per-dtype tolerances, shape and dtype
checked first.  The paths themselves are tested without compiling in
``tests/unit/test_einsum_plan.py``."""

from __future__ import annotations

import math

import numpy as np
import pytest

import polyc
from polyc import einsum_call, testing
from polyc.einsum_plan import plan_contraction
from polyc.frontend import einsum as fe

OPTIMIZE = [False, True, "greedy", "optimal", ("greedy", 10 ** 6)]

#: (id, subscripts, shapes)
NETWORKS = [
    ("chain3", "ij,jk,kl->il", [(7, 13), (13, 5), (5, 9)]),
    ("chain3-transposed-out", "ij,jk,kl->li", [(7, 13), (13, 5), (5, 9)]),
    ("chain3-implicit", "ij,jk,kl", [(4, 9), (9, 3), (3, 6)]),
    ("chain4", "ij,jk,kl,lm->im", [(6, 11), (11, 3), (3, 8), (8, 5)]),
    ("batched", "bij,bjk,bkl->bil", [(3, 4, 6), (3, 6, 5), (3, 5, 7)]),
    ("diagonal", "ii,ij,jk->k", [(5, 5), (5, 4), (4, 6)]),
    ("ellipsis", "...ij,jk,...kl->...il", [(2, 3, 4), (4, 5), (1, 5, 6)]),
    ("ellipsis-middle-out", "a...b,bc,c...->a...", [(3, 2, 4), (4, 5), (5, 2)]),
    ("scalar", ",ij,jk,k->i", [(), (4, 5), (5, 3), (3,)]),
    ("size-1-broadcast", "ij,jk,kl->il", [(3, 1), (4, 5), (5, 2)]),
    ("size-1-everywhere", "ij,jk,kl->il", [(1, 1), (1, 5), (5, 1)]),
    ("zero-size", "ij,jk,kl->il", [(3, 0), (0, 4), (4, 2)]),
    ("outer-no-sum", "i,j,k->ijk", [(2,), (3,), (4,)]),
    ("network5", "ea,fb,abcd,gc,hd->efgh", [(3, 2), (4, 3), (2, 3, 4, 5), (2, 4), (3, 5)]),
    ("inner", "i,ij,jk,k->", [(6,), (6, 4), (4, 7), (7,)]),
]


def _inputs(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-4, 5, size=s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _reduction_length(subscripts, operands) -> int:
    spec = fe.parse(subscripts, [np.shape(o) for o in operands])
    sizes = spec.label_sizes
    return math.prod(sizes[lab] for lab in spec.reduction_labels)


def check(got, subscripts, operands, optimize, **kw):
    """``got`` against ``np.einsum(..., optimize=optimize)``: the type of
    ``optimize=False``'s result (a numpy scalar for 0-d: numpy's pairwise
    path returns some 0-d results as arrays), shape, dtype, then values."""
    want = np.einsum(subscripts, *operands, optimize=optimize, **kw)
    assert type(got) is type(np.einsum(subscripts, *operands, **kw))
    testing.assert_close(got, want, reduction_length=_reduction_length(subscripts, operands),
                         name=f"{subscripts} optimize={optimize!r}")


@pytest.mark.parametrize("optimize", OPTIMIZE, ids=repr)
@pytest.mark.parametrize("case_id,subscripts,shapes", NETWORKS, ids=[n[0] for n in NETWORKS])
def test_networks_match_numpy(case_id, subscripts, shapes, optimize):
    ops = _inputs(shapes, "float64")
    check(polyc.einsum(subscripts, *ops, optimize=optimize), subscripts, ops, optimize)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
@pytest.mark.parametrize("case_id,subscripts,shapes",
                         [NETWORKS[0], NETWORKS[4], NETWORKS[6], NETWORKS[13]],
                         ids=["chain3", "batched", "ellipsis", "network5"])
def test_other_dtypes(case_id, subscripts, shapes, dtype):
    ops = _inputs(shapes, dtype, seed=1)
    check(polyc.einsum(subscripts, *ops, optimize=True), subscripts, ops, True)


def test_explicit_paths_are_honoured(monkeypatch):
    ops = _inputs([(3, 4), (4, 5), (5, 6)], "float64")
    for path in (["einsum_path", (1, 2), (0, 1)], ["einsum_path", (0, 2), (0, 1)],
                 ["einsum_path", (0,), (0, 1), (0, 1)], ["einsum_path", (0, 1, 2)]):
        compiled = _spy(monkeypatch)
        einsum_call.clear_kernels()
        got = polyc.einsum("ij,jk,kl->il", *ops, optimize=path)
        check(got, "ij,jk,kl->il", ops, path)
        steps = plan_contraction("ij,jk,kl->il", [o.shape for o in ops], ["float64"] * 3, path)
        assert compiled == [s.subscripts for s in steps]
    path, _ = polyc.einsum_path("ij,jk,kl->il", *ops, optimize="optimal")
    check(polyc.einsum("ij,jk,kl->il", *ops, optimize=path), "ij,jk,kl->il", ops, path)


def _spy(monkeypatch) -> list[str]:
    """Record the canonical subscripts of every kernel polyc.einsum compiles."""
    compiled: list[str] = []
    real = einsum_call._kernel_for

    def spy(spec, config):
        if (spec.key, config) not in einsum_call._KERNELS:
            compiled.append(spec.canonical)
        return real(spec, config)
    monkeypatch.setattr(einsum_call, "_kernel_for", spy)
    return compiled


def test_chain_at_200_runs_as_cubic_kernels(monkeypatch):
    """issue 14: optimize=True contracts ij,jk,kl->il at n=200 as two O(n^3)
    kernels, not one O(n^4) nest."""
    compiled = _spy(monkeypatch)
    einsum_call.clear_kernels()
    ops = _inputs([(200, 200)] * 3, "float64")
    got = polyc.einsum("ij,jk,kl->il", *ops, optimize=True)
    assert compiled == ["ij,jk->ik", "kl,ik->il"]
    steps = plan_contraction("ij,jk,kl->il", [(200, 200)] * 3, ["float64"] * 3, True)
    assert [s.scaling for s in steps] == [3, 3]
    testing.assert_close(got, ops[0] @ ops[1] @ ops[2], reduction_length=200 * 200)


def test_steps_are_cached_across_sizes():
    einsum_call.clear_kernels()
    ops = _inputs([(8, 8)] * 4, "float64")
    polyc.einsum("ij,jk,kl,lm->im", *ops, optimize=["einsum_path", (0, 1), (0, 1), (0, 1)])
    n = len(einsum_call._KERNELS)
    assert n == 3
    ops = _inputs([(5, 9), (9, 4), (4, 7), (7, 3)], "float64")
    got = polyc.einsum("ij,jk,kl,lm->im", *ops, optimize=["einsum_path", (0, 1), (0, 1), (0, 1)])
    assert len(einsum_call._KERNELS) == n
    check(got, "ij,jk,kl,lm->im", ops, False)


def test_mixed_dtypes_follow_numpy():
    ops = _inputs([(4, 5), (5, 6), (6, 3)], "float32")
    ops[2] = ops[2].astype(np.int32)
    for optimize in (False, True):
        got = polyc.einsum("ij,jk,kl->il", *ops, optimize=optimize)
        check(got, "ij,jk,kl->il", ops, optimize)
        assert got.dtype == np.float64
    # float32 intermediates, as numpy's: float32 rounding, checked as float32
    ops = _inputs([(4, 5), (5, 6)], "float32") + _inputs([(6, 3)], "float64")
    want = np.einsum("ij,jk,kl->il", *ops, optimize=True)
    got = polyc.einsum("ij,jk,kl->il", *ops, optimize=True)
    assert got.dtype == want.dtype == np.float64
    testing.assert_close(got.astype(np.float32), want.astype(np.float32), reduction_length=30)
    got = polyc.einsum("ij,jk,kl->il", *ops, optimize=True, dtype="float64")
    check(got, "ij,jk,kl->il", ops, True, dtype="float64")


def test_int8_intermediates_wrap_as_numpys():
    ops = [np.full((3, 3), 100, np.int8)] * 2 + [np.ones((3, 2), np.float32)]
    path = ["einsum_path", (0, 1), (0, 1)]
    got = polyc.einsum("ij,jk,kl->il", *ops, optimize=path)
    # numpy's int8 intermediate wraps around (30000 mod 256, three times)
    want = np.einsum("ij,jk,kl->il", *ops, optimize=path)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype == np.float32 and want[0, 0] != 90000


@pytest.mark.parametrize("kind", ["contiguous", "strided", "wider", "aliases-input"])
def test_out_receives_the_last_step(kind):
    ops = _inputs([(4, 5), (5, 6), (6, 4)], "float64")
    if kind == "contiguous":
        out = np.full((4, 4), np.nan)
    elif kind == "strided":
        out = np.full((4, 8), np.nan)[:, ::2]
    elif kind == "wider":
        ops = [o.astype(np.float32) for o in ops]
        out = np.full((4, 4), np.nan)
    else:
        ops[2] = ops[2][:4, :4].copy()
        ops[0] = ops[0][:, :4].copy()
        ops[1] = ops[1][:4, :4].copy()
        out = ops[0]
    want = np.einsum("ij,jk,kl->il", *[o.copy() for o in ops], optimize=True,
                     out=np.empty(out.shape, out.dtype))
    got = polyc.einsum("ij,jk,kl->il", *ops, optimize=True, out=out)
    assert got is out
    if kind == "wider":
        # numpy computes the last step in float32 and casts; polyc computes
        # it in float64, the call's type (as for optimize=False)
        out, want = out.astype(np.float32), want.astype(np.float32)
    testing.assert_close(out, want, reduction_length=30)


def test_subscript_errors_do_not_depend_on_optimize():
    ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))]
    for optimize in (False, True):
        with pytest.raises(polyc.EinsumError, match="never appeared in an input"):
            polyc.einsum("ij,jk,kl->iz", *ops, optimize=optimize)
        with pytest.raises(polyc.DTypeError, match="could not be cast"):
            polyc.einsum("ij,jk,kl->il", *ops, optimize=optimize, dtype="int32")


def test_the_examples_of_docs_einsum_md_run():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "einsum.md").read_text()
    blocks = [b.split("```")[0] for b in text.split("```python\n")[1:]]
    assert any("optimize=path" in b for b in blocks)
    namespace: dict = {}          # the page reads top to bottom: one namespace
    for block in blocks:
        exec(compile(block, "docs/einsum.md", "exec"), namespace)
    assert namespace["path"] == ["einsum_path", (0, 1), (0, 1)]
