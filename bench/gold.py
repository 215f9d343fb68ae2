"""Gold-standard posteriors for the regression benchmarks: a large importance sample.

The posterior of Bayesian probit / logistic regression with prior N(0, prior_var I) is sampled
by importance sampling from a multivariate Student-t proposal centred at the MAP with the
Laplace covariance (inflated). The weighted mean and covariance define a Gaussian "gold"
posterior; the effective sample size (sum w)^2 / sum w^2 is reported with it. Results are
cached in bench/results/ (keyed by data, model, sample count and seed).
"""

import hashlib
import math
import pathlib
import time

import numpy as np
from numba import njit, prange
from scipy import optimize, stats
from scipy.special import expit, log_ndtr, ndtr

from fastcep.kernels._config import FASTMATH
from fastcep.kernels.likelihoods import log_lik as seam_log_lik
from fastcep.kernels.likelihoods import log_lik_derivs as seam_log_lik_derivs
from fastcep.kernels.special import log_ndtr as nb_log_ndtr
from fastcep.kernels.special import log_sigmoid

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


@njit(parallel=True, fastmath=FASTMATH)
def _loglik(X, s, W, probit, out):
    """out[k] = sum_i log f(s_i x_i . W[k]) for every sample W[k]; f probit or logistic."""
    n = X.shape[0]
    d = X.shape[1]
    for k in prange(W.shape[0]):
        acc = 0.0
        for i in range(n):
            a = 0.0
            for m in range(d):
                a += X[i, m] * W[k, m]
            acc += nb_log_ndtr(s[i] * a) if probit else log_sigmoid(s[i] * a)
        out[k] = acc


def _map_laplace(X, s, model, prior_var):
    d = X.shape[1]

    def negpost(w):
        a = s * (X @ w)
        ll = log_ndtr(a).sum() if model == "probit" else -np.logaddexp(0, -a).sum()
        return -ll + 0.5 * w @ w / prior_var

    def grad(w):
        a = s * (X @ w)
        if model == "probit":
            r = np.exp(stats.norm.logpdf(a) - log_ndtr(a))
        else:
            r = expit(-a)
        return -(X.T @ (s * r)) + w / prior_var

    def hess(w):
        a = s * (X @ w)
        if model == "probit":
            r = np.exp(stats.norm.logpdf(a) - log_ndtr(a))
            c = r * (a + r)
        else:
            p = expit(a)
            c = p * (1 - p)
        return (X * c[:, None]).T @ X + np.eye(d) / prior_var

    opt = optimize.minimize(negpost, np.zeros(d), jac=grad, hess=hess, method="trust-exact")
    return opt.x, np.linalg.inv(hess(opt.x))


def importance_gold(X, y, model, prior_var=1.0, n_samples=400_000, seed=0, df=8.0, inflate=1.3, batch=50_000):
    """Gaussian fitted to a large importance sample of the exact posterior.

    Returns
    -------
    dict with mean (d,), cov (d, d), ess, n_samples, seconds, map, laplace_cov
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    s = np.where(np.asarray(y) > 0, 1.0, -1.0)
    key = hashlib.sha1(
        X.tobytes() + s.tobytes() + f"{model}{prior_var}{n_samples}{seed}{df}{inflate}".encode()
    ).hexdigest()[:16]
    cache = RESULTS / f"gold-{key}.npz"
    if cache.exists():
        z = np.load(cache)
        return {k: (z[k] if z[k].ndim else float(z[k])) for k in z.files}
    t0 = time.perf_counter()
    w_map, lap = _map_laplace(X, s, model, prior_var)
    res = _importance(
        lambda W, out: _loglik(X, s, W, model == "probit", out), w_map, lap, prior_var, n_samples, seed, df,
        inflate, batch,
    )  # fmt: skip
    res["seconds"] = time.perf_counter() - t0
    RESULTS.mkdir(exist_ok=True)
    np.savez(cache, **res)
    return res


def _importance(loglik, w_map, lap, prior_var, n_samples, seed, df, inflate, batch):
    """Importance sample of the posterior prior N(0, prior_var I) x likelihood from a Student-t
    proposal at ``w_map`` with the covariance ``inflate^2 lap``; ``loglik(W, out)`` writes each
    sample's log-likelihood. The weighted moments and the ESS."""
    d = w_map.shape[0]
    prop = stats.multivariate_t(loc=w_map, shape=inflate**2 * lap, df=df, seed=seed)
    logw_all, W_all = [], []
    out = np.empty(batch)
    for start in range(0, n_samples, batch):
        W = np.ascontiguousarray(prop.rvs(size=min(batch, n_samples - start)))
        W = W.reshape(-1, d)
        ll = out[: W.shape[0]]
        loglik(W, ll)
        logprior = -0.5 * (W * W).sum(1) / prior_var
        logw_all.append(ll + logprior - prop.logpdf(W))
        W_all.append(W)
    logw = np.concatenate(logw_all)
    W = np.concatenate(W_all)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ W
    diff = W - mean
    cov = (diff * w[:, None]).T @ diff
    return {
        "mean": mean,
        "cov": cov,
        "ess": float(1.0 / np.sum(w * w)),
        "n_samples": float(n_samples),
        "map": w_map,
        "laplace_cov": lap,
    }


