"""Kernel-based just-in-time EP messages for logistic regression (Jitkrittum et al., UAI 2015).

Fully factorised EP, row i with label sign s and cavity N(mc, diag(vc)) (vc_m = 1/(T_m - tau_im),
mc_m = (N_m - nu_im) vc_m). The factor sigma(s x.w) depends on w only through a = x.w, whose
cavity distribution is N(mu_a, s2_a), mu_a = x.mc, s2_a = sum_m x_m^2 vc_m. With a' = s a
~ N(s mu_a, s2_a) the factor is sigma(a'), so its tilted moments are a function of the input
u = (s mu_a, log s2_a) alone. Given the tilted mean and variance (mean_a, var_a) of a, Gaussian
conditioning gives every weight's tilted moments exactly:

    E[w_m]   = mc_m + x_m vc_m (mean_a - mu_a) / s2_a
    Var[w_m] = vc_m - x_m^2 vc_m^2 (s2_a - var_a) / s2_a^2

and the site is the moment-matching message (``_sweep.message_from_moments`` with
delta = E - mc, a = 1 - Var/vc).

Targets. The operator predicts the two factors of these formulas,

    alpha = (E[a'] - s mu_a) / s2_a        in (0, 1)    (d log Z / d mu of the factor of a')
    beta  = (s2_a - var_a) / s2_a^2        in (0, 1/4)  (- d^2 log Z / d mu^2)

(so (mean_a - mu_a) / s2_a = s alpha). Both are bounded and smooth for every cavity, tend to
sigma(-u0) and sigma(u0) sigma(-u0) as s2_a -> 0, and the messages depend on them through
delta = x_m vc_m s alpha and a = x_m^2 vc_m beta, so an absolute error of the regression is a
relative error of the messages of about the same size. (The mean shift and log variance ratio
of a' are not: they vanish as s2_a -> 0 and a fixed absolute error swamps them; measured, the
posterior variances collapsed several hundredfold.)

Oracle targets. Stein's identity writes the same two moments as expectations of bounded
functions of g = sigma(-a') under the tilted: alpha = E[g], beta = E[g (1 - g)] - Var[g]
(``tilted_target``); from the IS draws their error variance is at most about 1/(4 ESS) for every
cavity, where that of the direct estimates from the moments of a' grows like 1/(s2_a ESS) and
2/(s2_a^2 ESS) (measured: weighting those by their estimated error biased the posterior
variances by 15%).

Regression. Bayesian linear regression on D random Fourier features of the standardised input
z = u / scale (Gaussian kernel of unit lengthscale once the frequencies are scaled),

    phi(u) = sqrt(2/D) cos(F z + b),   F (D, 2), b (D,) drawn once
    A = I / prior_var + Phi^T Phi / noise_var         (shared by both outputs)
    coef_k = A^{-1} Phi^T y_k / noise_var,   mean_k(u) = phi(u)^T coef_k
    var(u) = noise_var + phi(u)^T A^{-1} phi(u) = noise_var + |L^{-1} phi(u)|^2,  A = L L^T

(``accumulate`` takes per-pair weights; the fit gives every pair 1 / noise_var.)

``kjit_sweep`` is the damped parallel sweep: a row whose predictive variance exceeds the
threshold (or every row when the operator has no data) is sent to the oracle, the
importance-sampling EP row ``importance.logistic_row`` with the same random key as method "is",
whose draws also give the row's training pair. Chunks of rows are the unit of parallel work and
write only their rows and partial sums, so the result does not depend on the number of threads.
``kjit_sequential_sweep`` is the sequential schedule (the posterior refreshed after every row,
the operator fixed within the sweep), the same row update ``_kjit_row``.
"""

import math

import numpy as np
from numba import njit, prange

from .._config import LEAF, LOGISTIC, PARALLEL_CACHED, SERIAL
from ..special import finite, log_sigmoid
from . import importance
from .sweep import apply_row_change, damp_site, message_from_moments, row_cavity, save_row

#: rows of the (N_WORK, d) scratch of a row used here (rows 0-3 belong to the IS oracle)
_W_MC = 5
_W_VC = 6
_W_SD = 7
_W_EPS = 8


@njit(**LEAF)
def features(u0, u1, freq, phase, scale, phi):
    """phi (D,) = sqrt(2/D) cos(freq @ (u / scale) + phase) for one input u = (u0, u1)."""
    D = phase.shape[0]
    z0 = u0 / scale[0]
    z1 = u1 / scale[1]
    c = math.sqrt(2.0 / D)
    for j in range(D):
        phi[j] = c * math.cos(freq[j, 0] * z0 + freq[j, 1] * z1 + phase[j])


