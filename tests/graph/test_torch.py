"""The torch path: ``torch.compile(model, backend="polyc")`` against torch
eager, its refusals (graphs that need gradients, operators polyc does not
lower), and torch tensors crossing into polyc kernels and jitted functions
without copies.  Skipped where torch is not installed."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import polyc  # noqa: E402
import polyc.graph.torch_backend as tb  # noqa: E402  (registers backend="polyc")
from polyc.errors import UnsupportedError  # noqa: E402
from polyc.testing import assert_close  # noqa: E402


class MLP(nn.Module):
    def __init__(self, d_in=8, d_hidden=16, d_out=4, approximate="none", norm=False):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.GELU(approximate=approximate)
        self.fc2 = nn.Linear(d_hidden, d_out)
        self.norm = nn.LayerNorm(d_out) if norm else nn.Identity()

    def forward(self, x):
        return self.norm(self.fc2(self.act(self.fc1(x))))


class Attention(nn.Module):
    def __init__(self, d=16, causal=False):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.d, self.causal = d, causal

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if self.causal:
            t = x.shape[1]
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(mask, float("-inf"))
        return self.o(torch.softmax(att, dim=-1) @ v)


def _check_against_eager(model: nn.Module, x: torch.Tensor, reduction_length: int):
    """Compiled (float32) against eager in float64, with float32's tolerance."""
    torch.manual_seed(0)
    model = model.eval()
    with torch.no_grad():
        got = torch.compile(model, backend="polyc")(x)
        ref = model.double()(x.double())
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert_close(got.numpy(), ref.numpy(), dtype=np.float32,
                 reduction_length=reduction_length)


@pytest.mark.parametrize("approximate,norm", [("none", False), ("tanh", True)])
def test_linear_gelu_linear(approximate, norm):
    torch.manual_seed(1)
    _check_against_eager(MLP(approximate=approximate, norm=norm), torch.randn(3, 8), 16)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal):
    torch.manual_seed(2)
    _check_against_eager(Attention(causal=causal), torch.randn(2, 5, 16), 16 * 5)


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_scaled_dot_product_attention_causal():
    """torch's own attention decomposes into operators polyc lowers."""
    torch.manual_seed(6)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    with torch.no_grad():
        got = torch.compile(SDPA(), backend="polyc")(q, k, v)
        ref = SDPA()(q.double(), k.double(), v.double())
    assert_close(got.numpy(), ref.numpy(), dtype=np.float32, reduction_length=8)


def test_multihead_attention_module():
    torch.manual_seed(7)
    m = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        got, _ = torch.compile(m, backend="polyc")(x, x, x)
        ref, _ = m.double()(x.double(), x.double(), x.double())
    assert_close(got.numpy(), ref.numpy(), dtype=np.float32, reduction_length=16 * 5)


def test_inference_mode():
    torch.manual_seed(3)
    m, x = MLP(), torch.randn(2, 8)
    with torch.inference_mode():
        got = torch.compile(m, backend="polyc")(x)
        ref = m(x)
    assert_close(got.numpy(), ref.numpy(), reduction_length=16)


