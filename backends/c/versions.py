"""One C source holding several versions of a kernel and the dispatcher that
picks one per call (shape classes, :mod:`polyc.versioned`).

Each version is the same program (same parameters, same arguments) lowered
under a narrower parameter context, so isl generated no code for sizes its
class rules out; it is printed as a ``static`` function with the kernel ABI
(:func:`.emit.emit_function`).  The entry ``polyc_kernel`` reads the
parameters and tests each version's guard -- a condition on the parameters
that isl printed from the class set (``isl_ast_build_expr_from_set``) --
in the order given (most specific first), and calls the first whose guard
holds; the last version has no guard (the generic one)::

    void polyc_kernel(const int64_t *restrict polyc_params, ...)
    {
      int64_t const p_M = polyc_params[0];
      ...
      if (p_M == 1) { polyc_version_0(polyc_params, polyc_buffers, polyc_nthreads); return; }
      polyc_version_1(polyc_params, polyc_buffers, polyc_nthreads);
    }
"""

from __future__ import annotations

from polyc import expr as E
from polyc.errors import CompileError
from polyc.ir import Program

from ..base import Source
from .cexpr import CExprPrinter, check_identifier, param_name
from .emit import ENTRY, PRELUDE, arguments, emit_function


def guard_text(guard: E.Expr) -> str:
    """``guard`` (an expression over the size parameters) as C."""
    def no_access(*_a):
        raise CompileError("a version guard reads a tensor; guards are conditions on sizes")
    return CExprPrinter(lambda n: param_name(n), no_access, no_access).index(guard)


def version_name(k: int) -> str:
    return f"polyc_version_{k}"


def emit_versions(versions: list[tuple[Program, object, E.Expr | None]], *,
                  omp_schedule: str = "auto", notes: list[str] | None = None) -> Source:
    """The source of ``versions`` (``(program, loop nest, guard)``, the last
    with guard ``None``) and their dispatcher.  ``notes``: one comment line
    per version.  Raises :class:`CompileError` when the versions do not take
    the same parameters and arguments, or when a guard is missing or
    misplaced."""
    if not versions or versions[-1][2] is not None:
        raise CompileError("the last version must be the generic one (no guard)")
    if any(g is None for _, _, g in versions[:-1]):
        raise CompileError("every version but the last needs a guard")
    first = versions[0][0]
    params = tuple(first.params)
    args = [t.name for t in arguments(first)]
    for p, _, _ in versions[1:]:
        if tuple(p.params) != params or [t.name for t in arguments(p)] != args:
            raise CompileError(f"the versions of {first.name} disagree on their parameters or "
                               f"arguments ({params} / {args} against {tuple(p.params)} / "
                               f"{[t.name for t in arguments(p)]})")
    blocks: list[str] = []
    functions = []
    for k, (program, nest, _) in enumerate(versions):
        fn, decls = emit_function(program, nest, version_name(k), omp_schedule=omp_schedule,
                                  static=True)
        for d in decls:
            if d not in blocks:
                blocks.append(d)
        note = f"/* version {k}: {notes[k]} */\n" if notes and k < len(notes) else ""
        functions.append(note + fn)
    call = "(polyc_params, polyc_buffers, polyc_nthreads);"
    body = [f"  int64_t const {param_name(n)} = polyc_params[{k}];"
            for k, n in enumerate(params)]
    body += [f"  (void){param_name(n)};" for n in params]
    for k, (_, _, guard) in enumerate(versions[:-1]):
        body.append(f"  if ({guard_text(guard)}) {{ {version_name(k)}{call} return; }}")
    body.append(f"  {version_name(len(versions) - 1)}{call}")
    dispatcher = (f"void {ENTRY}(const int64_t *restrict polyc_params, void *const *restrict "
                  f"polyc_buffers, int32_t polyc_nthreads)\n{{\n" + "\n".join(body) + "\n}\n")
    header = (f"/* polyc kernel for def {check_identifier(first.name)}: {len(versions)} "
              f"versions by shape class */\n")
    text = header + PRELUDE + "".join(blocks) + "\n" + "\n\n".join(functions) + "\n\n" + dispatcher
    return Source(text=text, entry=ENTRY, params=params, tensors=tuple(args))
