"""Reading a ``@polyc.kernel`` function without running it: its source and
``ast`` (:func:`parse_function`, :func:`parse_file`), its parameters
(:func:`check_signature`) and the kind of each argument, from a call
(:func:`arg_spec`) or from the body alone (:func:`infer_specs`, for the
command line).  :mod:`polyc.frontend.pyloops` lowers what these return."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

import numpy as np

from polyc.errors import DTypeError, UnsupportedError
from polyc.ir import C_TYPES

from .source import Span, excerpt, read_source


def is_shape_read(v: ast.AST) -> bool:
    """Whether ``v`` is ``X.shape`` or ``X.shape[k]``."""
    if isinstance(v, ast.Subscript):
        v = v.value
    return (isinstance(v, ast.Attribute) and v.attr == "shape"
            and isinstance(v.value, ast.Name))


@dataclass(frozen=True)
class ArgSpec:
    """What a call passes for one parameter: ``kind`` is ``"array"`` (with
    ``dtype`` and ``ndim``), ``"int"`` or ``"float"``.  An ``"int"`` that
    the body reads only as a value (never in a ``range``, a subscript or an
    ``if`` condition) is an int64 scalar, negative ones too; any other is a
    size (``>= 0``)."""
    kind: str
    dtype: str = ""
    ndim: int = 0


def parse_function(fn):
    """(FunctionDef, filename, first line, source lines) of ``fn``; raises
    :class:`UnsupportedError` when its source is not available."""
    try:
        src = inspect.getsource(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
        _, line0 = inspect.getsourcelines(fn)
    except (OSError, TypeError) as err:
        raise UnsupportedError(f"@polyc.kernel needs the source of {fn.__name__!r} "
                               f"({err}); define it in a file, not at an interactive "
                               "prompt or through exec") from None
    src = textwrap.dedent(src)
    tree = ast.parse(src)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise UnsupportedError(f"{filename}:{line0}: @polyc.kernel applies to a function "
                               "defined with def")
    return fdef, filename, line0, src.splitlines()


def check_signature(fdef: ast.FunctionDef, filename: str, line0: int) -> list[str]:
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise UnsupportedError(f"{filename}:{line0}: kernel {fdef.name}: parameters must be "
                               "plain names, with or without defaults (no *args, **kwargs, "
                               "keyword-only or positional-only parameters)")
    return [x.arg for x in a.args]


def arg_spec(name: str, value) -> ArgSpec:
    """The :class:`ArgSpec` of one call argument; raises ``DTypeError`` for
    an element type polyc does not compile."""
    if isinstance(value, np.ndarray):
        if value.dtype.name not in C_TYPES:
            raise DTypeError(f"argument {name}: dtype {value.dtype} is not supported; "
                             f"use one of {', '.join(C_TYPES)} "
                             f"(convert with .astype('float64'))")
        return ArgSpec("array", value.dtype.name, value.ndim)
    if isinstance(value, (bool, np.bool_)):
        raise DTypeError(f"argument {name}: a bool; pass an int size or a float")
    if isinstance(value, (int, np.integer)):
        return ArgSpec("int")
    if isinstance(value, (float, np.floating)):
        return ArgSpec("float")
    raise DTypeError(f"argument {name}: expected a numpy array, an int or a float, got "
                     f"{type(value).__name__}")


def index_names(fdef: ast.FunctionDef) -> set[str]:
    """The names read where a size or an index belongs: ``range``'s
    arguments, subscripts and ``if`` conditions."""
    out: set[str] = set()
    for node in ast.walk(fdef):
        parts: list = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range":
            parts = node.args
        elif isinstance(node, ast.Subscript):
            parts = [node.slice]
        elif isinstance(node, ast.If):
            parts = [node.test]
        for part in parts:
            out |= {n.id for n in ast.walk(part) if isinstance(n, ast.Name)}
    return out


def infer_specs(fdef: ast.FunctionDef, dtype: str = "float64") -> dict[str, ArgSpec]:
    """Argument kinds read off the body, for tools that have no call to
    look at (``polyc compile FILE.py``): a parameter that is subscripted or
    whose ``.shape`` is read is an array of ``dtype`` (rank: its number of
    subscripts, else of unpacked sizes); one used in a loop bound, subscript
    or ``if`` condition is an int size; any other is a float scalar."""
    names = [a.arg for a in fdef.args.args]
    ranks: dict[str, int] = {}
    ints = index_names(fdef)
    for node in ast.walk(fdef):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            sl = node.slice
            ranks.setdefault(node.value.id, len(sl.elts) if isinstance(sl, ast.Tuple) else 1)
    for node in ast.walk(fdef):
        if isinstance(node, ast.Assign) and is_shape_read(node.value):
            v = node.value
            if isinstance(v, ast.Attribute) and isinstance(node.targets[0], ast.Tuple):
                ranks.setdefault(v.value.id, len(node.targets[0].elts))
    # an array read only through A.shape[k] or len(A): rank k + 1 at least
    least: dict[str, int] = {}
    for node in ast.walk(fdef):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "shape" and isinstance(node.value.value, ast.Name)
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
            k = node.slice.value
            name = node.value.value.id
            least[name] = max(least.get(name, 1), k + 1 if k >= 0 else -k)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "len" and len(node.args) == 1
              and isinstance(node.args[0], ast.Name)):
            least.setdefault(node.args[0].id, 1)
    for name, rank in least.items():
        ranks.setdefault(name, rank)
    out = {}
    for n in names:
        if n in ranks:
            out[n] = ArgSpec("array", dtype, ranks[n])
        elif n in ints:
            out[n] = ArgSpec("int")
        else:
            out[n] = ArgSpec("float")
    return out


def parse_file(path: str, name: str | None):
    """(FunctionDef, filename, first line, lines) of the function ``name``
    (or the only one decorated with ``polyc.kernel``) in the Python file
    ``path``, read without running it."""
    from polyc.errors import ParseError
    text = read_source(path)
    try:
        tree = ast.parse(text, path)
    except SyntaxError as err:
        span = Span(err.lineno or 1, err.offset or 1, err.lineno or 1, (err.offset or 1) + 1,
                    path)
        raise ParseError(err.msg, line=span.line, column=span.column,
                         excerpt=excerpt(text, span), filename=path) from None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if name is None:
        decorated = [f for f in funcs if any("kernel" in ast.unparse(d)
                                              for d in f.decorator_list)]
        if not decorated:
            from polyc.errors import BindingError
            raise BindingError(f"{path} holds no @polyc.kernel function; decorate one "
                               "with @polyc.kernel, or name a function with --def NAME")
        if len(decorated) != 1:
            from polyc.errors import BindingError
            raise BindingError(f"{path} defines {len(decorated)} @polyc.kernel functions "
                               f"({', '.join(f.name for f in decorated)}); choose one "
                               "with --def NAME")
        fdef = decorated[0]
    else:
        found = [f for f in funcs if f.name == name]
        if not found:
            from polyc.errors import BindingError
            raise BindingError(f"no function {name!r} in {path}; it defines "
                               f"{', '.join(f.name for f in funcs) or 'none'}")
        fdef = found[0]
    # line numbers in the whole file: the lowering adds line0 - 1
    return fdef, path, 1, text.splitlines()


def int_scalars(fdef: ast.FunctionDef, specs: dict[str, ArgSpec]) -> set[str]:
    """The local scalars of a kernel whose every assigned value is an
    integer, as Python types them: int literals, loop variables, sizes,
    int arguments, elements of integer arrays, and ``+ - * // %``, ``**``
    by a non-negative int literal, ``abs min max`` and comparisons of those
    (``/`` is a float).  A fixpoint over the assignments, starting from
    every assigned name."""
    int_arrays = {a for a, s in specs.items()
                  if s.kind == "array" and s.dtype.startswith(("int", "uint", "bool"))}
    known = {a for a, s in specs.items() if s.kind == "int"}
    assigns: list[tuple[str, ast.AST, ast.AST | None]] = []
    for node in ast.walk(fdef):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            known.add(node.target.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and is_shape_read(node.value):
                known.update(e.id for e in target.elts if isinstance(e, ast.Name))
            elif isinstance(target, ast.Name):
                assigns.append((target.id, node.value, None))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            assigns.append((node.target.id, node.value, node.op))

    def is_int(e: ast.AST, ints: set[str]) -> bool:
        if isinstance(e, ast.Constant):
            return isinstance(e.value, int)
        if isinstance(e, ast.Name):
            return e.id in known or e.id in ints
        if isinstance(e, ast.Subscript):
            return (isinstance(e.value, ast.Name) and e.value.id in int_arrays) or \
                is_shape_read(e)
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Div):
                return False
            if isinstance(e.op, ast.Pow):
                return (is_int(e.left, ints) and isinstance(e.right, ast.Constant)
                        and isinstance(e.right.value, int) and e.right.value >= 0)
            return is_int(e.left, ints) and is_int(e.right, ints)
        if isinstance(e, ast.UnaryOp):
            return isinstance(e.op, ast.Not) or is_int(e.operand, ints)
        if isinstance(e, (ast.Compare, ast.BoolOp)):
            return isinstance(e, ast.Compare) or all(is_int(v, ints) for v in e.values)
        if isinstance(e, ast.IfExp):
            return is_int(e.body, ints) and is_int(e.orelse, ints)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            if e.func.id == "len":
                return True
            return e.func.id in ("abs", "min", "max") and all(is_int(a, ints) for a in e.args)
        return False

    ints = {nm for nm, _, _ in assigns}
    changed = True
    while changed:
        changed = False
        for nm, value, op in assigns:
            if nm in ints and (isinstance(op, ast.Div) or not is_int(
                    value if op is None else ast.BinOp(ast.Name(nm), op, value), ints)):
                ints.discard(nm)
                changed = True
    return ints


def augmented_form(st: ast.Assign) -> ast.AugAssign | None:
    """``x = x + e`` as ``x += e`` (``e + x``, ``x - e``, ``x * e``, ``e * x``;
    a chain ``x + e1 - e2`` as ``x += e1 - e2``, ``x - e1 + e2`` as
    ``x -= e1 - e2``, ``x * e1 * e2`` as ``x *= e1 * e2``), the target
    spelled alike on both sides; ``None`` for any other assignment.  The
    lowering reads the result as a reduction update when ``+=`` would be one
    (its terms then may be reassociated, as ``+=``'s are), and the
    assignment as written otherwise."""
    if len(st.targets) != 1 or not isinstance(st.targets[0], (ast.Name, ast.Subscript)):
        return None
    target, value = st.targets[0], st.value
    same = ast.unparse(target)
    kinds = (ast.Add, ast.Sub) if isinstance(value, ast.BinOp) and isinstance(
        value.op, (ast.Add, ast.Sub)) else (ast.Mult,)
    if not isinstance(value, ast.BinOp) or not isinstance(value.op, kinds):
        return None
    if (ast.unparse(value.right) == same and not isinstance(value.op, ast.Sub)
            and not _is_chain(value.left, kinds, same)):
        op, rhs = value.op, value.left                   # e + x, e * x
    else:
        terms = []                                       # x op1 e1 op2 e2 ...: [(op, e)]
        node = value
        while isinstance(node, ast.BinOp) and isinstance(node.op, kinds):
            terms.append((node.op, node.right))
            node = node.left
        if ast.unparse(node) != same or any(ast.unparse(e) == same for _, e in terms):
            return None
        terms.reverse()
        op, rhs = terms[0]
        for k_op, e in terms[1:]:
            if isinstance(op, ast.Sub):                  # x - e1 + e2 = x - (e1 - e2)
                k_op = ast.Sub() if isinstance(k_op, ast.Add) else ast.Add()
            rhs = ast.copy_location(ast.BinOp(left=rhs, op=k_op, right=e), e)
    return ast.copy_location(ast.AugAssign(target=target, op=op, value=rhs), st)


def _is_chain(node: ast.AST, kinds, same: str) -> bool:
    """Whether the target ``same`` heads the chain ``node`` (``x + e``)."""
    while isinstance(node, ast.BinOp) and isinstance(node.op, kinds):
        node = node.left
    return ast.unparse(node) == same
