"""Bad and odd calls of compiled kernels and of ``polyc.einsum``.

Every case runs in a worker subprocess (``corpus_harness.run_batch``): a
segfault or a hang in generated code fails that case instead of killing
pytest.  A bad call must raise the documented error, naming the argument,
what was expected and what it got:

* ``DTypeError`` (a ``TypeError``): wrong element type, byte-swapped arrays
  (``'>f4'`` is refused, not converted: convert with ``.astype``), bool,
  float16, complex, object;
* ``BindingError`` (a ``TypeError``): not an array, wrong number of
  dimensions or arguments, unknown keyword, read-only, self-overlapping or
  shared ``out``, masked arrays, index tensors holding bad indices;
* ``ShapeError`` (a ``ValueError``): sizes that contradict each other, the
  kernel's constants or its in-bounds conditions, a wrong ``out`` shape;
* einsum: numpy's own message (compared with numpy on the same call).

An odd but valid call (non-contiguous, negative strides, misaligned or
read-only views, Fortran order, stride-0 broadcasts, zero-size and size-1
dimensions, ``out`` aliasing an input exactly, shifted or transposed, numpy
and Python scalars) must give numpy's result; with an aliased ``out`` that is
numpy's copy semantics (the inputs are read as they were before the call).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402

import polyc  # noqa: E402

try:  # torch tensors are a case when torch is importable
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:  # pragma: no cover - depends on the machine
    HAVE_TORCH = False

SOURCES = {
    "mm": "def mm(float(M, K) A, float(K, N) B) -> (C) {\n    C(m, n) +=! A(m, k) * B(k, n)\n}\n",
    "add64": "def add64(double(N) X, double(N) Y) -> (Z) {\n    Z(i) = X(i) + Y(i)\n}\n",
    "two": "def two(float(N) A) -> (P, Q) {\n    P(i) = A(i) + 1\n    Q(i) = A(i) * 2\n}\n",
    "scale": "def scale(float c, float(N) B) -> (C) {\n    C(i) = c * B(i)\n}\n",
    "window": "def window(float(N) A, int64 S) -> (B) {\n    B(i) = A(i + S) where i in 0:4\n}\n",
    "gather": "def gather(float(V, D) LUT, int32(B, L) I) -> (O) {\n"
              "    O(b, d) +=! LUT(I(b, l), d)\n}\n",
    "ints": "def ints(int32(N) A, int64(N) B) -> (C) {\n    C(i) = B(i) * 2 + A(i)\n}\n",
    "fixed": "def fixed(float(3, N) A) -> (R) {\n    R(j) +=! A(i, j)\n}\n",
    "strided": "def strided(float(H) I, float(KH) W, int64 S) -> (O) {\n"
               "    O(h) +=! I(h*S + kh) * W(kh)\n}\n",
}
_KERNELS: dict = {}


def kernel(name):
    if name not in _KERNELS:
        _KERNELS[name] = polyc.compile(SOURCES[name])
    return _KERNELS[name]


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(dtype)


# numpy evaluations of the kernels (float64 accumulation, then the output type)
def ref_mm(a, b):
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)


def ref_window(a, s):
    return np.asarray(a)[s:s + 4].copy()


def ref_gather(lut, idx):
    return lut[idx].sum(axis=1, dtype=np.float64).astype(np.float32).reshape(
        idx.shape[0], lut.shape[1])


def ref_strided(i, w, s):
    h = (len(i) - len(w)) // s + 1
    return np.array([sum(np.float64(i[y * s + k]) * w[k] for k in range(len(w)))
                     for y in range(max(h, 0))], np.float32)


REFS = {
    "mm": ref_mm,
    "add64": lambda x, y: np.asarray(x) + np.asarray(y),
    "two": lambda a: (np.asarray(a) + np.float32(1), np.asarray(a) * np.float32(2)),
    "scale": lambda c, b: (np.float32(c) * np.asarray(b)).astype(np.float32),
    "window": ref_window,
    "gather": ref_gather,
    "ints": lambda a, b: np.asarray(b) * 2 + np.asarray(a),
    "fixed": lambda a: np.asarray(a).sum(axis=0, dtype=np.float64).astype(np.float32),
    "strided": ref_strided,
}

#: Valid arguments of each kernel (the starting point of every bad call).
GOOD = {
    "mm": lambda: [rand(3, 4), rand(4, 5, seed=1)],
    "add64": lambda: [rand(6, dtype=np.float64), rand(6, dtype=np.float64, seed=1)],
    "two": lambda: [rand(5)],
    "scale": lambda: [np.float32(1.5), rand(4)],
    "window": lambda: [rand(7), 2],
    "gather": lambda: [rand(5, 3), np.array([[0, 4, 2], [1, 1, 3]], np.int32)],
    "ints": lambda: [np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int64) * 7],
    "fixed": lambda: [rand(3, 5)],
    "strided": lambda: [rand(9), rand(3, seed=1), 2],
}
#: (argument position, name, rank, dtype) of the tensor arguments.
TENSORS = {
    "mm": [(0, "A", 2, "float32"), (1, "B", 2, "float32")],
    "add64": [(0, "X", 1, "float64"), (1, "Y", 1, "float64")],
    "two": [(0, "A", 1, "float32")],
    "scale": [(1, "B", 1, "float32")],
    "window": [(0, "A", 1, "float32")],
    "gather": [(0, "LUT", 2, "float32"), (1, "I", 2, "int32")],
    "ints": [(0, "A", 1, "int32"), (1, "B", 1, "int64")],
    "fixed": [(0, "A", 2, "float32")],
}
OUTPUTS = {"mm": ("C", (3, 5), "float32"), "add64": ("Z", (6,), "float64"),
           "scale": ("C", (4,), "float32"), "ints": ("C", (4,), "int64")}

CASES: dict = {}
EXPECT: dict = {}


def error_case(cid, fn, cls, *words):
    assert cid not in CASES, cid
    CASES[cid] = fn
    EXPECT[cid] = ("error", cls, words)


def ok_case(cid, fn):
    assert cid not in CASES, cid
    CASES[cid] = fn
    EXPECT[cid] = ("ok",)


def compare(got, want) -> dict:
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return {"match": False, "detail": f"expected {len(want)} outputs, got {got!r}"}
        for g, w in zip(got, want):
            r = compare(g, w)
            if not r["match"]:
                return r
        return {"match": True}
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return {"match": False, "detail": f"got {got.dtype}{got.shape}, "
                                          f"expected {want.dtype}{want.shape}"}
    tol = 1e-5 if want.dtype == np.float32 else 1e-12
    if not np.allclose(got, want, rtol=tol, atol=tol, equal_nan=True):
        return {"match": False, "detail": f"got {got!r}, expected {want!r}"}
    return {"match": True}


def call_case(kname, make_args, *, out=None, expect=None):
    """Call kernel ``kname`` with ``make_args()`` (and ``out(args)``); compare
    with the numpy reference on copies of the arguments taken before the call
    (numpy's copy semantics for aliased outputs)."""
    def run():
        args = make_args()
        before = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
        o = None if out is None else out(args)
        got = kernel(kname)(*args) if o is None else kernel(kname)(*args, out=o)
        want = (expect or REFS[kname])(*before)
        r = compare(got, want)
        if r["match"] and o is not None:
            outs = o if isinstance(o, (tuple, list)) else (o,)
            gots = got if isinstance(got, tuple) else (got,)
            if any(g is not x for g, x in zip(gots, outs)):
                return {"match": False, "detail": "the kernel did not return the out= array"}
            r = compare(tuple(np.array(x) for x in outs) if len(outs) > 1
                        else np.array(outs[0]), want)
        return r
    return run


def bad_call(kname, mutate, *, out=None, kwargs=None):
    """Call kernel ``kname`` with its good arguments changed by ``mutate``."""
    def run():
        args = GOOD[kname]()
        args = mutate(args)
        kw = dict(kwargs or {})
        if out is not None:
            kw["out"] = out(args)
        kernel(kname)(*args, **kw)
    return run


def replace(pos, value_fn):
    def mutate(args):
        args = list(args)
        args[pos] = value_fn(args[pos])
        return args
    return mutate


# ------------------------------------------------------------- wrong dtypes
OTHER_DTYPES = {
    "float32": ["float64", "float16", "int32", "int64", "bool", "complex64", "uint8",
                "object", ">f4", "longdouble"],
    "float64": ["float32", ">f8", "complex128", "int64", "longdouble"],
    "int32": ["int64", "float32", "uint32", ">i4", "int16"],
    "int64": ["int32", "uint64", "float64", ">i8"],
}
for kname, tensors in TENSORS.items():
    for pos, name, rank, dtype in tensors:
        for other in OTHER_DTYPES[dtype]:
            label = other.replace(">", "big-endian-")
            got = np.dtype(other).str if not np.dtype(other).isnative else str(np.dtype(other))
            error_case(f"{kname}-{name}-dtype-{label}",
                       bad_call(kname, replace(pos, lambda a, o=other: a.astype(o))),
                       "DTypeError", f"argument {name}", f"expected dtype {dtype}", f"got {got}")

# ------------------------------------------------------------- wrong ranks
for kname, tensors in TENSORS.items():
    for pos, name, rank, dtype in tensors:
        error_case(f"{kname}-{name}-one-more-dimension",
                   bad_call(kname, replace(pos, lambda a: a[..., None])),
                   "BindingError", f"argument {name}", f"expected {rank} dimension(s)",
                   f"got {rank + 1}")
        error_case(f"{kname}-{name}-one-less-dimension",
                   bad_call(kname, replace(pos, lambda a: a.reshape(-1)[:1].reshape(
                       (1,) * (a.ndim - 1)) if a.ndim > 1 else np.asarray(a[0]))),
                   "BindingError", f"argument {name}", f"expected {rank} dimension(s)",
                   f"got {rank - 1}")
        error_case(f"{kname}-{name}-numpy-scalar",
                   bad_call(kname, replace(pos, lambda a: a.reshape(-1)[0])),
                   "BindingError", f"argument {name}", f"expected {rank} dimension(s)", "got 0")

# ------------------------------------------------------------- not arrays
NOT_ARRAYS = {
    "list": lambda a: a.tolist(), "tuple": lambda a: tuple(a.tolist()), "none": lambda a: None,
    "str": lambda a: "A", "dict": lambda a: {}, "python-float": lambda a: 1.0,
    "memoryview": lambda a: memoryview(np.ascontiguousarray(a)),
    "masked": lambda a: np.ma.masked_array(a, mask=np.zeros(a.shape, bool)),
}
TYPE_NAMES = {"list": "list", "tuple": "tuple", "none": "NoneType", "str": "str", "dict": "dict",
              "python-float": "float", "memoryview": "memoryview", "masked": "masked arrays"}
for kname, tensors in TENSORS.items():
    for pos, name, rank, dtype in tensors:
        for label, make in NOT_ARRAYS.items():
            error_case(f"{kname}-{name}-{label}", bad_call(kname, replace(pos, make)),
                       "BindingError", f"argument {name}", TYPE_NAMES[label])
if HAVE_TORCH:  # pragma: no cover - depends on the machine
    # torch CPU tensors are accepted without a copy (issue 14; the result is a
    # tensor too): the same values as the numpy call
    def _as_numpy_args(kname):
        return lambda *a: REFS[kname](*[x.numpy() if hasattr(x, "numpy") else x for x in a])
    for kname, tensors in TENSORS.items():
        pos, name, rank, dtype = tensors[0]
        torchify = replace(pos, lambda a: __import__("torch").from_numpy(np.ascontiguousarray(a)))
        ok_case(f"{kname}-{name}-torch-tensor",
                call_case(kname, lambda k=kname, t=torchify: t(GOOD[k]()),
                          expect=_as_numpy_args(kname)))

# ------------------------------------------------------------- shapes that contradict
SHAPE_CASES = [
    ("mm", "B", 1, lambda a: a[:3], "dimension 0 has extent 3, expected 4"),
    ("mm", "B", 1, lambda a: np.zeros((0, 5), np.float32), "dimension 0 has extent 0, expected 4"),
    ("add64", "Y", 1, lambda a: a[:5], "dimension 0 has extent 5, expected 6"),
    ("add64", "Y", 1, lambda a: np.zeros(0), "dimension 0 has extent 0, expected 6"),
    ("ints", "B", 1, lambda a: np.zeros(9, np.int64), "dimension 0 has extent 9, expected 4"),
    ("fixed", "A", 0, lambda a: rand(4, 5), "dimension 0 has extent 4, expected 3"),
    ("fixed", "A", 0, lambda a: rand(0, 5), "dimension 0 has extent 0, expected 3"),
]
for kname, name, pos, make, words in SHAPE_CASES:
    extent = words.split("extent ")[1].split(",")[0]
    error_case(f"{kname}-{name}-shape-extent-{extent}", bad_call(kname, replace(pos, make)),
               "ShapeError", f"argument {name}", words)
error_case("window-S-reads-past-the-end", bad_call("window", replace(1, lambda s: 10)),
           "ShapeError", "S=10", "N=7", "out of bounds", "tensor A")
SOURCES["always-out"] = ("def always(float(3) A) -> (B) {\n"
                         "    B(i) = A(i) where i in 0:4\n}\n")
SOURCES["always-out-written"] = ("def written(float(N) A) -> (float(N) B) {\n"
                                 "    B(i) = A(0) where i in 0:N + 1\n}\n")
error_case("constant-size-always-exceeded", lambda: kernel("always-out")(rand(3)),
           "ShapeError", "tensor A out of bounds whatever the sizes are", "no call can succeed")
error_case("declared-output-always-exceeded", lambda: kernel("always-out-written")(rand(4)),
           "ShapeError", "tensor B out of bounds whatever the sizes are")
error_case("window-short-input", bad_call("window", replace(0, lambda a: a[:3])),
           "ShapeError", "S=2", "N=3", "out of bounds")

# ------------------------------------------------------------- argument counts, keywords
for kname in ("mm", "two", "window"):
    n = len(GOOD[kname]())
    error_case(f"{kname}-no-arguments", bad_call(kname, lambda a: []),
               "BindingError", f"{kname}() takes {n} argument(s)", "got 0")
    error_case(f"{kname}-one-argument-too-many", bad_call(kname, lambda a: a + [a[0]]),
               "BindingError", f"{kname}() takes {n} argument(s)", f"got {n + 1}")
    error_case(f"{kname}-unknown-keyword", bad_call(kname, lambda a: a, kwargs={"outt": 1}),
               "BindingError", "unexpected keyword argument 'outt'")
error_case("mm-one-argument-missing", bad_call("mm", lambda a: a[:1]),
           "BindingError", "mm() takes 2 argument(s) (A, B), got 1")
error_case("mm-arguments-by-name", bad_call("mm", lambda a: [], kwargs={"A": 1, "B": 2}),
           "BindingError", "unexpected keyword argument 'A'", "by position (A, B)")

# ------------------------------------------------------------- size arguments
SIZE_BAD = [
    ("float", lambda s: 2.0, "BindingError", ("argument S", "expected an integer size", "float")),
    ("bool", lambda s: True, "BindingError", ("argument S", "bool")),
    ("none", lambda s: None, "BindingError", ("argument S", "NoneType")),
    ("str", lambda s: "2", "BindingError", ("argument S", "str")),
    ("array", lambda s: np.array([2]), "BindingError", ("argument S", "array of shape (1,)")),
    ("numpy-float", lambda s: np.float64(2), "BindingError", ("argument S", "float64")),
    ("negative", lambda s: -1, "ShapeError", ("argument S", "size must be >= 0", "-1")),
    ("beyond-int64", lambda s: 2 ** 63, "ShapeError", ("argument S", "does not fit in 64 bits")),
    ("uint64-max", lambda s: np.uint64(2 ** 64 - 1), "ShapeError", ("argument S",)),
    ("huge", lambda s: 2 ** 62, "ShapeError", ("S=4611686018427387904", "out of bounds")),
]
for label, make, cls, words in SIZE_BAD:
    error_case(f"window-S-{label}", bad_call("window", replace(1, make)), cls, *words)
error_case("strided-S-float", bad_call("strided", replace(2, lambda s: 2.5)),
           "BindingError", "argument S", "expected an integer size")
error_case("strided-S-negative", bad_call("strided", replace(2, lambda s: -2)),
           "ShapeError", "S=-2", "non-negative")
error_case("strided-S-zero", bad_call("strided", replace(2, lambda s: 0)),
           "SemanticError", "cannot infer the range of index variable 'h'")
error_case("strided-I-not-an-array", bad_call("strided", replace(0, lambda a: [1.0, 2.0])),
           "BindingError", "argument I", "list")

# ------------------------------------------------------------- gathers with bad indices
for label, bad in (("negative", -1), ("too-large", 5), ("huge", 2 ** 31 - 1),
                   ("most-negative", -2 ** 31)):
    def make(a, bad=bad):
        a = a.copy()
        a[1, 2] = bad
        return a
    error_case(f"gather-index-{label}", bad_call("gather", replace(1, make)),
               "BindingError", "argument I", f"holds index {bad}", "valid indices are 0..4")
error_case("gather-into-empty-table", bad_call("gather", replace(0, lambda a: a[:0])),
           "BindingError", "argument I", "holds index 4",
           "valid indices are none: its extent is 0")

# ------------------------------------------------------------- bad out=
for kname, (oname, shape, dtype) in OUTPUTS.items():
    other = "float64" if dtype != "float64" else "float32"
    error_case(f"{kname}-out-dtype", bad_call(kname, lambda a: a, out=lambda a, s=shape, o=other:
                                              np.empty(s, o)),
               "DTypeError", f"out {oname}", f"expected dtype {dtype}", f"got {other}")
    error_case(f"{kname}-out-byte-swapped", bad_call(
        kname, lambda a: a,
        out=lambda a, s=shape, d=dtype: np.empty(s, np.dtype(d).newbyteorder())),
        "DTypeError", f"out {oname}", "non-native byte order")
    error_case(f"{kname}-out-shape", bad_call(kname, lambda a: a, out=lambda a, s=shape, d=dtype:
                                              np.empty(tuple(x + 1 for x in s), d)),
               "ShapeError", f"out {oname}", f"expected shape {shape}")
    error_case(f"{kname}-out-rank", bad_call(kname, lambda a: a, out=lambda a, s=shape, d=dtype:
                                             np.empty(s + (1,), d)),
               "ShapeError", f"out {oname}", f"expected shape {shape}")

    def readonly(a, s=shape, d=dtype):
        o = np.empty(s, d)
        o.flags.writeable = False
        return o
    error_case(f"{kname}-out-read-only", bad_call(kname, lambda a: a, out=readonly),
               "BindingError", f"out {oname}", "read-only")
    error_case(f"{kname}-out-list", bad_call(kname, lambda a: a, out=lambda a, s=shape:
                                             np.zeros(s).tolist()),
               "BindingError", f"out {oname}", "list")
    error_case(f"{kname}-out-scalar", bad_call(kname, lambda a: a, out=lambda a: 0.0),
               "BindingError", f"out {oname}", "float")
    error_case(f"{kname}-out-masked", bad_call(kname, lambda a: a, out=lambda a, s=shape, d=dtype:
                                               np.ma.masked_array(np.empty(s, d))),
               "BindingError", f"out {oname}", "masked")
    error_case(f"{kname}-out-stride-0", bad_call(
        kname, lambda a: a, out=lambda a, s=shape, d=dtype:
        np.lib.stride_tricks.as_strided(np.zeros(1, d), shape=s, strides=(0,) * len(s))),
        "BindingError", f"out {oname}", "overlap in memory")
    error_case(f"{kname}-out-empty-tuple", bad_call(kname, lambda a: a, out=lambda a: ()),
               "BindingError", "expected 1 array(s)", "got 0")
    error_case(f"{kname}-out-two-arrays", bad_call(kname, lambda a: a, out=lambda a, s=shape,
                                                   d=dtype: (np.empty(s, d), np.empty(s, d))),
               "BindingError", "expected 1 array(s)", "got 2")
error_case("two-out-one-array", bad_call("two", lambda a: a, out=lambda a: np.empty(5, np.float32)),
           "BindingError", "out: expected 2 array(s) (P, Q), got 1")
error_case("two-out-three-arrays", bad_call("two", lambda a: a, out=lambda a: tuple(
    np.empty(5, np.float32) for _ in range(3))), "BindingError", "expected 2 array(s)", "got 3")


def _same_twice(a):
    o = np.empty(5, np.float32)
    return (o, o)


def _overlapping_pair(a):
    buf = np.empty(8, np.float32)
    return (buf[:5], buf[3:])


error_case("two-out-same-array-twice", bad_call("two", lambda a: a, out=_same_twice),
           "BindingError", "out Q and out P share memory")
error_case("two-out-overlapping", bad_call("two", lambda a: a, out=_overlapping_pair),
           "BindingError", "share memory")
error_case("two-out-second-wrong-dtype", bad_call("two", lambda a: a, out=lambda a: (
    np.empty(5, np.float32), np.empty(5, np.float64))), "DTypeError", "out Q", "float64")


# ============================================================= odd but valid calls
def _misaligned(a):
    """A copy of ``a`` at an odd address (np.frombuffer with offset=1)."""
    a = np.ascontiguousarray(a)
    buf = bytearray(a.nbytes + 1)
    view = np.frombuffer(buf, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape)
    view[...] = a
    assert not view.flags.aligned or a.dtype.itemsize == 1
    return view


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _fortran(a):
    return np.asfortranarray(a)


def _strided(a):
    """Every other element in every dimension (a non-contiguous view)."""
    big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
    big[tuple(slice(None, None, 2) for _ in a.shape)] = a
    return big[tuple(slice(None, None, 2) for _ in a.shape)]


def _reversed(a):
    """Negative strides in every dimension, with the same values."""
    flipped = np.ascontiguousarray(a[tuple(slice(None, None, -1) for _ in a.shape)])
    return flipped[tuple(slice(None, None, -1) for _ in a.shape)]


def _broadcast(a):
    """A stride-0 view with the values of ``a`` where they are all equal."""
    return np.broadcast_to(a.reshape(-1)[:1].reshape((1,) * a.ndim), a.shape)


def _transposed_storage(a):
    """The same values stored transposed (a ``.T`` view of a C array)."""
    return np.ascontiguousarray(a.T).T


def _matrix(a):
    return np.asmatrix(a) if a.ndim == 2 else a


class _Sub(np.ndarray):
    pass


LAYOUTS = {"misaligned": _misaligned, "read-only": _readonly, "fortran": _fortran,
           "strided": _strided, "negative-strides": _reversed, "stride-0": _broadcast,
           "transposed-storage": _transposed_storage, "subclass": lambda a: a.view(_Sub)}
for kname, tensors in TENSORS.items():
    for pos, name, rank, dtype in tensors:
        for label, lay in LAYOUTS.items():
            if kname == "gather" and name == "I" and label == "stride-0":
                continue
            ok_case(f"{kname}-{name}-{label}", call_case(
                kname, (lambda k=kname, p=pos, f=lay: replace(p, f)(GOOD[k]()))))
ok_case("mm-A-matrix", call_case("mm", lambda: replace(0, _matrix)(GOOD["mm"]())))

# sizes 0 and 1 in every dimension
MM_SIZES = [(0, 4, 5), (3, 0, 5), (3, 4, 0), (0, 0, 0), (1, 1, 1), (1, 4, 1), (3, 1, 5)]
for m, k, n in MM_SIZES:
    ok_case(f"mm-sizes-{m}x{k}x{n}", call_case(
        "mm", (lambda m=m, k=k, n=n: [rand(m, k), rand(k, n, seed=1)])))
for n in (0, 1):
    ok_case(f"add64-size-{n}", call_case("add64", lambda n=n: [rand(n, dtype=np.float64),
                                                               rand(n, dtype=np.float64, seed=1)]))
    ok_case(f"two-size-{n}", call_case("two", lambda n=n: [rand(n)]))
    ok_case(f"scale-size-{n}", call_case("scale", lambda n=n: [np.float32(2), rand(n)]))
    ok_case(f"ints-size-{n}", call_case("ints", lambda n=n: [np.zeros(n, np.int32),
                                                             np.ones(n, np.int64)]))
    ok_case(f"fixed-size-{n}", call_case("fixed", lambda n=n: [rand(3, n)]))
ok_case("gather-no-bags", call_case("gather", lambda: [rand(5, 3), np.zeros((0, 2), np.int32)]))
ok_case("gather-empty-bags", call_case("gather", lambda: [rand(5, 3), np.zeros((2, 0), np.int32)]))
ok_case("gather-empty-table-no-lookups", call_case(
    "gather", lambda: [rand(0, 3), np.zeros((2, 0), np.int32)]))
ok_case("window-exactly-fits", call_case("window", lambda: [rand(6), 2]))
ok_case("window-S-numpy-int32", call_case("window", lambda: [rand(7), np.int32(3)]))
ok_case("window-S-numpy-uint8", call_case("window", lambda: [rand(7), np.uint8(1)]))
ok_case("strided-S-1", call_case("strided", lambda: [rand(9), rand(3, seed=1), 1]))
ok_case("strided-S-3", call_case("strided", lambda: [rand(9), rand(3, seed=1), 3]))
ok_case("strided-S-larger-than-input", call_case("strided", lambda: [rand(4), rand(3, seed=1), 50]))
ok_case("strided-kernel-longer-than-input", call_case(
    "strided", lambda: [rand(2), rand(3, seed=1), 2]))

# scalars for the rank-0 argument c
for label, c in {"python-float": 1.5, "python-int": 3, "numpy-float32": np.float32(0.5),
                 "zero-d-array": np.array(2.0, np.float32), "python-float-nan": float("nan"),
                 "python-float-inf": float("inf"), "big-python-int": 2 ** 70}.items():
    ok_case(f"scale-c-{label}", call_case("scale", lambda c=c: [c, rand(4)]))
for label, c, cls, words in [
        ("numpy-float64", np.float64(1.5), "DTypeError", ("argument c", "expected dtype float32",
                                                           "got float64")),
        ("zero-d-float64", np.array(1.5), "DTypeError", ("argument c", "got float64")),
        ("bool", True, "BindingError", ("argument c", "bool")),
        ("numpy-bool", np.bool_(True), "DTypeError", ("argument c", "got bool")),
        ("complex", 1j, "BindingError", ("argument c", "complex")),
        ("one-element-array", np.ones(1, np.float32), "BindingError",
         ("argument c", "expected 0 dimension(s)", "got 1")),
        ("huge-python-int", 10 ** 400, "DTypeError", ("argument c", "cannot be represented")),
        ("float-overflowing-float32", 1e300, "DTypeError",
         ("argument c", "cannot be represented in float32")),
        ("string", "1.5", "BindingError", ("argument c", "str"))]:
    error_case(f"scale-c-{label}", bad_call("scale", replace(0, lambda _, c=c: c)), cls, *words)


# out= that is odd but valid
def _out_alias_exact(args):
    return args[0]


def _shifted_pair():
    buf = rand(7, dtype=np.float64)
    return [buf[:6], buf[1:]]


ok_case("add64-out-is-first-input", call_case("add64", GOOD["add64"], out=_out_alias_exact))
ok_case("add64-out-is-second-input", call_case("add64", GOOD["add64"], out=lambda a: a[1]))
ok_case("add64-out-is-both-inputs", call_case(
    "add64", lambda: (lambda x: [x, x])(rand(6, dtype=np.float64)), out=lambda a: a[0]))
ok_case("add64-inputs-overlap-shifted", call_case("add64", _shifted_pair))
_SHIFT_BUF: dict = {}


def _shifted_in_buffer():
    buf = rand(8, dtype=np.float64)
    _SHIFT_BUF["buf"] = buf
    return [buf[:6], buf[1:7]]


ok_case("add64-out-overlaps-inputs-shifted", call_case(
    "add64", _shifted_in_buffer, out=lambda a: _SHIFT_BUF["buf"][2:8]))
ok_case("add64-out-shifted-left", call_case("add64", _shifted_pair, out=lambda a: a[0]))
ok_case("add64-out-reversed-view-of-input", call_case(
    "add64", GOOD["add64"], out=lambda a: a[0][::-1]))
ok_case("add64-out-strided", call_case(
    "add64", GOOD["add64"], out=lambda a: np.zeros(12)[::2]))
ok_case("add64-out-misaligned", call_case(
    "add64", GOOD["add64"], out=lambda a: _misaligned(np.zeros(6))))
ok_case("add64-out-size-0", call_case(
    "add64", lambda: [np.zeros(0), np.zeros(0)], out=lambda a: np.zeros(0)))
ok_case("mm-out-fortran", call_case("mm", GOOD["mm"], out=lambda a: np.zeros((3, 5), np.float32,
                                                                             order="F")))
ok_case("mm-out-transposed-view", call_case(
    "mm", GOOD["mm"], out=lambda a: np.zeros((5, 3), np.float32).T))


def _square_inputs():
    return [rand(4, 4), rand(4, 4, seed=1)]


ok_case("mm-out-is-A", call_case("mm", _square_inputs, out=lambda a: a[0]))
ok_case("mm-out-is-B", call_case("mm", _square_inputs, out=lambda a: a[1]))
ok_case("mm-out-is-A-transposed", call_case("mm", _square_inputs, out=lambda a: a[0].T))
ok_case("mm-A-is-B", call_case("mm", lambda: (lambda x: [x, x])(rand(4, 4)), out=lambda a: a[0]))
ok_case("two-out-tuple", call_case("two", GOOD["two"], out=lambda a: (
    np.empty(5, np.float32), np.empty(5, np.float32))))
ok_case("two-out-list", call_case("two", GOOD["two"], out=lambda a: [
    np.empty(5, np.float32), np.empty(5, np.float32)]))
ok_case("two-out-first-is-input", call_case("two", GOOD["two"], out=lambda a: (
    a[0], np.empty(5, np.float32))))
ok_case("two-out-disjoint-halves-of-one-buffer", call_case(
    "two", GOOD["two"], out=lambda a: (lambda b: (b[:5], b[5:]))(np.empty(10, np.float32))))
ok_case("two-out-interleaved-in-one-buffer", call_case(
    "two", GOOD["two"], out=lambda a: (lambda b: (b[::2], b[1::2]))(np.empty(10, np.float32))))
ok_case("ints-out-is-B", call_case("ints", GOOD["ints"], out=lambda a: a[1]))
ok_case("scale-out-is-B", call_case("scale", GOOD["scale"], out=lambda a: a[1]))


# ============================================================= polyc.einsum
def einsum_case(sub, make_ops, **kw):
    """polyc.einsum against numpy.einsum on copies of the same operands."""
    def run():
        ops = make_ops()
        before = [np.array(o, copy=True) if isinstance(o, np.ndarray) else o for o in ops]
        kw2 = dict(kw)
        out = None
        if "out" in kw2:
            out = kw2["out"](ops)
            kw2["out"] = out
        got = polyc.einsum(sub, *ops, **kw2)
        np_kw = dict(kw2)
        if out is not None:
            np_kw["out"] = np.empty_like(out)
        want = np.einsum(sub, *before, **np_kw)
        r = compare(np.asarray(got), np.asarray(want))
        if r["match"] and out is not None and got is not out:
            return {"match": False, "detail": "einsum did not return out"}
        return r
    return run


def einsum_error(sub, make_ops, **kw):
    """polyc.einsum raises; the parent checks the class and, where numpy
    raises too, that the message is numpy's (recorded in the outcome)."""
    def run():
        ops = make_ops()
        kw2 = {k: (v(ops) if callable(v) else v) for k, v in kw.items()}
        try:
            np.einsum(sub, *ops, **kw2)
            numpy_message = None
        except Exception as e:  # noqa: BLE001 - numpy's behaviour is the reference
            numpy_message = str(e)
        ops = make_ops()
        kw2 = {k: (v(ops) if callable(v) else v) for k, v in kw.items()}
        try:
            polyc.einsum(sub, *ops, **kw2)
        except polyc.errors.PolycError as e:
            # numpy's text for what numpy calls a ValueError; polyc's own
            # DTypeError text for element types it does not compute in
            if (isinstance(e, polyc.errors.EinsumError) and numpy_message is not None
                    and str(e) != numpy_message):
                raise AssertionError(f"polyc: {e} / numpy: {numpy_message}") from e
            raise
    return run


def ea():
    return [rand(3, 4, dtype=np.float64), rand(4, 5, dtype=np.float64, seed=1)]


for label, dt in {"bool": bool, "complex64": np.complex64, "uint64": np.uint64}.items():
    error_case(f"einsum-dtype-{label}", einsum_error(
        "ij,jk->ik", lambda dt=dt: [a.astype(dt) for a in ea()]),
        "DTypeError", "polyc.einsum does not compute in")
error_case("einsum-dtype-object", einsum_error(
    "ij,jk->ik", lambda: [a.astype(object) for a in ea()]), "DTypeError", "object")
error_case("einsum-dtype-str", einsum_error("ij,jk->ik", lambda: [np.array([["a"]]), ea()[1]]),
           "DTypeError", "str")
error_case("einsum-out-read-only", einsum_error("ij,jk->ik", ea, out=lambda ops: _readonly(
    np.empty((3, 5)))), "EinsumError", "read-only")
error_case("einsum-out-wrong-dtype", einsum_error(
    "ij,jk->ik", ea, out=lambda ops: np.empty((3, 5), np.float32)), "DTypeError",
    "could not be cast")
error_case("einsum-out-wrong-shape", einsum_error(
    "ij,jk->ik", ea, out=lambda ops: np.empty((3, 6))), "EinsumError", "could not be broadcast")
error_case("einsum-out-list", einsum_error("ij,jk->ik", ea, out=lambda ops: [[0.0] * 5] * 3),
           "BindingError", "out must be an array")
error_case("einsum-order", einsum_error("ij,jk->ik", ea, order="F"), "BindingError", "order=")
error_case("einsum-ragged", einsum_error("ij", lambda: [[[1.0, 2.0], [3.0]]]), "EinsumError",
           "inhomogeneous")
error_case("einsum-masked", einsum_error("ij->j", lambda: [np.ma.masked_array(np.ones((2, 2)))]),
           "BindingError", "masked")
error_case("einsum-shape-mismatch", einsum_error(
    "ij,jk->ik", lambda: [np.ones((3, 4)), np.ones((5, 2))]), "EinsumError",
    "could not be broadcast")
error_case("einsum-dtype-int8-cast-refused", einsum_error(
    "ij,jk->ik", ea, dtype="int32"), "DTypeError", "could not be cast")

EINSUM_OK = {
    "matmul": ("ij,jk->ik", ea, {}),
    "lists": ("ij,jk->ik", lambda: [a.tolist() for a in ea()], {}),
    "big-endian": ("ij,jk->ik", lambda: [a.astype(">f8") for a in ea()], {}),
    "big-endian-float32": ("ij,jk", lambda: [a.astype(">f4") for a in ea()], {}),
    "mixed-dtypes": ("ij,jk", lambda: [ea()[0].astype(np.float32), ea()[1]], {}),
    "float16-with-dtype": ("ij,jk", lambda: [a.astype(np.float16) for a in ea()],
                           {"dtype": "float32"}),
    "bool-with-dtype": ("ij,jk", lambda: [a > 0 for a in ea()], {"dtype": "int32"}),
    "int8-with-dtype": ("ij,jk", lambda: [(a * 10).astype(np.int8) for a in ea()],
                        {"dtype": "int64"}),
    "int8-wrapping": ("ij,jk", lambda: [(a * 10).astype(np.int8) for a in ea()], {}),
    "uint8-int16": ("ij,jk", lambda: [(a * 10).astype(dt) for a, dt in zip(ea(), (np.uint8,
                                                                               np.int16))], {}),
    "uint8-unsafe": ("ij,jk", lambda: [(a * 10).astype(np.uint8) for a in ea()],
                     {"dtype": "int32", "casting": "unsafe"}),
    "misaligned": ("ij,jk->ik", lambda: [_misaligned(a) for a in ea()], {}),
    "negative-strides": ("ij,jk->ik", lambda: [a[::-1, ::-1] for a in ea()], {}),
    "strided": ("ij,jk->ik", lambda: [_strided(a) for a in ea()], {}),
    "fortran": ("ij,jk->ik", lambda: [_fortran(a) for a in ea()], {}),
    "stride-0": ("ij,jk->ik", lambda: [_broadcast(a) for a in ea()], {}),
    "read-only": ("ij,jk->ik", lambda: [_readonly(a) for a in ea()], {}),
    "python-scalars": (",ij->ij", lambda: [2.5, ea()[0]], {}),
    "numpy-scalar": (",ij->ij", lambda: [np.float32(2.5), ea()[0]], {}),
    "zero-size-contraction": ("ij,jk->ik", lambda: [np.ones((3, 0)), np.ones((0, 5))], {}),
    "zero-size-output": ("ij,jk->ik", lambda: [np.ones((0, 4)), np.ones((4, 5))], {}),
    "zero-size-sum": ("ij->", lambda: [np.ones((0, 4))], {}),
    "size-1-broadcast": ("ij,jk->ik", lambda: [np.ones((3, 1)), rand(4, 5, dtype=np.float64)], {}),
    "size-1-everything": ("ij,jk->ik", lambda: [np.ones((1, 1)), np.ones((1, 1))], {}),
    "ellipsis-zero-size": ("...i,...i->...", lambda: [np.ones((0, 3)), np.ones((0, 3))], {}),
    "trace-size-1": ("ii", lambda: [np.full((1, 1), 3.0)], {}),
    "out-is-operand": ("ij->ij", lambda: [rand(3, 4, dtype=np.float64)],
                       {"out": lambda ops: ops[0]}),
    "out-transposed-alias": ("ij->ji", lambda: [rand(4, 4, dtype=np.float64)],
                             {"out": lambda ops: ops[0]}),
    "out-shifted-alias": ("i->i", lambda: (lambda b: [b[:9]])(rand(10, dtype=np.float64)),
                          {"out": lambda ops: ops[0].base[1:] if ops[0].base is not None
                           else ops[0]}),
    "out-matmul-into-operand": ("ij,jk->ik", lambda: [rand(4, 4, dtype=np.float64),
                                                      rand(4, 4, dtype=np.float64, seed=1)],
                                {"out": lambda ops: ops[1]}),
    "out-other-dtype": ("ij,jk->ik", lambda: [a.astype(np.float32) for a in ea()],
                        {"out": lambda ops: np.empty((3, 5))}),
    "out-misaligned": ("ij,jk->ik", ea, {"out": lambda ops: _misaligned(np.zeros((3, 5)))}),
    "out-strided": ("ij,jk->ik", ea, {"out": lambda ops: np.zeros((6, 10))[::2, ::2]}),
    "out-big-endian": ("ij,jk->ik", ea, {"out": lambda ops: np.zeros((3, 5), ">f8")}),
    "out-broadcast-dimension": ("ij->ij", lambda: [np.ones((1, 4))],
                                {"out": lambda ops: np.zeros((3, 4))}),
}
for label, (sub, make, kw) in EINSUM_OK.items():
    ok_case(f"einsum-{label}", einsum_case(sub, make, **kw))


# ============================================================= the tests
@pytest.fixture(scope="module")
def results(request):
    ids = H.selected_ids(request) or list(CASES)
    return H.run_batch(__file__, ids)


@pytest.mark.parametrize("case_id", list(CASES))
def test_call(case_id, results):
    outcome = results[case_id]
    kind, *rest = EXPECT[case_id]
    if kind == "ok":
        H.expect_ok(outcome)
    else:
        cls, words = rest
        H.expect_error(outcome, cls, words)


def test_counts():
    errors = sum(1 for e in EXPECT.values() if e[0] == "error")
    assert errors >= 150, errors
    assert len(CASES) - errors >= 50


def test_torch_tensors_are_covered_when_torch_is_installed():
    """Torch tensors are call cases when torch is importable (the first tensor
    argument of each kernel as a torch tensor: accepted, same values);
    skipped otherwise."""
    if not HAVE_TORCH:
        pytest.skip("torch is not installed")
    assert any(c.endswith("-torch-tensor") for c in CASES)
