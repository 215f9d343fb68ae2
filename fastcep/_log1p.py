"""The predictive moments of log(1 + y) under a count model: E[log(1 + y)], the prediction that
minimises the square error on the log scale, and Var[log(1 + y)].

A count's log scale is where heavy-tailed counts are compared (Alog's values are log(1 + count)),
and there log(1 + E[y]) is a poor point: E[y] = exp(m + v / 2) grows with the predictive's
variance. Given f, y ~ Poisson(e^f), or NegativeBinomial(e^f, r), which is the Poisson with its
rate lam = (e^f / r) G, G ~ Gamma(r, 1). So with g(t) and g2(t) the Poisson's moments of
L = log(1 + y) at the rate e^t (``kernels.likelihoods.log1p``: a sum over the counts, or a
series for large rates),

    h(f) = E[L | f] = int g(f - log r + s) p_r(s) ds,   p_r(s) = exp(r s - e^s) / Gamma(r),

the density of s = log G; the same for h2 with g2. On a uniform grid of f and s (STEP) the
integral is a discrete correlation (an FFT). Then E[L] = E[h(f)] and E[L^2] = E[h2(f)] under
f ~ N(m, v), by Simpson's rule over the grid (``gaussian_grid_expectation``).

Where the grid ends:
- below F_LOW, h = 0 (h <= E[y] = e^f < 2e-22);
- above 40 (Poisson) or 40 + 40 / r (negative binomial) the asymptotes h = f + c and
  h2 = (f + c)^2 + d, with c = psi(r) - log r and d = psi'(r) (the mean and the variance of
  log(lam) - f), 0 and 0 for the Poisson: their error there is below 1e-15;
- the density p_r is cut where its left tail holds KERNEL_TAIL of its mass, or where g is 0
  for every f of the grid, and at e^s = r + 12 sqrt(r) + 60 on the right (where the Gamma's
  tail is below e^-60); the step is at most a quarter of its sd.
"""

import math

import numpy as np
from scipy import signal, special

from .kernels.likelihoods import log1p as K

#: the grid's step in f and s (cubic interpolation between its points)
STEP = 1.0 / 512.0
#: below this f, E[log(1 + y) | f] <= E[y] = e^f < 2e-22: taken as 0
F_LOW = -50.0
#: at most this many points on the grid of t = f - log r + s (its step grows beyond)
MAX_POINTS = 2**22
#: the mass of the log-Gamma density left out on the left
KERNEL_TAIL = 1e-14
#: above this size the negative binomial is the Poisson (their moments of log(1 + y) differ by
#: O(1 / r)); below it the grid's step resolves the log-Gamma density, whose sd is about r^-1/2
POISSON_SIZE = 1e8


