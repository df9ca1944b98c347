"""Hostile TC programs: each gives its documented, located polyc error, or
compiles and computes what numpy computes.

* ``corpus/tc_bad.txt``: hand-written malformed programs, one per record,
  with the error class, the location and words of the message (run again
  with CRLF line endings: the location must not move);
* generated here: names that cannot be written in that file (10 kB, non-ASCII,
  invisible characters), nesting beyond the limit, TC type names as names;
* ``ODD`` (valid but odd, executed in worker processes so that a crash is a
  failure, not the end of pytest): C and Python keywords and polyc's own
  generated names as def, tensor, size, output and index names (polyc
  mangles them: ``t_int``), 200-character names, nesting at the limit, sizes 0
  and 1, empty ranges, odd but legal spelling.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402

import polyc  # noqa: E402
from polyc.frontend import tc  # noqa: E402
from polyc.frontend.tc.parser import MAX_EXPR_DEPTH, MAX_NAME_LENGTH  # noqa: E402

TEXT = H.CORPUS / "tc_bad.txt"


# ------------------------------------------------------------ the text corpus
@dataclass(frozen=True)
class Record:
    id: str
    cls: str
    loc: tuple[int, int] | None
    words: tuple[str, ...]
    source: str


def _column(line_text: str, anchor: str, rid: str) -> int:
    if anchor.endswith("\n"):                       # anchored at the end of the line
        body = anchor[:-1]
        assert line_text.endswith(body), f"{rid}: line does not end with {body!r}"
        return len(line_text) - len(body) + 1
    assert anchor in line_text, f"{rid}: {anchor!r} is not on line {line_text!r}"
    return line_text.index(anchor) + 1


def load_records(path: Path = TEXT) -> list[Record]:
    records: list[Record] = []
    chunks = re.split(r"^=== ", path.read_text(), flags=re.M)[1:]
    for chunk in chunks:
        head, _, body = chunk.partition("\n")
        rid = head.strip()
        lines = body.split("\n")
        cls, loc_spec, words = None, None, []
        while lines and lines[0][:2] in ("! ", "? "):
            line = lines.pop(0)
            if line.startswith("! "):
                m = re.fullmatch(r"! (\w+)(?: @(\d+)(?::(\d+)| (\".*\")))?", line)
                assert m, f"{rid}: bad expectation line {line!r}"
                cls = m.group(1)
                if m.group(2):
                    loc_spec = (int(m.group(2)), m.group(3), m.group(4))
            else:
                words.append(line[2:])
        src_lines = [ln for ln in lines if not ln.startswith("#!")]
        # drop the blank/comment lines separating this record from the next
        while src_lines and (not src_lines[-1].strip() or
                             (src_lines[-1].startswith("# ") and "---" in src_lines[-1])):
            src_lines.pop()
        source = "\n".join(src_lines) + "\n"
        loc = None
        if loc_spec is not None:
            line_no, col, anchor = loc_spec
            if col is not None:
                loc = (line_no, int(col))
            else:
                text_line = source.split("\n")[line_no - 1]
                loc = (line_no, _column(text_line, json.loads(anchor), rid))
        assert cls, f"{rid}: no '! CLASS' line"
        records.append(Record(rid, cls, loc, tuple(words), source))
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids)), "duplicate record ids"
    return records


RECORDS = load_records()


def _compile(src: str):
    tc.sizes_header(src)
    return polyc.compile(src)


@pytest.mark.parametrize("rec", RECORDS, ids=[r.id for r in RECORDS])
def test_bad_program(rec):
    outcome = H.capture(lambda: _compile(rec.source) and None)
    H.expect_error(outcome, rec.cls, rec.words, rec.loc)


@pytest.mark.parametrize("rec", RECORDS, ids=[r.id for r in RECORDS])
def test_bad_program_crlf(rec):
    """The same programs with Windows line endings: same error, same place."""
    outcome = H.capture(lambda: _compile(rec.source.replace("\n", "\r\n")) and None)
    H.expect_error(outcome, rec.cls, rec.words, rec.loc)


# ------------------------------------------------------- generated hostile programs
#: Every place a name is declared or used, as a template with ``{x}``, and the
#: line of the first occurrence of ``{x}``.
ROLES = {
    "def-name": ("def {x}(float(N) A) -> (B) {{\n    B(i) = A(i)\n}}\n", 1),
    "argument": ("def f(float(N) {x}) -> (B) {{\n    B(i) = {x}(i)\n}}\n", 1),
    "size": ("def f(float({x}) A) -> (B) {{\n    B(i) = A(i)\n}}\n", 1),
    "output": ("def f(float(N) A) -> ({x}) {{\n    {x}(i) = A(i)\n}}\n", 1),
    "index": ("def f(float(N) A) -> (B) {{\n    B({x}) = A({x})\n}}\n", 2),
    "reduction-index": ("def f(float(N, M) A) -> (B) {{\n    B(i) +=! A(i, {x})\n}}\n", 2),
    "where-variable": ("def f(float(N) A) -> (B) {{\n    B(i) = A(0) where {x} in 0:N\n}}\n", 2),
    "function": ("def f(float(N) A) -> (B) {{\n    B(i) = {x}(A(i))\n}}\n", 2),
    "dim-of": ("def f(float(N) A) -> (B) {{\n    B(i) = A(i) * {x}.0\n}}\n", 2),
    "size-argument": ("def f(float(N) A, int64 {x}) -> (B) {{\n    B(i) = A(i) * {x}\n}}\n", 1),
}


def _at(template: str, line: int, x: str) -> tuple[int, int]:
    text_line = template.format(x=x).split("\n")[line - 1]
    marker = template.split("\n")[line - 1].replace("{{", "{").replace("}}", "}")
    return line, marker.index("{x}") + 1 if text_line else 1


GENERATED: list[tuple[str, str, str, tuple[str, ...], tuple[int, int] | None]] = []

# identifiers longer than the limit, in every role
for role, (tpl, line) in ROLES.items():
    for n in (MAX_NAME_LENGTH + 1, 10_000):
        name = "n" * n
        GENERATED.append((f"long-name-{n}-{role}", tpl.format(x=name), "ParseError",
                          (f"is {n} characters long", f"at most {MAX_NAME_LENGTH}"),
                          _at(tpl, line, name)))

# characters outside the language: non-ASCII letters, invisible and control characters
STRANGE = {
    "latin-a-umlaut": "\u00c4", "e-acute": "\u00e9", "greek-lambda": "\u03bb",
    "cyrillic-a": "\u0410", "cjk": "\u540d", "emoji": "\U0001f600",
    "zero-width-space": "\u200b", "no-break-space": "\u00a0", "byte-order-mark": "\ufeff",
    "nul": "\x00", "line-separator": "\u2028", "fullwidth-paren": "\uff08",
    "minus-sign": "\u2212", "smart-quote": "\u201c", "escape": "\x1b", "delete": "\x7f",
    "arabic-indic-digit": "\u0663", "fullwidth-digit": "\uff15", "superscript-two": "\u00b2",
}
for label, ch in STRANGE.items():
    for role in ("argument", "index", "def-name"):
        tpl, line = ROLES[role]
        name = "a" + ch + "b"
        GENERATED.append((f"char-{label}-{role}", tpl.format(x=name), "ParseError",
                          ("unexpected character", f"U+{ord(ch):04X}"),
                          (line, _at(tpl, line, name)[1] + 1)))
for label, digit in (("arabic-indic", "\u0663"), ("fullwidth", "\uff13"),
                     ("devanagari", "\u0969")):
    # \\d would match these in a regular expression: numbers are ASCII only
    GENERATED.append((f"number-{label}-digit",
                      f"def f(float(N) A) -> (B) {{\n    B(i) = A(i) * {digit}\n}}\n",
                      "ParseError", (f"U+{ord(digit):04X}", "ASCII only"), (2, 19)))
    GENERATED.append((f"size-{label}-digit",
                      f"def f(float({digit}) A) -> (B) {{\n    B(i) = A(i)\n}}\n",
                      "ParseError", (f"U+{ord(digit):04X}",), (1, 13)))
GENERATED.append(("sizes-header-non-ascii-digit",
                  "# sizes: N=\u0663\ndef f(float(N) A) -> (B) {\n    B(i) = A(i)\n}\n",
                  "ParseError", ("malformed size",), (1, 10)))
GENERATED.append(("char-bom-at-start", "\ufeffdef f(float(N) A) -> (B) {\n    B(i) = A(i)\n}\n",
                  "ParseError", ("U+FEFF",), (1, 1)))
GENERATED.append(("char-nul-between-statements",
                  "def f(float(N) A) -> (B, C) {\n    B(i) = A(i)\n\x00    C(i) = A(i)\n}\n",
                  "ParseError", ("'\\x00'", "U+0000"), (3, 1)))
GENERATED.append(("char-form-feed-keeps-lines",
                  "def f(float(N) A) -> (B) {\x0c\n    B(i) = A(i) @\n}\n",
                  "ParseError", ("'@'",), (2, 17)))
GENERATED.append(("char-vertical-tab",
                  "def f(float(N) A) -> (B) {\n    B(i) =\x0b A(i)\n}\n",
                  "ParseError", ("U+000B",), (2, 11)))
GENERATED.append(("char-lone-cr-one-line",
                  "def f(float(N) A) -> (B) {\r    B(i) = X(i)\r}\r",
                  "SemanticError", ("'X'",), (1, 39)))
GENERATED.append(("char-non-ascii-in-comment-then-error",
                  "# commentaire \u00e9t\u00e9 \u540d\n"
                  "def f(float(N) A) -> (B) {\n    B(i) = X(i)\n}\n",
                  "SemanticError", ("'X'",), (3, 12)))

# expressions nested beyond the limit
DEEP = {
    "sum": lambda n: " + ".join(["A(i)"] * (n + 1)),
    "unary-minus": lambda n: "-" * n + "A(i)",
    "not": lambda n: "!" * n + "A(i)",
    "right-sum": lambda n: "(A(i) + " * n + "A(i)" + ")" * n,
    "call": lambda n: "tanh(" * n + "A(i)" + ")" * n,
    "select": lambda n: "A(i) > 0 ? A(i) : " * n + "A(i)",
    "index-sum": lambda n: "A(" + " + ".join(["i"] * (n + 1)) + f" - {n}*i)",
}


def _deep_src(label: str, n: int) -> str:
    return f"def f(double(N) A) -> (B) {{\n    B(i) = {DEEP[label](n)}\n}}\n"


def _parses(src: str) -> bool:
    try:
        tc.parse(src)
        return True
    except polyc.errors.ParseError:
        return False


def _deepest(label: str) -> int:
    """The largest ``n`` whose program parses (the limit, in this form's terms)."""
    lo, hi = 1, 4 * MAX_EXPR_DEPTH
    assert _parses(_deep_src(label, lo)) and not _parses(_deep_src(label, hi))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _parses(_deep_src(label, mid)) else (lo, mid)
    return lo


DEEPEST = {label: _deepest(label) for label in DEEP}
for label in DEEP:
    # the limit still allows realistic programs: a sum of 100 terms, 100 nested calls
    assert DEEPEST[label] >= 100, (label, DEEPEST[label])
    for n in (DEEPEST[label] + 1, 5000):
        GENERATED.append((f"deep-{label}-{'just-over-limit' if n < 5000 else n}",
                          _deep_src(label, n), "ParseError",
                          ("nested too deeply", f"more than {MAX_EXPR_DEPTH}"),
                          (2, 13 if label == "right-sum" else 12)))
GENERATED.append(("deep-gather-5000",
                  "def f(float(N) A, int32(N) I) -> (B) {\n    B(i) = A(" + "I(" * 5000 + "i"
                  + ")" * 5000 + ")\n}\n", "ParseError", ("nested too deeply",), (2, 12)))
GENERATED.append(("deep-in-where-bound",
                  "def f(float(N) A) -> (B) {\n    B(i) = A(0) where i in 0:" + "-" * 300
                  + "N\n}\n", "ParseError", ("nested too deeply",), (2, 30)))
# parentheses alone do not nest: 10,000 of them are fine until the body is wrong
GENERATED.append(("parens-10000-then-unknown",
                  "def f(float(N) A) -> (B) {\n    B(i) = " + "(" * 10000 + "X(i)" + ")" * 10000
                  + "\n}\n", "SemanticError", ("unknown tensor or function 'X'",), (2, 10012)))

# TC type names cannot be names (they read as casts)
for word in ("float", "double", "int32", "int64", "half", "bool", "uint8", "float64"):
    GENERATED.append((f"type-name-as-argument-{word}",
                      f"def f(float(N) {word}) -> (B) {{\n    B(i) = A(i)\n}}\n",
                      "ParseError", (f"'{word}' is a type name", "argument"), (1, 16)))
    GENERATED.append((f"type-name-as-output-{word}",
                      f"def f(float(N) A) -> (double {word}) {{\n    B(i) = A(i)\n}}\n",
                      "ParseError", (f"'{word}' is a type name", "output"), (1, 30)))
    GENERATED.append((f"type-name-as-index-{word}",
                      f"def f(float(N) A) -> (B) {{\n    B({word}) = A(0)\n}}\n",
                      "ParseError", (f"'{word}' is a type name",), (2, 7 + len(word))))

GENERATED_IDS = [g[0] for g in GENERATED]
assert len(GENERATED_IDS) == len(set(GENERATED_IDS))


@pytest.mark.parametrize("case", GENERATED, ids=GENERATED_IDS)
def test_generated_bad_program(case):
    _, src, cls, words, loc = case
    outcome = H.capture(lambda: _compile(src) and None)
    H.expect_error(outcome, cls, words, loc)


# ------------------------------------------------------ valid but odd: executed
#: C and C++ keywords and macros of the headers generated code includes, Python
#: keywords (the runtime builds Python functions of the sizes), TC's own
#: keywords, and the names polyc's generated C uses itself.
KEYWORDS = [
    # C
    "auto", "break", "case", "char", "const", "continue", "default", "do", "else", "enum",
    "extern", "for", "goto", "if", "inline", "int", "long", "register", "restrict",
    "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
    "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Alignof", "_Atomic",
    "_Generic", "_Noreturn", "_Static_assert", "_Thread_local", "asm", "__asm__",
    "__attribute__", "__restrict", "__inline", "__builtin_expect", "typeof",
    # C library and macros
    "main", "NULL", "INFINITY", "NAN", "HUGE_VAL", "errno", "stdin", "printf", "malloc",
    "free", "size_t", "int64_t", "int32_t", "uint64_t", "INT64_C", "INT64_MIN", "EOF",
    "assert", "M_PI", "omp_get_max_threads", "omp_get_thread_num", "fabsf", "sqrt",
    # C++
    "class", "new", "delete", "template", "this", "namespace", "operator", "private",
    # Python
    "False", "None", "True", "and", "as", "async", "await", "def_", "del", "elif", "except",
    "finally", "from", "global", "import", "is", "lambda", "nonlocal", "not", "or", "pass",
    "raise", "try", "with", "yield", "match", "type", "self", "print", "eval", "exec",
    "__import__", "__builtins__", "min_", "p_N",
    # TC keywords (not type names)
    "def", "where", "in", "exists",
    # polyc's builtins and generated names
    "exp", "max", "min", "tanh", "polyc_kernel", "polyc_params", "polyc_buffers",
    "polyc_nthreads", "polyc_team", "polyc_floord", "polyc_mod", "polyc_min", "c0", "c1",
    "i_i", "t_A", "p_p", "_", "__", "___x",
]

SLOTS = ("D", "S", "S2", "T", "Z", "O", "I", "R")
KEYWORD_TEMPLATE = """def {D}(float({S}, {S2}) {T}, int64 {Z}) -> ({O}) {{
    {O}({I}) +=! {T}({I}, {R}) * {Z}
}}
"""


def _keyword_groups():
    """Groups of 8 distinct keywords, one per slot; every keyword appears in
    two different slots over the groups."""
    n = len(KEYWORDS)
    groups = []
    for shift in (0, 3):
        order = KEYWORDS[shift:] + KEYWORDS[:shift]
        for k in range(0, n, len(SLOTS)):
            g = order[k:k + len(SLOTS)]
            if len(g) < len(SLOTS):
                g = g + [w for w in KEYWORDS if w not in g][:len(SLOTS) - len(g)]
            groups.append(dict(zip(SLOTS, g)))
    return groups


def _check(got, want, what="result") -> dict:
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return {"match": False, "detail": f"{what}: shape {got.shape}, expected {want.shape}"}
    if got.dtype != want.dtype:
        return {"match": False, "detail": f"{what}: dtype {got.dtype}, expected {want.dtype}"}
    rtol = 1e-5 if got.dtype == np.float32 else 1e-12
    if not np.allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True):
        return {"match": False, "detail": f"{what}: {got!r} != {want!r}"}
    return {"match": True}


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


