"""C99/OpenMP code generation: (``ir.Program``, LoopNest) -> C source.

Emits one function ``polyc_kernel(const int64_t *params, void *const
*buffers, int32_t nthreads)``: ``params`` holds the size parameters in
``Program.params`` order, ``buffers`` one pointer per tensor in
``Program.tensors`` order, local tensors left out (C-contiguous, row-major;
the runtime guarantees that no two buffers overlap, which makes ``restrict``
valid), ``nthreads`` the OpenMP team size (0: the runtime default).  Syntax
is produced with cgen.

A local tensor (role ``"local"``: a promoted footprint, see
:mod:`polyc.schedule.promotion`) is no argument: it is an array with
constant extents declared at the top of the block of its
:class:`~polyc.loopnest.Local` node (``float t_A_local[32][32]
__attribute__((aligned(64)));``), so it is private to the thread running
that block, and it is indexed with constant strides (``t_A_local[i][j]``).

Guarantees (tested in ``tests/robustness/``):

* no user text reaches the C verbatim: names are validated and mangled
  (``t_<tensor>``, ``p_<size>``, ``i_<index>``, extents ``d<k>_<tensor>``;
  polyc's own names start with ``polyc_``, isl's loop iterators are
  ``c<k>``), constants are printed exactly (``cexpr.float_literal``), and a
  statement's source text appears only inside a comment, filtered by
  :func:`comment_text`;
* all index arithmetic (iterators, loop counters, extents, linear offsets,
  gathered indices) is ``int64_t`` with ``INT64_C`` literals, whatever bound
  isl could prove;
* values follow C's usual arithmetic conversions exactly as the numpy oracle
  does (``cexpr.CExprPrinter.typed``), reductions combine in
  :func:`~.cexpr.accumulator_type`, ``max=``/``min=`` propagate NaN, integer
  arithmetic wraps and divides by zero as numpy does (no undefined
  behaviour, no SIGFPE).
"""

from __future__ import annotations

from dataclasses import replace

import cgen as c

from polyc import expr as E
from polyc import loopnest as L
from polyc.custom_intrinsics import get as get_intrinsic
from polyc.intrinsics import GemmMatch
from polyc.ir import C_TYPES, Program, Statement
from polyc.isl_util import pw_aff_to_expr

from ..base import Source
from . import intrinsics as c_intrinsics
from . import windows as wins
from .cexpr import (
    CExprPrinter,
    accumulator_type,
    check_identifier,
    combine,
    comment_text,
    convert,
    extent_name,
    float_type_of,
    iterator_name,
    loop_iterator_name,
    param_name,
    tensor_name,
)
from .coalesce import coalesce
from .customcall import custom_call
from .gemmcall import as_param, gemm_call
from .hoist import HOISTED, hoist_invariants
from .loopshape import (
    any_node,
    collapsed_trip,
    const_trip,
    fold_collapsed_simd,
    only_instance,
    parallel_body,
    perfect_child,
    schedule_clause,
    trip_text,
)
from .outersimd import outer_vector, vector_loop
from .prelude import (
    PRELUDE,  # noqa: F401  (re-exported: backends.c.versions)
    libmvec_declarations,
)
from .printer import FunctionRef

ENTRY = "polyc_kernel"

#: a parallel loop holding no loop, inside a sequential loop, forks its team
#: only from this many iterations up: below it a fork and barrier (about a
#: microsecond) cost more than the loop's work
MIN_PARALLEL_TRIP = 16384


def linear_offset(tensor: str, idx: list[str]) -> str:
    """The row-major offset of element ``idx`` of ``tensor`` (C text, int64_t
    arithmetic over the extents ``d<k>_<tensor>``)."""
    if not idx:
        return "0"
    off = idx[0]
    for d in range(1, len(idx)):
        off = f"({off}) * {extent_name(tensor, d)} + {idx[d]}"
    return off


