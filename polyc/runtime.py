"""Kernel: a compiled C program bound to Python (the C launcher).

Takes the stage objects of one compilation (``ir.Program``, the schedule, the
LoopNest, the C ``Source`` and the loaded library) and exposes a callable:
``kernel(*args, out=None)`` binds the arguments with the target-free
:class:`polyc.binder.Binder` (whose docstring states the calling convention)
and runs the generated code through ctypes.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .binder import SERIAL_WORK, Binder, param_function  # noqa: F401 -- re-exported
from .callplan import CallPlan
from .dlpack import as_numpy, is_foreign, is_torch, to_torch
from .errors import BindingError
from .ir import Program
from .lowered import with_notes


def _from_dlpack_call(kernel: Kernel, args: tuple, out, kwargs: dict):
    """A call with DLPack producers among the arguments: they are read as
    numpy arrays without a copy (``np.from_dlpack``), so in-place kernels
    update them; when one was a torch tensor the results are returned as
    torch tensors sharing memory with polyc's output arrays."""
    torch_in = any(is_foreign(a) and is_torch(a) for a in args)
    if isinstance(out, (tuple, list)):
        out = type(out)(as_numpy(o) for o in out)
    else:
        out = as_numpy(out)
    result = kernel(*[as_numpy(a) for a in args], out=out, **kwargs)
    return to_torch(result) if torch_in and result is not None else result


def _as_called(program: Program, source) -> Program:
    """``program`` with only the temporaries the C function takes: array
    contraction (:mod:`polyc.schedule.contraction`) turns some into buffers
    of the generated code, which the caller no longer allocates.  The
    source's argument list says which, also when it came from the cache."""
    passed = set(source.tensors)
    if all(t.role != "temp" or t.name in passed for t in program.tensors):
        return program
    return program.replace(tensors=tuple(t for t in program.tensors
                                         if t.role != "temp" or t.name in passed))


