"""Predictive moments of CP entries: mean, exact variance, probit probabilities, and the
predictive density of any likelihood of the seam."""

import math

from numba import njit, prange

from .._config import PARALLEL_CACHED
from ..likelihoods import log_predictive
from ..special import log_ndtr
from .moments import cp_value, expected_sq_error, expected_sq_error_diag

__all__ = [
    "predict_mean",
    "predict_full",
    "predict_diag",
    "probit_predictive",
    "generic_log_predictive",
]


# ---------------------------------------------------------------- prediction
@njit(**PARALLEL_CACHED)
def predict_mean(gidx, M, out_mean):
    """Predictive mean 1.(Hadamard_k m_k) of f at each entry (gauge invariant, used for convergence)."""
    n = gidx.shape[0]
    for e in prange(n):
        out_mean[e] = cp_value(gidx[e], M)


@njit(**PARALLEL_CACHED)
def predict_full(gidx, M, E2, out_mean, out_var):
    """Predictive mean 1.(Hadamard_k m_k) and exact Var f = sum(Hadamard_k E[u u^T]) - mean^2."""
    n = gidx.shape[0]
    for e in prange(n):
        out_mean[e] = 0.0
        out_var[e] = 0.0
        mu = cp_value(gidx[e], M)
        second = expected_sq_error(gidx[e], 0.0, M, E2)
        out_mean[e] = mu
        out_var[e] = max(second - mu * mu, 0.0)


@njit(**PARALLEL_CACHED)
def predict_diag(gidx, M, E2d, out_mean, out_var):
    """Diagonal variant of ``predict_full``."""
    n = gidx.shape[0]
    for e in prange(n):
        mu = cp_value(gidx[e], M)
        out_mean[e] = mu
        out_var[e] = max(expected_sq_error_diag(gidx[e], 0.0, M, E2d) - mu * mu, 0.0)


@njit(**PARALLEL_CACHED)
def probit_predictive(mean, var, out_p, out_logp, y_sign):
    """P(y = 1) = Phi(mean / sqrt(1 + var)); log P(y) too when y_sign (+-1) is given."""
    n = mean.shape[0]
    with_y = y_sign.shape[0] == n
    for e in prange(n):
        z = mean[e] / math.sqrt(1.0 + var[e])
        out_p[e] = math.exp(log_ndtr(z))
        if with_y:
            out_logp[e] = log_ndtr(y_sign[e] * z)


@njit(**PARALLEL_CACHED)
def generic_log_predictive(lik, y, mean, var, nodes, weights, out):
    """out[e] = log int p(y[e] | f) N(f | mean[e], var[e]) df for likelihood ``lik`` (its
    ``log_predictive`` leaf, else the log Z of its tilted by the rule ``nodes``, ``weights``);
    y, mean, var, out (n,). Binary likelihoods (labels +-1): y = 1 gives log P(y = 1)."""
    for e in prange(mean.shape[0]):
        out[e] = log_predictive(lik, y[e], mean[e], var[e], nodes, weights)
