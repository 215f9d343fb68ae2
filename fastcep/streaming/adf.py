"""Streaming Bayesian CP decomposition: assumed density filtering with CEP (ADF-CEP).

``fastcep.stream(source, model, rank, batch_size=...)`` reads the observed entries in batches
(from memory or block by block from an HDF5 tensor file, the next block read while the current
one is computed), and for each batch runs CEP on the batch's entries only, with the current
posterior as the prior of every object it touches (DESIGN.md section 3.3); the batch's messages
are then absorbed into the posterior and dropped. Memory is O(batch K R^2 + objects R^2),
independent of the stream length. Objects first seen mid-stream start from the prior (their
initial means, for symmetry breaking, are seeded random draws). With ``checkpoint=`` the
posterior and the stream position are written atomically every ``checkpoint_every`` batches;
``resume=True`` continues from there and ends with the same posterior as an uninterrupted run.

``method="post"``: POST (Du et al., 2018), streaming variational Bayes (Broderick et al., 2013):
the same loop, each batch fitted by mean-field VMP (``fastcep.tensor.vmp``) with the current posterior
as the prior.

A generic model's learned likelihood parameters (``likelihood=`` with a parameter None) are
learned from the batches' entries, as the noise precision of cp_gaussian's stream is: within a
batch by the fit's update (``fastcep.glm.learn.LikelihoodLearner``, after every inner
iteration, from the predictive mean and variance of the batch's entries' f), the batches before
entering through a running summary, and what the batch's last iteration reached is kept for the
next batch. A Gaussian's noise precision keeps a running Gamma posterior, the sum of the
batches' expected sufficient statistics (from Gamma(a0, b0): a += n_b / 2, b += sum_b E[(y -
f)^2] / 2; the state's noise (a, b), as cp_gaussian's), exact streaming Bayes for it. A
parameter without sufficient statistics (a dispersion, a scale) takes an EM step on the batch
and keeps the running average of the batches' estimates of its log weighted by their entries,
log theta <- ((N - n_b) log theta + n_b log theta_b) / N after N entries (a stochastic
approximation with step n_b / N: a batch of few entries moves it little, no batch's estimate is
forgotten). The first batch starts from values of its own entries alone. Updating the
parameters only once after each batch, with the batch fitted at the values of the batches
before, was measured worse: on a 15 x 12 x 10 rank-2 tensor of 900 entries in 3 batches, the
first batch fitted at the data's variance left a posterior whose entries' marginals gave a noise
variance of 1.96 for 0.09 (cp_gaussian's stream: 0.094). The current values are in the state
(``StreamState.likelihood``) and the checkpoints.
"""

import functools
import math
import os
import time

import numpy as np

from .. import _loop
from .. import _options as O
from .. import _validation as V
from .._loop import Trace
from .._models import is_generic
from .._quadrature import gauss_hermite
from .._threads import ThreadGovernor, num_threads
from ..glm.learn import EXPECTATION_NODES, LikelihoodLearner
from ..io.checkpoint import read_checkpoint, write_checkpoint
from ..io.files import check_output
from ..likelihoods import Gaussian
from ..results import StreamState
from ..tensor.engine import (
    INIT_VAR_FRACTION,
    BufferPool,
    CPEngine,
    entry_marginals,
    exact_sum,
    guarded,
    warm_start,
)
from ..tensor.layout import (
    check_coords,
    check_memory,
    check_values,
    default_rank,
    make_layout,
    standardization,
)
from ..tensor.likelihoods import describe
from ..tensor.result import CPResult, eval_metric
from ..tensor.vmp import VMP_DEFAULTS, VMPEngine
from .prior import PriorLedger
from .sources import open_source

NOISE_WARMUP = 10
#: the signal-to-noise ratio of the first batch's warm-up (``CPEngine``'s default)
WARMUP_SNR = 10.0

#: the signature defaults of ``stream``, from the option table (``fastcep._options``): damping,
#: max_iter and prior_mean are None there, which stands for per-model values (and for method
#: "post", per-model VMP iterations), with the measurements behind them
STREAM_DEFAULTS = O.defaults("stream", "cep1")
#: options that must match between a checkpoint and the run resuming from it
_RESUME_KEYS = (
    "model",
    "method",
    "rank",
    "shape",
    "n",
    "batch_size",
    "shuffle",
    "seed",
    "prior_var",
    "a0",
    "b0",
    "damping",
    "tol",
    "max_iter",
    "covariance",
    "schedule",
    "init_scale",
    "prior_mean",
    "probit_curvature",
    "expect_under",
    "prior",
    "likelihood",
)
#: the values of the resume settings that a checkpoint leaves out (defaults; see ``options``)
_ABSENT = {"method": "cep1", "probit_curvature": "full", "expect_under": "posterior", "prior": "fixed"}


