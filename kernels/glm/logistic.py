"""Logistic regression factor f(w) = sigmoid(s x.w), fully factorised Gaussian messages.

CEP-1/CEP-2 take the conditional moments of w_m by 1-D Gauss-Hermite quadrature over the
cavity of w_m (nodes and weights are arguments: probabilists' nodes, weights summing to 1);
EP takes the moments of the 2-D projection (eta_1 = x_m w_m, eta_2 = the rest) by a 2-D
product rule, as in the paper's supplement (section 1.2.1).
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..special import (
    LOG_SQRT_2PI,
    SIGMOID_BOUNDED_LIMIT,
    log_sigmoid,
    sigmoid_pair,
    sigmoid_pair_bounded,
)
from .sweep import damp_site, message_from_moments

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


@njit(**LEAF)
def node_sums(t0b, dtb, second, nodes, weights, e0, f1, f2, a0, a1, a2, b0, b1, b2, gb, ob):
    """Unnormalised node sums of ``node_moments`` for d sites at once (sites with a node beyond
    |t| = 40 get the values of the nearest end; callers redo them exactly).

    Site m has nodes t_j = t0b[m] + dtb[m] xi_j; e0 = sum_j w_j g_j, f1, f2 the same with xi_j,
    xi_j^2; when ``second``, a_k and b_k with the extra factors (1 - g) and (1 - g)(1 - 2g).
    gb, ob (d,) are scratch. Nodes outside, sites inside, and each inner loop writes at most
    three arrays: LLVM vectorises a loop only if its runtime aliasing checks (one per pair of
    a written array and another array) number at most 8.
    """
    d = t0b.shape[0]
    for m in range(d):
        e0[m] = 0.0
        f1[m] = 0.0
        f2[m] = 0.0
    if second:
        for m in range(d):
            a0[m] = 0.0
            a1[m] = 0.0
            a2[m] = 0.0
            b0[m] = 0.0
            b1[m] = 0.0
            b2[m] = 0.0
    for j in range(nodes.shape[0]):
        xi = nodes[j]
        wj = weights[j]
        xi2 = xi * xi
        if second:
            for m in range(d):
                g, omg = sigmoid_pair_bounded(t0b[m] + dtb[m] * xi)
                gb[m] = wj * g
                ob[m] = omg
        else:
            for m in range(d):
                gb[m] = wj * sigmoid_pair_bounded(t0b[m] + dtb[m] * xi)[0]
        for m in range(d):
            h = gb[m]
            e0[m] += h
            f1[m] += h * xi
            f2[m] += h * xi2
        if second:
            for m in range(d):
                h = gb[m]
                omg = ob[m]
                ha = h * omg
                hb = ha * (omg - (1.0 - omg))
                a0[m] += ha
                a1[m] += ha * xi
                a2[m] += ha * xi2
                b0[m] += hb
                b1[m] += hb * xi
                b2[m] += hb * xi2


@njit(**LEAF)
def _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, second, nodes, weights, acc_t, acc_n, work):
    """CEP update of the d sites of one row.

    Pass 1 (SIMD): cavities, node offsets; pass 2 (SIMD): node sums (``node_sums``);
    pass 3: exact node moments for the rare sites with a node beyond |t| = 40;
    pass 4 (SIMD): messages.
    """
    d = x.shape[0]
    t0b, dtb, svb, e0, f1, f2 = work[0], work[1], work[2], work[3], work[4], work[5]
    a0, a1, a2, b0, b1, b2 = work[6], work[7], work[8], work[9], work[10], work[11]
    xi_max = _max_abs(nodes)
    xmu = 0.0
    xxv = 0.0
    for m in range(d):
        xmu += x[m] * mu[m]
        xxv += x[m] * x[m] * v[m]
    for m in range(d):
        xm = x[m]
        vc = 1.0 / (T[m] - tau_r[m])
        sv = math.sqrt(vc)
        t0b[m] = s * (xm * (N[m] - nu_r[m]) * vc + xmu - xm * mu[m])
        dtb[m] = s * xm * sv
        svb[m] = sv
    node_sums(t0b, dtb, second, nodes, weights, e0, f1, f2, a0, a1, a2, b0, b1, b2, work[12], work[13])
    for m in range(d):
        if not abs(t0b[m]) + abs(dtb[m]) * xi_max <= SIGMOID_BOUNDED_LIMIT:  # also catches NaN
            mo = node_moments(t0b[m], dtb[m], second, nodes, weights)
            e0[m] = 1.0
            f1[m], f2[m], a0[m], a1[m], a2[m], b0[m], b1[m], b2[m] = mo
    k = 0
    for m in range(d):
        inv = 1.0 / e0[m]
        t_new, n_new, ok = cep_message(
            T[m] - tau_r[m],
            N[m] - nu_r[m],
            s,
            svb[m],
            max(xxv - x[m] * x[m] * v[m], 0.0),
            second,
            f1[m] * inv,
            f2[m] * inv,
            a0[m] * inv,
            a1[m] * inv,
            a2[m] * inv,
            b0[m] * inv,
            b1[m] * inv,
            b2[m] * inv,
        )
        if x[m] == 0.0:  # the factor does not involve w_m: exactly flat (quadrature is not)
            t_new, n_new, ok = 0.0, 0.0, True
        k += damp_site(tau_r, nu_r, m, t_new, n_new, ok, rho, acc_t, acc_n)
    return k


@njit(**LEAF)
def cep1_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work):
    """Logistic CEP-1 row update (see ``_sweep`` for the signature)."""
    return _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, False, nodes, weights, acc_t, acc_n, work)


@njit(**LEAF)
def cep2_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work):
    """Logistic CEP-2 row update (see ``_sweep`` for the signature)."""
    return _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, True, nodes, weights, acc_t, acc_n, work)


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
def ep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n, work):
    """Factorised EP update of one row (see ``_sweep`` for the signature)."""
    d = x.shape[0]
    m_eta = 0.0
    v_eta = 0.0
    proper = True
    for m in range(d):
        tc = T[m] - tau_r[m]
        if not tc > 0.0:
            proper = False
        vc = 1.0 / tc
        m_eta += x[m] * (N[m] - nu_r[m]) * vc
        v_eta += x[m] * x[m] * vc
    k = 0
    for m in range(d):
        xm = x[m]
        if xm == 0.0:
            k += damp_site(tau_r, nu_r, m, 0.0, 0.0, True, rho, acc_t, acc_n)
            continue
        if proper:
            tc = T[m] - tau_r[m]
            nc = N[m] - nu_r[m]
            vc = 1.0 / tc
            m_rest = m_eta - xm * nc * vc
            v_rest = max(v_eta - xm * xm * vc, 0.0)
            t_new, n_new, ok = logistic_ep_site(xm, s, tc, nc, m_rest, v_rest, nodes, weights)
        else:
            t_new, n_new, ok = 0.0, 0.0, False
        k += damp_site(tau_r, nu_r, m, t_new, n_new, ok, rho, acc_t, acc_n)
    return k


@njit(**LEAF)
def log_predictive_1d(mean, var, s):
    """log E[sigmoid(s a)] for a ~ N(mean, var), accurate for any variance.

    Trapezoid rule on the Gaussian-weighted log integrand, in log space: with spacing
    h <= 1/2 its error is about exp(-2 pi^2 / h) < 1e-17 (the sigmoid's poles are at +-i pi),
    and the range mean +- (10 sd + var) covers the mass even where the sigmoid shifts it by var.
    """
    if var <= 1e-24:
        return log_sigmoid(s * mean)
    sd = math.sqrt(var)
    h = min(0.5, 0.25 * sd)
    half = 10.0 * sd + min(var, 1e4)
    k = min(int(2.0 * half / h) + 1, 400_001)
    h = 2.0 * half / (k - 1)
    lo = mean - half
    lmax = -math.inf
    acc = 0.0
    for j in range(k):
        a = lo + j * h
        u = (a - mean) / sd
        lt = -0.5 * u * u + log_sigmoid(s * a)
        if lt > lmax:
            acc = acc * math.exp(lmax - lt) + 1.0
            lmax = lt
        else:
            acc += math.exp(lt - lmax)
    return lmax + math.log(acc * h / sd) - LOG_SQRT_2PI


@njit(**PARALLEL_CACHED)
def predictive(X, mu, v, out_p, out_logp, y_sign):
    """P(y=1 | x) = E[sigmoid(a)], a = x.w ~ N(x.mu, sum x^2 v), per row.

    X (n, d); mu, v (d,); out_p, out_logp (n,); y_sign (n,) of +-1 (ignored if of length 0).
    """
    n, d = X.shape
    with_y = y_sign.shape[0] == n
    for i in prange(n):
        mean = 0.0
        var = 0.0
        for m in range(d):
            mean += X[i, m] * mu[m]
            var += X[i, m] * X[i, m] * v[m]
        out_p[i] = math.exp(log_predictive_1d(mean, var, 1.0))
        if with_y:
            out_logp[i] = log_predictive_1d(mean, var, y_sign[i])
