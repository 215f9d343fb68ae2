"""A cluster fit's learned likelihood parameters (``fastcep.glm.learn`` with the data on the
workers), for regression (``cluster.regression``) and CP (``cluster.cp``) fits alike.

The marginals of f at the rows or entries stay on the partitions (their ``marginals(*posterior)``
method computes and keeps them), and each update takes its sums from there: a learned Gaussian
noise's sum of squares (``squares``), and at every value the EM search tries, the per-chunk sums
of the expected log-likelihood (``expected``), added in partition order, as one process adds its
chunks of ``EXPECT_CHUNK`` values. A chunk that two partitions share is summed whole by the
first (``EMRows``): after each update's marginals, every partition sends the (value, mean,
variance) of its rows before its first whole chunk, a few thousand numbers at most, to the
partition whose last chunk they end; so the sums, the EM search and the learned values are the
one-process fit's, bitwise, however the rows are split.
"""

import numpy as np

from ..glm.learn import LikelihoodLearner, em_search, expectation_scratch
from ..kernels.glm import generic
from . import on_worker_threads


def expected_chunks(likelihood, y, m, s2, nodes, weights):
    """A partition's per-chunk sums of E[log p(y | f)] for f ~ N(m, s2) under ``likelihood``
    (chunks of ``EXPECT_CHUNK`` values, as one process sums them)."""
    part = expectation_scratch(y.shape[0])
    expected = generic.expected_log_lik if part.shape[0] > 1 else generic.expected_log_lik_serial
    expected(likelihood.kernel(), y, m, s2, nodes, weights, part)
    return part


class EMRows:
    """What a partition (``regression.Partition``, ``cp.CPPartition``: ``values()`` and the
    marginals ``m``, ``s2`` its ``marginals`` keeps) adds to the EM objective: the per-chunk sums
    of E[log p(y | f)] over the chunks of ``EXPECT_CHUNK`` values that begin in its rows, the
    rows after it that its last chunk holds (``em_take``) included, and the rows before its first
    whole chunk (``em_head``) left to the partition whose chunk they end."""

    em_skip = 0  #: the rows before the partition's first whole chunk
    em_rows = None  #: (values, means, variances) of the rows its chunks hold, set by ``em_take``

    def size(self):
        """The partition's rows or entries."""
        return int(self.values().shape[0])

    def em_head(self, first):
        """(values, means, variances) of the rows before the partition's first whole chunk
        (``first``: its first row in the whole fit), which the partition whose chunk they end
        sums; this partition's chunks begin after them."""
        y = self.values()
        k = min(y.shape[0], -first % generic.EXPECT_CHUNK)
        self.em_skip, self.em_rows = k, None
        return y[:k].copy(), self.m[:k].copy(), self.s2[:k].copy()

    def em_take(self, y, m, s2):
        """The rows after this partition's own that its last chunk holds (the next partitions'
        heads, in order): with its own rows after its head, the rows its chunks hold, joined
        once an update (the EM search then sums them some 35 times)."""
        k = self.em_skip
        own = self.values()[k:], self.m[k:], self.s2[k:]
        if y.shape[0]:
            own = tuple(np.concatenate(pair) for pair in zip(own, (y, m, s2), strict=True))
        self.em_rows = own

    @on_worker_threads
    def expected(self, likelihood, nodes, weights):
        """The per-chunk sums of E[log p(y | f)] under the marginals for ``likelihood``, over the
        chunks that begin in the partition's rows (none: an empty array)."""
        y, m, s2 = self.em_rows
        if y.shape[0] == 0:
            return np.zeros(0)
        return expected_chunks(likelihood, y, m, s2, nodes, weights)


def _exchange_heads(parts, sizes):
    """After the marginals: each partition's head rows (``EMRows.em_head``) to the last partition
    before it that begins a chunk, in order (``em_take``)."""
    firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    heads = parts.call_each("em_head", [(int(f),) for f in firsts])
    tails, owner = [[] for _ in heads], None
    for i, (size, head) in enumerate(zip(sizes, heads, strict=True)):
        if head[0].shape[0] and owner is not None:
            tails[owner].append(head)
        if head[0].shape[0] < size:  # (a chunk begins in its rows: it sums the rows that follow)
            owner = i
    empty = np.zeros(0)
    parts.call_each(
        "em_take",
        [tuple(np.concatenate(col) for col in zip(*t, strict=True)) if t else (empty,) * 3 for t in tails],
    )


class ClusterLearner(LikelihoodLearner):
    """A cluster fit's learned likelihood parameters: ``update(*posterior)`` as
    ``LikelihoodLearner``'s, from the partitions' sums. ``y`` None: the values are gathered from
    the partitions (``values``; n numbers), for the first values; ``keywords`` as
    ``LikelihoodLearner``'s (a CP fit's start, its noise prior)."""

    def __init__(self, likelihood, parts, rule, y=None, **keywords):
        if y is None:
            y = np.concatenate(parts.call("values"))
        super().__init__(likelihood, y, self._partition_marginals, rule, **keywords)
        self.parts, self.n = parts, y.shape[0]
        self.sizes = None  # (the partitions' rows, asked once)

    def _partition_marginals(self, parts, *posterior):
        """The marginals under the posterior, computed and kept on the partitions; the heads of
        the chunks they share sent to the partitions that sum those chunks."""
        parts.call("marginals", *posterior)
        if self.sizes is None:
            self.sizes = parts.call("size")
        _exchange_heads(parts, self.sizes)
        return None, None

    def update(self, *posterior):
        return super().update(self.parts, *posterior)

    def noise_posterior(self, m, s2):
        total = 0.0
        for part in self.parts.call("squares"):  # (in partition order)
            total += part
        return self.prior[0] + 0.5 * self.n, self.prior[1] + 0.5 * total

    def em(self, name, old, m, s2):
        def total(lik):
            out = 0.0
            for part in self.parts.call("expected", lik, self.nodes, self.weights):
                for value in part.tolist():
                    out += value
            return out

        return em_search(self.likelihood, name, old, total)
