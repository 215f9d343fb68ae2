"""Logistic regression factor f(w) = sigmoid(s x.w), fully factorised Gaussian messages.

CEP-1/CEP-2 take the conditional moments of w_m by 1-D Gauss-Hermite quadrature over the
cavity of w_m (nodes and weights are arguments: probabilists' nodes, weights summing to 1);
EP takes the moments of the 2-D projection (eta_1 = x_m w_m, eta_2 = the rest) by a 2-D
product rule, as in the paper's supplement (section 1.2.1). The predictive distribution is the
generic one (``generic.predictive``) with ``likelihoods.logistic.log_predictive``.
"""

import math

from numba import njit

from .._config import LEAF
from ..special import (
    SIGMOID_BOUNDED_LIMIT,
    sigmoid_pair,
    sigmoid_pair_bounded,
)
from .sweep import apply_row_change, damp_site, message_from_moments, save_row, slab_damp, slab_rows

#: when every node has t < _LOG_SPACE_T the sigmoid equals exp(t) to double precision, and the
#: weights are formed relative to the largest node, in log space (no underflow)
_LOG_SPACE_T = -600.0


@njit(**LEAF)
def _max_abs(nodes):
    """max_j |nodes[j]| (an upper bound of every node's offset; attained for symmetric rules)."""
    out = 0.0
    for j in range(nodes.shape[0]):
        out = max(out, abs(nodes[j]))
    return out


@njit(**LEAF)
def node_moments(t0, dt, second, nodes, weights):
    """Moments of the node distribution p_j ~ w_j sigmoid(t_j), t_j = t0 + dt xi_j, exactly.

    Returns (f1, f2, a0, a1, a2, b0, b1, b2): f_k = sum p_j xi_j^k and, when ``second``, the
    normalised first and second derivatives of sum w_j xi_j^k sigmoid(t_j) with respect to t0
    (a_k = sum p_j xi_j^k (1 - g_j), b_k = sum p_j xi_j^k (1 - g_j)(1 - 2 g_j)). When every node
    has t_j < -600 the weights are formed relative to the largest node, in log space.
    """
    n_nodes = nodes.shape[0]
    tmax = t0 + abs(dt) * _max_abs(nodes)
    log_space = tmax < _LOG_SPACE_T
    e0 = 0.0
    f1 = 0.0
    f2 = 0.0
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    for j in range(n_nodes):
        xi = nodes[j]
        t = t0 + dt * xi
        if log_space:
            h = weights[j] * math.exp(t - tmax)
            omg = 1.0
            g = 0.0
        else:
            g, omg = sigmoid_pair(t)
            h = weights[j] * g
        e0 += h
        f1 += h * xi
        f2 += h * xi * xi
        if second:
            ha = h * omg
            hb = ha * (omg - g)
            a0 += ha
            a1 += ha * xi
            a2 += ha * xi * xi
            b0 += hb
            b1 += hb * xi
            b2 += hb * xi * xi
    inv = 1.0 / e0
    return f1 * inv, f2 * inv, a0 * inv, a1 * inv, a2 * inv, b0 * inv, b1 * inv, b2 * inv


@njit(**LEAF)
def cep_message(tc, nc, s, sv, q, second, f1, f2, a0, a1, a2, b0, b1, b2):
    """CEP message from the normalised node moments (see ``node_moments``); sv = sqrt(vc).

    CEP-2 adds 0.5 q d2/db2 of the conditional mean and variance, with d t0 / db = s.
    """
    delta = sv * f1
    a = 1.0 - (f2 - f1 * f1)
    if second:
        a0 *= s
        a1 *= s
        a2 *= s
        m1p = a1 - f1 * a0
        m1pp = b1 - 2.0 * a1 * a0 - f1 * b0 + 2.0 * f1 * a0 * a0
        m2pp = b2 - 2.0 * a2 * a0 - f2 * b0 + 2.0 * f2 * a0 * a0
        var_pp = m2pp - 2.0 * m1p * m1p - 2.0 * f1 * m1pp
        delta += 0.5 * q * sv * m1pp
        a -= 0.5 * q * var_pp
    return message_from_moments(tc, nc, delta, a)


@njit(**LEAF)
def logistic_cep_site(x, s, tc, nc, b, q, second, nodes, weights):
    """CEP message (tau*, nu*, ok) of one site of a logistic factor, by Gauss-Hermite.

    Same arguments as ``probit_cep_site`` plus the quadrature rule ``nodes``, ``weights`` (J,).
    The moments are taken about the cavity mean in units of the cavity standard deviation, so
    the tilted variance needs no cancellation-prone E[w^2] - E[w]^2 in the original scale.
    """
    vc = 1.0 / tc
    sv = math.sqrt(vc)
    f1, f2, a0, a1, a2, b0, b1, b2 = node_moments(s * (x * nc * vc + b), s * x * sv, second, nodes, weights)
    return cep_message(tc, nc, s, sv, q, second, f1, f2, a0, a1, a2, b0, b1, b2)


