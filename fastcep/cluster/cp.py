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

A tensor file (``fastcep.fit(path, model=..., client=client)``, on storage the workers share) is
read by the workers, each its run of whole sum groups (``CPFilePartition``); nothing of its
entries passes through the client (``FileEntries``). The partitions check their entries and send
what the client needs of them: their counts per object (the flat start's posterior), their
values' moments (the standardisation), exact sums (``tensor.engine.exact_partials``: the
stopping measure's floor and cp_gaussian's reference variance, the one-process fit's bits) and
the start's sketch (``init="sketch"``, its default here: ``tensor.init.sketch_init``, a map over
the fit's groups). The client holds O(objects) arrays only (but a learned likelihood parameter's
first value, taken from the values gathered, as in one process), and the sites stay on the
workers (``res.state`` is None; a checkpoint resumes the fit).
"""

import hashlib
import math
import os

import numpy as np

from ..kernels import tensor as K
from ..results import HyperState
from ..tensor.engine import (
    ENTRY_CHUNK,
    SKETCH_ROUNDS,
    SUM_GROUPS,
    CPEngine,
    collapse_floor,
    entries_digest,
    entry_marginals,
    exact_partials,
    floor_of,
    guarded,
    reference_of,
    summed_groups,
)
from ..tensor.init import SKETCH_OVERSAMPLING, sketch_init, sketch_sums
from ..tensor.layout import Layout, check_values, make_layout, merge_moments, scale_of, value_moments
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
    def setup(self, shape, prior_Lam, prior_eta, M, settings, transform=(0.0, 1.0)):
        """The partition's engine (``settings``: ``CPEngine``'s keywords, with the whole fit's
        ``sum_chunk``), its predictions under the start ``M``; returns its number of entries.
        ``transform``: the (center, scale) of the values a file partition read (its kernels take
        (y - center) / scale, as ``tensor.layout.standardized``)."""
        coords, y, s = self.data
        y = transformed(y, *transform)
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
    def set_sites(self, Lam, eta, alpha, beta):
        """Every site of object o set to (``Lam[o]``, ``eta[o]``) (per object, over all modes), the
        noise's to (``alpha``, ``beta``): a resumed fit's sites (``ClusterCPEngine.resume_sites``)."""
        st, gidx = self.engine.store, self.engine.lay.gidx
        st.Lam[:] = Lam[gidx]
        st.eta[:] = eta[gidx]
        st.alpha[:] = alpha
        st.beta[:] = beta

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


def transformed(y, center, scale):
    """cp_gaussian's standardised values (y - center) / scale, as ``tensor.layout.standardized``
    forms them; y itself for (0, 1)."""
    return (y - center) / scale if scale != 1.0 or center != 0.0 else y


class CPFilePartition(CPPartition):
    """A partition of a tensor file's entries lo..hi-1 (``fastcep.io.tensor``, on storage the
    workers share), read and checked on its worker; then as ``CPPartition``. Before the engine
    is set up, it answers what the client needs of its entries (``FileEntries``)."""

    def __init__(self, path, lo, hi, shape, likelihood, func):
        from ..io.tensor import TensorReader

        with TensorReader(path) as reader:  # (indices within the shape and finite values: checked)
            coords, values = reader.read(lo, hi)
        try:
            y = check_values(values, len(values), likelihood, func)
        except ValueError as exc:  # (its rows are counted from the partition's first)
            where = f"{path!r}, the partition of entries {lo}..{hi - 1} (counted from {lo})"
            raise ValueError(f"{where}: {exc}") from exc
        super().__init__(coords, y, y if likelihood.binary else np.zeros(len(y)), lo, func)
        self.shape, self.likelihood, self.raw = tuple(shape), likelihood, values

    def describe(self, gaussian):
        """(entries, their count per object of each mode, and for cp_gaussian their values'
        moments, ``tensor.layout.value_moments``)."""
        coords, y, _ = self.data
        counts = [np.bincount(coords[:, k], minlength=d) for k, d in enumerate(self.shape)]
        return len(y), counts, value_moments([y]) if gaussian else None

    def _f(self, transform):
        """The values as the kernels take them, and on the scale of f (``link_values``)."""
        y = transformed(self.data[1], *transform)
        return y, self.likelihood.link_values(y)

    def sums(self, transform):
        """Exact partial sums (``exact_partials``) of y, y^2 and f^2 (y standardised)."""
        y, f = self._f(transform)
        return exact_partials(y), exact_partials(y * y), exact_partials(f * f)

    def deviations(self, transform, mean):
        """Exact partial sums of (y - mean)^2 (y standardised)."""
        return exact_partials((self._f(transform)[0] - mean) ** 2)

    def sketch(self, transform, width, group, V):
        """The sketch of ``init="sketch"`` over the partition's groups (``tensor.init.sketch_sums``:
        its first entry starts a group)."""
        return sketch_sums(self.data[0], self._f(transform)[1], self.shape, width, group, V)

    def checked(self):
        """The partition's values as checked (a learned likelihood parameter's first value is
        taken from all of them: ``FileEntries.values_to_learn``)."""
        return self.data[1]

    def digest(self):
        """SHA-256 (hex) of the partition's entries, as read and checked."""
        coords, y, _ = self.data
        return entries_digest(self.shape, [(coords, y)])

    def log_density(self, res):
        """The sum of the log predictive densities of ``res`` at the partition's entries."""
        return res.log_likelihood(self.data[0], self.raw) * len(self.raw)


