"""Affine loop programs written in Python: the ``@polyc.kernel`` frontend.

A decorated function's body is parsed with :mod:`ast` (never executed) and
lowered to an :class:`polyc.ir.Program` whose statements are the body's
assignments, each with its iteration domain (the enclosing ``range`` loops
and affine ``if`` conditions, as an ``isl.Set``), its access relations and,
in ``Program.order``, the source's execution order as a schedule tree
(imperfect nests, sequences of loops, negative steps).  The accepted subset
is a static control program (SCoP, Feautrier 1991; the class PolyBench and
Polly's SCoP detection accept):

* ``for v in range(lo, hi[, step])``, ``step`` an integer literal (either
  sign), ``lo``/``hi`` affine in enclosing loop variables and sizes
  (``+ - *`` by literals, ``//`` and ``%`` by positive literals, ``min``,
  ``max``);
* sizes from shape unpacking at the top level (``n, m = A.shape``,
  ``n = A.shape[0]``) or integer arguments (``tsteps``);
* array element assignments ``A[i, j] = v`` and ``+= -= *= /=`` with affine
  subscripts; local scalars assigned before use; float scalar arguments;
* ``if`` statements with affine conditions (``and``/``or``/``not``, chained
  comparisons); ``a if c else b`` on values; ``min max abs sqrt exp log pow``
  and their ``math.``/``np.`` spellings; ``**``.

Anything else raises :class:`~polyc.errors.UnsupportedError` with the file,
line and column of the construct and what is allowed instead.  Scalars are
expanded along the loops they do not carry a value across
(:mod:`polyc.expansion`), so they do not serialise the nest.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import islpy as isl
import numpy as np

from polyc import expr as E
from polyc.access import make_statement
from polyc.errors import DTypeError, ShapeError, UnsupportedError
from polyc.ir import Program, Tensor, is_float, loop_names_mark
from polyc.isl_util import CTX, NonAffineError, aff_from_expr, isl_safe_name, param_space, set_space

from .pyexprs import BINOPS, CMP, FUNCTIONS, MODULES, Expressions, Loop
from .pynarrow import wrap_narrow
from .pysource import ArgSpec, augmented_form, index_names, int_scalars, is_shape_read
from .pyunpack import shape_tuple, unpack_assignment
from .source import Span

_ALLOWED_STATEMENTS = ("for loops over range(...), if statements with affine conditions, "
                       "assignments to array elements (A[i, j] = ..., +=, -=, *=, /=) "
                       "and to local scalars")


@dataclass
class _Node:
    """The source's structure, for ``Program.order``: a loop (``loop`` set)
    or a block; ``items`` are child nodes and statement names in order."""
    loop: Loop | None = None
    items: list = field(default_factory=list)


class _Lowering:
    """One specialisation of a function to a Program (see :func:`lower`)."""

    def __init__(self, fn_ast: ast.FunctionDef, filename: str, line0: int, name: str,
                 specs: dict[str, ArgSpec], lines: list[str]):
        self.fn, self.filename, self.line0, self.name = fn_ast, filename, line0, name
        self.specs, self.lines = specs, lines
        self.params: list[str] = []            # size parameters, in order
        self.size_alias: dict[str, str] = {}   # floor = A.shape[0] is the size floor_
        self.bindings: dict[str, tuple | None] = {}
        self.arrays = {a: s for a, s in specs.items() if s.kind == "array"}
        # int arguments read only as values: int64 scalars, not sizes
        sized = index_names(fn_ast)
        self.int_values = {a for a, s in specs.items() if s.kind == "int" and a not in sized}
        self.floats = [a for a, s in specs.items() if s.kind == "float" or a in self.int_values]
        self.shape_param: dict[tuple[str, int], str] = {}
        self.scalars: dict[str, str] = {}      # local scalar -> tensor name
        self.statements = []
        self.written: set[str] = set()
        self.paths: dict[str, list[int]] = {}   # statement -> enclosing loops
        self.assigned_later: set[str] = set()
        # every name the body spells: what a renamed iterator must avoid
        self.taken = {n.id for n in ast.walk(fn_ast) if isinstance(n, ast.Name)} | set(specs)
        self.exprs = Expressions(self)
        dts = sorted({s.dtype for s in self.arrays.values()})
        floats = [d for d in dts if is_float(d)]
        self.value_dtype = (floats[0] if len(floats) == 1 else "float64") if floats else (
            dts[0] if len(dts) == 1 else "float64")
        # the local scalars of an integer program: integers where Python's
        # values are (int_scalars), float64 where one is a float (s = s / 4)
        self.int_scalars = set() if is_float(self.value_dtype) else int_scalars(fn_ast, specs)
        self.int_scalar_tensors: set[str] = set()

    # ---------------------------------------------------------------- errors
    def span(self, node: ast.AST) -> Span:
        line = self.line0 + getattr(node, "lineno", 1) - 1
        col = getattr(node, "col_offset", 0) + 1
        end = self.line0 + (getattr(node, "end_lineno", None) or node.lineno) - 1
        return Span(line, col, end, (getattr(node, "end_col_offset", None) or col) + 1,
                    self.filename)

    def fail(self, node: ast.AST, what: str, instead: str = "") -> UnsupportedError:
        sp = self.span(node)
        try:
            text = ast.unparse(node)
        except Exception:  # noqa: BLE001 (unparse of a fragment: best effort)
            text = ""
        src = self.lines[node.lineno - 1] if 0 < getattr(node, "lineno", 0) <= len(
            self.lines) else ""
        msg = f"{sp.filename}:{sp.line}:{sp.column}: {what}"
        if text and text not in what:
            msg += f": {text}"
        if instead:
            msg += f"; {instead}"
        if src.strip():
            msg += f"\n    {src.rstrip()}\n    {' ' * (node.col_offset)}^"
        return UnsupportedError(msg)

    # ---------------------------------------------------------------- sizes
    def prologue(self) -> list[ast.stmt]:
        """Reads the shape unpacking statements (anywhere at the top level);
        returns the remaining top-level statements."""
        rest = []
        for st in self.fn.body:
            if (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                    and isinstance(st.value.value, str)) or isinstance(st, ast.Pass):
                continue
            if isinstance(st, ast.Assign) and is_shape_read(st.value):
                self._unpack(st)
                continue
            if isinstance(st, ast.Assign) and shape_tuple(st):  # n, m = A.shape[0], B.shape[1]
                for one in unpack_assignment(self, st, []):
                    self._unpack(one)
                continue
            rest.append(st)
        for a, spec in self.specs.items():
            if spec.kind == "int" and a not in self.int_values:
                self._new_param(a, None, self.fn)
        for a, spec in self.arrays.items():
            for d in range(spec.ndim):
                if (a, d) not in self.shape_param:
                    self._new_param(self._fresh(f"{a}_dim{d}"), (a, d), self.fn)
        return rest

    def _fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.specs or name in self.params:
            name, k = f"{base}_{k}", k + 1
        return name

    def _new_param(self, name: str, src, node) -> None:
        if name in self.params:
            raise self.fail(node, f"size {name} is defined twice")
        self.params.append(name)
        self.bindings[name] = src
        if src is not None:
            self.shape_param[src] = name

    def _unpack(self, st: ast.Assign) -> None:
        if len(st.targets) != 1:
            raise self.fail(st, "chained assignment of a shape")
        target, value = st.targets[0], st.value
        if isinstance(value, ast.Subscript):
            arr = value.value.value.id
            dim = self.exprs.const_int(value.slice)
            targets = [target]
        else:
            arr, dim = value.value.id, None
            if not isinstance(target, (ast.Tuple, ast.List)):
                raise self.fail(st, "a whole shape assigned to one name",
                                f"unpack it: `n, m = {arr}.shape`, or `n = {arr}.shape[0]`")
            targets = list(target.elts)
        if arr not in self.specs:
            raise self.fail(value, f"{arr} is not an argument of the kernel")
        spec = self.specs[arr]
        if spec.kind != "array":
            raise DTypeError(f"{self.exprs.where(st)}: argument {arr} is unpacked as an array "
                             f"({ast.unparse(st)}), but the call passed a {spec.kind}")
        if dim is None and len(targets) != spec.ndim:
            raise ShapeError(f"{self.exprs.where(st)}: `{ast.unparse(st)}` unpacks "
                             f"{len(targets)} sizes, but argument {arr} has "
                             f"{spec.ndim} dimension(s)")
        dims = range(spec.ndim) if dim is None else [dim]
        for t, d in zip(targets, dims):
            if d < 0:
                d += spec.ndim
            if not 0 <= d < spec.ndim:
                raise ShapeError(f"{self.exprs.where(st)}: {arr}.shape[{dim}] does not exist: "
                                 f"argument {arr} has {spec.ndim} dimension(s)")
            if not isinstance(t, ast.Name):
                raise self.fail(t, "a shape unpacked into something other than a name")
            if t.id == "_":
                continue
            if t.id in self.specs:
                raise self.fail(t, f"size {t.id} has the name of an argument")
            if (arr, d) in self.shape_param:
                raise self.fail(t, f"{arr}.shape[{d}] is unpacked twice")
            name = isl_safe_name(t.id, self.taken)     # isl reads `floor` as a keyword
            if name != t.id:
                self.size_alias[t.id] = name
                self.taken.add(name)
            self._new_param(name, (arr, d), t)

    # ----------------------------------------------------------- statements
    def block(self, stmts: list[ast.stmt], loops: list[Loop], conds: list,
              node: _Node) -> None:
        for st in stmts:
            if isinstance(st, ast.For):
                self.loop(st, loops, conds, node)
            elif isinstance(st, ast.If):
                cond = self.condition(st.test, loops)
                self.block(st.body, loops, conds + [(cond, True)], node)
                if st.orelse:
                    self.block(st.orelse, loops, conds + [(cond, False)], node)
            elif isinstance(st, ast.Assign) and isinstance(st.targets[-1], (ast.Tuple, ast.List)):
                for one in unpack_assignment(self, st, loops):
                    self.assignment(one, loops, conds, node)
            elif isinstance(st, (ast.Assign, ast.AugAssign)):
                self.assignment(st, loops, conds, node)
            elif isinstance(st, ast.Pass) or (
                    isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                    and isinstance(st.value.value, str)):
                continue
            elif isinstance(st, ast.While):
                raise self.fail(st, "a while loop", "use `for v in range(lo, hi, step)` "
                                                   "with affine bounds")
            elif isinstance(st, ast.Return):
                raise self.fail(st, "a return statement",
                                "kernels update their array arguments in place and "
                                "return nothing")
            else:
                kind = type(st).__name__
                if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                    raise self.fail(st, f"a call to {ast.unparse(st.value.func)} as a "
                                        "statement", f"a kernel body holds {_ALLOWED_STATEMENTS}")
                raise self.fail(st, f"a {kind} statement",
                                f"a kernel body holds {_ALLOWED_STATEMENTS}")

    def loop(self, st: ast.For, loops, conds, parent: _Node) -> None:
        if not isinstance(st.target, ast.Name):
            raise self.fail(st.target, "a loop target that is not a single name")
        var = st.target.id
        it = st.iter
        backwards = (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                     and it.func.id == "reversed" and len(it.args) == 1 and not it.keywords)
        if backwards:
            it = it.args[0]
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and 1 <= len(it.args) <= 3 and not it.keywords):
            raise self.fail(it, "a loop over something other than range(...)",
                            "loop with `for v in range(lo, hi[, step])` or "
                            "`reversed(range(...))`")
        if st.orelse:
            raise self.fail(st, "a for ... else loop")
        if var in {lp.name for lp in loops}:
            raise self.fail(st.target, f"loop variable {var} reused inside a loop over {var}")
        if var in self.specs or var in self.params or var in self.scalars or var in self.size_alias:
            raise self.fail(st.target, f"loop variable {var} has the name of an argument, "
                                       "size or scalar")
        args = it.args
        lo = self.exprs.index_expr(args[0], loops) if len(args) >= 2 else E.Const(0)
        hi = self.exprs.index_expr(args[1] if len(args) >= 2 else args[0], loops)
        step = self.exprs.const_int(args[2]) if len(args) == 3 else 1
        if step == 0:
            raise self.fail(args[2], "a loop step of 0")
        if backwards:
            lo, hi, step = _reversed_range(lo, hi, step)
        lp = Loop(isl_safe_name(var, self.taken), lo, hi, step, source=var)
        child = _Node(loop=lp)
        parent.items.append(child)
        self.block(st.body, loops + [lp], conds, child)

    def condition(self, test: ast.AST, loops) -> ast.AST:
        # validate now (affine), build per statement later
        for n in ast.walk(test):
            if isinstance(n, ast.Subscript) or (isinstance(n, ast.Name) and (
                    n.id in self.arrays or n.id in self.scalars or n.id in self.floats)):
                raise self.fail(test, f"a data-dependent if condition (it reads "
                                      f"{ast.unparse(n)}, which holds data)",
                                "if conditions must be affine in loop variables and "
                                "sizes; for a data-dependent choice use `a if cond else b` "
                                "on the value")
        self._cond_set(test, loops, set_space(self.params, [lp.var for lp in loops], "c"))
        return test

    def _cond_set(self, test: ast.AST, loops, space: isl.Space) -> isl.Set:
        if isinstance(test, ast.BoolOp):
            sets = [self._cond_set(v, loops, space) for v in test.values]
            out = sets[0]
            for s in sets[1:]:
                out = out.intersect(s) if isinstance(test.op, ast.And) else out.union(s)
            return out
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._cond_set(test.operand, loops, space).complement()
        if isinstance(test, ast.Constant) and isinstance(test.value, bool):
            u = isl.Set.universe(space)
            return u if test.value else isl.Set.empty(space)
        if isinstance(test, ast.Compare):
            out = isl.Set.universe(space)
            left = test.left
            for op, right in zip(test.ops, test.comparators):
                if type(op) not in CMP:
                    raise self.fail(test, f"the comparison {type(op).__name__} in an if")
                a = self._aff(self.exprs.index_expr(left, loops), space, left)
                b = self._aff(self.exprs.index_expr(right, loops), space, right)
                rel = {ast.Lt: a.lt_set, ast.LtE: a.le_set, ast.Gt: a.gt_set,
                       ast.GtE: a.ge_set, ast.Eq: a.eq_set, ast.NotEq: a.ne_set}[type(op)]
                out = out.intersect(rel(b))
                left = right
            return out
        raise self.fail(test, "an if condition that is not a comparison of affine "
                              "expressions", "conditions compare loop variables and sizes "
                              "(and/or/not allowed); for a data-dependent choice use "
                              "`a if cond else b` on the value")

    def _aff(self, e: E.Expr, space: isl.Space, node: ast.AST) -> isl.PwAff:
        try:
            return aff_from_expr(e, space)
        except NonAffineError as err:
            raise self.fail(node, f"a non-affine expression ({err.reason})",
                            "indices, bounds and conditions must be affine in loop "
                            "variables and sizes") from None

    def assignment(self, st, loops, conds, node: _Node) -> None:
        # `x = x + e` is `x += e` when that is a reduction update (so the
        # reduction loop vectorises and a GEMM is matched as for `+=`)
        aug = augmented_form(st) if isinstance(st, ast.Assign) else None
        if aug is not None and (isinstance(aug.target, ast.Subscript)
                                or aug.target.id in self.scalars):
            lhs, rhs, op, kind, red = self._lower_assignment(aug, loops)
            if kind == "update":
                return self._statement(st, lhs, rhs, loops, conds, node, op, kind, red)
        lhs, rhs, op, kind, red = self._lower_assignment(st, loops)
        self._statement(st, lhs, rhs, loops, conds, node, op, kind, red)

    def _lower_assignment(self, st, loops) -> tuple:
        """``(lhs, rhs, op, kind, reduction iterators)`` of an assignment."""
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1:
                raise self.fail(st, "a chained assignment")
            target, op = st.targets[0], "="
        else:
            target = st.target
            op = "**" if isinstance(st.op, ast.Pow) else BINOPS.get(type(st.op))
            if op is None:
                raise self.fail(st, f"the augmented assignment {type(st.op).__name__}=",
                                "use = += -= *= /= //= %= **=")
        rhs = self.exprs.value_expr(st.value, loops)
        if isinstance(target, ast.Subscript):
            lhs = self.exprs.access(target, loops)
            self.written.add(lhs.tensor)
        elif isinstance(target, ast.Name):
            nm = target.id
            if nm in self.specs or nm in self.params or nm in self.size_alias or nm in {
                    lp.name for lp in loops}:
                raise self.fail(target, f"assignment to {nm}, which is an argument, size "
                                        "or loop variable",
                                "assign to array elements or to new local scalars")
            if op != "=" and nm not in self.scalars:
                raise self.fail(target, f"scalar {nm} is updated before it is assigned")
            if nm not in self.scalars:
                self.scalars[nm] = self._fresh(nm)
                if nm in self.int_scalars:
                    self.int_scalar_tensors.add(self.scalars[nm])
            lhs = E.Access(self.scalars[nm], (), self.span(target))
        else:
            raise self.fail(target, "an assignment target that is neither an array "
                                    "element nor a scalar name")
        kind, red = "assign", ()
        spec = self.arrays.get(lhs.tensor)
        int_target = (np.dtype(spec.dtype).kind in "iub" if spec is not None
                      else lhs.tensor in self.int_scalar_tensors)
        # an integer x += v of a float v stores int(x + v) at every step, as
        # Python does: no reduction, whose terms would be summed first
        truncating = int_target and not self.exprs._int_valued(rhs)
        # a half array's x += v rounds to half at every step, as numpy does
        # (a reduction would add the terms in float32 and round once)
        rounding = spec is not None and np.dtype(spec.dtype).name in ("float16", "bfloat16")
        ext = self._extremum(st.value, target, loops, int_target) if op == "=" else None
        if ext and lhs.tensor not in {a.tensor for a in E.accesses(ext[1])}:
            op, rhs, truncating = *ext, False
        if (op in ("+", "-", "*", "max", "min") and not truncating
                and not (rounding and op in "+-*")
                and lhs.tensor not in {a.tensor for a in E.accesses(rhs)}):
            # a reduction update (`acc += term`, the accumulator read nowhere
            # else in the statement): its terms may be reassociated, which
            # lets the reduction loop keep the accumulator in a register
            # under `omp simd reduction`; `x - y` is `x + (-y)` exactly
            kind = "update"
            red = tuple(lp.var for lp in loops
                        if lp.var not in set().union(*map(E.index_names, lhs.indices)))
            if op == "-":
                op, rhs = "+", E.Unary("-", rhs, self.span(st))
        elif op != "=":
            # `x op= v` is `x = x op v`, with Python's meaning of op (true
            # division of integers, // and % flooring, ** a power): the
            # value path spells those out
            value = ast.copy_location(ast.BinOp(left=target, op=st.op, right=st.value), st)
            rhs, op = self.exprs.value_expr(value, loops), "="
        return lhs, rhs, op, kind, red

    def _extremum(self, value: ast.AST, target: ast.AST, loops,
                  int_target: bool) -> tuple[str, E.Expr] | None:
        """``x = np.maximum(x, e)`` (``np.minimum``, either argument order;
        ``max``/``min`` of integers) as a ``max``/``min`` reduction update
        ``("max", e)``, the accumulator read nowhere in ``e``: numpy's
        NaN-propagating maximum is the update's (``polyc.ir.REDUCTION_OPS``),
        and rounding to the target's type commutes with it.  Python's ``max``
        of floats is ``fmax`` (a NaN is dropped), which no update computes."""
        if not (isinstance(value, ast.Call) and len(value.args) == 2 and not value.keywords):
            return None
        f = value.func
        name = (f.id if isinstance(f, ast.Name) else
                f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id in MODULES else None)
        fn = FUNCTIONS.get(name)
        mine = [ast.unparse(a) == ast.unparse(target) for a in value.args]
        if fn not in ("maximum", "minimum", "max", "min") or mine.count(True) != 1:
            return None
        e = self.exprs.value_expr(value.args[mine.index(False)], loops)
        int_e = self.exprs._int_valued(e)
        if (fn in ("max", "min") and not (int_target and int_e)) or (int_target and not int_e):
            return None
        return ("max" if fn in ("maximum", "max") else "min"), e

    def _numpy_dtype(self, tensor: str) -> str | None:
        """The numpy type of a tensor's values as ``py_func`` sees them (an
        array's dtype, a local scalar's), ``None`` for a Python scalar."""
        spec = self.arrays.get(tensor)
        if spec is not None:
            return spec.dtype
        for nm, t in self.scalars.items():
            if t == tensor:
                return self.value_dtype if is_float(self.value_dtype) or \
                    nm in self.int_scalars else "float64"
        return None

    def _statement(self, st, lhs, rhs, loops, conds, node: _Node, op: str = "=",
                   kind: str = "assign", red: tuple = ()) -> None:
        name = f"S{len(self.statements)}"
        iters = [lp.var for lp in loops]
        space = set_space(self.params, iters, name)
        dom = isl.Set.universe(space)
        ls = isl.LocalSpace.from_space(space)
        for d, lp in enumerate(loops):
            v = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
            lo = self._aff(lp.lower, space, st)
            hi = self._aff(lp.upper, space, st)
            if lp.step > 0:
                dom = dom.intersect(v.ge_set(lo)).intersect(v.lt_set(hi))
            else:
                dom = dom.intersect(v.le_set(lo)).intersect(v.gt_set(hi))
            if abs(lp.step) != 1:             # v = lo + step * e, e >= 0
                diff = v.sub(lo) if lp.step > 0 else lo.sub(v)
                dom = dom.intersect(diff.mod_val(isl.Val.int_from_si(CTX, abs(lp.step)))
                                    .zero_set())
        for test, positive in conds:
            c = self._cond_set(test, loops, space)
            dom = dom.intersect(c if positive else c.complement())
        dom = dom.coalesce()
        shapes = self.shapes()
        text = ast.unparse(st)
        rhs = wrap_narrow(rhs, self._numpy_dtype)
        try:
            s = make_statement(name=name, iterators=iters, domain=dom, lhs=lhs, op=op,
                               rhs=rhs, shapes=shapes, kind=kind, reduction_iterators=red,
                               text=text, span=self.span(st))
        except NonAffineError as err:
            sp = getattr(err.expr, "span", None)    # the caret at the culprit (k % n)
            at = next((n for n in ast.walk(st) if sp is not None and hasattr(n, "lineno")
                       and self.span(n) == sp), st)
            raise self.fail(at, f"a non-affine subscript ({err.reason})",
                            "subscripts must be affine in loop variables and sizes") from None
        self.statements.append(s)
        self.paths[name] = [id(lp) for lp in loops]
        node.items.append(name)

    # ----------------------------------------------------------- program
    @property
    def context(self) -> isl.Set:
        sp = param_space(self.params)
        ctx = isl.Set.universe(sp)
        for k in range(len(self.params)):
            ctx = ctx.lower_bound_val(isl.dim_type.param, k, isl.Val.zero(CTX))
        return ctx

    def shapes(self) -> dict:
        sp = param_space(self.params)
        ls = isl.LocalSpace.from_space(sp)
        out = {}
        for a, spec in self.arrays.items():
            out[a] = tuple(isl.PwAff.from_aff(isl.Aff.var_on_domain(
                ls, isl.dim_type.param, self.params.index(self.shape_param[(a, d)])))
                for d in range(spec.ndim))
        for a in self.floats:
            out[a] = ()
        for t in self.scalars.values():
            out[t] = ()
        return out

    def run(self) -> Program:
        body = self.prologue()
        self.assigned_later = _assigned_names(self.fn)
        root = _Node()
        self.block(body, [], [], root)
        if not self.statements:
            raise self.fail(self.fn, f"kernel {self.name} assigns nothing",
                            "a kernel updates array elements inside loops")
        shapes = self.shapes()
        tensors = []
        for a, spec in self.specs.items():
            if spec.kind == "array":
                role = "inout" if a in self.written else "input"
                tensors.append(Tensor(a, spec.dtype, shapes[a], role))
            elif a in self.int_values:
                tensors.append(Tensor(a, "int64", (), "input"))
            elif spec.kind == "float":
                # a float argument of an integer program is a double, as in Python
                tensors.append(Tensor(a, self.value_dtype if is_float(self.value_dtype)
                                      else "float64", (), "input"))
        for nm, t in self.scalars.items():
            dtype = self.value_dtype if is_float(self.value_dtype) or nm in self.int_scalars \
                else "float64"
            tensors.append(Tensor(t, dtype, (), "temp"))
        signature = tuple(self.specs)
        stmts = tuple(self.statements)
        prog = Program(name=self.name, params=tuple(self.params), context=self.context,
                       tensors=tuple(tensors), statements=stmts,
                       param_bindings=dict(self.bindings), signature=signature,
                       source=ast.unparse(self.fn))
        prog = prog.replace(order=_order_tree(prog, root))
        from polyc.expansion import expand_scalars
        return expand_scalars(prog, list(self.scalars.values()), self.paths)


def _reversed_range(lo: E.Expr, hi: E.Expr, step: int) -> tuple[E.Expr, E.Expr, int]:
    """``reversed(range(lo, hi, step))`` as ``range(last, lo -+ 1, -step)``:
    ``last = lo + step * ((hi - lo - 1) // step)`` for a positive step (``hi -
    1`` for 1), its mirror for a negative one; empty when the range is."""
    a, sign = abs(step), (1 if step > 0 else -1)
    one = E.Const(1)
    # the distance from lo to the range's last element, rounded down to a step
    span = E.Binary("-", E.Binary("-", hi, lo) if step > 0 else E.Binary("-", lo, hi), one)
    far = span if a == 1 else E.Binary("*", E.Const(a), E.Binary("/", span, E.Const(a)))
    last = E.Binary("+" if step > 0 else "-", lo, far)
    return last, E.Binary("-" if step > 0 else "+", lo, one), -sign * a


def _assigned_names(fn: ast.FunctionDef) -> set[str]:
    return {t.id for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)}


def _order_tree(prog: Program, root: _Node) -> isl.Schedule:
    """The source order as a schedule tree: a band per loop (one member,
    ``v`` or ``-v`` for a negative step, named by a ``loops:`` mark) and a
    sequence per block of several items."""
    stmts = {s.name: s for s in prog.statements}

    def under(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        return [n for it in node.items for n in under(it)]

    def build(node) -> isl.Schedule:
        if isinstance(node, str):
            return isl.Schedule.from_domain(isl.UnionSet.from_set(stmts[node].domain))
        parts = [build(it) for it in node.items]
        sched = parts[0]
        for p in parts[1:]:
            sched = sched.sequence(p)
        if node.loop is None:
            return sched
        names = under(node)
        umap = isl.UnionMap.empty(param_space(prog.params))
        for nm in names:
            s = stmts[nm]
            d = s.iterators.index(node.loop.var)
            sp = s.domain.get_space()
            ls = isl.LocalSpace.from_space(sp)
            aff = isl.Aff.var_on_domain(ls, isl.dim_type.set, d)
            if node.loop.step < 0:
                aff = aff.neg()
            umap = umap.union(isl.UnionMap.from_map(isl.Map.from_aff(aff)))
        mupa = isl.MultiUnionPwAff.from_union_map(umap)
        sched = sched.insert_partial_schedule(mupa)
        band = sched.get_root().child(0)
        return band.insert_mark(loop_names_mark([node.loop.var])).get_schedule()

    items = [it for it in root.items]
    return build(_Node(items=items))


def lower_specs(fdef, filename, line0, lines, specs, name) -> Program:
    return _Lowering(fdef, filename, line0, name, specs, lines).run()
