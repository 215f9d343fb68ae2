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
    (eps (S, d)), weighted by f(s x.w). f depends on w through a = x.w only, so the draws give
    the tilted mean and variance of a (weighted variance Bessel-corrected for reliability
    weights; the draws' own sample mean and unbiased variance of a serve as control variates
    with known values mu_a and s2_a) and each weight's tilted moments follow by Gaussian
    conditioning on a: E[w_m] = mc_m + x_m vc_m (E[a] - mu_a) / s2_a,
    Var[w_m] = vc_m - x_m^2 vc_m^2 (s2_a - Var[a]) / s2_a^2. x_m = 0 gives the exact flat message."""
    mc, vc = nc / tc, 1 / tc
    mu_a, s2_a = x @ mc, (x * x) @ vc
    a = mu_a + eps @ (x * np.sqrt(vc))
    f = np.exp(np.array([_log_lik(model, s * t)[0] for t in a]))
    f /= f.sum()
    mean_f = f @ a
    var_f = f @ (a - mean_f) ** 2 / (1 - f @ f)
    mean_a = mean_f - (a.mean() - mu_a)
    var_a = var_f - a.var(ddof=1) + s2_a
    mean = mc + x * vc * (mean_a - mu_a) / s2_a
    var = vc - (x * vc) ** 2 * (s2_a - var_a) / s2_a**2
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


def restore_improper(prior_T, tau, nu, old_t, old_n):
    """The parallel schedule's guard: weights m whose posterior precision prior_T_m + sum_i tau_im
    or some cavity precision (that minus tau_im) is not positive get their old messages back.
    Returns (tau, nu, number of changed messages undone per weight)."""
    T = prior_T + tau.sum(0)
    bad = ~((T > 0) & np.all(T[None, :] - tau > 0, axis=0))
    undone = np.where(bad, ((tau != old_t) | (nu != old_n)).sum(0), 0)
    return np.where(bad, old_t, tau), np.where(bad, old_n, nu), undone


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


def cp_probit_message(Lc, ec, s, Ez, Ezz, rank1=False):
    """Supplement 1.1.2 / DESIGN 3.2: textbook form with explicit inverses; None when the
    tilted covariance is not positive definite or the message precision not semi-definite.
    ``rank1``: the curvature term (r u / c) z z^T takes E[z] E[z]^T (c keeps tr(Sc Ezz))."""
    Sc = np.linalg.inv(Lc)
    mc = Sc @ ec
    c = 1 + np.trace(Sc @ Ezz)
    u = s * Ez @ mc / math.sqrt(c)
    r = mills(u)
    g = s * r * Ez / math.sqrt(c)
    A = np.outer(g, g) + (r * u / c) * (np.outer(Ez, Ez) if rank1 else Ezz)
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


def cp_parallel_sweep(
    model, coords, y, shape, Lam, eta, alpha, beta, means, covs, P_Lam, P_eta, etau, rho, cavity=False
):
    """One damped parallel CEP-1 sweep (full covariances), all messages from one posterior.

    Lam (n, K, R, R), eta (n, K, R) site messages; P_Lam/P_eta lists of (d_k, R, R)/(d_k, R)
    posterior natural parameters. model "cp_probit_rank1": cp_probit with the rank-one
    curvature. With ``cavity`` the embedding messages take the other modes' moments under the
    entry's cavity q(u) / (its message), inverted explicitly (the noise messages keep the
    posterior's). Returns new (Lam, eta, alpha, beta, skipped).
    """
    n, K = coords.shape
    Lam, eta, alpha, beta = Lam.copy(), eta.copy(), alpha.copy(), beta.copy()
    skipped = 0
    for e in range(n):
        e_coords, mom = coords[e], (means, covs)
        if cavity:
            Sc = [np.linalg.inv(P_Lam[k][coords[e, k]] - Lam[e, k]) for k in range(K)]
            mc = [Sc[k] @ (P_eta[k][coords[e, k]] - eta[e, k]) for k in range(K)]
            e_coords, mom = np.zeros(K, dtype=int), ([m[None] for m in mc], [C[None] for C in Sc])
        for k in range(K):
            Ez, Ezz = cp_other_moments(e_coords, k, *mom)
            if model == "cp_gaussian":
                new = cp_gaussian_message(y[e], Ez, Ezz, etau)
            else:
                j = coords[e, k]
                new = cp_probit_message(
                    P_Lam[k][j] - Lam[e, k],
                    P_eta[k][j] - eta[e, k],
                    y[e],
                    Ez,
                    Ezz,
                    model == "cp_probit_rank1",
                )
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


def cp_posterior(coords, shape, Lam, eta, prior_var, prior=None):
    """Per mode: posterior precision = I / prior_var + sum of messages; means and covariances.
    ``prior``: per-mode lists (prior_Lam (d_k, R, R), prior_eta (d_k, R)) in place of prior_var."""
    n, K = coords.shape
    R = eta.shape[2]
    if prior is None:
        P_Lam = [np.repeat(np.eye(R)[None] / prior_var, d, axis=0) for d in shape]
        P_eta = [np.zeros((d, R)) for d in shape]
    else:
        P_Lam, P_eta = [a.copy() for a in prior[0]], [a.copy() for a in prior[1]]
    for e in range(n):
        for k in range(K):
            P_Lam[k][coords[e, k]] += Lam[e, k]
            P_eta[k][coords[e, k]] += eta[e, k]
    covs = [np.linalg.inv(P) for P in P_Lam]
    means = [np.einsum("jab,jb->ja", C, h) for C, h in zip(covs, P_eta, strict=True)]
    return P_Lam, P_eta, means, covs


# ---------------------------------------------------------------- CP decomposition: hierarchical priors
def cp_ard_update(means, covs, a0, b0):
    """VMP update of the ARD precisions lambda_r ~ Gamma(a0, b0), shared by every mode, with
    u^k_j ~ N(0, diag(lambda)^-1): shape a0 + (number of embeddings) / 2 and rates
    b0 + sum over every embedding of E[u_r^2] / 2 (Bishop, PRML 10.1 with Gamma conjugacy)."""
    R = means[0].shape[1]
    a, b = a0, np.full(R, b0)
    for m, S in zip(means, covs, strict=True):
        for j in range(m.shape[0]):
            a += 0.5
            for r in range(R):
                b[r] += 0.5 * (S[j][r, r] + m[j][r] ** 2)
    return a, b


def cp_normal_wishart_update(means_k, covs_k, beta0, nu0, W0):
    """VMP update of one mode's N(mu | 0, (beta0 Lambda)^-1) Wishart(Lambda | W0, nu0) from the
    embeddings' posteriors N(m_j, S_j) (PRML 10.60-10.63 with E[u u^T] in place of x x^T):
    returns (m_N, beta_N, W_N, nu_N)."""
    n, R = means_k.shape
    xbar = means_k.mean(axis=0)
    C = np.zeros((R, R))
    for j in range(n):
        d = means_k[j] - xbar
        C += covs_k[j] + np.outer(d, d)
    beta = beta0 + n
    mean = n * xbar / beta
    nu = nu0 + n
    W = np.linalg.inv(np.linalg.inv(W0) + C + beta0 * n / (beta0 + n) * np.outer(xbar, xbar))
    return mean, beta, W, nu


# ---------------------------------------------------------------- CP decomposition: Laplace propagation
def cp_lp_log_lik(model, y, s, etau, f):
    """(h, h', h'') of h = log N(y; f, 1/etau) + const (cp_gaussian) or log Phi(s f) (cp_probit)."""
    if model == "cp_gaussian":
        return -0.5 * etau * (y - f) ** 2, etau * (y - f), -etau
    r = mills(s * f)
    return float(log_ndtr(s * f)), s * r, -r * (s * f + r)


def cp_lp_phi(model, y, s, etau, Lc, ec, x):
    """-log of the tilted density over x = (u_1, ..., u_K) (K R,) up to a constant, its gradient
    and its Hessian (dense, written out entry by entry from f = sum_r prod_k u_kr)."""
    K, R = ec.shape
    U = x.reshape(K, R)
    f = np.prod(U, axis=0).sum()
    h, h1, h2 = cp_lp_log_lik(model, y, s, etau, f)
    phi = sum(0.5 * U[k] @ Lc[k] @ U[k] - ec[k] @ U[k] for k in range(K)) - h
    df = np.array([[np.prod(np.delete(U[:, r], k)) for r in range(R)] for k in range(K)]).ravel()
    grad = np.concatenate([Lc[k] @ U[k] - ec[k] for k in range(K)]) - h1 * df
    hess = -h2 * np.outer(df, df)
    for k in range(K):
        hess[k * R : (k + 1) * R, k * R : (k + 1) * R] += Lc[k]
        for kp in range(K):
            if kp != k:
                for r in range(R):
                    hess[k * R + r, kp * R + r] -= h1 * np.prod(np.delete(U[:, r], [k, kp]))
    return phi, grad, hess


def cp_lp_mode(model, y, s, etau, Lc, ec, x0):
    """Mode of the tilted distribution: scipy's L-BFGS-B from x0 (the paper's optimiser), then
    plain Newton steps to polish it to rounding level."""
    fun = lambda x: cp_lp_phi(model, y, s, etau, Lc, ec, x)[:2]  # noqa: E731
    res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options=dict(maxiter=1000, gtol=1e-10))
    x = res.x
    for _ in range(20):
        _, g, H = cp_lp_phi(model, y, s, etau, Lc, ec, x)
        x = x - np.linalg.solve(H, g)
    return x


