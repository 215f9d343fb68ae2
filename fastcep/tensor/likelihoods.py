"""The likelihoods of the CP models: the one place that maps ``model="cp_<name>"`` to its
likelihood, its kernel code, the values it takes and its predictive moments.

cp_gaussian and cp_probit are hand-written: their own kernels (the Gaussian message with a
learned noise precision, the probit message with its curvature rules), registered here as the
fast paths of their likelihoods. Every other likelihood in the seam's registry
(``fastcep.kernels.likelihoods.REGISTRY``, DESIGN.md section 7) is the generic model
"cp_<name>" (``fastcep._options.CP_GENERIC``): CEP-1 through the likelihood's one-dimensional
tilted moments and a rank-one message (``kernels.tensor.generic_message``, ``generic_coord``),
with the engine, schedules, priors and stream unchanged. Registering a likelihood there makes
its model; here it needs only an entry in ``VALUES`` (binary labels, real numbers or counts: a
name missing there takes real numbers) and, for a predictive mean and variance of a
non-binary y, one in ``CONDITIONAL``.
"""

import numpy as np

from .. import _options as O
from .. import _validation as V
from .._quadrature import gauss_hermite
from ..kernels import tensor as K
from ..kernels.likelihoods import REGISTRY

__all__ = [
    "CONDITIONAL",
    "FAST_PATHS",
    "GENERIC",
    "GENERIC_NODES",
    "PREDICTIVE_NODES",
    "VALUES",
    "block_errors",
    "check_values",
    "is_generic",
    "kernel_model",
    "likelihood",
    "log_predictive",
    "predictive_moments",
    "registry_name",
    "value_kind",
]

#: the hand-written models (their own kernels) and the generic ones (the seam's other likelihoods)
FAST_PATHS = O.CP_FAST_PATHS
GENERIC = O.CP_GENERIC

#: the values each likelihood takes (by its registry name): "binary" labels ({0, 1}, {-1, 1} or
#: bool; the kernels see signs +-1), "real" numbers or "count"s (integers >= 0); a likelihood
#: missing here takes real numbers
VALUES = {
    "probit": "binary",
    "logistic": "binary",
    "gaussian": "real",
    "poisson": "count",
    "negbin": "count",
    "student_t": "real",
}

#: E[y | f] and Var[y | f] of a non-binary likelihood (by its registry name), vectorised over
#: an array f, for the predictive mean and variance of y (``predictive_moments``); binary ones
#: need none (P(y = 1) comes from the seam's ``log_predictive``)
CONDITIONAL = {
    "gaussian": lambda lik, f: (f, np.full_like(f, lik.var)),
}

#: Gauss-Hermite nodes of the generic models' tilted moments for a likelihood with neither a
#: closed form nor ``log_lik_derivs`` (the seam's rule on the cavity; with derivatives the
#: kernels take the trapezoid rule on the tilted's support, ``kernels.tensor.tilted``)
GENERIC_NODES = 32
#: nodes of the rule for the predictive density and moments of the generic models
PREDICTIVE_NODES = 60


def registry_name(model):
    """The registry name of a CP model's likelihood: "cp_logistic" -> "logistic"."""
    return model[3:] if model.startswith("cp_") else model


def value_kind(model):
    """The kind of values of a CP model (``VALUES``): "binary", "real" or "count"."""
    return VALUES.get(registry_name(model), "real")


def is_generic(model):
    """Whether a CP model goes through the seam's generic messages (not a fast path)."""
    return model not in FAST_PATHS


def likelihood(model):
    """The likelihood (a NamedTuple of ``kernels.likelihoods``) of a CP model."""
    name = registry_name(model)
    try:
        return REGISTRY[name]()
    except TypeError as exc:  # (a likelihood with parameters: fit does not take them yet)
        raise ValueError(
            f"model={model!r}: the likelihood {REGISTRY[name].__name__} needs parameters "
            f"({', '.join(REGISTRY[name]._fields)}), which the CP models do not take yet."
        ) from exc


