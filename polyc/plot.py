"""Pictures of schedules: iteration domains, dependences, tiles, execution
order, parallel loops and violated dependences, drawn with matplotlib.

Takes what :func:`polyc.picture.picture` takes (a :class:`polyc.Schedule`,
a ``Program`` or a ``Kernel``, sizes, a statement or band) and returns a
``matplotlib.figure.Figure``, written to ``path`` as PNG or SVG (chosen by
the suffix) when one is given.  ``kernel.plot(...)``,
``schedule.plot(...)`` and ``polyc explain FILE --plot out.png`` call
:func:`draw`.

matplotlib is the optional extra ``plot`` (``pip install "polyc[plot]"``):
it is imported when :func:`draw` runs, never when polyc is imported, and
only through ``matplotlib.figure.Figure`` and the Agg canvas, so pyplot's
global state and the user's backend are left alone.  Without matplotlib,
:func:`draw` raises :class:`~polyc.errors.ToolMissingError`.

What is drawn (one, two or three axes, one per loop):

* points: the statement instances (or band points), coloured by execution
  order (``color="order"``: a ramp from the first to the last) or by
  wavefront (``color="wavefront"``: points one parallel loop runs at once
  share a colour); one marker per statement;
* arrows: dependences from source to sink, coloured by kind (flow, anti,
  output, reduction); in one dimension, arcs above (forward) or below the
  line;
* tiles: shaded boxes (a polygon when the tile is not a box: skewed tiles);
* parallel loops: ``(parallel: m_tile)`` on the axis the loop runs along,
  and every parallel loop in the title;
* a witness: the violated pair of an :class:`IllegalScheduleError`, a thick
  red arrow between ringed points.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import PlotError, ToolMissingError
from .picture import MAX_ARROWS, MAX_LOOPS, MAX_POINTS, Picture, picture

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw", "picture", "Picture", "MAX_POINTS", "MAX_ARROWS", "MAX_LOOPS",
           "KIND_COLORS", "FORMATS"]

log = logging.getLogger(__name__)

#: Arrow colour per dependence kind.
KIND_COLORS = {"flow": "tab:blue", "anti": "tab:orange", "output": "tab:brown",
               "reduction": "tab:purple"}
WITNESS_COLOR = "red"
PARALLEL_COLOR = "tab:green"
#: Output formats, by file suffix.
FORMATS = {".png": "png", ".svg": "svg"}
_MARKERS = ("o", "s", "^", "D", "v", "P")
_TILE_COLORS = ("#cfe2f3", "#fde9c9", "#d9ead3", "#f4cccc", "#e6ddf2", "#fff2cc")


def _matplotlib():
    """Import what :func:`draw` needs, or raise :class:`ToolMissingError`."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ToolMissingError('polyc.plot draws with matplotlib, which is not installed: '
                               'pip install "polyc[plot]"') from None
    return Figure, FigureCanvasAgg


def _format(path) -> str | None:
    if path is None:
        return None
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise PlotError(f"cannot write a picture to {path}: name a "
                        f"{' or '.join(FORMATS)} file")
    return FORMATS[suffix]


