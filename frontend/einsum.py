"""The einsum frontend: numpy's subscript grammar to :class:`polyc.ir.Program`.

Owns two steps:

* :func:`parse` takes a subscripts string and the operands' shapes and returns
  a validated :class:`EinsumSpec` (per-operand labels with ``...`` expanded,
  output labels, label sizes, which operand dimensions broadcast).  Every
  input ``numpy.einsum`` rejects raises :class:`~polyc.errors.EinsumError`
  (a ``ValueError``) with numpy's own message text, checked in numpy's order.
* :func:`lower` turns a spec into a parametric program: one size parameter
  per distinct label, so one compiled kernel serves every shape that has the
  same :attr:`EinsumSpec.key`.

Takes strings and shapes, returns ``EinsumSpec`` and ``ir.Program``; it never
calls ``numpy.einsum`` and imports no later stage.  Label vocabulary: a label
is a letter ``a-z A-Z``; the dimensions covered by ``...`` get the generated
labels ``e0, e1, ...`` (leftmost first, aligned to the right as numpy
broadcasts them).  The size parameter of label ``x`` is ``d_x``.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import islpy as isl
import numpy as np

from polyc import access, ir
from polyc import expr as E
from polyc.errors import BindingError, DTypeError, EinsumError
from polyc.halfprec import widen_half_reductions
from polyc.isl_util import aff_from_expr, const_pw_aff, param_space

#: numpy's limits (``NPY_MAXARGS`` operands including the output, ``NPY_MAXDIMS``).
MAX_OPERANDS = 64
MAX_DIMS = 64

_LETTERS = frozenset(string.ascii_letters)
_ELLIPSIS = None  # a dimension covered by '...' before labels are generated


@dataclass(frozen=True)
class EinsumSpec:
    """A validated einsum call, without the data.

    ``input_labels[k][d]`` is the label of dimension ``d`` of operand ``k``
    (a letter, or ``e0, e1, ...`` under ``...``); a label repeated within an
    operand takes a diagonal.  ``output_labels`` are the output's dimensions
    in order.  ``sizes`` pairs every label with its extent (broadcast over
    all operands); ``broadcast[k][d]`` is true when dimension ``d`` of operand
    ``k`` has size 1 against a label size other than 1 (it is read at index
    0).  ``dtypes``/``out_dtype`` are ``None`` until known (see
    :meth:`with_dtypes`); when set they enter :attr:`key`.
    """
    subscripts: str
    input_labels: tuple[tuple[str, ...], ...]
    output_labels: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    broadcast: tuple[tuple[bool, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    implicit: bool
    dtypes: tuple[str, ...] | None = None
    out_dtype: str | None = None

    @property
    def nop(self) -> int:
        return len(self.input_labels)

    @property
    def label_sizes(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every label, in order of first appearance in the inputs."""
        return tuple(lab for lab, _ in self.sizes)

    @property
    def reduction_labels(self) -> tuple[str, ...]:
        """Labels summed over (not in the output), in order of first appearance."""
        return tuple(lab for lab in self.labels if lab not in self.output_labels)

    @property
    def output_shape(self) -> tuple[int, ...]:
        sizes = self.label_sizes
        return tuple(sizes[lab] for lab in self.output_labels)

    @property
    def canonical(self) -> str:
        """The explicit subscripts string equivalent to this spec ("ij,jk->ik")."""
        return (",".join(labels_text(ls) for ls in self.input_labels) + "->"
                + labels_text(self.output_labels))

    @property
    def key(self) -> tuple:
        """Everything that changes the lowered program (labels, ndims, the
        broadcast pattern, dtypes) and nothing that does not (the sizes)."""
        return ("einsum", self.input_labels, self.output_labels, self.broadcast,
                self.dtypes, self.out_dtype)

    def with_dtypes(self, dtypes: Sequence[Any], out_dtype: Any) -> EinsumSpec:
        """This spec with element types (numpy dtypes or their names) set."""
        names = tuple(_dtype_name(d) for d in dtypes)
        if len(names) != self.nop:
            raise EinsumError(f"einsum has {self.nop} operands but {len(names)} dtypes were given")
        return replace(self, dtypes=names, out_dtype=_dtype_name(out_dtype))


