"""The backend registry (``polyc.backends.base``): one ``Backend`` per
target, imported on first use, the C one never pulling in CUDA."""

from __future__ import annotations

import subprocess
import sys

import pytest

from polyc.backends.base import CallSpec, Source, backend


def test_targets_have_backends():
    assert backend("c").name == "c" and backend("cuda").name == "cuda"
    with pytest.raises(KeyError, match="known: c, cuda"):
        backend("opencl")


def test_the_c_backend_does_not_import_cuda():
    code = ("import sys; from polyc.backends.base import backend; backend('c'); "
            "assert not any(m.startswith('polyc.backends.cuda') for m in sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_source_carries_its_call_spec():
    src = Source(text="", entry="polyc_kernel", params=("N",), tensors=("A", "B"))
    assert src.spec == CallSpec(("N",), ("A", "B"))
    from polyc.backends.c import emit
    assert emit.Source is Source