ODD: dict[str, object] = {}


def odd(name):
    def register(fn):
        assert name not in ODD, name
        ODD[name] = fn
        return fn
    return register


def _keyword_case(names):
    def run():
        src = KEYWORD_TEMPLATE.format(**names)
        k = polyc.compile(src)
        t = _rand(3, 4)
        return _check(k(t, 3), t.sum(axis=1, dtype=np.float32) * np.float32(3))
    return run


for _g in _keyword_groups():
    ODD["keywords-" + "-".join(_g.values())] = _keyword_case(_g)


def _program_case(src, inputs, expected, *, out=None):
    """Compile ``src``, call it with ``inputs()``, compare with ``expected(*inputs)``."""
    def run():
        k = polyc.compile(src)
        args = inputs()
        got = k(*args) if out is None else k(*args, out=out(*args))
        want = expected(*args)
        if isinstance(want, tuple):
            for q, (g, w) in enumerate(zip(got, want)):
                r = _check(g, w, f"output {q}")
                if not r["match"]:
                    return r
            return {"match": True}
        return _check(got, want)
    return run


LONG = "x" * MAX_NAME_LENGTH
ODD["name-at-length-limit-everywhere"] = _program_case(
    f"def {LONG}(float({LONG.upper()}) {LONG}A) -> ({LONG}B) {{\n"
    f"    {LONG}B({LONG}i) = {LONG}A({LONG}i) * 2\n}}\n".replace(f"{LONG}A", "A" + LONG[1:])
    .replace(f"{LONG}B", "B" + LONG[1:]).replace(f"{LONG}i", "i" + LONG[1:]),
    lambda: (_rand(5),), lambda a: a * np.float32(2))

