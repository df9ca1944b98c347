"""polyc: a polyhedral loop-optimization compiler for tensor programs.

Public API (see ``polyc.api``): :func:`compile`, :func:`einsum`,
:class:`Kernel`, :class:`Config`, and the errors of :mod:`polyc.errors`.
"""

__version__ = "0.1.0"

import os as _os

# Installed, ``polyc.frontend`` and ``polyc.backends`` live inside this package
# (setup.cfg maps them there).  Imported straight from a source checkout (the
# repository root on sys.path), they are the directories beside ``polyc/``.
_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "frontend")):
    _root = _os.path.dirname(_here)
    if _os.path.isfile(_os.path.join(_root, "frontend", "__init__.py")):
        __path__.append(_root)  # noqa: F821 (the package's own __path__)

from .config import Config  # noqa: E402
from .errors import (  # noqa: E402,F401
    BindingError,
    CompileError,
    DeviceError,
    DTypeError,
    EinsumError,
    EinsumPathError,
    IllegalScheduleError,
    IncompletePathError,
    IndexBoundsError,
    IntrinsicError,
    ParseError,
    PathIndexError,
    PathNameError,
    PlotError,
    PolycError,
    RecipeMismatchError,
    ScheduleError,
    SemanticError,
    ShapeError,
    TraceError,
    UnsupportedError,
)

__all__ = ["Config", "PolycError", "ParseError", "SemanticError", "ShapeError",
           "DTypeError", "BindingError", "UnsupportedError", "EinsumError",
           "EinsumPathError", "IntrinsicError", "PathNameError", "PathIndexError",
           "IncompletePathError", "IndexBoundsError", "PlotError",
           "IllegalScheduleError", "ScheduleError", "RecipeMismatchError", "CompileError",
           "DeviceError",
           "compile", "einsum",
           "einsum_path",
           "Kernel", "Schedule", "Loop", "program", "kernel", "jit", "TraceError", "tune"]


def __getattr__(name):  # lazy: keep `import polyc` cheap and cycle-free
    if name in ("compile", "einsum", "einsum_path", "Kernel", "program"):
        from . import api
        return getattr(api, name)
    if name == "jit":
        from .graph.jit import jit
        return jit
    if name in ("graph", "plot", "intrinsics", "tune"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "kernel":
        from .pykernel import kernel
        return kernel
    if name in ("Schedule", "Loop"):
        from .schedule import language
        return getattr(language, name)
    raise AttributeError(name)
