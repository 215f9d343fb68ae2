"""CP fits on a Dask cluster: ``fastcep.fit(coords, values, model="cp_...", client=client)``.

The map and the reduce of the parallel sweep (``kernels.tensor.sweep_full`` with_sums, then
``reduce_object_sums``) split across machines. The entries are cut into the one-process fit's
sum groups (``tensor.engine.summed_groups``: fixed ranges of entries), and each partition, a
run of whole groups, lives on one worker as a ``CPPartition`` actor with its own ``CPEngine``
over its entries (the tensor's global object numbering): their site messages, 64 doubles per
entry and mode at rank 8, never leave the worker. Every iteration the client sends what the
sweeps read of the posterior (P_Lam, P_eta, M, E2 and the noise: O(objects R^2); not the
covariances S, which only the rebuilds use), each partition sweeps its
entries and returns its groups' per-object sums of the new messages, its refused count and
(cp_gaussian) its noise messages' sums over the fit's fixed chunks of ENTRY_CHUNK entries; the
client reduces the groups in order with the one-process kernel, sums the chunks that two
partitions share entry by entry (``noise_chunk_sums``), updates the learned prior and the
noise, and asks the partitions for the stopping measure's partial sums under the new posterior.
A generic model's learned likelihood parameters (a negative binomial's dispersion, ...) are
learned as in one process, from sums the partitions send (``cluster.learn``), and sent with the
posterior to every sweep.

So the posterior, the noise and the messages are the one-process fit's, bitwise, when that fit
sums the same groups (it does when ``summed_groups`` chooses to and there are no more workers
than its groups; otherwise they agree within rounding). The stopping measure's sums are the
partitions', so its trace agrees within rounding.

The checks, the digest, the standardisation and the start (the SVD of the unfoldings) read the
entries once on the client, as a fit in one process does; the sweeps, the messages and their
memory are the workers'.
"""

import math

import numpy as np

from ..kernels import tensor as K
from ..results import HyperState
from ..tensor.engine import (
    ENTRY_CHUNK,
    SUM_GROUPS,
    CPEngine,
    collapse_floor,
    entry_marginals,
    guarded,
    summed_groups,
)
from ..tensor.layout import make_layout
from . import n_workers, on_worker_threads, worker_threads
from .checkpoints import Checkpoints, check_path
from .learn import ClusterLearner, EMRows
from .partitions import Partitions


