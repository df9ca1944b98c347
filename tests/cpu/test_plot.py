"""Pictures (:mod:`polyc.plot`, :mod:`polyc.picture`): image files of the
asked size and format, one point per statement instance, one arrow per
dependence pair (counted independently of isl, by brute force over the
instances), tiles, parallel loops, a refusal's witness pair, the refusals
(four loops, too many points or arrows, no matplotlib), the CLI's
``--plot`` and the commands of the "Pictures" section of
``docs/schedules.md``.  Skipped without matplotlib (the ``plot`` extra)."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib.image  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Polygon, Rectangle  # noqa: E402
from matplotlib.quiver import Quiver  # noqa: E402

import polyc  # noqa: E402
import polyc.plot  # noqa: E402
from polyc.errors import IllegalScheduleError, PlotError, ToolMissingError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

MV = "def mv(float(N,K) A, float(K) x) -> (y) { y(i) +=! A(i,k) * x(k) }"
MM = "def mm(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"
BMM = ("def bmm(float(B, M, K) A, float(B, K, N) W) -> (C) "
       "{ C(b, m, n) +=! A(b, m, k) * W(b, k, n) }")
STENCIL = """
def stencil(float(T, N) X) -> (A) {
    A(t, i) = X(t, i)
    A(t, i) = (A(t-1, i-1) + A(t-1, i) + A(t-1, i+1)) * 0.3333 where t in 1:T, i in 1:N-1
}
"""
SCAN = """
def scan(float(N) X) -> (Y) {
    Y(i) = X(i) where i in 0:N
    Y(i) = Y(i-1) + X(i) where i in 1:N
}
"""


def source(src):
    return polyc.Schedule.from_program(polyc.program(src))


def wavefront():
    """The stencil's tiled wavefront (docs/schedules.md, skew)."""
    s = source(STENCIL).skew(("S1", "i"), ("S1", "t")).tile([("S1", "t"), ("S1", "i")],
                                                            [4, 4])
    s = s.skew(("S1", "i_tile"), ("S1", "t_tile"))
    return s.interchange(("S1", "t_tile"), ("S1", "i_tile")).parallel(("S1", "t_tile"))


def drawn(fig, cls, gid_prefix):
    """Artists of class ``cls`` whose gid starts with ``gid_prefix``."""
    ax = fig.axes[0]
    found = list(ax.collections) + list(ax.patches)
    return [a for a in found if isinstance(a, cls) and (a.get_gid() or "").startswith(gid_prefix)]


def n_points(fig) -> int:
    fig.canvas.draw()      # 3-D collections project their offsets when drawn
    return sum(len(c.get_offsets()) for c in drawn(fig, PathCollection, "points:"))


