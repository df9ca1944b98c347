"""The numpy reference evaluator (polyc.reference) and the testing helpers
(polyc.testing), on small programs built by hand with ir.make_statement and
checked against straightforward numpy."""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polyc import expr as E
from polyc.access import make_statement
from polyc.errors import BindingError, ShapeError
from polyc.ir import Program, Tensor, identity
from polyc.isl_util import aff_from_expr, param_space
from polyc.reference import evaluate
from polyc.testing import (
    assert_close,
    gather_ranges,
    max_errors,
    random_inputs,
    tolerance,
)

# ------------------------------------------------------------------ builders

I = E.Index
C = E.Const


def R(tensor, *idx):
    return E.Access(tensor, tuple(idx))


def B(op, a, b):
    return E.Binary(op, a, b)


def _shape(params, dims):
    sp = param_space(params)
    return tuple(aff_from_expr(E.Param(d) if isinstance(d, str) else E.Const(d), sp)
                 for d in dims)


class _Builder:
    """Collects tensors and statements of a hand-written program."""

    def __init__(self, params, context=""):
        self.params = tuple(params)
        self.context = isl.Set(f"[{', '.join(params)}] -> {{ : {context or '0 = 0'} }}")
        self.tensors, self.statements = [], []

    def tensor(self, name, dtype, dims, role="input"):
        self.tensors.append(Tensor(name, dtype, _shape(self.params, dims), role))

    def stmt(self, name, iters, cond, lhs, op, rhs, kind="assign", red=()):
        shapes = {t.name: t.shape for t in self.tensors}
        dom = isl.Set(f"[{', '.join(self.params)}] -> {{ {name}[{', '.join(iters)}] : {cond} }}")
        self.statements.append(make_statement(
            name=name, iterators=iters, domain=dom, lhs=lhs, op=op, rhs=rhs,
            shapes=shapes, kind=kind, reduction_iterators=red))

    def reduction(self, name, iters, cond, lhs, op, rhs, red, dtype="float32"):
        """A ``!`` reduction: an init statement then an update statement."""
        out_iters = [i.name for i in lhs.indices]
        out_cond = " and ".join(c for c in cond.split(" and ")
                                if not any(r in c for r in red)) or "0 = 0"
        self.stmt(f"{name}_init", out_iters, out_cond, lhs, "=",
                  C(identity(op, dtype)), kind="init")
        self.stmt(name, iters, cond, lhs, op, rhs, kind="update", red=red)

    def build(self, name="p"):
        tensors = sorted(self.tensors, key=lambda t: t.role != "input")
        return Program(name=name, params=self.params, context=self.context,
                       tensors=tuple(tensors), statements=tuple(self.statements))


def _matmul(dtype="float32"):
    b = _Builder(["M", "N", "K"], "M > 0 and N > 0 and K > 0")
    b.tensor("A", dtype, ["M", "K"])
    b.tensor("B", dtype, ["K", "N"])
    b.tensor("C", dtype, ["M", "N"], "output")
    b.reduction("S", ["m", "n", "k"], "0 <= m < M and 0 <= n < N and 0 <= k < K",
                R("C", I("m"), I("n")), "+",
                B("*", R("A", I("m"), I("k")), R("B", I("k"), I("n"))), ["k"], dtype)
    return b.build("matmul")


def _embedding_bag():
    b = _Builder(["B", "L", "N", "D"])
    b.tensor("I", "int64", ["B", "L"])
    b.tensor("LUT", "float32", ["N", "D"])
    b.tensor("O", "float32", ["B", "D"], "output")
    b.reduction("S", ["b", "d", "l"], "0 <= b < B and 0 <= d < D and 0 <= l < L",
                R("O", I("b"), I("d")), "+", R("LUT", R("I", I("b"), I("l")), I("d")), ["l"])
    return b.build("embedding_bag")


# ------------------------------------------------------------------ reference

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_init_and_update(dtype):
    prog = _matmul(dtype)
    sizes = {"M": 7, "N": 5, "K": 9}
    ins = random_inputs(prog, sizes, seed=1)
    out = evaluate(prog, ins, sizes)["C"]
    expected = ins["A"].astype(np.float64) @ ins["B"].astype(np.float64)
    assert_close(out, expected, dtype=dtype, reduction_length=9, name="C")


