"""Injection-proof code generation: user text never reaches generated C, file
names or the compiler's argv verbatim.

* Hostile TC sources (``$(...)``, quotes, backslash-newline, ``../``, ``*/``,
  ``??/`` trigraphs, non-ASCII names, NUL) are rejected by the grammar with a
  located :class:`~polyc.errors.ParseError`.
* What gets through (comments holding ``*/ #define $(...) ??/ \\``, statement
  text shown in a generated comment, def/tensor/size/index names that are C
  keywords, macros of the headers polyc includes, or polyc's own names)
  compiles and computes the right values; the emitted source is then scanned:
  printable ASCII only, no ``#define``, no ``$(``, no backslash, no ``??``,
  comments only where polyc opened and closed them, the fixed prelude
  byte for byte, and every identifier in the function either C/OpenMP
  vocabulary, polyc's own (``polyc_*``, isl's ``c<k>``) or a mangled user name
  (``t_``, ``p_``, ``i_``, ``d<k>_`` + the name).
* The build: every process polyc starts gets an argument list (no shell), and
  neither that list nor any file name in the cache directory holds user text;
  the ``.c`` file is named by the key.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import polyc
from polyc.backends.c import emit
from polyc.backends.c import intrinsics as c_intrinsics
from polyc.backends.c.cexpr import check_identifier, extent_name
from polyc.backends.c.emit import comment_text
from polyc.config import Config
from polyc.errors import ParseError, UnsupportedError

# ----------------------------------------------------------------- rejections

#: name -> (TC source, the 1-based column the error must point at, or None)
REJECTED = {
    "dollar-name": ("def f(float(N) A$) -> (O) { O(i) = A$(i) }", 17),
    "command-substitution": ("def f(float(N) A) -> (O) { O(i) = A(i) + $(rm -rf ~) }", 42),
    "backticks": ("def f(float(N) A) -> (O) { O(i) = `A(i)` }", 35),
    "double-quote": ('def f(float(N) A) -> (O) { O(i) = A(i) + "x" }', 42),
    "single-quote": ("def f(float(N) A) -> (O) { O(i) = A(i) + 'x' }", 42),
    "backslash-newline": ("def f(float(N) A) -> (O) { O(i) = A(i) \\\n + 1 }", 40),
    "dot-dot-slash": ("def f(float(N) A) -> (../O) { O(i) = A(i) }", 23),
    "path-name": ("def f(float(N) A) -> (O) { O(i) = A(i) + ../../etc/passwd }", None),
    "comment-terminator": ("def f(float(N) A) -> (O) { O(i) = A(i) */ 2 }", 41),
    "comment-opener": ("def f(float(N) A) -> (O) { O(i) = A(i) /* x */ }", 41),
    "trigraph": ("def f(float(N) A) -> (O) { O(i) = A(i) ??/ 2 }", 41),
    "trigraph-name": ("def f??=(float(N) A) -> (O) { O(i) = A(i) }", None),
    "c-string-pragma": ('def f(float(N) A) -> (O) { O(i) = A(i) _Pragma("omp") }', None),
    "semicolon": ("def f(float(N) A) -> (O) { O(i) = A(i); system(1) }", 39),
    "extra-brace": ("def f(float(N) A) -> (O) { O(i) = A(i) } }", 42),
    "hex-float": ("def f(float(N) A) -> (O) { O(i) = A(i) * 0x1p3 }", 42),
    "float-suffix": ("def f(float(N) A) -> (O) { O(i) = A(i) * 1.5f }", 42),
    "latin-name": ("def f(float(N) A\u00e9) -> (O) { O(i) = A\u00e9(i) }", 17),
    "cyrillic-name": ("def f(float(N) \u0410) -> (O) { O(i) = \u0410(i) }", 16),
    "zero-width": ("def f(float(N) A\u200b) -> (O) { O(i) = A(i) }", 17),
    "nul": ("def f(float(N) A) -> (O) { O(i) = A(i)\x00 }", 39),
    "newline-in-name": ("def f(float(N) A) -> (O\\\nX) { O(i) = A(i) }", None),
    "directive-in-def": ("def f(float(N) A) -> (O) {\n#define X\n O(i) = A(i) ?? X }", None),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_hostile_source_is_a_located_parse_error(name):
    src, column = REJECTED[name]
    with pytest.raises(ParseError) as info:
        polyc.compile(src)
    err = info.value
    assert err.line is not None and err.column is not None, str(err)
    assert 1 <= err.line <= src.count("\n") + 1
    if column is not None:
        assert (err.line, err.column) == (1, column), str(err)
    assert err.excerpt and "^" in err.excerpt, str(err)


def test_check_identifier_refuses_everything_but_ascii_identifiers():
    for bad in ["", "1a", "a-b", "a b", "a*/", "a/*", "\u00e9", "a\\", "a\n", "a$", "a.b",
                "../a", "a\x00", "x" * 201, "??/"]:
        with pytest.raises(UnsupportedError):
            check_identifier(bad)
    for good in ["a", "_", "NULL", "INT64_C", "int", "__LINE__", "x" * 200]:
        assert check_identifier(good) == good


def test_extent_names_cannot_collide_with_tensor_names():
    # a tensor named A_d1 and dimension 1 of a tensor A: distinct C names
    assert extent_name("A", 1) != "t_A_d1"
    assert not extent_name("A", 1).startswith(("t_", "p_", "i_", "polyc_"))


@pytest.mark.parametrize("text", [
    "O(i) = A(i) # */ #define X 1 \\\n + 1",
    "O(i) = A(i) # ??/ ??= ??? ???/ ?????",
    "O(i) = A(i) */*/*/ /*/*/ **// //**",
    "O(i) = A(i) # \u00e9\u00e8 \u202e \x00 \t\r\n $(id) `id` \"q\" 'q'",
    "*/" * 100, "/" + "*" * 200, "?" * 161,
])
def test_comment_text_is_inert(text):
    out = comment_text(text)
    assert _printable(out)
    for bad in ("*/", "/*", "??", "\\", "#", "$", "`", '"', "'", "\n"):
        assert bad not in out, (bad, out)


# ------------------------------------------------- accepted hostile sources

#: (source, inputs as a function of rng, expected outputs as a function of the inputs)
ACCEPTED = {
    # names of C macros and keywords, and a comment full of C syntax
    "macros": ("""
