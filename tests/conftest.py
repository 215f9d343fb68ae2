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
        try:
            cluster.close()
        except KeyError:  # (distributed 2026.8 closing a cluster whose killed workers its nannies
            pass  # restarted: "KeyError: 'tcp://...'" for a worker it no longer lists)


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