class FileEntries:
    """A CP fit's entries in a tensor file that the cluster's workers read (``fit_cp`` with a path
    and ``client``): the partitions, made and checked, and what the fit asks of its entries
    (``tensor.engine.ArrayEntries``), from their sums. ``y`` and ``s`` are one entry's (the
    client's engine holds one entry's flat messages for all, ``ClusterCPEngine``)."""

    def __init__(self, client, path, values, model, method, o, lik, given, func):
        from ..io.tensor import TensorReader

        refusals(model, method, o, lik, func)
        if values is not None:
            raise ValueError(
                f"{func}: coords is a tensor file ({os.fspath(path)!r}) that holds the values; "
                "give values=None."
            )
        why = None
        if o["n_starts"] > 1:
            why = "n_starts > 1: run each start as a fit of its own"
        elif given.get("init") == "svd":
            why = (
                "init='svd', whose Gram matrix pairs the entries of one column across workers; "
                "init='sketch' is the default here"
            )
        if why is not None:
            raise NotImplementedError(f"{func}(client=...) of a tensor file does not support {why}.")
        with TensorReader(path) as reader:  # (its header: checked, shape and entries)
            shape, n = reader.shape, reader.n
        if o["shape"] is not None and tuple(o["shape"]) != shape:
            raise ValueError(f"{func}: shape={tuple(o['shape'])} differs from the tensor file's {shape}.")
        self.shape, self.n, self.Kmodes = shape, n, len(shape)
        self.init = "sketch" if given.get("init") is None else o["init"]
        n_obj = int(np.sum(shape))
        cov, schedule = o["covariance"], o["schedule"]
        self.sum_chunk = cluster_sum_chunk(client, n, n_obj, self.Kmodes, method, cov, schedule)
        path = os.path.abspath(path)  # (the workers share the storage, not the working folder)
        blocks = [(path, lo, hi) for lo, hi in group_ranges(n, self.sum_chunk, n_workers(client))]
        self.parts = Partitions(client, blocks, CPFilePartition, (shape, lik, func), func)
        described = self.parts.call("describe", model == "cp_gaussian")
        self.counts = [sum(d[1][k] for d in described) for k in range(self.Kmodes)]
        self.center, self.scale = 0.0, 1.0
        if model == "cp_gaussian" and o["standardize"] != "none":
            moments = (0, 0.0, 0.0, None)
            for d in described:
                moments = merge_moments(moments, d[2])
            self.center, self.scale = scale_of(moments, o["standardize"])
        self.transform = (self.center, self.scale)
        sums = self.parts.call("sums", self.transform)
        total = [math.fsum(p for s in sums for p in s[i]) for i in range(3)]
        self.floor, self.sum_f2 = floor_of(total[2], n), total[2]
        self.reference = None
        if model == "cp_gaussian":
            mean = total[0] / n
            var = math.fsum(p for s in self.parts.call("deviations", self.transform, mean) for p in s) / n
            self.reference = reference_of(var, total[1] / n)
        self.digest = None
        if o["checkpoint"] is not None:  # (bound to the entries as the partitions cut them)
            h = hashlib.sha256(repr((shape, n, blocks)).encode())
            for part in self.parts.call("digest"):
                h.update(part.encode())
            self.digest = h.hexdigest()
        self.y, self.s = np.zeros(1), np.zeros(1)
        self.on_workers = self

    def layout(self):
        """The client's layout: one entry (index 0 of every mode) and every object's count of
        entries (``ClusterCPEngine``'s flat start)."""
        offsets = np.zeros(self.Kmodes + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(self.shape)
        ptr = np.zeros(int(offsets[-1]) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.concatenate(self.counts))
        obj_mode = np.repeat(np.arange(self.Kmodes, dtype=np.int64), self.shape)
        one = offsets[:-1][None, :].copy()
        return Layout(self.shape, offsets, one, obj_mode, ptr, np.zeros(0, dtype=np.int64))

    def initial_means(self, lik, R, init, init_scale, m0, rng):
        """The start: the prior's means, the sketch (the partitions' maps, in group order) or
        random draws, as ``tensor.engine.initial_means``."""
        if m0 is not None:
            return m0.copy()
        if init != "sketch":
            return init_scale * rng.standard_normal((int(np.sum(self.shape)), R))
        width = R + SKETCH_OVERSAMPLING

        def sums_of(V):
            out = self.parts.call("sketch", self.transform, width, self.sum_chunk, V)
            return [np.concatenate([o[k] for o in out]) for k in range(self.Kmodes)]

        return sketch_init(sums_of, self.sum_f2, self.n, self.shape, R, init_scale, rng, SKETCH_ROUNDS)

    def values_to_learn(self):
        """The values, gathered from the partitions in order (n numbers: a learned likelihood
        parameter's first value, as in one process; the cluster learns it from sums after)."""
        return np.concatenate(self.parts.call("checked"))

    def log_likelihood(self, res):
        return math.fsum(self.parts.call("log_density", res)) / self.n


def cluster_sum_chunk(client, n, n_obj, Kmodes, method, covariance, schedule):
    """The entries per sum group of a cluster CP fit: the one-process fit's sum groups; where it
    would not sum, or where there are more workers than its groups, at least a group per worker
    (then not its bits, its roundings)."""
    workers = n_workers(client)
    chunk = summed_groups(n, n_obj, Kmodes, method, covariance, schedule)
    if chunk is None or -(-n // chunk) < workers:
        chunk = -(-n // max(workers, min(SUM_GROUPS, -(-n // ENTRY_CHUNK))))
    return chunk


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
    ``options`` and to the entries' ``digest``. A resumed fit restores them, sets the sites on
    the workers to each object's average site (``ClusterCPEngine.resume_sites``), then asks the
    partitions for their predictions under the restored means (the next change is measured from
    there). The partitioning need not match (the client's state does not depend on it)."""
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
        engine.resume_sites()
        engine.prediction_change()  # (the partitions' predictions under the restored means)

    arrays, _ = state()
    shapes = {name: a.shape for name, a in arrays.items()}
    return Checkpoints(o, digest, keys, state, restore, shapes, func)


def group_ranges(n, chunk, workers):
    """Entry ranges (lo, hi) of n entries, one per worker, each a run of whole sum groups of
    ``chunk`` entries (the last group may be shorter)."""
    groups = -(-n // chunk)
    per = -(-groups // workers) * chunk
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)]


def entry_blocks(lay, y, s, chunk, workers):
    """The entries as (coords, y, s, first entry) blocks, one per worker, each a run of whole sum
    groups."""
    coords = lay.gidx - lay.offsets[:-1]
    return [(coords[lo:hi], y[lo:hi], s[lo:hi], lo) for lo, hi in group_ranges(y.shape[0], chunk, workers)]


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

    def __init__(
        self, client, lay, y, s, model, method, R, covariance, schedule, rho, func="fit", entries=None, **kw
    ):
        n_obj, Kmodes = int(lay.offsets[-1]), lay.gidx.shape[1]
        if entries is None:  # (the arrays given, cut into partitions here)
            n = lay.gidx.shape[0]
            chunk = cluster_sum_chunk(client, n, n_obj, Kmodes, method, covariance, schedule)
        else:  # (a file's partitions, made and summed: ``FileEntries``)
            n, chunk = entries.n, entries.sum_chunk
        self.noise_parts = None
        self.gathers = self.gather = entries is None  # (a file's sites stay on the workers)
        # the start's posterior is the one-process fit's, the prior plus every object's flat
        # messages (all alike) summed in the same order: the engine's one entry stands for all
        # (``rebuild``: lay.ptr counts them)
        flat = lay._replace(gidx=lay.gidx[:1], ent=np.zeros(0, dtype=np.int64))
        super().__init__(flat, y, s, model, method, R, covariance, schedule, rho, sum_chunk=chunk, **kw)
        self.n = n
        if entries is None:
            self.f_floor = collapse_floor(self.likelihood, y)  # (as the one-process engine's)
        else:
            self.f_floor = entries.floor
            if self.warm:  # (cp_gaussian's warm-up: the noise precision from Var(y), as in one process)
                self.store.noise[2] = self.tau_init = kw["warmup_snr"] / entries.reference
        self.scratch = self.scratch._replace(
            part_L=np.empty((-(-n // chunk), n_obj, R, R)),
            part_e=np.empty((-(-n // chunk), n_obj, R)),
        )
        # (the partitions' engines sweep with these; the prior's and the noise's updates are the client's)
        shared = ("probit_curvature", "expect_under", "noise_warmup", "warmup_snr")
        settings = dict(
            model=model, method=method, R=R, covariance=covariance, schedule=schedule, rho=rho,
            a0=self.a0, b0=self.b0, sum_chunk=chunk, likelihood=self.likelihood,
            **{k: kw[k] for k in shared if k in kw},
        )  # fmt: skip
        if entries is None:
            blocks = entry_blocks(lay, y, s, chunk, n_workers(client))
            self.parts, transform = Partitions(client, blocks, CPPartition, (func,), func), (0.0, 1.0)
        else:
            self.parts, transform = entries.parts, entries.transform
        pb = self.problem
        self.parts.call("setup", lay.shape, pb.prior_Lam, pb.prior_eta, self.store.M, settings, transform)
        self.sweep = ClusterCPEngine._map
        if self.learner is not None:  # (the entries' marginals on the partitions: ``cluster.learn``)
            one = self.learner
            self.learner = ClusterLearner(
                one.template, self.parts, (one.nodes, one.weights), y=one.y, start=one.start, prior=one.prior,
            )  # fmt: skip

    def rebuild(self, moments=True):
        """The flat start's posterior: the prior plus each object's count of the one entry's flat
        messages (``rebuild_full`` with ``flat``), in the one-process fit's order."""
        K.rebuild_full(self.problem, self.store, self.scratch, 0, self.n_obj, moments, True)
        self.check_proper()

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

    def resume_sites(self):
        """A resumed fit's sites on the partitions, which would restart flat: each object's sites
        all alike, their sum the restored posterior's (posterior minus prior), the noise's
        likewise. A damped sweep moves every site by msg <- (1 - rho) msg + rho new, so the sums,
        and with them the posterior, are then the uninterrupted fit's: exactly for messages that
        read the posterior only; those that read their own cavity (``expect_under="cavity"``)
        see the average site in place of their own. (Flat sites, as before, lost the (1 - rho)
        part of every sum in the first sweep and took it back only slowly: more iterations and
        another stopping point.)"""
        st, pb = self.store, self.problem
        count = np.diff(pb.ptr).astype(np.float64)
        per = np.where(count > 0, 1.0 / np.maximum(count, 1.0), 0.0)
        Lam = (st.P_Lam - pb.prior_Lam) * per.reshape((-1,) + (1,) * (st.P_Lam.ndim - 1))
        eta = (st.P_eta - pb.prior_eta) * per[:, None]
        noise = (0.0, 0.0)  # (no noise messages but cp_gaussian's)
        if self.model == "cp_gaussian":
            noise = ((st.noise[0] - self.a0) / self.n, (st.noise[1] - self.b0) / self.n)
        self.parts.call("set_sites", Lam, eta, *noise)

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
        self.gather = self.gathers and stop_reason != "running"
        return super().result(shape, n_iter, converged, stop_reason, trace, options, copy)
