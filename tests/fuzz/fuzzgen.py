"""Random TC and einsum programs for the differential fuzzer, and the check
that runs one of them.

The test modules (``test_fuzz_*.py``) draw cases with the hypothesis
strategies :func:`tc_cases` and :func:`einsum_cases`, and run them with
:func:`run_case` (in worker processes, see :class:`Runner`).  A case holds
everything needed to replay it: the program text, the float type, the name of
the :class:`polyc.config.Config` variant, several size sets and a seed;
:func:`reproducer` prints it as a ready-to-paste script.

The check, for TC (:func:`run_tc`): compile once (``polyc.compile``), then at
each size set: seeded inputs (``polyc.testing.random_inputs``), the numpy
reference (``polyc.reference.evaluate``), the kernel called with ``out=``
arrays pre-filled with NaN (or the integer minimum) so that a missed write
fails, and ``polyc.testing.assert_close`` with the tolerance scaled by the
reduction length.  A size set outside the program's preconditions must be
refused by both (``ShapeError``).  For einsum (:func:`run_einsum`): the same
with ``numpy.einsum`` (in float64 / int64) as the reference, and numpy's
behaviour expected, errors included: where ``numpy.einsum`` called with the
same arguments (``out=`` and ``dtype=`` too) raises, ``polyc.einsum`` must
raise the same class (or a subclass: ``DTypeError`` is a ``TypeError``,
``EinsumError`` a ``ValueError``) with the same message, and the size set
counts as refused by both.

Programs are generated mostly valid: every index variable of a statement
appears as a plain index of some read (or gets a ``where`` range), so range
inference resolves it; rejections (``SemanticError`` for an index without a
range, an output range that does not start at 0, ...) are counted, and only
the legitimate kinds are accepted (:data:`LEGIT_REJECTIONS`).

Values are kept where float rounding cannot flip a result: ``?:`` conditions
compare only input values and index variables (never computed values), and
functions that amplify rounding errors (``exp``, ``sqrt``, ``log``) only see
input values; computed values go through ``+ - *``, ``tanh``, ``sigmoid``,
``fabs``, ``fmax``/``fmin``.  Product reductions multiply factors near 1.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import re
import textwrap
import traceback
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

# --------------------------------------------------------------------- configs

#: Config variants, by name: keyword arguments of ``Config.from_env``.  No
#: user schedule language exists yet, so these are the ways to vary the
#: schedule and the generated code.
CONFIGS: dict[str, dict] = {
    "default": {},
    "tiles235": {"tile_sizes": (2, 3, 5)},
    "threads3": {"num_threads": 3},
    "notiling": {"tiling": False},
    "nosimd": {"simd": False},
    "identity": {"schedule": "identity"},
    "noparallel": {"parallel": False},
    "tiles7_threads3": {"tile_sizes": (7,), "num_threads": 3},
    "tiles1_3": {"tile_sizes": (1, 3)},
    "identity_nosimd_threads3": {"schedule": "identity", "simd": False, "num_threads": 3},
    "tiles235_nosimd": {"tile_sizes": (2, 3, 5), "simd": False},
}
# default first (hypothesis shrinks towards it), then the variants; the
# default schedule is drawn about as often as all variants together
_CONFIG_CHOICES = ["default"] * 9 + [c for c in CONFIGS if c != "default"]
#: ``target="cuda"`` on the CPU emulator: the GPU mapping and its proof, the
#: mapped loops, both thread orders, blocks that divide nothing.  Drawn only
#: by the GPU fuzz tests (the CPU tests keep drawing the cases they drew).
CUDA_CONFIGS: dict[str, dict] = {
    "cuda_emulated": {"target": "cuda", "emulate": True},
    "cuda_emulated_reverse_3x5_checks": {"target": "cuda", "emulate": True,
                                         "emulate_reverse": True, "gpu_block": (3, 5),
                                         "emulate_checks": True},
    "cuda_emulated_identity_7": {"target": "cuda", "emulate": True,
                                 "schedule": "identity", "gpu_block": (7,)},
}
CONFIGS.update(CUDA_CONFIGS)


def make_config(name: str):
    from polyc.config import Config
    return Config.from_env(**CONFIGS[name])


#: Sizes, simplest first (hypothesis shrinks towards the front): 1, 0, small
#: primes, and sizes that no tile size (16, 32, 48, 64) divides.
SIZES = (1, 2, 3, 0, 5, 4, 7, 13, 17, 16, 31, 33, 64, 67, 70, 97, 129, 257)
#: Largest bounding box of one statement's domain we evaluate (numpy
#: reference time); larger size sets are scaled down deterministically.
MAX_WORK = 150_000
#: Longest product (``*=``) reduction: longer ones may overflow in an
#: order-dependent way.
MAX_PRODUCT = 48


# ------------------------------------------------------------------ the cases

@dataclass(frozen=True)
class TcCase:
    src: str
    dtype: str | None           # polyc.compile(dtype=...) or None (types in the source)
    config: str                 # key of CONFIGS
    sizes: tuple                # size sets: tuple of tuples of (name, value)
    seed: int
    serial_work: bool = True    # False: force OpenMP even on tiny problems
    alias_out: bool = False     # pass an input as out= when one fits
    kind: str = "tc"

    def size_dicts(self) -> list[dict]:
        return [dict(s) for s in self.sizes]


@dataclass(frozen=True)
class EinsumCase:
    subscripts: str
    shapes: tuple               # per size set: one shape per operand
    dtypes: tuple               # one dtype name per operand
    config: str
    out_mode: str               # none | nan | alias | strided
    layouts: tuple              # per operand: "c" | "f" | "step" (non-contiguous view)
    seed: int
    interleaved: bool = False   # call einsum(op0, [0, 1], op1, [1, 2], [0, 2])
    force_dtype: str | None = None  # einsum(..., dtype=...)
    kind: str = "einsum"
    optimize: object = False    # einsum(..., optimize=...): pairwise steps for 3+ operands


# ---------------------------------------------------------------- TC programs

SIZE_NAMES = ("N", "M", "K", "L")
VARS = ("i", "j", "k", "l", "m", "n")
FLOAT_NAMES = ("A", "B", "C", "D")
INDEX_NAMES = ("I", "J")


@dataclass
class _Tensor:
    name: str
    dims: tuple                 # size names or "1" (inputs); () for rank 0
    kind: str                   # "float" | "int" | "index"
    output: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class _Stmt:
    """State while one statement is generated."""
    vars: list
    anchored: set               # variables with a plain occurrence (or a where range)
    need: list                  # variables still without an anchor
    exact_leaves: list = field(default_factory=list)   # input reads (exact values)
    where: list = field(default_factory=list)


def _chance(draw, percent: int) -> bool:
    """True with probability ``percent``%; shrinks towards False."""
    return draw(st.integers(0, 99)) >= 100 - percent


def _pick(draw, seq):
    return draw(st.sampled_from(list(seq)))


def _read_text(t: _Tensor, idx: list[str], draw) -> str:
    if t.rank == 0:
        return t.name if not _chance(draw, 30) else f"{t.name}()"
    return f"{t.name}({', '.join(idx)})"


def _gather(draw, s: _Stmt, index_tensors: list[_Tensor]) -> str:
    it = _pick(draw, index_tensors)
    args = []
    for _ in range(it.rank):
        if s.need and _chance(draw, 70):
            v = s.need.pop(0)
            s.anchored.add(v)
        else:
            v = _pick(draw, s.vars)
        args.append(v)
    return f"{it.name}({', '.join(args)})"


def _index(draw, s: _Stmt, t: _Tensor, d: int, index_tensors: list[_Tensor],
           allow_gather: bool, used: tuple = ()) -> str:
    """One index expression for dimension ``d`` of a read of ``t``."""
    if s.need and _chance(draw, 85):
        v = s.need.pop(0)
        others = sorted(s.anchored)
        form = draw(st.integers(0, 99))
        ext = t.dims[d] if not t.output else None
        if form < 72 or not others and form < 88:
            s.anchored.add(v)
            return v
        # a derived anchor: range inference resolves v in a later round
        if form < 84 and others:
            w = _pick(draw, others)
            return f"{v} + {w}" if _chance(draw, 50) else f"{w} + {v}"
        if form < 90:
            return f"2*{v} + {draw(st.integers(0, 1))}"
        if form < 95:
            return f"{v} / 2"
        if ext not in (None, "1"):
            s.anchored.add(v)
            return f"{ext} - 1 - {v}"
        s.anchored.add(v)
        return v
    form = draw(st.integers(0, 99))
    fresh = [x for x in s.vars if x not in used]
    v = _pick(draw, fresh if fresh and _chance(draw, 75) else s.vars)
    if form < 62:
        return v
    if form < 70:
        return "0"
    if form < 76:
        return f"{v} + 1"
    if form < 82:
        return f"{v} + {_pick(draw, s.vars)}"
    if form < 86:
        return f"2*{v}" if _chance(draw, 50) else f"2*{v} + 0"
    if form < 92:
        return f"{v} / 2"
    if allow_gather and index_tensors:
        return _gather(draw, s, index_tensors)
    return v


def _read(draw, s: _Stmt, t: _Tensor, index_tensors: list[_Tensor]) -> str:
    idx: list[str] = []
    for d in range(t.rank):
        idx.append(_index(draw, s, t, d, index_tensors, allow_gather=True, used=tuple(idx)))
    return _read_text(t, idx, draw)


_EXACT_F = ("exp({})", "sqrt(fabs({}))", "log(1 + fabs({}))", "rsqrt(1 + {0}*{0})",
            "pow(fabs({}), 1.5)")
_SMOOTH_F = ("tanh({})", "sigmoid({})", "fabs({})", "-{}", "0.5*{}", "({} + 1)",
             "fmax({}, 0)", "fmin({}, 0.25)", "abs({})")
_INT_F = ("-{}", "({} / 2)", "({} % 3)", "({} - 4) / 3", "({} - 5) % 4", "abs({} - 5)",
          "({} * 2 + 1)", "max({}, 3)", "min({}, 6)")


def _condition(draw, s: _Stmt, sizes: list[str], int_mode: bool) -> str:
    """A condition that float rounding cannot flip: input values and indices."""
    form = draw(st.integers(0, 99))
    if s.exact_leaves and form < 45:
        a = _pick(draw, s.exact_leaves)
        if _chance(draw, 35) and len(s.exact_leaves) > 1:
            return f"{a} < {_pick(draw, s.exact_leaves)}"
        return f"{a} > {'4' if int_mode else '0'}" if _chance(draw, 60) else \
            f"{a} <= {'2' if int_mode else '-0.25'}"
    v, w = _pick(draw, s.vars), _pick(draw, s.vars)
    if form < 65:
        return f"{v} < {w}" if v != w else f"{v} < 3"
    if form < 75:
        return f"{v} % 2 == 0"
    if form < 85 and sizes:
        return f"{v} + {w} >= {_pick(draw, sizes)}"
    if form < 92:
        return f"({v} == {w} || {v} > 2)"
    return f"({v} != 1 && {w} <= 4)"


#: a read of a computed value (an output, ``O<k>``) in an expression's text
_COMPUTED = re.compile(r"\bO\d")


def _expr(draw, s: _Stmt, leaves: list[tuple[str, bool]], sizes, int_mode: bool) -> str:
    """Combine ``leaves`` ((text, exact)) into one expression."""
    nodes = []
    for text, exact in leaves:
        if int_mode:
            if _chance(draw, 30):
                text = _pick(draw, _INT_F).format(text)
        elif exact and _chance(draw, 30):
            text = _pick(draw, _EXACT_F).format(text)
        elif _chance(draw, 25):
            text = _pick(draw, _SMOOTH_F).format(text)
        nodes.append(text)
    if _chance(draw, 15):
        # an index variable or a size as a value
        v = _pick(draw, list(s.vars) + sizes[:1])
        nodes.append(v if int_mode else f"0.25*{v}")
    if _chance(draw, 10):
        nodes.append("3" if int_mode else _pick(draw, ("1.5", "0.5", "2", "-1.0", "1e-1",
                                                       ".25", "2.", "1.5e+0")))
    while len(nodes) > 1:
        a = nodes.pop(draw(st.integers(0, len(nodes) - 1)))
        b = nodes.pop(draw(st.integers(0, len(nodes) - 1)))
        op = draw(st.integers(0, 99))
        if op < 30:
            c = f"{a} + {b}"
        elif op < 40:
            c = f"{a} - ({b})"
        elif op < 68:
            c = f"({a}) * ({b})"
        elif op < 76:
            c = f"fmax({a}, {b})" if not int_mode else f"max({a}, {b})"
        elif op < 82:
            c = f"fmin({a}, {b})" if not int_mode else f"min({a}, {b})"
        elif op < 86 and int_mode:
            # integer / and % round toward negative infinity; x / 0 is 0 (numpy's)
            c = f"({a}) {_pick(draw, ('/', '%'))} ({b} - 4)"
        elif op < 88 and (int_mode or not _COMPUTED.search(a)):
            # (a float remainder only of input values: a computed value's
            # rounding, e.g. a sum's order, moves its remainder anywhere)
            c = f"({a} < {b})" if int_mode else f"({a}) % 0.75 - {b}"
        else:
            c = f"({_condition(draw, s, sizes, int_mode)} ? {a} : {b})"
        if not int_mode and _chance(draw, 10):
            c = _pick(draw, ("tanh({})", "sigmoid({})", "fabs({})")).format(c)
        nodes.insert(draw(st.integers(0, len(nodes))), c)
    text = nodes[0]
    if _chance(draw, 8):
        text = f"({_condition(draw, s, sizes, int_mode)}) ? {text} : " \
               f"{'0' if int_mode else '-0.5'}"
    elif _chance(draw, 7):
        # nested ?: (issue 19): (c1) ? (c2 ? text : other) : constant
        other = _pick(draw, s.exact_leaves) if s.exact_leaves else ("1" if int_mode else "0.5")
        text = (f"({_condition(draw, s, sizes, int_mode)}) ? "
                f"({_condition(draw, s, sizes, int_mode)} ? {text} : {other}) : "
                f"{'0' if int_mode else '-0.5'}")
    return text


#: Structured kernels (contractions, convolutions, pooling, softmax and
#: normalisation chains, recurrences, gathers, in-place updates), each a list
#: of statements over inputs declared in the signature; ``{act}`` is replaced
#: by a random elementwise function of ``x`` and ``{red}`` by a reduction
#: operator.  They exercise what random statements rarely reach: tiled
#: reduction bands, fusion of producer/consumer chains, loop-carried
#: dependences.
TEMPLATES: list[tuple[str, list[str]]] = [
    ("float(M, K) A, float(K, N) B", ["C(i, j) {red} A(i, k) * B(k, j)"]),
    ("float(M, K) A, float(N, K) B, float(N) b", [
        "C(i, j) +=! A(i, k) * B(j, k)", "D(i, j) = {act}(C(i, j) + b(j))"]),
    ("float(K, M) A, float(K, N) B", ["C(j, i) +=! A(k, i) * B(k, j)",
                                       "C(j, i) = C(j, i) * 0.5"]),
    ("float(L, M, K) A, float(L, K, N) B", ["C(b, i, j) +=! A(b, i, k) * B(b, k, j)"]),
    ("float(M, K) A, float(K, L) B, float(L, N) D", [
        "T(i, l) +=! A(i, k) * B(k, l)", "C(i, j) +=! T(i, l) * D(l, j)"]),
    ("float(N, M) I, float(K, L) W", ["O(h, w) +=! I(h + kh, w + kw) * W(kh, kw)"]),
    ("float(L, N, M) I, float(K, L, 3, 3) W", [
        "O(f, h, w) +=! I(c, h + kh, w + kw) * W(f, c, kh, kw)",
        "R(f, h, w) = fmax(O(f, h, w), 0)"]),
    ("float(N) I, float(K) W", ["O(i) +=! I(2*i + k) * W(k)"]),
    ("float(N, M) I", ["O(h, w) {red} I(2*h + kh, 2*w + kw) where kh in 0:2, kw in 0:2"]),
    ("float(N, M) A", [
        "Mx(i) max=! A(i, j)", "E(i, j) = exp(A(i, j) - Mx(i))", "S(i) +=! E(i, j)",
        "P(i, j) = E(i, j) / S(i)"]),
    ("float(N, M) A, float(M) g", [
        "Mu(i) +=! A(i, j) / M", "V(i) +=! (A(i, j) - Mu(i)) * (A(i, j) - Mu(i)) / M",
        "Y(i, j) = (A(i, j) - Mu(i)) * rsqrt(V(i) + 0.00001) * g(j)"]),
    ("float(N) A", ["P(i) = A(i)", "P(i) = P(i - 1) + A(i) where i in 1:N"]),
    ("float(N) A", ["P(i) = A(i)", "P(i) = P(i + 1) * 0.5 + A(i) where i in 0:N - 1"]),
    ("float(N, M) A", ["P(i, j) = A(i, j)",
                       "P(i, j) = P(i - 1, j) + 0.5 * P(i, j - 1) + A(i, j) "
                       "where i in 1:N, j in 1:M"]),
    ("float(N, N) A", ["P(i, j) = A(i, j)", "P(i, j) = P(i, j) + P(j, i)"]),
    ("float(N, N) A", ["P(i, j) = A(i, j)", "P(i, j) += P(j, i) * {act}(A(i, j))"]),
    ("float(N, K) LUT, int32(M, L) I", ["O(b, d) +=! LUT(I(b, l), d)"]),
    ("float(N, K) LUT, int64(M) I, float(M, K) X", [
        "O(b, d) = LUT(I(b), d) * X(b, d)", "S(b) +=! O(b, d)",
        "G(b) = O(b, I(b) % K)"]),
    ("float(N, M) A, float(M) v", ["Y(i) +=! A(i, j) * v(j)", "Y(i) = {act}(Y(i))",
                                    "Z(j) +=! A(i, j) * Y(i)"]),
    ("float(N, M) A", ["T(j, i) = A(i, j)", "G(i, j) +=! T(k, i) * T(k, j)"]),
    ("float(N, M) A", ["R(i) {red} A(i, j)", "Q(j) {red} A(i, j)", "T {red} R(i) + Q(i)"]),
    ("float(N, M, K) A", ["O(k, i, j) = {act}(A(i, j, k))",
                          "O(k, i, j) {red} A(i, j, k) * 2"]),
    ("float(N) A, float(N) B", ["O(i, j) = A(i) * B(j) where j in 0:N",
                                 "O(i, j) = (i == j) ? 1.0 : O(i, j)", "T +=! O(i, i)"]),
    ("float(N, M) A", ["O(i, j) = A(N - 1 - i, M - 1 - j)", "O(i, j) = O(i, j) - A(i, j)"]),
    ("float(N, M) A", ["U(i) +=! A(i / 2, j)", "D(i) = U(2*i) + U(2*i + 1)"]),
    # scalar size arguments (int64 S): a strided convolution is compiled per S
    ("float(N) I, float(K) W, int64 S", ["O(h) +=! I(h*S + kh) * W(kh)"]),
    ("float(N, M) I, float(K, K) W, int64 S", [
        "O(h, w) +=! I(h*S + kh, w*S + kw) * W(kh, kw)", "R(h, w) = {act}(O(h, w))"]),
    ("float(N, M) A, int64 S", ["O(i, j) = A(i, j + S) where j in 0:M - S",
                                "T(i) {red} O(i, j) * S"]),
    # a degenerate band member (extent 1) next to a reduction (issue 19)
    ("float(N, 1, K) B", ["S {red} B(i, j, k)", "O(i, j) {red} B(i, 2*j + 0, k)"]),
    ("float(1, N, K) B, float(N, N) A", [
        "O0 +=! A(i, i)", "O1() {red} (A(m, i) > 0) ? (A(m, i) <= -0.25 ? A(m, i) : B(0, m, k))"
        " : -0.5", "O2(j, i) {red} B(j, i, k)", "O3 +=! O0 + O2(0, i)"]),
]
_ACTS = ("tanh", "sigmoid", "fabs", "", "-")
_REDS = ("+=!", "max=!", "min=!")


@st.composite
def tc_templates(draw) -> str:
    sig, stmts = _pick(draw, TEMPLATES)
    lines = []
    for st_text in stmts:
        st_text = st_text.replace("{act}", _pick(draw, _ACTS)).replace(
            "{red}", _pick(draw, _REDS))
        if "where" not in st_text and _chance(draw, 15):
            # an elementwise wrapper around the right-hand side
            lhs, op, rhs = re.match(r"(\S+\(.*?\)|\S+) (\S+) (.*)", st_text).groups()
            st_text = f"{lhs} {op} {_pick(draw, ('tanh', 'fabs', 'sigmoid'))}({rhs})"
        lines.append("    " + st_text)
    outs = []
    for ln in lines:
        name = re.match(r"\s*(\w+)", ln).group(1)
        if name not in outs:
            outs.append(name)
    return (f"def f({sig}) -> ({', '.join(outs)}) {{\n" + "\n".join(lines) + "\n}\n")


@st.composite
def tc_programs(draw) -> tuple[str, bool]:
    """``(source, typed)`` of one random TC definition: random statements,
    or (one in five) a structured kernel of :data:`TEMPLATES`; ``typed``:
    the element types are spelled in the source (no ``dtype=``)."""
    if _chance(draw, 20):
        return draw(tc_templates()), False
    int_mode = _chance(draw, 10)
    nsizes = draw(st.integers(1, 4))
    sizes = list(SIZE_NAMES[:nsizes])

    # one program in six has many extent-1 dimensions: degenerate loops that
    # isl prints as no loop, next to sizes that may be 0 (issue 19)
    ones = 35 if _chance(draw, 16) else 8

    def dims(rank):
        return tuple("1" if _chance(draw, ones) else _pick(draw, sizes) for _ in range(rank))

    inputs: list[_Tensor] = []
    for name in FLOAT_NAMES[:draw(st.integers(1, 4))]:
        # (a rank-0 int32/int64 argument is a scalar size, not a tensor)
        rank = draw(st.integers(1, 3)) if int_mode or not _chance(draw, 6) else 0
        inputs.append(_Tensor(name, dims(rank), "int" if int_mode else "float"))
    if all(t.rank == 0 for t in inputs):
        inputs[0].dims = dims(1) if inputs[0].dims == () else inputs[0].dims
    index_tensors: list[_Tensor] = []
    if _chance(draw, 30):
        for name in INDEX_NAMES[:draw(st.integers(1, 2))]:
            index_tensors.append(_Tensor(name, dims(draw(st.integers(1, 2))), "index"))

    # sizes some input binds: the ones a where range or a value may use
    sizes = [n for n in SIZE_NAMES if any(n in t.dims for t in inputs + index_tensors)]
    mixed = not int_mode and _chance(draw, 12)
    types = {}
    for t in inputs:
        if int_mode:
            types[t.name] = _pick(draw, ("int64", "int32"))
        else:
            types[t.name] = _pick(draw, ("float32", "float64", "double")) if mixed else "float"
    for t in index_tensors:
        types[t.name] = _pick(draw, ("int32", "int64"))

    outputs: list[_Tensor] = []
    lines = []
    # one program in five gives its new outputs different ranks (a scalar,
    # a vector, a matrix... in one definition)
    free_ranks = list(draw(st.permutations([0, 1, 2, 3]))) if _chance(draw, 20) else None
    for k in range(draw(st.integers(1, 4))):
        nvars = draw(st.sampled_from((1, 2, 3, 2, 3, 4, 1, 5, 6)))
        vs = list(VARS[:nvars])
        if _chance(draw, 30):
            vs = list(draw(st.permutations(vs)))
        existing = outputs and _chance(draw, 28)
        if existing:
            target = _pick(draw, outputs)
            while len(vs) < target.rank:
                vs.append(VARS[len(vs)])
            lhs = list(draw(st.permutations(vs)))[:target.rank] if _chance(draw, 40) \
                else vs[:target.rank]
            anchored = set(lhs)
        else:
            if free_ranks:
                rank = free_ranks.pop(0)
                while len(vs) < rank:
                    vs.append(VARS[len(vs)])
            else:
                rank = draw(st.integers(0, min(len(vs), 3))) if not _chance(draw, 3) else 0
            target = _Tensor(f"O{k}", tuple("?" for _ in range(rank)), "float", output=True)
            lhs = list(draw(st.permutations(vs)))[:target.rank] if _chance(draw, 50) \
                else vs[:target.rank]
            anchored = set()
        s = _Stmt(vars=tuple(vs), anchored=anchored, need=[v for v in vs if v not in anchored])
        readable = inputs + outputs
        leaves: list[tuple[str, bool]] = []
        nreads = draw(st.integers(1, 3))
        for r in range(nreads):
            t = _pick(draw, readable)
            if t.rank == 0 and s.need and _chance(draw, 70):
                t = _pick(draw, [x for x in readable if x.rank > 0] or [t])
            text = _read(draw, s, t, index_tensors)
            exact = not t.output
            leaves.append((text, exact))
            if exact:
                s.exact_leaves.append(text)
        if existing and target.rank and _chance(draw, 35):
            # read the target itself: an in-place update (maybe a recurrence)
            idx = list(lhs)
            if _chance(draw, 30):
                d = draw(st.integers(0, len(idx) - 1))
                idx[d] = f"{idx[d]} - 1"
            leaves.append((f"{target.name}({', '.join(idx)})", False))
        if index_tensors and int_mode and _chance(draw, 20):
            leaves.append((_gather(draw, s, index_tensors), True))
        # anchor what is left
        for v in list(s.need):
            if v not in s.need:
                continue
            if v in lhs and _chance(draw, 25):
                hi = _pick(draw, sizes + ["3"])
                s.where.append(f"{v} in 0:{hi}")
                s.anchored.add(v)
                s.need.remove(v)
                continue
            cands = [x for x in inputs if x.rank > 0]
            t = _pick(draw, cands)
            idx = []
            for d in range(t.rank):
                if s.need:
                    w = s.need.pop(0)
                    s.anchored.add(w)
                    idx.append(w)
                else:
                    idx.append(_pick(draw, s.vars))
            text = f"{t.name}({', '.join(idx)})"
            leaves.append((text, True))
            s.exact_leaves.append(text)
        rhs = _expr(draw, s, leaves, sizes, int_mode)
        red = [v for v in vs if v not in lhs]
        if red:
            ops = ("+=!", "max=!", "min=!", "+=!", "*=!") if not existing else \
                ("+=", "+=!", "max=", "min=", "*=", "max=!")
        else:
            ops = ("=", "=", "+=!", "max=!") if not existing else ("=", "+=", "max=", "min=",
                                                                    "*=", "=")
        op = _pick(draw, ops)
        if int_mode and op.startswith("*"):
            op = op.replace("*", "+")
        if op.startswith("*"):
            rhs = f"1 + 0.125*tanh({rhs})"
        lhs_text = f"{target.name}({', '.join(lhs)})" if lhs or _chance(draw, 50) \
            else target.name
        line = f"    {lhs_text} {op} {rhs}"
        if s.where:
            line += " where " + ", ".join(s.where)
        lines.append(line)
        if not existing:
            target.kind = "int" if int_mode else "float"
            outputs.append(target)
    args = []
    for t in inputs + index_tensors:
        ty = types[t.name]
        args.append(f"{ty}({', '.join(t.dims)}) {t.name}" if t.rank else f"{ty} {t.name}")
    src = (f"def f({', '.join(args)}) -> ({', '.join(t.name for t in outputs)}) {{\n"
           + "\n".join(lines) + "\n}\n")
    return src, int_mode or mixed


def _size_sets(draw, n: int) -> tuple:
    out = []
    for _ in range(n):
        sizes = {name: _pick(draw, SIZES) for name in SIZE_NAMES}
        if _chance(draw, 15):
            # size-1 and size-0 dimensions together
            one, zero = draw(st.permutations(SIZE_NAMES))[:2]
            sizes[one], sizes[zero] = 1, 0
        out.append(tuple(sizes.items()) + (("S", _pick(draw, (1, 2, 3, 5, 0))),))
    return tuple(out)


def _reformat(draw, src: str) -> str:
    """The same definition with comments and other line breaks (whitespace
    is free between tokens)."""
    if _chance(draw, 50):
        src = src.replace(", ", ",\n      ", 1).replace(") -> (", ")\n  -> (", 1)
    if _chance(draw, 50):
        src = src.replace("{\n", "{\n    # a comment line\n", 1)
    if _chance(draw, 50):
        src = src.replace("\n}", "  # trailing comment\n}", 1)
    if _chance(draw, 30):
        src = "# sizes: N=3 M=4\n" + src.replace(" = ", " =\n        ", 1)
    return src


@st.composite
def tc_cases(draw, nsizes: int = 3, configs: list[str] | None = None) -> TcCase:
    src, typed = draw(tc_programs())
    if _chance(draw, 10):
        src = _reformat(draw, src)
    dtype = None if typed else _pick(draw, ("float32", "float64"))
    return TcCase(src=src, dtype=dtype, config=_pick(draw, configs or _CONFIG_CHOICES),
                  sizes=_size_sets(draw, nsizes), seed=draw(st.integers(0, 2**16)),
                  serial_work=not _chance(draw, 50), alias_out=_chance(draw, 10))


# ------------------------------------------------------------ einsum programs

_LABELS = "ijklmn"


@st.composite
def einsum_cases(draw, nsizes: int = 3, configs: list[str] | None = None) -> EinsumCase:
    nlabels = draw(st.sampled_from((3, 2, 4, 1, 5, 6)))
    pool = list(_LABELS[:nlabels])
    if _chance(draw, 15):
        pool[draw(st.integers(0, nlabels - 1))] = _pick(draw, "ABZ")
    nops = draw(st.sampled_from((2, 1, 3, 2)))
    use_ell = _chance(draw, 20)
    ops = []            # (labels list, ell position or None, ell rank)
    for _ in range(nops):
        n = draw(st.sampled_from((2, 1, 3, 2, 4, 0, 3)))
        labs = []
        for _ in range(n):
            fresh = [x for x in pool if x not in labs]
            if labs and (_chance(draw, 8) or not fresh):
                labs.append(_pick(draw, labs))          # repeated: a diagonal
            else:
                labs.append(_pick(draw, fresh))
        ell = None
        erank = 0
        if use_ell and _chance(draw, 70):
            ell = draw(st.integers(0, len(labs)))
            erank = draw(st.integers(0, 2))
        ops.append((labs, ell, erank))
    used = []
    for labs, _, _ in ops:
        for x in labs:
            if x not in used:
                used.append(x)
    any_ell = any(e is not None for _, e, _ in ops)
    explicit = _chance(draw, 75)
    if explicit:
        outl = [x for x in used if _chance(draw, 55)]
        outl = list(draw(st.permutations(outl))) if _chance(draw, 50) else outl
        out = "".join(outl)
        if any_ell:
            p = draw(st.integers(0, len(outl)))
            out = "".join(outl[:p]) + "..." + "".join(outl[p:])
    parts = []
    for labs, ell, _ in ops:
        t = "".join(labs)
        if ell is not None:
            t = "".join(labs[:ell]) + "..." + "".join(labs[ell:])
        parts.append(t)
    subscripts = ",".join(parts) + (f"->{out}" if explicit else "")

    # broadcast pattern (fixed across size sets): which dims are 1
    maxe = max((e for _, _, e in ops), default=0)
    bcast = []
    for labs, ell, erank in ops:
        pat = []
        counts = {x: labs.count(x) for x in labs}
        for x in labs:
            pat.append(counts[x] == 1 and _chance(draw, 10))
        epat = [_chance(draw, 20) for _ in range(erank)]
        bcast.append((pat, epat))
    shapes = []
    for _ in range(nsizes):
        size = {x: _pick(draw, SIZES[:14]) for x in pool}
        esize = [_pick(draw, SIZES[:12]) for _ in range(maxe)]
        # the iteration space is every label (and ... dimension) at once
        while True:
            work = max([int(np.prod([size[x] for x in used] + esize, dtype=np.int64))]
                       + [int(np.prod([size[x] for x in labs] + esize, dtype=np.int64))
                          for labs, _, _ in ops])
            if work <= MAX_WORK:
                break
            big = max(list(size.items()) + [(q, n) for q, n in enumerate(esize)],
                      key=lambda kv: kv[1])[0]
            if isinstance(big, int):
                esize[big] = max(1, esize[big] // 2)
            else:
                size[big] = max(1, size[big] // 2)
        sh = []
        for (labs, ell, erank), (pat, epat) in zip(ops, bcast):
            dims = [1 if b else size[x] for x, b in zip(labs, pat)]
            edims = [1 if b else esize[maxe - erank + q] for q, b in enumerate(epat)]
            p = len(labs) if ell is None else ell
            sh.append(tuple(dims[:p] + edims + dims[p:]))
        shapes.append(tuple(sh))
    kind = draw(st.integers(0, 99))
    if kind < 80:
        dtypes = (_pick(draw, ("float64", "float32")),) * nops
    elif kind < 90:
        dtypes = tuple(_pick(draw, ("float32", "float64")) for _ in range(nops))
    else:
        dtypes = tuple(_pick(draw, ("int64", "int32", "float32")) for _ in range(nops))
    out_mode = draw(st.sampled_from(("nan", "none", "nan", "alias", "strided", "none",
                                     "cast")))
    layouts = tuple(_pick(draw, ("c",) * 8 + ("f", "step")) for _ in range(nops))
    config = _pick(draw, configs or _CONFIG_CHOICES)
    seed = draw(st.integers(0, 2**16))
    # chosen from the seed, not drawn: the cases drawn stay those of before
    optimize = (True, False, "optimal", False)[seed % 4] if nops >= 3 else False
    return EinsumCase(subscripts=subscripts, shapes=tuple(shapes), dtypes=dtypes,
                      config=config, out_mode=out_mode,
                      layouts=layouts, seed=seed,
                      interleaved=_chance(draw, 10),
                      force_dtype="float64" if _chance(draw, 8) and all(
                          np.dtype(d).kind == "f" for d in dtypes) else None,
                      optimize=optimize)


# ------------------------------------------------------------------- results

@dataclass
class Result:
    kind: str
    status: str                 # ok | rejected | fail
    message: str = ""
    compared: int = 0           # size sets compared
    refused: int = 0            # size sets both sides refused (preconditions)
    skipped: int = 0            # size sets not run (work limit, reference limits)
    reason: str = ""            # rejection class


#: Rejections that are legitimate for a randomly generated program: TC's
#: range inference cannot resolve an index, or an output range does not
#: start at 0, or an index is used where TC forbids it.
LEGIT_REJECTIONS = (
    ("always-out-of-bounds", re.compile(r"out of bounds whatever the sizes", re.I)),
    ("output-range", re.compile(r"range of '\w+' starts at .*, not 0")),
    ("no-range", re.compile(r"cannot infer the range of index variable")),
    ("reduction-index", re.compile(r"reduction index|needs a reduction", re.I)),
)


#: Known polyc bugs, reported and not fixed yet: a failure whose text
#: matches is counted as ``known`` instead of failing the run, so that the
#: fuzzer keeps looking for new bugs.  Each has a strict-xfail regression
#: test with its minimal reproducer in ``test_known_bugs.py``; when that test
#: starts passing (XPASS fails it), delete the entry here and the xfail
#: there.  ``FUZZ_STRICT=1`` fails on known bugs too.
KNOWN_BUGS: dict[str, re.Pattern] = {}


def _known_bug(message: str) -> str | None:
    if os.environ.get("FUZZ_STRICT") == "1":
        return None
    for name, rx in KNOWN_BUGS.items():
        if rx.search(message):
            return name
    return None


def _classify_rejection(exc) -> str | None:
    from polyc.errors import SemanticError
    if not isinstance(exc, SemanticError):
        return None
    msg = str(exc)
    for name, rx in LEGIT_REJECTIONS:
        if rx.search(msg):
            return name
    return None


def _fill(shape, dtype):
    dt = np.dtype(dtype)
    return np.full(shape, np.nan if dt.kind == "f" else np.iinfo(dt).min, dtype=dt)


def _extents(program):
    """Per statement: its op and, per iterator, ``(is reduction, min, max)``
    as isl ``PwAff``s of the sizes (computed once per program)."""
    out = []
    for s in program.statements:
        its = []
        for pos, it in enumerate(s.iterators):
            its.append((it in s.reduction_iterators, s.domain.dim_min(pos),
                        s.domain.dim_max(pos)))
        out.append((s.op, its))
    return out


def _work_ok(extents, values: dict) -> tuple[bool, bool]:
    """(every statement's box within MAX_WORK, product reductions within
    MAX_PRODUCT) at ``values``."""
    from polyc.isl_util import eval_pw_aff
    ok, prod_ok = True, True
    for op, its in extents:
        box = red = 1
        for is_red, lo, hi in its:
            try:
                ext = max(0, eval_pw_aff(hi, values) - eval_pw_aff(lo, values) + 1)
            except ValueError:          # empty domain at these sizes
                ext = 0
            box *= ext
            if is_red:
                red *= ext
        ok = ok and box <= MAX_WORK
        prod_ok = prod_ok and (op != "*" or red <= MAX_PRODUCT)
    return ok, prod_ok


def _fit_sizes(program, sizes: dict) -> dict | None:
    """``sizes``, scaled down until each statement's box is within the
    limits (largest sizes first, deterministic); None if impossible."""
    sizes = dict(sizes)
    extents = _extents(program)
    for _ in range(40):
        ok, prod_ok = _work_ok(extents, {**program.fixed_sizes, **sizes})
        if ok and prod_ok:
            return sizes
        name = max(sizes, key=lambda n: (sizes[n], n))
        if sizes[name] <= 1:
            return None
        sizes[name] = max(1, sizes[name] // 2 - (1 if sizes[name] % 2 == 0 else 0))
    return None


# ------------------------------------------------------------------- run TC

def run_tc(case: TcCase) -> Result:
    import polyc
    from polyc import reference, testing
    from polyc.errors import BindingError, PolycError, ShapeError

    res = Result("tc", "ok")
    try:
        kernel = polyc.compile(case.src, dtype=case.dtype, config=make_config(case.config))
    except PolycError as e:
        reason = _classify_rejection(e)
        if reason is None:
            return Result("tc", "fail", _fail_text(case, "compile raised", e))
        return Result("tc", "rejected", reason=reason, message=str(e).splitlines()[0])
    except Exception as e:  # noqa: BLE001 - any other exception is a polyc bug
        return Result("tc", "fail", _fail_text(case, "compile crashed", e))
    from polyc.api import SpecializingKernel
    specializing = isinstance(kernel, SpecializingKernel)
    if not case.serial_work and not specializing:
        kernel.SERIAL_WORK = 0          # run OpenMP code even on tiny problems
    seen = set()
    for k, sizes0 in enumerate(case.size_dicts()):
        if specializing:
            # a strided index (h*S + kh): one kernel per value of S
            try:
                program = kernel.specialize(**{n: sizes0[n] for n in kernel.needs}).program
            except PolycError as e:
                if _classify_rejection(e) is None:
                    return Result("tc", "fail", _fail_text(case, "specialize raised", e,
                                                           sizes0, k))
                res.refused += 1
                continue
        else:
            program = kernel.program
        sizes = _fit_sizes(program, {n: v for n, v in sizes0.items()})
        if sizes is None or tuple(sorted(sizes.items())) in seen:
            res.skipped += 1
            continue
        seen.add(tuple(sorted(sizes.items())))
        try:
            inputs = testing.random_inputs(program, sizes, seed=case.seed + k)
        except Exception as e:  # noqa: BLE001
            return Result("tc", "fail", _fail_text(case, "random_inputs raised", e, sizes, k))
        try:
            want = reference.evaluate(program, inputs, sizes)
            ref_exc = None
        except ShapeError as e:
            want, ref_exc = None, e
        except (IndexError, NotImplementedError, MemoryError):
            res.skipped += 1
            continue
        except Exception as e:  # noqa: BLE001 - a bug of the reference (library code)
            return Result("tc", "fail", _fail_text(case, "reference.evaluate raised", e,
                                                   sizes, k))
        args = testing.call_args(program, inputs, sizes)
        before = {n: a.copy() for n, a in inputs.items()}
        outs = None
        aliased = None
        if want is not None:
            outs = [_fill(w.shape, w.dtype) for w in want.values()]
            if case.alias_out:
                for q, w in enumerate(want.values()):
                    for n, a in inputs.items():
                        if a.shape == w.shape and a.dtype == w.dtype and a.ndim > 0:
                            outs[q], aliased = a, n
                            break
                    if aliased:
                        break
        try:
            got = kernel(*args, out=None if outs is None else
                         (tuple(outs) if len(outs) > 1 else outs[0]))
        except ShapeError as e:
            if ref_exc is not None:
                res.refused += 1
                continue
            return Result("tc", "fail", _fail_text(
                case, "the kernel refused sizes the reference accepts", e, sizes, k))
        except BindingError as e:
            if "its extent is 0" in str(e):
                # a gather into an empty dimension: no index value is valid,
                # the runtime refuses even when no point reads it
                res.refused += 1
                continue
            return Result("tc", "fail", _fail_text(case, "the kernel call raised", e, sizes, k))
        except Exception as e:  # noqa: BLE001
            return Result("tc", "fail", _fail_text(case, "the kernel call raised", e, sizes, k))
        if ref_exc is not None:
            return Result("tc", "fail", _fail_text(
                case, "the kernel accepted sizes the reference refuses "
                f"({ref_exc})", None, sizes, k))
        got = got if isinstance(got, tuple) else (got,)
        for n, a in inputs.items():
            if n != aliased and not np.array_equal(a, before[n], equal_nan=True):
                return Result("tc", "fail", _fail_text(
                    case, f"the kernel modified input {n}", None, sizes, k))
        red = testing.reduction_length(program, sizes)
        scale = _scale(want.values())
        try:
            for t, g, o in zip(program.outputs, got, outs):
                if g is not o:
                    raise AssertionError(f"{t.name}: the kernel did not return the out= array")
                _assert_close(g, want[t.name], t.dtype, _narrowest_float(program, t.dtype),
                              red, t.name, scale)
        except AssertionError as e:
            return Result("tc", "fail", _fail_text(case, "mismatch", e, sizes, k))
        res.compared += 1
    return res


def _narrowest_float(program, dtype: str) -> str:
    """The tolerance type of an output: float32 when a float32 tensor takes
    part (its operations are float32 even in a float64 statement), else the
    output's own type."""
    if np.dtype(dtype).kind == "f" and any(t.dtype == "float32" for t in program.tensors):
        return "float32"
    return dtype


