"""Assignment into a traced array, ``x[key] = value``, as a value update:
``x`` becomes ``np.where(region, value placed over x, x)``, one elementwise
operation (:meth:`~polyc.graph.core.Tracer.update_inplace` rebinds the
tracer, so every Python name bound to ``x`` sees the new value, as with an
ndarray).

Covered keys: a boolean mask over ``x``'s leading dimensions with a scalar
value (``x[x < 0] = 0``; ``x[mask] op= v`` with a scalar ``v``: ``x op v``
stored under the mask), and basic indices (ints, slices with any step,
``...``) with a value that broadcasts to the region (``out[:, :n] = a``,
``y[0] = 1``, ``u[1::2] = v``); the value is converted to ``x``'s dtype, as
numpy's unsafe assignment casting does.  ``x[key] op= value`` is this
assignment of ``x[key] op value`` (see ``Tracer.update_inplace``).
Refused, with the reason: an argument or captured array (numpy would change
the caller's array; polyc never does), a view (its base would change too:
assign into the base; the views of an array assigned into read its new
value, as numpy's), integer-array keys (a scatter), ``None`` in the
key, and an array value under a mask (its elements go to the True positions
in order: a data-dependent placement).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from . import views
from .core import Tracer, user_location
from .ops import Scalar, elementwise, materialize, operand, s_token
from .selection import MaskedSelection, same_mask
from .sizes import Size, SizeInt


def _refuse(t: Tracer, why: str) -> UnsupportedError:
    loc = user_location()
    return UnsupportedError(f"{loc}: assignment x[...] = value into a traced array: {why}"
                            f"\n    {loc.text}")


def _check_target(t: Tracer) -> None:
    node = t.node
    if node is not None and node.kind in ("arg", "captured"):
        what = "an argument" if node.kind == "arg" else "a captured array"
        raise _refuse(t, f"it is {what}; numpy would change the caller's array and polyc "
                         "never modifies its inputs: assign into a copy (x = x.copy()) or "
                         "build the result with np.where")
    if t._view_of is not None:
        raise _refuse(t, "it is a view of another array (a slice, transpose or reshape), "
                         "whose base would change too; assign into the base array")
    if t.dtype.kind == "b":
        raise _refuse(t, "assignment into a boolean mask is not supported; combine masks "
                         "with & | ~ or np.where")


def setitem(t: Tracer, key: Any, value: Any) -> None:
    """``t[key] = value``; raises :class:`~polyc.errors.UnsupportedError`
    for what the module docstring lists as refused, ``IndexError`` and
    ``ValueError`` as numpy does."""
    g = t._graph
    pending = g.pending_stores.get(id(value))
    selected = False
    if pending is not None and pending[0] is value and pending[1]._view_of is t:
        del g.pending_stores[id(value)]     # base[key] op= v, stored into the base
        selected = getattr(pending[1], "_selected_by", None) is key
    _check_target(t)
    keys = key if isinstance(key, tuple) else (key,)
    if isinstance(value, MaskedSelection):
        # y[m] = f(y[m], x[m]): the selection computed over the whole array
        if len(keys) != 1 or not same_mask(keys[0], value._key):
            raise _refuse(t, "x[mask] assigned under another key: its elements go to the "
                             "key's positions in order, a placement that depends on the "
                             "values; assign under the selection's own mask (y[m] = x[m])")
        t.update_inplace("[]", _masked(t, operand(g, keys[0]), value.full_value(t), True))
        return
    if len(keys) == 1 and isinstance(keys[0], (Tracer, np.ndarray)) and \
            keys[0].dtype.kind == "b" and (selected or not (
                isinstance(keys[0], np.ndarray) and np.size(getattr(value, "shape", ())) and
                int(np.prod(getattr(value, "shape", ()))) != 1)):
        new = _masked(t, operand(g, keys[0]), value, selected)
    elif any(isinstance(k, Tracer) for k in keys) and \
            any(isinstance(k, (Tracer, np.ndarray, list, bool, np.bool_)) for k in keys):
        raise _refuse(t, "traced integer-array or boolean keys among others (a scatter) "
                         "are not supported; use np.where with a mask")
    elif any(isinstance(k, (np.ndarray, list, bool, np.bool_)) for k in keys):
        new = _scattered(t, keys, value)
    else:
        new = _basic(t, keys, value)
    t.update_inplace("[]", new)


def assigned(t: Tracer, key: Any, value: Any) -> Tracer:
    """A new value: ``t`` with ``t[key] = value`` for basic keys (ints,
    slices, ``...``), ``t`` unchanged (the torch backend's ``slice_scatter``
    and ``select_scatter``).  ``value`` broadcasts to the region and is
    converted to ``t``'s dtype; raises ``IndexError`` as numpy does."""
    return _basic(t, key if isinstance(key, tuple) else (key,), value)


