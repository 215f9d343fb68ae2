"""Bayesian CP tensor decomposition: the layout of the observed entries, the CEP message engine
(and Laplace propagation in it), the VMP and CP-WOPT baselines, and the result type."""

from .engine import fit_cp
from .result import CPPosterior, CPResult, CPState, FactorState, VMPState

__all__ = ["CPPosterior", "CPResult", "CPState", "FactorState", "VMPState", "fit_cp"]