# */ #define NULL 0 $(rm -rf ~) `id` ??/ "quoted" 'x' \\
# \u00e9\u00e8\u4e2d\u6587 \u202e trailing backslash next: \\
def NULL(float(N) errno) -> (INT64_C) {
    INT64_C(i) = errno(i) * 2.5 # */ ??/ #define INT64_C(x) x
}
""", lambda rng: [rng.standard_normal(37).astype(np.float32)],
        lambda A: [A * np.float32(2.5)]),
    # C keywords everywhere: def, tensors, sizes, indices
    "keywords": ("""
def restrict(float(c0, polyc_team) int, float(polyc_team, INT64_MAX) for) -> (while) {
    while(polyc_acc, NAN) +=! int(polyc_acc, c1) * for(c1, NAN)
}
""", lambda rng: [rng.standard_normal((7, 19)).astype(np.float32),
                  rng.standard_normal((19, 5)).astype(np.float32)],
        lambda A, B: [A.astype(np.float64) @ B.astype(np.float64)]),
    # polyc's own C names and the mangled forms of other names as user names
    "polyc-names": ("""
def polyc_kernel(double(polyc_params, t_A) polyc_buffers, double(t_A) A_d1,
                 double(polyc_params, t_A) A) -> (polyc_nthreads, d1_A, i_p_N) {
    polyc_nthreads(p_N, i_i) = polyc_buffers(p_N, i_i) + A_d1(i_i) * A(p_N, i_i)
    d1_A(p_N) +=! polyc_nthreads(p_N, c0)
    i_p_N(p_N) max=! A(p_N, c0)
}
""", lambda rng: [rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal((4, 6))],
        lambda P, D, A: [P + D * A, (P + D * A).sum(1), A.max(1)]),
    # a statement spanning lines, comments inside it: its text goes into a C comment
    "multiline-statement": ("""
