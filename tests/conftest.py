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
