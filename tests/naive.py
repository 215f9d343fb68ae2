"""Slow textbook versions of every fast kernel, written straight from the paper's formulas.

Plain Python and NumPy/SciPy, one site at a time, in the original scale (no rescaling tricks):
the fast kernels are compared against these on small random data.
"""

import math

import numpy as np
from scipy import optimize
from scipy.special import expit, log_expit, log_ndtr

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def mills(z):
    """phi(z)/Phi(z) through scipy's log_ndtr."""
    return math.exp(-0.5 * z * z - LOG_SQRT_2PI - float(log_ndtr(z)))


# ---------------------------------------------------------------- probit
def probit_conditional_moments(x, s, mc, vc, b):
    """Mean and variance of N(w | mc, vc) Phi(s (x w + b)) (supplement 1.3.2)."""
    den = math.sqrt(1 + x * x * vc)
    z = s * (x * mc + b) / den
    r = mills(z)
    mean = mc + s * x * vc * r / den
    var = vc - x * x * vc * vc * r * (z + r) / den**2
    return mean, var, z, r


def probit_cep_site(x, s, tc, nc, b, q, second):
    """CEP-1/CEP-2 message (tau*, nu*) of one probit site, with the supplement's T1 and T2."""
    vc, mc = 1 / tc, nc / tc
    mean, var, z, r = probit_conditional_moments(x, s, mc, vc, b)
    if second:
        c1 = s / math.sqrt(1 + x * x * vc)
        t1 = (z * z - 1) * r + 3 * z * r**2 + 2 * r**3
        t2 = z * (3 - z * z) * r + (4 - 7 * z * z) * r**2 - 12 * z * r**3 - 6 * r**4
        mean += 0.5 * q * t1 * c1**3 * vc * x
        var += 0.5 * q * t2 * c1**4 * vc**2 * x * x
    return 1 / var - tc, mean / var - nc


def probit_ep_row(x, s, tc, nc):
    """Factorised EP messages (tau*, nu*) of one probit row from its cavities tc, nc (d,)."""
    vc, mc = 1 / tc, nc / tc
    m_eta = float(x @ mc)
    v_eta = float(x * x @ vc)
    den = math.sqrt(1 + v_eta)
    z = s * m_eta / den
    r = mills(z)
    mean = mc + s * x * vc * r / den
    var = vc - x * x * vc * vc * r * (z + r) / (1 + v_eta)
    return 1 / var - tc, mean / var - nc


# ---------------------------------------------------------------- logistic
def logistic_conditional_moments(x, s, mc, vc, b, nodes, weights):
    """E0..E2 quadrature of N(w | mc, vc) sigmoid(s (x w + b)) and their b-derivatives."""
    gam = mc + math.sqrt(vc) * nodes
    g = expit(s * (x * gam + b))
    g1 = s * g * (1 - g)
    g2 = g * (1 - g) * (1 - 2 * g)
    E = [np.sum(weights * gam**k * g) for k in range(3)]
    E1d = [np.sum(weights * gam**k * g1) for k in range(3)]
    E2d = [np.sum(weights * gam**k * g2) for k in range(3)]
    return E, E1d, E2d


def _ratio_dd(num, num1, num2, den, den1, den2):
    """Second derivative of num/den from the values and derivatives of both."""
    return num2 / den - 2 * num1 * den1 / den**2 - num * den2 / den**2 + 2 * num * den1**2 / den**3


def logistic_cep_site(x, s, tc, nc, b, q, second, nodes, weights):
    """CEP-1/CEP-2 message of one logistic site (section 4.2 and supplement 1.2.2)."""
    vc, mc = 1 / tc, nc / tc
    E, Ed, Edd = logistic_conditional_moments(x, s, mc, vc, b, nodes, weights)
    mean = E[1] / E[0]
    var = E[2] / E[0] - mean**2
    if second:
        mean1 = (Ed[1] * E[0] - E[1] * Ed[0]) / E[0] ** 2
        mean2 = _ratio_dd(E[1], Ed[1], Edd[1], E[0], Ed[0], Edd[0])
        sq2 = _ratio_dd(E[2], Ed[2], Edd[2], E[0], Ed[0], Edd[0])
        var2 = sq2 - 2 * mean1**2 - 2 * mean * mean2
        mean += 0.5 * q * mean2
        var += 0.5 * q * var2
    return 1 / var - tc, mean / var - nc


