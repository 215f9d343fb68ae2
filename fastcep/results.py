"""Result types shared by every model: posteriors, traces and the fitted regression model."""

from typing import NamedTuple

import numpy as np


class GaussianPosterior(NamedTuple):
    """Fully factorised Gaussian posterior over the weights."""

    mean: np.ndarray  #: (d,) posterior means
    var: np.ndarray  #: (d,) posterior variances


class RegressionSites(NamedTuple):
    """Site messages of fully factorised regression, in natural parameters."""

    tau: np.ndarray  #: (n, d) precisions
    nu: np.ndarray  #: (n, d) precision-times-means


class RegressionState(NamedTuple):
    """Everything needed to resume a regression fit (``init_state=`` of ``fastcep.fit``)."""

    sites: RegressionSites
    T: np.ndarray  #: (d,) posterior precisions = prior + sum of sites
    N: np.ndarray  #: (d,) posterior precision-times-means


class Trace(NamedTuple):
    """Per-iteration record of a fit; all arrays have length ``n_iter``."""

    elapsed: np.ndarray  #: seconds since the start of the fit, at the end of each iteration
    change: np.ndarray  #: convergence measure of the run's stopping rule
    skipped: np.ndarray  #: messages not applied (non-positive precision or not finite)
    paper_change: np.ndarray  #: mean over rows of summed squared change of nu (NaN if not tracked)
    damping: np.ndarray  #: damping used in each iteration
    eval_metric: np.ndarray  #: metric on the fit's eval_set per iteration (NaN when none)
    elbo: np.ndarray  #: evidence lower bound per iteration (method "vb"; NaN for the others)


class IterationInfo(NamedTuple):
    """What a callback receives after every iteration; return True from it to stop."""

    iteration: int
    change: float
    elapsed: float
    skipped: int
    posterior: GaussianPosterior


def trace_from_lists(elapsed, change, skipped, paper_change, damping, eval_metric=None, elbo=None):
    """Pack per-iteration lists into a ``Trace`` of arrays."""
    if eval_metric is None:
        eval_metric = [np.nan] * len(elapsed)
    if elbo is None:
        elbo = [np.nan] * len(elapsed)
    return Trace(
        np.asarray(elapsed, dtype=np.float64),
        np.asarray(change, dtype=np.float64),
        np.asarray(skipped, dtype=np.int64),
        np.asarray(paper_change, dtype=np.float64),
        np.asarray(damping, dtype=np.float64),
        np.asarray(eval_metric, dtype=np.float64),
        np.asarray(elbo, dtype=np.float64),
    )
