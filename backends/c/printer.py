"""What the C emitter lends the printers of calls and hoisted invariants.

:mod:`.gemmcall`, :mod:`.customcall` and :mod:`.hoist` print parts of a
statement for :class:`.emit._Emitter` (and the CUDA printers derived from
it).  They depend on this interface, not on the emitter's module, so that
the emitter imports them and nothing imports it back.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from polyc.ir import Program

from .cexpr import CExprPrinter


class FunctionRef(NamedTuple):
    """A static function added to the kernel's source
    (:meth:`StatementPrinter.add_function`): its name and the C initializer
    of the context its caller passes."""
    name: str
    init: str


class StatementPrinter(Protocol):
    """The emitter of one C function, as the call printers see it.

    ``program``: the program printed; ``dtypes``: every tensor's dtype by
    name; ``locals``: the names of the local buffers (promotion's);
    ``loop_printer``: prints index expressions of the loop iterators;
    ``hoisted``: how many invariants were hoisted so far (their names are
    numbered); ``parallel_depth``: parallel loops around the statement."""
    program: Program
    dtypes: dict[str, str]
    locals: set[str]
    loop_printer: CExprPrinter
    hoisted: int
    parallel_depth: int

    def _printer(self) -> CExprPrinter:
        """The printer of a statement's expressions (statement iterators)."""

    def _iterators(self, pairs) -> list:
        """Declarations ``const int64_t i_<it> = <arg>`` of a statement's
        iterators from ``(iterator, expression)`` pairs."""

    def _access(self, tensor: str, idx: list[str]) -> str:
        """The C lvalue of ``tensor`` at the printed indices ``idx``."""

    def extent_expr(self, tensor: str, d: int) -> str:
        """The C expression of dimension ``d``'s extent of ``tensor``."""

    def prologue(self) -> list:
        """The kernel's prologue: its parameters, tensors and extents read
        from ``polyc_params`` and ``polyc_buffers``."""

    def add_function(self, stem: str, make) -> FunctionRef:
        """A static function printed before the kernel function
        (``make(name) -> (text, context initializer)``)."""