class Kernel:
    """A compiled polyc kernel.  Call it with the inputs in signature order.

    Attributes: ``program`` (the ``ir.Program``; ``str()`` prints it),
    ``schedule`` (a :class:`polyc.Schedule` of the tree the code came from:
    print it, transform it, pass it back to :func:`polyc.compile`),
    ``isl_schedule`` (the ``isl.Schedule``), ``loopnest``, ``source`` (the C
    text), ``library``; :meth:`explain` describes the loops, :meth:`plot`
    draws them.
    When the C source came from the cache, the schedule and loop nest are
    recomputed (``relower``) the first time they are asked for.
    """

    def __init__(self, program: Program, source, library, config, *, lowered=None,
                 relower=None, user_schedule=None):
        self.program = program
        self._user_schedule = user_schedule
        self._lowered = lowered
        self._relower = relower
        self._source = source
        self.library = library
        self.config = config
        self.binder = Binder(_as_called(program, source))
        self._fn = library.function(source.entry, [ctypes.c_void_p, ctypes.c_void_p,
                                                   ctypes.c_int32])
        self._nthreads = int(config.num_threads or 0)
        self._plans: dict | None = CallPlan.cache_for(program, self.binder)
        self._shim = None
        self._entry = None
        if self._plans is not None:
            from polyc.backends.c.callshim import shim
            self._shim = shim(config)
            self._entry = ctypes.cast(self._fn, ctypes.c_void_p).value
        #: what the tuning database decided for this kernel (``None``: not consulted
        #: or nothing recorded); :meth:`explain` prints it
        self.tuning: str | None = None
        #: the versions by shape class of a versioned kernel (:mod:`polyc.versioned`):
        #: ``{"class", "guard", "recipe", "why"}`` each, the generic one last
        self.versions: list | None = None

    #: Below this many statement instances a call runs on one thread
    #: (:data:`polyc.binder.SERIAL_WORK`).
    SERIAL_WORK = SERIAL_WORK

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def source(self) -> str:
        return self._source.text

    def _low(self):
        if self._lowered is None:
            self._lowered = self._relower()
        return self._lowered

    @property
    def isl_schedule(self):
        """The checked ``isl.Schedule`` the C code was generated from."""
        return self._low().schedule

    @property
    def loopnest(self):
        return self._low().loopnest

    @property
    def schedule(self):
        """The :class:`polyc.Schedule` the code was generated from (the user's,
        or the automatic one wrapped with derived loop names)."""
        if self._user_schedule is not None:
            return self._user_schedule
        return self._low().as_schedule()

    def explain(self, json: bool = False):
        """For each loop: the dependences it carries, whether it is parallel
        or vectorizable and why not, fusion groups, tile footprints (see
        :mod:`polyc.schedule.explain`); then, per reduction, the intrinsic it
        was tensorized onto or why it was not, and what row fusion did.
        Text, or a dict with ``json=True`` (``"tensorize"``: statement ->
        that line; ``"row_fusion"``: the row-fusion line or ``""``)."""
        from .schedule.explain import explain
        out = explain(self.schedule, as_json=json,
                      config=self.config if self._user_schedule is None else None)
        low = self._low()
        if self._user_schedule is not None and not low.tensorized and not low.contracted:
            low = None       # a user schedule without tensorize marks: no notes
        from polyc.backends.c.build import intrinsics_isa
        out = with_notes(out, low, isa=intrinsics_isa(self.library))
        if self.tuning:
            if isinstance(out, dict):
                out["tuning"] = self.tuning
            else:
                out = f"{out}\n{self.tuning}"
        return out

    def plot(self, *, sizes: dict, path=None, **options):
        """A picture of :attr:`schedule` at ``sizes``: :func:`polyc.plot.draw`."""
        from .plot import draw
        return draw(self, sizes=sizes, path=path, **options)

    def __call__(self, *args, out=None, **kwargs):
        plans = self._plans
        key = None
        if plans is not None and not kwargs:
            key = CallPlan.key(self.binder, args, self._shim)
            plan = plans.get(key) if key is not None else None
            if plan is not None:
                if out is None:
                    return plan.run(self._fn, args)
                outs = plan.plain_outs(out, args)
                if outs is not None:
                    return plan.run(self._fn, args, outs)
        if any(is_foreign(a) for a in args) or is_foreign(out) or (
                isinstance(out, (tuple, list)) and any(is_foreign(o) for o in out)):
            return _from_dlpack_call(self, args, out, kwargs)
        if kwargs:
            raise BindingError(
                f"{self.name}() got an unexpected keyword argument '{next(iter(kwargs))}'; "
                f"pass the arguments by position ({', '.join(self.program.signature)}) and "
                "output arrays with out=")
        pvals, buffers, results, copies = self.binder.bind(args, out)
        params = np.array(pvals or [0], dtype=np.int64)
        ptrs = np.array([b.__array_interface__["data"][0] for b in buffers] or [0],
                        dtype=np.uintp)
        work = self.binder.work(*pvals)
        # nothing to execute (every domain empty): skip the call, whose loop
        # bounds may still span a huge empty range at extreme sizes
        run = work > 0 or not self.binder.all_empty(pvals)
        threads = 1 if work < self.SERIAL_WORK else self._nthreads
        if run:
            self._fn(params.ctypes.data, ptrs.ctypes.data, threads)
        for tmp, dst in copies:
            dst[...] = tmp
        if key is not None and len(plans) < CallPlan.MAX_PLANS:
            plans[key] = CallPlan(self.binder, pvals, run, threads, self._shim, self._entry)
        if not self.program.outputs:
            return None              # in-place kernels (@polyc.kernel)
        return results[0] if len(results) == 1 else tuple(results)

    def call_into(self, args: tuple, outs: list):
        """``self(*args)``, with the outputs in ``outs`` (per output an array
        or ``None``) where the call takes the fast path (:class:`CallPlan`)
        and an array matches its output's shape and dtype; elsewhere fresh
        outputs, as ``self(*args)`` gives.  For callers that reuse buffers
        between calls (:mod:`polyc.graph.workspace`); unlike ``out=``, the
        outputs are never checked against the arguments for overlap, so
        ``outs`` must not share memory with ``args``."""
        plans = self._plans
        if plans is not None:
            key = CallPlan.key(self.binder, args, self._shim)
            plan = plans.get(key) if key is not None else None
            if plan is not None:
                return plan.run(self._fn, args, outs)
        return self(*args)

    def __repr__(self) -> str:
        sig = ", ".join(self.program.signature)
        outs = ", ".join(t.name for t in self.program.outputs)
        return f"<polyc.Kernel {self.name}({sig}) -> ({outs})>"
