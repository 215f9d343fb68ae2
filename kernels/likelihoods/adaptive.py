"""Tilted moments centred on the tilted distribution itself, for likelihoods much narrower than the
cavity (heavy counts) and for likelihoods that are not log-concave (Student-t).

``adaptive_tilted(lik, y, m, v, nodes, weights)`` returns (log Z, alpha, beta) of
p(y | f) N(f | m, v) in the seam's convention (``seam``); the Gauss-Hermite rule it is given is not
used. ``tilted_moments(lik, y, m, v)`` returns (log Z, tilted mean, tilted variance) from the same
sums.

The method
----------
1. **The mode.** Newton on L(d) = log p(y | m + d) - d^2 / (2 v) from the cavity mean (d = 0),
   with backtracking (a step is halved until L does not decrease; steps in a region where L is
   convex follow the gradient times v). Derivatives from ``log_lik_derivs`` where registered,
   else central differences of ``log_lik_step`` (a user's log-density). The scale is Laplace's,
   s = (-L''(mode))^(-1/2). A likelihood that registers ``peak`` (not log-concave) gets a second
   Newton from argmax p(y | f); two distinct maxima make the tilted distribution bimodal (step 3).
   Where Newton cannot reach the mode (the derivatives at the cavity's mean are infinite, a log
   link's exp(f) past f = 709, or its steps are too short: about 1 a step where exp(f) dominates,
   from a cavity at f = 300 to a zero count's mode near f = 6), it goes on from the bisection of
   a bracket of the mode (``_bracketed_root``).
2. **One mode: a trapezoid rule in u, f = c + s sinh(kappa u) / kappa** (kappa = ``KAPPA``), from
   step ``H0`` halved until two successive levels agree to ``TOL`` in log Z, in the tilted mean
   (relative to the tilted sd) and in the tilted variance (relative). Near the mode the nodes are
   s h apart; further out the spacing grows like |f - c| h, so one rule covers both a tilted
   dominated by a narrow likelihood (a count y = 2.5e7 against a cavity of sd 30: s = 2e-4) and
   a skewed one whose two sides have different scales (y = 0 against a cavity of sd 30: a cliff of
   width 1 on the right, the cavity's sd 30 on the left). The range of u is walked out at the
   first level until two successive nodes on both sides fall below ``NEGLIGIBLE`` of the sum.
3. **Two modes** (Student-t with an outlier: the cavity's bulk and the likelihood's peak, each
   with its own Laplace scale, perhaps 1e4 apart): three double-exponential rules, exp-sinh from
   each mode outwards and tanh-sinh between them (their nodes crowd at both ends, where the peaks
   are, on every scale: the spacing at distance d from an end is about d h log(D / d)), refined
   the same way.

Error analysis. The trapezoid rule on the real line has error about exp(-2 pi w / h) for an
integrand analytic in the strip |Im u| < w. For a Gaussian tilted the sinh map gives w =
pi / (4 kappa): with kappa = 0.75, exp(-pi^2 / (1.5 h)) = 2e-6 at h = 1/2 and 5e-12 at h = 1/4;
the error of a level is about the square of the difference between the previous two, so
stopping when that difference is below TOL = 1e-7 leaves about 1e-12. Likelihoods narrower
than a Gaussian in the complex direction (the double exponential of a Poisson with y = 0, whose
strip is pi/2 wide in f) need a smaller h, which the halving finds. Measured on a grid of 1,300
cases (Poisson and negative binomial with y from 0 to 2.5e7, r from 0.1 to 1e4, cavity sd from
1e-3 to 30 and means 20 away from log y; Student-t with df 1 to 30 and outliers 50 scales or 50
cavity sds away) against scipy's adaptive quadrature: worst relative error 5e-12 in log Z, the
tilted mean (relative to its sd) and variance, at a median of 68 likelihood evaluations (the
cavity-centred Gauss-Hermite rule with 80 nodes is off by 0.5 in the worst case); bimodal
Student-t about 400 evaluations. tests/test_likelihood_leaves.py holds a part of that grid.

Rounding. The integrand is formed as log p(y | c + x) - log p(y | c) by ``log_lik_step`` (no
difference of two large log-likelihoods), minus x (x / 2 + d) / v for the cavity, with x the
exact offset of the node from c (``_offset``, whose ``f - c`` must not be folded into ``x``: no
``reassoc``). What remains is conditioning: the cavity mean m itself counts to its last bit,
whose effect on log Z is alpha ulp(m).

(alpha, beta). Strong factors (kappa_f = v |g2(mode)| >= ``WEAK_FACTOR``): alpha = (E f - m) / v
and beta = (1 - Var f / v) / v. Weak factors (kappa_f below it), where 1 - Var f / v would cancel:
alpha = E[g1] and beta = -E[g2] - Var[g1] over the same nodes (integration by parts, as
``seam.derivative_tilted``), for likelihoods with ``log_lik_derivs``; a user's log-density has
none, and its beta loses about log10(1 / kappa_f) digits there. The convention itself is
ill-conditioned for strong factors: v - v^2 beta, the tilted variance, cancels to about
eps kappa_f relative (2e-9 for a count of 2.5e7 against a cavity of variance 1), which is why
``tilted_moments`` gives the variance directly.

Kernels never raise: NaNs for a non-positive or non-finite v or m, or when no mode is found.
"""

