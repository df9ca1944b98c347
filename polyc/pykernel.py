"""``@polyc.kernel``: compile an affine loop nest written in Python.

The decorated function is lowered by :mod:`polyc.frontend.pyloops` on the
first call for each combination of argument kinds, dtypes and ranks, and
compiled through :func:`polyc.pipeline.compile_program`; sizes stay
parameters, so later calls with other shapes reuse the same code.  Arrays
are updated in place and the call returns ``None`` (PolyBench semantics).

Guarantee on failure: every check (argument kinds, dtypes, ranks, shapes
against the sizes they define and the accesses, writability, aliasing)
runs before the generated code starts, and the generated code itself has no
failure path, so a call that raises has not written to any argument.
"""

from __future__ import annotations

import functools

import numpy as np

from .config import Config, config_or_env


class PyKernel:
    """A ``@polyc.kernel`` function.  Call it like the Python function.

    Attributes: ``py_func`` (the undecorated function, which runs as plain
    Python), ``config``, ``user_schedule`` (the schedule every
    specialisation compiles under, or ``None`` for the automatic one);
    ``program``, ``source``, ``schedule`` and :meth:`explain` describe the
    most recently compiled specialisation (:meth:`specialize` gives one for
    given arguments).
    """

    def __init__(self, fn, config: Config | None = None, schedule=None):
        if isinstance(fn, PyKernel):     # polyc.kernel(a @polyc.kernel function)
            config = fn.config if config is None else config
            schedule = fn.user_schedule if schedule is None else schedule
            fn = fn.py_func
        functools.update_wrapper(self, fn)
        self.py_func = fn
        self.config = config
        self.user_schedule = schedule
        self._kernels: dict[tuple, object] = {}
        self._last = None

    def with_config(self, config: Config) -> "PyKernel":
        """The same function compiled under ``config`` (e.g. the identity
        schedule as a baseline)."""
        return PyKernel(self.py_func, config, self.user_schedule)

    def with_schedule(self, schedule) -> "PyKernel":
        """The same function compiled under a user schedule: a recipe
        (:meth:`polyc.Schedule.to_recipe`, its JSON text or a ``.json``
        path), replayed on each specialisation's program, or a
        :class:`polyc.Schedule` of one specialisation's program (e.g.
        ``k.schedule.tile(...)`` after a call).  Each step is checked against
        the dependences when the specialisation compiles: raises
        :class:`~polyc.errors.IllegalScheduleError` (with a witness) or
        :class:`~polyc.errors.RecipeMismatchError` (a ``ScheduleError``: a
        schedule of another program or specialisation)
        then, as ``polyc.compile(..., schedule=)`` does."""
        return PyKernel(self.py_func, self.config, schedule)

    @staticmethod
    def _normalise(args: tuple) -> tuple:
        """numpy scalars as Python numbers; torch CPU tensors and other DLPack
        producers as numpy arrays sharing their memory (``np.from_dlpack``), so
        the in-place updates reach them (``BindingError`` if the producer refuses,
        e.g. a tensor that requires grad)."""
        from .dlpack import as_numpy, is_foreign
        return tuple(float(a) if isinstance(a, np.floating) else
                     int(a) if isinstance(a, np.integer) else
                     as_numpy(a) if is_foreign(a) and not hasattr(a, "__cuda_array_interface__")
                     else a for a in args)

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in parameter order: keyword arguments by
        name, defaults where none is passed (as Python binds them); a
        ``BindingError`` for a missing, extra or unknown argument."""
        if not kwargs and len(args) == self.py_func.__code__.co_argcount:
            return args
        import inspect

        from .errors import BindingError
        try:
            bound = inspect.signature(self.py_func).bind(*args, **kwargs)
        except TypeError as e:
            names = list(inspect.signature(self.py_func).parameters)
            raise BindingError(f"{self.__name__}() takes {len(names)} argument(s) "
                               f"({', '.join(names)}): {e}") from None
        bound.apply_defaults()
        return tuple(bound.args)

    def specialize(self, *args, **kwargs):
        """The compiled :class:`polyc.Kernel` for arguments like ``args``
        (kinds, dtypes, ranks; keyword arguments and defaults bound as
        Python binds them); compiles on first use.  Raises
        :class:`~polyc.errors.UnsupportedError` (with file and line) for a
        construct outside the accepted subset, ``DTypeError``,
        ``ShapeError``, ``BindingError``."""
        from .frontend.pyconsts import FunctionEnv, constants
        from .frontend.pysource import arg_spec, check_signature
        fdef, filename, line0, lines = self._parsed
        names = check_signature(fdef, filename, line0)
        args = self._normalise(self._bind(args, kwargs))
        if len(args) != len(names):
            from .errors import BindingError
            raise BindingError(f"{self.__name__}() takes {len(names)} argument(s) "
                               f"({', '.join(names)}), got {len(args)}")
        specs = tuple(arg_spec(n, a) for n, a in zip(names, args))
        consts = constants(self._free_reads, FunctionEnv(self.py_func))
        key = (specs, consts)   # a global the body reads as a number is part of the key
        kernel = self._kernels.get(key)
        if kernel is None:
            from .frontend.pyconsts import inline
            from .frontend.pyloops import lower_specs
            from .pipeline import compile_program
            program = lower_specs(inline(fdef, consts), filename, line0, lines,
                                  dict(zip(names, specs)), fdef.name)
            config = self.config or Config.from_env()
            if self.user_schedule is None:
                kernel = compile_program(program, config)
            else:
                from .api import compile_with_schedule
                from .errors import RecipeMismatchError
                try:
                    kernel = compile_with_schedule(program, self.user_schedule, config)
                except RecipeMismatchError as e:
                    raise RecipeMismatchError(
                        f"{e}\n  {self.__name__} was called with {_kinds(names, specs)}; a recipe "
                        "replays on the specialisation it was recorded on (argument dtypes "
                        "and ranks): record one per specialisation") from None
            self._kernels[key] = kernel
        self._last = kernel
        return kernel

    @functools.cached_property
    def _free_reads(self) -> tuple:
        """The names the body reads without binding them (module-level
        numbers such as ``TILE = 4``, ``math.pi``), looked up at each call."""
        from .frontend.pyconsts import free_reads
        return free_reads(self._parsed[0])

    @functools.cached_property
    def _parsed(self):
        """(FunctionDef, filename, first line, source lines), read once."""
        from .frontend.pysource import parse_function
        return parse_function(self.py_func)

    def __call__(self, *args, **kwargs) -> None:
        args = self._normalise(self._bind(args, kwargs))
        self.specialize(*args)(*args)

    def _only(self):
        if self._last is None:
            from .errors import BindingError
            raise BindingError(f"{self.__name__} has not been compiled yet: call it, or "
                               "use kernel.specialize(*args)")
        return self._last

    @property
    def program(self):
        return self._only().program

    @property
    def source(self) -> str:
        return self._only().source

    @property
    def schedule(self):
        return self._only().schedule

    def explain(self, json: bool = False):
        return self._only().explain(json=json)

    def __repr__(self) -> str:
        return f"<polyc.kernel {self.__name__}>"


def _kinds(names, specs) -> str:
    return ", ".join(f"{n}: {sp.dtype} {sp.ndim}-d array" if sp.kind == "array" else
                     f"{n}: {sp.kind}" for n, sp in zip(names, specs))


def kernel(fn=None, *, config: Config | None = None, target: str | None = None,
           schedule=None):
    """Decorator: ``@polyc.kernel``, ``@polyc.kernel(config=...)`` or
    ``@polyc.kernel(target="cuda")`` (``target`` overrides ``config.target``);
    ``schedule=``: a recipe every specialisation compiles under (see
    :meth:`PyKernel.with_schedule`)."""
    if config is not None or target is not None:
        config = config_or_env(config, "polyc.kernel")
    if target is not None:
        config = config.replace(target=target)
    if fn is None:
        return lambda f: PyKernel(f, config, schedule)
    return PyKernel(fn, config, schedule)
