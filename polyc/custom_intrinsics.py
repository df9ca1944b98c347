"""User-defined intrinsics: a polyhedral description, a C implementation,
and the matching of statements onto them.

``register(name, description, implementations)`` adds an intrinsic the
schedule language can ask for (``schedule.tensorize(loop, name)``):

* ``description``: one TC definition with one statement, e.g. the 8 x 8
  outer product ``def outer8(float(8) a, float(8) b) -> (c) { c(i, j) +=
  a(i) * b(j) }``: its iteration domain (a box ``0 <= i < extent`` per
  iterator, the extent a constant or a size parameter of the definition)
  and its access relations (indices linear in the iterators);
* ``implementations``: ``{"c": C source}`` defining ``void <name>(...)``
  (``static`` or not) with one pointer per tensor of the definition, in
  signature order (inputs ``const``), each followed by one ``int64_t``
  stride per dimension (in elements), then one ``int64_t`` per size
  parameter of the definition (:meth:`Intrinsic.prototype` prints it).  The
  source is compiled at registration against that prototype; a mismatch or
  a compiler error raises :class:`~polyc.errors.CompileError` with the
  compiler's stderr.  ``"cuda"`` sources are kept for the CUDA backend.

A statement matches (:func:`match`) when its right-hand side has the same
operators and constants as the description's, its tensors map one to one
onto the description's (same rank and dtype), some of its iterators map
onto the description's iterators so that every index is the description's
index of those iterators plus a part that depends only on the other
iterators (the loops around the call), checked by isl map equality of the
access relations rebuilt that way with the statement's, and its domain is
the loops' domain times the description's box (isl set equality; a size
parameter of the description takes the statement's extent, which must be an
affine function of the program's sizes).  Each call receives the tensors'
base pointers at the loops' point, their row-major strides and the sizes.

Source: TVM's ``tensor_intrin`` (a computation declared with its
implementation) and the polyhedral matching of Bondhugula et al., "High-
performance GPU/CPU tensor contraction via polyhedral tensorization".
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from dataclasses import dataclass

import islpy as isl

from . import expr as E
from .errors import CompileError, IntrinsicError, ParseError
from .ir import C_TYPES, Program, Statement
from .isl_util import (
    affine_coefficients,
    affine_in_sizes,
    const_pw_aff,
    pw_aff_to_expr,
    zero_based_box,
)

#: Names of the built-in intrinsics (:mod:`polyc.intrinsics`).
BUILTIN = ("gemm",)
#: Backends an implementation may be given for.
BACKENDS = ("c", "cuda")
#: The most iterators a description may scan.
MAX_ITERATORS = 6

_LOCK = threading.Lock()
_REGISTRY: dict[str, "Intrinsic"] = {}


@dataclass(frozen=True)
class Intrinsic:
    """A registered intrinsic: ``program`` (the description, one statement
    ``statement``), ``extents`` (per iterator of the statement, an ``int`` or
    the name of a size parameter), ``sources`` (backend -> source)."""
    name: str
    description: str
    program: Program
    statement: Statement
    extents: tuple
    sources: tuple

    @property
    def tensors(self) -> tuple[str, ...]:
        """The description's tensors in signature order (inputs, outputs)."""
        return tuple(t.name for t in self.program.tensors)

    @property
    def sizes(self) -> tuple[str, ...]:
        """The description's size parameters, in the call's order."""
        return tuple(x for x in self.extents if isinstance(x, str))

    def source(self, backend: str = "c") -> str | None:
        return dict(self.sources).get(backend)

    def prototype(self) -> str:
        """The C prototype the implementation must define."""
        args = []
        for t in self.program.tensors:
            const = "const " if t.role == "input" else ""
            args.append(f"{const}{C_TYPES[t.dtype]} *{t.name}")
            args += [f"int64_t {t.name}_s{d}" for d in range(t.ndim)]
        args += [f"int64_t {p}" for p in dict.fromkeys(self.sizes)]
        return f"static void {self.name}({', '.join(args) or 'void'})"

    def fingerprint(self) -> str:
        return hashlib.sha256(repr((self.name, self.description, self.sources))
                              .encode()).hexdigest()


