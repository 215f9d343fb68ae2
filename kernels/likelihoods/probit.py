"""Bernoulli likelihood with the probit link: p(y | f) = Phi(y f), labels y = +-1."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import inv_mills, log_ndtr
from .seam import register


class Probit(NamedTuple):
    """The probit likelihood (no parameters)."""


@njit(**LEAF)
def log_lik(lik, y, f):
    """log Phi(y f)."""
    return log_ndtr(y * f)


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log Phi(y f) = y r(y f) and d^2/df^2 = -r (y f + r), r = phi / Phi."""
    z = y * f
    r = inv_mills(z)
    return y * r, -r * (z + r)


@njit(**LEAF)
def tilted(lik, y, m, v, nodes, weights):
    """Closed form: Z = Phi(z), z = y m / sqrt(1 + v); alpha = y r(z) / sqrt(1 + v) and beta =
    r (z + r) / (1 + v), r = phi / Phi the inverse Mills ratio (the rule is not used)."""
    idn2 = 1.0 / (1.0 + v)
    idn = math.sqrt(idn2)
    z = y * m * idn
    r = inv_mills(z)
    return log_ndtr(z), y * r * idn, r * (z + r) * idn2


@njit(**LEAF)
def log_predictive(lik, y, m, v):
    """log Phi(y m / sqrt(1 + v))."""
    return log_ndtr(y * (m / math.sqrt(1.0 + v)))


register(Probit, log_lik=log_lik, log_lik_derivs=log_lik_derivs, tilted=tilted, log_predictive=log_predictive)
