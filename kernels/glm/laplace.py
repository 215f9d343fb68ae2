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

from numba import njit

from .._config import LEAF, PROBIT
from ..special import finite, inv_mills, sigmoid_pair
from .sweep import apply_row_change, damp_site, row_cavity, save_row

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
def lp_row(model, X, s, i, tau, nu, T, N, rho, pT, pN, c, work):
    """Laplace-propagation update of the d sites of row i (model PROBIT or LOGISTIC; the other
    arguments as the row functions of ``sweep``); returns the number skipped."""
    d = X.shape[1]
    m_eta, sigma2, n_improper = row_cavity(X, i, tau, nu, T, N, work, c, 0, 1)
    a = tilted_mode(model, s * m_eta, sigma2)
    h1, h2 = log_lik_derivs(model, a)
    ok_row = n_improper == 0 and finite(a) and finite(h1) and finite(h2)
    k = 0
    for m in range(d):
        xm = X[i, m]
        w = work[c, 1, m] + s * h1 * xm * work[c, 0, m]
        t_new = -h2 * xm * xm
        n_new = s * h1 * xm + t_new * w
        ok = ok_row and t_new >= 0.0 and finite(n_new)
        k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
    return k


@njit(**LEAF)
def lp_rows(model, X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, pT, pN, c, work, old):
    """``lp_row`` for rows order[lo..hi-1] (``sweep`` gives the arguments)."""
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        if seq:
            save_row(tau, nu, i, old)
        k += lp_row(model, X, S[i], i, tau, nu, T, N, rho, pT, pN, c, work)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k