def _scale(arrays) -> float:
    """The magnitude rounding errors are relative to: the largest finite
    ``|value|`` of any output (every TC intermediate is an output, so a
    value that cancels later is seen), and at least 1 (inputs are in
    ``[-1, 1)``: a sum that cancels to nearly 0 still carries errors of its
    terms' size)."""
    m = 1.0
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size:
            f = np.abs(a[np.isfinite(a)])
            if f.size:
                m = max(m, float(f.max()))
    return m


def _assert_close(actual, expected, dtype, tol_dtype, red, name, scale=1.0):
    """``testing.assert_close`` (the dtype checked, the tolerance of
    ``dtype`` scaled by the reduction length ``red``); when it fails, the
    failure stands only if the values also differ by more than ``rtol *
    scale`` (:func:`_scale`) with the tolerance of ``tol_dtype`` (float32
    when float32 values take part in a float64 output)."""
    from polyc import testing
    try:
        testing.assert_close(actual, expected, dtype=dtype, reduction_length=red, name=name)
        return
    except AssertionError as e:
        first = e
    if actual.shape != expected.shape or actual.dtype != np.dtype(dtype) \
            or np.dtype(dtype).kind != "f":
        raise first
    rtol, _ = testing.tolerance(tol_dtype, red)
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        bad = ~same & ~(np.abs(a - e) <= rtol * scale + rtol * np.abs(e))
    if bad.any():
        raise AssertionError(f"{first}\n  (also beyond {tol_dtype} rtol {rtol:.3g} with the "
                             f"absolute slack relative to the largest output magnitude "
                             f"{scale:.3g}: {int(bad.sum())} elements)")


