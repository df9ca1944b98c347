"""polyc in five minutes: compile a Tensor Comprehensions definition, call it
on numpy arrays, check it against numpy, look at the generated C, and use the
numpy-compatible ``polyc.einsum``.

Run with ``python examples/quickstart.py`` (needs a C compiler; ``CC`` or
``POLYC_CC`` choose one).
"""

import numpy as np

import polyc
from polyc.testing import assert_close

# A TC definition: C(m, n) = sum over k of A(m, k) * B(k, n).  The sizes M, N,
# K are parameters: one compiled kernel serves every shape.
TC = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""


def main() -> None:
    rng = np.random.default_rng(0)

    kernel = polyc.compile(TC)
    print(kernel)  # <polyc.Kernel matmul(A, B) -> (C)>

    for M, N, K in [(256, 192, 128), (37, 5, 300)]:  # two shapes, one kernel
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        C = kernel(A, B)
        expected = A.astype(np.float64) @ B.astype(np.float64)
        # float32 tolerances grow with the reduction length (see polyc.testing)
        assert_close(C, expected, dtype=np.float32, reduction_length=K, name="C")
        print(f"matmul {M}x{K} @ {K}x{N}: matches numpy, C[0, :3] = {C[0, :3]}")

    # kernel.source is the whole C file; show the kernel function itself
    start = kernel.source.find("void ")
    print("--- generated C (the kernel function, first 1500 characters) ---")
    print(kernel.source[max(start, 0):][:1500])
    print("---")

    # polyc.einsum takes numpy's subscripts and returns what numpy.einsum would.
    a = rng.uniform(-1, 1, (64, 48))
    b = rng.uniform(-1, 1, (48, 32))
    c = polyc.einsum("ij,jk->ik", a, b)
    assert_close(c, np.einsum("ij,jk->ik", a, b), reduction_length=48, name="einsum")
    print("einsum('ij,jk->ik'): matches numpy.einsum,", c.shape, c.dtype)

    batch = rng.uniform(-1, 1, (8, 16, 24))
    t = polyc.einsum("bij->bji", batch)  # a transpose: no reduction
    assert_close(t, np.einsum("bij->bji", batch), name="transpose")
    print("einsum('bij->bji'): matches numpy.einsum,", t.shape)


if __name__ == "__main__":
    main()
