"""Mean-field variational Bayes (method "vb") for Bayesian probit and logistic regression.

Model: w ~ N(0, diag(1 / prior_T)), labels as signs s_i = +-1, likelihood Phi(s_i x_i.w)
(probit, ``model_code`` 0) or sigmoid(s_i x_i.w) (logistic, ``model_code`` 1). Approximation:
q(w) = prod_m N(mu_m, v_m). Notation: t_i = x_i.mu, sv_i = sum_m x_im^2 v_m (so x_i.w has mean
t_i and variance sv_i under q), KL = KL(q(w) || prior) = 0.5 sum_m [prior_T_m (v_m + mu_m^2) - 1
- log(prior_T_m v_m)].

Probit, Albert-Chib augmentation z_i ~ N(x_i.w, 1), y_i = 1[z_i > 0], mean field q(w) q(z):
q(z_i) is N(t_i, 1) truncated to s_i z > 0, E[z_i] = t_i + s_i phi(t_i) / Phi(s_i t_i);
coordinate m: v_m = 1 / (prior_T_m + sum_i x_im^2),
mu_m = v_m sum_i x_im (E[z_i] - sum_{l != m} x_il mu_l). ELBO with q(z) optimal for q(w):
sum_i [log Phi(s_i t_i) - 0.5 sv_i] - KL.

Logistic, Jaakkola-Jordan bound sigma(a) >= sigma(xi) exp((a - xi) / 2 - lam(xi) (a^2 - xi^2)),
lam(xi) = tanh(xi / 2) / (4 xi) (1/8 at xi = 0): coordinate m:
v_m = 1 / (prior_T_m + 2 sum_i lam_i x_im^2),
mu_m = v_m sum_i x_im (s_i / 2 - 2 lam_i sum_{l != m} x_il mu_l); optimal xi_i^2 = t_i^2 + sv_i.
Bound with the optimal xi (the lam term vanishes): sum_i [log sigma(xi_i) - xi_i / 2 + s_i t_i / 2]
- KL.

Both models share one coordinate update, written with per-row weights a_i and targets b_i
(probit: a_i = 1, b_i = E[z_i]; logistic: a_i = 2 lam_i, b_i = s_i / 2):
v_m = 1 / (prior_T_m + sum_i a_i x_im^2), mu_m = v_m sum_i x_im (b_i - a_i (t_i - x_im mu_m)).
The kernels carry the residuals c_i = b_i - a_i t_i instead of t_i: for probit c_i = E[z_i] - t_i
= s_i phi(t_i) / Phi(s_i t_i) directly, without the cancellation of E[z_i] - t_i when the
truncation is far in the tail. Then mu_m = v_m (sum_i x_im c_i + mu_m sum_i a_i x_im^2).

One iteration (``vb_iteration``): a, c from the current q(w); coordinates m = 0..d-1 in order
(Gauss-Seidel: after each coordinate c_i -= a_i x_im (mu_m_new - mu_m_old), i.e. t = X mu with
the latest means, through the transposed copy Xt so that the column passes are contiguous); then
the ELBO, whose row pass recomputes t and sv exactly from mu and v (no drift of the incremental
updates across iterations). Every step is an exact coordinate maximisation, so the ELBO never
decreases. All loops are serial and in a fixed order: the result does not depend on the thread
count.
"""

import math

from numba import njit

from .._config import LEAF, PROBIT, SERIAL
from ..special import inv_mills, log_ndtr, log_sigmoid

#: below this xi, lam(xi) comes from its Taylor series (relative error < 1e-20)
_LAM_SERIES_XI = 1e-3


@njit(**LEAF)
def jj_lambda(xi):
    """lam(xi) = tanh(xi / 2) / (4 xi) of the Jaakkola-Jordan bound, 1/8 at xi = 0 (xi >= 0)."""
    if xi < _LAM_SERIES_XI:
        u2 = 0.25 * xi * xi
        return 0.125 * (1.0 - u2 * (1.0 / 3.0 - u2 * (2.0 / 15.0)))
    return math.tanh(0.5 * xi) / (4.0 * xi)


