"""The CUDA backend behind :class:`polyc.backends.base.Backend`: CUDA C
printed by :mod:`.emit` from a mapped loop nest, built into a cubin by
:mod:`.build` (nvcc)."""

from __future__ import annotations

from . import build, emit


class CudaBackend:
    name = "cuda"

    def emit(self, program, nest, config, *, kernels=(), **mapping) -> emit.CudaSource:
        """:func:`.emit.emit` of the loop nest mapped as ``kernels`` say."""
        return emit.emit(program, nest, list(kernels))

    def build(self, text: str, config, *, threads=None, arch=None, **options) -> build.Cubin:
        """:func:`.build.build_cubin` for ``arch`` (default ``Config.cuda_arch``),
        ptxas's resources checked against ``threads`` per kernel."""
        return build.build_cubin(text, config=config, arch=arch, threads=threads)


BACKEND = CudaBackend()
