"""The Tensor Comprehensions frontend: TC text -> ``polyc.ir.Program``.

``parse`` gives the syntax tree (:mod:`.syntax`), ``lower`` checks one
definition and lowers it (:mod:`.sema`, range inference in :mod:`.ranges`).
"""

from . import syntax
from .parser import parse, require_definitions, sizes_header
from .sema import lower, needs_specialization
from .syntax import format_syntax

__all__ = ["format_syntax", "lower", "needs_specialization", "parse", "require_definitions",
           "sizes_header", "syntax"]