class ManyOps(nn.Module):
    """One graph over many lowerings: activations, reductions with dims and
    keepdim, views (permute, slicing, select, reshape/view), cat, where,
    log_softmax, clamp, pow, rsqrt, several outputs."""

    def forward(self, x, y):
        a = torch.relu(x) + torch.sigmoid(y) * nn.functional.silu(x)
        b = (a.var(dim=-1, keepdim=True) + a.mean(dim=(0,), keepdim=True).sum()
             - a.amax(-1, keepdim=True))
        c = torch.log_softmax(a.permute(1, 0), dim=0).permute(1, 0)
        d = torch.cat([c[:, :2], c[:, 2:]], dim=1) * torch.rsqrt(b.clamp(min=0.5) + 1)
        e = torch.where(x > 0, d, x.pow(2)) + x[1].unsqueeze(0)
        f = e.reshape(2, -1).sum(0).view(e.shape[0] // 2, -1)
        return e, f.std(dim=1), torch.tanh(e).clamp(-0.5, 0.5)


def test_many_operators_in_one_graph(monkeypatch):
    from polyc.graph.plan import Plan
    runs = []
    run = Plan.run
    monkeypatch.setattr(Plan, "run", lambda self, *a, **k: runs.append(1) or run(self, *a, **k))
    torch.manual_seed(4)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    m = ManyOps()
    with torch.no_grad():
        got = torch.compile(m, backend="polyc")(x, y)
        ref = m(x.double(), y.double())
    assert runs, "polyc did not run the graph"
    for g, r in zip(got, ref):
        assert_close(g.numpy(), r.numpy(), dtype=np.float32, reduction_length=24)


def test_batch_sizes_recompile_once_with_symbolic_sizes(monkeypatch):
    """TorchDynamo recompiles for a second batch size with symbolic sizes;
    polyc reads them from the tensors' shapes, so one trace serves every
    later batch size."""
    torch._dynamo.reset()          # automatic dynamic shapes remember earlier tests' sizes
    made = []
    compile_aten = tb._compile_aten
    monkeypatch.setattr(tb, "_compile_aten",
                        lambda gm, ex: made.append(compile_aten(gm, ex)) or made[-1])
    torch.manual_seed(5)
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4), nn.Softmax(-1))
    with torch.no_grad():
        c = torch.compile(m, backend="polyc")
        for b in (3, 5, 7, 9):
            x = torch.randn(b, 8)
            assert_close(c(x).numpy(), m(x).numpy(), reduction_length=16)
    assert len(made) == 2                      # static, then dynamic
    assert sum(len(v) for v in made[-1].jitted._plans.values()) == 1


def test_transposed_inputs_after_contiguous_ones():
    """The recompile for transposed inputs has symbolic strides that are no
    tensor's extent (and that the graph never reads): they are dropped,
    not passed to the traced function as static arguments."""
    torch._dynamo.reset()

    class M(nn.Module):
        def forward(self, x, y):
            return (x.t() @ y).relu() + x.sum(0)[:, None]
    torch.manual_seed(6)
    with torch.no_grad():
        c = torch.compile(M(), backend="polyc")
        for x, y in ((torch.randn(6, 4), torch.randn(6, 3)),
                     (torch.randn(4, 6).t(), torch.randn(3, 6).t()),
                     (torch.randn(5, 7).t(), torch.randn(2, 7).t())):
            assert_close(c(x, y).numpy(), M()(x, y).numpy(), reduction_length=7)


def test_constant_tensors_and_their_assertions():
    """A tensor made in ``forward`` is a graph constant (read outside
    AOTAutograd's fake-tensor mode) and the range check ``one_hot`` asserts
    on it runs while tracing; on an input's values it runs at each call
    (``tests/graph/test_torch_checks.py``), not dropped."""
    torch._dynamo.reset()

    class Const(nn.Module):
        def forward(self, x):
            return nn.functional.one_hot(torch.tensor([1, 0, 2]), 3).float() @ x[:3]

    class Traced(nn.Module):
        def forward(self, x, i):
            return nn.functional.one_hot(i, 4).float() @ x
    x = torch.randn(4, 4)
    with torch.no_grad():
        assert_close(torch.compile(Const(), backend="polyc")(x).numpy(), Const()(x).numpy())
        traced = torch.compile(Traced(), backend="polyc")
        i = torch.tensor([1, 3])
        assert_close(traced(x, i).numpy(), Traced()(x, i).numpy())
        with pytest.raises(polyc.IndexBoundsError, match="num_classes"):
            traced(x, torch.tensor([1, 4]))


def _polyc_cause(exc: BaseException) -> BaseException:
    """The polyc error inside TorchDynamo's ``BackendCompilerFailed``."""
    seen = exc
    while seen is not None and not isinstance(seen, polyc.PolycError):
        seen = getattr(seen, "inner_exception", None) or seen.__cause__
    assert seen is not None, f"no polyc error in {exc!r}"
    return seen