def test_einsum_path_and_chunked_path_agree():
    prog = _matmul("float64")
    sizes = {"M": 13, "N": 11, "K": 17}
    ins = random_inputs(prog, sizes, seed=2)
    fast = evaluate(prog, ins, sizes)["C"]
    slow = evaluate(prog, ins, sizes, use_einsum=False)["C"]
    tiny = evaluate(prog, ins, sizes, use_einsum=False, chunk_elements=40)["C"]
    tiny_fast = evaluate(prog, ins, sizes, chunk_elements=20)["C"]
    for other in (slow, tiny, tiny_fast):
        assert_close(other, fast, reduction_length=17)
    assert_close(fast, ins["A"] @ ins["B"], reduction_length=17)


def test_triangular_domain_reduction_uses_a_mask():
    b = _Builder(["N"], "N > 0")
    b.tensor("Lo", "float64", ["N", "N"])
    b.tensor("x", "float64", ["N"])
    b.tensor("y", "float64", ["N"], "output")
    b.reduction("S", ["i", "j"], "0 <= i < N and 0 <= j <= i", R("y", I("i")), "+",
                B("*", R("Lo", I("i"), I("j")), R("x", I("j"))), ["j"], "float64")
    prog = b.build()
    ins = random_inputs(prog, {"N": 10})
    expected = np.tril(ins["Lo"]) @ ins["x"]
    for kw in ({}, {"chunk_elements": 7}):
        assert_close(evaluate(prog, ins, {"N": 10}, **kw)["y"], expected, reduction_length=10)


def test_non_box_stencil_leaves_unwritten_elements_nan():
    b = _Builder(["N"], "N >= 3")
    b.tensor("A", "float64", ["N", "N"])
    b.tensor("Out", "float64", ["N", "N"], "output")
    i, j = I("i"), I("j")
    rhs = B("-", B("+", B("+", R("A", B("-", i, C(1)), j), R("A", B("+", i, C(1)), j)),
                   B("+", R("A", i, B("-", j, C(1))), R("A", i, B("+", j, C(1))))),
            B("*", C(4.0), R("A", i, j)))
    b.stmt("S", ["i", "j"], "1 <= i < N - 1 and 1 <= j <= i", R("Out", i, j), "=", rhs)
    prog = b.build()
    n = 9
    A = random_inputs(prog, {"N": n})["A"]
    expected = np.full((n, n), np.nan)
    for ii in range(1, n - 1):
        for jj in range(1, ii + 1):
            expected[ii, jj] = (A[ii - 1, jj] + A[ii + 1, jj] + A[ii, jj - 1]
                                + A[ii, jj + 1] - 4.0 * A[ii, jj])
    for kw in ({}, {"chunk_elements": 5}):
        assert_close(evaluate(prog, {"A": A}, {"N": n}, **kw)["Out"], expected)


def test_domain_with_a_div_constraint():
    b = _Builder(["N"])
    b.tensor("A", "float32", ["N"])
    b.tensor("Out", "float32", ["N"], "output")
    b.stmt("S", ["i"], "0 <= i < N and exists e: i = 3e + 1", R("Out", I("i")), "=",
           B("*", R("A", I("i")), C(2.0)))
    prog = b.build()
    A = np.arange(10, dtype=np.float32)
    out = evaluate(prog, {"A": A}, {"N": 10})["Out"]
    expected = np.full(10, np.nan, np.float32)
    expected[1::3] = A[1::3] * 2
    assert_close(out, expected)


@pytest.mark.parametrize("use_einsum", [True, False])
def test_gather_embedding_bag(use_einsum):
    prog = _embedding_bag()
    sizes = {"B": 6, "L": 5, "N": 20, "D": 4}
    ins = random_inputs(prog, sizes, seed=3)
    assert ins["I"].dtype == np.int64 and ins["I"].min() >= 0 and ins["I"].max() < 20
    out = evaluate(prog, ins, sizes, use_einsum=use_einsum)["O"]
    expected = ins["LUT"].astype(np.float64)[ins["I"]].sum(axis=1)
    assert_close(out, expected, dtype="float32", reduction_length=5)


