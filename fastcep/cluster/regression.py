"""Regression on a Dask cluster: ``fastcep.fit(X, y, model=..., client=client)``.

Each partition of rows lives on one worker as a ``Partition`` actor: its features (checked,
centred and given the intercept's column there), its values and its site messages, which never
leave the worker. A sweep sends the posterior (T, N, mu, v: 4 d floats) to every partition; each
runs the one-process parallel sweep over its rows (``kernels.glm.schedules.parallel_step``) and
returns its per-chunk partial sums (n_chunks d pairs of floats) and its count of refused
messages; the client reduces all chunks in partition order with the one-process kernel
(``finish_parallel``), so the posterior, the change, the damping and the stopping rule are those
of a fit in one process on the same chunks (``fastcep.glm.engine``).

Supported: dense or sparse X (a NumPy, scipy.sparse or Dask array, split by rows; a sparse
partition sends per-column sums, ``SparsePartition``), or the path of a sparse-row file
(``fastcep.io.csr``) on storage the workers share, whose row ranges the workers read
(``FilePartition``: no rows pass through the client), methods "cep1", "cep2" and "ep", the
parallel schedule, the posterior stopping rule, any log-concave likelihood (probit, logistic,
Poisson, Gaussian, negative binomial, ...), its parameters given or learned (``ClusterLearner``),
and numeric labels. The rest is refused by name (``refusals``).
"""

import hashlib
import os

import numpy as np

from .. import _loop
from .. import _validation as V
from .._quadrature import gauss_hermite
from .._threads import num_threads
from ..glm import engine as E
from ..glm import rules as R
from ..glm import sparse as SP
from ..glm.learn import EXPECTATION_NODES, linear_marginals
from ..glm.result import RegressionResult
from ..kernels import chunk_rows
from ..kernels.glm import schedules as S
from ..kernels.glm import sparse as SPK
from ..kernels.glm.state import GLMProblem, GLMScratch, GLMState
from ..kernels.glm.sweep import reduce_posterior
from . import cuts, n_workers, on_worker_threads, worker_threads
from .checkpoints import Checkpoints, check_path
from .learn import ClusterLearner, EMRows
from .partitions import Partitions

#: the methods and schedule a cluster fit runs (the parallel sweep: every message from one posterior)
METHODS = ("cep1", "cep2", "ep")


