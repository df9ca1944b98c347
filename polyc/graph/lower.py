"""A fusion group as one TC definition, one ``ir.Program`` and one kernel.

The group's statements are its nodes' TC statements in program order; the
tensors it reads from outside (arguments, captured arrays, other groups'
results) are the definition's inputs; the tensors that leave the group are
its outputs; every other tensor it writes is a temporary (role ``"temp"``:
allocated per call by the runtime, never returned).  Size tokens become
parameter names (``N3``), or constants where the trace specialised them;
a size that no input extent binds is passed as an ``int64`` argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Sequence

from .. import api
from ..config import Config
from ..errors import PolycError
from .core import Graph, Node, tc_type
from .sizes import Size

_TOKEN = re.compile(r"\$(\d+)")
_PARAM = re.compile(r"\bN(\d+)\b")


@dataclass(frozen=True)
class GroupSource:
    """The TC text of one fusion group and how to call its kernel.

    ``inputs``: the external tensors in signature order; ``size_args``:
    symbol representatives passed as ``int64`` arguments after them;
    ``outputs``: the tensors the kernel returns, in order; ``temps``: the
    tensors that live only inside the kernel."""
    name: str
    text: str
    inputs: tuple[Node, ...]
    size_args: tuple[int, ...]
    outputs: tuple[Node, ...]
    temps: tuple[str, ...]


def resolve(graph: Graph, text: str) -> str:
    """``text`` with size tokens ``$k`` replaced by parameter names or the
    specialised values."""
    table = graph.symbols

    def sub(m: re.Match) -> str:
        s = int(m.group(1))
        r = table.find(s)
        return str(table.values[r]) if r in table.fixed else f"N{r}"
    return _TOKEN.sub(sub, text)


def _dim_text(s: Size, bound: set[int], fresh: list[int]) -> str:
    n = s.normal()
    if not n.terms:
        return str(n.const)
    single = s.single_symbol()
    if single is not None:
        bound.add(single)
        return f"N{single}"
    fresh[0] += 1
    return f"D{fresh[0]}"


def group_source(graph: Graph, nodes: Sequence[Node], keep: set[int], name: str) -> GroupSource:
    """The definition of the group ``nodes`` (program order); ``keep``: ids
    of the nodes whose tensors must leave the group."""
    members = {n.id for n in nodes}
    inputs: dict[int, Node] = {}
    for n in nodes:
        for i in n.inputs:
            if i.id not in members:
                inputs.setdefault(i.id, i)
    ins = tuple(sorted(inputs.values(), key=lambda n: n.id))
    bound: set[int] = set()
    fresh = [0]
    params = []
    one_element = set()
    for i in ins:
        dims = [_dim_text(s, bound, fresh) for s in i.shape]
        t = tc_type(i.dtype)
        if not dims and i.dtype.kind in "iu":
            # TC takes a rank-0 integer argument as a size: pass one element
            one_element.add(i.name)
            dims = ["1"]
        params.append(f"{t}({', '.join(dims)}) {i.name}" if dims else f"{t} {i.name}")
    body = [resolve(graph, s) for n in nodes for s in n.stmts]
    for name in one_element:
        body = [re.sub(rf"\b{name}\b(?!\s*\()", f"{name}(0)", line) for line in body]
    used = sorted({int(m) for line in body for m in _PARAM.findall(line)})
    size_args = tuple(s for s in used if s not in bound)
    params += [f"int64 N{s}" for s in size_args]
    outs, temps, written = [], [], []
    for n in nodes:
        for h, dt in n.helpers:
            written.append(f"{tc_type(dt)} {h}")
            temps.append(h)
        written.append(f"{tc_type(n.dtype)} {n.name}")
        if n.id in keep:
            outs.append(n)
        else:
            temps.append(n.name)
    text = (f"def {name}({', '.join(params)}) -> ({', '.join(written)}) {{\n"
            + "\n".join(f"    {line}" for line in body) + "\n}\n")
    return GroupSource(name, text, ins, size_args, tuple(outs), tuple(temps))


def group_program(gs: GroupSource):
    """The ``ir.Program`` of a group: its TC lowered, temporaries marked."""
    try:
        prog = api.program(gs.text, filename=f"<polyc.graph {gs.name}>")
    except PolycError as e:
        raise type(e)(f"{e}\n(in the TC that polyc.graph generated for group {gs.name}:\n"
                      f"{gs.text})") if type(e).__init__ is PolycError.__init__ else e
    temps = set(gs.temps)
    tensors = tuple(replace(t, role="temp") if t.name in temps else t for t in prog.tensors)
    return prog.replace(tensors=tensors)


def compile_group(gs: GroupSource, config: Config | None = None):
    """The compiled :class:`polyc.runtime.Kernel` of a group."""
    from ..pipeline import compile_program
    return compile_program(group_program(gs), config)
