"""The likelihoods of the CP models: the one place that maps a CP model (``model="cp_<name>"``,
or ``model="cp"`` with ``likelihood=``) to its likelihood, its kernel code and its predictions.

A CP fit's likelihood is a public likelihood object (``fastcep.likelihoods``: ``.binary``,
``.check``, ``.mean_var``, ``.kernel()`` and the parameters, a parameter None being learned).
cp_gaussian and cp_probit are hand-written: their own kernels (the Gaussian message with a
learned noise precision, the probit message with its curvature rules), the fast paths of the
likelihoods in ``HAND_WRITTEN``. Every other likelihood of the seam's registry
(``fastcep.kernels.likelihoods.REGISTRY``, DESIGN.md section 7) is the generic model
"cp_<name>" (``fastcep._options.CP_GENERIC``) with its shorthand's defaults, or the model "cp"
with the parameters given: CEP-1 through the likelihood's one-dimensional tilted moments and a
rank-one message (``kernels.tensor.generic_message``, ``generic_coord``), with the engine,
schedules, priors and stream unchanged, and its learned parameters updated once per iteration
(``fastcep.glm.learn``; once per batch in a stream).

``resolve`` turns (model, likelihood) into the model that runs: a likelihood equal to a fast
path's (``Gaussian()``, learned noise; ``Bernoulli("probit")``) runs that fast path, one equal to
a generic shorthand's defaults is that shorthand ("cp_logistic"), any other is "cp".
"""

import numpy as np

from .. import _options as O
from .. import _validation as V
from .._quadrature import gauss_hermite
from ..kernels import tensor as K
from ..kernels.likelihoods import REGISTRY
from ..likelihoods import SHORTHANDS, Bernoulli, Gaussian, Likelihood

__all__ = [
    "FAST_PATHS",
    "GENERIC",
    "GENERIC_NODES",
    "HAND_WRITTEN",
    "PREDICTIVE_NODES",
    "block_errors",
    "check_values",
    "describe",
    "fitted_likelihood",
    "is_generic",
    "kernel_model",
    "log_predictive",
    "names",
    "predictive_moments",
    "registry_name",
    "resolve",
    "shorthand",
]

#: the hand-written models (their own kernels) and the generic ones (the seam's other likelihoods)
FAST_PATHS = O.CP_FAST_PATHS
GENERIC = O.CP_GENERIC
#: the likelihood each hand-written model fits: ``model="cp"`` with a likelihood equal to one of
#: these runs that model (cp_gaussian's Gamma posterior of the noise precision is the Gaussian's
#: learned variance; a Gaussian of known variance goes the generic way)
HAND_WRITTEN = {"cp_gaussian": Gaussian, "cp_probit": lambda: Bernoulli("probit")}

#: Gauss-Hermite nodes of the generic models' tilted moments for a likelihood with neither a
#: closed form nor ``log_lik_derivs`` (the seam's rule on the cavity; with derivatives the
#: kernels take the trapezoid rule on the tilted's support, ``kernels.tensor.tilted``)
GENERIC_NODES = 32
#: nodes of the rule for the predictive density of the generic models (binary: P(y = 1))
PREDICTIVE_NODES = 60


def registry_name(model):
    """The registry name of a CP model's likelihood: "cp_logistic" -> "logistic"."""
    return model[3:] if model.startswith("cp_") else model


def names():
    """The likelihood names a CP model takes: the shorthands with compiled leaves in the seam's
    registry."""
    return tuple(name for name in SHORTHANDS if name in REGISTRY)


def shorthand(model):
    """The likelihood (a public object, its defaults) of a CP model named by its likelihood:
    "cp_gaussian" -> Gaussian(var=None), "cp_logistic" -> Bernoulli("logistic")."""
    name = registry_name(model)
    return SHORTHANDS[name]()


def is_generic(model):
    """Whether a CP model goes through the seam's generic messages (not a fast path)."""
    return model not in FAST_PATHS


def _refuse(func, what, value, exc=ValueError):
    return V.param_error("likelihood", func, what, value, exc)


def resolve(model, likelihood, func="fit"):
    """(the model that runs, its likelihood object) from a CP call's ``model`` (checked: "cp" or
    "cp_<name>") and ``likelihood`` (None, a name or a ``fastcep.likelihoods`` object): the
    model/likelihood consistency rule of the option table (``fastcep._options.validate``).

    "cp_<name>" takes no likelihood (it names one: its shorthand's defaults); "cp" needs one,
    which runs the hand-written model it equals (``HAND_WRITTEN``), else the generic shorthand it
    equals (defaults included), else the generic model "cp"."""
    known = ", ".join(repr(n) for n in names())
    if likelihood is None:
        if model == "cp":
            raise ValueError(
                f"{func}: model='cp' needs a likelihood: likelihood= a fastcep.likelihoods object "
                f"(e.g. Gaussian(var=0.1)) or one of {known}; or name it in the model ('cp_gaussian')."
            )
        return model, shorthand(model)
    if model != "cp":
        raise ValueError(
            f"{func}: model={model!r} names its likelihood ({shorthand(model)!r}); a likelihood "
            f"object or name goes with model='cp' (got likelihood={likelihood!r}). Use "
            f"model='cp', likelihood=... or model={model!r} alone."
        )
    if isinstance(likelihood, str):
        if likelihood not in SHORTHANDS or likelihood not in REGISTRY:
            why = (
                f" ({likelihood!r} has no compiled leaves in the seam's registry yet)"
                if likelihood in SHORTHANDS
                else ""
            )
            what = f"a likelihood object (fastcep.likelihoods) or one of {known}{why}"
            raise _refuse(func, what, likelihood)
        likelihood = SHORTHANDS[likelihood]()
    elif not isinstance(likelihood, Likelihood):
        what = f"a likelihood object (fastcep.likelihoods) or one of {known}"
        raise _refuse(func, what, likelihood, TypeError)
    elif likelihood.name != "custom" and likelihood.name not in REGISTRY:
        raise _refuse(
            func,
            f"a likelihood whose compiled leaves are in the seam's registry ({known})",
            f"{likelihood!r} (no leaves registered for {likelihood.name!r})",
        )
    for fast, default in HAND_WRITTEN.items():
        if likelihood == default():
            return fast, likelihood
    name = likelihood.name
    if name in SHORTHANDS and f"cp_{name}" in GENERIC and likelihood == SHORTHANDS[name]():
        return f"cp_{name}", likelihood
    return "cp", likelihood


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
