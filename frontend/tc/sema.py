"""Semantic checks of one TC definition and its lowering to ``ir.Program``.

Takes a :class:`~.syntax.Def` (from :mod:`.parser`) and returns a
:class:`polyc.ir.Program`: size parameters and their context, input and
output tensors (output shapes and dtypes inferred), and one statement per
source statement (``S{k}``), preceded by an init statement ``S{k}_init`` for
a ``!`` reduction.  Names are resolved here (size, tensor, index variable,
builtin); ranges come from :mod:`.ranges`.  Every user mistake becomes a
:class:`~polyc.errors.SemanticError` (line, column, caret excerpt) or an
:class:`~polyc.errors.UnsupportedError` (a construct polyc does not compile,
with its location in the message).
"""

from __future__ import annotations

from collections.abc import Mapping

import islpy as isl
import numpy as np

from ... import access, bounds, ir
from ... import expr as E
from ...errors import SemanticError, ShapeError, UnsupportedError
from ...halfprec import widen_half_reductions
from ...isl_util import (
    NonAffineError,
    const_pw_aff,
    param_space,
    positive_constant,
    pw_aff_to_expr,
)
from ..source import Span, excerpt, span_text
from . import syntax as S
from .dtypes import promote
from .lets import expand_lets
from .literals import check_literals
from .ranges import (
    Range,
    RangeInferenceError,
    domain_box,
    empty_at_zero,
    guarded_reads,
    infer_ranges,
    is_zero,
    masked_domain,
    nonneg,
    nonneg_context,
    size_pw_aff,
    uses_of,
)

