"""Intermediates kept between jitted calls (polyc.graph.workspace): buffers
shared only by tensors whose live ranges do not overlap, results identical
to fresh arrays, returned arrays never reused, one workspace per call in
flight.  Tolerances: polyc.testing.assert_close with the longest reduction."""

from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polyc
from polyc.graph.workspace import ALIGN, Workspace
from polyc.testing import assert_close

RNG = np.random.default_rng(21)


def _src(ins, outs):
    return NS(inputs=[NS(name=n) for n in ins], outputs=[NS(name=n) for n in outs])


def chain(x, w1, w2):
    h = np.maximum(x @ w1, 0.0)             # three kernels' worth of intermediates
    g = np.tanh(h) * 0.5 + h
    return (g @ w2).sum(-1, keepdims=True) + x[:, :1]


def _inputs(m=192, k=160, n=224):
    return [RNG.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (n, k))]


def _check(out, args):
    ref = chain(*(a.astype(np.float64) for a in args))
    assert_close(out, ref, dtype=np.float32, reduction_length=224)


def test_assign_shares_only_disjoint_live_ranges():
    # k0: a -> t0; k1: t0 -> t1; k2: t1 -> t2; k3: t2, t0 -> out
    ws = Workspace([_src(["a"], ["t0"]), _src(["t0"], ["t1"]), _src(["t1"], ["t2"]),
                    _src(["t2", "t0"], ["out"])], returned={"out"})
    assert ws.live == {"t0": (0, 3), "t1": (1, 2), "t2": (2, 3)}
    caps, where = ws.assign({"t0": 1000, "t1": 64, "t2": 10})
    assert where["t0"] != where["t1"] and where["t0"] != where["t2"]
    assert where["t1"] != where["t2"]                  # k2 reads t1 while writing t2
    assert len(caps) == 3 and caps[where["t0"]] == 1024


def test_assign_reuses_a_dead_slot_and_grows_it():
    ws = Workspace([_src(["a"], ["t0"]), _src(["t0"], ["t1"]), _src(["t1"], ["t2"]),
                    _src(["t2"], ["out"])], returned={"out"})
    caps, where = ws.assign({"t0": 100, "t1": 100, "t2": 5000})
    assert where["t2"] == where["t0"]                  # t0 died at k1, before k2
    assert len(caps) == 2 and caps[where["t2"]] == -(-5000 // ALIGN) * ALIGN


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 3), st.integers(1, 9000)),
                min_size=1, max_size=12))
def test_assign_never_overlaps_live_tensors(spec):
    """Random programs: per kernel, how far back its input reaches, how many
    outputs, their size.  No two tensors live in one kernel share a slot,
    and each slot holds its largest tenant."""
    sources, made, nbytes = [], [], {}
    for k, (back, nout, size) in enumerate(spec):
        ins = [made[max(0, len(made) - 1 - back)]] if made else ["arg"]
        outs = [f"t{k}_{j}" for j in range(nout)]
        sources.append(_src(ins, outs))
        made += outs
        nbytes.update({o: size * (j + 1) for j, o in enumerate(outs)})
    ws = Workspace(sources, returned={made[-1]})
    caps, where = ws.assign(nbytes)
    for t, s in where.items():
        assert caps[s] >= nbytes[t] and caps[s] % ALIGN == 0
    for k in range(len(sources)):
        live = [t for t, (a, b) in ws.live.items() if a <= k <= b]
        slots = [where[t] for t in live]
        assert len(slots) == len(set(slots)), (k, live, slots)


def test_jit_reuses_intermediates_and_matches_fresh_arrays():
    fn = polyc.jit(chain)
    args = _inputs()
    first = fn(*args)
    p = fn.plan(*args)
    assert len(p.groups) >= 2 and p.workspace.live, p.explain()
    second = fn(*args)
    key = next(iter(p.workspace._layouts))
    assert p.workspace.total_bytes(key) > 0
    np.testing.assert_array_equal(first, second)
    _check(second, args)
    # the buffers come back: the next call runs on the same memory
    pool = p.workspace._pools[key]
    assert len(pool) == 1
    ids = {t: a.ctypes.data for t, a in pool[0].items()}
    fn(*args)
    assert {t: a.ctypes.data for t, a in p.workspace._pools[key][0].items()} == ids


def test_returned_arrays_are_never_reused():
    fn = polyc.jit(chain)
    a, b = _inputs(), _inputs()
    out_a = fn(*a)
    keep = out_a.copy()
    for _ in range(3):
        out_b = fn(*b)
    np.testing.assert_array_equal(out_a, keep)          # not overwritten by later calls
    assert not np.shares_memory(out_a, out_b)
    _check(out_b, b)


def test_each_shape_class_has_its_own_workspace():
    fn = polyc.jit(chain)
    for m in (192, 17, 192, 3, 17):
        args = _inputs(m=m)
        _check(fn(*args), args)
        _check(fn(*args), args)


def test_concurrent_calls_do_not_share_buffers():
    fn = polyc.jit(chain)
    sets = [_inputs(m=64) for _ in range(4)]
    fn(*sets[0])
    fn(*sets[0])
    errors: list[BaseException] = []

    def work(args):
        try:
            for _ in range(20):
                _check(fn(*args), args)
        except BaseException as e:        # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(s,)) for s in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_call_into_uses_matching_buffers_only():
    k = polyc.compile("def mm(float(M, K) A, float(K, N) B) -> (C) "
                      "{ C(m, n) +=! A(m, k) * B(k, n) }")
    a = RNG.standard_normal((8, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 6)).astype(np.float32)
    ref = k(a, b)
    k(a, b)                                          # a call plan exists now
    buf = np.full((8, 6), np.nan, np.float32)
    out = k.call_into((a, b), [buf])
    assert out is buf
    np.testing.assert_array_equal(out, ref)
    for wrong in (np.empty((6, 8), np.float32), np.empty((8, 6), np.float64),
                  np.empty((8, 12), np.float32)[:, ::2]):
        out = k.call_into((a, b), [wrong])
        assert out is not wrong
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("reuse", [False, True])
def test_plan_run_reuse_flag(reuse):
    fn = polyc.jit(chain)
    args = _inputs()
    fn(*args)
    p = fn.plan(*args)
    g = p.graph
    env_in = {n.name: a for n, a in zip(g.args, args)}
    sizes = {r: v for r, v in enumerate(g.symbols.values)}
    p.run(env_in, sizes, reuse=reuse)            # (records this size key's shapes)
    e1 = p.run(env_in, sizes, reuse=reuse)
    e2 = p.run(env_in, sizes, reuse=reuse)
    shared = [t for t in p.workspace.live if np.shares_memory(e1[t], e2[t])]
    assert bool(shared) == reuse
