"""``python -m polyc.tune.child TASK``: compile one tuning candidate, run it
once on the inputs of ``TASK``'s data file and compare with the reference
outputs there (:func:`polyc.testing.assert_close`'s tolerances).  Prints one
JSON line ``{"ok": bool, "error": str}``; a crash of the generated code
kills only this process (:func:`polyc.tune.measure.check_in_child`)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import time


def _verdict(ok: bool, error: str = "") -> int:
    print(json.dumps({"ok": ok, "error": error}))
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    import numpy as np

    from polyc import testing
    from polyc.errors import PolycError
    from polyc.tune.measure import compile_candidate
    with open(argv[0], "rb") as f:
        task = pickle.load(f)
    program, sizes = task["program"], task["sizes"]
    data = np.load(task["data"])
    inputs = {k[3:]: data[k].copy() for k in data.files if k.startswith("in_")}
    expected = {k[4:]: data[k] for k in data.files if k.startswith("out_")}
    try:
        kernel = compile_candidate(program, task["recipe"], task["config"])
    except PolycError as e:
        return _verdict(False, f"does not compile: {str(e).splitlines()[0]}")
    fault = task.get("fault")
    if fault == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        time.sleep(3600)
    got = kernel(*testing.call_args(program, inputs, sizes))
    results = dict(zip([t.name for t in program.outputs],
                       got if isinstance(got, tuple) else (got,)))
    for name in expected:
        if name not in results:
            results[name] = inputs[name]          # an in-place array
    if fault == "wrong":
        results = {k: v + 1 for k, v in results.items()}
    rlen = testing.reduction_length(program, sizes)
    for name, want in expected.items():
        dtype = program.tensor(name).dtype
        try:
            testing.assert_close(np.asarray(results[name]), want, dtype=dtype,
                                 reduction_length=rlen)
        except AssertionError as e:
            return _verdict(False, f"wrong values in {name}: {str(e).splitlines()[0]}")
    return _verdict(True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