def _deep_expected(label: str, n: int, a: np.ndarray) -> np.ndarray:
    if label in ("sum", "right-sum"):
        return (n + 1) * a
    if label == "unary-minus":
        return a if n % 2 == 0 else -a
    if label == "not":
        return (a != 0).astype(np.float64) if n % 2 == 0 else (a == 0).astype(np.float64)
    if label == "call":
        for _ in range(n):
            a = np.tanh(a)
        return a
    return a                                  # select, index-sum


def _deep_case(label: str):
    def run():
        n = DEEPEST[label]
        k = polyc.compile(_deep_src(label, n))
        a = np.random.default_rng(1).uniform(-1, 1, 5)
        a[2] = 0.0
        return _check(k(a), _deep_expected(label, n, a))
    return run


for _label in DEEP:
    ODD[f"nesting-at-limit-{_label}"] = _deep_case(_label)


MM = "def mm(float(M, K) A, float(K, N) B) -> (C) {\n    C(m, n) +=! A(m, k) * B(k, n)\n}\n"
for (_m, _k, _n) in [(0, 4, 5), (3, 0, 5), (3, 4, 0), (0, 0, 0), (1, 1, 1), (1, 7, 1),
                     (7, 1, 1), (1, 1, 7)]:
    ODD[f"matmul-sizes-{_m}x{_k}x{_n}"] = _program_case(
        MM, (lambda m, kk, n: lambda: (_rand(m, kk), _rand(kk, n, seed=1)))(_m, _k, _n),
        lambda a, b: (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))

