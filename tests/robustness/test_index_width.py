"""Index width: all index arithmetic of generated code is 64-bit.

polyc does not narrow index arithmetic when isl could bound it below 2^31:
every index variable, loop counter, extent, parameter and linear offset is
``int64_t`` and every integer literal in index arithmetic is ``INT64_C``.
Two kinds of tests make that a guarantee:

* inspection of the generated C of kernels covering every index form
  (affine, strided, divided, windows, gathers through int32 and int64 index
  tensors, where ranges, rank-0, several statements, tiled and parallel
  loops);
* a run at the boundary: element ``2**31 + 5`` of a 1-D float32 tensor, and
  rows of a 2-D tensor whose linear offset ``r * d1 + j`` passes 2^31 and
  2^32, read through kernels on buffers of 8 and 12 GiB that are *mapped*
  from a sparse file, never allocated: only the few pages touched cost
  memory.  32-bit offset arithmetic would read the wrong element (or fault).
"""

from __future__ import annotations

import mmap
import re
import sys

import numpy as np
import pytest

import polyc


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

KERNELS = {
    "matmul": "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }",
    "batched": ("def bmm(double(Bt, M, K) A, double(Bt, K, N) B) -> (C) "
                "{ C(b, m, n) +=! A(b, m, k) * B(b, k, n) }"),
    "strided": "def st(float(N) A) -> (O) { O(i) = A(2 * i + 1) where i in 0:(N - 1) / 2 }",
    "divided": "def dv(float(N) A) -> (O) { O(i) = A(i / 3) + A(i % 3) where i in 0:N }",
    "window": ("def conv(float(N, H) I, float(KH) W) -> (O) "
               "{ O(n, h) +=! I(n, h + kh) * W(kh) where h in 0:H - KH + 1 }"),
    "gather32": ("def emb(float(R, D) T, int32(L) I) -> (O) "
                 "{ O(l, d) = T(I(l), d) }"),
    "gather64": ("def bag(float(R, D) T, int64(Bg, L) I) -> (O) "
                 "{ O(b, d) +=! T(I(b, l), d) }"),
    "tail": "def tail(float(N) A) -> (O) { O(i) = A(N - 4 + i) where i in 0:4 }",
    "scalar": "def tot(float(N, M) A) -> (S) { S() +=! A(i, j) }",
    "transpose3": ("def tr(int32(P, Q, R) A) -> (O) "
                   "{ O(r, q, p) = A(p, q, r) * 3 + r - q }"),
    "max-reduce": ("def mx(float(N, M) A, float(N) B) -> (O, P) "
                   "{ O(n) max=! A(n, m)\n P(n) = O(n) - B(n) }"),
}


def _body(source: str) -> str:
    """The kernel function, comments removed."""
    body = source[source.index("void polyc_kernel("):]
    return re.sub(r"/\*.*?\*/", " ", body)


def _subscripts(code: str):
    """The text between the brackets of every ``t_X[...]`` (nesting kept)."""
    for m in re.finditer(r"\bt_[A-Za-z0-9_]+\[", code):
        depth, i = 1, m.end()
        while depth:
            depth += {"[": 1, "]": -1}.get(code[i], 0)
            i += 1
        yield code[m.end():i - 1]


_INDEX_TOKENS = re.compile(
    r"\s+|INT64_C\(-?[0-9]+\)|INT64_MIN|\(int64_t\)|polyc_(floord|mod|min|max)\b"
    r"|[ipc]_?[A-Za-z0-9_]*|d[0-9]+_[A-Za-z0-9_]+|t_[A-Za-z0-9_]+\[|[-+*(),?:<>=!&|\]]")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_generated_index_arithmetic_is_int64(name):
    kernel = polyc.compile(KERNELS[name])
    code = _body(kernel.source)
    # declarations: every integer variable is int64_t, except the OpenMP team
    # size (an int, as omp's num_threads takes it)
    assert re.findall(r"\bint\b", code) == ["int", "int"], code
    assert "const int polyc_team = polyc_nthreads > 0 ? (int)polyc_nthreads" in code
    for word in ("long", "short", "unsigned", "size_t", "ptrdiff_t", "uint32_t", "uint64_t"):
        assert not re.search(rf"\b{word}\b", code), word
    decls = re.findall(r"(\b[A-Za-z_][A-Za-z0-9_]*(?: const)?) (\b(?:[ipc]|d[0-9]+)_?"
                       r"[A-Za-z0-9_]*) =", code)
    assert decls
    for ctype, var in decls:
        if var.startswith(("i_", "p_", "c")) or re.match(r"d[0-9]+_", var):
            assert ctype in ("int64_t", "int64_t const"), (ctype, var)
    # every loop counter is int64_t
    heads = re.findall(r"for \(([^;]*);", code)
    assert heads and all(h.startswith("int64_t c") for h in heads), heads
    # parameters and extents come from polyc_params as int64_t
    for p in kernel.program.params:
        assert f"int64_t const p_{p} = polyc_params[" in code
    # integer literals: INT64_C, or a constant subscript/clause/step
    team = "const int polyc_team = polyc_nthreads > 0 ? (int)polyc_nthreads"
    rest = re.sub(r"INT64_C\(-?[0-9]+\)|0x[0-9a-f.]+p[-+][0-9]+|\b[A-Za-z_][A-Za-z0-9_]*", " ",
                  code.replace(team, ""))
    rest = re.sub(r"polyc_(params|buffers)\s*\[\s*[0-9]+\s*\]", " ", rest)
    for lit in re.finditer(r"[0-9]+", rest):
        before = rest[max(0, lit.start() - 4):lit.start()]
        assert before.endswith(("+= ", "(", "[")), (before, lit.group(), name)
        if before.endswith("("):     # collapse(k)
            assert "collapse(" in code
    assert not re.search(r"\[\s*[1-9][0-9]*\s*\]",
                         re.sub(r"polyc_(params|buffers)\[[0-9]+\]", "", code))
    # every linear offset is built from int64_t values only
    subs = list(_subscripts(code))
    assert subs
    for sub in subs:
        leftover = _INDEX_TOKENS.sub("", sub)
        assert leftover in ("", "0"), (sub, leftover)
        for gather in re.finditer(r"t_[A-Za-z0-9_]+\[", sub):
            assert sub[:gather.start()].endswith("(int64_t)"), sub