@njit(**LEAF)
def latent_update(model_code, s, t, sv):
    """(a, c) of one row: weight a and residual c = b - a t.

    Probit: a = 1, c = E[z] - t = s phi(t) / Phi(s t); logistic: a = 2 lam(xi) with
    xi = sqrt(t^2 + sv), c = s / 2 - a t.
    """
    if model_code == PROBIT:
        return 1.0, s * inv_mills(s * t)
    a = 2.0 * jj_lambda(math.sqrt(t * t + sv))
    return a, 0.5 * s - a * t


@njit(**LEAF)
def row_elbo(model_code, s, t, sv):
    """Likelihood term of one row in the ELBO, with q(z) (probit) or xi (logistic) optimal."""
    if model_code == PROBIT:
        return log_ndtr(s * t) - 0.5 * sv
    xi = math.sqrt(t * t + sv)
    return log_sigmoid(xi) - 0.5 * xi + 0.5 * s * t


@njit(**LEAF)
def kl_prior(prior_T, mu, v):
    """KL(q(w) || prior) of the factorised Gaussian q; prior_T, mu, v (d,)."""
    kl = 0.0
    for m in range(mu.shape[0]):
        pt = prior_T[m]
        kl += pt * (v[m] + mu[m] * mu[m]) - 1.0 - math.log(pt * v[m])
    return 0.5 * kl


@njit(**LEAF)
def coordinate_update(m, xcol, prior_T, mu, v, a, c):
    """Exact update of q(w_m) given the others; xcol = Xt[m] (n,), residuals c (n,) updated in place."""
    n = xcol.shape[0]
    g = 0.0
    A = 0.0
    for i in range(n):
        x = xcol[i]
        g += x * c[i]
        A += a[i] * x * x
    prec = prior_T[m] + A
    mu_old = mu[m]
    mu_new = (g + A * mu_old) / prec
    delta = mu_new - mu_old
    mu[m] = mu_new
    v[m] = 1.0 / prec
    for i in range(n):
        c[i] -= a[i] * xcol[i] * delta


@njit(**SERIAL)
def vb_elbo(model_code, X, s, prior_T, mu, v, t, sv):
    """ELBO of q(w) = N(mu, diag v); also writes t = X mu and sv = (X * X) v (n,).

    X (n, d) C-contiguous; s (n,) signs; prior_T, mu, v (d,); t, sv (n,) outputs.
    """
    n, d = X.shape
    total = 0.0
    for i in range(n):
        ti = 0.0
        svi = 0.0
        for m in range(d):
            x = X[i, m]
            ti += x * mu[m]
            svi += x * x * v[m]
        t[i] = ti
        sv[i] = svi
        total += row_elbo(model_code, s[i], ti, svi)
    return total - kl_prior(prior_T, mu, v)


@njit(**SERIAL)
def vb_iteration(model_code, X, Xt, s, prior_T, mu, v, t, sv, a, c):
    """One coordinate-ascent iteration in place; returns the ELBO after it.

    X (n, d) and Xt = X.T (d, n), both C-contiguous; s (n,) signs; prior_T (d,) prior
    precisions; mu, v (d,) the posterior means and variances (updated); t, sv (n,) must hold
    X mu and (X * X) v on entry (``vb_elbo`` writes them) and hold them again on exit; a, c (n,)
    scratch that receives the rows' weights and residuals (see ``latent_update``).
    """
    n, d = X.shape
    for i in range(n):
        a[i], c[i] = latent_update(model_code, s[i], t[i], sv[i])
    for m in range(d):
        coordinate_update(m, Xt[m], prior_T, mu, v, a, c)
    return vb_elbo(model_code, X, s, prior_T, mu, v, t, sv)
