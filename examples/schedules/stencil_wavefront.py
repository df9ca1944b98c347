"""Skew a one-dimensional stencil over time into a parallel wavefront of tiles.

``A(t, i)`` is computed from ``A(t-1, i-1)``, ``A(t-1, i)`` and
``A(t-1, i+1)``: the dependence distances are ``(1, -1), (1, 0), (1, 1)``.
Each time step's ``i`` loop is parallel, but tiling ``(t, i)`` for locality
is refused (the distance ``(1, -1)`` points backwards along ``i``).  The
classic recipe:

1. ``skew(i, by=t)``: ``i' = i + t``, the distances become ``(1, 0), (1, 1),
   (1, 2)``: all non-negative, so the band ``(t, i')`` is permutable;
2. ``tile((t, i'), ...)``: tiles of ``t`` and ``i'``;
3. the tile loops still both carry dependences (a tile needs its left and
   its lower neighbours), so ``parallel`` on a tile loop is refused here;
4. ``skew(i_tile, by=t_tile)`` makes ``i_tile`` the wavefront number, then
   ``interchange`` puts it outermost: the tiles of one wavefront are
   independent and the inner tile loop runs as ``omp parallel for``.

Every step is checked against the exact dependences.  The script prints the
loop nest after each step and the refusal of step 3, compiles the wavefront
schedule, compares it with numpy and times it against the source order.  Every
wavefront ends with an OpenMP barrier: on a machine with few or busy cores
the parallel wavefront may well be slower than the sequential source order
(``POLYC_NUM_THREADS=1`` shows the cost of the tiled order alone).

Run: ``python examples/schedules/stencil_wavefront.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os

import numpy as np

import polyc
from polyc.testing import assert_close, median_time

TC = """
def stencil(float(T, N) X) -> (A) {
    A(t, i) = X(t, i)
    A(t, i) = (A(t-1, i-1) + A(t-1, i) + A(t-1, i+1)) * 0.3333 where t in 1:T, i in 1:N-1
}
"""

SMALL = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"


def show(title: str, s: polyc.Schedule) -> None:
    print(f"--- {title}")
    print(s.loop_nest())


def reference(X: np.ndarray) -> np.ndarray:
    """The stencil in numpy, in float64, one time step at a time."""
    A = X.astype(np.float64)
    for t in range(1, X.shape[0]):
        A[t, 1:-1] = (A[t - 1, :-2] + A[t - 1, 1:-1] + A[t - 1, 2:]) * 0.3333
    return A


def wavefront(source: polyc.Schedule, tile_t: int, tile_i: int) -> polyc.Schedule:
    s = source.skew(("S1", "i"), ("S1", "t"))                  # i' = i + t
    show("skew(i, by=t): distances (1, 0), (1, 1), (1, 2)", s)

    s = s.tile([("S1", "t"), ("S1", "i")], [tile_t, tile_i])
    show(f"tile((t, i), ({tile_t}, {tile_i}))", s)

    print("--- parallel(i_tile) before the wavefront skew")
    try:
        s.parallel(("S1", "i_tile"))
    except polyc.IllegalScheduleError as e:
        print(f"refused: {e}\n")
    else:
        raise SystemExit("parallel(i_tile) should be refused before the wavefront skew")

    # i_tile := i_tile + (tile_i / tile_t) * t_tile: tile_i * (tile number along i
    # + tile number along t), the wavefront that the tile (t_tile, i_tile) belongs to
    s = s.skew(("S1", "i_tile"), ("S1", "t_tile"), tile_i // tile_t)
    s = s.interchange(("S1", "t_tile"), ("S1", "i_tile"))      # wavefront outermost
    s = s.parallel(("S1", "t_tile"))                           # the tiles of one wavefront
    show("skew(i_tile, by=t_tile), interchange, parallel(t_tile): a wavefront of tiles", s)
    return s


def main() -> None:
    tile_t, tile_i = (4, 8) if SMALL else (32, 512)
    program = polyc.program(TC)
    source = polyc.Schedule.from_program(program)
    show("source order", source)
    s = wavefront(source, tile_t, tile_i)
    print("recipe:", s.to_json())

    kernel = polyc.compile(TC, schedule=s)
    in_order = polyc.compile(TC, schedule=source)
    T, N = (19, 45) if SMALL else (512, 16384)
    X = np.random.default_rng(0).uniform(-1, 1, (T, N)).astype(np.float32)
    ref = reference(X)
    for name, k in (("wavefront", kernel), ("source order", in_order)):
        try:
            assert_close(k(X), ref, dtype=np.float32, name=name)
        except AssertionError as e:
            raise SystemExit(f"mismatch: {e}") from None
    print(f"wavefront and source order match numpy at T={T}, N={N}")
    if not SMALL:
        t_wave = median_time(lambda: kernel(X))[0]
        t_src = median_time(lambda: in_order(X))[0]
        threads = polyc.Config.from_env().num_threads or len(os.sched_getaffinity(0))
        print(f"wavefront {t_wave * 1e3:.2f} ms, source order {t_src * 1e3:.2f} ms "
              f"({threads} threads)")


if __name__ == "__main__":
    main()
