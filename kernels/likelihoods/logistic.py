"""Bernoulli likelihood with the logit link: p(y | f) = sigmoid(y f), labels y = +-1. Its tilted
moments have no closed form: they come from ``seam.derivative_tilted`` (quadrature)."""

from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import log_sigmoid, sigmoid_pair
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


register(Logistic, log_lik=log_lik, log_lik_derivs=log_lik_derivs)
