"""The ``polyc`` command line: in-process through ``polyc.cli.main`` (with
``capsys``) and as a real subprocess for the exit statuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polyc.reference
from polyc.cli import main


@pytest.fixture(autouse=True)
def _loops_not_calls(monkeypatch):
    """These tests read the loops polyc generates for matmul-like kernels:
    keep contractions as loops (tests/cpu/test_tensorize.py covers the
    calls of the GEMM intrinsic)."""
    monkeypatch.setenv("POLYC_TENSORIZE", "0")

ROOT = Path(__file__).resolve().parents[2]

MM = """\
# A small matmul with a sizes header.
# sizes: M=7 N=5 K=13
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""
TWO = MM + """\
def tr(float(M, N) A) -> (T) {
    T(j, i) = A(i, j)
}
"""
NO_SIZES = """\
def mm(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""
STRIDED = """\
# sizes: H=31 KH=3 S=2
def strided(float(H) I, float(KH) W, int64 S) -> (O) {
    O(h) +=! I(h*S + kh) * W(kh)
}
"""
BAD = """\
def f(float(N) A) -> (B) {
    B(i) = A(i where i in 0:N
}
"""


@pytest.fixture
def tcfile(tmp_path):
    def write(text: str, name: str = "k.tc") -> str:
        p = tmp_path / name
        p.write_text(text)
        return str(p)
    return write


def run_main(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc, out, err):
    assert rc == 2, (rc, out, err)
    assert err.startswith("polyc: error:"), err
    assert "Traceback" not in err and "Traceback" not in out


# --- polyc run -------------------------------------------------------------------

def test_run_check_passes(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--check"])
    assert rc == 0, err
    assert "def mm" in out and "M=7" in out and "K=13" in out
    assert "check C(7, 5)" in out and "ok" in out and "MISMATCH" not in out


def test_run_json_is_one_object_with_the_documented_keys(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--check", "--bench", "--json"])
    assert rc == 0, err
    assert len(out.strip().splitlines()) == 1
    report = json.loads(out)
    assert report["def"] == "mm"
    assert report["sizes"] == {"M": 7, "N": 5, "K": 13}
    assert isinstance(report["compile_s"], float) and report["compile_s"] >= 0
    check = report["check"]
    assert check["passed"] is True
    c = check["outputs"]["C"]
    assert 0 <= c["max_abs"] < 1e-4 and 0 <= c["max_rel"] < 1e-3
    bench = report["bench"]
    assert bench["polyc_s"] > 0 and bench["numpy_s"] > 0


def test_run_sizes_override_the_header(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--sizes", "M=2,K=31", "--check",
                                     "--json"])
    assert rc == 0, err
    report = json.loads(out)
    assert report["sizes"] == {"M": 2, "N": 5, "K": 31}
    assert report["check"]["outputs"]["C"]["shape"] == [2, 5]


def test_run_sizes_without_header(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(NO_SIZES), "--sizes", "M=3 N=1 K=257",
                                     "--check", "--json"])
    assert rc == 0, err
    assert json.loads(out)["check"]["outputs"]["C"]["shape"] == [3, 1]


def test_run_dtype_float64(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--dtype", "float64", "--check",
                                     "--json"])
    assert rc == 0, err
    report = json.loads(out)
    assert report["dtypes"] == {"A": "float64", "B": "float64", "C": "float64"}
    assert report["check"]["outputs"]["C"]["max_rel"] < 1e-10


def test_run_specialising_def_takes_the_stride_from_sizes(capsys, tcfile):
    path = tcfile(STRIDED)
    for s, n in (("2", 15), ("3", 10)):
        rc, out, err = run_main(capsys, ["run", path, "--sizes", f"S={s}", "--check", "--json"])
        assert rc == 0, err
        assert json.loads(out)["check"]["outputs"]["O"]["shape"] == [n]


def test_run_def_selects_among_several(capsys, tcfile):
    path = tcfile(TWO)
    rc, out, err = run_main(capsys, ["run", path, "--def", "tr", "--check", "--json"])
    assert rc == 0, err
    report = json.loads(out)
    assert report["def"] == "tr"
    assert report["check"]["outputs"]["T"]["shape"] == [5, 7]
    assert report["check"]["outputs"]["T"]["max_abs"] == 0.0


def test_run_several_defs_without_def_is_a_usage_error(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(TWO), "--check"])
    assert_user_error(rc, out, err)
    assert "mm" in err and "tr" in err and "--def" in err


def test_run_unknown_def(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(TWO), "--def", "nope"])
    assert_user_error(rc, out, err)
    assert "nope" in err and "mm" in err and "tr" in err


@pytest.mark.parametrize("command", ["run", "compile", "explain"])
@pytest.mark.parametrize("text", ["", "# sizes: N=4\n# only comments\n"])
def test_file_without_a_definition(capsys, tcfile, command, text):
    path = tcfile(text, "empty.tc")
    for extra in ([], ["--def", "f"]):
        rc, out, err = run_main(capsys, [command, path, *extra])
        assert_user_error(rc, out, err)
        assert err.startswith(f"polyc: error: {path} holds no TC definition "
                              "(def NAME(...) -> (...) { ... })"), err
        assert "def f(float(N) A) -> (B) { B(i) = A(i) }" in err


def test_python_file_without_a_kernel(capsys, tcfile):
    path = tcfile("import numpy as np\n", "plain.py")
    rc, out, err = run_main(capsys, ["compile", path])
    assert_user_error(rc, out, err)
    assert f"{path} holds no @polyc.kernel function" in err and "--def" in err
    rc, out, err = run_main(capsys, ["compile", path, "--def", "f"])
    assert_user_error(rc, out, err)
    assert "no function 'f'" in err and "defines none" in err


def test_failing_check_exits_1(capsys, tcfile, monkeypatch):
    real = polyc.reference.evaluate

    def perturbed(program, inputs, sizes, *a, **kw):
        return {k: v + np.asarray(0.5, dtype=v.dtype) for k, v in real(program, inputs, sizes,
                                                                        *a, **kw).items()}

    monkeypatch.setattr(polyc.reference, "evaluate", perturbed)
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--check"])
    assert rc == 1, (out, err)
    assert "MISMATCH" in out
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--check", "--json"])
    assert rc == 1
    report = json.loads(out)
    assert report["check"]["passed"] is False
    assert report["check"]["outputs"]["C"]["max_abs"] == pytest.approx(0.5, rel=1e-3)


def test_syntax_error_is_exit_2_with_location_and_caret(capsys, tcfile):
    path = tcfile(BAD, "bad.tc")
    rc, out, err = run_main(capsys, ["run", path, "--sizes", "N=4"])
    assert_user_error(rc, out, err)
    assert f"{path}:2:16:" in err
    lines = err.splitlines()
    src = next(i for i, line in enumerate(lines) if "B(i) = A(i where" in line)
    caret = lines[src + 1]
    assert caret.index("^") == lines[src].index("where")


def test_source_errors_name_the_file(capsys, tmp_path):
    """A file that is not UTF-8, a malformed sizes header and a Python
    syntax error are user errors (exit 2) at the file's line and column."""
    latin1 = tmp_path / "latin1.tc"
    latin1.write_bytes(b"# caf\xe9\n# sizes: N=4\ndef f(float(N) x) -> (y) { y(i) = x(i) }\n")
    sizes = tmp_path / "sizes.tc"
    sizes.write_text("def f(float(N) x) -> (y) { y(i) = x(i) + 1.0 }\n# sizes: N=abc\n")
    py = tmp_path / "bad.py"
    py.write_text("import polyc\n@polyc.kernel\ndef f(A):\n    for i in range(A.shape[0]:\n"
                  "        A[i] = 1\n")
    for argv, where in ((["run", str(latin1)], f"{latin1}:1:6: byte 0xe9"),
                        (["run", str(sizes)], f"{sizes}:2:10: malformed size"),
                        (["compile", str(py), "--emit", "c"], f"{py}:4:")):
        rc, out, err = run_main(capsys, argv)
        assert_user_error(rc, out, err)
        assert where in err and "<tc>" not in err


def test_unknown_size_is_a_usage_error(capsys, tmp_path):
    path = tmp_path / "s.tc"
    path.write_text("def f(float(N) x) -> (y) { y(i) = x(i) }\n")
    rc, out, err = run_main(capsys, ["run", str(path), "--sizes", "N=3,Q=4"])
    assert_user_error(rc, out, err)
    assert "def f has no size Q (its sizes: N)" in err


def test_missing_file_is_exit_2(capsys, tmp_path):
    missing = str(tmp_path / "nope.tc")
    rc, out, err = run_main(capsys, ["run", missing, "--check"])
    assert_user_error(rc, out, err)
    assert missing in err


def test_missing_sizes_are_named(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(NO_SIZES), "--sizes", "M=3"])
    assert_user_error(rc, out, err)
    assert "K" in err and "N" in err and "--sizes" in err


