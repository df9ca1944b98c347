"""The polyhedral intermediate representation: :class:`Program`, the data
every frontend produces and every later stage consumes:

* size parameters and their context (an ``isl.Set`` of parameter values),
* tensors (name, dtype, role, shape as ``isl.PwAff`` over the parameters),
* statements: iteration domain (``isl.Set`` named after the statement, one
  dimension per index variable), the written access relation and the read
  access relations (``isl.Map``), the body (:mod:`polyc.expr`) and the
  reduction operator.

Frontends build statements with :func:`polyc.access.make_statement`.  Objects
are frozen.  :meth:`Program.fingerprint` is a program's content key;
:meth:`Program.rename_statements`, :meth:`Program.rename_tensors` and
:func:`merge_programs` serve planners that combine programs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Mapping, Sequence

import islpy as isl
import numpy as np

from . import expr as E
from .errors import DTypeError, ShapeError
from .isl_util import CTX, canonical_tree, param_space

#: Element types polyc compiles, by numpy name, with their C spelling (the
#: half-precision types are typedefs of each backend's prelude: ``_Float16``
#: and ``uint16_t`` bits in C, ``__half`` and ``__nv_bfloat16`` in CUDA).
C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
           "int8": "int8_t", "int16": "int16_t", "uint8": "uint8_t", "uint16": "uint16_t",
           "uint32": "uint32_t", "float16": "polyc_float16", "bfloat16": "polyc_bfloat16"}

#: Storage-only floating types: loaded into float32, computed in float32 (or
#: wider), rounded to nearest-even when stored (:func:`widen_half_reductions`).
HALF_DTYPES = ("float16", "bfloat16")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def compute_dtype(dtype: str) -> str:
    """The type values of ``dtype`` are computed in: float32 for the half
    types, ``dtype`` otherwise."""
    return "float32" if dtype in HALF_DTYPES else dtype


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a polyc dtype name; ``bfloat16`` comes from
    ml_dtypes (``pip install "polyc[bf16]"``), imported only here.  Raises
    :class:`~polyc.errors.ToolMissingError` without it."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            from .errors import ToolMissingError
            raise ToolMissingError(
                "bfloat16 needs the ml_dtypes package for its numpy dtype: "
                'pip install "polyc[bf16]" (or pip install ml_dtypes)') from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)

#: Reduction operators and their identities (TC's ``!`` initialisation).
REDUCTION_OPS = ("+", "*", "max", "min")


def identity(op: str, dtype: str) -> int | float:
    """The identity of reduction ``op`` for ``dtype`` (0, 1, -inf, +inf;
    integer types use their extreme values)."""
    integer = dtype in C_TYPES and not is_float(dtype)
    if op in ("+", "*"):
        return (int if integer else float)(op == "*")
    if integer:
        info = np.iinfo(dtype)
        return int(info.min) if op == "max" else int(info.max)
    return float("-inf") if op == "max" else float("inf")


@dataclass(frozen=True)
class Tensor:
    """A named array.  ``shape[d]`` is an ``isl.PwAff`` on the parameter space
    (the extent of dimension ``d``, in elements); ``role`` is ``"input"``,
    ``"output"``, ``"inout"`` (an argument read and updated in place:
    ``@polyc.kernel`` arrays), ``"temp"`` (scratch memory the runtime
    allocates per call and discards: an expanded scalar) or ``"local"`` (a
    buffer that exists only inside the generated code: a promoted
    footprint, :mod:`polyc.schedule.promotion`; constant extents, not an
    argument); ``dtype`` a key of :data:`C_TYPES`;
    ``origin``: the tensor a local buffer or a half accumulator stands for."""
    name: str
    dtype: str
    shape: tuple[isl.PwAff, ...]
    role: str
    origin: str | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def constant_shape(self) -> tuple[int, ...]:
        """The extents as integers (a local tensor's are constants)."""
        out = []
        for pa in self.shape:
            pieces = pa.get_pieces()
            if len(pieces) != 1 or not pieces[0][1].is_cst():
                raise ValueError(f"tensor {self.name}: extent {pa} is not a constant")
            out.append(int(pieces[0][1].get_constant_val().to_python()))
        return tuple(out)


@dataclass(frozen=True)
class Statement:
    """One statement of a program, executed once per point of ``domain``.

    ``lhs`` is the written element (an :class:`~polyc.expr.Access` whose
    indices are index variables); ``op`` is ``"="`` or a reduction operator of
    :data:`REDUCTION_OPS` (``lhs = lhs op rhs``).  ``kind`` is ``"assign"``,
    ``"init"`` (the identity initialisation of a ``!`` reduction),
    ``"update"`` (a reduction step), ``"copy"`` (a copy between a tensor
    and its local buffer, added by promotion) or ``"intrinsic"`` (a call of
    a hand-written intrinsic, added by :mod:`polyc.schedule.tensorize`:
    ``iterators`` are the loops around the call, ``write``/``reads`` the
    whole slices it touches).  ``write`` maps the domain to
    the written element; ``reads`` holds one access relation per tensor read,
    including the accumulation read of an update and the index tensors of
    gathers.
    """
    name: str
    iterators: tuple[str, ...]
    domain: isl.Set
    lhs: E.Access
    op: str
    rhs: E.Expr
    write: isl.Map
    reads: tuple[isl.Map, ...]
    kind: str = "assign"
    reduction_iterators: tuple[str, ...] = ()
    text: str = ""
    span: Any = field(default=None, compare=False, repr=False)
    #: for ``kind == "intrinsic"``: the match it calls (:mod:`polyc.intrinsics`)
    intrinsic: Any = field(default=None, compare=False, repr=False)

    @property
    def tensor(self) -> str:
        return self.lhs.tensor

    def read_tensors(self) -> list[str]:
        return [m.get_tuple_name(isl.dim_type.out) for m in self.reads]


@dataclass(frozen=True)
class Program:
    """A polyhedral program: the unit the scheduler and the backends see.

    ``params`` are the integer size parameters, ``context`` the parameter
    values the program is defined for (an ``isl.Set`` with no set dimensions),
    ``tensors`` inputs first (signature order) then outputs, ``statements`` in
    their original, sequential execution order.  ``param_bindings[p]`` is the
    ``(tensor, dim)`` whose extent binds ``p`` at call time, or ``None`` for a
    scalar size argument passed by the caller.  ``signature`` lists the call
    arguments in order: input tensor names and scalar size arguments (outputs
    are not arguments).  ``fixed_sizes`` maps size names that were specialised
    to constants (they are not parameters) to their values; the caller's
    arguments must agree with them.  ``preconditions`` is the set of parameter
    values for which every access stays in bounds (checked at call time);
    ``None`` means the context.  ``source`` is the text the program came from.
    ``order`` is the source's execution order when it is not "statements in
    sequence, each scanning its domain lexicographically" (imperfect loop
    nests, time loops, negative steps: :mod:`polyc.frontend.pyloops`): a
    schedule tree over every statement, bands named by ``loops:`` marks.
    """
    name: str
    params: tuple[str, ...]
    context: isl.Set
    tensors: tuple[Tensor, ...]
    statements: tuple[Statement, ...]
    param_bindings: dict = field(default_factory=dict, compare=False)
    signature: tuple[str, ...] = ()
    fixed_sizes: dict = field(default_factory=dict, compare=False)
    preconditions: isl.Set | None = None
    source: str = ""
    order: isl.Schedule | None = field(default=None, compare=False)

    def __getstate__(self) -> dict:
        """Pickling (the tuner ships programs to worker processes): the
        source order's ``isl.Schedule``, which islpy cannot pickle, travels
        as isl's text."""
        state = dict(self.__dict__)
        if state.get("order") is not None:
            state["order"] = ("isl-schedule", state["order"].to_str())
        return state

    def __setstate__(self, state: dict) -> None:
        order = state.get("order")
        if isinstance(order, tuple) and order[:1] == ("isl-schedule",):
            state = {**state, "order": isl.Schedule.read_from_str(CTX, order[1])}
        self.__dict__.update(state)

    def parameter_domain(self) -> isl.Set:
        """The parameter values the generated code may assume: the context
        intersected with the preconditions (a parameter set)."""
        ctx = self.context.params()
        if self.preconditions is not None:
            ctx = ctx.intersect(self.preconditions.params())
        return ctx

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.role == "output")

    @property
    def arguments(self) -> tuple[Tensor, ...]:
        """Tensors the caller passes: inputs and in-place arrays."""
        return tuple(t for t in self.tensors if t.role in ("input", "inout"))

    @property
    def locals(self) -> tuple[Tensor, ...]:
        """Local buffers (promotion): not arguments, not results."""
        return tuple(t for t in self.tensors if t.role == "local")

    def writers(self, tensor: str) -> tuple[str, ...]:
        """The statements that write ``tensor``, directly or through a local
        buffer or half accumulator of it (``origin``); copies left out."""
        names = {tensor} | {t.name for t in self.tensors
                            if t.role in ("local", "temp") and t.origin == tensor}
        return tuple(s.name for s in self.statements
                     if s.tensor in names and s.kind != "copy")

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    def domain(self) -> isl.UnionSet:
        """The union of all iteration domains."""
        u = isl.UnionSet.empty(param_space(self.params))
        for s in self.statements:
            u = u.union(isl.UnionSet.from_set(s.domain))
        return u

    def writes(self) -> isl.UnionMap:
        u = isl.UnionMap.empty(param_space(self.params))
        for s in self.statements:
            u = u.union(isl.UnionMap.from_map(s.write))
        return u

    def reads(self) -> isl.UnionMap:
        u = isl.UnionMap.empty(param_space(self.params))
        for s in self.statements:
            for r in s.reads:
                u = u.union(isl.UnionMap.from_map(r))
        return u

    def original_schedule(self) -> isl.Schedule:
        """The sequential execution order of the source: a sequence of the
        statements, each scanning its domain lexicographically."""
        return original_schedule(self)

    def replace(self, **kw) -> "Program":
        return replace(self, **kw)

    def fingerprint(self) -> str:
        """A SHA-256 hex digest of the program's content, stable across
        processes: name, parameters, context, tensors (name, dtype, role,
        origin, extents, in order), statements (name, kind, iterators,
        domain, access relations, body as an expression tree, reduction
        operator, the intrinsic a tensorized one calls), signature, size
        bindings, fixed sizes, preconditions (when they say more than the
        context) and ``order``: everything ``str(program)`` prints, and a
        little more.  Left out: ``source`` and each statement's ``text`` and
        spans (where the program came from, not what it computes).

        isl objects enter as isl's text after aligning their parameters to
        ``params`` (isl prints parameters in whatever order an object was
        built with); bodies enter as :func:`polyc.expr.canonical` trees, not
        as printed text.  Two equal sets built through different constraints
        may still print, hence hash, differently: equal fingerprints mean
        equal programs, not the converse."""
        return hashlib.sha256(json.dumps(_canonical(self), separators=(",", ":"))
                              .encode()).hexdigest()

    def rename_statements(self, mapping: Mapping[str, str]) -> "Program":
        """This program with statement ``old`` named ``mapping[old]`` (others
        unchanged): in its ``Statement``, the tuple of its domain and the
        domain tuple of its access relations, and in ``order``.  Statement
        names are isl tuple names, so isl sees the same program.  Raises
        ``KeyError`` for a name that is no statement, ``ValueError`` when
        two statements would share a name or a statement calls an intrinsic
        (tensorized programs are not renamed)."""
        mapping = _checked_renaming(mapping, [s.name for s in self.statements], "statement",
                                    self)
        if not mapping:
            return self
        stmts = []
        for s in self.statements:
            new = mapping.get(s.name)
            if new is not None:
                s = replace(s, name=new, domain=s.domain.set_tuple_name(new),
                            write=s.write.set_tuple_name(isl.dim_type.in_, new),
                            reads=tuple(r.set_tuple_name(isl.dim_type.in_, new)
                                        for r in s.reads))
            stmts.append(s)
        order = self.order
        if order is not None:
            # pull the tree back along { new[i] -> old[i] } (identity elsewhere)
            back = isl.UnionMap.empty(param_space(self.params))
            for s in self.statements:
                ident = isl.Map.identity(s.domain.get_space().map_from_set())
                back = back.union(isl.UnionMap.from_map(ident.set_tuple_name(
                    isl.dim_type.in_, mapping.get(s.name, s.name))))
            order = order.pullback_union_pw_multi_aff(
                isl.UnionPwMultiAff.from_union_map(back))
        return self.replace(statements=tuple(stmts), order=order)

    def rename_tensors(self, mapping: Mapping[str, str]) -> "Program":
        """This program with tensor ``old`` named ``mapping[old]``: in
        ``tensors`` (and a local buffer's ``origin``), the range tuple of
        every access relation, every read and write in the bodies, the
        signature and the size bindings.  Statements' source ``text`` is
        left as written.  Raises ``KeyError`` for a name that is no tensor,
        ``ValueError`` when two tensors would share a name or a statement
        calls an intrinsic."""
        mapping = _checked_renaming(mapping, [t.name for t in self.tensors], "tensor", self)
        if not mapping:
            return self

        def rel(m: isl.Map) -> isl.Map:
            old = m.get_tuple_name(isl.dim_type.out)
            return m.set_tuple_name(isl.dim_type.out, mapping[old]) if old in mapping else m

        tensors = tuple(replace(t, name=mapping.get(t.name, t.name),
                                origin=mapping.get(t.origin, t.origin)) for t in self.tensors)
        stmts = tuple(replace(s, lhs=E.rename_tensors(s.lhs, mapping),
                              rhs=E.rename_tensors(s.rhs, mapping), write=rel(s.write),
                              reads=tuple(rel(r) for r in s.reads))
                      for s in self.statements)
        bindings = {k: (mapping.get(v[0], v[0]), v[1]) if v is not None else None
                    for k, v in self.param_bindings.items()}
        return self.replace(tensors=tensors, statements=stmts, param_bindings=bindings,
                            signature=tuple(mapping.get(a, a) for a in self.signature))

    def __str__(self) -> str:
        from .printing import format_program
        return format_program(self)


