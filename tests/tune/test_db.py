"""The tuning database (polyc.tune.db): sealed append-only JSON lines, safe
under concurrent writers, corrupt or foreign lines skipped with a warning,
export and import between machines."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from polyc.tune.db import Database, TuningWarning, _canonical

KEY = {"program": "p" * 64, "name": "mm", "class": "all", "machine": {"cpu": "x"},
       "toolchain": "gcc", "target": "c", "polyc": "0"}


def rec(kind="sample", key="k1", **kw):
    return {"key": key, "keyinfo": KEY, "kind": kind, **kw}


def test_round_trip_and_best(tmp_path):
    db = Database(tmp_path / "t.jsonl")
    assert db.records() == [] and db.best("k1") is None
    db.append([rec(ratio=0.5), rec("failure", reason="crashed (SIGSEGV)")])
    db.append([rec("best", recipe={"steps": []}, speedup=1.5)])
    db.append([rec("best", recipe=None, speedup=1.0), rec("best", key="k2", recipe=None)])
    recs = db.records()
    assert [r["kind"] for r in recs] == ["sample", "failure", "best", "best", "best"]
    assert len({r["id"] for r in recs}) == 5
    assert db.best("k1")["speedup"] == 1.0 and db.best("k1")["recipe"] is None
    assert db.records("k1", "failure")[0]["reason"] == "crashed (SIGSEGV)"
    assert set(db.keys()) == {"k1", "k2"}


def _writer(path, n, tag):
    db = Database(path)
    for i in range(n):
        db.append([rec(ratio=i, tag=tag, pad="x" * 2000)])


def test_concurrent_writers_never_interleave(tmp_path):
    path = tmp_path / "t.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, 40, t)) for t in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    recs = Database(path).records()
    assert len(recs) == 160
    for t in range(4):
        assert sorted(r["ratio"] for r in recs if r["tag"] == t) == list(range(40))


def test_corrupt_and_foreign_lines_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "t.jsonl"
    db = Database(path)
    good = db.append([rec(ratio=1.0), rec("best", recipe=None)])
    edited = dict(good[0], ratio=0.1)                 # seal no longer matches
    foreign = dict(good[0], format="other-tool-7")
    lines = [_canonical(good[0]), "{not json", _canonical(edited), _canonical(foreign),
             '{"format": "polyc-tune-1"}', '[1, 2]', _canonical(good[1])[:40]]
    path.write_text("\n".join(lines) + "\n" + _canonical(good[1]) + "\n")
    with pytest.warns(TuningWarning) as w:
        recs = db.records()
    assert [r["id"] for r in recs] == [good[0]["id"], good[1]["id"]]
    text = " ".join(str(x.message) for x in w)
    for why in ("line 2: not JSON", "line 3: its checksum", "line 4: format",
                "line 5: missing", "line 6: not a record", "line 7: not JSON"):
        assert why in text, why


def test_export_and_import(tmp_path):
    a = Database(tmp_path / "a.jsonl")
    b = Database(tmp_path / "b.jsonl")
    a.append([rec(ratio=0.9), rec("best", recipe=None, key="other-machine")])
    assert a.export(tmp_path / "x.jsonl") == 2
    with open(tmp_path / "x.jsonl", "a") as f:
        f.write("garbage\n")
    with pytest.warns(TuningWarning):
        assert b.import_(tmp_path / "x.jsonl") == (2, 1)
    with pytest.warns(TuningWarning):
        assert b.import_(tmp_path / "x.jsonl") == (0, 3)    # ids already there
    assert b.best("other-machine") is not None and b.best("k1") is None
    assert json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])["ratio"] == 0.9


def test_append_after_a_torn_last_line_keeps_the_new_record(tmp_path):
    """A last line without its newline (a writer killed mid-line, an editor)
    is skipped; the records appended after it start on a line of their own
    and are read back."""
    path = tmp_path / "t.jsonl"
    db = Database(path)
    db.append([rec(ratio=1.0), rec(ratio=2.0)])
    path.write_bytes(path.read_bytes()[:-30])        # the second line torn
    db.append([rec("best", recipe=None, speedup=1.25)])
    with pytest.warns(TuningWarning, match="line 2: not JSON"):
        recs = db.records()
        best = db.best("k1")
    assert [r["kind"] for r in recs] == ["sample", "best"]
    assert best["speedup"] == 1.25


def test_export_to_an_unwritable_path_is_a_polyc_error(tmp_path):
    from polyc.errors import PolycError
    db = Database(tmp_path / "t.jsonl")
    db.append([rec(ratio=1.0)])
    with pytest.raises(PolycError, match="cannot write .*no-such-folder"):
        db.export(tmp_path / "no-such-folder" / "x.jsonl")


def test_a_line_being_appended_is_not_reported(tmp_path):
    """Readers take no lock: a compile reading the database while a session
    appends saw the unfinished last line and warned it was corrupt."""
    import warnings
    path = tmp_path / "t.jsonl"
    db = Database(path)
    db.append([rec(ratio=1.0), rec("best", recipe=None)])
    whole = path.read_bytes()
    path.write_bytes(whole + whole.splitlines(keepends=True)[0][:50])   # mid-append
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["kind"] for r in db.records()] == ["sample", "best"]


MM = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


def _tuned_record(program, cfg, legacy=False):
    import polyc
    from polyc.schedule.recipe import legacy_fingerprint
    from polyc.tune.db import key_info, key_of
    recipe = polyc.Schedule.from_program(program, start="isl").tile(
        [("C", "m"), ("C", "n")], [16, 8]).to_recipe()
    if legacy:          # as recipes were written: the fingerprint with the def's name
        recipe["fingerprint"] = legacy_fingerprint(program)
    info = key_info(program, cfg, "all", legacy=legacy)
    return {"key": key_of(info), "keyinfo": info, "kind": "best", "recipe": recipe,
            "label": "t16x8", "speedup": 1.5}


@pytest.mark.parametrize("legacy", [False, True])
def test_a_renamed_definition_keeps_its_tuning(tmp_path, legacy):
    """The key and the recipe's fingerprint left out nothing but the derived
    preconditions: renaming ``def mm`` to ``def matmul`` (same body) lost
    its records, and its recipe was refused as another program's."""
    import numpy as np

    import polyc
    cfg = polyc.Config.from_env().replace(cache_dir=str(tmp_path))
    Database(config=cfg).append([_tuned_record(polyc.program(MM), cfg, legacy)])
    srcs = [MM] if legacy else [MM, MM.replace("def mm(", "def matmul(")]
    for src in srcs:
        k = polyc.compile(src, config=cfg)
        assert "tuned: schedule recipe from" in (k.tuning or ""), k.tuning
        assert "16" in k.source and "ignored" not in k.tuning
        rng = np.random.default_rng(1)
        for m, kk, n in ((1, 1, 1), (17, 9, 15), (16, 8, 8)):
            a = rng.random((m, kk), dtype=np.float32)
            b = rng.random((kk, n), dtype=np.float32)
            np.testing.assert_allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-5)


def test_a_renamed_tensor_is_another_program():
    import polyc
    from polyc.schedule.recipe import program_fingerprint
    a = polyc.program(MM)
    assert program_fingerprint(a) == program_fingerprint(
        polyc.program(MM.replace("def mm(", "def other(")))
    assert program_fingerprint(a) != program_fingerprint(
        polyc.program(MM.replace("A", "X")))
