"""Logistic regression factor f(w) = sigmoid(s x.w), fully factorised Gaussian messages.

CEP-1/CEP-2 take the conditional moments of w_m by 1-D Gauss-Hermite quadrature over the
cavity of w_m (nodes and weights are arguments: probabilists' nodes, weights summing to 1);
EP takes the moments of the 2-D projection (eta_1 = x_m w_m, eta_2 = the rest) by a 2-D
product rule, as in the paper's supplement (section 1.2.1).
"""

import math

from numba import njit, prange

from ._config import LEAF, PARALLEL
from ._sweep import damp_site, make_parallel_sweep, make_sequential_sweep, message_from_moments
from .special import LOG_SQRT_2PI, log_sigmoid, sigmoid_pair

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
def logistic_cep_site(x, s, tc, nc, b, q, second, nodes, weights):
    """CEP message (tau*, nu*, ok) of one site of a logistic factor, by Gauss-Hermite.

    Same arguments as ``probit_cep_site`` plus the quadrature rule ``nodes``, ``weights`` (J,).
    The moments are taken about the cavity mean in units of the cavity standard deviation, so
    the tilted variance needs no cancellation-prone E[w^2] - E[w]^2 in the original scale.
    """
    vc = 1.0 / tc
    mc = nc * vc
    sv = math.sqrt(vc)
    t0 = s * (x * mc + b)
    dt = s * x * sv
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
    f1 *= inv
    f2 *= inv
    delta = sv * f1
    a = 1.0 - (f2 - f1 * f1)
    if second and q > 0.0:
        # derivatives w.r.t. b of the normalised moments; dt/db = s, d2g/db2 = g(1-g)(1-2g)
        a0 *= s * inv
        a1 *= s * inv
        a2 *= s * inv
        b0 *= inv
        b1 *= inv
        b2 *= inv
        m1p = a1 - f1 * a0
        m1pp = b1 - 2.0 * a1 * a0 - f1 * b0 + 2.0 * f1 * a0 * a0
        m2pp = b2 - 2.0 * a2 * a0 - f2 * b0 + 2.0 * f2 * a0 * a0
        var_pp = m2pp - 2.0 * m1p * m1p - 2.0 * f1 * m1pp
        delta += 0.5 * q * sv * m1pp
        a -= 0.5 * q * var_pp
    return message_from_moments(tc, nc, delta, a)


@njit(**LEAF)
def _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, second, nodes, weights, acc_t, acc_n):
    """CEP update of the d sites of one row."""
    d = x.shape[0]
    xmu = 0.0
    xxv = 0.0
    for m in range(d):
        xmu += x[m] * mu[m]
        xxv += x[m] * x[m] * v[m]
    k = 0
    for m in range(d):
        xm = x[m]
        if xm == 0.0:
            k += damp_site(tau_r, nu_r, m, 0.0, 0.0, True, rho, acc_t, acc_n)
            continue
        tc = T[m] - tau_r[m]
        nc = N[m] - nu_r[m]
        if tc > 0.0:
            b = xmu - xm * mu[m]
            q = max(xxv - xm * xm * v[m], 0.0)
            t_new, n_new, ok = logistic_cep_site(xm, s, tc, nc, b, q, second, nodes, weights)
        else:
            t_new, n_new, ok = 0.0, 0.0, False
        k += damp_site(tau_r, nu_r, m, t_new, n_new, ok, rho, acc_t, acc_n)
    return k


@njit(**LEAF)
def cep1_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n):
    """Logistic CEP-1 row update (see ``_sweep`` for the signature)."""
    return _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, False, nodes, weights, acc_t, acc_n)


@njit(**LEAF)
def cep2_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n):
    """Logistic CEP-2 row update (see ``_sweep`` for the signature)."""
    return _cep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, True, nodes, weights, acc_t, acc_n)


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
def ep_row(x, s, tau_r, nu_r, T, N, mu, v, rho, nodes, weights, acc_t, acc_n):
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


cep1_parallel = make_parallel_sweep(cep1_row)
cep2_parallel = make_parallel_sweep(cep2_row)
ep_parallel = make_parallel_sweep(ep_row)
cep1_sequential = make_sequential_sweep(cep1_row)
cep2_sequential = make_sequential_sweep(cep2_row)
ep_sequential = make_sequential_sweep(ep_row)


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


@njit(**PARALLEL)
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
