"""Bernoulli likelihood with the logit link: p(y | f) = sigmoid(y f), labels y = +-1. Its tilted
moments have no closed form: they come from ``seam.derivative_tilted`` (quadrature)."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI, log_sigmoid, sigmoid_pair
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


@njit(**LEAF)
def log_predictive(lik, s, mean, var):
    """log E[sigmoid(s a)] for a ~ N(mean, var), accurate for any variance (the predictive).

    Trapezoid rule on the Gaussian-weighted log integrand, in log space: with spacing
    h <= 1/2 its error is about exp(-2 pi^2 / h) < 1e-17 (the sigmoid's poles are at +-i pi),
    and the range mean +- (10 sd + var) covers the mass even where the sigmoid shifts it by var.
    """
    if var <= 1e-24:
        return log_sigmoid(s * mean)
    sd = math.sqrt(var)
    h = min(0.5, 0.25 * sd)
    half = 10.0 * sd + min(var, 1e4)
    k = min(int(2.0 * half / h) + 1, 400_001)
    h = 2.0 * half / (k - 1)
    lo = mean - half
    lmax = -math.inf
    acc = 0.0
    for j in range(k):
        a = lo + j * h
        u = (a - mean) / sd
        lt = -0.5 * u * u + log_sigmoid(s * a)
        if lt > lmax:
            acc = acc * math.exp(lmax - lt) + 1.0
            lmax = lt
        else:
            acc += math.exp(lt - lmax)
    return lmax + math.log(acc * h / sd) - LOG_SQRT_2PI


register(Logistic, log_lik=log_lik, log_lik_derivs=log_lik_derivs, log_predictive=log_predictive)
