"""Bayesian probit and logistic regression with fully factorised Gaussian messages.

The engine behind ``fastcep.fit(X, y, model="probit" | "logistic", ...)``: it allocates the
message store, runs the damped parallel or the sequential schedule with the kernels of
``fastcep.kernels``, tests convergence and packs the result.
"""

import sys
import time

import numpy as np

from .. import _validation as V
from .._quadrature import gauss_hermite
from .._threads import num_threads
from ..kernels import CHUNK_ROWS
from ..kernels.glm import logistic, probit
from ..kernels.glm.schedules import METHOD_CODES, parallel_sweep, restore_improper, sequential_sweep
from ..kernels.glm.sweep import rebuild_posterior, reduce_posterior, work_buffers
from ..metrics import auc as _auc
from ..results import (
    GaussianPosterior,
    IterationInfo,
    RegressionSites,
    RegressionState,
    trace_from_lists,
)
from .kjit import N_FEATURES as KJIT_FEATURES
from .kjit import THRESHOLD as KJIT_THRESHOLD
from .kjit import KJITSweeps
from .vb import run_vb

MODELS = ("probit", "logistic")
METHODS = ("cep1", "cep2", "ep", "lp", "is", "vb", "kjit")
SCHEDULES = ("parallel", "sequential")
STOPPING = ("posterior", "paper")

#: initial (flat) site precision, DESIGN.md section 3
FLAT_PRECISION = 1e-6
#: damping="auto": start here, halve whenever the change of the posterior grows, down to the floor
AUTO_DAMPING_START = 0.1
AUTO_DAMPING_FLOOR = 0.005
AUTO_WINDOW = 50


DEFAULTS = {
    "prior_var": 1.0,
    "damping": "auto",
    "max_iter": 5000,
    "tol": 1e-5,
    "schedule": "parallel",
    "stopping": "posterior",
    "n_nodes": 9,
    "n_samples": 10_000,
    "threshold": KJIT_THRESHOLD,
    "n_features": KJIT_FEATURES,
}


class RegressionResult:
    """A fitted Bayesian probit or logistic regression.

    Attributes
    ----------
    posterior : GaussianPosterior
        ``mean`` and ``var``, arrays of shape (d,).
    model, method : str
    n_iter : int
        Iterations (sweeps over all messages) run.
    converged : bool
        True if the stopping rule was met before ``max_iter``.
    stop_reason : str
        "tol" (posterior rule met), "paper" (paper's rule met), "max_iter" or "callback".
    trace : Trace
        Per-iteration elapsed time, change, skipped messages.
    state : RegressionState
        Messages and posterior natural parameters, for ``fit(..., init_state=res.state)``.
    options : dict
        The options the fit ran with.
    """

    def __init__(self, model, method, posterior, n_iter, converged, stop_reason, trace, state, options):
        self.model = model
        self.method = method
        self.posterior = posterior
        self.n_iter = n_iter
        self.converged = converged
        self.stop_reason = stop_reason
        self.trace = trace
        self.state = state
        self.options = options

    def __repr__(self):
        return (
            f"RegressionResult(model={self.model!r}, method={self.method!r}, d={self.posterior.mean.size}, "
            f"n_iter={self.n_iter}, converged={self.converged}, stop_reason={self.stop_reason!r})"
        )

    def _predictive(self, X, y_sign=None):
        X = V.check_matrix(X, "X", "predict_proba", n_cols=self.posterior.mean.size)
        n = X.shape[0]
        p = np.empty(n)
        logp = np.empty(n if y_sign is not None else 0)
        ys = y_sign if y_sign is not None else np.empty(0)
        mu, v = self.posterior
        with num_threads(self.options.get("n_threads")):
            if self.model == "probit":
                probit.predictive(X, mu, v, p, logp, ys)
            else:
                logistic.predictive(X, mu, v, p, logp, ys)
        return p, logp

    def predict_proba(self, X):
        """Posterior predictive P(y = 1 | x) for each row of X.

        Parameters
        ----------
        X : array of shape (n_new, d)

        Returns
        -------
        ndarray of float64, shape (n_new,)
        """
        return self._predictive(X)[0]

    def predict(self, X):
        """Most probable label (0 or 1) for each row of X; shape (n_new,), int64."""
        return (self.predict_proba(X) > 0.5).astype(np.int64)

    def log_likelihood(self, X, y):
        """Mean log predictive probability of labels y at X (the test log-likelihood).

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,), labels in {0, 1}, {-1, 1} or bool

        Returns
        -------
        float
        """
        X = V.check_matrix(X, "X", "log_likelihood", n_cols=self.posterior.mean.size)
        s = V.check_labels(y, "y", "log_likelihood", X.shape[0])
        return float(np.mean(self._predictive(X, s)[1]))

    def auc(self, X, y):
        """Area under the ROC curve of ``predict_proba(X)`` against labels y."""
        X = V.check_matrix(X, "X", "auc", n_cols=self.posterior.mean.size)
        s = V.check_labels(y, "y", "auc", X.shape[0])
        return _auc(s > 0, self.predict_proba(X))