def test_missing_stride_is_named(capsys, tcfile):
    text = STRIDED.replace("# sizes: H=31 KH=3 S=2", "# sizes: H=31 KH=3")
    rc, out, err = run_main(capsys, ["run", tcfile(text), "--check"])
    assert_user_error(rc, out, err)
    assert "S" in err


@pytest.mark.parametrize("sizes", ["M", "M=x", "M=-1", "M=99999999999999999999"])
def test_malformed_sizes(capsys, tcfile, sizes):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--sizes", sizes])
    assert_user_error(rc, out, err)
    assert "--sizes" in err


AXPY = """\
# sizes: N=5
def axpy(float a, float(N) X, float(N) Y) -> (Z) {
    Z(i) = a * X(i) + Y(i)
}
"""


def test_run_def_with_rank0_input(capsys, tcfile):
    rc, out, err = run_main(capsys, ["run", tcfile(AXPY), "--check", "--json"])
    assert rc == 0, err
    assert json.loads(out)["check"]["passed"] is True


SHIFTED_LUT = """\
# sizes: E=5 D=3 B=2 L=4
def shifted(float(E, D) LUT, int32(B, L) I) -> (O) {
    O(i, j) +=! LUT(1 + j + I(i, k), j)
}
"""


def test_run_random_indices_out_of_bounds_are_a_user_error(capsys, tcfile):
    # TC's shiftedLut: random values of I in [0, E) put 1 + j + I(i, k) past LUT's
    # end; the reference reads first (the kernel would read out of bounds), and
    # its IndexError was "internal error" (exit 3)
    rc, out, err = run_main(capsys, ["run", tcfile(SHIFTED_LUT), "--check"])
    assert_user_error(rc, out, err)
    assert "LUT(1 + j + I(i, k), j) reads index 5 of dimension 0 of LUT (extent 5)" in err
    assert "call the kernel from Python with index values that do" in err


