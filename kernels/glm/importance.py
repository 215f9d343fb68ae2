"""Importance-sampling EP for probit and logistic regression factors (the paper's "IS" baseline).

Row i's factor f(s x.w) depends on the weights only through a = x.w, whose cavity distribution
is N(mu_a, s2_a), mu_a = x.mc, s2_a = sum_m x_m^2 vc_m. ``n_samples`` draws w = mc + sqrt(vc) eps
of the fully factorised cavity, weighted by f(s x.w) (self-normalised, with the weights rescaled
on the fly so that none underflows), estimate the tilted mean and variance (mean_a, var_a) of a;
Gaussian conditioning on a then gives every weight's tilted moments exactly:

    E[w_m]   = mc_m + x_m vc_m (mean_a - mu_a) / s2_a
    Var[w_m] = vc_m - x_m^2 vc_m^2 (s2_a - var_a) / s2_a^2

and the site is the usual moment-matching message. A weight with x_m = 0 does not enter f: its
message is exactly flat and is not estimated.

Why through a (a Rao-Blackwellisation: E_tilted[h(w)] = E_tilted[E_cavity[h(w) | a]]): the
tilted distribution differs from the cavity along a only, and the conditional moments above are
known. Estimating each weight's variance from the weighted draws instead adds d independent
Monte-Carlo errors, and when few draws carry the weight (a misclassified row under a confident
cavity: effective sample size near 1) the weighted sample variance of every weight collapses,
giving site precisions of many times the cavity's. Measured on the small UCI sets (sonar: 104 x
60 training rows) with 2,000 draws and 40 undamped sequential sweeps: posterior variances of
1e-10 to 1e-38 and test log-likelihoods of -400 to -1e8 on breast, ionos and sonar (EP: -0.3 to
-0.6); through a, within 0.03 of EP's. The variance removed from weight m is now at most its
share x_m^2 vc_m / s2_a of a's, whatever the draws.

Two corrections keep the estimate usable when thousands of weak sites are summed (on the
paper's 10,000-row probit simulation with 2,000 draws, the naive estimator made the posterior
variances collapse to 1e-38, and the Bessel factor alone to 1e-31): the weighted variance of a
carries the reliability-weights Bessel factor 1 / (1 - sum f^2 / (sum f)^2) (without it every
site's precision is biased up by about 1/S, and 10,000 such biases add up), and the unweighted
moments of the same draws are used as control variates with known expectations (mean mu_a,
variance s2_a): mean_a ~ mean_f(a) - mean(a) + mu_a and var_a ~ var_f(a) - var(a) + s2_a, whose
Monte-Carlo error vanishes as f flattens instead of staying at sqrt(2 / S). When one draw holds
all the weight (ESS = 1 to double precision) the Bessel factor is infinite, the estimate
undefined (NaN) and the row's messages are skipped.

Random numbers come from a counter-based generator (splitmix64 of a per-row key, Box-Muller
normals), so a row's draws depend only on (seed, iteration, row): results are reproducible and
do not depend on the thread count or the schedule's chunking. (All d normals of a draw are
generated, as for a generic factor, although only x.eps enters: the draws are those of
``kjit.tilted_target``.)
"""

import math

import numpy as np
from numba import njit

from .._config import LEAF, PROBIT
from ..hashing import GOLDEN, mix64
from ..special import finite, log_ndtr, log_sigmoid
from .sweep import apply_row_change, damp_site, row_cavity, save_row, signed_message

_S11 = np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0
_TWO_PI = 2.0 * math.pi


@njit(**LEAF)
def row_key(key, i):
    """The random stream's key of row i under the sweep key ``key`` (both uint64)."""
    return mix64(np.uint64(key) ^ mix64(np.uint64(i) + GOLDEN))


@njit(**LEAF)
def _uniform(state):
    """(next state, uniform in (0, 1]) of the splitmix64 stream."""
    state = state + GOLDEN
    return state, ((mix64(state) >> _S11) + np.uint64(1)) * _TWO_M53


@njit(**LEAF)
def standard_normals(state, out):
    """Fill out (d,) with standard normal draws (Box-Muller); returns the next state (uint64)."""
    state = np.uint64(state)
    d = out.shape[0]
    for j in range(0, d, 2):
        state, u1 = _uniform(state)
        state, u2 = _uniform(state)
        rad = math.sqrt(-2.0 * math.log(u1))
        out[j] = rad * math.cos(_TWO_PI * u2)
        if j + 1 < d:
            out[j + 1] = rad * math.sin(_TWO_PI * u2)
    return state


