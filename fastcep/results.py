"""Result types shared by every model: posteriors, resumable regression state, traces."""

from typing import NamedTuple

import numpy as np

from . import _loop


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


# (the trace and the callback's argument belong to the one loop; re-exported here)
Trace = _loop.Trace
IterationInfo = _loop.IterationInfo