def draw(target, *, sizes: dict | None = None, statement=None, band=None,
         fix: dict | None = None, witness=None, color: str = "order", path=None,
         dpi: float = 100, figsize: tuple[float, float] = (6.4, 4.8),
         title: str | None = None) -> Figure:
    """Draw ``target`` at ``sizes``; return the ``matplotlib.figure.Figure``.

    ``target``, ``sizes``, ``statement``, ``band``, ``fix``, ``witness``: as
    :func:`polyc.picture.picture` (``target`` may also be a
    :class:`~polyc.picture.Picture` already computed).  ``color``:
    ``"order"`` or ``"wavefront"``.  ``path``: write the figure there, PNG
    or SVG by suffix, ``figsize`` inches at ``dpi`` (a PNG of ``figsize[0]
    * dpi`` by ``figsize[1] * dpi`` pixels).  ``title``: replaces the
    generated title.  The :class:`Picture` drawn is the figure's
    ``polyc_picture`` attribute.

    Raises :class:`~polyc.errors.ToolMissingError` without matplotlib and
    :class:`~polyc.errors.PlotError` for a bad request (see
    :func:`~polyc.picture.picture`; also an unknown ``color`` or suffix).

    Example::

        s = polyc.Schedule.from_program(polyc.program(src)).tile([("y", "i")], [2])
        fig = polyc.plot.draw(s, sizes={"N": 6, "K": 4}, path="mv.png")
    """
    fmt = _format(path)
    if color not in ("order", "wavefront"):
        raise PlotError(f"color={color!r}: choose 'order' or 'wavefront'")
    _check_size(dpi, figsize)
    figure_class, canvas_class = _matplotlib()
    pic = target if isinstance(target, Picture) else picture(
        target, sizes=sizes, statement=statement, band=band, fix=fix, witness=witness)
    fig = figure_class(figsize=figsize, dpi=dpi, layout="constrained")
    canvas_class(fig)
    fig.polyc_picture = pic
    if pic.ndim == 3:
        import mpl_toolkits.mplot3d  # noqa: F401  (registers the 3-D projection)
        ax = fig.add_subplot(projection="3d")
        ax.set_box_aspect(None, zoom=0.85)     # room for the axis labels
    else:
        ax = fig.add_subplot()
    xy = _positions(pic)
    _draw_tiles(ax, pic, xy)
    _draw_arrows(ax, pic, xy)
    mappable = _draw_points(ax, pic, xy, color)
    if pic.witness is not None:
        _draw_witness(ax, pic, xy)
    _decorate(fig, ax, pic, mappable, color, title)
    if path is not None:
        extra = {"pil_kwargs": {"optimize": True}} if fmt == "png" else {}
        try:
            fig.savefig(path, format=fmt, dpi=dpi, **extra)
        except OSError as e:
            raise PlotError(f"cannot write a picture to {path}: {e.strerror or e}") from None
        log.info("wrote %s (%d points, %d arrows, %d tiles)", path, len(pic.points),
                 len(pic.arrows), len(pic.tiles))
    return fig


def _check_size(dpi, figsize) -> None:
    """A :class:`PlotError` for a ``dpi`` or ``figsize`` matplotlib refuses
    with a bare ValueError (``dpi must be positive``, ``Image size of ...
    pixels is too large``) or a MemoryError (the layout measures text on a
    raster canvas, an SVG's too): positive, finite, under 2**16 pixels a side."""
    try:
        w, h = (float(x) for x in figsize)
        ok = all(math.isfinite(v) and v > 0 for v in (float(dpi), w, h))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise PlotError(f"dpi={dpi!r}, figsize={figsize!r}: the resolution and the two "
                        "sides (inches) must be positive finite numbers")
    if max(w, h) * dpi >= 2**16:
        raise PlotError(f"dpi={dpi!r}: a figure of {w * dpi:.0f} by {h * dpi:.0f} pixels; "
                        f"matplotlib draws under {2**16} a side: use a smaller dpi")


# ----------------------------------------------------------------- geometry

def _positions(pic: Picture) -> list[tuple[float, ...]]:
    """Drawing coordinates per point: the point's own, with the points of
    several statements drawn side by side (a small diagonal offset per
    statement) and, in one dimension, a height of 0."""
    names = sorted({p.statement for p in pic.points})
    out = []
    for p in pic.points:
        off = (names.index(p.statement) - (len(names) - 1) / 2) * 0.2
        c = tuple(v + off for v in p.coords)
        out.append(c + (off,) if pic.ndim == 1 else c)
    return out


