"""The schedule language: :class:`Schedule`, an immutable, checked wrapper
of a program's ``isl.Schedule`` tree.

Every transformation returns a new :class:`Schedule`; the one it was called
on is never modified, so a refused transformation leaves the user's schedule
as it was.  After every transformation the new tree is checked against the
program's exact dependences (:mod:`polyc.schedule.legality`): an order that
breaks a flow, anti or output dependence, or a ``parallel`` / ``vectorize``
mark on a loop that carries one, raises
:class:`~polyc.errors.IllegalScheduleError` with the transformation, the
statements, the tensor, the dependence kind and one concrete pair of
instances.  Requests that cannot be applied at all (a loop that does not
exist, a size that is not a positive integer) raise
:class:`~polyc.errors.ScheduleError`.

The transformations applied so far form the schedule's *recipe*
(:attr:`Schedule.recipe`), a JSON-serialisable list that
:meth:`Schedule.replay` re-applies to the same program to rebuild the same
tree (see :mod:`polyc.schedule.recipe`).

Loops are addressed by name (``s.loop("C", "m")``: statement or output
tensor, then iterator), by tree path (``s.loop(path=(0, 1), member=0)``), or
by passing ``("C", "m")`` tuples straight to a transformation.
"""

from __future__ import annotations

import json

import islpy as isl

from .. import bounds, dependence
from ..dependence import Dependences
from ..errors import IllegalScheduleError, PolycError, RecipeMismatchError, ScheduleError
from ..ir import Program
from ..isl_util import is_isl_word
from . import (
    affine,
    fusion,
    gpu_schedule,
    initial,
    legality,
    promotion,
    tensorize,
    transforms,
    tree,
    tree_print,
    unroll,
)
from .marks import current_names
from .promotion import LOCAL_MARK
from .promotion_check import check_promotions
from .recipe import encode_step, make_recipe, replay
from .registry import KINDS, METHODS, SCHEDULE_CLASS, TRANSFORMS, lookup, transform
from .tree import Loop

#: The modules whose transformations register themselves in
#: :mod:`polyc.schedule.registry` when imported: importing the language
#: fills the table.  None of them imports this module.
TRANSFORMATION_MODULES = (transforms, fusion, affine, unroll, promotion, tensorize,
                          gpu_schedule)