@njit(**LEAF)
def is_row(model, X, s, i, tau, nu, T, N, rho, n_samples, key, pT, pN, c, work):
    """IS-EP update of the d sites of one row; returns the number of sites skipped.

    Draws w = mc + sd eps; only r = x.(w - mc) enters the factor. From the weighted draws of r
    come the tilted mean shift and variance of a = x.w (Bessel factor, control variates), and
    every weight's tilted moments follow by Gaussian conditioning (module docstring).
    """
    d = X.shape[1]
    vc = work[c, 0]
    eps = work[c, 2]
    xs = work[c, 3]  # x_m sd_m: r = sum_m xs_m eps_m
    mu_a, s2_a, n_improper = row_cavity(X, i, tau, nu, T, N, work, c, 0, 1)
    for m in range(d):
        xs[m] = X[i, m] * math.sqrt(vc[m]) if vc[m] > 0.0 else 0.0
    W = 0.0
    W2 = 0.0
    A = 0.0  # weighted sums of r and r^2
    B = 0.0
    C = 0.0  # unweighted sums of r and r^2 (the control variates)
    D = 0.0
    lmax = -math.inf
    state = np.uint64(key)  # (an int64 would turn the generator's arithmetic into float64)
    sample = n_improper == 0 and s2_a > 0.0
    for _ in range(n_samples if sample else 0):
        state = standard_normals(state, eps)
        r = 0.0
        for m in range(d):
            r += xs[m] * eps[m]
        t = mu_a + r
        lf = log_ndtr(s * t) if model == PROBIT else log_sigmoid(s * t)
        if lf > lmax:  # rescale the sums to the new largest weight (none underflows)
            scale = math.exp(lmax - lf)
            W *= scale
            W2 *= scale * scale
            A *= scale
            B *= scale
            lmax = lf
        f = math.exp(lf - lmax)
        W += f
        W2 += f * f
        A += f * r
        B += f * r * r
        C += r
        D += r * r
    g1 = 0.0  # (tilted mean of a - mu_a) / s2_a
    g2 = 0.0  # (s2_a - tilted variance of a) / s2_a^2
    if sample:
        S = float(n_samples)
        bessel_f = 1.0 / (1.0 - W2 / (W * W))  # inf when one draw holds all the weight
        bessel_u = S / (S - 1.0)
        e1 = A / W
        u1 = C / S
        g1 = (e1 - u1) / s2_a
        g2 = ((D / S - u1 * u1) * bessel_u - (B / W - e1 * e1) * bessel_f) / (s2_a * s2_a)
    # no estimate (improper cavity, or one draw holding all the weight): the row's messages
    # that depend on it are skipped; those of weights with x_m = 0 stay exactly flat
    defined = n_improper == 0 and finite(g1) and finite(g2)
    if not defined:
        g1 = 0.0
        g2 = 0.0
    k = 0
    for m in range(d):
        xm = X[i, m]
        tc = T[m] - tau[i, m]
        # E[w_m] - mc_m = x_m vc_m g1, 1 - Var[w_m] / vc_m = x_m^2 vc_m g2 (0 and 0 when x_m = 0:
        # the exact flat message)
        xv = xm * vc[m] if xm != 0.0 else 0.0
        delta = xv * g1
        a = xm * xv * g2
        # unlike the analytic methods, a negative site precision (an estimated tilted variance
        # above the cavity's, a < 0) is kept: it is Monte-Carlo noise around a weak site, and
        # dropping it would keep only the positive half of that noise, a bias that inflates
        # the posterior precision sweep after sweep (measured: variances collapsing to 1e-108)
        t_new, n_new, ok = signed_message(tc, N[m] - nu[i, m], delta, a)
        ok = ok and (defined or xm == 0.0)
        k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
    return k


@njit(**LEAF)
def is_rows(model, X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, n_samples, key, pT, pN, c, work, old):
    """``is_row`` for rows order[lo..hi-1] (``sweep`` gives the arguments); row i draws with the
    key ``row_key(key, i)`` of the sweep's key."""
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        if seq:
            save_row(tau, nu, i, old)
        k += is_row(model, X, S[i], i, tau, nu, T, N, rho, n_samples, row_key(key, i), pT, pN, c, work)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k
