"""LoopNest: the lowered loop structure that backends print.

Produced by :mod:`polyc.astgen` from isl's AST, consumed by the backends.
Expressions are :mod:`polyc.expr` trees in which :class:`~polyc.expr.Index`
names an AST loop iterator (``c0``, ``c1``, ...) and
:class:`~polyc.expr.Param` a size parameter.  Frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import expr as E


@dataclass(frozen=True)
class Node:
    pass


@dataclass(frozen=True)
class For(Node):
    """``for (iterator = init; cond; iterator += step) body``.  ``parallel``
    asks for ``#pragma omp parallel for``, ``simd`` for ``#pragma omp simd``
    (both: ``parallel for simd``); ``reduction`` says the loop scans only
    reduction iterators of the one update statement in its body, so its
    terms may be reassociated (accumulator + ``omp simd reduction``);
    ``collapse`` is the number of perfectly nested loops, starting here, that
    form one parallel iteration space (``collapse(k)``)."""
    iterator: str
    init: E.Expr
    cond: E.Expr
    step: int
    body: Node
    parallel: bool = False
    simd: bool = False
    reduction: bool = False
    collapse: int = 1
    #: a loop of a GPU kernel mapped to a CUDA index (``"block.x"``,
    #: ``"thread.y"``, ...): each block (thread) runs the iterations
    #: ``init + step * index``, ``+ step * (blocks or threads on that axis)``,
    #: ...; ``""`` for a loop every thread runs whole
    mapped: str = ""


@dataclass(frozen=True)
class If(Node):
    cond: E.Expr
    then: Node
    otherwise: Node | None = None


@dataclass(frozen=True)
class Block(Node):
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Local(Node):
    """A block that owns a local buffer (a promoted tensor's footprint,
    :mod:`polyc.schedule.promotion`): ``name`` (the tensor), ``dtype`` (a key
    of :data:`polyc.ir.C_TYPES`) and constant ``sizes``; the buffer exists
    only while ``body`` runs (in C: an array declared at the top of a block,
    private to the thread that runs it).  In a GPU kernel a buffer is in
    shared memory, one per block, unless ``private`` (a promotion to
    registers: one per thread)."""
    name: str
    dtype: str
    sizes: tuple[int, ...]
    body: Node
    private: bool = False


@dataclass(frozen=True)
class Launch(Node):
    """A GPU kernel launch (:mod:`polyc.schedule.gpu_mapping`): ``body`` runs
    on every thread of the grid of kernel ``kernel``; the mapping says how
    many blocks and threads, and its loops are :class:`For` nodes whose
    ``mapped`` names the CUDA index they stride over.  What surrounds a
    ``Launch`` runs on the host."""
    kernel: int
    body: Node
    #: isl may print a kernel's subtree more than once (in both branches of
    #: a condition on the sizes, say), each copy its own CUDA function:
    #: ``occurrence`` numbers them (:func:`number_launches`)
    occurrence: int = 0


@dataclass(frozen=True)
class Barrier(Node):
    """A barrier of the threads of one GPU block (``__syncthreads()``),
    placed by :mod:`polyc.schedule.gpu_rows` where a dependence between two
    threads of the block crosses from one phase of the kernel to the next:
    barrier ``number`` of kernel ``kernel``, whose mapping names that
    dependence."""
    kernel: int
    number: int


@dataclass(frozen=True)
class BlockReduce(Node):
    """A reduction of update ``statement`` by all the threads of a GPU block
    (:mod:`polyc.schedule.gpu_rows`): ``body``'s loops, mapped to threads,
    accumulate each thread's share of the terms; a tree combines the
    threads' values and one thread stores the result."""
    statement: str
    body: Node


def _split_locals(node: Node, out: dict[str, Local]) -> None:
    """The :class:`Local` buffers declared in ``node`` outside any loop (a
    single iteration isl's code generation split off), by name."""
    if isinstance(node, Local):
        out.setdefault(node.name, node)
        _split_locals(node.body, out)
    elif isinstance(node, If):
        _split_locals(node.then, out)
        if node.otherwise is not None:
            _split_locals(node.otherwise, out)
    elif isinstance(node, Block):
        for c in node.children:
            _split_locals(c, out)


