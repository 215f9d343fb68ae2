"""The likelihood's learned parameters (``fastcep.likelihoods``: a parameter given as None),
updated once per sweep from the posterior marginals f_i ~ N(m_i, s2_i) of the observations'
linear predictors: in a regression f = x.w (+ offset), f_i ~ N(x_i.mu, sum x^2 v); in a CP fit
the entry's f = sum_r prod_k u_kr, its predictive mean and variance under the posterior
(``fastcep.tensor.engine``). One update serves both (``LikelihoodLearner``, the marginals from a
callable; ``LearnedParams`` is the regression's):

- the Gaussian's noise precision: its Gamma(a0, b0) posterior (``gamma_posterior``), a = a0 + n / 2,
  b = b0 + sum E[(y_i - f_i)^2] / 2 (the variational update, as cp_gaussian's); the kernels
  take the noise variance 1 / E[precision] = b / a (a0 = b0 = NOISE_A0 = NOISE_B0 in a regression;
  a CP fit takes its a0, b0 options, a stream's batch the Gamma posterior of the batches before);
- every other parameter theta (the negative binomial's dispersion, the Student-t's scale): the
  maximiser of sum_i E[log p(y_i | f_i; theta)] (an EM step, ``em_step``), a bounded
  one-dimensional search in log theta, the expectations by the Gauss-Hermite rule of
  EXPECTATION_NODES nodes (in a stream's batch averaged in log with the value of the batches
  before, weighted by their entries: ``LikelihoodLearner``'s ``memory``).

The first values come from the data alone (``initial_values``): the variance of y, a moment
estimate of the dispersion, a robust scale.
"""

import functools
import math
import warnings

import numpy as np
from scipy.optimize import minimize_scalar

from .. import _validation as V
from ..kernels.glm import generic
from ..likelihoods import NOISE_A0, NOISE_B0, Gaussian
from .sparse import moments as sparse_moments

#: Gauss-Hermite nodes of the tilted moments of likelihoods without a closed form
GENERIC_NODES = 40
#: nodes of the expected log-likelihood (a smooth function of f under a Gaussian)
EXPECTATION_NODES = 24
#: each EM step searches log theta within this distance of the current value
LOG_STEP = 4.0
#: the search's tolerance in log theta
LOG_TOL = 1e-7
#: the range of a learned parameter (EM may walk to a limit: a negative binomial's dispersion
#: grows without bound on Poisson-like counts, and at 1e8 it is the Poisson to within a
#: relative 1e-8 of the variance for means below 1)
PARAM_RANGE = (1e-8, 1e8)
#: narrower ranges of some parameters: a negative binomial's dispersion r -> 0 explains any
#: zeros by P(0) = (r / (r + mu))^r -> 1 at any mean, so on all-zero counts, or on a single
#: nonzero one, EM walked to 1e-8 with predicted means of 6.5e21 (issue 38, item 9); the
#: smallest seen on real counts is 0.05 (BENCHMARKS.md: 0.05 to 1e4)
PARAM_RANGES = {"dispersion": (1e-2, 1e8)}
#: an estimate within this distance in log of its range's end is at the bound (a warning)
AT_BOUND = 1e-3
#: parameters whose range's top is a model's limit, not a degenerate value: a dispersion of 1e8 is
#: the Poisson (counts without overdispersion, as the README's example), no warning
LIMIT_AT_TOP = ("dispersion",)


def param_range(name):
    """The range of learned parameter ``name``."""
    return PARAM_RANGES.get(name, PARAM_RANGE)


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
        low = param_range(name)[0]
        return float(np.clip(mean * mean / (var - mean), low, 1e6)) if var > mean > 0 else 1e6
    raise ValueError(f"no first value for the learned parameter {name!r}")


def initial_values(likelihood, y):
    """{name: first value} of the learned parameters of ``likelihood`` from the values y alone."""
    return {name: _initial(likelihood, name, y) for name in likelihood.learned}


