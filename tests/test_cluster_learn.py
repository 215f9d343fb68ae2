"""The EM objective's chunks that partitions share (``fastcep.cluster.learn``), without a
cluster: the partitions' sums, added in order, are one process's, bitwise, however the rows are
cut, partitions that hold no whole chunk and empty ones included."""

import numpy as np
import pytest

from fastcep._quadrature import gauss_hermite
from fastcep.cluster.learn import EMRows, _exchange_heads
from fastcep.glm.learn import EXPECTATION_NODES, expectation_scratch
from fastcep.kernels.glm import generic
from fastcep.likelihoods import NegativeBinomial

CHUNK = generic.EXPECT_CHUNK


class Part(EMRows):
    threads = None

    def __init__(self, y, m, s2):
        self.y, self.m, self.s2 = y, m, s2

    def values(self):
        return self.y


class Parts:
    """``cluster.partitions.Partitions``' calls, in this process."""

    def __init__(self, parts):
        self.parts = parts

    def call(self, name, *args):
        return [getattr(p, name)(*args) for p in self.parts]

    def call_each(self, name, args):
        return [getattr(p, name)(*a) for p, a in zip(self.parts, args, strict=True)]


@pytest.mark.parametrize(
    "cuts",
    [
        [0, 3000, 9001],  # (a shared chunk)
        [0, 4096, 9001],  # (whole chunks)
        [0, 3000, 3500, 3500, 9000, 9001],  # (one inside a chunk, an empty one, one row last)
        [0, 100, 200, 9001],
        [0, 9001],
    ],
    ids=str,
)
def test_the_partitions_sums_are_one_process_s(cuts):
    rng = np.random.default_rng(0)
    n = cuts[-1]
    y = rng.negative_binomial(2.0, 0.4, n).astype(float)
    m, s2 = rng.normal(0.5, 1.0, n), rng.uniform(0.01, 2.0, n)
    lik = NegativeBinomial(dispersion=2.0)
    nodes, weights = gauss_hermite(EXPECTATION_NODES)
    want = generic.expected_log_lik(lik.kernel(), y, m, s2, nodes, weights, expectation_scratch(n))
    parts = Parts([Part(y[a:b], m[a:b], s2[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)])
    _exchange_heads(parts, [p.size() for p in parts.parts])
    total = 0.0
    chunks = 0
    for sums in parts.call("expected", lik, nodes, weights):
        chunks += len(sums)
        for value in sums.tolist():
            total += value
    assert chunks == -(-n // CHUNK)
    assert total == want
