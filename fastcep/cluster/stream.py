"""Streams on a Dask cluster: ``fastcep.stream(..., client=client)``, EP over shards.

The stream's entries are cut into shards, one per worker: contiguous runs of the stream order (a
tensor file's row ranges, read by the worker that streams them, so no entry passes through the
client; arrays' rows, sent once). Each shard is a site of an EP over shards (Vehtari et al.,
"Expectation propagation as a way of life", JMLR 2020):

- **Pass 1.** Every shard streams its entries by ADF-CEP (``streaming.adf.absorb``, the
  one-process stream) from the shared prior. Its net message is, for every object its entries
  touch, its posterior minus its prior message, in natural parameters (with a learned prior, the
  message of the shard's last hyper-posterior), and for cp_gaussian the change of its noise
  Gamma posterior.
- **The client** adds the shards' net messages to the prior message in shard order, learns the
  prior from that posterior (``HYPER_STEPS`` VMP updates of the hyper-posterior from the seen
  objects' moments, as the stream's ledger does) and adds the noise changes to (a0, b0).
- **Refinement passes** (``passes`` - 1): every shard streams its entries again from its cavity,
  the prior message plus the other shards' net messages, starting from the current posterior
  means; its new net message replaces the old one, damped (``SHARD_DAMPING``). A row of a cavity
  or posterior that is not positive definite keeps the shard's old message (counted in the
  trace's ``skipped``).

An object first seen by a shard in pass 1 takes the one-process stream's start (a learned prior's
mean, ``prior_mean``'s offset, seeded random means); each shard draws from its own seed. The
result is a ``CPResult`` like the one-process stream's, whose ``trace`` has one row per pass
(``change``: the largest change of a posterior mean in the pass; ``inner_iter``: the batches of
all shards) and whose state continues in one process as any stream's does.

``checkpoint=`` writes the client's state after every pass (``checkpoint_every`` does not
apply: a pass is the unit), and ``resume=True`` goes on with the next pass from exactly that
state (``_checkpoints``).

A generic model's learned likelihood parameters are learned by each shard from its batches, as
a one-process stream learns them, and combined on the client after every pass: the shards'
estimates averaged in log, weighted by their entries (``combined``); the next pass starts every
shard from that value. Refused by name (``refusals``): methods other than "cep1",
``init_state`` and ``max_batches``.
"""

import functools
import hashlib
import math
import os
import time
from typing import NamedTuple

import numpy as np

from .. import _loop
from .._models import is_generic
from .._threads import num_threads
from ..results import HyperState, StreamPrior, StreamState
from ..streaming import adf
from ..streaming.prior import second_moment_sum
from ..streaming.sources import ArraySource, FileSource, open_source
from ..tensor import hyper as H
from ..tensor.layout import check_coords, check_values, default_rank, merge_moments, scale_of, value_moments
from ..tensor.result import eval_metric
from . import check_scheduler, cuts, n_workers, require, worker_threads
from .checkpoints import Checkpoints, check_path
from .partitions import lost

#: VMP updates of the learned prior's hyper-posterior from the combined posterior, each pass
HYPER_STEPS = 5
#: seconds to wait for a worker when every one was lost
WAIT = 60
#: the step of a shard's net message towards its new one in the refinement passes (EP's damping)
SHARD_DAMPING = 0.5


# ------------------------------------------------------------------------------- on a worker
def shard_moments(data, model, likelihood, func):
    """The moments (``value_moments``) of a shard's values (for cp_gaussian's standardization)."""
    src = _source(data, model, likelihood, func)
    try:
        return value_moments(src.value_blocks())
    finally:
        src.close()


def shard_digest(data, model, likelihood, func):
    """The digest of a shard's entries (``entries_digest``), taken where they are read."""
    src = _source(data, model, likelihood, func)
    try:
        return src.identity()
    finally:
        src.close()