class Partition(EMRows):
    """One partition of a regression's rows on a worker (a Dask actor): its features, values and
    site messages, and the one-process sweep over them.

    X (n_p, d) and y (n_p,) are checked here (finite features, values the likelihood takes); then
    ``stats`` reports what the client needs for the centre and the scale check, ``setup`` lays
    out the rows (centred, with the intercept's column), ``reset`` sets the flat messages, and
    ``sweep`` runs one parallel sweep from the posterior it is sent. Each method returns the
    partition's per-chunk sums of its messages (``scratch.pT``, ``pN``) where the posterior
    needs them."""

    def __init__(self, X, y, likelihood, func):
        self.X = V.check_matrix(np.asarray(X), "X", func)
        R.check_feature_scale(self.X, func)
        self.s = likelihood.check(np.asarray(y), "y", func, self.X.shape[0])
        self.likelihood = likelihood
        self.threads = worker_threads()

    def stats(self):
        """(rows, columns, ``column_stats``: what the centre needs)."""
        return *self.X.shape, E.column_stats(self.X)

    def digest(self):
        """SHA-256 (hex) of the partition's rows and values (what a checkpoint is bound to)."""
        X = self.X
        parts = (X.data, X.indices, X.indptr) if V.is_sparse(X) else (X,)
        h = hashlib.sha256(repr(X.shape).encode())
        for a in (*parts, self.s):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    @on_worker_threads
    def setup(self, center, intercept, code, nodes, weights, chunk, likelihood):
        """Lay out the rows as the one-process fit does (centred at ``center``, the intercept's
        constant column last) for ``likelihood`` (its learned parameters' first values filled
        in); returns the number of sites (nonzero features)."""
        self.likelihood = likelihood
        X = E.with_constant(self.X, center) if intercept else np.ascontiguousarray(self.X, dtype=np.float64)
        self.X = None  # (the problem holds the features now)
        n, d = X.shape
        self.problem = GLMProblem(X, self.s, np.zeros(d), np.zeros(d), nodes, weights, code, chunk, 0)
        self.state = GLMState(np.empty((n, d)), np.empty((n, d)), *(np.empty(d) for _ in range(4)))
        self.scratch = GLMScratch.allocate(n, d, chunk, -(-n // chunk))
        self.run = E.parallel_sweep(self.likelihood)
        self.lik = self.likelihood.kernel()
        return int(np.count_nonzero(X))

    def values(self):
        """The values as the kernels take them (the learned parameters' first values)."""
        return self.s

    @on_worker_threads
    def marginals(self, mu, v):
        """The rows' marginals of f under the posterior (mu, v), kept here for the learned
        parameters' updates (``ClusterLearner``)."""
        self.m, self.s2 = linear_marginals(self.rows(), np.zeros(0), mu, v)

    def squares(self):
        """sum over the rows of (y - m)^2 + s2 (a learned Gaussian noise's update)."""
        return float(np.sum((self.s - self.m) ** 2 + self.s2))

    def rows(self):
        return self.problem.X

    @on_worker_threads
    def reset(self):
        """The flat messages; their per-chunk sums."""
        E.flat_messages(self.problem.X, self.state.tau, self.state.nu)
        S.rebuild(self.problem, self.state, self.scratch)
        return self.scratch.pT.copy(), self.scratch.pN.copy()

    @on_worker_threads
    def sweep(self, posterior, rho, key, likelihood=None):
        """One damped parallel sweep of the partition's rows from ``posterior`` (T, N, mu, v)
        (``likelihood``: its learned parameters' current values): the new messages stay here; the
        per-chunk sums and the chunks' refused counts go back."""
        self.posterior(posterior, likelihood)
        self.run(self.problem, self.lik, self.state, self.scratch, rho, key)
        return self.scratch.pT.copy(), self.scratch.pN.copy(), self.scratch.skipped.copy()

    def posterior(self, posterior, likelihood):
        for a, b in zip(self.state[2:], posterior, strict=True):
            a[:] = b
        if likelihood is not None:
            self.lik = likelihood.kernel()


class SparsePartition(Partition):
    """A partition of sparse rows (a scipy.sparse block): its sites at its nonzeros only
    (``glm.sparse``, not centred, the intercept one more column). Its problem's prior is zero, so
    the one-process sparse sweep leaves in T, N the sums of the partition's sites per column
    (each column's chunks added in order); those go back as one row of sums, and the client adds
    the partitions' rows to the prior in partition order."""

    def __init__(self, X, y, likelihood, func):
        self.X = V.check_rows(X, "X", func)
        R.check_feature_scale(self.X, func)
        self.s = likelihood.check(np.asarray(y), "y", func, self.X.shape[0])
        self.likelihood = likelihood
        self.threads = worker_threads()

    def stats(self):
        return *self.X.shape, None  # (sparse features are not centred)

    @on_worker_threads
    def setup(self, center, intercept, code, nodes, weights, chunk, likelihood):
        self.likelihood = likelihood
        X = SP.with_intercept_column(self.X) if intercept else self.X
        self.X, self.csr = None, X  # (the rows' marginals read the CSR rows)
        d = X.shape[1]
        self.problem, self.state, self.scratch = SP.layout(
            X, self.s, np.zeros(d), nodes, weights, code, np.zeros(0)
        )
        self.run = E.parallel_sweep(self.likelihood, sparse=True)
        self.lik = self.likelihood.kernel()
        return int(self.state.tau.shape[0])

    def rows(self):
        return self.csr

    def _sums(self, skipped=None):
        st = self.state
        out = st.T[None].copy(), st.N[None].copy()
        return out if skipped is None else (*out, np.array([skipped], dtype=np.int64))

    @on_worker_threads
    def reset(self):
        SP.initial_messages(None, self.state.tau, self.state.nu, R.FLAT_PRECISION)
        SPK.reduce_columns(self.problem, self.state)
        return self._sums()

    @on_worker_threads
    def sweep(self, posterior, rho, key, likelihood=None):
        self.posterior(posterior, likelihood)
        _, skipped = self.run(self.problem, self.lik, self.state, self.scratch, rho, key)
        return self._sums(int(skipped))


class FilePartition(SparsePartition):
    """A partition of a sparse-row file's rows (``fastcep.io.csr``, on storage the workers share):
    rows lo..hi-1, read and checked on its worker (nothing of them passes through the client);
    then as ``SparsePartition``."""

    def __init__(self, path, lo, hi, likelihood, func):
        from ..io.csr import CSRReader

        with CSRReader(path) as reader:
            rows = reader.read(lo, hi)
        try:
            super().__init__(rows.X, rows.y, likelihood, func)
        except ValueError as exc:  # (its rows are counted from the partition's first)
            where = f"{path!r}, the partition of rows {lo}..{hi - 1} (counted from {lo})"
            raise ValueError(f"{where}: {exc}") from exc


def refusals(method, o, likelihood, X, func):
    """A clear error for what a cluster fit does not run (yet), naming the option."""
    meta = getattr(X, "_meta", X)  # (a Dask array's chunks are of its meta's type)
    why = None
    if method not in METHODS:
        why = f"method={method!r}: a cluster fit runs {', '.join(METHODS)}"
    elif o["schedule"] != "parallel":
        why = "schedule='sequential': a cluster fit runs the parallel schedule (messages from one posterior)"
    elif o["stopping"] != "posterior":
        why = "stopping='paper': the sites' change would need every site on the client"
    elif o.get("init_state") is not None:
        why = "init_state: a cluster fit starts from the flat messages (its sites stay on the workers)"
    elif o.get("offset") is not None:
        why = "offset"
    elif not likelihood.log_concave:
        why = f"a likelihood that is not log-concave ({likelihood.name}): its sweeps need one process's guard"
    elif type(meta).__module__.split(".")[0] == "sparse":
        why = "X of the 'sparse' package (give scipy.sparse blocks)"
    elif (V.is_sparse(meta) or isinstance(X, (str, os.PathLike))) and method not in SP.METHODS:
        why = f"method={method!r} with sparse X: the sparse rows run {', '.join(SP.METHODS)}"
    if why is None:
        return
    raise NotImplementedError(f"{func}(client=...) does not support {why}; fit in one process (client=None).")


def _file_blocks(client, path, y, intercept, func):
    """A sparse-row file's row ranges (path, lo, hi), one per worker, each but the last of whole
    chunks of the sweep, as a scipy.sparse X in memory is split (only the file's header is read
    here)."""
    from ..io.csr import CSRReader

    E.check_no_labels(path, y, func)
    with CSRReader(path) as reader:  # (its header: checked, rows and columns)
        n, d = reader.n, reader.n_features
    path = os.path.abspath(path)  # (the workers share the storage, not the working folder)
    return [(path, lo, hi) for lo, hi in _split(client, n, d, intercept)]


def _split(client, n, d, intercept):
    """Row ranges of n rows, one per worker, each but the last of whole chunks of the sweep
    (``chunk_rows`` of d columns and the intercept's)."""
    return cuts(n, chunk_rows(d + (1 if intercept else 0)), n_workers(client))


def _row_blocks(client, X, y, intercept, func):
    """The rows as (X block, y block) pairs: a Dask array's row chunks (its columns in one chunk,
    y rechunked to match), or a NumPy array's rows split in one block per worker, each but the
    last of whole chunks of the sweep (``chunk_rows``: the fit is then the one-process fit,
    bitwise)."""
    import dask.array as da

    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"The 'X' parameter of {func} must be 2-D, not {X.ndim}-D.")
        X = X.rechunk({1: -1})
        y = da.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"{func}: y must be 1-D with one value per row of X ({X.shape[0]}), not {y.shape}."
            )
        y = y.rechunk((X.chunks[0],))
        return [(X.blocks[i, 0], y.blocks[i]) for i in range(X.numblocks[0])]
    if not V.is_sparse(X):
        X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        return [(X, y)]  # (the partition's check names the problem)
    if y.shape[:1] != X.shape[:1]:
        raise ValueError(f"{func}: y must be 1-D with one value per row of X ({X.shape[0]}), not {y.shape}.")
    if V.is_sparse(X):
        V.check_sparse_structure(X, "X", func)  # (the rows' numbers in its messages are X's own)
        X = X.tocsr()  # (row slices)
    return [(X[lo:hi], y[lo:hi]) for lo, hi in _split(client, X.shape[0], X.shape[1], intercept)]


