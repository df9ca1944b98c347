"""Tile and interchange a matrix multiplication by hand, check every step.

Starts from the source order of ``C(m,n) +=! A(m,k) * B(k,n)``, separates the
initialisation from the reduction (loop distribution), interchanges ``n`` and
``k`` so that the innermost loop walks rows of B and C with stride 1, tiles
``k``, runs the rows ``m`` in parallel and vectorizes the innermost loop;
prints the loop nest after each step, compiles the result, compares it with
numpy and times it against polyc's automatic schedule.

Run: ``python examples/schedules/matmul_tile.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os

import numpy as np

import polyc
from polyc.testing import assert_close, median_time

TC = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""

SMALL = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"


def show(title: str, s: polyc.Schedule) -> None:
    print(f"--- {title}")
    print(s.loop_nest())


def main() -> None:
    program = polyc.program(TC)
    s = polyc.Schedule.from_program(program)
    show("source order", s)

    s = s.distribute(("C", "n"))                       # for n: init; for n: for k: update
    s = s.interchange(("S0", "n"), ("S0", "k"))        # the update scans k, then n
    show("distributed, n and k interchanged in the update", s)

    s = s.tile([("S0", "k")], [64])                    # k_tile, k
    s = s.parallel(("C", "m"))                         # rows of C are independent
    s = s.vectorize(("S0", "n"))                       # stride-1 on B and C
    show("tiled k, parallel m, vectorized n", s)
    print("recipe:", s.to_json())

    kernel = polyc.compile(TC, schedule=s)
    rng = np.random.default_rng(0)
    M, N, K = (37, 29, 71) if SMALL else (512, 512, 512)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    try:
        assert_close(kernel(A, B), A.astype(np.float64) @ B, dtype=np.float32,
                     reduction_length=K, name="C")
    except AssertionError as e:
        raise SystemExit(f"mismatch: {e}") from None
    if SMALL:
        print(f"matches numpy at {M}x{K}x{N}")
        return
    auto = polyc.compile(TC)
    t_user = median_time(lambda: kernel(A, B))[0]
    t_auto = median_time(lambda: auto(A, B))[0]
    print(f"matches numpy; {M}x{K}x{N}: this schedule {t_user * 1e3:.2f} ms, "
          f"automatic schedule {t_auto * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
