"""Row functions for any likelihood of the seam (``kernels.likelihoods``), by its ``tilted`` leaf.

The site of row i depends on the weights only through a = x.w, so both methods need only the
one-dimensional tilted distribution p(y | a) N(a | m_a, v_a) (DESIGN.md section 7):

- ``ep_rows``, EP: the cavity of the whole row, m_a = x.mc and v_a = sum x_m^2 vc_m (one tilted
  per row); each weight's moments follow by Gaussian conditioning, E[w_m] = mc_m + x_m vc_m alpha
  and Var[w_m] = vc_m - (x_m vc_m)^2 beta.
- ``cep1_rows``, CEP-1: for weight m the other weights are held at their posterior means (section
  3.1), so a = x_m w_m + b_m, b_m = sum_{l != m} x_l mu_l, with w_m from its cavity: m_a = x_m mc_m
  + b_m, v_a = x_m^2 vc_m (one tilted per site); with ``second``, CEP-2 (five tilted per site:
  ``tilted_curvature``).

(alpha, beta) are the tilted leaf's derivatives of log Z in m_a (``likelihoods.seam``). The
arguments are those of the hand-written row functions (``sweep``), the likelihood first and the
row's value y = Y[i].
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED, SERIAL, renamed
from ..likelihoods import log_lik, log_predictive, not_log_concave, tilted
from .sweep import apply_row_change, damp_site, message_from_moments, row_cavity, save_row, signed_message


@njit(**LEAF)
def site_message(lik, tc, nc, delta, a):
    """``message_from_moments``, and for a likelihood that may not be log-concave
    (``likelihoods.not_log_concave``) a negative site precision (a < 0) too, as EP defines it: an
    outlier's tilted variance exceeds its cavity's. Refusing those sites kept each outlier's first
    message, or none, and left the means several posterior sds from the gold's (BENCHMARKS.md,
    "Negative site precisions"). The tilted variance must still be positive (a < 1), the cavity
    proper and the message finite; the parallel schedule's guard (``schedules.restore_improper``)
    undoes a sweep whose sum leaves a weight improper."""
    t_new, n_new, ok = message_from_moments(tc, nc, delta, a)
    if not_log_concave(lik) and not ok:
        t_new, n_new, ok = signed_message(tc, nc, delta, a)
    return t_new, n_new, ok


@njit(**LEAF)
def ep_rows(
    lik, X, Y, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, nodes, weights, off, pT, pN, c, work, old
):
    """EP update of rows order[lo..hi-1] through the one-dimensional reduction; returns the
    number of messages not applied. off: (n,) each row's offset added to f, or (0,)."""
    k = 0
    d = X.shape[1]
    for ii in range(lo, hi):
        i = order[ii]
        if seq:
            save_row(tau, nu, i, old)
        m_a, v_a, n_improper = row_cavity(X, i, tau, nu, T, N, work, c, 0, 1)
        if off.shape[0] != 0:
            m_a += off[i]
        alpha = 0.0  # a row of zeros involves no weight: flat messages
        beta = 0.0
        if v_a != 0.0:
            log_z, alpha, beta = tilted(lik, Y[i], m_a, v_a, nodes, weights)
        if n_improper > 0:  # an improper cavity makes the whole row's tilted distribution invalid
            beta = math.nan
        for m in range(d):
            xm = X[i, m]
            vc = work[c, 0, m]
            t_new, n_new, ok = site_message(
                lik, T[m] - tau[i, m], N[m] - nu[i, m], xm * vc * alpha, xm * xm * vc * beta
            )
            k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k


#: CEP-2's step of the central differences, in cavity sds (``tilted_curvature``)
CURVATURE_STEP = 0.05


@njit(**LEAF)
def tilted_curvature(lik, y, m, v, nodes, weights):
    """(alpha, beta) of p(y | f) N(f | m, v) and their second derivatives in m, (alpha'', beta''),
    by central differences of the tilted leaf with one Richardson step: D(h) = (g(m + h) - 2 g(m)
    + g(m - h)) / h^2, g'' = (4 D(h) - D(2 h)) / 3, error O(h^4). h = CURVATURE_STEP sqrt(v): log Z
    varies in m on the scale sqrt(v + L^2) (L the likelihood's own width), never shorter than
    the cavity's sd, so the truncation stays below CURVATURE_STEP^4 of the leading term; the
    rounding error, eps |alpha| / h^2, stays near 1e-9 of it for cavities down to 1e-4 of L^2.
    (1 / sqrt(beta) is no scale: it grows without bound where the likelihood saturates, as the
    probit's far on the right side.) alpha'' = d^3 log Z / dm^3 and beta'' = -d^4 log Z / dm^4:
    CEP-2's second-order terms (DESIGN.md section 7). Checked against the probit's closed form
    (tests/test_glm_likelihoods.py)."""
    log_z, a0, b0 = tilted(lik, y, m, v, nodes, weights)
    h = CURVATURE_STEP * math.sqrt(v)
    _, ap1, bp1 = tilted(lik, y, m + h, v, nodes, weights)
    _, am1, bm1 = tilted(lik, y, m - h, v, nodes, weights)
    _, ap2, bp2 = tilted(lik, y, m + 2.0 * h, v, nodes, weights)
    _, am2, bm2 = tilted(lik, y, m - 2.0 * h, v, nodes, weights)
    da1 = (ap1 - 2.0 * a0 + am1) / (h * h)
    da2 = (ap2 - 2.0 * a0 + am2) / (4.0 * h * h)
    db1 = (bp1 - 2.0 * b0 + bm1) / (h * h)
    db2 = (bp2 - 2.0 * b0 + bm2) / (4.0 * h * h)
    return a0, b0, (4.0 * da1 - da2) / 3.0, (4.0 * db1 - db2) / 3.0


