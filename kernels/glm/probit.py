"""Probit regression factor f(w) = Phi(s x.w), fully factorised Gaussian messages.

Leaves: ``probit_cep_site`` (CEP-1 / CEP-2 conditional moments of one site) and the
row functions of CEP (``sweep`` gives their signature; ``schedules`` runs them). EP and the
predictive distribution are the generic ones (``generic``) with the closed forms of
``likelihoods.probit``. DESIGN.md section 3.1 has the formulas.
"""

import math

from numba import njit

from .._config import LEAF
from ..special import (
    MILLS_TABLE_RANGE,
    MILLS_TAYLOR_TERMS,
    inv_mills,
    inv_mills_poly,
    inv_mills_simd,
    inv_mills_tabulated,
    inv_mills_taylor,
    inv_mills_taylor_ok,
)
from .sweep import (
    apply_row_change,
    damp_site,
    message_from_moments,
    row_dots,
    save_row,
    slab_damp,
    slab_rows,
    sum_sq_dev,
)

_MILLS_LO, _MILLS_HI = MILLS_TABLE_RANGE
#: rows of at least this many features take r(z) from ``special.inv_mills_simd`` (a loop of it
#: compiles to SIMD code; measured at d = 400: 7.3 ns a site against 12.6 with the table), shorter
#: ones from the table (at d = 4 the SIMD loop does not pay: 22 ns a site against 17)
SIMD_MILLS_D = 16


@njit(**LEAF)
def probit_tail_derivs(z, r):
    """r''(z) and r'''(z) of the inverse Mills ratio r = phi/Phi, given z and r(z)."""
    r2 = r * ((z + r) * (z + 2.0 * r) - 1.0)
    rr = r * r
    r3 = r * z * (3.0 - z * z) + rr * (4.0 - 7.0 * z * z) - 12.0 * z * rr * r - 6.0 * rr * rr
    return r2, r3


@njit(**LEAF)
def probit_cep_site(x, s, tc, nc, b, q, second):
    """CEP message (tau*, nu*, ok) of one site of a probit factor.

    x: feature x_im (non-zero); s: label sign; tc, nc: cavity precision and
    precision-times-mean of w_m; b = sum_{l != m} x_il E[w_l]; q = sum_{l != m} x_il^2 Var[w_l]
    (used when ``second`` is True: CEP-2 adds 0.5 q d^2/db^2 of the conditional mean and variance).
    """
    vc = 1.0 / tc
    mc = nc * vc
    den2 = 1.0 + x * x * vc
    den = math.sqrt(den2)
    z = s * (x * mc + b) / den
    r = inv_mills(z)
    delta = s * x * vc * r / den
    a = x * x * vc * r * (z + r) / den2
    if second and q > 0.0:
        r2, r3 = probit_tail_derivs(z, r)
        c1 = s / den
        c1sq = c1 * c1
        delta += 0.5 * q * x * vc * c1 * c1sq * r2
        a -= 0.5 * q * x * x * vc * c1sq * c1sq * r3
    return message_from_moments(tc, nc, delta, a)


@njit(**LEAF)
def cep_rows(X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, second, pT, pN, c, work, old):
    """CEP update of the d sites of rows order[lo..hi-1] (``sweep`` gives the arguments); the other
    weights enter through q, not the cavity.

    Pass 1 (SIMD): cavities and z; pass 2 (SIMD): r(z), from a Taylor polynomial about the row's
    z0 = s x.mu when every site's z is close enough for it to be exact to double precision
    (``special.inv_mills_taylor``), else from ``special.inv_mills_simd`` (rows of SIMD_MILLS_D
    sites or more) or from the table and exactly for the few z beyond it; pass 3 (SIMD): messages.
    The polynomial is used for rows of d > MILLS_TAYLOR_TERMS only: it costs one exact r and a
    recurrence per row, which shorter rows do not pay back.
    """
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        s = S[i]
        if seq:
            save_row(tau, nu, i, old)
        d = X.shape[1]
        xmu, xxv = row_dots(X, i, mu, v)
        z0 = s * xmu
        for m in range(d):
            xm = X[i, m]
            tc = T[m] - tau[i, m]
            vc = 1.0 / tc
            idn = math.sqrt(1.0 / (1.0 + xm * xm * vc))
            z = s * (xm * (N[m] - nu[i, m]) * vc + xmu - xm * mu[m]) * idn
            work[c, 0, m] = z
            work[c, 1, m] = vc
            work[c, 2, m] = idn
        # sum of (z - z0)^2: a bound on max |z - z0| that a SIMD loop can reduce
        hh = sum_sq_dev(work[c, 0, :d], z0)
        taylor = False
        if d > MILLS_TAYLOR_TERMS:
            coef = inv_mills_taylor(z0)
            taylor = inv_mills_taylor_ok(coef, math.sqrt(hh))
            if taylor:
                for m in range(d):
                    work[c, 3, m] = inv_mills_poly(coef, work[c, 0, m] - z0)
        if not taylor and d >= SIMD_MILLS_D:
            for m in range(d):
                work[c, 3, m] = inv_mills_simd(work[c, 0, m])
        elif not taylor:
            for m in range(d):
                work[c, 3, m] = inv_mills_tabulated(work[c, 0, m])
            for m in range(d):
                z = work[c, 0, m]
                if not (z >= _MILLS_LO and z <= _MILLS_HI):  # rare: beyond the table (or NaN)
                    work[c, 3, m] = inv_mills(z)
        for m in range(d):
            xm = X[i, m]
            z = work[c, 0, m]
            vc = work[c, 1, m]
            idn = work[c, 2, m]
            r = work[c, 3, m]
            delta = s * xm * vc * r * idn
            a = xm * xm * vc * r * (z + r) * idn * idn
            if second:
                q = max(xxv - xm * xm * v[m], 0.0)
                r2, r3 = probit_tail_derivs(z, r)
                c1 = s * idn
                c1sq = idn * idn
                delta += 0.5 * q * xm * vc * c1 * c1sq * r2
                a -= 0.5 * q * xm * xm * vc * c1sq * c1sq * r3
            tc = T[m] - tau[i, m]
            t_new, n_new, ok = message_from_moments(tc, N[m] - nu[i, m], delta, a)
            k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k


