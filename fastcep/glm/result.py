"""What a regression fit returns: the posterior over the weights, predictions, the trace and the
resumable state."""

import numpy as np

from .. import _validation as V
from .._quadrature import gauss_hermite
from .._threads import num_threads
from ..kernels.glm import generic
from ..kernels.likelihoods import REGISTRY
from ..metrics import auc as _auc
from ..results import GaussianPosterior

#: nodes of the rule for the predictive density of likelihoods without a closed form
PREDICTIVE_NODES = 60
#: rows larger than this (largest |x_j|) are predicted at this scale: beyond it the link's own
#: scale is nothing against the spread of x.w, p(y | f) is a step at f = 0 for both binary
#: links, and the predictive is its limit Phi(x.mu / sqrt(sum x^2 v)), which the scaled row
#: gives to rounding (while sum x^2 v itself would overflow near 1e154)
ROW_SCALE_LIMIT = 1e100


class RegressionResult:
    """A fitted Bayesian probit or logistic regression.

    Attributes
    ----------
    posterior : GaussianPosterior
        ``mean`` and ``var`` of the weights, arrays of shape (d,).
    intercept : GaussianPosterior or None
        ``mean`` and ``var`` (floats) of the intercept; None if the fit had none
        (``fit_intercept=False``).
    model, method : str
    n_iter : int
        Iterations (sweeps over all messages) run.
    converged : bool
        True if the stopping rule was met before ``max_iter``.
    stop_reason : str
        "tol" (posterior rule met), "paper" (paper's rule met), "max_iter" or "callback".
    trace : Trace
        Per-iteration elapsed time, change, skipped messages.
    state : RegressionState or VBState
        Messages and posterior natural parameters (method "vb": q(w)), for
        ``fit(..., init_state=res.state)``.
    options : dict
        The options the fit ran with.
    """

    def __init__(
        self, model, method, posterior, n_iter, converged, stop_reason, trace, state, options, intercept=None
    ):
        self.model = model
        self.method = method
        self.posterior = posterior
        self.intercept = intercept
        self.n_iter = n_iter
        self.converged = converged
        self.stop_reason = stop_reason
        self.trace = trace
        self.state = state
        self.options = options

    @classmethod
    def of(cls, model, method, mu, v, n_iter, converged, stop_reason, trace, state, options):
        """The result of a fit whose posterior over (weights, intercept if fitted) is mu, v."""
        intercept = None
        if options.get("fit_intercept"):
            intercept = GaussianPosterior(float(mu[-1]), float(v[-1]))
            mu, v = mu[:-1], v[:-1]
        post = GaussianPosterior(mu, v)
        return cls(model, method, post, n_iter, converged, stop_reason, trace, state, options, intercept)

    def __repr__(self):
        return (
            f"RegressionResult(model={self.model!r}, method={self.method!r}, d={self.posterior.mean.size}, "
            f"n_iter={self.n_iter}, converged={self.converged}, stop_reason={self.stop_reason!r})"
        )

    def _predictive(self, X, y_sign=None):
        X = V.check_matrix(X, "X", "predict_proba", n_cols=self.posterior.mean.size)
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
        b = self.intercept if self.intercept is not None else (0.0, 0.0)
        with num_threads(self.options.get("n_threads")):
            # (the built-ins' predictive densities are closed forms or their own rules: the
            # Gauss-Hermite rule serves likelihoods without one)
            nodes, weights = gauss_hermite(PREDICTIVE_NODES)
            generic.predictive(REGISTRY[self.model](), X, mu, v, *b, nodes, weights, p, logp, ys)
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
        """Most probable label for each row of X, shape (n_new,): 0 or 1 (int64), or one of the
        two classes when the fit's labels were strings (``options["classes"]``)."""
        label = (self.predict_proba(X) > 0.5).astype(np.int64)
        classes = self.options.get("classes")
        return np.asarray(classes)[label] if classes is not None else label

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
        s = V.check_labels(y, "y", "log_likelihood", X.shape[0], self.options.get("classes"))
        return float(np.mean(self._predictive(X, s)[1]))

    def auc(self, X, y):
        """Area under the ROC curve of ``predict_proba(X)`` against labels y."""
        X = V.check_matrix(X, "X", "auc", n_cols=self.posterior.mean.size)
        s = V.check_labels(y, "y", "auc", X.shape[0], self.options.get("classes"))
        return _auc(s > 0, self.predict_proba(X))

    def plot_convergence(self, ax=None):
        """The trace's change against iteration and time: ``fastcep.plot.convergence``."""
        from ..plot import convergence

        return convergence(self, ax=ax)