def labels_text(labels: Sequence[str]) -> str:
    """One operand's (or the output's) subscripts from its labels: letters as
    they are, a run of generated ``e0, e1, ...`` labels as one ``...``
    (``("e0", "i", "j")`` is ``"...ij"``)."""
    out, in_ellipsis = [], False
    for lab in labels:
        if len(lab) == 1:
            out.append(lab)
        elif not in_ellipsis:
            out.append("...")
        in_ellipsis = len(lab) > 1
    return "".join(out)


def param_name(label: str) -> str:
    """The size parameter of ``label`` (``d_i`` for ``i``, ``d_e0`` for ``e0``)."""
    return f"d_{label}"


# ---------------------------------------------------------------------------
# parsing and validation (numpy's checks, in numpy's order)
# ---------------------------------------------------------------------------

def parse(subscripts: str | bytes, shapes: Sequence[Sequence[int]], *,
          dtypes: Sequence[Any] | None = None, out_dtype: Any = None,
          out_shape: Sequence[int] | None = None) -> EinsumSpec:
    """Parse and validate ``subscripts`` for operands of the given ``shapes``.

    ``out_shape`` is the shape of a caller-provided ``out=`` array: it is
    validated as numpy validates it (rank, broadcasting, no implied
    reduction) but does not change the spec; an ``out`` dimension may be
    larger than a label's size 1 (numpy broadcasts the result into it), in
    which case ``spec.output_shape`` differs from ``out_shape``.  ``dtypes``
    and ``out_dtype``, when given, are recorded with :meth:`with_dtypes`.

    Raises :class:`~polyc.errors.EinsumError` with numpy's message for every
    call ``numpy.einsum`` rejects, and also for a NUL character (numpy
    silently truncates the string there) and for a diagonal of a zero-size
    dimension with another size (numpy returns a view past the data).
    """
    text = _ascii_subscripts(subscripts)
    shapes = tuple(tuple(operator.index(n) for n in s) for s in shapes)
    nop = len(shapes)
    if nop >= MAX_OPERANDS:
        raise EinsumError("too many operands")
    if nop < 1:
        raise EinsumError("not enough operands provided to einstein sum function")

    counts: dict[str, int] = {}
    raw_inputs, rest = _parse_inputs(text, shapes, counts)
    nbroadcast = max(ls.count(_ELLIPSIS) for ls in raw_inputs)
    implicit = rest == ""
    if implicit:
        raw_output = [_ELLIPSIS] * nbroadcast + sorted(
            (lab for lab, n in counts.items() if n == 1), key=ord)
        if len(raw_output) > MAX_DIMS:
            raise EinsumError("einstein sum subscript string has too many distinct labels")
    elif not rest.startswith("->"):
        raise EinsumError("einstein sum subscript string does not contain proper "
                          "'->' output specified")
    else:
        raw_output = _parse_output(rest[2:], nbroadcast, counts)

    if out_shape is not None:
        out_shape = tuple(operator.index(n) for n in out_shape)
        if len(out_shape) != len(raw_output):
            raise EinsumError(
                "out parameter does not have the correct number of dimensions, "
                f"has {len(out_shape)} but should have {len(raw_output)}")
    if nop == 1 and out_shape is None:
        _check_single_operand_diagonals(raw_inputs[0], shapes[0], raw_output)
    combined = [_combine_diagonals(k, ls, s) for k, (ls, s) in enumerate(zip(raw_inputs, shapes))]
    _check_broadcast(combined, raw_output, counts, out_shape)

    spec = _build_spec(text, raw_inputs, raw_output, shapes, nbroadcast, implicit)
    if dtypes is not None:
        spec = spec.with_dtypes(dtypes, out_dtype if out_dtype is not None
                                else np.result_type(*[np.dtype(d) for d in dtypes]))
    return spec


