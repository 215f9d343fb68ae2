"""Bayesian regression (GLM) with fully factorised Gaussian messages: CEP-1, CEP-2, EP and the
paper's baselines (LP, IS, VB, KJIT)."""

from .engine import RegressionResult, fit_regression

__all__ = ["RegressionResult", "fit_regression"]