def logistic_ep_row(x, s, tc, nc, nodes, weights):
    """Factorised EP messages of one logistic row by the supplement's 2-D Gauss-Hermite rule.

    For site m the cavity is projected to eta = (x_m w_m, sum_{l != m} x_l w_l); the tilted
    mean and covariance of eta come from the product rule, the cavity is divided out in eta
    space and the (1, 1) entry is projected back (supplement 1.2.1).
    """
    vc, mc = 1 / tc, nc / tc
    d = x.size
    tau = np.zeros(d)
    nu = np.zeros(d)
    for m in range(d):
        rest = np.arange(d) != m
        M = np.array([x[m] * mc[m], x[rest] @ mc[rest]])
        Vd = np.array([x[m] ** 2 * vc[m], x[rest] ** 2 @ vc[rest]])
        e1 = M[0] + np.sqrt(Vd[0]) * nodes[:, None] + 0 * nodes[None, :]
        e2 = M[1] + np.sqrt(Vd[1]) * nodes[None, :] + 0 * nodes[:, None]
        W = weights[:, None] * weights[None, :]
        g = expit(s * (e1 + e2))
        E0 = np.sum(W * g)
        m1 = np.sum(W * g * e1) / E0
        v1 = np.sum(W * g * e1 * e1) / E0 - m1**2
        # message on eta_1 (diagonal cavity, so the (1, 1) entries decouple)
        prec = 1 / v1 - 1 / Vd[0]
        pm = m1 / v1 - M[0] / Vd[0]
        tau[m] = prec * x[m] ** 2
        nu[m] = pm * x[m]
    return tau, nu


# ---------------------------------------------------------------- baselines: LP and IS
def _log_lik(model, a):
    """h(a), h'(a), h''(a) of h = log Phi (probit) or log sigma (logistic)."""
    if model == "probit":
        r = mills(a)
        return float(log_ndtr(a)), r, -r * (a + r)
    p = float(expit(a))
    return float(log_expit(a)), 1 - p, -p * (1 - p)


def lp_row(model, x, s, tc, nc):
    """Laplace propagation messages of one row: the mode of the d-dimensional tilted density
    N(w | mc, diag(1/tc)) f(s x.w) found by a general optimiser (trust-region Newton with the
    exact gradient and Hessian, then plain Newton steps), and the diagonal of the negative
    Hessian there."""
    mc = nc / tc

    def neg_log(w):
        return 0.5 * np.sum(tc * (w - mc) ** 2) - _log_lik(model, s * x @ w)[0]

    def grad(w):
        return tc * (w - mc) - s * _log_lik(model, s * x @ w)[1] * x

    def hess(w):
        return np.diag(tc) - _log_lik(model, s * x @ w)[2] * np.outer(x, x)

    res = optimize.minimize(neg_log, mc, jac=grad, hess=hess, method="trust-exact", options={"gtol": 1e-13})
    w = res.x
    for _ in range(5):  # polish: full Newton steps from the optimiser's answer
        w = w - np.linalg.solve(hess(w), grad(w))
    h2 = _log_lik(model, s * x @ w)[2]
    prec = tc - h2 * x * x
    return prec - tc, prec * w - nc


_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def row_key(key, i):
    """The per-row key of the importance sampler's counter-based generator (splitmix64)."""
    return _mix64(key ^ _mix64((i + _GOLDEN) & _M64))


