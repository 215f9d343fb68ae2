"""What every regression row function and schedule shares: the message update, damping, the
cavities of a row, and the race-free posterior reduction over fixed-size chunks.

A *row function* updates the d messages of row i in place and has the signature::

    row_fn(X, s, i, tau, nu, T, N, mu, v, rho, nodes, weights, pT, pN, c, work) -> n_skipped

X (n, d) features, s = +-1 the row's label sign, tau/nu (n, d) the site precisions and
precision-times-means (row i overwritten with the damped new values), T/N (d,) the posterior
natural parameters the cavities are taken from, mu/v (d,) the posterior means/variances, rho the
damping, nodes/weights the normalised probabilists' Gauss-Hermite rule (ignored by analytic
factors), pT/pN (n_chunks, d) partial sums whose row c receives the new site values, work
(n_chunks, N_WORK, d) scratch of which row function uses work[c].

Row functions index the 2-D arrays directly (X[i, m], work[c, j, m]): no per-row array views,
whose reference counting cost more than the arithmetic of a short row. They are written as a few
passes over the row so that the expensive passes (the divisions, the message arithmetic) are
branch-free and compile to SIMD code; the rare sites that need an exact special-case evaluation
are fixed up in a scalar pass.
"""

import math

from numba import njit

from .._config import LEAF, LEAF_SUMS
from ..special import finite


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
    ok = flat | (proper & finite(t_new) & finite(n_new))
    if flat:
        t_new = 0.0
        n_new = 0.0
    return t_new, n_new, ok


@njit(**LEAF)
def signed_message(tc, nc, delta, a):
    """``message_from_moments`` with a site precision of either sign: ok needs only a proper
    cavity (tc > 0), a positive tilted variance (a < 1) and finite values. For the sites of a
    likelihood that may not be log-concave, whose outliers' tilted variances exceed their
    cavities' (a < 0, as EP defines the site: ``generic.site_message``), and for moments
    estimated by importance sampling, whose noise around a weak site must be kept on both sides
    (``importance.is_row``)."""
    inv = 1.0 / (1.0 - a)
    t_new = tc * a * inv
    n_new = (delta * tc + nc * a) * inv
    ok = (tc > 0.0) & (a < 1.0) & finite(t_new) & finite(n_new)
    return t_new, n_new, ok


@njit(**LEAF)
def damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c):
    """Damped update msg <- (1 - rho) msg + rho new of site (i, m) if ok, added to the partial
    sums pT[c, m], pN[c, m]; returns 1 if skipped."""
    w = rho if ok else 0.0
    tn = t_new if ok else 0.0
    nn = n_new if ok else 0.0
    t = (1.0 - w) * tau[i, m] + w * tn
    n = (1.0 - w) * nu[i, m] + w * nn
    tau[i, m] = t
    nu[i, m] = n
    pT[c, m] += t
    pN[c, m] += n
    return 0 if ok else 1


@njit(**LEAF_SUMS)
def row_dots(X, i, a, b):
    """(sum_m X[i, m] a[m], sum_m X[i, m]^2 b[m]): for a = mu and b = v, the mean x.mu of row i's
    f and sum x^2 v (CEP-2's q before one site's term is taken out)."""
    s = 0.0
    t = 0.0
    for m in range(X.shape[1]):
        s += X[i, m] * a[m]
        t += X[i, m] * X[i, m] * b[m]
    return s, t


@njit(**LEAF_SUMS)
def sum_sq_dev(w, z0):
    """sum_m (w[m] - z0)^2."""
    h = 0.0
    for m in range(w.shape[0]):
        h += (w[m] - z0) * (w[m] - z0)
    return h


@njit(**LEAF_SUMS)
def row_cavity(X, i, tau, nu, T, N, work, c, jv, jm):
    """Cavities of row i's d weights: variances into work[c, jv] and means into work[c, jm];
    returns (x.mc, sum_m x_m^2 vc_m, number of improper cavities (precision <= 0))."""
    m_eta = 0.0
    v_eta = 0.0
    n_improper = 0
    for m in range(X.shape[1]):
        xm = X[i, m]
        tc = T[m] - tau[i, m]
        vc = 1.0 / tc
        mc = (N[m] - nu[i, m]) * vc
        work[c, jv, m] = vc
        work[c, jm, m] = mc
        m_eta += xm * mc
        v_eta += xm * xm * vc
        n_improper += 0 if tc > 0.0 else 1
    return m_eta, v_eta, n_improper


@njit(**LEAF)
def save_row(tau, nu, i, old):
    """Sequential schedule: row i's messages into old[0] (precisions) and old[1] (shifts)."""
    for m in range(tau.shape[1]):
        old[0, m] = tau[i, m]
        old[1, m] = nu[i, m]


@njit(**LEAF)
def apply_row_change(tau, nu, i, old, T, N, mu, v):
    """Sequential schedule: add row i's message change (its messages minus ``old``, from
    ``save_row``) to the posterior natural parameters T, N and refresh mu, v where they changed
    (an unchanged message leaves its weight bitwise as it was)."""
    for m in range(tau.shape[1]):
        dt = tau[i, m] - old[0, m]
        dn = nu[i, m] - old[1, m]
        if dt != 0.0 or dn != 0.0:
            T[m] += dt
            N[m] += dn
            mu[m] = N[m] / T[m]
            v[m] = 1.0 / T[m]