def _prior(prior_var, d, func):
    if np.ndim(prior_var) == 0:
        pv = V.check_float(prior_var, "prior_var", func, low=0.0, low_open=True)
        return np.full(d, 1.0 / pv)
    arr = np.asarray(prior_var, dtype=np.float64)
    if arr.shape != (d,) or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise V.param_error("prior_var", func, f"a float > 0 or an array of {d} floats > 0", prior_var)
    return 1.0 / arr


def _initial_state(X, prior_T, init_state, func):
    n, d = X.shape
    if init_state is None:
        tau = np.empty((n, d))
        step = max(1, (1 << 21) // d)
        for lo in range(0, n, step):  # blockwise: no full-size boolean temporary
            np.copyto(tau[lo : lo + step], np.where(X[lo : lo + step] != 0.0, FLAT_PRECISION, 0.0))
        nu = np.zeros((n, d))
    else:
        if not isinstance(init_state, RegressionState):
            raise V.param_error(
                "init_state", func, "a RegressionState (res.state) or None", init_state, TypeError
            )
        tau = np.array(init_state.sites.tau, dtype=np.float64, order="C")
        nu = np.array(init_state.sites.nu, dtype=np.float64, order="C")
        if tau.shape != (n, d) or nu.shape != (n, d):
            raise V.param_error("init_state", func, f"messages of shape {(n, d)}", f"shape {tau.shape}")
        if not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu)) and np.all(tau >= 0)):
            raise V.param_error("init_state", func, "finite messages with precisions >= 0", "bad values")
    return tau, nu


def _fit_vb(X, s, model, prior_T, max_iter, tol, callback, options):
    """Mean-field VB (``fastcep.vb``) packed as a ``RegressionResult`` (no site messages: state
    None; the evidence lower bound per iteration in ``trace.elbo``; damping does not apply)."""
    start = time.perf_counter()

    def relay(it, change, mu, v, elbo):
        now = time.perf_counter() - start
        return callback(IterationInfo(it, change, now, 0, GaussianPosterior(mu, v)))

    out = run_vb(X, s, model, prior_T, max_iter, tol, relay if callback is not None else None)
    k = out["n_iter"]
    trace = trace_from_lists(
        out["elapsed"], out["change"], [0] * k, [np.nan] * k, [np.nan] * k, elbo=out["elbo"]
    )
    post = GaussianPosterior(out["mu"], out["v"])
    return RegressionResult(
        model, "vb", post, k, out["converged"], out["stop_reason"], trace, None, dict(options, damping=None)
    )


def _sweep_key(base_key, it):
    """The uint64 random key of sweep ``it`` (importance sampling): fresh draws every sweep."""
    return np.random.SeedSequence([base_key, it]).generate_state(1, np.uint64)[0]


