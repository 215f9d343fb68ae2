"""What a CP fit returns: the posterior of the embeddings, its resumable state, predictions."""

from typing import NamedTuple

import numpy as np

from .. import _validation as V
from .._models import is_generic
from .._threads import num_threads
from ..kernels import tensor as K
from ..likelihoods import log1p_prediction
from ..metrics import auc as _auc
from ..metrics import gaussian_log_likelihood
from ..metrics import rmse as _rmse
from ..results import save_result
from . import hyper as H
from . import likelihoods as CPL
from .layout import check_coords, check_values

POINT_METHODS = ("cp_wopt",)


class CPPosterior(NamedTuple):
    """Posterior over the embeddings (one Gaussian per object) and the noise precision."""

    means: list  #: per mode k, (d_k, R) posterior means
    covs: list  #: per mode k, (d_k, R, R) covariances, or (d_k, R) variances with covariance="diag"
    noise: tuple | None  #: (a, b) of the Gamma posterior of the noise precision (cp_gaussian)


class CPState(NamedTuple):
    """Messages and posterior natural parameters: resume a fit with ``init_state=``."""

    Lam: np.ndarray  #: (n, K, R, R) or (n, K, R) site precisions
    eta: np.ndarray  #: (n, K, R) site precision-times-means
    alpha: np.ndarray  #: (n,) Gamma shape messages (cp_gaussian)
    beta: np.ndarray  #: (n,) Gamma rate messages (cp_gaussian)
    hyper: object = None  #: the hierarchical prior's hyper-posterior (``HyperState``), or None
    #: a generic model's likelihood (``fastcep.likelihoods``), its learned parameters' current
    #: values; None for the hand-written models (cp_gaussian's noise posterior is in the messages)
    likelihood: object = None
    #: the SHA-256 of the entries the messages belong to (``tensor.layout.entries_digest``): a
    #: fit given this state as ``init_state`` on other entries refuses it (None: not checked)
    data_sha256: str | None = None
    #: the sequential schedule's generator of entry orders, at its position after the last
    #: iteration (``numpy.random.BitGenerator.state``), so that a resumed fit draws the orders the
    #: uninterrupted one would; None for the other schedules (or a state without it: the orders
    #: are drawn from ``seed``)
    rng_state: dict | None = None
    #: the iterations behind these messages (of this fit and of those it resumed): a resumed fit
    #: ends the noise's and the learned parameters' warm-up where the uninterrupted one would
    #: (None: unknown, taken as past the warm-up)
    iterations: int | None = None
    #: the posterior as the fit left it (P_Lam, P_eta, M, S, E2: ``kernels.tensor.CPStore``'s), so
    #: that a resumed fit starts from its bits rather than from prior + messages summed again in
    #: another order (None: summed again)
    posterior: tuple | None = None


class VMPState(NamedTuple):
    """A VMP fit's moments and noise posterior: resume it with ``init_state=`` (the values it saw
    standardized, as the engine fits them)."""

    M: np.ndarray  #: (n_obj, R) posterior means, every mode's objects in turn
    S: np.ndarray  #: (n_obj, R, R) posterior covariances
    b: float  #: rate of q(tau), the Gamma posterior of the noise precision (cp_gaussian; NaN else)
    #: (n_obj, R, R) E[u u^T] as the fit's kernels formed them, so that a resumed fit goes on with
    #: their bits (None: S + M M^T formed again, which differs in the last bits)
    E2: np.ndarray | None = None


class FactorState(NamedTuple):
    """A point estimate's factors: resume a CP-WOPT fit with ``init_state=`` (of the values it
    saw standardized, as the fit sees them)."""

    U: np.ndarray  #: (n_obj, R) factor rows, every mode's objects in turn


def eval_metric(result, coords, values):
    """Test AUC (binary models: cp_probit, cp_logistic) or RMSE (the others) of a fitted result on
    checked test entries."""
    if result.likelihood.binary:
        return result.auc(coords, values)
    return result.rmse(coords, values)


