"""Bayesian regression (GLM) with fully factorised Gaussian messages: CEP-1, CEP-2, EP and the
paper's baselines (LP, IS, VB, KJIT); online updates (``RegressionResult.update``) and the
online pass over a file of sparse rows (``stream_file``)."""

from .engine import RegressionResult, fit_regression
from .stream import stream_file

__all__ = ["RegressionResult", "fit_regression", "stream_file"]
