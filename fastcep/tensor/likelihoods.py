"""The likelihoods of the CP models: the one place that maps a CP model (``model="cp_<name>"``,
or ``model="cp"`` with ``likelihood=``) to its likelihood, its kernel code and its predictions.

A CP fit's likelihood is a public likelihood object (``fastcep.likelihoods``: ``.binary``,
``.check``, ``.mean_var``, ``.kernel()`` and the parameters, a parameter None being learned).
cp_gaussian and cp_probit are hand-written: their own kernels (the Gaussian message with a
learned noise precision, the probit message with its curvature rules), the fast paths of the
likelihoods in ``HAND_WRITTEN``. Every other likelihood of the seam's registry
(``fastcep.kernels.likelihoods.REGISTRY``, DESIGN.md section 7) is the generic model
"cp_<name>" (``fastcep._models.CP_GENERIC``) with its shorthand's defaults, or the model "cp"
with the parameters given: CEP-1 through the likelihood's one-dimensional tilted moments and a
rank-one message (``kernels.tensor.generic_message``, ``generic_coord``), with the engine,
schedules, priors and stream unchanged, and its learned parameters updated once per iteration
(``fastcep.glm.learn``; once per batch in a stream).

``fastcep._models.resolve`` turns (model, likelihood) into the model that runs: a likelihood equal to a fast
path's (``Gaussian()``, learned noise; ``Bernoulli("probit")``) runs that fast path, one equal to
a generic shorthand's defaults is that shorthand ("cp_logistic"), any other is "cp".
"""

import numpy as np

from .. import _validation as V
from .._models import shorthand
from .._quadrature import gauss_hermite
from ..kernels import tensor as K

__all__ = [
    "GENERIC_NODES",
    "PREDICTIVE_NODES",
    "block_errors",
    "check_values",
    "describe",
    "fitted_likelihood",
    "kernel_model",
    "log_predictive",
    "predictive_moments",
]

#: Gauss-Hermite nodes of the generic models' tilted moments for a likelihood with neither a
#: closed form nor ``log_lik_derivs`` (the seam's rule on the cavity; with derivatives the
#: kernels take the trapezoid rule on the tilted's support, ``kernels.tensor.tilted``)
GENERIC_NODES = 32
#: nodes of the rule for the predictive density of the generic models (binary: P(y = 1))
PREDICTIVE_NODES = 60


def describe(likelihood):
    """A JSON-able description of a likelihood: its name and parameters (None: learned)."""
    return {"name": likelihood.name, **likelihood.params()}


def fitted_likelihood(model, noise=None):
    """The likelihood of a CP result that carries none (the hand-written models, the baselines,
    model files before version 5): the model's shorthand, with cp_gaussian's noise variance
    E[1 / tau] = b / (a - 1) (b / a for a <= 1) from the Gamma posterior ``noise`` (a, b) filled
    in: the variance its predictions add."""
    lik = shorthand(model)
    if model == "cp_gaussian" and noise is not None:
        a, b = noise
        lik = lik.with_params(var=b / (a - 1.0) if a > 1.0 else b / a)
    return lik


def kernel_model(model, probit_curvature="full", likelihood=None):
    """(the kernels' model code, the trailing arguments of their drivers) of a CP model:
    MODEL_GAUSSIAN / MODEL_PROBIT / MODEL_PROBIT_RANK1 and () for the fast paths,
    MODEL_GENERIC and (likelihood's kernel, nodes, weights) for the others
    (``kernels.tensor.messages``); ``likelihood``, its parameters filled in (default: the
    model's shorthand, which must have none to learn)."""
    if model == "cp_gaussian":
        return K.MODEL_GAUSSIAN, ()
    if model == "cp_probit":
        return (K.MODEL_PROBIT_RANK1 if probit_curvature == "rank1" else K.MODEL_PROBIT), ()
    lik = shorthand(model) if likelihood is None else likelihood
    return K.MODEL_GENERIC, (lik.kernel(), *gauss_hermite(GENERIC_NODES))


# ------------------------------------------------------------------------------ values
def check_values(values, n, likelihood, func, name="values"):
    """The values of a CP model, checked by its likelihood (a public object; a model's name
    "cp_<name>" stands for its shorthand; None: real numbers): binary labels ({0, 1}, {-1, 1} or
    bool) as float64 signs +-1, else finite float64 numbers that the likelihood's ``check``
    accepts (counts: integers >= 0); one per row of coords (n)."""
    if isinstance(likelihood, str):
        likelihood = shorthand(likelihood)
    try:
        arr = np.asarray(values)
    except Exception as exc:
        raise V.param_error(name, func, "a 1-D array of numbers", values, TypeError) from exc
    if likelihood is not None and likelihood.binary:
        return V.check_labels(arr, name, func, n)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"The {name!r} parameter of {func} must be a 1-D array with one value per row of coords ({n}). "
            f"Got shape {arr.shape} instead."
        )
    if arr.dtype.kind not in "biuf":
        raise V.param_error(name, func, "real numbers", f"dtype {arr.dtype}", TypeError)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = np.nonzero(~np.isfinite(arr))[0]
    if bad.size:
        raise ValueError(
            f"The {name!r} parameter of {func} must be finite. Got NaN or inf at rows {bad[:5].tolist()}."
        )
    if likelihood is not None:
        likelihood.check(arr, name, func, n)  # (counts; a Custom likelihood's own check)
    return arr


def block_errors(values):
    """The rows of a block of binary values (float64, as a tensor file holds them) that are
    neither 0 nor 1 (a stream checks a file's blocks with it)."""
    return np.nonzero((values != 0.0) & (values != 1.0))[0]


# ------------------------------------------------------------------------------ predictions
def log_predictive(lik, y, mean, var):
    """log p(y_e | data) = log int p(y_e | f) N(f | mean_e, var_e) df per entry (arrays (n,); y
    as the kernels take it: signs +-1 for binary likelihoods), by the seam's ``log_predictive``
    for the likelihood kernel ``lik`` (its numba form, ``Likelihood.kernel()``)."""
    out = np.empty(len(mean))
    nodes, weights = gauss_hermite(PREDICTIVE_NODES)
    y = np.ascontiguousarray(y, dtype=np.float64)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    var = np.ascontiguousarray(var, dtype=np.float64)
    K.generic_log_predictive(lik, y, mean, var, nodes, weights, out)
    return out


def predictive_moments(likelihood, mean, var, func="predict"):
    """(E[y], Var[y]) per entry under f ~ N(mean, var) (arrays (n,)) for a public likelihood
    (its parameters filled in): binary ones P(y = 1) and P (1 - P) (y in {0, 1}), from the
    seam's ``log_predictive``; the others from the likelihood's closed forms (``mean_var``)."""
    if likelihood.binary:
        p = np.exp(log_predictive(likelihood.kernel(), np.ones(len(mean)), mean, var))
        return p, p * (1.0 - p)
    moments = likelihood.mean_var(mean, var)
    if moments is None:
        raise NotImplementedError(
            f"{func}: the likelihood {likelihood!r} has no closed-form predictive mean and variance "
            "(mean_var); log_likelihood works without them."
        )
    ey, vy = moments
    return np.asarray(ey, dtype=np.float64), np.asarray(vy, dtype=np.float64)