class CPPartition(EMRows):
    """One partition of a CP fit's entries on a worker (a Dask actor): a ``CPEngine`` over its
    entries, whose messages stay here. ``setup`` builds it (flat messages), ``sweep`` runs one
    sweep from the posterior it is sent and returns the per-group sums, ``change`` the stopping
    measure's partial sums, ``messages`` the sites (for ``res.state``)."""

    def __init__(self, coords, y, s, first, func):
        self.data = (np.asarray(coords, dtype=np.int64), np.asarray(y, dtype=np.float64), np.asarray(s))
        self.first, self.func = first, func  # (the global number of the partition's first entry)
        self.engine = None
        self.threads = worker_threads()

    @on_worker_threads
    def setup(self, shape, prior_Lam, prior_eta, M, settings):
        """The partition's engine (``settings``: ``CPEngine``'s keywords, with the whole fit's
        ``sum_chunk``), its predictions under the start ``M``; returns its number of entries."""
        coords, y, s = self.data
        n_obj, R = prior_eta.shape
        self.engine = CPEngine(
            make_layout(coords, shape), y, s, prior_Lam=prior_Lam.copy(), prior_eta=prior_eta.copy(),
            init_means=np.zeros((n_obj, R)), **settings,
        )  # fmt: skip
        K.predict_mean(self.engine.lay.gidx, M, self.engine.f_old)
        # the noise's fixed chunks of ENTRY_CHUNK entries are the whole fit's: [b0, b1) holds the
        # partition's whole ones, the entries before and after belong to chunks it shares
        n = y.shape[0]
        self.b0 = min(-self.first % ENTRY_CHUNK, n)
        self.b1 = self.b0 + (n - self.b0) // ENTRY_CHUNK * ENTRY_CHUNK
        self.noise_chunks = np.empty(((self.b1 - self.b0) // ENTRY_CHUNK, 2))
        return n

    def reset(self):
        """(The flat messages are ``setup``'s.)"""

    @on_worker_threads
    def sweep(self, it, posterior, noise, likelihood=None):
        """Iteration ``it``'s sweep of the partition's entries from ``posterior`` (P_Lam, P_eta,
        M, E2: what the parallel sweeps read), ``noise`` and ``likelihood`` (a generic model's,
        its learned parameters' current values; None: as it was): (part_L, part_e) of its groups,
        its refused count, and (cp_gaussian) its noise messages' pieces (``noise_pieces``)."""
        eng = self.engine
        if likelihood is not None:
            eng.likelihood, eng.lik = likelihood, likelihood.kernel()
        st, sc = eng.store, eng.scratch
        for a, b in zip((st.P_Lam, st.P_eta, st.M, st.E2), posterior, strict=True):
            a[:] = b
        st.noise[:] = noise
        skipped = eng.sweep(eng, it)
        return (
            sc.part_L.copy(),
            sc.part_e.copy(),
            skipped,
            self.noise_pieces() if eng.model == "cp_gaussian" else None,
        )

    @on_worker_threads
    def noise_pieces(self):
        """The noise messages (alpha, beta) by the whole fit's chunks: the sums of the chunks
        that lie in the partition (the first one's number, then their sums), and the entries of the ones it
        shares with its neighbours, (chunk, alpha, beta) each, for the client to sum in order."""
        st, b0, b1 = self.engine.store, self.b0, self.b1
        K.noise_chunk_sums(st.alpha[b0:b1], st.beta[b0:b1], ENTRY_CHUNK, self.noise_chunks)
        first, n = self.first, st.alpha.shape[0]
        shared = [(first // ENTRY_CHUNK, 0, b0), ((first + b1) // ENTRY_CHUNK, b1, n)]
        shared = [(c, st.alpha[lo:hi].copy(), st.beta[lo:hi].copy()) for c, lo, hi in shared if hi > lo]
        return (first + b0) // ENTRY_CHUNK, self.noise_chunks.copy(), shared

    @on_worker_threads
    def change(self, M):
        """(sum of the squared changes of the entries' predictive means since the last call, sum
        of their squares) under the posterior means ``M``."""
        eng = self.engine
        K.predict_mean(eng.lay.gidx, M, eng.f_new)
        f_new, f_old = eng.f_new, eng.f_old
        eng.f_old, eng.f_new = f_new, f_old
        return float(np.sum((f_new - f_old) ** 2)), float(np.sum(f_new**2))

    @on_worker_threads
    def messages(self):
        st = self.engine.store
        return st.Lam, st.eta, st.alpha, st.beta

    # the learned likelihood parameters' sums (``cluster.learn.ClusterLearner``; a Gaussian's
    # noise is cp_gaussian's own, so no sum of squares here)
    def values(self):
        """The entries' values as the kernels take them."""
        return self.engine.problem.y

    @on_worker_threads
    def marginals(self, M, E2):
        """The entries' predictive means and variances of f under the posterior moments, kept here."""
        eng = self.engine
        n = eng.problem.y.shape[0]
        self.m, self.s2 = entry_marginals(eng.lay.gidx, eng.covariance, np.empty(n), np.empty(n), M, E2)


def refusals(model, method, o, likelihood, func):
    """A clear error for what a cluster CP fit does not run (yet), naming the option."""
    why = None
    if method != "cep1":
        why = f"method={method!r}: a cluster CP fit runs method 'cep1'"
    elif o["covariance"] != "full":
        why = "covariance='diag': a cluster CP fit sums full covariances' messages"
    elif o["schedule"] != "parallel":
        why = (
            f"schedule={o['schedule']!r} (the count models' default is 'sequential'): a cluster fit "
            "runs the parallel schedule; pass schedule='parallel'"
        )
    elif o["init_state"] is not None:
        why = "init_state: a cluster CP fit starts from the flat messages (resume from a checkpoint=)"
    elif o["checkpoint"] is not None and o["n_starts"] > 1:
        why = "n_starts > 1 with a checkpoint: each start would write over the last one's"
    elif guarded(model, method, o["schedule"], likelihood):
        why = f"a likelihood that is not log-concave ({likelihood.name}): its sweeps need one process's guard"
    if why is not None:
        raise NotImplementedError(
            f"{func}(client=...) does not support {why}; fit in one process (client=None)."
        )
    check_path(o, func)  # (a new checkpoint's folder, before any work)


#: the client's arrays a CP checkpoint holds: what the next sweep reads of the posterior, the
#: noise, and the objects' prior (the learned prior's message)
CHECKPOINT_ARRAYS = ("P_Lam", "P_eta", "M", "S", "E2", "noise")


#: the settings a cluster fit resumed from a checkpoint must share with it (``res.options``'
#: names, with the model and method)
CHECKPOINT_KEYS = (
    "model", "method",
    "shape", "rank", "standardize", "prior_var", "a0", "b0", "damping",
    "schedule", "covariance", "noise_warmup", "warmup_snr", "prior_mean", "prior", "likelihood",
    "probit_curvature", "expect_under",
)  # fmt: skip


def checkpoints(engine, o, digest, options, func):
    """The ``Checkpoints`` of a cluster CP fit: the client engine's posterior, noise, prior and
    hyper-posterior, and the damping, bound to the settings ``CHECKPOINT_KEYS`` of the result's
    ``options`` and to the entries' ``digest``. A resumed fit restores them, then asks the partitions for
    their predictions under the restored means (the next change is measured from there); the
    sites on the workers stay flat, and restart against that posterior. The partitioning need
    not match (the client's state does not depend on it)."""
    keys = {k: options.get(k) for k in CHECKPOINT_KEYS}
    st, pb = engine.store, engine.problem
    hyper_fields = HyperState._fields[1:]

    def state():
        arrays = {name: getattr(st, name) for name in CHECKPOINT_ARRAYS}
        arrays.update(prior_Lam=pb.prior_Lam, prior_eta=pb.prior_eta)
        position = dict(rho=engine.rho, hyper=None if engine.hyper is None else engine.hyper.kind)
        if engine.learner is not None:  # (the learned likelihood parameters' values)
            position["learned"] = {name: getattr(engine.likelihood, name) for name in engine.learner.names}
        if engine.hyper is not None:
            arrays.update({f"hyper_{name}": getattr(engine.hyper, name) for name in hyper_fields})
        return arrays, position

    def restore(arrays, position):
        for name in CHECKPOINT_ARRAYS:
            getattr(st, name)[:] = arrays[name]
        pb.prior_Lam[:], pb.prior_eta[:] = arrays["prior_Lam"], arrays["prior_eta"]
        if engine.hyper is not None:
            engine.hyper = HyperState(position["hyper"], *(arrays[f"hyper_{name}"] for name in hyper_fields))
        if engine.learner is not None:
            engine.learner.set_values(position["learned"])
            engine.likelihood, engine.lik = engine.learner.likelihood, engine.learner.kernel()
        engine.resumed = True
        engine.prediction_change()  # (the partitions' predictions under the restored means)

    arrays, _ = state()
    shapes = {name: a.shape for name, a in arrays.items()}
    return Checkpoints(o, digest, keys, state, restore, shapes, func)


def entry_blocks(lay, y, s, sum_chunk, workers):
    """The entries as (coords, y, s, first entry) blocks, one per worker, each a run of whole sum
    groups."""
    n = y.shape[0]
    groups = -(-n // sum_chunk)
    per = -(-groups // workers) * sum_chunk
    coords = lay.gidx - lay.offsets[:-1]
    return [(coords[lo : lo + per], y[lo : lo + per], s[lo : lo + per], lo) for lo in range(0, n, per)]


def noise_chunk_sums(pieces, n_chunks):
    """The noise messages' sums over the whole fit's chunks of ENTRY_CHUNK entries (n_chunks, 2)
    from the partitions' ``noise_pieces``, in partition order: a chunk that partitions share is
    summed here from its entries in order, as ``kernels.tensor.noise_chunk_sums`` sums it in one
    process (the same additions: the same sums)."""
    out = np.empty((n_chunks, 2))
    shared = {}
    for c0, sums, cut in pieces:
        out[c0 : c0 + len(sums)] = sums
        for c, a, b in cut:
            shared.setdefault(c, []).append((a, b))
    for c, cut in shared.items():
        total = [0.0, 0.0]
        for a, b in cut:
            for k, values in enumerate((a, b)):
                for v in values.tolist():
                    total[k] += v
        out[c] = total
    return out


class ClusterCPEngine(CPEngine):
    """The client's side of a cluster CP fit, in ``CPEngine``'s shape for the one loop
    (``tensor.engine.run_engine``): the posterior, the learned prior, the noise and the reduce
    are this engine's (built over one entry of its own, whose flat messages stand for every
    entry's at the start); the map (``sweep``), the noise messages' sums and the stopping
    measure's come from the partitions."""

    def __init__(self, client, lay, y, s, model, method, R, covariance, schedule, rho, func="fit", **kw):
        n, Kmodes = lay.gidx.shape
        n_obj = int(lay.offsets[-1])
        # the one-process fit's sum groups; where it would not sum, or where there are more
        # workers than its groups, at least a group per worker (then not its bits, its roundings)
        workers = n_workers(client)
        sum_chunk = summed_groups(n, n_obj, Kmodes, method, covariance, schedule)
        if sum_chunk is None or -(-n // sum_chunk) < workers:
            sum_chunk = -(-n // max(workers, min(SUM_GROUPS, -(-n // ENTRY_CHUNK))))
        self.noise_parts = None
        self.gather = True
        # the start's posterior is the one-process fit's, the prior plus every object's flat
        # messages (all alike) summed in the same order: the engine's one entry stands for all
        flat = lay._replace(gidx=lay.gidx[:1], ent=np.zeros_like(lay.ent))
        super().__init__(flat, y, s, model, method, R, covariance, schedule, rho, sum_chunk=sum_chunk, **kw)
        self.n = n
        self.f_floor = collapse_floor(self.likelihood, y)  # (as the one-process engine's)
        self.scratch = self.scratch._replace(
            part_L=np.empty((-(-n // sum_chunk), n_obj, R, R)),
            part_e=np.empty((-(-n // sum_chunk), n_obj, R)),
        )
        # (the partitions' engines sweep with these; the prior's and the noise's updates are the client's)
        shared = ("probit_curvature", "expect_under", "noise_warmup", "warmup_snr")
        settings = dict(
            model=model, method=method, R=R, covariance=covariance, schedule=schedule, rho=rho,
            a0=self.a0, b0=self.b0, sum_chunk=sum_chunk, likelihood=self.likelihood,
            **{k: kw[k] for k in shared if k in kw},
        )  # fmt: skip
        self.parts = Partitions(
            client, entry_blocks(lay, y, s, sum_chunk, workers), CPPartition, (func,), func
        )
        pb = self.problem
        self.parts.call("setup", lay.shape, pb.prior_Lam, pb.prior_eta, self.store.M, settings)
        self.sweep = ClusterCPEngine._map
        if self.learner is not None:  # (the entries' marginals on the partitions: ``cluster.learn``)
            one = self.learner
            self.learner = ClusterLearner(
                one.template, self.parts, (one.nodes, one.weights), y=one.y, start=one.start, prior=one.prior,
            )  # fmt: skip

    def _map(self, it):
        """The partitions' sweeps from the posterior; their groups' sums into the scratch, in
        order (``step`` reduces them); the refused count."""
        st, sc = self.store, self.scratch
        current = self.likelihood if self.learner is not None else None  # (its learned values)
        out = self.parts.call("sweep", it, (st.P_Lam, st.P_eta, st.M, st.E2), st.noise.copy(), current)
        np.concatenate([o[0] for o in out], out=sc.part_L)
        np.concatenate([o[1] for o in out], out=sc.part_e)
        if self.model == "cp_gaussian":
            self.noise_parts = noise_chunk_sums([o[3] for o in out], -(-self.n // ENTRY_CHUNK))
        return sum(int(o[2]) for o in out)

    def _noise_sums(self):
        if self.noise_parts is None:  # (before the first sweep: the flat messages')
            return super()._noise_sums()
        out = self.noise_parts
        return self.a0 + math.fsum(out[:, 0].tolist()), self.b0 + math.fsum(out[:, 1].tolist())

    def prediction_change(self):
        sums = self.parts.call("change", self.store.M)
        d2, f2 = math.fsum(s[0] for s in sums) / self.n, math.fsum(s[1] for s in sums) / self.n
        return float(np.sqrt(d2 / max(f2, self.f_floor)))

    def step(self, it):
        revived = self.parts.revived
        report = super().step(it)
        # (a sweep in which a lost partition was made again, its sites flat, is no evidence)
        return report if self.parts.revived == revived else report._replace(accept=False)

    def messages(self):
        """The sites, gathered from the partitions in order (the one-process fit's entry order);
        None for a snapshot while the fit runs (the callback's result, ``eval_set``'s): the
        sites stay on the workers until the end."""
        if not self.gather:
            return None
        parts = self.parts.call("messages")
        names = ("Lam", "eta", "alpha", "beta")
        self.store = self.store._replace(
            **{n: np.concatenate([p[k] for p in parts]) for k, n in enumerate(names)}
        )
        return super().messages()

    def result(self, shape, n_iter, converged, stop_reason, trace, options, copy=True):
        options = dict(options, partitions=len(self.parts.actors), revived=self.parts.revived)
        self.gather = stop_reason != "running"
        return super().result(shape, n_iter, converged, stop_reason, trace, options, copy)
