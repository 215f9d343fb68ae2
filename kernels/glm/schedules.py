"""Schedules of the fully factorised regression factors (probit and logistic).

One parallel and one sequential driver serve every (model, method): the row function is chosen
by an integer ``code`` (``METHOD_CODES``), so each driver compiles once and is cached on disk.

parallel_sweep: damped parallel schedule. All messages are computed from one posterior; chunks
of ``chunk`` rows are the unit of parallel work and chunk c writes only its rows of tau/nu and
row c of pT/pN/skipped/work, so the sweep is race-free and its result does not depend on the
number of threads. The new sites are summed per chunk on the fly (``_sweep.reduce_posterior``
turns the partial sums into the posterior).

sequential_sweep: rows in the given order, the posterior refreshed after every row.

restore_improper: the parallel schedule's guard for methods whose messages may have negative
precisions (importance sampling keeps them, see ``importance``): a weight whose posterior or some
cavity would be improper after a sweep keeps its messages from before the sweep.
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED, SERIAL
from . import importance, laplace, logistic, probit
from .sweep import apply_row_change

METHOD_CODES = {
    ("probit", "cep1"): 0,
    ("probit", "cep2"): 1,
    ("probit", "ep"): 2,
    ("logistic", "cep1"): 3,
    ("logistic", "cep2"): 4,
    ("logistic", "ep"): 5,
    ("probit", "lp"): 6,
    ("logistic", "lp"): 7,
    ("probit", "is"): 8,
    ("logistic", "is"): 9,
}


@njit(**LEAF)
def _row(code, x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work, n_samples, key):
    """Dispatch one row update to the row function of ``code``; returns skipped messages.

    n_samples and key (the row's uint64 random key) serve importance sampling only.
    """
    if code == 0:
        return probit.cep1_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 1:
        return probit.cep2_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 2:
        return probit.ep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 3:
        return logistic.cep1_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 4:
        return logistic.cep2_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 5:
        return logistic.ep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 6:
        return laplace.probit_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 7:
        return laplace.logistic_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work)
    if code == 8:
        return importance.probit_row(x, s, tau_r, nu_r, T, N, rho, n_samples, key, acc_t, acc_n, work)
    return importance.logistic_row(x, s, tau_r, nu_r, T, N, rho, n_samples, key, acc_t, acc_n, work)


@njit(**PARALLEL_CACHED)
def parallel_sweep(
    code, X, s, tau, nu, T, N, mu, v, rho, nodes, weights, chunk, pT, pN, skipped, work, n_samples, key
):
    """One damped parallel sweep; work is (n_chunks, N_WORK, d) scratch; key (uint64) seeds the
    random draws of importance sampling (row i uses ``importance.row_key(key, i)``)."""
    n = X.shape[0]
    n_chunks = pT.shape[0]
    for c in prange(n_chunks):
        lo = c * chunk
        hi = min(n, lo + chunk)
        acc_t = pT[c]
        acc_n = pN[c]
        acc_t[:] = 0.0
        acc_n[:] = 0.0
        wk = work[c]
        k = 0
        for i in range(lo, hi):
            k += _row(
                code, X[i], s[i], tau[i], nu[i], T, N, mu, v, rho, nodes, weights, acc_t, acc_n, wk,
                n_samples, importance.row_key(key, i),
            )  # fmt: skip
        skipped[c] = k


@njit(**SERIAL)
def sequential_sweep(
    code, X, s, tau, nu, T, N, mu, v, rho, nodes, weights, n_samples, key, order, old_t, old_n, scr_t, scr_n,
    work,
):  # fmt: skip
    """One sequential sweep over ``order``; old_t, old_n, scr_t, scr_n (d,) and work (N_WORK, d)
    are scratch; n_samples, key as in ``parallel_sweep``. Returns the number of skipped messages."""
    k = 0
    for ii in range(order.shape[0]):
        i = order[ii]
        old_t[:] = tau[i]
        old_n[:] = nu[i]
        k += _row(
            code, X[i], s[i], tau[i], nu[i], T, N, mu, v, rho, nodes, weights, scr_t, scr_n, work,
            n_samples, importance.row_key(key, i),
        )  # fmt: skip
        apply_row_change(tau[i], nu[i], old_t, old_n, T, N, mu, v)
    return k


@njit(**PARALLEL_CACHED)
def restore_improper(T, tau, nu, old_t, old_n, restored):
    """After a parallel sweep (T (d,) the new posterior precisions, tau/nu (n, d) the new
    messages, old_t/old_n (n, d) the messages before it): every weight m whose posterior precision
    T_m or some cavity precision T_m - tau_im is not positive (or not finite) gets its old messages
    back. restored (d,) int64 receives the number of changed messages undone per weight (0: the
    weight was proper). Each m owns column m (race-free, thread-count independent)."""
    n, d = tau.shape
    for m in prange(d):
        proper = T[m] > 0.0 and math.isfinite(T[m])
        for i in range(n):
            # (written so that a NaN makes the weight improper)
            proper = proper and (T[m] - tau[i, m] > 0.0) and math.isfinite(nu[i, m])
        k = 0
        if not proper:
            for i in range(n):
                if tau[i, m] != old_t[i, m] or nu[i, m] != old_n[i, m]:
                    k += 1
                tau[i, m] = old_t[i, m]
                nu[i, m] = old_n[i, m]
        restored[m] = k
