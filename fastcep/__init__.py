"""fastcep: conditional expectation propagation (Wang & Zhe, UAI 2019), compiled with Numba.

``fastcep.fit`` fits Bayesian generalised linear regression (CEP-1, CEP-2, EP; probit and logistic
labels, and any likelihood of ``fastcep.likelihoods``: Gaussian, Poisson, negative binomial,
Student-t, a user's own) and Bayesian CP tensor decompositions (``model="cp_gaussian" |
"cp_probit" | "cp_<likelihood>"``, or ``model="cp", likelihood=<fastcep.likelihoods object>``);
the result holds the posterior, predictions and a per-iteration trace.
``fastcep.stream`` decomposes a tensor arriving in batches (ADF-CEP), from memory or block by
block from an HDF5 tensor file (``write_tensor``, ``text_to_tensor``, ``TensorReader``).
``fastcep.save`` and ``fastcep.load`` write and read any fitted result, regression or CP
(``save_model``/``load_model`` and ``fastcep.io.save_glm_model``/``load_glm_model`` remain, for
one kind each). The
scikit-learn style estimators ``BayesianProbitClassifier``, ``BayesianLogisticClassifier`` and
``BayesianRegressor`` need scikit-learn.
"""

from . import (
    _checkout,  # noqa: F401 (first: completes the package path in a checkout)
    likelihoods,
    metrics,
)
from ._loop import ConvergenceWarning
from .api import fit, stream
from .glm import RegressionResult
from .io import (
    FileFormatError,
    TensorReader,
    TensorWriter,
    load,
    load_model,
    read_tensor,
    save,
    save_model,
    text_to_tensor,
    write_tensor,
)
from .metrics import auc, gaussian_kl, rmse
from .results import GaussianPosterior, IterationInfo, RegressionState, Trace, VBState
from .tensor import CPPosterior, CPResult, CPState, FactorState, VMPState

__version__ = "0.1.0"

__all__ = [
    "BayesianLogisticClassifier",
    "BayesianProbitClassifier",
    "BayesianRegressor",
    "CPPosterior",
    "CPResult",
    "CPState",
    "ConvergenceWarning",
    "FactorState",
    "FileFormatError",
    "GaussianPosterior",
    "IterationInfo",
    "RegressionResult",
    "RegressionState",
    "TensorReader",
    "TensorWriter",
    "VBState",
    "VMPState",
    "Trace",
    "auc",
    "fit",
    "gaussian_kl",
    "likelihoods",
    "load",
    "load_model",
    "metrics",
    "read_tensor",
    "rmse",
    "save",
    "save_model",
    "stream",
    "text_to_tensor",
    "write_tensor",
]

_ESTIMATORS = ("BayesianProbitClassifier", "BayesianLogisticClassifier", "BayesianRegressor")


def __getattr__(name):
    if name in _ESTIMATORS:
        from . import estimators  # needs scikit-learn; imported on first use

        return getattr(estimators, name)
    raise AttributeError(f"module 'fastcep' has no attribute {name!r}")
