"""The sparse boundary under fuzzing (``bench.fuzz_sparse``, issue 56 build point 7): matrices
with any index arrays, fed to fit, predict_proba, update and partial_fit, in a subprocess so
that a crash fails the test instead of killing the run. Before the index checks the harness
segfaulted within its first 150 inputs."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT


def test_sparse_inputs_are_fitted_as_their_dense_copy_or_refused_never_a_crash():
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.fuzz_sparse", "--examples", "150"],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the fuzz run hung")
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-3000:]}"
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["inputs"] == 150 and counts["refused"] > 0 and counts["accepted"] > 0
