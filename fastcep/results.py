"""Result types shared by every model: posteriors, resumable regression and stream states, the CP
hyper-posterior, traces. ``fastcep.io`` reads and writes them (and the results of ``glm.result``
and ``tensor.result``)."""

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
    #: the damping's position (``glm.rules.Damping.state``: the damping, its phase, its rules'
    #: counters) at the end of the fit: a resumed fit with ``damping="auto"`` goes on from it as
    #: the uninterrupted fit would (None: from the undamped start)
    damping: dict | None = None
    #: the sweeps behind these sites (of this fit and of those it resumed): a resumed fit of the
    #: sampling methods ("is", "kjit") draws the keys the uninterrupted one would (None: unknown,
    #: from the first sweep's)
    iterations: int | None = None


class VBState(NamedTuple):
    """A mean-field VB regression's q(w): resume it with ``init_state=`` (the intercept, if the
    fit had one, last)."""

    mean: np.ndarray  #: (d,) posterior means
    var: np.ndarray  #: (d,) posterior variances


# (the trace and the callback's argument belong to the one loop; re-exported here)
Trace = _loop.Trace
IterationInfo = _loop.IterationInfo


#: the hierarchical priors of the CP embeddings (``prior=`` of ``fastcep.fit``; "fixed" is
#: N(m, prior_var I); ``fastcep.tensor.hyper``)
HYPER_KINDS = ("ard", "wishart")


class HyperState(NamedTuple):
    """The hyper-posterior of a hierarchical prior (flat arrays; unused fields have size 0).

    ``kind`` "ard": ``a`` (1,) the shape and ``b`` (R,) the rates of the Gamma posteriors of the
    column precisions. ``kind`` "wishart": per mode k, ``mean`` (K, R) and ``beta`` (K,) of the
    Gaussian of mu_k, ``nu`` (K,) and ``W_inv`` (K, R, R) of the Wishart of Lambda_k (scale
    matrix W = inv(W_inv)).
    """

    kind: str
    a: np.ndarray
    b: np.ndarray
    mean: np.ndarray
    beta: np.ndarray
    nu: np.ndarray
    W_inv: np.ndarray


def hyper_problems(hyper, Kmodes, R):
    """What is wrong with a hyper-posterior read from a file, or "" (shapes, finite numbers,
    proper Gamma and Normal-Wishart posteriors)."""
    if hyper.kind not in HYPER_KINDS:
        return f"unknown kind {hyper.kind!r} (fastcep knows {', '.join(HYPER_KINDS)})"
    arrays = hyper[1:]
    if not all(np.all(np.isfinite(x)) for x in arrays):
        return "non-finite numbers"
    if hyper.kind == "ard":
        if hyper.a.shape != (1,) or hyper.b.shape != (R,):
            return f"shapes {hyper.a.shape}, {hyper.b.shape} (expected (1,), ({R},))"
        if hyper.a[0] <= 0 or np.any(hyper.b <= 0):
            return "a Gamma posterior with a shape or rate <= 0"
        return ""
    want = ((Kmodes, R), (Kmodes,), (Kmodes,), (Kmodes, R, R))
    got = (hyper.mean.shape, hyper.beta.shape, hyper.nu.shape, hyper.W_inv.shape)
    if got != want:
        return f"shapes {got} (expected {want})"
    if np.any(hyper.beta <= 0) or np.any(hyper.nu <= R - 1):
        return f"beta <= 0 or nu <= R - 1 = {R - 1}"
    W = hyper.W_inv
    symmetric = np.allclose(W, np.swapaxes(W, 1, 2), rtol=1e-10, atol=0)
    if not (symmetric and np.all(np.linalg.eigvalsh(W)[:, 0] > 0)):
        return "a Wishart scale that is not positive definite"
    return ""


class StreamPrior(NamedTuple):
    """A stream's learned prior, as its state and checkpoints hold it (``fastcep.streaming.prior``)."""

    hyper: HyperState  #: the hyper-posterior
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


#: the writer of every result (``fastcep.io.results.save``), which ``fastcep.io`` registers when it
#: is imported (``import fastcep`` imports it): the results' own ``save`` methods call it through
#: here, so that a result does not import the file code that reads results
_WRITERS = []


def register_writer(save):
    """Make ``save(result, path, ...)`` the writer of the results' ``save`` methods."""
    _WRITERS[:] = [save]


def save_result(result, path, *args):
    """Write ``result`` to ``path`` with the registered writer (``fastcep.save``)."""
    if not _WRITERS:
        raise RuntimeError("save: fastcep.io is not imported; call fastcep.save(result, path)")
    return _WRITERS[0](result, path, *args)