def cp_lp_messages(model, y, s, etau, Lc, ec, x0):
    """Textbook LP messages of one entry: the mode x*, C = H(x*)^{-1}, per mode k
    Lam_k = inv(C_kk) - Lc_k, eta_k = inv(C_kk) u_k* - ec_k. Returns (x*, Lam (K, R, R), eta (K, R),
    H positive definite, per-mode validity: Lam_k semi-definite within 1e-9 of its scale)."""
    K, R = ec.shape
    x = cp_lp_mode(model, y, s, etau, Lc, ec, x0)
    _, _, H = cp_lp_phi(model, y, s, etau, Lc, ec, x)
    C = np.linalg.inv(H)
    Lam = np.empty((K, R, R))
    eta = np.empty((K, R))
    for k in range(K):
        P = np.linalg.inv(C[k * R : (k + 1) * R, k * R : (k + 1) * R])
        Lam[k] = P - Lc[k]
        eta[k] = P @ x[k * R : (k + 1) * R] - ec[k]
    pd = np.linalg.eigvalsh(H).min() > 0
    valid = [np.linalg.eigvalsh(L).min() >= -1e-9 * np.abs(np.diag(L)).max() for L in Lam]
    return x, Lam, eta, pd, np.array(valid) & pd


# ---------------------------------------------------------------- CP-WOPT (dense, Acar et al. 2011)
def cp_full(factors):
    """Dense CP tensor [[U_1, ..., U_K]] = sum_r U_1[:, r] o ... o U_K[:, r], shape (d_1, ..., d_K)."""
    letters = "abcdefghij"[: len(factors)]
    return np.einsum(",".join(f"{c}z" for c in letters) + "->" + letters, *factors)


