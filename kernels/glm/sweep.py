"""Schedules shared by the fully factorised regression kernels.

A *row function* updates the d messages of one data point in place and has the signature::

    row_fn(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work) -> n_skipped

x (d,) features, s = +-1 label sign, tau_r/nu_r (d,) the row's site precisions and
precision-times-means (overwritten with the damped new values), T/N (d,) the posterior natural
parameters the cavities are taken from, mu/v (d,) the posterior means/variances, rho the damping,
nodes/weights the normalised probabilists' Gauss-Hermite rule (ignored by analytic factors),
acc_t/acc_n (d,) partial sums that receive the new site values, work (N_WORK, d) scratch.

Row functions are written as a few passes over the row so that the expensive passes (the
divisions, the message arithmetic) are branch-free and compile to SIMD code; the rare sites that
need an exact special-case evaluation are fixed up in a scalar pass.

``fastcep.kernels.regression`` runs row functions in the two schedules of DESIGN.md section 3;
this module holds what they share: the message update, damping, and the race-free posterior
reduction over fixed-size chunks.
"""

import math

import numpy as np
from numba import njit, prange

from .._config import LEAF, N_WORK, PARALLEL_CACHED


@njit(**LEAF)
def message_from_moments(tc, nc, delta, a):
    """New site (tau*, nu*, ok) from tilted mean mc + delta and variance vc (1 - a).

    tau* = 1/var - tc and nu* = mean/var - nc, written so that weak factors (a -> 0) lose no
    precision: tau* = tc a / (1 - a), nu* = (delta tc + nc a) / (1 - a). ok is False when the
    cavity is improper (tc <= 0), the new precision would be negative (a < 0), the variance not
    positive (a >= 1) or a value is not finite; such a message must not be applied. a == 0 with
    delta == 0 is the flat message of a factor that does not involve the weight (x = 0) or whose
    information underflowed (e.g. phi(z)/Phi(z) = 0 for z > 38): it is exact to double precision
    and is applied, so that a stale strong message does not linger. Branch-free (SIMD-friendly).
    """
    inv = 1.0 / (1.0 - a)
    t_new = tc * a * inv
    n_new = (delta * tc + nc * a) * inv
    flat = (a == 0.0) & (delta == 0.0) & (tc > 0.0)
    proper = (a > 0.0) & (a < 1.0) & (tc > 0.0) & (t_new > 0.0)
    ok = flat | (proper & math.isfinite(t_new) & math.isfinite(n_new))
    if flat:
        t_new = 0.0
        n_new = 0.0
    return t_new, n_new, ok


@njit(**LEAF)
def damp_site(tau_r, nu_r, m, t_new, n_new, ok, rho, acc_t, acc_n):
    """Damped update msg <- (1 - rho) msg + rho new of site m if ok; returns 1 if skipped."""
    w = rho if ok else 0.0
    tn = t_new if ok else 0.0
    nn = n_new if ok else 0.0
    t = (1.0 - w) * tau_r[m] + w * tn
    n = (1.0 - w) * nu_r[m] + w * nn
    tau_r[m] = t
    nu_r[m] = n
    acc_t[m] += t
    acc_n[m] += n
    return 0 if ok else 1


@njit(**LEAF)
def apply_row_change(tau_r, nu_r, old_t, old_n, T, N, mu, v):
    """Sequential schedule: add one row's message change (tau_r - old_t, nu_r - old_n) to the
    posterior natural parameters T, N and refresh mu, v where they changed (an unchanged message
    leaves its weight bitwise as it was)."""
    for m in range(tau_r.shape[0]):
        dt = tau_r[m] - old_t[m]
        dn = nu_r[m] - old_n[m]
        if dt != 0.0 or dn != 0.0:
            T[m] += dt
            N[m] += dn
            mu[m] = N[m] / T[m]
            v[m] = 1.0 / T[m]


@njit(**LEAF)
def row_cavity(x, tau_r, nu_r, T, N, vb, mb):
    """Cavities of one row's d weights: variances vb and means mb (d,) written; returns
    (x.mc, sum_m x_m^2 vc_m, number of improper cavities (precision <= 0))."""
    m_eta = 0.0
    v_eta = 0.0
    n_improper = 0
    for m in range(x.shape[0]):
        tc = T[m] - tau_r[m]
        vc = 1.0 / tc
        vb[m] = vc
        mb[m] = (N[m] - nu_r[m]) * vc
        m_eta += x[m] * mb[m]
        v_eta += x[m] * x[m] * vc
        n_improper += 0 if tc > 0.0 else 1
    return m_eta, v_eta, n_improper


def work_buffers(n_chunks, d):
    """Scratch space of the parallel sweep: (n_chunks, N_WORK, d)."""
    return np.empty((n_chunks, N_WORK, d))


@njit(**PARALLEL_CACHED)
def reduce_posterior(prior_T, prior_N, pT, pN, T, N, mu, v):
    """T = prior_T + sum_c pT[c], N likewise (fixed order over chunks), then mu = N/T, v = 1/T."""
    d = T.shape[0]
    n_chunks = pT.shape[0]
    for m in prange(d):
        t = prior_T[m]
        nn = prior_N[m]
        for c in range(n_chunks):
            t += pT[c, m]
            nn += pN[c, m]
        T[m] = t
        N[m] = nn
        mu[m] = nn / t
        v[m] = 1.0 / t


@njit(**PARALLEL_CACHED)
def chunk_sums(tau, nu, chunk, pT, pN):
    """pT[c] = sum of tau over the rows of chunk c (rows in order), pN likewise for nu."""
    n, d = tau.shape
    for c in prange(pT.shape[0]):
        pT[c, :] = 0.0
        pN[c, :] = 0.0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            for m in range(d):
                pT[c, m] += tau[i, m]
                pN[c, m] += nu[i, m]


def rebuild_posterior(prior_T, prior_N, tau, nu, chunk, T, N, mu, v):
    """Posterior from scratch, summing the sites in the same chunks and order as the parallel
    sweep and reducing them with the same kernel, so both paths agree bitwise."""
    n, d = tau.shape
    n_chunks = max(1, -(-n // chunk))
    pT = np.empty((n_chunks, d))
    pN = np.empty((n_chunks, d))
    chunk_sums(tau, nu, chunk, pT, pN)
    reduce_posterior(prior_T, prior_N, pT, pN, T, N, mu, v)
