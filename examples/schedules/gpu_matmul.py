"""Map a matrix multiplication onto CUDA by hand, PPCG-style, and check it
without a GPU.

Tiles ``C(m,n) +=! A(m,k) * B(k,n)`` by 32 in every loop, runs the output
tiles on blocks and their points on 8 x 32 threads, copies the tiles of A
and B that one k-tile iteration reads into shared memory and keeps each
thread's element of C in a register; every step is checked against the
dependences.  A refused mapping (the reduction loop ``k`` on threads) shows
its witness.  The kernel then runs on the CPU emulator (with the race and
bounds checks) against numpy, and, when nvcc is installed, compiles for
sm_90 with ptxas's resources printed.  On a machine with a GPU, drop
``emulate=True`` to run it there.

Run: ``python examples/schedules/gpu_matmul.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os
import shutil

import numpy as np

import polyc
from polyc.testing import assert_close

TC = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""

SMALL = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"


def main() -> None:
    s = polyc.Schedule.from_program(polyc.program(TC), start="isl")
    s = s.tile([("C", "m"), ("C", "n"), ("C", "k")], [32, 32, 32])
    s = s.map_to_blocks([("C", "m_tile"), ("C", "n_tile")])     # blockIdx.y, blockIdx.x
    try:
        s.map_to_threads([("C", "n"), ("C", "k")])
    except polyc.IllegalScheduleError as e:
        print(f"refused: {e}")
        print(f"witness: {e.witness.source}{list(e.witness.source_point)} -> "
              f"{e.witness.sink}{list(e.witness.sink_point)}")
    s = s.map_to_threads([("C", "m"), ("C", "n")], sizes=[8, 32])
    s = s.promote_shared("A", ("C", "k_tile"))
    s = s.promote_shared("B", ("C", "k_tile"))
    s = s.promote_registers("C", ("C", "n"))
    print(s)
    print("recipe:", s.to_json())

    config = polyc.Config(target="cuda", emulate=True, emulate_checks=True)
    kernel = polyc.compile(TC, schedule=s, config=config)
    print(kernel.explain().split("GPU mapping", 1)[1])
    rng = np.random.default_rng(0)
    M, N, K = (37, 29, 71) if SMALL else (256, 192, 160)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    try:
        assert_close(kernel(A, B), A.astype(np.float64) @ B, dtype=np.float32,
                     reduction_length=K, name="C")
    except AssertionError as e:
        raise SystemExit(f"mismatch: {e}") from None
    print("the emulated kernel matches numpy (no race, no access out of bounds)")

    if shutil.which("nvcc"):
        from polyc.backends.cuda.build import build_cubin
        threads = {name: spec.threads for name, spec in kernel.cuda.launches.items()}
        built = build_cubin(kernel.cuda_source, config=kernel.config, arch="sm_90",
                            threads=threads)
        for name, r in built.resources.items():
            print(f"ptxas {name}: {r.registers} registers, {r.shared} bytes shared, "
                  f"{r.spill_stores} bytes spilled")


if __name__ == "__main__":
    main()