def _np_total(x):
    return float(np.sum(x))


def gamma_posterior(y, m, s2, a0=NOISE_A0, b0=NOISE_B0, total=_np_total):
    """(a, b) of the Gamma(a0, b0)-prior noise precision's posterior given f_i ~ N(m_i, s2_i) and
    the values y_i (arrays (n,)): a = a0 + n / 2, b = b0 + total((y - m)^2 + s2) / 2, ``total``
    the sum (a correctly rounded one where results must not depend on memory alignment)."""
    return a0 + 0.5 * len(y), b0 + 0.5 * total((y - m) ** 2 + s2)


def em_step(likelihood, name, old, y, m, s2, nodes, weights, partial):
    """The value of parameter ``name`` that maximises sum_i E[log p(y_i | f_i)] for f_i ~ N(m_i,
    s2_i) (arrays (n,)), the other parameters of ``likelihood`` (filled in) held: ``em_search``
    of that sum (``kernels.glm.generic.expected_log_lik``; ``partial`` its scratch)."""
    expected = generic.expected_log_lik if partial.shape[0] > 1 else generic.expected_log_lik_serial

    def total(lik):
        return expected(lik.kernel(), y, m, s2, nodes, weights, partial)

    return em_search(likelihood, name, old, total)


def em_search(likelihood, name, old, total):
    """The value of parameter ``name`` that maximises ``total(lik)``, the expected log-likelihood
    of the likelihood ``lik`` (``likelihood`` with that value), the other parameters held: a
    bounded search in log theta within LOG_STEP of log ``old`` and within PARAM_RANGE; ``old`` if
    the objective is not finite there. ``total``: the sum over the rows (in one process, or over
    a cluster's partitions, ``cluster.regression``)."""

    def negative(log_theta):
        value = total(likelihood.with_params(**{name: math.exp(log_theta)}))
        return -value if math.isfinite(value) else math.inf

    centre = math.log(old)
    low, high = (math.log(p) for p in param_range(name))
    bounds = (max(centre - LOG_STEP, low), min(centre + LOG_STEP, high))
    found = minimize_scalar(negative, bounds=bounds, method="bounded", options={"xatol": LOG_TOL})
    return math.exp(found.x) if np.isfinite(found.fun) else old


