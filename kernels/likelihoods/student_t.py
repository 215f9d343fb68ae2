"""Student-t likelihood: y = f + scale t_df, p(y | f) = Gamma((df + 1) / 2) / (Gamma(df / 2)
sqrt(df pi) scale) (1 + ((y - f) / scale)^2 / df)^(-(df + 1) / 2). Not log-concave in f: an
outlier far from the cavity gives a bimodal tilted distribution (the cavity's bulk and the
likelihood's peak), which ``adaptive.adaptive_tilted`` finds from the registered ``peak``."""

import math
from typing import NamedTuple

from numba import njit

from .._config import LEAF
from ..special import LOG_SQRT_2PI, lgamma_correction, log1pmx
from .adaptive import adaptive_tilted
from .seam import register


class StudentT(NamedTuple):
    """The Student-t likelihood of ``df`` (> 0) degrees of freedom and scale ``scale`` (> 0)."""

    df: float
    scale: float


@njit(**LEAF)
def _log_norm(df, scale):
    """log of the normaliser Gamma((df + 1) / 2) / (Gamma(df / 2) sqrt(df pi) scale). For df >= 20
    by Stirling (a = df / 2): lgamma(a + 1/2) - lgamma(a) = log(a) / 2 + a log1pmx(1 / (2 a)) +
    c(a + 1/2) - c(a), so that the normaliser tends to the Gaussian's without the cancellation of
    two large lgamma (lgamma(5e9) is 1e11)."""
    a = 0.5 * df
    if a >= 10.0:
        return (
            -LOG_SQRT_2PI
            - math.log(scale)
            + a * log1pmx(1.0 / df)
            + lgamma_correction(a + 0.5)
            - lgamma_correction(a)
        )
    return math.lgamma(a + 0.5) - math.lgamma(a) - 0.5 * math.log(df * math.pi) - math.log(scale)


@njit(**LEAF)
def log_lik(lik, y, f):
    """log p(y | f) = log normaliser - (df + 1) / 2 log1p(((y - f) / scale)^2 / df)."""
    e = (y - f) / lik.scale
    return _log_norm(lik.df, lik.scale) - 0.5 * (lik.df + 1.0) * math.log1p(e * e / lik.df)


@njit(**LEAF)
def log_lik_derivs(lik, y, f):
    """d/df log p = (df + 1) e / (df scale^2 + e^2) and d^2/df^2 = (df + 1) (e^2 - df scale^2) /
    (df scale^2 + e^2)^2, e = y - f."""
    e = y - f
    ds2 = lik.df * lik.scale * lik.scale
    den = ds2 + e * e
    return (lik.df + 1.0) * e / den, (lik.df + 1.0) * (e * e - ds2) / (den * den)


@njit(**LEAF)
def log_lik_step(lik, y, f, x):
    """log p(y | f + x) - log p(y | f) = -(df + 1) / 2 log1p(x (x - 2 e) / (df scale^2 + e^2)),
    e = y - f."""
    e = y - f
    return -0.5 * (lik.df + 1.0) * math.log1p(x * (x - 2.0 * e) / (lik.df * lik.scale * lik.scale + e * e))


@njit(**LEAF)
def peak(lik, y):
    """argmax_f p(y | f) = y."""
    return y


register(
    StudentT,
    log_concave=False,
    log_lik=log_lik,
    log_lik_derivs=log_lik_derivs,
    log_lik_step=log_lik_step,
    peak=peak,
    tilted=adaptive_tilted,
)
