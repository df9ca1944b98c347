"""Views: new read templates over the same nodes (nothing is copied).

Slicing, ``None``/``...``, integer indices, transposes, ``expand_dims``,
``squeeze``, ``broadcast_to``, window views and affine reshapes are folded
into the consumer's access relations.  A reshape regroups dimensions of
equal element counts; inside a group the flat index is affine when the
extents it is multiplied by are constants, so the extents that a split or
a merge multiplies by are specialised (a guard on the plan) — isl's
quasi-affine ``floor(i / 64)`` and ``i mod 64`` then give exact access
relations.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import UnsupportedError
from .core import Graph, Tracer, augmented_subscript_read, compose, user_location
from .ops import digit_coords, normalize_axis, s_token, to_size
from .sizes import Size, SizeInt


def _view(t: Tracer, coords: Sequence[str], shape: Sequence[Size]) -> Tracer:
    """The view whose element ``{0}, {1}, ...`` is ``t``'s element at ``coords``."""
    out = Tracer(t._graph, compose(t._template, list(coords)), t._nodes, tuple(shape), t.dtype)
    out._literal_dtype = t._literal_dtype
    return out.became_view_of(t, coords)


def ph(k: int) -> str:
    return f"{{{k}}}"


def transpose(t: Tracer, axes: Sequence[int] | None = None) -> Tracer:
    nd = t.ndim
    axes = list(range(nd))[::-1] if axes is None else [normalize_axis(int(a), nd) for a in axes]
    if sorted(axes) != list(range(nd)):
        raise ValueError("axes don't match array")
    inv = [0] * nd
    for j, d in enumerate(axes):
        inv[d] = j
    return _view(t, [ph(inv[d]) for d in range(nd)], [t._shape[d] for d in axes])


def swapaxes(t: Tracer, a: int, b: int) -> Tracer:
    axes = list(range(t.ndim))
    a, b = normalize_axis(a, t.ndim), normalize_axis(b, t.ndim)
    axes[a], axes[b] = axes[b], axes[a]
    return transpose(t, axes)


