"""Scalar special functions for the kernels: Gaussian tail ratios and the logistic function.

All are serial ``@njit`` leaves that take and return floats, never raise, and stay finite over
the whole real line (numba has no ``log_ndtr`` and ``math.erfc`` underflows near z = -38).
"""

import math

from numba import njit

from ._config import LEAF

SQRT2 = math.sqrt(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

#: below this z the ratio phi(z)/Phi(z) comes from the asymptotic series, not from erfc
_TAIL_Z = -30.0


@njit(**LEAF)
def _tail_series(z):
    """S(z) = (-z) Phi(z) / phi(z) = 1 - 1/z^2 + 3/z^4 - 15/z^6 + ... for z <= -30 (error < 1e-17)."""
    w = 1.0 / (z * z)
    # (2k - 1)!! (-w)^k, k = 0..8, in Horner form
    s = 1.0 - 15.0 * w  # k = 8 factor: 2k-1 = 15
    s = 1.0 - 13.0 * w * s
    s = 1.0 - 11.0 * w * s
    s = 1.0 - 9.0 * w * s
    s = 1.0 - 7.0 * w * s
    s = 1.0 - 5.0 * w * s
    s = 1.0 - 3.0 * w * s
    s = 1.0 - 1.0 * w * s
    return s


@njit(**LEAF)
def log_ndtr(z):
    """log Phi(z), the log of the standard normal CDF, accurate on the whole real line."""
    if z > 0.0:
        return math.log1p(-0.5 * math.erfc(z / SQRT2))
    if z > _TAIL_Z:
        return math.log(0.5 * math.erfc(-z / SQRT2))
    # Phi(z) = phi(z) S(z) / (-z)
    return -0.5 * z * z - LOG_SQRT_2PI - math.log(-z) + math.log(_tail_series(z))


@njit(**LEAF)
def inv_mills(z):
    """r(z) = phi(z) / Phi(z), the inverse Mills ratio, finite for every finite z."""
    if z > _TAIL_Z:
        return INV_SQRT_2PI * math.exp(-0.5 * z * z) / (0.5 * math.erfc(-z / SQRT2))
    return -z / _tail_series(z)


@njit(**LEAF)
def sigmoid_pair(t):
    """(sigmoid(t), 1 - sigmoid(t)) without overflow or cancellation."""
    e = math.exp(-abs(t))
    inv = 1.0 / (1.0 + e)
    if t >= 0.0:
        return inv, e * inv
    return e * inv, inv


@njit(**LEAF)
def log_sigmoid(t):
    """log(1 / (1 + exp(-t))) without overflow."""
    if t >= 0.0:
        return -math.log1p(math.exp(-t))
    return t - math.log1p(math.exp(t))