#: rows of a slab's scratch used by ``cep_slab``
_SB, _SQ, _SS, _SZ, _SVC, _SIDN, _SR, _STN, _SNN, _SOK = range(10)


@njit(**LEAF)
def cep_slab(X, S, lo, hi, tau, nu, T, N, mu, v, rho, second, pT, pN, c, slab, tiles):
    """``cep_rows`` for rows lo..hi-1 of few features in the parallel schedule, a slab of rows at a
    time: every pass runs over the slab's sites in one flat loop (SIMD across rows), with r(z)
    from ``special.inv_mills_simd``. slab (n_chunks, SLAB_ROWS, SLAB_SITES) scratch, tiles the
    posterior repeated row after row (``sweep.tile_posterior``). Returns the number skipped."""
    n, d = X.shape
    Xf = X.reshape(n * d)
    tauf = tau.reshape(n * d)
    nuf = nu.reshape(n * d)
    bb, qb, sb, zb, vcb, idnb = (
        slab[c, _SB],
        slab[c, _SQ],
        slab[c, _SS],
        slab[c, _SZ],
        slab[c, _SVC],
        slab[c, _SIDN],
    )
    rb, tnb, nnb, okb = slab[c, _SR], slab[c, _STN], slab[c, _SNN], slab[c, _SOK]
    Tt, Nt = tiles[0], tiles[1]
    rows = max(1, slab.shape[2] // d)
    k = 0
    for r0 in range(lo, hi, rows):
        r1 = min(hi, r0 + rows)
        j0 = r0 * d
        nsite = (r1 - r0) * d
        slab_rows(X, S, r0, r1, mu, v, slab, c, _SB, _SQ, _SS)
        for j in range(nsite):
            x = Xf[j0 + j]
            vc = 1.0 / (Tt[j] - tauf[j0 + j])
            idn = math.sqrt(1.0 / (1.0 + x * x * vc))
            zb[j] = sb[j] * (x * (Nt[j] - nuf[j0 + j]) * vc + bb[j]) * idn
            vcb[j] = vc
            idnb[j] = idn
        for j in range(nsite):
            rb[j] = inv_mills_simd(zb[j])
        for j in range(nsite):
            x = Xf[j0 + j]
            s = sb[j]
            vc = vcb[j]
            idn = idnb[j]
            z = zb[j]
            r = rb[j]
            delta = s * x * vc * r * idn
            a = x * x * vc * r * (z + r) * idn * idn
            if second:
                q = qb[j]
                r2, r3 = probit_tail_derivs(z, r)
                c1 = s * idn
                c1sq = idn * idn
                delta += 0.5 * q * x * vc * c1 * c1sq * r2
                a -= 0.5 * q * x * x * vc * c1sq * c1sq * r3
            tc = Tt[j] - tauf[j0 + j]
            t_new, n_new, ok = message_from_moments(tc, Nt[j] - nuf[j0 + j], delta, a)
            tnb[j] = t_new
            nnb[j] = n_new
            okb[j] = 1.0 if ok else 0.0
        k += slab_damp(tauf, nuf, j0, nsite, slab, c, _STN, _SNN, _SOK, rho, pT, pN, d)
    return k
