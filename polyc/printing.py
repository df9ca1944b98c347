"""Printers of pipeline stages for humans (dumps, ``polyc compile --emit``).

isl objects print in isl's own notation, so the text parses back with isl.
The printers take an ``ir.Program`` by what it holds (``ir.Program.__str__``
calls them, so this module does not import ``ir``).
"""

from __future__ import annotations

from . import expr as E
from .isl_util import pw_aff_to_expr


def _extent(pa, program) -> str:
    return E.to_text(pw_aff_to_expr(pa, program.context))


def format_program(p) -> str:
    """The text of ``p`` (an ``ir.Program``): tensors with shapes, statements."""
    lines = []
    def tdesc(t):
        dims = ", ".join(_extent(d, p) for d in t.shape)
        return f"{t.name}: {t.dtype}[{dims}]"
    ins = ", ".join(tdesc(t) for t in p.inputs)
    outs = ", ".join(tdesc(t) for t in p.outputs)
    lines.append(f"program {p.name}({ins}) -> ({outs})")
    inout = [t for t in p.tensors if t.role == "inout"]
    if inout:
        lines.append("  in place: " + ", ".join(tdesc(t) for t in inout))
    temps = [t for t in p.tensors if t.role == "temp"]
    if temps:
        lines.append("  temporaries: " + ", ".join(tdesc(t) for t in temps))
    if p.locals:
        lines.append("  locals: " + ", ".join(tdesc(t) for t in p.locals))
    lines.append(f"  params: [{', '.join(p.params)}]  context: {p.context.params()}")
    if p.fixed_sizes:
        lines.append("  fixed sizes: " + ", ".join(f"{k}={v}" for k, v in p.fixed_sizes.items()))
    if p.preconditions is not None and not p.preconditions.is_equal(p.context.params()):
        lines.append(f"  preconditions: {p.preconditions}")
    for s in p.statements:
        op = "=" if s.op == "=" else f"{s.op}="
        lines.append(f"  {s.name} [{s.kind}]: {E.to_text(s.lhs)} {op} {E.to_text(s.rhs)}")
        lines.append(f"    domain: {s.domain}")
        lines.append(f"    write:  {s.write}")
        for r in s.reads:
            lines.append(f"    read:   {r}")
    if p.order is not None:
        lines.append(f"  order: {p.order}")
    return "\n".join(lines) + "\n"