@njit(parallel=True, fastmath=FASTMATH)
def _loglik_any(lik, X, y, off, W, out):
    """out[k] = sum_i log p(y_i | x_i . W[k] + off_i) for every sample W[k], any likelihood of
    the seam (``fastcep.kernels.likelihoods``)."""
    for k in prange(W.shape[0]):
        acc = 0.0
        for i in range(X.shape[0]):
            a = off[i]
            for m in range(X.shape[1]):
                a += X[i, m] * W[k, m]
            acc += seam_log_lik(lik, y[i], a)
        out[k] = acc


@njit(fastmath=FASTMATH)
def _derivs_any(lik, y, f, g1, g2):
    """g1, g2 (n,): the first and second derivatives of log p(y_i | f_i)."""
    for i in range(y.shape[0]):
        g1[i], g2[i] = seam_log_lik_derivs(lik, y[i], f[i])


def likelihood_gold(
    X, y, likelihood, prior_var=1.0, offset=None, n_samples=400_000, seed=0, df=8.0, inflate=1.3, batch=50_000
):
    """``importance_gold`` for any likelihood with derivatives (``fastcep.likelihoods``: its
    parameters fixed), prior N(0, prior_var I) over the weights (an intercept: a column of ones
    in X), and an optional offset. The MAP by Newton's method with a line search, the Laplace
    covariance from the likelihood's second derivatives."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n, d = X.shape
    off = np.zeros(n) if offset is None else np.ascontiguousarray(offset, dtype=np.float64)
    lik = likelihood.kernel()
    key = hashlib.sha1(
        X.tobytes() + y.tobytes() + off.tobytes()
        + f"{likelihood!r}{prior_var}{n_samples}{seed}{df}{inflate}".encode()
    ).hexdigest()[:16]  # fmt: skip
    cache = RESULTS / f"gold-lik-{key}.npz"
    if cache.exists():
        z = np.load(cache)
        return {k: (z[k] if z[k].ndim else float(z[k])) for k in z.files}
    t0 = time.perf_counter()
    g1, g2 = np.empty(n), np.empty(n)
    one = np.empty(1)

    def negpost(w):
        _loglik_any(lik, X, y, off, w[None, :], one)
        return -one[0] + 0.5 * w @ w / prior_var

    w = np.zeros(d)
    for _ in range(500):  # Newton with backtracking
        _derivs_any(lik, y, X @ w + off, g1, g2)
        grad = -(X.T @ g1) + w / prior_var
        # (curvatures clipped at 0: a descent direction where the likelihood is not log-concave,
        # e.g. the Student-t's outlying rows; the plain Newton step for log-concave ones)
        H = (X * np.maximum(-g2, 0.0)[:, None]).T @ X + np.eye(d) / prior_var
        step = np.linalg.solve(H, grad)
        t, f0 = 1.0, negpost(w)
        while negpost(w - t * step) > f0 and t > 1e-10:
            t *= 0.5
        w = w - t * step
        if np.max(np.abs(t * step)) < 1e-12:
            break
    _derivs_any(lik, y, X @ w + off, g1, g2)
    H = (X * -g2[:, None]).T @ X + np.eye(d) / prior_var
    if np.linalg.eigvalsh(H)[0] <= 0:  # (not a proper Laplace covariance: the clipped curvature)
        H = (X * np.maximum(-g2, 0.0)[:, None]).T @ X + np.eye(d) / prior_var
    lap = np.linalg.inv(H)
    lap = 0.5 * (lap + lap.T)
    res = _importance(
        lambda W, out: _loglik_any(lik, X, y, off, W, out), w, lap, prior_var, n_samples, seed, df, inflate,
        batch,
    )  # fmt: skip
    res["seconds"] = time.perf_counter() - t0
    RESULTS.mkdir(exist_ok=True)
    np.savez(cache, **res)
    return res


def _check():  # pragma: no cover - quick manual check
    from fastcep.data_tools import make_regression_simulation

    X, y, _ = make_regression_simulation("probit", "gaussian", seed=0)
    g = importance_gold(X, y, "probit", n_samples=100_000)
    print(g["ess"], g["seconds"], g["mean"], np.sqrt(np.diag(g["cov"])))
    print(ndtr(0.0), math.pi)


if __name__ == "__main__":  # pragma: no cover
    _check()
