"""TC semantic checks and lowering to ``ir.Program``: program structure
(params, context, tensors, statements, access relations) against hand-written
isl objects, dtypes, size arguments and specialisation, and every user error
with its message and location."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

from polyc import expr as E
from polyc.errors import ParseError, SemanticError, ShapeError, UnsupportedError
from polyc.frontend import tc
from polyc.frontend.source import Span
from polyc.isl_util import eval_pw_aff


def lower(text: str, fixed=None, name=None):
    mod = tc.parse(text)
    d = mod.get(name) if name else mod.defs[0]
    return tc.lower(d, fixed)


def shape(p, tensor, **sizes):
    return tuple(eval_pw_aff(x, sizes) for x in p.tensor(tensor).shape)


MATMUL = """# sizes: M=64 K=32 N=16
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, kk) * B(kk, n)
}
"""


# ----------------------------------------------------------- structure
def test_matmul_program():
    p = lower(MATMUL)
    assert p.name == "mm"
    assert p.params == ("M", "K", "N")
    assert p.context.is_equal(isl.Set("[M, K, N] -> { [] : M >= 0 and K >= 0 and N >= 0 }"))
    assert [(t.name, t.role, t.dtype) for t in p.tensors] == [
        ("A", "input", "float32"), ("B", "input", "float32"), ("C", "output", "float32")]
    assert shape(p, "C", M=5, K=6, N=7) == (5, 7)
    assert p.param_bindings == {"M": ("A", 0), "K": ("A", 1), "N": ("B", 1)}
    assert p.signature == ("A", "B")
    assert p.fixed_sizes == {} and p.preconditions is None
    assert p.source == MATMUL
    init, upd = p.statements
    assert (init.name, init.kind, init.op, init.iterators) == ("S0_init", "init", "=", ("m", "n"))
    assert init.rhs == E.Const(0.0) and init.reads == ()
    assert init.domain.is_equal(isl.Set("[M, K, N] -> { S0_init[m, n] : 0 <= m < M and 0 <= n < N }"))
    assert (upd.name, upd.kind, upd.op) == ("S0", "update", "+")
    assert upd.iterators == ("m", "n", "kk") and upd.reduction_iterators == ("kk",)
    dom = isl.Set("[M, K, N] -> { S0[m, n, kk] : 0 <= m < M and 0 <= n < N and 0 <= kk < K }")
    assert upd.domain.is_equal(dom)
    assert upd.write.is_equal(isl.Map("[M, K, N] -> { S0[m, n, kk] -> C[m, n] }").intersect_domain(dom))
    assert upd.read_tensors() == ["C", "A", "B"]
    assert upd.reads[1].is_equal(
        isl.Map("[M, K, N] -> { S0[m, n, kk] -> A[m, kk] }").intersect_domain(dom))
    assert upd.rhs == E.Binary("*", E.Access("A", (E.Index("m"), E.Index("kk"))),
                               E.Access("B", (E.Index("kk"), E.Index("n"))))
    assert upd.text == "C(m, n) +=! A(m, kk) * B(kk, n)"
    assert upd.span == Span(3, 5, 3, 36, "<tc>")
    assert upd.rhs.lhs.span == Span(3, 17, 3, 25, "<tc>")  # spans reach the expression trees


def test_two_layer_mlp():
    p = lower("""
def mlp2(float(B, M) I, float(N, M) W1, float(N) B1, float(O, N) W2, float(O) B2) -> (O1, O2) {
    O1(b, n) +=! I(b, m) * W1(n, m)
    O1(b, n) = fmax(O1(b, n) + B1(n), 0)
    O2(b, o) +=! O1(b, n) * W2(o, n)
    O2(b, o) = fmax(O2(b, o) + B2(o), 0)
}""")
    assert [s.name for s in p.statements] == ["S0_init", "S0", "S1", "S2_init", "S2", "S3"]
    assert [s.kind for s in p.statements] == ["init", "update", "assign", "init", "update", "assign"]
    assert shape(p, "O1", B=3, M=4, N=5, O=6) == (3, 5)
    assert shape(p, "O2", B=3, M=4, N=5, O=6) == (3, 6)
    s1 = p.statement("S1")
    assert s1.read_tensors() == ["O1", "B1"]
    assert s1.rhs == E.Call("fmax", (E.Binary("+", E.Access("O1", (E.Index("b"), E.Index("n"))),
                                              E.Access("B1", (E.Index("n"),))), E.Const(0)))
    assert s1.domain.is_equal(isl.Set("[B, M, N, O] -> { S1[b, n] : 0 <= b < B and 0 <= n < N }"))
    assert p.statement("S2").reduction_iterators == ("n",)
    assert p.signature == ("I", "W1", "B1", "W2", "B2")


def test_softmax_with_temporaries():
    p = lower("""
