"""Source locations shared by every frontend: :class:`Span` and caret excerpts.

Owns the mapping from syntax nodes back to the user's text.  A span is 1-based
(line and column of its first character) and half-open at the end
(``end_column`` is one past its last character, as lark reports it).
:func:`excerpt` renders the line a span starts on with an underline under the
span, the way TC's ``error_report`` does::

    C(m, n) +=! A(m, kk) * B(kk, n) where
                                    ^~~~~
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A region of a source text: ``line``/``column`` of the first character
    (1-based), ``end_line``/``end_column`` one past the last character."""
    line: int
    column: int
    end_line: int
    end_column: int
    filename: str = "<tc>"

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"

    def short(self) -> str:
        """``line:col-end_line:end_col``, for dumps."""
        return f"{self.line}:{self.column}-{self.end_line}:{self.end_column}"

    def cover(self, other: Span) -> Span:
        """The smallest span containing ``self`` and ``other``."""
        start = min((self.line, self.column), (other.line, other.column))
        end = max((self.end_line, self.end_column), (other.end_line, other.end_column))
        return Span(start[0], start[1], end[0], end[1], self.filename)


def point(line: int, column: int, filename: str = "<tc>") -> Span:
    """A one-character span at ``line``/``column``."""
    return Span(line, column, line, column + 1, filename)


def _lines(text: str, keepends: bool = False) -> list[str]:
    """``text`` split at ``\n`` only, as the lexer counts lines (a form feed,
    a lone ``\r`` or U+2028 do not start a line for it).  Without
    ``keepends`` a ``\r`` before the ``\n`` is dropped too."""
    parts = text.split("\n")
    if keepends:
        return [p + "\n" for p in parts[:-1]] + parts[-1:]
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def source_line(text: str, line: int) -> str:
    """Line ``line`` (1-based) of ``text`` without its newline; ``""`` when
    out of range."""
    lines = _lines(text)
    return lines[line - 1] if 1 <= line <= len(lines) else ""


def excerpt(text: str, span: Span | None) -> str:
    """The source line where ``span`` starts, then a line with ``^`` under
    its first character and ``~`` under the rest of it (up to the end of that
    line).  Tabs before the span are kept so the caret lines up.  Returns
    ``""`` when ``text`` or ``span`` is missing or out of range."""
    if not text or span is None:
        return ""
    lines = _lines(text)
    if not 1 <= span.line <= len(lines):
        return ""
    src = lines[span.line - 1]
    col = max(span.column, 1)
    prefix = "".join(c if c == "\t" else " " for c in src[:col - 1])
    prefix += " " * max(0, col - 1 - len(src))
    if span.end_line == span.line:
        width = max(span.end_column - col, 1)
    else:
        width = max(len(src) - col + 1, 1)
    return f"{src}\n{prefix}^{'~' * (width - 1)}"


def span_text(text: str, span: Span | None) -> str:
    """The characters of ``text`` that ``span`` covers (``""`` if unknown)."""
    if not text or span is None:
        return ""
    lines = _lines(text, keepends=True)
    if not 1 <= span.line <= len(lines):
        return ""
    start = sum(len(x) for x in lines[:span.line - 1]) + span.column - 1
    end = sum(len(x) for x in lines[:span.end_line - 1]) + span.end_column - 1
    return text[start:end]


def read_source(path) -> str:
    """The text of the source file ``path`` (UTF-8).  Raises ``OSError``
    when it cannot be read and :class:`~polyc.errors.ParseError` at the line
    and column of the first byte that is not UTF-8."""
    from polyc.errors import ParseError
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ParseError(f"byte 0x{data[e.start]:02x} is not UTF-8 ({e.reason}); save the "
                         "file as UTF-8", line=line, column=column,
                         filename=str(path)) from None
