"""Symbolic array sizes of a trace: which extents stay isl parameters, which
are equal, and which the Python code read as values.

Every dimension of a traced argument starts as its own *size symbol* (an
isl parameter of the kernels), except dimensions of extent 1, which are the
constant 1 (numpy's broadcasting depends on them, so the jit key holds
them).  Operations that need two extents equal (broadcasting, the ``k`` of a
matmul) unite their symbols (:meth:`SymbolTable.unify`): the equalities the
trace saw become the guard of the compiled plan.  An extent the Python code
reads as a number (``if n > 64``, ``np.sqrt(q.shape[-1])``, ``range(n)``)
is *specialised*: fixed to its traced value, printed as a constant, and
guarded by equality.

:class:`Size` is an affine form over symbols (``N3 - 1`` after a slice,
``12 * N5`` after a reshape); :class:`SizeInt` is what ``tracer.shape``
returns to Python: arithmetic with ints keeps it symbolic, any other use
specialises it (see :meth:`SizeInt.__index__`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError


class SymbolTable:
    """Size symbols of one trace: a union-find over symbols with their
    traced values, the specialised ones, and where each comes from."""

    def __init__(self) -> None:
        self._parent: list[int] = []
        self.values: list[int] = []
        #: representative -> reason it was specialised (its value is values[rep])
        self.fixed: dict[int, str] = {}
        #: symbol -> (argument position, dimension) it binds from, or None
        self.origin: list[tuple[int, int] | None] = []
        #: affine forms of sizes that must stay >= 0 for the plan to hold
        #: (a slice's constant stop inside the extent, an index in range)
        self.nonneg: list[tuple[Size, str]] = []

    def new(self, value: int, origin: tuple[int, int] | None = None) -> int:
        self._parent.append(len(self._parent))
        self.values.append(int(value))
        self.origin.append(origin)
        return len(self._parent) - 1

    def find(self, s: int) -> int:
        while self._parent[s] != s:
            self._parent[s] = self._parent[self._parent[s]]
            s = self._parent[s]
        return s

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        lo, hi = min(ra, rb), max(ra, rb)
        self._parent[hi] = lo
        if hi in self.fixed:
            self.fixed.setdefault(lo, self.fixed.pop(hi))

    def fix(self, s: int, why: str) -> None:
        self.fixed.setdefault(self.find(s), why)

    def is_fixed(self, s: int) -> bool:
        return self.find(s) in self.fixed

    def name(self, s: int) -> str:
        """The parameter name of symbol ``s`` in generated TC (its class's
        representative)."""
        return f"N{self.find(s)}"

    # -- sizes ----------------------------------------------------------------
    def unify(self, a: Size, b: Size, why: str) -> None:
        """Record that ``a`` and ``b`` (of equal traced value) are equal for
        every shape of the class: symbols are united, anything else is
        specialised.  Raises :class:`ShapeError` if the values differ."""
        if a.value != b.value:
            raise ShapeError(f"{why}: extents {a.value} and {b.value} differ")
        a, b = a.normal(), b.normal()
        if a == b:
            return
        sa, sb = a.single_symbol(), b.single_symbol()
        if sa is not None and sb is not None:
            self.union(sa, sb)
            return
        d = a - b
        if d.const == 0 and len(d.terms) == 2 and d.terms[0][1] == -d.terms[1][1]:
            # c*(s - t) == 0: the two symbols are equal (two inputs' extents
            # that meet as ``L + 1``, a KV cache and its value twin)
            self.union(d.terms[0][0], d.terms[1][0])
            return
        for s, _ in a.terms + b.terms:
            self.fix(s, why)

    def require(self, size: Size, why: str) -> None:
        """Record that ``size`` (>= 0 at the traced values) must stay >= 0:
        a plan whose templates assume it is not reused where it fails."""
        assert size.value >= 0, (size, why)
        if not size.is_constant:
            self.nonneg.append((size, why))

    def guards(self) -> list[tuple[str, Any]]:
        """The conditions a call's argument extents must meet to reuse a
        plan traced here: ``("eq", (p, d), (q, e))``, ``("val", (p, d), v)``
        and ``("ge", ((coeff, (p, d)), ...), const)`` (the sum plus ``const``
        is >= 0)."""
        out: list[tuple[str, Any]] = []
        first: dict[int, tuple[int, int]] = {}
        for s, org in enumerate(self.origin):
            if org is None:
                continue
            r = self.find(s)
            if r in self.fixed:
                out.append(("val", org, self.values[s]))
            elif r in first:
                out.append(("eq", first[r], org))
            else:
                first[r] = org
        for size, _ in self.nonneg:
            n = size.normal()
            terms = []
            for sym, c in n.terms:
                org = next((o for q, o in enumerate(self.origin)
                            if o is not None and self.find(q) == sym), None)
                assert org is not None, "every size symbol binds from an argument"
                terms.append((c, org))
            if terms:
                out.append(("ge", tuple(terms), n.const))
        return out


@dataclass(frozen=True, eq=False)
class Size:
    """``const + sum(coeff * symbol)`` with its traced ``value``."""
    table: SymbolTable
    terms: tuple[tuple[int, int], ...]
    const: int
    value: int

    @staticmethod
    def constant(table: SymbolTable, v: int) -> Size:
        return Size(table, (), int(v), int(v))

    @staticmethod
    def symbol(table: SymbolTable, s: int) -> Size:
        return Size(table, ((s, 1),), 0, table.values[s])

    def normal(self) -> Size:
        """Representatives for symbols, specialised ones folded into the constant."""
        acc: dict[int, int] = {}
        const = self.const
        for s, c in self.terms:
            r = self.table.find(s)
            if r in self.table.fixed:
                const += c * self.table.values[r]
            else:
                acc[r] = acc.get(r, 0) + c
        terms = tuple(sorted((s, c) for s, c in acc.items() if c))
        return Size(self.table, terms, const, self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Size):
            return NotImplemented
        a, b = self.normal(), other.normal()
        return a.terms == b.terms and a.const == b.const

    def __hash__(self) -> int:
        n = self.normal()
        return hash((n.terms, n.const))

    def single_symbol(self) -> int | None:
        n = self.normal()
        if n.const == 0 and len(n.terms) == 1 and n.terms[0][1] == 1:
            return n.terms[0][0]
        return None

    @property
    def is_constant(self) -> bool:
        return not self.normal().terms

    def symbols(self) -> set[int]:
        return {s for s, _ in self.normal().terms}

    def __add__(self, other: Size | int) -> Size:
        o = other if isinstance(other, Size) else Size.constant(self.table, other)
        return Size(self.table, self.terms + o.terms, self.const + o.const,
                    self.value + o.value).normal()

    def __sub__(self, other: Size | int) -> Size:
        o = other if isinstance(other, Size) else Size.constant(self.table, other)
        return self + o.scale(-1)

    def scale(self, k: int) -> Size:
        return Size(self.table, tuple((s, c * k) for s, c in self.terms), self.const * k,
                    self.value * k).normal()

    def times(self, other: Size, why: str) -> Size:
        """``self * other``; a product of two symbolic sizes is not affine:
        ``other`` is specialised."""
        if other.is_constant:
            return self.scale(other.normal().const)
        if self.is_constant:
            return other.scale(self.normal().const)
        for s in other.symbols():
            self.table.fix(s, why)
        return self.scale(other.normal().const)

    def floordiv(self, k: int, why: str) -> Size:
        """``self // k``: exact when ``k`` divides every coefficient, else
        the symbols are specialised."""
        n = self.normal()
        if all(c % k == 0 for _, c in n.terms) and n.const % k == 0:
            return Size(self.table, tuple((s, c // k) for s, c in n.terms), n.const // k,
                        self.value // k)
        for s in n.symbols():
            self.table.fix(s, why)
        return Size.constant(self.table, self.value // k)

    def text(self) -> str:
        """The extent as a TC size expression (``N3 - 1``, ``12*N5``, ``64``)."""
        n = self.normal()
        parts = []
        for s, c in n.terms:
            name = self.table.name(s)
            parts.append(name if c == 1 else f"{c}*{name}")
        if n.const or not parts:
            parts.append(str(n.const))
        return " + ".join(parts).replace("+ -", "- ")

    def __repr__(self) -> str:
        return f"Size({self.text()}={self.value})"


class SizeInt:
    """An extent as ``tracer.shape`` hands it to Python.

    Stays symbolic through ``+ - *`` with ints and other extents and
    through ``reshape``/creation calls; every use as a plain number
    (``int()``, ``float()``, indexing, comparisons, ``bool``, ``hash``,
    ``np.asarray``, ``/``, ``**``) specialises the sizes it depends on to
    their traced values, with a guard on the compiled plan."""

    __slots__ = ("size", "why")

    def __init__(self, size: Size, why: str = "its value was read") -> None:
        self.size, self.why = size, why

    def _value(self) -> int:
        for s in self.size.symbols():
            self.size.table.fix(s, self.why)
        return self.size.value

    def __index__(self) -> int:
        return self._value()

    __int__ = __index__

    def __float__(self) -> float:
        return float(self._value())

    def __bool__(self) -> bool:
        return bool(self._value())

    def __hash__(self) -> int:
        return hash(self._value())

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._value(), dtype=dtype)

    def __array_ufunc__(self, ufunc, method: str, *inputs, **kwargs):
        """numpy's ufuncs, and an ndarray's or numpy scalar's operators,
        with an extent: the extent as the Python int it stands for (weak in
        numpy's promotion: ``float32_array / x.shape[1]`` stays float32, as
        without a trace), specialised.  A traced operand's protocol goes
        first (it keeps the extent symbolic)."""
        if any(not isinstance(i, (SizeInt, np.ndarray, np.generic, int, float, bool)) and
               hasattr(type(i), "__array_ufunc__") for i in inputs):
            return NotImplemented
        vals = [i._value() if isinstance(i, SizeInt) else i for i in inputs]
        return getattr(ufunc, method)(*vals, **kwargs)

    def _lift(self, other: Any) -> Size | None:
        if isinstance(other, SizeInt):
            return other.size
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            return Size.constant(self.size.table, int(other))
        return None

    def __add__(self, other):
        o = self._lift(other)
        return SizeInt(self.size + o) if o is not None else self._value() + other

    __radd__ = __add__

    def __sub__(self, other):
        o = self._lift(other)
        return SizeInt(self.size - o) if o is not None else self._value() - other

    def __rsub__(self, other):
        o = self._lift(other)
        return SizeInt(o - self.size) if o is not None else other - self._value()

    def __mul__(self, other):
        o = self._lift(other)
        if o is None:
            return self._value() * other
        return SizeInt(self.size.times(o, "a product of two sizes is not affine"))

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if isinstance(other, (int, np.integer)) and not isinstance(other, bool) and other > 0:
            return SizeInt(self.size.floordiv(int(other), "a size divided by a constant"))
        return self._value() // (other._value() if isinstance(other, SizeInt) else other)

    def __neg__(self):
        return SizeInt(self.size.scale(-1))

    def __repr__(self) -> str:
        return repr(self.size.value)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self._value(), spec)


def _number_op(name: str):
    """``SizeInt.<name>`` as the operator on the specialised value (through
    :mod:`operator`, so ``n / 2.0`` and ``n ** 0.5`` reach float's reflected
    methods, which ``int.__truediv__`` leaves to a type they do not know)."""
    base = name.strip("_")
    reflected = base.startswith("r") and hasattr(operator, base[1:]) or base == "rdivmod"
    key = base[1:] if reflected else base
    fn = {"divmod": divmod, "abs": abs, "and": operator.and_, "or": operator.or_}.get(
        key) or getattr(operator, key)

    def op(self, *args):
        args = [a._value() if isinstance(a, SizeInt) else a for a in args]
        return fn(*args, self._value()) if reflected else fn(self._value(), *args)
    op.__name__ = name
    return op


for _name in ("__truediv__", "__rtruediv__", "__rfloordiv__", "__mod__", "__rmod__",
              "__pow__", "__rpow__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
              "__ge__", "__abs__", "__pos__", "__divmod__", "__lshift__", "__rshift__",
              "__and__", "__or__", "__xor__"):
    setattr(SizeInt, _name, _number_op(_name))