class MathOps(nn.Module):
    """The math functions, rounding, sign and prod: a sinusoidal encoding's
    sin and cos, a softplus's log1p, ..."""

    def forward(self, x):
        a = torch.sin(3 * x) + torch.cos(x) + torch.tan(0.5 * x) + torch.atan(x)
        b = torch.asin(0.9 * torch.tanh(x)) + torch.acos(0.5 * torch.tanh(x))
        c = torch.sinh(x) + torch.cosh(x) + torch.log1p(x.abs()) + torch.expm1(0.5 * x)
        d = torch.exp2(x) + torch.log2(x.abs() + 1) + torch.log10(x.abs() + 1)
        e = torch.floor(4 * x) + torch.ceil(4 * x) + torch.trunc(4 * x) + torch.round(4 * x)
        f = torch.atan2(x, 1 + x.abs()) + torch.hypot(x, 2 * x) + torch.logaddexp(x, -x)
        return (a + b + c + d + e + f + torch.sign(x), (1 + 0.1 * x).prod(dim=-1),
                torch.cumsum(x, dim=1), torch.cumprod(1 + 0.1 * x, dim=0),
                torch.argmax(x, dim=1), x.argmin(dim=0, keepdim=True),
                torch.div(4 * x, 0.3, rounding_mode="floor") + torch.fmod(4 * x, 0.7)
                + torch.remainder(4 * x, 0.7) + torch.copysign(x, -x)
                + torch.div(4 * x, 0.3, rounding_mode="trunc") + torch.heaviside(x, 0.5 + x)
                + torch.nan_to_num(x / (x > 0)),
                torch.flip(x, (0,)) + torch.roll(x, (1, -2), (0, 1)) + torch.roll(x, 3))


def test_math_operators():
    torch.manual_seed(5)
    x = torch.randn(6, 5)
    m = MathOps()
    with torch.no_grad():
        got = torch.compile(m, backend="polyc")(x)
        ref = m(x)
    for g, r in zip(got, ref):
        if r.dtype == torch.int64:
            np.testing.assert_array_equal(g.numpy(), r.numpy())
        else:
            assert_close(g.numpy(), r.numpy(), reduction_length=5)


def test_graph_needing_gradients_is_refused():
    m = nn.Linear(4, 3)                       # parameters require grad, grad mode on
    with pytest.raises(Exception) as info:
        torch.compile(m, backend="polyc")(torch.randn(2, 4))
    err = _polyc_cause(info.value)
    assert isinstance(err, UnsupportedError)
    assert "torch.no_grad()" in str(err) and "inference" in str(err)


def test_input_requiring_grad_is_refused():
    x = torch.randn(2, 4, requires_grad=True)
    with pytest.raises(Exception) as info:
        torch.compile(lambda t: t * 2, backend="polyc")(x)
    assert isinstance(_polyc_cause(info.value), UnsupportedError)


class Sort(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=0).values + 1


def test_unsupported_operator_names_op_and_line():
    """Documented policy (docs/torch.md): no partitioning; the compile fails
    with an UnsupportedError naming each operator and the model line."""
    with torch.no_grad(), pytest.raises(Exception) as info:
        torch.compile(Sort(), backend="polyc")(torch.randn(3, 2))
    err = _polyc_cause(info.value)
    assert isinstance(err, UnsupportedError)
    assert "aten.sort" in str(err)
    assert "test_torch.py" in str(err) and "torch.sort(x, dim=0)" in str(err)


def test_backend_is_registered():
    assert "polyc" in torch._dynamo.list_backends()
    assert torch._dynamo.lookup_backend("polyc") is tb.polyc_backend