def test_gather_index_out_of_range_raises():
    prog = _embedding_bag()
    sizes = {"B": 2, "L": 2, "N": 3, "D": 2}
    ins = {"I": np.array([[0, 1], [2, 3]]), "LUT": np.zeros((3, 2), np.float32)}
    with pytest.raises(IndexError, match=r"LUT\(I\(b, l\), d\).*index 3"):
        evaluate(prog, ins, sizes, use_einsum=False)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_max_reduction(dtype):
    b = _Builder(["N", "M"])
    b.tensor("A", dtype, ["N", "M"])
    b.tensor("O", dtype, ["N"], "output")
    b.reduction("S", ["i", "j"], "0 <= i < N and 0 <= j < M", R("O", I("i")), "max",
                R("A", I("i"), I("j")), ["j"], dtype)
    prog = b.build()
    A = (np.random.default_rng(0).standard_normal((8, 6)) * 100).astype(dtype)
    for kw in ({}, {"chunk_elements": 4}):
        out = evaluate(prog, {"A": A}, {"N": 8, "M": 6}, **kw)["O"]
        assert_close(out, A.max(axis=1))


def test_softmax_chain_of_temporaries():
    b = _Builder(["N", "D"])
    b.tensor("X", "float32", ["N", "D"])
    for t in ("O", "e"):
        b.tensor(t, "float32", ["N", "D"], "output")
    for t in ("mx", "s"):
        b.tensor(t, "float32", ["N"], "output")
    n, d = I("n"), I("d")
    box = "0 <= n < N and 0 <= d < D"
    b.reduction("S0", ["n", "d"], box, R("mx", n), "max", R("X", n, d), ["d"])
    b.stmt("S1", ["n", "d"], box, R("e", n, d), "=",
           E.Call("exp", (B("-", R("X", n, d), R("mx", n)),)))
    b.reduction("S2", ["n", "d"], box, R("s", n), "+", R("e", n, d), ["d"])
    b.stmt("S3", ["n", "d"], box, R("O", n, d), "=", B("/", R("e", n, d), R("s", n)))
    prog = b.build()
    X = random_inputs(prog, {"N": 5, "D": 7})["X"] * 4
    outs = evaluate(prog, {"X": X}, {"N": 5, "D": 7})
    ex = np.exp(X.astype(np.float64) - X.max(axis=1, keepdims=True))
    assert_close(outs["O"], ex / ex.sum(axis=1, keepdims=True), dtype="float32",
                 reduction_length=7)
    assert outs["O"].dtype == np.float32


def test_recurrence_runs_sequentially():
    b = _Builder(["N"], "N >= 1")
    b.tensor("Bv", "float64", ["N"])
    b.tensor("A", "float64", ["N"], "output")
    b.stmt("S", ["i"], "1 <= i < N", R("A", I("i")), "=",
           B("+", R("A", B("-", I("i"), C(1))), R("Bv", I("i"))))
    prog = b.build()
    Bv = np.arange(1.0, 9.0)
    init = np.zeros(8)
    init[0] = Bv[0]
    out = evaluate(prog, {"Bv": Bv}, {"N": 8}, outputs={"A": init})["A"]
    assert_close(out, np.cumsum(Bv))
    assert init[1] == 0.0  # the caller's array is not modified


def test_assignment_with_absent_iterator_keeps_last_write():
    b = _Builder(["N", "M"])
    b.tensor("A", "float64", ["N", "M"])
    b.tensor("O", "float64", ["N"], "output")
    b.stmt("S", ["i", "j"], "0 <= i < N and 0 <= j < M", R("O", I("i")), "=",
           R("A", I("i"), I("j")))
    A = np.random.default_rng(5).random((4, 3))
    assert_close(evaluate(b.build(), {"A": A}, {"N": 4, "M": 3})["O"], A[:, -1])


