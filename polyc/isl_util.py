"""Small helpers over islpy that every stage shares.

Owns the conversion of :mod:`polyc.expr` index expressions into isl affine
objects, the construction of parameter spaces, and the conversion of isl
piecewise affine values back into expression trees (through
``isl.AstBuild.expr_from_pw_aff``) so that backends and the runtime can
evaluate shapes and conditions without calling isl per kernel call.
"""

from __future__ import annotations

import ctypes
import functools
import re
from typing import Sequence

import islpy as isl

from . import expr as E

CTX = isl.DEFAULT_CONTEXT


class NonAffineError(Exception):
    """Raised by :func:`aff_from_expr` for an expression isl cannot represent.
    ``expr`` is the offending subexpression.  Internal; frontends turn it into
    a user-facing error or a gather over-approximation."""

    def __init__(self, expr: E.Expr, reason: str):
        super().__init__(reason)
        self.expr, self.reason = expr, reason


#: Words isl's parser reads as keywords or values (compared in lower case:
#: isl reads ``INFTY`` and ``NaN`` too).  A name spelled so prints in isl's
#: text but does not read back, or reads back as another set (``S[NaN]``).
ISL_WORDS = frozenset({"mod", "floor", "ceil", "floord", "ceild", "min", "max", "exists",
                       "and", "or", "not", "implies", "infty", "infinity", "nan", "true",
                       "false", "rat"})


def is_isl_word(name: str) -> bool:
    """Whether isl's parser would not read ``name`` back as an identifier."""
    return name.lower() in ISL_WORDS


def isl_safe_name(name: str, taken=()) -> str:
    """``name``, or ``name_`` (``name__``, ...: the first not in ``taken``)
    when isl reads ``name`` as a keyword (:func:`is_isl_word`): the name a
    frontend gives an iterator that the user spelled ``floor`` or ``max``."""
    if not is_isl_word(name):
        return name
    out = name + "_"
    while out in taken:
        out += "_"
    return out


_RENAMED = re.compile(r"^((?i:" + "|".join(sorted(ISL_WORDS)) + r"))_(?=_|$)")


def source_spelling(name: str) -> str:
    """A loop name as the source spells it: ``floor`` for the renamed
    ``floor_`` (:func:`isl_safe_name`), ``floor_tile`` for ``floor__tile``."""
    return _RENAMED.sub(r"\1", name)


def param_space(params: Sequence[str]) -> isl.Space:
    return isl.Space.create_from_names(CTX, set=[], params=list(params))