def test_polyc_does_not_import_torch():
    code = ("import sys, polyc, polyc.graph; polyc.jit; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


# -- DLPack: torch tensors in and out without copies ------------------------------
_ADD = """
def add(float(N) A, float(N) B) -> (C) {
    C(i) = A(i) + B(i) where i in 0:N
}
"""


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_kernel_reads_and_returns_torch_tensors_without_copies(monkeypatch):
    from polyc.runtime import Binder
    kernel = polyc.compile(_ADD)
    seen = {}
    bind = Binder.bind

    def spy(self, args, out):
        seen["args"] = [_ptr(a) for a in args]
        got = bind(self, args, out)
        seen["results"] = [_ptr(r) for r in got[2]]
        return got
    monkeypatch.setattr(Binder, "bind", spy)
    a, b = torch.arange(6, dtype=torch.float32), torch.ones(6)
    c = kernel(a, b)
    assert seen["args"] == [a.data_ptr(), b.data_ptr()]
    assert isinstance(c, torch.Tensor) and c.data_ptr() == seen["results"][0]
    np.testing.assert_array_equal(c.numpy(), np.arange(6, dtype=np.float32) + 1)
    # out= as a torch tensor is written in place
    out = torch.empty(6)
    r = kernel(a, b, out=out)
    assert r.data_ptr() == out.data_ptr()
    np.testing.assert_array_equal(out.numpy(), c.numpy())
    # numpy arrays still come back as numpy arrays
    assert type(kernel(a.numpy(), b.numpy())) is np.ndarray


@polyc.kernel
def _axpy_rows(alpha, A, B):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            A[i, j] += alpha * B[i, j]


def test_loop_kernel_updates_torch_tensors_in_place():
    """README: "Kernels ... take torch CPU tensors"; a ``@polyc.kernel``
    function refused them (``DTypeError: expected a numpy array``).  They are
    read through DLPack and updated in place, a transposed view too; a tensor
    that requires grad is a ``BindingError``."""
    a = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    b = torch.ones(3, 4, dtype=torch.float64)
    ptr, expected = a.data_ptr(), a.numpy() + 2.0 * b.numpy()
    assert _axpy_rows(2.0, a, b) is None
    assert a.data_ptr() == ptr
    np.testing.assert_array_equal(a.numpy(), expected)
    t = torch.zeros(4, 3, dtype=torch.float32).t()        # a non-contiguous view
    _axpy_rows(0.5, t, torch.ones(3, 4, dtype=torch.float32))
    np.testing.assert_array_equal(t.numpy(), np.full((3, 4), 0.5, np.float32))
    with pytest.raises(polyc.BindingError, match="DLPack"):
        _axpy_rows(1.0, torch.zeros(2, 2, dtype=torch.float64, requires_grad=True),
                   torch.zeros(2, 2, dtype=torch.float64))


def test_jit_reads_and_returns_torch_tensors_without_copies(monkeypatch):
    from polyc.graph.plan import Plan

    @polyc.jit
    def softmax(x):
        p = np.exp(x - x.max(axis=-1, keepdims=True))
        return p / p.sum(axis=-1, keepdims=True)

    seen = {}
    run = Plan.run

    def spy(self, arrays, sizes, **kw):
        seen["in"] = {k: _ptr(v) for k, v in arrays.items()}
        env = run(self, arrays, sizes, **kw)
        seen["out"] = {k: _ptr(v) for k, v in env.items() if isinstance(v, np.ndarray)}
        return env
    monkeypatch.setattr(Plan, "run", spy)
    x = torch.randn(3, 5)
    y = softmax(x)
    assert x.data_ptr() in seen["in"].values()
    assert isinstance(y, torch.Tensor) and y.data_ptr() in seen["out"].values()
    assert_close(y.numpy(), torch.softmax(x, -1).numpy(), reduction_length=5)


def test_docs_list_every_lowering():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "torch.md").read_text()
    table = doc[doc.index("### Operators"):]
    words = set(table.replace("`", " ").replace(",", " ").split())
    missing = [str(op) for op in tb.LOWERINGS
               if str(op).removeprefix("aten.") not in words]
    assert not missing, f"docs/torch.md does not list {missing}"


