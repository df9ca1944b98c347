"""Reading the program a ``polyc`` command works on: a TC file (one
definition, ``--def``), or a ``.py`` file's ``@polyc.kernel`` function, and
``--sizes NAME=VALUE,...``.  Shared by :mod:`polyc.cli` and
:mod:`polyc.tune.cli`."""

from __future__ import annotations

import argparse
import ast
import errno
import math
import os
import sys
from pathlib import Path

from .errors import PolycError


class UsageError(PolycError):
    """A bad command line (sizes, file, definition name)."""


def int_at_least(low: int):
    """An argparse type: an integer ``>= low``, else argparse's usage error
    (``must be >= 1, got 0``)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
        return n
    return parse


#: argparse type of ``--seed`` (numpy's generators refuse negative seeds)
seed_arg = int_at_least(0)


def _arrow_subscripts(argv: list[str] | None) -> list[str]:
    """``polyc einsum '->' --shapes ...`` (a scalar's subscripts): argparse
    takes a word starting with ``-`` for an option, so ``->`` was "the
    following arguments are required: subscripts".  No option starts with
    ``->``: such a word gets a leading space, which einsum ignores."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["einsum"]:
        argv = [" " + a if a.startswith("->") else a for a in argv]
    return argv


def _check_explain_options(args) -> None:
    """``polyc explain``: ``--plot`` with ``--shapes`` (a fusion plan) is
    refused, and so are the picture's options without ``--plot``, which were
    silently ignored (``--statement S0`` drew nothing and said nothing), and
    ``--shapes`` with ``--dtype bfloat16``, which polyc.jit refuses at the
    call, a location in polyc/cli.py given as the user's."""
    if getattr(args, "shapes", None) and args.plot:
        raise UsageError("--plot draws a .tc or @polyc.kernel program, not a fusion plan")
    if getattr(args, "shapes", None) and args.dtype == "bfloat16":
        raise UsageError("--shapes traces a numpy function, and numpy has no bfloat16: "
                         "choose --dtype float32, float64 or float16")
    if args.plot:
        return
    given = [f"--{name}" for name in ("statement", "band", "fix")
             if getattr(args, name) is not None]
    given += ["--color"] * (args.color != "order") + ["--dpi"] * (args.dpi != 100)
    if given:
        raise UsageError(f"{', '.join(given)}: options of the picture; add --plot OUT.png "
                         "(or drop them)")


def _gpu_overrides(args) -> dict:
    """The Config fields of ``--target``, ``--emulate`` (the CUDA target, on
    the CPU emulator) and ``--gpu-block``.  ``--target c --emulate`` is
    refused: it ran the CUDA emulation, the --target silently overridden."""
    out: dict = {}
    target = getattr(args, "target", None)
    if target:
        out["target"] = target
    if getattr(args, "emulate", False):
        if target == "c":
            raise UsageError("--emulate runs the CUDA target on the CPU; it contradicts "
                             "--target c (drop one)")
        out.update(target="cuda", emulate=True)
    if getattr(args, "gpu_block", None):
        try:
            out["gpu_block"] = tuple(int(x) for x in args.gpu_block.split(","))
        except ValueError:
            raise UsageError(f"--gpu-block: expected thread counts such as 8,32, got "
                             f"{args.gpu_block!r}") from None
    return out


def _checked_gpu(config, args):
    """``config``, unless ``--gpu-block`` was given for the C target, where it
    was silently ignored."""
    if getattr(args, "gpu_block", None) and config.target != "cuda":
        raise UsageError("--gpu-block sizes the CUDA target's thread blocks; add "
                         "--target cuda (or --emulate), or drop it")
    return config


def _output_failed(e: Exception) -> bool:
    """Whether ``e`` is a failed write for want of room or a working device
    (``polyc compile ... > FILE`` on a full disk was an internal error, "this
    is a polyc bug"): then say so on stderr, and point stdout at /dev/null so
    that the exit's flush of what is left cannot fail again."""
    if not (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO,
                                                   errno.EFBIG, errno.EROFS)):
        return False
    print(f"polyc: error: cannot write {e.filename or 'the output'}: {e.strerror}",
          file=sys.stderr)
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # no file descriptor (captured)
        pass
    return True


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr (``polyc: warning: ...``), without the
    library's file and source line (a skipped database line or an unusable
    cache directory is the user's business, not polyc's code)."""
    text = str(message)
    text = text[len("polyc: "):] if text.startswith("polyc: ") else text
    print(f"polyc: warning: {text}", file=sys.stderr)


def _parse_sizes(text: str | None, option: str = "--sizes") -> dict[str, int]:
    out: dict[str, int] = {}
    if not text:
        return out
    for item in text.replace(" ", ",").split(","):
        if not item:
            continue
        name, eq, val = item.partition("=")
        if not eq or not name.isidentifier():
            raise UsageError(f"{option}: expected NAME=VALUE items, got {item!r}")
        if name in out:
            raise UsageError(f"{option}: {name} is given twice")
        try:
            out[name] = int(val)
        except ValueError:
            raise UsageError(f"{option}: {name} must be an integer, got {val!r}") from None
        if out[name] < 0:
            raise UsageError(f"{option}: {name} must be >= 0, got {out[name]}")
        if out[name] > 2**63 - 1:
            raise UsageError(f"{option}: {name}={out[name]} does not fit in 64 bits")
    return out


def _parse_shapes(text: str) -> list[tuple[int, ...]]:
    """``--shapes 128x64,64x32`` (``()`` or an empty item: a scalar).  A shape
    whose bytes (at 8 per element) pass the 64-bit address space is a usage
    error: numpy's "array is too big" / "Maximum allowed dimension exceeded"
    came out as an internal error."""
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if item in ("", "()", "scalar"):
            shapes.append(())
            continue
        try:
            shape = tuple(int(x) for x in item.lower().split("x"))
        except ValueError:
            raise UsageError(f"--shapes: expected e.g. 128x64,64x32, got {item!r}") from None
        if any(x < 0 for x in shape):
            raise UsageError(f"--shapes: extents must be >= 0, got {item!r}")
        big = math.prod(max(x, 1) for x in shape)      # numpy refuses it even with a 0
        if big * 8 > 2**63 - 1:
            raise UsageError(f"--shapes: {item} has {big:.3g} elements, more "
                             "than a 64-bit machine can address; use smaller shapes")
        shapes.append(shape)
    return shapes


def _select_def(module, name: str | None):
    defs = {d.name: d for d in module.defs}
    if name is not None:
        if name not in defs:
            raise UsageError(f"no def named {name!r}; the file defines {', '.join(defs)}")
        return defs[name]
    if len(defs) != 1:
        raise UsageError(f"the file defines {len(defs)} defs ({', '.join(defs)}); "
                         "choose one with --def NAME")
    return module.defs[0]


def _load_python(args, path: Path):
    """A ``@polyc.kernel`` function of a Python file, lowered for the
    argument kinds read off its body (arrays of ``--dtype``, float64 by
    default): the file is parsed, not run."""
    from .frontend import pyconsts, pyloops, pysource
    if not path.is_file():
        raise UsageError(f"cannot read {path}")
    fdef, filename, line0, lines = pysource.parse_file(str(path), args.def_name)
    _refuse_jit(args, fdef, path)
    env = pyconsts.file_env(ast.parse("\n".join(lines)))   # TILE = 4 at the top level
    fdef = pyconsts.inline(fdef, pyconsts.constants(pyconsts.free_reads(fdef), env))
    specs = pysource.infer_specs(fdef, args.dtype or "float64")
    program = pyloops.lower_specs(fdef, filename, line0, lines, specs, fdef.name)
    sizes = _parse_sizes(args.sizes)
    unknown = sorted(set(sizes) - set(program.params))
    if unknown:
        raise UsageError(f"--sizes: {fdef.name} has no size {', '.join(unknown)} "
                         f"(its sizes: {', '.join(program.params) or 'none'})")
    return program, sizes


def _refuse_jit(args, fdef: ast.FunctionDef, path: Path) -> None:
    """A ``@polyc.jit`` function named where a ``@polyc.kernel`` loop program is
    read (no ``--shapes``): a :class:`UsageError` saying how to explain it,
    instead of the loop frontend's refusal of its first numpy call."""
    names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in fdef.decorator_list]
    if not any(n in ("jit", "polyc.jit") for n in names) or "kernel" in " ".join(names):
        return
    shapes = "--shapes 64x128,... (one shape per array argument)"
    if hasattr(args, "shapes"):         # polyc explain
        raise UsageError(f"{fdef.name} in {path} is a @polyc.jit function: polyc explain "
                         f"traces it on random arrays of the shapes you give; add {shapes}")
    raise UsageError(f"{fdef.name} in {path} is a @polyc.jit function: this command takes "
                     f"@polyc.kernel loop programs and .tc files; explain its fusion plan "
                     f"with polyc explain {path} --def {fdef.name} {shapes}")


