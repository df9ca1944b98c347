"""TC parser: golden syntax dumps for every grammar construct, readable
syntax errors at the right position, the sizes header, spans and excerpts."""

from __future__ import annotations

import pytest

from polyc.errors import ParseError, SemanticError
from polyc.frontend import tc
from polyc.frontend.source import Span, excerpt, span_text
from polyc.frontend.tc import syntax as S

# ------------------------------------------------------------------ goldens
PROGRAMS = {
    "matmul": """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, r_k) * B(r_k, n)
}
""",
    # comments, a signature over several lines, '->' starting a line,
    # size constants, rank-0 and integer arguments, several defs
    "layout": """# sizes: M=4 N=8
def f(float(M, 3) A,   # a comment after an argument
      double b,
      int64 S, int32(N) I)
  -> (X, Y)
{
    X(i, j) = A(i, j) * b   # comment after a statement
    Y(n) = I(n) + S
}
def g() -> () {}
""",
    "operators": """
def ops(float(N) A, float(N) B) -> (C, D, E) {
    C(i) = -A(i) + B(i) * 2 - A(i) / 3 % 4
    D(i) = A(i) > 0 && B(i) <= 1 || !(A(i) == B(i)) ? A(i) : B(i) != 2 ? 1 : 0
    E(i) = (A(i) + B(i)) * (A(i) - B(i)) >= 1 ? 1.5 : -.5
}
""",
    "numbers": """
def numbers(float(N) A) -> (B) {
    B(i) = A(i) * 1 + 1. + .5 + 1e3 + 2.5E-4 + 007 + 1.e+2
}
""",
    "reductions": """
def reductions(float(N, M) A) -> (S, P, MX, MN, T, U, V, W, Z) {
    S(i) +=! A(i, j)
    P(i) *=! A(i, j)
    MX(i) max=! A(i, j)
    MN(i) min=! A(i, j)
    T(i) = S(i)
    T(i) += A(i, j)
    U(i) = S(i)
    U(i) *= A(i, j)
    V(i) = S(i)
    V(i) max= A(i, j)
    W(i) = S(i)
    W(i) min= A(i, j)
    Z +=! A(i, j)
}
""",
    "where_exists": """
def conv(float(B, C, H, W) I, float(F, C, KH, KW) W1) -> (O) {
    O(b, f, h, w) +=! I(b, c, h + kh, w + kw) * W1(f, c, kh, kw)
        where kh in 0:KH, kw in 0:KW, exists I(b, c, h, w)
}
def fill(float(N) A, float c) -> (B) {
    B(i) = c where exists A(i)
}
def pool(float(I) B) -> (A) {
    A(i) +=! B(2*i + k) where k in 0:2
}
""",
    "builtins_gather_dims": """
def misc(float(E, D) LUT, int64(B, L) I, float(N) X) -> (O, Q, R) {
    O(b, d) +=! LUT(I(b, l), d)
    Q(i) = fmax(exp(X(i)), sigmoid(X(i))) + pow(X(i), 2) + min(X(i), X.0) + float(i)
    R() = X(0) + O.1 where i in 0:X.0
}
""",
    "typed_outputs": """
def typed(float(M, N) A) -> (double(M, N) C, float D) {
    C(i, j) = A(i, j)
    D +=! A(i, j)
}
def single(float(I) B) -> A {
    A(i) = B(10 - i)
}
""",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_syntax_dump(name, golden):
    module = tc.parse(PROGRAMS[name], filename=f"{name}.tc")
    dump = tc.format_syntax(module)
    assert dump.startswith("module")
    golden(f"tc/{name}.txt", dump)      # fails on any difference from the golden file


def test_every_program_dump_is_stable():
    for text in PROGRAMS.values():
        assert tc.format_syntax(tc.parse(text)) == tc.format_syntax(tc.parse(text))


# --------------------------------------------------------------- structure
def rhs_of(text: str) -> S.Expr:
    return tc.parse(f"def f(float(N) a) -> (O) {{ O(i) = {text} }}").defs[0].statements[0].rhs


def shape(e: S.Expr) -> str:
    """Fully parenthesised form, to check precedence and associativity."""
    if isinstance(e, S.Binary):
        return f"({shape(e.lhs)} {e.op} {shape(e.rhs)})"
    if isinstance(e, S.Unary):
        return f"({e.op}{shape(e.operand)})"
    if isinstance(e, S.Ternary):
        return f"({shape(e.cond)} ? {shape(e.then)} : {shape(e.otherwise)})"
    if isinstance(e, S.Apply):
        return f"{e.name}({', '.join(shape(a) for a in e.args)})"
    if isinstance(e, S.Number):
        return e.text
    if isinstance(e, S.DimOf):
        return f"{e.name}.{e.dim}"
    return e.name


@pytest.mark.parametrize("text,expected", [
    ("a + b * c", "(a + (b * c))"),
    ("a - b - c", "((a - b) - c)"),
    ("a / b % c", "((a / b) % c)"),
    ("-a * b", "((-a) * b)"),
    ("!a && b || c", "(((!a) && b) || c)"),
    ("a < b == c", "((a < b) == c)"),          # comparisons share one level (TC)
    ("a || b ? c : d ? e : f", "((a || b) ? c : (d ? e : f))"),  # right-assoc
    ("a + b > c - d", "((a + b) > (c - d))"),
    ("--a", "(-(-a))"),
    ("x.1 + f(a, b + 1)", "(x.1 + f(a, (b + 1)))"),
])
def test_precedence(text, expected):
    assert shape(rhs_of(text)) == expected


def test_numbers_are_typed_as_written():
    nums = [n for n in S.walk(rhs_of("1 + 1. + .5 + 1e3 + 2.5E-4"))
            if isinstance(n, S.Number)]
    assert [(n.text, n.value) for n in nums] == [
        ("1", 1), ("1.", 1.0), (".5", 0.5), ("1e3", 1000.0), ("2.5E-4", 2.5e-4)]
    assert isinstance(nums[0].value, int) and isinstance(nums[3].value, float)


def test_statement_fields_and_spans():
    text = "def f(float(N) A) -> (B) {\n  B(i) +=! A(i + k) where k in 0:3\n}\n"
    d = tc.parse(text).defs[0]
    st = d.statements[0]
    assert (st.tensor, st.op) == ("B", "+=!")
    assert span_text(text, st.span) == "B(i) +=! A(i + k) where k in 0:3"
    assert span_text(text, st.lhs_span) == "B(i)"
    assert span_text(text, st.op_span) == "+=!"
    rc = st.where[0]
    assert isinstance(rc, S.RangeConstraint) and rc.var == "k"
    assert span_text(text, rc.var_span) == "k"
    assert span_text(text, d.name_span) == "f"
    assert d.params[0].type == S.TensorType("float", (S.SizeName("N", d.params[0].type.dims[0].span),),
                                            d.params[0].type.span)
    assert d.source == text


def test_let_bindings_and_equivalence_annotations():
    # TC's "where x = expr" and "<=> name(args)" (test/test_lang.cc's annotate.expected)
    text = "def f(float(N) a) -> (b) { b(i) = x <=> g(a(i)) where x = a(i), i in 0:N }"
    st = tc.parse(text).defs[0].statements[0]
    let, rc = st.where
    assert isinstance(let, S.Let) and (let.var, shape(let.expr)) == ("x", "a(i)")
    assert span_text(text, let.span) == "x = a(i)" and span_text(text, let.var_span) == "x"
    assert isinstance(rc, S.RangeConstraint)
    assert isinstance(st.equivalent, S.Apply) and shape(st.equivalent) == "g(a(i))"
    assert span_text(text, st.equivalent.span) == "<=> g(a(i))"
    dump = tc.format_syntax(tc.parse(text))
    assert "      equivalent: apply g/1 [1:37-1:48]\n" in dump
    assert "      where x = [1:55-1:63]\n        apply a/1 [1:59-1:63]\n" in dump


def test_rank0_lhs_with_and_without_parentheses():
    d = tc.parse("def f(float(N) A) -> (S, T) { S +=! A(i) T() +=! A(i) }").defs[0]
    assert [s.indices for s in d.statements] == [(), ()]


def test_keywords_only_match_whole_words():
    d = tc.parse("def f(float(N) floaty, float(N) define) -> (index) "
                 "{ index(i) = floaty(i) + define(i) where i in 0:N }").defs[0]
    assert [p.name for p in d.params] == ["floaty", "define"]
    with pytest.raises(ParseError, match="found 'floaty'"):
        tc.parse("def f(floaty(N) A) -> (B) { }")


def test_max_eq_is_an_operator_but_max_is_a_builtin():
    st = tc.parse("def f(float(N) A) -> (B) { B max=! max(A(i), 0) }").defs[0].statements[0]
    assert st.op == "max=!"
    assert isinstance(st.rhs, S.Apply) and st.rhs.name == "max"


# ------------------------------------------------------------------ errors
def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        tc.parse(text, filename="bad.tc")
    return info.value


def caret_column(err: ParseError) -> int:
    underline = err.excerpt.splitlines()[1]
    return underline.index("^") + 1


@pytest.mark.parametrize("text,line,column,message", [
    # missing ')' before 'where'
    ("def f(float(N) A) -> (B) {\n  B(i) = A(i where i in 0:N\n}",
     2, 14, "expected ')' or ',' but found 'where'"),
    # missing '->'
    ("def f(float(N) A) (B) { B(i) = A(i) }", 1, 19, "expected '->' but found '('"),
    # no assignment operator
    ("def f(float(N) A) -> (B) {\n    B(i) A(i)\n}", 2, 10,
     "expected an assignment operator"),
    # dangling operator
    ("def f(float(N) A) -> (B) { B(i) = A(i) + }", 1, 42,
     "expected an expression but found '}'"),
    # empty where clause, on a later line
    ("def f(float(N) A) -> (B) {\n\n  B(i) = A(i) where\n}", 4, 1, "expected 'exists' or a name but found '}'"),
    # range without ':'
    ("def f(float(N) A) -> (B) { B(i) = A(i) where i in 0 N }", 1, 53, "expected ':' but found 'N'"),
    # stray character
    ("def f(float(N) A) -> (B) {\n  B(i) = A(i) @ 2\n}", 2, 15, "unexpected character '@'"),
    # unknown type
    ("def f(half(N) A, flot(N) B) -> (C) { }", 1, 18, "expected a type"),
    # non-integer size
    ("def f(float(2.5) A) -> (B) { }", 1, 13, "a size must be a non-negative integer"),
    # '=' spelled ':='
    ("def f(float(N) A) -> (B) { B(i) := A(i) }", 1, 33, "expected an assignment operator"),
    # a where binding with a reduction operator
    ("def f(float(N) A) -> (B) { B(i) = x where x += A(i) }", 1, 45,
     "expected '=' or 'in' after 'x' in a where clause, found '+='"),
    # TC's template placeholders: <sh> (Python API), ${sh} (C++ library)
    ("def f(float(N) A) -> (B) { B(i) = A(i * <sh>) }", 1, 41, "placeholders that TC's"),
    ("def f(float(N) A) -> (B) { B(i) = A(${sh} * i) }", 1, 37, "is a placeholder"),
])
def test_syntax_errors_point_at_the_culprit(text, line, column, message):
    err = parse_error(text)
    assert type(err) is ParseError
    assert (err.line, err.column) == (line, column)
    assert message in err.bare_message
    assert caret_column(err) == column
    assert err.excerpt.splitlines()[0] == text.splitlines()[line - 1]
    assert str(err).startswith(f"bad.tc:{line}:{column}: ")


def test_end_of_input_error_points_after_the_last_token():
    text = "def f(float(N) A) -> (B) {\n  B(i) = A(i)   # unfinished\n\n"
    err = parse_error(text)
    assert "found the end of the input" in err.bare_message
    assert "'}'" in err.bare_message
    assert (err.line, err.column) == (2, 14)


def test_no_lark_exception_escapes_on_any_prefix():
    text = PROGRAMS["where_exists"] + PROGRAMS["operators"]
    outcomes = set()
    for cut in range(len(text)):
        try:
            tc.parse(text[:cut])
            outcomes.add("parsed")
        except ParseError as e:        # anything else (a lark exception) fails the test
            assert e.line is not None and e.column is not None
            outcomes.add("ParseError")
    assert outcomes == {"parsed", "ParseError"}


def test_duplicate_definitions():
    with pytest.raises(SemanticError) as info:
        tc.parse("def f() -> () {}\ndef g() -> () {}\ndef f() -> () {}")
    err = info.value
    assert (err.line, err.column) == (3, 5)
    assert "duplicate definition of 'f'" in str(err)


# ------------------------------------------------------------ sizes header
@pytest.mark.parametrize("text,expected", [
    ("# sizes: M=128 K=1024\ndef f() -> () {}", {"M": 128, "K": 1024}),
    ("#sizes: M=1, N=2,K=3", {"M": 1, "N": 2, "K": 3}),
    ("# sizes: M=1\n# other comment\n  # sizes: N=2 M=5", {"M": 5, "N": 2}),
    ("def f() -> () {}  # no header", {}),
    ("", {}),
])
def test_sizes_header(text, expected):
    assert tc.sizes_header(text) == expected


def test_sizes_header_malformed_entry():
    with pytest.raises(ParseError) as info:
        tc.sizes_header("\n# sizes: M=128 K=big")
    assert (info.value.line, info.value.column) == (2, 16)
    assert "K=big" in str(info.value)


# ------------------------------------------------------------ source spans
def test_excerpt_underlines_the_span():
    text = "first line\n  B(i) = A(i) where\nlast"
    assert excerpt(text, Span(2, 15, 2, 20)) == "  B(i) = A(i) where\n              ^~~~~"
    assert excerpt(text, Span(1, 1, 3, 2)) == "first line\n^~~~~~~~~~"
    assert excerpt(text, Span(9, 1, 9, 2)) == ""
    assert excerpt("", Span(1, 1, 1, 2)) == ""


def test_excerpt_keeps_tabs_aligned():
    assert excerpt("\tx = y", Span(1, 4, 1, 5)) == "\tx = y\n\t  ^"


def test_span_text_across_lines():
    text = "ab\ncd\nef"
    assert span_text(text, Span(1, 2, 3, 2)) == "b\ncd\ne"
    assert Span(1, 2, 1, 3).cover(Span(2, 1, 2, 4)) == Span(1, 2, 2, 4)


@pytest.mark.parametrize("text", ["", " \n\t", "# only a comment\n# sizes: N=3\n"])
def test_source_without_definitions(text):
    """The grammar accepts it as an empty module; require_definitions (what
    polyc.compile, polyc.program and the CLI call) refuses it."""
    module = tc.parse(text, "x.tc")
    assert module.defs == ()
    with pytest.raises(ParseError) as info:
        tc.require_definitions(module)
    assert str(info.value).startswith("x.tc holds no TC definition")
    ok = tc.parse("def f(float(N) A) -> (B) { B(i) = A(i) }")
    assert tc.require_definitions(ok) is ok


# ------------------------------------------------------------------ grammar cache
@pytest.mark.parametrize("start", ["start", "statement"])
def test_grammar_tables_come_from_the_cache_and_a_damaged_entry_is_rebuilt(
        tmp_path, monkeypatch, start):
    """lark's LALR tables are built once per cache directory and loaded by
    the next process (here: after forgetting the in-memory memo); a damaged
    entry is rebuilt; without a disk cache lark builds them in memory.  The
    parser parses as one built by lark directly."""
    from polyc import cache
    from polyc.frontend.tc import parser as P
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("POLYC_NO_DISK_CACHE", raising=False)
    text = PROGRAMS["matmul"] if start == "start" else "C(m, n) +=! A(m, k) * B(k, n)"
    want = P._build_lark(start).parse(text)
    cache.clear_memory()               # the parsers of earlier tests: not in tmp_path
    cache.reset_stats()
    assert P.cached_lark(start).parse(text) == want
    entries = list(tmp_path.glob("tcgrammar-*.lark"))
    assert len(entries) == 1 and cache.stats().builds == 1
    cache.clear_memory()
    assert P.cached_lark(start).parse(text) == want
    assert cache.stats().disk_hits == 1 and cache.stats().builds == 1
    cache.clear_memory()
    entries[0].chmod(0o600)
    entries[0].write_bytes(b"not a pickle")
    with pytest.warns(Warning):
        assert P.cached_lark(start).parse(text) == want      # reported, rebuilt
    assert cache.stats().builds == 2
    cache.clear_memory()
    monkeypatch.setenv("POLYC_NO_DISK_CACHE", "1")
    assert P.cached_lark(start).parse(text) == want
    assert cache.stats().builds == 2