@dataclass(frozen=True)
class CustomMatch:
    """``statement`` as calls of user intrinsic ``intrinsic``: ``batch`` the
    loops around the call, ``scanned`` the statement's iterators the call
    scans (in the description's iterator order), ``tensors`` per
    description tensor (signature order) the program tensor and its access
    in the statement and the statement's dimension of each description
    dimension, ``sizes`` per size parameter of the description the
    statement's extent (an expression of the program's sizes)."""
    intrinsic: str
    statement: str
    batch: tuple[str, ...]
    scanned: tuple[str, ...]
    tensors: tuple
    sizes: tuple
    c: str
    init: None = None
    scale: None = None
    epilogue: None = None
    parallel: bool = False
    #: a user intrinsic computes whole slices (no row blocks, GemmMatch.block),
    #: all of the statement's instances (GemmMatch.parts)
    block: int = 0
    parts: tuple = ()

    @property
    def call(self) -> str:
        """The name of the call statement (the statement's)."""
        return self.statement

    @property
    def loops(self) -> tuple[str, ...]:
        """The loops around the call."""
        return self.batch

    def describe(self) -> str:
        roles = ", ".join(f"{d}={t[0]}" for d, t in zip(_intrinsic(self.intrinsic).tensors,
                                                        self.tensors))
        loops = f"; loops {', '.join(self.batch)}" if self.batch else ""
        return (f"{self.statement} tensorized onto {self.intrinsic} (scans "
                f"{', '.join(self.scanned)}; {roles}{loops})")


def _intrinsic(name: str) -> Intrinsic:
    return _REGISTRY[name]


def get(name: str) -> Intrinsic | None:
    """The registered intrinsic ``name``, else ``None``."""
    return _REGISTRY.get(name)


def names() -> tuple[str, ...]:
    return BUILTIN + tuple(sorted(_REGISTRY))


def unregister(name: str) -> None:
    """Forget ``name`` (tests; kernels compiled with it keep working)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def registry_fingerprint() -> str:
    """A hash of every registered intrinsic (part of the lowering key of
    user schedules: a source built with one implementation is never reused
    for another)."""
    return hashlib.sha256("".join(i.fingerprint() for _, i in sorted(_REGISTRY.items()))
                          .encode()).hexdigest()


# ------------------------------------------------------------- registration

def _box_extents(program: Program, stmt: Statement) -> tuple | str:
    """Per iterator, the extent of the description's box (``int`` or a size
    parameter's name), or why the domain is not such a box."""
    ctx = program.parameter_domain()
    dom = stmt.domain.intersect_params(ctx)
    out, bounds = [], []
    for pos, it in enumerate(stmt.iterators):
        ext = dom.dim_max(pos).add(const_pw_aff(ctx.get_space(), 1))
        expr = pw_aff_to_expr(ext, ctx)
        if isinstance(expr, E.Const) and float(expr.value).is_integer():
            out.append(int(expr.value))
        elif isinstance(expr, E.Index) and expr.name in program.params:
            out.append(expr.name)
        else:
            return f"the extent of {it} is {expr}: give a constant or a size of the definition"
        bounds.append((pos, ext))
    box = zero_based_box(isl.Set.universe(stmt.domain.get_space()).intersect_params(ctx), bounds)
    if not dom.is_equal(box):
        return "the iteration domain is not a box 0 <= i < extent in every iterator"
    return tuple(out)


def _coefficients(stmt: Statement, idx: E.Expr) -> tuple[dict[str, int], isl.Aff] | str:
    """``({iterator: coefficient}, aff)`` of an affine index, else why not."""
    found = affine_coefficients(idx, stmt.domain.get_space(), stmt.iterators)
    return f"an index {found}" if isinstance(found, str) else found