def _fail_text(case, what: str, exc, sizes=None, k=0) -> str:
    detail = ""
    if exc is not None:
        if isinstance(exc, AssertionError) or getattr(exc, "__module__", "").startswith("polyc"):
            detail = f"{type(exc).__name__}: {exc}"
        else:
            detail = "".join(traceback.format_exception(exc))
    return (f"{what}\n{textwrap.indent(detail, '  ')}\n"
            f"--- reproducer ---\n{reproducer(case, sizes, k)}")


# --------------------------------------------------------------- run einsum

def _einsum_operands(case: EinsumCase, shapes, k: int):
    rng = np.random.default_rng(case.seed + k)
    ops = []
    for shape, dt, lay in zip(shapes, case.dtypes, case.layouts):
        if np.dtype(dt).kind == "f":
            a = (2 * rng.random(shape) - 1).astype(dt)
        else:
            a = rng.integers(-5, 5, size=shape).astype(dt)
        if lay == "f":
            a = np.asfortranarray(a)
        elif lay == "step" and a.ndim:
            big = np.zeros(shape[:-1] + (2 * shape[-1],), dtype=dt)
            big[..., ::2] = a
            a = big[..., ::2]
        ops.append(a)
    return ops


def run_einsum(case: EinsumCase) -> Result:
    import polyc
    from polyc import einsum_call
    from polyc.errors import PolycError

    res = Result("einsum", "ok")
    config = make_config(case.config)
    # polyc.einsum's memo ignores the fields of Config that are not codegen
    # (num_threads): start from an empty memo so the case runs with its own
    # config (test_known_bugs.py::test_einsum_honours_each_calls_num_threads)
    einsum_call.clear_kernels()
    for k, shapes in enumerate(case.shapes):
        ops = _einsum_operands(case, shapes, k)
        kw = {"dtype": case.force_dtype} if case.force_dtype else {}
        pkw = {**kw, "optimize": case.optimize} if case.optimize is not False else kw

        def call(fn, out, ops=ops, kw=kw, pkw=pkw):
            """``fn`` (numpy.einsum or polyc.einsum) called as the case says
            (polyc with the case's optimize=, numpy with its default)."""
            extra = {"config": config} if fn is not np.einsum else {}
            args = kw if fn is np.einsum else pkw
            if case.interleaved:
                return fn(*_interleaved(case.subscripts, ops), out=out, **args, **extra)
            return fn(case.subscripts, *ops, out=out, **args, **extra)

        try:
            with np.errstate(all="ignore"):
                like = np.asarray(call(np.einsum, None))
        except Exception as e:  # noqa: BLE001 - numpy refuses: polyc must refuse alike
            failed = _same_error(case, e, lambda: call(polyc.einsum, None), shapes, k)
            if failed is not None:
                return failed
            res.refused += 1
            continue
        # numpy's view path ignores dtype= (np.einsum("i", a, dtype="float64") is a
        # view of a); polyc honours it and returns a new array (docs/einsum.md)
        view = bool(case.force_dtype) and any(np.shares_memory(like, o) for o in ops)
        wide = [o.astype(np.float64 if like.dtype.kind == "f" else np.int64) for o in ops]
        want = np.asarray(np.einsum(case.subscripts, *wide))
        before = [o.copy() for o in ops]
        out = None
        if case.out_mode == "nan":
            out = _fill(like.shape, like.dtype)
        elif case.out_mode == "alias":
            out = next((o for o in ops if o.shape == like.shape and o.dtype == like.dtype
                        and o.ndim), None)
            if out is None:
                out = _fill(like.shape, like.dtype)
        elif case.out_mode == "strided" and like.ndim:
            big = _fill(like.shape[:-1] + (2 * like.shape[-1],), like.dtype)
            out = big[..., 1::2]
        elif case.out_mode == "cast":
            # a wider out: numpy computes in result_type(operands, out)
            out = _fill(like.shape, np.float64 if like.dtype.kind == "f" else np.int64)
        aliased = out is not None and any(out is o for o in ops)
        if out is not None:
            # numpy with this out= (on copies: an aliased out overwrites an
            # operand): its result type, or its refusal (a dtype= that cannot
            # be cast to out's type), which polyc must repeat
            n_ops = [o.copy() for o in ops]
            n_out = next((c for o, c in zip(ops, n_ops) if o is out), None)
            n_out = out.copy() if n_out is None else n_out
            try:
                with np.errstate(all="ignore"):
                    like = np.asarray(call(np.einsum, n_out, ops=n_ops))
            except Exception as e:  # noqa: BLE001
                failed = _same_error(case, e, lambda: call(polyc.einsum, out), shapes, k)
                if failed is None and not all(np.array_equal(o, b, equal_nan=True)
                                              for o, b in zip(ops, before)):
                    failed = Result("einsum", "fail", _fail_text(
                        case, "polyc.einsum modified an operand before refusing", None,
                        shapes, k))
                if failed is not None:
                    return failed
                res.refused += 1
                continue
        try:
            got = call(polyc.einsum, out)
        except PolycError as e:
            return Result("einsum", "fail", _fail_text(case, "polyc.einsum raised", e, shapes, k))
        except Exception as e:  # noqa: BLE001
            return Result("einsum", "fail", _fail_text(case, "polyc.einsum crashed", e,
                                                       shapes, k))
        for q, (o, b) in enumerate(zip(ops, before)):
            if not (aliased and o is out) and not np.array_equal(o, b):
                return Result("einsum", "fail", _fail_text(
                    case, f"polyc.einsum modified operand {q}", None, shapes, k))
        try:
            if out is not None and got is not out:
                raise AssertionError("polyc.einsum did not return out")
            if out is None and like.ndim == 0 and isinstance(got, np.ndarray):
                raise AssertionError(f"0-d result returned as {type(got).__name__}, "
                                     "numpy returns a scalar")
            red = 1
            outl = case.subscripts.split("->")[1] if "->" in case.subscripts else None
            sizes = _label_sizes(case.subscripts, shapes)
            for x, n in sizes.items():
                if outl is not None and x not in outl or outl is None and \
                        case.subscripts.count(x) > 1:
                    red *= max(n, 1)
            # with optimize, intermediates of float32 operands are float32 (numpy's too)
            tol = ("float32" if case.optimize is not False and like.dtype.kind == "f"
                   and "float32" in case.dtypes and not case.force_dtype else like.dtype.name)
            expected = case.force_dtype if view and out is None else like.dtype.name
            _assert_close(np.asarray(got), want, expected, tol, red, "einsum",
                          _scale([want]))
        except AssertionError as e:
            return Result("einsum", "fail", _fail_text(case, "mismatch", e, shapes, k))
        res.compared += 1
    return res


