"""Parsing machine-written TC a statement at a time, each distinct statement once.

polyc's graph layer (:mod:`polyc.graph.lower`) writes every fusion group
as one TC definition: the signature on the first line, one statement per
line, the closing brace alone.  The fusion planner lowers many groups that
share most of their statements (each candidate merge adds a few operations
to a group lowered before), and lark's LALR parser, in Python, costs about
as much as the rest of the lowering: an index ``i0`` alone climbs eight
precedence rules.  :func:`parse_lines` parses such a text with the same
grammar and the same checks as :func:`.parser.parse`, but each statement
line separately (a parser of the same grammar whose start symbol is
``statement``), memoised by its text and
moved to its line; the signature is parsed with an empty body.  The result
equals :func:`.parser.parse`'s, spans included.

Any text of another layout, and any line that does not parse on its own,
goes through :func:`.parser.parse` whole, so errors are reported exactly as
for user TC (line, column, excerpt).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import replace

from lark import Lark

from ..source import Span
from . import parser
from . import syntax as S

#: statements kept (a fusion plan of a few hundred operations reuses a few
#: thousand); least recently used first out
CACHE_SIZE = 8192

_statements: OrderedDict[tuple[str, str], S.Statement] = OrderedDict()
_headers: OrderedDict[tuple[str, str], S.Def] = OrderedDict()
#: the statements moved to their line (a group lowered again with a few
#: more operations keeps most of its lines where they were)
_placed: OrderedDict[tuple[str, str, int], S.Statement] = OrderedDict()


def _remember(cache: OrderedDict, key, make):
    value = cache.get(key)
    if value is None:
        value = cache[key] = make()
        if len(cache) > CACHE_SIZE:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return value


def _shift(obj, lines: int):
    """``obj`` (a syntax node, a span, or a tuple of them) moved down
    ``lines``.  The syntax nodes are frozen dataclasses without
    ``__post_init__``: a copy is their fields, set as ``__init__`` would."""
    kind = type(obj)
    if kind is Span:
        return Span(obj.line + lines, obj.column, obj.end_line + lines, obj.end_column,
                    obj.filename)
    if kind is tuple:
        return tuple(_shift(x, lines) for x in obj)
    names = getattr(kind, "__dataclass_fields__", None)
    if names is None:
        return obj
    new = object.__new__(kind)
    for name in names:
        object.__setattr__(new, name, _shift(getattr(obj, name), lines))
    return new


@functools.lru_cache(maxsize=1)
def _statement_parser() -> Lark:
    """:func:`.parser._lark` with the start symbol ``statement``."""
    return parser.cached_lark("statement")


def _statement(line: str, filename: str) -> S.Statement:
    tree = _statement_parser().parse(line)
    parser._check_depth(tree, line, filename)
    return parser._ToSyntax(filename, line).transform(tree)


def parse_lines(text: str, filename: str = "<tc>") -> S.Module:
    """:func:`.parser.parse` of a one-definition text laid out one statement
    per line (signature line ending in ``{``, a closing ``}`` line), with
    each statement parsed once per process; other texts are parsed whole.
    Same result and same errors as :func:`.parser.parse`."""
    lines = text.split("\n")
    try:
        close = lines.index("}")
    except ValueError:
        return parser.parse(text, filename)
    head = lines[0]
    if not head.startswith("def ") or not head.endswith("{") or any(
            x.strip() for x in lines[close + 1:]) or close < 1:
        return parser.parse(text, filename)
    try:
        empty = _remember(_headers, (filename, head),
                          lambda: parser.parse(head + "}", filename).defs[0])
        stmts = tuple(_remember(_placed, (filename, line, k), lambda: _shift(
            _remember(_statements, (filename, line), lambda: _statement(line, filename)), k))
            for k, line in enumerate(lines[1:close], 1))
    except Exception:            # noqa: BLE001 - the whole parse reports it, or succeeds
        return parser.parse(text, filename)
    span = Span(1, 1, close + 1, 2, filename)
    return S.Module((replace(empty, statements=stmts, span=span, source=text),), filename, text)
