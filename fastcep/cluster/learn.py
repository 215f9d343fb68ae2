"""A cluster fit's learned likelihood parameters (``fastcep.glm.learn`` with the data on the
workers), for regression (``cluster.regression``) and CP (``cluster.cp``) fits alike.

The marginals of f at the rows or entries stay on the partitions (their ``marginals(*posterior)``
method computes and keeps them), and each update takes its sums from there: a learned Gaussian
noise's sum of squares (``squares``), and at every value the EM search tries, the per-chunk sums
of the expected log-likelihood (``expected``), added in partition order, as one process adds its
chunks (the same sums where the partitions hold whole chunks of ``EXPECT_CHUNK`` values).
"""

import numpy as np

from ..glm.learn import LikelihoodLearner, em_search, expectation_scratch
from ..kernels.glm import generic


def expected_chunks(likelihood, y, m, s2, nodes, weights):
    """A partition's per-chunk sums of E[log p(y | f)] for f ~ N(m, s2) under ``likelihood``
    (chunks of ``EXPECT_CHUNK`` values, as one process sums them)."""
    part = expectation_scratch(y.shape[0])
    expected = generic.expected_log_lik if part.shape[0] > 1 else generic.expected_log_lik_serial
    expected(likelihood.kernel(), y, m, s2, nodes, weights, part)
    return part


def _partition_marginals(parts, *posterior):
    """The marginals under the posterior, computed and kept on the partitions."""
    parts.call("marginals", *posterior)
    return None, None


class ClusterLearner(LikelihoodLearner):
    """A cluster fit's learned likelihood parameters: ``update(*posterior)`` as
    ``LikelihoodLearner``'s, from the partitions' sums. ``y`` None: the values are gathered from
    the partitions (``values``; n numbers), for the first values; ``keywords`` as
    ``LikelihoodLearner``'s (a CP fit's start, its noise prior)."""

    def __init__(self, likelihood, parts, rule, y=None, **keywords):
        if y is None:
            y = np.concatenate(parts.call("values"))
        super().__init__(likelihood, y, _partition_marginals, rule, **keywords)
        self.parts, self.n = parts, y.shape[0]

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