def maps_of(umap: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map as a Python list (one per space pair)."""
    out: list[isl.Map] = []
    umap.foreach_map(out.append)
    return out


def sets_of(uset: isl.UnionSet) -> list[isl.Set]:
    out: list[isl.Set] = []
    uset.foreach_set(out.append)
    return out


def set_space(params: Sequence[str], dims: Sequence[str], name: str | None = None) -> isl.Space:
    sp = isl.Space.create_from_names(CTX, set=list(dims), params=list(params))
    if name is not None:
        sp = sp.set_tuple_name(isl.dim_type.set, name)
    return sp


def universe(space: isl.Space) -> isl.Set:
    return isl.Set.universe(space)


def aff_from_expr(e: E.Expr, space: isl.Space) -> isl.PwAff:
    """Convert an index expression to an ``isl.PwAff`` on the set ``space``.

    Index variables are the set dimensions of ``space`` (by name), parameters
    its parameters.  ``/`` is floor division and ``%`` the matching remainder
    (TC's rounding), both by a positive integer constant.

    Raises :class:`NonAffineError` for tensor reads (gathers), products of
    two non-constant factors, and anything that is not integer arithmetic.
    """
    ls = isl.LocalSpace.from_space(space)

    def cst(v: int) -> isl.PwAff:
        return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.int_from_si(CTX, v)))

    def go(x: E.Expr) -> isl.PwAff:
        if isinstance(x, E.Const):
            if not isinstance(x.value, int) or isinstance(x.value, bool):
                raise NonAffineError(x, "a non-integer constant in an index")
            return cst(int(x.value))
        if isinstance(x, E.Index):
            pos = space.find_dim_by_name(isl.dim_type.set, x.name)
            if pos < 0:
                raise NonAffineError(x, f"unknown index variable {x.name}")
            return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, pos))
        if isinstance(x, E.Param):
            pos = space.find_dim_by_name(isl.dim_type.param, x.name)
            if pos < 0:
                raise NonAffineError(x, f"unknown size parameter {x.name}")
            return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, pos))
        if isinstance(x, E.Unary) and x.op == "-":
            return go(x.operand).neg()
        if isinstance(x, E.Binary) and x.op in ("+", "-", "*", "/", "%"):
            a, b = go(x.lhs), go(x.rhs)
            if x.op == "+":
                return a.add(b)
            if x.op == "-":
                return a.sub(b)
            if x.op == "*":
                if a.is_cst():
                    return b.mul(a)
                if b.is_cst():
                    return a.mul(b)
                raise NonAffineError(x, "a product of two non-constant factors")
            if not (isinstance(x.rhs, E.Const) and isinstance(x.rhs.value, int)
                    and x.rhs.value > 0):
                raise NonAffineError(x, "division or remainder by something other "
                                        "than a positive integer constant")
            if x.op == "/":
                return a.div(b).floor()
            return a.mod_val(isl.Val.int_from_si(CTX, x.rhs.value))
        if isinstance(x, E.Call) and x.fn in ("min", "max") and len(x.args) == 2:
            a, b = go(x.args[0]), go(x.args[1])
            return a.min(b) if x.fn == "min" else a.max(b)
        if isinstance(x, E.Access):
            raise NonAffineError(x, "a tensor read (gather)")
        raise NonAffineError(x, "an operation that is not integer affine arithmetic")

    return go(e)


def box_set(params: Sequence[str], name: str, iterators: Sequence[str],
            bounds: Sequence[tuple[isl.PwAff, isl.PwAff]]) -> isl.Set:
    """The named set ``{ name[i...] : lo_d <= i_d < hi_d }``; each bound is an
    ``isl.PwAff`` on the parameter space of ``params`` (a half-open range)."""
    space = set_space(params, iterators, name)
    ls = isl.LocalSpace.from_space(space)
    result = isl.Set.universe(space)
    for d, (lo, hi) in enumerate(bounds):
        x = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, d))
        lo_d = lift_to_set(lo, space)
        hi_d = lift_to_set(hi, space)
        result = result.intersect(x.ge_set(lo_d)).intersect(x.lt_set(hi_d))
    return result


def affine_coefficients(idx: E.Expr, space: isl.Space, iterators) -> tuple[dict, isl.Aff] | str:
    """``({iterator: coefficient}, aff)`` of an integer-affine index over the
    set ``space`` whose dimensions are ``iterators`` (non-zero coefficients,
    read from the isl affine function); the reason (``"is not affine
    (...)"``, ``"has a division, remainder, min or max"``) otherwise."""
    try:
        pieces = aff_from_expr(idx, space).get_pieces()
    except NonAffineError as err:
        return f"is not affine ({err.reason})"
    if len(pieces) != 1 or pieces[0][1].dim(isl.dim_type.div) \
            or not pieces[0][1].get_denominator_val().is_one():
        return "has a division, remainder, min or max"
    aff = pieces[0][1]
    return ({it: int(aff.get_coefficient_val(isl.dim_type.in_, i).to_python())
             for i, it in enumerate(iterators)
             if not aff.get_coefficient_val(isl.dim_type.in_, i).is_zero()}, aff)


def affine_in_sizes(ext: isl.PwAff) -> bool:
    """Whether ``ext`` is one affine function of the size parameters (no
    pieces, no divisions: a loop bound such as ``N`` or ``N - 1``)."""
    pieces = ext.get_pieces()
    return len(pieces) == 1 and not pieces[0][1].dim(isl.dim_type.div) \
        and pieces[0][1].get_denominator_val().is_one()


def zero_based_box(base: isl.Set, extents) -> isl.Set:
    """``base`` with ``0 <= x_pos < extent`` for every ``(pos, extent)`` of
    ``extents`` (an ``isl.PwAff`` on the parameters each)."""
    space = base.get_space()
    ls = isl.LocalSpace.from_space(space)
    zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
    for pos, ext in extents:
        x = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, pos))
        base = base.intersect(x.ge_set(zero)).intersect(x.lt_set(lift_to_set(ext, space)))
    return base


def lift_to_set(pa: isl.PwAff, space: isl.Space) -> isl.PwAff:
    """A ``PwAff`` on the parameter space, seen as a function on the set
    ``space`` (same parameters, extra set dimensions ignored)."""
    pa = pa.align_params(space.params())
    to_params = isl.Space.map_from_domain_and_range(space, pa.get_domain_space())
    return pa.pullback_multi_aff(isl.MultiAff.zero(to_params))


def const_pw_aff(space: isl.Space, v: int) -> isl.PwAff:
    ls = isl.LocalSpace.from_space(space)
    return isl.PwAff.from_aff(isl.Aff.val_on_domain(ls, isl.Val.int_from_si(CTX, v)))


def eval_pw_aff(pa: isl.PwAff, values: dict[str, int]) -> int:
    """Evaluate a ``PwAff`` on a parameter space at concrete parameter values
    (slow: for tests and reference evaluation, not per-call paths)."""
    sp = pa.get_domain_space()
    pt = isl.Point.zero(sp)
    for i, name in enumerate(sp.get_var_names(isl.dim_type.param)):
        pt = pt.set_coordinate_val(isl.dim_type.param, i,
                                   isl.Val.int_from_si(CTX, int(values[name])))
    v = pa.eval(pt)
    if v.is_nan():
        raise ValueError(f"{pa} is undefined at {values}")
    return int(v.to_python())


def fix_params(s: isl.Set, values: dict[str, int]) -> isl.Set:
    """``s`` with every named parameter fixed to its value in ``values``."""
    sp = s.get_space()
    for i in range(sp.dim(isl.dim_type.param)):
        name = sp.get_dim_name(isl.dim_type.param, i)
        if name in values:
            s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(CTX, int(values[name])))
    return s


