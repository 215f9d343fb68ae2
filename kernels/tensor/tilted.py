"""The one-dimensional tilted moments that the generic CP messages take (``cp_tilted``).

A CP message's tilted p(y | a) N(a | m, v) often has a wide cavity: v = tr(Sc E[z z^T]) is the
spread of a = u.z over an object's cavity and the other modes' moments (on Enron at rank 8, a
logistic fit's median is 2-8 and its upper percentiles reach 20-50). The seam's Gauss-Hermite
rule (``likelihoods.seam``) puts its nodes on the cavity, spaced by about sqrt(v): once that is
large against the likelihood's own scale, the tilted's edge falls between nodes. Measured on the
logistic against a dense grid, 32 nodes: the tilted variance is off by 6e-6 (relative) at v = 3,
3e-2 at v = 10, 5 at v = 30; centring and scaling the rule on the tilted's mode (adaptive
Gauss-Hermite) only gains a factor 20-30, for the tilted is far from Gaussian there (a soft
half-normal). So for a likelihood with ``log_lik_derivs`` and no closed form, ``cp_tilted``
takes the trapezoid rule on the tilted's own support and scale (``trapezoid_tilted``), accurate
to rounding at any v; a registered closed form (the probit, the Gaussian) or a likelihood with
``log_lik`` only go to the seam's ``tilted`` unchanged. This belongs in the seam's quadrature
fallback; until it is there, it lives here.
"""

import math

from numba import njit
from numba.extending import overload

from .._config import LEAF
from ..likelihoods import log_lik, log_lik_derivs, tilted
from ..likelihoods.adaptive import add_node
from ..likelihoods.seam import has_leaf
from ..special import finite

__all__ = ["cp_tilted", "trapezoid_tilted"]

#: Newton steps (each with its own backtracking) of the tilted's mode at most
MODE_ITER = 50
#: the support of the trapezoid rule: where the tilted's log-density is within DROP of its top
#: (the rest holds less than e^-DROP of its mass times the support's length in scales)
DROP = 40.0
#: bisections of each end of the support, after doubling (the end is within 2^-BISECT of a
#: doubling step)
BISECT = 8
#: the support ends within EXTENT_SDS cavity sds of the mode (the Gaussian factor alone falls
#: by DROP within 9 sds)
EXTENT_SDS = 12.0
#: the trapezoid rule's tolerance between halvings (relative; ATOL absolute, in the units of
#: alpha sqrt(v) and beta v) and its most points
RTOL = 1e-10
ATOL = 1e-15
MAX_POINTS = 8192
#: where the tilted variance is below this fraction of the cavity's, alpha and beta come from the
#: tilted's mean and variance (no cancellation in v - Var[a]); above, from the derivatives
STRONG = 0.5


@njit(**LEAF)
def _log_tilted(lik, y, a, m, v):
    """log p(y | a) - (a - m)^2 / (2 v): the tilted's log-density up to its constant."""
    u = a - m
    return log_lik(lik, y, a) - 0.5 * u * u / v


@njit(**LEAF)
def _extent(lik, y, a, m, v, top, d, sign):
    """The distance from the mode a along ``sign`` at which the tilted's log-density falls DROP
    below its top: doubling d (from the rule's scale), then halving the bracket BISECT times
    (its upper end is returned); at most EXTENT_SDS cavity sds."""
    far = EXTENT_SDS * math.sqrt(v) + d
    lo = 0.0
    while d < far and _log_tilted(lik, y, a + sign * d, m, v) > top - DROP:
        lo = d
        d *= 2.0
    d = min(d, far)
    for _ in range(BISECT):
        mid = 0.5 * (lo + d)
        if _log_tilted(lik, y, a + sign * mid, m, v) > top - DROP:
            lo = mid
        else:
            d = mid
    return d


@njit(**LEAF)
def _accumulate(lik, y, m, v, a, c1, start, h, n, acc):
    """Add the points start + j h (j < n) to the sums acc = (top, z, s1, s2, d1, d11, d2) of
    ``trapezoid_tilted`` (``add_node``: terms relative to the largest log-density so far, top)
    and return them: of p, p t, p t^2 (t = point - a), p u, p u^2 (u = g1 - c1) and p g2. A point
    whose term is nothing (``add_node``) takes no derivatives."""
    for j in range(n):
        aj = start + j * h
        lt = _log_tilted(lik, y, aj, m, v)
        if not lt - acc[0] > -745.0:
            continue
        g1, g2 = log_lik_derivs(lik, y, aj)
        acc = add_node(acc, lt, 1.0, aj - a, g1 - c1, g2)
    return acc


@njit(**LEAF)
def _moments(acc, h, a, m, v, c1):
    """(log Z, alpha, beta) from the trapezoid sums ``acc`` at spacing h (``trapezoid_tilted``)."""
    top, z, s1, s2, d1, d11, d2 = acc
    if not (finite(top) and z > 0.0):
        return math.nan, math.nan, math.nan
    log_z = top + math.log(z * h) - 0.5 * math.log(2.0 * math.pi * v)
    e1 = s1 / z  # the tilted's moments of t = a - a*
    var = s2 / z - e1 * e1
    if var < STRONG * v:
        return log_z, (a - m + e1) / v, (v - var) / (v * v)
    e_u = d1 / z
    return log_z, c1 + e_u, -d2 / z - (d11 / z - e_u * e_u)