class CPResult:
    """A fitted Bayesian CP decomposition.

    Attributes
    ----------
    posterior : CPPosterior
        ``means[k]`` (d_k, R), ``covs[k]`` (d_k, R, R) or (d_k, R), ``noise`` (a, b) or None.
    model, method, covariance : str
        ``model`` is the model that ran: "cp_gaussian", "cp_probit", "cp_<name>" (a generic
        likelihood with its shorthand's defaults) or "cp" (any other likelihood).
    likelihood : fastcep.likelihoods.Likelihood
        The fitted likelihood, its learned parameters filled in: a generic model's as learned,
        cp_gaussian's ``Gaussian(var=E[1 / tau])`` (the noise variance its predictions add; its
        Gamma posterior is ``posterior.noise``), cp_probit's ``Bernoulli("probit")``.
    rank : int
    shape : tuple of int
    n_iter : int
    converged : bool
    stop_reason : str
        "tol", "max_iter" or "callback".
    trace : Trace
        Per-iteration elapsed time, change, skipped messages, damping; ``eval_metric`` holds the
        test RMSE (cp_gaussian, non-binary models) or AUC (cp_probit, binary models) of
        ``eval_set`` per iteration (NaN without it).
    state : CPState
    hyper : HyperState or None
        The hyper-posterior of a hierarchical prior (``prior="ard"`` or ``"wishart"``; of the
        standardized values, as the engine fits them), None with the fixed prior.
    effective_rank : int
        The rank columns that are not switched off: those whose means' power in the
        reconstruction, prod_k mean_j E[u^k_jr]^2, is above ``hyper.OFF_FRACTION`` (1e-6) of
        the largest column's. The columns the data do not carry fall to 1e-40 of it or less,
        so that a generous rank reports the rank the data carry; with ``prior="ard"`` their
        precisions grow too (``hyper``).
    options : dict
    point_estimate : bool
        True for the methods in ``POINT_METHODS`` (covariances zero, noise None, predictions
        the reconstruction).

    With ``standardize`` (cp_gaussian) the engines fit the standardized values (y - c) / s
    (``options["value_center"]``, 0 with the default "scale", and ``options["value_scale"]``);
    the posterior here is on the scale of y: the embeddings' means times s^(1/K) and covariances
    times s^(2/K) in every mode, the noise precision's rate times s^2, and with "center" the
    reconstruction plus c. ``state`` (the messages, for ``init_state``) stays standardized.
    """

    def __init__(
        self,
        model,
        method,
        covariance,
        rank,
        shape,
        M,
        S,
        noise,
        n_iter,
        converged,
        stop_reason,
        trace,
        state,
        options,
        standardized=True,
        hyper=None,
        likelihood=None,
    ):
        self.model = model
        self.method = method
        self.covariance = covariance
        self.rank = rank
        self.shape = tuple(shape)
        # cp_gaussian's standardization (files and options from before it: none): the engines fit
        # (y - c) / s; the embeddings of y are theirs times s^(1 / K) in every mode, so that the
        # reconstruction is s times theirs, and the noise precision of y theirs over s^2
        self._center = float(options.get("value_center", 0.0)) if model == "cp_gaussian" else 0.0
        scale = float(options.get("value_scale", 1.0)) if model == "cp_gaussian" else 1.0
        # (on the scale the engines fit: the columns' powers are products of squares over the
        # modes, which values x 1e200 would overflow; which columns are on does not change)
        self.effective_rank = int(np.count_nonzero(H.active_columns(M, np.cumsum([0, *shape]))))
        if standardized and scale != 1.0:
            g = scale ** (1.0 / len(shape))
            M, S = M * g, S * (g * g)
            if noise is not None:  # (inf, or 0, beyond 1e154 or below 1e-154: float64's limits)
                with np.errstate(over="ignore", under="ignore"):
                    noise = (float(noise[0]), float(np.float64(noise[1]) * scale * scale))
        self._M = M
        self._S = S
        self._offsets = np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)
        means = [M[self._offsets[k] : self._offsets[k + 1]] for k in range(len(shape))]
        covs = [S[self._offsets[k] : self._offsets[k + 1]] for k in range(len(shape))]
        self.posterior = CPPosterior(means, covs, noise)
        self.n_iter = n_iter
        self.converged = converged
        self.stop_reason = stop_reason
        self.trace = trace
        self.state = state
        self.options = options
        self.point_estimate = method in POINT_METHODS
        self.hyper = hyper
        self.likelihood = likelihood if likelihood is not None else CPL.fitted_likelihood(model, noise)

    def __repr__(self):
        return (
            f"CPResult(model={self.model!r}, method={self.method!r}, rank={self.rank}, shape={self.shape}, "
            f"n_iter={self.n_iter}, converged={self.converged}, stop_reason={self.stop_reason!r})"
        )

    def _f_moments(self, coords):
        coords, _ = check_coords(coords, self.shape, "predict")
        gidx = np.ascontiguousarray(coords + self._offsets[:-1][None, :])
        mean = np.empty(len(coords))
        var = np.empty(len(coords))
        if self.point_estimate:
            with num_threads(self.options.get("n_threads")):
                K.predict_mean(gidx, self._M, mean)
            var[:] = 0.0
            return mean, var
        E2 = second_moments(self._M, self._S, self.covariance)
        with num_threads(self.options.get("n_threads")):
            if self.covariance == "full":
                K.predict_full(gidx, self._M, E2, mean, var)
            else:
                K.predict_diag(gidx, self._M, E2, mean, var)
        return mean, var

    def predict(self, coords, return_var=False, scale=None):
        """Predictive mean (cp_gaussian and the other non-binary models) or P(y = 1) (cp_probit and
        the other binary models) at 0-based ``coords`` (n, K).

        ``scale="log1p"`` (the count models, cp_poisson and cp_negbin): the predictive mean of
        log(1 + y) instead, the point that minimises the square error on the log scale (E[y] is
        dominated by the tails), and with ``return_var`` its variance
        (``Likelihood.log1p_moments``).

        With ``return_var`` also the predictive variance: of y (Var f + E[1/tau]) for cp_gaussian,
        of the latent f for cp_probit; of y for the generic models (P (1 - P) for binary ones,
        for the others the closed forms of the fitted likelihood, ``res.likelihood.mean_var``,
        under f ~ N(mean, Var f); NotImplementedError for a likelihood without them, such as a
        ``Custom`` one). Returns arrays of shape (n,). A
        point estimate (``point_estimate``, method "cp_wopt") returns the reconstruction for
        both models (for cp_probit a score, not a probability) and a variance of 0.
        """
        mean, var = self._f_moments(coords)
        if self._center != 0.0:  # (standardize="center")
            mean = mean + self._center
        on_log = log1p_prediction(self.likelihood, mean, var, scale, "predict")
        if on_log is not None:
            return on_log if return_var else on_log[0]
        if self.point_estimate:
            return (mean, var) if return_var else mean
        if self.model == "cp_probit":
            p = np.empty_like(mean)
            K.probit_predictive(mean, var, p, np.empty(0), np.empty(0))
            return (p, var) if return_var else p
        if is_generic(self.model):
            with num_threads(self.options.get("n_threads")):
                ey, vy = CPL.predictive_moments(self.likelihood, mean, var)
            return (ey, vy) if return_var else ey
        a, b = self.posterior.noise
        noise_var = b / (a - 1.0) if a > 1.0 else b / a
        return (mean, var + noise_var) if return_var else mean

    def rmse(self, coords, values, scale=None):
        """Root mean squared error of the predictive mean against ``values``; with
        ``scale="log1p"`` (count models) of the predictive mean of log(1 + y) against
        log(1 + values)."""
        pred = self.predict(coords, scale=scale)
        if scale is None:
            return _rmse(check_values(values, len(pred), None, "rmse"), pred)
        return _rmse(np.log1p(check_values(values, len(pred), self.likelihood, "rmse")), pred)

    def auc(self, coords, values):
        """Area under the ROC curve of P(y = 1) (or of the predictive mean of a non-binary model)
        against binary ``values``."""
        p = self.predict(coords)
        return _auc(V.check_labels(values, "values", "auc", len(p)) > 0, p)

    def log_likelihood(self, coords, values):
        """Mean log predictive density of ``values`` at ``coords`` (the test log-likelihood).

        cp_probit: log P(y) under the probit predictive P(y = 1) = Phi(mean / sqrt(1 + var)) of
        the latent f; cp_gaussian: log N(y; mean, Var f + E[1/tau]), the Gaussian with the
        predictive's mean and variance (``predict(..., return_var=True)``); a generic model:
        log int p(y | f) N(f | mean, Var f) df for the fitted likelihood (``res.likelihood``) by
        its ``log_predictive`` leaf (else its tilted's log Z by Gauss-Hermite), the values
        checked by it. A point estimate (method "cp_wopt") has no
        predictive distribution: ValueError.
        """
        if self.point_estimate:
            raise ValueError(
                f"log_likelihood: method={self.method!r} is a point estimate, without a predictive "
                "distribution to score the values under."
            )
        mean, var = self._f_moments(coords)
        if is_generic(self.model):
            y = check_values(values, len(mean), self.likelihood, "log_likelihood")
            with num_threads(self.options.get("n_threads")):
                return float(np.mean(CPL.log_predictive(self.likelihood.kernel(), y, mean, var)))
        if self.model == "cp_probit":
            s = V.check_labels(values, "values", "log_likelihood", len(mean))
            logp = np.empty_like(mean)
            K.probit_predictive(mean, var, np.empty_like(mean), logp, s)
            return float(np.mean(logp))
        values = check_values(values, len(mean), None, "log_likelihood")
        a, b = self.posterior.noise
        return gaussian_log_likelihood(values, mean, var + (b / (a - 1.0) if a > 1.0 else b / a))

    def save(self, path, force=False):
        """Write the result to ``path`` (``fastcep.save``; read it back with ``fastcep.load``)."""
        save_result(self, path, None, "", force)

    def plot_convergence(self, ax=None):
        """The trace's change (and eval metric) against iteration and time: ``fastcep.plot.convergence``."""
        from ..plot import convergence

        return convergence(self, ax=ax)

    def to_cp_tensor(self):
        """``(weights, factors)`` as tensorly's CPTensor: unit weights, the posterior means."""
        return np.ones(self.rank), [m.copy() for m in self.posterior.means]


def second_moments(M, S, covariance, out=None):
    """E[u u^T] = S + M M^T per object (the diagonals with "diag"), into ``out`` if given."""
    if covariance == "diag":
        return np.add(S, M * M, out=out)
    out = np.multiply(M[:, :, None], M[:, None, :], out=out)
    out += S
    return out
