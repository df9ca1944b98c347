"""Register a user-defined intrinsic and tensorize a band onto it.

The intrinsic is an 8 x 8 outer-product update ``c(i, j) += a(i) * b(j)``,
described as a one-statement TC definition and implemented in C (a loop the
compiler vectorises; a user would put AVX-512 or VNNI intrinsics here).  The
program is a matrix product in a blocked layout (rows and columns in blocks
of 8, as oneDNN stores them): after moving the reduction ``k`` outside the
8 x 8 block, each iteration of ``(mb, nb, k)`` is one call.  The script
prints the call in the generated C, compares the result with numpy, shows a
band that does not match (and why), and the registration errors.

Run: ``python examples/schedules/custom_intrinsic.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os

import numpy as np

import polyc
import polyc.intrinsics
from polyc.pipeline import compile_schedule

OUTER8 = "def outer8(float(8) a, float(8) b) -> (c) { c(i, j) +=! a(i) * b(j) }"

OUTER8_C = r"""
static void outer8(const float *a, int64_t a_s0, const float *b, int64_t b_s0,
                   float *c, int64_t c_s0, int64_t c_s1)
{
    for (int i = 0; i < 8; i++) {
        const float ai = a[i * a_s0];
        float *ci = c + i * c_s0;
        #pragma omp simd
        for (int j = 0; j < 8; j++)
            ci[j * c_s1] += ai * b[j * b_s0];
    }
}
"""

BLOCKED = """
def blocked(float(MB, 8, K) A, float(K, NB, 8) B) -> (C) {
    C(mb, i, nb, j) +=! A(mb, i, k) * B(k, nb, j)
}
"""

SMALL = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"


def main() -> None:
    intr = polyc.intrinsics.register("outer8", OUTER8, {"c": OUTER8_C})
    print("registered:", intr.prototype())

    s = polyc.Schedule.from_program(polyc.program(BLOCKED))
    s = s.distribute(("C", "mb"))                        # the initialisation apart
    s = s.reorder([("S0", "mb"), ("S0", "nb"), ("S0", "k"), ("S0", "i"), ("S0", "j")])
    s = s.tensorize(("S0", "i"), "outer8")               # checked, like any step
    print(s)
    kernel = compile_schedule(s)
    call = next(line.strip() for line in kernel.source.splitlines()
                if line.strip().startswith("outer8(t_"))
    print("call:", call)

    mb, nb, k = (3, 2, 5) if SMALL else (32, 32, 256)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((mb, 8, k)).astype(np.float32)
    B = rng.standard_normal((k, nb, 8)).astype(np.float32)
    C = kernel(A, B)
    want = np.einsum("aik,kbj->aibj", A, B)
    np.testing.assert_allclose(C, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    print("the tensorized kernel matches numpy")

    # a band whose statement does not match: the reason names what differs
    plain = polyc.Schedule.from_program(polyc.program(
        "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"))
    plain = plain.distribute(("C", "m")).reorder([("S0", "k"), ("S0", "m"), ("S0", "n")])
    try:
        plain.tensorize(("S0", "m"), "outer8")
    except polyc.ScheduleError as e:
        print("refused:", e)

    # registration errors
    for name, desc, impl in [("outer8", OUTER8, {"c": OUTER8_C}),
                             ("bad", OUTER8.replace("outer8", "bad"),
                              {"c": "static void bad(const float *a) {}"})]:
        try:
            polyc.intrinsics.register(name, desc, impl)
        except polyc.PolycError as e:
            print(f"register {name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")


if __name__ == "__main__":
    main()