def dim_range(s: isl.Set, pos: int, values: dict[str, int]) -> tuple[int, int] | None:
    """``(min, max)`` of set dimension ``pos`` of ``s`` at parameter values
    ``values`` (inclusive), or ``None`` when the set is empty there."""
    fixed = fix_params(s, values)
    if fixed.is_empty():
        return None
    lo = fixed.dim_min_val(pos) if hasattr(fixed, "dim_min_val") else None
    hi = fixed.dim_max_val(pos) if hasattr(fixed, "dim_max_val") else None
    return int(lo.to_python()), int(hi.to_python())


def pw_aff_to_expr(pa: isl.PwAff, context: isl.Set) -> E.Expr:
    """An expression tree computing ``pa`` for every parameter value in
    ``context`` (isl ``isl_ast_build_expr_from_pw_aff``).  Uses
    ``min``/``max`` calls, ``Select`` and floor division as isl's AST does."""
    build = isl.AstBuild.from_context(context.params())
    if not pa.get_domain_space().is_params():
        pa = pa.project_domain_on_params()
    return ast_expr_to_expr(build.expr_from_pw_aff(pa))


def set_to_condition(s: isl.Set, context: isl.Set) -> E.Expr:
    """A boolean expression that is true exactly for the parameter values in
    ``s`` (within ``context``), via ``isl_ast_build_expr_from_set``."""
    build = isl.AstBuild.from_context(context.params())
    return ast_expr_to_expr(build.expr_from_set(s.params()))


_AST_BINOPS = {
    "add": "+", "sub": "-", "mul": "*", "eq": "==", "le": "<=", "lt": "<",
    "ge": ">=", "gt": ">", "and_": "&&", "or_": "||", "and_then": "&&",
    "or_else": "||",
}