class _Emitter:
    #: whether a sequential loop whose body is parallel nests is printed
    #: inside one OpenMP parallel region (:meth:`region`)
    REGIONS = True
    #: whether a nest over contiguous elements runs as one loop
    #: (:mod:`.coalesce`; the CUDA printers keep the nest: a thread's loops)
    COALESCE = True
    #: whether a loop around short inner loops is vectorised (:mod:`.outersimd`)
    OUTER_VECTOR = True
    #: whether gcc's asm statements may be printed (:meth:`reduction_loop`)
    HOST_ASM = True

    def __init__(self, program: Program, omp_schedule: str = "auto", windows=()):
        self.program = program
        self.windows = {w.tensor: w for w in windows}
        self.omp_schedule = omp_schedule
        self.stmts = {s.name: s for s in program.statements}
        self.dtypes = {t.name: t.dtype for t in program.tensors}
        self.locals = {t.name for t in program.tensors if t.role == "local"}
        self.loop_printer = CExprPrinter(loop_iterator_name, self._access,
                                         self.dtypes.__getitem__)
        self.sequential_depth = 0      # sequential loops around the node printed
        self.hoisted = 0               # locals hoisted so far (.hoist)
        self.parallel_depth = 0        # parallel loops around it
        self.splitting = False         # printing the parallel copy of a loop around calls
        self.in_region = False         # inside a parallel region around a sequential loop
        self.lanes: set[str] = set()   # private locals with one element per SIMD lane (.outersimd)
        self.collapsed: set[int] = set()   # ids of the inner loops of a collapse(k)
        #: whether any statement is a call of an intrinsic (then the source
        #: declares gemm_api.h and links the intrinsics library)
        self.calls = any(st.kind == "intrinsic" for st in program.statements)
        #: the name of the C function printed, and the static functions its
        #: calls need (:meth:`add_function`: a GEMM call's tile function)
        self.function_name = ENTRY
        self.functions: list[str] = []

    def add_function(self, stem: str, make) -> FunctionRef:
        """A static function printed before the kernel's: ``make(name)``
        gives ``(text, context initializer)``; its name is the kernel
        function's, ``stem`` and a number."""
        name = f"{self.function_name}_{check_identifier(stem)}_{len(self.functions)}"
        text, init = make(name)
        self.functions.append(text)
        return FunctionRef(name, init)

    def _access(self, tensor: str, idx: list[str]) -> str:
        """``t_T[offset]``: the row-major linear offset, all in int64_t; a
        local buffer: ``t_T[i][j]`` (constant extents); a hoisted invariant
        read (:func:`.hoist.hoist_invariants`): its local variable."""
        lane = "[polyc_lane]" if tensor in self.lanes else ""
        if tensor.startswith(HOISTED):
            return "polyc_inv" + tensor[len(HOISTED):] + lane
        if tensor in self.locals:
            return tensor_name(tensor) + lane + ("".join(f"[{i}]" for i in idx) or "[0]")
        off = f" + {wins.offset_name(tensor)}" if tensor in self.windows else ""
        return f"{tensor_name(tensor)}[{linear_offset(tensor, idx)}{off}]"

    # -- prologue ---------------------------------------------------------------
    def prologue(self) -> list:
        p = self.program
        out: list = []
        for k, name in enumerate(p.params):
            out.append(c.Initializer(c.Const(c.Value("int64_t", param_name(name))),
                                     f"polyc_params[{k}]"))
        for k, t in enumerate(arguments(p)):
            ct = C_TYPES[t.dtype]
            qual = "const " if t.role == "input" else ""
            out.append(c.Line(f"{qual}{ct} *restrict {tensor_name(t.name)} = "
                              f"({qual}{ct} *)polyc_buffers[{k}];"))
            for d in range(1, t.ndim):
                out.append(c.Initializer(c.Const(c.Value("int64_t", extent_name(t.name, d))),
                                         self.extent_expr(t.name, d)))
        return out

    # -- statements -------------------------------------------------------------
    def _printer(self) -> CExprPrinter:
        return CExprPrinter(iterator_name, self._access, self.dtypes.__getitem__)

    def _iterators(self, pairs) -> list:
        ip = self.loop_printer.index
        return [c.Initializer(c.Const(c.Value("int64_t", iterator_name(it))), ip(arg))
                for it, arg in pairs]

    def intrinsic_call(self, s: Statement) -> c.Generable:
        """The call that an ``intrinsic`` statement (a tensorized group) becomes."""
        return (gemm_call(self, s) if isinstance(s.intrinsic, GemmMatch)
                else custom_call(self, s))

    def statement(self, inst: L.StmtInstance, s: Statement | None = None) -> c.Generable:
        s = s or self.stmts[inst.statement]
        body: list = []
        if s.text:
            body.append(c.Comment(comment_text(s.text)))
        body += self._iterators(zip(s.iterators, inst.args))
        if s.kind == "intrinsic":
            body.append(self.intrinsic_call(s))
            return c.Block(body)
        pr = self._printer()
        dtype = self.dtypes[s.tensor]
        lhs = self.written(pr, s)
        if s.op == "=":
            body.append(c.Statement(f"{lhs} = {pr.value(s.rhs, dtype)}"))
        else:
            rhs, rtype = pr.typed(s.rhs, float_type_of(dtype))
            acc = accumulator_type(dtype, rtype)
            update = combine(s.op, convert(lhs, dtype, acc), convert(rhs, rtype, acc), acc)
            body.append(c.Statement(f"{lhs} = {convert(update, acc, dtype)}"))
        return c.Block(body)

    def written(self, pr: CExprPrinter, s: Statement) -> str:
        """The C lvalue of the element statement ``s`` writes."""
        return pr._access(s.lhs)

    def extent_expr(self, tensor: str, d: int) -> str:
        """``tensor``'s extent ``d`` computed from the size parameters."""
        ext = pw_aff_to_expr(self.program.tensor(tensor).shape[d], self.program.context)
        return self.loop_printer.index(E.map_expr(ext, as_param))

    def reduction_loop(self, n: L.For, vectorize: bool = True,
                       statement: Statement | None = None) -> c.Generable | None:
        """A loop over reduction iterators of one update statement, with the
        accumulator in a local variable (``omp simd reduction``; for a
        floating-point max/min, with an exact sequential rerun on NaN);
        ``None`` when the loop body does not have that shape.  The
        accumulator has the type the reduction combines in
        (:func:`accumulator_type`), converted to the output's once, at the
        store.  ``vectorize=False``: the loop stays sequential, in its order
        (a GPU thread's loop): only the accumulator moves to a register.
        ``statement``: the statement to print instead of the instance's own
        (a coalesced nest's, :mod:`.coalesce`)."""
        body = only_instance(n)
        if body is None:
            return None
        s = statement or self.stmts[body.statement]
        if s.kind != "update" or s.op not in ("+", "*", "max", "min"):
            return None
        if s.tensor in {a.tensor for a in E.accesses(s.rhs)}:
            return None          # the accumulator is read elsewhere: no register copy
        outer, inner = [], []
        for it, arg in zip(s.iterators, body.args):
            moves = n.iterator in E.index_names(arg)
            if it not in s.reduction_iterators and moves:
                return None
            (inner if it in s.reduction_iterators else outer).append((it, arg))
        s, _, inits = hoist_invariants(self, s, body.args, n.iterator, {it for it, _ in outer})
        pr = self._printer()
        dtype = self.dtypes[s.tensor]
        lhs = pr._access(s.lhs)
        rhs, rtype = pr.typed(s.rhs, float_type_of(dtype))
        acc_t = accumulator_type(dtype, rtype)
        acc = "polyc_acc"
        loop_body = self._iterators(inner)
        update = combine(s.op, acc, convert(rhs, rtype, acc_t), acc_t)
        loop_body.append(c.Statement(f"{acc} = {update}"))
        loop = self._for(n, c.Block(loop_body))
        init = c.Initializer(c.Value(C_TYPES[acc_t], acc), convert(lhs, dtype, acc_t))
        if s.op in ("max", "min") and acc_t.startswith("float"):
            # NaN-propagating max/min: vectorised as OpenMP's max/min (which
            # may drop a NaN) while a flag notes any NaN; on a NaN the exact
            # sequential loop runs again, so the result is bit for bit numpy's
            x = c.Initializer(c.Const(c.Value(C_TYPES[acc_t], "polyc_x")),
                              convert(rhs, rtype, acc_t))
            cmp = ">" if s.op == "max" else "<"
            vec = self._for(n, c.Block(self._iterators(inner) + [
                x, c.Statement(f"{acc} = {acc} {cmp} polyc_x ? {acc} : polyc_x"),
                c.Statement("polyc_nan |= polyc_x != polyc_x")]))
            vector = [c.Initializer(c.Value("int32_t", "polyc_nan"), f"{acc} != {acc}"),
                      c.Pragma(f"omp simd reduction({s.op}:{acc}) reduction(|:polyc_nan)"),
                      vec,
                      c.If("polyc_nan", c.Block([
                          c.Statement(f"{acc} = {convert(lhs, dtype, acc_t)}"), loop]))]
        else:
            vector = [c.Pragma(f"omp simd reduction({s.op}:{acc})"), loop]
        body_ = [init, *(self._by_trip(n, vector, [loop]) if vectorize else [loop])]
        block = self._iterators(outer) + inits
        # carried across an enclosing loop too (its element does not move with it):
        # gcc 12.2 -O3 miscompiles such a nest of a select once it keeps the element
        # in a register across the outer loop; an empty asm there hides that flow
        carried = self.HOST_ASM and any(n.iterator not in E.index_names(arg) for _, arg in inner)
        block += [c.Comment(f"{check_identifier(s.name)}: reduction with a register "
                            "accumulator"), *body_,
                  *([c.Statement(f'__asm__("" : "+g"({acc}))')] if carried else []),
                  c.Statement(f"{lhs} = {convert(acc, acc_t, dtype)}")]
        return c.Block(block)

    def _by_trip(self, n: L.For, vector: list, scalar: list) -> list:
        """``vector`` (a vectorised reduction loop) where loop ``n`` runs at
        least :data:`SIMD_MIN_TRIP` times, else ``scalar`` (the sequential
        loop): a vector reduction's set-up and final horizontal combine
        cost more than a few iterations (RBF's sum over 3 coordinates ran
        3x slower vectorised).  A trip count known only at run time gives
        both, chosen by an ``if``."""
        const = const_trip(n)
        if const is not None:
            return vector if const >= SIMD_MIN_TRIP else scalar
        trip = self._trip(n)
        if trip is None:
            return vector
        if not (E.index_names(n.init) | E.index_names(n.cond.rhs)):
            return [c.If(f"{trip} >= INT64_C({SIMD_MIN_TRIP})", c.Block(vector),
                         c.Block(scalar))]
        # a trip count that moves with an enclosing loop (durbin's k) goes
        # through an empty asm: gcc's -fsplit-loops would otherwise split the
        # enclosing loop at the condition, and its copy of the simd loop
        # loses the vectorisation (measured: durbin 0.76 -> 2.1 ms)
        return [c.Block([
            c.Statement(f"int64_t polyc_trip = {trip}"),
            c.Statement('__asm__("" : "+r"(polyc_trip))'),
            c.If(f"polyc_trip >= INT64_C({SIMD_MIN_TRIP})", c.Block(vector), c.Block(scalar))])]

    def simd_loop(self, flat) -> c.Generable:
        """The one vector loop of a coalesced elementwise nest
        (:class:`.coalesce.Coalesced`)."""
        hoisted = self.hoisted_loop(flat.loop, statement=flat.statement)
        if hoisted is not None:
            return hoisted
        body = self.statement(only_instance(flat.loop), flat.statement)
        return c.Module([c.Pragma("omp simd"), self._for(flat.loop, body)])

    def hoisted_loop(self, n: L.For, statement: Statement | None = None) -> c.Generable | None:
        """A ``simd`` loop around one statement that reads elements invariant
        in it, with those reads loaded once before it (:func:`.hoist.hoist_invariants`);
        ``None`` otherwise.  ``statement``: the statement to print instead
        of the instance's own (a coalesced nest's)."""
        body = only_instance(n)
        if body is None:
            return None
        s = statement or self.stmts[body.statement]
        if s.kind == "intrinsic":
            return None
        s, its, inits = hoist_invariants(self, s, body.args, n.iterator)
        if not inits:
            return None
        loop = self._for(n, self.statement(body, s))
        return c.Block([*its, *inits, c.Pragma("omp simd"), loop])

    def _long_enough(self, n: L.For) -> str | None:
        """``trip >= MIN_PARALLEL_TRIP`` for a parallel loop that runs once
        per iteration of an enclosing sequential loop and holds no loop
        itself, else ``None``: such a loop's team would fork and meet at a
        barrier that many times for O(trip) work each, which costs more than
        it saves below :data:`MIN_PARALLEL_TRIP` iterations (durbin,
        trisolv, jacobi-1d), so it is printed twice, the sequential copy
        taken below that trip count (not OpenMP's ``if`` clause: a region
        with a false ``if`` still calls into the runtime)."""
        if (not self.sequential_depth or n.collapse > 1
                or any_node(n.body, lambda x: isinstance(x, L.For))):
            return None
        trip = self._trip(n)
        return None if trip is None else f"{trip} >= INT64_C({MIN_PARALLEL_TRIP})"

    def _schedule_clause(self, n: L.For) -> str:
        """The ``schedule`` clause of parallel loop ``n``
        (:func:`.loopshape.schedule_clause`)."""
        trip = self._trip(n) if n.collapse == 1 else self._collapsed_trip(n)
        return schedule_clause(n, self.omp_schedule, trip, bool(self.sequential_depth),
                               self._calls_inside(n))

    def _collapsed_trip(self, n: L.For) -> str | None:
        return collapsed_trip(n, self.loop_printer.index)

    def _trip(self, n: L.For) -> str | None:
        return trip_text(n, self.loop_printer.index)

    def _calls_inside(self, n: L.For) -> bool:
        return self.calls and any_node(n.body, lambda x: isinstance(x, L.StmtInstance)
                         and self.stmts[x.statement].kind == "intrinsic")

    def _for(self, n: L.For, body: c.Generable) -> c.For:
        ip = self.loop_printer.index
        it = loop_iterator_name(n.iterator)
        cond = n.cond
        if isinstance(cond, E.Binary) and cond.op in E.COMPARE_OPS:
            cond_text = f"{ip(cond.lhs)} {cond.op} {ip(cond.rhs)}"  # OpenMP canonical form
        else:
            cond_text = ip(cond)
        # the step is a positive constant from isl; `c += 8` adds in int64_t
        step = int(n.step)
        assert 0 < step < 2 ** 31, step
        block = c.Block(wins.loop_lines(self, n) + list(self._block(body).contents))
        return c.For(f"int64_t {it} = {ip(n.init)}", cond_text, f"{it} += {step}", block)

    def region(self, n: L.For) -> c.Generable | None:
        """Sequential loop ``n`` (a stencil's time loop, outside every other
        loop) inside one ``omp parallel`` region when its body is parallel
        nests alone (:func:`.loopshape.parallel_body`), each static (even
        work) and with no intrinsic call: every thread runs ``n`` and the
        nests are worksharing ``omp for`` loops whose implicit barriers
        order the steps, instead of a fork and join per nest and step
        (jacobi-2d LARGE 20% faster); ``None`` otherwise."""
        if (not self.REGIONS or n.parallel or n.simd or n.reduction or self.sequential_depth
                or self.parallel_depth or self.in_region):
            return None
        loops = parallel_body(n)
        if loops is None or any(self._calls_inside(x) for x in loops):
            return None
        self.sequential_depth += 1      # (the nests' clauses as inside ``n``)
        try:
            # static loops only: a dynamic worksharing loop in a region (lu's
            # k loop, seidel-2d's wavefronts) measured 5-10% slower than its
            # own region
            if any(self._schedule_clause(x) != "schedule(static)" for x in loops):
                return None
            self.in_region = True
            loop = self._for(n, self.node(n.body))
        finally:
            self.in_region = False
            self.sequential_depth -= 1
        return c.Module([c.Pragma("omp parallel num_threads(polyc_team)"), loop])

    # -- loops ------------------------------------------------------------------
    def node(self, n: L.Node) -> c.Generable:
        ip = self.loop_printer.index
        if isinstance(n, L.For):
            one = self.region(n)
            if one is not None:
                return one
        if (isinstance(n, L.For) and not n.parallel and self.COALESCE
                and id(n) not in self.collapsed and not wins.loop_lines(self, n)):
            flat = coalesce(n, self.stmts, self.extent_expr, self.loop_printer.index,
                            self.locals)
            if flat is not None:
                one = (self.simd_loop(flat) if flat.elementwise
                       else self.reduction_loop(flat.loop, statement=flat.statement))
                if one is not None:
                    return one
        if (isinstance(n, L.For) and self.OUTER_VECTOR and id(n) not in self.collapsed
                and not wins.loop_lines(self, n)):
            ov = outer_vector(n, self.stmts, self.dtypes, SIMD_MIN_TRIP)
            if ov is not None:
                return vector_loop(self, ov, SIMD_MIN_TRIP, self._loop(n))
        if isinstance(n, L.For) and n.reduction and not n.parallel:
            red = self.reduction_loop(n)
            if red is not None:
                return red
        if isinstance(n, L.For) and n.simd and not n.parallel and not wins.loop_lines(self, n):
            hoisted = self.hoisted_loop(n)
            if hoisted is not None:
                return hoisted
        if isinstance(n, L.For):
            return self._loop(n)
        if isinstance(n, L.If):
            other = None if n.otherwise is None else self._block(self.node(n.otherwise))
            return c.If(ip(n.cond), self._block(self.node(n.then)), other)
        if isinstance(n, L.Block):
            return c.Module([self.node(k) for k in n.children])
        if isinstance(n, L.StmtInstance):
            return self.statement(n)
        if isinstance(n, L.Local):
            return self.local(n)
        raise AssertionError(type(n))

    def _loop(self, n: L.For) -> c.Generable:
        """Loop ``n`` with its pragmas (parallel, simd, collapse), its
        body printed by :meth:`node`."""
        folded = False
        if n.parallel and n.collapse > 1:
            n, folded = fold_collapsed_simd(n)
        calls = self._calls_inside(n)
        if n.simd and calls:
            n = replace(n, simd=False)      # a call with its own threads: no simd
        if (n.simd or folded) and wins.computed_in(self, n):
            n, folded = replace(n, simd=False), False     # one window row per thread
        if n.parallel and calls and not self.parallel_depth and not self.splitting:
            # a parallel loop around intrinsic calls: each call on one
            # thread when the loop has an iteration per thread, else the
            # loop runs sequentially and each call uses the team (a
            # convolution of one image: one implicit GEMM)
            trip = self._trip(n)
            if trip is not None:
                self.splitting = True
                try:
                    par = self.node(n)
                finally:
                    self.splitting = False
                seq = self.node(replace(n, parallel=False, collapse=1))
                return c.If(f"{trip} >= polyc_team", c.Block([par]), c.Block([seq]))
        inner = n
        for _ in range(n.collapse - 1):      # (part of this loop's header)
            inner = perfect_child(inner)
            self.collapsed.add(id(inner))
        self.sequential_depth += not n.parallel
        self.parallel_depth += bool(n.parallel)
        try:
            loop = self._for(n, self.node(n.body))
        finally:
            self.sequential_depth -= not n.parallel
            self.parallel_depth -= bool(n.parallel)
        if n.parallel:
            simd = " simd" if n.simd or folded else ""
            collapse = f" collapse({n.collapse})" if n.collapse > 1 else ""
            if self.in_region:       # a worksharing loop of the region around it
                par = c.Module([c.Pragma(f"omp for{simd}{collapse} "
                                         f"{self._schedule_clause(n)}"), loop])
            else:
                par = c.Module([c.Pragma(f"omp parallel for{simd}{collapse} "
                                         f"{self._schedule_clause(n)} "
                                         "num_threads(polyc_team)"), loop])
            # (in a region a short loop is worksharing too: a barrier, no fork)
            big = None if self.in_region else self._long_enough(n)
            if big is None:
                return par
            seq = c.Module(([c.Pragma("omp simd")] if n.simd else []) + [loop])
            return c.If(big, c.Block([par]), c.Block([seq]))
        if n.simd:
            return c.Module([c.Pragma("omp simd"), loop])
        return loop

    def local(self, n: L.Local) -> c.Block:
        """``{ float t_A_local[32][32] __attribute__((aligned(64))); body }``."""
        assert n.name in self.locals and all(int(v) > 0 for v in n.sizes), n
        dims = "".join(f"[{int(v)}]" for v in n.sizes) or "[1]"
        decl = c.Line(f"{C_TYPES[n.dtype]} {tensor_name(n.name)}{dims} "
                      f"__attribute__((aligned({LOCAL_ALIGN})));")
        return c.Block([c.Comment(f"local buffer {check_identifier(n.name)}"), decl]
                       + list(self._block(self.node(n.body)).contents))

    @staticmethod
    def _block(g: c.Generable) -> c.Block:
        if isinstance(g, c.Module):  # (a cgen Module is a Block without braces)
            return c.Block(list(g.contents))
        if isinstance(g, c.Block):
            return g
        return c.Block([g])