def standard_normals(key, n_samples, d):
    """(n_samples, d) Box-Muller normals of the splitmix64 stream of ``key``, in kernel order."""
    per = 2 * ((d + 1) // 2)
    state = key
    u = np.empty(n_samples * per)
    for j in range(u.size):
        state = (state + _GOLDEN) & _M64
        u[j] = ((_mix64(state) >> 11) + 1) * 2.0**-53
    u = u.reshape(n_samples, per // 2, 2)
    rad = np.sqrt(-2 * np.log(u[..., 0]))
    z = np.stack([rad * np.cos(2 * np.pi * u[..., 1]), rad * np.sin(2 * np.pi * u[..., 1])], axis=-1)
    return z.reshape(n_samples, per)[:, :d]


def is_row(model, x, s, tc, nc, eps):
    """Importance-sampling EP messages of one row from the cavity draws mc + eps / sqrt(tc)
    (eps (S, d)), weighted by f(s x.w); x_m = 0 gives the exact flat message."""
    mc, sd = nc / tc, 1 / np.sqrt(tc)
    w = mc + sd * eps
    a = s * (w @ x)
    f = np.exp(np.array([_log_lik(model, t)[0] for t in a]))
    f /= f.sum()
    mean = f @ w
    var = f @ (w - mean) ** 2
    t_new, n_new = 1 / var - tc, mean / var - nc
    t_new = np.where(var > 0, t_new, np.nan)
    return np.where(x == 0, 0.0, t_new), np.where(x == 0, 0.0, n_new)


def valid(method, new_t, new_n):
    """Messages that are applied: finite, with a positive precision; IS keeps negative ones
    (Monte-Carlo noise around weak sites; dropping them biases the posterior precision up)."""
    ok = np.isfinite(new_t) & np.isfinite(new_n)
    return ok if method == "is" else ok & (new_t > 0)


# ---------------------------------------------------------------- sweeps
def _site_messages(model, method, X, s, tau, nu, T, N, nodes, weights, n_samples=0, keys=None):
    """All new messages from one posterior (T, N); NaN where a message is invalid. Importance
    sampling uses ``n_samples`` draws from the generator of row i's key ``keys[i]``."""
    n, d = X.shape
    mu, v = N / T, 1 / T
    new_t = np.full((n, d), np.nan)
    new_n = np.full((n, d), np.nan)
    for i in range(n):
        tc = T - tau[i]
        nc = N - nu[i]
        if method == "lp":
            new_t[i], new_n[i] = lp_row(model, X[i], s[i], tc, nc)
            continue
        if method == "is":
            eps = standard_normals(keys[i], n_samples, d)
            new_t[i], new_n[i] = is_row(model, X[i], s[i], tc, nc, eps)
            continue
        if method == "ep":
            if model == "probit":
                t, nn = probit_ep_row(X[i], s[i], tc, nc)
            else:
                t, nn = logistic_ep_row(X[i], s[i], tc, nc, nodes, weights)
            new_t[i], new_n[i] = t, nn
            continue
        for m in range(d):
            b = X[i] @ mu - X[i, m] * mu[m]
            q = (X[i] ** 2) @ v - X[i, m] ** 2 * v[m]
            if model == "probit":
                t, nn = probit_cep_site(X[i, m], s[i], tc[m], nc[m], b, q, method == "cep2")
            else:
                t, nn = logistic_cep_site(X[i, m], s[i], tc[m], nc[m], b, q, method == "cep2", nodes, weights)
            new_t[i, m], new_n[i, m] = t, nn
    return new_t, new_n


def parallel_sweep(model, method, X, s, tau, nu, prior_T, rho, nodes, weights, n_samples=0, key=0):
    """One damped parallel sweep: new messages from the current posterior, damped, summed."""
    T = prior_T + tau.sum(0)
    N = nu.sum(0)
    keys = [row_key(key, i) for i in range(X.shape[0])]
    new_t, new_n = _site_messages(model, method, X, s, tau, nu, T, N, nodes, weights, n_samples, keys)
    ok = valid(method, new_t, new_n)
    tau = np.where(ok, (1 - rho) * tau + rho * new_t, tau)
    nu = np.where(ok, (1 - rho) * nu + rho * new_n, nu)
    return tau, nu, int((~ok).sum())


def sequential_sweep(model, method, X, s, tau, nu, prior_T, rho, nodes, weights, n_samples=0, key=0):
    """One sequential sweep: rows in order, the posterior recomputed after each row."""
    tau = tau.copy()
    nu = nu.copy()
    skipped = 0
    for i in range(X.shape[0]):
        T = prior_T + tau.sum(0)
        N = nu.sum(0)
        new_t, new_n = _site_messages(
            model, method, X[i : i + 1], s[i : i + 1], tau[i : i + 1], nu[i : i + 1], T, N, nodes, weights,
            n_samples, [row_key(key, i)],
        )  # fmt: skip
        ok = valid(method, new_t[0], new_n[0])
        tau[i] = np.where(ok, (1 - rho) * tau[i] + rho * new_t[0], tau[i])
        nu[i] = np.where(ok, (1 - rho) * nu[i] + rho * new_n[0], nu[i])
        skipped += int((~ok).sum())
    return tau, nu, skipped


# ---------------------------------------------------------------- prediction
def probit_predictive(X, mu, v):
    """P(y = 1 | x) = Phi(x.mu / sqrt(1 + sum x^2 v))."""
    return np.exp(log_ndtr(X @ mu / np.sqrt(1 + X**2 @ v)))


def logistic_predictive(X, mu, v, n_quad=200):
    """E[sigmoid(a)], a ~ N(x.mu, sum x^2 v), by a fine trapezoid rule on +-10 sd."""
    m = X @ mu
    sd = np.sqrt(X**2 @ v)
    t = np.linspace(-10, 10, 20 * n_quad + 1)
    w = np.exp(-0.5 * t * t)
    w /= w.sum()
    return np.array([np.sum(w * expit(mi + si * t)) for mi, si in zip(m, sd, strict=True)])


# ---------------------------------------------------------------- CP decomposition (dense)
def cp_other_moments(e_coords, k, means, covs):
    """Ez, Ezz of the Hadamard product of the other modes' embeddings (full covariances)."""
    R = means[0].shape[1]
    Ez = np.ones(R)
    Ezz = np.ones((R, R))
    for kk, j in enumerate(e_coords):
        if kk == k:
            continue
        m = means[kk][j]
        Ez = Ez * m
        Ezz = Ezz * (covs[kk][j] + np.outer(m, m))
    return Ez, Ezz


def cp_gaussian_message(y, Ez, Ezz, etau):
    """Supplement 1.1.1: Lam* = E[tau] E[z z^T], eta* = y E[tau] E[z]."""
    return etau * Ezz, y * etau * Ez


def cp_probit_message(Lc, ec, s, Ez, Ezz):
    """Supplement 1.1.2 / DESIGN 3.2: textbook form with explicit inverses; None when the
    tilted covariance is not positive definite or the message precision not semi-definite."""
    Sc = np.linalg.inv(Lc)
    mc = Sc @ ec
    c = 1 + np.trace(Sc @ Ezz)
    u = s * Ez @ mc / math.sqrt(c)
    r = mills(u)
    g = s * r * Ez / math.sqrt(c)
    A = np.outer(g, g) + (r * u / c) * Ezz
    mean = mc + Sc @ g
    cov = Sc - Sc @ A @ Sc
    P = np.linalg.inv(cov)
    Lam = P - Lc
    eta = P @ mean - ec
    Lam = 0.5 * (Lam + Lam.T)
    ev = np.linalg.eigvalsh(Lam)
    # semi-definite up to 1e-9 of the message's scale plus the rounding error of inv(cov) - Lc
    tol = 1e-9 * np.max(np.abs(np.diag(Lam))) + 1e-11 * np.max(np.abs(np.diag(Lc)))
    if np.min(np.linalg.eigvalsh(cov)) <= 0 or ev.min() < -tol:
        return None
    return Lam, eta


def cp_expected_sq_error(e_coords, y, means, covs):
    """E_q[(y - f)^2], f = 1.(u^1 o ... o u^K), from the factorised Gaussian posterior."""
    R = means[0].shape[1]
    mu = np.prod([means[k][j] for k, j in enumerate(e_coords)], axis=0).sum()
    second = np.ones((R, R))
    for k, j in enumerate(e_coords):
        m = means[k][j]
        second = second * (covs[k][j] + np.outer(m, m))
    return y * y - 2 * y * mu + second.sum()


def cp_parallel_sweep(model, coords, y, shape, Lam, eta, alpha, beta, means, covs, P_Lam, P_eta, etau, rho):
    """One damped parallel CEP-1 sweep (full covariances), all messages from one posterior.

    Lam (n, K, R, R), eta (n, K, R) site messages; P_Lam/P_eta lists of (d_k, R, R)/(d_k, R)
    posterior natural parameters. Returns new (Lam, eta, alpha, beta, skipped).
    """
    n, K = coords.shape
    Lam, eta, alpha, beta = Lam.copy(), eta.copy(), alpha.copy(), beta.copy()
    skipped = 0
    for e in range(n):
        for k in range(K):
            Ez, Ezz = cp_other_moments(coords[e], k, means, covs)
            if model == "cp_gaussian":
                new = cp_gaussian_message(y[e], Ez, Ezz, etau)
            else:
                j = coords[e, k]
                new = cp_probit_message(P_Lam[k][j] - Lam[e, k], P_eta[k][j] - eta[e, k], y[e], Ez, Ezz)
                if new is None:  # first-order fallback: E[z z^T] -> E[z] E[z]^T
                    Lc_, ec_ = P_Lam[k][j] - Lam[e, k], P_eta[k][j] - eta[e, k]
                    new = cp_probit_message(Lc_, ec_, y[e], Ez, np.outer(Ez, Ez))
            if new is None:
                skipped += 1
                continue
            Lam[e, k] = (1 - rho) * Lam[e, k] + rho * new[0]
            eta[e, k] = (1 - rho) * eta[e, k] + rho * new[1]
        if model == "cp_gaussian":
            alpha[e] = (1 - rho) * alpha[e] + rho * 0.5
            beta[e] = (1 - rho) * beta[e] + rho * 0.5 * cp_expected_sq_error(coords[e], y[e], means, covs)
    return Lam, eta, alpha, beta, skipped


def cp_posterior(coords, shape, Lam, eta, prior_var):
    """Per mode: posterior precision = I / prior_var + sum of messages; means and covariances."""
    n, K = coords.shape
    R = eta.shape[2]
    P_Lam = [np.repeat(np.eye(R)[None] / prior_var, d, axis=0) for d in shape]
    P_eta = [np.zeros((d, R)) for d in shape]
    for e in range(n):
        for k in range(K):
            P_Lam[k][coords[e, k]] += Lam[e, k]
            P_eta[k][coords[e, k]] += eta[e, k]
    covs = [np.linalg.inv(P) for P in P_Lam]
    means = [np.einsum("jab,jb->ja", C, h) for C, h in zip(covs, P_eta, strict=True)]
    return P_Lam, P_eta, means, covs