REDS = """def reds(float(N, M) A) -> (S, P, MX, MN, T) {
    S(i) +=! A(i, j)
    P(i) *=! A(i, j)
    MX(i) max=! A(i, j)
    MN(i) min=! A(i, j)
    T +=! A(i, j)
}
"""


def _reds_expected(a):
    """TC's '!' reductions start from the identity, so an empty range gives
    0, 1, -inf, +inf (numpy's max/min of nothing is an error instead)."""
    n, m = a.shape
    mx = a.max(axis=1) if m else np.full(n, -np.inf, np.float32)
    mn = a.min(axis=1) if m else np.full(n, np.inf, np.float32)
    return (a.sum(axis=1), a.prod(axis=1), mx.astype(np.float32), mn.astype(np.float32),
            np.asarray(a.sum(), dtype=np.float32))


for (_n, _m) in [(0, 3), (3, 0), (0, 0), (1, 1), (1, 5), (5, 1)]:
    ODD[f"reductions-sizes-{_n}x{_m}"] = _program_case(
        REDS, (lambda n, m: lambda: (_rand(n, m),))(_n, _m), _reds_expected)

ODD["reductions-nan-propagates"] = _program_case(
    REDS, lambda: (np.array([[1, np.nan, 3], [4, 5, 6]], np.float32),),
    lambda a: (a.sum(axis=1), a.prod(axis=1), a.max(axis=1), a.min(axis=1),
               np.asarray(a.sum(), np.float32)))

