"""C for thread windows (:mod:`polyc.schedule.windows`): per windowed
temporary ``T``, the kernel's prologue computes its window length and
whether the array holds one window per thread, and the innermost loop of
the window's prefix computes ``polyc_woff_<T>``, the offset every access of
``T`` adds to its row-major linear index (``_Emitter._access``,
:func:`.gemmcall.base_pointer`)::

    const int64_t polyc_wrun_t_S = 70 * (d2_t_S);             (prologue)
    const int64_t polyc_wlen_t_S = (polyc_wrun_t_S / 16 + 2) * 16;
    const int polyc_wuse_t_S = polyc_wteam * polyc_wlen_t_S <= <size of S>;
    for (c1 ...) {
        const int64_t polyc_wtid = omp_get_thread_num();       (0 without OpenMP)
        const int64_t polyc_woff_t_S = polyc_wuse_t_S
            ? polyc_wtid * polyc_wlen_t_S - ((c0) * (d1_t_S * d2_t_S) + (70 * c1) * (d2_t_S)) : 0;
        ... t_S[<linear index> + polyc_woff_t_S] ...

A window is a whole number of cache lines plus one, so two threads'
windows share no line.
"""

from __future__ import annotations

import cgen as c
import numpy as np

from polyc import expr as E
from polyc import loopnest as L
from polyc.ir import Program

from .cexpr import extent_name, tensor_name
from .loopshape import any_node

#: Bytes of a cache line (the windows' granularity).
LINE_BYTES = 64


def offset_name(tensor: str) -> str:
    """The C name of ``tensor``'s window offset (an ``int64_t``)."""
    return f"polyc_woff_{tensor_name(tensor)}"


def _stride(em, tensor: str, d: int) -> str:
    nd = em.program.tensor(tensor).ndim
    return " * ".join(extent_name(tensor, j) for j in range(d + 1, nd)) or "1"


def _users(program: Program, tensor: str) -> set[str]:
    """The statements accessing ``tensor``."""
    return {st.name for st in program.statements
            if st.tensor == tensor or tensor in st.read_tensors()}


def _with_openmp(decl: str, omp: str, serial: str) -> list:
    """``decl = omp;`` in an OpenMP build, ``decl = serial;`` without."""
    return [c.Line("#ifdef _OPENMP"), c.Line(f"{decl} = {omp};"), c.Line("#else"),
            c.Line(f"{decl} = {serial};"), c.Line("#endif")]


def prologue(em) -> list:
    """The window lengths and their guards, after the team size is known."""
    if not em.windows:
        return []
    out = _with_openmp("const int64_t polyc_wteam", "polyc_team", "1")
    for w in em.windows.values():
        t = em.program.tensor(w.tensor)
        name = tensor_name(w.tensor)
        line = max(1, LINE_BYTES // np.dtype(t.dtype).itemsize)
        size = f"({em.extent_expr(w.tensor, 0)}) * ({_stride(em, w.tensor, 0)})"
        out += [c.Line(f"const int64_t polyc_wrun_{name} = {w.rows} * "
                       f"({_stride(em, w.tensor, w.dim)});"),
                c.Line(f"const int64_t polyc_wlen_{name} = (polyc_wrun_{name} / {line} + 2) "
                       f"* {line};"),
                c.Line(f"const int polyc_wuse_{name} = polyc_wteam * polyc_wlen_{name} "
                       f"<= {size};")]
    return out


def loop_lines(em, n: L.For) -> list:
    """The window offsets computed at the top of the body of loop ``n``: the
    windows whose prefix ends at ``n``'s iterator, where ``n`` runs a
    statement accessing the tensor (a loop of that name elsewhere may lack
    the outer iterators)."""
    here = []
    for w in em.windows.values():
        users = _users(em.program, w.tensor)
        if w.loop == n.iterator and any_node(
                n.body, lambda x: isinstance(x, L.StmtInstance) and x.statement in users):
            here.append(w)
    if not here:
        return []
    out = _with_openmp("const int64_t polyc_wtid", "omp_get_thread_num()", "0")
    ip = em.loop_printer.index
    for w in here:
        name = tensor_name(w.tensor)
        base = " + ".join(f"({ip(o)}) * ({_stride(em, w.tensor, j)})"
                          for j, o in enumerate(w.offset)
                          if not (isinstance(o, E.Const) and o.value == 0)) or "0"
        out.append(c.Line(f"const int64_t {offset_name(w.tensor)} = polyc_wuse_{name} ? "
                          f"polyc_wtid * polyc_wlen_{name} - ({base}) : 0;"))
    return out


def in_nest(windows: tuple, nest: L.Node, program: Program) -> tuple:
    """The windows whose every accessing statement instance in the loop nest
    ``nest`` (:mod:`polyc.loopnest`) lies inside loops ``c0`` ..
    ``c<depth - 1>`` (isl prints no loop for a dimension with one value; the
    offset could not be computed there)."""
    users = {w.tensor: _users(program, w.tensor) for w in windows}
    ok = {w.tensor: True for w in windows}

    def walk(n, loops: frozenset) -> None:
        if isinstance(n, L.For):
            walk(n.body, loops | {n.iterator})
        elif isinstance(n, L.Block):
            for k in n.children:
                walk(k, loops)
        elif isinstance(n, L.If):
            walk(n.then, loops)
            if n.otherwise is not None:
                walk(n.otherwise, loops)
        elif isinstance(n, L.StmtInstance):
            for w in windows:
                if n.statement in users[w.tensor] and \
                        not {f"c{j}" for j in range(w.depth)} <= loops:
                    ok[w.tensor] = False
        elif hasattr(n, "body"):
            walk(n.body, loops)
    walk(nest, frozenset())
    return tuple(w for w in windows if ok[w.tensor])


def computed_in(em, n: L.For) -> bool:
    """Whether a window offset is computed in the body of loop ``n`` or of
    a loop its ``collapse`` covers: such a loop may not be ``simd`` (the
    offset maps every iteration to the same row of the thread's window, so
    the vector lanes of one thread would write one row at once)."""
    x: L.Node = n
    for k in range(max(1, n.collapse)):
        while isinstance(x, L.Block) and len(x.children) == 1:
            x = x.children[0]
        if not isinstance(x, L.For):
            return False
        if loop_lines(em, x):
            return True
        x = x.body
    return False
