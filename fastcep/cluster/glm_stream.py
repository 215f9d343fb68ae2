"""The online pass over a file of sparse rows on a Dask cluster: ``stream_file(path, ...,
client=client)`` (``fastcep glm stream --scheduler``), EP over shards.

The file's rows (a sparse-row HDF5 file on storage the workers share) are cut into one shard of
whole batches per worker, each read by the worker that streams it. As ``cluster.stream`` does for
tensors (Vehtari et al. 2020: the partitions as sites):

- **Pass 1.** Every shard absorbs its rows batch by batch (``RegressionResult.update``, the
  one-process online pass) from the stream's start (the prior, or ``init``). Its net message is
  its posterior minus that start, in natural parameters (precision and precision-times-mean of
  each weight and the intercept; zero for the columns its rows never touch).
- **The client** adds the shards' net messages to the start in shard order.
- **Refinement passes** (``passes`` - 1): each shard absorbs its rows again from its cavity, the
  start plus the other shards' messages; its new message replaces its old one, damped
  (``SHARD_DAMPING``). A weight whose cavity precision is not positive keeps the shard's old
  message there.

Refused by name: forgetting (a drifting rate has no fixed point to share), checkpoints and
``resume``, svmlight text (its rows cannot be read by range: ``fastcep convert`` it first), a
centred ``init``.
"""

import os
import time
import warnings

import numpy as np

from .._loop import ConvergenceWarning, Trace
from .._threads import num_threads
from ..glm.result import RegressionResult
from ..io.csr import CSRReader
from ..io.kinds import checked_kind
from . import cuts, n_workers, require, worker_threads
from .stream import SHARD_DAMPING, Shards


def natural(res):
    """(T, N): the precisions and precision-times-means of a result's weights, then its
    intercept's if it has one."""
    mean, var = res.posterior.mean, res.posterior.var
    if res.intercept is not None:
        mean, var = np.append(mean, res.intercept.mean), np.append(var, res.intercept.var)
    return 1.0 / var, mean / var


def from_natural(start, T, N, n_iter=0, stop_reason="prior", trace=None):
    """A result of ``start``'s model, method and options whose posterior is (T, N)."""
    v = 1.0 / T
    trace = Trace.from_columns(0) if trace is None else trace
    return RegressionResult.of(
        start.model, start.method, N * v, v, n_iter, stop_reason == "end", stop_reason, trace, None,
        dict(start.options), start.likelihood,
    )  # fmt: skip


def shard_pass(data, cavity, batch_rows, max_iter, tol):
    """A shard's rows (``data``: ("file", path, (lo, hi))) absorbed batch by batch from
    ``cavity`` (a ``RegressionResult``): (its posterior's T, N; the batches that stopped at
    max_iter)."""
    from ..io.svmlight import binary_labels

    _, path, (lo, hi) = data
    stopped = 0
    with num_threads(worker_threads()), CSRReader(path) as reader:
        for start in range(lo, hi, batch_rows):
            part = reader.read(start, min(hi, start + batch_rows))
            y = binary_labels(part, path, "stream_file") if cavity.likelihood.binary else part.y
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                cavity.update(part.X, y, forget=0.0, max_iter=max_iter, tol=tol)
            stopped += any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return (*natural(cavity), stopped)


def refusals(path, forget, checkpoint, resume, init, func):
    why = None
    if checked_kind(os.fspath(path)) not in ("fastcep-csr", "damaged"):  # (damaged: the reader says so)
        why = "svmlight text (its rows cannot be read by range): convert it with `fastcep convert` first"
    elif forget:
        why = f"forget={forget} (a drifting rate has no fixed point the shards can share)"
    elif checkpoint is not None or resume:
        why = "checkpoint or resume"
    elif init is not None and init.center is not None:
        why = "a centred init (its rows are dense)"
    if why is not None:
        raise NotImplementedError(f"{func}(client=...) does not support {why}; stream in one process.")


def stream(client, path, start, batch_rows, max_iter, tol, passes, func="stream_file"):
    """The passes of EP over shards from ``start`` (the stream's first posterior); the result."""
    distributed = require(func)
    path = os.path.abspath(path)  # (the workers share the storage, not the working folder)
    with CSRReader(path) as reader:
        n = reader.n
    rows = cuts(n, batch_rows, n_workers(client))  # (a sparse-row file holds one row at least)
    shards = Shards(client, distributed, [("file", path, c) for c in rows], func)
    T0, N0 = natural(start)
    messages = [None] * len(rows)
    T, N = T0.copy(), N0.copy()
    stopped, t0 = 0, time.perf_counter()
    elapsed, change = [], []
    for _ in range(passes):
        cavities, frozen = [], []
        for m in messages:
            if m is None:
                cavities.append(start)
                frozen.append(None)
                continue
            Tc, Nc = T - m[0], N - m[1]
            bad = ~(Tc > 0)
            Tc[bad], Nc[bad] = T[bad], N[bad]
            cavities.append(from_natural(start, Tc, Nc))
            frozen.append(bad)
        new = shards.run(shard_pass, lambda k, cavities=cavities: (cavities[k], batch_rows, max_iter, tol))
        fresh = []
        for k, (Tk, Nk, st) in enumerate(new):
            Tc, Nc = natural(cavities[k])
            m = (Tk - Tc, Nk - Nc)
            if messages[k] is not None:  # (damped; frozen weights keep the old message)
                step = np.where(frozen[k], 0.0, SHARD_DAMPING)
                m = tuple(old + step * (a - old) for old, a in zip(messages[k], m, strict=True))
            fresh.append(m)
            stopped += st
        messages = fresh
        before = N / T
        T = T0 + sum(m[0] for m in messages)
        N = N0 + sum(m[1] for m in messages)
        elapsed.append(time.perf_counter() - t0)
        change.append(float(np.max(np.abs(N / T - before) * np.sqrt(T))) if elapsed[1:] else np.nan)
    trace = Trace.from_columns(
        passes, elapsed=elapsed, change=change, damping=[1.0] + [SHARD_DAMPING] * (passes - 1)
    )
    res = from_natural(start, T, N, passes, "end", trace)
    res.options["stream"] = dict(
        rows=n,
        batch_rows=batch_rows,
        shards=len(rows),
        passes=passes,
        stopped_at_max_iter=stopped,
        seconds=elapsed[-1],
    )
    return res