def first_scale(lik, y, R, K):
    """The sd of the first batch's random initial means (``init_scale=None``): 2.0 for a binary
    likelihood, else (mean(f^2) / R)^(1 / 2K) of the batch's values y on the scale of f (the
    likelihood's ``link_values``: log(1 + y) for counts), so that the initial reconstructions
    have their mean square."""
    if lik.binary:
        return 2.0
    f = lik.link_values(y)
    return (exact_sum(f**2) / len(f) / R) ** (1.0 / (2 * K))


# ---------------------------------------------------------------------------------- the loop


def stream(
    coords,
    values=None,
    *,
    model,
    rank=None,
    likelihood=STREAM_DEFAULTS["likelihood"],
    method=STREAM_DEFAULTS["method"],
    shape=STREAM_DEFAULTS["shape"],
    batch_size=STREAM_DEFAULTS["batch_size"],
    shuffle=STREAM_DEFAULTS["shuffle"],
    seed=STREAM_DEFAULTS["seed"],
    prior_var=STREAM_DEFAULTS["prior_var"],
    a0=STREAM_DEFAULTS["a0"],
    b0=STREAM_DEFAULTS["b0"],
    damping=STREAM_DEFAULTS["damping"],
    tol=STREAM_DEFAULTS["tol"],
    max_iter=STREAM_DEFAULTS["max_iter"],
    covariance=STREAM_DEFAULTS["covariance"],
    schedule=STREAM_DEFAULTS["schedule"],
    init_scale=STREAM_DEFAULTS["init_scale"],
    prior_mean=STREAM_DEFAULTS["prior_mean"],
    prior=STREAM_DEFAULTS["prior"],
    probit_curvature=STREAM_DEFAULTS["probit_curvature"],
    expect_under=STREAM_DEFAULTS["expect_under"],
    standardize=STREAM_DEFAULTS["standardize"],
    checkpoint=STREAM_DEFAULTS["checkpoint"],
    checkpoint_every=STREAM_DEFAULTS["checkpoint_every"],
    resume=STREAM_DEFAULTS["resume"],
    eval_set=STREAM_DEFAULTS["eval_set"],
    init_state=STREAM_DEFAULTS["init_state"],
    n_threads=STREAM_DEFAULTS["n_threads"],
    client=STREAM_DEFAULTS["client"],
    passes=STREAM_DEFAULTS["passes"],
    callback=STREAM_DEFAULTS["callback"],
    progress=STREAM_DEFAULTS["progress"],
    verbose=STREAM_DEFAULTS["verbose"],
    max_batches=STREAM_DEFAULTS["max_batches"],
    cluster=None,
    **unknown,
):
    """Streaming CP decomposition by ADF-CEP; the call form and result of ``fastcep.fit``.

    ``stream(coords, values, model=..., rank=..., shape=...)`` streams arrays in memory;
    ``stream("tensor.h5", model=..., rank=...)`` an HDF5 tensor file, read block by block.
    Every option's constraint and default are in the Options section below (the option table,
    shared with ``fastcep.fit``). ``cluster``: ``fastcep.cluster.stream``, which ``fastcep.stream``
    passes with ``client=`` (this module does not import the cluster code that builds on it).

    Parameters
    ----------
    coords : int array (n, K), or str or PathLike
        0-based coordinates of the entries, in stream order; or the path of an HDF5 tensor file
        (``fastcep.write_tensor``, ``fastcep.text_to_tensor``; never loaded whole).
    values : array (n,) or None
        The entries' values (None with a file).
    model : {"cp_gaussian", "cp_probit", "cp_<likelihood>", "cp"}
        As in ``fastcep.fit``: a generic model ("cp_logistic", any other likelihood of the seam's
        registry, "cp" with a likelihood) with method "cep1" only; where a default differs per
        model (damping, max_iter, prior_mean, init_scale) it takes cp_probit's if its values are
        binary, else cp_gaussian's.
    rank : int >= 1 or None, default None
        None (method "cep1"): fit's generous rank (``fastcep.tensor.layout.default_rank``) from
        the stream's length and shape, pruned by the learned prior; method "post" and a fixed
        prior need it.
    likelihood : fastcep.likelihoods.Likelihood, str or None
        With model "cp", as in ``fastcep.fit`` (the same resolution: ``Gaussian()`` runs
        cp_gaussian). A learned parameter is updated once per batch (the module's text): a
        Gaussian's noise variance from its running Gamma posterior (in ``res.state.noise``), any
        other by a running average of the batches' EM estimates. ``res.likelihood`` holds the
        values.
    method : {"cep1", "post"}
        "cep1": ADF-CEP. "post": POST, streaming variational Bayes, each batch fitted by VMP
        (``fastcep.fit(..., method="vmp")``) with the current posterior (full covariances, and the
        Gamma posterior of the noise precision) as its prior; ``damping``, ``schedule`` and
        ``covariance="diag"`` do not apply to it.
    shape : sequence of ints, optional
        For arrays (default: 1 + the largest index per mode); a file has its own.
    batch_size : int, default 1000
        Entries per batch; the last batch may be smaller.
    shuffle : bool, default False
        Visit the entries in a seeded random order: a full permutation for array sources; for
        files, a random order of blocks of whole chunks and a random order within each block.
    seed : int, default 0
        Seeds the shuffle and the initial means of new objects (a run is reproducible, and the
        same whatever the thread count or where it was interrupted and resumed).
    prior_var, a0, b0, covariance, schedule
        As in ``fastcep.fit`` (schedule default, None: "parallel").
    prior : {"fixed", "hierarchical", "wishart", "ard"} or None
        The embeddings' prior, as in ``fastcep.fit``. A learned one is updated once a batch from
        the posterior of the objects seen so far (``fastcep.streaming.prior``): the batch's
        objects take its current message (a new object starts at its mean), and at the end of
        the stream every object holds the last one. Default (None): "wishart" for method "cep1"
        with full covariances, "ard" with diagonal ones, "fixed" for "post" (the baseline). On
        DBLP the learned prior raised the test AUC from 0.853 to 0.930 at batch 1,000
        (BENCHMARKS.md).
    prior_mean : float >= 0 or None
        Prior of an object first seen mid-stream: N(m, prior_var I) with m drawn (seeded) as
        |N(0, prior_mean^2)| per coordinate, small and positive, and its initial posterior mean
        m (the supplement writes the prior as N(m_s, v I)). A zero prior mean leaves the
        sign-symmetric all-zero solution as the fixed point of sparse batches: on DBLP every
        embedding collapsed to 0 (AUC 0.50 at batch 1000); with positive means 0.76-0.80 (see
        BENCHMARKS.md), but on a dense synthetic tensor with factors of both signs a zero prior
        mean is better (AUC 0.86-0.92 against 0.66-0.91). Default (None): 0.1 for cp_probit, 0 for
        cp_gaussian (whose new objects then start from random means, see ``init_scale``). With a
        learned prior, m offsets the learned mean in the same way.
    probit_curvature : {"full", "rank1"} or None, default None
        cp_probit with method "cep1": the message's curvature rule, as in ``fastcep.fit`` (None:
        "rank1" there, else "full"; on DBLP "rank1" gives a higher test AUC; BENCHMARKS.md).
    expect_under : {"posterior", "cavity"} or None, default None
        None: "cavity" where it applies, as in ``fastcep.fit``. Method "cep1": where the inner
        fits take the other modes' moments, as in ``fastcep.fit`` (full covariances with the
        parallel or block schedule only). On DBLP (rank 8, batches
        100-10,000) "cavity" with ``probit_curvature="rank1"`` raised the test AUC from
        0.800-0.820 to 0.846-0.860, at 4.8 s a pass at batch 1,000 against 4.0 (BENCHMARKS.md).
    init_scale : float >= 0 or None
        With a zero prior mean, the sd of the random initial means of new objects; default (None):
        (mean(f^2) / R)^(1 / 2K) of the first batch, f its values on the scale of f (y; log(1 + y)
        for counts: the likelihood's ``link_values``), which gives initial reconstructions of
        their mean square (2.0 for cp_probit and the other binary models).
    damping, tol, max_iter : per batch, the inner CEP iterations
        The exception to ``fastcep.fit``'s defaults: per batch and, for damping and max_iter, per
        model (None), with the reasons, in Options below. "post": VMP iterations.
    checkpoint : path or None
        HDF5 file written atomically every ``checkpoint_every`` batches and at the end.
    resume : bool, default False
        Continue from ``checkpoint`` if it exists (settings must match; a corrupt or mismatched
        checkpoint raises ValueError). Without a checkpoint file the run starts from the beginning.
    eval_set : (coords, values) or None
        Evaluated (RMSE or AUC) at every checkpoint and at the end, into ``trace.eval_metric``.
    init_state : StreamState or None
        Continue from ``res.state`` of an earlier stream of the same tensor and settings (a
        checkpoint holds the same state).
    client : distributed.Client or None
        Stream on this Dask cluster (the ``dask`` extra; ``fastcep.cluster.stream``): the entries
        cut into one shard per worker (a file's row ranges, read by the worker), each streamed by
        ADF-CEP from the prior, the shards combined as EP over shards (the prior plus each shard's
        net message), then ``passes`` - 1 refinement passes, each shard streaming again against
        the others' messages. The result's trace has a row per pass, the callback is called after
        each pass.
    passes : int >= 1 or None
        With ``client``: the passes over the shards (None: 3).
    n_threads, callback, progress, verbose
        ``callback(info)`` after every batch with an ``IterationInfo`` (``iteration``: batches
        absorbed, ``change``: the batch's last inner change, ``result``: the stream so far, whose
        arrays the stream goes on updating: copy what you keep; ``result.state.rows_done``);
        returning True stops the stream (the result covers the batches done).
        ``progress=True`` keeps a progress line on stderr (the batch, the entries, their rate and
        the time left), ``verbose=True`` prints a line a batch (the one loop's, ``fastcep._loop``).
    max_batches : int or None
        Stop after this many batches in this call (with a checkpoint, a later ``resume=True``
        call continues).

    Returns
    -------
    CPResult
        ``n_iter`` is the number of batches absorbed; ``trace`` has one row per batch (elapsed
        time, last inner change, skipped messages, inner iterations in ``inner_iter``, damping,
        eval metric or NaN); ``stop_reason`` is "end", "callback" or "max_batches"; ``state`` the
        ``StreamState`` to continue from. On a cluster, ``n_iter`` and the trace's rows count
        passes (``inner_iter``: the shards' batches, ``change``: the largest change of a
        posterior mean in the pass).
    """
    given = O.arguments(locals())
    func = "stream"
    # the option table (fastcep._options): damping, max_iter, schedule and prior_mean None -> the
    # model's (and method's) values; method "post": damping 1.0 (recorded in the trace; VMP steps
    # are undamped) and schedule "parallel" (unused)
    o = O.validate(func, "stream", model, method, given)
    model, lik = o["model"], o["likelihood"]  # (the model that runs: "cp" resolved)
    init_state = o["init_state"]
    if init_state is not None and not isinstance(init_state, StreamState):
        raise V.param_error(
            "init_state", func, "a StreamState (res.state of a stream) or None", init_state, TypeError
        )
    if o["checkpoint"] is not None:  # (before any work: never over the input, a folder it can write)
        source_file = coords if isinstance(coords, (str, os.PathLike)) else None
        check_output(o["checkpoint"], [source_file], "checkpoint", func)
    if o.get("client") is None and given["passes"] is not None:
        raise ValueError(
            f"{func}: passes={o['passes']} are the passes of a cluster stream; give client= too."
        )
    if o.get("client") is not None:  # (shards on a Dask cluster, combined by EP: ``fastcep.cluster.stream``)
        return V.cluster_module(cluster, "stream").stream(o["client"], coords, values, o, method, func)
    src = open_source(coords, values, o["shape"], model, lik, o["batch_size"], func)
    # the batches' thread count is governed from their times (one thread when it is clearly faster:
    # a busy core makes every short parallel region of a batch wait)
    governor = ThreadGovernor(o["n_threads"]) if o["n_threads"] != 1 else None
    try:
        with num_threads(o["n_threads"]):
            return absorb(src, **settings(o, method, func), governor=governor)
    finally:
        src.close()


