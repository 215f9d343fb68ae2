"""What a regression fit returns: the posterior over the weights, predictions, the trace and the
resumable state."""

import warnings

import numpy as np
import scipy.sparse as sp

from .. import _validation as V
from .._quadrature import gauss_hermite
from .._threads import num_threads
from ..kernels.glm import generic
from ..kernels.glm import sparse as sparse_kernels
from ..likelihoods import check_offset, log1p_prediction
from ..likelihoods import resolve as resolve_likelihood
from ..metrics import auc as _auc
from ..results import GaussianPosterior, WeightDraws, save_result
from . import sparse as SP
from .sparse import moments as sparse_moments

#: nodes of the rule for the predictive density of likelihoods without a closed form
PREDICTIVE_NODES = 60
#: rows larger than this (largest |x_j|) are predicted at this scale: beyond it the link's own
#: scale is nothing against the spread of x.w, p(y | f) is a step at f = 0 for both binary
#: links, and the predictive is its limit Phi(x.mu / sqrt(sum x^2 v)), which the scaled row
#: gives to rounding (while sum x^2 v itself would overflow near 1e154)
ROW_SCALE_LIMIT = 1e100


class RegressionResult:
    """A fitted Bayesian regression (a generalised linear model of any likelihood).

    Attributes
    ----------
    posterior : GaussianPosterior
        ``mean`` and ``var`` of the weights, arrays of shape (d,).
    intercept : GaussianPosterior or None
        ``mean`` and ``var`` (floats) of the intercept b of f = x.w + b on the user's scale; None
        if the fit had none (``fit_intercept=False``). A centred fit (``center``) reports b's
        marginal under the posterior: b = b_c - center.w, mean ``b_c.mean - center @ mean``,
        variance ``b_c.var + sum(center**2 * var)``.
    center : ndarray of shape (d,) or None
        The features' training means a fit with an intercept was centred on (``center=True``,
        the default), else None.
    centered_intercept : GaussianPosterior or None
        A centred fit's intercept b_c = b + center.w, the linear predictor at the features'
        mean: the parameter of the prior N(0, intercept_var), fitted with the weights in a
        factorised posterior (the predictions use it: f = (x - center).w + b_c); None if the
        fit was not centred.
    model, method : str
        ``model`` is the likelihood's name ("probit", "poisson", ...).
    likelihood : fastcep.likelihoods.Likelihood
        The likelihood, its learned parameters filled in.
    n_iter : int
        Iterations (sweeps over all messages) run.
    converged : bool
        True if the stopping rule was met before ``max_iter``.
    stop_reason : str
        "tol" (posterior rule met), "paper" (paper's rule met), "max_iter", "callback", or "refused"
        (sweeps settled while over 10 % of the messages were refused: no fixed point; it warns).
    trace : Trace
        Per-iteration elapsed time, change, skipped messages.
    state : RegressionState or VBState
        Messages and posterior natural parameters (method "vb": q(w)), for
        ``fit(..., init_state=res.state)``.
    options : dict
        The options the fit ran with.
    features : tuple of str or None
        The names of the features, in the order of the weights: a loaded model file's (else None).
    target : str or None
        The label column's name: a loaded model file's (else None).
    """

    def __init__(
        self, model, method, posterior, n_iter, converged, stop_reason, trace, state, options, intercept=None,
        likelihood=None, center=None, features=None, target=None, online=None,
    ):  # fmt: skip
        """``intercept``: the fitted intercept's posterior, that of b_c when ``center`` (d,) is
        given (a centred fit), else that of b. ``online``: the state of a result that had
        absorbed rows, as ``online_state`` gives it (a saved result's, to absorb on bit for bit)."""
        self.model = model
        self.likelihood = likelihood if likelihood is not None else resolve_likelihood(model)
        self.method = method
        self._posterior = posterior
        self._online = None  # (``update``: the natural parameters of the posterior it absorbs into)
        self.center = None if center is None else np.asarray(center, dtype=np.float64)
        self.centered_intercept = intercept if center is not None else None
        if center is not None and intercept is not None:
            shift, mu, v = self.center, posterior.mean, posterior.var
            intercept = GaussianPosterior(
                float(intercept.mean - shift @ mu), float(intercept.var + (shift * shift) @ v)
            )
        self.intercept = intercept
        self.features = None if features is None else tuple(features)
        self.target = target
        self.n_iter = n_iter
        self.converged = converged
        self.stop_reason = stop_reason
        self.trace = trace
        self.state = state
        self.options = options
        if online is not None:
            from .online import Online

            self._online = Online.restored(online, *self._prior_natural(intercept is not None))

    @classmethod
    def of(
        cls, model, method, mu, v, n_iter, converged, stop_reason, trace, state, options, likelihood=None,
        center=None,
    ):  # fmt: skip
        """The result of a fit whose posterior over (weights, intercept if fitted) is mu, v; a
        centred fit's intercept is b_c, on the features centred at ``center``."""
        intercept = None
        if options.get("fit_intercept"):
            intercept = GaussianPosterior(float(mu[-1]), float(v[-1]))
            mu, v = mu[:-1], v[:-1]
        post = GaussianPosterior(mu, v)
        return cls(
            model, method, post, n_iter, converged, stop_reason, trace, state, options, intercept, likelihood,
            center,
        )  # fmt: skip

    @classmethod
    def prior(cls, model, method, d, options=None):
        """The prior as a result, no rows absorbed yet: weights N(0, prior_var), an intercept
        N(0, intercept_var) when ``options["fit_intercept"]``; a stream's start for ``update``
        (``options``: prior_var, fit_intercept, intercept_var, tol, n_threads; those not given
        take ``fastcep.fit``'s defaults)."""
        from .. import _options as O
        from .._loop import Trace

        func = "RegressionResult.prior"
        method = O.spec("method", "regression").constraint.check(method, "method", func)
        d = V.check_int(d, "d", func, low=1)
        names = ("prior_var", "fit_intercept", "intercept_var", "tol", "n_threads")
        given = dict(options or {})
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"{func}: unknown option {unknown[0]!r}; its options are {', '.join(names)}.")
        given = {k: O.spec(k, "regression", method).constraint.check(v, k, func) for k, v in given.items()}
        defaults = O.defaults("regression", method)
        options = {**{name: defaults[name] for name in names}, **given}
        likelihood = resolve_likelihood(model, func)
        V.prior_precisions(options["prior_var"], d, func)  # (an array's shape and values)
        var = np.array(np.broadcast_to(np.asarray(options["prior_var"], dtype=np.float64), (d,)))
        b = GaussianPosterior(0.0, float(options["intercept_var"])) if options["fit_intercept"] else None
        opts = dict(options, classes=None, center=False)
        post = GaussianPosterior(np.zeros(d), var)
        trace = Trace.from_columns(0)
        return cls(likelihood.name, method, post, 0, False, "prior", trace, None, opts, b, likelihood)

    @property
    def posterior(self):
        """The posterior over the weights (``GaussianPosterior``: mean, var of shape (d,))."""
        if self._online is not None and self._online.sync():
            self._write_back(np.arange(self._online.T.shape[0]))
        return self._posterior

    def update(
        self, X, y, offset=None, forget=None, max_iter=None, tol=None, damping="auto", schedule="sequential"
    ):  # fmt: skip
        """Absorb a batch of rows into this posterior, in place (assumed density filtering with
        CEP): the posterior so far is the batch's prior, the batch's sites (one per nonzero) are
        fitted by up to ``max_iter`` sweeps of the fit's method (``schedule`` "sequential", the
        default, or "parallel"; ``damping`` "auto", the fit's rule, or a number in (0, 1]: a
        row's sites move together, and undamped they can swing between two states for ever)
        until they change by less than ``tol``,
        absorbed and dropped, so memory does not grow with the stream. Only the weights of the
        batch's nonzero columns, and the intercept, are touched: a small update costs
        O(nnz log nnz) and allocates nothing of the size of d (a centred fit's rows, x - center,
        are dense; a batch of d / 8 nonzeros or more costs O(nnz + d), ``online.DENSE_BATCH``).

        Parameters
        ----------
        X : array (n, d) or scipy.sparse matrix of the fit's width
        y : array (n,)
            Labels or values, as the fit took them (its classes, for labels given as classes).
        offset : array (n,) or None
            A known term of each row's f, as ``fit``'s.
        forget : float in [0, 1), or None (0.0, ``online.FORGET``)
            Forgetting per row seen: the natural parameters move toward the prior, T <- (1 - f)
            T + f T0 (N likewise) for each row, so that a drifting rate is tracked. Applied
            lazily, per weight, when a batch touches it or the posterior is read; (1 - f)^n for a
            batch of n rows, so the batch size does not change it.
        max_iter, tol : int, float
            Sweeps of a batch at most (None: 200, ``online.UPDATE_SWEEPS``) and the stop rule's
            tolerance (None: the fit's ``tol``). ``max_iter=1`` with the sequential schedule is
            one pass of assumed density filtering row by row, as AdPredictor's: each row's sites
            are fitted once against the posterior the rows before it left and absorbed at once
            (damped by ``damping`` if a number), with forgetting applied row by row. It needs no
            batch layout (O(nnz), the fastest way through a click log) and gives the same bits
            however the rows are batched.

        Returns
        -------
        self (updated; ``options["update_sweeps"]`` counts the sweeps of every update and
        ``options["rows_absorbed"]`` the rows; ``n_iter`` and ``trace`` stay the fit's)
        """
        return self.absorb("update", X, y, offset, forget, max_iter, tol, damping, schedule)

    def absorb(self, func, X, y, offset=None, forget=None, max_iter=None, tol=None, damping="auto",
               schedule="sequential"):  # fmt: skip
        """``update``, its errors and warnings starting with the public call ``func`` ("update",
        an estimator's "partial_fit")."""
        from . import online

        if self.method not in SP.METHODS:
            raise ValueError(
                f"{func}: a {self.method!r} fit cannot absorb rows; the methods with online updates are "
                + ", ".join(repr(m) for m in SP.METHODS)
            )
        if self.likelihood.learned:
            names = self.likelihood.learned
            raise ValueError(f"{func}: the likelihood's parameters {names} must have values to absorb rows")
        forget = (
            online.FORGET
            if forget is None
            else V.check_float(forget, "forget", func, 0.0, 1.0, high_open=True)
        )
        max_iter = online.UPDATE_SWEEPS if max_iter is None else V.check_int(max_iter, "max_iter", func, 1)
        tol = self.options.get("tol", 1e-5) if tol is None else V.check_float(tol, "tol", func, 0.0)
        if damping != "auto":
            damping = V.check_float(damping, "damping", func, 0.0, 1.0, low_open=True)
        V.check_choice(schedule, "schedule", func, ("sequential", "parallel"))
        d = self._posterior.mean.size
        X = V.check_rows(X, "X", func, n_cols=d)
        from .rules import check_feature_scale

        check_feature_scale(X, func)
        if self.likelihood.binary:
            s = V.check_labels(y, "y", func, X.shape[0], self.options.get("classes"))
        else:
            s = self.likelihood.check(y, "y", func, X.shape[0])
        off = check_offset(offset, X.shape[0], func)
        if self.center is not None:  # (the centred fit's rows: dense)
            X = (X.toarray() if V.is_sparse(X) else X) - self.center
        A = X if V.is_sparse(X) else sp.csr_array(X)  # (checked: float64, no explicit zeros)
        bias = self.centered_intercept if self.center is not None else self.intercept
        if bias is not None:
            A = SP.with_intercept_column(A)
        if self._online is None:
            self._online = self._online_state(bias)
        self._online.set_forget(forget)
        with num_threads(self.options.get("n_threads")):
            if max_iter == 1 and schedule == "sequential":  # (one pass: assumed density filtering by rows)
                rho = 1.0 if damping == "auto" else damping
                mean, var = self._posterior
                self._online.pass_rows(A, s, off, self.likelihood, self.method, rho, mean, var, func)
                cols, sweeps, converged = np.array([d], dtype=np.int64), 1, True
            else:
                cols, sweeps, converged, skipped = self._online.absorb(
                    A, s, off, self.likelihood, self.method, schedule, damping, max_iter, tol, func
                )
        self._write_back(cols)
        # (n_iter and the trace stay the fit's: a saved model holds both, and they must agree)
        self.options["update_sweeps"] = self.options.get("update_sweeps", 0) + sweeps
        self.options["rows_absorbed"] = self.options.get("rows_absorbed", 0) + X.shape[0]
        self.state = None  # (the sites of the batches are dropped)
        if not converged:
            from .._loop import ConvergenceWarning, outside_the_package

            warnings.warn(
                f"{func}: the batch's sweeps stopped at max_iter={max_iter} before its change fell below "
                f"tol={tol}; raise max_iter, or damp more (damping=0.1)",
                ConvergenceWarning,
                stacklevel=outside_the_package(),
            )
        return self

    def online_state(self):
        """What an online update absorbs into, for a file to keep (``RegressionResult(...,
        online=)`` restores it): a dict of T, N (natural parameters, an intercept's last) and seen
        (int64) arrays and rows, forget, pending; None if no rows were absorbed."""
        on = self._online
        if on is None:
            return None
        return {
            "T": on.T,
            "N": on.N,
            "seen": on.seen,
            "rows": on.rows,
            "forget": on.forget,
            "pending": on.pending,
        }

    def _online_state(self, bias):
        """The natural parameters of the posterior (weights, then the intercept's if fitted)
        and of the prior, for ``update``."""
        from .online import Online

        mean, var = self._posterior
        T, N = 1.0 / var, mean / var
        if bias is not None:
            T = np.append(T, 1.0 / bias.var)
            N = np.append(N, bias.mean / bias.var)
        return Online(T, N, *self._prior_natural(bias is not None))

    def _prior_natural(self, with_bias):
        """(T0, N0) of the prior of the weights (and the intercept's last, ``with_bias``)."""
        d = self._posterior.mean.size
        T0 = 1.0 / np.broadcast_to(np.asarray(self.options.get("prior_var", 1.0), dtype=np.float64), (d,))
        if with_bias:
            T0 = np.append(T0, 1.0 / self.options.get("intercept_var", 100.0))
        return T0, np.zeros_like(T0)

    def _write_back(self, cols):
        """The posterior means and variances of the weights ``cols`` (intercept's index: d) from
        the online state, in place."""
        on, d = self._online, self._posterior.mean.size
        w = cols[cols < d]
        self._posterior.mean[w] = on.N[w] / on.T[w]
        self._posterior.var[w] = 1.0 / on.T[w]
        if on.T.shape[0] > d:
            b = GaussianPosterior(float(on.N[d] / on.T[d]), float(1.0 / on.T[d]))
            if self.center is not None:
                self.centered_intercept = b
                mu, v = self._posterior
                b = GaussianPosterior(float(b.mean - self.center @ mu), float(b.var + (self.center**2) @ v))
            self.intercept = b

    def _linear(self, X):
        """The rows as the fit saw them and the intercept that goes with them: (X - center, b_c)
        for a centred fit, else (X, b); (0, 0) without an intercept."""
        if self.centered_intercept is not None:
            return X - self.center, self.centered_intercept
        return X, (self.intercept if self.intercept is not None else (0.0, 0.0))

    def __repr__(self):
        return (
            f"RegressionResult(model={self.model!r}, method={self.method!r}, d={self.posterior.mean.size}, "
            f"n_iter={self.n_iter}, converged={self.converged}, stop_reason={self.stop_reason!r})"
        )

    def _predictive(self, X, y_sign=None, offset=None):
        X = V.check_rows(X, "X", "predict_proba", n_cols=self.posterior.mean.size)
        off = check_offset(offset, X.shape[0], "predict")
        if V.is_sparse(X):
            return self._sparse_predictive(X, y_sign, off)
        X, b = self._linear(X)
        scale = np.max(np.abs(X), axis=1) if X.size else np.zeros(0)
        huge = scale > ROW_SCALE_LIMIT
        if np.any(huge):
            X = X.copy()
            X[huge] *= (ROW_SCALE_LIMIT / scale[huge])[:, None]
        n = X.shape[0]
        p = np.empty(n)
        logp = np.empty(n if y_sign is not None else 0)
        ys = y_sign if y_sign is not None else np.empty(0)
        mu, v = self.posterior
        with num_threads(self.options.get("n_threads")):
            # (the built-ins' predictive densities are closed forms or their own rules: the
            # Gauss-Hermite rule serves likelihoods without one)
            nodes, weights = gauss_hermite(PREDICTIVE_NODES)
            predictive = self.likelihood.driver(generic.predictive)
            predictive(self.likelihood.kernel(), X, mu, v, *b, off, nodes, weights, p, logp, ys)
        return p, logp

    def _sparse_predictive(self, X, y_sign, off):
        """``_predictive`` of the rows of a CSR array (checked): f's moments by sparse products
        (``_sparse_latent``), then the likelihood's predictive density at them."""
        X = _scaled_rows(X, ROW_SCALE_LIMIT)
        mean, var = self._sparse_latent(X, off)
        n = X.shape[0]
        p = np.empty(n)
        logp = np.empty(n if y_sign is not None else 0)
        ys = y_sign if y_sign is not None else np.empty(0)
        with num_threads(self.options.get("n_threads")):
            nodes, weights = gauss_hermite(PREDICTIVE_NODES)
            predictive = self.likelihood.driver(sparse_kernels.predictive_from_moments)
            predictive(self.likelihood.kernel(), mean, var, nodes, weights, p, logp, ys)
        return p, logp

    def _sparse_latent(self, X, off):
        """(mean, var) (n,) of f = x.w + b (+ offset) at the rows of a CSR array X; a centred fit's
        rows are taken as x - center without making them dense: sum (x - c)^2 v = sum x^2 v -
        2 sum x c v + sum c^2 v."""
        mu, v = self.posterior
        mean, var = sparse_moments(X, mu, v)
        if self.centered_intercept is not None:
            c, b = self.center, self.centered_intercept
            mean = mean - c @ mu + b.mean
            var = np.maximum(var - 2.0 * (X @ (c * v)) + (c * c) @ v, 0.0) + b.var
        elif self.intercept is not None:
            mean = mean + self.intercept.mean
            var = var + self.intercept.var
        return (mean + off if off.size else mean), var

    def _binary_only(self, func):
        if not self.likelihood.binary:
            raise ValueError(
                f"{func}: the likelihood {self.likelihood!r} is not binary; use predict(X) for the "
                "predictive mean (and return_var=True for its variance)."
            )

    def latent(self, X, offset=None):
        """Posterior mean and variance (n_new,) of the linear predictor f = x.w (+ b, + offset) at
        each row."""
        X = V.check_rows(X, "X", "latent", n_cols=self.posterior.mean.size)
        off = check_offset(offset, X.shape[0], "latent")
        if V.is_sparse(X):
            return self._sparse_latent(X, off)
        mu, v = self.posterior
        X, b = self._linear(X)
        mean = X @ mu + b[0]
        return mean + off if off.size else mean, np.einsum("ij,ij,j->i", X, X, v) + b[1]

    def sample_weights(self, n, seed=None):
        """Draws of the weights (and the intercept) from the posterior, for Thompson sampling and
        for any expectation the predictive does not give.

        The posterior is the fit's factorised Gaussian: w_j ~ N(mean_j, var_j) independently, the
        intercept independent of them on the scale it was fitted on. A centred fit's intercept
        b_c is drawn, and the draw of b on the user's scale is b_c - center.w (so that x.w + b is
        the fitted (x - center).w + b_c, draw by draw).

        Parameters
        ----------
        n : int
            Draws.
        seed : None, int or Generator

        Returns
        -------
        WeightDraws
            ``weights`` (n, d) float64 and ``intercept`` (n,) float64, or None without one.
        """
        func = "sample_weights"
        n = V.check_int(n, "n", func, low=1)
        return self._draws(n, V.check_seed(seed, func), None)

    def _draws(self, n, rng, columns):
        """``WeightDraws`` of the weights at ``columns`` (an index array; None: all), then of the
        intercept; a centred fit draws every column (b = b_c - center.w needs them all)."""
        mu, v = self.posterior
        if columns is not None:
            mu, v = mu[columns], v[columns]
        W = mu + np.sqrt(v) * rng.standard_normal((n, mu.size))
        b = None
        if self.intercept is not None:
            fitted = self.centered_intercept if self.centered_intercept is not None else self.intercept
            b = fitted.mean + np.sqrt(fitted.var) * rng.standard_normal(n)
            if self.centered_intercept is not None:
                b = b - W @ self.center
        return WeightDraws(W, b)

    def predict_proba(self, X, draws=None, seed=None):
        """Posterior predictive P(y = 1 | x) for each row of X (binary likelihoods), or with
        ``draws`` the probabilities P(y = 1 | x, w) under draws of the weights from the posterior
        (Thompson sampling: pick the row whose drawn probability is largest).

        Parameters
        ----------
        X : array of shape (n_new, d), dense or scipy.sparse
        draws : int or None
            None: the predictive, averaged over the posterior. An int: that many draws of (w, b),
            shared by all rows (a draw is one model: the rows' probabilities under it are
            jointly drawn). For sparse rows of an uncentred fit only the weights of the columns
            the rows hold are drawn.
        seed : None, int or Generator
            The draws' random numbers (``draws`` only).

        Returns
        -------
        ndarray of float64, shape (n_new,), or (draws, n_new) with ``draws``
        """
        self._binary_only("predict_proba")
        if draws is None:
            return self._predictive(X)[0]
        func = "predict_proba"
        draws = V.check_int(draws, "draws", func, low=1)
        rng = V.check_seed(seed, func)
        X = V.check_rows(X, "X", func, n_cols=self.posterior.mean.size)
        if V.is_sparse(X) and self.centered_intercept is None:
            columns = np.unique(X.indices)
            local = np.searchsorted(columns, X.indices)
            X = sp.csr_array((X.data, local, X.indptr), shape=(X.shape[0], columns.size))
            W, b = self._draws(draws, rng, columns)
        else:
            W, b = self._draws(draws, rng, None)
        f = np.asarray((X @ W.T).T, dtype=np.float64)
        if b is not None:
            f += b[:, None]
        f = np.ascontiguousarray(f).reshape(-1)
        p = np.empty(f.size)
        with num_threads(self.options.get("n_threads")):
            nodes, weights = gauss_hermite(PREDICTIVE_NODES)
            link = self.likelihood.driver(sparse_kernels.predictive_from_moments)
            link(self.likelihood.kernel(), f, np.zeros(f.size), nodes, weights, p, np.empty(0), np.empty(0))
        return p.reshape(draws, -1)

    def predict(self, X, return_var=False, offset=None, scale=None):
        """Binary likelihoods: the most probable label for each row of X, shape (n_new,): 0 or 1
        (int64), or one of the two classes when the fit's labels were strings
        (``options["classes"]``). Others: the predictive mean E[y | x] (float64, (n_new,)), and
        with ``return_var`` its variance Var[y | x] too (the likelihood's closed forms of the
        moments of y when f ~ N(mean, var), ``Likelihood.mean_var``); ``offset`` (n_new,): the
        rows' offsets, as the fit's. ``scale="log1p"`` (the count likelihoods): the predictive
        mean of log(1 + y) instead, the point that minimises the square error on the log scale,
        and its variance (``Likelihood.log1p_moments``)."""
        if scale is not None:
            on_log = log1p_prediction(self.likelihood, *self.latent(X, offset), scale, "predict")
            return on_log if return_var else on_log[0]
        if not self.likelihood.binary:
            moments = self.likelihood.mean_var(*self.latent(X, offset))
            if moments is None:
                raise ValueError(
                    f"predict: the likelihood {self.likelihood!r} has no closed-form moments of y; "
                    "use latent(X) for the moments of f, or log_likelihood(X, y)."
                )
            return moments if return_var else moments[0]
        label = (self.predict_proba(X) > 0.5).astype(np.int64)
        classes = self.options.get("classes")
        return np.asarray(classes)[label] if classes is not None else label

    def log_likelihood(self, X, y, offset=None):
        """Mean log predictive probability of labels y at X (the test log-likelihood).

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,), labels in {0, 1}, {-1, 1} or bool

        Returns
        -------
        float
        """
        X = V.check_rows(X, "X", "log_likelihood", n_cols=self.posterior.mean.size)
        if self.likelihood.binary:
            s = V.check_labels(y, "y", "log_likelihood", X.shape[0], self.options.get("classes"))
        else:
            s = self.likelihood.check(y, "y", "log_likelihood", X.shape[0])
        return float(np.mean(self._predictive(X, s, offset)[1]))

    def rmse(self, X, y, offset=None, scale=None):
        """Root mean squared error of the predictive mean ``predict(X)`` against values y (the
        likelihoods of real values and counts); with ``scale="log1p"`` (counts) of the predictive
        mean of log(1 + y) against log(1 + y)."""
        values = self._values(X, y, "rmse")
        pred = self.predict(X, offset=offset, scale=scale)
        return float(np.sqrt(np.mean(((values if scale is None else np.log1p(values)) - pred) ** 2)))

    def deviance(self, X, y, offset=None):
        """Mean unit deviance of values y against the predictive mean (the GLM convention, as
        scikit-learn's ``mean_poisson_deviance``: Gaussian and Student-t the squared error,
        Poisson 2 (y log(y / m) - y + m), negative binomial with its dispersion r
        2 (y log(y / m) - (y + r) log((y + r) / (m + r)))); binary: -2 log P(y) under the
        predictive."""
        if self.likelihood.binary:
            return -2.0 * self.log_likelihood(X, y, offset)
        values = self._values(X, y, "deviance")
        unit = self.likelihood.unit_deviance(values, self.predict(X, offset=offset))
        if unit is None:
            raise ValueError(f"deviance: the likelihood {self.likelihood!r} has no unit deviance.")
        return float(np.mean(unit))

    def _values(self, X, y, func):
        X = V.check_rows(X, "X", func, n_cols=self.posterior.mean.size)
        if self.likelihood.binary:
            msg = f"{func}: the likelihood {self.likelihood!r} is binary; use auc or log_likelihood."
            raise ValueError(msg)
        return self.likelihood.check(y, "y", func, X.shape[0])

    def auc(self, X, y):
        """Area under the ROC curve of ``predict_proba(X)`` against labels y."""
        self._binary_only("auc")
        X = V.check_rows(X, "X", "auc", n_cols=self.posterior.mean.size)
        s = V.check_labels(y, "y", "auc", X.shape[0], self.options.get("classes"))
        return _auc(s > 0, self.predict_proba(X))

    def save(self, path, features=None, target="", force=False):
        """Write the result to ``path`` (``fastcep.save``; read it back with ``fastcep.load``)."""
        save_result(self, path, features, target, force)

    def plot_convergence(self, ax=None):
        """The trace's change against iteration and time: ``fastcep.plot.convergence``."""
        from ..plot import convergence

        return convergence(self, ax=ax)


def _scaled_rows(X, limit):
    """The CSR rows of X whose largest |x| exceeds ``limit`` scaled down to it (a copy; X itself
    when no row does): ``ROW_SCALE_LIMIT`` for sparse rows."""
    counts = np.diff(X.indptr)
    scale = np.zeros(X.shape[0])
    filled = counts > 0
    if X.nnz:
        scale[filled] = np.maximum.reduceat(np.abs(X.data), X.indptr[:-1][filled])
    huge = scale > limit
    if not np.any(huge):
        return X
    factor = np.where(huge, limit / np.where(huge, scale, 1.0), 1.0)
    out = X.copy()
    out.data = out.data * np.repeat(factor, counts)
    return out
