"""The C kernels behind polyc's intrinsics (``gemm.h``: a BLIS-style GEMM
with AVX-512 / AVX2 / portable micro-kernels) and the texts the C backend
builds from them.

Generated kernels do not paste ``gemm.h``: they paste its interface
(:func:`api_text`, ``gemm_api.h``: one struct, the band kinds and seven prototypes) and link
the *intrinsics library*, a shared library compiled from
:func:`library_source` once per machine, compiler, flags and polyc version
(``backends/c/build.py``'s :func:`~polyc.backends.c.build.intrinsics_library`,
cached like kernels).  A kernel's cold compile then costs its own code only,
instead of recompiling the 1100 lines of ``gemm.h`` every time.

``gemm.h`` still works header-only (``#include "gemm.h"`` with
``-I<this directory>``): its entry points are then ``static``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from polyc import machine

DIRECTORY = Path(__file__).parent

#: The line a generated kernel starts its interface block with; the build
#: step links the intrinsics library into every source that contains it.
LINK_MARK = "/* polyc: this kernel links the polyc intrinsics library */"

#: How the library defines the entry points: visible, everything else static.
_EXPORT = '#define POLYC_GEMM_API __attribute__((visibility("default")))'


@functools.lru_cache(maxsize=None)
def _read(name: str) -> str:
    return (DIRECTORY / name).read_text()


def api_text() -> str:
    """What a kernel that calls the GEMM pastes: :data:`LINK_MARK`, then
    ``gemm_api.h`` (the ``polyc_gemm_dims`` struct and the extern prototypes
    of ``polyc_gemm_{f32,f64}``, ``polyc_gemmx_{f32,f64}``, ``polyc_gemmt_{f32,f64}``,
    ``polyc_gemm_isa``)."""
    return f"{LINK_MARK}\n{_read('gemm_api.h')}"


def library_source() -> str:
    """The C source of the intrinsics library: this machine's L2 and L3 sizes
    (sysfs, :func:`polyc.machine.cache_sizes`: the GEMM's MC and NC follow
    them), the interface with visible declarations, then ``gemm.h`` (which
    skips its own ``#include "gemm_api.h"`` because the interface came
    first; ``gemm_small.h`` and ``gemm_few.h`` pasted where it includes them), so the compiler
    checks the prototypes kernels use against the definitions."""
    caches = machine.cache_sizes()
    return (f"/* polyc intrinsics library (backends/c/intrinsics) */\n{_EXPORT}\n"
            f"#define POLYC_GEMM_L2_BYTES {int(caches.get(2, 0))}\n"
            f"#define POLYC_GEMM_L3_BYTES {int(caches.get(3, 0))}\n"
            f"{_read('gemm_api.h')}\n{_gemm_h()}\n")


#: The headers ``gemm.h`` includes from this directory (each exactly once).
_PARTS = ("gemm_small.h", "gemm_few.h", "gemm_win.h", "gemm_post.h")


def _gemm_h() -> str:
    """``gemm.h`` with :data:`_PARTS` pasted where they are included (the
    library is compiled from one text, without ``-I``)."""
    text = _read("gemm.h")
    for part in _PARTS:
        include = f'#include "{part}"'
        if text.count(include) != 1:
            raise AssertionError(f"gemm.h must include {part} exactly once")
        text = text.replace(include, _read(part))
    return text

