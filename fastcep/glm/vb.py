"""Mean-field variational Bayes (method "vb") for Bayesian probit and logistic regression.

The Python layer of ``fastcep.kernels.vb`` (formulas in its docstring): validates the input,
allocates the state, runs the coordinate-ascent iterations, tests convergence with the same
measure as ``fastcep.regression`` and records the trace.
"""

import time

import numpy as np

from .. import _validation as V
from ..kernels.glm import vb as _vb

MODEL_CODES = {"probit": _vb.PROBIT, "logistic": _vb.LOGISTIC}


def _check_prior_T(prior_T, d, func):
    what = f"a float > 0 or an array of {d} finite floats > 0"
    try:
        arr = np.asarray(prior_T, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise V.param_error("prior_T", func, what, prior_T, TypeError) from exc
    if arr.ndim == 0:
        arr = np.full(d, arr)
    if arr.shape != (d,) or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise V.param_error("prior_T", func, what, prior_T)
    return np.ascontiguousarray(arr)


def run_vb(X, s, model, prior_T, max_iter, tol, callback_fn=None):
    """Fit q(w) = prod_m N(mu_m, v_m) to a Bayesian probit or logistic regression by coordinate ascent.

    Starts from mu = 0, v = 1 / prior_T. Each iteration updates the latent variables (probit:
    the truncated normals q(z); logistic: the Jaakkola-Jordan xi) and then every q(w_m) in order,
    and ends with the ELBO, which never decreases.

    Parameters
    ----------
    X : array of shape (n, d)
        Features; converted to C-contiguous float64, must be finite.
    s : array of shape (n,)
        Labels as signs +-1 (also accepted: {0, 1} or bool).
    model : {"probit", "logistic"}
    prior_T : float or array of shape (d,)
        Prior precisions of the weights (> 0).
    max_iter : int
        Largest number of iterations (>= 1).
    tol : float
        Stop when max(max|mu - mu_old| / sqrt(v), max|v - v_old| / v) < tol (>= 0).
    callback_fn : callable or None
        ``callback_fn(iteration, change, mu, v, elbo)`` after each iteration (mu, v are copies);
        returning True stops the loop.

    Returns
    -------
    dict
        ``mu``, ``v``: ndarray of float64, shape (d,); ``n_iter``: int; ``converged``: bool;
        ``stop_reason``: "tol", "max_iter" or "callback"; ``elapsed``, ``change``, ``elbo``:
        lists of floats, one per iteration (elapsed in seconds since the start).

    Raises
    ------
    FloatingPointError
        If the posterior or the ELBO becomes non-finite.
    """
    func = "run_vb"
    V.check_choice(model, "model", func, tuple(MODEL_CODES))
    X = V.check_matrix(X, "X", func)
    s = V.check_labels(s, "s", func, X.shape[0])
    n, d = X.shape
    prior_T = _check_prior_T(prior_T, d, func)
    max_iter = V.check_int(max_iter, "max_iter", func, low=1)
    tol = V.check_float(tol, "tol", func, low=0.0)
    if callback_fn is not None and not callable(callback_fn):
        raise V.param_error("callback_fn", func, "a callable or None", callback_fn, TypeError)

    code = MODEL_CODES[model]
    Xt = np.ascontiguousarray(X.T)
    mu = np.zeros(d)
    v = 1.0 / prior_T
    t, sv, a, c = (np.empty(n) for _ in range(4))
    elapsed, changes, elbos = [], [], []
    converged = False
    stop_reason = "max_iter"
    start = time.perf_counter()
    _vb.vb_elbo(code, X, s, prior_T, mu, v, t, sv)  # t = X mu, sv = (X * X) v
    for it in range(1, max_iter + 1):
        mu_old = mu.copy()
        v_old = v.copy()
        elbo = float(_vb.vb_iteration(code, X, Xt, s, prior_T, mu, v, t, sv, a, c))
        if not (np.isfinite(elbo) and np.all(np.isfinite(mu)) and np.all(np.isfinite(v)) and np.all(v > 0)):
            raise FloatingPointError(
                f"run_vb: the posterior or the ELBO became non-finite at iteration {it} ({model}); "
                "check the scale of X and prior_T."
            )
        change = float(max(np.max(np.abs(mu - mu_old) / np.sqrt(v)), np.max(np.abs(v - v_old) / v)))
        elapsed.append(time.perf_counter() - start)
        changes.append(change)
        elbos.append(elbo)
        if change < tol:
            converged, stop_reason = True, "tol"
        if callback_fn is not None and callback_fn(it, change, mu.copy(), v.copy(), elbo) and not converged:
            stop_reason = "callback"
            break
        if converged:
            break
    return {
        "mu": mu,
        "v": v,
        "n_iter": it,
        "converged": converged,
        "stop_reason": stop_reason,
        "elapsed": elapsed,
        "change": changes,
        "elbo": elbos,
    }
