"""Sparse rows: regression sites only where x_im != 0, stored in CSR order (DESIGN.md section 9).

A factor p(y_i | x_i . w) does not involve w_m where x_im = 0, so its site there is flat for good:
a sparse problem keeps the sites of the nonzeros only, ``tau[nnz]`` and ``nu[nnz]`` beside the CSR
structure ``indptr[n + 1]``, ``indices[nnz]``, ``data[nnz]``. A row's update reads x.mu and
sum x^2 v over its nonzeros; a sweep costs O(nnz) and its memory is O(nnz + d).

The row functions are the generic ones (``generic``: CEP-1, CEP-2 and EP through the likelihood's
``tilted`` leaf, with the probit's closed form) on a row's index slice, with the same arithmetic
in the same order: a sparse problem and its dense copy fitted with the generic rows give the same
bits. The probit's and the logistic's CEP take their hand-written sites
(``probit.probit_cep_site``, ``logistic.logistic_cep_site``), as the dense rows do with other
arithmetic. The posterior is reduced per column over a CSC ordering of the sites (``col_site``),
each column's sites summed in the row chunks of the dense reduction (``sweep.reduce_posterior``)
and the chunks added in order: race-free (one thread owns a column), the same for any thread
count, and bitwise the dense sum (its sites at x = 0 add exact zeros).
"""

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED, SERIAL, renamed
from ..likelihoods import log_predictive, tilted
from ..special import finite
from .generic import site_message, tilted_curvature
from .logistic import logistic_cep_site
from .probit import probit_cep_site
from .schedules import GENERIC_CODES, METHOD_CODES, begin_sweep
from .sweep import posterior_change

#: the row codes of a sparse problem: the generic rows' (``schedules.GENERIC_CODES``), and the
#: hand-written CEP sites of the probit and the logistic (``schedules.METHOD_CODES``)
SPARSE_CODES = {method: GENERIC_CODES[method] for method in ("cep1", "cep2", "ep")}
HAND_WRITTEN_CODES = {
    key: METHOD_CODES[key]
    for key in (("probit", "cep1"), ("probit", "cep2"), ("logistic", "cep1"), ("logistic", "cep2"))
}


class SparseProblem(NamedTuple):
    """What does not change during a sparse regression fit (CSR rows, 0-based, sorted indices)."""

    indptr: np.ndarray  #: (n + 1,) int64 row starts in the site arrays
    indices: np.ndarray  #: (nnz,) int64 column of each site
    data: np.ndarray  #: (nnz,) float64 its x (nonzero)
    s: np.ndarray  #: (n,) values y (label signs +-1 for binary likelihoods)
    prior_T: np.ndarray  #: (d,) prior precisions
    prior_N: np.ndarray  #: (d,) prior precision-times-means
    nodes: np.ndarray  #: (J,) probabilists' Gauss-Hermite nodes
    weights: np.ndarray  #: (J,) their weights, summing to 1
    code: int  #: the row function (``SPARSE_CODES``, ``HAND_WRITTEN_CODES``)
    chunk: int  #: rows per parallel work unit (and per group of the reduction)
    col_ptr: np.ndarray  #: (d + 1,) int64 column starts in ``col_site``
    col_site: np.ndarray  #: (nnz,) int64 the sites of each column, rows in order
    col_row: np.ndarray  #: (nnz,) int64 the row of each site of ``col_site``
    offset: np.ndarray  #: (n,) a known term added to each row's f, or (0,): none


class SparseState(NamedTuple):
    """Site messages (one per nonzero) and the posterior: what a sweep changes."""

    tau: np.ndarray  #: (nnz,) site precisions
    nu: np.ndarray  #: (nnz,) site precision-times-means
    T: np.ndarray  #: (d,) posterior precisions = prior + sum of sites
    N: np.ndarray  #: (d,) posterior precision-times-means
    mu: np.ndarray  #: (d,) posterior means N / T
    v: np.ndarray  #: (d,) posterior variances 1 / T


