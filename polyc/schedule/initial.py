"""Initial schedules: the source order, and isl's automatic scheduler.

Takes an ``ir.Program`` (and its ``Dependences``) and returns an
``isl.Schedule`` tree.  :func:`identity_schedule` is the original sequential
order (a sequence of statements, each scanning its domain lexicographically);
:func:`auto_schedule` runs isl's scheduler (Pluto-style ILP with isl's
extensions; Verdoolaege & Janssens, "Scheduling for PPCG", 2017) with
validity, coincidence and proximity constraints taken from the dependences, so
that statements are fused where that is legal and profitable.
"""

from __future__ import annotations

import contextlib

import islpy as isl

from ..dependence import Dependences
from ..ir import Program, original_schedule
from ..isl_util import CTX


def identity_schedule(program: Program) -> isl.Schedule:
    """The source order (see :func:`polyc.ir.original_schedule`)."""
    return original_schedule(program)


@contextlib.contextmanager
def _scheduler_options(**opts):
    """Temporarily set isl scheduler options on polyc's isl context."""
    old = {k: getattr(CTX, f"get_{k}")() for k in opts}
    try:
        for k, v in opts.items():
            getattr(CTX, f"set_{k}")(v)
        yield
    finally:
        for k, v in old.items():
            getattr(CTX, f"set_{k}")(v)


def auto_schedule(program: Program, deps: Dependences, config=None) -> isl.Schedule:
    """Compute a schedule with isl's scheduler.

    Validity: every dependence.  Coincidence: every dependence too, so a band
    member reported coincident carries no dependence at all (isl only reports
    coincidence relative to the constraints it was given).  Proximity: every
    dependence, which pulls producers and consumers together (fusion) and
    keeps reuse distances short.  ``schedule_outer_coincidence`` asks isl to
    keep the outermost band member coincident where possible.
    """
    all_deps = deps.all()
    context = program.parameter_domain()
    # statement instances outside the parameter domain never run; leaving them
    # in the domain would give isl a band that "drops" them (AST error)
    sc = (isl.ScheduleConstraints.on_domain(program.domain().intersect_params(context))
          .set_context(context)
          .set_validity(all_deps)
          .set_coincidence(all_deps)
          .set_proximity(all_deps))
    with _scheduler_options(schedule_outer_coincidence=1,
                            schedule_serialize_sccs=0,
                            schedule_maximize_band_depth=1):
        try:
            return sc.compute_schedule()
        except isl.Error:
            # isl's scheduler can fail on a tightly bounded parameter domain
            # ("unable to carry dependences"); the source order is always legal
            return identity_schedule(program)
