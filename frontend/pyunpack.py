"""Unpacking assignments of ``@polyc.kernel`` bodies (``a, b = x, y``),
rewritten into single assignments for :mod:`polyc.frontend.pyloops`
(``low`` below is its ``_Lowering``: names in scope, ``fail``, ``exprs``)."""

from __future__ import annotations

import ast

from polyc.ir import is_float

from .pysource import is_shape_read


def shape_tuple(st: ast.Assign) -> bool:
    """Whether ``st`` unpacks sizes one by one: ``n, m = A.shape[0], B.shape[1]``
    (each pair is then a size read, as ``n = A.shape[0]``)."""
    t, v = st.targets[-1], st.value
    return (len(st.targets) == 1 and isinstance(t, (ast.Tuple, ast.List))
            and isinstance(v, (ast.Tuple, ast.List)) and len(t.elts) == len(v.elts)
            and all(isinstance(x, ast.Subscript) and is_shape_read(x) for x in v.elts))


def unpack_assignment(low, st: ast.Assign, loops) -> list[ast.Assign]:
    """``a, b = x, y`` (``A[i], A[j] = A[j], A[i]``) as single assignments:
    Python evaluates every value before it assigns, so each value goes
    to a fresh local scalar first when a value reads a target."""
    target, value = st.targets[-1], st.value
    if len(st.targets) != 1 or not isinstance(value, (ast.Tuple, ast.List)) or len(
            value.elts) != len(target.elts):
        raise low.fail(st, "an unpacking assignment whose value is not a tuple of as "
                            "many values", "assign one value per target: "
                            "`a, b = x, y`, or one statement each")
    bases = set()
    for t in target.elts:
        base = t.value if isinstance(t, ast.Subscript) else t
        if not isinstance(base, ast.Name):
            raise low.fail(t, "an unpacking target that is neither an array element "
                               "nor a scalar name")
        bases.add(base.id)
    reads = {n.id for v in value.elts for n in ast.walk(v) if isinstance(n, ast.Name)}
    if not bases & reads:
        pairs = list(zip(target.elts, value.elts))
    else:
        pairs, temps = [], []
        for v in value.elts:
            tmp = _fresh_local(low, "_unpacked")
            if not is_float(low.value_dtype) and low.exprs._int_valued(
                    low.exprs.value_expr(v, loops)):
                low.int_scalars.add(tmp)
            temps.append(ast.copy_location(ast.Name(id=tmp, ctx=ast.Store()), v))
            pairs.append((temps[-1], v))
        pairs += [(t, ast.copy_location(ast.Name(id=tmp.id, ctx=ast.Load()), t))
                  for t, tmp in zip(target.elts, temps)]
    return [ast.copy_location(ast.Assign(targets=[t], value=v), st) for t, v in pairs]


def _fresh_local(low, base: str) -> str:
    """A local scalar name the body does not use."""
    name, k = base, 0
    while name in low.taken or name in low.scalars or name in low.params:
        name, k = f"{base}{k}", k + 1
    low.taken.add(name)
    return name
