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
from .. import expr as E
from ..config import Config
from ..errors import PolycError
from ..frontend.tc import linewise
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
    #: the tensor that holds each output (an epilogue computed in place
    #: holds its result in its contraction's buffer)
    out_tensors: tuple[str, ...] = ()
    #: elementwise results read once inside the group: computed inside their
    #: reader's expression, never stored (contracted to a scalar)
    inlined: tuple[str, ...] = ()
    #: the node each statement of the definition computes, in order (TC
    #: names statement k ``S<k>``, its initialisation ``S<k>_init``)
    line_nodes: tuple[str, ...] = ()


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


def _epilogue_aliases(graph: Graph, nodes: Sequence[Node], keep: set[int]) -> dict[str, str]:
    """Elementwise consumers computed in place in the buffer of the
    contraction they read (``t4 = t3 + b`` becomes ``t3 = t3 + b``), so that
    the GEMM intrinsic can fold them into its store
    (:func:`polyc.intrinsics.match_epilogue`): the contraction's result is
    internal to the group, read by that consumer alone, at the same element,
    with the same shape and dtype."""
    members = {n.id for n in nodes}
    consumers = graph.consumers()
    alias: dict[str, str] = {}

    def follows(p: Node, n: Node) -> bool:
        """Whether ``n`` is ``p``'s only reader, elementwise, reading it at
        its own element, with ``p``'s shape and dtype."""
        if (n.id not in members or n.kind != "op" or n.reduction or len(n.stmts) != 1
                or n.helpers or [c.id for c in consumers[p.id]] != [n.id]
                or p.shape != n.shape or p.dtype != n.dtype):
            return False
        reads = _reads(p.name, n.stmts[0])
        return bool(reads) and all(_same_element(r, n.shape) for r in reads)

    for p in nodes:
        if not p.contraction or p.id in keep:
            continue
        chain = [p]
        # a chain of such readers (t9 = t8 * s, t10 = t9 + b, t11 = max(t10, 0)):
        # the last is aliased, the others are computed inside it
        # (_inline_single_use), so that the call folds them as one statement
        while (len(consumers[chain[-1].id]) == 1 and follows(chain[-1], consumers[chain[-1].id][0])
               and (len(chain) == 1 or chain[-1].id not in keep)):
            chain.append(consumers[chain[-1].id][0])
        if len(chain) > 1:
            alias[chain[-1].name] = p.name
    return alias


def _reads(name: str, st: str) -> list[str]:
    """The index lists of every read of ``name`` in statement ``st``, those
    with parenthesised indices too (a roll's ``t1((i0 - 1), i1)``: a regex
    without nesting missed them, so a statement reading ``t1`` at another
    element was computed in ``t1``'s buffer, over values it had already
    overwritten)."""
    out = []
    for m in re.finditer(rf"\b{name}\(", st):
        args, _ = _call_args(st, m.end() - 1)
        out.append(", ".join(args))
    return out


def _same_element(read: str, shape) -> bool:
    """Whether the index list ``read`` (``"i0, 0, i2"``) reads element
    ``i0, i1, ...`` of a tensor of ``shape``: index k is ``i<k>``, or ``0``
    along an extent of 1."""
    idx = [x.strip() for x in read.split(",")] if read.strip() else []
    return len(idx) == len(shape) and all(
        x == f"i{k}" or (x == "0" and s.is_constant and s.value == 1)
        for k, (x, s) in enumerate(zip(idx, shape)))


def _reuse_storage(nodes: Sequence[Node], texts: dict[str, list[str]], keep: set[int],
                   skip: set[str]) -> dict[str, str]:
    """Storage reuse after contraction to scalars: an elementwise statement
    that is the last reader of an internal array (program order) and reads
    it element for element, with the same shape and dtype, writes that
    array's buffer instead of a new one (``y = e / s`` becomes ``e = e / s``:
    a softmax keeps no temporary of its size).  The in-place program's
    dependences (anti dependences from the earlier readers) are computed
    and respected like any other.  Rewrites ``texts``; returns the renames."""
    order = [n for n in nodes if n.name not in skip]
    alias: dict[str, str] = {}
    for idx, n in enumerate(order):
        if (n.kind != "op" or n.reduction or n.helpers or len(texts[n.name]) != 1
                or n.name in alias.values()):
            continue
        st = texts[n.name][0]
        for p in order[:idx]:          # what the statement reads, inlined values included
            if not re.search(rf"\b{p.name}\(", st):
                continue
            if (p.kind != "op" or p.id in keep or p.name in alias
                    or p.name in alias.values() or p.shape != n.shape or p.dtype != n.dtype):
                continue
            # every later statement, those of skipped nodes too (an epilogue
            # folded into a GEMM's store reads under the GEMM's name: the
            # residual of a pre-norm block, y + f(LayerNorm(y)), read y there)
            later = [k for k in nodes[list(nodes).index(n) + 1:] if k.name in texts]
            mention = re.compile(rf"\b{p.name}\b")
            if any(mention.search(t) for k in later for t in texts[k.name]):
                continue                      # read again later: n is not the last reader
            reads = _reads(p.name, st)
            if not reads or not all(_same_element(r, n.shape) for r in reads):
                continue
            its = ", ".join(f"i{k}" for k in range(len(n.shape)))
            st = re.sub(rf"\b{p.name}\([^()]*\)", f"{p.name}({its})", st)
            texts[n.name][0] = re.sub(rf"^{n.name}\b", p.name, st)
            new = re.compile(rf"\b{n.name}\b")
            for k in later:
                texts[k.name] = [new.sub(p.name, t) for t in texts[k.name]]
            alias[n.name] = p.name
            break
    return alias