def cp_wopt_value_and_grad(coords, values, shape, factors, reg):
    """CP-WOPT objective and gradient in Acar et al.'s dense form (distinct coords):
    F = 1/2 ||W * (Y - [[U]])||^2 + reg/2 sum_k ||U_k||^2 with the 0/1 mask W,
    dF/dU_k = -(W * (Y - [[U]]))_(k) (Khatri-Rao of the other U) + reg U_k (an MTTKRP)."""
    W = np.zeros(shape)
    Y = np.zeros(shape)
    idx = tuple(coords.T)
    W[idx] = 1.0
    Y[idx] = values
    E = W * (Y - cp_full(factors))
    F = 0.5 * np.sum(E**2) + 0.5 * reg * sum(np.sum(U**2) for U in factors)
    letters = "abcdefghij"[: len(factors)]
    grads = []
    for k in range(len(factors)):
        others = [j for j in range(len(factors)) if j != k]
        spec = letters + "," + ",".join(f"{letters[j]}z" for j in others) + "->" + letters[k] + "z"
        grads.append(-np.einsum(spec, E, *[factors[j] for j in others]) + reg * factors[k])
    return F, grads


# ---------------------------------------------------------------- CP decomposition by VMP (dense)
# Mean-field variational message passing for the CP models (method "vmp"), textbook form: explicit
# inverses, the standard Gaussian and Gamma KL formulas; priors and posteriors per mode as lists.
def cp_vmp_update_mode(model, coords, y, k, means, covs, prior_Lam, prior_eta, etau):
    """Exact coordinate update of q(u) for every object of mode k given the other modes.

    y: values (cp_gaussian) or signs +-1 (cp_probit, whose targets are E[z] of the truncated
    normals q(z) = N(mu, 1) 1[s z > 0] with mu from the current means; etau = 1).
    Returns (means_k, covs_k, Lam_k, eta_k), the moments and natural parameters.
    """
    Lam = prior_Lam[k].copy()
    eta = prior_eta[k].copy()
    for e in range(coords.shape[0]):
        j = coords[e, k]
        Ez, Ezz = cp_other_moments(coords[e], k, means, covs)
        if model == "cp_gaussian":
            t = y[e]
        else:
            mu = Ez @ means[k][j]
            t = mu + y[e] * mills(y[e] * mu)
        Lam[j] += etau * Ezz
        eta[j] += etau * t * Ez
    covs_k = np.linalg.inv(Lam)
    return np.einsum("jab,jb->ja", covs_k, eta), covs_k, Lam, eta


