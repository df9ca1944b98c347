"""The polyc error hierarchy: everything a user can cause is one of these.

Every stage raises a subclass of :class:`PolycError` with a message that says
what went wrong in the user's terms (source line and column, argument name,
expected and got) and what to do about it.  Internal invariants use ``assert``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class PolycError(Exception):
    """Base class of every error polyc raises on purpose."""


class ParseError(PolycError):
    """A syntax error in TC source.

    Attributes: ``line`` and ``column`` (1-based), ``excerpt`` (the source line
    with a caret underline).
    """

    def __init__(self, message: str, *, line: int | None = None,
                 column: int | None = None, excerpt: str = "",
                 filename: str = "<tc>"):
        self.line, self.column, self.excerpt = line, column, excerpt
        self.filename = filename
        self.bare_message = message
        where = f"{filename}:{line}:{column}: " if line is not None else ""
        text = f"{where}{message}"
        if excerpt:
            text += "\n" + excerpt
        super().__init__(text)


class SemanticError(ParseError):
    """A well-formed program that means nothing: unknown tensor or index,
    redefinition, wrong arity, an undeterminable range.  Carries the same
    location fields as :class:`ParseError`."""


class UnsupportedError(PolycError):
    """A construct polyc does not (yet) compile, e.g. a non-affine index that
    is not a gather.  The message names the construct."""


class TraceError(PolycError):
    """Python code that polyc cannot trace into a graph: control flow that
    depends on array values (``if x.sum() > 0``, ``float(x)``,
    ``np.asarray(x)``) inside :func:`polyc.jit`.  ``filename`` and ``line``
    locate the user's statement; the message carries a hint."""

    def __init__(self, message: str, *, filename: str = "<unknown>", line: int = 0):
        self.filename, self.line = filename, line
        super().__init__(message)


class EinsumError(PolycError, ValueError):
    """An einsum call numpy would reject; also a ``ValueError`` so code written
    for ``numpy.einsum`` keeps working."""


class EinsumPathError(PolycError):
    """An ``optimize=`` contraction path that numpy's ``einsum`` rejects.
    Each concrete class is also the built-in class numpy raises, so code
    written for ``numpy.einsum`` keeps working: :class:`PathNameError`
    (``KeyError``), :class:`PathIndexError` (``IndexError``),
    :class:`IncompletePathError` (``RuntimeError``).  Malformed paths that
    numpy rejects with ``TypeError``/``ValueError`` raise
    :class:`BindingError`/:class:`EinsumError`."""


class PathNameError(EinsumPathError, KeyError):
    """``optimize`` names a path strategy that does not exist."""

    def __str__(self) -> str:   # KeyError's would quote the message
        return str(self.args[0]) if self.args else ""


class PathIndexError(EinsumPathError, IndexError):
    """An explicit path names an operand position past the operands left."""


class IncompletePathError(EinsumPathError, RuntimeError):
    """An explicit path leaves more than one operand uncontracted."""


class ShapeError(PolycError, ValueError):
    """Array shapes contradict each other or the kernel's signature."""


class AxisError(ShapeError, np.exceptions.AxisError):
    """An ``axis`` argument outside the array's dimensions, in traced code;
    also numpy's ``AxisError`` (a ``ValueError`` and an ``IndexError``), so
    code written for numpy keeps catching it.  Built from the message."""

    def __init__(self, message: str):
        np.exceptions.AxisError.__init__(self, message)


class IndexBoundsError(PolycError, IndexError):
    """An index array passed to a jitted function holds a value outside the
    axis it indexes (numpy raises ``IndexError``; checked at each call)."""


class DTypeError(PolycError, TypeError):
    """An argument has a dtype the kernel was not compiled for."""


class BindingError(PolycError, TypeError):
    """Wrong arguments at call time: count, names, ndim, layout, read-only out."""