def _parse(name: str, description: str) -> tuple[Program, Statement, tuple]:
    from .frontend import tc  # the parser, not polyc.api (which imports the driver)
    if not isinstance(description, str):
        raise IntrinsicError(f"intrinsic {name}: the description must be TC source text, "
                             f"got {type(description).__name__}")
    module = tc.require_definitions(tc.parse(description, f"<intrinsic {name}>"))
    if len(module.defs) != 1:
        raise IntrinsicError(f"intrinsic {name}: the description has {len(module.defs)} "
                             f"definitions; give one")
    prog = tc.lower(module.defs[0], {}, source=description)
    stmts = prog.statements
    if len(stmts) == 2 and stmts[0].kind == "init" and stmts[1].tensor == stmts[0].tensor:
        # TC spells an accumulation +=!; the call accumulates (the update alone)
        prog = prog.replace(statements=stmts[1:])
    if len(prog.statements) != 1:
        raise IntrinsicError(
            f"intrinsic {name}: the description has {len(prog.statements)} statements "
            f"({'; '.join(s.text.strip() for s in prog.statements)}); give one")
    stmt = prog.statements[0]
    if stmt.kind not in ("update", "assign"):
        raise IntrinsicError(f"intrinsic {name}: the statement is a {stmt.kind}")
    if len(stmt.iterators) > MAX_ITERATORS:
        raise IntrinsicError(f"intrinsic {name}: more than {MAX_ITERATORS} iterators")
    for t in prog.tensors:
        if t.dtype not in C_TYPES:
            raise IntrinsicError(f"intrinsic {name}: tensor {t.name} has dtype {t.dtype}; "
                                 f"the C backend passes {', '.join(C_TYPES)}")
    extents = _box_extents(prog, stmt)
    if isinstance(extents, str):
        raise IntrinsicError(f"intrinsic {name}: {extents}")
    for acc in [stmt.lhs, *E.accesses(stmt.rhs)]:
        for idx in acc.indices:
            found = _coefficients(stmt, idx)
            if isinstance(found, str):
                raise IntrinsicError(f"intrinsic {name}: {acc.tensor}: {found}")
            coeffs, aff = found
            const = aff
            for i in range(len(stmt.iterators)):
                const = const.set_coefficient_val(isl.dim_type.in_, i, 0)
            if not const.plain_is_zero():
                raise IntrinsicError(
                    f"intrinsic {name}: the index {idx} of {acc.tensor} has a constant or size "
                    f"term; indices must be linear in the iterators (the call receives the "
                    f"base pointer of each operand)")
    return prog, stmt, extents


def register(name: str, description: str, implementations: dict, *, config=None) -> Intrinsic:
    """Register intrinsic ``name`` (module docstring).  Raises
    :class:`~polyc.errors.IntrinsicError` for a name that is not a C
    identifier, starts with ``polyc_`` or is taken, a description that is not
    one statement over a box with linear indices, an unknown backend or no
    ``"c"`` source; :class:`~polyc.errors.ParseError` for a description that
    does not parse; :class:`~polyc.errors.CompileError` (the compiler's
    stderr) when the C source does not compile against :meth:`Intrinsic.prototype`."""
    from .backends.c import build
    from .config import Config
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii() \
            or name.startswith(("polyc_", "t_", "p_")):
        raise IntrinsicError(f"intrinsic name {name!r}: use a C identifier that does not start "
                             f"with polyc_, t_ or p_")
    if name in BUILTIN or name in _REGISTRY:
        raise IntrinsicError(f"an intrinsic named {name!r} already exists (registered: "
                             f"{', '.join(names())}); choose another name")
    if not isinstance(implementations, dict) or "c" not in implementations:
        raise IntrinsicError(f"intrinsic {name}: give implementations={{'c': C source}}")
    unknown = sorted(set(implementations) - set(BACKENDS))
    if unknown or not all(isinstance(v, str) for v in implementations.values()):
        raise IntrinsicError(f"intrinsic {name}: implementations are C/CUDA source strings "
                             f"keyed by {', '.join(BACKENDS)} "
                             f"(got {', '.join(unknown) or 'a non-string'})")
    try:
        prog, stmt, extents = _parse(name, description)
    except ParseError as e:
        raise type(e)(f"intrinsic {name}: {e}") from None
    intr = Intrinsic(name, description, prog, stmt, extents,
                     tuple(sorted(implementations.items())))
    check = (f"#include <stdint.h>\n#include <math.h>\n{intr.prototype()};\n"
             f"{implementations['c']}\n"
             f"void *polyc_intrinsic_check_{name}(void) {{ return (void *)&{name}; }}\n")
    try:
        build.build_library(check, config=config or Config.from_env())
    except CompileError as e:
        # (LoadError, one: a function declared and referenced but defined nowhere)
        e.args = (f"intrinsic {name}: its C implementation does not compile against "
                  f"{intr.prototype()}: {e.args[0] if e.args else ''}",)
        raise
    with _LOCK:
        if name in _REGISTRY:
            raise IntrinsicError(f"an intrinsic named {name!r} already exists")
        _REGISTRY[name] = intr
    return intr