import math

from numba import njit
from numba.extending import overload

from .._config import LEAF
from ..special import LOG_SQRT_2PI, finite
from .seam import WEAK_FACTOR, leaf_of, log_lik, log_lik_derivs, log_lik_step

#: the sinh map's rate: f = c + s sinh(KAPPA u) / KAPPA
KAPPA = 0.75
#: the first level's step in u (the sinh rule and the double-exponential rules)
H0 = 0.5
#: two successive levels must agree to this (log Z, mean / sd, variance): error about TOL^2
TOL = 1e-7
#: at most this many halvings of the step (the sinh rule; the double-exponential rules 6)
MAX_LEVELS = 8
MAX_LEVELS_DE = 6
#: a node term below this fraction of the sum ends the first level's walk outwards
NEGLIGIBLE = 1e-18
#: the double-exponential rules run over |u| <= DE_UMAX (their weights at the ends: < 1e-17)
DE_UMAX = 4.0
#: Newton iterations at most, and the step (relative to the Laplace scale) that ends them
NEWTON_ITERATIONS = 100
NEWTON_TOL = 1e-9
#: halvings of a Newton step at most, in the backtracking
BACKTRACKS = 60
#: central differences (a user's log-density) with step FD_STEP times the current scale
FD_STEP = 1e-4
#: two Newton limits closer than this (relative to the sum of their scales) are one mode
MODE_SEPARATION = 1e-3
#: where the derivatives at the cavity's mean are infinite (a log link's exp(f) past f = 709):
#: doublings of the search for the other end of a bracket of the mode, and bisections of it
BRACKET_DOUBLINGS = 1100
BRACKET_BISECTIONS = 200
_HALF_PI = 0.5 * math.pi


@njit(**LEAF)
def _offset(c, x):
    """(f, x') = (c + x, (c + x) - c): the node and its exact offset from c (Sterbenz). With
    ``reassoc`` (which the kernels' fastmath leaves out: ``_config``) LLVM would fold (c + x) - c
    into x, and the cavity's term would then be taken at another point than the likelihood's."""
    f = c + x
    return f, f - c


def _derivs(lik, y, f, h):
    """(d/df, d^2/df^2) log p(y | f) (in compiled code only): ``log_lik_derivs`` where registered,
    else central differences of ``log_lik_step`` with steps about h."""
    raise TypeError("_derivs is resolved by numba inside compiled code")


def _analytic(lik):
    """Whether ``lik`` has ``log_lik_derivs`` (in compiled code only)."""
    raise TypeError("_analytic is resolved by numba inside compiled code")


def _peak(lik, y):
    """argmax_f p(y | f) where the likelihood registers ``peak``, else NaN (compiled code only)."""
    raise TypeError("_peak is resolved by numba inside compiled code")


@overload(_derivs)
def _derivs_impl(lik, y, f, h):
    if leaf_of(lik, "log_lik_derivs") is not None:
        return lambda lik, y, f, h: log_lik_derivs(lik, y, f)

    def finite_differences(lik, y, f, h):
        fp, hp = _offset(f, h)
        fm, hm = _offset(f, -h)
        hm = -hm
        a = log_lik_step(lik, y, f, hp)
        b = log_lik_step(lik, y, f, -hm)
        return (a * hm / hp - b * hp / hm) / (hp + hm), 2.0 * (a / hp + b / hm) / (hp + hm)

    return finite_differences


@overload(_analytic)
def _analytic_impl(lik):
    if leaf_of(lik, "log_lik_derivs") is not None:
        return lambda lik: True
    return lambda lik: False