CONV = """def conv(float(N, C, H, W) I, float(F, C, KH, KW) K) -> (O) {
    O(n, f, h, w) +=! I(n, c, h + kh, w + kw) * K(f, c, kh, kw)
}
"""


def _conv_ref(i, k):
    n, c, h, w = i.shape
    f, _, kh, kw = k.shape
    oh, ow = max(h - kh + 1, 0), max(w - kw + 1, 0)
    o = np.zeros((n, f, oh, ow), np.float64)
    for y in range(oh):
        for x in range(ow):
            o[:, :, y, x] = np.einsum("ncij,fcij->nf", i[:, :, y:y + kh, x:x + kw], k)
    return o.astype(np.float32)


for _label, (_ishape, _kshape) in {
        "kernel-as-large-as-image": ((1, 2, 3, 3), (2, 2, 3, 3)),
        "kernel-larger-than-image": ((1, 2, 2, 2), (2, 2, 3, 3)),
        "empty-kernel": ((1, 2, 3, 3), (2, 2, 0, 0)),
        "ones": ((1, 1, 1, 1), (1, 1, 1, 1)),
        "zero-batch": ((0, 2, 4, 4), (3, 2, 2, 2)),
        "zero-channels": ((2, 0, 4, 4), (3, 0, 2, 2))}.items():
    ODD[f"conv-{_label}"] = _program_case(
        CONV, (lambda a, b: lambda: (_rand(*a), _rand(*b, seed=2)))(_ishape, _kshape), _conv_ref)

