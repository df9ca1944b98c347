"""Three transformations polyc refuses, with the reason it gives.

Every transformation is checked against the program's exact dependences;
a refusal names the transformation, the dependence (kind, tensor,
statements) and one concrete pair of statement instances that the new
schedule would run in the wrong order.  The schedule you hold is unchanged.

Run: ``python examples/schedules/refused.py``
"""

import polyc

MATMUL = """
def matmul(float(M, K) A, float(K, N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
"""

STENCIL = """
def stencil(float(T, N) X) -> (A) {
    A(t, i) = X(t, i)
    A(t, i) = (A(t-1, i-1) + A(t-1, i) + A(t-1, i+1)) * 0.3333 where t in 1:T, i in 1:N-1
}
"""


def attempt(title: str, fn) -> None:
    print(f"--- {title}")
    try:
        fn()
    except polyc.IllegalScheduleError as e:
        print(f"refused: {e}\n")
    else:
        raise SystemExit(f"{title}: expected a refusal")


def main() -> None:
    mm = polyc.Schedule.from_program(polyc.program(MATMUL))
    st = polyc.Schedule.from_program(polyc.program(STENCIL))
    before = (mm.to_text(), mm.recipe, st.to_text(), st.recipe)

    attempt("run the reduction loop k of a matmul in parallel",
            lambda: mm.parallel(("C", "k")))
    attempt("vectorize the reduction loop k (reassociation not allowed)",
            lambda: mm.vectorize(("C", "k")))
    attempt("reverse the time loop of a stencil",
            lambda: st.reverse(("S1", "t")))

    # a refused transformation changes nothing: the schedules are as they were
    if (mm.to_text(), mm.recipe, st.to_text(), st.recipe) != before:
        raise SystemExit("a refused transformation changed the schedule")
    print("the schedules are unchanged after the refusals")


if __name__ == "__main__":
    main()