def _isl_text(obj, space: isl.Space) -> str:
    """``obj`` aligned and printed without redundant constraints (which an
    isl object read back from its text, when pickled, may have lost; a
    tensor extent, a PwAff of the sizes alone, is only coalesced)."""
    obj = obj.align_params(space)
    if isinstance(obj, isl.PwAff):
        obj = obj.coalesce() if obj.get_domain_space().is_params() else isl.Map.from_pw_aff(obj)
    return (obj.remove_redundancies().coalesce() if isinstance(obj, (isl.Set, isl.Map))
            else obj).to_str()


def _canonical(p: Program) -> list:
    """The content :meth:`Program.fingerprint` hashes, as JSON lists."""
    space = param_space(p.params)
    ctx = p.context.params()
    pre = None
    if p.preconditions is not None and not p.preconditions.is_equal(ctx):
        pre = _isl_text(p.preconditions, space)
    tensors = [[t.name, t.dtype, t.role, t.origin, [_isl_text(d, space) for d in t.shape]]
               for t in p.tensors]
    stmts = [[s.name, s.kind, list(s.iterators), list(s.reduction_iterators), s.op,
              E.canonical(s.lhs), E.canonical(s.rhs), _isl_text(s.domain, space),
              _isl_text(s.write, space), [_isl_text(r, space) for r in s.reads],
              None if s.intrinsic is None else repr(s.intrinsic)]
             for s in p.statements]
    bindings = sorted([k, list(v) if v is not None else None]
                      for k, v in p.param_bindings.items())
    return ["polyc-program-1", p.name, list(p.params), _isl_text(ctx, space), tensors, stmts,
            list(p.signature), bindings, sorted([k, int(v)] for k, v in p.fixed_sizes.items()),
            pre, None if p.order is None else canonical_tree(p.order.get_root(), space)]