class _Producer:
    """A DLPack producer that is neither numpy nor torch."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_kernel_takes_any_dlpack_producer():
    kernel = polyc.compile(_ADD)
    a = np.arange(4, dtype=np.float32)
    c = kernel(_Producer(a), _Producer(a))
    assert type(c) is np.ndarray
    np.testing.assert_array_equal(c, 2 * a)


def test_unsupported_dtype_is_refused():
    m = nn.Linear(4, 3).to(torch.bfloat16)
    with torch.no_grad(), pytest.raises(Exception) as info:
        torch.compile(m, backend="polyc")(torch.randn(2, 4).to(torch.bfloat16))
    err = _polyc_cause(info.value)
    assert isinstance(err, UnsupportedError) and "torch.bfloat16" in str(err)


def test_a_float16_model_compiles_and_matches_its_float32_self():
    """torch.float16 crosses as numpy float16: Linear-GELU-Linear in half,
    against the same weights in float32 (float16 tolerance, 64-term sums)."""
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                            torch.nn.Linear(64, 16)).eval()
    x = torch.randn(8, 32)
    with torch.no_grad():
        ref = m(x.half().float())
        m.half()
        y = torch.compile(m, backend="polyc")(x.half())
    assert y.dtype == torch.float16
    assert_close(y.numpy(), ref.numpy().astype(np.float16), reduction_length=64)


def test_kv_cache_decode_steps_share_one_trace(monkeypatch):
    """A decoder step with its key and value caches passed in and grown by
    ``torch.cat``: from the dynamic recompile on, one polyc trace serves
    every cache length.  Two defects specialised the length (a new trace
    and plan, seconds, per step): ``expand`` compared the symbolic size
    ``L + 1`` with -1, and the two caches' lengths (two symbols, equal in
    torch) met as ``L_k + 1 == L_v + 1`` in a matmul, which fixed both."""
    torch._dynamo.reset()
    made = []
    compile_aten = tb._compile_aten
    monkeypatch.setattr(tb, "_compile_aten",
                        lambda gm, ex: made.append(compile_aten(gm, ex)) or made[-1])

    class Step(nn.Module):
        def __init__(self, d=16, h=2):
            super().__init__()
            self.qkv, self.o, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), h

        def forward(self, x, kc, vc):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2)
                       for z in self.qkv(x).split(d, dim=-1))
            k, v = torch.cat([kc, k], dim=2), torch.cat([vc, v], dim=2)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.h), -1)
            return self.o((att @ v).transpose(1, 2).reshape(b, t, d)), k, v

    torch.manual_seed(7)
    m = Step().eval()
    kc, vc = torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8)
    kr, vr = kc, vc
    with torch.no_grad():
        c = torch.compile(m, backend="polyc")
        for _ in range(5):
            x = torch.randn(2, 1, 16)
            y, kc, vc = c(x, kc, vc)
            yr, kr, vr = m(x, kr, vr)
            assert_close(y.numpy(), yr.numpy(), reduction_length=16)
            assert_close(kc.numpy(), kr.numpy(), reduction_length=16)
            assert_close(vc.numpy(), vr.numpy(), reduction_length=16)
    assert len(made) == 2                      # static, then dynamic
    assert sum(len(v) for v in made[-1].jitted._plans.values()) == 1


def test_sequence_lengths_share_one_trace(monkeypatch):
    """``nn.Linear`` on ``(B, T, D)`` arrives as ``view(B*T, D)``, ``addmm``
    and ``view(B, T, N)``; polyc's reshape that merges ``B`` and ``T``
    specialised ``T``, so every new sequence length traced and planned the
    block again.  The merge is folded away (``torch_fold.py``): from the
    dynamic recompile on, one trace serves every length and batch."""
    torch._dynamo.reset()
    made = []
    compile_aten = tb._compile_aten
    monkeypatch.setattr(tb, "_compile_aten",
                        lambda gm, ex: made.append(compile_aten(gm, ex)) or made[-1])

    class Block(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.ln, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 16), nn.Linear(16, d)
            self.w = nn.Parameter(torch.randn(d, 3))

        def forward(self, x):
            x = x + self.down(torch.tanh(self.up(self.ln(x))))
            b, t, d = x.shape
            return x, torch.addmm(self.down.bias[:3], x.reshape(-1, d), self.w,
                                  beta=0.5, alpha=2.0).view(b, t, 3)

    torch.manual_seed(8)
    m = Block().eval()
    with torch.no_grad():
        c = torch.compile(m, backend="polyc")
        for shape in ((2, 5, 8), (3, 7, 8), (4, 9, 8), (2, 16, 8), (5, 3, 8)):
            x = torch.randn(*shape)
            for g, r in zip(c(x), m(x)):
                assert_close(g.numpy(), r.numpy(), reduction_length=16)
    assert len(made) == 2                      # static, then dynamic
    assert sum(len(v) for v in made[-1].jitted._plans.values()) == 1


class _GRUFromZeros(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 8)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 8)
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
        return h


class _PositionsAndCausalMask(nn.Module):
    def forward(self, x):
        t, d = x.shape[1], x.shape[2]
        pos = torch.arange(t, dtype=torch.float32)[:, None]
        pe = torch.sin(pos * torch.exp(torch.arange(0, d).float() * -0.5))
        x = x + pe
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = (x @ x.transpose(1, 2)).masked_fill(mask, float("-inf"))
        return torch.softmax(att, -1) @ x


@pytest.mark.parametrize("model, shapes", [
    (_GRUFromZeros, [(2, 3, 4), (3, 3, 4), (6, 3, 4), (9, 3, 4)]),
    (_PositionsAndCausalMask, [(2, 5, 8), (2, 7, 8), (2, 9, 8), (2, 12, 8)])])
def test_tensors_made_of_symbolic_sizes_share_one_trace(monkeypatch, model, shapes):
    """``torch.zeros(x.shape[0], 8)`` (an RNN's first state), ``torch.arange(T)``
    and ``torch.ones(T, T, dtype=torch.bool).triu(1)`` of a dynamic size
    were made as numpy arrays, which read the size and specialised the plan
    to it: every batch size or sequence length traced again.  They are
    traced (``like=`` an argument), the size symbolic: one trace."""
    torch._dynamo.reset()
    made = []
    compile_aten = tb._compile_aten
    monkeypatch.setattr(tb, "_compile_aten",
                        lambda gm, ex: made.append(compile_aten(gm, ex)) or made[-1])
    torch.manual_seed(9)
    m = model().eval()
    with torch.no_grad():
        c = torch.compile(m, backend="polyc")
        for shape in shapes:
            x = torch.randn(*shape)
            assert_close(c(x).numpy(), m(x).numpy(), reduction_length=16)
    assert len(made) == 2                      # static, then dynamic
    assert sum(len(v) for v in made[-1].jitted._plans.values()) == 1


def test_negative_indices_of_torch_gathers_raise_at_the_model_line():
    """torch raises for a negative index of ``embedding``/``index_select``/
    ``gather``; polyc counted it from the end, as numpy does, and returned
    values.  The IndexBoundsError names the model's line where the graph
    records it (not torch's internals)."""
    from polyc.errors import IndexBoundsError

    class Pick(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(10, 4))

        def forward(self, i, j):
            rows = torch.index_select(self.w, 0, i) * 2
            return rows + torch.gather(self.w[:3], 1, j).sum()

    m = Pick().eval()
    emb = torch.nn.Embedding(10, 4).eval()
    with torch.no_grad():
        c, ce = torch.compile(m, backend="polyc"), torch.compile(emb, backend="polyc")
        i, j = torch.tensor([1, 9, 0]), torch.tensor([[0, 3], [1, 2], [3, 3]])
        assert_close(c(i, j).numpy(), m(i, j).numpy())
        assert_close(ce(i[None]).numpy(), emb(i[None]).numpy())
        for bad_i, bad_j in ((torch.tensor([1, -2, 0]), j), (i, torch.tensor([[0, -1]] * 3))):
            with pytest.raises(IndexBoundsError, match="indices from the end are not allowed") \
                    as err:
                c(bad_i, bad_j)
            assert "test_torch.py" in str(err.value), err.value
        with pytest.raises(IndexBoundsError, match="index -1 is out of bounds"):
            ce(torch.tensor([[1, -1]]))
        with pytest.raises(IndexBoundsError, match="index 10 is out of bounds"):
            ce(torch.tensor([[1, 10]]))
    # numpy's gathers still count a negative index from the end
    x = np.arange(20.0).reshape(5, 4)
    np.testing.assert_array_equal(polyc.jit(lambda x, k: x[k])(x, np.array([-1, 2])),
                                  x[[-1, 2]])