# ------------------------------------------------------------------ matching

def _unify(s: E.Expr, d: E.Expr, tmap: dict, pairs: list) -> str | None:
    """Whether ``s`` (the statement's expression) has the form of ``d`` (the
    description's), mapping tensors; collects ``(s access, d access)``."""
    if isinstance(d, E.Access):
        if not isinstance(s, E.Access):
            return f"{d.tensor}(...) of the description faces {s}"
        if tmap.setdefault(d.tensor, s.tensor) != s.tensor or \
                list(tmap.values()).count(s.tensor) > 1:
            return (f"tensor {s.tensor} cannot stand for {d.tensor} (the tensors must map "
                    f"one to one)")
        if len(s.indices) < len(d.indices):
            return f"{s.tensor} has rank {len(s.indices)}, {d.tensor} {len(d.indices)}"
        pairs.append((s, d))
        return None
    if type(s) is not type(d):
        return f"{s} does not have the form of {d}"
    if isinstance(d, E.Const):
        return None if float(s.value) == float(d.value) else f"constant {s} is not {d}"
    if isinstance(d, E.Binary):
        if s.op != d.op:
            return f"operator {s.op} is not {d.op}"
        return _unify(s.lhs, d.lhs, tmap, pairs) or _unify(s.rhs, d.rhs, tmap, pairs)
    if isinstance(d, E.Unary):
        return f"operator {s.op} is not {d.op}" if s.op != d.op else \
            _unify(s.operand, d.operand, tmap, pairs)
    if isinstance(d, E.Call):
        if s.fn != d.fn or len(s.args) != len(d.args):
            return f"{s.fn}(...) is not {d.fn}(...)"
        for a, b in zip(s.args, d.args):
            r = _unify(a, b, tmap, pairs)
            if r:
                return r
        return None
    return f"{s} does not have the form of {d}"


def _relation(stmt: Statement, acc: E.Access, rebuilt: list[isl.Aff]) -> isl.Map:
    rel = isl.Map.from_domain(isl.Set.universe(stmt.domain.get_space()))
    for aff in rebuilt:
        rel = rel.flat_range_product(isl.Map.from_aff(aff))
    return rel.set_tuple_name(isl.dim_type.out, acc.tensor)