def _same_error(case, exc: Exception, polyc_call, shapes, k) -> Result | None:
    """numpy raised ``exc``: ``None`` when ``polyc_call()`` raises the same
    class (or a subclass: ``DTypeError`` is a ``TypeError``, ``EinsumError``
    a ``ValueError``) with the same message, else the failure."""
    what = f"numpy raised {type(exc).__name__}({str(exc)!r})"
    try:
        polyc_call()
    except Exception as e2:  # noqa: BLE001
        if isinstance(e2, type(exc)) and str(e2) == str(exc):
            return None
        return Result("einsum", "fail", _fail_text(
            case, f"{what}; polyc raised {type(e2).__name__}({str(e2)!r})", e2, shapes, k))
    return Result("einsum", "fail", _fail_text(case, f"{what}; polyc did not", None,
                                               shapes, k))


def _interleaved(subscripts: str, ops) -> list:
    """numpy's interleaved form: ``op0, sublist0, op1, sublist1, ...,
    [sublist_out]`` with 0-25 for ``A-Z``, 26-51 for ``a-z``, ``Ellipsis``
    for ``...``."""
    def sub(part):
        out, i = [], 0
        while i < len(part):
            if part.startswith("...", i):
                out.append(Ellipsis)
                i += 3
                continue
            c = part[i]
            out.append(ord(c) - ord("A") if c.isupper() else 26 + ord(c) - ord("a"))
            i += 1
        return out
    ins, _, outp = subscripts.partition("->")
    args = []
    for op, part in zip(ops, ins.split(",")):
        args += [op, sub(part)]
    if "->" in subscripts:
        args.append(sub(outp))
    return args