def f(float(N) A) -> (O) {
    O(i) = A(i) # */ #define O 1 ??/ \\
        + 1.0   # \u00e9 $(id) /* */ ?? ??= "x"
        * 2     # trailing */
}
""", lambda rng: [rng.standard_normal(9).astype(np.float32)],
        lambda A: [A + np.float32(2)]),
    # the #-comment holds a would-be directive on a line of its own
    "directive-comment": ("#define O 1\n#include <stdio.h>\n"
                          "def f(float(N) A) -> (O) { O(i) = -A(i) }\n#pragma omp\n",
                          lambda rng: [rng.standard_normal(5).astype(np.float32)],
                          lambda A: [-A]),
}

_HOSTILE = ["#define", "$(", "\\", "??", "`", '"', "'", "#include <stdio", "#pragma omp\n"]

#: every identifier polyc writes in a function body besides mangled names
_VOCABULARY = {
    "void", "const", "restrict", "int", "int32_t", "int64_t", "uint32_t", "uint64_t",
    "float", "double", "for", "if", "else", "ifdef", "endif", "_OPENMP", "pragma", "omp",
    "parallel", "simd", "schedule", "static", "dynamic", "num_threads", "collapse", "reduction",
    "omp_get_max_threads", "INT64_C", "UINT32_C", "UINT64_C", "INT64_MIN", "INFINITY",
    "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "fabs", "fabsf",
    "fmax", "fmaxf", "fmin", "fminf", "pow", "powf", "max", "min", "NULL",
}
_MANGLED = re.compile(r"(t|p|i)_[A-Za-z_][A-Za-z0-9_]*\Z|d[0-9]+_[A-Za-z_][A-Za-z0-9_]*\Z")
_POLYC = re.compile(r"polyc_[A-Za-z0-9_]+\Z|c[0-9]+(_[0-9]+)*\Z")


def _printable(text: str) -> bool:
    return all(ch == "\n" or " " <= ch <= "~" for ch in text)


def _user_names(program) -> set[str]:
    names = set(program.params) | {t.name for t in program.tensors}
    for s in program.statements:
        names |= set(s.iterators)
    return names | {program.name}


#: C preprocessing numbers (``12``, ``0x1.8p+3``, ``1L``): not identifiers
_PP_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.])*")


def _strip_comments(text: str) -> tuple[str, list[str]]:
    comments = re.findall(r"/\*(.*?)\*/", text)
    return re.sub(r"/\*.*?\*/", " ", text), comments


def check_source(kernel) -> None:
    """The emitted C is made of polyc's text and mangled identifiers only."""
    text = kernel.source
    program = kernel.program
    # the pasted intrinsic interface is polyc's own fixed text (no user text in it)
    text = text.replace("\n" + c_intrinsics.api_text() + "\n", "")
    assert _printable(text), "non-ASCII or control character in the generated source"
    for bad in ("#define", "$(", "\\", "??", "`", "'"):
        assert bad not in text.replace(emit.PRELUDE, ""), bad
    header = f"/* polyc kernel for def {program.name} */\n"
    assert text.startswith(header + emit.PRELUDE), "header or prelude differs"
    body = text[len(header + emit.PRELUDE):]
    # comments: one line each, polyc's opener and terminator only
    code, comments = _strip_comments(body)
    assert "/*" not in code and "*/" not in code
    for line in body.splitlines():
        assert line.count("/*") == line.count("*/") <= 1, line
    for com in comments:
        assert "/*" not in com and "*/" not in com and "??" not in com
    # preprocessor lines: only the #ifdef _OPENMP around the team size
    for line in code.splitlines():
        if line.lstrip().startswith("#"):
            assert line.strip() in ("#ifdef _OPENMP", "#else", "#endif") or \
                line.strip().startswith("#pragma omp "), line
    assert '"' not in code
    # identifiers: vocabulary, polyc's names, or a mangled user name
    users = _user_names(program)
    words = set()
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*|" + _PP_NUMBER.pattern, code):
        if not token[0].isdigit() and token[0] != ".":
            words.add(token)
    for ident in words:
        if ident in _VOCABULARY or _POLYC.match(ident):
            continue
        assert _MANGLED.match(ident), f"identifier {ident!r} is not mangled"
        assert ident.split("_", 1)[1] in users, f"{ident!r} names no user name"
    # every tensor and size appears mangled
    for t in program.tensors:
        assert re.search(rf"\bt_{t.name}\b", code), t.name


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_hostile_but_valid_sources_compile_and_compute(name):
    src, make_inputs, expected = ACCEPTED[name]
    rng = np.random.default_rng(7)
    kernel = polyc.compile(src)
    inputs = make_inputs(rng)
    out = kernel(*inputs)
    out = out if isinstance(out, tuple) else (out,)
    want = expected(*[np.asarray(a, np.float64) for a in inputs])
    assert len(out) == len(want)
    for got, ref in zip(out, want):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    check_source(kernel)


def test_statement_text_shows_in_an_inert_comment():
    kernel = polyc.compile(ACCEPTED["multiline-statement"][0])
    comments = _strip_comments(kernel.source)[1]
    shown = [c for c in comments if "O(i) = A(i)" in c]
    assert shown, comments
    assert "1.0" in shown[0] and "* 2" in shown[0]
    check_source(kernel)