def fit(client, X, y, likelihood, model, method, o, start, func="fit"):
    """The cluster fit of ``fastcep.fit`` (options ``o`` validated already); its
    ``RegressionResult`` (``state`` None: the sites stay on the workers)."""
    on_file = isinstance(X, (str, os.PathLike))
    refusals(method, o, likelihood, X, func)
    sparse = on_file or V.is_sparse(getattr(X, "_meta", X))
    if on_file:  # (a sparse-row file the workers read: ``FilePartition``)
        kind, blocks = FilePartition, _file_blocks(client, X, y, o["fit_intercept"], func)
    else:
        kind = SparsePartition if sparse else Partition
        blocks = _row_blocks(client, X, y, o["fit_intercept"], func)
    parts = Partitions(client, blocks, kind, (likelihood, func), func)
    stats = parts.call("stats")
    keep = [i for i, st in enumerate(stats) if st[0] > 0]  # (empty partitions have no rows to sweep)
    parts.keep(keep)
    stats = [stats[i] for i in keep]
    if not stats:
        raise ValueError(f"{func}: X has no rows.")
    n, d = sum(st[0] for st in stats), stats[0][1]
    digest = data_digest(o, parts, func)
    if any(st[1] != d for st in stats):
        raise ValueError(f"{func}: the partitions of X have different numbers of columns.")
    prior_T = V.prior_precisions(o["prior_var"], d, func)
    intercept = o["fit_intercept"]
    center = E.feature_means(n, [st[2] for st in stats]) if intercept and o["center"] and not sparse else None
    if intercept:
        prior_T = np.append(prior_T, 1.0 / o["intercept_var"])
        d += 1
    rows = E.sparse_rows if sparse else E.dense_rows
    code, nodes, weights = rows(likelihood, model, method, np.empty(0), o["n_nodes"])
    chunk = chunk_rows(d)
    learner = None
    if likelihood.learned:  # (EM after every sweep; the first values from the values)
        learner = ClusterLearner(likelihood, parts, gauss_hermite(EXPECTATION_NODES))
    current = likelihood if learner is None else learner.likelihood
    n_sites = sum(parts.call("setup", center, intercept, code, nodes, weights, chunk, current))
    # the client's problem, state and scratch: the posterior and the reduce (no rows); the
    # partitions' sums, a row per chunk (dense) or per partition (sparse)
    n_chunks = len(stats) if sparse else sum(-(-st[0] // chunk) for st in stats)
    problem = GLMProblem(np.empty((0, d)), np.empty(0), prior_T, np.zeros(d), nodes, weights, code, chunk, 0)
    state = GLMState(np.empty((0, d)), np.empty((0, d)), *(np.empty(d) for _ in range(4)))
    scratch = GLMScratch.allocate(0, d, chunk, 1)._replace(
        pT=np.empty((n_chunks, d)), pN=np.empty((n_chunks, d)), skipped=np.zeros(n_chunks, dtype=np.int64)
    )
    damp = R.Damping(o["damping"])
    options = dict(E.result_options(o, None, center, damp.rho), partitions=len(stats))
    stale = E.StaleWatch(not likelihood.binary, n_sites)
    tol = o["tol"]

    def gather(results):
        """The partitions' per-chunk sums into the client's scratch, in partition order."""
        for name, k in (("pT", 0), ("pN", 1), ("skipped", 2)):
            if k < len(results[0]):
                np.concatenate([r[k] for r in results], out=getattr(scratch, name))

    def reset():
        gather(parts.call("reset"))
        reduce_posterior(prior_T, problem.prior_N, scratch.pT, scratch.pN, *state[2:])

    def step(it):
        rho = damp.rho
        revived = parts.revived
        S.begin_sweep(state, scratch)
        posterior = tuple(state[2:])
        gather(parts.call("sweep", posterior, rho, 0, None if learner is None else learner.likelihood))
        change, skipped = S.finish_parallel(problem, state, scratch)
        refused = 0 < n_sites <= skipped
        restart = damp.diverged(it) if refused else damp.update(change, state.mu - scratch.mu_old)
        if not restart:
            damp.runaway(it, change, int(skipped), n_sites, (n, d))
        else:  # the undamped start diverged: again from the flat messages, damped
            reset()
        measure = change / rho
        if learner is not None:  # (the likelihood's learned parameters: EM, after the sweep)
            measure = max(measure, learner.update(state.mu, state.v))
        # (a sweep in which a lost partition was made again, its sites flat, is no evidence)
        accept = not restart and not refused and parts.revived == revived
        accept, halt = stale.update(it, accept, skipped, 0, measure, tol)
        values = {"damping": rho, "param_change": change}
        return _loop.StepReport(measure, int(skipped), accept, values, None, halt)

    def snapshot(it, trace):  # (it: this run's iterations; a resumed fit's count on from its checkpoint)
        return RegressionResult.of(
            model, method, state.mu.copy(), state.v.copy(), saved.done + it, False, "running", trace, None,
            options, fitted(), center,
        )  # fmt: skip

    def finite():
        return bool(np.all(np.isfinite(state.mu)) and np.all(np.isfinite(state.v)) and np.all(state.v > 0))

    label = f"{model}/{method}, {len(stats)} partitions"
    keys = dict(
        model=model, method=method, likelihood=likelihood.name, params=likelihood.params(), n=n, d=d,
        partition_rows=[int(st[0]) for st in stats],  # (the digest is the partitions', in order)
        **{k: options[k] for k in ("prior_var", "fit_intercept", "intercept_var", "center", "n_nodes")},
    )  # fmt: skip

    def fitted():
        """The likelihood, its learned parameters' current values filled in."""
        return likelihood if learner is None else learner.likelihood

    def saved_state():
        position = dict(rho=damp.rho, undamped=damp.undamped, halved=damp.halved)
        position["learned"] = {name: getattr(fitted(), name) for name in likelihood.learned}
        return {name: getattr(state, name) for name in ("T", "N", "mu", "v")}, position

    def restore(arrays, position):
        for name in ("T", "N", "mu", "v"):
            getattr(state, name)[:] = arrays[name]
        damp.rho, damp.undamped, damp.halved = position["rho"], position["undamped"], position["halved"]
        if learner is not None:  # (the learned parameters' values at the checkpoint)
            learner.set_values(position["learned"])

    shapes = {name: (d,) for name in ("T", "N", "mu", "v")}
    saved = Checkpoints(o, digest, keys, saved_state, restore, shapes, func)
    with num_threads(o["n_threads"]):
        reset()
        done = saved.resume()  # (a checkpoint's posterior and damping; the sites stay flat)
        out = _loop.run(
            step, max_iter=max(o["max_iter"], done), first=done, tol=tol, snapshot=snapshot, finite=finite,
            callback=saved.callback(o["callback"]), verbose=o["verbose"], progress=o["progress"],
            label=label, start=start,
        )  # fmt: skip
        trace = saved.trace(out.trace)
        saved.write(trace)
    options["revived"] = parts.revived  # (partitions made again after their worker was lost)
    saved.options(options)
    if learner is not None:
        learner.warn_at_bounds(func)
    return RegressionResult.of(
        model, method, state.mu, state.v, done + out.n_iter, out.converged, out.stop_reason, trace, None,
        options, fitted(), center,
    )  # fmt: skip


def data_digest(o, parts, func):
    """The digest of the partitions' data (in partition order) when the fit keeps checkpoints
    (before their ``setup``, which drops the rows as given), else None. It is taken partition by
    partition: a fit resumes on the same rows split the same way (a NumPy X over as many workers,
    a Dask array in the same chunks); another split is refused, naming ``partition_rows``."""
    if o["checkpoint"] is None:
        return None
    check_path(o, func)
    h = hashlib.sha256()
    for part in parts.call("digest"):
        h.update(part.encode())
    return h.hexdigest()