def _label_sizes(subscripts: str, shapes) -> dict:
    ins = subscripts.split("->")[0].split(",")
    sizes: dict = {}
    for part, shape in zip(ins, shapes):
        if "..." in part:
            a, b = part.split("...")
            labs = list(a) + [None] * (len(shape) - len(a) - len(b)) + list(b)
        else:
            labs = list(part)
        for x, n in zip(labs, shape):
            if x is not None and x.strip():
                sizes[x] = max(sizes.get(x, 1), n) if n != 0 and sizes.get(x) != 0 else 0
    return sizes


# --------------------------------------------------------------- reproducers

def reproducer(case, sizes=None, k: int = 0) -> str:
    """A script that replays ``case`` (at ``sizes``, the ``k``-th size set)."""
    if isinstance(case, EinsumCase):
        return _einsum_reproducer(case, sizes if sizes is not None else case.shapes[k], k)
    sizes = sizes if sizes is not None else case.size_dicts()[k]
    cfg = CONFIGS[case.config]
    lines = [
        "import numpy as np",
        "import polyc",
        "from polyc import reference, testing",
        "from polyc.config import Config",
        "",
        f'src = """\n{case.src}"""',
        f"kernel = polyc.compile(src, dtype={case.dtype!r}, "
        f"config=Config.from_env(**{cfg!r}))",
    ]
    if not case.serial_work:
        lines.append("kernel.SERIAL_WORK = 0  # OpenMP even on tiny problems")
    lines += [
        "program = getattr(kernel, 'specialize', None) and "
        f"kernel.specialize(S={sizes.get('S')}).program or kernel.program"
        if "int64 S" in case.src else "program = kernel.program",
        f"sizes = {sizes!r}",
        f"inputs = testing.random_inputs(program, sizes, seed={case.seed + k})",
        "want = reference.evaluate(program, inputs, sizes)",
        "out = tuple(np.full(w.shape, np.nan if w.dtype.kind == 'f' else np.iinfo(w.dtype).min,",
        "                    w.dtype) for w in want.values())",
    ]
    if case.alias_out:
        lines += [
            "# alias_out: an input with the shape and dtype of an output is passed as out=",
            "out = list(out)",
            "for q, w in enumerate(want.values()):",
            "    n = next((n for n, a in inputs.items()",
            "              if a.shape == w.shape and a.dtype == w.dtype and a.ndim), None)",
            "    if n is not None:",
            "        out[q] = inputs[n]",
            "        break",
            "out = tuple(out)",
        ]
    lines += [
        "got = kernel(*testing.call_args(program, inputs, sizes),",
        "             out=out if len(out) > 1 else out[0])",
        "got = got if isinstance(got, tuple) else (got,)",
        "red = testing.reduction_length(program, sizes)",
        "for t, g in zip(program.outputs, got):",
        "    testing.assert_close(g, want[t.name], dtype=t.dtype, reduction_length=red,",
        "                         name=t.name)",
    ]
    return "\n".join(lines) + "\n"