def test_prelude_headers_define_no_macro_in_the_mangled_name_space(tmp_path):
    """No macro of the headers polyc includes may have a name that a mangled
    user name could take (``t_``, ``p_``, ``i_``, ``d<k>_``, ``c<k>``,
    ``polyc_``): it would rewrite the kernel.  (Declarations cannot clash:
    every generated name is a block-scope local that shadows them.)"""
    from polyc.backends.c.build import resolve_compiler
    cfg = Config.from_env()
    src = tmp_path / "headers.c"
    src.write_text(emit.PRELUDE.split("\n\n")[0] + "\n")
    assert "#include <math.h>" in src.read_text()
    cc = resolve_compiler(cfg.cc)
    flags = [f for f in cfg.cflags if f.startswith(("-std", "-f", "-m"))]
    macros = subprocess.run([*cc, *flags, "-dM", "-E", str(src)], capture_output=True,
                            text=True, check=True).stdout
    names = {line.split()[1].split("(")[0] for line in macros.splitlines()
             if line.startswith("#define ")}
    assert "INT64_C" in names and "INFINITY" in names
    clash = sorted(n for n in names if _MANGLED.match(n) or _POLYC.match(n))
    assert not clash, clash


# ------------------------------------------------------------ argv and files

def test_build_argv_and_file_names_hold_no_user_text(tmp_path, monkeypatch):
    """Compile a kernel with distinctive names in a fresh cache directory and
    record every process polyc starts: argument lists, no shell, no user
    text; every file polyc writes is named by the key."""
    src = """
# sizes in a comment: ../../Zq_evil $(touch pwned) ; rm -rf ~
def Zq_evil_def(float(Zq_N) Zq_evil_in) -> (Zq_evil_out) {
    Zq_evil_out(Zq_i) = Zq_evil_in(Zq_i) * 3.0
}
"""
    started: list[tuple] = []
    real_popen = subprocess.Popen

    class Recording(real_popen):
        def __init__(self, args, *a, **kw):
            started.append((args, kw.get("shell", False)))
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    cache_dir = tmp_path / "cache"
    kernel = polyc.compile(src, config=Config.from_env(cache_dir=str(cache_dir),
                                                       disk_cache=True))
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), x * 3)
    monkeypatch.setattr(subprocess, "Popen", real_popen)

    assert started, "no compiler process was recorded"
    for args, shell in started:
        assert shell is False
        assert isinstance(args, (list, tuple)), args
        for arg in args:
            assert "Zq" not in str(arg) and "evil" not in str(arg) and "$(" not in str(arg)
    command = kernel.library.command
    assert command and not any("Zq" in a or "evil" in a for a in command)
    key = kernel.library.key
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert kernel.library.path.name == f"{key}.so"
    c_file = cache_dir / f"{key}.c"
    assert c_file.read_text() == kernel.source
    assert str(c_file) in command
    for path in cache_dir.rglob("*"):
        rel = str(path.relative_to(cache_dir))
        assert re.fullmatch(r"[A-Za-z0-9._/-]+", rel), rel
        assert "Zq" not in rel and "evil" not in rel and ".." not in rel.split("/")


# ------------------------------------------------------------------- einsum

@pytest.mark.parametrize("subscripts", [
    "i$j->i", "ij->\u00e9", "i*/j", "ij->i; rm -rf ~", "../ij", "ij->i\\", "ij->ji??",
    "i\x00j", "ij->$(id)", 'i"j', b"i\xe9j->i", "ij->i\n#define"])
def test_hostile_einsum_subscripts_are_refused(subscripts):
    with pytest.raises(polyc.EinsumError) as info:
        polyc.einsum(subscripts, np.ones((2, 2), np.float32))
    assert isinstance(info.value, ValueError)


def test_einsum_kernels_are_made_of_mangled_names():
    from polyc.frontend.einsum import lower, parse
    from polyc.pipeline import compile_program
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4, 2)).astype(np.float32)
    spec = parse("Iij,jiK->IK", [a.shape, b.shape], dtypes=[a.dtype, b.dtype])
    kernel = compile_program(lower(spec), Config.from_env())
    np.testing.assert_allclose(kernel(a, b), np.einsum("Iij,jiK->IK", a, b), rtol=1e-5)
    check_source(kernel)