GATHER = """def gather(float(V, D) LUT, int32(B, L) I) -> (O) {
    O(b, d) +=! LUT(I(b, l), d)
}
"""
for _label, (_v, _d, _b, _l) in {"empty-bag": (4, 3, 2, 0), "no-rows": (4, 3, 0, 2),
                                 "one": (1, 1, 1, 1), "zero-width": (4, 0, 2, 3)}.items():
    ODD[f"gather-{_label}"] = _program_case(
        GATHER, (lambda v, d, b, l: lambda: (
            _rand(v, d), np.random.default_rng(3).integers(0, v, (b, l)).astype(np.int32)))(
            _v, _d, _b, _l),
        lambda lut, idx: lut[idx].sum(axis=1, dtype=np.float32).reshape(idx.shape[0], lut.shape[1]))

ODD["empty-where-range-reduction"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) +=! A(i) * A(k) where k in 3:1\n}\n",
    lambda: (_rand(4),), lambda a: np.zeros(4, np.float32))
ODD["empty-where-range-output"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = A(0) where i in 0:0\n}\n",
    lambda: (_rand(4),), lambda a: np.zeros(0, np.float32))
ODD["negative-where-range-output"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = A(i) where i in 0:N - 5\n}\n",
    lambda: (_rand(3),), lambda a: np.zeros(0, np.float32))
ODD["valid-convolution-of-short-input"] = _program_case(
    "def f(float(N) A, float(K) W) -> (B) {\n    B(i) +=! A(i + k) * W(k)\n}\n",
    lambda: (_rand(2), _rand(5, seed=1)), lambda a, w: np.zeros(0, np.float32))
ODD["declared-output-larger-than-written-is-zero-filled"] = _program_case(
    "def f(float(N) A) -> (float(N) B) {\n    B(i) = A(i) + 1 where i in 0:N - 1\n}\n",
    lambda: (_rand(5),), lambda a: np.concatenate([a[:-1] + np.float32(1),
                                                   np.zeros(1, np.float32)]))
ODD["huge-empty-reduction-range-returns"] = _program_case(
    "def f(float(N) A, int64 S) -> (B) {\n    B(i) +=! A(i + k) where k in 0:S\n}\n",
    lambda: (_rand(3), 2 ** 62), lambda a, s: np.zeros(0, np.float32))
ODD["assign-bang-is-logical-not"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) =! A(i)\n}\n",
    lambda: (np.array([0, 1, -2, 0.5], np.float32),),
    lambda a: np.array([1, 0, 0, 0], np.float32))
