"""Poisson likelihood with the log link: p(y | f) = Poisson(y; exp(f)), y a nonnegative integer
(stored as a float). Its tilted moments come from ``adaptive.adaptive_tilted``: the likelihood has
width about y^(-1/2) in f, far narrower than a cavity for large counts."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI, expm1mx, lgamma_correction
from .adaptive import adaptive_tilted
from .seam import register


class Poisson(NamedTuple):
    """The Poisson likelihood with the log link (no parameters)."""


@njit(**LEAF)
def log_lik(lik, y, f):
    """log p(y | f) = y f - exp(f) - lgamma(y + 1), without the cancellation of its terms (each
    about 4e8 at y = 2.5e7, the sum about -10 near its peak): for y > 0, with x = f - log y,
    log p = -y (exp(x) - 1 - x) - log(2 pi y) / 2 - c(y), c(y) = lgamma(y) - ((y - 1/2) log y - y +
    log(2 pi) / 2) Stirling's remainder; -exp(f) for y = 0."""
    if y == 0.0:
        return -math.exp(f)
    return -y * expm1mx(f - math.log(y)) - 0.5 * math.log(y) - LOG_SQRT_2PI - lgamma_correction(y)


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log p = y - exp(f) (as -y expm1(f - log y): no cancellation near the peak) and
    d^2/df^2 = -exp(f)."""
    mu = math.exp(f)
    if y == 0.0:
        return -mu, -mu
    return -y * math.expm1(f - math.log(y)), -mu


@njit(**LEAF)
def log_lik_step(lik, y, f, x):
    """log p(y | f + x) - log p(y | f) = g1(f) x - exp(f) (exp(x) - 1 - x), both terms without
    cancellation."""
    g1, g2 = log_lik_derivs(lik, y, f)
    return g1 * x + g2 * expm1mx(x)


register(
    Poisson, log_lik=log_lik, log_lik_derivs=log_lik_derivs, log_lik_step=log_lik_step, tilted=adaptive_tilted
)
# (its predictive density is the log Z of ``tilted``)
