"""Likelihoods of one scalar f behind one interface (DESIGN.md section 7; ``seam`` has the
interface). One module per likelihood: its NamedTuple class and its registered leaves.
``adaptive`` holds the tilted rule of the count and Student-t likelihoods, ``custom`` the
mechanism for a user's own log-density, ``log1p`` the counts' predictive moments of log(1 + y)."""

from . import adaptive, custom, gaussian, log1p, logistic, negbin, poisson, probit, seam, student_t
from .adaptive import adaptive_tilted, tilted_moments
from .custom import custom_likelihood, uncached
from .gaussian import Gaussian
from .logistic import Logistic
from .negbin import NegativeBinomial
from .poisson import Poisson
from .probit import Probit
from .seam import (
    derivative_tilted,
    is_log_concave,
    log_lik,
    log_lik_derivs,
    log_lik_step,
    log_predictive,
    not_log_concave,
    quadrature_tilted,
    register,
    tilted,
)
from .student_t import StudentT

#: the likelihood classes by the names the options use (one entry per likelihood)
REGISTRY = {
    "probit": Probit,
    "logistic": Logistic,
    "gaussian": Gaussian,
    "poisson": Poisson,
    "negbin": NegativeBinomial,
    "student_t": StudentT,
}

__all__ = [
    "Gaussian",
    "Logistic",
    "NegativeBinomial",
    "Poisson",
    "Probit",
    "REGISTRY",
    "StudentT",
    "adaptive",
    "adaptive_tilted",
    "custom",
    "custom_likelihood",
    "derivative_tilted",
    "gaussian",
    "is_log_concave",
    "log1p",
    "log_lik",
    "log_lik_derivs",
    "log_lik_step",
    "log_predictive",
    "logistic",
    "negbin",
    "poisson",
    "probit",
    "not_log_concave",
    "quadrature_tilted",
    "register",
    "seam",
    "student_t",
    "tilted",
    "tilted_moments",
    "uncached",
]
