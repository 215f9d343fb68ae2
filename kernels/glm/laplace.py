"""Laplace propagation (Eskin et al. 2004) for probit and logistic regression factors.

Each row's message comes from the mode and the curvature of its tilted distribution
q_cav(w) f(s x.w), q_cav fully factorised Gaussian N(mc, diag(vc)), f = Phi (probit) or sigma
(logistic), h = log f concave. At the mode, tc_m (w_m - mc_m) = s h'(a) x_m with a = s x.w, so
the d-dimensional search reduces exactly to one equation in a:

    g(a) = a - s x.mc - h'(a) sum_m x_m^2 vc_m = 0,

g increasing (h' decreasing), with a unique root bracketed by [s x.mc, s x.mc + sigma2 h'(s x.mc)].
A safeguarded Newton iteration (bisection when a step leaves the bracket) solves it; this is
equivalent to the paper's L-BFGS search over w, only exact and faster. The Gaussian with the
mode as its mean and the diagonal of the negative Hessian as its precisions gives the new site

    tau* = -h''(a) x_m^2,   nu* = s h'(a) x_m - h''(a) x_m^2 w_m,   w_m = mc_m + s h'(a) x_m vc_m.

h' and h'' are phi/Phi and -r (a + r) for probit, sigma(-a) and -sigma(a) sigma(-a) for logistic.
"""

import math

from numba import njit

from .._config import LEAF
from ..special import inv_mills, sigmoid_pair
from .sweep import damp_site, row_cavity

PROBIT = 0
LOGISTIC = 1
#: Newton iterations of the mode search (each at least halves the bracket)
MAX_NEWTON = 100


@njit(**LEAF)
def log_lik_derivs(model, a):
    """(h'(a), h''(a)) of h = log Phi (model 0) or log sigma (model 1)."""
    if model == PROBIT:
        r = inv_mills(a)
        return r, -r * (a + r)
    p, q = sigmoid_pair(a)
    return q, -p * q


@njit(**LEAF)
def tilted_mode(model, mu_a, sigma2):
    """Root of g(a) = a - mu_a - sigma2 h'(a) (the mode of the tilted, projected on a = s x.w)."""
    h1, h2 = log_lik_derivs(model, mu_a)
    lo = mu_a
    hi = mu_a + sigma2 * h1
    if not hi > lo:  # h'(mu_a) underflowed to 0: the factor is flat here
        return mu_a
    a = hi
    for _ in range(MAX_NEWTON):
        h1, h2 = log_lik_derivs(model, a)
        g = a - mu_a - sigma2 * h1
        if g > 0.0:
            hi = a
        else:
            lo = a
        step = g / (1.0 - sigma2 * h2)
        nxt = a - step
        if not (nxt > lo and nxt < hi):
            nxt = 0.5 * (lo + hi)
        if abs(nxt - a) <= 1e-14 * (1.0 + abs(a)) or hi - lo <= 1e-14 * (1.0 + abs(a)):
            return nxt
        a = nxt
    return a


@njit(**LEAF)
def _lp_row(model, x, s, tau_r, nu_r, T, N, rho, acc_t, acc_n, work):
    """Laplace-propagation update of the d sites of one row; returns the number skipped."""
    d = x.shape[0]
    vb = work[0]
    mb = work[1]
    m_eta, sigma2, n_improper = row_cavity(x, tau_r, nu_r, T, N, vb, mb)
    a = tilted_mode(model, s * m_eta, sigma2)
    h1, h2 = log_lik_derivs(model, a)
    ok_row = n_improper == 0 and math.isfinite(a) and math.isfinite(h1) and math.isfinite(h2)
    k = 0
    for m in range(d):
        xm = x[m]
        w = mb[m] + s * h1 * xm * vb[m]
        t_new = -h2 * xm * xm
        n_new = s * h1 * xm + t_new * w
        ok = ok_row and t_new >= 0.0 and math.isfinite(n_new)
        k += damp_site(tau_r, nu_r, m, t_new, n_new, ok, rho, acc_t, acc_n)
    return k


@njit(**LEAF)
def probit_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work):
    """Probit LP row update (see ``_sweep`` for the signature)."""
    return _lp_row(PROBIT, x, s, tau_r, nu_r, T, N, rho, acc_t, acc_n, work)


@njit(**LEAF)
def logistic_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work):
    """Logistic LP row update (see ``_sweep`` for the signature)."""
    return _lp_row(LOGISTIC, x, s, tau_r, nu_r, T, N, rho, acc_t, acc_n, work)