def test_select_does_not_read_out_of_range_in_the_branch_not_taken():
    b = _Builder(["N"])
    b.tensor("A", "float32", ["N"])
    b.tensor("O", "float32", ["N"], "output")
    i = I("i")
    cond = B("<", i, B("-", E.Param("N"), C(1)))
    b.stmt("S", ["i"], "0 <= i < N", R("O", i), "=",
           E.Select(cond, R("A", B("+", i, C(1))), C(0.0)))
    b.stmt("T", ["i"], "0 <= i < N", R("O", i), "+",
           B("*", E.Unary("!", B("&&", B(">", i, C(0)), B(">", R("A", B("-", i, C(1))),
                                                             C(100.0)))), C(1.0)))
    A = np.arange(6, dtype=np.float32)
    out = evaluate(b.build(), {"A": A}, {"N": 6})["O"]
    assert_close(out, np.array([1, 2, 3, 4, 5, 0], np.float32) + 1)


def test_integer_division_rounds_down_and_remainder_matches():
    b = _Builder(["N"])
    b.tensor("Q", "int64", ["N"], "output")
    b.tensor("Rm", "int64", ["N"], "output")
    b.tensor("F", "float64", ["N"], "output")
    i = I("i")
    dom = "0 <= i < N"
    b.stmt("S0", ["i"], dom, R("Q", i), "=", B("/", B("-", i, C(5)), C(2)))
    b.stmt("S1", ["i"], dom, R("Rm", i), "=", B("%", B("-", i, C(5)), C(3)))
    b.stmt("S2", ["i"], dom, R("F", i), "=", B("/", B("-", i, C(5)), C(2.0)))
    outs = evaluate(b.build(), {}, {"N": 10})
    k = np.arange(10) - 5
    assert_close(outs["Q"], k // 2)
    assert_close(outs["Rm"], k % 3)
    assert_close(outs["F"], k / 2.0)


def test_float32_work_stays_float32():
    b = _Builder(["N"])
    b.tensor("A", "float32", ["N"])
    b.tensor("O", "float32", ["N"], "output")
    b.stmt("S", ["i"], "0 <= i < N", R("O", I("i")), "=",
           B("+", B("*", E.Call("exp", (R("A", I("i")),)), C(0.1)), I("i")))
    A = np.linspace(-1, 1, 11, dtype=np.float32)
    out = evaluate(b.build(), {"A": A}, {"N": 11})["O"]
    expected = np.exp(A) * np.float32(0.1) + np.arange(11, dtype=np.float32)
    np.testing.assert_array_equal(out, expected)


def test_builtins():
    b = _Builder(["N"])
    b.tensor("A", "float64", ["N"])
    names = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "fabs"]
    for fn in names:
        b.tensor(f"O_{fn}", "float64", ["N"], "output")
        b.stmt(f"S_{fn}", ["i"], "0 <= i < N", R(f"O_{fn}", I("i")), "=",
               E.Call(fn, (R("A", I("i")),)))
    for fn in ["fmax", "fmin", "max", "min", "pow"]:
        b.tensor(f"O_{fn}", "float64", ["N"], "output")
        b.stmt(f"S_{fn}", ["i"], "0 <= i < N", R(f"O_{fn}", I("i")), "=",
               E.Call(fn, (R("A", I("i")), C(0.5))))
    A = np.array([0.25, 1.0, 2.5, np.nan])
    outs = evaluate(b.build(), {"A": A}, {"N": 4})
    expect = {"exp": np.exp(A), "log": np.log(A), "sqrt": np.sqrt(A),
              "rsqrt": 1 / np.sqrt(A), "tanh": np.tanh(A), "sigmoid": 1 / (1 + np.exp(-A)),
              "abs": np.abs(A), "fabs": np.abs(A), "fmax": np.fmax(A, 0.5),
              "fmin": np.fmin(A, 0.5), "max": np.fmax(A, 0.5), "min": np.fmin(A, 0.5),
              "pow": A ** 0.5}
    for fn, ex in expect.items():
        assert_close(outs[f"O_{fn}"], ex, name=fn)