def _dimension_maps(pairs, s_co, d_co, sigma) -> tuple[list, str | None]:
    """Per access pair, the statement dimension of each description
    dimension under the iterator correspondence ``sigma``, or the reason
    there is none."""
    out = []
    for (s_acc, d_acc), srow, drow in zip(pairs, s_co, d_co):
        def vec(coeffs, names):
            return tuple(coeffs.get(x, 0) for x in names)
        s_vec = [vec(c, sigma.values()) for c, _ in srow]
        used: list[int] = []
        for dd, (dc, _) in enumerate(drow):
            want = vec(dc, sigma.keys())
            pick = next((D for D, v in enumerate(s_vec) if v == want and D not in used), None)
            if pick is None:
                moved = ", ".join(f"{di}*{c}" for di, c in dc.items()) or "nothing"
                return out, (f"no dimension of {s_acc.tensor} moves with "
                             f"{', '.join(sigma[di] for di in dc) or 'no scanned iterator'} as "
                             f"dimension {dd} of the description's {d_acc.tensor} ({moved})")
            used.append(pick)
        extra = [D for D, v in enumerate(s_vec) if D not in used and any(v)]
        if extra:
            return out, (f"dimension {extra[0]} of {s_acc.tensor} moves with a scanned iterator "
                         f"but is not one of the description's {d_acc.tensor}")
        out.append(used)
    return out, None


def _outer_iterators(node: isl.ScheduleNode, stmt: Statement) -> set[str]:
    """The iterators of ``stmt`` that the loops above ``node`` depend on."""
    own = node.get_prefix_schedule_union_map().intersect_domain(
        isl.UnionSet.from_set(stmt.domain))
    out = set()
    for pos, it in enumerate(stmt.iterators):
        p = isl.Map.identity(isl.Space.map_from_set(stmt.domain.get_space()))
        p = p.project_out(isl.dim_type.out, pos, 1).insert_dims(isl.dim_type.out, pos, 1)
        p = p.set_tuple_name(isl.dim_type.out, stmt.name).intersect_domain(stmt.domain)
        if not isl.UnionMap.from_map(p.intersect_range(stmt.domain)).apply_range(
                own).is_subset(own):
            out.add(it)
    return out


def match(program: Program, stmt: Statement, intr: Intrinsic | None,
          above: isl.ScheduleNode | None = None) -> CustomMatch | str:
    """Match ``stmt`` onto ``intr`` (module docstring); the reason otherwise.
    ``above``: the node the call goes at; iterator correspondences that
    scan no iterator the loops above it depend on are tried first (in
    ``Y(m, l) += X(m, l)`` a one-dimensional intrinsic tensorized at loop
    ``l`` scans ``l``, not ``m``).  ``intr`` ``None``: a mark naming an
    intrinsic that is no longer registered."""
    if intr is None:
        return ("no such intrinsic is registered now (unregistered after the schedule "
                "was made?): register it again with polyc.intrinsics.register")
    d = intr.statement
    if stmt.kind != d.kind or stmt.op != d.op:
        return f"the statement is {stmt.kind} {stmt.op}, the description {d.kind} {d.op}"
    tmap: dict[str, str] = {}
    pairs: list = []
    reason = _unify(stmt.lhs, d.lhs, tmap, pairs) or _unify(stmt.rhs, d.rhs, tmap, pairs)
    if reason:
        return reason
    for dt, st in tmap.items():
        want, have = intr.program.tensor(dt).dtype, program.tensor(st).dtype
        if want != have:
            return f"{st} is {have}, the description's {dt} {want}"
    s_co, d_co = [], []
    for s_acc, d_acc in pairs:
        row = [_coefficients(stmt, i) for i in s_acc.indices]
        bad = next((r for r in row if isinstance(r, str)), None)
        if bad:
            return f"{s_acc.tensor}: {bad}"
        s_co.append(row)
        d_co.append([_coefficients(d, i) for i in d_acc.indices])
    # the iterator correspondence sigma (description -> statement) and, per
    # access, the statement dimension of each description dimension: the
    # statement's dimensions the scanned iterators move are the
    # description's, with the same coefficients; the others are offsets
    reasons = []
    outer = _outer_iterators(above, stmt) if above is not None else set()
    perms = sorted(itertools.permutations(stmt.iterators, len(d.iterators)),
                   key=lambda perm: bool(outer & set(perm)))        # (stable)
    for perm in perms:
        sigma = dict(zip(d.iterators, perm))
        dims, bad = _dimension_maps(pairs, s_co, d_co, sigma)
        found = bad or _with_sigma(program, stmt, intr, pairs, s_co, d_co, tmap, sigma, dims)
        if not isinstance(found, str):
            return found
        reasons.append(found)
    # the first reason of the most promising correspondence
    best = next((r for r in reasons if r.startswith(("the access", "the iteration", "the "
                                                     "extent"))), reasons[0] if reasons else
                "no iterator correspondence")
    return f"no iterators of the statement scan its tensors as the description does: {best}"


