"""``fastcep.fit`` and ``fastcep.stream``: the entry points of every model and method."""

import functools
import os

from . import _options as O
from . import _validation as V
from .glm.engine import fit_regression
from .likelihoods import Likelihood
from .streaming import adf
from .tensor.engine import fit_cp

REGRESSION_MODELS = O.choices("model", "regression")
CP_MODELS = O.choices("model", "cp")
MODELS = REGRESSION_MODELS + CP_MODELS
_DEFAULTS = O.defaults("regression", "cep1")


def fit(X, y, model=_DEFAULTS["model"], method=_DEFAULTS["method"], **options):
    """Fit a Bayesian model by conditional expectation propagation (or a baseline method).

    Regression: ``fit(X, y, model="probit" | "logistic", method="cep1" | "cep2" | "ep" | "lp" | "is" |
    "vb" | "kjit")``.
    CP decomposition: ``fit(coords, values, model="cp_gaussian" | "cp_probit" | "cp_<likelihood>",
    shape=dims, rank=R)``, or ``model="cp", likelihood=<fastcep.likelihoods object or name>`` for any
    likelihood (its parameters given or learned; ``fastcep.tensor.fit_cp``)
    (its options, a0, b0, covariance, schedule, init, eval_set, ..., in the Options section below);
    CP methods: "cep1" (the paper's), its baselines "lp" (Laplace propagation in the same message
    engine, see ``fit_cp``'s ``lp_indefinite``), "vmp" (mean-field VMP, the ELBO in ``trace.elbo``;
    ``fastcep.tensor.vmp.fit_vmp``) and "cp_wopt" (CP-WOPT point estimate by L-BFGS;
    ``fastcep.tensor.cp_wopt.fit_cp_wopt``).

    Parameters
    ----------
    X : array of shape (n, d), or a scipy.sparse matrix or array
        Features (finite; converted to C-contiguous float64). A scipy.sparse X (CSR, CSC, COO,
        ...; methods "cep1", "cep2" and "ep", any likelihood) keeps one site per nonzero: a sweep
        costs O(nnz) and memory O(nnz + d). It is copied to CSR with sorted indices, duplicate
        entries summed as scipy does, and is not centred (the intercept is one more column of
        ones; ``center`` does not apply); ``res.state.sites`` then holds (nnz,) messages in CSR
        order. Or the path of a sparse-row file (``fastcep.io.csr``, ``fastcep convert``) with
        y None: its rows and labels, read whole, or with ``client=`` read by row ranges on the
        workers (on storage they share; no rows pass through the client). CP: ``coords``, the
        0-based int coordinates (n, K) of the observed entries, or the path of a tensor file
        (``fastcep.write_tensor``) with values None, read whole, or with ``client=`` read by
        entry ranges on the workers (on storage they share; the start is then ``init="sketch"``
        by default, and ``res.state`` None: the sites stay there).
    y : array of shape (n,)
        Labels in {0, 1}, {-1, 1} or bool, or two classes of any other type (strings, as
        scikit-learn's estimators take: the second in sorted order is the positive one, recorded
        in ``res.options["classes"]``). CP: ``values``, real (cp_gaussian) or binary labels
        (cp_probit).
    model : {"probit", "logistic", ..., "cp_gaussian", "cp_probit", "cp_<likelihood>", "cp"}
    method : {"cep1", "cep2", "ep", "lp", "is", "vb", "kjit"}, CP: {"cep1", "lp", "vmp", "cp_wopt"}
        CEP with first- or second-order Taylor expectation, or factorised EP (analytic for
        probit; for logistic and the other likelihoods one quadrature of a = x.w per row, or the
        paper's 2-D Gauss-Hermite rule with ``n_nodes`` given); the paper's baselines: "lp" Laplace
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
    **options
        Every option of every model and method, with its constraint and default, is in the
        Options section below (the option table ``fastcep._options.OPTIONS``); the CP options are
        explained at length in ``fastcep.tensor.fit_cp``, ``fastcep.tensor.vmp.fit_vmp`` and
        ``fastcep.tensor.cp_wopt.fit_cp_wopt``.

    Returns
    -------
    RegressionResult or CPResult
        Regression: ``posterior.mean``, ``posterior.var`` (d,), ``predict_proba(X_new)``,
        ``log_likelihood(X, y)``, ``n_iter``, ``converged``, ``trace``, ``state``. CP:
        ``posterior.means[k]`` (d_k, R), ``posterior.covs[k]``, ``predict(coords)``, the same
        ``n_iter``, ``converged``, ``trace`` and ``state``.
    """
    if isinstance(model, Likelihood):
        return fit_regression(X, y, model, method, cluster=_cluster("regression", options), **options)
    V.check_choice(model, "model", "fit", MODELS)
    on_workers = options.get("client") is not None and method not in ("vmp", "cp_wopt")
    if model in CP_MODELS and isinstance(X, (str, os.PathLike)) and not on_workers:
        X, y, options = _tensor_file(X, y, options)  # (read whole; on a cluster, by the workers)
    if model in CP_MODELS:
        if method == "vmp":  # the tensor baselines outside the message-passing engine
            from .tensor.vmp import fit_vmp

            return fit_vmp(X, y, model, **options)
        if method == "cp_wopt":
            from .tensor.cp_wopt import fit_cp_wopt

            return fit_cp_wopt(X, y, model, **options)
        return fit_cp(X, y, model, method, cluster=_cluster("cp", options), **options)
    return fit_regression(X, y, model, method, cluster=_cluster("regression", options), **options)


def _tensor_file(path, values, options):
    """(coords, values, options with the file's shape) of a tensor file (``fastcep.write_tensor``)
    that ``fit`` reads whole in one process."""
    from .io import read_tensor

    if values is not None:
        raise ValueError(
            f"fit: coords is a tensor file ({os.fspath(path)!r}) that holds the values; give values=None."
        )
    if options.get("client") is not None:
        raise NotImplementedError(
            f"fit(client=...) reads a tensor file on the workers ({os.fspath(path)!r}) for method "
            "'cep1' only; fit it in one process (client=None)."
        )
    coords, values, shape = read_tensor(path)
    given = options.get("shape")
    if given is not None and tuple(given) != tuple(shape):
        raise ValueError(f"fit: shape={tuple(given)} differs from the tensor file's {tuple(shape)}.")
    return coords, values, dict(options, shape=shape)


def _cluster(name, options):
    """The module of ``fastcep.cluster`` that runs a call given ``client=`` (``regression``, ``cp``
    or ``stream``), passed to the engine's entry point, else None: the engines do not import the
    cluster code, which builds on them."""
    if options.get("client") is None:
        return None
    from .cluster import cp, regression, stream

    return {"regression": regression, "cp": cp, "stream": stream}[name]


if fit.__doc__ is not None:  # (None under python -OO)
    fit.__doc__ += O.document(("regression", "cp"))


@functools.wraps(adf.stream)
def stream(coords, values=None, **options):
    return adf.stream(coords, values, cluster=_cluster("stream", options), **options)
