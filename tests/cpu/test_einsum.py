"""``polyc.einsum`` end to end (C/OpenMP) against ``numpy.einsum``: seeded
random inputs, shape and dtype checked before values, per-dtype tolerances;
``out=``, ``dtype=``, the interleaved form, non-contiguous inputs, and one
compiled kernel reused across sizes."""

from __future__ import annotations

import numpy as np
import pytest

from polyc import einsum_call
from polyc.einsum_call import einsum
from polyc.frontend import einsum as fe

#: Relative tolerance per computation dtype; float32 grows with the square
#: root of the reduction length.  The bound is taken relative to
#: einsum(|operands|), so cancellation in a sum cannot make it meaningless.
RTOL = {"float32": 1e-4, "float64": 1e-10, "int32": 0, "int64": 0}


def _inputs(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-6, 7, size=s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def assert_matches(got, subscripts, operands, dtype=None, *, reduction=None):
    """``got`` equals ``np.einsum(subscripts, *operands)``: shape and dtype
    first, then values within :data:`RTOL` (reported with the worst index)."""
    want = np.einsum(subscripts, *operands, **({} if dtype is None else {"dtype": dtype}))
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    assert got_arr.shape == want_arr.shape, f"shape {got_arr.shape} != numpy's {want_arr.shape}"
    assert got_arr.dtype == want_arr.dtype, f"dtype {got_arr.dtype} != numpy's {want_arr.dtype}"
    assert np.ndim(got) == np.ndim(want) and type(got) is type(want)
    name = got_arr.dtype.name
    if name.startswith("int"):
        np.testing.assert_array_equal(got_arr, want_arr)
        return
    if reduction is None:
        shapes = [np.shape(o) for o in operands]
        spec = fe.parse(subscripts, shapes)
        sizes = spec.label_sizes
        reduction = int(np.prod([sizes[lab] for lab in spec.reduction_labels], dtype=np.int64))
    rtol = RTOL[name] * np.sqrt(max(reduction, 1)) if name == "float32" else RTOL[name]
    exact = np.einsum(subscripts, *[np.asarray(o, np.float64) for o in operands])
    scale = np.einsum(subscripts, *[np.abs(np.asarray(o, np.float64)) for o in operands])
    err = np.abs(got_arr.astype(np.float64) - exact)
    bound = rtol * scale + np.finfo(name).tiny
    if got_arr.size and not np.all(err <= bound):
        worst = np.unravel_index(np.argmax(err - bound), err.shape) if err.ndim else ()
        rel = err[worst] / max(abs(exact[worst]), np.finfo(name).tiny)
        pytest.fail(f"{subscripts} ({name}): max abs error {err.max():.3e} at index {worst} "
                    f"(relative {rel:.3e}, allowed {rtol:.1e} x {scale[worst]:.3e}); "
                    f"got {got_arr[worst]!r}, numpy {want_arr[worst]!r}")


CASES = [
    ("ij,jk->ik", [(7, 13), (13, 5)]),                 # matmul, primes
    ("ij,jk", [(1, 1), (1, 1)]),                       # implicit, sizes 1
    ("ik,kj->ij", [(31, 17), (17, 23)]),
    ("bij,bjk->bik", [(3, 5, 7), (3, 7, 2)]),          # batched
    ("...ij,...jk->...ik", [(2, 1, 4, 5), (3, 5, 6)]),  # batched, ... with size 1
    ("ij->ji", [(5, 7)]),                              # transposes
    ("ijk->kij", [(2, 3, 5)]),
    ("ji", [(3, 4)]),
    ("ii", [(7, 7)]),                                  # trace
    ("ii->i", [(5, 5)]),                               # diagonal
    ("iij->ji", [(3, 3, 4)]),
    ("i...i->...i", [(3, 2, 3)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i,j->ij", [(5,), (7,)]),                        # outer products
    ("i,j", [(3,), (2,)]),
    ("a,b,c->abc", [(2,), (3,), (5,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),                   # elementwise
    ("i,i", [(11,)] * 2),                              # inner
    ("...,...", [(3, 1, 5), (4, 1)]),                  # broadcasting, size 1
    ("...i,...i->...", [(1, 3), (4, 3)]),
    ("ij,j->i", [(3, 1), (4,)]),                       # a labelled size-1 dim broadcasts
    (",->", [(), ()]),                                 # scalars
    (",i->i", [(), (6,)]),
    ("", [()]),
    ("ij,jk->ik", [(0, 3), (3, 4)]),                   # zero-size output
    ("ij,jk->ik", [(3, 0), (0, 4)]),                   # zero-size reduction
    ("i,i->", [(0,), (0,)]),
    ("i->", [(13,)]),                                  # sums
    ("ij->", [(17, 19)]),
    ("ij->i", [(17, 19)]),
    ("abc,bcd,cd->ad", [(2, 3, 5), (3, 5, 7), (5, 7)]),  # three operands
    ("bn,anm,bm->ba", [(3, 4), (2, 4, 5), (3, 5)]),    # bilinear
    ("Ab,bC->AC", [(3, 4), (4, 2)]),                   # uppercase labels
]


@pytest.mark.parametrize("subscripts, shapes", CASES, ids=[c[0] or "''" for c in CASES])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_matches_numpy(subscripts, shapes, dtype):
    ops = _inputs(shapes, dtype, seed=len(subscripts) * 7 + len(shapes))
    assert_matches(einsum(subscripts, *ops), subscripts, ops)


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ik", [(9, 4), (4, 3)]), ("ii", [(5, 5)]), ("i,j->ij", [(3,), (4,)])])
def test_int32(subscripts, shapes):
    ops = _inputs(shapes, "int32", seed=3)
    assert_matches(einsum(subscripts, *ops), subscripts, ops)


def test_larger_float32_contraction_within_tolerance():
    ops = _inputs([(64, 257), (257, 33)], "float32", seed=11)
    assert_matches(einsum("ij,jk->ik", *ops), "ij,jk->ik", ops)


def test_mixed_dtypes_promote_as_numpy():
    a = _inputs([(4, 5)], "int32", 1)[0]
    b = _inputs([(5, 3)], "float32", 2)[0]
    assert_matches(einsum("ij,jk->ik", a, b), "ij,jk->ik", [a, b])   # float64


def test_python_scalars_and_lists():
    assert_matches(einsum("i,i", [1, 2, 3], [4, 5, 6]), "i,i", [[1, 2, 3], [4, 5, 6]])
    assert_matches(einsum(",", 3, 2.5), ",", [3, 2.5])


def test_scalar_result_is_a_numpy_scalar():
    a = np.arange(4.0)
    got = einsum("i,i", a, a)
    assert type(got) is np.float64 and got == 14.0


def test_result_is_a_new_array_not_a_view():
    a = np.arange(6.0).reshape(2, 3)
    t = einsum("ij->ji", a)
    t[0, 0] = 100.0
    assert a[0, 0] == 0.0


def test_non_contiguous_inputs():
    base = _inputs([(8, 10)], "float64", 5)[0]
    a = base[::2, 1::3]          # strided, (4, 3)
    b = base.T[::-1, ::3]        # transposed, negative stride, (10, 3)
    assert_matches(einsum("ij,kj->ik", a, b), "ij,kj->ik", [a, b])
    assert_matches(einsum("ij->i", base.T), "ij->i", [base.T])


def test_sublist_form():
    a, b = _inputs([(3, 4), (4, 5)], "float64", 9)
    got = einsum(a, [0, 1], b, [1, 2], [0, 2])
    np.testing.assert_allclose(got, a @ b, rtol=1e-12)
    got = einsum(a, [Ellipsis, 1], a.T, [1, Ellipsis])
    np.testing.assert_allclose(got, np.einsum(a, [Ellipsis, 1], a.T, [1, Ellipsis]), rtol=1e-12)


# -- out= -------------------------------------------------------------------

def test_out_receives_the_result():
    a, b = _inputs([(5, 6), (6, 7)], "float64", 4)
    out = np.full((5, 7), np.nan)
    assert einsum("ij,jk->ik", a, b, out=out) is out
    assert_matches(out, "ij,jk->ik", [a, b])


def test_out_rank_zero():
    a = np.arange(5.0)
    out = np.zeros(())
    assert einsum("i,i->", a, a, out=out) is out and out[()] == 30.0


def test_out_with_wider_dtype_computes_in_it():
    a, b = _inputs([(4, 5), (5, 3)], "float32", 6)
    out = np.zeros((4, 3), np.float64)
    einsum("ij,jk->ik", a, b, out=out)
    np.testing.assert_array_equal(out, np.einsum("ij,jk->ik", a, b, out=np.zeros((4, 3))))


def test_out_non_contiguous():
    a, b = _inputs([(4, 5), (5, 3)], "float64", 8)
    big = np.zeros((8, 3))
    out = big[::2]
    einsum("ij,jk->ik", a, b, out=out)
    np.testing.assert_allclose(big[::2], a @ b, rtol=1e-12)
    assert not big[1::2].any()


def test_out_broadcasts_size_one_labels_like_numpy():
    a = _inputs([(1, 3)], "float64", 2)[0]
    out, ref = np.zeros(5), np.zeros(5)
    einsum("ij->i", a, out=out)
    np.einsum("ij->i", a, out=ref)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_out_overlapping_an_input():
    a = _inputs([(4, 4)], "float64", 12)[0]
    want = a.sum(axis=0)
    einsum("ij->j", a, out=a[0])
    np.testing.assert_allclose(a[0], want, rtol=1e-12)


# -- dtype= -----------------------------------------------------------------

@pytest.mark.parametrize("src, dtype", [("int32", "float64"), ("float32", "float64"),
                                        ("int64", "float64"), ("int32", "int64"),
                                        ("int8", "int32")])
def test_dtype_parameter(src, dtype):
    ops = _inputs([(4, 6), (6, 3)], src, 13)
    got = einsum("ij,jk->ik", *ops, dtype=dtype)
    assert_matches(got, "ij,jk->ik", ops, dtype=dtype)


def test_dtype_with_unsafe_casting():
    ops = _inputs([(4, 6), (6, 3)], "float64", 14)
    got = einsum("ij,jk->ik", *ops, dtype="float32", casting="same_kind")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.einsum("ij,jk->ik", *ops, dtype="float32",
                                              casting="same_kind"), rtol=1e-4 * np.sqrt(6))


# -- one kernel per structure --------------------------------------------------

def test_same_kernel_serves_other_sizes():
    before = len(einsum_call._KERNELS)
    a, b = _inputs([(3, 5), (5, 2)], "float64", 15)
    assert_matches(einsum("pq,qr->pr", a, b), "pq,qr->pr", [a, b])
    c, d = _inputs([(11, 7), (7, 13)], "float64", 16)
    assert_matches(einsum("pq,qr->pr", c, d), "pq,qr->pr", [c, d])
    e, f = _inputs([(0, 7), (7, 1)], "float64", 17)
    assert_matches(einsum("pq,qr->pr", e, f), "pq,qr->pr", [e, f])
    assert len(einsum_call._KERNELS) == before + 1
    # a size-1 dimension that broadcasts is a different structure
    g, h = _inputs([(3, 1), (5, 2)], "float64", 18)
    assert_matches(einsum("pq,qr->pr", g, h), "pq,qr->pr", [g, h])
    assert len(einsum_call._KERNELS) == before + 2


def _random_valid_call(rng: np.random.Generator):
    """A random einsum numpy accepts: 1-3 operands over labels from a small
    pool, some repeated, some size 1 (broadcast), sometimes '...'."""
    while True:
        pool = "abcdAB"
        sizes = {lab: int(rng.choice([0, 1, 2, 3, 5], p=[0.05, 0.15, 0.3, 0.3, 0.2]))
                 for lab in pool}
        nb = int(rng.integers(0, 3))
        ell = [int(rng.choice([1, 2, 3])) for _ in range(nb)]
        subs, shapes = [], []
        for _ in range(int(rng.integers(1, 4))):
            labels = list(rng.choice(list(pool), size=int(rng.integers(0, 4))))
            shape = [1 if rng.random() < 0.2 else sizes[lab] for lab in labels]
            first = {}
            for d, lab in enumerate(labels):      # repeated labels: equal sizes
                shape[d] = shape[first.setdefault(lab, d)]
            text = "".join(labels)
            if nb and rng.random() < 0.5:
                k = int(rng.integers(0, nb + 1))
                pos = int(rng.integers(0, len(labels) + 1))
                text = text[:pos] + "..." + text[pos:]
                shape[pos:pos] = [1 if rng.random() < 0.3 else n for n in ell[nb - k:]]
            subs.append(text)
            shapes.append(tuple(shape))
        s = ",".join(subs)
        if rng.random() < 0.5:
            used = sorted({c for c in s if c.isalpha()})
            out = list(rng.permutation(used))[:int(rng.integers(0, len(used) + 1))]
            s += "->" + ("..." if "..." in s else "") + "".join(out)
        try:
            np.einsum(s, *[np.ones(x) for x in shapes])
        except ValueError:
            continue
        return s, shapes


def test_random_calls_match_numpy():
    """Seeded random subscripts (diagonals, broadcasting, '...', zero sizes)
    end to end; integer-valued float64 data, so results must be exact."""
    rng = np.random.default_rng(2024)
    for _ in range(40):
        s, shapes = _random_valid_call(rng)
        ops = [rng.integers(-4, 5, size=x).astype(np.float64) for x in shapes]
        got, want = einsum(s, *ops), np.einsum(s, *ops)
        assert np.shape(got) == np.shape(want), (s, shapes)
        np.testing.assert_array_equal(got, want, err_msg=f"{s} {shapes}")