#: rows of a row function's scratch work[c] that ``node_sums`` and ``cep_row`` use
_T0, _DT, _SV, _E0, _F1, _F2, _A0, _A1, _A2, _B0, _B1, _B2, _G, _O = range(14)


@njit(**LEAF)
def node_sums(second, nodes, weights, work, c):
    """Unnormalised node sums of ``node_moments`` for the d sites of a row at once (sites with a
    node beyond |t| = 40 get the values of the nearest end; callers redo them exactly).

    Site m has nodes t_j = work[c, _T0, m] + work[c, _DT, m] xi_j; into work[c, _E0] goes
    sum_j w_j g_j, into _F1, _F2 the same with xi_j, xi_j^2; when ``second``, into _A0.._B2 the
    sums with the extra factors (1 - g) and (1 - g)(1 - 2g). Rows _G, _O are scratch. Nodes
    outside, sites inside, and each inner loop writes at most three rows: LLVM vectorises a loop
    only if its runtime aliasing checks number at most 8.
    """
    d = work.shape[2]
    for m in range(d):
        work[c, _E0, m] = 0.0
        work[c, _F1, m] = 0.0
        work[c, _F2, m] = 0.0
    if second:
        for m in range(d):
            work[c, _A0, m] = 0.0
            work[c, _A1, m] = 0.0
            work[c, _A2, m] = 0.0
            work[c, _B0, m] = 0.0
            work[c, _B1, m] = 0.0
            work[c, _B2, m] = 0.0
    for j in range(nodes.shape[0]):
        xi = nodes[j]
        wj = weights[j]
        xi2 = xi * xi
        if second:
            for m in range(d):
                g, omg = sigmoid_pair_bounded(work[c, _T0, m] + work[c, _DT, m] * xi)
                work[c, _G, m] = wj * g
                work[c, _O, m] = omg
        else:
            for m in range(d):
                work[c, _G, m] = wj * sigmoid_pair_bounded(work[c, _T0, m] + work[c, _DT, m] * xi)[0]
        for m in range(d):
            h = work[c, _G, m]
            work[c, _E0, m] += h
            work[c, _F1, m] += h * xi
            work[c, _F2, m] += h * xi2
        if second:
            for m in range(d):
                h = work[c, _G, m]
                omg = work[c, _O, m]
                ha = h * omg
                hb = ha * (omg - (1.0 - omg))
                work[c, _A0, m] += ha
                work[c, _A1, m] += ha * xi
                work[c, _A2, m] += ha * xi2
                work[c, _B0, m] += hb
                work[c, _B1, m] += hb * xi
                work[c, _B2, m] += hb * xi2


@njit(**LEAF)
def cep_rows(
    X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, second, nodes, weights, pT, pN, c, work, old
):
    """CEP update of the d sites of rows order[lo..hi-1] (``sweep`` gives the arguments).

    Pass 1 (SIMD): cavities, node offsets; pass 2 (SIMD): node sums (``node_sums``);
    pass 3: exact node moments for the rare sites with a node beyond |t| = 40;
    pass 4 (SIMD): messages.
    """
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        s = S[i]
        if seq:
            save_row(tau, nu, i, old)
        d = X.shape[1]
        xi_max = _max_abs(nodes)
        xmu = 0.0
        xxv = 0.0
        for m in range(d):
            xmu += X[i, m] * mu[m]
            xxv += X[i, m] * X[i, m] * v[m]
        for m in range(d):
            xm = X[i, m]
            vc = 1.0 / (T[m] - tau[i, m])
            sv = math.sqrt(vc)
            work[c, _T0, m] = s * (xm * (N[m] - nu[i, m]) * vc + xmu - xm * mu[m])
            work[c, _DT, m] = s * xm * sv
            work[c, _SV, m] = sv
        node_sums(second, nodes, weights, work, c)
        for m in range(d):
            t0 = work[c, _T0, m]
            dt = work[c, _DT, m]
            if not abs(t0) + abs(dt) * xi_max <= SIGMOID_BOUNDED_LIMIT:  # also catches NaN
                mo = node_moments(t0, dt, second, nodes, weights)
                f1, f2, a0, a1, a2, b0, b1, b2 = mo
                work[c, _E0, m] = 1.0
                work[c, _F1, m], work[c, _F2, m], work[c, _A0, m], work[c, _A1, m] = f1, f2, a0, a1
                work[c, _A2, m], work[c, _B0, m], work[c, _B1, m], work[c, _B2, m] = a2, b0, b1, b2
        for m in range(d):
            inv = 1.0 / work[c, _E0, m]
            xm = X[i, m]
            t_new, n_new, ok = cep_message(
                T[m] - tau[i, m],
                N[m] - nu[i, m],
                s,
                work[c, _SV, m],
                max(xxv - xm * xm * v[m], 0.0),
                second,
                work[c, _F1, m] * inv,
                work[c, _F2, m] * inv,
                work[c, _A0, m] * inv,
                work[c, _A1, m] * inv,
                work[c, _A2, m] * inv,
                work[c, _B0, m] * inv,
                work[c, _B1, m] * inv,
                work[c, _B2, m] * inv,
            )
            if xm == 0.0:  # the factor does not involve w_m: exactly flat (quadrature is not)
                t_new, n_new, ok = 0.0, 0.0, True
            k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k