def _load(args):
    from .api import lower_def
    from .frontend import tc
    from .frontend.source import read_source
    path = Path(args.file)
    if path.suffix == ".py":
        return _load_python(args, path)
    try:
        text = read_source(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    module = tc.require_definitions(tc.parse(text, str(path)))
    defn = _select_def(module, args.def_name)
    sizes = {**tc.sizes_header(text, str(path)), **_parse_sizes(args.sizes)}
    needs = tc.needs_specialization(defn)
    missing = sorted(needs - sizes.keys())
    if missing:
        raise UsageError(f"def {defn.name} needs constant values for {', '.join(missing)}; "
                         "give them with --sizes")
    fixed = {k: sizes[k] for k in needs}
    program = lower_def(defn, fixed, dtype=args.dtype, source=text)
    unknown = sorted(set(_parse_sizes(args.sizes)) - set(program.params) - set(fixed))
    if unknown:
        known = ", ".join(list(program.params) + sorted(fixed)) or "none"
        raise UsageError(f"--sizes: def {defn.name} has no size {', '.join(unknown)} "
                         f"(its sizes: {known})")
    return program, sizes


def random_run_inputs(program, sizes: dict, seed: int) -> tuple[dict, dict | None]:
    """Seeded random inputs of ``polyc run`` (:func:`polyc.testing.random_inputs`)
    and, when an index computes with a read (``LUT(1 + j + I(i, k), j)``), which
    the call does not check and random index values may take out of bounds,
    the reference outputs, computed first so that such inputs are a
    :class:`UsageError` instead of an out-of-bounds read by the kernel
    (``None`` otherwise)."""
    from . import expr as E
    from . import testing
    inputs = testing.random_inputs(program, sizes, seed=seed)

    def unchecked(idx) -> bool:
        if isinstance(idx, E.Call) and idx.fn.startswith("cast_") and "float" not in idx.fn:
            idx = idx.args[0]
        return not isinstance(idx, E.Access) and any(
            isinstance(n, E.Access) for n in idx.walk())
    if any(unchecked(i) for s in program.statements for a in s.rhs.walk()
           if isinstance(a, E.Access) for i in a.indices):
        return inputs, checked_reference(program, inputs, sizes)
    return inputs, None


def checked_reference(program, inputs: dict, sizes: dict) -> dict:
    """:func:`polyc.reference.evaluate`, with an out-of-bounds gather (the
    random index values do not fit the index expression) as a
    :class:`UsageError`."""
    from . import reference
    try:
        return reference.evaluate(program, inputs, sizes)
    except IndexError as e:
        raise UsageError(f"{e}: polyc run draws the values of an index tensor in [0, extent) "
                         "of the dimension it indexes, which does not keep an index that "
                         "computes with them in bounds; call the kernel from Python with "
                         "index values that do") from None
