"""Row-blocked fusion through GEMM calls (polyc.schedule.rowfuse.row_blocked):
an attention head's ``S = Q K^T * scale``, its row softmax and ``O = P V``
run one block of query rows at a time, each GEMM call computing that
block's rows; the scaling after a GEMM folds into the call's alpha; rows
run in memory order.  Tolerances: float32 within 2e-5 relative of a
float64 numpy reference (GEMM sums are reassociated, libmvec's exp is
within 4 ulp); float64 within 1e-12."""

from __future__ import annotations

import json

import numpy as np
import pytest

import polyc
from polyc.config import Config
from polyc.schedule.rowfuse import default_row_block

ROWS = default_row_block()        # 70 with AVX-512, 66 with AVX2, 64 else

RNG = np.random.default_rng(11)

ATTENTION = """
def attention(float(B, M, D) Q, float(B, N, D) K, float(B, N, E) V) -> (S, mx, ex, sm, P, O) {
  S(b, i, j) +=! Q(b, i, d) * K(b, j, d)
  S(b, i, j) = S(b, i, j) * 0.125
  mx(b, i) max=! S(b, i, j)
  ex(b, i, j) = exp(S(b, i, j) - mx(b, i))
  sm(b, i) +=! ex(b, i, j)
  P(b, i, j) = ex(b, i, j) / sm(b, i)
  O(b, i, e) +=! P(b, i, j) * V(b, j, e)
}
"""


