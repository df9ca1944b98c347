"""Small integer dtypes through ``torch.compile(backend="polyc")``: uint8
images, int8/int16 tensors, and the uint8 constants torch's decompositions
make (``torch.eye``), against torch eager.  Skipped where torch is not
installed."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import polyc.graph.torch_backend  # noqa: E402,F401  (registers backend="polyc")


def _compile_matches(fn, *args, rtol=1e-5):
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend="polyc")(*args)
        ref = fn(*args)
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.dtype, r.dtype)
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=rtol)


def test_eye_is_a_constant_of_uint8_aranges():
    """``torch.eye`` decomposes into ``arange(dtype=torch.uint8)`` compared
    with itself, once refused as an unsupported dtype."""
    _compile_matches(lambda a: a + torch.eye(4), torch.randn(4, 4))
    _compile_matches(lambda a: a @ torch.eye(4, 3), torch.randn(2, 4))


class Preprocess(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, x):
        return self.conv((x.float() / 255.0 - self.mean) / self.std)


def test_uint8_image_input():
    torch.manual_seed(0)
    img = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    _compile_matches(Preprocess().eval(), img, rtol=1e-4)


def test_small_integer_arithmetic_and_int64_totals():
    """uint8 wraps as torch's does; its sums and cumulative sums are int64
    in torch (numpy's uint64, which polyc does not compute in)."""
    torch.manual_seed(1)
    img = torch.randint(0, 256, (2, 3, 5), dtype=torch.uint8)
    _compile_matches(lambda x: (x + x, x * 2, x - 3, x // 3, x.sum(), x.sum(-1), x.prod(1),
                                x.cumsum(-1), x.max(), x.to(torch.int32) - 200, x.float().mean()),
                     img)
    i8 = torch.randint(-128, 128, (3, 7), dtype=torch.int8)
    _compile_matches(lambda x: (x + x, x.abs(), -x, x.sum(-1), x.to(torch.float32) * 0.5), i8)
    i16 = torch.randint(-300, 300, (3, 7), dtype=torch.int16)
    _compile_matches(lambda x: (x * 300, x.cumsum(0)), i16)


def test_uint8_output():
    x = torch.randn(2, 5)
    _compile_matches(lambda x: (x.clamp(0, 1) * 255).round().to(torch.uint8), x)


def test_bitwise_xor_and_shifts():
    """``^``, ``<<`` and ``>>`` of integer tensors (and ``^`` of masks) were
    refused as unlowered operators."""
    torch.manual_seed(2)
    a = torch.randint(-100, 100, (3, 4))
    b = torch.randint(0, 5, (3, 4))
    _compile_matches(lambda a, b: ((a << 2) + (a >> 1) + (a ^ 5), a << b, a >> b, a ^ b,
                                   torch.bitwise_left_shift(a, b), ((a > 0) ^ (b < 2)).float()),
                     a, b)
    u8 = torch.randint(0, 256, (3, 4), dtype=torch.uint8)
    _compile_matches(lambda a: (a << 1, a >> 3, a ^ 255), u8)