def kernel_model(model, probit_curvature="full"):
    """(the kernels' model code, the trailing arguments of their drivers) of a CP model:
    MODEL_GAUSSIAN / MODEL_PROBIT / MODEL_PROBIT_RANK1 and () for the fast paths,
    MODEL_GENERIC and (likelihood, nodes, weights) for the others (``kernels.tensor.messages``)."""
    if model == "cp_gaussian":
        return K.MODEL_GAUSSIAN, ()
    if model == "cp_probit":
        return (K.MODEL_PROBIT_RANK1 if probit_curvature == "rank1" else K.MODEL_PROBIT), ()
    return K.MODEL_GENERIC, (likelihood(model), *gauss_hermite(GENERIC_NODES))


# ------------------------------------------------------------------------------ values
def check_values(values, n, model, func, name="values"):
    """The values of a CP model, checked for its kind (``VALUES``): binary labels as float64 signs
    +-1, finite reals or counts (integers >= 0) as float64; one per row of coords (n)."""
    kind = value_kind(model)
    try:
        arr = np.asarray(values)
    except Exception as exc:
        raise V.param_error(name, func, "a 1-D array of numbers", values, TypeError) from exc
    if kind == "binary":
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
    if kind == "count":
        bad = block_errors(arr, kind)
        if bad.size:
            raise ValueError(
                f"The {name!r} parameter of {func} must hold counts (integers >= 0) for model={model!r}. "
                f"Got {arr[bad[0]]!r} at rows {bad[:5].tolist()}."
            )
    return arr


def block_errors(values, kind):
    """The rows of a block of float64 values (binary ones as {0, 1}, as a tensor file holds them)
    that a model of this kind refuses (a stream checks a file's blocks with it)."""
    if kind == "binary":
        return np.nonzero((values != 0.0) & (values != 1.0))[0]
    if kind == "count":
        return np.nonzero(~((values >= 0.0) & (values == np.floor(values))))[0]
    return np.zeros(0, dtype=np.int64)


# ------------------------------------------------------------------------------ predictions
def log_predictive(model, y, mean, var, lik=None):
    """log p(y_e | data) = log int p(y_e | f) N(f | mean_e, var_e) df per entry (arrays (n,); y
    as the kernels take it: signs +-1 for binary models), by the seam's ``log_predictive``, for
    the likelihood ``lik`` (default: the model's)."""
    out = np.empty(len(mean))
    nodes, weights = gauss_hermite(PREDICTIVE_NODES)
    y = np.ascontiguousarray(y, dtype=np.float64)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    var = np.ascontiguousarray(var, dtype=np.float64)
    lik = likelihood(model) if lik is None else lik
    K.generic_log_predictive(lik, y, mean, var, nodes, weights, out)
    return out


def predictive_moments(model, mean, var, lik=None):
    """(E[y], Var[y]) per entry under f ~ N(mean, var) (arrays (n,)), for the likelihood ``lik``
    (default: the model's): binary models P(y = 1) and P(1 - P) (y in {0, 1}), from the seam's
    ``log_predictive``; the others by Gauss-Hermite quadrature of E[y | f] and E[y^2 | f] =
    Var[y | f] + E[y | f]^2 (``CONDITIONAL``)."""
    lik = likelihood(model) if lik is None else lik
    if value_kind(model) == "binary":
        p = np.exp(log_predictive(model, np.ones(len(mean)), mean, var, lik))
        return p, p * (1.0 - p)
    cond = CONDITIONAL.get(registry_name(model))
    if cond is None:
        raise NotImplementedError(
            f"model={model!r}: its predictive mean needs E[y | f] and Var[y | f] of the likelihood "
            "(an entry in fastcep.tensor.likelihoods.CONDITIONAL); log_likelihood works without."
        )
    nodes, weights = gauss_hermite(PREDICTIVE_NODES)
    f = mean[:, None] + np.sqrt(np.maximum(var, 0.0))[:, None] * nodes[None, :]
    m, v = cond(lik, f)
    ey = m @ weights
    ey2 = (v + m * m) @ weights
    return ey, np.maximum(ey2 - ey * ey, 0.0)