def test_extents_and_offsets_shape():
    """``t_C[(i_m) * d1_C + i_n]``: the offset multiplies int64_t extents."""
    kernel = polyc.compile(KERNELS["batched"])
    code = _body(kernel.source)
    assert "int64_t const d1_A = p_M;" in code and "int64_t const d2_A = p_K;" in code
    assert "t_A[((i_b) * d1_A + i_m) * d2_A + i_k]" in code


# ----------------------------------------------------------- at the boundary

BIG = 2 ** 31


#: bytes mapped in front of each tensor, so that an offset wrapped to a
#: negative 32-bit value reads mapped (zero) memory and fails the comparison
#: instead of crashing the test process
GUARD = 4 * BIG


def _sparse_array(tmp_path, dtype, count):
    """A writable array of ``count`` elements in a shared mapping of a sparse
    file, ``GUARD`` bytes into it: address space, not memory.  Returns
    ``(file, mapping, array)``."""
    if sys.maxsize < 2 ** 40:
        pytest.skip("needs a 64-bit address space")
    nbytes = GUARD + np.dtype(dtype).itemsize * count
    path = tmp_path / "sparse.bin"
    try:
        with open(path, "wb") as f:
            f.truncate(nbytes)
        f = open(path, "r+b")
        mm = mmap.mmap(f.fileno(), nbytes, access=mmap.ACCESS_WRITE)
    except (OSError, ValueError, OverflowError) as e:
        pytest.skip(f"cannot map a sparse {nbytes >> 30} GiB file here: {e}")
    return f, mm, np.frombuffer(mm, dtype=dtype, count=count, offset=GUARD)


def _release(f, mm):
    try:
        mm.close()
    except BufferError:      # a view is still alive; the mapping goes with it
        pass
    f.close()


def test_offset_beyond_2_31_in_one_dimension(tmp_path):
    """``A(N - 4 + i)`` with N = 2**31 + 9: offsets 2**31 + 5 .. 2**31 + 8."""
    n = BIG + 9
    f, mm, a = _sparse_array(tmp_path, np.float32, n)
    assert a.flags.c_contiguous and a.flags.aligned
    want = np.array([1.5, -2.25, 3e38, 7.0], dtype=np.float32)
    a[n - 4:] = want
    a[:8] = -99.0                           # what the low 32 bits would hit
    kernel = polyc.compile(KERNELS["tail"])
    out = kernel(a)
    np.testing.assert_array_equal(out, want)
    # a gather with int64 indices past 2**31
    gather = polyc.compile(
        "def g1(float(N) A, int64(L) J) -> (O) { O(l) = A(J(l)) }")
    idx = np.array([BIG + 5, BIG + 8, 3, BIG + 6], dtype=np.int64)
    np.testing.assert_array_equal(gather(a, idx), a[idx])
    assert a[BIG + 5] == want[0]
    del a
    _release(f, mm)


def test_row_offsets_beyond_2_31_and_2_32(tmp_path):
    """A (3, 2**30 + 3) float32 tensor (12 GiB, sparse): ``A(r, M - 1)`` reads
    linear offsets 2**30 + 2, 2**31 + 5 and 3 * 2**30 + 8; ``A(I(l), j)``
    multiplies an int32 index by the row extent in 64 bits."""
    rows, m = 3, 2 ** 30 + 3
    f, mm, a = _sparse_array(tmp_path, np.float32, rows * m)
    a = a.reshape(rows, m)
    assert a.flags.c_contiguous
    assert (1 * m + m - 1) == BIG + 5
    a[:, -1] = [10.0, 20.0, 30.0]
    a[:, -2] = [-10.0, -20.0, -30.0]
    a[0, :8] = -1.0
    col = polyc.compile("def col(float(R, M) A) -> (O) { O(r) = A(r, M - 1) }")
    np.testing.assert_array_equal(col(a), np.float32([10.0, 20.0, 30.0]))
    gather = polyc.compile(
        "def g(float(R, M) A, int32(L) I, int64(L) J) -> (O) { O(l) = A(I(l), J(l)) }")
    i_idx = np.array([2, 1, 0, 2], dtype=np.int32)
    j_idx = np.array([m - 1, m - 2, m - 1, m - 2], dtype=np.int64)
    np.testing.assert_array_equal(gather(a, i_idx, j_idx),
                                  np.float32([30.0, -20.0, 10.0, -30.0]))
    del a
    _release(f, mm)