def _value(t: Tracer, value: Any) -> Tracer | Scalar:
    v = operand(t._graph, value)
    if isinstance(v, Scalar):
        return Scalar(t.dtype.type(v.value))
    if v.dtype != t.dtype:
        return materialize(t._graph, v, "astype", t.dtype)
    return v


def _where(t: Tracer, cond: Tracer, v: Tracer | Scalar) -> Tracer:
    """``np.where(cond, v, t)`` (``v`` already of ``t``'s dtype)."""
    return elementwise(t._graph, "setitem", lambda c, p, q: f"({c} ? {p} : {q})",
                       [cond, v, t], t.dtype, compute_dtype=t.dtype)


def selection_operand(t: Tracer, other: Any) -> Any:
    """``other`` of ``x[mask] op= other`` (``t`` the selection
    :func:`polyc.graph.views.getitem` made of the whole of ``x``): numpy
    applies it to the selected elements, a 1-D array whose length depends on
    the values (with ``x``'s dimensions after the mask's), so it must
    broadcast to those trailing dimensions alone."""
    mask = getattr(t, "_selected_by", None)
    if mask is None or not isinstance(other, (Tracer, np.ndarray)):
        return other
    shape = [int(getattr(s, "value", s)) for s in other.shape]
    while shape and shape[0] == 1:
        shape.pop(0)
    if len(shape) <= t.ndim - mask.ndim:
        return other
    loc = user_location()
    raise UnsupportedError(f"{loc}: x[mask] op= value with an array value of shape "
                           f"{tuple(other.shape)}: numpy applies it to the selected elements, "
                           f"whose number depends on the values; use a scalar (or a value "
                           f"for the dimensions after the mask's), or x = np.where(mask, "
                           f"x op value, x)\n    {loc.text}")


def _masked(t: Tracer, mask: Tracer, value: Any, selected: bool = False) -> Tracer:
    """``t[mask] = value``; ``selected``: ``value`` is ``t[mask] op v``
    computed over the whole of ``t`` (:func:`selection_operand`), of which
    the elements under the mask are stored."""
    if mask.ndim > t.ndim or any(a.value != b.value for a, b in zip(mask._shape, t._shape)):
        raise IndexError(f"boolean index of shape {tuple(s.value for s in mask._shape)} "
                         f"does not match the indexed array's leading dimensions "
                         f"{tuple(s.value for s in t._shape)}")
    for a, b in zip(mask._shape, t._shape):
        t._graph.symbols.unify(a, b, "a boolean index")
    v = _value(t, value)
    if mask.ndim < t.ndim:
        mask = views.reshape(mask, tuple(mask.shape) + (1,) * (t.ndim - mask.ndim))
    if selected:
        return _where(t, mask, v)
    if isinstance(v, Tracer) and any(s.value != 1 for s in v._shape):
        raise _refuse(t, "an array assigned under a boolean mask fills the True positions "
                         "in order, a placement that depends on the values; write "
                         "x = np.where(mask, values, x)")
    if isinstance(v, Tracer):
        v = views.reshape(v, ())
    return _where(t, mask, v)