def softmax(float(N, D) X) -> (mx, ex, s, Y) {
    mx(n) max=! X(n, d)
    ex(n, d) = exp(X(n, d) - mx(n))
    s(n) +=! ex(n, d)
    Y(n, d) = ex(n, d) / s(n)
}""")
    assert [(s.name, s.op) for s in p.statements] == [
        ("S0_init", "="), ("S0", "max"), ("S1", "="), ("S2_init", "="), ("S2", "+"), ("S3", "=")]
    assert p.statements[0].rhs == E.Const(float("-inf"))
    assert [t.name for t in p.outputs] == ["mx", "ex", "s", "Y"]
    assert shape(p, "mx", N=3, D=4) == (3,) and shape(p, "Y", N=3, D=4) == (3, 4)


def test_embedding_bag_gather_reads_all_of_the_table():
    p = lower("def bag(float(E, D) LUT, int64(B, L) I) -> (O) {\n  O(b, d) +=! LUT(I(b, l), d)\n}")
    s = p.statement("S0")
    lut = s.reads[s.read_tensors().index("LUT")]
    expected = isl.Map("[E, D, B, L] -> { S0[b, d, l] -> LUT[e, d] : 0 <= e < E }")
    assert lut.is_equal(expected.intersect_domain(s.domain))
    idx = s.reads[s.read_tensors().index("I")]
    assert idx.is_equal(isl.Map("[E, D, B, L] -> { S0[b, d, l] -> I[b, l] }").intersect_domain(s.domain))
    assert p.tensor("O").dtype == "float32"  # the int64 index tensor does not promote


def test_affine_indices_become_exact_relations():
    p = lower("def f(float(N) A) -> (B) { B(i) = A(2*i + 1) + A(i/2) + A(N - 1 - i) }")
    s = p.statement("S0")
    m = isl.Map("[N] -> { S0[i] -> A[2i + 1]; S0[i] -> A[floor(i/2)]; S0[i] -> A[N - 1 - i] }")
    got = s.reads[0].union(s.reads[1]).union(s.reads[2])
    assert got.is_equal(m.intersect_domain(s.domain))


def test_dim_of_in_values_and_bounds():
    p = lower("def f(float(M, N) A) -> (B, C) {\n  B(i) = A(i, 0) + A.1\n"
              "  C(j) = B(j) * B.0 where j in 0:B.0 - 1\n}")
    assert p.statement("S0").rhs.rhs == E.Param("N")
    assert p.statement("S1").domain.is_equal(isl.Set("[M, N] -> { S1[j] : 0 <= j < M - 1 }"))


# --------------------------------------------------------------- dtypes
@pytest.mark.parametrize("sig,rhs,dtype", [
    ("double(N) A, float(N) B", "A(i) + B(i)", "float64"),
    ("int32(N) A, int64(N) B", "A(i) + B(i)", "int64"),
    ("int32(N) A, float(N) B", "A(i) * B(i)", "float64"),
    ("int32(N) A, float(N) B", "A(i) * 2", "int32"),
    ("int32(N) A, float(N) B", "A(i) * 1.5", "float64"),
    ("float32(N) A, float(N) B", "A(i) * 1.5", "float32"),
    # a Python float is weak next to a half tensor too (numpy alone promotes
    # ml_dtypes' bfloat16 with a float to float64)
    ("bfloat16(N) A, float(N) B", "0.5 * A(i)", "bfloat16"),
    ("float16(N) A, float(N) B", "A(i) * 1.5", "float16"),
    ("float64(N) A, float(N) B", "1 + 0 * A(i)", "float64"),
    ("int32(N) A, float(N) B", "i where exists A(i)", "float32"),
    ("float(N) A, int32(N) B", "A(B(i)) where exists B(i)", "float32"),
    # a float-valued builtin of integers is C's double function (np.sqrt(int32))
    ("int32(N) A, float(N) B", "sqrt(A(i))", "float64"),
    ("int32(N) A, int64(N) B", "atan2(A(i), B(i)) + A(i)", "float64"),
    ("int32(N) A, float(N) B", "sqrt(A(i)) * B(i)", "float64"),
    ("int32(N) A, float(N) B", "sqrt(B(i)) * 2", "float32"),
    ("int32(N) A, float(N) B", "abs(A(i)) + max(A(i), 2)", "int32"),
])
def test_output_dtype_is_numpy_promotion(sig, rhs, dtype):
    p = lower(f"def f({sig}) -> (O) {{ O(i) = {rhs} }}")
    assert p.tensor("O").dtype == dtype
    assert dtype == np.dtype(dtype).name


def test_declared_output_type_wins():
    p = lower("def f(float(M, N) A) -> (double(M, N) C) { C(i, j) = A(i, j) }")
    assert p.tensor("C").dtype == "float64" and shape(p, "C", M=2, N=3) == (2, 3)


def test_integer_max_reduction_identity():
    p = lower("def f(int32(N, M) A) -> (R) { R(i) max=! A(i, j) }")
    assert p.statements[0].rhs == E.Const(int(np.iinfo(np.int32).min))


# -------------------------------------------------- sizes and arguments
def test_scalar_size_argument():
    p = lower("def f(float(N) A, int64 S, float c) -> (B) {\n"
              "  B(i) = A(i + S) * S * c where i in 0:N - S\n}")
    assert p.params == ("N", "S")
    assert p.param_bindings == {"N": ("A", 0), "S": None}
    assert p.signature == ("A", "S", "c")
    assert [t.name for t in p.inputs] == ["A", "c"] and p.tensor("c").shape == ()
    assert p.statement("S0").reads[0].is_equal(
        isl.Map("[N, S] -> { S0[i] -> A[i + S] : 0 <= i < N - S }"))
    assert p.preconditions is None


def test_fixed_sizes_are_substituted_everywhere():
    p = lower(MATMUL, {"K": 32, "Z": 3})  # Z: not a size of mm, ignored
    assert p.params == ("M", "N") and p.fixed_sizes == {"K": 32}
    assert p.param_bindings == {"M": ("A", 0), "N": ("B", 1)}
    assert shape(p, "A", M=5, N=6) == (5, 32)
    assert p.statement("S0").domain.is_equal(
        isl.Set("[M, N] -> { S0[m, n, kk] : 0 <= m < M and 0 <= n < N and 0 <= kk < 32 }"))
    q = lower("def f(float(N) A, int64 S) -> (B) { B(i) = A(i) * S }", {"S": 3})
    assert q.statement("S0").rhs.rhs == E.Const(3) and q.signature == ("A", "S")
    with pytest.raises(ShapeError, match="K=-1"):
        lower(MATMUL, {"K": -1})


@pytest.mark.parametrize("body,needed", [
    ("O(h) +=! I(h*S + kh) * W(kh)", {"S"}),
    ("O(h) +=! I(S*h + kh) * W(kh)", {"S"}),
    ("O(h) +=! I(h*KH + kh) * W(kh)", {"KH"}),
    ("O(h) +=! I(h/S) * W(kh)", {"S"}),
    ("O(h) +=! I(h % S) * W(kh) where h in 0:H", {"S"}),
    ("O(h) +=! I(h) * W(kh) where h in 0:H*S", {"S"}),
    ("O(h) +=! I(h) * W(kh) * S * h", set()),          # values are not isl
    ("O(h) +=! I(I2(h*S)) * W(kh)", {"S"}),            # inner read of a gather
    ("O(h) +=! I(I2(h) * S) * W(kh) where h in 0:H", set()),  # gather position
    ("O(h) +=! I(2*h + kh) * W(kh)", set()),
])
def test_needs_specialization(body, needed):
    d = tc.parse("def f(float(H) I, float(KH) W, int64(H) I2, int64 S) -> (O) {" + body + "}").defs[0]
    assert tc.needs_specialization(d) == frozenset(needed)


# ---------------------------------------------------------------- errors
ERRORS = [
    ("undeclared tensor", "def f(float(N) A) -> (B) {\n  B(i) = X(i)\n}",
     SemanticError, (2, 10), "unknown tensor or function 'X'"),
    ("wrong rank", "def f(float(N) A) -> (B) {\n  B(i) = A(i, i)\n}",
     SemanticError, (2, 10), "'A' has rank 1 but is read with 2 indices"),
    ("rank-1 tensor used bare", "def f(float(N) A) -> (B) {\n  B(i) = A where i in 0:N\n}",
     SemanticError, (2, 10), "'A' has rank 1 but is read with 0 indices"),
    ("write input", "def f(float(N) A) -> (B) {\n  A(i) = 1 where i in 0:N\n  B(i) = A(i)\n}",
     SemanticError, (2, 3), "cannot write to input 'A'"),
    ("never written", "def f(float(N) A) -> (B, C) {\n  B(i) = A(i)\n}",
     SemanticError, (1, 26), "output 'C' is never written"),
    ("not declared", "def f(float(N) A) -> (B) {\n  B(i) = A(i)\n  T(i) = A(i)\n}",
     SemanticError, (3, 3), "'T' is written but not declared as an output"),
    ("duplicate argument", "def f(float(N) A, float(N) A) -> (B) { B(i) = A(i) }",
     SemanticError, (1, 28), "duplicate argument name 'A'"),
    ("duplicate output", "def f(float(N) A) -> (B, B) { B(i) = A(i) }",
     SemanticError, (1, 26), "output 'B' is listed twice"),
    ("output is an input", "def f(float(N) A) -> (A) { A(i) = A(i) }",
     SemanticError, (1, 23), "output 'A' has the name of an input"),
    ("size is an argument", "def f(float(N) N) -> (B) { B(i) = N(i) }",
     SemanticError, (1, 16), "'N' is both a size and an argument name"),
    ("size arg and shape size", "def f(float(N) A, int64 N) -> (B) { B(i) = A(i) }",
     SemanticError, (1, 25), "'N' is already a size of A"),
    ("output size unbound", "def f(float(N) A) -> (float(Q) B) { B(i) = A(i) }",
     SemanticError, (1, 29), "size 'Q' of output 'B' is not bound"),
    ("reduction without operator", "def f(float(N, M) A) -> (B) {\n  B(i) = A(i, j)\n}",
     SemanticError, (2, 8), "index variable 'j' appears only on the right-hand side"),
    ("accumulate uninitialised", "def f(float(N, M) A) -> (B) {\n  B(i) += A(i, j)\n}",
     SemanticError, (2, 8), "use '+=!'"),
    ("max accumulate uninitialised", "def f(float(N, M) A) -> (B) {\n  B(i) max= A(i, j)\n}",
     SemanticError, (2, 8), "use 'max=!'"),
    ("lhs expression", "def f(float(N) A) -> (B) {\n  B(i + 1) = A(i)\n}",
     SemanticError, (2, 5), "left-hand side indices must be distinct index variables, got 'i + 1'"),
    ("lhs size", "def f(float(N) A) -> (B) {\n  B(N) = A(0)\n}",
     SemanticError, (2, 5), "got 'N'"),
    ("lhs repeated", "def f(float(N) A) -> (B) {\n  B(i, i) = A(i)\n}",
     SemanticError, (2, 8), "index variable 'i' appears twice"),
    ("rank change", "def f(float(N) A) -> (B) {\n  B(i) = A(i)\n  B(i, j) = A(i) where j in 0:2\n}",
     SemanticError, (3, 3), "'B' has rank 1 but is written with 2 indices"),
    ("read before defined", "def f(float(N) A) -> (B) {\n  B(i) = B(i) + A(i)\n}",
     SemanticError, (2, 10), "'B' is read before any statement defines it"),
    ("builtin arity", "def f(float(N) A) -> (B) {\n  B(i) = exp(A(i), 1)\n}",
     SemanticError, (2, 10), "builtin 'exp' takes 1 argument(s), got 2"),
    ("builtin arity 2", "def f(float(N) A) -> (B) {\n  B(i) = fmax(A(i))\n}",
     SemanticError, (2, 10), "builtin 'fmax' takes 2 argument(s), got 1"),
    ("float gather", "def f(float(N) A, float(N) X) -> (B) {\n  B(i) = A(X(i))\n}",
     SemanticError, (2, 12), "index tensors must be integers"),
    ("where on index var in bound", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where i in 0:j\n}",
     SemanticError, (2, 28), "range bound 'j' is not a size expression"),
    ("where bound divided by zero", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where i in 0:N/0\n}",
     UnsupportedError, (2, 28), "range bound 'N/0' is not affine in the sizes (its divisor is 0"),
    ("where tensor read in bound", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where i in 0:A(0)\n}",
     SemanticError, (2, 28), "range bound 'A(0)' is not a size expression"),
    ("where unused", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where k in 0:N\n}",
     SemanticError, (2, 21), "where clause gives a range to 'k'"),
    ("where twice", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where i in 0:N, i in 0:2\n}",
     SemanticError, (2, 31), "'i' has two where ranges"),
    ("where on size", "def f(float(N) A) -> (B) {\n  B(i) = A(i) where N in 0:2\n}",
     SemanticError, (2, 21), "'N' is not an index variable"),
    ("dim out of range", "def f(float(N) A) -> (B) {\n  B(i) = A(i) + A.1\n}",
     SemanticError, (2, 17), "'A' has rank 1, so it has no dimension 1"),
    ("range not from zero", "def f(float(N) A) -> (B) {\n  B(i) = A(i - 1)\n}",
     SemanticError, (2, 5), "the inferred range of 'i' starts at 1, not 0"),
    ("undeterminable", "def f(float(N) A) -> (B) {\n  B(i, j) = A(i + j)\n}",
     SemanticError, (2, 3), "cannot infer the range of index variable 'i'"),
    ("uint64", "def f(uint64(N) A) -> (B) {\n  B(i) = A(i)\n}",
     UnsupportedError, (1, 7), "type 'uint64' of 'A' is not supported"),
    ("bool output", "def f(float(N) A) -> (bool(N) B) {\n  B(i) = A(i)\n}",
     UnsupportedError, (1, 23), "type 'bool' of 'B' is not supported"),
    ("non-affine product", "def f(float(N) A) -> (B) {\n  B(i, j) = A(i * j) where i in 0:N, j in 0:N\n}",
     UnsupportedError, (2, 15), "index expression 'i * j' is not affine"),
    ("non-affine call", "def f(float(N) A) -> (B) {\n  B(i) = A(exp(i)) where i in 0:N\n}",
     UnsupportedError, (2, 12), "index expression 'exp(i)' is not affine"),
    ("float index", "def f(float(N) A) -> (B) {\n  B(i) = A(i / 2.0) where i in 0:N\n}",
     UnsupportedError, (2, 16), "is not affine"),
    ("cast", "def f(float(N) A) -> (B) {\n  B(i) = bfloat16(A(i))\n}",
     UnsupportedError, (2, 10), "the cast 'bfloat16(A(i))' is not supported"),
    ("let with a range", "def f(float(N) A) -> (B) {\n  B(i) = 2*x where x = A(i), x in 1:2\n}",
     SemanticError, (2, 30), "'x' is bound by 'where x = ...'"),
    ("let twice", "def f(float(N) A) -> (B) {\n  B(i) = x where x = A(i), x = 1\n}",
     SemanticError, (2, 28), "'x' is bound twice"),
    ("let of a size", "def f(float(N) A) -> (B) {\n  B(i) = A(i) + N where N = 1\n}",
     SemanticError, (2, 25), "'N' is a size, tensor or argument"),
    ("let of itself", "def f(float(N) A) -> (B) {\n  B(i) = x where x = x + A(i)\n}",
     SemanticError, (2, 18), "the binding of 'x' uses 'x' itself"),
    ("cast of an index", "def f(float(N) A) -> (B) {\n  B(i) = A(int32(i))\n}",
     UnsupportedError, (2, 12), "drop the cast (a cast in an index is a gather only"),
    ("CUDA builtin", "def f(float(N) A) -> (B) {\n  B(i) = erfinv(A(i))\n}",
     UnsupportedError, (2, 10), "TC's builtin 'erfinv' is not supported by polyc"),
    ("missing specialisation", "def f(float(H) I, int64 S) -> (O) {\n  O(h) = I(h*S) where h in 0:2\n}",
     UnsupportedError, (2, 12), "'h*S' needs the value of size 'S'"),
]


@pytest.mark.parametrize("label,text,cls,where,fragment", ERRORS, ids=[e[0] for e in ERRORS])
def test_user_errors(label, text, cls, where, fragment):
    with pytest.raises(cls) as info:
        for d in tc.parse(text, filename="t.tc").defs:
            tc.lower(d)
    err = info.value
    line, column = where
    assert fragment in str(err)
    assert f"t.tc:{line}:{column}:" in str(err)
    src_line = text.splitlines()[line - 1]
    lines = str(err).splitlines()
    assert lines[-2] == src_line
    assert lines[-1].index("^") == column - 1
    if isinstance(err, ParseError):
        assert (err.line, err.column, err.filename) == (line, column, "t.tc")


def test_semantic_errors_are_parse_errors():
    assert issubclass(SemanticError, ParseError)


def test_lower_uses_the_given_source_for_excerpts():
    text = "def f(float(N) A) -> (B) {\n  B(i) = X(i)\n}"
    d = tc.parse(text).defs[0]
    with pytest.raises(SemanticError) as info:
        tc.lower(d, source=text + "\n# more")
    assert info.value.excerpt.startswith("  B(i) = X(i)")


def test_program_source_is_the_whole_text():
    text = MATMUL + "def g(float(N) A) -> (B) { B(i) = A(i) }\n"
    p = lower(text, name="g")
    assert p.source == text and p.statements[0].text == "B(i) = A(i)"


def test_python_examples_in_the_language_doc_run():
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parents[2] / "docs" / "tc-language.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.DOTALL)
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {"text": MATMUL})  # noqa: S102