def n_arrows(fig, kind="deps:") -> int:
    """Dependence arrows drawn: quiver offsets (2-D), arcs (1-D), or
    3-D quiver segments (a shaft and two head strokes per arrow)."""
    fig.canvas.draw()
    n = sum(len(q.get_offsets()) for q in drawn(fig, Quiver, kind))
    n += len(drawn(fig, FancyArrowPatch, kind))
    n += sum(len(c.get_segments()) // 3 for c in drawn(fig, LineCollection, kind))
    return n


def stencil_flow_pairs(T: int, N: int) -> set:
    """S1 -> S1 flow pairs by brute force: S1(t, i) reads A(t-1, j),
    |i - j| <= 1, last written by S1(t-1, j) when that instance exists."""
    dom = {(t, i) for t in range(1, T) for i in range(1, N - 1)}
    return {((t - 1, j), (t, i)) for t, i in dom for j in (i - 1, i, i + 1)
            if (t - 1, j) in dom}


# ----------------------------------------------------------------- files

def test_png_has_the_figure_size_and_svg_is_svg(tmp_path):
    png = tmp_path / "mv.png"
    fig = polyc.plot.draw(source(MV), sizes={"N": 5, "K": 4}, path=png, dpi=50,
                          figsize=(5, 4))
    height, width = matplotlib.image.imread(png).shape[:2]
    assert (width, height) == (round(fig.get_figwidth() * fig.dpi),
                               round(fig.get_figheight() * fig.dpi)) == (250, 200)
    svg = tmp_path / "mv.svg"
    polyc.plot.draw(source(MV), sizes={"N": 5, "K": 4}, path=svg)
    assert "<svg" in svg.read_text()[:1000]


def test_unknown_suffix_is_refused(tmp_path):
    with pytest.raises(PlotError, match=r"x\.jpg.*\.png or \.svg"):
        polyc.plot.draw(source(MV), sizes={"N": 5, "K": 4}, path=tmp_path / "x.jpg")



@pytest.mark.parametrize("dpi, figsize, suffix", [(-5, (6.4, 4.8), "png"), (0, (6.4, 4.8), "svg"),
                                                  (float("nan"), (6.4, 4.8), "png"),
                                                  (100, (0, 4), "png"), (1e6, (6.4, 4.8), "svg"),
                                                  (1e6, (6.4, 4.8), "png")])
def test_a_bad_dpi_or_figsize_is_a_plot_error(tmp_path, capsys, dpi, figsize, suffix):
    # matplotlib's bare ValueError (dpi must be positive, Image size ... too
    # large) or MemoryError came out: polyc explain --plot --dpi -5 was an
    # internal error, --dpi 1e6 with an .svg "out of memory ... --sizes"
    with pytest.raises(PlotError, match="dpi="):
        polyc.plot.draw(source(MV), sizes={"N": 5, "K": 4}, dpi=dpi, figsize=figsize,
                        path=tmp_path / f"x.{suffix}")
    from polyc.cli import main
    tc = tmp_path / "mv.tc"
    tc.write_text(MV)
    if figsize == (6.4, 4.8):
        assert main(["explain", str(tc), "--sizes", "N=5,K=4", "--plot",
                     str(tmp_path / f"x.{suffix}"), "--dpi", str(dpi)]) == 2
        assert "polyc: error: dpi=" in capsys.readouterr().err

# ----------------------------------------------------------------- points and arrows

def test_points_and_reduction_arrows_of_a_matrix_vector_product():
    N, K = 5, 4
    fig = polyc.plot.draw(source(MV), sizes={"N": N, "K": K})
    pic = fig.polyc_picture
    assert pic.statements == ("S0",) and pic.axes == ("i", "k")     # the deepest statement
    assert n_points(fig) == N * K
    assert sorted(p.coords for p in pic.points) == sorted(itertools.product(range(N),
                                                                            range(K)))
    # y(i) accumulates along k: one pair per consecutive k, every kind, a reduction
    pairs = {(pic.points[a.source].coords, pic.points[a.sink].coords) for a in pic.arrows}
    assert pairs == {((i, k), (i, k + 1)) for i in range(N) for k in range(K - 1)}
    assert {a.kinds for a in pic.arrows} == {("reduction", "flow", "anti", "output")}
    assert n_arrows(fig, "deps:reduction") == n_arrows(fig) == N * (K - 1)


def test_stencil_arrows_are_its_dependence_pairs():
    T, N = 6, 8
    fig = polyc.plot.draw(source(STENCIL), sizes={"T": T, "N": N}, statement="S1")
    pic = fig.polyc_picture
    assert n_points(fig) == (T - 1) * (N - 2)
    want = stencil_flow_pairs(T, N)
    got = {(pic.points[a.source].coords, pic.points[a.sink].coords) for a in pic.arrows}
    assert got == want
    assert {a.kind for a in pic.arrows} == {"flow"}
    assert n_arrows(fig, "deps:flow") == n_arrows(fig) == len(want)


def test_several_statements_are_drawn_side_by_side():
    fig = polyc.plot.draw(source(STENCIL), sizes={"T": 4, "N": 5})
    pic = fig.polyc_picture
    assert pic.statements == ("S0", "S1")
    assert len(drawn(fig, PathCollection, "points:S0")) == 1
    assert n_points(fig) == 4 * 5 + 3 * 3
    # S0 -> S1 flow (S1 reads what S0 wrote at t = 0) and output (S1 overwrites S0)
    kinds = {(pic.points[a.source].statement, pic.points[a.sink].statement, a.kind)
             for a in pic.arrows}
    assert ("S0", "S1", "flow") in kinds and ("S0", "S1", "output") in kinds
    assert n_arrows(fig) == len(pic.arrows)


def test_one_loop_draws_arcs():
    N = 7
    fig = polyc.plot.draw(source(SCAN), sizes={"N": N}, statement="S1")
    pic = fig.polyc_picture
    assert pic.axes == ("i",) and n_points(fig) == N - 1
    arcs = drawn(fig, FancyArrowPatch, "deps:flow")
    assert len(arcs) == N - 2 == len(pic.arrows)


def test_three_loops_draw_in_3d_and_fix_selects_a_slice():
    M, N, K = 3, 2, 4
    fig = polyc.plot.draw(source(MM), sizes={"M": M, "N": N, "K": K})
    assert fig.axes[0].name == "3d" and fig.polyc_picture.axes == ("m", "n", "k")
    assert n_points(fig) == M * N * K
    assert n_arrows(fig) == M * N * (K - 1)
    flat = polyc.plot.draw(source(MM), sizes={"M": M, "N": N, "K": K}, fix={"k": 1})
    assert flat.polyc_picture.axes == ("m", "n") and n_points(flat) == M * N


def test_order_follows_the_schedule_and_every_arrow_points_forward():
    """A legal schedule runs every dependence's source first: each arrow
    goes from a lower to a higher execution rank; the wavefront schedule
    runs a dependence's ends in one wavefront or in order."""
    s = wavefront()
    pic = polyc.plot.picture(s, sizes={"T": 9, "N": 12}, statement="S1")
    pts = pic.points
    assert all(pts[a.source].order < pts[a.sink].order for a in pic.arrows)
    assert all(pts[a.source].wave <= pts[a.sink].wave for a in pic.arrows)
    assert len({p.wave for p in pts}) < len({p.order for p in pts}) == len(pts)
    # the source order of the stencil: t outer, i inner
    src = polyc.plot.picture(source(STENCIL), sizes={"T": 4, "N": 5}, statement="S1")
    by_rank = [p.coords for p in sorted(src.points, key=lambda p: p.order)]
    assert by_rank == sorted(by_rank)


# ----------------------------------------------------------------- tiles, parallel loops

def test_tiles_of_a_tiled_matmul_are_rectangles():
    s = source(MM).tile([("C", "m"), ("C", "n")], [2, 3])
    fig = polyc.plot.draw(s, sizes={"M": 4, "N": 6, "K": 2}, fix={"k": 0})
    pic = fig.polyc_picture
    rects = drawn(fig, Rectangle, "tile")
    assert len(rects) == len(pic.tiles) == 4
    groups = {frozenset(pic.points[i].coords for i in t) for t in pic.tiles}
    want = {frozenset((m, n) for m in range(4) for n in range(6) if (m // 2, n // 3) == key)
            for key in itertools.product(range(2), range(2))}
    assert groups == want
    for rect, members in zip(rects, pic.tiles):
        box = rect.get_patch_transform().transform_path(rect.get_path())
        assert all(box.contains_point(pic.points[i].coords) for i in members)


def test_skewed_tiles_are_polygons_around_their_points():
    fig = polyc.plot.draw(wavefront(), sizes={"T": 9, "N": 12}, statement="S1",
                          color="wavefront")
    pic = fig.polyc_picture
    patches = drawn(fig, Rectangle, "tile") + drawn(fig, Polygon, "tile")
    assert len(patches) == len(pic.tiles) > 4
    assert any(isinstance(p, Polygon) for p in patches)
    assert sorted(i for t in pic.tiles for i in t) == list(range(len(pic.points)))


def test_parallel_loops_are_marked_on_their_axis():
    s = source(MV).tile([("y", "i")], [2]).parallel(("y", "i_tile"))
    fig = polyc.plot.draw(s, sizes={"N": 6, "K": 3})
    pic = fig.polyc_picture
    assert pic.parallel == ("i_tile", None) and pic.parallel_loops == ("i_tile",)
    label = fig.axes[0].xaxis.label
    assert label.get_text() == "i (parallel: i_tile)"
    assert label.get_color() == polyc.plot.PARALLEL_COLOR
    assert "parallel: i_tile" in fig.axes[0].get_title()
    assert "parallel" not in fig.axes[0].get_ylabel()
    assert len(pic.tiles) == 3


def test_band_view_draws_one_point_per_band_iteration():
    N, K = 6, 3
    s = source(MV).tile([("y", "i")], [2]).parallel(("y", "i_tile"))
    pic = polyc.plot.picture(s, sizes={"N": N, "K": K}, band=("y", "i"))
    assert pic.view == "band" and pic.axes == ("i",) and len(pic.points) == N
    assert len(pic.tiles) == N // 2 and not pic.arrows
    # every dependence runs inside one i: S0 along k, and S0_init -> S0(i, 0)
    assert pic.inner_pairs == N * (K - 1) + N


def test_kernel_plot_marks_the_automatic_parallel_loop(tmp_path):
    kernel = polyc.compile(MV)
    fig = kernel.plot(sizes={"N": 6, "K": 4}, path=tmp_path / "k.png")
    assert (tmp_path / "k.png").stat().st_size > 0
    assert "parallel" in fig.axes[0].get_xlabel()
    assert n_points(fig) == 24


# ----------------------------------------------------------------- witnesses

def test_a_refused_reversal_highlights_its_witness_pair():
    s = source(STENCIL)
    with pytest.raises(IllegalScheduleError) as info:
        s.reverse(("S1", "t"))
    w = info.value.witness
    assert (w.kind, w.reason, w.source, w.sink) == ("flow", "order", "S1", "S1")
    fig = s.plot(sizes={"T": 5, "N": 6}, statement="S1", witness=info.value)
    pic = fig.polyc_picture
    a, b = (pic.points[i].coords for i in pic.witness)
    assert (a, b) in stencil_flow_pairs(5, 6)
    assert len(drawn(fig, Quiver, "witness")) == 1
    rings = drawn(fig, PathCollection, "witness-points")
    assert [tuple(x) for x in rings[0].get_offsets()] == [a, b]
    assert "violated flow (order)" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_refused_parallel_loop_carries_its_witness():
    s = source(MV)
    with pytest.raises(IllegalScheduleError) as info:
        s.parallel(("y", "k"))
    assert info.value.witness.reason == "parallel"
    pic = polyc.plot.picture(s, sizes={"N": 3, "K": 3}, witness=info.value.witness)
    (i0, k0), (i1, k1) = (pic.points[j].coords for j in pic.witness)
    assert i0 == i1 and k1 == k0 + 1


def test_a_witness_survives_the_transformation_name_prefix():
    with pytest.raises(IllegalScheduleError) as info:
        source(MV).vectorize(("y", "k"))
    assert str(info.value).startswith("vectorize(y.k)")
    assert info.value.witness.kind == "reduction"


def test_a_witness_outside_the_picture_is_refused():
    s = source(STENCIL)
    with pytest.raises(IllegalScheduleError) as info:
        s.reverse(("S1", "t"))
    with pytest.raises(PlotError, match="no pair between two points"):
        polyc.plot.picture(s, sizes={"T": 5, "N": 6}, statement="S0", witness=info.value)


# ----------------------------------------------------------------- refusals

def test_four_loops_are_refused_with_what_to_choose():
    s = source(BMM)
    with pytest.raises(PlotError) as info:
        polyc.plot.picture(s, sizes={"B": 2, "M": 2, "N": 2, "K": 2})
    msg = str(info.value)
    assert "S0 has 4 loops (b, m, n, k)" in msg and "at most 3" in msg
    assert "band=" in msg and "fix=" in msg
    band = polyc.plot.picture(s, sizes={"B": 2, "M": 2, "N": 2, "K": 2}, band=("C", "m"),
                              statement="S0")
    assert band.axes == ("b", "m", "n") and band.statements == ("S0",)
    sliced = polyc.plot.picture(s, sizes={"B": 2, "M": 2, "N": 2, "K": 2}, fix={"b": 0})
    assert sliced.axes == ("m", "n", "k") and len(sliced.points) == 8


def test_too_many_points_are_refused():
    with pytest.raises(PlotError) as info:
        polyc.plot.picture(source(MV), sizes={"N": 100, "K": 100})
    msg = str(info.value)
    assert "10000 points" in msg and "more than 4000" in msg
    assert "smaller sizes" in msg and "N=100, K=100" in msg


def test_too_many_arrows_are_refused():
    # 39 * 88 = 3432 points, but about three flow arrows each
    with pytest.raises(PlotError, match=r"dependence arrows .* more than 4000"):
        polyc.plot.picture(source(STENCIL), sizes={"T": 40, "N": 90}, statement="S1")


def test_bad_requests_name_the_culprit():
    s = source(MV)
    with pytest.raises(PlotError, match="give K"):
        polyc.plot.picture(s, sizes={"N": 4})
    with pytest.raises(PlotError, match="no size Q"):
        polyc.plot.picture(s, sizes={"N": 4, "K": 4, "Q": 1})
    with pytest.raises(PlotError, match="no statement or written tensor named 'Z'.*S0_init, S0"):
        polyc.plot.picture(s, sizes={"N": 4, "K": 4}, statement="Z")
    with pytest.raises(PlotError, match="color="):
        polyc.plot.draw(s, sizes={"N": 4, "K": 4}, color="rainbow")
    with pytest.raises(PlotError, match="size N must be an integer"):
        polyc.plot.picture(s, sizes={"N": 4.5, "K": 4})
    with pytest.raises(PlotError, match=r"not defined at N=-1, K=4"):
        polyc.plot.picture(s, sizes={"N": -1, "K": 4})
    with pytest.raises(PlotError, match="nothing to draw: no instance at sizes N=0, K=4"):
        polyc.plot.picture(s, sizes={"N": 0, "K": 4})
    with pytest.raises(PlotError, match="no statement among S0_init, S0 has loops q"):
        polyc.plot.picture(s, sizes={"N": 4, "K": 4}, fix={"q": 0})
    assert len(polyc.plot.picture(s, sizes={"N": np.int64(3), "K": 2}).points) == 6


def _seidel(tsteps, A):
    n = A.shape[0]
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i, j + 1] + A[i + 1, j]) / 5


def test_loop_program_extents_that_only_bound_arrays_need_no_size(tmp_path):
    """A loop program's ``A_dim1`` (an extent that only bounds ``A`` from
    below) does not change the picture: it takes the least value the
    program admits instead of being asked for."""
    k = polyc.kernel(_seidel)
    program = k.specialize(2, np.zeros((5, 5))).program
    assert "A_dim1" in program.params
    s = polyc.Schedule.from_program(program)
    pic = polyc.plot.picture(s, sizes={"n": 5, "tsteps": 2}, fix={"t": 0})
    assert sorted(p.coords for p in pic.points) == sorted(itertools.product(range(1, 4),
                                                                            range(1, 4)))
    assert dict(pic.sizes) == {"n": 5, "tsteps": 2, "A_dim1": 5}
    with pytest.raises(PlotError, match="give tsteps"):
        polyc.plot.picture(s, sizes={"n": 5})
    with pytest.raises(PlotError, match="not defined at n=-1"):
        polyc.plot.picture(s, sizes={"n": -1, "tsteps": 2})
    with pytest.raises(PlotError, match="size n must be an integer"):
        polyc.plot.picture(s, sizes={"n": "5", "tsteps": 2})
    # a promotion's copies clip to A_dim1: still no size to give
    promoted = s.tile([("S0", "i"), ("S0", "j")], [2, 2]).promote("A", ("S0", "j_tile"))
    assert dict(polyc.plot.picture(promoted, sizes={"n": 6, "tsteps": 2}, fix={"t": 0},
                                   statement="S0").sizes)["A_dim1"] == 6
    assert polyc.PlotError is PlotError
    # the band view of a tiled loop program: one point per tile
    tiled = s.tile([("S0", "i"), ("S0", "j")], [2, 2])
    pic = polyc.plot.picture(tiled, sizes={"n": 6, "tsteps": 2}, band=("S0", "i_tile"))
    assert sorted(p.coords for p in pic.points) == sorted(itertools.product((0, 2, 4),
                                                                            (0, 2, 4)))
    # a file that cannot be written is a PlotError, not an OSError
    with pytest.raises(PlotError, match="cannot write a picture to .*No such file"):
        s.plot(sizes={"n": 4, "tsteps": 1}, fix={"t": 0}, path=tmp_path / "no" / "x.png")


def test_missing_matplotlib_names_the_extra(monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ToolMissingError, match=r'pip install "polyc\[plot\]"'):
        polyc.plot.draw(source(MV), sizes={"N": 4, "K": 4})
    # the data does not need matplotlib
    assert len(polyc.plot.picture(source(MV), sizes={"N": 4, "K": 4}).points) == 16


def test_importing_polyc_plot_does_not_import_matplotlib():
    code = ("import sys, polyc; polyc.plot.draw, polyc.Schedule.plot; "
            "assert 'matplotlib' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


# ----------------------------------------------------------------- CLI and docs

@pytest.mark.parametrize("options", [["--statement", "S0"], ["--dpi", "50"], ["--band", "y.i"],
                                     ["--fix", "i=0", "--color", "wavefront"]])
def test_cli_picture_options_without_plot_are_a_usage_error(tmp_path, capsys, options):
    # they were silently ignored: the explanation printed, no picture, no word
    from polyc.cli import main
    tc = tmp_path / "mv.tc"
    tc.write_text(MV + "\n")
    assert main(["explain", str(tc), "--sizes", "N=8,K=6", *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polyc: error: " + options[0]) and "add --plot OUT.png" in err
    assert main(["explain", str(tc), "--sizes", "N=8,K=6", "--dpi", "100"]) == 0


def test_cli_explain_plot(tmp_path, capsys):
    from polyc.cli import main
    tc = tmp_path / "mv.tc"
    tc.write_text(MV + "\n")
    out = tmp_path / "mv.png"
    assert main(["explain", str(tc), "--sizes", "N=8,K=6", "--plot", str(out),
                 "--dpi", "40"]) == 0
    assert f"picture: {out} (S0: 48 points, 40 dependence arrows, 0 tile(s))" in \
        capsys.readouterr().out
    assert matplotlib.image.imread(out).shape[:2] == (round(4.8 * 40), round(6.4 * 40))
    assert main(["explain", str(tc), "--sizes", "N=800,K=600", "--plot", str(out)]) == 2
    assert "480000 points" in capsys.readouterr().err
    assert main(["explain", str(tc), "--plot", str(out)]) == 2
    assert "give N, K with --sizes" in capsys.readouterr().err
    # a path that cannot be written was an internal error (FileNotFoundError)
    bad = tmp_path / "no" / "such" / "mv.png"
    assert main(["explain", str(tc), "--sizes", "N=8,K=6", "--plot", str(bad)]) == 2
    assert f"cannot write {bad}" in capsys.readouterr().err
    # a loop program: its extent B_dim0 (it only bounds B) needs no --sizes
    py = tmp_path / "jac.py"
    py.write_text("import polyc\n\n\n@polyc.kernel\ndef jac(tsteps, A, B):\n"
                  "    n = A.shape[0]\n    for t in range(tsteps):\n"
                  "        for i in range(1, n - 1):\n"
                  "            B[i] = A[i - 1] + A[i] + A[i + 1]\n"
                  "        for i in range(1, n - 1):\n            A[i] = B[i]\n")
    assert main(["explain", str(py), "--def", "jac", "--sizes", "n=6,tsteps=2",
                 "--plot", str(out)]) == 0
    assert f"picture: {out} (S0, S1: 16 points" in capsys.readouterr().out
    assert main(["explain", str(py), "--def", "jac", "--sizes", "n=6", "--plot", str(out)]) == 2
    assert "give tsteps with --sizes" in capsys.readouterr().err


def _pictures_section() -> str:
    text = (ROOT / "docs" / "schedules.md").read_text()
    start = text.index("\n## Pictures")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def test_docs_pictures_exist_and_are_small():
    section = _pictures_section()
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+\.png)\)", section)
    assert len(images) >= 4
    for rel in images:
        path = ROOT / "docs" / rel
        assert path.is_file(), rel
        assert path.stat().st_size < 100_000, (rel, path.stat().st_size)


def test_docs_picture_commands_run(tmp_path, monkeypatch, capsys):
    """The Python block and the ``$ polyc ...`` lines of the "Pictures"
    section write every picture the section shows (here into a scratch
    directory with the files the commands read)."""
    from polyc.cli import main
    section = _pictures_section()
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))
    commands = re.findall(r"^\$ polyc (.*)$", section, re.M)
    assert commands
    (tmp_path / "docs" / "img").mkdir(parents=True)
    (tmp_path / "examples").mkdir()
    for name in re.findall(r"examples/(\w+\.tc)", section):
        (tmp_path / "examples" / name).write_text((ROOT / "examples" / name).read_text())
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/schedules.md#pictures", "exec"), {})
    for command in commands:
        assert main(shlex.split(command)) == 0, command
        last = capsys.readouterr().out.splitlines()[-1]
        assert last in section, last
    for rel in re.findall(r"!\[[^\]]*\]\((img/[^)]+\.png)\)", section):
        written = tmp_path / "docs" / rel
        assert written.is_file(), rel
        assert written.stat().st_size < 100_000
