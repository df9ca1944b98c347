"""Header-only C kernels that generated C code ``#include``s (``gemm.h``: a
BLIS-style GEMM with AVX-512 / AVX2 / portable micro-kernels)."""