@overload(_peak)
def _peak_impl(lik, y):
    leaf = leaf_of(lik, "peak")
    if leaf is not None:
        return lambda lik, y: leaf(lik, y)
    return lambda lik, y: math.nan


@njit(**LEAF)
def _gradient(lik, y, m, v, x, sd):
    """The tilted's gradient in the offset x: d/dx [log p(y | m + x) - x^2 / (2 v)]."""
    return _derivs(lik, y, m + x, FD_STEP * sd)[0] - x / v


@njit(**LEAF)
def _bracketed_root(lik, y, m, v, d, sd):
    """The mode's offset by bisection, where Newton cannot reach it: the tilted's gradient
    g(x) = g1(m + x) - x / v is infinite at d (a log link's exp(f) overflows past f = 709), or
    Newton's steps from d are too short (about 1 a step where exp(f) dominates: the mode of a
    zero count against a cavity at f = 300 lies near f = 20). From d along the gradient's sign,
    the first point d -+ sd 2^j whose g is finite and of the other sign, then bisection of that
    bracket. NaN if g(d) is NaN or 0 or no bracket is found."""
    g_d = _gradient(lik, y, m, v, d, sd)
    if not (g_d > 0.0 or g_d < 0.0):
        return math.nan
    sign = 1.0 if g_d > 0.0 else -1.0
    far, step = math.nan, sd
    for _ in range(BRACKET_DOUBLINGS):
        x = d + sign * step
        g = _gradient(lik, y, m, v, x, sd)
        if finite(g) and g * sign < 0.0:
            far = x
            break
        step *= 2.0
    if math.isnan(far):
        return math.nan
    near = d  # (g has the sign of ``sign`` at near, the other at far)
    for _ in range(BRACKET_BISECTIONS):
        mid = 0.5 * (near + far)
        if mid == near or mid == far:
            break
        g = _gradient(lik, y, m, v, mid, sd)
        if g * sign > 0.0:  # (NaN: the far side)
            near = mid
        else:
            far = mid
    return far


@njit(**LEAF)
def tilted_mode(lik, y, m, v, start):
    """(d, s, ok): a local maximum m + d of log p(y | m + d) - d^2 / (2 v) reached by Newton with
    backtracking from m + start, and Laplace's scale s there; ok False (and d, s NaN) when none was
    found. Where the likelihood's derivatives at the start are infinite, or NEWTON_ITERATIONS do
    not reach the mode, Newton goes on from a bisection of a bracket of it (``_bracketed_root``)."""
    sd = math.sqrt(v)
    scale = sd
    d = start
    g1, g2 = _derivs(lik, y, m + d, FD_STEP * scale)
    if not (finite(g1) and finite(g2)):
        d = _bracketed_root(lik, y, m, v, d, sd)
        if math.isnan(d):
            return math.nan, math.nan, False
    for attempt in range(2):
        reached = False
        for _ in range(NEWTON_ITERATIONS):
            g1, g2 = _derivs(lik, y, m + d, FD_STEP * scale)
            grad = g1 - d / v
            curv = g2 - 1.0 / v
            if not (finite(grad) and finite(curv)):
                return math.nan, math.nan, False
            if curv < 0.0:
                scale = min(sd, math.sqrt(-1.0 / curv))
                step = -grad / curv
                if abs(step) <= NEWTON_TOL * scale:
                    d += step
                    reached = True
                    break
            else:  # a convex stretch (not log-concave): uphill by the cavity's curvature
                step = grad * v
            ascent = False
            for _ in range(BACKTRACKS):
                gain = log_lik_step(lik, y, m + d, step) - step * (d + 0.5 * step) / v
                if gain >= 0.0:  # (False for NaN)
                    ascent = True
                    break
                step *= 0.5
            if not ascent:  # at the maximum to rounding
                reached = True
                break
            d += step
        if reached or attempt == 1:
            break
        far = _bracketed_root(lik, y, m, v, d, sd)
        if math.isnan(far):
            break
        d = far
    g1, g2 = _derivs(lik, y, m + d, FD_STEP * scale)
    curv = g2 - 1.0 / v
    if not (curv < 0.0 and finite(d)):
        return math.nan, math.nan, False
    return d, math.sqrt(-1.0 / curv), True


