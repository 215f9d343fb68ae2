"""The predictive moments of log(1 + y) for counts: the point prediction on the log scale.

A count model's predictive mean E[y] is dominated by its tails (Alog's counts reach 2.5e7), and
the square error on the log scale is minimised by E[log(1 + y)], not by log(1 + E[y]). The Python
layer (``fastcep._log1p``) builds h(f) = E[log(1 + y) | f] and h2(f) = E[log(1 + y)^2 | f] on a
uniform grid of f; these kernels give the Poisson's moments at one rate and the expectations of
a tabulated h under f ~ N(m, v).
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED

__all__ = ["poisson_log1p_moments", "poisson_log1p_grid", "gaussian_grid_expectation"]

#: above this rate the moments come from the expansion around the mean (its error is of order
#: 30 / lam^4 < 1e-11), below it from the sum over the counts
EXPANSION_RATE = 2000.0
#: a count's probability relative to the mode's below which the sum stops (past the mode)
SUM_CUTOFF = 1e-20
#: the Gaussian is integrated over its mean +- this many sds
HALF_WIDTH_SDS = 9.0
#: Simpson's step: at most this fraction of the sd, and at most MAX_STEP in f
SDS_PER_STEP = 1.0 / 32.0
MAX_STEP = 1.0 / 32.0


@njit(**LEAF)
def _expansion(t):
    """(E[L], E[L^2]) of L = log(1 + y), y ~ Poisson(lam = e^t), lam >= EXPANSION_RATE: Taylor's
    series of L and L^2 about lam with the Poisson's central moments mu_2..mu_6 (in powers of
    u = 1 / (1 + lam), a = lam u = 1 - u); the n-th derivative of L is (-1)^(n-1) (n-1)! u^n
    and of L^2 2 (-1)^n (n-1)! (H_(n-1) - L) u^n (H the harmonic numbers)."""
    L = t + math.log1p(math.exp(-t))
    u = math.exp(-L)
    a = 1.0 - u
    m2 = a * u
    m3 = a * u * u
    m4 = a * u**3 + 3.0 * a * a * u * u
    m5 = a * u**4 + 10.0 * a * a * u**3
    m6 = a * u**5 + 25.0 * a * a * u**4 + 15.0 * a**3 * u**3
    g = L - m2 / 2.0 + m3 / 3.0 - m4 / 4.0 + m5 / 5.0 - m6 / 6.0
    g2 = (
        L * L
        + (1.0 - L) * m2
        - (2.0 / 3.0) * (1.5 - L) * m3
        + (2.0 / 4.0) * (11.0 / 6.0 - L) * m4
        - (2.0 / 5.0) * (25.0 / 12.0 - L) * m5
        + (2.0 / 6.0) * (137.0 / 60.0 - L) * m6
    )
    return g, g2


@njit(**LEAF)
def poisson_log1p_moments(t):
    """(E[log(1 + y)], E[log(1 + y)^2]) for y ~ Poisson(e^t): the sum over the counts from the
    mode outwards (each term from its neighbour) up to EXPANSION_RATE, the series above it."""
    if t > math.log(EXPANSION_RATE):
        return _expansion(t)
    lam = math.exp(t)
    if lam == 0.0:
        return 0.0, 0.0
    mode = math.floor(lam)
    p_mode = math.exp(-lam + mode * t - math.lgamma(mode + 1.0))
    s1 = 0.0
    s2 = 0.0
    p = p_mode
    y = mode
    while p > SUM_CUTOFF * p_mode:  # upwards, the mode included
        L = math.log1p(y)
        s1 += p * L
        s2 += p * L * L
        y += 1.0
        p *= lam / y
    p = p_mode
    y = mode
    while y > 0.0:  # downwards
        p *= y / lam
        y -= 1.0
        if p <= SUM_CUTOFF * p_mode:
            break
        L = math.log1p(y)
        s1 += p * L
        s2 += p * L * L
    return s1, s2


@njit(**PARALLEL_CACHED)
def poisson_log1p_grid(t0, step, out_g, out_g2):
    """The Poisson's moments of log(1 + y) at t0 + i step (out_g, out_g2: (n,)); each point on
    its own, so the thread count does not change a bit."""
    for i in prange(out_g.shape[0]):
        out_g[i], out_g2[i] = poisson_log1p_moments(t0 + i * step)


@njit(**LEAF)
def _table(f0, step, h, h2, c, d, f):
    """(h(f), h2(f)): 0 below the grid (f < f0, where E[y] < e^-50), the cubic through the four
    nearest grid points on it (n >= 4 points; error of order step^4 times the fourth derivative),
    the asymptotes f + c and (f + c)^2 + d above it."""
    n = h.shape[0]
    x = (f - f0) / step
    if x < 0.0:
        return 0.0, 0.0
    if x > n - 1:
        return f + c, (f + c) * (f + c) + d
    i = min(max(int(x) - 1, 0), n - 4)  # the stencil i .. i + 3
    w = x - i
    # Lagrange's weights at w of the nodes 0, 1, 2, 3
    a0 = -(w - 1.0) * (w - 2.0) * (w - 3.0) / 6.0
    a1 = w * (w - 2.0) * (w - 3.0) / 2.0
    a2 = -w * (w - 1.0) * (w - 3.0) / 2.0
    a3 = w * (w - 1.0) * (w - 2.0) / 6.0
    return (
        a0 * h[i] + a1 * h[i + 1] + a2 * h[i + 2] + a3 * h[i + 3],
        a0 * h2[i] + a1 * h2[i + 1] + a2 * h2[i + 2] + a3 * h2[i + 3],
    )


@njit(**LEAF)
def _upper_tail(m, sd, c, d, a):
    """(E[(f + c) 1{f > a}], E[((f + c)^2 + d) 1{f > a}]) for f ~ N(m, sd^2)."""
    z = (a - m) / sd
    q = 0.5 * math.erfc(z / math.sqrt(2.0))
    phi = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    mu = m + c
    return mu * q + sd * phi, (mu * mu + sd * sd + d) * q + sd * (mu + a + c) * phi


@njit(**LEAF)
def _gaussian_expectation(f0, step, h, h2, c, d, m, v):
    """(E[h(f)], E[h2(f)]) under f ~ N(m, v), h and h2 tabulated at f0 + i step (``_table``):
    Simpson's rule over the grid's part of m +- 9 sd, the asymptotes' closed forms above it, 0
    below it; v = 0 reads the table at m."""
    if not v > 0.0:
        return _table(f0, step, h, h2, c, d, m)
    top = f0 + (h.shape[0] - 1) * step
    sd = math.sqrt(v)
    lo = max(m - HALF_WIDTH_SDS * sd, f0)
    hi = min(m + HALF_WIDTH_SDS * sd, top)
    s1 = 0.0
    s2 = 0.0
    if hi > lo:
        n = int(math.ceil((hi - lo) / min(SDS_PER_STEP * sd, MAX_STEP)))
        n += n % 2
        dx = (hi - lo) / n
        for k in range(n + 1):
            f = lo + k * dx
            w = 1.0 if k == 0 or k == n else (4.0 if k % 2 == 1 else 2.0)
            z = (f - m) / sd
            w *= math.exp(-0.5 * z * z)
            a, b = _table(f0, step, h, h2, c, d, f)
            s1 += w * a
            s2 += w * b
        scale = dx / 3.0 / (sd * math.sqrt(2.0 * math.pi))
        s1 *= scale
        s2 *= scale
    if m + HALF_WIDTH_SDS * sd > top:
        t1, t2 = _upper_tail(m, sd, c, d, max(top, m - HALF_WIDTH_SDS * sd))
        s1 += t1
        s2 += t2
    return s1, s2


@njit(**PARALLEL_CACHED)
def gaussian_grid_expectation(f0, step, h, h2, c, d, m, v, out1, out2):
    """E[h(f)] and E[h2(f)] under f ~ N(m_e, v_e) per entry (m, v, out1, out2: (n,);
    ``_gaussian_expectation``); each entry on its own, so the thread count does not change a bit."""
    for e in prange(m.shape[0]):
        out1[e], out2[e] = _gaussian_expectation(f0, step, h, h2, c, d, m[e], v[e])