def test_compile_emits_c_for_tc_casts_and_let_bindings(capsys, tcfile):
    text = "def f(float(N) a) -> (b) {\n  b(i) = float(x > 1) + double(x) where x = a(i)\n}\n"
    rc, out, err = run_main(capsys, ["compile", tcfile(text), "--emit", "program"])
    assert rc == 0, err
    assert "b(i) = cast_float32(a(i) > 1) + cast_float64(a(i))" in out


# --- polyc compile ---------------------------------------------------------------

@pytest.mark.parametrize("emit,marker", [
    ("c", "#pragma omp parallel for"),
    ("schedule", "domain"),
    ("deps", "flow"),
    ("ast", "for "),
    ("program", "S0_init"),
])
def test_compile_emit(capsys, tcfile, emit, marker):
    rc, out, err = run_main(capsys, ["compile", tcfile(MM), "--emit", emit])
    assert rc == 0, err
    assert marker in out, out


def test_compile_emit_c_is_compilable_c(capsys, tcfile):
    rc, out, _ = run_main(capsys, ["compile", tcfile(MM), "--emit", "c"])
    assert rc == 0
    assert "#pragma omp simd" in out and "int64_t" in out


def test_compile_emit_program_names_the_accesses(capsys, tcfile):
    rc, out, _ = run_main(capsys, ["compile", tcfile(TWO), "--def", "tr", "--emit", "program"])
    assert rc == 0
    assert "T[j, i]" in out and "A[i, j]" in out