def _attention(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.swapaxes(-1, -2) * 0.125
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def _inputs(b, m, n, d, e, dtype="float32"):
    return (RNG.standard_normal((b, m, d)).astype(dtype),
            RNG.standard_normal((b, n, d)).astype(dtype),
            RNG.standard_normal((b, n, e)).astype(dtype))


@pytest.mark.parametrize("block", [0, 7, 64])
@pytest.mark.parametrize("b, m, n, d, e", [(1, 1, 1, 1, 1), (2, 67, 5, 3, 4),
                                           (3, 130, 17, 8, 9), (1, 64, 64, 16, 16)])
def test_attention_row_blocked(block, b, m, n, d, e):
    k = polyc.compile(ATTENTION, config=Config.from_env(row_block=block))
    q, kk, v = _inputs(b, m, n, d, e)
    O = k(q, kk, v)[-1]
    np.testing.assert_allclose(O, _attention(q, kk, v), rtol=2e-5, atol=2e-6)
    x = k.explain(json=True)
    rows = block or ROWS
    assert f"blocks of {rows} rows" in x["row_fusion"]
    text = k.explain()
    # both products are calls of the micro-kernel on one block of rows,
    # the scaling after the first is its alpha
    assert text.count(f"({rows} rows of i per call)") == 2
    assert "alpha = 0.125" in text
    # one parallel loop nest over (batch, block of rows)
    src = k.source
    assert src.count("#pragma omp parallel for collapse(2)") == 1
    assert src.count("polyc_gemm_f32(polyc_min(") == 4      # parallel and serial versions


def test_attention_float64():
    k = polyc.compile(ATTENTION, dtype="float64")
    q, kk, v = _inputs(2, 70, 33, 8, 8, "float64")
    np.testing.assert_allclose(k(q, kk, v)[-1], _attention(q, kk, v), rtol=1e-12, atol=1e-13)
    assert f"blocks of {ROWS} rows" in k.explain(json=True)["row_fusion"]


def test_row_block_one_turns_it_off():
    k = polyc.compile(ATTENTION, config=Config.from_env(row_block=1))
    q, kk, v = _inputs(2, 9, 5, 3, 4)
    np.testing.assert_allclose(k(q, kk, v)[-1], _attention(q, kk, v), rtol=2e-5, atol=2e-6)
    assert "blocks of" not in k.explain(json=True)["row_fusion"]
    assert "rows of i per call" not in k.explain()


def test_shared_weights_are_not_row_blocked():
    # X W1 -> softmax -> W2: the weights do not vary with the row loops, so a
    # block of rows would re-pack them once per block: row fusion only
    src = """
    def f(float(B, M, D) X, float(D, N) W1, float(N, E) W2) -> (S, mx, ex, sm, P, O) {
      S(b, i, j) +=! X(b, i, d) * W1(d, j)
      mx(b, i) max=! S(b, i, j)
      ex(b, i, j) = exp(S(b, i, j) - mx(b, i))
      sm(b, i) +=! ex(b, i, j)
      P(b, i, j) = ex(b, i, j) / sm(b, i)
      O(b, i, e) +=! P(b, i, j) * W2(j, e)
    }
    """
    k = polyc.compile(src)
    X = RNG.standard_normal((2, 70, 8)).astype(np.float32)
    W1 = RNG.standard_normal((8, 20)).astype(np.float32)
    W2 = RNG.standard_normal((20, 6)).astype(np.float32)
    s = X.astype(np.float64) @ W1
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ W2
    np.testing.assert_allclose(k(X, W1, W2)[-1], ref, rtol=2e-5, atol=2e-6)
    assert "blocks of" not in (k.explain(json=True)["row_fusion"] or "")


def test_scaling_after_a_batched_gemm_is_alpha():
    src = """
    def f(float(B, M, K) A, float(B, K, N) Bm, float s) -> (C) {
      C(b, m, n) +=! A(b, m, k) * Bm(b, k, n)
      C(b, m, n) = s * C(b, m, n) * 3.0
    }
    """
    k = polyc.compile(src)
    A = RNG.standard_normal((3, 5, 7)).astype(np.float32)
    Bm = RNG.standard_normal((3, 7, 4)).astype(np.float32)
    s = np.float32(0.5)
    np.testing.assert_allclose(k(A, Bm, s), 1.5 * (A.astype(np.float64) @ Bm), rtol=2e-5,
                               atol=1e-6)
    text = k.explain()
    assert "epilogue S1 (a scaling of C, in alpha)" in text and "alpha = s * 3.0" in text


def test_scaling_of_some_elements_only_is_not_folded():
    src = """
    def f(float(M, K) A, float(K, N) Bm) -> (C) {
      C(m, n) +=! A(m, k) * Bm(k, n)
      C(m, n) = C(m, n) * 2.0 where m in 0:1, n in 0:N
    }
    """
    k = polyc.compile(src)
    A = RNG.standard_normal((4, 3)).astype(np.float32)
    Bm = RNG.standard_normal((3, 5)).astype(np.float32)
    ref = A.astype(np.float64) @ Bm
    ref[0] *= 2
    np.testing.assert_allclose(k(A, Bm), ref, rtol=2e-5, atol=1e-6)
    assert "in alpha" not in k.explain()


SOFTMAX3 = """
def softmax(float(H, M, N) X) -> (mx, ex, sm, P) {
  mx(h, i) max=! X(h, i, j)
  ex(h, i, j) = exp(X(h, i, j) - mx(h, i))
  sm(h, i) +=! ex(h, i, j)
  P(h, i, j) = ex(h, i, j) / sm(h, i)
}
"""


def test_rows_run_in_memory_order():
    # the head loop outside the query-row loop: consecutive rows are
    # consecutive in memory (isl may order them the other way)
    k = polyc.compile(SOFTMAX3)
    X = RNG.standard_normal((3, 5, 11)).astype(np.float32)
    e = np.exp(X - X.max(-1, keepdims=True))
    np.testing.assert_allclose(k(X)[-1], e / e.sum(-1, keepdims=True), rtol=2e-5)
    assert "row loops h, i" in k.explain(json=True)["row_fusion"]


def test_jit_attention_one_kernel_blocked():
    @polyc.jit
    def attention(q, k, v):
        s = q @ k.swapaxes(-1, -2) * 0.125
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v

    for shape in [(2, 67, 8), (1, 1, 4)]:
        q, kk, v = _inputs(shape[0], shape[1], shape[1], shape[2], shape[2])
        np.testing.assert_allclose(attention(q, kk, v), _attention(q, kk, v), rtol=2e-5,
                                   atol=2e-6)
    d = attention.explain(q, kk, v, json=True)
    assert d["kernels"] == 1


def test_jit_mixed_precision_product_runs_on_the_gemm():
    # numpy promotes the float32 operand of a float64 product; polyc converts
    # it first (exact), so the product has one dtype and is tensorized
    @polyc.jit
    def f(a, b):
        return (a / np.sqrt(a.shape[-1])) @ b

    a = RNG.standard_normal((2, 6, 4))            # float64
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    out = f(a, b)
    ref = (a / np.sqrt(4)) @ b
    assert out.dtype == ref.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    text = f.explain(a, b)
    assert "astype" in text


def test_gemm_with_an_elementwise_epilogue_is_not_row_blocked():
    # nothing reads a row twice: the GEMM keeps whole calls per batch
    src = """
    def f(float(B, M, K) A, float(B, N, K) Bm, float(M, N) mask) -> (C) {
      C(b, i, j) +=! A(b, i, k) * Bm(b, j, k)
      C(b, i, j) = C(b, i, j) + mask(i, j)
    }
    """
    k = polyc.compile(src)
    A = RNG.standard_normal((2, 70, 3)).astype(np.float32)
    Bm = RNG.standard_normal((2, 9, 3)).astype(np.float32)
    mask = RNG.standard_normal((70, 9)).astype(np.float32)
    np.testing.assert_allclose(k(A, Bm, mask), A.astype(np.float64) @ Bm.swapaxes(1, 2) + mask,
                               rtol=2e-5, atol=1e-6)
    assert "rows of i per call" not in k.explain()


def test_heads_of_a_unit_batch_are_one_blocked_kernel():
    # BERT's heads: Q(b, i, 64 * h + d) is a plain operand once the head loop
    # is fixed (its column offset is part of the base pointer), and the unit
    # batch dimension is no loop
    def heads(t, b, s):
        return t.reshape(b, s, 4, 8).transpose(0, 2, 1, 3)

    @polyc.jit
    def attn(q, k, v):
        b, s, d = q.shape
        q, k, v = heads(q, b, s), heads(k, b, s), heads(v, b, s)
        sc = q @ k.transpose(0, 1, 3, 2) * 0.125
        p = np.exp(sc - sc.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True) @ v

    q, kk, v = (RNG.standard_normal((1, 70, 32)).astype(np.float32) for _ in range(3))
    ref = _attention(*(x.reshape(1, 70, 4, 8).transpose(0, 2, 1, 3) for x in (q, kk, v)))
    np.testing.assert_allclose(attn(q, kk, v), ref, rtol=2e-5, atol=2e-6)
    d = attn.explain(q, kk, v, json=True)
    assert d["kernels"] == 1
    kernel = next(iter(attn._plans.values()))[0].plan.compile().kernels[0]
    text = kernel.explain()
    assert text.count(f"({ROWS} rows of i2 per call)") == 2 and "implicit GEMM" not in text



def test_cli_row_block(tmp_path, capsys):
    from polyc.cli import main
    src = tmp_path / "attention.tc"
    src.write_text("# sizes: B=2, M=70, N=40, D=8, E=8\n" + ATTENTION)
    for flag, want in ((["--row-block", "16"], "blocks of 16 rows"), ([], f"blocks of {ROWS} rows")):
        assert main(["explain", str(src), "--json"] + flag) == 0
        assert want in json.loads(capsys.readouterr().out)["row_fusion"]
    assert main(["explain", str(src), "--json", "--row-block", "1"]) == 0
    assert "blocks of" not in json.loads(capsys.readouterr().out)["row_fusion"]
    assert main(["run", str(src), "--check", "--row-block", "5"]) == 0
    capsys.readouterr()
    assert main(["explain", str(src), "--row-block", "-3"]) != 0
    assert "Config.row_block must be" in capsys.readouterr().err


def _softmax(s):
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


VARIANTS = {
    # cross-attention: M queries, N keys
    "cross": (lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) / 8.0) @ v,
              [(2, 75, 16), (2, 33, 16), (2, 33, 12)]),
    # V stored transposed (its rows are the features)
    "v_transposed": (lambda q, k, vt: _softmax(q @ k.swapaxes(-1, -2)) @ vt.swapaxes(-1, -2),
                     [(3, 71, 8), (3, 20, 8), (3, 6, 20)]),
    # heads and a batch of 2
    "heads": (lambda q, k, v: _softmax(q @ k.swapaxes(-1, -2) * 0.25) @ v,
              [(2, 3, 80, 8), (2, 3, 80, 8), (2, 3, 80, 8)]),
    # an additive mask broadcast over the batch
    "mask": (lambda q, k, v, m: _softmax(q @ k.swapaxes(-1, -2) + m) @ v,
             [(2, 71, 8), (2, 71, 8), (2, 71, 8), (71, 71)]),
}


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("float64", 1e-12)])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_attention_variants_against_numpy(name, dtype, rtol):
    fn, shapes = VARIANTS[name]
    args = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    before = [a.copy() for a in args]
    jitted = polyc.jit(fn)
    out = jitted(*args)
    ref = fn(*[a.astype(np.float64) for a in args])
    kernels = next(iter(jitted._plans.values()))[0].plan.compile().kernels
    assert len(kernels) == 1 and f"({ROWS} rows of" in kernels[0].explain()
    assert out.dtype == np.dtype(dtype) and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol * 0.1)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)          # inputs never modified