def cp_vmp_elbo(model, coords, y, means, covs, prior_Lam, prior_eta, noise=None, noise_prior=None):
    """ELBO of q(U) (q(tau) = Gamma(noise) with prior Gamma(noise_prior) for cp_gaussian; for
    cp_probit with every q(z) optimal for q(U)), from the textbook expectations."""
    from scipy.special import digamma, gammaln

    total = 0.0
    for e in range(coords.shape[0]):
        mu = np.prod([means[k][j] for k, j in enumerate(coords[e])], axis=0).sum()
        ef2 = cp_expected_sq_error(coords[e], 0.0, means, covs)
        if model == "cp_gaussian":
            a, b = noise
            e_log_tau = digamma(a) - math.log(b)
            total += 0.5 * e_log_tau - LOG_SQRT_2PI - 0.5 * (a / b) * (y[e] ** 2 - 2 * y[e] * mu + ef2)
        else:
            # E_q[log N(z | f, 1)] - E_q[log q(z)] with q(z) = N(mu, 1) 1[s z > 0] / Phi(s mu)
            total += float(log_ndtr(y[e] * mu)) - 0.5 * (ef2 - mu**2)
    for k in range(len(means)):
        for j in range(means[k].shape[0]):
            S0 = np.linalg.inv(prior_Lam[k][j])
            m0 = S0 @ prior_eta[k][j]
            m, S = means[k][j], covs[k][j]
            dm = m - m0
            kl = np.trace(prior_Lam[k][j] @ S) + dm @ prior_Lam[k][j] @ dm - len(m)
            kl += np.linalg.slogdet(S0)[1] - np.linalg.slogdet(S)[1]
            total -= 0.5 * kl
    if model == "cp_gaussian":
        (a, b), (a0, b0) = noise, noise_prior
        e_log_tau, e_tau = digamma(a) - math.log(b), a / b

        def e_log_gamma(al, be):  # E_q[log Gamma(tau | al, be)]
            return al * math.log(be) - gammaln(al) + (al - 1) * e_log_tau - be * e_tau

        total -= e_log_gamma(a, b) - e_log_gamma(a0, b0)
    return total


def cp_vmp_fit(
    model, coords, y, shape, means, covs, prior_Lam, prior_eta, n_iter, a0=1e-3, b0=1e-3, etau=1.0
):
    """``n_iter`` VMP iterations from the given moments: modes 0..K-1, then q(tau) (cp_gaussian,
    starting from E[tau] = etau). Returns (means, covs, noise, elbos)."""
    means = [m.copy() for m in means]
    covs = [c.copy() for c in covs]
    noise = None
    elbos = []
    n = coords.shape[0]
    for _ in range(n_iter):
        tau = etau if model == "cp_gaussian" else 1.0
        for k in range(len(shape)):
            means[k], covs[k], _, _ = cp_vmp_update_mode(
                model, coords, y, k, means, covs, prior_Lam, prior_eta, tau
            )
        if model == "cp_gaussian":
            sse = sum(cp_expected_sq_error(coords[e], y[e], means, covs) for e in range(n))
            noise = (a0 + 0.5 * n, b0 + 0.5 * sse)
            etau = noise[0] / noise[1]
        elbos.append(cp_vmp_elbo(model, coords, y, means, covs, prior_Lam, prior_eta, noise, (a0, b0)))
    return means, covs, noise, elbos


# ---------------------------------------------------------------- CP decomposition: any likelihood
def tilted_by_grid(log_lik, y, m, v, half_width=14.0, n_grid=40_001):
    """(log Z, alpha, beta) of p(y | a) N(a | m, v) on a dense trapezoid grid over m +- 14 sd:
    Z = int p N, alpha = (E[a] - m) / v, beta = (v - Var[a]) / v^2 (the derivatives of log Z in m).
    ``log_lik(y, a)`` vectorised over a."""
    sd = math.sqrt(v)
    t = np.linspace(-half_width, half_width, n_grid)
    lw = -0.5 * t**2 - LOG_SQRT_2PI + log_lik(y, m + sd * t)
    top = lw.max()
    w = np.exp(lw - top)
    h = t[1] - t[0]  # (in sds: the points m + sd t are rounded to m's scale)
    z = np.trapezoid(w, dx=h)
    mean_t = np.trapezoid(w * t, dx=h) / z
    var_t = np.trapezoid(w * (t - mean_t) ** 2, dx=h) / z
    return top + math.log(z), mean_t / sd, (1 - var_t) / v


def probit_tilted(y, m, v):
    """Closed-form (log Z, alpha, beta) of Phi(y a) N(a | m, v)."""
    den = math.sqrt(1 + v)
    z = y * m / den
    r = mills(z)
    return float(log_ndtr(z)), y * r / den, r * (z + r) / (1 + v)


def logistic_log_lik(y, a):
    """log sigmoid(y a), vectorised."""
    return log_expit(y * a)


def cp_generic_message(tilted, y, Lc, ec, Ez, Ezz):
    """Generic CEP-1 message (DESIGN.md section 7), textbook form with explicit inverses.

    Sc = inv(Lc), mc = Sc ec; a = u.z has m_a = Ez.mc, v_a = tr(Sc Ezz); (log Z, alpha, beta) =
    ``tilted(y, m_a, v_a)``; g = alpha Ez, A = beta Ez Ez^T; tilted mean mc + Sc g, covariance
    Sc - Sc A Sc; message Lam* = inv(cov) - Lc, eta* = inv(cov) mean - ec. None if the tilted
    covariance is not positive definite."""
    Sc = np.linalg.inv(Lc)
    mc = Sc @ ec
    _, alpha, beta = tilted(y, float(Ez @ mc), float(np.trace(Sc @ Ezz)))
    g = alpha * Ez
    A = beta * np.outer(Ez, Ez)
    mean = mc + Sc @ g
    cov = Sc - Sc @ A @ Sc
    if np.min(np.linalg.eigvalsh(0.5 * (cov + cov.T))) <= 0:
        return None
    P = np.linalg.inv(cov)
    return P - Lc, P @ mean - ec


