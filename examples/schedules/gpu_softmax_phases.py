"""Map a softmax onto CUDA by hand as phases of a block, and check it
without a GPU.

Fuses the rows of the four nests of a softmax into one band, runs a row
per block and one loop of each nest on the block's threads.  polyc decides
the rest from the dependences: the two reductions become block reductions
(a tree over the threads, thread 0 stores), the initialisations run on
thread 0, and a barrier goes where a dependence crosses threads between
two phases (two here, out of five places).  A phase whose loop on the
threads carries another dependence is refused with a witness.  The kernel
runs on the CPU emulator (race and bounds checks) against numpy, and, when
nvcc is installed, compiles for sm_90.  On a machine with a GPU, drop
``emulate=True`` to run it there.

Run: ``python examples/schedules/gpu_softmax_phases.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os
import shutil

import numpy as np

import polyc
from polyc.testing import assert_close

TC = """
def softmax(float(N, C) I) -> (O, mx, e, s) {
    mx(n) max=! I(n, c)
    e(n, c) = exp(I(n, c) - mx(n))
    s(n) +=! e(n, c)
    O(n, c) = e(n, c) / s(n)
}
"""
PARTIAL = """
def partial(float(N, C) A, float(C, K) B) -> (t) {
    t(n, k) = 0.0 where n in 0:N, k in 0:K
    t(n, k) += A(n, c) * B(c, k)
}
"""


def main():
    small = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"
    n, c = (7, 300) if small else (1024, 4096)

    s = polyc.Schedule.from_program(polyc.program(TC), start="source")
    s = s.fuse("mx", "e", "s", "O")                 # the rows: one band over the four nests
    s = s.map_to_blocks([("mx", "n")])              # a row per block
    for t in ("mx", "e", "s", "O"):
        s = s.map_to_threads([(t, "c")], sizes=[128])
    print(s)

    # a loop whose threads would race on t (a reduction into K elements per block)
    r = polyc.Schedule.from_program(polyc.program(PARTIAL), start="source")
    r = r.fuse(("S0", "n"), ("S1", "n")).map_to_blocks([("S0", "n")])
    try:
        r.map_to_threads([("S1", "c")])
    except polyc.IllegalScheduleError as e:
        print(f"refused: {e}")
        print(f"witness: {e.witness.source}{list(e.witness.source_point)} -> "
              f"{e.witness.sink}{list(e.witness.sink_point)}")

    cfg = polyc.Config(target="cuda", emulate=True, emulate_checks=True)
    k = polyc.compile(TC, schedule=s, config=cfg)
    print(k.explain().split("GPU mapping", 1)[1])
    x = np.random.default_rng(0).standard_normal((n, c)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    assert_close(k(x)[0], e / e.sum(1, keepdims=True), dtype="float32", reduction_length=c)
    print("the emulated kernel matches numpy")

    if shutil.which("nvcc"):
        from polyc.backends.cuda.build import build_cubin
        threads = {name: spec.threads for name, spec in k.cuda.launches.items()}
        built = build_cubin(k.cuda_source, config=k.config, arch="sm_90", threads=threads)
        for name, res in built.resources.items():
            print(f"ptxas {name}: {res}")


if __name__ == "__main__":
    main()