def expectation_scratch(n):
    """The scratch ``partial`` of ``em_step`` for n values."""
    return np.empty(-(-n // generic.EXPECT_CHUNK) or 1)


class LikelihoodLearner:
    """The current value of a fit's likelihood (its learned parameters filled in), updated from
    the posterior marginals of f that ``marginals(*args)`` returns ((n,) means and variances).

    Parameters
    ----------
    likelihood : fastcep.likelihoods.Likelihood
        The fit's likelihood; its ``learned`` parameters are updated.
    y : array (n,)
        The values, as the likelihood's kernels take them.
    marginals : callable
        ``update(*args)`` calls ``marginals(*args)`` for the means and variances (n,) of f.
    nodes_of_expectations : (nodes, weights)
        The Gauss-Hermite rule of the EM objective.
    start : dict or None
        First values of the learned parameters (a resumed fit's); None: ``initial_values``.
    prior : (a0, b0)
        The Gamma prior of a learned Gaussian noise precision; its posterior after the last
        update is ``gamma``.
    total : callable
        The sum of an array in the Gaussian's update (``gamma_posterior``).
    memory : int
        The number of earlier values that ``start`` summarises (a stream's batches before this
        one; 0 in a fit): a parameter learned by EM takes exp((memory log start + n log
        theta_em) / (memory + n)), the running average of log theta weighted by entries.
    """

    def __init__(
        self, likelihood, y, marginals, nodes_of_expectations, *, start=None, prior=(NOISE_A0, NOISE_B0),
        total=_np_total, memory=0,
    ):  # fmt: skip
        self.y, self.marginals = y, marginals
        self.names = likelihood.learned
        self.learned = bool(self.names)
        self.nodes, self.weights = nodes_of_expectations
        self.prior, self.total, self.memory = prior, total, memory
        self.gamma = prior
        self.updates = 0
        start = initial_values(likelihood, y) if start is None else start
        self.start = start
        self.likelihood = likelihood.with_params(**start) if start else likelihood
        self.template = likelihood
        self._kernel = self.likelihood.kernel()
        self.partial = expectation_scratch(len(y))

    def kernel(self):
        """The numba form of the current likelihood (the drivers' argument)."""
        return self._kernel

    def warn_at_bounds(self, func):
        """Warn (``ConvergenceWarning``) of each learned parameter that ended at an end of its
        range: the data did not determine it, and a value there is no estimate."""
        from .._loop import ConvergenceWarning, outside_the_package

        for name in self.names:
            if isinstance(self.template, Gaussian):
                continue
            value = getattr(self.likelihood, name)
            for bound in param_range(name)[: 1 if name in LIMIT_AT_TOP else 2]:
                if abs(math.log(value / bound)) < AT_BOUND:
                    warnings.warn(
                        f"{func}: the learned {name} of {type(self.template).__name__} ended at the end of "
                        f"its range, {bound:g}: the data do not determine it (counts that are all zero, "
                        f"or nearly so?); give it a value, as {type(self.template).__name__}({name}=...)",
                        ConvergenceWarning,
                        stacklevel=outside_the_package(),
                    )

    def set_values(self, values):
        """The learned parameters at the given values ({name: value}; a resumed fit's)."""
        self.likelihood = self.likelihood.with_params(**values)
        self._kernel = self.likelihood.kernel()

    def noise_posterior(self, m, s2):
        """The Gamma posterior (a, b) of a learned Gaussian noise precision under the marginals."""
        return gamma_posterior(self.y, m, s2, *self.prior, total=self.total)

    def em(self, name, old, m, s2):
        """The EM value of parameter ``name`` (now ``old``) under the marginals m, s2."""
        return em_step(self.likelihood, name, old, self.y, m, s2, self.nodes, self.weights, self.partial)

    def update(self, *args):
        """One update of every learned parameter from the marginals ``marginals(*args)``; returns
        the largest change of a parameter's log."""
        m, s2 = self.marginals(*args)
        self.updates += 1
        change = 0.0
        for name in self.names:
            old = getattr(self.likelihood, name)
            if isinstance(self.template, Gaussian):
                self.gamma = a, b = self.noise_posterior(m, s2)
                new = b / a
            else:
                new = self.em(name, old, m, s2)
                if self.memory:  # (a stream's batch: the running average of log theta)
                    w = len(self.y) / (self.memory + len(self.y))
                    new = math.exp((1.0 - w) * math.log(self.start[name]) + w * math.log(new))
            self.likelihood = self.likelihood.with_params(**{name: new})
            change = max(change, abs(math.log(new / old)))
        self._kernel = self.likelihood.kernel()
        return change


def linear_marginals(X, offset, mu, v):
    """Posterior mean and variance (n,) of each row's f = x.w (+ offset) under the factorised
    posterior mu, v (d,) of the weights (X dense, or a scipy.sparse CSR array)."""
    if V.is_sparse(X):
        m, var = sparse_moments(X, mu, v)
    else:
        m, var = X @ mu, np.einsum("ij,ij,j->i", X, X, v)
    return m + offset if offset.size else m, var


class LearnedParams(LikelihoodLearner):
    """A regression's learned likelihood parameters: the marginals of f = x.w (+ offset) from the
    posterior (mu, v) of the weights (``update(mu, v)``)."""

    def __init__(self, likelihood, X, y, offset, nodes_of_expectations):
        self.X, self.offset = X, offset
        # (a partial, not a bound method: the learner does not reference itself)
        super().__init__(likelihood, y, functools.partial(linear_marginals, X, offset), nodes_of_expectations)