#: Fewest iterations of a reduction loop that run vectorised (``omp simd
#: reduction``); shorter ones run sequentially (``_Emitter._by_trip``).
SIMD_MIN_TRIP = 16

#: Alignment (bytes) of local buffers: a cache line, and enough for AVX-512.
LOCAL_ALIGN = 64


def arguments(program: Program) -> list:
    """The tensors passed in ``polyc_buffers``, in order: every tensor but
    the local ones."""
    return [t for t in program.tensors if t.role != "local"]


def emit(program: Program, nest: L.Node, *, omp_schedule: str = "auto", windows=()) -> Source:
    """Generate the C source of ``program`` executing ``nest``; its parallel
    loops hand out iterations as ``omp_schedule`` (``Config.omp_schedule``:
    ``"auto"``, ``"dynamic"`` or ``"static"``; see ``_Emitter._schedule_clause``)
    says; ``windows``: the temporaries stored per thread
    (:func:`polyc.schedule.windows.thread_windows`)."""
    fn, blocks = emit_function(program, nest, ENTRY, omp_schedule=omp_schedule, windows=windows)
    header = f"/* polyc kernel for def {check_identifier(program.name)} */\n"
    text = header + PRELUDE + "".join(blocks) + "\n" + fn + "\n"
    return Source(text=text, entry=ENTRY, params=tuple(program.params),
                  tensors=tuple(t.name for t in arguments(program)))