def cp_generic_coord(tilted, y, tc, nc, x, b, ezz, signed=False):
    """Generic CEP-1 message (precision, precision x mean) of one entry to one coordinate of a
    diagonal-covariance object: f = x z + b, z ~ N(nc / tc, 1 / tc); the tilted of f has mean
    x mc + b and variance ezz vc; tilted z: mean mc + vc x alpha, variance vc - vc^2 x^2 beta.
    None if the tilted variance is not positive, or (unless ``signed``: a likelihood that may not
    be log-concave) not below the cavity's (a message of negative precision)."""
    vc, mc = 1 / tc, nc / tc
    _, alpha, beta = tilted(y, x * mc + b, ezz * vc)
    mean = mc + vc * x * alpha
    var = vc - vc * vc * x * x * beta
    if not (0 < var and (signed or var < vc)):
        return None
    return 1 / var - tc, mean / var - nc


def restore_objects(ptr, ent, obj_mode, bad, Lam, eta, old_Lam, old_eta, r, frac):
    """The parallel guard's pull-back, textbook form: for every object o with bad[o], each of its
    entries' messages to its mode (coordinate r's only with r >= 0, diagonal Lam (n, K, R)) becomes
    old + frac (new - old). Returns new arrays."""
    Lam, eta = Lam.copy(), eta.copy()
    for o in np.flatnonzero(bad):
        k = obj_mode[o]
        for e in ent[ptr[o] : ptr[o + 1]]:
            sel = (e, k) if r < 0 else (e, k, r)
            Lam[sel] = old_Lam[sel] + frac * (Lam[sel] - old_Lam[sel])
            eta[sel] = old_eta[sel] + frac * (eta[sel] - old_eta[sel])
    return Lam, eta


def shrunk(P_Lam, old_P_Lam, keep):
    """Objects (bool (n_obj,)) whose precision P (R, R) lost more than 1 - keep of the old one in
    some direction: the smallest eigenvalue of P - keep P_old is not positive."""
    return np.array(
        [np.linalg.eigvalsh(p - keep * q).min() <= 0 for p, q in zip(P_Lam, old_P_Lam, strict=True)]
    )


# ---------------------------------------------------------------- likelihood leaves (counts, Student-t)
#: digits of the mpmath reference log-densities: enough that y f - exp(f) at y = 1e8 keeps 20
MP_DIGITS = 40


def poisson_log_lik_mp(y):
    """f -> log Poisson(y; exp(f)) = y f - exp(f) - lgamma(y + 1), in MP_DIGITS-digit arithmetic."""
    import mpmath as mp

    with mp.workdps(MP_DIGITS):
        y = mp.mpf(y)
        const = -mp.loggamma(y + 1)

    def log_lik(f):
        with mp.workdps(MP_DIGITS):
            f = mp.mpf(f)
            return y * f - mp.exp(f) + const

    return log_lik


def negbin_log_lik_mp(r, y):
    """f -> log NB(y; mean mu = exp(f), size r) = lgamma(y + r) - lgamma(r) - lgamma(y + 1)
    + r log(r / (r + mu)) + y log(mu / (r + mu)), in MP_DIGITS-digit arithmetic."""
    import mpmath as mp

    with mp.workdps(MP_DIGITS):
        r, y = mp.mpf(r), mp.mpf(y)
        const = mp.loggamma(y + r) - mp.loggamma(r) - mp.loggamma(y + 1) + r * mp.log(r)

    def log_lik(f):
        with mp.workdps(MP_DIGITS):
            f = mp.mpf(f)
            return const - r * mp.log(r + mp.exp(f)) + y * (f - mp.log(r + mp.exp(f)))

    return log_lik


def student_t_log_lik_mp(df, scale, y):
    """f -> log t_df((y - f) / scale) / scale, in MP_DIGITS-digit arithmetic."""
    import mpmath as mp

    with mp.workdps(MP_DIGITS):
        df, scale, y = mp.mpf(df), mp.mpf(scale), mp.mpf(y)
        norm = mp.loggamma((df + 1) / 2) - mp.loggamma(df / 2) - mp.log(df * mp.pi) / 2 - mp.log(scale)

    def log_lik(f):
        with mp.workdps(MP_DIGITS):
            e = (y - mp.mpf(f)) / scale
            return norm - (df + 1) / 2 * mp.log1p(e * e / df)

    return log_lik


