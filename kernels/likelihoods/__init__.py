"""Likelihoods of one scalar f behind one interface (DESIGN.md section 7; ``seam`` has the
interface). One module per likelihood: its NamedTuple class and its registered leaves."""

from . import gaussian, logistic, probit, seam
from .gaussian import Gaussian
from .logistic import Logistic
from .probit import Probit
from .seam import (
    derivative_tilted,
    log_lik,
    log_lik_derivs,
    log_predictive,
    quadrature_tilted,
    register,
    tilted,
)

#: the likelihood classes by the names the options use (one entry per likelihood)
REGISTRY = {"probit": Probit, "logistic": Logistic, "gaussian": Gaussian}

__all__ = [
    "Gaussian",
    "Logistic",
    "Probit",
    "REGISTRY",
    "derivative_tilted",
    "gaussian",
    "log_lik",
    "log_lik_derivs",
    "log_predictive",
    "logistic",
    "probit",
    "quadrature_tilted",
    "register",
    "seam",
    "tilted",
]