class SparseScratch(NamedTuple):
    """Work space of the sparse sweeps (allocated once per fit)."""

    skipped: np.ndarray  #: (n_chunks,) int64 messages not applied, per chunk
    mu_old: np.ndarray  #: (d,) the posterior means before the sweep
    v_old: np.ndarray  #: (d,) the variances before the sweep
    old: np.ndarray  #: (2, longest row) sequential schedule: a row's messages before its update
    order: np.ndarray  #: (n,) int64 sequential schedule: the order of the rows

    @classmethod
    def allocate(cls, problem):
        n = problem.indptr.shape[0] - 1
        d = problem.prior_T.shape[0]
        longest = int(np.max(np.diff(problem.indptr))) if n else 0
        return cls(
            np.zeros(max(1, -(-n // problem.chunk)), dtype=np.int64),
            np.empty(d),
            np.empty(d),
            np.empty((2, max(1, longest))),
            np.arange(n, dtype=np.int64),
        )


def column_order(indices, n, d, indptr):
    """(col_ptr (d + 1,), col_site (nnz,), col_row (nnz,)): the sites grouped by column, rows in
    order within a column (a stable sort of the CSR column indices), and the row of each."""
    col_ptr = np.zeros(d + 1, dtype=np.int64)
    col_site = np.empty(indices.shape[0], dtype=np.int64)
    col_row = np.empty(indices.shape[0], dtype=np.int64)
    counting_sort(indices, np.asarray(indptr, dtype=np.int64), col_ptr, col_site, col_row)
    return col_ptr, col_site, col_row


@njit(**LEAF)
def counting_sort(indices, indptr, col_ptr, col_site, col_row):
    """The CSR sites grouped by column in O(nnz + d), each column's sites in CSR order (the
    permutation of a stable sort of ``indices``): col_ptr (d + 1,) zeros in, the columns'
    offsets out; col_site and col_row (nnz,) the sites and their rows."""
    d = col_ptr.shape[0] - 1
    for k in range(indices.shape[0]):
        col_ptr[indices[k] + 1] += 1
    for j in range(d):
        col_ptr[j + 1] += col_ptr[j]
    fill = col_ptr[:d].copy()
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            col_site[fill[j]] = k
            col_row[fill[j]] = i
            fill[j] += 1


@njit(**LEAF)
def damp_flat(tau, nu, k, t_new, n_new, ok, rho):
    """Damped update msg <- (1 - rho) msg + rho new of site k if ok (as ``sweep.damp_site``, with
    no partial sums); returns 1 if skipped."""
    w = rho if ok else 0.0
    tn = t_new if ok else 0.0
    nn = n_new if ok else 0.0
    tau[k] = (1.0 - w) * tau[k] + w * tn
    nu[k] = (1.0 - w) * nu[k] + w * nn
    return 0 if ok else 1


@njit(**LEAF)
def save_sites(tau, nu, k0, k1, old):
    """Sequential schedule: sites k0..k1-1 into old[0] (precisions) and old[1] (shifts)."""
    for k in range(k0, k1):
        old[0, k - k0] = tau[k]
        old[1, k - k0] = nu[k]


@njit(**LEAF)
def apply_sites_change(indices, state, k0, k1, old):
    """Sequential schedule: the change of sites k0..k1-1 since ``save_sites`` into the posterior
    of their columns (``sweep.apply_row_change`` on the nonzeros)."""
    tau, nu, T, N, mu, v = state
    for k in range(k0, k1):
        dt = tau[k] - old[0, k - k0]
        dn = nu[k] - old[1, k - k0]
        if dt != 0.0 or dn != 0.0:
            m = indices[k]
            T[m] += dt
            N[m] += dn
            mu[m] = N[m] / T[m]
            v[m] = 1.0 / T[m]


@njit(**LEAF)
def cep_row(lik, problem, state, i, rho):
    """CEP-1 (codes 10, 0, 3) or CEP-2 (11, 1, 4) update of row i's sites: ``generic.cep1_rows``
    on its nonzeros, or the probit's (0, 1) or the logistic's (3, 4) hand-written site. Returns
    the number of messages not applied."""
    code = problem.code
    second = code == 11 or code == 1 or code == 4
    indices, X, y, off = problem.indices, problem.data, problem.s[i], problem.offset
    nodes, weights = problem.nodes, problem.weights
    tau, nu, T, N, mu, v = state
    k0, k1 = problem.indptr[i], problem.indptr[i + 1]
    xmu = off[i] if off.shape[0] != 0 else 0.0
    xxv = 0.0
    for k in range(k0, k1):
        xmu += X[k] * mu[indices[k]]
        xxv += X[k] * X[k] * v[indices[k]]
    k_skip = 0
    for k in range(k0, k1):
        m = indices[k]
        xm = X[k]
        tc = T[m] - tau[k]
        nc = N[m] - nu[k]
        vc = 1.0 / tc
        b = xmu - xm * mu[m]
        q = max(xxv - xm * xm * v[m], 0.0)
        if code < 3:  # (the hand-written sites)
            t_new, n_new, ok = probit_cep_site(xm, y, tc, nc, b, q, second)
        elif code < 10:
            t_new, n_new, ok = logistic_cep_site(xm, y, tc, nc, b, q, second, nodes, weights)
        else:
            if second:
                m_a, v_a = xm * nc * vc + b, xm * xm * vc
                alpha, beta, alpha2, beta2 = tilted_curvature(lik, y, m_a, v_a, nodes, weights)
                delta = xm * vc * (alpha + 0.5 * q * alpha2)
                a = xm * xm * vc * (beta + 0.5 * q * beta2)
            else:
                log_z, alpha, beta = tilted(lik, y, xm * nc * vc + b, xm * xm * vc, nodes, weights)
                delta = xm * vc * alpha
                a = xm * xm * vc * beta
            t_new, n_new, ok = site_message(lik, tc, nc, delta, a)
        k_skip += damp_flat(tau, nu, k, t_new, n_new, ok, rho)
    return k_skip


@njit(**LEAF)
def ep_row(lik, problem, state, i, rho):
    """EP update of row i's sites through the one-dimensional reduction (``generic.ep_rows`` on
    its nonzeros). Returns the number of messages not applied."""
    indices, X, off = problem.indices, problem.data, problem.offset
    tau, nu, T, N, mu, v = state
    k0, k1 = problem.indptr[i], problem.indptr[i + 1]
    m_a = 0.0
    v_a = 0.0
    n_improper = 0
    for k in range(k0, k1):
        m = indices[k]
        tc = T[m] - tau[k]
        vc = 1.0 / tc
        m_a += X[k] * ((N[m] - nu[k]) * vc)
        v_a += X[k] * X[k] * vc
        n_improper += 0 if tc > 0.0 else 1
    if off.shape[0] != 0:
        m_a += off[i]
    alpha = 0.0
    beta = 0.0
    if v_a != 0.0:
        log_z, alpha, beta = tilted(lik, problem.s[i], m_a, v_a, problem.nodes, problem.weights)
    if n_improper > 0:  # an improper cavity makes the whole row's tilted distribution invalid
        beta = math.nan
    k_skip = 0
    for k in range(k0, k1):
        m = indices[k]
        xm = X[k]
        tc = T[m] - tau[k]
        vc = 1.0 / tc
        t_new, n_new, ok = site_message(lik, tc, N[m] - nu[k], xm * vc * alpha, xm * xm * vc * beta)
        k_skip += damp_flat(tau, nu, k, t_new, n_new, ok, rho)
    return k_skip


@njit(**LEAF)
def run_rows(lik, problem, state, order, lo, hi, seq, rho, old):
    """Rows order[lo..hi-1] by the row function of ``problem.code``; with ``seq`` the posterior
    is refreshed after every row. Returns the number of messages not applied."""
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        k0, k1 = problem.indptr[i], problem.indptr[i + 1]
        if seq:
            save_sites(state.tau, state.nu, k0, k1, old)
        if problem.code == 2:
            k += ep_row(lik, problem, state, i, rho)
        else:
            k += cep_row(lik, problem, state, i, rho)
        if seq:
            apply_sites_change(problem.indices, state, k0, k1, old)
    return k


@njit(**LEAF)
def reduce_column(problem, tau, nu, m):
    """(prior + sum of column m's site precisions, the same for the shifts): its sites summed
    per row chunk, the chunks added in order (``sweep.reduce_posterior``'s arithmetic)."""
    t = problem.prior_T[m]
    n_ = problem.prior_N[m]
    pt = 0.0
    pn = 0.0
    current = -1
    for j in range(problem.col_ptr[m], problem.col_ptr[m + 1]):
        c = problem.col_row[j] // problem.chunk
        if c != current:
            t += pt
            n_ += pn
            pt = 0.0
            pn = 0.0
            current = c
        k = problem.col_site[j]
        pt += tau[k]
        pn += nu[k]
    return t + pt, n_ + pn


@njit(**LEAF)
def set_column(problem, state, m):
    """Weight m's posterior T, N, mu, v from its sites (``reduce_column``)."""
    t, nn = reduce_column(problem, state.tau, state.nu, m)
    state.T[m] = t
    state.N[m] = nn
    state.mu[m] = nn / t
    state.v[m] = 1.0 / t


@njit(**LEAF)
def reduce_columns(problem, state):
    """The posterior of ``state`` from its sites, column after column."""
    for m in range(state.T.shape[0]):
        set_column(problem, state, m)


def _parallel_step(problem, lik, state, scratch, rho, key):
    """One damped parallel sweep: chunks of rows in parallel (each writes only its rows' sites),
    then the posterior reduced column by column; returns (change, skipped). key: unused (the
    signature of ``schedules.parallel_step``)."""
    n = problem.indptr.shape[0] - 1
    chunk = problem.chunk
    begin_sweep(state, scratch)
    for c in prange(scratch.skipped.shape[0]):
        lo = c * chunk
        hi = min(n, lo + chunk)
        scratch.skipped[c] = run_rows(lik, problem, state, scratch.order, lo, hi, False, rho, scratch.old)
    for m in prange(state.T.shape[0]):
        set_column(problem, state, m)
    k = 0
    for c in range(scratch.skipped.shape[0]):
        k += scratch.skipped[c]
    return posterior_change(state.mu, state.v, scratch.mu_old, scratch.v_old), k


parallel_step = njit(**PARALLEL_CACHED)(_parallel_step)
parallel_step_serial = njit(**SERIAL)(renamed(_parallel_step, "_sparse_parallel_step_serial"))


@njit(**SERIAL)
def sequential_step(problem, lik, state, scratch, rho, key):
    """One sequential sweep over ``scratch.order`` (the posterior refreshed after every row), the
    posterior then rebuilt exactly from the sites, and (change, skipped)."""
    begin_sweep(state, scratch)
    n = scratch.order.shape[0]
    k = run_rows(lik, problem, state, scratch.order, 0, n, True, rho, scratch.old)
    reduce_columns(problem, state)
    return posterior_change(state.mu, state.v, scratch.mu_old, scratch.v_old), k


@njit(**LEAF)
def adf_ep_row(lik, problem, state, i, rho):
    """``ep_row`` of a row whose sites are not in the posterior (assumed density filtering: the
    cavity is the posterior T, N itself): the damped messages into ``state.tau``, ``state.nu``
    (0 where refused; ``tau`` holds the cavity variances meanwhile, read in order, where a
    scratch of size d would cost a cache miss a nonzero). Returns the number of messages
    refused."""
    indices, X, off = problem.indices, problem.data, problem.offset
    tau, nu, T, N, mu, v = state
    k0, k1 = problem.indptr[i], problem.indptr[i + 1]
    m_a = off[i] if off.shape[0] != 0 else 0.0
    v_a = 0.0
    for k in range(k0, k1):
        m = indices[k]
        vc = 1.0 / T[m]
        tau[k] = vc
        m_a += X[k] * (N[m] * vc)
        v_a += X[k] * X[k] * vc
    alpha = 0.0
    beta = 0.0
    if v_a != 0.0:
        log_z, alpha, beta = tilted(lik, problem.s[i], m_a, v_a, problem.nodes, problem.weights)
    k_skip = 0
    for k in range(k0, k1):
        m = indices[k]
        xm = X[k]
        vc = tau[k]
        t_new, n_new, ok = site_message(lik, T[m], N[m], xm * vc * alpha, xm * xm * vc * beta)
        tau[k] = rho * t_new if ok else 0.0
        nu[k] = rho * n_new if ok else 0.0
        k_skip += 0 if ok else 1
    return k_skip


@njit(**SERIAL)
def adf_pass(lik, problem, state, rho, prior_T, prior_N, seen, rows, forget, mean, var):
    """One pass of assumed density filtering over the rows of ``problem`` (CSR, global columns),
    each row's sites fitted once by the row function of ``problem.code`` against the posterior
    the rows before it left, and absorbed at once (the sequential schedule's one sweep with no
    batch layout, no flat start and no rebuild). The posterior is ``state``'s T, N (d,), changed
    in place; ``state.tau``, ``state.nu`` (nnz,) zeros in, the damped messages applied out (0:
    refused); ``state.mu``, ``state.v`` (d,) scratch. Forgetting, row by row: before row i
    (row ``rows + i + 1`` of the stream) each weight it touches moves toward the prior
    (prior_T, prior_N) by (1 - forget)^k, k the rows since ``seen`` (updated; not read or
    written without forgetting, ``Online.set_forget``), so that any batching of the rows gives
    the same bits. mean, var (d_out,): the weights' posterior moments
    N / T, 1 / T, written for each touched column below d_out (the intercept's, d_out, is not).
    A row whose messages would leave a weight's posterior improper or not finite is refused
    whole. Returns the number of messages refused (``tau``, ``nu`` 0 there)."""
    tau, nu, T, N, mu, v = state
    indices = problem.indices
    n = problem.indptr.shape[0] - 1
    d_out = mean.shape[0]
    log_keep = math.log1p(-forget) if forget > 0.0 else 0.0
    moments = problem.code != 2  # (EP's rows read T and N only)
    refused = 0
    for i in range(n):
        r = rows + i + 1
        k0, k1 = problem.indptr[i], problem.indptr[i + 1]
        for k in range(k0, k1):
            m = indices[k]
            if forget > 0.0:
                if seen[m] != r:
                    keep = math.exp((r - seen[m]) * log_keep)
                    T[m] = keep * T[m] + (1.0 - keep) * prior_T[m]
                    N[m] = keep * N[m] + (1.0 - keep) * prior_N[m]
                seen[m] = r
            if moments:
                mu[m] = N[m] / T[m]
                v[m] = 1.0 / T[m]
        if moments:
            refused += cep_row(lik, problem, state, i, rho)
        else:
            refused += adf_ep_row(lik, problem, state, i, rho)
        proper = True
        for k in range(k0, k1):
            t = T[indices[k]] + tau[k]
            proper = proper and finite(t) and t > 0.0 and finite(N[indices[k]] + nu[k])
        for k in range(k0, k1):
            m = indices[k]
            if not proper:  # (a row that would leave a weight improper or not finite: refused whole)
                refused += 1 if tau[k] != 0.0 or nu[k] != 0.0 else 0
                tau[k] = 0.0
                nu[k] = 0.0
                continue
            T[m] += tau[k]
            N[m] += nu[k]
            if m < d_out:
                mean[m] = N[m] / T[m]
                var[m] = 1.0 / T[m]
    return refused


@njit(**SERIAL)
def rebuild(problem, state, scratch):
    """The posterior of ``state`` from its sites (``reduce_column`` per column)."""
    reduce_columns(problem, state)


@njit(**PARALLEL_CACHED)
def restore_improper(problem, state, old_t, old_n, restored):
    """``schedules.restore_improper`` on sparse sites: every weight m whose posterior precision
    or some cavity precision of its sites is not positive (or not finite) gets its sites' old
    messages back; restored[m] counts the changed messages undone. One thread per column."""
    tau, nu, T = state.tau, state.nu, state.T
    for m in prange(T.shape[0]):
        proper = T[m] > 0.0 and finite(T[m])
        for j in range(problem.col_ptr[m], problem.col_ptr[m + 1]):
            k = problem.col_site[j]
            proper = proper and (T[m] - tau[k] > 0.0) and finite(nu[k])
        n_undone = 0
        if not proper:
            for j in range(problem.col_ptr[m], problem.col_ptr[m + 1]):
                k = problem.col_site[j]
                if tau[k] != old_t[k] or nu[k] != old_n[k]:
                    n_undone += 1
                tau[k] = old_t[k]
                nu[k] = old_n[k]
        restored[m] = n_undone


@njit(**PARALLEL_CACHED)
def predictive_from_moments(lik, mean, var, nodes, weights, out_p, out_logp, y):
    """The posterior predictive of rows whose f has mean and variance (n,) (sparse rows: from
    X @ mu and X^2 @ v): out_p (n,) receives p(y = 1 | x) and, when y (n,) is given (length n,
    else 0), out_logp (n,) log p(y_i | x_i); as ``generic.predictive``."""
    n = mean.shape[0]
    with_y = y.shape[0] == n
    for i in prange(n):
        out_p[i] = math.exp(log_predictive(lik, 1.0, mean[i], var[i], nodes, weights))
        if with_y:
            out_logp[i] = log_predictive(lik, y[i], mean[i], var[i], nodes, weights)


@njit(**LEAF)
def distinct_columns(indices, slot):
    """The distinct columns of ``indices`` in increasing order (cols (m,)) and each site's place
    among them (inverse (nnz,)), as ``np.unique(indices, return_inverse=True)``, in O(nnz + d):
    ``slot`` (d,) int64, all -1 in and out, is the scratch map of column to place."""
    m = 0
    for k in range(indices.shape[0]):
        if slot[indices[k]] < 0:
            slot[indices[k]] = 0
            m += 1
    cols = np.empty(m, dtype=np.int64)
    m = 0
    for j in range(slot.shape[0]):
        if slot[j] == 0:
            slot[j] = m + 1  # (place + 1: a column at place 0 stays told apart from the unmarked)
            cols[m] = j
            m += 1
    inverse = np.empty(indices.shape[0], dtype=np.int64)
    for k in range(indices.shape[0]):
        inverse[k] = slot[indices[k]] - 1
    for j in cols:
        slot[j] = -1
    return cols, inverse
