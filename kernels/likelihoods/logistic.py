"""Bernoulli likelihood with the logit link: p(y | f) = sigmoid(y f), labels y = +-1. Its tilted
moments have no closed form: they come from ``seam.derivative_tilted`` (quadrature)."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI, log_ndtr, log_sigmoid, sigmoid_pair
from .seam import register


class Logistic(NamedTuple):
    """The logistic likelihood (no parameters)."""


@njit(**LEAF)
def log_lik(lik, y, f):
    """log sigmoid(y f)."""
    return log_sigmoid(y * f)


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log sigmoid(y f) = y sigmoid(-y f) and d^2/df^2 = -sigmoid(y f) sigmoid(-y f)."""
    g, h = sigmoid_pair(y * f)
    return y * h, -g * h


#: the predictive's sd beyond which the sigmoid counts as a step (``log_predictive``)
WIDE_SD = 1e4


@njit(**LEAF)
def log_predictive(lik, s, mean, var):
    """log E[sigmoid(s a)] for a ~ N(mean, var), accurate for any variance (the predictive).

    Trapezoid rule on the Gaussian-weighted log integrand, in log space: with spacing
    h <= 1/2 its error is about exp(-2 pi^2 / h) < 1e-17 (the sigmoid's poles are at +-i pi).
    The integrand is log-concave with curvature at least 1 / var, so its mass lies within 10 sd
    of its mode (a drop of 50 in log), found by bisection between mean and mean + s var (where
    the sigmoid may move it: to 0 when the mean is far in the wrong tail).
    Beyond sd = WIDE_SD the sigmoid is a step on the Gaussian's scale: log Phi(s mean / sd), whose
    relative error is about 1.6 (1 + (mean / sd)^2) / sd^2 (the first-order term of sigmoid - step
    integrates to zero): below 2e-5 there, at the last representable tail.
    """
    if var <= 1e-24:
        return log_sigmoid(s * mean)
    sd = math.sqrt(var)
    if sd > WIDE_SD:
        return log_ndtr(s * mean / sd)
    # the mode: the integrand's log has slope -(a - mean) / var + s (1 - sigmoid(s a)), positive
    # at a = mean (sign s) and negative at mean + s var
    lo, hi = (mean, mean + var) if s > 0 else (mean - var, mean)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        slope = -(mid - mean) / var + s * math.exp(log_sigmoid(-s * mid))
        if slope > 0:
            lo = mid
        else:
            hi = mid
    mode = 0.5 * (lo + hi)
    h = min(0.5, 0.25 * sd)
    half = 10.0 * sd
    k = int(min(2.0 * half / h + 1.0, 400_001.0))
    h = 2.0 * half / (k - 1)
    start = mode - half
    lmax = -math.inf
    acc = 0.0
    for j in range(k):
        a = start + j * h
        u = (a - mean) / sd
        lt = -0.5 * u * u + log_sigmoid(s * a)
        if lt > lmax:
            acc = acc * math.exp(lmax - lt) + 1.0
            lmax = lt
        else:
            acc += math.exp(lt - lmax)
    return lmax + math.log(acc * h / sd) - LOG_SQRT_2PI


register(Logistic, log_lik=log_lik, log_lik_derivs=log_lik_derivs, log_predictive=log_predictive)