def _checked_renaming(mapping: Mapping[str, str], names: list[str], what: str,
                      program: Program) -> dict[str, str]:
    mapping = {k: v for k, v in mapping.items() if k != v}
    unknown = sorted(set(mapping) - set(names))
    if unknown:
        raise KeyError(f"program {program.name} has no {what} {unknown[0]!r}")
    if mapping and any(s.intrinsic is not None for s in program.statements):
        raise ValueError(f"program {program.name} calls intrinsics (it was tensorized); "
                         f"rename its {what}s before tensorization")
    renamed = [mapping.get(n, n) for n in names]
    clash = sorted({n for n in renamed if renamed.count(n) > 1})
    if clash:
        raise ValueError(f"renaming the {what}s of program {program.name} gives two "
                         f"{what}s named {clash[0]!r}")
    return mapping


#: Prefix of the mark nodes that name a band's loops (``loops:i,j``), above
#: the band; read and written by :mod:`polyc.schedule.tree`.
LOOP_NAMES_MARK = "loops:"


def loop_names_mark(names: Sequence[str]) -> isl.Id:
    """The ``isl.Id`` of the mark naming a band's loops ``names``."""
    return isl.Id(LOOP_NAMES_MARK + ",".join(names), context=CTX)


def _identity_band(domain: isl.Set) -> isl.MultiUnionPwAff:
    ident = isl.Map.identity(domain.get_space().map_from_set())
    ident = ident.reset_tuple_id(isl.dim_type.out)
    return isl.MultiUnionPwAff.from_union_map(isl.UnionMap.from_map(ident))