# --- polyc einsum ----------------------------------------------------------------

def test_einsum_check_json(capsys):
    rc, out, err = run_main(capsys, ["einsum", "ij,jk->ik", "--shapes", "32x16,16x8",
                                     "--check", "--json"])
    assert rc == 0, err
    report = json.loads(out)
    assert report["check"]["passed"] is True
    assert report["check"]["outputs"]["out"]["shape"] == [32, 8]


def test_einsum_mismatched_shapes_is_exit_2(capsys):
    rc, out, err = run_main(capsys, ["einsum", "ij,jk->ik", "--shapes", "32x16,15x8"])
    assert_user_error(rc, out, err)


def test_einsum_negative_extent_is_a_usage_error(capsys):
    # numpy's "negative dimensions" ValueError was reported as an internal error
    rc, out, err = run_main(capsys, ["einsum", "ij,jk->ik", "--shapes", "3x-4,4x5"])
    assert_user_error(rc, out, err)
    assert "--shapes" in err and "3x-4" in err



@pytest.mark.parametrize("shape", ["99999999999x99999999999", "0x99999999999x99999999999",
                                   "99999999999999999999999x2"])
def test_einsum_shapes_past_the_address_space_are_a_usage_error(capsys, shape):
    # numpy's "array is too big" / "Maximum allowed dimension exceeded"
    # ValueError allocating the operands was reported as an internal error
    rc, out, err = run_main(capsys, ["einsum", "ijk->" if shape.count("x") == 2 else "ij->",
                                     "--shapes", shape])
    assert_user_error(rc, out, err)
    assert "--shapes" in err and shape in err


def test_einsum_zero_extent_shapes_match_numpy(capsys):
    rc, out, err = run_main(capsys, ["einsum", "ijk->", "--shapes", "0x4x5", "--check"])
    assert rc == 0 and "ok" in out, (out, err)


def test_a_warning_is_one_polyc_line_on_every_command(capsys, tcfile, tmp_path, monkeypatch):
    # polyc run with POLYC_CACHE_DIR naming a file printed Python's warning
    # format: "/.../polyc/pipeline.py:268: CacheWarning: polyc: ..." and the
    # library's source line (only polyc tune had the one-line form)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    monkeypatch.setenv("POLYC_CACHE_DIR", str(blocker))
    # a program of its own: no earlier test's kernel in memory, so the cache is consulted
    src = "def warned_once(float(N) A) -> (B) { B(i) = A(i) * 3.0 }\n"
    rc, out, err = run_main(capsys, ["run", tcfile(src), "--sizes", "N=5", "--check"])
    assert rc == 0 and "ok" in out, (out, err)
    assert err.startswith("polyc: warning: cache directory"), err
    assert "pipeline.py" not in err and "CacheWarning" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("subscripts, shapes", [("->", "()"), ("->...", "()"), ("->", "")])
def test_einsum_subscripts_starting_with_an_arrow(capsys, subscripts, shapes):
    # argparse took '->' (a scalar's subscripts) for an option: "the
    # following arguments are required: subscripts"
    rc, out, err = run_main(capsys, ["einsum", subscripts, "--shapes", shapes, "--check",
                                     "--json"])
    assert rc == 0, (out, err)
    report = json.loads(out)
    assert report["subscripts"] == subscripts and report["check"]["passed"]

# --- real processes: exit statuses -------------------------------------------------

def polyc_cmd() -> list[str]:
    return [sys.executable, "-m", "polyc.cli"]