def shard_pass(data, run, cavity, values_scale):
    """One pass of a shard: its entries streamed from ``cavity`` (a ``StreamState``; None: the
    fresh stream's start, pass 1); returns a ``ShardMessage``: the objects its entries touch, its
    net message there (the posterior minus its prior message, minus the cavity's: natural
    parameters), its noise Gamma's change, and what the client's result takes from it."""
    src = _source(data, run["model"], run["lik"], run["func"])
    n_obj = int(sum(src.shape))
    if cavity is not None:  # (sent over the objects the shard touches: the whole state here)
        cavity = expand(cavity, src.shape, run)
    touched = np.zeros(n_obj, dtype=bool)
    try:
        with num_threads(worker_threads()):
            res = adf.absorb(
                src,
                **run,
                init_state=cavity,
                values_scale=values_scale,
                warmup=cavity is None,
                touched=touched,
            )
    finally:
        src.close()
    st = res.state
    idx = np.flatnonzero(touched)
    modes = np.searchsorted(_offsets(res.shape), idx, side="right") - 1
    K = len(res.shape)
    after = _prior_message(st, -1, K, run)
    d_Lam, d_eta = st.P_Lam[idx] - after[0][modes], st.P_eta[idx] - after[1][modes]
    noise = np.array([run["a0"], run["b0"]])
    if cavity is not None:
        before = _prior_message(cavity, 0, K, run)
        d_Lam -= cavity.P_Lam[idx] - before[0][modes]
        d_eta -= cavity.P_eta[idx] - before[1][modes]
        noise = cavity.noise
    learned = {name: getattr(res.likelihood, name) for name in run["lik"].learned} if st.likelihood else {}
    return ShardMessage(
        idx, d_Lam, d_eta, st.noise - noise, st.init_sd, int(st.batches_done), res.options, learned,
        int(st.rows_done),
    )  # fmt: skip


class Cavity(NamedTuple):
    """A shard's cavity as the client sends it: a ``StreamState`` of the objects its entries touch
    only (``idx``, of ``n_obj``). The shard's stream reads and changes only those objects;
    ``expand`` gives it the whole tensor's state, the others at their prior message."""

    idx: np.ndarray  #: (m,) the objects the shard's entries touch
    n_obj: int  #: the tensor's objects
    state: StreamState  #: the cavity over ``idx`` (every array's rows, the prior's versions)


def expand(cavity, shape, run):
    """The shard's ``StreamState`` over every object from its ``Cavity``: the touched objects as
    sent, the others at the prior message (version 0), unseen; the stream never reads them (its
    batches touch only ``idx``, and the net message is taken there), they only keep its arrays
    whole and proper."""
    st, idx = cavity.state, cavity.idx
    K = len(shape)
    modes = np.searchsorted(_offsets(shape), np.arange(cavity.n_obj), side="right") - 1
    Lam, eta = _prior_message(st, 0, K, run)
    P_Lam, P_eta = np.array(Lam[modes]), np.array(eta[modes])
    M, S = np.zeros(P_eta.shape), np.empty(P_Lam.shape)
    S[:] = np.linalg.inv(Lam)[modes] if run["covariance"] == "full" else 1.0 / Lam[modes]
    seen = np.zeros(cavity.n_obj, dtype=bool)
    for whole, part in ((P_Lam, st.P_Lam), (P_eta, st.P_eta), (M, st.M), (S, st.S), (seen, st.seen)):
        whole[idx] = part
    prior = st.prior
    if prior is not None:
        version = np.zeros(cavity.n_obj, dtype=np.int64)
        version[idx] = prior.version
        prior = prior._replace(version=version)
    return st._replace(P_Lam=P_Lam, P_eta=P_eta, M=M, S=S, seen=seen, prior=prior)


