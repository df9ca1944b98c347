"""``polyc run|compile|explain --target cuda`` (and ``--emulate``,
``--gpu-block``) end to end, in-process through ``polyc.cli.main``."""

from __future__ import annotations

import json

import pytest

from polyc.cli import main

MM = """\
# sizes: M=37 N=45 K=13
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""


@pytest.fixture
def mm_file(tmp_path, monkeypatch):
    # these tests are about the loop mapping of a GEMM (blocks, threads,
    # promotion): keep the matmul off the SIMT GEMM call (test_wmma.py)
    monkeypatch.setenv("POLYC_GPU_SIMT_GEMM", "0")
    p = tmp_path / "mm.tc"
    p.write_text(MM)
    return str(p)


def test_run_on_the_emulator_checks(mm_file, capsys):
    assert main(["run", mm_file, "--emulate", "--check", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["check"]["passed"]


def test_compile_prints_cuda_and_the_mapped_loops(mm_file, capsys):
    assert main(["compile", mm_file, "--target", "cuda", "--emit", "cuda",
                 "--gpu-block", "4,16"]) == 0
    src = capsys.readouterr().out
    assert '__global__ void __launch_bounds__(64) polyc_k0' in src
    assert main(["compile", mm_file, "--target", "cuda", "--emit", "ast"]) == 0
    nest = capsys.readouterr().out
    assert "launch kernel 0" in nest and "[block.x]" in nest and "[thread.y]" in nest


def test_explain_reports_the_mapping(mm_file, capsys):
    assert main(["explain", mm_file, "--target", "cuda", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (k,) = data["gpu"]["kernels"]
    assert k["tile"] == [8, 32] and k["blocks"] == ["y", "x"] and not data["gpu"]["emulated"]
    assert main(["explain", mm_file, "--emulate"]) == 0
    assert "GPU mapping (polyc.schedule.gpu_mapping) [emulated on the CPU]" in \
        capsys.readouterr().out


def test_usage_errors(mm_file, capsys):
    assert main(["compile", mm_file, "--emit", "cuda"]) == 2
    assert "--emit cuda needs --target cuda" in capsys.readouterr().err
    assert main(["run", mm_file, "--emulate", "--gpu-block", "8,x"]) == 2
    assert "--gpu-block" in capsys.readouterr().err
    assert main(["run", mm_file, "--emulate", "--gpu-block", "64,64"]) == 2
    assert "1024" in capsys.readouterr().err
    # contradictory flags were silently resolved: --target c --emulate ran the
    # CUDA emulation, --gpu-block on the C target was ignored
    assert main(["run", mm_file, "--target", "c", "--emulate", "--check"]) == 2
    assert "contradicts --target c" in capsys.readouterr().err
    for argv in (["run", mm_file, "--gpu-block", "8,8"],
                 ["compile", mm_file, "--target", "c", "--gpu-block", "8,8"],
                 ["einsum", "ij,jk->ik", "--shapes", "3x4,4x5", "--gpu-block", "4,4"]):
        assert main(argv) == 2
        assert "--gpu-block sizes the CUDA target" in capsys.readouterr().err
    assert main(["run", mm_file, "--emulate", "--gpu-block", "4,4", "--check"]) == 0


def test_a_half_matmul_runs_on_emulated_tensor_cores_from_the_cli(mm_file, capsys):
    assert main(["run", mm_file, "--emulate", "--check", "--json", "--dtype", "float16"]) == 0
    assert json.loads(capsys.readouterr().out)["check"]["passed"]
    assert main(["compile", mm_file, "--target", "cuda", "--emit", "cuda",
                 "--dtype", "bfloat16"]) == 0
    assert "polyc_wmma_bf16_bf16(" in capsys.readouterr().out
    assert main(["explain", mm_file, "--target", "cuda", "--emulate", "--dtype", "float16"]) == 0
    assert "tensor cores (WMMA m16n16k16, float16 operands" in capsys.readouterr().out


def test_explain_json_gives_a_row_kernels_phases_and_barriers(capsys):
    """``polyc explain examples/softmax.tc --target cuda --json``: one row
    kernel, its phases, and each barrier with the dependence behind it;
    ``--emit ast`` shows the barriers and block reductions."""
    from pathlib import Path
    softmax = str(Path(__file__).resolve().parents[2] / "examples" / "softmax.tc")
    assert main(["explain", softmax, "--target", "cuda", "--json"]) == 0
    (k,) = json.loads(capsys.readouterr().out)["gpu"]["kernels"]
    assert k["phases"] == ["thread0", "reduce S0", "threads", "thread0", "reduce S2", "threads"]
    assert [b.split(":")[0] for b in k["barriers"]] == ["before S1", "before S3"]
    assert "flow dependence on maxVal from S0 to S1" in k["barriers"][0]
    assert main(["compile", softmax, "--target", "cuda", "--emit", "ast"]) == 0
    nest = capsys.readouterr().out
    assert nest.count("barrier ") == 2 and nest.count("block reduction of ") == 2


def test_einsum_takes_the_cuda_options(monkeypatch, capsys):
    """``polyc einsum ... --target cuda --emulate --gpu-block``: the options
    of run/compile/explain (refused as unrecognized arguments before)."""
    import polyc.einsum_call as ec
    seen = []
    real = ec.einsum
    monkeypatch.setattr(ec, "einsum", lambda *a, **kw: seen.append(kw["config"]) or real(*a, **kw))
    assert main(["einsum", "bij,bjk->bik", "--shapes", "3x17x5,3x5x33", "--target", "cuda",
                 "--emulate", "--gpu-block", "3,5", "--check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["check"]["passed"]
    assert seen and all(c.target == "cuda" and c.emulate and c.gpu_block == (3, 5)
                        for c in seen)