def ast_expr_to_expr(x: isl.AstExpr) -> E.Expr:
    """Translate an ``isl.AstExpr`` into :mod:`polyc.expr`.

    Identifiers become :class:`~polyc.expr.Index` (the caller decides whether
    they are loop iterators or parameters); ``fdiv_q`` becomes floor division
    ``/`` (TC's rounding); ``pdiv_q``/``pdiv_r``/``zdiv_r`` map to ``/``, ``%``
    as their non-negative dividends allow.
    """
    t = x.get_type()
    if t == isl.ast_expr_type.int:
        return E.Const(int(x.get_val().to_python()))
    if t == isl.ast_expr_type.id:
        return E.Index(x.get_id().get_name())
    assert t == isl.ast_expr_type.op, t
    op = x.get_op_type()
    name = op.name if hasattr(op, "name") else str(op).split(".")[-1]
    args = [ast_expr_to_expr(x.get_op_arg(i)) for i in range(x.get_op_n_arg())]
    if name in _AST_BINOPS:
        out = args[0]
        for a in args[1:]:
            out = E.Binary(_AST_BINOPS[name], out, a)
        return out
    if name == "minus":
        return E.Unary("-", args[0])
    if name in ("min", "max"):
        out = args[0]
        for a in args[1:]:
            out = E.Call(name, (out, a))
        return out
    if name in ("fdiv_q", "pdiv_q", "div"):
        return E.Binary("/", args[0], args[1])
    if name in ("pdiv_r", "zdiv_r"):
        return E.Binary("%", args[0], args[1])
    if name in ("select", "cond"):
        return E.Select(args[0], args[1], args[2])
    if name == "call":
        assert isinstance(args[0], E.Index)
        return E.Call(args[0].name, tuple(args[1:]))
    raise AssertionError(f"unhandled isl AST op {name}")


# ------------------------------------------------------------ fixed box hull
# islpy wraps isl_map_get_range_simple_fixed_box_hull but not the accessors
# of the isl_fixed_box it returns; they are called on the isl library islpy
# ships (same symbols), in a context of their own, maps crossing in isl's
# text form.

@functools.lru_cache(maxsize=1)
def _isl_c():
    """isl's C functions for fixed boxes, from the library islpy links in
    (islpy wraps ``isl_map_get_range_simple_fixed_box_hull`` but not the
    accessors of the box it returns)."""
    import islpy._isl as _isl
    lib = ctypes.CDLL(_isl.__file__)
    vp = ctypes.c_void_p
    sigs = {"isl_ctx_alloc": (vp, []), "isl_ctx_free": (None, [vp]),
            "isl_map_read_from_str": (vp, [vp, ctypes.c_char_p]),
            "isl_map_free": (vp, [vp]),
            "isl_map_get_range_simple_fixed_box_hull": (vp, [vp]),
            "isl_fixed_box_is_valid": (ctypes.c_int, [vp]),
            "isl_fixed_box_get_offset": (vp, [vp]),
            "isl_fixed_box_get_size": (vp, [vp]),
            "isl_fixed_box_free": (vp, [vp]),
            "isl_multi_aff_to_str": (vp, [vp]), "isl_multi_aff_free": (vp, [vp]),
            "isl_multi_val_to_str": (vp, [vp]), "isl_multi_val_free": (vp, [vp])}
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    libc = ctypes.CDLL(None)
    libc.free.argtypes, libc.free.restype = [vp], None
    return lib, libc


def _take_str(libc, ptr) -> str:
    assert ptr
    try:
        return ctypes.cast(ptr, ctypes.c_char_p).value.decode()
    finally:
        libc.free(ptr)