@njit(**LEAF)
def cep1_rows(
    lik, X, Y, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, nodes, weights, off, pT, pN, c, work, old,
    second=False,
):  # fmt: skip
    """CEP-1 update of the d sites of rows order[lo..hi-1] (``second``: CEP-2, adding 0.5 q
    d^2/db^2 of the conditional mean and variance, q = sum_{l != m} x_l^2 v_l, by
    ``tilted_curvature``); returns the number of messages not applied. off: (n,) each row's
    offset added to f, or (0,)."""
    k = 0
    d = X.shape[1]
    for ii in range(lo, hi):
        i = order[ii]
        if seq:
            save_row(tau, nu, i, old)
        xmu = off[i] if off.shape[0] != 0 else 0.0
        xxv = 0.0
        for m in range(d):
            xmu += X[i, m] * mu[m]
            xxv += X[i, m] * X[i, m] * v[m]
        for m in range(d):
            xm = X[i, m]
            tc = T[m] - tau[i, m]
            nc = N[m] - nu[i, m]
            vc = 1.0 / tc
            delta = 0.0  # x_m = 0: the site does not involve w_m, a flat message
            a = 0.0
            if xm != 0.0 and second:
                b = xmu - xm * mu[m]
                q = max(xxv - xm * xm * v[m], 0.0)
                alpha, beta, alpha2, beta2 = tilted_curvature(
                    lik, Y[i], xm * nc * vc + b, xm * xm * vc, nodes, weights
                )
                delta = xm * vc * (alpha + 0.5 * q * alpha2)
                a = xm * xm * vc * (beta + 0.5 * q * beta2)
            elif xm != 0.0:
                b = xmu - xm * mu[m]
                log_z, alpha, beta = tilted(lik, Y[i], xm * nc * vc + b, xm * xm * vc, nodes, weights)
                delta = xm * vc * alpha
                a = xm * xm * vc * beta
            t_new, n_new, ok = site_message(lik, tc, nc, delta, a)
            k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k


@njit(**PARALLEL_CACHED)
def predictive(lik, X, mu, v, b_mean, b_var, off, nodes, weights, out_p, out_logp, y):
    """The posterior predictive of each row of X (n, d) under the factorised posterior mu, v (d,)
    of the weights and N(b_mean, b_var) of an intercept (0, 0: none): a = x.w + b ~ N(x.mu +
    b_mean, sum x^2 v + b_var); out_p (n,) receives p(y = 1 | x) (binary likelihoods: labels
    +-1) and, when y (n,) is given (length n, else 0), out_logp (n,) log p(y_i | x_i), both from
    the likelihood's ``log_predictive`` leaf. off: (n,) each row's offset added to f, or (0,)."""
    n, d = X.shape
    with_y = y.shape[0] == n
    for i in prange(n):
        mean = b_mean + (off[i] if off.shape[0] != 0 else 0.0)
        var = b_var
        for m in range(d):
            mean += X[i, m] * mu[m]
            var += X[i, m] * X[i, m] * v[m]
        out_p[i] = math.exp(log_predictive(lik, 1.0, mean, var, nodes, weights))
        if with_y:
            out_logp[i] = log_predictive(lik, y[i], mean, var, nodes, weights)


#: rows per work unit of ``expected_log_lik`` (fixed: the sum does not depend on the threads)
EXPECT_CHUNK = 4096


def _expected_log_lik(lik, Y, m, v, nodes, weights, partial):
    """sum_i E[log p(Y_i | f)] for f ~ N(m_i, v_i) (n,), by the Gauss-Hermite rule (probabilists'
    nodes, weights summing to one): the objective of a likelihood's learned parameters (EM).
    partial: (ceil(n / EXPECT_CHUNK),) scratch of the chunks' sums, added in chunk order.
    ``expected_log_lik_serial`` is the same code without threads, for a single chunk: a parallel
    region on a busy core costs a scheduler quantum per call, and a learned parameter's search
    calls this about 35 times per sweep (150 rows: 7 ms a call threaded, 0.16 ms serial)."""
    n = Y.shape[0]
    n_chunks = partial.shape[0]
    for c in prange(n_chunks):
        acc = 0.0
        for i in range(c * EXPECT_CHUNK, min(n, (c + 1) * EXPECT_CHUNK)):
            sd = math.sqrt(v[i])
            for j in range(nodes.shape[0]):
                acc += weights[j] * log_lik(lik, Y[i], m[i] + sd * nodes[j])
        partial[c] = acc
    total = 0.0
    for c in range(n_chunks):
        total += partial[c]
    return total


expected_log_lik = njit(**PARALLEL_CACHED)(_expected_log_lik)
expected_log_lik_serial = njit(**SERIAL)(renamed(_expected_log_lik, "_expected_log_lik_serial"))