@njit(**LEAF)
def add_node(acc, r, w, x, u1, g2):
    """acc = (top, z, s1, s2, a1, a11, a2) plus the node of log integrand r, weight w, offset x,
    g1 - g1(c) = u1 and g2: sums of p, p x, p x^2, p u1, p u1^2, p g2 with p = w exp(r - top),
    rescaled when r exceeds top (none overflows). A node with r NaN or -inf adds nothing, nor
    one whose term underflows (r more than 745 below top). The sums of ``adaptive_tilted`` and
    of the CP messages' trapezoid rule (``kernels.tensor.tilted``)."""
    top, z, s1, s2, a1, a11, a2 = acc
    if not r - top > -745.0:
        return acc
    if r > top:
        scale = math.exp(top - r)
        z *= scale
        s1 *= scale
        s2 *= scale
        a1 *= scale
        a11 *= scale
        a2 *= scale
        top = r
    p = w * math.exp(r - top)
    return top, z + p, s1 + p * x, s2 + p * x * x, a1 + p * u1, a11 + p * u1 * u1, a2 + p * g2


@njit(**LEAF)
def _node(acc, lik, y, v, c, d0, x, w, weak, g1c):
    """(``add_node`` of the node c + x (weight w) of p(y | f) N(f | m, v), c = m + d0, relative to c;
    its log integrand r)."""
    f, x = _offset(c, x)
    r = log_lik_step(lik, y, c, x) - x * (0.5 * x + d0) / v
    u1 = 0.0
    g2 = 0.0
    if weak:
        g1, g2 = _derivs(lik, y, f, 0.0)
        u1 = g1 - g1c
    return add_node(acc, r, w, x, u1, g2), r


@njit(**LEAF)
def _estimates(acc, log_h):
    """(log of the integral relative to the mode, E[x], Var[x]) of the sums."""
    top, z, s1, s2 = acc[0], acc[1], acc[2], acc[3]
    e1 = s1 / z
    return top + math.log(z) + log_h, e1, s2 / z - e1 * e1


@njit(**LEAF)
def _change(old, new):
    """The largest relative change of the estimates between two levels."""
    sd = math.sqrt(new[2])
    return max(abs(new[0] - old[0]), abs(new[1] - old[1]) / sd, abs(new[2] / old[2] - 1.0))


@njit(**LEAF)
def _sinh_rule(lik, y, v, c, d0, s, weak, g1c, g2c):
    """(acc, h): the sums of the sinh rule about c with scale s at its final step h (the
    integral is exp(top) z h s)."""
    h = H0
    acc = (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, g2c)  # the node u = 0: x = 0, weight 1, r = 0
    k = 0
    quiet = 0
    log_negligible = math.log(NEGLIGIBLE)
    while quiet < 2 and k < 200:
        k += 1
        t = KAPPA * k * h
        x = s * math.sinh(t) / KAPPA
        w = math.cosh(t)
        acc, r_right = _node(acc, lik, y, v, c, d0, x, w, weak, g1c)
        acc, r_left = _node(acc, lik, y, v, c, d0, -x, w, weak, g1c)
        # (a NaN term counts as negligible)
        small = not max(r_right, r_left) + math.log(w) >= log_negligible + acc[0] + math.log(acc[1])
        quiet = quiet + 1 if small else 0
    k_max = k
    old = _estimates(acc, math.log(h * s))
    for level in range(1, MAX_LEVELS + 1):
        h *= 0.5
        n = k_max << level
        for k in range(1, n, 2):
            t = KAPPA * k * h
            x = s * math.sinh(t) / KAPPA
            w = math.cosh(t)
            acc = _node(acc, lik, y, v, c, d0, x, w, weak, g1c)[0]
            acc = _node(acc, lik, y, v, c, d0, -x, w, weak, g1c)[0]
        new = _estimates(acc, math.log(h * s))
        if not _change(old, new) >= TOL:  # (NaN stops too)
            break
        old = new
    return acc, h