def _strip_locals(node: Node, names: frozenset) -> Node:
    """``node`` without the :class:`Local` declarations of ``names`` that
    :func:`_split_locals` reaches (their bodies kept)."""
    if isinstance(node, Local):
        body = _strip_locals(node.body, names)
        return body if node.name in names else replace(node, body=body)
    if isinstance(node, If):
        other = None if node.otherwise is None else _strip_locals(node.otherwise, names)
        return If(node.cond, _strip_locals(node.then, names), other)
    if isinstance(node, Block):
        return Block(tuple(_strip_locals(c, names) for c in node.children))
    return node


def merge_split_locals(node: Node, kernel: bool = False) -> Node:
    """``node`` with each buffer declared once around the pieces that isl's
    code generation split one loop iteration into.

    A temporary contracted to a buffer of the body of loop ``d``
    (:mod:`polyc.schedule.contraction`) has its declaration (a ``promote``
    mark) in that body; when isl generates loop ``d`` as several loops and
    single iterations (a sequence below it whose statements take different
    ranges of ``d``), the mark is repeated in each piece, and one iteration
    of ``d`` may span several single-iteration pieces (the statements of a
    log-softmax's pick, all at the last value of ``d``): a value written in
    one piece and read in the next would live in two different variables.
    A block whose children declare the same buffer outside any loop more
    than once declares it once around all of them instead.  The values
    still do not cross iterations of ``d`` (the contraction's condition), so
    one buffer serves them one after the other; the buffers inside loop
    pieces stay there (a loop vectorised around them needs them private).

    Inside a GPU kernel (``kernel``), a buffer in shared memory keeps its
    declaration in each piece: the CUDA emitter declares it once per kernel
    anyway, and the piece's :class:`Local` is where it puts the barriers
    between the copies into the buffer and the reads of it (a merged one
    would leave a peeled k-tile iteration's copies and reads without a
    barrier between them)."""
    if isinstance(node, Block):
        seen: dict[str, int] = {}
        first: dict[str, Local] = {}
        for c in node.children:
            found: dict[str, Local] = {}
            _split_locals(c, found)
            for name, loc in found.items():
                if kernel and not loc.private:
                    continue
                seen[name] = seen.get(name, 0) + 1
                first.setdefault(name, loc)
        split = frozenset(n for n, k in seen.items() if k > 1)
        out: Node = Block(tuple(merge_split_locals(
            _strip_locals(c, split) if split else c, kernel) for c in node.children))
        for name in sorted(split):
            out = replace(first[name], body=out)
        return out
    if isinstance(node, For):
        return replace(node, body=merge_split_locals(node.body, kernel))
    if isinstance(node, If):
        other = (None if node.otherwise is None
                 else merge_split_locals(node.otherwise, kernel))
        return If(node.cond, merge_split_locals(node.then, kernel), other)
    if isinstance(node, (Local, Launch, BlockReduce)):
        inside = kernel or isinstance(node, Launch)
        return replace(node, body=merge_split_locals(node.body, inside))
    return node


def number_launches(node: Node, seen: dict | None = None) -> Node:
    """``node`` with the :class:`Launch` nodes of each kernel numbered
    0, 1, ... in program order (their ``occurrence``)."""
    seen = {} if seen is None else seen
    if isinstance(node, Launch):
        k = seen.get(node.kernel, 0)
        seen[node.kernel] = k + 1
        return replace(node, occurrence=k)
    if isinstance(node, For):
        return replace(node, body=number_launches(node.body, seen))
    if isinstance(node, If):
        then = number_launches(node.then, seen)
        other = None if node.otherwise is None else number_launches(node.otherwise, seen)
        return If(node.cond, then, other)
    if isinstance(node, Block):
        return Block(tuple(number_launches(c, seen) for c in node.children))
    if isinstance(node, (Local, BlockReduce)):
        return replace(node, body=number_launches(node.body, seen))
    return node


@dataclass(frozen=True)
class StmtInstance(Node):
    """One execution of statement ``statement`` at iterator values ``args``
    (one expression per statement iterator, in the statement's order)."""
    statement: str
    args: tuple[E.Expr, ...]


