"""Integer array indexing in ``@polyc.jit`` (``polyc/graph/gather.py``):
embedding lookups, label picks, ``np.take``/``np.take_along_axis``, numpy's
placement rule for separated index arrays, negative indices, the per-call
bounds check of index arrays passed in, and the same gathers reached from
``torch.compile(backend="polyc")``; each against plain numpy (or torch)
on seeded inputs."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import expr as E
from polyc.errors import IndexBoundsError, UnsupportedError
from polyc.loopnest import Block, For, Local, StmtInstance, merge_split_locals

from .test_ops import F32, F64, check, rand

RNG = np.random.default_rng(30)
IDS = RNG.integers(-10, 10, (3, 4))
LABELS = RNG.integers(0, 5, 6)


def _lookups(w, ids, labels):
    return (w[ids], w[ids] * 2 + 1, w[[0, -1, 3]], np.take(w, ids[0], axis=0),
            np.take(w, labels, axis=1), np.take(w, labels), w[ids[0, 1]])


def _picks(x, labels):
    lp = x - np.log(np.exp(x).sum(1, keepdims=True))
    return (x[np.arange(6), labels], -lp[np.arange(6), labels].mean(), x[:, labels[:2]],
            x[labels[:3], 1:4], np.take_along_axis(x, labels[:, None], 1),
            x[np.argmax(x, 1), labels])


@pytest.mark.parametrize("dtype", [F32, F64])
def test_embedding_lookups_and_takes(dtype):
    check(_lookups, rand((10, 5), dtype, seed=31), IDS, LABELS)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_label_picks_and_take_along_axis(dtype):
    check(_picks, rand((6, 5), dtype, seed=32), LABELS, reduction_length=5)


def test_numpy_placement_of_separated_index_arrays():
    x = rand((3, 4, 5), F64, seed=33)
    i, j = np.array([2, 0]), np.array([4, 1])
    check(lambda a, p, q: (a[p, :, q], a[:, p, q], a[0, :, q], a[p, 1], a[..., q],
                           a[p][:, ::-1, 1]), x, i, j)


def test_out_of_bounds_index_arrays_raise_at_each_call():
    f = polyc.jit(lambda w, i: w[i])
    w = rand((10, 3), F32)
    np.testing.assert_array_equal(f(w, np.array([9, -10])), w[[9, -10]])
    for bad in (np.array([1, 10]), np.array([-11])):
        with pytest.raises(IndexBoundsError, match="out of bounds for an axis of size 10"):
            f(w, bad)
    with pytest.raises(IndexError):                 # (IndexBoundsError is an IndexError)
        f(w, np.array([12]))


def test_boolean_and_float_indices_are_refused():
    x = rand((4, 3), F32)
    with pytest.raises(UnsupportedError, match="boolean selection"):
        polyc.jit(lambda a: a[a > 0])(x)
    with pytest.raises(IndexError, match="integer"):
        polyc.jit(lambda a, i: a[i])(x, np.array([0.5]))


def test_gather_feeding_a_contraction_stays_on_the_gemm_path():
    w, m = rand((200, 32), F32, seed=34), rand((32, 16), F32, seed=35)
    ids = RNG.integers(0, 200, 64)
    check(lambda a, i, b: np.tanh(a[i] @ b + 1), w, ids, m, reduction_length=32)


def test_log_softmax_then_gather_across_split_loop_pieces():
    """A regression: the picked value (contracted to a buffer of the
    innermost loop) was written and read in two pieces isl's code generation
    split one iteration of that loop into, each declaring its own buffer."""
    x = rand((2, 5, 8), F32, seed=36)
    lab = RNG.integers(0, 4, (2, 5))

    def f(a, l):
        h = a[..., :4]
        s = h - h.max(-1, keepdims=True)
        lp = s - np.log(np.exp(s).sum(-1, keepdims=True))
        return np.take_along_axis(lp, np.expand_dims(l, -1), -1).squeeze(-1)
    check(f, x, lab, reduction_length=4)


def test_merge_split_locals_declares_a_split_buffer_once():
    def local(body):
        return Local("t_c", "float32", (1,), body)
    seq = For("c2", E.Const(0), E.Const(3), 1, local(StmtInstance("S0", ())))
    par = For("c3", E.Const(0), E.Const(3), 1, local(StmtInstance("S3", ())), parallel=True)
    nest = Block((seq, local(StmtInstance("S1", ())), local(StmtInstance("S2", ())), par))
    out = merge_split_locals(nest)
    assert isinstance(out, Local) and out.name == "t_c"
    inner = out.body
    assert inner.children[1] == StmtInstance("S1", ())
    assert inner.children[2] == StmtInstance("S2", ())
    assert isinstance(inner.children[0].body, Local)               # loop pieces keep theirs
    assert isinstance(inner.children[3].body, Local)
    single = Block((local(StmtInstance("S1", ())), StmtInstance("S2", ())))
    assert merge_split_locals(single) == single


def test_torch_embedding_gather_index_select_and_index():
    torch = pytest.importorskip("torch")

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(50, 8)
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, ids, labels):
            h = self.lin(self.emb(ids))
            lp = torch.log_softmax(h, -1)
            picked = torch.gather(lp, -1, labels.unsqueeze(-1)).squeeze(-1)
            return picked, torch.index_select(h, 1, labels[0]), h[:, labels[0, :2]]
    torch.manual_seed(37)
    m = Tagger().eval()
    ids, labels = torch.randint(0, 50, (2, 5)), torch.randint(0, 4, (2, 5))
    with torch.no_grad():
        got = torch.compile(m, backend="polyc")(ids, labels)
        ref = m(ids, labels)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [lambda a: a[1.5], lambda a: a[1, np.float64(2)],
                                lambda a: a[np.float32(1)], lambda a: a.copy().__setitem__(1.0, 0)])
def test_a_float_index_is_numpys_index_error(fn):
    """numpy refuses a float index (``IndexError``); polyc truncated it
    (``x[1.5]`` gave ``x[1]``, ``y[1.5] = 0`` assigned row 1)."""
    x = rand((4, 5), F32, 3)
    with pytest.raises(IndexError, match="only integers, slices"):
        fn(x)
    with pytest.raises(IndexError, match="only integers, slices"):
        polyc.jit(fn)(x)