def settings(o, method, func="stream"):
    """The keyword arguments of ``absorb`` from the validated options ``o`` of ``stream`` (and its
    ``method``)."""
    return dict(
        model=o["model"], lik=o["likelihood"], R=o["rank"], pv=o["prior_var"], func=func, method=method,
        **{k: o[k] for k in (
            "batch_size", "shuffle", "seed", "a0", "b0", "damping", "tol", "max_iter", "covariance",
            "schedule", "init_scale", "prior_mean", "checkpoint", "checkpoint_every", "resume",
            "eval_set", "callback", "progress", "verbose", "max_batches", "probit_curvature",
            "expect_under", "init_state", "standardize", "prior",
        )},
    )  # fmt: skip


if stream.__doc__ is not None:  # (None under python -OO)
    stream.__doc__ += O.document(("stream",))


def absorb(
    src, *, model, lik, R, batch_size, shuffle, seed, pv, a0, b0, damping, tol, max_iter, covariance,
    schedule, init_scale, prior_mean, checkpoint, checkpoint_every, resume, eval_set, callback, progress,
    verbose, max_batches, func, method, probit_curvature, expect_under, init_state, standardize, prior,
    governor=None, warmup=True, values_scale=None, touched=None,
):  # fmt: skip
    """The stream of ``src`` (a source of ``open_source``) with the options of ``stream``
    (``settings``): every batch absorbed in turn; its ``CPResult``. ``warmup=False``: no noise
    warm-up in the first batch (a cluster stream's refinement passes, whose noise is known);
    ``values_scale``: cp_gaussian's (center, scale) of all the stream's values, given (a shard's
    are those of every shard), else from ``src``; ``touched``: a bool array (n_obj,) marked
    with the objects the batches touch."""
    shape = tuple(int(d) for d in src.shape)
    if R is None:  # (fit's generous rank, from the whole stream's length)
        R = default_rank(shape, src.n)
    Kmodes = len(shape)
    offsets = np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)
    n_obj = int(offsets[-1])
    copies = 2 if guarded(model, method, schedule, lik) else 1
    check_memory(min(batch_size, int(src.n)), shape, R, covariance, func, "the stream", copies)
    options = dict(
        model=model, rank=R, shape=list(shape), n=int(src.n), batch_size=batch_size, shuffle=shuffle,
        seed=seed, prior_var=pv, a0=a0, b0=b0, damping=damping, tol=tol, max_iter=max_iter,
        covariance=covariance, schedule=schedule, init_scale=init_scale, prior_mean=prior_mean,
    )  # fmt: skip
    if method != "cep1":  # (absent for "cep1": checkpoints written before "post" existed still match)
        options["method"] = method
    if probit_curvature != "full":  # (absent for the default, likewise)
        options["probit_curvature"] = probit_curvature
    if expect_under != "posterior":  # (likewise)
        options["expect_under"] = expect_under
    if prior != "fixed":  # (likewise)
        options["prior"] = prior
    if model == "cp":  # (likewise; the likelihood as given, learned parameters None)
        options["likelihood"] = describe(lik)
    # a generic model's learned likelihood parameters: updated after every batch
    learn = is_generic(model) and bool(lik.learned)
    # cp_gaussian: the values' scale (one pass over a file); the batches are standardized
    if values_scale is None:
        values_scale = standardization(src.value_blocks(), model, standardize)
    center, scale = values_scale
    options.update(standardize=standardize, value_center=center, value_scale=scale)
    if eval_set is not None:
        ev_coords, _ = check_coords(eval_set[0], shape, func, "eval_set[0]")
        ev_values = check_values(eval_set[1], len(ev_coords), lik, func, "eval_set[1]")
    trace = {k: [] for k in ("elapsed", "change", "skipped", "inner", "damping", "eval_metric")}
    # a checkpoint is bound to its data by content, not by path (one pass over the data)
    data_digest = src.identity() if checkpoint is not None else None
    if resume and os.path.exists(checkpoint):
        state, trace = read_checkpoint(
            checkpoint, options, _RESUME_KEYS, data_digest, lik if learn else None, _ABSENT
        )
    elif init_state is not None:
        state = _check_stream_state(init_state, n_obj, R, covariance, func, lik if learn else None)
        held = "fixed" if state.prior is None else state.prior.hyper.kind
        if held != prior:
            raise ValueError(
                f"{func}: init_state was streamed with prior={held!r}, this run has prior={prior!r}."
            )
    else:
        eye = np.eye(R) if covariance == "full" else np.ones(R)
        state = StreamState(
            P_Lam=np.broadcast_to(eye / pv, (n_obj, *eye.shape)).copy(),
            P_eta=np.zeros((n_obj, R)),
            M=np.zeros((n_obj, R)),
            S=np.broadcast_to(eye * pv, (n_obj, *eye.shape)).copy(),
            seen=np.zeros(n_obj, dtype=bool),
            noise=np.array([a0, b0]),
            batches_done=0,
            rows_done=0,
            init_sd=np.nan,
        )
    P_Lam, P_eta, M, S, seen, noise = state[:6]
    batches_done, rows_done, init_sd = state.batches_done, state.rows_done, state.init_sd
    # a generic model's likelihood, its learned parameters' current values (None until the
    # first batch gives them their first values)
    current = state.likelihood if learn else (lik if is_generic(model) else None)
    ledger = None
    if prior != "fixed":  # the learned prior (streaming.prior), continued from the state's
        if state.prior is not None:
            ledger = PriorLedger(state.prior, offsets, covariance)
        else:
            ledger = PriorLedger.start(prior, offsets, R, pv, covariance)

    def state_now():
        learned = ledger.state() if ledger is not None else None
        held = current if learn else None
        return StreamState(P_Lam, P_eta, M, S, seen, noise, batches_done, rows_done, init_sd, learned, held)

    order_rng = np.random.default_rng(seed) if shuffle else None
    first = batches_done  # (batches absorbed before this call: a resumed stream's)
    before = {k: list(v) for k, v in trace.items()}  # (their trace, from the checkpoint)
    n_batches = -(-src.n // batch_size)
    last_batch = n_batches if max_batches is None else min(n_batches, first + max_batches)
    batches = src.batches(batch_size, order_rng, batches_done)
    elapsed0 = before["elapsed"][-1] if before["elapsed"] else 0.0

    def whole_trace(this_run):
        """The stream's trace lists (those of a checkpoint): the batches before this call's, then
        this call's (``this_run``: the one loop's ``Trace``)."""
        return {k: before[k] + v for k, v in trace_lists(this_run).items()}

    def snapshot(stop_reason, trace_lists, copy=True):
        fitted = current if current is not None or not is_generic(model) else lik  # (before a batch)
        args = (model, covariance, R, shape, state_now(), trace_lists, options, stop_reason, method, copy)
        return stream_result(*args, fitted)

    def evaluate():
        return eval_metric(snapshot("end", before), ev_coords, ev_values)  # (the trace plays no part)

    def step(it):
        """Absorb batch it - 1 (the one loop counts batches from 1); its ``StepReport``."""
        nonlocal batches_done, rows_done
        b, coords, values = next(batches)
        report = absorb_batch(b, coords, values)
        batches_done = b + 1
        rows_done += len(values)
        at_checkpoint = checkpoint is not None and batches_done % checkpoint_every == 0
        metric = evaluate() if eval_set is not None and at_checkpoint else np.nan
        report["values"]["eval_metric"] = metric
        return _loop.StepReport(stop="end" if batches_done == n_batches else None, **report)

    def absorb_batch(b, coords, values):
        """The batch's CEP (or VMP) fit against the posterior so far, absorbed into it."""
        nonlocal init_sd, current
        # local problem: the batch's objects, renumbered per mode
        local = np.empty_like(coords)
        glob = []
        for k in range(Kmodes):
            u, inv = np.unique(coords[:, k], return_inverse=True)
            local[:, k] = inv.reshape(-1)
            glob.append(offsets[k] + u)
        local_shape = tuple(len(g) for g in glob)
        glob = np.concatenate(glob)
        if touched is not None:
            touched[glob] = True
        copies.start()  # (the batch's copies of its objects' rows, in buffers kept across batches)
        init, init_cov = gather(M, glob), gather(S, glob)
        new = ~seen[glob]
        y_b, s_b = _batch_values(values, lik.binary, center, scale)
        if np.isnan(init_sd):
            if init_scale is not None:
                init_sd = float(init_scale)
            else:
                init_sd = first_scale(lik, y_b, R, Kmodes)
        sd0 = float(init_sd)
        learned_means = ledger.before(glob, new, P_Lam, P_eta) if ledger is not None else None
        if new.any():
            rng = np.random.default_rng([seed, b])
            draw = rng.standard_normal((int(new.sum()), R))
            # the new objects' prior mean: the learned one (written by ledger.before), or 0
            base = learned_means if ledger is not None else 0.0
            if prior_mean > 0.0:
                # new objects: the prior's mean offset by a small positive m (a zero mean
                # collapses the first sparse batches to 0); start from it
                gn, m = glob[new], prior_mean * np.abs(draw)
                if covariance == "full":
                    P_eta[gn] += np.einsum("oij,oj->oi", P_Lam[gn], m)
                else:
                    P_eta[gn] += P_Lam[gn] * m
                init[new] = base + m
                M[gn] = init[new]
            else:
                # new objects: seeded random initial means about the prior's (symmetry breaking)
                init[new] = base + sd0 * draw
                v0 = max(INIT_VAR_FRACTION * sd0**2, 1e-12)
                init_cov[new] = v0 * (np.eye(R) if covariance == "full" else np.ones(R))
        lay = make_layout(local, local_shape)
        learner = None
        if learn:  # (within the batch, after every inner iteration; the earlier batches as a prior)
            learner = _batch_learner(lik, current, y_b, lay, covariance, noise, rows_done, b == 0)
        prior = dict(
            prior_Lam=gather(P_Lam, glob),
            prior_eta=gather(P_eta, glob),
            a0=float(noise[0]),
            b0=float(noise[1]),
        )
        if method == "post":
            # q(tau) starts at the posterior mean of the previous batches (the prior's)
            init_snr = VMP_DEFAULTS["init_snr"] if b == 0 else None
            engine = VMPEngine(
                lay, y_b, s_b, model, R, **prior, init_means=init, init_covs=init_cov, init_snr=init_snr,
                func=func,
            )  # fmt: skip
        else:
            engine = CPEngine(
                lay, y_b, s_b, model, "cep1", R, covariance, schedule, damping, **prior,
                probit_curvature=probit_curvature, expect_under=expect_under, init_means=init,
                init_covs=init_cov, noise_warmup=NOISE_WARMUP if b == 0 and warmup else 0,
                rng=np.random.default_rng(seed), likelihood=current, learner=learner, pool=pool,
            )  # fmt: skip
        inner = _loop.run(
            engine.step,
            max_iter=max_iter,
            tol=tol,
            finite=engine.finite,
            label=f"{model}/{method}, batch {b}",
            warn=False,  # (a batch's inner iterations are a budget, not a convergence promise)
        )
        P_Lam[glob], P_eta[glob] = engine.P_Lam, engine.P_eta
        if ledger is not None:  # (init, init_cov: the seen objects' moments before the batch)
            ledger.after(glob, new, init, init_cov, engine.M, engine.S)
        M[glob], S[glob] = engine.M, engine.S
        seen[glob] = True
        if model == "cp_gaussian":
            noise[:] = (engine.a, engine.b) if method == "post" else engine.noise[:2]
        if learn:  # (what the batch's last iteration reached)
            if learner.updates == 0:  # (its iterations all in the first batch's warm-up: once after)
                learner.update(engine.M, engine.E2)
            current = learner.likelihood
            if isinstance(lik, Gaussian):
                noise[:] = learner.gamma
        change, skipped = float(inner.trace.change[-1]), int(inner.trace.skipped.sum())
        # (the batch's engine goes with this call: its arrays are views of the stream's kept
        # buffers, which the next batch's engine takes over; an engine of its own per batch cost
        # fresh pages in every rebuild: BENCHMARKS.md, issues 19 and 40)
        return dict(
            change=change, skipped=skipped, values={"inner_iter": float(inner.n_iter), "damping": damping}
        )

    def gather(a, rows):
        """A copy of the rows of ``a`` (as ``a[rows]``) in the batch's ``copies``."""
        return np.take(a, rows, axis=0, out=copies.empty((len(rows), *a.shape[1:])), mode="clip")

    def status(batch, report, now):
        """The progress and verbose lines: the batch, the entries and their rate, the inner fit."""
        done = rows_done - rows_before
        rate = done / max(now - elapsed0, 1e-9)
        eta = (src.n - rows_done) / rate if rate > 0 else float("inf")
        inner = int(report.values["inner_iter"])
        return (
            f"batch {batch}/{n_batches}: {inner} inner iterations, change {report.change:.3e}, "
            f"{rows_done:,}/{src.n:,} entries, {rate:,.0f}/s, ETA {eta:,.0f} s"
        )

    def at_batch(info):
        """After every batch: the checkpoint (every ``checkpoint_every`` batches), then the
        callback's say."""
        if checkpoint is not None and batches_done % checkpoint_every == 0:
            # (the snapshot's trace is the whole stream's already)
            write_checkpoint(checkpoint, state_now(), options, trace_lists(info.result.trace), data_digest)
        return callback is not None and bool(callback(info))

    def running(it, this_run):  # (the snapshot shares the stream's arrays: a callback copies what it keeps)
        return snapshot("running", whole_trace(this_run), copy=False)

    rows_before = rows_done
    pool, copies = BufferPool(), BufferPool()  # (the batch engines' arrays; the batches' copies)
    out = _loop.run(
        step, max_iter=last_batch, first=first, tol=-math.inf, snapshot=running, finite=None,
        callback=at_batch if checkpoint is not None or callback is not None else None, verbose=verbose,
        progress=progress, label=f"{model}/{method}", func=func, start=time.perf_counter() - elapsed0,
        warn=False, governor=governor, describe=status, unit="batches",
    )  # fmt: skip
    trace = whole_trace(out.trace)
    stop_reason = out.stop_reason
    if stop_reason == "max_iter":  # (the batches this call was given: the stream's end, or before it)
        stop_reason = "end" if batches_done == n_batches else "max_batches"
    if ledger is not None and stop_reason == "end" and batches_done == n_batches:
        ledger.finish(P_Lam, P_eta, M, S)  # (every object: the last prior message)
    if eval_set is not None and trace["eval_metric"]:
        trace["eval_metric"][-1] = evaluate()
    if checkpoint is not None and out.n_iter > 0:
        write_checkpoint(checkpoint, state_now(), options, trace, data_digest)
    return snapshot(stop_reason, trace, copy=False)


#: a stream's trace lists (in its checkpoints) and the ``Trace`` fields they hold
TRACE_LISTS = {
    "elapsed": "elapsed", "change": "change", "skipped": "skipped", "inner": "inner_iter",
    "damping": "damping", "eval_metric": "eval_metric",
}  # fmt: skip


def trace_lists(trace):
    """A ``Trace``'s columns as a stream's trace lists."""
    return {name: np.asarray(getattr(trace, f), dtype=np.float64).tolist() for name, f in TRACE_LISTS.items()}


def _batch_learner(template, likelihood, y, lay, covariance, noise, rows_before, first):
    """The learner of a batch's engine (the module's text): the learned parameters of
    ``template`` from ``likelihood``'s values (None: from the batch's values y alone; the
    ``first`` batch's held for its warm-up, as cp_gaussian's noise, ``engine.warm_start``), a
    Gaussian's noise precision with the running Gamma posterior ``noise`` (a, b) of the batches
    before as its prior, any other parameter averaged in log with its value over the
    ``rows_before`` entries before."""
    n_b = len(y)
    marginals = functools.partial(entry_marginals, lay.gidx, covariance, np.empty(n_b), np.empty(n_b))
    if likelihood is not None:
        start = {k: getattr(likelihood, k) for k in template.learned}
    else:
        start = warm_start(template, y, WARMUP_SNR) if first else None
    return LikelihoodLearner(
        template, y, marginals, gauss_hermite(EXPECTATION_NODES), start=start,
        prior=(float(noise[0]), float(noise[1])), total=exact_sum, memory=rows_before,
    )  # fmt: skip


def _batch_values(values, binary, center=0.0, scale=1.0):
    """A batch's values (cp_gaussian: standardized by ``center`` and ``scale``) and label signs
    as the engines take them (binary values are {0, 1} here: checked by the source)."""
    if binary:
        s = np.where(values == 1.0, 1.0, -1.0)
        return s, s
    y = np.ascontiguousarray(values, dtype=np.float64)
    if center != 0.0 or scale != 1.0:
        y = (y - center) / scale
    return y, np.zeros(len(values))


def _check_stream_state(state, n_obj, R, covariance, func, template=None):
    """A StreamState for this tensor and rank, copied (the stream updates its arrays in place);
    with a likelihood ``template`` (a generic model's, with learned parameters) the state's
    likelihood must be of its class and fixed parameters (None: the next batch starts them)."""
    cov = (n_obj, R, R) if covariance == "full" else (n_obj, R)
    shapes = {"P_Lam": cov, "P_eta": (n_obj, R), "M": (n_obj, R), "S": cov, "seen": (n_obj,), "noise": (2,)}
    for name, want in shapes.items():
        if np.shape(getattr(state, name)) != want:
            raise V.param_error(
                "init_state",
                func,
                f"a StreamState with {name} of shape {want}",
                f"shape {np.shape(getattr(state, name))}",
            )
    held = state.likelihood
    if template is None:
        held = None
    elif held is not None:
        fixed = {k: v for k, v in template.params().items() if k not in template.learned}
        if type(held) is not type(template) or any(held.params().get(k) != v for k, v in fixed.items()):
            what = f"the state of a stream with the likelihood {template!r}"
            raise V.param_error("init_state", func, what, f"one of {held!r}")
        held = template.with_params(**{k: getattr(held, k) for k in template.learned})
    return state._replace(likelihood=held, **{name: np.array(getattr(state, name)) for name in shapes})


def stream_result(
    model,
    covariance,
    R,
    shape,
    state,
    trace,
    options,
    stop_reason,
    method,
    copy=True,
    likelihood=None,
    n_iter=None,
):
    """The stream so far as a CPResult, its state the ``StreamState`` (copied unless ``copy=False``:
    at the end the arrays are handed over); ``n_iter``: the trace's rows (default: the batches)."""
    if copy:
        state = state._replace(
            **{k: np.array(getattr(state, k)) for k in ("P_Lam", "P_eta", "M", "S", "seen", "noise")}
        )
        if state.prior is not None:
            state = state._replace(prior=state.prior._replace(**{
                k: np.array(getattr(state.prior, k)) for k in state.prior._fields[1:]
            }))  # fmt: skip
    t = Trace.from_columns(
        len(trace["elapsed"]),
        elapsed=trace["elapsed"],
        change=trace["change"],
        skipped=trace["skipped"],
        inner_iter=trace["inner"],
        damping=trace["damping"],
        eval_metric=trace["eval_metric"],
    )
    noise = (float(state.noise[0]), float(state.noise[1])) if model == "cp_gaussian" else None
    return CPResult(
        model, method, covariance, R, shape, state.M, state.S, noise,
        int(state.batches_done if n_iter is None else n_iter),
        stop_reason == "end", stop_reason, t, state, dict(options, stream=True),
        hyper=state.prior.hyper if state.prior is not None else None, likelihood=likelihood,
    )  # fmt: skip