def _einsum_reproducer(case: EinsumCase, shapes, k: int) -> str:
    cfg = CONFIGS[case.config]
    return "\n".join([
        "import numpy as np",
        "import polyc",
        "from polyc.config import Config",
        "",
        f"rng = np.random.default_rng({case.seed + k})",
        f"shapes, dtypes, layouts = {tuple(shapes)!r}, {case.dtypes!r}, {case.layouts!r}",
        "ops = []",
        "for shape, dt, lay in zip(shapes, dtypes, layouts):",
        "    a = ((2 * rng.random(shape) - 1) if np.dtype(dt).kind == 'f'",
        "         else rng.integers(-5, 5, size=shape)).astype(dt)",
        "    if lay == 'f':",
        "        a = np.asfortranarray(a)",
        "    elif lay == 'step' and a.ndim:",
        "        big = np.zeros(shape[:-1] + (2 * shape[-1],), dt)",
        "        big[..., ::2] = a",
        "        a = big[..., ::2]",
        "    ops.append(a)",
        f"subscripts = {case.subscripts!r}",
        "want = np.einsum(subscripts, *[o.astype(np.float64 if o.dtype.kind == 'f' "
        "else np.int64) for o in ops])",
        f"# out_mode={case.out_mode!r} (nan: NaN-filled out=; alias: an operand as out=; "
        "strided: a non-contiguous out=)",
        f"# interleaved={case.interleaved!r} (True: called as einsum(op0, sublist0, ...)), "
        f"dtype={case.force_dtype!r}",
        f"got = polyc.einsum(subscripts, *ops, config=Config.from_env(**{cfg!r})"
        + (f", dtype={case.force_dtype!r}" if case.force_dtype else "")
        + (f", optimize={case.optimize!r})" if case.optimize is not False else ")"),
        "np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)",
    ]) + "\n"


