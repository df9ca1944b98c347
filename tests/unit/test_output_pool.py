"""polyc.output_pool: a large output's block comes back to the pool only
when no array refers to it, and is reused from there; kernels' results
stay independent of each other."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import polyc
from polyc import output_pool as P

BIG = (1024, 1024 + 256)          # 5 MiB of float32: pooled


@pytest.fixture
def pool(monkeypatch):
    fresh = P._Pool(64 << 20)
    monkeypatch.setattr(P, "_POOL", fresh)
    return fresh


def test_block_returns_only_when_the_last_view_goes(pool):
    a = P.empty(BIG, np.float32)
    addr = a.ctypes.data
    assert addr % P.ALIGN == 0 and a.flags.c_contiguous and a.flags.writeable
    view = a[3:, ::2]
    col = view.T
    del a, view
    assert P.pooled_bytes() == 0          # col still uses the block
    b = P.empty(BIG, np.float32)
    assert not np.shares_memory(b, col)
    del col
    assert P.pooled_bytes() > 0
    c = P.empty(BIG, np.float32)
    assert c.ctypes.data == addr          # the freed block, reused
    assert P.pooled_bytes() == 0
    del b, c


def test_zeros_clears_a_reused_block(pool):
    a = P.empty(BIG, np.float64)
    a.fill(7.0)
    del a
    z = P.zeros(BIG, np.float64)
    assert P.pooled_bytes() == 0
    assert not z.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int64,
                                   np.int32])
def test_dtypes_and_shapes(pool, dtype):
    a = P.empty((3, 700, 1001), dtype)
    assert a.dtype == np.dtype(dtype) and a.shape == (3, 700, 1001)
    a[...] = 1
    assert a.sum(dtype=np.float64) == a.size


def test_small_and_empty_outputs_are_plain_arrays(pool):
    for shape in [(), (0, 5), (10, 10)]:
        a = P.empty(shape, np.float32)
        assert a.base is None and a.shape == shape
    assert P.zeros((0,), np.float32).shape == (0,)


def test_capacity_bounds_the_free_blocks(monkeypatch):
    small = P._Pool(12 << 20)
    monkeypatch.setattr(P, "_POOL", small)
    arrays = [P.empty(BIG, np.float32) for _ in range(5)]
    del arrays
    assert 0 < P.pooled_bytes() <= 12 << 20
    assert P.release() > 0 and P.pooled_bytes() == 0


def test_capacity_zero_turns_the_pool_off(monkeypatch):
    monkeypatch.setattr(P, "_POOL", P._Pool(0))
    a = P.empty(BIG, np.float32)
    assert a.base is None


def test_environment_capacity(monkeypatch, caplog):
    monkeypatch.setenv("POLYC_OUTPUT_POOL_MIB", "3")
    assert P._capacity_from_env() == 3 << 20
    monkeypatch.setenv("POLYC_OUTPUT_POOL_MIB", "0")
    assert P._capacity_from_env() == 0
    for bad in ("lots", "-3"):           # -3 turned the pool off silently
        caplog.clear()
        monkeypatch.setenv("POLYC_OUTPUT_POOL_MIB", bad)
        assert P._capacity_from_env() == 512 << 20
        assert f"POLYC_OUTPUT_POOL_MIB={bad!r} is not a non-negative integer" in caplog.text


SOFTMAX = """def softmax(float(N, C) I) -> (O, expDist) {
    O(n, c) = exp(I(n, c))
    expDist(n, c) = O(n, c) * 2
}"""


def test_kernel_results_held_across_calls_stay_independent(pool):
    k = polyc.compile(SOFTMAX)
    xs = [np.full((1024, 1280), v, np.float32) for v in (0.0, 1.0, 2.0)]
    held = [k(x) for x in xs]
    for v, (o, e) in zip((0.0, 1.0, 2.0), held):
        np.testing.assert_allclose(o, np.exp(v), rtol=1e-6)
        np.testing.assert_array_equal(e, o * 2)
    addrs = {o.ctypes.data for o, _ in held} | {e.ctypes.data for _, e in held}
    assert len(addrs) == 6
    del held, o, e
    again = k(xs[1])
    assert again[0].ctypes.data in addrs      # a freed block, reused
    np.testing.assert_allclose(again[0], np.exp(1.0), rtol=1e-6)


def test_threads_calling_one_kernel(pool):
    k = polyc.compile(SOFTMAX)
    errors = []

    def work(v):
        x = np.full((1024, 1280), v, np.float32)
        for _ in range(20):
            o, e = k(x)
            if not (np.allclose(o, np.exp(v), rtol=1e-6) and np.array_equal(e, o * 2)):
                errors.append(v)

    threads = [threading.Thread(target=work, args=(v / 10,)) for v in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