@njit(**LEAF)
def predict_one(u0, u1, freq, phase, scale, chol, coef, noise_var, phi, r, out):
    """Predictive means out (2,) and the predictive variance (returned) at u = (u0, u1).

    chol (D, D): lower Cholesky factor of the feature precision A; coef (2, D): the outputs'
    posterior mean weights; phi, r (D,) scratch.
    """
    D = phase.shape[0]
    features(u0, u1, freq, phase, scale, phi)
    m0 = 0.0
    m1 = 0.0
    q = 0.0
    for j in range(D):
        p = phi[j]
        m0 += p * coef[0, j]
        m1 += p * coef[1, j]
        t = p
        for k in range(j):
            t -= chol[j, k] * r[k]
        t /= chol[j, j]
        r[j] = t
        q += t * t
    out[0] = m0
    out[1] = m1
    return noise_var + q


@njit(**LEAF)
def feature_matrix(U, freq, phase, scale, Phi):
    """Phi (m, D): the features of the inputs U (m, 2)."""
    for i in range(U.shape[0]):
        features(U[i, 0], U[i, 1], freq, phase, scale, Phi[i])


@njit(**LEAF)
def predict(U, freq, phase, scale, chol, coef, noise_var, mean, var, phi, r):
    """Predictive means mean (m, 2) and variances var (m,) at the inputs U (m, 2)."""
    for i in range(U.shape[0]):
        var[i] = predict_one(U[i, 0], U[i, 1], freq, phase, scale, chol, coef, noise_var, phi, r, mean[i])


@njit(**PARALLEL_CACHED)
def accumulate(Phi, Y, wts, gram, rhs):
    """gram (D, D) += Phi^T diag(wts) Phi and rhs (2, D) += Y^T diag(wts) Phi over the rows of
    Phi (m, D), in order; Y (m, 2) targets, wts (m,) weights.

    Each j owns row j of gram and column j of rhs (race-free, thread-count independent)."""
    m, D = Phi.shape
    for j in prange(D):
        for i in range(m):
            p = Phi[i, j] * wts[i]
            rhs[0, j] += p * Y[i, 0]
            rhs[1, j] += p * Y[i, 1]
            for k in range(D):
                gram[j, k] += p * Phi[i, k]


@njit(**LEAF)
def tilted_target(x, s, mu_a, sd, n_samples, key, eps, out):
    """Training target out (2,) = (alpha, beta) of one row from the same draws as
    ``importance.is_row`` with the same key (w = mc + sd eps, a' = s x.w).

    Stein's identity turns the tilted moments of a' into expectations of bounded functions of
    g = sigma(-a') (the derivative of log sigma(a')): alpha = E[g] and
    beta = E[g (1 - g)] - Var[g] under the tilted (self-normalised weights sigma(a')). These are
    the same moments as (E[a'] - s mu_a) / s2_a and (s2_a - var_a) / s2_a^2 but their Monte-Carlo
    error is below 1/(2 sqrt(ESS)) for every cavity, where the direct estimates' error grows like
    1/sqrt(s2_a ESS) and 1/(s2_a sqrt(ESS)). sd (d,) cavity standard deviations, eps (d,) scratch.
    """
    d = x.shape[0]
    state = np.uint64(key)
    W = 0.0
    mg = 0.0
    M2 = 0.0
    mh = 0.0
    lmax = -math.inf
    smu = s * mu_a
    for _ in range(n_samples):
        state = importance.standard_normals(state, eps)
        r = 0.0
        for m in range(d):
            r += x[m] * sd[m] * eps[m]
        a = smu + s * r
        lf = log_sigmoid(a)
        if lf > lmax:  # rescale the sums to the new largest weight (none underflows)
            scale = math.exp(lmax - lf)
            W *= scale
            M2 *= scale
            lmax = lf
        f = math.exp(lf - lmax)
        g = 1.0 / (1.0 + math.exp(a))  # sigma(-a')
        W += f
        c = f / W
        dev = g - mg
        mg += c * dev  # weighted Welford: running means and sum of squared deviations
        M2 += f * dev * (g - mg)
        mh += c * (g * (1.0 - g) - mh)
    out[0] = mg
    out[1] = mh - M2 / W


@njit(**LEAF)
def operator_messages(X, s, i, tau, nu, T, N, vc, alpha, beta, rho, pT, pN, c):
    """Damped messages of row i from the predicted (alpha, beta); returns skipped sites."""
    d = X.shape[1]
    g1 = s * alpha  # (mean_a - mu_a) / s2_a
    g2 = beta  # (s2_a - var_a) / s2_a^2
    k = 0
    for m in range(d):
        tc = T[m] - tau[i, m]
        nc = N[m] - nu[i, m]
        xv = X[i, m] * vc[m]
        delta = xv * g1
        a = X[i, m] * xv * g2
        t_new, n_new, ok = message_from_moments(tc, nc, delta, a)
        k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
    return k