def moveaxis(t: Tracer, source, destination) -> Tracer:
    src = [normalize_axis(int(s), t.ndim) for s in np.atleast_1d(source)]
    dst = [normalize_axis(int(s), t.ndim) for s in np.atleast_1d(destination)]
    order = [n for n in range(t.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(t, order)


def expand_dims(t: Tracer, axis) -> Tracer:
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = t.ndim + len(axes)
    axes = sorted(normalize_axis(int(a), nd) for a in axes)
    one = Size.constant(t._graph.symbols, 1)
    coords, shape, k = [], [], 0
    for d in range(nd):
        if d in axes:
            shape.append(one)
        else:
            coords.append(ph(d))
            shape.append(t._shape[k])
            k += 1
    return _view(t, coords, shape)


def squeeze(t: Tracer, axis=None) -> Tracer:
    if axis is None:
        axes = [d for d, s in enumerate(t._shape) if s.value == 1]
    else:
        axes = [normalize_axis(int(a), t.ndim)
                for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
        for a in axes:
            if t._shape[a].value != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 "equal to one")
    coords, shape = [], []
    for d, s in enumerate(t._shape):
        if d in axes:
            t._graph.symbols.unify(s, Size.constant(t._graph.symbols, 1), "squeeze")
            coords.append("0")
        else:
            coords.append(ph(len(shape)))
            shape.append(s)
    return _view(t, coords, shape)


def broadcast_to(t: Tracer, shape: Sequence[Any]) -> Tracer:
    g = t._graph
    target = [to_size(g, s) for s in shape]
    off = len(target) - t.ndim
    if off < 0:
        raise ValueError("input operand has more dimensions than allowed by the axis remapping")
    coords = []
    for d, s in enumerate(t._shape):
        big = target[off + d]
        if s.value == 1 and big.value != 1:
            g.symbols.unify(s, Size.constant(g.symbols, 1), "broadcast_to")
            coords.append("0")
        else:
            if s.value != big.value:
                raise ValueError(f"operands could not be broadcast together with remapped "
                                 f"shapes {tuple(x.value for x in t._shape)} and requested "
                                 f"shape {tuple(x.value for x in target)}")
            g.symbols.unify(s, big, "broadcast_to")
            coords.append(ph(off + d))
    return _view(t, coords, target)


def expand_key(key: tuple, ndim: int) -> list:
    """``key`` (an index tuple) with its ``...`` replaced by full slices and
    full slices added for the dimensions it does not name, so that it names
    all ``ndim`` dimensions (``None`` entries kept, naming none).  Raises
    numpy's ``IndexError`` for two ellipses, too many indices or a float."""
    if any(isinstance(k, (float, np.floating)) for k in key):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                         "(`None`) and integer or boolean arrays are valid indices")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{n_real} were indexed")
    expanded: list[Any] = []
    for k in key:
        expanded += [slice(None)] * (ndim - n_real) if k is Ellipsis else [k]
    return expanded + [slice(None)] * (ndim - sum(1 for k in expanded if k is not None))


def getitem(t: Tracer, key: Any) -> Tracer:
    """Basic indexing: ints, slices, ``None`` and ``...`` (integer arrays,
    advanced indexing, are :func:`polyc.graph.gather.getitem`'s)."""
    g = t._graph
    if not isinstance(key, tuple):
        key = (key,)
    if any(isinstance(k, (bool, np.bool_)) or (
            isinstance(k, (Tracer, np.ndarray)) and k.dtype.kind == "b") for k in key):
        if len(key) == 1 and not isinstance(key[0], (bool, np.bool_)) and \
                augmented_subscript_read():
            # x[mask] op= v: the whole of x, its update stored back under the
            # mask (polyc.graph.setitem.selection_operand and _masked)
            sel = _view(t, [ph(d) for d in range(t.ndim)], t._shape)
            sel._selected_by = key[0]
            return sel
        loc = user_location()
        # (x[mask].sum(), a where= reduction: polyc.graph.gather.getitem)
        raise UnsupportedError(f"{loc}: boolean indexing (a result whose size depends on "
                               f"the values) is not supported in traced code; use np.where, "
                               f"or reduce it at once (x[mask].sum(), .mean(), .max(): "
                               f"numpy's where=)\n    {loc.text}")
    if any(isinstance(k, (Tracer, np.ndarray, list)) for k in key):
        raise UnsupportedError("internal: integer array indices are polyc.graph.gather's")
    expanded = expand_key(key, t.ndim)
    coords, shape, d = [], [], 0
    one = Size.constant(g.symbols, 1)
    for k in expanded:
        if k is None:
            shape.append(one)
            continue
        size = t._shape[d]
        d += 1
        if isinstance(k, slice):
            start, length, step = _slice(g, size, k)
            j = ph(len(shape))
            coords.append(_affine(start, step, j))
            shape.append(length)
        else:
            idx = k.size if isinstance(k, SizeInt) else Size.constant(g.symbols, int(k))
            v = idx.value
            if not -size.value <= v < size.value:
                raise IndexError(f"index {v} is out of bounds for axis {d - 1} with size "
                                 f"{size.value}")
            pos = idx if v >= 0 else size + idx   # N - k stays symbolic
            g.symbols.require(pos, "an index")
            g.symbols.require(size - pos - 1, "an index")
            coords.append(s_token(pos))
    return _view(t, coords, shape)


def _affine(start: Size, step: int, j: str) -> str:
    s = s_token(start)
    term = j if step == 1 else f"{step}*{j}"
    return term if s == "0" else f"{s} + {term}"


def _slice(g: Graph, size: Size, k: slice) -> tuple[Size, Size, int]:
    """(start, length, step) of slice ``k`` over ``size``: symbolic for
    step 1 with bounds that are None or ints (negative ones from the end)
    when numpy would not clamp them at this size; else the size is
    specialised."""
    def as_int(v):
        return v.size.value if isinstance(v, SizeInt) else v
    step = 1 if k.step is None else int(k.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    start_v, stop_v, _ = slice(as_int(k.start), as_int(k.stop), step).indices(size.value)
    n = len(range(start_v, stop_v, step))
    if step == 1:
        def bound(v, default: Size) -> Size | None:
            if v is None:
                return default
            if isinstance(v, SizeInt):
                # an extent (of another array, say) as a bound: its sign
                # decides whether numpy counts it from the end; guarded
                if v.size.value < 0:
                    g.symbols.require(v.size.scale(-1) - Size.constant(g.symbols, 1),
                                      "a slice bound counted from the end")
                    return size + v.size
                g.symbols.require(v.size, "a slice bound")
                return v.size
            v = int(v)
            return Size.constant(g.symbols, v) if v >= 0 else size + v
        zero = Size.constant(g.symbols, 0)
        lo, hi = bound(k.start, zero), bound(k.stop, size)
        if lo.value == start_v and hi.value - lo.value == n and n >= 0 and \
                0 <= lo.value <= size.value and hi.value <= size.value:
            if hi.value - lo.value > 0 or (hi - lo).is_constant:
                # numpy clamps nothing while 0 <= lo <= hi <= size: the plan's guard
                for form in (lo, hi - lo, size - hi):
                    g.symbols.require(form, "a slice's bounds")
                return lo, hi - lo, 1
    if step == -1 and k.start is None and k.stop is None:
        # x[::-1]: start N - 1, length N, affine for every N >= 1
        return size - 1, size, -1
    bounds = [v.size for v in (k.start, k.stop) if isinstance(v, SizeInt)]
    for form in [size] + bounds:
        for s in form.symbols():
            g.symbols.fix(s, "a slice whose bounds numpy clamps or steps over")
    return Size.constant(g.symbols, start_v), Size.constant(g.symbols, n), step


def reshape(t: Tracer, newshape: Sequence[Any], order: str = "C") -> Tracer:
    """numpy's reshape; ``order="F"`` reads and writes the elements with
    the first index fastest: the C-order reshape of the transposed array to
    the reversed shape, transposed back.  ``"A"`` and ``"K"`` (ravel) follow
    the memory layout numpy would give the array (an F-ordered argument, a
    transposed view), which a traced array does not have: refused
    (``UnsupportedError``) for two or more dimensions, ``"C"`` otherwise."""
    if order in ("A", "K"):
        if sum(1 for s in t._shape if not (s.is_constant and s.normal().const == 1)) > 1:
            raise UnsupportedError(
                f"{user_location()}: reshape/ravel with order={order!r} of a "
                f"{t.ndim}-d array follows numpy's memory layout of the array (an "
                "F-ordered argument or a transposed view reads in F order), which a "
                "traced array does not have; write order='C' or order='F'")
        order = "C"
    if order == "F":
        shape = (newshape,) if isinstance(newshape, (int, np.integer, SizeInt)) else \
            tuple(newshape)
        return transpose(reshape(transpose(t), shape[::-1]))
    if order != "C":
        raise UnsupportedError(f"{user_location()}: reshape with order={order!r} is not "
                               "supported; only 'C', 'F' and 'A'")
    base = t if t._reshape_base is None else t._reshape_base
    out = _reshape(base, newshape)
    if out is not base:
        out._reshape_base = base
    return out


def _reshape(t: Tracer, newshape: Sequence[Any]) -> Tracer:
    g = t._graph
    if isinstance(newshape, (int, np.integer, SizeInt)):
        newshape = (newshape,)
    newshape = list(newshape)
    total = 1
    for s in t._shape:
        total *= s.value
    unknown = [k for k, s in enumerate(newshape) if not isinstance(s, SizeInt) and int(s) == -1]
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = 1
    for k, s in enumerate(newshape):
        if k not in unknown:
            known *= s.size.value if isinstance(s, SizeInt) else int(s)
    if unknown:
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape array of size {total} into shape "
                             f"{tuple(newshape)}")
        newshape[unknown[0]] = None
    elif known != total:
        shown = tuple(s.size.value if isinstance(s, SizeInt) else s for s in newshape)
        raise ValueError(f"cannot reshape array of size {total} into shape {shown}")
    in_sizes = list(t._shape)
    one = Size.constant(g.symbols, 1)
    for sz in in_sizes:
        if sz.value == 1 and not sz.is_constant:
            # regrouped as an extent of 1 (read at index 0): specialised
            g.symbols.unify(sz, one, "reshape drops an extent of 1")
    if total == 0:
        # an empty array: nothing to address; its extents become constants
        for sz in in_sizes:
            for sym in sz.symbols():
                g.symbols.fix(sym, "a reshape of an empty array")
        vals = [0 if s is None else (s.size.value if isinstance(s, SizeInt) else int(s))
                for s in newshape]
        return _view(t, ["0"] * t.ndim, [Size.constant(g.symbols, v) for v in vals])
    out_vals = [(total // known if unknown else 0) if s is None else
                (s.size.value if isinstance(s, SizeInt) else int(s)) for s in newshape]
    # group dimensions of equal element counts (size-1 dimensions on their own)
    groups: list[tuple[list[int], list[int]]] = []
    i = o = 0
    while i < len(in_sizes) or o < len(out_vals):
        in_one = i < len(in_sizes) and in_sizes[i].value == 1
        out_one = o < len(out_vals) and out_vals[o] == 1
        if out_one and not in_one:
            groups.append(([], [o]))
            o += 1
            continue
        if in_one and not out_one:
            groups.append(([i], []))
            i += 1
            continue
        gi, go = [i], [o]
        pi, po = in_sizes[i].value, out_vals[o]
        i, o = i + 1, o + 1
        while pi != po:
            if pi < po:
                gi.append(i)
                pi *= in_sizes[i].value
                i += 1
            else:
                go.append(o)
                po *= out_vals[o]
                o += 1
        groups.append((gi, go))
    coords: list[str] = ["0"] * len(in_sizes)
    out_shape: list[Size | None] = [None] * len(out_vals)
    why = "reshape multiplies by it"
    for gi, go in groups:
        if not gi:
            out_shape[go[0]] = Size.constant(g.symbols, 1)
            continue
        if not go:
            continue
        if len(gi) == 1 and len(go) == 1:
            src = in_sizes[gi[0]]
            given = newshape[go[0]]
            if isinstance(given, SizeInt):
                g.symbols.unify(src, given.size, "reshape")
            elif given is not None:
                g.symbols.unify(src, Size.constant(g.symbols, int(given)), "reshape")
            out_shape[go[0]] = src
            coords[gi[0]] = ph(go[0])
            continue
        # sizes multiplied by: every in/out extent but the group's first
        for k in gi[1:]:
            for s in in_sizes[k].symbols():
                g.symbols.fix(s, why)
        outs: list[Size] = []
        for k in go:
            given = newshape[k]
            outs.append(given.size if isinstance(given, SizeInt) else
                        Size.constant(g.symbols, out_vals[k]))
        for s in outs[1:]:
            for sym in s.symbols():
                g.symbols.fix(sym, why)
        inner_out = 1
        for k in go[1:]:
            inner_out *= out_vals[k]
        prod_in = in_sizes[gi[0]]
        inner_in = 1
        for k in gi[1:]:
            inner_in *= in_sizes[k].value
        prod_in = prod_in.scale(inner_in)
        lead = prod_in.floordiv(inner_out, why) if newshape[go[0]] is None else outs[0]
        g.symbols.unify(lead.scale(inner_out), prod_in, "reshape")
        out_shape[go[0]] = lead
        for j, k in enumerate(go[1:], 1):
            out_shape[k] = outs[j]
        # flat index inside the group
        flat_terms = []
        stride = inner_out
        for j, k in enumerate(go):
            if j > 0:
                stride //= out_vals[k]
            flat_terms.append(ph(k) if stride == 1 else f"{stride}*{ph(k)}")
        flat = " + ".join(flat_terms)
        for k, coord in zip(gi, digit_coords(flat, [in_sizes[k].value for k in gi])):
            coords[k] = coord
    return _view(t, coords, [s if s is not None else Size.constant(g.symbols, 1)
                             for s in out_shape])


def sliding_window_view(t: Tracer, window_shape, axis=None) -> Tracer:
    g = t._graph
    ws = [int(w) for w in np.atleast_1d(window_shape)]
    axes = list(range(t.ndim)) if axis is None else [
        normalize_axis(int(a), t.ndim) for a in np.atleast_1d(axis)]
    if len(ws) != len(axes):
        raise ValueError("Since axis is `None`, must provide window_shape for all dimensions "
                         "of `x`; got {} window_shape elements and `x.ndim` is {}."
                         .format(len(ws), t.ndim) if axis is None else
                         "Must provide matching length window_shape and axis; got "
                         f"{len(ws)} window_shape elements and {len(axes)} axes elements.")
    shape = list(t._shape)
    coords = [ph(d) for d in range(t.ndim)]
    for j, (a, w) in enumerate(zip(axes, ws)):
        if w < 0:
            raise ValueError("`window_shape` cannot contain negative values")
        if shape[a].value < w:
            raise ValueError("window shape cannot be larger than input array shape")
        g.symbols.require(shape[a] - w, "a window")
        shape[a] = shape[a] - (w - 1)
        coords[a] = f"{coords[a]} + {ph(t.ndim + j)}"
    shape += [Size.constant(g.symbols, w) for w in ws]
    return _view(t, coords, shape)