def log1p_moments(m, v, dispersion=None):
    """(E[log(1 + y)], Var[log(1 + y)]) per entry when f ~ N(m, v) and y | f ~ Poisson(e^f)
    (``dispersion`` None) or NegativeBinomial with mean e^f and size ``dispersion`` r.

    Parameters
    ----------
    m, v : arrays of shape (n,), float64
        The predictive mean and variance of f. v = 0 gives the moments at f = m, m = -inf those
        of a rate of 0 (y = 0); a negative v (the rounding of a variance near 0) is read as 0.
    dispersion : float > 0 or None

    Returns
    -------
    (ndarray, ndarray), float64, shape (n,)
    """
    m = np.ascontiguousarray(m, dtype=np.float64)
    v = np.ascontiguousarray(v, dtype=np.float64)
    if m.ndim != 1 or m.shape != v.shape:
        raise ValueError(
            f"log1p_moments: the means m and the variances v of f must be 1-D arrays of one shape. "
            f"Got shapes {m.shape} and {v.shape} instead."
        )
    bad = np.nonzero(np.isnan(m) | (m == np.inf) | ~np.isfinite(v))[0]
    if bad.size:
        raise ValueError(
            f"log1p_moments: the moments of f must be finite (m may be -inf). Got m = {float(m[bad[0]])!r}, "
            f"v = {float(v[bad[0]])!r} at entries {bad[:5].tolist()} instead."
        )
    v = np.maximum(v, 0.0)
    out1 = np.empty(m.shape[0])
    out2 = np.empty(m.shape[0])
    if m.shape[0] == 0:
        return out1, out2
    if dispersion is None or dispersion > POISSON_SIZE:
        dispersion = None
        top, c, d = 40.0, 0.0, 0.0
    else:
        r = float(dispersion)
        top, c, d = 40.0 + 40.0 / r, float(special.digamma(r) - math.log(r)), float(special.polygamma(1, r))
    sd = np.sqrt(v)
    lo = min(max(F_LOW, float(np.min(m - K.HALF_WIDTH_SDS * sd))), top)
    hi = min(top, max(float(np.max(m + K.HALF_WIDTH_SDS * sd)), lo))
    if dispersion is None:
        step = max(STEP, (hi - lo) / MAX_POINTS)
        f0, n = _anchored(lo, hi, step)
        h, h2 = np.empty(n), np.empty(n)
        K.poisson_log1p_grid(f0, step, h, h2)
    else:
        f0, step, h, h2 = _negbin_grid(lo, hi, r)
    K.gaussian_grid_expectation(f0, step, h, h2, c, d, m, v, out1, out2)
    return out1, np.maximum(out2 - out1 * out1, 0.0)


def _anchored(lo, hi, step):
    """(f0, n): the grid's first point, a multiple of ``step`` at or below ``lo`` (so that every
    batch of entries reads the same grid points), and its number of points, reaching past hi."""
    f0 = math.floor(lo / step) * step
    return f0, int(math.ceil((hi - f0) / step)) + 4


def _negbin_grid(lo, hi, r):
    """(f0, step, h, h2): the negative binomial's moments of log(1 + y) at f0 + i step, from
    lo or below to hi or above, as the correlation of the Poisson's with the log-Gamma density
    (the module's text)."""
    s_lo = max((math.log(KERNEL_TAIL) + special.gammaln(r + 1.0)) / r, F_LOW - hi + math.log(r))
    s_hi = math.log(r + 12.0 * math.sqrt(r) + 60.0)
    step = max(min(STEP, 0.25 / math.sqrt(r)), (hi - lo + s_hi - s_lo) / MAX_POINTS)
    f0, n = _anchored(lo, hi, step)
    s_lo = math.floor(s_lo / step) * step
    J = int(math.ceil((s_hi - s_lo) / step))
    x = s_lo - math.log(r) + step * np.arange(J + 1)  # (s - log r: 0 at the density's mode)
    # p_r(s) step = exp(r s - e^s - log Gamma(r)) step, written about the mode so that the
    # large terms do not cancel when r is large (the mass left of s_lo is left out, not spread)
    p = np.exp(-r * (np.expm1(x) - x) + _log_gamma_norm(r)) * step
    g, g2 = np.empty(n + J), np.empty(n + J)
    K.poisson_log1p_grid(f0 - math.log(r) + s_lo, step, g, g2)
    # h_i = sum_j g_(i + j) p_j; values below 0 are the FFT's rounding of values near 0
    h = np.maximum(signal.fftconvolve(g, p[::-1], mode="valid"), 0.0)
    h2 = np.maximum(signal.fftconvolve(g2, p[::-1], mode="valid"), 0.0)
    return f0, step, h, h2


def _log_gamma_norm(r):
    """r log r - r - log Gamma(r): the log of the log-Gamma density's normaliser about its mode;
    Stirling's series for large r, where the terms of order r log r would cancel."""
    if r < 100.0:
        return r * math.log(r) - r - float(special.gammaln(r))
    stirling = 1.0 / (12.0 * r) - 1.0 / (360.0 * r**3) + 1.0 / (1260.0 * r**5)
    return 0.5 * math.log(r / (2.0 * math.pi)) - stirling