def tilted_by_quad(log_lik_mp, m, v, anchors, drop=80.0):
    """(log Z, mean, variance) of p(y | f) N(f | m, v) by scipy.integrate.quad.

    ``log_lik_mp(f)`` is log p(y | f) as an mpmath number (the textbook formula, exact enough at
    MP_DIGITS digits that the differences L(f) - L(c) of the log integrand lose nothing);
    ``anchors`` are the points where the integrand has its features (its modes). The integrand
    exp(L(c + x) - L(c)) about the highest anchor c is integrated over the offsets x where it is
    above exp(-drop), cut at points that approach each anchor geometrically (ratio 2), so that
    every scale from 1e-6 of the range up is its own interval. (quad's warnings that it cannot
    reach 1e-13 are silenced: the result is compared with itself on other cuts in development.)
    """
    import warnings

    import mpmath as mp
    from scipy import integrate

    with mp.workdps(MP_DIGITS):
        m_, v_ = mp.mpf(m), mp.mpf(v)

        def log_t(f):
            f = mp.mpf(f)
            return log_lik_mp(f) - (f - m_) ** 2 / (2 * v_)

        levels = [log_t(a) for a in anchors]
        c = anchors[int(np.argmax([float(lv - max(levels)) for lv in levels]))]
        top = log_t(c)
        seen = {}

        def r(x):  # (the three integrals visit the same nodes: each is evaluated once)
            if x not in seen:
                seen[x] = float(log_t(c + x) - top)
            return seen[x]

        sd = math.sqrt(v)
        offsets = sorted({a - c for a in anchors})
        ends = []
        for sign, start in ((-1.0, offsets[0]), (1.0, offsets[-1])):
            step = 1e-8 * sd
            while r(start + sign * step) > -drop and step < 1e8 * sd:
                step *= 1.5
            ends.append(start + sign * step)
        lo, hi = ends
        cuts = set(offsets)
        for a in offsets:
            for b in (lo, hi):
                cuts.update(a + (b - a) * 2.0**-k for k in range(21))
        grid = np.array(sorted(x for x in cuts if lo <= x <= hi))

        def integral(func):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", integrate.IntegrationWarning)
                parts = [
                    integrate.quad(func, a, b, epsabs=1e-300, epsrel=1e-13, limit=200)[0]
                    for a, b in zip(grid[:-1], grid[1:], strict=True)
                ]
            return math.fsum(parts)

        z = integral(lambda x: math.exp(r(x)))
        e1 = integral(lambda x: x * math.exp(r(x))) / z
        var = integral(lambda x: (x - e1) ** 2 * math.exp(r(x))) / z
        log_z = float(top) - 0.5 * math.log(2 * math.pi * v) + math.log(z)
        return log_z, c + e1, var


# ---------------------------------------------------------------- learned likelihood parameters
def cp_entry_marginals(coords, means, covs):
    """Mean and variance (n,) of each entry's f = sum_r prod_k u_kr under the factorised Gaussian
    posterior (means[k] (d_k, R), covs[k] (d_k, R, R) or (d_k, R) variances): E f = 1.(o_k m_k)
    and Var f = sum(o_k E[u_k u_k^T]) - (E f)^2."""
    mean, var = np.empty(len(coords)), np.empty(len(coords))
    for e, idx in enumerate(coords):
        R = means[0].shape[1]
        prod, second = np.ones(R), np.ones((R, R))
        for k, j in enumerate(idx):
            m, c = means[k][j], covs[k][j]
            c = np.diag(c) if c.ndim == 1 else c
            prod = prod * m
            second = second * (c + np.outer(m, m))
        mean[e] = prod.sum()
        var[e] = max(second.sum() - mean[e] ** 2, 0.0)
    return mean, var


def gaussian_noise_var(y, m, s2, a0=1e-3, b0=1e-3):
    """The learned Gaussian noise variance 1 / E[tau] = b / a of the Gamma(a0, b0)-prior precision's
    posterior given f ~ N(m, s2): a = a0 + n / 2, b = b0 + sum((y - m)^2 + s2) / 2."""
    return (b0 + 0.5 * np.sum((y - m) ** 2 + s2)) / (a0 + 0.5 * len(y))


def expected_log_lik(log_lik, y, m, s2, n_nodes=80):
    """sum_i E[log p(y_i | f)], f ~ N(m_i, s2_i), by numpy's probabilists' Gauss-Hermite rule."""
    x, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    w = w / w.sum()
    f = m[:, None] + np.sqrt(s2)[:, None] * x[None, :]
    return float(np.sum(log_lik(y[:, None], f) @ w))


