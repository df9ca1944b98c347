"""Syntax errors at every grammar position, generated: valid TC programs
with one token deleted, duplicated, replaced, preceded by a stray ``@``, or
the text cut just before it.

Each mutant is parsed and lowered (no C compiler: these test the frontend).
Whatever it is, the outcome is either a valid program or a polyc error with
a location, never a bare exception or a hang, and:

* a ParseError points at the mutation or after it (the text before it is a
  valid prefix), or, when it found the end of the input, just after the last
  token; its excerpt is the source line with the caret at the column;
* a stray ``@`` is reported exactly where it is, as an unexpected character;
* a program cut short is reported at its end, as an unexpected end of input;
* SemanticError and UnsupportedError carry a location too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402

from polyc.errors import ParseError, PolycError, SemanticError  # noqa: E402
from polyc.frontend import tc  # noqa: E402
from polyc.frontend.tc.parser import _lark  # noqa: E402

SEEDS = {
    "mm": """def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
""",
    "ops": """def ops(float(N) A, double(N) D, int64 S) -> (X, Y) {
    X(i) = A(i) > 0 && !(A(i) == 1.5) ? -A(i) / 2 : exp(A(i)) % 3
    Y(i) max=! D(i + j) + A.0 * S where j in 0:4, i in 0:N - 4
}
""",
    "gather": """# sizes: V=10 D=4
def gather(float(V, D) LUT, int32(B, L) I, float c) -> (O, S) {
    O(b, d) +=! LUT(I(b, l), d) * c   # a comment
    S +=! O(b, d) where exists LUT(0, d)
}
def second(double(N, M) A) -> (double(N) R) {
    R(i) min=! A(i, j) || A(i, j) <= -1e-3
}
""",
}

#: Replacement tokens (surrounded by spaces): a keyword that ends expressions.
REPLACEMENTS = ("where",)


def tokens(src: str):
    """The tokens the parser consumes, in order (lark's contextual lexer)."""
    return list(_lark().parse_interactive(src).iter_parse())


def _mutants():
    out = []
    for seed, src in SEEDS.items():
        for k, t in enumerate(tokens(src)):
            a, b = t.start_pos, t.end_pos
            at = (t.line, t.column)
            out.append((f"{seed}-delete-{k}", src[:a] + " " + src[b:], "delete", at))
            out.append((f"{seed}-duplicate-{k}", src[:b] + " " + str(t) + src[b:], "dup", at))
            out.append((f"{seed}-cut-before-{k}", src[:a], "cut", at))
            out.append((f"{seed}-stray-at-{k}", src[:a] + "@" + src[a:], "at", at))
            for r in REPLACEMENTS:
                if r != str(t):
                    out.append((f"{seed}-replace-{k}-by-{r}", src[:a] + " " + r + " " + src[b:],
                                "replace", at))
    return out


MUTANTS = _mutants()


def _end_of_code(src: str) -> tuple[int, int]:
    """Line and column just after the last character that is not blank or
    in a comment (where an unexpected end of input is reported)."""
    lines = src.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        code = lines[i].split("#", 1)[0].rstrip()
        if code:
            return i + 1, len(code) + 1
    return 1, 1


def _lower_all(src: str) -> None:
    module = tc.parse(src)
    for d in module.defs:
        tc.lower(d, {n: 2 for n in tc.needs_specialization(d)})


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant(mutant):
    _, src, kind, at = mutant
    outcome = H.capture(lambda: _lower_all(src), timeout=20)
    if outcome["status"] == "ok":
        assert kind != "at", "a stray '@' was accepted"
        code = "\n".join(ln.split("#", 1)[0] for ln in src.split("\n")).strip()
        assert kind != "cut" or not code or code.endswith("}"), \
            "a program cut short was accepted"
        return
    H.expect_error(outcome, "PolycError")
    mro, msg = outcome["mro"], outcome["message"]
    if "ParseError" in mro:
        line, col = outcome["line"], outcome["column"]
        lines = src.split("\n")
        first = outcome["excerpt"].split("\n")
        assert first[0] == lines[line - 1].rstrip("\r"), (first, lines[line - 1])
        assert first[1].index("^") + 1 == col, outcome["excerpt"]
    if mro[0] == "ParseError":
        if "found the end of the input" in msg:
            assert (line, col) == _end_of_code(src), msg
        else:
            assert (line, col) >= at, \
                f"reported at {line}:{col}, before the mutation at {at}: {msg}"
        if kind == "at":
            assert (line, col) == at and "unexpected character '@'" in msg, msg
        if kind == "cut":
            assert "found the end of the input" in msg, msg
    elif "UnsupportedError" in mro:
        assert msg.startswith("<tc>:"), f"no location: {msg}"
    else:
        assert "SemanticError" in mro, msg


def test_mutant_count():
    """Every seed is valid and the mutants are many: at least one per token
    and kind."""
    for src in SEEDS.values():
        _lower_all(src)
    assert len(MUTANTS) >= 1000


def test_error_types_are_what_the_corpus_says():
    """ParseError and SemanticError carry locations; SemanticError is a
    ParseError (so ``except ParseError`` catches both)."""
    assert issubclass(SemanticError, ParseError) and issubclass(ParseError, PolycError)
