"""The fast paths of the legality checks (:mod:`polyc.schedule.legality`):
:func:`~polyc.schedule.legality.carries` decides on the dependence pairs in
schedule time what :func:`~polyc.schedule.legality.carried_by_member`
computes pair by pair, and the order check remembers its answers by tree
(marks left out) and dependences, so the per-step checks of a recipe's
replay (the tuner replays many: ``polyc tune --dry-run`` on PolyBench's
deriche took minutes) repeat no work.  Remembering must never mix up two
programs or two dependence sets."""

from __future__ import annotations

import islpy as isl
import pytest

from polyc import dependence
from polyc.errors import IllegalScheduleError
from polyc.isl_util import sets_of
from polyc.schedule import legality, tree

from .util import ANTI, MATMUL, PRODUCER_CONSUMER, RECUR, STENCIL, program, start

#: RECUR without the recurrence: the same tree, no dependence along j
NO_RECUR = """
def recur(float(N, M) X) -> (A) {
    A(i, j) = X(i, j) where i in 0:N, j in 0:M
    A(i, j) = A(i, j) + X(i, j) where i in 0:N, j in 1:M
}
"""


@pytest.mark.parametrize("src", [MATMUL, PRODUCER_CONSUMER, STENCIL, RECUR, ANTI])
@pytest.mark.parametrize("how", ["source", "isl"])
def test_carries_and_nonnegative_agree_with_the_pairwise_relation(src, how):
    s = start(src, start=how)
    bands = [n for n in tree.walk(s.isl.get_root())
             if n.get_type() == isl.schedule_node_type.band]
    assert bands
    for band in bands:
        for j in range(band.band_n_member()):
            for dep in (*s.deps.by_kind().values(), s.deps.all()):
                want = not legality.carried_by_member(band, j, dep).is_empty()
                assert legality.carries(band, j, dep) == want
                # permutability: no negative distance among the pairs of
                # equal prefix schedule (the quadratic relation)
                this = legality.member_maps(band, j)[1]
                dist = legality.unordered_within(band, dep).apply_domain(this) \
                    .apply_range(this).deltas()
                negative = any(
                    not st.upper_bound_val(isl.dim_type.set, 0,
                                           isl.Val.int_from_si(st.get_ctx(), -1)).is_empty()
                    for st in sets_of(dist))
                assert legality.nonnegative(band, j, dep) == (not negative)


def test_equal_programs_share_their_dependences_and_others_do_not():
    a = dependence.compute(program(RECUR))
    assert dependence.compute(program(RECUR)) is a
    b = dependence.compute(program(NO_RECUR))
    assert b is not a
    assert not b.flow.is_equal(a.flow)


def test_the_remembered_order_is_per_program():
    # the two programs' trees print alike; reversing j is legal for one only
    legal = start(NO_RECUR).reverse(("S1", "j"))
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor A"):
        start(RECUR).reverse(("S1", "j"))
    # and again, in the other order, after both were remembered
    with pytest.raises(IllegalScheduleError, match="flow dependence on tensor A"):
        start(RECUR).reverse(("S1", "j"))
    assert start(NO_RECUR).reverse(("S1", "j")).to_text() == legal.to_text()


def test_a_mark_does_not_hide_an_illegal_order():
    s = start(RECUR)
    par = s.parallel(("S1", "i"))
    legality.check_tree(par.isl, par.deps, par.program)      # remembered: legal
    with pytest.raises(IllegalScheduleError):
        par.reverse(("S1", "j"))
    with pytest.raises(IllegalScheduleError, match="cannot run parallel"):
        s.parallel(("S1", "j"))
