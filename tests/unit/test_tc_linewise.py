"""frontend/tc/linewise.py: machine-written TC parsed a statement at a time
gives exactly the syntax tree of a whole parse (spans included), parses each
distinct statement once, and reports errors as the whole parse does."""

from __future__ import annotations

import numpy as np
import pytest

from polyc.errors import ParseError
from polyc.frontend.tc import linewise, parser
from polyc.graph import trace
from polyc.graph.feedback import kept
from polyc.graph.lower import group_source


def _block(x, w, b, g):
    h = np.tanh(x @ w + b)
    m = h.mean(axis=-1, keepdims=True)
    v = ((h - m) ** 2).mean(axis=-1, keepdims=True)
    y = (h - m) / np.sqrt(v + 1e-5) * g
    return np.where(y > 0, y, 0.1 * y)[:, 1:] + x[:, :-1].sum(axis=0)


def _texts():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 9)), rng.standard_normal((9, 9))
    b, g = rng.standard_normal(9), rng.standard_normal(9)
    graph = trace(_block, x, w, b, g)
    ops = graph.ops
    for a in range(len(ops)):
        for z in range(a + 1, len(ops) + 1):
            yield group_source(graph, ops[a:z], kept(graph, ops[a:z]), "probe").text


def test_statement_at_a_time_equals_the_whole_parse():
    texts = list(_texts())
    assert len(texts) > 20
    for text in texts:
        fast = linewise.parse_lines(text, "<polyc.graph probe>")
        whole = parser.parse(text, "<polyc.graph probe>")
        assert fast == whole, text                 # spans and all
        assert fast.defs[0].source == whole.defs[0].source == text


def test_each_distinct_statement_is_parsed_once(monkeypatch):
    calls = []
    real = linewise._statement

    def counting(line, filename):
        calls.append(line)
        return real(line, filename)
    monkeypatch.setattr(linewise, "_statement", counting)
    for cache in ("_statements", "_placed", "_headers"):
        monkeypatch.setattr(linewise, cache, type(linewise._statements)())
    head = "def f(float(N) a) -> (b, c, d) {"
    lines = ["    b(i) = a(i) * 2.0 where i in 0:N", "    c(i) = b(i) + a(i)",
             "    d(i) = exp(c(i))"]
    one = linewise.parse_lines("\n".join([head, *lines[:2], "}", ""]))
    assert len(calls) == 2
    two = linewise.parse_lines("\n".join([head, *lines, "}", ""]))
    assert calls[2:] == [lines[2]]                 # only the new line
    assert two.defs[0].statements[:2] == one.defs[0].statements
    assert two.defs[0].statements[2].span.line == 4


@pytest.mark.parametrize("bad", [
    "    b(i) = a(i) +* 2.0",              # syntax error inside a line
    "    b(i) = a(i) * 010",               # a number C would read as octal
    "    b(i) = float(a(i)",               # unbalanced parenthesis
])
def test_errors_are_those_of_the_whole_parse(bad):
    text = "\n".join(["def f(float(N) a) -> (b) {", "    c(i) = a(i)", bad, "}", ""])
    with pytest.raises(ParseError) as fast:
        linewise.parse_lines(text)
    with pytest.raises(ParseError) as whole:
        parser.parse(text)
    assert str(fast.value) == str(whole.value)
    assert (fast.value.line, fast.value.column) == (whole.value.line, whole.value.column)
    assert fast.value.line >= 3


def test_other_layouts_parse_whole():
    text = ("# a comment line\ndef f(float(N) a) -> (b) {\n  b(i) = a(i)\n    * 2.0\n}\n"
            "def g(float(N) a) -> (c) { c(i) = a(i) }\n")
    assert linewise.parse_lines(text) == parser.parse(text)
    assert len(linewise.parse_lines(text).defs) == 2
