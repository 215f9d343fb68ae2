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
    d = X.shape[1]
    key = hashlib.sha1(
        X.tobytes() + s.tobytes() + f"{model}{prior_var}{n_samples}{seed}{df}{inflate}".encode()
    ).hexdigest()[:16]
    cache = RESULTS / f"gold-{key}.npz"
    if cache.exists():
        z = np.load(cache)
        return {k: (z[k] if z[k].ndim else float(z[k])) for k in z.files}
    t0 = time.perf_counter()
    w_map, lap = _map_laplace(X, s, model, prior_var)
    prop = stats.multivariate_t(loc=w_map, shape=inflate**2 * lap, df=df, seed=seed)
    logw_all, W_all = [], []
    out = np.empty(batch)
    for start in range(0, n_samples, batch):
        W = np.ascontiguousarray(prop.rvs(size=min(batch, n_samples - start)))
        W = W.reshape(-1, d)
        ll = out[: W.shape[0]]
        _loglik(X, s, W, model == "probit", ll)
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
    res = {
        "mean": mean,
        "cov": cov,
        "ess": float(1.0 / np.sum(w * w)),
        "n_samples": float(n_samples),
        "seconds": time.perf_counter() - t0,
        "map": w_map,
        "laplace_cov": lap,
    }
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
