"""TC text -> :class:`~.syntax.Module`.

Owns the lark LALR parser built from ``grammar.lark``, the translation of the
lark parse tree into the frozen syntax tree of :mod:`.syntax`, and the
translation of lark's exceptions into :class:`~polyc.errors.ParseError` with
a readable message (``expected ')' but found 'where'``), line, column and a
caret excerpt.  No lark exception escapes :func:`parse`.  Also reads the
``# sizes: M=128 K=1024`` header (:func:`sizes_header`).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from ...errors import ParseError, SemanticError
from ..source import Span, excerpt, point
from . import syntax as S

_GRAMMAR = Path(__file__).with_name("grammar.lark")


#: Longest identifier accepted (the C backend prefixes names and refuses
#: longer ones; a located error here is better than one from code generation).
MAX_NAME_LENGTH = 200
#: Deepest nesting of expression nodes (operators, calls, reads, selects)
#: accepted; every later stage walks expressions recursively.
MAX_EXPR_DEPTH = 128
#: Integer literals are 64-bit in generated code (indices and values).
INT64_MAX = 2 ** 63 - 1


class _TokenError(Exception):
    """Raised from the token stream: ``token`` is the culprit."""

    def __init__(self, token: Token, message: str):
        super().__init__(message)
        self.token, self.message = token, message


class _AcceptNames:
    """The post-lexer.  ``always_accept``: every state of the contextual
    lexer also tries NAME, so a keyword (``def``, ``float``, ``in``) is
    recognised only as a whole word and ``floaty`` is reported as an
    unexpected name instead of ``float`` followed by ``y``.  It also refuses
    tokens that lex but cannot mean anything: identifiers longer than
    :data:`MAX_NAME_LENGTH`, numbers glued to a following name or number
    (``0x10``, ``1.5f``, ``2i``), integers beyond 64 bits, floats that
    overflow a double (``1e400``) and integers with a leading zero that C
    would read as octal (``010``)."""
    always_accept = ("NAME",)

    def process(self, stream):
        prev = None
        for tok in stream:
            if tok.type == "NAME" and len(tok) > MAX_NAME_LENGTH:
                raise _TokenError(tok, f"identifier '{tok[:20]}...' is {len(tok)} characters "
                                  f"long; polyc accepts names of at most {MAX_NAME_LENGTH}")
            if (prev is not None and prev.type == "NUMBER" and tok.line == prev.end_line
                    and tok.column == prev.end_column and tok[:1] and
                    (tok[0].isalnum() or tok[0] in "_.")):
                glued = Token("NUMBER", prev + tok, prev.start_pos, prev.line, prev.column,
                              tok.end_line, tok.end_column, tok.end_pos)
                raise _TokenError(glued, f"malformed number '{glued}': a number must not be "
                                  "followed directly by letters, digits or a dot (polyc "
                                  "reads decimal literals such as 12, 1.5, 1e-3; no "
                                  "suffixes, no hexadecimal)")
            if tok.type == "NUMBER":
                _check_number(tok)
            yield tok
            prev = tok


def _check_number(tok: Token) -> None:
    text = str(tok)
    if text.isdigit():
        if int(text) > INT64_MAX:
            raise _TokenError(tok, f"integer literal {text} does not fit in 64 bits (the "
                              f"largest is {INT64_MAX}; for the smallest write "
                              f"-{INT64_MAX} - 1)")
        if len(text) > 1 and text[0] == "0" and (
                any(c in "89" for c in text) or int(text, 8) != int(text)):
            raise _TokenError(tok, f"integer literal '{text}' has a leading zero: C would "
                              "read it as octal, polyc as decimal; write it without the "
                              "leading zero")
    elif float(text) == float("inf"):
        raise _TokenError(tok, f"floating-point literal {text} is out of range: it "
                          "overflows a double (largest about 1.8e308)")


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return cached_lark("start")


def _build_lark(start: str) -> Lark:
    return Lark(_GRAMMAR.read_text(), parser="lalr", lexer="contextual", start=start,
                propagate_positions=True, maybe_placeholders=True,
                postlex=_AcceptNames())


def cached_lark(start: str) -> Lark:
    """The LALR parser of the TC grammar with start symbol ``start``.  lark's
    analysis of the grammar (0.13 s, at the first parse of every process)
    is kept in polyc's cache directory with ``Lark.save`` and read back with
    ``Lark.load`` (0.01 s), keyed by the grammar, the start symbol, lark's
    and Python's versions; an entry that does not load is rebuilt
    (:func:`polyc.cache.get_or_build`).  Without a disk cache
    (``POLYC_NO_DISK_CACHE=1``) or a usable cache directory, lark builds it
    in memory."""
    import hashlib
    import sys

    from ...cache import get_or_build
    from ...config import Config
    from ...errors import PolycError
    ident = f"{lark.__version__}|{sys.version_info[:2]}|{start}|{_GRAMMAR.read_text()}"
    key = "tcgrammar-" + hashlib.sha256(ident.encode()).hexdigest()[:32]

    def build(directory: Path, out: Path) -> dict:
        with open(out, "wb") as f:
            _build_lark(start).save(f)
        return {}

    def load(path: Path, meta: dict) -> Lark:
        try:
            with open(path, "rb") as f:
                parser = Lark.load(f)
        except Exception as e:  # noqa: BLE001 - a damaged entry: the cache rebuilds it
            raise OSError(f"lark cannot load it: {type(e).__name__}: {e}") from e
        if parser.options.start != [start]:
            raise OSError(f"it parses from {parser.options.start}, not {start!r}")
        return parser

    config = Config.from_env()
    if not config.disk_cache:
        return _build_lark(start)
    try:
        return get_or_build(key, directory=config.resolved_cache_dir(), suffix=".lark",
                            build=build, load=load)
    except (OSError, PolycError):
        return _build_lark(start)


def parse(text: str, filename: str = "<tc>") -> S.Module:
    """Parse TC source ``text`` into a :class:`~.syntax.Module`.

    Raises :class:`~polyc.errors.ParseError` for a syntax error and
    :class:`~polyc.errors.SemanticError` for two definitions with one name.
    A source without definitions is an empty module
    (:func:`require_definitions` refuses it).
    """
    if not isinstance(text, str):
        raise ParseError(f"TC source must be a str, got {type(text).__name__}",
                         filename=filename)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as err:
        raise _translate(err, text, filename) from None
    except _TokenError as err:
        raise _error(ParseError, text, _token_span(err.token, filename), err.message) from None
    except lark.exceptions.LarkError as err:  # pragma: no cover - defensive
        raise ParseError(f"cannot parse: {err}", filename=filename) from None
    _check_depth(tree, text, filename)
    try:
        defs = _ToSyntax(filename, text).transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, ParseError):
            raise err.orig_exc from None
        raise  # pragma: no cover - internal error
    seen: dict[str, S.Def] = {}
    for d in defs:
        if d.name in seen:
            first = seen[d.name].name_span
            raise _error(SemanticError, text, d.name_span,
                         f"duplicate definition of '{d.name}' (first defined at line "
                         f"{first.line}, column {first.column}); rename one of them")
        seen[d.name] = d
    return S.Module(tuple(defs), filename, text)


#: How a definition looks, for messages about a source that holds none.
DEF_EXAMPLE = "def f(float(N) A) -> (B) { B(i) = A(i) }"


def require_definitions(module: S.Module) -> S.Module:
    """``module`` when it holds a definition.  The grammar accepts a source
    without one (empty, only blanks or ``#`` comments), and :func:`parse`
    returns it as an empty module; what compiles a source calls this to
    refuse it.  Raises :class:`~polyc.errors.ParseError` (no line or column:
    nothing in the source is the culprit) naming the file and showing how a
    definition looks."""
    if module.defs:
        return module
    what = "the source" if module.filename == "<tc>" else module.filename
    raise ParseError(f"{what} holds no TC definition (def NAME(...) -> (...) {{ ... }}); "
                     f"write one, e.g. {DEF_EXAMPLE}", filename=module.filename)


_EXPR_RULES = frozenset({"binary", "unary", "ternary", "apply", "cast", "dim_of"})


def _check_depth(tree: lark.Tree, text: str, filename: str) -> None:
    """Refuse expressions nested deeper than :data:`MAX_EXPR_DEPTH` (long
    chains such as a sum of hundreds of terms are nested too: ``a + b + c``
    is ``(a + b) + c``).  Iterative, so it cannot itself overflow the stack."""
    stack: list = [(tree, 0, None)]
    while stack:
        node, depth, root = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if node.data in _EXPR_RULES:
            depth += 1
            root = root or node
            if depth > MAX_EXPR_DEPTH:
                meta = root.meta
                span = Span(meta.line, meta.column, meta.end_line, meta.end_column, filename)
                raise _error(ParseError, text, span,
                             f"expression nested too deeply (more than {MAX_EXPR_DEPTH} "
                             "levels of operators, calls or reads); split it into several "
                             "statements")
        stack.extend((c, depth, root) for c in node.children)


def sizes_header(text: str, filename: str = "<tc>") -> dict[str, int]:
    """Default sizes from lines ``# sizes: M=128 K=1024`` (entries separated
    by spaces or commas; several such lines merge, later ones win).  Returns
    ``{}`` when there is none; a malformed entry is a ParseError located in
    ``filename``."""
    sizes: dict[str, int] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*#\s*sizes\s*:(.*)$", line)
        if not m:
            continue
        body_col = m.start(1) + 1
        for item in re.finditer(r"[^\s,]+", m.group(1)):
            km = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=([0-9]+)", item.group(0))
            if not km:
                span = Span(lineno, body_col + item.start(), lineno,
                            body_col + item.end(), filename)
                raise _error(ParseError, text, span,
                             f"malformed size '{item.group(0)}' in the sizes header; "
                             "write NAME=INTEGER, e.g. '# sizes: M=128 K=64'")
            sizes[km.group(1)] = int(km.group(2))
    return sizes


# ------------------------------------------------------------------ errors
def _error(cls, text: str, span: Span, message: str) -> ParseError:
    return cls(message, line=span.line, column=span.column,
               excerpt=excerpt(text, span), filename=span.filename)


_WORDS = {
    "NAME": "a name", "NUMBER": "a number", "$END": "the end of the input",
    "ASSIGN_OP": "an assignment operator (=, +=, +=!, max=!, ...)",
}
_EXPR_START = {"NAME", "NUMBER", "LPAR", "MINUS", "BANG", "TILDE"}
_OPERATORS = {"OR", "AND", "CMP_OP", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "QMARK",
              "PIPE", "CARET", "AMP", "SHIFT_OP"}
_TYPE_WORDS = frozenset({"float", "double", "half", "float16", "bfloat16", "float32",
                         "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                         "uint32", "uint64", "byte", "bool"})
_TYPES = {"FLOAT", "DOUBLE", "HALF", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64", "INT8", "INT16",
          "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BYTE", "BOOL"}


def _describe_terminal(name: str) -> str:
    if name in _WORDS:
        return _WORDS[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:  # pragma: no cover - defensive
        return name
    if pattern.type == "str":
        return f"'{pattern.value}'"
    return name.lower()


def describe_expected(expected: set[str]) -> str:
    """A readable list of what the parser would have accepted."""
    names = set(expected)
    words: list[str] = []
    if {"NAME", "NUMBER", "LPAR"} <= names:
        names -= _EXPR_START | _TYPES
        words.append("an expression")
    if len(names & _OPERATORS) >= 3:
        names -= _OPERATORS
        words.append("an operator")
    if len(names & _TYPES) >= 3:
        names -= _TYPES
        words.append("a type (float, double, int32, int64, ...)")
    words += sorted(_describe_terminal(n) for n in names)
    if not words:
        return "something else"
    if len(words) == 1:
        return words[0]
    if len(words) == 2:
        return f"{words[0]} or {words[1]}"
    return "one of " + ", ".join(words)


def _end_position(text: str, filename: str) -> Span:
    """Just after the last character that is not whitespace or a comment."""
    lines = text.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        code = lines[i].split("#", 1)[0].rstrip()
        if code:
            return point(i + 1, len(code) + 1, filename)
    return point(1, 1, filename)


def _translate(err: UnexpectedInput, text: str, filename: str) -> ParseError:
    if isinstance(err, UnexpectedToken):
        tok = err.token
        expected = describe_expected(_acceptable(err))
        if tok.type == "$END":
            span = _end_position(text, filename)
            return _error(ParseError, text, span,
                          f"expected {expected} but found the end of the input")
        last = _last_token(err)
        if (last is not None and last.type == "NUMBER" and tok.line == last.end_line
                and tok.column == last.end_column and tok[:1]
                and (tok[0].isalnum() or tok[0] in "_.")):
            glued = Token("NUMBER", last + tok, last.start_pos, last.line, last.column,
                          tok.end_line, tok.end_column, tok.end_pos)
            return _error(ParseError, text, _token_span(glued, filename),
                          f"malformed number '{glued}': a number must not be followed "
                          "directly by letters, digits or a dot")
        span = _token_span(tok, filename)
        message = f"expected {expected} but found '{tok}'"
        if last is not None and last.type in _TYPES:
            message += f" ('{last}' is a type name and cannot be used as a name)"
        elif _TEMPLATE.match(text, tok.start_pos or 0):
            message += (" ('<name>' and '${name}' are placeholders that TC's Python API and "
                        "C++ library replace before parsing; write the number, or a size "
                        "argument such as 'int64 S' with fixed_sizes)")
        return _error(ParseError, text, span, message)
    if isinstance(err, UnexpectedCharacters):
        span = point(err.line, err.column, filename)
        char = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        hint = ""
        if _TEMPLATE.match(text, err.pos_in_stream):
            hint = (" ('${name}' is a placeholder that TC's C++ library replaces before "
                    "parsing; write the number)")
        return _error(ParseError, text, span, f"unexpected character {_show_char(char)}{hint}")
    span = _end_position(text, filename)  # UnexpectedEOF (not raised by LALR)
    return _error(ParseError, text, span, "unexpected end of the input")


#: a template placeholder of TC's tooling: ``<sh>`` (Python API), ``${sh}`` (C++)
_TEMPLATE = re.compile(r"<\s*[A-Za-z_]\w*\s*>|\$\{\s*[A-Za-z_]\w*\s*\}")


def _last_token(err: UnexpectedToken) -> Token | None:
    """The token shifted just before the unexpected one, if it is a token."""
    try:
        last = err.state.value_stack[-1]
    except (AttributeError, IndexError):
        return None
    return last if isinstance(last, Token) else None


def _show_char(char: str) -> str:
    """A character for a message: quoted when visible ASCII, else with its
    code point (NUL, a byte-order mark, a no-break space, a tab...)."""
    if not char:
        return "(end of input)"
    code = f"U+{ord(char):04X}"
    if char.isascii() and char.isprintable() and not char.isspace():
        return f"'{char}'"
    if char.isascii() or not char.isprintable() or char.isspace():
        return f"{char!r} ({code}, an invisible or control character)"
    if char.isalpha() or char.isdigit():
        return (f"'{char}' ({code}): names and numbers are ASCII only (letters, digits "
                "0-9 and '_')")
    return f"'{char}' ({code}, not ASCII)"


def _acceptable(err: UnexpectedToken) -> set[str]:
    """The terminals the parser state accepts.  ``err.expected`` is the
    lexer's view when the contextual lexer failed, which includes the
    always-accepted NAME; the parse table is the truth."""
    state = getattr(err, "state", None)
    try:
        names = set(state.parse_conf.states[state.position])
    except AttributeError:  # pragma: no cover - older lark
        return set(err.expected)
    terminals = {t.name for t in _lark().terminals} | {"$END"}
    return names & terminals  # the table also holds goto entries of rules


def _token_span(tok: Token, filename: str) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column, filename)


# ------------------------------------------------------------ tree -> syntax
@v_args(meta=True)
class _ToSyntax(Transformer):
    """lark tree -> :mod:`.syntax` nodes (bottom-up)."""

    def __init__(self, filename: str, text: str):
        super().__init__()
        self.filename, self.text = filename, text

    def _span(self, meta) -> Span:
        return Span(meta.line, meta.column, meta.end_line, meta.end_column, self.filename)

    def _tok(self, tok: Token) -> Span:
        return _token_span(tok, self.filename)

    def _int(self, tok: Token, what: str) -> int:
        if not tok.isdigit():
            raise _error(ParseError, self.text, self._tok(tok),
                         f"{what} must be a non-negative integer, got '{tok}'")
        return int(tok)

    # signature
    def start(self, meta, defs):
        return list(defs)

    def definition(self, meta, ch):
        name, *rest = ch
        stmts = [c for c in rest if isinstance(c, S.Statement)]
        outputs = next(c for c in rest if isinstance(c, tuple))
        params = [c for c in rest if isinstance(c, S.Param)]
        return S.Def(str(name), tuple(params), outputs, tuple(stmts), self._span(meta),
                     self._tok(name), self.text)

    def _not_a_type(self, tok: Token, what: str) -> None:
        """Type names lex as names in a declaration but would read as casts
        in an expression: refuse them where they are declared."""
        if str(tok) in _TYPE_WORDS:
            raise _error(ParseError, self.text, self._tok(tok),
                         f"'{tok}' is a type name and cannot name {what}; rename it")

    def param(self, meta, ch):
        typ, name = ch
        self._not_a_type(name, "an argument")
        return S.Param(typ, str(name), self._span(meta), self._tok(name))

    def returns(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    def output(self, meta, ch):
        typ, name = (None, ch[0]) if len(ch) == 1 else ch
        self._not_a_type(name, "an output")
        return S.Output(str(name), typ, self._span(meta), self._tok(name))

    def type(self, meta, ch):
        scalar, dims = ch
        return S.TensorType(scalar, tuple(dims or ()), self._span(meta))

    def dims(self, meta, ch):
        return [c for c in ch if c is not None]

    def size_name(self, meta, ch):
        self._not_a_type(ch[0], "a size")
        return S.SizeName(str(ch[0]), self._tok(ch[0]))

    def size_const(self, meta, ch):
        return S.SizeConst(self._int(ch[0], "a size"), self._tok(ch[0]))

    def scalar_type(self, meta, ch):
        return str(ch[0])

    # statements
    def statement(self, meta, ch):
        name, lhs, op, rhs, equivalent, where = ch
        name_span = self._tok(name)
        lhs_span = name_span if lhs is None else name_span.cover(lhs[1])
        indices = () if lhs is None else lhs[0]
        return S.Statement(str(name), indices, str(op), rhs, tuple(where or ()),
                           self._span(meta), lhs_span, self._tok(op), equivalent)

    def equivalent(self, meta, ch):
        _, name, *args = ch
        return S.Apply(str(name), tuple(a for a in args if a is not None),
                       self._span(meta), self._tok(name))

    def let_binding(self, meta, ch):
        var, op, value = ch
        if str(op) != "=":
            raise _error(ParseError, self.text, self._tok(op), f"expected '=' or 'in' after "
                         f"'{var}' in a where clause, found '{op}'")
        return S.Let(str(var), value, self._span(meta), self._tok(var))

    def lhs(self, meta, ch):
        return tuple(c for c in ch if c is not None), self._span(meta)

    def where(self, meta, ch):
        return list(ch)

    def range_constraint(self, meta, ch):
        var, lo, hi = ch
        return S.RangeConstraint(str(var), lo, hi, self._span(meta), self._tok(var))

    def exists(self, meta, ch):
        return S.Exists(ch[0], self._span(meta))

    # expressions
    def number(self, meta, ch):
        text = str(ch[0])
        value = int(text) if text.isdigit() else float(text)
        return S.Number(text, value, self._span(meta))

    def name(self, meta, ch):
        return S.Name(str(ch[0]), self._span(meta))

    def apply(self, meta, ch):
        name, *args = ch
        return S.Apply(str(name), tuple(a for a in args if a is not None),
                       self._span(meta), self._tok(name))

    def dim_of(self, meta, ch):
        name, dim = ch
        return S.DimOf(str(name), self._int(dim, "a dimension number"), self._span(meta))

    def cast(self, meta, ch):
        typ, operand = ch
        return S.Cast(typ, operand, self._span(meta))

    def unary(self, meta, ch):
        op, operand = ch
        return S.Unary(str(op), operand, self._span(meta))

    def binary(self, meta, ch):
        lhs, op, rhs = ch
        return S.Binary(str(op), lhs, rhs, self._span(meta))

    def ternary(self, meta, ch):
        cond, then, otherwise = ch
        return S.Ternary(cond, then, otherwise, self._span(meta))
