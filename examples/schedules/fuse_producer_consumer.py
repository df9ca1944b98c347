"""Fuse a producer into its consumer and watch the intermediate's reuse shrink.

``T(i, j) = A(i, j) * 2`` produces an intermediate that
``B(i, j) = T(i, j) + 1`` consumes.  In the source order the two statements
run in separate loop nests: all of ``T`` is written before any of it is read
back, so every element waits ``N * M`` statement instances between its write
and its read (the whole array is live, and for large sizes it has left the
cache by then).  ``schedule.fuse("T", "B")`` runs both statements in one
``i, j`` loop nest, checked against the flow dependence on ``T``: each
element is read by the very next instance.

The script prints the loop nest and the fusion part of ``kernel.explain()``
before and after, measures the reuse distance of ``T`` by walking the
schedule at small sizes (isl enumerates the instances in schedule order),
compiles both schedules, compares them with numpy and times them.  ``T`` is
an output of the definition (a TC definition has no local tensors), so both
schedules still write it to memory: fusion saves reading it back, which is
all the timing can show.

Run: ``python examples/schedules/fuse_producer_consumer.py``
(``POLYC_EXAMPLE_SMALL=1`` runs at small sizes, as the tests do).
"""

import os

import islpy as isl
import numpy as np

import polyc
from polyc.testing import assert_close, median_time

TC = """
def pc(float(N, M) A) -> (T, B) {
    T(i, j) = A(i, j) * 2.0
    B(i, j) = T(i, j) + 1.0
}
"""

SMALL = os.environ.get("POLYC_EXAMPLE_SMALL") == "1"


def fix_sizes(s: polyc.Schedule, sizes: dict[str, int]) -> isl.Set:
    """The parameter set with every size fixed to its value in ``sizes``."""
    params = s.program.parameter_domain()
    for name, value in sizes.items():
        pos = params.find_dim_by_name(isl.dim_type.param, name)
        params = params.fix_val(isl.dim_type.param, pos, isl.Val.int_from_si(params.get_ctx(),
                                                                              value))
    return params


def points(umap: isl.UnionMap) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """``(domain tuple name, domain point, range point)`` of every pair in
    ``umap`` (bounded: the sizes are fixed)."""
    out = []
    maps: list[isl.Map] = []
    umap.foreach_map(maps.append)
    for m in maps:
        name = m.get_tuple_name(isl.dim_type.in_)
        n_in = m.dim(isl.dim_type.in_)

        def add(pt, name=name, n_in=n_in):
            coords = [int(pt.get_coordinate_val(isl.dim_type.set, k).to_python())
                      for k in range(n_in)]
            rest = [int(pt.get_coordinate_val(isl.dim_type.set, k).to_python())
                    for k in range(n_in, pt.get_space().dim(isl.dim_type.set))]
            out.append((name, tuple(coords), tuple(rest)))
        m.wrap().foreach_point(add)
    return out


def reuse_distances(s: polyc.Schedule, sizes: dict[str, int]) -> list[int]:
    """For every flow dependence from the producer S0 to the consumer S1 (a
    value of ``T`` written, then read), how many statement instances the
    schedule runs from the write to the read, at ``sizes``."""
    params = fix_sizes(s, sizes)
    # every instance with its schedule time; lexicographic order = execution order
    timed = sorted(points(s.isl.get_map().intersect_params(params)), key=lambda p: p[2])
    position = {(name, inst): k for k, (name, inst, _) in enumerate(timed)}
    flow = s.deps.between("S0", "S1")["flow"].intersect_params(params)
    return [position[("S1", dst)] - position[("S0", src)] for _, src, dst in points(flow)]


def fusion_section(kernel) -> str:
    """The ``fusion`` part of the kernel's explanation."""
    text = kernel.explain()
    start = text.index("\nfusion")
    end = text.index("\ntiles", start)
    return text[start + 1:end].rstrip()


def report(title: str, s: polyc.Schedule, kernel, sizes: dict[str, int]) -> int:
    print(f"--- {title}")
    print(s.loop_nest())
    print(fusion_section(kernel))
    dist = reuse_distances(s, sizes)
    size_text = ", ".join(f"{k}={v}" for k, v in sizes.items())
    print(f"reuse distance of T at {size_text}: max {max(dist)}, mean "
          f"{sum(dist) / len(dist):g} statement instances from write to read\n")
    return max(dist)


def main() -> None:
    program = polyc.program(TC)
    source = polyc.Schedule.from_program(program)
    fused = source.fuse("T", "B")            # checked: T(i, j) is read at the same (i, j)

    unfused_kernel = polyc.compile(TC, schedule=source)
    fused_kernel = polyc.compile(TC, schedule=fused)
    walk = {"N": 8, "M": 8}
    before = report("source order: producer and consumer in separate loop nests", source,
                    unfused_kernel, walk)
    after = report('fuse("T", "B"): one loop nest', fused, fused_kernel, walk)
    if not after < before:
        raise SystemExit(f"fusion should shorten the reuse distance of T: {before} -> {after}")
    print("recipe:", fused.to_json())

    N, M = (37, 23) if SMALL else (4096, 4096)
    A = np.random.default_rng(0).uniform(-1, 1, (N, M)).astype(np.float32)
    T_ref = A * np.float32(2.0)
    B_ref = T_ref + np.float32(1.0)
    for name, kernel in (("source order", unfused_kernel), ("fused", fused_kernel)):
        T, B = kernel(A)
        try:
            assert_close(T, T_ref, name=f"T ({name})")
            assert_close(B, B_ref, name=f"B ({name})")
        except AssertionError as e:
            raise SystemExit(f"mismatch: {e}") from None
    print(f"both schedules match numpy at N={N}, M={M}")
    if not SMALL:
        t_src = median_time(lambda: unfused_kernel(A))[0]
        t_fused = median_time(lambda: fused_kernel(A))[0]
        print(f"source order {t_src * 1e3:.2f} ms, fused {t_fused * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
