"""What a statement tensorized onto the GEMM intrinsic is called with:
:class:`GemmMatch` (made by :func:`polyc.intrinsics.match_gemm`), and the
GEMM implementations' dtypes and blocking constants.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import expr as E
from .config import cuda_arch_number

#: The float dtypes the GEMM intrinsic implements.
GEMM_DTYPES = ("float32", "float64")
#: The operand dtypes of the tensor-core GEMM (``target="cuda"``,
#: ``backends/cuda/wmma.py``), which accumulates in float32.
TENSOR_CORE_DTYPES = ("float16", "bfloat16")
#: The tensor-core GEMM's blocking (backends/cuda/wmma.py): threads per
#: block (8 warps), and the rows, columns and k-panel of one block's tile.
TENSOR_CORE_THREADS = 256
TENSOR_CORE_TILE = (128, 128, 32)
#: The oldest CUDA architecture (``sm_XY`` as XY) with WMMA on each operand dtype.
TENSOR_CORE_MIN_ARCH = {"float16": 70, "bfloat16": 80}
#: Operand dtypes of the CUDA backend's SIMT GEMM (register-tiled FMA on the
#: CUDA cores, 8 x 8 outputs per thread; same launch geometry and calling
#: convention as the tensor-core GEMM, ``backends/cuda/wmma.py``): float32
#: operands into a float32 C and float64 into float64, on every architecture.
SIMT_GEMM_DTYPES = ("float32", "float64")
#: The SIMT GEMM's tile for launches that 128 x 128 tiles would leave short of
#: blocks: 64 x 64 tiles of C (4 x 4 per thread), taken when the launch has
#: fewer than :data:`SIMT_FEW_TILES` tiles of 128 x 128 (its batch counted):
#: two waves of a 132-multiprocessor H100/H200.  The host's grid and the
#: device's choice of tile use the same test (any grid is correct: the
#: blocks stride over the tiles).
SIMT_SMALL_TILE = 64
SIMT_FEW_TILES = 264


def tensor_core_support(operand_dtype: str, arch: str) -> str | None:
    """``None`` when CUDA architecture ``arch`` (``"sm_90"``) has tensor
    cores for ``operand_dtype`` operands, else the reason."""
    if operand_dtype in SIMT_GEMM_DTYPES:
        return None
    need = TENSOR_CORE_MIN_ARCH.get(operand_dtype)
    if need is None:
        return f"tensor cores take float16 or bfloat16 operands, not {operand_dtype}"
    if cuda_arch_number(arch) < need:
        return (f"{operand_dtype} WMMA needs sm_{need} or newer; Config.cuda_arch is {arch} "
                "(POLYC_CUDA_ARCH)")
    return None


#: The most iterators one GEMM index may be made of (``POLYC_GEMM_MAXDIMS``).
MAX_DIGITS = 8


@dataclass(frozen=True)
class Band:
    """The band of a call whose domain is a band of its box
    (:func:`polyc.callbox.band`): ``lo <= d <= hi`` with ``d = n - m``
    (``pair`` ``"mn"``: only those elements of C are stored, BLIS's gemmt),
    ``k - m`` (``"mk"``: A is zero outside, a triangular A) or ``k - n``
    (``"nk"``: B's triangle); ``lo``/``hi`` expressions of the size
    parameters, ``None`` where that side is unbounded."""
    pair: str
    lo: E.Expr | None
    hi: E.Expr | None
    #: the instances, the reduction iterators left free, whose elements of
    #: C the call writes (``beta * C`` also where the reduction is empty):
    #: an ``isl.Set`` on the statement's space
    rows: object = None

    def key(self) -> tuple:
        """What two calls of one update's products must share."""
        return (self.pair, self.lo, self.hi)

    def describe(self, m: "GemmMatch") -> str:
        first, second = {"mn": (m.m, m.n), "mk": (m.m, m.k), "nk": (m.n, m.k)}[self.pair]
        d = f"{second[0]} - {first[0]}"
        edge = " <= ".join(E.to_text(x) if not isinstance(x, str) else x
                           for x in (self.lo, d, self.hi) if x is not None)
        if self.pair == "mn":
            return (f"only the band {edge} of {m.c} (a triangle: one call, the tiles crossing "
                    "its edge stored through a mask)")
        return (f"the reduction over the band {edge} (a triangle of "
                f"{m.a if self.pair == 'mk' else m.b}: one call, zeros packed outside it)")


@dataclass(frozen=True)
class PostOp:
    """One operand of the call's post-operations (``polyc_gemm_post`` in
    ``gemm_api.h``: ``C = relu(C * mul + add + add2)`` on each finished tile):
    ``role`` ``"mul"``, ``"add"`` or ``"add2"``; the tensor and its access in
    the update's iterator names; ``layout`` ``"row"`` (indexed by the GEMM's
    row, a per-channel vector), ``"col"`` (by its column) or ``"full"``
    (every element of C, at the same indices)."""
    role: str
    tensor: str
    access: E.Access
    layout: str

    def text(self) -> str:
        sign = "*" if self.role == "mul" else "+"
        where = {"row": "per row", "col": "per column", "full": "per element"}[self.layout]
        return f"{sign} {self.tensor} ({where})"


@dataclass(frozen=True)
class GemmMatch:
    """``statement`` (C[...] += A[...] * B[...]) as GEMM calls.

    ``batch`` iterators stay loops around the call: those that index all
    three tensors, and those of m or n outside C's innermost run of m (n)
    dimensions (a convolution's image index); ``m``, ``n``, ``k`` are the
    iterators the intrinsic scans, in the order their digits make up the
    GEMM's row, column and reduction indices; ``c``, ``a``, ``b`` the tensors
    (``a`` holds m and k, ``b`` k and n); ``init`` the ``+=!`` initialisation
    folded into the call (it then overwrites C instead of accumulating);
    ``alpha`` and ``beta`` the scalars of ``C = alpha * A . B + beta * C``
    (see the fields)."""
    statement: str
    init: str | None
    dtype: str
    batch: tuple[str, ...]
    m: tuple[str, ...]
    n: tuple[str, ...]
    k: tuple[str, ...]
    c: str
    a: str
    b: str
    #: ``(tensor, access)`` of C, A and B (in this order) as the statement
    #: wrote them (A and B may be one tensor: ``A(m, k) * A(n, k)``)
    accesses: tuple = ()
    #: per tensor, per dimension, the ``(iterator, coefficient)`` pairs of its
    #: affine index (isl): the address of an element is linear in them
    linear: tuple = ()
    #: per scanned iterator ``(iterator, tensor, dimension)``: the tensor
    #: dimension whose extent is its range, or ``(iterator, None, expr)``: its
    #: range's extent over the size parameters (an expression of them)
    extents: tuple = ()
    #: whether an operand is addressed through a mixed-radix map rather than
    #: one stride per role (a window: ``I(c, h + kh, w + kw)``)
    gather: bool = False
    #: the elementwise statement folded into the call's store (``C = C + bias(n)``
    #: and/or ``C = fmax(C, 0)``), its bias tensor and whether it applies relu
    epilogue: str | None = None
    bias: str | None = None
    relu: bool = False
    #: the post-operations the call applies to each finished tile of C
    #: (``polyc_gemmx_post``): the operands of ``relu(C * mul + add + add2)``
    #: as :class:`PostOp` in that order, and the ReLU (0: none, 1: C's fmax,
    #: NaN becomes 0; 2: numpy's maximum, NaN kept); empty: none (``bias``
    #: and ``relu`` then describe an in-store epilogue, if any)
    post: tuple = ()
    post_relu: int = 0
    #: elementwise statements after the update (and its epilogue) that the
    #: call runs as a function of the kernel on each finished block of C,
    #: after the post-operations (``polyc_gemm_post.tile``;
    #: :func:`polyc.gemm_post.match_tile`): the :class:`~polyc.ir.Statement`
    #: objects, in source order; empty: none
    tile: tuple = ()
    #: whether the call may use the kernel's OpenMP team (``Config.parallel``)
    parallel: bool = True
    #: the product of the update's scalar factors (constants, size parameters,
    #: rank-0 tensors); ``None``: 1
    alpha: E.Expr | None = None
    #: the factor of C's previous value; ``None``: 0 when ``init`` is folded,
    #: else 1 (a folded scaling statement, ``scale``, sets it)
    beta: E.Expr | None = None
    #: the scaling statement (``C(i, j) *= beta``) folded into the call as beta
    scale: str | None = None
    #: rows of C per call (0: all of m): with ``m = (i,)`` one call computes
    #: rows ``block * ib <= i < block * (ib + 1)``, and the loop ``block_iter``
    #: over ``ib = floor(i / block)`` runs around the calls with the batch
    #: loops (row-blocked fusion, :mod:`polyc.schedule.rowfuse`)
    block: int = 0
    block_iter: str = ""
    #: the dtype of A and B on tensor cores (``match_gemm(..., tensor_cores=True)``:
    #: float16 or bfloat16 operands, C float32, ``dtype``); empty on the CPU
    operand_dtype: str = ""
    #: tensor cores: the half tensor the call stores into, rounding (the
    #: float32 accumulator ``c``'s rounding store ``epilogue`` folded:
    #: :func:`match_round_store`); empty: the call stores into ``c``
    store: str = ""
    #: a triangular (or any non-box) domain called on the full part of its
    #: row blocks (:mod:`polyc.callbox`): per statement of the group
    #: ``(name, instances)``, the instances the calls compute (the others
    #: keep their loops); empty: all of them
    parts: tuple = ()
    #: a domain that is a band of its box (:func:`polyc.callbox.band`, a
    #: triangle), else ``None``: the whole box
    band: Band | None = None
    #: per scanned iterator ``(iterator, first, extent)``: its range in one
    #: call, as expressions of the size parameters (``Param``) and the
    #: call's loops (``Index``); empty: ``[0, extent)`` from ``extents``
    bounds: tuple = ()
    #: the other products of an update that adds several (``C += A1 * B1 +
    #: A2 * B2``: PolyBench's ``syr2k``), each computed by one more call
    #: after this one, accumulating (beta 1), with the same loops and bounds
    terms: tuple = ()
    #: in a loop program, ``{ X[...] -> call[...] }``: instances of other
    #: statements (or of the group's own edge) that run between the
    #: instances of one call in the source order, that the call depends on
    #: and that depend on nothing else in between: they run right before
    #: the call (PolyBench's ``trmm``: the diagonal edge of a block's rows
    #: reads rows the call writes); ``None``: none
    moved: object = None
    #: the output is also an operand, over a band (PolyBench's ``trmm``,
    #: ``B(i, j) += A(k, i) * B(k, j)`` for ``k > i``): one call, which packs
    #: each panel of the reduction before it writes C, the panels in
    #: ascending order, C accumulating (beta 1): legal when no element is
    #: read through the operand after the source wrote it, nor written at a
    #: smaller reduction index than one it is read at
    #: (:func:`polyc.callbox.inplace_reason`)
    inplace: bool = False
    #: in a loop program, the call takes the place of the group's last
    #: instance instead of its first: no instance between them depends on
    #: the group, and the call depends on some (PolyBench's ``symm``: the
    #: update of ``C(k, j)`` over ``i > k`` after every row's final
    #: statement; :func:`polyc.schedule.callorder.atomic_reason`)
    at_last: bool = False

    @property
    def call(self) -> str:
        """The name of the call statement: the update's, or with ``parts``
        (the update's other instances keep its name) ``<update>_call``."""
        return f"{self.statement}_call" if self.parts else self.statement

    @property
    def loops(self) -> tuple[str, ...]:
        """The loops around the call: the batch loops, then the row block's."""
        return self.batch + ((self.block_iter,) if self.block else ())

    @property
    def scanned(self) -> tuple[str, ...]:
        """The iterators the call scans (its m, n and k digits)."""
        return self.m + self.n + self.k

    def describe(self) -> str:
        roles = ", ".join(f"{r}={'*'.join(g)}" for r, g in
                          (("m", self.m), ("n", self.n), ("k", self.k)))
        if self.batch:
            roles += f", loops {', '.join(self.batch)}"
        if self.block:
            roles += (f"{'' if self.batch else ', loops'} {self.block_iter} "
                      f"({self.block} rows of {self.m[0]} per call)")
        if self.parts and self.band is None:
            roles += ("; the full part of each block of rows (the rest of the domain, "
                      "its diagonal edge, keeps its loops)")
        elif self.parts:
            roles += "; the instances of its band (the others keep their loops)"
        extra = "; initialisation folded" if self.init else ""
        if self.band is not None:
            extra += "; " + self.band.describe(self)
        if self.gather:
            extra += "; implicit GEMM (operands gathered while packing, no copy)"
        if self.alpha is not None or self.beta is not None:
            scalars = [f"{name} = {_scalar_text(v)}" for name, v in
                       (("alpha", self.alpha), ("beta", self.beta)) if v is not None]
            extra += "; " + ", ".join(scalars) + (f" ({self.scale} folded)" if self.scale else "")
        if self.inplace:
            extra += (f"; in place ({self.c} is also an operand: each panel of the reduction "
                      "is packed before the call writes it)")
        if self.at_last:
            extra += ("; the call runs where the last of its instances ran (it depends on "
                      "statements between them, none of which depends on it)")
        if self.terms:
            extra += "; " + "; ".join(
                f"then {t.a} * {t.b} by a second call (m={'*'.join(t.m)}, n={'*'.join(t.n)}, "
                f"k={'*'.join(t.k)}; A={t.a}, B={t.b})" for t in self.terms)
        if self.store:
            extra += (f"; {self.epilogue} folded: the store rounds into {self.store} "
                      f"({self.c} is never written)")
        elif self.epilogue and (self.post or self.post_relu):
            parts = [p.text() for p in self.post] + (["relu"] if self.post_relu else [])
            extra += (f"; epilogue {self.epilogue} ({', '.join(parts)}) applied by the call to "
                      "each tile of C once its sum is final")
        elif self.epilogue:
            parts = ([f"+ {self.bias}(n)"] if self.bias else []) + (["relu"] if self.relu else [])
            what = ", ".join(parts) or "a scaling of C, in alpha"
            extra += f"; epilogue {self.epilogue} ({what}) fused into the store"
        if self.tile:
            names = ", ".join(st.name for st in self.tile)
            extra += (f"; {names} applied by the call to each finished block of C (a function "
                      "compiled with the kernel)")
        onto = (f"tensor cores (WMMA m16n16k16, {self.operand_dtype} operands, float32 "
                "accumulator)" if self.operand_dtype in TENSOR_CORE_DTYPES
                else f"the SIMT GEMM ({self.operand_dtype} FMA, 8 x 8 elements of C per "
                "thread)"
                if self.operand_dtype else "gemm")
        return (f"{self.statement} tensorized onto {onto} ({roles}; C={self.c}, A={self.a}, "
                f"B={self.b}{extra})")


def _scalar_text(e: E.Expr) -> str:
    """``e`` in TC syntax, a rank-0 tensor read printed as its name."""
    return E.to_text(E.map_expr(e, lambda x: E.Param(x.tensor) if isinstance(x, E.Access)
                                and not x.indices else None))
