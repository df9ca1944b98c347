"""polyc: a polyhedral loop-optimization compiler for tensor programs.

Public API (see ``polyc.api``): :func:`compile`, :func:`einsum`,
:class:`Kernel`, :class:`Config`, and the errors of :mod:`polyc.errors`.
"""

__version__ = "0.1.0"

from .config import Config  # noqa: E402
from .errors import (  # noqa: E402,F401
    BindingError, CompileError, DTypeError, EinsumError, IllegalScheduleError,
    ParseError, PolycError, SemanticError, ShapeError, UnsupportedError,
)

__all__ = ["Config", "PolycError", "ParseError", "SemanticError", "ShapeError",
           "DTypeError", "BindingError", "UnsupportedError", "EinsumError",
           "IllegalScheduleError", "CompileError", "compile", "einsum", "Kernel"]


def __getattr__(name):  # lazy: keep `import polyc` cheap and cycle-free
    if name in ("compile", "einsum", "Kernel"):
        from . import api
        return getattr(api, name)
    raise AttributeError(name)