def fit_regression(
    X,
    y,
    model,
    method="cep1",
    *,
    prior_var=DEFAULTS["prior_var"],
    damping=DEFAULTS["damping"],
    max_iter=DEFAULTS["max_iter"],
    tol=DEFAULTS["tol"],
    schedule=DEFAULTS["schedule"],
    stopping=DEFAULTS["stopping"],
    n_nodes=DEFAULTS["n_nodes"],
    n_samples=DEFAULTS["n_samples"],
    threshold=DEFAULTS["threshold"],
    n_features=DEFAULTS["n_features"],
    n_threads=None,
    callback=None,
    seed=None,
    init_state=None,
    verbose=False,
):
    """Fit a Bayesian probit or logistic regression; see ``fastcep.fit`` for the parameters.

    method="kjit" (logistic model): EP whose tilted moments come from a
    message operator learned just in time (``fastcep.kjit``) with the importance-sampling row of
    method "is" as its oracle. ``threshold`` (float >= 0, default 1e-3): a row whose operator
    predictive variance exceeds it asks the oracle (0: every row does, which reproduces method
    "is" exactly); ``n_features`` (int >= 1, default 200): the operator's random features. The
    rows sent to the oracle in each sweep are in ``res.options["oracle_calls"]``.
    """
    func = "fit"
    V.check_choice(model, "model", func, MODELS)
    V.check_choice(method, "method", func, METHODS)
    X = V.check_matrix(X, "X", func)
    s = V.check_labels(y, "y", func, X.shape[0])
    n, d = X.shape
    prior_T = _prior(prior_var, d, func)
    if isinstance(damping, str) and damping == "auto":
        rho, adaptive = AUTO_DAMPING_START, True
    else:
        if isinstance(damping, str):
            raise V.param_error("damping", func, "a float in (0, 1] or 'auto'", damping)
        rho, adaptive = V.check_float(damping, "damping", func, low=0.0, high=1.0, low_open=True), False
    max_iter = V.check_int(max_iter, "max_iter", func, low=1)
    tol = V.check_float(tol, "tol", func, low=0.0)
    V.check_choice(schedule, "schedule", func, SCHEDULES)
    V.check_choice(stopping, "stopping", func, STOPPING)
    n_nodes = V.check_int(n_nodes, "n_nodes", func, low=2, high=200)
    n_threads = V.check_n_threads(n_threads, func)
    callback = V.check_callback(callback, func)
    n_samples = V.check_int(n_samples, "n_samples", func, low=2)
    threshold = V.check_float(threshold, "threshold", func, low=0.0)
    n_features = V.check_int(n_features, "n_features", func, low=1, high=5000)
    if method == "kjit" and model != "logistic":
        raise ValueError(
            f"fit: method='kjit' is not available for model={model!r}: "
            "kjit is implemented for the logistic model, as in the paper."
        )
    # used by methods "is" and "kjit" only; the other methods are deterministic
    rng = V.check_seed(seed, func)
    base_key = int(rng.integers(0, 2**63))
    options = dict(
        prior_var=prior_var,
        damping=rho,
        max_iter=max_iter,
        tol=tol,
        schedule=schedule,
        stopping=stopping,
        n_nodes=n_nodes,
        n_samples=n_samples,
        threshold=threshold,
        n_features=n_features,
        n_threads=n_threads,
        seed=seed,
    )

    if method == "vb":
        if init_state is not None:
            raise ValueError("fit: init_state is not supported with method='vb' (it has no site messages).")
        return _fit_vb(X, s, model, prior_T, max_iter, tol, callback, options)
    tau, nu = _initial_state(X, prior_T, init_state, func)
    prior_N = np.zeros(d)
    T, N, mu, v = (np.empty(d) for _ in range(4))
    nodes, weights = gauss_hermite(n_nodes) if model == "logistic" else gauss_hermite(2)
    code = METHOD_CODES.get((model, method))  # (None for kjit: its own sweep)
    chunk = CHUNK_ROWS
    n_chunks = -(-n // chunk)
    # (drawn after base_key: method "kjit" with threshold 0 gets the draws of method "is")
    kjit = KJITSweeps(n, n_chunks, n_features, threshold, rng) if method == "kjit" else None
    # methods "is" and "kjit" keep negative site precisions (importance.py): in the parallel
    # schedule their sum can leave a weight's posterior or cavity improper, and an improper
    # cavity makes every row skip its messages, for good; such a weight keeps its messages from
    # before the sweep (kernels.regression.restore_improper; two copies of the messages). In the
    # sequential schedule a row's damped update is a convex combination of two proper posteriors
    # and no guard is needed. The other methods never emit a negative site precision.
    guard = schedule == "parallel" and method in ("is", "kjit")
    if schedule == "parallel":
        pT = np.empty((n_chunks, d))
        pN = np.empty((n_chunks, d))
        skipped_c = np.zeros(n_chunks, dtype=np.int64)
        work = work_buffers(n_chunks, d)
        if guard:
            old_t, old_n = np.empty((n, d)), np.empty((n, d))
            restored = np.zeros(d, dtype=np.int64)
    else:
        order = np.arange(n, dtype=np.int64)
        bufs = [np.empty(d) for _ in range(4)] + [work_buffers(1, d)[0]]

    elapsed, changes, skips, paper, damps = [], [], [], [], []
    best, since = np.inf, 0
    converged = False
    stop_reason = "max_iter"
    start = time.perf_counter()
    with num_threads(n_threads):
        rebuild_posterior(prior_T, prior_N, tau, nu, chunk, T, N, mu, v)
        for it in range(1, max_iter + 1):
            mu_old = mu.copy()
            v_old = v.copy()
            nu_old = nu.copy() if stopping == "paper" else None
            key = _sweep_key(base_key, it)
            n_restored = 0
            if guard:
                np.copyto(old_t, tau)
                np.copyto(old_n, nu)
            if schedule == "parallel":
                if kjit is not None:
                    kjit.sweep(X, s, tau, nu, T, N, rho, n_samples, key, chunk, pT, pN, skipped_c, work)
                else:
                    parallel_sweep(
                        code, X, s, tau, nu, T, N, mu, v, rho, nodes, weights, chunk, pT, pN, skipped_c,
                        work, n_samples, key,
                    )  # fmt: skip
                reduce_posterior(prior_T, prior_N, pT, pN, T, N, mu, v)
                n_skipped = int(skipped_c.sum())
                if guard:
                    restore_improper(T, tau, nu, old_t, old_n, restored)
                    n_restored = int(restored.sum())
                    if n_restored:
                        n_skipped += n_restored
                        rebuild_posterior(prior_T, prior_N, tau, nu, chunk, T, N, mu, v)
            else:
                if kjit is not None:
                    n_skipped = kjit.sequential_sweep(
                        X, s, tau, nu, T, N, mu, v, rho, n_samples, key, order, *bufs
                    )
                else:
                    n_skipped = sequential_sweep(
                        code, X, s, tau, nu, T, N, mu, v, rho, nodes, weights, n_samples, key, order, *bufs
                    )  # fmt: skip
                n_skipped = int(n_skipped)
                # exact rebuild: no drift from the incremental updates
                rebuild_posterior(prior_T, prior_N, tau, nu, chunk, T, N, mu, v)
            if kjit is not None:
                kjit.learn()
            sd = np.sqrt(v)
            change = float(max(np.max(np.abs(mu - mu_old) / sd), np.max(np.abs(v - v_old) / v)))
            pchange = float(np.mean(np.sum((nu - nu_old) ** 2, axis=1))) if nu_old is not None else np.nan
            now = time.perf_counter() - start
            elapsed.append(now)
            changes.append(change)
            skips.append(n_skipped)
            paper.append(pchange)
            damps.append(rho)
            if adaptive:
                # no new smallest change for AUTO_WINDOW sweeps: the parallel updates overshoot
                # (divergence or a limit cycle), so damp harder; fixed points do not depend on
                # the damping, only the path to them does
                if change < best:
                    best, since = change, 0
                else:
                    since += 1
                if since >= AUTO_WINDOW and rho > AUTO_DAMPING_FLOOR:
                    rho = max(0.5 * rho, AUTO_DAMPING_FLOOR)
                    best, since = np.inf, 0
            if verbose:
                oracle = f", oracle rows {kjit.oracle_calls[-1]}" if kjit is not None else ""
                print(
                    f"[fastcep] {model}/{method} iter {it}: change {change:.3e}, "
                    f"skipped {n_skipped}{oracle}, {now:.3f} s",
                    file=sys.stderr,
                )
            if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(v))):
                raise FloatingPointError(
                    f"fit: the posterior became non-finite at iteration {it} ({model}/{method}); "
                    "try a smaller 'damping'."
                )
            # (a sweep whose update the guard undid, in part, is no evidence of convergence)
            if n_restored == 0 and stopping == "posterior" and change < tol:
                converged, stop_reason = True, "tol"
            elif n_restored == 0 and stopping == "paper" and pchange < tol:
                converged, stop_reason = True, "paper"
            if callback is not None:
                post = GaussianPosterior(mu.copy(), v.copy())
                if callback(IterationInfo(it, change, now, n_skipped, post)) and not converged:
                    stop_reason = "callback"
                    break
            if converged:
                break
    trace = trace_from_lists(elapsed, changes, skips, paper, damps)
    if kjit is not None:
        options["oracle_calls"] = list(kjit.oracle_calls)
    state = RegressionState(RegressionSites(tau, nu), T, N)
    return RegressionResult(
        model, method, GaussianPosterior(mu, v), it, converged, stop_reason, trace, state, options
    )
