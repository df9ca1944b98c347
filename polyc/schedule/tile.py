"""Band optimisation: loop order for locality, tiling, and simd marks.

Takes an ``isl.Schedule`` (from the scheduler) and the ``ir.Program`` and
returns a new ``isl.Schedule``.  For each band, bottom-up:

1. **reorder** (checked by construction): in a permutable band any order of
   the members is legal (every dependence is non-negative in every member), so
   the coincident member that makes the most accesses stride-1 is moved
   innermost;
2. **tile** (``isl_schedule_node_band_tile``): permutable bands of two or more
   members are tiled; tile sizes come from ``Config.tile_sizes`` or from the
   cache sizes read from sysfs (:func:`default_tile_size`);
3. **simd**: when the innermost member of a band with no band below is
   coincident and stride-1 for some access, it is split off and marked
   ``omp_simd`` (see :mod:`polyc.schedule.marks`).

The result still goes through :func:`polyc.schedule.legality.check`.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import islpy as isl

from .. import expr as E
from ..config import Config
from ..ir import Program, Statement
from ..isl_util import CTX, NonAffineError, aff_from_expr
from .marks import coincident_members, has_band_below, mark_simd_innermost

_BAND = isl.schedule_node_type.band


@functools.lru_cache(maxsize=None)
def cache_sizes() -> dict[int, int]:
    """Data cache sizes in bytes by level, from
    ``/sys/devices/system/cpu/cpu0/cache``; defaults 32 KiB / 1 MiB / 8 MiB."""
    sizes = {1: 32 * 1024, 2: 1024 * 1024, 3: 8 * 1024 * 1024}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for idx in base.glob("index*"):
            kind = (idx / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((idx / "level").read_text())
            text = (idx / "size").read_text().strip().upper()
            mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
            sizes[level] = int(text.rstrip("KM")) * mult
    except (OSError, ValueError):
        pass
    return sizes


def default_tile_size(n_tensors: int, elem_bytes: int) -> int:
    """A square tile edge ``T`` such that ``n_tensors`` tiles of ``T x T``
    elements fill about half of the L2 cache; a multiple of 16 in [16, 256]."""
    budget = cache_sizes().get(2, 1 << 20) // 2
    t = int(math.sqrt(budget / max(1, n_tensors * elem_bytes)))
    return max(16, min(256, t // 16 * 16))


def _member_iterator(stmt: Statement, upa: isl.UnionPwAff) -> str | None:
    """The iterator of ``stmt`` that band member ``upa`` scans with unit
    coefficient (``None`` when the member is not a single iterator)."""
    fn_space = isl.Space.from_domain(stmt.domain.get_space()).add_dims(isl.dim_type.out, 1)
    pa = upa.extract_pw_aff(fn_space)
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    found = None
    for i, name in enumerate(stmt.iterators):
        c = aff.get_coefficient_val(isl.dim_type.in_, i).to_python()
        if c == 0:
            continue
        if c != 1 or found is not None:
            return None
        found = name
    return found


def _coefficient(idx: E.Expr, stmt: Statement, var: str) -> int | None:
    try:
        pa = aff_from_expr(idx, stmt.domain.get_space())
    except NonAffineError:
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    pos = stmt.iterators.index(var)
    return int(pieces[0][1].get_coefficient_val(isl.dim_type.in_, pos).to_python())


def stride_score(stmt: Statement, var: str) -> int:
    """+1 for every access of ``stmt`` whose last index moves by one element
    when ``var`` does (and no other index depends on it), -1 for every access
    that ``var`` strides through a non-last dimension, 0 when ``var`` does not
    move the access."""
    score = 0
    for acc in [stmt.lhs] + E.accesses(stmt.rhs):
        if not acc.indices:
            continue
        coeffs = [_coefficient(i, stmt, var) for i in acc.indices]
        if any(c is None for c in coeffs):
            continue
        if any(coeffs[:-1]):
            score -= 1
        elif coeffs[-1] in (1, -1):
            score += 1
    return score


def _band_statements(band: isl.ScheduleNode, program: Program) -> list[Statement]:
    names = set()
    band.get_domain().foreach_set(lambda s: names.add(s.get_tuple_name()))
    return [s for s in program.statements if s.name in names]


def _member_scores(band: isl.ScheduleNode, program: Program) -> list[int | None]:
    mupa = band.band_get_partial_schedule()
    stmts = _band_statements(band, program)
    scores: list[int | None] = []
    for j in range(band.band_n_member()):
        upa = mupa.get_union_pw_aff(j)
        total = 0
        for s in stmts:
            if not s.iterators:
                continue
            var = _member_iterator(s, upa)
            if var is None:
                if s.kind == "init":
                    continue  # an init statement sits at a constant in reduction members
                total = None
                break
            total += stride_score(s, var)
        scores.append(total)
    return scores


def _reorder(band: isl.ScheduleNode, order: list[int]) -> isl.ScheduleNode:
    """Rebuild ``band`` with its members permuted to ``order`` (keeps the
    permutable flag and each member's coincidence)."""
    mupa = band.band_get_partial_schedule()
    coinc = coincident_members(band)
    perm = band.band_get_permutable()
    upas = [mupa.get_union_pw_aff(j) for j in order]
    new = mupa
    for k, upa in enumerate(upas):
        new = new.set_union_pw_aff(k, upa)
    node = band.delete().insert_partial_schedule(new)
    node = node.band_set_permutable(perm)
    for k, j in enumerate(order):
        node = node.band_member_set_coincident(k, coinc[j])
    return node


def _tile_sizes(band: isl.ScheduleNode, program: Program, config: Config) -> isl.MultiVal:
    n = band.band_n_member()
    if config.tile_sizes:
        sizes = list(config.tile_sizes) + [config.tile_sizes[-1]] * n
    else:
        stmts = _band_statements(band, program)
        tensors = {s.tensor for s in stmts} | {t for s in stmts for t in s.read_tensors()}
        elem = max((program.tensor(t).dtype.endswith("64") and 8 or 4) for t in tensors)
        sizes = [default_tile_size(len(tensors), elem)] * n
    mv = isl.MultiVal.zero(band.band_get_space())
    for i in range(n):
        mv = mv.set_val(i, isl.Val.int_from_si(CTX, int(sizes[i])))
    return mv


def _optimize_band(node: isl.ScheduleNode, program: Program, config: Config) -> isl.ScheduleNode:
    if node.get_type() != _BAND:
        return node
    n = node.band_n_member()
    innermost = not has_band_below(node)
    coinc = coincident_members(node)
    scores = _member_scores(node, program)
    best = None
    if node.band_get_permutable() or n == 1:
        cands = [j for j in range(n) if coinc[j] and scores[j] is not None and scores[j] > 0]
        if cands:
            best = max(cands, key=lambda j: (scores[j], j))
            if best != n - 1 and node.band_get_permutable():
                order = [j for j in range(n) if j != best] + [best]
                node = _reorder(node, order)
                best = n - 1
    if config.tiling and n >= 2 and node.band_get_permutable():
        node = node.band_tile(_tile_sizes(node, program, config)).child(0)
        if config.simd and innermost and best == n - 1:
            node = mark_simd_innermost(node)
        return node.parent()
    if config.simd and innermost and best == n - 1:
        node = mark_simd_innermost(node)
    return node


def optimize_bands(schedule: isl.Schedule, program: Program, config: Config) -> isl.Schedule:
    """Apply reordering, tiling and simd marking to every band (bottom-up)."""
    def walk(node: isl.ScheduleNode) -> isl.ScheduleNode:
        for i in range(node.n_children()):
            node = walk(node.child(i)).parent()
        return _optimize_band(node, program, config)
    return walk(schedule.get_root()).get_schedule()