@njit(**LEAF)
def node_sums_flat(second, nodes, weights, count, t0b, dtb, sums, gb, ob):
    """``node_sums`` over ``count`` sites of 1-D arrays (a slab): site j has the nodes
    t0b[j] + dtb[j] xi; into sums[0..2] go e0, f1, f2 and, with ``second``, into sums[3..8] a0, a1,
    a2, b0, b1, b2 (sums (9, >= count)); gb, ob scratch."""
    e0, f1, f2 = sums[0], sums[1], sums[2]
    for j in range(count):
        e0[j] = 0.0
        f1[j] = 0.0
        f2[j] = 0.0
    if second:
        for r in range(3, 9):
            for j in range(count):
                sums[r, j] = 0.0
    for q in range(nodes.shape[0]):
        xi = nodes[q]
        wq = weights[q]
        xi2 = xi * xi
        if second:
            for j in range(count):
                g, omg = sigmoid_pair_bounded(t0b[j] + dtb[j] * xi)
                gb[j] = wq * g
                ob[j] = omg
        else:
            for j in range(count):
                gb[j] = wq * sigmoid_pair_bounded(t0b[j] + dtb[j] * xi)[0]
        for j in range(count):
            h = gb[j]
            e0[j] += h
            f1[j] += h * xi
            f2[j] += h * xi2
        if second:
            a0, a1, a2, b0, b1, b2 = sums[3], sums[4], sums[5], sums[6], sums[7], sums[8]
            for j in range(count):
                h = gb[j]
                omg = ob[j]
                ha = h * omg
                hb = ha * (omg - (1.0 - omg))
                a0[j] += ha
                a1[j] += ha * xi
                a2[j] += ha * xi2
                b0[j] += hb
                b1[j] += hb * xi
                b2[j] += hb * xi2


#: rows of a slab's scratch used by ``cep_slab``: the node sums (9), then per-site quantities
_LB, _LQ, _LS, _LT0, _LDT, _LSV, _LG, _LO, _LTN, _LNN, _LOK = range(9, 20)


