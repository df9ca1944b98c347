"""Every user error, triggered through the public API, names its culprit.

Compile-time errors carry the file, line and column and the source line with
a caret under the culprit; call-time errors name the argument, the expected
and the actual value; einsum errors read as numpy's; compiler failures carry
the command and the compiler's own output.
"""

from __future__ import annotations

import stat

import numpy as np
import pytest

import polyc
from polyc.errors import (
    BindingError,
    CompileError,
    DTypeError,
    EinsumError,
    ParseError,
    PolycError,
    SemanticError,
    ShapeError,
    ToolMissingError,
    UnsupportedError,
)

MM = """
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""


def compile_error(src: str, cls=ParseError, filename: str = "model.tc"):
    with pytest.raises(cls) as info:
        polyc.compile(src, filename=filename)
    return info.value


def caret_column(err: ParseError) -> int:
    """1-based column of the caret in ``err.excerpt``, checking that the
    excerpt's first line is the culprit's source line."""
    lines = err.excerpt.splitlines()
    assert len(lines) >= 2, err.excerpt
    return lines[1].index("^") + 1


def assert_points_at(err: ParseError, src: str, line: int, text: str, *, filename="model.tc"):
    """``err`` is at ``line`` (1-based), at the first occurrence of ``text``
    on that line (at the ``|`` in ``text`` when it has one), with that line and
    a caret in its excerpt and message."""
    source_line = src.splitlines()[line - 1]
    col = source_line.index(text.replace("|", "")) + 1 + max(text.find("|"), 0)
    assert (err.line, err.column) == (line, col), (err.line, err.column, str(err))
    assert err.excerpt.splitlines()[0] == source_line
    assert caret_column(err) == col
    msg = str(err)
    assert msg.startswith(f"{filename}:{line}:{col}: "), msg
    assert source_line in msg and "^" in msg


# --- syntax -------------------------------------------------------------------------

SYNTAX_CASES = [
    # (source, line, text at the error, words of the message)
    ("def f(float(N) A) -> (B) {\n    B(i) = A(i) +* 2\n}\n", 2, "* 2", ["expected", "'*'"]),
    ("def f(float(N) A) -> (B) {\n    B(i) = A(i where i in 0:N\n}\n", 2, "where",
     ["expected", "')'", "'where'"]),
    ("def f(float(N) A) -> (B) {\n    B(i) = A(i) @ 2\n}\n", 2, "@",
     ["unexpected character", "'@'"]),
    ("def f(float(N) A) -> B) {\n    B(i) = A(i)\n}\n", 1, ") {", ["expected", "'{'"]),
    ("def f(float(N) A) -> (B) {\n    B(i) + = A(i)\n}\n", 2, "+", ["expected"]),
]


@pytest.mark.parametrize("src,line,text,words", SYNTAX_CASES)
def test_syntax_error_location_and_caret(src, line, text, words):
    err = compile_error(src)
    assert type(err) is ParseError
    assert_points_at(err, src, line, text)
    for w in words:
        assert w in err.bare_message, err.bare_message


def test_syntax_error_at_end_of_input():
    src = "def f(float(N) A) -> (B) {\n    B(i) = A(i)"
    err = compile_error(src)
    assert err.line == 2 and "end of the input" in str(err)
    assert caret_column(err) == err.column == len("    B(i) = A(i)") + 1


def test_parse_error_default_filename():
    with pytest.raises(ParseError) as info:
        polyc.compile("def f(float(N) A) -> (B) { B(i) = A(i) +* 2 }")
    assert str(info.value).startswith("<tc>:1:")


@pytest.mark.parametrize("src", ["", "   \n\t\n", "# sizes: N=4\n# a comment, no def\n"])
def test_source_without_a_definition(src):
    """A source with no ``def`` is a ParseError saying so, with an example
    definition (it used to compile to an empty dict)."""
    for compile_it in (polyc.compile, polyc.program):
        with pytest.raises(ParseError) as info:
            compile_it(src)
        err = info.value
        assert type(err) is ParseError and err.line is None
        msg = str(err)
        assert msg.startswith("the source holds no TC definition"), msg
        assert "def f(float(N) A) -> (B) { B(i) = A(i) }" in msg
    err = compile_error(src, filename="model.tc")
    assert str(err).startswith("model.tc holds no TC definition") and err.filename == "model.tc"


def test_example_of_the_no_definition_error_compiles():
    from polyc.frontend.tc.parser import DEF_EXAMPLE
    kernel = polyc.compile(DEF_EXAMPLE)
    np.testing.assert_array_equal(kernel(np.arange(3, dtype=np.float32)), [0, 1, 2])


def test_errors_are_polyc_errors():
    assert issubclass(SemanticError, ParseError) and issubclass(ParseError, PolycError)
    assert issubclass(EinsumError, ValueError) and issubclass(ShapeError, ValueError)
    assert issubclass(DTypeError, TypeError) and issubclass(BindingError, TypeError)
    assert issubclass(ToolMissingError, CompileError)


# --- semantic errors ------------------------------------------------------------------

SEMANTIC_CASES = [
    # (id, source, line, text at the error, words the message must contain)
    ("unknown tensor", "def f(float(N) A) -> (B) {\n    B(i) = Z(i) + A(i)\n}", 2, "Z(",
     ["unknown", "'Z'"]),
    ("unknown function", "def f(float(N) A) -> (B) {\n    B(i) = foo(A(i))\n}", 2, "foo",
     ["unknown", "'foo'"]),
    ("unknown where index", "def f(float(N) A) -> (B) {\n    B(i) = A(i) where j in 0:N\n}", 2,
     "j in", ["'j'", "where"]),
    ("undeterminable range", "def f(float(N) A) -> (B) {\n    B(i, j) = A(i)\n}", 2, "B(i, j)",
     ["'j'", "where j in"]),
    ("undeterminable coupled", "def f(float(N) A) -> (B) {\n    B(i) +=! A(i + j)\n}", 2, "B(i)",
     ["'i'", "where i in"]),
    ("redefinition", "def f(float(N) A) -> (B) { B(i) = A(i) }\n"
     "def f(float(N) A) -> (B) { B(i) = A(i) }", 2, "f(", ["duplicate", "'f'", "line 1"]),
    ("duplicate argument", "def f(float(N) A, float(N) A) -> (B) {\n    B(i) = A(i)\n}", 1,
     "A) ->", ["duplicate", "'A'"]),
    ("duplicate output", "def f(float(N) A) -> (B, B) {\n    B(i) = A(i)\n}", 1, "B) {",
     ["'B'", "twice"]),
    ("arity too few", "def f(float(N, M) A) -> (B) {\n    B(i) = A(i)\n}", 2, "A(i)",
     ["'A'", "rank 2", "1 index"]),
    ("arity too many", "def f(float(N) A) -> (B) {\n    B(i) = A(i, i)\n}", 2, "A(i, i)",
     ["'A'", "rank 1", "2 indices"]),
    ("write an input", "def f(float(N) A) -> (B) {\n    A(i) = 1.0 where i in 0:N\n"
     "    B(i) = A(i)\n}", 2, "A(i)", ["input", "'A'"]),
    ("plain += first", "def f(float(N, M) A) -> (B) {\n    B(i) += A(i, j)\n}", 2, "+=",
     ["'B'", "'+=!'"]),
    ("reduction with =", "def f(float(N, M) A) -> (B) {\n    B(i) = A(i, j)\n}", 2, "=",
     ["'j'", "reduction"]),
    ("undeclared output", "def f(float(N) A) -> (B) {\n    B(i) = A(i)\n    C(i) = A(i)\n}", 3,
     "C(i)", ["'C'", "output"]),
    ("unwritten output", "def f(float(N) A) -> (B, C) {\n    B(i) = A(i)\n}", 1, "C)",
     ["'C'", "never written"]),
    ("repeated lhs index", "def f(float(N, N) A) -> (B) {\n    B(i, i) = A(i, i)\n}", 2, "i) =",
     ["'i'", "twice"]),
    ("read before defined", "def f(float(N) A) -> (B, C) {\n    C(i) = B(i)\n    B(i) = A(i)\n}",
     2, "B(i)", ["'B'", "before"]),
    ("output range not at 0", "def f(float(N) A) -> (B) {\n    B(i) = A(i - 1)\n}", 2, "i)",
     ["'i'", "where i in 0:"]),
    ("empty where range", "def f(float(N) A) -> (B) {\n    B(i) = A(i) where i in 5:2\n}", 2,
     "i)", ["'i'", "starts at 5"]),
    ("index variable in where bound", "def f(float(N) A) -> (B) {\n"
     "    B(i) +=! A(j) where i in 0:N, j in 0:i\n}", 2, "0:|i", ["'i'", "size"]),
    ("builtin arity", "def f(float(N) A) -> (B) {\n    B(i) = exp(A(i), A(i))\n}", 2, "exp",
     ["'exp'", "1 argument"]),
    ("float gather index", "def f(float(N) A, float(N) I) -> (B) {\n    B(i) = A(I(i))\n}", 2,
     "I(i)", ["'I'", "must be integers"]),
]


@pytest.mark.parametrize("src,line,text,words", [c[1:] for c in SEMANTIC_CASES],
                         ids=[c[0] for c in SEMANTIC_CASES])
def test_semantic_error_names_the_culprit(src, line, text, words):
    err = compile_error(src, SemanticError)
    assert_points_at(err, src, line, text)
    for w in words:
        assert w in err.bare_message, err.bare_message


def test_empty_reduction_range_is_not_an_error_but_the_identity():
    k = polyc.compile("def f(float(N, M) A) -> (B, C) {\n"
                      "    B(i) +=! A(i, j) where j in 3:1\n"
                      "    C(i) max=! A(i, j) where j in M:0\n}")
    B, C = k(np.ones((4, 5), np.float32))
    assert np.array_equal(B, np.zeros(4)) and np.all(C == -np.inf)


# --- unsupported constructs ----------------------------------------------------------

@pytest.mark.parametrize("expr,culprit", [("i * j", "i * j"), ("exp(i)", "exp(i)"),
                                          ("i / 2.0", "2.0"), ("j * j + 1", "j * j")])
def test_non_affine_index_is_unsupported(expr, culprit):
    src = f"def f(float(N) A) -> (B) {{\n    B(i, j) = A({expr}) where i in 0:3, j in 0:3\n}}"
    err = compile_error(src, UnsupportedError)
    msg = str(err)
    assert f"'{culprit}'" in msg and "affine" in msg
    col = src.splitlines()[1].index(culprit)
    assert msg.startswith(f"model.tc:2:{col + 1}: "), msg
    assert src.splitlines()[1] in msg
    underline = msg.splitlines()[-1]
    assert underline.index("^") == col and underline.strip() == "^" + "~" * (len(culprit) - 1)


def test_unsupported_element_type_and_cast():
    err = compile_error("def f(uint64(N) A) -> (B) {\n    B(i) = A(i)\n}", UnsupportedError)
    assert "'uint64'" in str(err) and "'A'" in str(err)
    err = compile_error("def f(float(N) A) -> (B) {\n    B(i) = half(A(i))\n}", UnsupportedError)
    assert "half(A(i))" in str(err) and "cast" in str(err)


def test_unsupported_options():
    with pytest.raises(polyc.PolycError, match="target must be one of c, cuda"):
        polyc.compile(MM, target="opencl")
    # a misspelt schedule silently ran isl's scheduler
    with pytest.raises(polyc.PolycError, match="schedule must be 'isl' or 'identity'"):
        polyc.Config(schedule="identiy")
    with pytest.raises(UnsupportedError, match="int8"):
        polyc.compile(MM, dtype="int8")
    assert polyc.compile(MM, dtype="float16").program.tensor("A").dtype == "float16"
    # a schedule that is neither a Schedule nor a recipe: the culprit is named
    with pytest.raises(polyc.ScheduleError, match="tile\\(32\\)"):
        polyc.compile(MM, schedule="tile(32)")
    # numpy's dtype objects and TC's names were refused ("dtype <class
    # 'numpy.float64'>: choose float32, float64, ...")
    for dt in (np.float64, np.dtype("float64"), "double"):
        assert polyc.compile(MM, dtype=dt).program.tensor("A").dtype == "float64"
    with pytest.raises(UnsupportedError, match="choose float32"):
        polyc.compile(MM, dtype=np.int32)


@pytest.mark.parametrize("call", [
    lambda: polyc.compile(MM, config="fast"),
    lambda: polyc.einsum("ij->i", np.ones((2, 2)), config={"fusion": "max"}),
    lambda: polyc.kernel(config="fast"),
    lambda: polyc.tune(MM, {"M": 4, "K": 4, "N": 4}, config="fast"),
])
def test_a_config_that_is_not_a_config_is_named(call):
    # it failed later with AttributeError: 'str' object has no attribute 'target'
    with pytest.raises(polyc.PolycError, match="config must be a polyc.Config"):
        call()


# --- einsum errors as numpy gives them -------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (4, 5)]),
    ("ij,jk", [(2, 3)]),
    ("ij->k", [(2, 3)]),
    ("i$", [(2,)]),
    ("ii->i", [(2, 3)]),
    ("ij->ii", [(2, 2)]),
    ("ijk", [(2, 3)]),
    ("i,i->i", [(3,), (4,)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES)
def test_einsum_errors_match_numpy(subscripts, shapes):
    ops = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError) as np_info:
        np.einsum(subscripts, *ops)
    with pytest.raises(EinsumError) as info:
        polyc.einsum(subscripts, *ops)
    assert isinstance(info.value, ValueError) and isinstance(info.value, PolycError)
    assert str(info.value) == str(np_info.value)


# --- call-time errors ------------------------------------------------------------------

@pytest.fixture(scope="module")
def mm():
    return polyc.compile(MM)


def f32(*shape):
    return np.ones(shape, np.float32)


def test_wrong_dtype(mm):
    with pytest.raises(DTypeError) as info:
        mm(np.ones((2, 3)), f32(3, 4))
    msg = str(info.value)
    assert "argument A" in msg and "float32" in msg and "float64" in msg


def test_wrong_ndim(mm):
    with pytest.raises(BindingError) as info:
        mm(f32(2, 3), f32(3, 4, 1))
    msg = str(info.value)
    assert "argument B" in msg and "2 dimension" in msg and "got 3" in msg


def test_wrong_argument_count_and_type(mm):
    with pytest.raises(BindingError, match=r"mm\(\) takes 2 argument.*got 1"):
        mm(f32(2, 3))
    with pytest.raises(BindingError, match="argument A.*list"):
        mm([[1.0]], f32(1, 1))


def test_wrong_shape_names_argument_dimension_expected_and_got(mm):
    with pytest.raises(ShapeError) as info:
        mm(f32(2, 3), f32(4, 5))
    msg = str(info.value)
    assert "argument B" in msg and "dimension 0" in msg and "4" in msg and "expected 3" in msg


def test_inconsistent_sizes_between_inputs():
    k = polyc.compile("def f(float(N) A, float(M, N) C) -> (O) {\n"
                      "    O(i) = A(i) + C(0, i)\n}")
    with pytest.raises(ShapeError) as info:
        k(f32(3), f32(2, 5))
    msg = str(info.value)
    assert "argument C" in msg and "dimension 1" in msg and "5" in msg and "expected 3" in msg
    assert "N=3" in msg


def test_literal_size_in_signature_is_checked():
    k = polyc.compile("def f(float(3, N) A) -> (C) {\n    C(j) +=! A(i, j)\n}")
    with pytest.raises(ShapeError, match="argument A.*dimension 0.*2.*expected 3"):
        k(f32(2, 4))


def test_out_errors(mm):
    with pytest.raises(ShapeError, match=r"out C.*\(2, 4\).*\(2, 5\)"):
        mm(f32(2, 3), f32(3, 4), out=f32(2, 5))
    with pytest.raises(DTypeError, match="out C.*float32.*float64"):
        mm(f32(2, 3), f32(3, 4), out=np.ones((2, 4)))
    ro = f32(2, 4)
    ro.setflags(write=False)
    with pytest.raises(BindingError, match="out C.*read-only"):
        mm(f32(2, 3), f32(3, 4), out=ro)


def test_size_argument_errors():
    k = polyc.compile("def f(float(N) A, int64 S) -> (O) {\n    O(i) = A(i) * S\n}")
    with pytest.raises(BindingError, match="argument S.*integer.*float"):
        k(f32(3), 2.5)
    with pytest.raises(BindingError, match="argument S.*bool"):
        k(f32(3), True)
    with pytest.raises(ShapeError, match="argument S.*>= 0.*-2"):
        k(f32(3), -2)


def test_out_of_bounds_sizes_are_refused_before_running():
    k = polyc.compile("def f(float(I) B, float(K) C, float(J) D) -> (A) {\n"
                      "    A(i, j) = B(i) * C(i + j) * D(j)\n}")
    assert k(f32(3), f32(5), f32(3)).shape == (3, 3)
    with pytest.raises(ShapeError) as info:
        k(f32(3), f32(4), f32(3))
    msg = str(info.value)
    assert "C" in msg and "out of bounds" in msg and "K=4" in msg


def test_specialised_kernel_binding_errors():
    k = polyc.compile("def f(float(H) I, float(KH) W, int64 S) -> (O) {\n"
                      "    O(h) +=! I(h*S + kh) * W(kh)\n}")
    with pytest.raises(BindingError, match="3 arguments.*got 2"):
        k(f32(5), f32(2))
    with pytest.raises(BindingError, match="argument S"):
        k(f32(5), f32(2), 2.0)
    with pytest.raises(ShapeError, match="S"):
        k(f32(5), f32(2), -1)


# --- inputs are never modified -----------------------------------------------------------

def test_inputs_are_never_modified_even_when_out_aliases_one():
    k = polyc.compile("def f(float(N) A, float(N) B) -> (C) {\n"
                      "    C(i) = A(N - 1 - i) + B(i)\n}")
    rng = np.random.default_rng(0)
    A = rng.random(9).astype(np.float32)
    B = rng.random(9).astype(np.float32)
    A0, B0 = A.copy(), B.copy()
    out = B  # the output overwrites B (as asked); A must survive, and the
    res = k(A, B, out=out)  # result must be computed from the original B
    assert res is B
    assert np.array_equal(A, A0)
    assert np.allclose(B, A0[::-1] + B0)


def test_inputs_are_never_modified_read_only_and_strided():
    k = polyc.compile(MM.replace("mm", "mm_ro"))
    rng = np.random.default_rng(1)
    A = rng.random((8, 6)).astype(np.float32)
    B = rng.random((10, 12)).astype(np.float32)
    A.setflags(write=False)
    Bv = B[:6, ::3]  # non-contiguous, shape (6, 4)
    A0, B0 = A.copy(), B.copy()
    C = k(A, Bv)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)
    assert np.allclose(C, A.astype(np.float64) @ Bv.astype(np.float64), rtol=1e-5)


def test_failed_call_modifies_nothing(mm):
    A, B = f32(2, 3), f32(4, 5)
    out = np.full((2, 5), 7.0, np.float32)
    with pytest.raises(ShapeError):
        mm(A, B, out=out)
    assert np.all(out == 7.0) and np.all(A == 1) and np.all(B == 1)


# --- the C compiler --------------------------------------------------------------------

def test_compile_failure_carries_command_and_compiler_output(tmp_path):
    cfg = polyc.Config.from_env(
        cflags=("-O3", "-fPIC", "-shared", "-DNOT_C99", "-Werror=this-flag-does-not-exist"),
        cache_dir=str(tmp_path / "cache"))
    with pytest.raises(CompileError) as info:
        polyc.compile(MM.replace("mm", "mm_badflags"), config=cfg)
    err = info.value
    assert not isinstance(err, ToolMissingError)
    assert "-Werror=this-flag-does-not-exist" in err.command and "-DNOT_C99" in err.command
    assert "this-flag-does-not-exist" in err.stderr
    msg = str(err)
    assert " ".join(err.command) in msg and err.stderr.strip() in msg


def test_compile_failure_of_a_compiler_script(tmp_path):
    cc = tmp_path / "fake-cc"
    cc.write_text("#!/bin/sh\necho 'fake-cc: licence expired, cannot compile' >&2\nexit 1\n")
    cc.chmod(cc.stat().st_mode | stat.S_IXUSR)
    cfg = polyc.Config.from_env(cc=str(cc), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(CompileError) as info:
        polyc.compile(MM, config=cfg)
    err = info.value
    assert err.command[0] == str(cc)
    assert "licence expired" in err.stderr and "licence expired" in str(err)
    assert "exit status 1" in str(err)


def test_missing_compiler(tmp_path, monkeypatch):
    cfg = polyc.Config.from_env(cc=str(tmp_path / "no-such-cc"), cache_dir=str(tmp_path / "c"))
    with pytest.raises(ToolMissingError) as info:
        polyc.compile(MM, config=cfg)
    msg = str(info.value)
    assert "no-such-cc" in msg and "CC" in msg and "install" in msg
    monkeypatch.setenv("POLYC_CC", "/nonexistent/bin/cc")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "c2"))
    with pytest.raises(ToolMissingError, match="/nonexistent/bin/cc"):
        polyc.compile(MM)


def test_cli_reports_compiler_failure_as_user_error(tmp_path, monkeypatch, capsys):
    from polyc.cli import main
    cc = tmp_path / "fake-cc"
    cc.write_text("#!/bin/sh\necho 'fake-cc: out of coffee' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("POLYC_CC", str(cc))
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "cache"))
    tc = tmp_path / "k.tc"
    tc.write_text("# sizes: M=2 N=3 K=4\n" + MM)
    assert main(["run", str(tc)]) == 2
    err = capsys.readouterr().err
    assert "out of coffee" in err and str(cc) in err and "Traceback" not in err