@njit(**LEAF)
def _kjit_row(
    X, s, i, tau, nu, T, N, rho, n_samples, rkey, freq, phase, scale, chol, coef, noise_var, threshold,
    use_operator, work, c, phi, r, u, y, pT, pN,
):  # fmt: skip
    """KJIT update of row i's d messages (damped, added to pT[c], pN[c]); returns
    (skipped messages, whether the oracle answered). rkey: the row's uint64 key; work
    (n_chunks, N_WORK, d) and phi, r (D,) scratch; u, y (2,) receive the row's input and target
    (see ``kjit_sweep``)."""
    vc = work[c, _W_VC]
    sd = work[c, _W_SD]
    eps = work[c, _W_EPS]
    mu_a, s2_a, n_improper = row_cavity(X, i, tau, nu, T, N, work, c, _W_VC, _W_MC)
    # the operator needs a proper cavity of a (s2_a = 0: x = 0, the factor is constant)
    proper = n_improper == 0 and s2_a > 0.0 and finite(mu_a) and finite(s2_a)
    u0 = s * mu_a
    u1 = math.log(s2_a) if proper else 0.0
    u[0] = u0 if proper else math.nan
    u[1] = u1 if proper else math.nan
    oracle = True
    if use_operator and proper:
        pv = predict_one(u0, u1, freq, phase, scale, chol, coef, noise_var, phi, r, y)
        oracle = not pv <= threshold  # (a NaN variance goes to the oracle)
    if oracle:
        if proper:
            for m in range(X.shape[1]):
                sd[m] = math.sqrt(vc[m])
            tilted_target(X[i], s, mu_a, sd, n_samples, rkey, eps, y)
        else:
            y[0] = math.nan
            y[1] = math.nan
        k = importance.is_row(LOGISTIC, X, s, i, tau, nu, T, N, rho, n_samples, rkey, pT, pN, c, work)
    else:
        k = operator_messages(X, s, i, tau, nu, T, N, vc, y[0], y[1], rho, pT, pN, c)
    return k, oracle


@njit(**PARALLEL_CACHED)
def kjit_sweep(
    X, s, tau, nu, T, N, rho, n_samples, key, chunk, pT, pN, skipped, work, freq, phase, scale, chol, coef,
    noise_var, threshold, use_operator, fwork, used_oracle, U, Y,
):  # fmt: skip
    """One damped parallel KJIT sweep over the rows of X (n, d).

    work (n_chunks, N_WORK, d) and fwork (n_chunks, 2, D) scratch; pT, pN (n_chunks, d) and
    skipped (n_chunks,) as in ``schedules.parallel_step``; key (uint64) the sweep's key (row i
    uses ``importance.row_key(key, i)``). The operator (freq, phase, scale, chol, coef, noise_var)
    answers a row if use_operator and its predictive variance is <= threshold; otherwise the IS
    oracle does. Writes used_oracle (n,) bool, every row's input U (n, 2), and Y (n, 2): for an
    oracle row its training target (alpha, beta) (``tilted_target``), for the others the
    operator's prediction. A row with an improper cavity goes to the oracle (which skips its
    messages) and gets NaN in U and Y: no training pair.
    """
    n, d = X.shape
    n_chunks = pT.shape[0]
    for c in prange(n_chunks):
        lo = c * chunk
        hi = min(n, lo + chunk)
        for m in range(d):
            pT[c, m] = 0.0
            pN[c, m] = 0.0
        k = 0
        for i in range(lo, hi):
            ki, oracle = _kjit_row(
                X, s[i], i, tau, nu, T, N, rho, n_samples, importance.row_key(key, i), freq, phase,
                scale, chol, coef, noise_var, threshold, use_operator, work, c, fwork[c, 0], fwork[c, 1],
                U[i], Y[i], pT, pN,
            )  # fmt: skip
            used_oracle[i] = oracle
            k += ki
        skipped[c] = k


@njit(**SERIAL)
def kjit_sequential_sweep(
    X, s, tau, nu, T, N, mu, v, rho, n_samples, key, order, old, pT, pN, work, freq, phase, scale, chol,
    coef, noise_var, threshold, use_operator, fwork, used_oracle, U, Y,
):  # fmt: skip
    """One KJIT sweep over the rows in ``order``, the posterior T, N, mu, v (d,) refreshed after
    every row (the operator stays fixed within the sweep). old (2, d), pT, pN (1, d), work
    (1, N_WORK, d) and fwork (2, D) scratch; the other arguments and outputs as in
    ``kjit_sweep`` (the same random key per row). Returns the number of skipped messages."""
    k = 0
    for ii in range(order.shape[0]):
        i = order[ii]
        save_row(tau, nu, i, old)
        ki, oracle = _kjit_row(
            X, s[i], i, tau, nu, T, N, rho, n_samples, importance.row_key(key, i), freq, phase, scale,
            chol, coef, noise_var, threshold, use_operator, work, 0, fwork[0], fwork[1], U[i], Y[i], pT, pN,
        )  # fmt: skip
        used_oracle[i] = oracle
        k += ki
        # (as schedules.sequential_step: threshold 0 gives method "is" bitwise)
        apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k
