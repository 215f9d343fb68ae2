"""Negative binomial likelihood with the log link: mean mu = exp(f), dispersion (size) r > 0,
variance mu + mu^2 / r; p(y | f) = Gamma(y + r) / (Gamma(r) y!) (r / (r + mu))^r (mu / (r + mu))^y,
y a nonnegative integer (stored as a float). As r grows it becomes the Poisson. Its tilted moments
come from ``adaptive.adaptive_tilted``."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI, expm1mx, lgamma_correction, log1pmx, softplus
from .adaptive import adaptive_tilted
from .seam import register

#: above this exp(x) is near overflow (``_bracket``)
OVERFLOW_X = 700.0


class NegativeBinomial(NamedTuple):
    """The negative binomial likelihood with the log link and dispersion ``r`` (> 0)."""

    r: float


@njit(**LEAF)
def _sigmoids(t):
    """(1 / (1 + exp(-t)), 1 / (1 + exp(t))) without overflow or cancellation."""
    if t >= 0.0:
        e = math.exp(-t)
        return 1.0 / (1.0 + e), e / (1.0 + e)
    e = math.exp(t)
    return e / (1.0 + e), 1.0 / (1.0 + e)


@njit(**LEAF)
def _bracket(q, x):
    """log(1 + q (exp(x) - 1)) - q x for 0 <= q <= 1/2, without cancellation: for |x| <= 1 as
    q (exp(x) - 1 - x) + log1pmx(q expm1(x)) (the two cancel to a factor 1 - q >= 1/2); for
    x > OVERFLOW_X, where exp(x) overflows, as (1 - q) x + log(q + (1 - q) exp(-x)) (the log of a
    count against a rate e^-1e4 was -inf, and the tilted of a wide cavity there NaN)."""
    if x > OVERFLOW_X:  # (log(q + (1 - q) e^-x) as a log-sum-exp: q may be 0, e^-x underflow)
        a = math.log(q) if q > 0.0 else -math.inf
        b = math.log1p(-q) - x
        top = max(a, b)
        return (1.0 - q) * x + top + math.log1p(math.exp(min(a, b) - top))
    w = q * math.expm1(x)
    if -1.0 <= x <= 1.0:
        return q * expm1mx(x) + log1pmx(w)
    return math.log1p(w) - q * x


@njit(**LEAF)
def log_lik(lik, y, f):
    """log p(y | f), stable for large f and large y or r.

    y = 0: -r log(1 + mu / r). y > 0: with x = f - log y, q = y / (y + r),
    log p = M - (y + r) B, B = log(1 + q (e^x - 1)) - q x = log(1 + p (e^-x - 1)) + p x (p = 1 - q;
    ``_bracket`` of the smaller of q and p), and M = log p(y | log y) = -log(2 pi y (1 + y / r)) / 2
    + c(y + r) - c(r) - c(y) with c Stirling's remainder (``lgamma_correction``): the terms
    lgamma(y + r), lgamma(r), y log(mu / (r + mu)), each up to 2e9 at y = 1e8, never appear.
    """
    r = lik.r
    if y == 0.0:
        return -r * softplus(f - math.log(r))
    s = y + r
    big = -0.5 * (math.log(y) + math.log1p(y / r)) - LOG_SQRT_2PI
    big += lgamma_correction(s) - lgamma_correction(r) - lgamma_correction(y)
    x = f - math.log(y)
    if y <= r:
        return big - s * _bracket(y / s, x)
    return big - s * _bracket(r / s, -x)


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log p = r (y - mu) / (r + mu) and d^2/df^2 = -(y + r) sigma(t) sigma(-t), t = f - log r,
    with y - mu = -y expm1(f - log y) (no cancellation near the peak) and no overflow for large f."""
    r = lik.r
    t = f - math.log(r)
    sp, sm = _sigmoids(t)  # mu / (r + mu), r / (r + mu)
    g2 = -(y + r) * sp * sm
    if y == 0.0:
        return -r * sp, g2
    x = f - math.log(y)
    if t <= 0.0:
        return -y * math.expm1(x) * sm, g2
    return r * math.expm1(-x) * sp, g2


@njit(**LEAF)
def log_lik_step(lik, y, f, x):
    """log p(y | f + x) - log p(y | f) = g1(f) x - (y + r) B with B as in ``log_lik`` but for the
    weights q = sigma(t), p = sigma(-t) at f (t = f - log r): both terms without cancellation."""
    r = lik.r
    g1, g2 = log_lik_derivs(lik, y, f)
    sp, sm = _sigmoids(f - math.log(r))
    if sp <= 0.5:
        return g1 * x - (y + r) * _bracket(sp, x)
    return g1 * x - (y + r) * _bracket(sm, -x)


register(
    NegativeBinomial,
    log_lik=log_lik,
    log_lik_derivs=log_lik_derivs,
    log_lik_step=log_lik_step,
    tilted=adaptive_tilted,
)