def _ascii_subscripts(subscripts: str | bytes) -> str:
    if isinstance(subscripts, bytes):
        subscripts = subscripts.decode("latin-1")
    if not isinstance(subscripts, str):
        raise BindingError("einsum subscripts must be a string, got "
                          f"{type(subscripts).__name__}")
    try:
        subscripts.encode("ascii")
    except UnicodeEncodeError as err:  # numpy raises exactly this (a ValueError)
        raise EinsumError(str(err)) from err
    if "\0" in subscripts:
        raise EinsumError("invalid subscript '\\x00' in einstein sum subscripts string, "
                          "subscripts must be letters")
    return subscripts


def _parse_inputs(text: str, shapes, counts) -> tuple[list[list], str]:
    """Split off and parse each operand's subscripts (numpy splits at the
    first ',' or '-'); returns the raw label lists and the rest ("" or "->...")."""
    nop, pos = len(shapes), 0
    raw = []
    for k in range(nop):
        end = pos
        while end < len(text) and text[end] not in ",-":
            end += 1
        stop = text[end] if end < len(text) else ""
        if k == nop - 1 and stop == ",":
            raise EinsumError("more operands provided to einstein sum function than "
                              "specified in the subscripts string")
        if k < nop - 1 and stop != ",":
            raise EinsumError("fewer operands provided to einstein sum function than "
                              "specified in the subscripts string")
        raw.append(_parse_operand(text[pos:end], len(shapes[k]), k, counts))
        pos = end + (1 if k < nop - 1 else 0)
    return raw, text[pos:]


def _parse_operand(sub: str, ndim: int, k: int, counts: dict[str, int]) -> list:
    labels: list = []
    ellipsis = -1
    i = 0
    while i < len(sub):
        c = sub[i]
        if c in _LETTERS:
            if len(labels) >= ndim:
                raise EinsumError("einstein sum subscripts string contains too many "
                                  f"subscripts for operand {k}")
            labels.append(c)
            counts[c] = counts.get(c, 0) + 1
        elif c == ".":
            if ellipsis != -1 or sub[i:i + 3] != "...":
                raise EinsumError("einstein sum subscripts string contains a '.' that is "
                                  f"not part of an ellipsis ('...') in operand {k}")
            ellipsis = len(labels)
            i += 2
        elif c != " ":
            raise _invalid_subscript(c)
        i += 1
    if ellipsis == -1:
        if len(labels) != ndim:
            raise EinsumError("operand has more dimensions than subscripts given in "
                              "einstein sum, but no '...' ellipsis provided to broadcast "
                              "the extra dimensions.")
        return labels
    return labels[:ellipsis] + [_ELLIPSIS] * (ndim - len(labels)) + labels[ellipsis:]


def _parse_output(sub: str, nbroadcast: int, counts: dict[str, int]) -> list:
    labels: list = []
    ellipsis = False
    i = 0
    while i < len(sub):
        c = sub[i]
        if c in _LETTERS:
            if c in sub[i + 1:]:
                raise EinsumError("einstein sum subscripts string includes output "
                                  f"subscript '{c}' multiple times")
            if counts.get(c, 0) == 0:
                raise EinsumError("einstein sum subscripts string included output "
                                  f"subscript '{c}' which never appeared in an input")
            if len(labels) >= MAX_DIMS:
                raise EinsumError("einstein sum subscripts string contains too many "
                                  "subscripts in the output")
            labels.append(c)
        elif c == ".":
            if ellipsis or sub[i:i + 3] != "...":
                raise EinsumError("einstein sum subscripts string contains a '.' that is "
                                  "not part of an ellipsis ('...') in the output")
            if len(labels) + nbroadcast > MAX_DIMS:
                raise EinsumError("einstein sum subscripts string contains too many "
                                  "subscripts in the output")
            ellipsis = True
            labels.extend([_ELLIPSIS] * nbroadcast)
            i += 2
        elif c != " ":
            raise _invalid_subscript(c)
        i += 1
    if not ellipsis and nbroadcast > 0:
        raise EinsumError("output has more dimensions than subscripts given in einstein "
                          "sum, but no '...' ellipsis provided to broadcast the extra "
                          "dimensions.")
    return labels