@njit(**LEAF)
def reduce_posterior(prior_T, prior_N, pT, pN, T, N, mu, v):
    """T = prior_T + sum_c pT[c], N likewise (fixed order over chunks), then mu = N/T, v = 1/T."""
    d = T.shape[0]
    n_chunks = pT.shape[0]
    for m in range(d):
        t = prior_T[m]
        nn = prior_N[m]
        for c in range(n_chunks):
            t += pT[c, m]
            nn += pN[c, m]
        T[m] = t
        N[m] = nn
        mu[m] = nn / t
        v[m] = 1.0 / t


@njit(**LEAF)
def chunk_sums(tau, nu, chunk, pT, pN, c):
    """pT[c] = sum of tau over the rows of chunk c (rows in order), pN likewise for nu."""
    n, d = tau.shape
    for m in range(d):
        pT[c, m] = 0.0
        pN[c, m] = 0.0
    for i in range(c * chunk, min(n, (c + 1) * chunk)):
        for m in range(d):
            pT[c, m] += tau[i, m]
            pN[c, m] += nu[i, m]


@njit(**LEAF)
def rebuild_posterior(prior_T, prior_N, tau, nu, chunk, pT, pN, T, N, mu, v):
    """Posterior from scratch: the sites summed in the chunks and order of the parallel sweep
    (pT, pN (n_chunks, d) scratch), then reduced as it does, so both paths agree bitwise."""
    for c in range(pT.shape[0]):
        chunk_sums(tau, nu, chunk, pT, pN, c)
    reduce_posterior(prior_T, prior_N, pT, pN, T, N, mu, v)


@njit(**LEAF)
def posterior_change(mu, v, mu_old, v_old):
    """The stopping rule's measure: the largest change of a posterior mean in units of its
    posterior sd, or of a variance relative to itself (NaN if any value is not finite)."""
    change = 0.0
    all_finite = True
    for m in range(mu.shape[0]):
        dm = abs(mu[m] - mu_old[m]) / math.sqrt(v[m])
        dv = abs(v[m] - v_old[m]) / v[m]
        all_finite = all_finite and finite(dm) and finite(dv)
        change = max(change, max(dm, dv))
    return change if all_finite else math.nan


# ------------------------------------------------------------------------------------- slabs
#: sites of one slab: rows of few features are updated a slab of rows at a time, the slab's
#: sites in flat loops that compile to SIMD code across rows (a row of d < SLAB_D sites is too
#: short a loop); parallel schedule only (the rows of a slab see one posterior)
SLAB_SITES = 512
#: rows of fewer features than this are updated in slabs (``run_rows``)
SLAB_D = 16
#: rows of a slab's scratch (per chunk): site arrays of SLAB_SITES
SLAB_ROWS = 20


@njit(**LEAF)
def tile_posterior(T, N, mu, v, tiles):
    """tiles[0..3] (SLAB_SITES,) <- T, N, mu, v repeated row after row: the posterior of a slab's
    flat site j = (row b, feature m) is tiles[:, j] (j = b d + m) for every slab."""
    d = T.shape[0]
    L = tiles.shape[1]
    for j in range(L - L % d):
        m = j % d
        tiles[0, j] = T[m]
        tiles[1, j] = N[m]
        tiles[2, j] = mu[m]
        tiles[3, j] = v[m]


@njit(**LEAF)
def slab_rows(X, S, r0, r1, mu, v, slab, c, jb, jq, js):
    """A slab's per-row quantities broadcast to its sites: slab[c, jb, j] = x.mu - x_m mu_m (the
    rest of f at the posterior means), slab[c, jq, j] = sum_{l != m} x_l^2 v_l (>= 0; CEP-2's q),
    slab[c, js, j] = the row's sign, for the sites j = b d + m of rows r0..r1-1."""
    d = X.shape[1]
    for b in range(r1 - r0):
        i = r0 + b
        xmu, xxv = row_dots(X, i, mu, v)
        s = S[i]
        for m in range(d):
            j = b * d + m
            slab[c, jb, j] = xmu - X[i, m] * mu[m]
            slab[c, jq, j] = max(xxv - X[i, m] * X[i, m] * v[m], 0.0)
            slab[c, js, j] = s


@njit(**LEAF)
def slab_damp(tauf, nuf, j0, nsite, slab, c, jt, jn, jok, rho, pT, pN, d):
    """Damp a slab's sites (flat j0..j0+nsite-1) towards the new messages in slab[c, jt], [c, jn]
    where slab[c, jok] is 1 (else keep the old message); then add them to the partial sums
    pT[c], pN[c] row after row, as the row functions do. Returns the number skipped."""
    k = 0
    for j in range(nsite):
        ok = slab[c, jok, j] != 0.0
        w = rho if ok else 0.0
        tn = slab[c, jt, j] if ok else 0.0
        nn = slab[c, jn, j] if ok else 0.0
        t = (1.0 - w) * tauf[j0 + j] + w * tn
        n = (1.0 - w) * nuf[j0 + j] + w * nn
        tauf[j0 + j] = t
        nuf[j0 + j] = n
        slab[c, jt, j] = t
        slab[c, jn, j] = n
        k += 0 if ok else 1
    for b in range(nsite // d):
        for m in range(d):
            pT[c, m] += slab[c, jt, b * d + m]
            pN[c, m] += slab[c, jn, b * d + m]
    return k