#: TC type keyword -> numpy dtype name, for the types polyc compiles.
DTYPES = {"float": "float32", "float32": "float32", "double": "float64",
          "float64": "float64", "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
          **{t: t for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")}}
#: Rank-0 arguments of these types are scalar size arguments (polyc).
SIZE_ARG_TYPES = ("int32", "int64")
#: TC's builtins (tc/lang/builtins.h, CUDA's math functions) polyc lacks: refused by name
TC_CUDA_BUILTINS = frozenset((
    "cospi sinpi cyl_bessel_i0 cyl_bessel_i1 erfcinv erfcx erfinv exp10 fdivide fma j0 j1 "
    "norm3d norm4d normcdf normcdfinv rcbrt rhypot rnorm3d rnorm4d y0 y1").split())
#: Assignment operator as written -> (operator, has '!').
OPS = {"=": ("=", False), "+=": ("+", False), "*=": ("*", False), "max=": ("max", False),
       "min=": ("min", False), "+=!": ("+", True), "*=!": ("*", True),
       "max=!": ("max", True), "min=!": ("min", True)}


class Reporter:
    """Builds located errors for one source text."""

    def __init__(self, source: str):
        self.source = source

    def semantic(self, span: Span, message: str) -> SemanticError:
        return SemanticError(message, line=span.line, column=span.column,
                             excerpt=excerpt(self.source, span), filename=span.filename)

    def unsupported(self, span: Span, message: str) -> UnsupportedError:
        ex = excerpt(self.source, span)
        return UnsupportedError(f"{span}: {message}" + (f"\n{ex}" if ex else ""))


class Signature:
    """The checked signature of a def: sizes, inputs, outputs, size arguments."""

    def __init__(self, defn: S.Def, rep: Reporter):
        self.inputs: dict[str, S.Param] = {}       # tensor arguments
        self.size_args: dict[str, S.Param] = {}    # rank-0 integer arguments
        self.sizes: list[str] = []                 # order of first appearance
        self.bindings: dict[str, tuple[str, int] | None] = {}
        seen: dict[str, Span] = {}
        for p in defn.params:
            if p.name in seen:
                raise rep.semantic(p.name_span, f"duplicate argument name '{p.name}'")
            seen[p.name] = p.name_span
            if p.type.rank == 0 and p.type.scalar in SIZE_ARG_TYPES:
                if p.name in self.bindings:
                    raise rep.semantic(p.name_span, f"'{p.name}' is already a size of "
                                       f"{self.bindings[p.name][0]}; a scalar size argument "
                                       "needs a name of its own")
                self.size_args[p.name] = p
                self._add_size(p.name, None)
                continue
            _check_type(p.type, p.name, rep)
            self.inputs[p.name] = p
            for d, dim in enumerate(p.type.dims):
                if isinstance(dim, S.SizeName):
                    if dim.name in self.size_args:
                        raise rep.semantic(dim.span, f"'{dim.name}' is a scalar size argument "
                                           "and cannot also be bound by a tensor shape")
                    self._add_size(dim.name, (p.name, d))
        for name, span in seen.items():
            if name in self.bindings and name not in self.size_args:
                raise rep.semantic(span, f"'{name}' is both a size and an argument name")
        self.outputs: dict[str, S.Output] = {}
        for o in defn.outputs:
            if o.name in self.outputs:
                raise rep.semantic(o.name_span, f"output '{o.name}' is listed twice")
            if o.name in seen or o.name in self.bindings:
                what = "an input" if o.name in self.inputs else "a size"
                raise rep.semantic(o.name_span, f"output '{o.name}' has the name of {what}; "
                                   "outputs need names of their own")
            if o.type is not None:
                _check_type(o.type, o.name, rep)
                for dim in o.type.dims:
                    if isinstance(dim, S.SizeName) and dim.name not in self.bindings:
                        raise rep.semantic(dim.span, f"size '{dim.name}' of output "
                                           f"'{o.name}' is not bound by any input")
            self.outputs[o.name] = o
        self.signature = tuple(p.name for p in defn.params)

    def _add_size(self, name: str, binding) -> None:
        if name not in self.bindings:
            self.sizes.append(name)
            self.bindings[name] = binding

    def is_tensor(self, name: str) -> bool:
        return name in self.inputs or name in self.outputs


def _check_type(t: S.TensorType, name: str, rep: Reporter) -> None:
    if t.scalar not in DTYPES:
        raise rep.unsupported(t.span, f"type '{t.scalar}' of '{name}' is not supported "
                              f"(polyc compiles {', '.join(DTYPES)})")
    if DTYPES[t.scalar] == "bfloat16":
        ir.numpy_dtype("bfloat16")  # ml_dtypes registers its numpy dtype, or a clear error


# ------------------------------------------------------- specialisation
def _dim_size(sig_params: Mapping[str, S.Param], e: S.DimOf) -> str | None:
    p = sig_params.get(e.name)
    if p is not None and e.dim < p.type.rank and isinstance(p.type.dims[e.dim], S.SizeName):
        return p.type.dims[e.dim].name
    return None


def specialization_sites(defn: S.Def) -> list[tuple[str, Span]]:
    """``(size, span)`` for every size that isl cannot keep symbolic: a size
    multiplying an index variable (``h*S + kh``) in an index expression, a
    divisor of ``/`` or ``%`` there, or the right factor of a product of two
    sizes in an index or a ``where`` bound."""
    defn = expand_lets(defn, defn.source)
    params = {p.name: p for p in defn.params}
    sizes = {d.name for p in defn.params for d in p.type.dims if isinstance(d, S.SizeName)}
    sizes |= {p.name for p in defn.params if p.type.rank == 0 and p.type.scalar in SIZE_ARG_TYPES}
    tensors = {p.name for p in defn.params if p.name not in sizes} | {o.name for o in defn.outputs}
    sites: list[tuple[str, Span]] = []

    def size_names(e):
        out = []
        for n in S.walk(e):
            name = n.name if isinstance(n, S.Name) and n.name in sizes else (
                _dim_size(params, n) if isinstance(n, S.DimOf) else None)
            if name and name not in out:
                out.append(name)
        return out

    def has_index(e):
        return any(isinstance(n, S.Name) and n.name not in sizes and n.name not in tensors
                   for n in S.walk(e))

    def reads(e):
        return any(isinstance(n, S.Apply) and n.name in tensors for n in S.walk(e))

    def scan(e, in_index: bool) -> None:
        if isinstance(e, S.Apply) and e.name in tensors:
            for a in e.args:
                scan(a, not reads(a))  # a gather position only matters inside
            return
        if in_index and isinstance(e, S.Binary) and e.op == "*":
            li, ri = has_index(e.lhs), has_index(e.rhs)
            if li and not ri:
                sites.extend((n, e.span) for n in size_names(e.rhs))
            elif ri and not li:
                sites.extend((n, e.span) for n in size_names(e.lhs))
            elif not li and not ri and size_names(e.lhs):
                sites.extend((n, e.span) for n in size_names(e.rhs))
        if in_index and isinstance(e, S.Binary) and e.op in ("/", "%"):
            sites.extend((n, e.span) for n in size_names(e.rhs))
        for c in S.children(e):
            scan(c, in_index)

    for st in defn.statements:
        scan(st.rhs, False)
        for w in st.where:
            if isinstance(w, S.RangeConstraint):
                scan(w.lo, True)
                scan(w.hi, True)
            else:
                scan(w.expr, False)
    return sites


def needs_specialization(defn: S.Def) -> frozenset[str]:
    """Size names that must be compile-time constants (``fixed_sizes`` of
    :func:`lower`) because isl cannot represent their products parametrically."""
    return frozenset(name for name, _ in specialization_sites(defn))


# ------------------------------------------------------------- lowering
def lower(defn: S.Def, fixed_sizes: Mapping[str, int] | None = None,
          source: str = "") -> ir.Program:
    """Check ``defn`` and lower it to a :class:`polyc.ir.Program`.

    ``fixed_sizes`` maps size names to integers that are substituted
    everywhere (indices, ranges, values, input shapes); those sizes are then
    not isl parameters and are recorded in ``Program.fixed_sizes``.  Names the
    def does not have are ignored.  ``source`` is the whole text (by default
    the text ``defn`` was parsed from).  Raises SemanticError,
    UnsupportedError (also when a size of :func:`needs_specialization` is not
    fixed), or ShapeError for a negative fixed size.
    """
    source = source or defn.source
    return _Lowering(expand_lets(defn, source), fixed_sizes or {}, source).run()


class _Lowering:
    """State of lowering one def: tensors known so far, their shapes, dtypes."""

    def __init__(self, defn: S.Def, fixed_sizes: Mapping[str, int], source: str):
        self.defn, self.source = defn, source
        self.rep = Reporter(source)
        self.sig = Signature(defn, self.rep)
        self.fixed: dict[str, int] = {}
        for name, value in fixed_sizes.items():
            if name in self.sig.bindings:
                if int(value) < 0 or int(value) != value:
                    raise ShapeError(f"fixed size {name}={value} must be a non-negative integer")
                self.fixed[name] = int(value)
        for name, span in specialization_sites(defn):
            if name not in self.fixed:
                raise self.rep.unsupported(span, f"'{_text(source, span)}' needs the value "
                                           f"of size '{name}': isl cannot represent this "
                                           "product or division with a symbolic size; pass "
                                           f"fixed_sizes={{'{name}': ...}} to specialise it")
        self.params = tuple(s for s in self.sig.sizes if s not in self.fixed)
        self.context = nonneg_context(self.params)
        self.shapes: dict[str, tuple] = {}
        self.dtypes: dict[str, str] = {}
        for name, p in self.sig.inputs.items():
            self.shapes[name] = tuple(self._dim(d) for d in p.type.dims)
            self.dtypes[name] = DTYPES[p.type.scalar]
        for name, o in self.sig.outputs.items():
            if o.type is not None:
                self.dtypes[name] = DTYPES[o.type.scalar]
                if o.type.dims:
                    self.shapes[name] = tuple(self._dim(d) for d in o.type.dims)
        self.defined: set[str] = set()

    def _dim(self, d: S.Dim):
        space = param_space(self.params)
        if isinstance(d, S.SizeConst):
            return const_pw_aff(space, d.value)
        if d.name in self.fixed:
            return const_pw_aff(space, self.fixed[d.name])
        return size_pw_aff(E.Param(d.name), self.params)

    # -- the def
    def run(self) -> ir.Program:
        statements: list[ir.Statement] = []
        for k, st in enumerate(self.defn.statements):
            statements += self._statement(k, st)
        for o in self.defn.outputs:
            if o.name not in self.defined:
                raise self.rep.semantic(o.name_span, f"output '{o.name}' is never written; "
                                        "add a statement that defines it")
        tensors = [ir.Tensor(n, self.dtypes[n], self.shapes[n], "input")
                   for n in self.sig.inputs]
        tensors += [ir.Tensor(o.name, self.dtypes[o.name], self.shapes[o.name], "output")
                    for o in self.defn.outputs]
        program = ir.Program(
            name=self.defn.name, params=self.params, context=self.context,
            tensors=tuple(tensors), statements=tuple(statements),
            param_bindings={p: self.sig.bindings[p] for p in self.params},
            signature=self.sig.signature, fixed_sizes=dict(self.fixed), source=self.source)
        program = widen_half_reductions(program)    # float32 accumulators for half outputs
        # parameter values keeping every access in bounds (None: all of them);
        # an empty set (no size works) is kept: every call raises ShapeError
        return program.replace(preconditions=bounds.preconditions_or_none(program))

    # -- one statement
    def _statement(self, k: int, st: S.Statement) -> list[ir.Statement]:
        rep, sig, T = self.rep, self.sig, st.tensor
        if T in sig.inputs or T in sig.size_args:
            raise rep.semantic(st.lhs_span, f"cannot write to input '{T}'; inputs are read-only")
        if T in sig.bindings:
            raise rep.semantic(st.lhs_span, f"cannot write to '{T}': it is a size, not a tensor")
        if T not in sig.outputs:
            raise rep.semantic(st.lhs_span, f"'{T}' is written but not declared as an output; "
                               f"add it to '-> (...)'")
        lhs_vars = self._lhs_vars(st)
        op, bang = OPS[st.op]
        known = self.shapes.get(T)
        if known is not None and len(known) != len(lhs_vars):
            raise rep.semantic(st.lhs_span, f"'{T}' has rank {len(known)} but is written "
                               f"with {len(lhs_vars)} indices")
        rhs = self._expr(st.rhs, "value")
        where: dict[str, Range] = {}
        exists: list[E.Expr] = []
        for w in st.where:
            if isinstance(w, S.Exists):
                exists.append(self._expr(w.expr, "value"))
                continue
            if w.var in where:
                raise rep.semantic(w.var_span, f"index variable '{w.var}' has two where ranges")
            if w.var in sig.bindings or sig.is_tensor(w.var):
                raise rep.semantic(w.var_span, f"'{w.var}' is not an index variable; where "
                                   "clauses give ranges to index variables")
            where[w.var] = Range(self._bound(w.lo), self._bound(w.hi))
        order = list(lhs_vars)
        for e in (rhs, *exists):
            for n in e.walk():
                if isinstance(n, E.Index) and n.name not in order:
                    order.append(n.name)
        for w in st.where:
            if isinstance(w, S.RangeConstraint) and w.var not in order:
                raise rep.semantic(w.var_span, f"where clause gives a range to '{w.var}', "
                                   "which the statement does not use")
        red = [v for v in order if v not in lhs_vars]
        if red and op == "=":
            raise rep.semantic(st.op_span, f"index variable '{red[0]}' appears only on the "
                               "right-hand side, so it is a reduction index; use a reduction "
                               "operator such as '+=!' (or '+=', 'max=!', ...) instead of '='")
        if op != "=" and not bang and T not in self.defined:
            raise rep.semantic(st.op_span, f"'{st.op}' accumulates into '{T}', which no earlier "
                               f"statement defines; use '{st.op}!' to start from the identity "
                               f"of {op}")
        lhs = E.Access(T, tuple(E.Index(v, i.span) for v, i in zip(lhs_vars, st.indices)),
                       st.lhs_span)
        uses = []
        for acc, guards in guarded_reads(rhs) + [(a, ()) for e in exists
                                                 for a in E.accesses(e)]:
            uses += uses_of(acc, self.shapes[acc.tensor], guards)
        if known is not None:
            uses += uses_of(lhs, known)
        ranges = self._infer(st, order, uses, where)
        if T not in self.defined:
            self._define(st, lhs_vars, ranges, rhs)
        check_literals(rhs, self.dtypes[T], T, self.rep.semantic, self.source,
                       self.defn.span)
        return self._build(k, st, lhs, op, bang, rhs, lhs_vars, red, ranges)

    def _lhs_vars(self, st: S.Statement) -> list[str]:
        out: list[str] = []
        for idx in st.indices:
            if (not isinstance(idx, S.Name) or idx.name in self.sig.bindings
                    or self.sig.is_tensor(idx.name)):
                raise self.rep.semantic(idx.span, "left-hand side indices must be distinct index "
                                        f"variables, got '{_text(self.source, idx.span)}'")
            if idx.name in out:
                raise self.rep.semantic(idx.span, f"index variable '{idx.name}' appears twice on "
                                        "the left-hand side")
            out.append(idx.name)
        return out

    def _infer(self, st: S.Statement, order, uses, where) -> dict[str, Range]:
        try:
            return infer_ranges(order, self.params, self.context, uses, where).ranges
        except NonAffineError as err:
            span = getattr(err.expr, "span", None) or st.span
            hint = ("; index arithmetic is already 64-bit integers: drop the cast (a cast in "
                    "an index is a gather only around a tensor read)") if isinstance(
                err.expr, E.Call) and err.expr.fn.startswith("cast_") else ""
            raise self.rep.unsupported(span, f"index expression '{E.to_text(err.expr)}' is not "
                                       f"affine ({err.reason}); polyc needs affine indices "
                                       f"or gathers{hint}") from None
        except RangeInferenceError as err:
            parts = []
            if err.guarded:
                parts.append("a read under a '?:' condition bounds it only where the condition "
                             "holds, which leaves it unbounded: "
                             + ", ".join(u.text() for u in err.guarded))
            if err.uses:
                parts.append(f"every {'other ' if err.guarded else ''}access argument using it "
                             "also has another unresolved variable: "
                             + ", ".join(u.text() for u in err.uses))
            where_ = "; ".join(parts) or "it is used in no tensor access"
            raise self.rep.semantic(st.span, f"cannot infer the range of index variable "
                                    f"'{err.var}': {where_}; add 'where {err.var} in LO:HI'"
                                    ) from None

    def _define(self, st: S.Statement, lhs_vars, ranges, rhs: E.Expr) -> None:
        """First write of ``st.tensor``: its shape and dtype."""
        T = st.tensor
        if T not in self.shapes:
            shape = []
            for v, idx in zip(lhs_vars, st.indices):
                r = ranges[v] = empty_at_zero(ranges[v], self.context, self.params)
                if not is_zero(r.lo, self.context, self.params):
                    raise self.rep.semantic(idx.span, f"the inferred range of '{v}' starts at "
                                            f"{_pw_text(r.lo, self.context)}, not 0, so it "
                                            f"cannot give the extent of output '{T}'; add "
                                            f"'where {v} in 0:...' or shift the indices")
                shape.append(nonneg(r.hi, self.context, self.params))
            self.shapes[T] = tuple(shape)
        if T not in self.dtypes:
            self.dtypes[T] = promote(rhs, self.dtypes)
        self.defined.add(T)

    def _build(self, k, st, lhs, op, bang, rhs, lhs_vars, red, ranges):
        text = span_text(self.source, st.span)
        out = []
        try:
            if bang:
                name = f"S{k}_init"
                out.append(access.make_statement(
                    name=name, iterators=lhs_vars, span=st.span, text=text,
                    domain=domain_box(name, lhs_vars, ranges, self.params), lhs=lhs, op="=",
                    rhs=E.Const(ir.identity(op, self.dtypes[st.tensor])), shapes=self.shapes,
                    kind="init"))
            out.append(access.make_statement(
                name=f"S{k}", iterators=lhs_vars + red, span=st.span, text=text,
                domain=masked_domain(f"S{k}", lhs_vars + red, ranges, self.params,
                                     rhs if bang and op == "+" else None), lhs=lhs, op=op,
                rhs=rhs, shapes=self.shapes, kind="assign" if op == "=" else "update",
                reduction_iterators=red))
        except NonAffineError as err:
            span = getattr(err.expr, "span", None) or st.span
            raise self.rep.unsupported(span, f"index expression '{E.to_text(err.expr)}' is not "
                                       f"affine ({err.reason})") from None
        return out

    # -- expressions
    def _expr(self, e: S.Expr, where: str) -> E.Expr:
        """Resolve names in ``e``; ``where`` is ``"value"`` or ``"index"``."""
        rep, sig = self.rep, self.sig
        if isinstance(e, S.Number):
            return E.Const(e.value, e.span)
        if isinstance(e, S.Name):
            if e.name in self.fixed:
                return E.Const(self.fixed[e.name], e.span)
            if e.name in sig.bindings:
                return E.Param(e.name, e.span)
            if sig.is_tensor(e.name):
                self._check_read(e.name, 0, e.span, where)
                return E.Access(e.name, (), e.span)
            return E.Index(e.name, e.span)
        if isinstance(e, S.Apply):
            if sig.is_tensor(e.name):
                self._check_read(e.name, len(e.args), e.span, where)
                return E.Access(e.name, tuple(self._expr(a, "index") for a in e.args), e.span)
            if e.name in E.BUILTINS:
                if len(e.args) != E.BUILTINS[e.name]:
                    raise rep.semantic(e.span, f"builtin '{e.name}' takes {E.BUILTINS[e.name]} "
                                       f"argument(s), got {len(e.args)}")
                inner = "value" if e.name.startswith("cast_") else where  # A(int32(B(i)))
                return E.Call(e.name, tuple(self._expr(a, inner) for a in e.args), e.span)
            if e.name in TC_CUDA_BUILTINS:
                raise rep.unsupported(e.name_span, f"TC's builtin '{e.name}' is not supported "
                                      "by polyc (its builtins: docs/tc-language.md)")
            raise rep.semantic(e.name_span, f"unknown tensor or function '{e.name}'")
        if isinstance(e, S.DimOf):
            return self._dim_of(e)
        if isinstance(e, S.Unary):
            return E.Unary(e.op, self._expr(e.operand, where), e.span)
        if isinstance(e, S.Binary):
            return E.Binary(e.op, self._expr(e.lhs, where), self._expr(e.rhs, where), e.span)
        if isinstance(e, S.Ternary):
            return E.Select(self._expr(e.cond, where), self._expr(e.then, where),
                            self._expr(e.otherwise, where), e.span)
        assert isinstance(e, S.Cast), e
        if (fn := f"cast_{DTYPES.get(e.type)}") in E.BUILTINS:   # int8(x) ... float64(x)
            return E.Call(fn, (self._expr(e.operand, "value"),), e.span)
        raise rep.unsupported(e.span, f"the cast '{_text(self.source, e.span)}' is not supported"
                              ": polyc converts to float, double, int8 ... int64, uint8 ... "
                              "uint32 (store half values through a half output type)")

    def _check_read(self, name: str, n: int, span: Span, where: str) -> None:
        if name in self.sig.outputs and name not in self.defined:
            raise self.rep.semantic(span, f"'{name}' is read before any statement defines it")
        rank = len(self.shapes[name])
        if n != rank:
            raise self.rep.semantic(span, f"'{name}' has rank {rank} but is read with {n} "
                                    f"ind{'ex' if n == 1 else 'ices'}")
        if where == "index" and np.dtype(self.dtypes[name]).kind not in "iu":
            raise self.rep.semantic(span, f"'{name}' is read inside an index (a gather) but "
                                    f"holds {self.dtypes[name]} values; index tensors must "
                                    "be integers (int8 ... int64, uint8 ... uint32)")

    def _dim_of(self, e: S.DimOf) -> E.Expr:
        shape = self._dim_pw_aff(e)
        if e.name in self.sig.inputs:
            d = self.sig.inputs[e.name].type.dims[e.dim]
            return self._expr(S.Name(d.name, e.span) if isinstance(d, S.SizeName)
                              else S.Number(str(d.value), d.value, e.span), "value")
        expr = pw_aff_to_expr(shape, self.context)
        return E.map_expr(expr, lambda x: E.Param(x.name, e.span)
                          if isinstance(x, E.Index) else None)

    def _dim_pw_aff(self, e: S.DimOf):
        if not self.sig.is_tensor(e.name):
            raise self.rep.semantic(e.span, f"'{e.name}' is not a tensor")
        if e.name in self.sig.outputs and e.name not in self.defined:
            raise self.rep.semantic(e.span, f"'{e.name}' has no shape yet: no earlier "
                                    "statement defines it")
        shape = self.shapes[e.name]
        if e.dim >= len(shape):
            raise self.rep.semantic(e.span, f"'{e.name}' has rank {len(shape)}, so it has no "
                                    f"dimension {e.dim}")
        return shape[e.dim]

    def _bound(self, e: S.Expr):
        """A ``where`` bound: an integer size expression, as a PwAff."""
        rep = self.rep
        if isinstance(e, S.DimOf):
            return self._dim_pw_aff(e)
        if isinstance(e, S.Number) and isinstance(e.value, int):
            return const_pw_aff(param_space(self.params), e.value)
        if isinstance(e, S.Name) and e.name in self.sig.bindings:
            return self._dim(S.SizeName(e.name, e.span))
        if isinstance(e, S.Unary) and e.op == "-":
            return self._bound(e.operand).neg()
        if isinstance(e, S.Binary) and e.op in ("+", "-", "*", "/", "%"):
            a, b = self._bound(e.lhs), self._bound(e.rhs)
            if e.op == "+":
                return a.add(b)
            if e.op == "-":
                return a.sub(b)
            if e.op == "*" and (a.is_cst() or b.is_cst()):
                return b.mul(a) if a.is_cst() else a.mul(b)
            # a positive constant divisor: a literal, or a size fixed by specialization
            div = positive_constant(b)
            if e.op in ("/", "%") and div is not None:
                if e.op == "/":
                    return a.div(b).floor()
                return a.mod_val(isl.Val.int_from_si(a.get_ctx(), div))
            why = "affine in the sizes"
            if e.op in ("/", "%"):
                pieces = b.get_pieces() if b.is_cst() else []
                why += (f" (its divisor is {pieces[0][1].get_constant_val()}: "
                        if len(pieces) == 1 else " (")
                why += ("a division or remainder needs a positive literal divisor or a size "
                        "fixed to a positive value by specialization)")
            raise rep.unsupported(e.span, f"range bound '{_text(self.source, e.span)}' is not "
                                  + why)
        raise rep.semantic(e.span, f"range bound '{_text(self.source, e.span)}' is not a size "
                           "expression (integers, sizes, T.d, + - * / %); index variables and "
                           "tensor reads are not allowed there")


def _pw_text(pa, context) -> str:
    return E.to_text(pw_aff_to_expr(pa, context))


def _text(source: str, span: Span) -> str:
    return span_text(source, span) or "?"