@njit(**LEAF)
def cep_slab(X, S, lo, hi, tau, nu, T, N, mu, v, rho, second, nodes, weights, pT, pN, c, slab, tiles):
    """``cep_rows`` for rows lo..hi-1 of few features in the parallel schedule, a slab of rows at a
    time, every pass over the slab's sites in flat loops (SIMD across rows); the same arithmetic
    per site. slab (n_chunks, >= 20, SLAB_SITES) scratch, tiles the posterior repeated row after
    row (``sweep.tile_posterior``). Returns the number skipped."""
    n, d = X.shape
    Xf = X.reshape(n * d)
    tauf = tau.reshape(n * d)
    nuf = nu.reshape(n * d)
    sums = slab[c, 0:9]
    bb, qb, sb, t0b, dtb, svb = (
        slab[c, _LB],
        slab[c, _LQ],
        slab[c, _LS],
        slab[c, _LT0],
        slab[c, _LDT],
        slab[c, _LSV],
    )
    tnb, nnb, okb = slab[c, _LTN], slab[c, _LNN], slab[c, _LOK]
    Tt, Nt = tiles[0], tiles[1]
    xi_max = _max_abs(nodes)
    rows = max(1, slab.shape[2] // d)
    k = 0
    for r0 in range(lo, hi, rows):
        r1 = min(hi, r0 + rows)
        j0 = r0 * d
        nsite = (r1 - r0) * d
        slab_rows(X, S, r0, r1, mu, v, slab, c, _LB, _LQ, _LS)
        for j in range(nsite):
            x = Xf[j0 + j]
            vc = 1.0 / (Tt[j] - tauf[j0 + j])
            sv = math.sqrt(vc)
            t0b[j] = sb[j] * (x * (Nt[j] - nuf[j0 + j]) * vc + bb[j])
            dtb[j] = sb[j] * x * sv
            svb[j] = sv
        node_sums_flat(second, nodes, weights, nsite, t0b, dtb, sums, slab[c, _LG], slab[c, _LO])
        for j in range(nsite):
            t0 = t0b[j]
            dt = dtb[j]
            if not abs(t0) + abs(dt) * xi_max <= SIGMOID_BOUNDED_LIMIT:  # also catches NaN
                mo = node_moments(t0, dt, second, nodes, weights)
                sums[0, j] = 1.0
                for r in range(8):
                    sums[1 + r, j] = mo[r]
        for j in range(nsite):
            inv = 1.0 / sums[0, j]
            x = Xf[j0 + j]
            t_new, n_new, ok = cep_message(
                Tt[j] - tauf[j0 + j],
                Nt[j] - nuf[j0 + j],
                sb[j],
                svb[j],
                qb[j],
                second,
                sums[1, j] * inv,
                sums[2, j] * inv,
                sums[3, j] * inv,
                sums[4, j] * inv,
                sums[5, j] * inv,
                sums[6, j] * inv,
                sums[7, j] * inv,
                sums[8, j] * inv,
            )
            if x == 0.0:  # the factor does not involve w_m: exactly flat (quadrature is not)
                t_new, n_new, ok = 0.0, 0.0, True
            tnb[j] = t_new
            nnb[j] = n_new
            okb[j] = 1.0 if ok else 0.0
        k += slab_damp(tauf, nuf, j0, nsite, slab, c, _LTN, _LNN, _LOK, rho, pT, pN, d)
    return k


@njit(**LEAF)
def logistic_ep_site(x, s, tc, nc, m_rest, v_rest, nodes, weights):
    """Factorised EP message of one site by the 2-D product Gauss-Hermite rule.

    eta_1 = x w_m ~ N(x mc, x^2 vc) and eta_2 = sum_{l != m} x_l w_l ~ N(m_rest, v_rest) under
    the cavity; the tilted moments of eta_1 give those of w_m.
    """
    vc = 1.0 / tc
    mc = nc * vc
    s1 = abs(x) * math.sqrt(vc)
    s2 = math.sqrt(v_rest)
    t0 = s * (x * mc + m_rest)
    n_nodes = nodes.shape[0]
    tmax = t0 + (s1 + s2) * _max_abs(nodes)
    log_space = tmax < _LOG_SPACE_T
    e0 = 0.0
    f1 = 0.0
    f2 = 0.0
    for i in range(n_nodes):
        xi = nodes[i]
        ti = t0 + s * s1 * xi
        row = 0.0
        for j in range(n_nodes):
            t = ti + s * s2 * nodes[j]
            if log_space:
                g = math.exp(t - tmax)
            else:
                g = sigmoid_pair(t)[0]
            row += weights[j] * g
        h = weights[i] * row
        e0 += h
        f1 += h * xi
        f2 += h * xi * xi
    f1 /= e0
    f2 /= e0
    sign_x = 1.0 if x > 0.0 else -1.0
    return message_from_moments(tc, nc, sign_x * math.sqrt(vc) * f1, 1.0 - (f2 - f1 * f1))


@njit(**LEAF)
def ep_rows(X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho, nodes, weights, pT, pN, c, old):
    """Factorised EP update of rows order[lo..hi-1] (``sweep`` gives the arguments)."""
    k = 0
    for ii in range(lo, hi):
        i = order[ii]
        s = S[i]
        if seq:
            save_row(tau, nu, i, old)
        d = X.shape[1]
        m_eta = 0.0
        v_eta = 0.0
        proper = True
        for m in range(d):
            tc = T[m] - tau[i, m]
            if not tc > 0.0:
                proper = False
            vc = 1.0 / tc
            m_eta += X[i, m] * (N[m] - nu[i, m]) * vc
            v_eta += X[i, m] * X[i, m] * vc
        for m in range(d):
            xm = X[i, m]
            if xm == 0.0:
                k += damp_site(tau, nu, i, m, 0.0, 0.0, True, rho, pT, pN, c)
                continue
            if proper:
                tc = T[m] - tau[i, m]
                nc = N[m] - nu[i, m]
                vc = 1.0 / tc
                m_rest = m_eta - xm * nc * vc
                v_rest = max(v_eta - xm * xm * vc, 0.0)
                t_new, n_new, ok = logistic_ep_site(xm, s, tc, nc, m_rest, v_rest, nodes, weights)
            else:
                t_new, n_new, ok = 0.0, 0.0, False
            k += damp_site(tau, nu, i, m, t_new, n_new, ok, rho, pT, pN, c)
        if seq:
            apply_row_change(tau, nu, i, old, T, N, mu, v)
    return k
