"""``fastcep.fit``: one entry point for every model and method."""

from . import _validation as V
from .glm.engine import MODELS as REGRESSION_MODELS
from .glm.engine import fit_regression
from .tensor.engine import CP_MODELS, fit_cp

MODELS = REGRESSION_MODELS + CP_MODELS


def fit(X, y, model="probit", method="cep1", **options):
    """Fit a Bayesian model by conditional expectation propagation (or a baseline method).

    Regression: ``fit(X, y, model="probit" | "logistic", method="cep1" | "cep2" | "ep" | "lp" | "is" |
    "vb" | "kjit")``.
    CP decomposition: ``fit(coords, values, model="cp_gaussian" | "cp_probit", shape=dims, rank=R)``
    (see ``fastcep.tensor.fit_cp`` for its options: a0, b0, covariance, schedule, init, eval_set, ...);
    CP methods: "cep1" (the paper's), its baselines "lp" (Laplace propagation in the same message
    engine, see ``fit_cp``'s ``lp_indefinite``), "vmp" (mean-field VMP, the ELBO in ``trace.elbo``;
    ``fastcep.tensor.vmp.fit_vmp``) and "cp_wopt" (CP-WOPT point estimate by L-BFGS;
    ``fastcep.tensor.cp_wopt.fit_cp_wopt``).

    Parameters
    ----------
    X : array of shape (n, d)
        Features (finite; converted to C-contiguous float64).
    y : array of shape (n,)
        Labels in {0, 1}, {-1, 1} or bool.
    model : {"probit", "logistic"}
    method : {"cep1", "cep2", "ep", "lp", "is", "vb", "kjit"}
        CEP with first- or second-order Taylor expectation, or factorised EP (analytic for
        probit, 2-D Gauss-Hermite for logistic); the paper's baselines: "lp" Laplace
        propagation (each message from the mode and curvature of its tilted distribution,
        found by a safeguarded Newton solve of the exact one-dimensional reduction of the mode
        equation: the same optimum as the paper's L-BFGS search), "is" EP with tilted moments
        from importance sampling (``n_samples`` draws from the cavity per row and sweep,
        seeded; the tilted mean and variance of a = x.w are estimated, with a Bessel-corrected
        weighted variance and the draws' own moments as control variates, and each weight's
        follow by Gaussian conditioning on a; site precisions may be negative, and in the
        parallel schedule a weight whose posterior or a cavity would become improper keeps
        its messages of the previous sweep; never settles below a small tol, use
        ``max_iter``; on small data with correlated features prefer
        ``schedule="sequential"``: the parallel schedule can need far more damping), "vb" mean-field
        variational Bayes (probit through the Albert-Chib augmentation, logistic through the
        Jaakkola-Jordan bound; coordinate ascent, the evidence lower bound in ``trace.elbo``;
        ``damping``, ``schedule`` and ``init_state`` do not apply), "kjit" (logistic only)
        kernel-based just-in-time EP: a random-Fourier-feature Bayesian regression predicts each
        row's tilted moments, and rows whose predictive variance exceeds ``threshold`` fall back
        on importance sampling (as "is"), whose results train it; oracle rows per sweep in
        ``res.options["oracle_calls"]``; the operator learns after every sweep (in the
        sequential schedule it stays fixed within a sweep).
    prior_var : float > 0 or array of shape (d,), default 1.0
        Variance of the zero-mean Gaussian prior on each weight.
    damping : float in (0, 1] or "auto", default "auto"
        ``msg <- (1 - damping) msg + damping new`` after every sweep. "auto" starts at 0.1 and
        halves (down to 0.005) whenever the change has not reached a new minimum for 50 sweeps.
    max_iter : int >= 1, default 5000
        Cap on the number of sweeps.
    tol : float >= 0, default 1e-5
        Stopping threshold. With ``stopping="posterior"``: the largest change of a posterior
        mean in units of its posterior standard deviation, or of a posterior variance relative
        to itself, over one sweep. With ``stopping="paper"``: the mean over data points of the
        summed squared change of the sites' precision-times-means (the rule of the authors'
        code, which can stop long before convergence; use a tol such as 1e-5 with it).
    schedule : {"parallel", "sequential"}, default "parallel"
        Parallel: all messages from one posterior, then damped and summed (multi-threaded).
        Sequential: the posterior refreshed after every data point (single-threaded).
    stopping : {"posterior", "paper"}, default "posterior"
    n_nodes : int, default 9
        Gauss-Hermite nodes of the logistic conditional moments (per dimension for EP).
    n_samples : int >= 2, default 10000
        Importance samples per row and sweep of methods "is" and "kjit" (the paper used 500,000).
    threshold : float >= 0, default 1e-3
        "kjit": predictive variance above which a row is sent to importance sampling (0: every
        row, which reproduces method "is" exactly).
    n_features : int, default 200
        "kjit": random Fourier features of the message operator.
    n_threads : int or None
        Threads for this call (``None``: numba's current setting). Results do not depend on it.
    callback : callable or None
        Called as ``callback(info)`` after every sweep with an ``IterationInfo``; returning
        True stops the fit.
    seed : int, Generator or None, default 0
        Seeds the draws of methods "is" and "kjit" and the random start of tensor fits (the same
        seed gives the same result, whatever the thread count; the default is the same seed as
        ``fastcep.stream``'s and the command line's; None: fresh entropy); the other regression
        methods are deterministic.
    init_state : RegressionState or None
        Resume from ``res.state`` of an earlier fit on the same data.
    verbose : bool, default False
        Print one line per sweep to stderr.
    progress : bool, default False
        Keep a status line on stderr (iteration, change, time), rewritten in place.

    Returns
    -------
    RegressionResult
        ``posterior.mean``, ``posterior.var`` (d,), ``predict_proba(X_new)``,
        ``log_likelihood(X, y)``, ``n_iter``, ``converged``, ``trace``.
    """
    V.check_choice(model, "model", "fit", MODELS)
    if model in CP_MODELS:
        if method == "vmp":  # the tensor baselines outside the message-passing engine
            from .tensor.vmp import fit_vmp

            return fit_vmp(X, y, model, **options)
        if method == "cp_wopt":
            from .tensor.cp_wopt import fit_cp_wopt

            return fit_cp_wopt(X, y, model, **options)
        return fit_cp(X, y, model, method, **options)
    return fit_regression(X, y, model, method, **options)
