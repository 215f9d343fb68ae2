"""Gaussian likelihood with known noise variance: p(y | f) = N(y | f, var)."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI
from .seam import register


class Gaussian(NamedTuple):
    """The Gaussian likelihood of noise variance ``var`` (> 0)."""

    var: float


@njit(**LEAF)
def log_lik(lik, y, f):
    """log N(y | f, var)."""
    u = y - f
    return -0.5 * u * u / lik.var - 0.5 * math.log(lik.var) - LOG_SQRT_2PI


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log N(y | f, var) = (y - f) / var and d^2/df^2 = -1 / var."""
    return (y - f) / lik.var, -1.0 / lik.var


@njit(**LEAF)
def tilted(lik, y, m, v, nodes, weights):
    """Closed form: Z = N(y | m, v + var), alpha = (y - m) / (v + var), beta = 1 / (v + var)."""
    s2 = v + lik.var
    u = y - m
    return -0.5 * u * u / s2 - 0.5 * math.log(s2) - LOG_SQRT_2PI, u / s2, 1.0 / s2


register(Gaussian, log_lik=log_lik, log_lik_derivs=log_lik_derivs, tilted=tilted)
# (its predictive density is the closed-form log Z of ``tilted``)