def _with_sigma(program, stmt, intr, pairs, s_co, d_co, tmap, sigma, dims):
    """The match under iterator correspondence ``sigma``, or why not."""
    d = intr.statement
    scanned = tuple(sigma[di] for di in d.iterators)
    # access relations rebuilt from the description, compared by isl
    have = {stmt.tensor: stmt.write}
    for r in stmt.reads:
        have.setdefault(r.get_tuple_name(isl.dim_type.out), r)
    ls = isl.LocalSpace.from_space(stmt.domain.get_space())
    for (s_acc, d_acc), srow, drow, dmap in zip(pairs, s_co, d_co, dims):
        rebuilt = []
        for dim, (_, s_aff) in enumerate(srow):
            aff = s_aff            # the loops' part of the index ...
            for si in scanned:
                aff = aff.set_coefficient_val(isl.dim_type.in_, stmt.iterators.index(si), 0)
            if dim in dmap:        # ... plus the description's index
                for di, c in drow[dmap.index(dim)][0].items():
                    var = isl.Aff.var_on_domain(ls, isl.dim_type.set,
                                                stmt.iterators.index(sigma[di]))
                    aff = aff.add(var.scale_val(isl.Val.int_from_si(stmt.domain.get_ctx(), c)))
            rebuilt.append(aff)
        want = _relation(stmt, s_acc, rebuilt).intersect_domain(stmt.domain)
        got = have[s_acc.tensor].intersect_domain(stmt.domain)
        if not want.is_equal(got):
            return (f"the access relation of {s_acc.tensor} differs from the intrinsic's "
                    f"{d_acc.tensor}: {got} is not {want}")
    # the domain: the loops' domain times the description's box
    ctx = program.parameter_domain()
    box = stmt.domain
    for si in scanned:
        box = box.eliminate(isl.dim_type.set, stmt.iterators.index(si), 1)
    sizes: dict[str, E.Expr] = {}
    bounds = []
    for di, ext in zip(d.iterators, intr.extents):
        pos = stmt.iterators.index(sigma[di])
        if isinstance(ext, int):
            bound = const_pw_aff(ctx.get_space(), ext)
        else:
            own = stmt.domain.intersect_params(ctx).dim_max(pos).add(
                const_pw_aff(ctx.get_space(), 1))
            if not affine_in_sizes(own):
                return (f"the extent of {sigma[di]} ({pw_aff_to_expr(own, ctx)}) is not an "
                        f"affine function of the sizes, as the description's {ext} must be")
            expr = pw_aff_to_expr(own, ctx)
            if sizes.setdefault(ext, expr) != expr:
                return f"{ext} would be both {sizes[ext]} and {expr}"
            bound = own
        bounds.append((pos, bound))
    box = zero_based_box(box, bounds)
    if not stmt.domain.intersect_params(ctx).is_equal(box.intersect_params(ctx)):
        extents = ", ".join(f"{sigma[di]} < {e}" for di, e in zip(d.iterators, intr.extents))
        return (f"the iteration domain is not the loops' domain times the description's box "
                f"({extents})")
    accesses = {da.tensor: (sa, tuple(dm)) for (sa, da), dm in zip(pairs, dims)}
    return CustomMatch(
        intrinsic=intr.name, statement=stmt.name,
        batch=tuple(i for i in stmt.iterators if i not in scanned), scanned=scanned,
        tensors=tuple((tmap[t], *accesses[t]) for t in intr.tensors),
        sizes=tuple((p, sizes[p]) for p in dict.fromkeys(intr.sizes)), c=stmt.tensor)