def emit_function(program: Program, nest: L.Node, name: str, *, omp_schedule: str = "auto",
                  static: bool = False, windows=()) -> tuple[str, str]:
    """``(function, blocks)``: the C function ``name`` (the kernel ABI:
    ``(polyc_params, polyc_buffers, polyc_nthreads)``; ``static`` when
    asked) executing ``nest``, and the text blocks declaring the intrinsics
    it calls (each to print once before it).  :func:`emit` wraps one in a source;
    :mod:`.versions` several."""
    em = _Emitter(program, omp_schedule, wins.in_nest(windows, nest, program))
    em.function_name = name
    team = [c.Line("#ifdef _OPENMP"),
            c.Line("const int polyc_team = polyc_nthreads > 0 ? (int)polyc_nthreads "
                   ": omp_get_max_threads();"),
            c.Line("#endif"),
            c.Line("(void)polyc_nthreads;")]
    if em.calls:
        team += [c.Line("#ifdef _OPENMP"),
                 c.Line("const int polyc_threads = polyc_team;"),
                 c.Line("#else"),
                 c.Line("const int polyc_threads = 1;"),
                 c.Line("#endif"),
                 c.Line("(void)polyc_threads;")]
    fn = c.FunctionBody(
        c.FunctionDeclaration(c.Value("static void" if static else "void", name), [
            c.Value("const int64_t *restrict", "polyc_params"),
            c.Value("void *const *restrict", "polyc_buffers"),
            c.Value("int32_t", "polyc_nthreads")]),
        c.Block(em.prologue() + team + wins.prologue(em) + [em.node(nest)]))
    blocks = []
    fn = str(fn)
    decls = libmvec_declarations(fn + "".join(em.functions))
    if decls:
        blocks.append(decls)
    matches = [st.intrinsic for st in program.statements if st.kind == "intrinsic"]
    if any(isinstance(m, GemmMatch) for m in matches):
        # the interface only: the build step links the intrinsics library
        blocks.append("\n" + c_intrinsics.api_text() + "\n")
    for iname in sorted({m.intrinsic for m in matches if not isinstance(m, GemmMatch)}):
        intr = get_intrinsic(iname)    # a user intrinsic: its prototype, then its source
        blocks.append(f"\n{intr.prototype()};\n{intr.source('c')}\n")
    return fn, blocks + em.functions