def perfect_depth(loop: For, depth: int, iterators: tuple[str, ...] | None = None) -> int:
    """How many loops, from ``loop`` down and at most ``depth``, form a
    perfect rectangular nest, the loops OpenMP's ``collapse(k)`` may cover.

    Each next loop is the whole body of the loop above it (at most wrapped
    in a one-child :class:`Block`): no statement, guard (:class:`If`), local
    buffer (:class:`Local`), sibling loop or anything else in between; its
    bounds read no iterator of the loops above (a rectangular space); its
    condition is in OpenMP's canonical form ``iterator < bound`` (or
    ``<=``, ``>``, ``>=``).  When ``iterators`` is given, the k-th loop must
    run over ``iterators[k]``: the members of the one marked band, so that a
    member isl printed as no loop (degenerate: one value) ends the count
    instead of letting a loop of the band below it (a reduction loop, say,
    that carries a dependence) take its place.  ``loop`` itself always
    counts (1 when ``depth`` is 1)."""
    k, outer, cur = 1, {loop.iterator}, loop
    while k < depth:
        inner = cur.body
        while isinstance(inner, Block) and len(inner.children) == 1:
            inner = inner.children[0]
        if not isinstance(inner, For) or not _canonical(inner):
            break
        if iterators is not None and (k >= len(iterators) or inner.iterator != iterators[k]):
            break
        if (E.index_names(inner.init) | E.index_names(inner.cond.rhs)) & outer:
            break
        outer.add(inner.iterator)
        cur, k = inner, k + 1
    return k


def _canonical(loop: For) -> bool:
    """``loop``'s condition compares its iterator with a bound."""
    c = loop.cond
    return (isinstance(c, E.Binary) and c.op in ("<", "<=", ">", ">=")
            and isinstance(c.lhs, E.Index) and c.lhs.name == loop.iterator
            and loop.iterator not in E.index_names(c.rhs))


def walk(node: Node):
    """Pre-order traversal."""
    yield node
    if isinstance(node, For):
        yield from walk(node.body)
    elif isinstance(node, If):
        yield from walk(node.then)
        if node.otherwise is not None:
            yield from walk(node.otherwise)
    elif isinstance(node, Block):
        for c in node.children:
            yield from walk(c)
    elif isinstance(node, (Local, Launch, BlockReduce)):
        yield from walk(node.body)


def format_loopnest(node: Node, indent: int = 0) -> str:
    """A readable pseudo-C rendering (for dumps and golden tests)."""
    pad = "  " * indent
    if isinstance(node, For):
        par = "parallel" if node.collapse == 1 else f"parallel collapse({node.collapse})"
        tags = [t for t, on in ((par, node.parallel), ("simd", node.simd),
                                ("reduction", node.reduction), (node.mapped, node.mapped))
                if on]
        head = (f"{pad}for {node.iterator} = {E.to_text(node.init)}; "
                f"{E.to_text(node.cond)}; += {node.step}")
        head += f"  [{', '.join(tags)}]" if tags else ""
        return head + "\n" + format_loopnest(node.body, indent + 1)
    if isinstance(node, If):
        s = f"{pad}if {E.to_text(node.cond)}\n" + format_loopnest(node.then, indent + 1)
        if node.otherwise is not None:
            s += f"{pad}else\n" + format_loopnest(node.otherwise, indent + 1)
        return s
    if isinstance(node, Block):
        return "".join(format_loopnest(c, indent) for c in node.children)
    if isinstance(node, Local):
        return (f"{pad}local {node.name}: {node.dtype}[{', '.join(map(str, node.sizes))}]\n"
                + format_loopnest(node.body, indent + 1))
    if isinstance(node, Launch):
        copy = f" (copy {node.occurrence})" if node.occurrence else ""
        return (f"{pad}launch kernel {node.kernel}{copy}\n"
                + format_loopnest(node.body, indent + 1))
    if isinstance(node, StmtInstance):
        return f"{pad}{node.statement}({', '.join(E.to_text(a) for a in node.args)})\n"
    if isinstance(node, Barrier):
        return f"{pad}barrier {node.number}\n"
    if isinstance(node, BlockReduce):
        return (f"{pad}block reduction of {node.statement}\n"
                + format_loopnest(node.body, indent + 1))
    raise AssertionError(type(node))