def original_schedule(program: Program) -> isl.Schedule:
    """The original execution order of ``program``: ``program.order`` when
    the frontend gave one, else a sequence node with one filter per statement
    (source order) and, below each, a band scanning the statement's
    iterators in order.  Bands are marked non-permutable and non-coincident:
    nothing about them has been proven."""
    if program.order is not None:
        return program.order
    domain = program.domain()
    sched = isl.Schedule.from_domain(domain)
    stmts = [s for s in program.statements]
    node = sched.get_root().child(0)
    if len(stmts) > 1:
        filters = isl.UnionSetList.alloc(CTX, len(stmts))
        for s in stmts:
            filters = filters.add(isl.UnionSet.from_set(
                isl.Set.universe(s.domain.get_space())))
        node = node.insert_sequence(filters)
        for k, s in enumerate(stmts):
            if s.domain.dim(isl.dim_type.set) > 0:
                node = node.child(k).child(0).insert_partial_schedule(
                    _identity_band(s.domain)).parent().parent()
    elif stmts and stmts[0].domain.dim(isl.dim_type.set) > 0:
        node = node.insert_partial_schedule(_identity_band(stmts[0].domain))
    return node.get_schedule()


def merge_programs(programs: Sequence[Program], *, prefixes: Sequence[str] | None = None,
                   outputs: Collection[str] | None = None, name: str | None = None) -> Program:
    """One program running ``programs`` one after the other (a producer
    before its consumers): the statements of each, in the given order.

    * Statement names: each program's get its prefix (``prefixes[k]``;
      default: ``"<program name>_"``, or ``"p<k>_"`` when two programs share
      a name), so that ``S0`` of two definitions never collide; a ``temp``
      tensor that another program also names gets the prefix too.
    * Parameters: the union, in order of appearance; same-named parameters
      are the same size.  Context: the intersection.  Preconditions:
      ``None`` (derived again from the merged program).
    * Tensors, united by name (dtype, rank and extents must agree): written
      by one program (its ``output``/``temp``) and read by a later one, a
      tensor becomes ``"temp"`` (runtime scratch, not returned) unless
      ``outputs`` names it.  ``outputs=None`` keeps as outputs the outputs
      that no other program reads; otherwise exactly the tensors in
      ``outputs`` are outputs, in that order.  Tensors nobody writes are
      inputs.  Order: inputs, in-place arrays, outputs, temporaries.
    * Signature: the programs' signatures united, without the tensors that
      became internal; a size bound only through such a tensor becomes a
      scalar size argument.  ``order``: when any program has one, the
      sequence of each program's order (or source order).

    Raises ``ValueError`` for programs that cannot be combined (a tensor
    written twice, read before it is written, a local buffer or an
    intrinsic call, an unknown name in ``outputs``), and
    :class:`~polyc.errors.ShapeError` / :class:`~polyc.errors.DTypeError`
    when the programs disagree on a tensor.
    """
    programs = list(programs)
    if not programs:
        raise ValueError("merge_programs: give at least one program")
    if prefixes is None:
        names = [p.name for p in programs]
        unique = len(set(names)) == len(names) and all(n.isidentifier() for n in names)
        prefixes = [f"{n}_" if unique else f"p{k}_" for k, n in enumerate(names)]
    elif len(prefixes) != len(programs):
        raise ValueError(f"merge_programs: {len(prefixes)} prefixes for {len(programs)} "
                         f"programs")
    for p in programs:
        if p.locals:
            raise ValueError(f"program {p.name} has local buffers (promotion); merge "
                             f"programs before scheduling them")
    # statements and colliding temporaries take the program's prefix
    renamed = []
    for k, (p, pre) in enumerate(zip(programs, prefixes)):
        others = {t.name for j, q in enumerate(programs) if j != k for t in q.tensors}
        p = p.rename_tensors({t.name: pre + t.name for t in p.tensors
                              if t.role == "temp" and t.name in others})
        renamed.append(p.rename_statements({s.name: pre + s.name for s in p.statements}))
    stmt_names = [s.name for p in renamed for s in p.statements]
    clash = sorted({n for n in stmt_names if stmt_names.count(n) > 1})
    if clash:
        raise ValueError(f"merge_programs: two statements would be named {clash[0]!r}; "
                         f"choose other prefixes")
    params = tuple(dict.fromkeys(q for p in renamed for q in p.params))
    space = param_space(params)
    context = isl.Set.universe(space).params()
    for p in renamed:
        context = context.intersect(p.context.params().align_params(space))

    # every tensor by name: (program index, tensor) in order of appearance
    seen: dict[str, list[tuple[int, Tensor]]] = {}
    for k, p in enumerate(renamed):
        for t in p.tensors:
            seen.setdefault(t.name, []).append((k, t))
    wanted = list(dict.fromkeys(outputs)) if outputs is not None else None
    roles: dict[str, str] = {}
    chosen: dict[str, Tensor] = {}
    for tname, entries in seen.items():
        writers = [(k, t) for k, t in entries if t.role in ("output", "temp", "inout")]
        first = writers[0][1] if writers else entries[0][1]
        for k, t in entries:
            if t.dtype != first.dtype:
                raise DTypeError(f"tensor {tname} is {first.dtype} in program "
                                 f"{programs[entries[0][0]].name} but {t.dtype} in "
                                 f"{programs[k].name}")
            if len(t.shape) != len(first.shape) or not all(
                    a.align_params(space).is_equal(b.align_params(space))
                    for a, b in zip(t.shape, first.shape)):
                raise ShapeError(f"tensor {tname} has different shapes in programs "
                                 f"{programs[entries[0][0]].name} and {programs[k].name}")
        if len(writers) > 1:
            raise ValueError(f"tensor {tname} is written by programs "
                             f"{programs[writers[0][0]].name} and {programs[writers[1][0]].name}")
        if writers and (first.role == "inout" and len(entries) > 1):
            raise ValueError(f"tensor {tname} is updated in place by program "
                             f"{programs[writers[0][0]].name}; it cannot be shared")
        if writers and entries[0][0] < writers[0][0]:
            raise ValueError(f"program {programs[entries[0][0]].name} reads tensor {tname} "
                             f"before program {programs[writers[0][0]].name} writes it; "
                             f"give the producer first")
        if not writers:
            role = "input"
        elif first.role == "inout":
            role = "inout"
        elif wanted is not None:
            role = "output" if tname in wanted else "temp"
        else:
            role = "output" if first.role == "output" and len(entries) == 1 else "temp"
        roles[tname] = role
        chosen[tname] = replace(first, role=role,
                                shape=tuple(d.align_params(space) for d in first.shape))
    if wanted is not None:
        unknown = [n for n in wanted if roles.get(n) != "output"]
        if unknown:
            raise ValueError(f"merge_programs: no program writes an output tensor "
                             f"{unknown[0]!r}")
    by_role = {r: [chosen[n] for n in seen if roles[n] == r]
               for r in ("input", "inout", "output", "temp")}
    if wanted is not None:
        by_role["output"] = [chosen[n] for n in wanted]
    tensors = tuple(by_role["input"] + by_role["inout"] + by_role["output"] + by_role["temp"])

    arguments = {n for n, r in roles.items() if r in ("input", "inout")}
    bindings: dict[str, tuple[str, int] | None] = {}
    for q in params:
        found = [p.param_bindings[q] for p in renamed if q in p.param_bindings]
        if found:
            bindings[q] = None if None in found else next(
                (b for b in found if b[0] in arguments), None)
    signature = [a for p in renamed for a in p.signature if a in arguments or a in params]
    signature += [q for q, b in bindings.items() if b is None]
    fixed: dict = {}
    for p in renamed:
        for k, v in p.fixed_sizes.items():
            if fixed.setdefault(k, v) != v:
                raise ValueError(f"size {k} is fixed to {fixed[k]} and to {v}")
    stmts = tuple(replace(s, domain=s.domain.align_params(space),
                          write=s.write.align_params(space),
                          reads=tuple(r.align_params(space) for r in s.reads))
                  for p in renamed for s in p.statements)
    order = None
    if any(p.order is not None for p in renamed):
        parts = [original_schedule(p) for p in renamed]
        order = parts[0]
        for part in parts[1:]:
            order = order.sequence(part)
    return Program(name=name or "_".join(p.name for p in programs), params=params,
                   context=context, tensors=tensors, statements=stmts,
                   param_bindings=bindings, signature=tuple(dict.fromkeys(signature)),
                   fixed_sizes=fixed, preconditions=None,
                   source="\n".join(dict.fromkeys(p.source for p in programs if p.source)),
                   order=order)