def _scattered(t: Tracer, keys: tuple, value: Any) -> Tracer:
    """``t[keys] = value`` with index arrays known while tracing (numpy
    arrays, lists: ``b[np.triu_indices(n, 1)] = 0``, ``b[[0, 2]] += v``):
    numpy applies ``keys`` to the flat positions of ``t`` (its extents
    specialised), giving a constant mask of the positions written and, for
    an array value, the element of the value each one takes (the last of
    repeated positions, as numpy's assignment); then ``np.where``."""
    if any(k is None for k in keys):
        raise _refuse(t, "None (np.newaxis) in the key is not supported")
    shape = tuple(int(SizeInt(s, "an assignment through constant index arrays"))
                  for s in t._shape)
    n = int(np.prod(shape))
    picked = np.asarray(np.arange(n).reshape(shape)[keys if len(keys) > 1 else keys[0]])
    sel = picked.ravel()
    mask = np.zeros(n, dtype=bool)
    mask[sel] = True
    g = t._graph
    cond = operand(g, mask.reshape(shape))
    v = _value(t, value)
    if isinstance(v, Tracer) and any(s.value != 1 for s in v._shape):
        src = np.zeros(n, dtype=np.int64)
        src[sel] = np.arange(sel.size)
        flat = views.reshape(views.broadcast_to(v, list(picked.shape)), (-1,))
        from .gather import take  # (gather imports views, as this module does)
        v = take(g, flat, src.reshape(shape))
    elif isinstance(v, Tracer):
        v = views.reshape(v, ())
    return _where(t, cond, v)


def _basic(t: Tracer, keys: tuple, value: Any) -> Tracer:
    g = t._graph
    if any(k is None for k in keys):
        raise _refuse(t, "None (np.newaxis) in the key is not supported")
    expanded = views.expand_key(keys, t.ndim)        # (no None: refused above)
    conds, coords, region = [], [], []
    for d, k in enumerate(expanded):
        size, it = t._shape[d], views.ph(d)
        if isinstance(k, slice):
            start, length, step = views._slice(g, size, k)
            if step != 1:
                c, coord = _stepped(size, start, length, step, it)
                conds += c
                coords.append(coord)
                region.append(length)
                continue
            lo, hi = s_token(start), s_token(start + length)
            conds += ([] if lo == "0" else [f"{it} >= {lo}"]) + \
                ([] if (size - start - length).is_constant and
                 (size - start - length).value == 0 else [f"{it} < {hi}"])
            coords.append(it if lo == "0" else f"{it} - {lo}")
            region.append(length)
        else:
            idx = k.size if isinstance(k, SizeInt) else Size.constant(g.symbols, int(k))
            if not -size.value <= idx.value < size.value:
                raise IndexError(f"index {idx.value} is out of bounds for axis {d} with "
                                 f"size {size.value}")
            pos = idx if idx.value >= 0 else size + idx      # N - k stays symbolic
            g.symbols.require(pos, "an index")
            g.symbols.require(size - pos - 1, "an index")
            conds.append(f"{it} == {s_token(pos)}")
    v = _value(t, value)
    if isinstance(v, Tracer):
        v = views.broadcast_to(v, [SizeInt(s) for s in region])
        v = views._view(v, coords, t._shape)
    if any(r.is_constant and r.value == 0 for r in region):
        return t                # an empty region (x[5:2:2] = v): nothing changes
    cond = Tracer(g, "(" + " && ".join(conds) + ")" if conds else "1", (), t._shape,
                  np.dtype(bool))
    return _where(t, cond, v)



def _stepped(size: Size, start: Size, length: Size, step: int,
             it: str) -> tuple[list[str], str]:
    """The conditions on iterator ``it`` of the positions ``start + step *
    j`` (``0 <= j < length``) of a slice with a step, and the coordinate
    ``j`` of such a position.  :func:`views._slice` made the bounds
    constants (the extent specialised), except for ``::-1`` (``start = N -
    1``, every position: ``j = N - 1 - it``)."""
    if step == -1 and length.value == size.value and not length.is_constant:
        return [], f"{s_token(start)} - {it}"
    first, n = start.value, length.value
    if n == 0:
        return ["0"], "0"
    last = first + step * (n - 1)
    lo, hi, a = min(first, last), max(first, last), abs(step)
    off = f"{it} - {first}" if step > 0 else f"{first} - {it}"
    return [f"{it} >= {lo}", f"{it} <= {hi}", f"({off}) % {a} == 0"], f"({off}) / {a}"