class ShardMessage(NamedTuple):
    """A shard's net message after a pass (``shard_pass``)."""

    idx: np.ndarray  #: (m,) the objects its entries touch
    Lam: np.ndarray  #: (m, R, R) or (m, R) their net precisions
    eta: np.ndarray  #: (m, R) their net precision-times-means
    noise: np.ndarray  #: (2,) the change of the noise Gamma posterior (a, b)
    init_sd: float  #: the sd of the shard's random starts (pass 1)
    batches: int  #: its batches
    options: dict  #: its stream's recorded options
    learned: dict = {}  #: a generic model's learned likelihood parameters, the shard's estimates
    rows: int = 0  #: its entries


def _source(data, model, likelihood, func):
    if data[0] == "file":  # (a row range of a file the workers share: read here)
        _, path, rows, batch_size = data
        return FileSource(path, model, likelihood, block_rows=max(batch_size, 1 << 16), rows=rows)
    _, coords, values, shape = data
    return ArraySource(coords, values, shape, likelihood, func)


def _prior_message(state, version, K, run):
    """The prior message (per mode: precisions, precision-times-means) of a version (0 or -1) of a
    state's learned prior, or the fixed prior's N(0, prior_var I)."""
    if state.prior is not None:
        return state.prior.msg_Lam[version], state.prior.msg_eta[version]
    R = state.M.shape[1]
    eye = np.eye(R) if run["covariance"] == "full" else np.ones(R)
    return np.broadcast_to(eye / run["pv"], (K, *eye.shape)), np.zeros((K, R))


def _offsets(shape):
    return np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)


# ------------------------------------------------------------------------------- the client
def refusals(o, method, func):
    """A clear error for what a cluster stream does not run (yet), naming the option."""
    why = None
    if method != "cep1":
        why = f"method={method!r}: a cluster stream runs 'cep1'"
    elif o["init_state"] is not None:
        why = "init_state: a cluster stream starts from the prior"
    elif o["max_batches"] is not None:
        why = "max_batches: a cluster stream runs whole passes"
    if why is not None:
        raise NotImplementedError(
            f"{func}(client=...) does not support {why}; stream in one process (client=None)."
        )