def _invalid_subscript(c: str) -> EinsumError:
    return EinsumError(f"invalid subscript '{c}' in einstein sum subscripts string, "
                       "subscripts must be letters")


def _check_single_operand_diagonals(labels, shape, output) -> None:
    """numpy first tries to return a view for one operand without ``out``;
    that path reports repeated-label size mismatches in its own words, for
    the labels it meets before the first summed one."""
    seen: dict[str, int] = {}
    for lab, n in zip(labels, shape):
        if lab is _ELLIPSIS:
            continue
        if lab not in output:
            return
        if seen.get(lab, 0) != 0 and seen[lab] != n:
            raise EinsumError(f"dimensions in single operand for collapsing index '{lab}' "
                              f"don't match ({seen[lab]} != {n})")
        seen[lab] = n


def _combine_diagonals(k: int, labels, shape) -> tuple[list, list[int]]:
    """The operand with each repeated label collapsed onto its first
    occurrence (numpy's diagonal view): its labels and shape."""
    out_labels: list = []
    out_shape: list[int] = []
    for lab, n in zip(labels, shape):
        if lab is not _ELLIPSIS and lab in out_labels:
            first = out_shape[out_labels.index(lab)]
            if first != n:
                raise EinsumError(f"dimensions in operand {k} for collapsing index "
                                  f"'{lab}' don't match ({first} != {n})")
            continue
        out_labels.append(lab)
        out_shape.append(n)
    return out_labels, out_shape


def _op_axes(labels: list, iter_labels: list) -> list[int]:
    """numpy's ``prepare_op_axes``: the operand axis of each iterator axis
    (-1 for a new axis); '...' dimensions are matched from the right."""
    axes = [-1] * len(iter_labels)
    ib = len(labels) - 1
    for i in reversed(range(len(iter_labels))):
        lab = iter_labels[i]
        if lab is _ELLIPSIS:
            while ib >= 0 and labels[ib] is not _ELLIPSIS:
                ib -= 1
            if ib >= 0:
                axes[i] = ib
                ib -= 1
        elif lab in labels:
            axes[i] = labels.index(lab)
    return axes


def _check_broadcast(combined, output: list, counts: dict[str, int],
                     out_shape: tuple[int, ...] | None) -> None:
    """numpy's iterator broadcast over output labels then summed labels
    (sorted by character code), including ``out`` when given."""
    iter_labels = list(output) + [lab for lab in sorted(counts, key=ord)
                                  if counts[lab] > 0 and lab not in output]
    if len(iter_labels) > MAX_DIMS:
        raise EinsumError("too many subscripts in einsum")
    operands = [(shape, _op_axes(labels, iter_labels)) for labels, shape in combined]
    if out_shape is not None:
        operands.append((list(out_shape),
                         list(range(len(output))) + [-1] * (len(iter_labels) - len(output))))
    bshape = [1] * len(iter_labels)
    for shape, axes in operands:
        for idim, axis in enumerate(axes):
            if axis < 0:
                continue
            n = shape[axis]
            if bshape[idim] == 1:
                bshape[idim] = n
            elif bshape[idim] != n and n != 1:
                raise EinsumError(
                    "operands could not be broadcast together with remapped shapes "
                    "[original->remapped]: " + "".join(
                        _shape_text(shape, "->")
                        + _shape_text([shape[a] if a >= 0 else -1 for a in axes], " ")
                        for shape, axes in operands))
    if out_shape is not None:
        for d in reversed(range(len(output))):
            if out_shape[d] == 1 and bshape[d] != 1:
                raise EinsumError(
                    f"output operand requires a reduction along dimension {d}, but the "
                    "reduction is not enabled. The dimension size of 1 does not match "
                    "the expected output shape.")