# ------------------------------------------------------------------- running

def run_case(case) -> Result:
    """Run one case; never raises (a crash is a ``fail`` result).  A
    failure that matches :data:`KNOWN_BUGS` becomes a ``known`` result."""
    try:
        with np.errstate(all="ignore"):
            r = run_einsum(case) if isinstance(case, EinsumCase) else run_tc(case)
    except Exception as e:  # noqa: BLE001
        r = Result(case.kind, "fail", _fail_text(case, "the fuzzer itself crashed", e))
    if r.status == "fail":
        known = _known_bug(r.message)
        if known:
            r.status, r.reason = "known", known
    return r


def _worker_init():
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


class Runner:
    """Runs batches of cases in ``jobs`` spawned worker processes (each
    compiles, runs the reference and the kernel), or in this process when
    ``jobs <= 1``.  A worker that dies (a segfault in generated code) or
    hangs fails the batch; the pool is then rebuilt."""

    TIMEOUT = 300

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.pool = None

    def _pool(self):
        if self.pool is None:
            ctx = multiprocessing.get_context("spawn")
            self.pool = cf.ProcessPoolExecutor(self.jobs, mp_context=ctx,
                                               initializer=_worker_init)
        return self.pool

    def map(self, cases) -> list[Result]:
        if self.jobs <= 1:
            return [run_case(c) for c in cases]
        pool = self._pool()
        futures = [pool.submit(run_case, c) for c in cases]
        results = []
        for c, f in zip(cases, futures):
            try:
                results.append(f.result(timeout=self.TIMEOUT))
            except cf.TimeoutError:
                results.append(Result(c.kind, "fail", "timeout: the case ran for "
                                      f"{self.TIMEOUT} s\n--- reproducer ---\n{reproducer(c)}"))
                self.close(kill=True)
                break
            except cf.process.BrokenProcessPool:
                results.append(Result(c.kind, "fail", "a worker process died (a crash in "
                                      f"generated code?)\n--- reproducer ---\n{reproducer(c)}"))
                self.close(kill=True)
                break
        return results

    def close(self, kill: bool = False):
        if self.pool is None:
            return
        if kill:
            for p in list(getattr(self.pool, "_processes", {}).values()):
                p.kill()
        self.pool.shutdown(wait=not kill, cancel_futures=True)
        self.pool = None


# --------------------------------------------------------------------- stats

@dataclass
class Stats:
    programs: int = 0
    rejected: int = 0
    failed: int = 0
    compared: int = 0
    refused: int = 0
    skipped: int = 0
    reasons: dict = field(default_factory=dict)
    known: dict = field(default_factory=dict)

    def add(self, r: Result):
        self.programs += 1
        self.compared += r.compared
        self.refused += r.refused
        self.skipped += r.skipped
        if r.status == "rejected":
            self.rejected += 1
            self.reasons[r.reason] = self.reasons.get(r.reason, 0) + 1
        elif r.status == "fail":
            self.failed += 1
        elif r.status == "known":
            self.known[r.reason] = self.known.get(r.reason, 0) + 1

    def line(self) -> str:
        rate = self.rejected / self.programs if self.programs else 0.0
        return (f"{self.programs} programs, {self.rejected} rejected ({rate:.0%}: "
                f"{self.reasons}), {self.failed} failed, known bugs {self.known}; "
                f"{self.compared} size sets compared, {self.refused} refused by both, "
                f"{self.skipped} skipped")


#: Per test kind, in the main process.
STATS: dict[str, Stats] = {}
