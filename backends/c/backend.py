"""The C backend behind :class:`polyc.backends.base.Backend`: C99/OpenMP
printed by :mod:`.emit`, built and loaded by :mod:`.build`."""

from __future__ import annotations

from . import build, emit


class CBackend:
    name = "c"

    def emit(self, program, nest, config, **mapping) -> emit.Source:
        """:func:`.emit.emit` with ``Config.omp_schedule`` (``mapping``:
        ``windows``, the thread windows of :mod:`polyc.schedule.windows`)."""
        return emit.emit(program, nest, omp_schedule=config.omp_schedule,
                         windows=mapping.get("windows", ()))

    def build(self, text: str, config, **options) -> build.Library:
        """:func:`.build.build_library`."""
        return build.build_library(text, config=config)


BACKEND = CBackend()
