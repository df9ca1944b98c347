"""A static profile of a scheduled tree, to choose between two candidates.

isl's scheduler maximises outer parallelism (``schedule_outer_coincidence``)
and proximity; it knows nothing of strides.  Where the only parallelism it
finds is an innermost loop inside sequential loops (a triangular solve's
column sweep, floyd-warshall's skewed diagonals), the team forks once per
outer iteration for O(n) work, and the price is usually a non-unit stride
in that innermost loop, where the source order walked rows.  The source
order, with the same band optimisation, is then the better program.

:func:`profile` measures the two things that decide it for the *hot*
statements (those of deepest iteration domain):

* ``coarse``: every hot statement runs under a parallel loop that encloses
  another of its loops (a team forks at most once per outer iteration for
  at least O(n^2) work);
* ``stride``: the summed :func:`~polyc.schedule.locality.stride_score` of
  the hot statements' accesses along their innermost loop (a loop that is
  not a single iterator, e.g. a skewed ``i + j``, scores -1 per access).

:func:`prefer_source_order` applies the rule in :func:`polyc.pipeline.lower`.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polyc import expr as E
from polyc.ir import Program

from .locality import _member_aff, hot_statements, member_iterator, stride_score
from .marks import parse_parallel_mark

_BAND = isl.schedule_node_type.band
_MARK = isl.schedule_node_type.mark
_LEAF = isl.schedule_node_type.leaf


@dataclass(frozen=True)
class Profile:
    """``coarse``: every hot statement has a parallel loop outside its
    innermost loop; ``stride``: summed innermost-loop stride score of the
    hot statements (higher is better)."""
    coarse: bool
    stride: int


def profile(schedule: isl.Schedule, program: Program) -> Profile:
    """The :class:`Profile` of ``schedule`` (after band optimisation and
    parallel marking) for ``program``'s hot statements."""
    hot = {s.name: s for s in hot_statements(list(program.statements))}
    coarse: dict[str, bool] = {}
    stride: dict[str, int] = {}

    def walk(node: isl.ScheduleNode, path: list[tuple[isl.UnionPwAff, bool]],
             collapse: int) -> None:
        t = node.get_type()
        if t == _MARK:
            k = parse_parallel_mark(node.mark_get_id().get_name())
            walk(node.child(0), path, k or collapse)
            return
        if t == _BAND:
            mupa = node.band_get_partial_schedule()
            path = path + [(mupa.get_union_pw_aff(j), j < collapse)
                           for j in range(node.band_n_member())]
            collapse = 0
        if t == _LEAF:
            names: set[str] = set()
            node.get_domain().foreach_set(lambda s: names.add(s.get_tuple_name()))
            for name in names & hot.keys():
                s = hot[name]
                loops = [(u, par) for u, par in path if _varies(s, u)]
                if not loops:
                    continue
                coarse[name] = coarse.get(name, True) and any(p for _, p in loops[:-1])
                var = member_iterator(s, loops[-1][0])
                n_acc = sum(1 for a in [s.lhs] + E.accesses(s.rhs) if a.indices)
                stride[name] = min(stride.get(name, n_acc),
                                   stride_score(s, var) if var is not None else -n_acc)
            return
        for i in range(node.n_children()):
            walk(node.child(i), path, collapse if t != _BAND else 0)

    walk(schedule.get_root(), [], 0)
    return Profile(coarse=bool(coarse) and all(coarse.values()),
                   stride=sum(stride.values()))


def _varies(stmt, upa: isl.UnionPwAff) -> bool:
    """Whether band member ``upa`` depends on an iterator of ``stmt``, also
    through an integer division (a tile loop ``i - i mod 64``)."""
    aff = _member_aff(stmt, upa)
    return aff is None or aff.involves_dims(isl.dim_type.in_, 0, len(stmt.iterators))


def prefer_source_order(isl_profile: Profile, source_profile: Profile) -> bool:
    """Whether the source order (optimised the same way) beats isl's
    schedule: isl's has no coarse parallelism for every hot statement, and
    the source order has it, or walks memory with a better innermost
    stride."""
    if isl_profile.coarse:
        return False
    return source_profile.coarse or source_profile.stride > isl_profile.stride
