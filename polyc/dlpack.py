"""Arrays from other libraries, without copies: torch CPU tensors and any
other DLPack producer are read as numpy arrays through ``np.from_dlpack``
(the memory is shared), and results go back to torch as
``torch.from_numpy`` views when the inputs were torch tensors.  Used by
:class:`polyc.runtime.Kernel` and :func:`polyc.jit`; torch is imported only
when a torch tensor was given."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import BindingError


def is_foreign(x: Any) -> bool:
    """An array that is not a numpy array but exports DLPack."""
    return not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__")


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def as_numpy(x: Any) -> Any:
    """``x`` as a numpy array sharing its memory when it is a DLPack
    producer; anything else as it is.  Raises :class:`BindingError` when
    the producer refuses (a tensor on another device, one that needs grad)."""
    if not is_foreign(x):
        return x
    try:
        return np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError) as e:
        raise BindingError(f"cannot read a {type(x).__name__} through DLPack: {e}") from None


def to_torch(values: Any) -> Any:
    """numpy arrays (alone or in a tuple/list) as torch tensors sharing
    their memory; other values as they are."""
    import torch
    if isinstance(values, (tuple, list)):
        return type(values)(to_torch(v) for v in values)
    return torch.from_numpy(values) if isinstance(values, np.ndarray) else values