def _describe(value) -> str:
    if isinstance(value, Loop):
        return value.name
    if isinstance(value, dict) and set(value) <= {"path", "member"}:
        return f"path {value.get('path')}[{value.get('member', 0)}]"
    if isinstance(value, (list, tuple)) and not (
            len(value) == 2 and all(isinstance(v, str) and "." not in v for v in value)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    if isinstance(value, (list, tuple)):
        return f"{value[0]}.{value[1]}"
    return repr(value)


class Schedule:
    """A program's schedule tree plus the recipe that produced it.

    Attributes: ``program`` (the ``ir.Program``; promotion adds copy
    statements and local buffers to it), ``deps`` (its
    :class:`~polyc.dependence.Dependences`, always those of the original
    statements), ``isl`` (the ``isl.Schedule``), ``recipe`` (tuple of step
    dicts), ``start`` (``"source"`` or ``"isl"``), ``reassociate`` (whether
    reduction dependences may be reordered), ``origin`` (the starting tree
    in isl's text form when it cannot be rebuilt from ``start``: a compiled
    kernel's tree or one read by :meth:`from_text`; recipes carry it).
    """

    __slots__ = ("program", "deps", "isl", "recipe", "start", "reassociate", "_base",
                 "origin")

    def __init__(self, program: Program, deps: Dependences, schedule: isl.Schedule, *,
                 recipe: tuple = (), start: str = "source", reassociate: bool = False,
                 base: Program | None = None, origin: str | None = None):
        self.program = program
        self.deps = deps
        self.isl = schedule
        self.recipe = tuple(recipe)
        self.start = start
        self.reassociate = reassociate
        self._base = base or program
        self.origin = origin

    @property
    def base(self) -> Program:
        """The program the schedule started from (before promotion added
        copies and buffers): the one its recipe names and replays onto."""
        return self._base

    # ------------------------------------------------------------ creation
    @classmethod
    def from_program(cls, program: Program, *, start: str = "source",
                     reassociate: bool = False) -> "Schedule":
        """The schedule to start experimenting from.

        ``start="source"`` (default): the source order
        (:func:`polyc.schedule.tree.natural_schedule`), bands named after the
        source iterators.  ``start="isl"``: isl's scheduler
        (:func:`polyc.schedule.initial.auto_schedule`), before polyc's own
        band optimisation.  ``reassociate=True`` lets later transformations
        reorder the terms of a reduction (``+=!`` and friends): reduction
        dependences then constrain only parallelism, not order.
        ``program``: a ``polyc.program(...)``, TC source of one definition,
        or a compiled kernel (its program); anything else is a
        :class:`ScheduleError`.
        """
        if isinstance(program, str):
            from ..frontend import tc  # (not polyc.api: a later stage)
            defs = tc.require_definitions(tc.parse(program)).defs
            if len(defs) != 1:
                raise ScheduleError(f"from_program: the source has {len(defs)} definitions "
                                    f"({', '.join(d.name for d in defs)}); pass "
                                    "polyc.program(source, name) of one")
            program = tc.lower(defs[0], {}, source=program)
        elif not isinstance(program, Program) and isinstance(
                getattr(program, "program", None), Program):
            program = program.program
        if not isinstance(program, Program):
            raise ScheduleError(f"from_program: expected a program (polyc.program(source)), "
                                f"TC source or a compiled kernel, got {type(program).__name__}")
        if program.preconditions is None:
            program = program.replace(preconditions=bounds.preconditions(program))
        deps = dependence.compute(program)
        if start == "source":
            sched = tree.natural_schedule(program)
        elif start == "isl":
            sched = tree.name_all_bands(initial.auto_schedule(program, deps), program)
        else:
            raise ScheduleError(f"start={start!r}: choose 'source' or 'isl'")
        # recorded as a step, so that the recipe replays with it
        steps = ({"op": "with_reassociation", "args": [True], "kwargs": {}},) \
            if reassociate else ()
        return cls(program, deps, sched, start=start, reassociate=bool(reassociate),
                   recipe=steps)

    @classmethod
    def from_isl(cls, program: Program, schedule: isl.Schedule,
                 deps: Dependences | None = None) -> "Schedule":
        """Wrap an existing tree (e.g. a compiled kernel's); bands without a
        ``loops:`` mark get derived names."""
        deps = deps or dependence.compute(program)
        named = tree.name_all_bands(schedule, program)
        text = named.to_str()
        # a recipe replays from this very tree (polyc's band optimisation and
        # marks cannot be rebuilt from start="isl"); the tree is read back from
        # its text so that the replayed one prints identically.  isl cannot
        # read back every text it prints (iterators named like its keywords,
        # ``exists`` or ``min``): such a tree is kept as it is, and its recipe
        # does not replay
        try:
            back = isl.Schedule.read_from_str(schedule.get_ctx(), text)
            # (a name isl reads as a value, `S0[NaN]`, reads back as another set)
            if back.get_domain().is_equal(named.get_domain()):
                named = back
        except isl.Error:
            pass
        return cls(program, deps, named, start="isl", origin=text)

    # ------------------------------------------------------------ queries
    def loop(self, target: str | None = None, name: str | None = None, *,
             path=None, member: int = 0) -> Loop:
        """The loop ``name`` of statement or output tensor ``target``
        (``s.loop("C", "m")``), or the band member at ``path``.  Raises
        :class:`ScheduleError` when it does not exist or is ambiguous."""
        if path is not None:
            return tree.loop_at(self.isl, self.program, path, member)
        if target is None or name is None:
            raise ScheduleError("loop(): give a statement or tensor and a loop name, "
                                "e.g. loop('C', 'm'), or path=...")
        return tree.find_loop(self.isl, self.program, str(target), str(name))

    def loops(self) -> list[Loop]:
        """Every loop, outer bands first."""
        return tree.all_loops(self.isl, self.program)

    def resolve(self, spec) -> Loop:
        """A :class:`Loop` from a Loop, a ``(target, name)`` pair, a
        ``"target.name"`` string or ``{"path": [...], "member": k}``."""
        if isinstance(spec, Loop):
            # re-resolve: the loop may come from an earlier schedule
            if spec.spec is not None:
                return self.loop(*spec.spec)
            return self.loop(path=spec.path, member=spec.member)
        if isinstance(spec, str) and "." in spec:
            return self.loop(*spec.split(".", 1))
        if isinstance(spec, (tuple, list)) and len(spec) == 2 and all(
                isinstance(x, str) for x in spec):
            return self.loop(spec[0], spec[1])
        if isinstance(spec, dict) and "path" in spec:
            return self.loop(path=spec["path"], member=int(spec.get("member", 0)))
        raise ScheduleError(f"{spec!r} does not name a loop; use schedule.loop('C', 'm'), "
                            f"a ('C', 'm') pair or 'C.m'")

    def statement_names(self, target: str) -> tuple[str, ...]:
        return tree.target_statements(self.program, target)

    def validity(self) -> isl.UnionMap:
        """The dependences every order must respect (without the reduction
        dependences when ``reassociate`` is set)."""
        deps = self.deps.all()
        if self.reassociate:
            deps = deps.subtract(legality.reassociable(self.deps, self.program))
        return deps

    def check(self, what: str = "schedule") -> None:
        """Raise :class:`IllegalScheduleError` unless every dependence is
        respected, every parallel/simd mark sits on a loop that carries
        none, every promotion's copies still fit the loops around them
        (:func:`polyc.schedule.promotion_check.check_promotions`), and the GPU
        mapping, if any, joins no two threads or blocks of a launch by a
        dependence (:func:`polyc.schedule.gpu_schedule.check_mapping`)."""
        legality.check_tree(self.isl, self.deps, self.program, what=what,
                            reassociate=self.reassociate)
        if tensorize.marks(self.isl):
            tensorize.check_marks(self.isl, self.program)
        if tree.has_extension(self.isl):
            check_promotions(self, what)
        if gpu_schedule.has_user_marks(self.isl):
            try:
                gpu_schedule.check_mapping(self.isl, self.deps, self.program)
            except IllegalScheduleError as e:
                e.args = (f"{what}: {e.args[0]}",) + e.args[1:]
                raise

    # ------------------------------------------------------------ printing
    def __str__(self) -> str:
        return tree_print.format_tree(self.isl, self.program)

    def __eq__(self, other) -> bool:
        """Same program, same tree (isl text), same reassociation setting."""
        if not isinstance(other, Schedule):
            return NotImplemented
        same = self._base is other._base or \
            self._base.fingerprint() == other._base.fingerprint()
        return same and self.reassociate == other.reassociate and \
            self.to_text() == other.to_text()

    def __hash__(self) -> int:
        return hash(self.to_text())

    def __repr__(self) -> str:
        return (f"<polyc.Schedule of {self.program.name}: {len(self.recipe)} "
                f"transformation(s)>")

    def tree(self, detail: bool = False) -> str:
        """The indented tree (``detail``: with each member's partial schedule)."""
        return tree_print.format_tree(self.isl, self.program, detail=detail)

    def loop_nest(self) -> str:
        """The loop nest this schedule produces (pseudo-C from isl's AST)."""
        return tree_print.format_loop_nest(self.isl, self.program)

    def plot(self, *, sizes: dict, path=None, **options):
        """A picture of this schedule at ``sizes`` (a
        ``matplotlib.figure.Figure``, written to ``path``, ``.png`` or
        ``.svg``, when given): the instances of a statement (``statement=``)
        or the points of a band (``band=``), the dependences, the tiles, the
        execution order, the parallel loops and a refusal's violated pair
        (``witness=``).  See :func:`polyc.plot.draw` for the options and
        errors; needs matplotlib (``pip install "polyc[plot]"``)."""
        from ..plot import draw
        return draw(self, sizes=sizes, path=path, **options)

    def to_text(self) -> str:
        """The tree in isl's text (YAML) form; :meth:`from_text` reads it back."""
        return self.isl.to_str()

    def from_text(self, text: str) -> "Schedule":
        """The schedule whose tree is ``text`` (isl's notation), on this
        program, checked.  The recipe is lost (it is not in the text)."""
        try:
            sched = isl.Schedule.read_from_str(self.isl.get_ctx(), text)
        except isl.Error as e:
            clash = sorted({it for st in self.program.statements for it in st.iterators
                            if is_isl_word(it)} | {p for p in self.program.params
                                                   if is_isl_word(p)})
            hint = (f" (isl reads {', '.join(clash)} as keywords, so it cannot read back a "
                    f"tree of this program: rename those loop variables or sizes)"
                    if clash else "")
            raise ScheduleError(f"not an isl schedule tree: {e}{hint}") from None
        sched = current_names(sched)            # texts saved with omp_* mark names
        # equal for every parameter value the program admits (a compiled
        # kernel's tree carries the preconditions in its domain)
        params = self.program.parameter_domain()
        if not sched.get_domain().intersect_params(params).is_equal(
                self.isl.get_domain().intersect_params(params)):
            raise RecipeMismatchError("the schedule text is for another program: its domain "
                                f"{sched.get_domain()} differs from {self.isl.get_domain()}")
        # statements that extension nodes add (promotion's copies) must exist
        added: set[str] = set()
        for node in tree.walk(sched.get_root()):
            if node.get_type() == isl.schedule_node_type.extension:
                node.extension_get_extension().range().foreach_set(
                    lambda st: added.add(st.get_tuple_name()))
        unknown = sorted(added - {st.name for st in self.program.statements})
        if unknown:
            raise ScheduleError(
                f"the schedule text runs statements {', '.join(unknown)} (copies of a "
                f"promotion) that program {self.program.name} does not have; apply "
                f"promote() to the schedule instead of reading the promoted tree")
        locals_ = {t.name for t in self.program.tensors if t.role == "local"}
        for node in tree.walk(sched.get_root()):
            if node.get_type() == isl.schedule_node_type.mark:
                name = node.mark_get_id().get_name()
                if name.startswith(LOCAL_MARK) and name[len(LOCAL_MARK):] not in locals_:
                    raise ScheduleError(
                        f"the schedule text has a mark {name!r} but program "
                        f"{self.program.name} has no local buffer "
                        f"{name[len(LOCAL_MARK):]!r}; apply promote() to the schedule "
                        f"instead of writing the mark")
        new = Schedule(self.program, self.deps, sched, start=self.start,
                       reassociate=self.reassociate, base=self._base, origin=sched.to_str())
        new.check("the schedule read from text")
        return new

    # ------------------------------------------------------------ recipes
    def to_recipe(self) -> dict:
        """The recipe as a JSON-serialisable dict (see
        :mod:`polyc.schedule.recipe`)."""
        return make_recipe(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_recipe(), **kw)

    @classmethod
    def replay(cls, program: Program, recipe) -> "Schedule":
        """Re-apply ``recipe`` (dict, JSON text or path of a ``.json`` file)
        to ``program``: the same tree, hence byte-identical generated code.
        Raises :class:`~polyc.errors.RecipeMismatchError` (a
        :class:`ScheduleError`) for a recipe made for another program."""
        return replay(cls, program, recipe)

    # ------------------------------------------------------------ applying
    def apply(self, op: str, *args, **kwargs) -> "Schedule":
        """Apply transformation ``op`` (a name of :data:`TRANSFORMS`)."""
        return self._apply(op, args, kwargs, checked=True)

    def apply_unchecked(self, op: str, *args, **kwargs) -> "Schedule":
        """:meth:`apply` without the check against the dependences after the
        step (the transformation's own refusals still raise).  For a caller
        that checks the finished schedule once (:meth:`check`), as the
        automatic pipeline does (:mod:`polyc.schedule.auto`); the recorded
        recipe is the same, and its replay checks every step."""
        return self._apply(op, args, kwargs, checked=False)

    def _apply(self, op: str, args, kwargs, checked: bool) -> "Schedule":
        fn = lookup(op)
        # (distribute's groups are lists of statement names, not (target, loop) pairs)
        shown = [repr(a) if op == "distribute" and i else _describe(a)
                 for i, a in enumerate(args)]
        shown += [f"{k}={repr(v) if k == 'names' else _describe(v)}" for k, v in kwargs.items()]
        what = f"{op}({', '.join(shown)})"
        if checked and op in _INSIDE_LOOPS:
            self._refuse_below_tensorize(what, args)
        try:
            result = fn(self, *args, **kwargs)
        except PolycError as e:
            if what in str(e):
                raise
            wrapped = type(e)(f"{what}: {e}")
            if getattr(e, "witness", None) is not None:
                wrapped.witness = e.witness
            raise wrapped from None
        except isl.Error as e:
            hint = ""
            if "anchored" in str(e):
                hint = (" (the loop encloses a promotion or isolated full tiles, whose "
                        "copies and options depend on it; apply promote and "
                        "isolate_full_tiles last)")
            raise ScheduleError(f"{what}: isl cannot apply it: {e}{hint}") from None
        program = self.program
        if isinstance(result, tuple):
            result, program = result
        step = encode_step(op, args, kwargs)
        new = Schedule(program, self.deps, result, recipe=self.recipe + (step,),
                       start=self.start, reassociate=self.reassociate, base=self._base,
                       origin=self.origin)
        if checked:
            new.check(what)
        return new

    def _refuse_below_tensorize(self, what: str, args) -> None:
        """Raise :class:`ScheduleError` when a loop named in ``args`` is the
        band a tensorize mark marks or a loop below it: the intrinsic's call
        computes that subtree, so a step there would change nothing in the
        generated code (it was accepted silently)."""
        found = tensorize.marks(self.isl)
        if not found:
            return
        for a in args:
            if isinstance(a, (list, tuple)) and not (
                    len(a) == 2 and all(isinstance(x, str) for x in a)):
                specs = list(a)
            else:
                specs = [a]
            for spec in specs:
                try:
                    lp = self.resolve(spec)
                except (PolycError, TypeError, ValueError):
                    continue                   # (not a loop: the step reports it)
                for path, intrinsic, stmt, _ in found:
                    if lp.path[:len(path)] == tuple(path):
                        raise ScheduleError(
                            f"{what}: loop {lp.name} is computed by the {intrinsic} call "
                            f"of {stmt} (the tensorize mark at path {list(path)}), so this "
                            "step would change nothing; transform the loops before "
                            "tensorize (tile, then tensorize the point loops), or the "
                            "loops above the mark")

    def with_reassociation(self, allow: bool = True) -> "Schedule":
        """This schedule with reduction reordering allowed (or not): reduction
        dependences (an update through its own accumulator) then only forbid
        parallel execution; transformations may reorder the terms.  Recorded
        in the recipe."""
        new = Schedule(self.program, self.deps, self.isl, start=self.start,
                       reassociate=bool(allow), base=self._base, origin=self.origin,
                       recipe=self.recipe + ({"op": "with_reassociation",
                                              "args": [bool(allow)], "kwargs": {}},))
        new.check(f"with_reassociation({bool(allow)})")
        return new


#: the steps that transform loops themselves (a distribute or fuse of a
#: marked band moves statements in or out of the call: it is checked by the
#: mark's own check instead)
_INSIDE_LOOPS = frozenset({"tile", "split", "reorder", "interchange", "skew", "shift", "reverse",
                           "parallel", "vectorize", "unroll", "unroll_and_jam",
                           "isolate_full_tiles", "sink", "wavefront"})


def _method(op: str):
    def method(self, *args, **kwargs):
        return self.apply(op, *args, **kwargs)
    method.__name__ = method.__qualname__ = op
    return method


for _op in METHODS:
    setattr(Schedule, _op, _method(_op))


def document_methods() -> None:
    """Copy each registered transformation's docstring onto its method."""
    for op in METHODS:
        fn = TRANSFORMS.get(op)
        if fn is not None:
            getattr(Schedule, op).__doc__ = fn.__doc__


document_methods()
SCHEDULE_CLASS[:] = [Schedule]

__all__ = ["Schedule", "Loop", "transform", "TRANSFORMS", "KINDS", "METHODS",
           "IllegalScheduleError"]