def test_binding_and_shape_errors():
    prog = _matmul()
    sizes = {"M": 2, "N": 3, "K": 4}
    with pytest.raises(BindingError, match="'B'"):
        evaluate(prog, {"A": np.zeros((2, 4))}, sizes)
    with pytest.raises(ShapeError, match=r"B has shape \(3, 4\)"):
        evaluate(prog, {"A": np.zeros((2, 4)), "B": np.zeros((3, 4))}, sizes)
    with pytest.raises(BindingError, match="K"):
        evaluate(prog, {}, {"M": 2, "N": 3})
    with pytest.raises(ShapeError, match="context"):
        evaluate(prog, {"A": np.zeros((0, 4)), "B": np.zeros((4, 3))}, {"M": 0, "N": 3, "K": 4})


def test_unwritten_outputs_are_nan_and_given_outputs_accumulate():
    b = _Builder(["N"])
    b.tensor("A", "float64", ["N"])
    b.tensor("O", "float64", ["N"], "output")
    b.stmt("S", ["i"], "0 <= i < N", R("O", I("i")), "+", R("A", I("i")))  # no init: +=
    A = np.ones(3)
    assert np.isnan(evaluate(b.build(), {"A": A}, {"N": 3})["O"]).all()
    out = evaluate(b.build(), {"A": A}, {"N": 3}, outputs={"O": np.full(3, 2.0)})["O"]
    assert_close(out, np.full(3, 3.0))


# -------------------------------------------------------------------- testing

