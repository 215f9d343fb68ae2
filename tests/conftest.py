import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("FASTCEP_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="module")
def client():
    """A Dask cluster of two worker processes of one thread each (processes=True, as the cluster
    issue's tests ask), one per test module; skipped without the dask extra."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        _close(cluster)


def _close(cluster):
    """Close a LocalCluster. distributed 2026.8 may raise "KeyError: 'tcp://...'" closing one whose
    killed workers its nannies restarted (a worker it no longer lists), and leave it open: then
    once more, and if it still is not closed it is marked closed, so that the garbage collector
    does not warn of it (ResourceWarning, an error here) in whatever test runs at that moment
    (seen once: test_kernel_cache.py failed after a cluster module's killed-worker test)."""
    from distributed.core import Status

    for _ in range(2):
        try:
            cluster.close()
        except KeyError:
            pass
        if cluster.status == Status.closed:
            return
    cluster.status = Status.closed


@pytest.fixture
def rng():
    return np.random.default_rng(20191122)


@pytest.fixture
def uci_dir():
    path = SHARED_DATA / "uci" / "raw"
    if not path.is_dir():
        pytest.skip(f"UCI raw files not found at {path}")
    return path


def same_posterior(a, b):
    """Two CP results (fits or streams) with bitwise the same posterior."""
    for k in range(len(a.shape)):
        np.testing.assert_array_equal(a.posterior.means[k], b.posterior.means[k])
        np.testing.assert_array_equal(a.posterior.covs[k], b.posterior.covs[k])
    assert a.posterior.noise == b.posterior.noise