@njit(**LEAF)
def _two_mode_rule(lik, y, v, c, d0, lo, s_lo, hi, s_hi):
    """(acc, h): double-exponential rules about the modes at offsets lo < hi from c (one of them
    0): exp-sinh from lo leftwards (scale s_lo) and from hi rightwards (s_hi), tanh-sinh on
    [lo, hi]; the integral is exp(top) z h."""
    width = hi - lo
    h = H0
    acc = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    old = (0.0, 0.0, 1.0)
    for level in range(MAX_LEVELS_DE + 1):
        n = int(DE_UMAX / h)
        for k in range(-n, n + 1):
            if level > 0 and k % 2 == 0:
                continue
            u = k * h
            sh = math.sinh(u)
            ch = math.cosh(u)
            e = math.exp(_HALF_PI * sh)
            w = _HALF_PI * ch * e
            acc = _node(acc, lik, y, v, c, d0, lo - s_lo * e, s_lo * w, False, 0.0)[0]
            acc = _node(acc, lik, y, v, c, d0, hi + s_hi * e, s_hi * w, False, 0.0)[0]
            t = 1.0 / (1.0 + math.exp(-math.pi * sh))
            tc = 1.0 / (1.0 + math.exp(math.pi * sh))  # 1 - t without cancellation
            x = lo + width * t if t < 0.5 else hi - width * tc
            acc = _node(acc, lik, y, v, c, d0, x, width * math.pi * ch * t * tc, False, 0.0)[0]
        new = _estimates(acc, math.log(h))
        if level > 0 and not _change(old, new) >= TOL:
            break
        old = new
        h *= 0.5
    return acc, h


@njit(**LEAF)
def _tilted_sums(lik, y, m, v):
    """(ok, log Z, E f - m, Var f, weak, alpha_w, beta_w): the tilted distribution's log
    normaliser and moments (steps 1-3 of the module's text), and for weak factors the derivative
    form's alpha and beta."""
    nan = math.nan
    if not (v > 0.0 and finite(v) and finite(m) and finite(y)):
        return False, nan, nan, nan, False, nan, nan
    d, s, ok = tilted_mode(lik, y, m, v, 0.0)
    if not ok:
        return False, nan, nan, nan, False, nan, nan
    peak = _peak(lik, y)
    if finite(peak):
        d2, s2, ok2 = tilted_mode(lik, y, m, v, peak - m)
        if ok2 and abs(d2 - d) > MODE_SEPARATION * (s + s2):
            # the higher mode is the reference c; the other at offset ``other``
            gain = log_lik_step(lik, y, m + d, d2 - d) - (d2 - d) * (d + 0.5 * (d2 - d)) / v
            if gain > 0.0:
                d, s, d2, s2 = d2, s2, d, s
            c, d0 = _offset(m, d)
            other = d2 - d
            if other < 0.0:
                acc, h = _two_mode_rule(lik, y, v, c, d0, other, s2, 0.0, s)
            else:
                acc, h = _two_mode_rule(lik, y, v, c, d0, 0.0, s, other, s2)
            log_r, e1, var = _estimates(acc, math.log(h))
            log_z = log_lik(lik, y, c) - 0.5 * d0 * d0 / v - 0.5 * math.log(v) - LOG_SQRT_2PI + log_r
            ok = finite(log_z) and var > 0.0
            return ok, log_z, d0 + e1, var, False, nan, nan
    c, d0 = _offset(m, d)
    g1c, g2c = _derivs(lik, y, c, FD_STEP * s)
    weak = _analytic(lik) and v * abs(g2c) < WEAK_FACTOR
    acc, h = _sinh_rule(lik, y, v, c, d0, s, weak, g1c, g2c)
    log_r, e1, var = _estimates(acc, math.log(h * s))
    log_z = log_lik(lik, y, c) - 0.5 * d0 * d0 / v - 0.5 * math.log(v) - LOG_SQRT_2PI + log_r
    z = acc[1]
    alpha_w = g1c + acc[4] / z
    beta_w = -acc[6] / z - (acc[5] / z - (acc[4] / z) ** 2)
    ok = finite(log_z) and var > 0.0
    return ok, log_z, d0 + e1, var, weak, alpha_w, beta_w


@njit(**LEAF)
def adaptive_tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) of p(y | f) N(f | m, v) by the rule of the module's text (the
    Gauss-Hermite rule given is not used); NaNs for a degenerate cavity or when no mode is found."""
    ok, log_z, shift, var, weak, alpha_w, beta_w = _tilted_sums(lik, y, m, v)
    if not ok:
        return math.nan, math.nan, math.nan
    if weak:
        return log_z, alpha_w, beta_w
    return log_z, shift / v, (1.0 - var / v) / v


@njit(**LEAF)
def tilted_moments(lik, y, m, v):
    """(log Z, tilted mean, tilted variance) of p(y | f) N(f | m, v), by the same sums as
    ``adaptive_tilted`` (without the cancellation of v - v^2 beta for strong factors)."""
    ok, log_z, shift, var, weak, alpha_w, beta_w = _tilted_sums(lik, y, m, v)
    if not ok:
        return math.nan, math.nan, math.nan
    return log_z, m + shift, var
