"""The likelihood's learned parameters in a regression fit (``fastcep.likelihoods``: a parameter
given as None), updated once per sweep from the posterior marginals f_i ~ N(x_i.mu, sum x^2 v):

- the Gaussian's noise precision: its Gamma(NOISE_A0, NOISE_B0) posterior, a = a0 + n / 2,
  b = b0 + sum E[(y_i - f_i)^2] / 2 (the variational update, as cp_gaussian's); the kernels
  take the noise variance 1 / E[precision] = b / a;
- every other parameter theta (the negative binomial's dispersion, the Student-t's scale): the
  maximiser of sum_i E[log p(y_i | f_i; theta)] (an EM step), a bounded one-dimensional search in
  log theta, the expectations by the Gauss-Hermite rule of EXPECTATION_NODES nodes.

The first values come from the data alone (``_initial``): the variance of y, a moment estimate of
the dispersion, a robust scale.
"""

import math

import numpy as np
from scipy.optimize import minimize_scalar

from ..kernels.glm import generic
from ..likelihoods import NOISE_A0, NOISE_B0, Gaussian

#: Gauss-Hermite nodes of the tilted moments of likelihoods without a closed form
GENERIC_NODES = 40
#: nodes of the expected log-likelihood (a smooth function of f under a Gaussian)
EXPECTATION_NODES = 24
#: each EM step searches log theta within this distance of the current value
LOG_STEP = 4.0
#: the search's tolerance in log theta
LOG_TOL = 1e-7


def _initial(likelihood, name, y):
    """A first value of learned parameter ``name`` from the values y alone."""
    sd = float(np.std(y))
    if name == "var":
        return sd * sd if sd > 0 else 1.0
    if name == "scale":
        mad = 1.4826 * float(np.median(np.abs(y - np.median(y))))
        return mad if mad > 0 else (sd if sd > 0 else 1.0)
    if name == "dispersion":  # method of moments: Var = mu + mu^2 / r
        mean, var = float(np.mean(y)), sd * sd
        return float(np.clip(mean * mean / (var - mean), 1e-3, 1e6)) if var > mean > 0 else 1e6
    raise ValueError(f"no first value for the learned parameter {name!r}")


class LearnedParams:
    """The current value of a fit's likelihood (its learned parameters filled in)."""

    def __init__(self, likelihood, X, y, offset, nodes_of_expectations):
        self.X, self.y, self.offset = X, y, offset
        self.names = likelihood.learned
        self.learned = bool(self.names)
        self.nodes, self.weights = nodes_of_expectations
        start = {name: _initial(likelihood, name, y) for name in self.names}
        self.likelihood = likelihood.with_params(**start) if start else likelihood
        self.template = likelihood
        self._kernel = self.likelihood.kernel()
        self.partial = np.empty(-(-len(y) // generic.EXPECT_CHUNK) or 1)

    def kernel(self):
        """The numba form of the current likelihood (the drivers' argument)."""
        return self._kernel

    def marginals(self, mu, v):
        """Posterior mean and variance (n,) of each row's f = x.w."""
        m = self.X @ mu
        return m + self.offset if self.offset.size else m, np.einsum("ij,ij,j->i", self.X, self.X, v)

    def update(self, mu, v):
        """One update of every learned parameter from the posterior (mu, v); returns the largest
        change of a parameter's log."""
        m, s2 = self.marginals(mu, v)
        change = 0.0
        for name in self.names:
            old = getattr(self.likelihood, name)
            if isinstance(self.template, Gaussian):
                b = NOISE_B0 + 0.5 * float(np.sum((self.y - m) ** 2 + s2))
                new = b / (NOISE_A0 + 0.5 * len(self.y))
            else:
                new = self._maximise(name, old, m, s2)
            self.likelihood = self.likelihood.with_params(**{name: new})
            change = max(change, abs(math.log(new / old)))
        self._kernel = self.likelihood.kernel()
        return change

    def _maximise(self, name, old, m, s2):
        def negative(log_theta):
            lik = self.likelihood.with_params(**{name: math.exp(log_theta)}).kernel()
            total = generic.expected_log_lik(lik, self.y, m, s2, self.nodes, self.weights, self.partial)
            return -total if math.isfinite(total) else math.inf

        centre = math.log(old)
        bounds = (centre - LOG_STEP, centre + LOG_STEP)
        found = minimize_scalar(negative, bounds=bounds, method="bounded", options={"xatol": LOG_TOL})
        return math.exp(found.x) if np.isfinite(found.fun) else old
