"""fastcep: conditional expectation propagation (Wang & Zhe, UAI 2019), compiled with Numba.

``fastcep.fit`` fits Bayesian probit and logistic regression (CEP-1, CEP-2, EP); the result
holds the posterior, predictions and a per-iteration trace. scikit-learn style estimators
``BayesianProbitClassifier`` and ``BayesianLogisticClassifier`` need scikit-learn.
"""

from . import metrics
from .api import fit
from .metrics import auc, gaussian_kl, rmse
from .regression import RegressionResult
from .results import GaussianPosterior, IterationInfo, RegressionState, Trace

__version__ = "0.1.0"

__all__ = [
    "BayesianLogisticClassifier",
    "BayesianProbitClassifier",
    "GaussianPosterior",
    "IterationInfo",
    "RegressionResult",
    "RegressionState",
    "Trace",
    "auc",
    "fit",
    "gaussian_kl",
    "metrics",
    "rmse",
]

_ESTIMATORS = ("BayesianProbitClassifier", "BayesianLogisticClassifier")


def __getattr__(name):
    if name in _ESTIMATORS:
        from . import estimators  # needs scikit-learn; imported on first use

        return getattr(estimators, name)
    raise AttributeError(f"module 'fastcep' has no attribute {name!r}")