def _shape_text(dims: Sequence[int], ending: str) -> str:
    """numpy's ``convert_shape_to_string``: leading new axes (-1) dropped,
    inner ones printed as ``newaxis``."""
    i = 0
    while i < len(dims) and dims[i] < 0:
        i += 1
    if i == len(dims):
        return "()" + ending
    body = ",".join(str(n) if n >= 0 else "newaxis" for n in dims[i:])
    return f"({body},){ending}" if len(dims) == 1 else f"({body}){ending}"


def _build_spec(text, raw_inputs, raw_output, shapes, nbroadcast, implicit) -> EinsumSpec:
    def named(labels: list) -> tuple[str, ...]:
        k = labels.count(_ELLIPSIS)
        gen = iter(f"e{j}" for j in range(nbroadcast - k, nbroadcast))
        return tuple(next(gen) if lab is _ELLIPSIS else lab for lab in labels)

    inputs = tuple(named(ls) for ls in raw_inputs)
    output = named(raw_output)
    sizes: dict[str, int] = {}
    for labels, shape in zip(inputs, shapes):
        for lab, n in zip(labels, shape):
            if lab not in sizes or sizes[lab] == 1:
                sizes[lab] = n
    broadcast = tuple(tuple(n == 1 and sizes[lab] != 1 for lab, n in zip(labels, shape))
                      for labels, shape in zip(inputs, shapes))
    return EinsumSpec(subscripts=text, input_labels=inputs, output_labels=output,
                      sizes=tuple(sizes.items()), broadcast=broadcast, shapes=shapes,
                      implicit=implicit)


def subscripts_from_sublists(args: Sequence[Any]) -> tuple[str, list[Any]]:
    """numpy's interleaved form ``(op0, sublist0, op1, sublist1, ..., [out])``
    as ``(subscripts, operands)``; integers 0-25 are 'A'-'Z', 26-51 'a'-'z',
    ``Ellipsis`` is '...'."""
    operands = list(args[0::2])
    sublists = list(args[1::2])
    if len(args) % 2 == 1:
        output = args[-1]
        operands = operands[:-1]
    else:
        output = None
    parts = [_sublist_text(s) for s in sublists]
    text = ",".join(parts)
    if output is not None:
        text += "->" + _sublist_text(output)
    return text, operands


def _sublist_text(sublist: Any) -> str:
    if not hasattr(sublist, "__iter__"):
        raise BindingError("the subscripts for each operand must be a list or a tuple")
    out = []
    for item in sublist:
        if item is Ellipsis:
            out.append("...")
            continue
        try:
            if isinstance(item, (bool, np.bool_)):
                raise TypeError
            s = operator.index(item)
        except TypeError:
            raise BindingError("each subscript must be either an integer or an "
                               "ellipsis") from None
        if not 0 <= s < 52:
            raise EinsumError("subscript is not within the valid range [0, 52)")
        out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
    return "".join(out)


# ---------------------------------------------------------------------------
# lowering
# ---------------------------------------------------------------------------

