"""The dask executor end to end on a real two-worker LocalCluster bound to
127.0.0.1, with one worker killed mid-run (its build is retried on another
worker and the session finishes), and the errors for an unreachable scheduler
and for a cluster without a MEASURE resource."""

from __future__ import annotations

import time

import pytest

import polyc
from polyc.errors import PolycError
from polyc.tune import Budget, DaskExecutor

distributed = pytest.importorskip("distributed")

TR = "def tr(float(N,M) A) -> (B) { B(j,i) = A(i,j) + 1.0 }"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0",
                                  resources={"MEASURE": 1}, silence_logs=40) as c:
        with distributed.Client(c) as client:
            yield client


def test_dask_tuning_survives_a_killed_worker(cluster, tmp_path):
    cfg = polyc.Config.from_env().replace(cache_dir=str(tmp_path / "cache"))
    marker = tmp_path / "killed"
    before = set(cluster.scheduler_info()["workers"])
    r = polyc.tune(TR, {"N": 200, "M": 120}, config=cfg, progress=False,
                   budget=Budget(seconds=120, measured=3, sampled=200, first=3, neighbours=1),
                   executor=DaskExecutor(cluster),
                   _faults={"build": f"kill-worker-once:{marker}"})
    assert marker.exists(), "no worker was killed"
    assert r.trials[0].status == "measured"
    assert r.measured >= 1, r.report(explain=True)
    cluster.wait_for_workers(2, timeout=60)
    assert set(cluster.scheduler_info()["workers"]) != before     # the nanny restarted one


def test_unreachable_scheduler():
    # a refused connection failed only after the Client's whole timeout (10 s)
    t0 = time.monotonic()
    with pytest.raises(PolycError, match="at tcp://127.0.0.1:9: .*nothing listens there"):
        DaskExecutor("dask://127.0.0.1:9", timeout=30)
    assert time.monotonic() - t0 < 5
    with pytest.raises(PolycError, match="unknown host 'nosuchhost.invalid'"):
        DaskExecutor("dask://nosuchhost.invalid:8786", timeout=30)
    # an address without a port was distributed's bare ValueError
    for bad in ("dask://nohost", "dask://", "tcp://host:x"):
        with pytest.raises(PolycError, match="dask://HOST:PORT, e.g. dask://127.0.0.1:8786"):
            polyc.tune(TR, {"N": 8, "M": 8}, executor=bad, record=False, progress=False)


def test_cluster_without_measure_resource():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0", silence_logs=40) as c:
        with distributed.Client(c) as client:
            with pytest.raises(PolycError, match="MEASURE"):
                DaskExecutor(client)
    # a closed Client was a bare RuntimeError ("IOLoop is closed")
    with pytest.raises(PolycError, match="Client given as executor is closed"):
        DaskExecutor(client)