@dataclass(frozen=True)
class Witness:
    """One pair of statement instances that a refused schedule would get
    wrong, as data (the message of :class:`IllegalScheduleError` says the
    same in words; :mod:`polyc.plot` draws it).

    ``kind``: ``"flow"``, ``"anti"``, ``"output"`` or ``"reduction"``;
    ``reason``: ``"order"`` (the sink would run before the source) or
    ``"parallel"`` / ``"vectorized"`` (a loop marked so carries the
    dependence); ``tensor``: the tensor(s) it goes through; ``source`` /
    ``sink``: statement names; ``source_point`` / ``sink_point``: their
    iteration vectors (in the statements' iterator order) at the parameter
    values ``params`` (``(name, value)`` pairs, from isl's sample point);
    ``violated``: every such pair of that kind, parametric, in isl's text
    notation (``isl.UnionMap.read_from_str`` reads it back).
    """
    kind: str
    reason: str
    tensor: str
    source: str
    sink: str
    source_point: tuple[int, ...]
    sink_point: tuple[int, ...]
    params: tuple[tuple[str, int], ...]
    violated: str

    def __str__(self) -> str:
        src = ", ".join(map(str, self.source_point))
        dst = ", ".join(map(str, self.sink_point))
        with_ = ", ".join(f"{k}={v}" for k, v in self.params)
        return (f"{self.kind} dependence {self.source}({src}) -> {self.sink}({dst})"
                + (f" (with {with_})" if with_ else ""))


class IllegalScheduleError(PolycError):
    """A schedule violates a dependence; the message names the dependence kind,
    tensor, statements and one violated instance pair.  ``witness`` is that
    pair as a :class:`Witness` when the refusal comes from a dependence
    (``None`` for other refusals, e.g. a broken promotion)."""

    def __init__(self, message: str, *, witness: Witness | None = None):
        self.witness = witness
        super().__init__(message)


class ScheduleError(PolycError, ValueError):
    """A schedule transformation that cannot be applied as asked: a loop or
    statement that does not exist, a wrong factor, loops with different
    parents, a recipe made for another program.  (A transformation that can
    be applied but would break a dependence raises
    :class:`IllegalScheduleError`.)"""


class RecipeMismatchError(ScheduleError):
    """A recipe or schedule recorded on another program (its fingerprint, the
    program's domains and access relations, differs from the one it is
    replayed on or compiled with): record it again on this program, or on
    this specialisation of a :func:`polyc.kernel`."""


class IntrinsicError(PolycError, ValueError):
    """A user intrinsic cannot be registered: a name that is taken or not an
    identifier, a description that is not one statement over a box with
    linear indices, no C implementation (:mod:`polyc.custom_intrinsics`)."""


class PlotError(PolycError, ValueError):
    """A picture :mod:`polyc.plot` cannot draw as asked: more than three
    loops, more points or arrows than it draws, a size missing or outside
    the program's parameter domain, an unknown statement or file type.  The
    message says what to choose instead."""


class CompileError(PolycError):
    """The C (or CUDA) compiler failed.  ``command`` is the argv that was run
    and ``stderr`` the compiler's own diagnostics."""

    def __init__(self, message: str, *, command: list[str] | None = None,
                 stderr: str = ""):
        self.command = command or []
        self.stderr = stderr
        text = message
        if command:
            text += "\ncommand: " + " ".join(command)
        if stderr:
            text += "\ncompiler output:\n" + stderr.rstrip()
        super().__init__(text)


class ToolMissingError(CompileError):
    """A required external tool (C compiler, nvcc) is not installed."""


class CompileTimeoutError(CompileError):
    """The C compiler ran past ``Config.compile_timeout``
    (``POLYC_COMPILE_TIMEOUT``) and was killed.  ``timeout`` is the limit in
    seconds; the message says how to raise it."""

    def __init__(self, message: str, *, timeout: float, command: list[str] | None = None,
                 stderr: str = ""):
        self.timeout = timeout
        super().__init__(message, command=command, stderr=stderr)


class LoadError(CompileError):
    """A built shared library cannot be loaded into this process, e.g. because
    the cache directory is on a filesystem mounted ``noexec``.  The message
    names the directory and the variable (``POLYC_CACHE_DIR``) that moves it."""


class DeviceError(PolycError):
    """No usable GPU for a ``target="cuda"`` kernel (no device, a driver
    error, a launch the device refuses, a host array where a device array is
    needed); the message says what to do (``Config(emulate=True)`` runs the
    kernel on the CPU)."""


class SanitizerError(PolycError):
    """A kernel built with ``Config.sanitize`` (``POLYC_SANITIZE``) cannot be
    loaded safely: the sanitizer's runtime is not loaded first in this process
    (it must be ``LD_PRELOAD``-ed) or is not installed.  The message gives the
    exact environment to set."""


class PolycWarning(UserWarning):
    """Base class of the warnings polyc issues (``warnings.warn``)."""


class CacheWarning(PolycWarning):
    """The kernel cache found something wrong and worked around it: a corrupt
    entry (rebuilt, never loaded), an unsafe cache directory or entry (a
    private temporary directory is used instead), a lock not acquired in time."""
