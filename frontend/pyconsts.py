"""Named constants in ``@polyc.kernel`` bodies: module-level and closure
numbers (``TILE = 4``; ``for i in range(0, n, TILE)``) and the constants of
``math`` and numpy (``math.pi``, ``np.inf``).

Takes the kernel's ``ast.FunctionDef`` and the values its free names have
(:class:`FunctionEnv` of a live function, :func:`file_env` of a file
read without running it); returns the names it reads as constants
(:func:`free_reads`, :func:`constants`) and a copy of the function with each replaced by its
literal (:func:`inline`), which :mod:`polyc.frontend.pyloops` then reads as
if the number had been written there.  A name the body assigns, a
parameter, and anything whose value is not an ``int`` or ``float`` (``bool``
excluded) is left alone, so it meets the usual checks.
"""

from __future__ import annotations

import ast
import copy
import math
import types
from collections.abc import Mapping

import numpy as np


def _number(value) -> int | float | None:
    """``value`` as a Python int or float, or ``None`` when it is neither
    (``bool`` included)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return None


def _local_names(fdef: ast.FunctionDef) -> set[str]:
    """Parameters and every name the body binds (assignments, loop targets)."""
    out = {a.arg for a in fdef.args.args}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out.add(node.id)
    return out


def free_reads(fdef: ast.FunctionDef) -> tuple:
    """``((name, attr), ...)``: the names ``fdef`` reads but neither takes
    as a parameter nor binds (``attr`` ``None``), and the ``name.attr``
    reads of such names (``math.pi``).  Computed once per function."""
    local = _local_names(fdef)
    found: set = set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.value, ast.Name) and node.value.id not in local:
            found.add((node.value.id, node.attr))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                and node.id not in local:
            found.add((node.id, None))
    return tuple(sorted(found, key=lambda r: (r[0], r[1] or "")))


def constants(reads: tuple, env: Mapping[str, object]) -> tuple:
    """``((key, value), ...)``: the reads of :func:`free_reads` whose value
    in ``env`` is a number (``key`` ``name`` or ``module.attr``, for a
    module in ``env``).  Part of a kernel's specialisation key, so that a
    changed global compiles again."""
    found = []
    for name, attr in reads:
        if name not in env:
            continue
        value = env[name]
        if attr is not None:
            if not isinstance(value, types.ModuleType):
                continue
            value = getattr(value, attr, None)
        v = _number(value)
        if v is not None:
            found.append((name if attr is None else f"{name}.{attr}", v))
    return tuple(found)


class _Inline(ast.NodeTransformer):
    def __init__(self, values: Mapping[str, int | float]):
        self.values = values

    def _constant(self, node: ast.AST, key: str) -> ast.AST:
        if key not in self.values:
            return node
        v = self.values[key]
        if math.copysign(1.0, v) < 0:        # -3, -inf, -0.0: written -k
            lit: ast.expr = ast.UnaryOp(ast.USub(), ast.copy_location(ast.Constant(-v), node))
        else:
            lit = ast.Constant(v)
        return ast.copy_location(lit, node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self._constant(node, node.id) if isinstance(node.ctx, ast.Load) else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
            out = self._constant(node, f"{node.value.id}.{node.attr}")
            if out is not node:
                return out
        self.generic_visit(node)
        return node


def inline(fdef: ast.FunctionDef, consts: tuple) -> ast.FunctionDef:
    """A copy of ``fdef`` with each constant of ``consts`` (from
    :func:`constants`) replaced by its literal (a negative one as ``-k``);
    ``fdef`` itself when there are none."""
    if not consts:
        return fdef
    out = _Inline(dict(consts)).visit(copy.deepcopy(fdef))
    return ast.fix_missing_locations(out)


class FunctionEnv(Mapping):
    """The values ``fn``'s free names have now (read at each call, nothing
    copied): the variables of enclosing functions it closes over, then its
    globals."""

    def __init__(self, fn):
        code = getattr(fn, "__code__", None)
        cells = getattr(fn, "__closure__", None) or ()
        self._cells = dict(zip(code.co_freevars if code else (), cells))
        self._globals = getattr(fn, "__globals__", {})

    def __getitem__(self, name: str):
        cell = self._cells.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:          # an empty cell: not assigned yet
                raise KeyError(name) from None
        return self._globals[name]

    def __iter__(self):
        return iter({**self._globals, **self._cells})

    def __len__(self) -> int:
        return len({**self._globals, **self._cells})


def file_env(tree: ast.Module) -> dict[str, object]:
    """What the top level of a file read without running it binds to
    numbers and to ``math``/``numpy``: ``NAME = number`` assignments
    (``TILE = 4``, ``EPS = 1e-6``, ``N = -3``, ``TILE2 = 2 * TILE``: see
    :func:`_arithmetic`) and ``import math``, ``import numpy as np``."""
    env: dict[str, object] = {}
    modules = {"math": math, "numpy": np}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules:
                    env[a.asname or a.name] = modules[a.name]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            value = _arithmetic(node.value, env)
            if value is None:
                env.pop(node.targets[0].id, None)
            else:
                env[node.targets[0].id] = value
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            env.pop(node.name, None)       # a later definition hides the constant
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) \
                and isinstance(node.target, ast.Name):
            env.pop(node.target.id, None)
    return env


_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
          ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
          ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def _arithmetic(node: ast.AST, env: Mapping[str, object]) -> int | float | None:
    """The number ``node`` computes from number literals, the numbers of
    ``env`` (names and ``math.pi``-style constants) and ``+ - * / // %``
    (no call, no power: nothing that runs user code or grows without
    bound), or ``None``."""
    if isinstance(node, ast.Constant):
        return _number(node.value)
    if isinstance(node, ast.Name):
        return _number(env.get(node.id))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and isinstance(env.get(node.value.id), types.ModuleType):
        return _number(getattr(env[node.value.id], node.attr, None))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _arithmetic(node.operand, env)
        return None if v is None else (-v if isinstance(node.op, ast.USub) else v)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        a, b = _arithmetic(node.left, env), _arithmetic(node.right, env)
        if a is None or b is None:
            return None
        try:
            return _number(_ARITH[type(node.op)](a, b))
        except (ArithmeticError, ValueError):
            return None
    return None