_ITER = re.compile(r"\bi(\d+)\b")


def _call_args(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments of the parenthesis opening at
    ``text[start]``, and the index just past its closing parenthesis."""
    depth, args, cur = 0, [], start + 1
    for k in range(start, len(text)):
        ch = text[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(text[cur:k].strip())
                return [a for a in args if a], k + 1
        elif ch == "," and depth == 1:
            args.append(text[cur:k].strip())
            cur = k + 1
    raise AssertionError(f"unbalanced parentheses in {text!r}")


def _injective(args: list[str], st: str) -> bool:
    """Whether a read with index expressions ``args`` in statement ``st``
    touches each element at most once: every index is a distinct iterator
    (or the constant 0), and every iterator of the statement whose range is
    more than one value appears (a read ``m(i0, 0)`` inside a loop over
    ``i1`` would recompute ``m`` once per ``i1``)."""
    where = st.split(" where ", 1)[1] if " where " in st else ""
    ranges = dict(re.findall(r"(\w+) in (0:[^,]+?)(?=,\s*\w+ in |$)", where))
    names = [a for a in args if a != "0"]
    if len(set(names)) != len(names) or not all(a in ranges for a in names):
        return False
    return all(r.strip() == "0:1" or it in names for it, r in ranges.items())


_CALL = re.compile(r"\b(" + "|".join(sorted(E.BUILTINS)) + r")\(")


def _cheap(rhs: str) -> bool:
    """Whether an expression is worth writing once per read (``x - y``):
    no calls, no division, a handful of operators."""
    return not _CALL.search(rhs) and "/" not in rhs and "%" not in rhs and \
        sum(rhs.count(op) for op in "+-*?") <= 4


#: integer types C computes in a wider type (int, int64_t): numpy's value of
#: ``(a + b) // 2`` in uint8 wraps ``a + b`` first, as a store would; an
#: inlined value of these types is converted (``cast_uint8(...)``)
#: (int32 too: a Python int literal is an int64 in C's value arithmetic, so
#: ``3 * a`` of int32 compared inside ``np.where`` would not wrap)
_WRAPPED_WHEN_STORED = ("int8", "int16", "uint8", "uint16", "uint32", "int32")


def _inline_single_use(nodes: Sequence[Node], texts: dict[str, list[str]], keep: set[int],
                       alias: dict[str, str]) -> set[str]:
    """Array contraction to scalars: an elementwise result that the group
    reads in one statement only, at one element per statement instance (an
    injective read, possibly written several times: ``d * d``), in a
    statement of its own element type, computed from tensors of that type
    too, and that does not leave the group is computed inside that reading
    expression (its indices substituted for the producer's iterators)
    instead of being stored: no recomputation across instances, no memory.
    Returns the names inlined."""
    dtypes = {n.name: n.dtype for n in nodes}
    dtypes.update({h: d for n in nodes for h, d in n.helpers})
    inlined: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if (n.name in inlined or n.id in keep or n.reduction or n.helpers
                    or len(texts[n.name]) != 1 or n.name in alias
                    or n.name in alias.values() or n.kind != "op"
                    or any(i.dtype != n.dtype for i in n.inputs)):
                # (a conversion happens where a value is stored: keep those stores)
                continue
            m = re.fullmatch(rf"{n.name}(?:\(([^()]*)\))? = (.*?)(?: where .*)?",
                             texts[n.name][0])
            if m is None:
                continue
            its = [x.strip() for x in (m.group(1) or "").split(",") if x.strip()]
            if its != [f"i{k}" for k in range(len(its))]:
                continue
            pattern = re.compile(rf"\b{n.name}\b" + (r"(?=\()" if its else r"(?!\()"))
            hits = [(k.name, j) for k in nodes if k.name not in inlined and k is not n
                    for j, st in enumerate(texts[k.name]) for _ in pattern.finditer(st)]
            if not hits or len(set(hits)) != 1:
                continue
            reader, j = hits[0]
            st = texts[reader][j]
            lhs = re.match(r"\s*(\w+)", st).group(1)
            if dtypes.get(lhs) != n.dtype:
                continue
            # every read: one, or several of one element in one statement
            # instance (the C compiler computes the common expression once)
            spans, arg_sets = [], set()
            for hit in pattern.finditer(st):
                args, end = _call_args(st, hit.end()) if its else ([], hit.end())
                arg_sets.add(tuple(args))
                spans.append((hit.start(), end, args))
            if len(arg_sets) != 1 or (its and not _injective(spans[0][2], st)):
                continue
            rhs = m.group(2)
            if n.dtype.name in _WRAPPED_WHEN_STORED:
                # C computes int8...uint32 values wider: wrap as the store would
                rhs = f"cast_{n.dtype.name}({rhs})"
            if len(spans) > 1 and not _cheap(rhs):
                continue       # written once per read: only a few additions or products
            if its:
                rhs = _ITER.sub(lambda x: f"\0{x.group(1)}\0", rhs)
                for k, a in enumerate(spans[0][2]):
                    rhs = rhs.replace(f"\0{k}\0", a if a.isidentifier() or a.isdigit()
                                      else f"({a})")
            for start, end, _ in reversed(spans):
                st = st[:start] + f"({rhs})" + st[end:]
            texts[reader][j] = st
            inlined.add(n.name)
            changed = True
    return inlined


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
    alias = _epilogue_aliases(graph, nodes, keep)
    texts: dict[str, list[str]] = {}
    for n in nodes:
        texts[n.name] = []
        for st in n.stmts:
            if n.name in alias:
                # read the contraction's element exactly as it is written
                its = ", ".join(f"i{k}" for k in range(len(n.shape)))
                st = re.sub(rf"\b{alias[n.name]}\([^()]*\)", f"{alias[n.name]}({its})", st)
            for old, new in alias.items():
                st = re.sub(rf"\b{old}\b", new, st)
            st = resolve(graph, st)
            for one in one_element:
                st = re.sub(rf"\b{one}\b(?!\s*\()", f"{one}(0)", st)
            texts[n.name].append(st)
    inlined = _inline_single_use(nodes, texts, keep, alias)
    # a contraction whose buffer holds a kept epilogue (t4 = t3 + b, read
    # outside the group, computed in t3) is kept too: no later statement
    # may write its value over
    by_name = {n.name: n for n in nodes}
    held = keep | {by_name[_root(alias, n.name)].id for n in nodes
                   if n.id in keep and n.name in alias}
    alias.update(_reuse_storage(nodes, texts, held, inlined | set(alias)))
    body = [st for n in nodes if n.name not in inlined for st in texts[n.name]]
    line_nodes = tuple(n.name for n in nodes if n.name not in inlined for _ in texts[n.name])
    used = sorted({int(m) for line in body for m in _PARAM.findall(line)})
    size_args = tuple(s for s in used if s not in bound)
    params += [f"int64 N{s}" for s in size_args]
    kept_tensors = {_root(alias, n.name): n for n in nodes if n.id in keep}
    outs, temps, written = [], [], []
    for n in nodes:
        for h, dt in n.helpers:
            written.append(f"{tc_type(dt)} {h}")
            temps.append(h)
        if n.name in alias or n.name in inlined:
            continue
        written.append(f"{tc_type(n.dtype)} {n.name}")
        if n.name in kept_tensors:
            outs.append((kept_tensors[n.name], n.name))
        else:
            temps.append(n.name)
    text = (f"def {name}({', '.join(params)}) -> ({', '.join(written)}) {{\n"
            + "\n".join(f"    {line}" for line in body) + "\n}\n")
    return GroupSource(name, text, ins, size_args, tuple(o for o, _ in outs), tuple(temps),
                       tuple(t for _, t in outs), tuple(sorted(inlined, key=lambda t: int(t[1:]))),
                       line_nodes)


def _root(alias: dict[str, str], name: str) -> str:
    while name in alias:
        name = alias[name]
    return name


def group_program(gs: GroupSource):
    """The ``ir.Program`` of a group: its TC lowered, temporaries marked
    (parsed a statement at a time, :mod:`polyc.frontend.tc.linewise`: the
    planner lowers many groups that share most of their lines)."""
    try:
        module = linewise.parse_lines(gs.text, f"<polyc.graph {gs.name}>")
        prog = api.lower_def(module.defs[0], source=gs.text)
    except PolycError as e:
        raise type(e)(f"{e}\n(in the TC that polyc.graph generated for group {gs.name}:\n"
                      f"{gs.text})") if type(e).__init__ is PolycError.__init__ else e
    temps = set(gs.temps)
    tensors = tuple(replace(t, role="temp") if t.name in temps else t for t in prog.tensors)
    return prog.replace(tensors=tensors)


def compile_group(gs: GroupSource, config: Config | None = None):
    """The compiled :class:`polyc.runtime.Kernel` of a group."""
    return compile_groups([gs], config)[0]


def compile_groups(sources: Sequence[GroupSource], config: Config | None = None) -> list:
    """The kernels of several groups (the C compiler runs for all of them at
    once: :func:`polyc.pipeline.compile_programs`)."""
    from ..pipeline import compile_programs
    return compile_programs([group_program(gs) for gs in sources], config)