def run_process(args, cmd=None):
    return subprocess.run([*(cmd or polyc_cmd()), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_process_run_check_exit_0(tcfile):
    p = run_process(["run", tcfile(MM), "--check", "--json"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["check"]["passed"] is True


def test_process_user_errors_exit_2_without_traceback(tcfile, tmp_path):
    for args in (["run", tcfile(BAD, "bad.tc"), "--sizes", "N=3"],
                 ["run", str(tmp_path / "missing.tc")],
                 ["run", tcfile(NO_SIZES, "nosizes.tc")],
                 ["run", tcfile(TWO, "two.tc")],
                 ["compile", tcfile("# no definition\n", "empty.tc")]):
        p = run_process(args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "polyc: error:" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_process_syntax_error_shows_caret(tcfile):
    path = tcfile(BAD, "bad.tc")
    p = run_process(["compile", path, "--sizes", "N=3"])
    assert p.returncode == 2
    assert f"{path}:2:16:" in p.stderr and "^" in p.stderr


def test_process_bad_command_line_is_exit_2():
    p = run_process(["compile"])  # argparse: missing FILE
    assert p.returncode == 2


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", [["compile", "{tc}", "--emit", "c"],
                                  ["run", "{tc}", "--json"], ["einsum", "ij", "--shapes", "2x2"]])
def test_process_output_to_a_full_disk_is_a_user_error(tcfile, args):
    # ENOSPC writing stdout was "polyc: internal error: OSError ... (this is a polyc bug)"
    path = tcfile(MM)
    with open("/dev/full", "w") as full:
        p = subprocess.run([*polyc_cmd(), *[a.format(tc=path) for a in args]], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stderr == "polyc: error: cannot write the output: No space left on device\n"


@pytest.mark.skipif(shutil.which("polyc") is None, reason="polyc script not installed")
def test_console_script(tcfile):
    p = run_process(["run", tcfile(MM), "--check"], cmd=[shutil.which("polyc")])
    assert p.returncode == 0, p.stderr
    assert "ok" in p.stdout


def test_explain_reports_row_fusion(capsys, tcfile):
    path = tcfile("def sm(float(N, C) I) -> (m, O) {\n    m(n) max=! I(n, c)\n"
                  "    O(n, c) = exp(I(n, c) - m(n))\n}\n")
    rc, out, _ = run_main(capsys, ["explain", path])
    assert rc == 0 and "row fusion (polyc.schedule.rowfuse)" in out and "row loop n" in out
    rc, out, _ = run_main(capsys, ["explain", path, "--json"])
    assert rc == 0 and json.loads(out)["row_fusion"].startswith("statements S0_init, S0, S1")
    rc, out, _ = run_main(capsys, ["explain", path, "--json", "--fusion", "min"])
    assert rc == 0 and json.loads(out)["row_fusion"] == ""


GRAPH_PY = """\
import numpy as np

def softmax(x):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)

def branchy(x):
    if x.sum() > 0:
        return x
    return -x

SCALE = 2.0
"""


def test_explain_numpy_function_plan(capsys, tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(GRAPH_PY)
    rc, out, _ = run_main(capsys, ["explain", str(path), "--def", "softmax",
                                   "--shapes", "16x33"])
    assert rc == 0 and "graph softmax: 1 kernel(s)" in out and "fused" in out
    rc, out, _ = run_main(capsys, ["explain", str(path), "--def", "softmax",
                                   "--shapes", "16x33", "--json"])
    assert rc == 0 and json.loads(out)["kernels"] == 1
    rc, _, err = run_main(capsys, ["explain", str(path), "--def", "branchy",
                                   "--shapes", "4x4"])
    assert rc == 2 and "prog.py:8" in err and "bool()" in err
    rc, _, err = run_main(capsys, ["explain", str(path), "--def", "nope", "--shapes", "4"])
    assert rc == 2 and "defines no nope" in err
    # as many shapes as the function takes arrays: a usage error naming them
    rc, _, err = run_main(capsys, ["explain", str(path), "--def", "softmax",
                                   "--shapes", "4x4,4x4"])
    assert rc == 2 and "2 array(s) for softmax(x)" in err and "internal error" not in err
    # --def naming a module constant: inspect's TypeError was an internal error
    rc, out, err = run_main(capsys, ["explain", str(path), "--def", "SCALE", "--shapes", "4"])
    assert_user_error(rc, out, err)
    assert "SCALE" in err and "not a function" in err



def test_explain_shapes_of_a_tc_file_is_a_usage_error(capsys, tcfile):
    # importing the .tc file as Python failed: "internal error: AttributeError:
    # 'NoneType' object has no attribute 'loader'"
    rc, out, err = run_main(capsys, ["explain", tcfile(MM), "--def", "mm", "--shapes", "3x4"])
    assert_user_error(rc, out, err)
    assert "--shapes traces a numpy function of a .py file" in err



def test_explain_shapes_in_bfloat16_is_a_usage_error(capsys, tmp_path):
    # polyc.jit's refusal named polyc/cli.py as the user's line
    path = tmp_path / "prog.py"
    path.write_text(GRAPH_PY)
    rc, out, err = run_main(capsys, ["explain", str(path), "--def", "softmax", "--shapes",
                                     "4x8", "--dtype", "bfloat16"])
    assert_user_error(rc, out, err)
    assert "numpy has no bfloat16" in err and "cli.py" not in err


def test_sizes_given_twice_or_unknown_to_a_loop_program_are_usage_errors(capsys, tcfile,
                                                                          tmp_path):
    rc, out, err = run_main(capsys, ["run", tcfile(MM), "--sizes", "M=3,M=4"])
    assert_user_error(rc, out, err)
    assert "M is given twice" in err
    src = tmp_path / "k.py"
    src.write_text("import polyc\n\n@polyc.kernel\ndef k(A):\n"
                   "    for i in range(A.shape[0]):\n        A[i] = 1.0\n")
    rc, out, err = run_main(capsys, ["compile", str(src), "--sizes", "zz=3", "--emit", "c"])
    assert_user_error(rc, out, err)
    assert "no size zz" in err


def test_sizes_too_large_for_memory_are_a_user_error(capsys, tcfile):
    # numpy's MemoryError allocating the inputs was reported as an internal error
    rc, out, err = run_main(capsys, ["run", tcfile(NO_SIZES), "--sizes",
                                     "M=100000000000,K=100000,N=1"])
    assert_user_error(rc, out, err)
    assert "out of memory" in err


@pytest.mark.parametrize("cmd", [["run", "{tc}", "--check"], ["explain", "{tc}"],
                                 ["einsum", "ij,jk->ik", "--shapes", "3x4,4x5"],
                                 ["tune", "{tc}", "--budget", "1"]])
def test_a_negative_seed_is_a_usage_error(capsys, tcfile, cmd):
    # numpy's ValueError (expected non-negative integer) was an internal error
    path = tcfile(MM)
    with pytest.raises(SystemExit) as e:
        main([a.format(tc=path) for a in cmd] + ["--seed", "-1"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--seed: must be >= 0, got -1" in err and "Traceback" not in err


JITTED = '''import numpy as np
import polyc


@polyc.jit
def softmax(x):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)
'''


@pytest.mark.parametrize("command", ["explain", "compile"])
def test_a_jit_function_without_shapes_says_how_to_explain_it(capsys, tcfile, command):
    """README's softmax, ``polyc explain sm.py --def softmax`` without
    ``--shapes``, was refused by the loop frontend ("a call to x.max ... a
    kernel may call abs, ..."): it says to add ``--shapes``, and with them the
    plan's softmax matches numpy's."""
    path = tcfile(JITTED, "sm.py")
    rc, out, err = run_main(capsys, [command, path, "--def", "softmax"])
    assert_user_error(rc, out, err)
    assert "softmax in" in err and "is a @polyc.jit function" in err and "--shapes" in err, err
    assert "a kernel may call" not in err
    rc, out, err = run_main(capsys, ["explain", path, "--def", "softmax", "--shapes", "4x8"])
    assert rc == 0 and out.startswith("graph softmax: 1 kernel(s)"), (out, err)


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"polyc {polyc.__version__}"
