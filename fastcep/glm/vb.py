"""Mean-field variational Bayes (method "vb") for Bayesian probit and logistic regression.

The Python layer of ``fastcep.kernels.vb`` (formulas in its docstring): validates the input,
allocates the state, runs the coordinate-ascent iterations, tests convergence with the same
measure as ``fastcep.glm.engine`` and runs in the one loop of every fit.
"""

import numpy as np

from .. import _loop
from .. import _validation as V
from ..kernels._config import LOGISTIC, PROBIT
from ..kernels.glm import vb as _vb

MODEL_CODES = {"probit": PROBIT, "logistic": LOGISTIC}


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


class VBFit:
    """Coordinate ascent of mean-field VB on one problem, one iteration per ``step``.

    Starts from mu = 0, v = 1 / prior_T, or from ``start`` (a VBState). Each iteration updates
    the latent variables (probit: the truncated normals q(z); logistic: the Jaakkola-Jordan xi)
    and then every q(w_m) in order, and ends with the ELBO, which never decreases. X, s, prior_T
    must be checked already.
    """

    def __init__(self, X, s, model, prior_T, start=None):
        self.X, self.s, self.prior_T = X, s, prior_T
        self.code = MODEL_CODES[model]
        n, d = X.shape
        self.Xt = np.ascontiguousarray(X.T)
        if start is None:
            self.mu = np.zeros(d)
            self.v = 1.0 / prior_T
        else:  # (a resumed fit: ``start`` its checked VBState)
            self.mu = np.array(start.mean, dtype=np.float64)
            self.v = np.array(start.var, dtype=np.float64)
        self.t, self.sv, self.a, self.c = (np.empty(n) for _ in range(4))
        self.elbo = np.nan
        _vb.vb_elbo(self.code, X, s, prior_T, self.mu, self.v, self.t, self.sv)  # t = X mu, sv = (X * X) v

    def step(self, it):
        """One iteration; returns its ``StepReport`` (change of the posterior, the ELBO)."""
        mu_old = self.mu.copy()
        v_old = self.v.copy()
        self.elbo = float(
            _vb.vb_iteration(
                self.code,
                self.X,
                self.Xt,
                self.s,
                self.prior_T,
                self.mu,
                self.v,
                self.t,
                self.sv,
                self.a,
                self.c,
            )
        )
        with np.errstate(all="ignore"):  # (a non-finite posterior is the loop's finite check's)
            change = float(
                max(
                    np.max(np.abs(self.mu - mu_old) / np.sqrt(self.v)),
                    np.max(np.abs(self.v - v_old) / self.v),
                )
            )
        return _loop.StepReport(change, 0, values={"elbo": self.elbo})

    def finite(self):
        """False when the posterior or the ELBO is no longer finite (or a variance not positive)."""
        return bool(
            np.isfinite(self.elbo)
            and np.all(np.isfinite(self.mu))
            and np.all(np.isfinite(self.v))
            and np.all(self.v > 0)
        )


def run_vb(X, s, model, prior_T, max_iter, tol, callback_fn=None):
    """Fit q(w) = prod_m N(mu_m, v_m) to a Bayesian probit or logistic regression by coordinate ascent.

    Starts from mu = 0, v = 1 / prior_T. Each iteration updates the latent variables (probit:
    the truncated normals q(z); logistic: the Jaakkola-Jordan xi) and then every q(w_m) in order,
    and ends with the ELBO, which never decreases. The iterations run in the one loop of every
    fit (``fastcep._loop``).

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
    fit = VBFit(X, s, model, prior_T)
    callback = None
    if callback_fn is not None:

        def callback(info):
            return callback_fn(info.iteration, info.change, fit.mu.copy(), fit.v.copy(), fit.elbo)

    out = _loop.run(
        fit.step, max_iter=max_iter, tol=tol, callback=callback, finite=fit.finite, label=model, func=func,
        hint="check the scale of X and prior_T",
    )  # fmt: skip
    return {
        "mu": fit.mu,
        "v": fit.v,
        "n_iter": out.n_iter,
        "converged": out.converged,
        "stop_reason": out.stop_reason,
        "elapsed": list(out.trace.elapsed),
        "change": list(out.trace.change),
        "elbo": list(out.trace.elbo),
    }