ODD["double-negation"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = - - -A(i)\n}\n",
    lambda: (_rand(4),), lambda a: -a)
ODD["no-whitespace-at-all"] = _program_case(
    "def f(float(N)A,float(N)C)->(B){B(i)=A(i)*C(i)+1.5e0}",
    lambda: (_rand(4), _rand(4, seed=1)), lambda a, c: a * c + np.float32(1.5))
ODD["comments-tabs-crlf-form-feed"] = _program_case(
    "# sizes: N=4\r\n\tdef f(float(N) A)\t# args\r\n  ->\r\n (B)\x0c{ # body\r\n"
    "\tB(i)\t=\tA(i)\t*\t2 # twice\r\n}\r\n",
    lambda: (_rand(4),), lambda a: a * np.float32(2))
ODD["leading-zeros-that-agree-with-octal"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = A(i) * 007 + 00\n}\n",
    lambda: (_rand(4),), lambda a: a * np.float32(7))
ODD["float-literal-underflows-to-zero"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = A(i) + 1e-50\n}\n",
    lambda: (_rand(4),), lambda a: a)
ODD["float-literal-at-float32-max"] = _program_case(
    "def f(float(N) A) -> (B) {\n    B(i) = A(i) * 0 + 3.4028234e38\n}\n",
    lambda: (_rand(2),), lambda a: np.full(2, 3.4028234e38, np.float32))
ODD["int32-literal-limits"] = _program_case(
    "def f(int32(N) A) -> (B, C) {\n    B(i) = A(i) * 0 + 2147483647\n"
    "    C(i) = A(i) * 0 + -2147483648\n}\n",
    lambda: (np.arange(3, dtype=np.int32),),
    lambda a: (np.full(3, 2147483647, np.int32), np.full(3, -2147483648, np.int32)))
ODD["int64-literal-limits"] = _program_case(
    "def f(int64(N) A) -> (B, C) {\n    B(i) = A(i) * 0 + 9223372036854775807\n"
    "    C(i) = A(i) * 0 + -9223372036854775807 - 1\n}\n",
    lambda: (np.arange(3, dtype=np.int64),),
    lambda a: (np.full(3, 2 ** 63 - 1, np.int64), np.full(3, -2 ** 63, np.int64)))
ODD["big-literal-in-double-statement"] = _program_case(
    "def f(float(N) A) -> (double B) {\n    B(i) = A(i) + 1e300\n}\n",
    lambda: (_rand(3),), lambda a: a.astype(np.float64) + 1e300)
ODD["several-defs-keyword-names"] = lambda: _several_defs()


def _several_defs():
    ks = polyc.compile("def for(float(N) while) -> (if) {\n    if(i) = while(i) + 1\n}\n"
                       "def return(float(N) for) -> (class) {\n    class(i) = for(i) * 2\n}\n")
    a = _rand(3)
    r1 = _check(ks["for"](a), a + np.float32(1))
    return r1 if not r1["match"] else _check(ks["return"](a), a * np.float32(2))


#: Cases that fail because of a bug outside this corpus's files: id -> reason
#: (strict xfail, so a fix shows up).  Empty now.
KNOWN_BUGS: dict[str, str] = {}
# a tensor named like the C emitter's extent variable of another tensor
ODD["name-collides-with-extent-variable"] = _program_case(
    "def f(float(N, M) A, float(N) A_d1) -> (B) {\n    B(i, j) = A(i, j) + A_d1(i)\n}\n",
    lambda: (_rand(3, 4), _rand(3, seed=1)), lambda a, b: a + b[:, None])

CASES = ODD          # what the worker runs


@pytest.fixture(scope="module")
def odd_results(request):
    ids = H.selected_ids(request, "case_id") or list(ODD)
    return H.run_batch(__file__, ids)


@pytest.mark.parametrize("case_id", [
    pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN_BUGS[c], strict=True))
    if c in KNOWN_BUGS else c for c in ODD])
def test_valid_odd_program(case_id, odd_results):
    H.expect_ok(odd_results[case_id])


def test_counts():
    """The corpus holds at least 200 hostile programs (the mutants of
    test_corpus_mutants.py come on top)."""
    assert len(RECORDS) + len(GENERATED) >= 200, (len(RECORDS), len(GENERATED))
    assert len(ODD) >= 50