def test_max_errors_special_values():
    inf, nan = np.inf, np.nan
    assert max_errors(np.array([1.0, inf, -inf, nan]), np.array([1.0, inf, -inf, nan])) == (0, 0)
    assert max_errors(np.array([inf]), np.array([-inf])) == (inf, inf)
    assert max_errors(np.array([nan]), np.array([1.0])) == (inf, inf)
    assert max_errors(np.array([1.0]), np.array([nan])) == (inf, inf)
    assert max_errors(np.array([5.0]), np.array([inf])) == (inf, inf)
    a, r = max_errors(np.array([1.1, 2.0]), np.array([1.0, 2.0]))
    assert a == pytest.approx(0.1) and r == pytest.approx(0.1)
    a, r = max_errors(np.array([1e-3]), np.array([0.0]))
    assert a == pytest.approx(1e-3) and r > 1e300
    assert max_errors(np.array([0.0]), np.array([0.0])) == (0.0, 0.0)
    assert max_errors(np.zeros((0, 3)), np.zeros((0, 3))) == (0.0, 0.0)
    assert max_errors(np.array([3], np.int64), np.array([1], np.int64)) == (2.0, 2.0)
    assert max_errors(np.array([1], np.int64), np.array([0], np.int64)) == (1.0, 1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        max_errors(np.zeros(3), np.zeros((1, 3)))


def test_assert_close_reports_the_worst_index():
    e = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    a = e.copy()
    a[1, 2] += 0.5
    a[2, 3] += 1e-3
    with pytest.raises(AssertionError) as err:
        assert_close(a, e, name="out")
    msg = str(err.value)
    assert msg.startswith("out: 2 of 12 elements differ")
    assert "worst element at index (1, 2)" in msg
    assert "max abs error 0.5 at index (1, 2)" in msg


def test_assert_close_checks_shape_then_dtype():
    with pytest.raises(AssertionError, match="shape"):
        assert_close(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(AssertionError, match="dtype float64 differs.*float32"):
        assert_close(np.zeros(3), np.zeros(3, np.float32))
    assert_close(np.zeros(3, np.float32), np.zeros(3), dtype="float32")


def test_assert_close_tolerances():
    e = np.linspace(1, 2, 100)
    assert_close(e * (1 + 1e-13), e)
    with pytest.raises(AssertionError):
        assert_close(e * (1 + 1e-9), e)
    e32 = e.astype(np.float32)
    assert_close(e32 * np.float32(1 + 3e-5), e32, reduction_length=1024)
    with pytest.raises(AssertionError):
        assert_close(e32 * np.float32(1 + 3e-5), e32)
    # atol relative to the reference's magnitude: a cancelled element passes
    big = np.array([1000.0, 1e-9], np.float32)
    assert_close(big + np.float32(1e-3), big, reduction_length=100)
    with pytest.raises(AssertionError, match="exact"):
        assert_close(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(AssertionError):
        assert_close(np.array([np.nan]), np.array([1.0]))
    assert_close(np.array([np.inf, np.nan]), np.array([np.inf, np.nan]))
    assert tolerance("float32", 100)[0] == pytest.approx(1e-4)
    assert tolerance("int32") == (0.0, 0.0)


def test_random_inputs_ranges_and_seed():
    prog = _embedding_bag()
    sizes = {"B": 50, "L": 40, "N": 7, "D": 3}
    ins = random_inputs(prog, sizes, seed=4)
    assert gather_ranges(prog, sizes) == {"I": 7}
    assert ins["I"].shape == (50, 40) and ins["I"].dtype == np.int64
    assert ins["I"].min() == 0 and ins["I"].max() == 6
    assert ins["LUT"].dtype == np.float32 and ins["LUT"].shape == (7, 3)
    assert ins["LUT"].min() >= -1 and ins["LUT"].max() < 1
    again = random_inputs(prog, sizes, seed=4)
    assert all(np.array_equal(ins[k], again[k]) for k in ins)
    assert not np.array_equal(ins["LUT"], random_inputs(prog, sizes, seed=5)["LUT"])
    b = _Builder(["N"])
    b.tensor("K", "int32", ["N"])
    b.tensor("O", "int32", ["N"], "output")
    b.stmt("S", ["i"], "0 <= i < N", R("O", I("i")), "=", R("K", I("i")))
    k = random_inputs(b.build(), {"N": 1000})["K"]
    assert k.dtype == np.int32 and k.min() == 0 and k.max() == 9


def _conv1d_grouped():
    """``O(n, g, f, h) +=! X(n, g, c, h + kh) * Wt(g, f, c, kh)`` then a bias."""
    params = ["N", "G", "C", "F", "H", "KH"]
    b = _Builder(params, "KH <= H")
    b.tensor("X", "float64", ["N", "G", "C", "H"])
    b.tensor("Wt", "float64", ["G", "F", "C", "KH"])
    b.tensor("Bs", "float64", ["G", "F"])
    sp = param_space(params)
    ho = aff_from_expr(B("+", B("-", E.Param("H"), E.Param("KH")), C(1)), sp)
    b.tensors.append(Tensor("O", "float64", _shape(params, ["N", "G", "F"]) + (ho,), "output"))
    n, g, f, h, c, kh = map(I, ["n", "g", "f", "h", "c", "kh"])
    out_dom = "0 <= n < N and 0 <= g < G and 0 <= f < F and 0 <= h <= H - KH"
    b.reduction("S", ["n", "g", "f", "h", "c", "kh"], out_dom + " and 0 <= c < C and 0 <= kh < KH",
                R("O", n, g, f, h), "+",
                B("*", R("X", n, g, c, B("+", h, kh)), R("Wt", g, f, c, kh)), ["c", "kh"],
                "float64")
    b.stmt("T", ["n", "g", "f", "h"], out_dom, R("O", n, g, f, h), "=",
           B("+", R("O", n, g, f, h), R("Bs", g, f)))
    return b.build("gconv1d")


def test_grouped_convolution_all_paths():
    prog = _conv1d_grouped()
    sizes = {"N": 3, "G": 4, "C": 5, "F": 2, "H": 11, "KH": 3}
    ins = random_inputs(prog, sizes, seed=7)
    X, Wt = ins["X"], ins["Wt"]
    ho = 11 - 3 + 1
    expected = sum(np.einsum("ngch,gfc->ngfh", X[..., k:k + ho], Wt[..., k]) for k in range(3))
    expected = expected + ins["Bs"][None, :, :, None]
    for kw in ({}, {"use_einsum": False}, {"chunk_elements": 30},
               {"use_einsum": False, "chunk_elements": 30}):
        assert_close(evaluate(prog, ins, sizes, **kw)["O"], expected, reduction_length=15,
                     name=str(kw))


def test_einsum_path_with_three_factors_a_scalar_and_a_broadcast_axis():
    b = _Builder(["N", "M", "K"])
    b.tensor("A", "float64", ["N", "K"])
    b.tensor("V", "float64", ["K"])
    b.tensor("Bm", "float64", ["K", "N"])
    b.tensor("O", "float64", ["N", "M"], "output")
    n, m, k = I("n"), I("m"), I("k")
    rhs = B("*", B("*", B("*", R("A", n, k), R("V", k)), R("Bm", k, n)), C(2.0))
    b.reduction("S", ["n", "m", "k"], "0 <= n < N and 0 <= m < M and 0 <= k < K",
                R("O", n, m), "+", rhs, ["k"], "float64")
    prog = b.build()
    sizes = {"N": 4, "M": 3, "K": 6}
    ins = random_inputs(prog, sizes)
    row = 2 * np.einsum("nk,k,kn->n", ins["A"], ins["V"], ins["Bm"])
    expected = np.repeat(row[:, None], 3, axis=1)
    for kw in ({}, {"use_einsum": False}, {"chunk_elements": 5}):
        assert_close(evaluate(prog, ins, sizes, **kw)["O"], expected, reduction_length=6)


def test_batched_transposed_matmul_fast_path():
    b = _Builder(["B", "N", "M", "K"])
    b.tensor("X", "float32", ["B", "N", "M"])
    b.tensor("Y", "float32", ["B", "K", "M"])
    b.tensor("Z", "float32", ["B", "N", "K"], "output")
    bb, n, k, m = I("b"), I("n"), I("k"), I("m")
    b.reduction("S", ["b", "n", "k", "m"], "0 <= b < B and 0 <= n < N and 0 <= k < K and "
                "0 <= m < M", R("Z", bb, n, k), "+",
                B("*", R("X", bb, n, m), R("Y", bb, k, m)), ["m"])
    prog = b.build()
    sizes = {"B": 5, "N": 3, "M": 7, "K": 4}
    ins = random_inputs(prog, sizes)
    expected = np.einsum("bnm,bkm->bnk", ins["X"].astype(np.float64), ins["Y"])
    for kw in ({}, {"use_einsum": False}):
        assert_close(evaluate(prog, ins, sizes, **kw)["Z"], expected, dtype="float32",
                     reduction_length=7)


def test_shifted_self_read_sees_old_values_and_shifted_write_sees_new_ones():
    b = _Builder(["N"], "N >= 2")
    b.tensor("A", "float64", ["N"], "output")
    b.tensor("Z", "float64", ["N"], "output")
    i = I("i")
    b.stmt("S", ["i"], "0 <= i < N - 1", R("A", i), "=", R("A", B("+", i, C(1))))  # anti
    b.stmt("T", ["i"], "1 <= i < N", R("Z", i), "=",
           B("*", R("Z", B("-", i, C(1))), C(2.0)))  # flow: a recurrence
    init = np.arange(6.0)
    outs = evaluate(b.build(), {}, {"N": 6}, outputs={"A": init, "Z": np.ones(6)})
    assert_close(outs["A"], np.array([1.0, 2, 3, 4, 5, 5]))
    assert_close(outs["Z"], 2.0 ** np.arange(6))


def test_left_hand_side_must_use_index_variables():
    b = _Builder(["N"])
    b.tensor("O", "float64", ["N"], "output")
    b.stmt("S", ["i"], "0 <= i < N - 1", R("O", B("+", I("i"), C(1))), "=", C(1.0))
    with pytest.raises(NotImplementedError, match=r"writes O\(i \+ 1\)"):
        evaluate(b.build(), {}, {"N": 4})


# ------------------------------------------------------------------- examples

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.tc"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses_lowers_and_writes_every_output_element(path):
    """Each example names its default sizes in a '# sizes:' line; at those
    sizes the reference writes every element of every output."""
    tc = pytest.importorskip("polyc.frontend.tc")
    from polyc.api import lower_def

    text = path.read_text()
    sizes = tc.sizes_header(text)
    (defn,) = tc.parse(text, str(path)).defs
    fixed = {k: sizes[k] for k in tc.needs_specialization(defn)}
    prog = lower_def(defn, fixed, source=text)
    assert set(prog.params) <= set(sizes), "every size needs a default in '# sizes:'"
    outs = evaluate(prog, random_inputs(prog, sizes), sizes)
    assert set(outs) == {t.name for t in prog.outputs}
    for name, arr in outs.items():
        assert arr.size > 0 and not np.isnan(arr).any(), name