def _hull(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Convex hull (Andrew's monotone chain), counter-clockwise."""
    pts = sorted(set(pts))
    if len(pts) <= 2:
        return pts

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
    lower: list = []
    upper: list = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def _draw_tiles(ax, pic: Picture, xy) -> None:
    from matplotlib.patches import Polygon, Rectangle
    pad = 0.4
    for t, members in enumerate(pic.tiles):
        face = _TILE_COLORS[t % len(_TILE_COLORS)]
        style = dict(facecolor=face, edgecolor="0.55", linewidth=0.8, zorder=0, gid="tile")
        pts = [xy[i] for i in members]
        if pic.ndim == 3:
            _box3d(ax, pts, pad, face)
            continue
        if pic.ndim == 1:
            xs = [p[0] for p in pts]
            ax.add_patch(Rectangle((min(xs) - pad, -0.55), max(xs) - min(xs) + 2 * pad, 1.1,
                                   **style))
            continue
        corners = [(x + dx, y + dy) for x, y in pts for dx in (-pad, pad) for dy in (-pad, pad)]
        hull = _hull(corners)
        xs, ys = [p[0] for p in hull], [p[1] for p in hull]
        if len(hull) == 4 and len(set(xs)) == 2 and len(set(ys)) == 2:
            ax.add_patch(Rectangle((min(xs), min(ys)), max(xs) - min(xs), max(ys) - min(ys),
                                   **style))
        else:
            ax.add_patch(Polygon(hull, closed=True, **style))


def _box3d(ax, pts, pad: float, face: str) -> None:
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection
    lo = [min(p[d] for p in pts) - pad for d in range(3)]
    hi = [max(p[d] for p in pts) + pad for d in range(3)]
    c = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    faces = [[c[0], c[1], c[3], c[2]], [c[4], c[5], c[7], c[6]], [c[0], c[1], c[5], c[4]],
             [c[2], c[3], c[7], c[6]], [c[0], c[2], c[6], c[4]], [c[1], c[3], c[7], c[5]]]
    ax.add_collection3d(Poly3DCollection(faces, facecolor=face, edgecolor="0.6",
                                         alpha=0.15, linewidth=0.5, gid="tile"))


def _draw_arrows(ax, pic: Picture, xy) -> None:
    """One artist per kind in two and three dimensions (a quiver: one arrow
    per offset, three segments per arrow in 3-D); one arc per arrow in one."""
    for kind, colour in KIND_COLORS.items():
        arrows = [a for a in pic.arrows if a.kind == kind]
        if arrows:
            _arrow_set(ax, pic.ndim, [(xy[a.source], xy[a.sink]) for a in arrows], colour,
                       f"deps:{kind}", width=1.0)


def _arrow_set(ax, ndim: int, pairs, colour: str, gid: str, width: float) -> None:
    if ndim == 1:
        from matplotlib.patches import FancyArrowPatch
        for (x0, y0), (x1, y1) in pairs:
            rad = -0.5 if x1 >= x0 else 0.5
            ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>",
                                         mutation_scale=8 + 2 * width, color=colour,
                                         linewidth=width, shrinkA=4, shrinkB=4,
                                         connectionstyle=f"arc3,rad={rad}", gid=gid,
                                         zorder=2))
        return
    # shortened at both ends so that heads and tails do not hide the points
    starts, vecs = [], []
    for a, b in pairs:
        v = [b[d] - a[d] for d in range(ndim)]
        cut = min(0.2, 0.18 / max(sum(x * x for x in v) ** 0.5, 1e-9))
        starts.append([a[d] + cut * v[d] for d in range(ndim)])
        vecs.append([(1 - 2 * cut) * x for x in v])
    src, vec = list(zip(*starts)), list(zip(*vecs))
    if ndim == 3:
        ax.quiver(*src, *vec, color=colour, arrow_length_ratio=0.25, linewidth=width,
                  gid=gid)
        return
    ax.quiver(*src, *vec, angles="xy", scale_units="xy", scale=1, color=colour,
              width=0.003 * width, headwidth=3.5, headlength=4, headaxislength=3.6,
              zorder=2, gid=gid)


