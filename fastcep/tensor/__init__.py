"""Bayesian CP tensor decomposition: the layout of the observed entries, the CEP message engine
(and Laplace propagation in it), the VMP and CP-WOPT baselines, and the result type."""

from .engine import fit_cp
from .result import CPPosterior, CPResult, CPState, VMPState

__all__ = ["CPPosterior", "CPResult", "CPState", "VMPState", "fit_cp"]
