"""What every backend shares: the generated :class:`Source`, the argument
layout of a compiled kernel (:class:`CallSpec`), and the :class:`Backend`
protocol through which the pipeline emits and builds code for a target
(:func:`backend`: ``"c"`` or ``"cuda"``, ``Config.target``).

The pipeline (``polyc/pipeline.py``, ``polyc/gpu_pipeline.py``) asks
:func:`backend` for a target's emitter and builder and never imports a
backend module itself; loading and launching are the runtimes' business
(``polyc/runtime.py`` for C libraries, ``polyc/gpu_runtime.py`` for cubins),
which sit above the backends in the layering.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Source:
    """Generated code: ``text``, the ``entry`` symbol, and the argument spec
    (parameter names, tensor names, in ABI order)."""
    text: str
    entry: str
    params: tuple[str, ...]
    tensors: tuple[str, ...]

    @property
    def spec(self) -> "CallSpec":
        return CallSpec(self.params, self.tensors)


@dataclass(frozen=True)
class CallSpec:
    """How a compiled kernel is called, known at compile time: the size
    parameters (``int64_t``, in this order), then one pointer per tensor
    (C-contiguous, in this order; local tensors and contracted temporaries
    are not passed)."""
    params: tuple[str, ...]
    tensors: tuple[str, ...]


class Backend(Protocol):
    """A code generation target.

    ``emit(program, nest, config, **mapping)`` prints the source of
    ``program`` executing the LoopNest ``nest`` (the CUDA backend takes the
    kernel mappings as ``kernels=``); ``build(text, config)`` compiles it
    into the target's artifact (a loaded C library, a cubin with ptxas's
    report).  Errors: :class:`~polyc.errors.CompileError` with the tool's
    command and output, :class:`~polyc.errors.ToolMissingError` without the
    tool."""
    name: str

    def emit(self, program, nest, config, **mapping) -> Any: ...

    def build(self, text: str, config, **options) -> Any: ...


#: target name -> module holding its ``BACKEND`` object (imported on first use,
#: so the CUDA backend is never imported for ``target="c"``).
_MODULES = {"c": "polyc.backends.c.backend",
            "cuda": "polyc.backends.cuda.backend"}


def backend(target: str) -> Backend:
    """The backend of ``target``; ``KeyError`` names the known targets."""
    if target not in _MODULES:
        raise KeyError(f"no backend for target {target!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[target]).BACKEND