def stream(client, coords, values, o, method, func="stream"):
    """The cluster stream of ``fastcep.stream`` (options ``o`` validated already): its
    ``CPResult`` (the module's text)."""
    distributed = require(func)
    refusals(o, method, func)
    model, lik, cov = o["model"], o["likelihood"], o["covariance"]
    described, shape, n = _shards(client, coords, values, o, func)
    shards = Shards(client, distributed, described, func)
    R = o["rank"] if o["rank"] is not None else default_rank(shape, n)
    K, offsets = len(shape), _offsets(shape)
    n_obj = int(offsets[-1])
    modes = np.searchsorted(offsets, np.arange(n_obj), side="right") - 1
    run = dict(
        adf.settings(o, "cep1", func), R=R, callback=None, eval_set=None, progress=False, verbose=False,
        checkpoint=None, resume=False, max_batches=None,
    )  # fmt: skip
    del run["init_state"]
    values_scale = (0.0, 1.0)
    if model == "cp_gaussian" and o["standardize"] != "none":  # (each shard's moments, merged in order)
        moments = (0, 0.0, 0.0, None)
        for m in shards.run(shard_moments, lambda k: (model, lik, func)):
            moments = merge_moments(moments, m)
        values_scale = scale_of(moments, o["standardize"])
    if o["eval_set"] is not None:
        ev_coords, _ = check_coords(o["eval_set"][0], shape, func, "eval_set[0]")
        ev_values = check_values(o["eval_set"][1], len(ev_coords), lik, func, "eval_set[1]")
    hyper = H.initial(o["prior"], K, R, o["prior_var"]) if o["prior"] != "fixed" else None
    post = Posterior(K, R, cov, o["prior_var"], modes, hyper)
    noise0 = np.array([o["a0"], o["b0"]])
    messages = [None] * len(shards)
    start = time.perf_counter()
    n_batches = -(-n // o["batch_size"])
    init_sd, first, noise = np.nan, None, noise0
    learn = is_generic(model) and bool(lik.learned)
    fitted = lik if is_generic(model) else None  # (a learned parameter: the shards' combined estimate)
    saved = None
    passes_done = 0
    if o["checkpoint"] is not None:  # (the client's state after every pass)
        saved = _checkpoints(shards, described, o, dict(rank=R, shape=list(shape), n=n), post, func)
        passes_done = saved.resume()
        if passes_done:
            messages, init_sd, first, values = saved.restored
            noise = noise0 + sum(m.noise for m in messages)
            if learn:
                fitted = lik.with_params(**values)

    def result_now(stop_reason, trace):
        options = dict(first, n=n, seed=o["seed"], shuffle=o["shuffle"], rank=R)
        options.update(shards=len(shards), passes=len(trace.elapsed), shard_damping=SHARD_DAMPING)
        state = post.state(noise, init_sd, n_batches, n)
        if learn:  # (a stream continued from the result starts from the combined estimate)
            state = state._replace(likelihood=fitted)
        columns = {k: getattr(trace, c) for k, c in adf.TRACE_LISTS.items()}
        args = (model, cov, R, shape, state, columns, options, stop_reason, "cep1", False, fitted)
        return adf.stream_result(*args, len(trace.elapsed))

    def step(it):
        """Pass ``it`` (from 1) over the shards, combined as EP over shards."""
        nonlocal messages, first, init_sd, noise, fitted
        p = it - 1
        cavities = [post.cavity(m, noise - m.noise) for m in messages] if p else [(None, None)] * len(shards)
        if p and learn:  # (each shard starts from the shards' combined estimate)
            cavities = [
                (c._replace(state=c.state._replace(likelihood=fitted)), frozen) for c, frozen in cavities
            ]

        def arguments(k, p=p, cavities=cavities):
            return dict(run, seed=shard_seed(o["seed"], k, p)), cavities[k][0], values_scale

        new = shards.run(shard_pass, arguments)
        first = new[0].options
        if p == 0:
            init_sd = new[0].init_sd
        skipped = 0
        if p == 0:
            messages = new
        else:  # (damped; the rows whose cavity was not positive definite keep their old message)
            messages = [
                _damped(old, fresh, cavities[k][1])
                for k, (old, fresh) in enumerate(zip(messages, new, strict=True))
            ]
            skipped = sum(int(c[1].sum()) for c in cavities)
        if learn:
            fitted = combined(lik, new)
        before = post.M.copy()
        skipped += post.combine(messages)
        noise = noise0 + sum(m.noise for m in messages)
        change = float(np.max(np.abs(post.M - before))) if p else np.nan
        values = {
            "inner_iter": float(sum(m.batches for m in new)),
            "damping": 1.0 if p == 0 else SHARD_DAMPING,
        }
        return _loop.StepReport(change, skipped, values=values)

    def after_pass(info):
        """After every pass: the checkpoint, then the user's callback."""
        if saved is not None:
            saved.current = (messages, init_sd, first, learned_values(fitted, lik) if learn else {})
            saved.write(info.result.trace)  # (the checkpoint's rows, then this run's)
        return o["callback"](info) if o["callback"] is not None else None

    def snapshot(it, trace):
        return result_now("running", trace if saved is None else saved.trace(trace))

    evaluate = None
    if o["eval_set"] is not None:
        evaluate = functools.partial(_evaluate, coords=ev_coords, values=ev_values)
    label = f"{model}/cep1 on {len(shards)} shards"
    out = _loop.run(
        step, max_iter=max(o["passes"], passes_done), first=passes_done, tol=-math.inf, snapshot=snapshot,
        evaluate=evaluate, callback=after_pass if saved is not None or o["callback"] is not None else None,
        verbose=o["verbose"], progress=o["progress"], label=label, func=func, start=start, warn=False,
        describe=lambda it, rep, now: f"pass {it}/{o['passes']}: change {rep.change:.3e}", unit="passes",
    )  # fmt: skip
    stop_reason = "end" if out.stop_reason == "max_iter" else out.stop_reason
    res = result_now(stop_reason, out.trace if saved is None else saved.trace(out.trace))
    if saved is not None:
        saved.options(res.options)
    return res


def combined(template, messages):
    """``template`` with each learned parameter at the shards' estimates averaged in log, weighted
    by their entries (in shard order): a stream's running average over its batches, over the
    shards."""
    rows = sum(m.rows for m in messages)
    values = {}
    for name in template.learned:
        total = 0.0
        for m in messages:
            total += m.rows * math.log(m.learned[name])
        values[name] = math.exp(total / rows)
    return template.with_params(**values)


def learned_values(fitted, template):
    return {name: getattr(fitted, name) for name in template.learned}


def _evaluate(result, coords, values):
    """A pass's RMSE or AUC on the eval set (``tensor.result.eval_metric``)."""
    return eval_metric(result, coords, values)


#: the settings a resumed cluster stream must share with its checkpoint (with rank, shape, n
#: and the shards' rows)
_RESUME_KEYS = (
    "model", "covariance", "prior", "prior_var", "a0", "b0", "batch_size", "shuffle", "seed", "standardize",
    "damping", "max_iter", "tol", "probit_curvature", "expect_under",
)  # fmt: skip


def _checkpoints(shards, described, o, more, post, func):
    """The ``Checkpoints`` of a cluster stream (``cluster.checkpoints``), written after every pass:
    the client's posterior (the shards' summed messages, the objects seen, a learned prior's
    hyper-posterior) and each shard's net message over every object (zero where it touches none),
    bound to the settings, the shards' cut and the digest of their entries (taken on the workers,
    where they are read). A resumed stream goes on with the next pass, from exactly that state."""
    check_path(o, func)
    digests = shards.run(shard_digest, lambda k: (o["model"], o["likelihood"], func))
    h = hashlib.sha256()
    for d in digests:
        h.update(d.encode())
    rows = [int(d[2][1] - d[2][0]) if d[0] == "file" else len(d[2]) for d in described]
    keys = {k: o[k] for k in _RESUME_KEYS}
    keys.update(more, method="cep1", shard_rows=rows, likelihood=o["likelihood"].name)
    keys["params"] = o["likelihood"].params()
    n_obj, S = post.D_Lam.shape[0], len(described)
    hyper_fields = HyperState._fields[1:]

    def state():
        messages, init_sd, first, learned = saved.current
        arrays = {
            "D_Lam": post.D_Lam, "D_eta": post.D_eta, "seen": post.seen.astype(np.float64),
            "msg_Lam": np.zeros((S, *post.D_Lam.shape)), "msg_eta": np.zeros((S, *post.D_eta.shape)),
            "msg_touched": np.zeros((S, n_obj)), "msg_noise": np.array([m.noise for m in messages]),
            "msg_batches": np.array([float(m.batches) for m in messages]),
        }  # fmt: skip
        for k, m in enumerate(messages):
            arrays["msg_Lam"][k, m.idx], arrays["msg_eta"][k, m.idx] = m.Lam, m.eta
            arrays["msg_touched"][k, m.idx] = 1.0
        if post.hyper is not None:
            arrays.update({f"hyper_{name}": getattr(post.hyper, name) for name in hyper_fields})
        kind = None if post.hyper is None else post.hyper.kind
        return arrays, dict(init_sd=float(init_sd), options=first, hyper=kind, learned=learned)

    def restore(arrays, position):
        post.D_Lam[:], post.D_eta[:] = arrays["D_Lam"], arrays["D_eta"]
        post.seen[:] = arrays["seen"] > 0
        if post.hyper is not None:
            post.hyper = HyperState(position["hyper"], *(arrays[f"hyper_{name}"] for name in hyper_fields))
            post.msg = H.messages(post.hyper, post.K, post.cov)
        post._moments()
        if post.hyper is not None:
            post.sums = post._sums()
        messages = []
        for k in range(S):
            idx = np.flatnonzero(arrays["msg_touched"][k] > 0)
            messages.append(ShardMessage(
                idx, arrays["msg_Lam"][k, idx], arrays["msg_eta"][k, idx], arrays["msg_noise"][k],
                position["init_sd"], int(arrays["msg_batches"][k]), position["options"],
            ))  # fmt: skip
        saved.restored = (messages, position["init_sd"], position["options"], position.get("learned", {}))

    shapes = {
        "D_Lam": post.D_Lam.shape, "D_eta": post.D_eta.shape, "seen": (n_obj,),
        "msg_Lam": (S, *post.D_Lam.shape), "msg_eta": (S, *post.D_eta.shape), "msg_touched": (S, n_obj),
        "msg_noise": (S, 2), "msg_batches": (S,),
    }  # fmt: skip
    if post.hyper is not None:
        shapes.update({f"hyper_{name}": getattr(post.hyper, name).shape for name in hyper_fields})
    saved = Checkpoints(o, h.hexdigest(), keys, state, restore, shapes, func)
    return saved


def shard_seed(seed, k, p):
    """The seed of shard k's stream in pass p (its shuffle, its new objects' random starts)."""
    return int(np.random.SeedSequence([seed, k, p]).generate_state(1)[0])


def _damped(old, fresh, frozen):
    """A shard's message a damped step from ``old`` towards ``fresh`` (the same objects), where
    ``frozen`` (a mask of its objects) is False."""
    step = np.where(frozen, 0.0, SHARD_DAMPING)
    w = step.reshape(-1, *([1] * (old.Lam.ndim - 1)))
    return fresh._replace(
        Lam=old.Lam + w * (fresh.Lam - old.Lam),
        eta=old.eta + step[:, None] * (fresh.eta - old.eta),
        noise=old.noise + SHARD_DAMPING * (fresh.noise - old.noise),
    )


class Posterior:
    """The client's posterior of a cluster stream: the prior message (fixed, or a learned prior's
    hyper-posterior) plus the shards' net messages, and its moments."""

    def __init__(self, K, R, covariance, prior_var, modes, hyper):
        self.K, self.R, self.cov, self.modes, self.hyper = K, R, covariance, modes, hyper
        n_obj = len(modes)
        eye = np.eye(R) if covariance == "full" else np.ones(R)
        self.fixed = (np.broadcast_to(eye / prior_var, (K, *eye.shape)).copy(), np.zeros((K, R)))
        self.msg = self.fixed if hyper is None else H.messages(hyper, K, covariance)
        self.D_Lam, self.D_eta = np.zeros((n_obj, *eye.shape)), np.zeros((n_obj, R))
        self.seen = np.zeros(n_obj, dtype=bool)
        self.sums = None
        self._moments()

    def _moments(self):
        self.P_Lam = self.msg[0][self.modes] + self.D_Lam
        self.P_eta = self.msg[1][self.modes] + self.D_eta
        self.M, self.S = moments(self.P_Lam, self.P_eta)

    def combine(self, messages):
        """The shards' net messages added to the prior message in shard order; a learned prior's
        hyper-posterior learned from the seen objects' moments. Returns the objects whose posterior
        is not positive definite (their messages dropped)."""
        self.D_Lam[:], self.D_eta[:] = 0.0, 0.0
        for m in messages:
            self.D_Lam[m.idx] += m.Lam
            self.D_eta[m.idx] += m.eta
            self.seen[m.idx] = True
        bad = ~positive_definite(self.msg[0][self.modes] + self.D_Lam)
        self.D_Lam[bad], self.D_eta[bad] = 0.0, 0.0
        for _ in range(HYPER_STEPS if self.hyper is not None else 0):
            self._moments()
            self.sums = self._sums()
            self.hyper = H.update_from_sums(self.hyper, *self.sums)
            self.msg = H.messages(self.hyper, self.K, self.cov)
        self._moments()
        if self.hyper is not None:
            self.sums = self._sums()
        return int(bad.sum())

    def _sums(self):
        """Per mode: the seen objects' count, sum of means and sum of second moments."""
        counts = np.zeros(self.K)
        sum_M = np.zeros((self.K, self.R))
        sum_E2 = np.zeros((self.K, *self.S.shape[1:]))
        for k in range(self.K):
            rows = self.seen & (self.modes == k)
            counts[k] = np.count_nonzero(rows)
            sum_M[k] = self.M[rows].sum(axis=0)
            sum_E2[k] = second_moment_sum(self.M[rows], self.S[rows])
        return counts, sum_M, sum_E2

    def prior(self, idx=None):
        """The learned prior as a stream's state holds it (every object holds its message; with
        ``idx``, the version array of those objects only), or None."""
        if self.hyper is None:
            return None
        version = np.zeros(len(self.modes) if idx is None else len(idx), dtype=np.int64)
        return StreamPrior(
            self.hyper, *(a.copy() for a in self.sums), version, self.msg[0][None], self.msg[1][None]
        )

    def cavity(self, m, noise):
        """(the cavity of a shard's message ``m`` over the objects its entries touch, ``m.idx``:
        a ``Cavity`` that starts from the posterior's means (``expand`` makes it the shard's
        ``StreamState``); the mask of those objects whose cavity is not positive definite (they
        keep the posterior there))."""
        idx = m.idx
        P_Lam, P_eta = self.P_Lam[idx] - m.Lam, self.P_eta[idx] - m.eta
        frozen = ~positive_definite(P_Lam)
        P_Lam[frozen], P_eta[frozen] = self.P_Lam[idx[frozen]], self.P_eta[idx[frozen]]
        rows = (self.M[idx], self.S[idx], self.seen[idx])
        state = StreamState(P_Lam, P_eta, *rows, np.array(noise), 0, 0, 1.0, self.prior(idx))
        return Cavity(idx, len(self.modes), state), frozen

    def state(self, noise, init_sd, batches, rows):
        """The posterior as a stream's ``StreamState``."""
        return StreamState(
            self.P_Lam,
            self.P_eta,
            self.M,
            self.S,
            self.seen,
            np.array(noise),
            batches,
            rows,
            init_sd,
            self.prior(),
        )


def moments(P_Lam, P_eta):
    """Means and covariances (or variances) from natural parameters."""
    if P_Lam.ndim == 2:
        S = 1.0 / P_Lam
        return S * P_eta, S
    S = np.linalg.inv(P_Lam)
    S = 0.5 * (S + np.swapaxes(S, 1, 2))
    return np.einsum("oij,oj->oi", S, P_eta), S


def positive_definite(P):
    """Per object, whether its precision (R, R) or precisions (R,) are positive definite."""
    if P.ndim == 2:
        return np.all(P > 0, axis=1)
    return np.linalg.eigvalsh(P)[:, 0] > 0


def _shards(client, coords, values, o, func):
    """The shards (one per worker, contiguous runs of whole batches of the stream order) as data
    descriptions a worker reads: a file's row ranges, or arrays scattered to their workers; the
    tensor's shape and entries."""
    batch = o["batch_size"]
    if isinstance(coords, (str, os.PathLike)):
        src = open_source(
            coords, values, o["shape"], o["model"], o["likelihood"], batch, func
        )  # (its header)
        shape, n = tuple(int(d) for d in src.shape), int(src.n)
        src.close()
        rows = cuts(n, batch, n_workers(client))
        path = os.path.abspath(coords)  # (the workers share the storage, not the working folder)
        return [("file", path, r, batch) for r in rows], shape, n
    src = open_source(coords, values, o["shape"], o["model"], o["likelihood"], batch, func)
    shape, n = tuple(int(d) for d in src.shape), int(src.n)
    c, v = src.coords, src.values
    if o["shuffle"]:  # (the one-process stream's order, cut into shards)
        order = np.random.default_rng(o["seed"]).permutation(n)
        c, v = c[order], v[order]
    return [("arrays", c[lo:hi], v[lo:hi], shape) for lo, hi in cuts(n, batch, n_workers(client))], shape, n


class Shards:
    """The shards on the cluster: shard k's data description on worker k (arrays scattered there
    once, a file's row range as it is), and ``run(func, arguments)``: ``func(data, *arguments(k))``
    for every shard k at once, results in shard order; a shard whose worker was lost runs again
    on another (its arrays sent again from the client)."""

    #: attempts to run a lost shard's work again
    ATTEMPTS = 3

    def __init__(self, client, distributed, shards, func="stream"):
        self.client, self.distributed, self.shards, self.func = client, distributed, shards, func
        workers = sorted(client.scheduler_info().get("workers", ())) or [None]
        self.workers = [workers[k % len(workers)] for k in range(len(shards))]
        self.data = [self._place(k) for k in range(len(shards))]

    def __len__(self):
        return len(self.shards)

    def _place(self, k, anywhere=False):
        shard = self.shards[k]
        if shard[0] == "file":
            return shard
        where = None if anywhere or self.workers[k] is None else [self.workers[k]]
        return self.client.scatter([shard], workers=where, hash=False)[0]

    def run(self, func, arguments):
        alive = sorted(self.client.scheduler_info().get("workers", ()))
        for k, worker in enumerate(self.workers):  # (workers gone since the last run: another one)
            if worker is not None and worker not in alive:
                self.workers[k] = alive[k % len(alive)] if alive else None
        futures = []
        for k in range(len(self)):
            try:
                futures.append(self._submit(func, k, arguments, self.workers[k]))
            except Exception as exc:  # (its worker gone since the last run: the arrays sent again)
                check_scheduler(self.client, self.func, exc)
                if not (
                    lost(self.distributed, exc) or isinstance(exc, KeyError)
                ):  # (KeyError: unknown worker)
                    raise
                futures.append(self._again(func, k, arguments))
        out = []
        for k, f in enumerate(futures):
            for attempt in range(self.ATTEMPTS + 1):
                try:
                    out.append(f.result())
                    break
                except Exception as exc:
                    check_scheduler(self.client, self.func, exc)
                    if not lost(self.distributed, exc) or attempt == self.ATTEMPTS:
                        raise
                    f = self._again(func, k, arguments)
        return out

    def _submit(self, func, k, arguments, worker=None):
        where = dict(workers=[worker], allow_other_workers=True) if worker else {}
        # (a cavity, tens of MB, is sent to the worker first: not through the scheduler in the task)
        args = [
            self.client.scatter([a], workers=where.get("workers"), hash=False)[0]
            if isinstance(a, StreamState)
            else a
            for a in arguments(k)
        ]
        return self.client.submit(func, self.data[k], *args, pure=False, **where)

    def _again(self, func, k, arguments):
        """Shard k's work submitted again once a worker is there (its arrays sent again)."""
        for _ in range(self.ATTEMPTS):
            try:
                self.client.wait_for_workers(1, timeout=WAIT)
                self.data[k] = self._place(k, anywhere=True)
                self.workers[k] = None  # (from now on where its arrays are, or anywhere)
                if not isinstance(self.data[k], tuple):
                    held = self.client.who_has([self.data[k]]).get(self.data[k].key, ())
                    self.workers[k] = sorted(held)[0] if held else None
                return self._submit(func, k, arguments, self.workers[k])
            except Exception as exc:
                check_scheduler(self.client, self.func, exc)
                if not (lost(self.distributed, exc) or isinstance(exc, KeyError)):
                    raise
        raise RuntimeError(
            f"shard {k} of the cluster stream was lost and could not be sent again on {self.ATTEMPTS} "
            f"attempts; is the Dask scheduler still running?"
        )