@njit(**LEAF)
def trapezoid_tilted(lik, y, m, v):
    """(log Z, alpha, beta) of p(y | a) N(a | m, v) by the trapezoid rule on the tilted's support.

    The mode a* of phi(a) = log p(y | a) - (a - m)^2 / (2 v) by Newton's method from m, each step
    halved until phi does not decrease (with the curvature c = g2 - 1 / v of phi, or -1 / v where
    c is not negative: a likelihood that is not log-concave there); the local scale
    s = 1 / sqrt(-c(a*)) (sqrt(v) if c(a*) is not negative); the support where phi is within DROP
    of phi(a*) on either side (``_extent``). There the trapezoid rule, from spacing s / 2, halved
    until (log Z, alpha, beta) change by less than RTOL (relative; ATOL / sqrt(v) and ATOL / v
    absolute for alpha and beta) or MAX_POINTS are used: for the smooth likelihoods of the seam
    its error falls like exp(-2 pi w / h), w the half-width of the strip where p(y | a) is
    analytic (the logistic: w = pi), however wide the cavity, and a feature away from the mode
    (the logistic's edge far in a wide cavity's tail) only needs more halvings.

    Where the factor is strong (tilted variance below STRONG of v) alpha = (E[a] - m) / v and
    beta = (v - Var[a]) / v^2; where it is weak those cancel, and alpha = E[g1], beta = -E[g2] -
    Var[g1] (integration by parts, as the seam's ``derivative_tilted``; Var[g1] about g1(a*)).
    NaNs when v is not positive or the tilted has no mass.
    """
    if not v > 0.0:
        return math.nan, math.nan, math.nan
    a = m
    phi = _log_tilted(lik, y, a, m, v)
    for _ in range(MODE_ITER):
        g1, g2 = log_lik_derivs(lik, y, a)
        c = g2 - 1.0 / v
        if not c < 0.0:
            c = -1.0 / v
        step = -(g1 - (a - m) / v) / c
        moved = False
        for _ in range(60):
            cand = a + step
            phi_c = _log_tilted(lik, y, cand, m, v)
            if phi_c >= phi:
                moved = cand != a
                a = cand
                phi = phi_c
                break
            step *= 0.5
        if not moved or abs(step) <= 1e-12 * (math.sqrt(v) + abs(a)):
            break
    c1, c2 = log_lik_derivs(lik, y, a)
    c = c2 - 1.0 / v
    s = min(1.0 / math.sqrt(-c), math.sqrt(v)) if c < 0.0 else math.sqrt(v)
    if not (finite(a) and finite(phi) and finite(c1) and s > 0.0):
        return math.nan, math.nan, math.nan
    left = _extent(lik, y, a, m, v, phi, s, -1.0)
    right = _extent(lik, y, a, m, v, phi, s, 1.0)
    n = int(min(2.0 * (left + right) / s, 0.5 * MAX_POINTS)) + 1
    h = (left + right) / (n - 1)
    lo = a - left
    acc = _accumulate(lik, y, m, v, a, c1, lo, h, n, (phi, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
    log_z, alpha, beta = _moments(acc, h, a, m, v, c1)
    used = n
    while used + n - 1 <= MAX_POINTS:
        acc = _accumulate(lik, y, m, v, a, c1, lo + 0.5 * h, h, n - 1, acc)  # the midpoints
        used += n - 1
        n = 2 * n - 1
        h *= 0.5
        new_z, new_alpha, new_beta = _moments(acc, h, a, m, v, c1)
        done = (
            abs(new_z - log_z) <= RTOL * (1.0 + abs(new_z))
            and abs(new_alpha - alpha) <= RTOL * abs(new_alpha) + ATOL / math.sqrt(v)
            and abs(new_beta - beta) <= RTOL * abs(new_beta) + ATOL / v
        )
        log_z, alpha, beta = new_z, new_alpha, new_beta
        if done:
            break
    return log_z, alpha, beta


def cp_tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) of p(y | f) N(f | m, v) for the generic CP messages (in compiled code
    only): the seam's ``tilted`` (its closed form, or its Gauss-Hermite rule ``nodes``,
    ``weights`` for a likelihood with ``log_lik`` only), or ``trapezoid_tilted`` for a likelihood
    with ``log_lik_derivs`` and no closed form (see the module's text). The drivers of the
    hand-written models, which leave the likelihood out, never compile it: their generic
    messages are stubs (``messages.by_likelihood``)."""
    raise TypeError("cp_tilted is resolved by numba inside compiled code")


@overload(cp_tilted)
def _cp_tilted(lik, y, m, v, nodes, weights):
    cls = getattr(lik, "instance_class", None)
    if has_leaf(cls, "tilted") or not has_leaf(cls, "log_lik_derivs"):
        return lambda lik, y, m, v, nodes, weights: tilted(lik, y, m, v, nodes, weights)
    return lambda lik, y, m, v, nodes, weights: trapezoid_tilted(lik, y, m, v)