def em_by_grid(log_lik_of, y, m, s2, lo, hi, n_grid=2001):
    """The maximiser over theta in [lo, hi] of sum_i E[log p(y_i | f; theta)] (``log_lik_of(theta)``
    a function of (y, f)): a grid in log theta, refined twice around its best point."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(3):
        grid = np.linspace(a, b, n_grid)
        vals = [expected_log_lik(log_lik_of(math.exp(t)), y, m, s2) for t in grid]
        i = int(np.argmax(vals))
        step = grid[1] - grid[0]
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, n_grid - 1)]
    return math.exp(grid[i]), step


def gaussian_log_lik_of(var):
    """log N(y | f, var) as a function of (y, f)."""
    return lambda y, f: -0.5 * (y - f) ** 2 / var - 0.5 * math.log(2 * math.pi * var)


# ---------------------------------------------------------------- the counts' log scale
def count_log1p_moments(f, r=None):
    """(E[log(1 + y)], E[log(1 + y)^2]) for y ~ Poisson(e^f) (r None) or the negative binomial
    with mean e^f and size r: the sum over y = 0, 1, ... of p(y) log(1 + y)^k, p(y) from its
    textbook log pmf (math.lgamma), up to where the tail left out is below 1e-17 (the Poisson:
    its mean + 40 sds; the negative binomial: scipy's isf)."""
    from scipy import stats

    mu = math.exp(f)
    if r is None:
        top = mu + 40.0 * math.sqrt(mu) + 60.0
        log_p = lambda y: -mu + y * f - math.lgamma(y + 1.0)  # noqa: E731
    else:
        top = stats.nbinom.isf(1e-17, r, r / (r + mu))
        top = top if math.isfinite(top) else 60.0  # (nan where the tail is below 1e-17 at once)
        log_q, log_1q = math.log(r / (r + mu)), math.log(mu / (r + mu))
        log_p = lambda y: (  # noqa: E731
            math.lgamma(y + r) - math.lgamma(r) - math.lgamma(y + 1.0) + r * log_q + y * log_1q
        )
    terms = [(math.exp(log_p(y)), math.log1p(y)) for y in range(int(top) + 50)]
    return math.fsum(p * L for p, L in terms), math.fsum(p * L * L for p, L in terms)


def count_log1p_predictive(m, v, r=None):
    """(E[log(1 + y)], Var[log(1 + y)]) when f ~ N(m, v), v > 0: ``count_log1p_moments``
    integrated against the Gaussian by scipy.integrate.quad over m +- 12 sd."""
    from scipy import integrate

    sd = math.sqrt(v)

    def moment(k):
        def integrand(f):
            return count_log1p_moments(f, r)[k] * math.exp(-0.5 * ((f - m) / sd) ** 2)

        value = integrate.quad(integrand, m - 12 * sd, m + 12 * sd, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
        return value / (sd * math.sqrt(2 * math.pi))

    e1, e2 = moment(0), moment(1)
    return e1, e2 - e1 * e1


# ---------------------------------------------------------------- sparse rows
def sparse_parallel_sweep(tilted, method, indptr, indices, data, y, tau, nu, prior_T, rho):
    """One damped parallel sweep of regression sites stored at the nonzeros of CSR rows (tau,
    nu (nnz,)), textbook form: the posterior T = prior + sum of each column's sites; CEP-1: for
    each nonzero x_m the conditional tilted N(w | mc, vc) p(y | x_m w + b), b = the rest of x.mu,
    as the tilted of a = x_m w + b; EP: the tilted of a = x.w under the row's cavity, each
    weight's moments by Gaussian conditioning on a. ``tilted(y, m_a, v_a)`` gives (log Z, alpha,
    beta). Messages that are not finite or not positive keep their old value; returns (tau, nu,
    skipped)."""
    d = prior_T.size
    T = prior_T + np.bincount(indices, weights=tau, minlength=d)
    N = np.bincount(indices, weights=nu, minlength=d)
    mu = N / T
    new_t = np.full(tau.shape, np.nan)
    new_n = np.full(tau.shape, np.nan)
    for i in range(indptr.size - 1):
        sl = slice(indptr[i], indptr[i + 1])
        m, x = indices[sl], data[sl]
        if x.size == 0:  # (an empty row has no sites)
            continue
        tc = T[m] - tau[sl]
        nc = N[m] - nu[sl]
        vc = 1.0 / tc
        mc = nc * vc
        if method == "ep":
            _, alpha, beta = tilted(y[i], float(x @ mc), float(x**2 @ vc))
            mean = mc + x * vc * alpha
            var = vc - (x * vc) ** 2 * beta
        else:
            mean, var = np.empty(x.size), np.empty(x.size)
            for j in range(x.size):
                b = float(x @ mu[m]) - x[j] * mu[m[j]]
                _, alpha, beta = tilted(y[i], x[j] * mc[j] + b, x[j] ** 2 * vc[j])
                mean[j] = mc[j] + x[j] * vc[j] * alpha
                var[j] = vc[j] - (x[j] * vc[j]) ** 2 * beta
        new_t[sl] = 1.0 / var - tc
        new_n[sl] = mean / var - nc
    ok = np.isfinite(new_t) & np.isfinite(new_n) & (new_t > 0)
    tau = np.where(ok, (1 - rho) * tau + rho * new_t, tau)
    nu = np.where(ok, (1 - rho) * nu + rho * new_n, nu)
    return tau, nu, int((~ok).sum())


def adf_pass(tilted, method, indptr, indices, data, y, T, N, T0, N0, seen, rows, forget, rho=1.0, site=None):
    """Assumed density filtering row by row, textbook form. Before row i (row r = rows + i + 1 of
    the stream) each weight it touches moves toward the prior: T <- k T + (1 - k) T0, N likewise,
    k = (1 - forget)^(r - seen). The row's tilted distribution is taken under the posterior
    itself (its sites are not in it yet): EP, the tilted of a = x.w, each weight's new moments by
    conditioning on a; CEP-1, each weight's conditional tilted with the rest of x.w at its mean.
    ``site(x, y, tc, nc, b, q)``, if given, is a hand-written CEP-1 site's message instead (b, q:
    the mean and variance of the rest of x.w). Each site's message (new natural parameters minus
    the posterior's), damped by rho, is added if finite and positive; a row that would leave a
    weight improper is refused whole. Returns new arrays (T, N, seen) and the number of messages
    refused."""
    T, N, seen = T.astype(float), N.astype(float), seen.copy()
    refused = 0
    for i in range(indptr.size - 1):
        r = rows + i + 1
        sl = slice(indptr[i], indptr[i + 1])
        m, x = indices[sl], data[sl]
        k = (1.0 - forget) ** (r - seen[m])
        T[m] = k * T[m] + (1 - k) * T0[m]
        N[m] = k * N[m] + (1 - k) * N0[m]
        seen[m] = r
        if x.size == 0:
            continue
        vc = 1.0 / T[m]
        mc = N[m] * vc
        if method == "ep":
            _, alpha, beta = tilted(y[i], float(x @ mc), float(x**2 @ vc))
            mean = mc + x * vc * alpha
            var = vc - (x * vc) ** 2 * beta
            t_new, n_new = 1.0 / var - T[m], mean / var - N[m]
        else:
            t_new, n_new = np.empty(x.size), np.empty(x.size)
            for j in range(x.size):
                b = float(x @ mc) - x[j] * mc[j]
                if site is not None:
                    q = float(x**2 @ vc) - x[j] ** 2 * vc[j]
                    t_new[j], n_new[j] = site(x[j], y[i], T[m[j]], N[m[j]], b, q)
                    continue
                _, alpha, beta = tilted(y[i], x[j] * mc[j] + b, x[j] ** 2 * vc[j])
                mean = mc[j] + x[j] * vc[j] * alpha
                var = vc[j] - (x[j] * vc[j]) ** 2 * beta
                t_new[j], n_new[j] = 1.0 / var - T[m[j]], mean / var - N[m[j]]
        t_new, n_new = rho * t_new, rho * n_new
        ok = np.isfinite(t_new) & np.isfinite(n_new) & (t_new > 0)
        t_new, n_new = np.where(ok, t_new, 0.0), np.where(ok, n_new, 0.0)
        if not np.all(T[m] + t_new > 0):
            refused += int(np.sum((t_new != 0) | (n_new != 0)))
            continue
        T[m] += t_new
        N[m] += n_new
        refused += int(np.sum(~ok))
    return T, N, seen, refused


# ---------------------------------------------------------------- CP decomposition: the sketch start
def _splitmix(h):
    """splitmix64's step on Python ints: the finaliser of h + golden."""
    return _mix64((h + _GOLDEN) & _M64)


def cp_sketch(coords, f, shape, width, V=None):
    """Per mode k, Y_k (shape[k], width) = A_k Omega_k summed entry by entry: Omega_k's row of an
    entry is, for each column r, -1 where the top bit of splitmix(h + r) is set (h: splitmix of
    the mode number k + 1 xor-ed with each other mode's index in turn), else +1; with V, the
    product of the other modes' rows V_j[i_j]."""
    out = [np.zeros((d, width)) for d in shape]
    for e in range(coords.shape[0]):
        for k in range(len(shape)):
            if V is None:
                h = k + 1
                for j in range(len(shape)):
                    if j != k:
                        h = _splitmix(h ^ int(coords[e, j]))
                row = [-1.0 if _splitmix(h + r) >> 63 else 1.0 for r in range(width)]
            else:
                row = [
                    float(np.prod([V[j][coords[e, j], r] for j in range(len(shape)) if j != k]))
                    for r in range(width)
                ]
            for r in range(width):
                out[k][coords[e, k], r] += f[e] * row[r]
    return out