def lower(spec: EinsumSpec, dtypes: Sequence[Any] | None = None,
          out_dtype: Any = None) -> ir.Program:
    """The parametric program of ``spec``.

    Operand ``k`` is the input tensor ``op{k}`` (dimension extent ``d_x`` for
    label ``x``, or the constant 1 for a broadcast dimension, which is read at
    index 0); the output is ``out``.  With summed labels: ``S0_init``
    (``out = 0`` over the output labels) then ``S0`` (``out += op0 * op1 ...``
    over output labels then summed labels, in order of first appearance);
    without: one ``S0`` (``out = op0 * op1 ...``).  The context allows every
    size ``>= 0``.  ``dtypes``/``out_dtype`` default to the spec's; raises
    :class:`~polyc.errors.DTypeError` for an element type polyc does not
    compile.
    """
    if dtypes is not None:
        spec = spec.with_dtypes(dtypes, out_dtype if out_dtype is not None
                                else np.result_type(*[np.dtype(d) for d in dtypes]))
    if spec.dtypes is None or spec.out_dtype is None:
        raise TypeError("einsum.lower needs the operands' dtypes (pass dtypes= to "
                        "parse or lower)")
    for name in spec.dtypes + (spec.out_dtype,):
        if name not in ir.C_TYPES:
            raise DTypeError(f"einsum does not support dtype {name}; supported: "
                             + ", ".join(ir.C_TYPES))

    params = tuple(param_name(lab) for lab in spec.labels)
    pspace = param_space(params)
    extent = {lab: aff_from_expr(E.Param(param_name(lab)), pspace) for lab in spec.labels}
    one = const_pw_aff(pspace, 1)

    tensors, shapes, reads, bindings = [], {}, [], {}
    for k, (labels, bcast) in enumerate(zip(spec.input_labels, spec.broadcast)):
        name = f"op{k}"
        shapes[name] = tuple(one if b else extent[lab] for lab, b in zip(labels, bcast))
        tensors.append(ir.Tensor(name, spec.dtypes[k], shapes[name], "input"))
        reads.append(E.Access(name, tuple(E.Const(0) if b else E.Index(lab)
                                          for lab, b in zip(labels, bcast))))
        for d, (lab, b) in enumerate(zip(labels, bcast)):
            if not b:
                bindings.setdefault(param_name(lab), (name, d))
    shapes["out"] = tuple(extent[lab] for lab in spec.output_labels)
    tensors.append(ir.Tensor("out", spec.out_dtype, shapes["out"], "output"))

    rhs: E.Expr = reads[0]
    for r in reads[1:]:
        rhs = E.Binary("*", rhs, r)
    lhs = E.Access("out", tuple(E.Index(lab) for lab in spec.output_labels))
    summed = spec.reduction_labels
    iterators = spec.output_labels + summed
    statements = []
    if summed:
        zero = E.Const(ir.identity("+", spec.out_dtype))
        statements.append(access.make_statement(
            name="S0_init", iterators=spec.output_labels,
            domain=_box(params, "S0_init", spec.output_labels), lhs=lhs, op="=",
            rhs=zero, shapes=shapes, kind="init",
            text=f"{E.to_text(lhs)} = {E.to_text(zero)}"))
        statements.append(access.make_statement(
            name="S0", iterators=iterators, domain=_box(params, "S0", iterators),
            lhs=lhs, op="+", rhs=rhs, shapes=shapes, kind="update",
            reduction_iterators=summed, text=f"{E.to_text(lhs)} +=! {E.to_text(rhs)}"))
    else:
        statements.append(access.make_statement(
            name="S0", iterators=iterators, domain=_box(params, "S0", iterators),
            lhs=lhs, op="=", rhs=rhs, shapes=shapes, kind="assign",
            text=f"{E.to_text(lhs)} = {E.to_text(rhs)}"))

    context = isl.Set.universe(pspace)
    for p in params:
        context = context.intersect(aff_from_expr(E.Param(p), pspace)
                                    .ge_set(const_pw_aff(pspace, 0)))
    program = ir.Program(name="einsum", params=params, context=context,
                         tensors=tuple(tensors), statements=tuple(statements),
                         param_bindings=bindings,
                         signature=tuple(f"op{k}" for k in range(spec.nop)),
                         source=spec.canonical)
    return widen_half_reductions(program)    # float32 accumulator for a half output


def _box(params: Sequence[str], name: str, labels: Sequence[str]) -> isl.Set:
    """``{ name[labels] : 0 <= x < d_x for every label x }``."""
    space = access.statement_space(params, name, labels)
    zero = const_pw_aff(space, 0)
    dom = isl.Set.universe(space)
    for lab in labels:
        x = aff_from_expr(E.Index(lab), space)
        dom = dom.intersect(x.ge_set(zero)).intersect(
            x.lt_set(aff_from_expr(E.Param(param_name(lab)), space)))
    return dom


def _dtype_name(d: Any) -> str:
    return np.dtype(d).name