def fixed_box_hull(fp: isl.Map) -> tuple[isl.MultiAff, list[int]] | None:
    """isl's simple fixed-size box hull of the range of ``fp`` (``{ [p] ->
    T[x] }``): the offset ``{ [p] -> T[o] }`` and the constant sizes, or
    ``None`` when isl finds no box of constant size."""
    box = fp.get_range_simple_fixed_box_hull()
    if hasattr(box, "get_offset"):          # an islpy that wraps the accessors
        if not box.is_valid():
            return None
        off, size = box.get_offset(), box.get_size()
    else:
        lib, libc = _isl_c()
        ctx = lib.isl_ctx_alloc()
        try:
            m = lib.isl_map_read_from_str(ctx, str(fp).encode())
            b = lib.isl_map_get_range_simple_fixed_box_hull(m)
            lib.isl_map_free(m)
            if not b:
                raise isl.Error(f"isl cannot compute a box hull of {fp}")
            try:
                if lib.isl_fixed_box_is_valid(b) != 1:
                    return None
                o = lib.isl_fixed_box_get_offset(b)
                s = lib.isl_fixed_box_get_size(b)
                off_text = _take_str(libc, lib.isl_multi_aff_to_str(o))
                size_text = _take_str(libc, lib.isl_multi_val_to_str(s))
                lib.isl_multi_aff_free(o)
                lib.isl_multi_val_free(s)
            finally:
                lib.isl_fixed_box_free(b)
        finally:
            lib.isl_ctx_free(ctx)
        off = isl.MultiAff(off_text, context=CTX)
        size = isl.MultiVal(size_text, context=CTX)
    sizes = [size.get_val(i) for i in range(size.dim(isl.dim_type.out))]
    if not all(v.is_int() for v in sizes):
        return None
    return off, [int(v.to_python()) for v in sizes]


def _union_text(u, space: isl.Space) -> list[str]:
    """The pieces of an isl union object, each aligned, without redundant
    constraints (``isl_set_remove_redundancies``), coalesced and printed,
    sorted: isl prints a union's pieces in an order that depends on how it
    was built, and a tree read back from its text may have lost a redundant
    constraint the original carried."""
    pieces: list[str] = []
    if isinstance(u, isl.UnionSet):
        u.foreach_set(lambda x: pieces.append(
            x.align_params(space).remove_redundancies().coalesce().to_str()))
    elif isinstance(u, isl.UnionPwAff):
        # (as a map: its domain's redundant constraints removed, which a tree
        # read back from its text has lost, ``0 <= i`` beside ``0 <= j < i``)
        u.foreach_pw_aff(lambda x: pieces.append(
            isl.Map.from_pw_aff(x.align_params(space)).remove_redundancies().coalesce()
            .to_str()))
    else:
        pieces.append(u.to_str())
    return sorted(pieces)


def canonical_tree(node: isl.ScheduleNode, space: isl.Space) -> list:
    """A schedule tree as nested lists whose unions are sorted
    (:func:`_union_text`): the same tree gives the same lists however it
    was built or read."""
    t = node.get_type()
    kind = str(t).rsplit(".", 1)[-1]
    if t == isl.schedule_node_type.domain:
        head = _union_text(node.domain_get_domain(), space)
    elif t == isl.schedule_node_type.filter:
        head = _union_text(node.filter_get_filter(), space)
    elif t == isl.schedule_node_type.mark:
        head = [node.mark_get_id().get_name()]
    elif t == isl.schedule_node_type.band:
        mupa = node.band_get_partial_schedule()
        head = [_union_text(mupa.get_union_pw_aff(i), space)
                for i in range(mupa.dim(isl.dim_type.out))]
        head.append([bool(node.band_get_permutable())])
    else:
        head = []
    return [kind, head, [canonical_tree(node.child(i), space) for i in range(node.n_children())]]


def positive_constant(pa: isl.PwAff) -> int | None:
    """The value of ``pa`` when it is one positive integer constant (a
    literal divisor, or a size fixed by specialization), else ``None``."""
    if not pa.is_cst():
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1 or not pieces[0][1].is_cst():
        return None
    v = pieces[0][1].get_constant_val()
    return int(v.to_python()) if v.is_int() and v.is_pos() else None