def _draw_points(ax, pic: Picture, xy, color: str):
    rank = [p.order if color == "order" else p.wave for p in pic.points]
    top = max(rank, default=0) or 1
    mappable = None
    for k, name in enumerate(sorted({p.statement for p in pic.points})):
        idx = [i for i, p in enumerate(pic.points) if p.statement == name]
        coords = list(zip(*[xy[i] for i in idx]))
        mappable = ax.scatter(*coords, c=[rank[i] for i in idx], cmap="viridis", vmin=0,
                              vmax=top, marker=_MARKERS[k % len(_MARKERS)], s=28,
                              edgecolors="0.25", linewidths=0.4, zorder=3,
                              label=name or None, gid=f"points:{name or 'band'}")
    return mappable


def _draw_witness(ax, pic: Picture, xy) -> None:
    a, b = pic.witness
    _arrow_set(ax, pic.ndim, [(xy[a], xy[b])], WITNESS_COLOR, "witness", width=2.5)
    ax.scatter(*zip(xy[a], xy[b]), s=150, facecolors="none", edgecolors=WITNESS_COLOR,
               linewidths=1.8, zorder=4, gid="witness-points")


def _decorate(fig, ax, pic: Picture, mappable, color: str, title: str | None) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator
    setters = [ax.set_xlabel, ax.set_ylabel] + ([ax.set_zlabel] if pic.ndim == 3 else [])
    for d, name in enumerate(pic.axes):
        par = pic.parallel[d]
        if par is None:
            setters[d](name)
        else:
            label = f"{name} (parallel)" if par == name else f"{name} (parallel: {par})"
            setters[d](label, color=PARALLEL_COLOR, fontweight="bold")
    axis_objs = [ax.xaxis, ax.yaxis] + ([ax.zaxis] if pic.ndim == 3 else [])
    for a in axis_objs[:pic.ndim]:
        a.set_major_locator(MaxNLocator(integer=True))
    if pic.ndim == 1:
        ax.set_yticks([])
        ax.set_ylim(-1.5, 1.5)
    elif pic.ndim == 2:
        ax.margins(0.08)
    counts = {k: sum(1 for a in pic.arrows if a.kind == k) for k in KIND_COLORS}
    handles = [Line2D([], [], color=c, linewidth=2, label=f"{k} ({counts[k]})")
               for k, c in KIND_COLORS.items() if counts[k]]
    if pic.witness is not None:
        w = pic.witness_info
        handles.append(Line2D([], [], color=WITNESS_COLOR, linewidth=3,
                              label=f"violated {w.kind} ({w.reason})"))
    if len({p.statement for p in pic.points}) > 1:
        handles += [Line2D([], [], linestyle="", marker=_MARKERS[k % len(_MARKERS)],
                           color="0.4", label=name)
                    for k, name in enumerate(sorted({p.statement for p in pic.points}))]
    if handles:
        fig.legend(handles=handles, fontsize="small", loc="outside lower center",
                   ncols=min(len(handles), 4), frameon=False)
    if mappable is not None:
        label = "execution order" if color == "order" else "wavefront"
        bar = fig.colorbar(mappable, ax=ax, shrink=0.8, pad=0.02)
        bar.set_label(f"{label} (first \u2192 last)")
        bar.locator = MaxNLocator(integer=True)
        bar.update_ticks()
    lines = [title] if title else [_title(pic)]
    ax.set_title("\n".join(lines), fontsize="medium")


def _title(pic: Picture) -> str:
    what = (", ".join(pic.statements) if pic.view == "statement"
            else f"band ({', '.join(pic.axes)}) of {', '.join(pic.statements)}")
    text = f"{pic.program}: {what} at {pic.sizes_text()}"
    extra = []
    if pic.tiles:
        extra.append(f"{len(pic.tiles)} tile{'s' if len(pic.tiles) > 1 else ''}")
    if pic.parallel_loops:
        extra.append("parallel: " + ", ".join(pic.parallel_loops))
    if pic.inner_pairs:
        extra.append(f"{pic.inner_pairs} dependences inside points")
    if pic.witness is not None:
        a, b = (pic.points[i] for i in pic.witness)
        extra.append(f"violated: {a.statement}{a.coords} \u2192 {b.statement}{b.coords}")
    return text + ("\n" + "; ".join(extra) if extra else "")
