import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = pathlib.Path(os.environ.get("FASTCEP_SHARED_DATA", ROOT.parent / "shared" / "data"))


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
