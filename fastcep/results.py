"""Result types shared by every model: posteriors, resumable regression state, traces."""

from typing import NamedTuple

import numpy as np

from . import _loop


class GaussianPosterior(NamedTuple):
    """Fully factorised Gaussian posterior over the weights."""

    mean: np.ndarray  #: (d,) posterior means
    var: np.ndarray  #: (d,) posterior variances


class WeightDraws(NamedTuple):
    """Draws of a regression's weights from its posterior (``RegressionResult.sample_weights``)."""

    weights: np.ndarray  #: (n_draws, d) draws of w
    intercept: np.ndarray | None  #: (n_draws,) draws of the intercept b on the user's scale, or None


class RegressionSites(NamedTuple):
    """Site messages of fully factorised regression, in natural parameters."""

    tau: np.ndarray  #: (n, d) precisions
    nu: np.ndarray  #: (n, d) precision-times-means


class RegressionState(NamedTuple):
    """Everything needed to resume a regression fit (``init_state=`` of ``fastcep.fit``)."""

    sites: RegressionSites
    T: np.ndarray  #: (d,) posterior precisions = prior + sum of sites
    N: np.ndarray  #: (d,) posterior precision-times-means


class VBState(NamedTuple):
    """A mean-field VB regression's q(w): resume it with ``init_state=`` (the intercept, if the
    fit had one, last)."""

    mean: np.ndarray  #: (d,) posterior means
    var: np.ndarray  #: (d,) posterior variances


# (the trace and the callback's argument belong to the one loop; re-exported here)
Trace = _loop.Trace
IterationInfo = _loop.IterationInfo


class StreamPrior(NamedTuple):
    """A stream's learned prior, as its state and checkpoints hold it (``fastcep.streaming.prior``)."""

    hyper: object  #: the hyper-posterior (``fastcep.tensor.hyper.HyperState``)
    counts: np.ndarray  #: (K,) seen objects per mode
    sum_M: np.ndarray  #: (K, R) sums of their posterior means
    sum_E2: np.ndarray  #: (K, R, R) or (K, R) sums of their second moments (diagonals with "diag")
    version: np.ndarray  #: (n_obj,) int64: the version of the prior message each posterior holds
    msg_Lam: np.ndarray  #: (V, K, R, R) or (V, K, R): each version's prior precisions per mode
    msg_eta: np.ndarray  #: (V, K, R): each version's prior precision-times-means per mode


class StreamState(NamedTuple):
    """Everything needed to continue a stream (``res.state`` of ``fastcep.stream``; a checkpoint
    file holds it): the posterior of every object so far and the position in the stream."""

    P_Lam: np.ndarray  #: (n_obj, R, R) or (n_obj, R) posterior precisions (natural parameters)
    P_eta: np.ndarray  #: (n_obj, R) posterior precision-times-means
    M: np.ndarray  #: (n_obj, R) posterior means
    S: np.ndarray  #: (n_obj, R, R) or (n_obj, R) posterior covariances or variances
    seen: np.ndarray  #: (n_obj,) bool: the object has appeared in a batch
    #: (2,) Gamma posterior (a, b) of the noise precision (cp_gaussian, and a generic Gaussian's
    #: learned variance b / a)
    noise: np.ndarray
    batches_done: int  #: batches absorbed
    rows_done: int  #: entries absorbed
    init_sd: float  #: sd of the random start of new objects (NaN until the first batch sets it)
    prior: object = None  #: the learned prior (``streaming.prior.StreamPrior``), None when fixed
    #: a generic model's likelihood with learned parameters (``fastcep.likelihoods``), their
    #: current values (None: no learned parameters, or before the first batch)
    likelihood: object = None
