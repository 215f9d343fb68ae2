"""Fits on a Dask cluster (``fastcep.fit(..., client=client)``): the optional ``dask`` extra.

Regression here; CP fits in ``cp`` (the same shape: sites on the workers, the fixed-order
reduce on the client); the actors' bookkeeping in ``partitions``.

The data stay on the workers in partitions of rows; each partition keeps its own site messages
(a Dask actor per partition, ``regression.Partition``). Every sweep the client sends the
posterior, each partition runs the one-process parallel sweep over its rows and returns its
per-chunk partial sums of the natural parameters, and the client reduces them in partition
order with the one-process kernels (``kernels.glm.schedules.finish_parallel``), damps and tests
convergence. So a cluster fit and a one-process fit of the same rows are the same arithmetic:
bitwise when every partition but the last holds a multiple of the engine's chunk of rows
(``chunk_rows``), since the chunks and their order are then the same.
"""

import functools

from .._threads import max_threads, num_threads

#: what to install for ``client=``
EXTRA = "pip install 'fastcep[dask]' (dask and distributed)"


def require(func="fit"):
    """The ``distributed`` module, or an ImportError that names the extra."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(f"{func}(client=...) needs dask and distributed: {EXTRA}.") from exc
    return distributed


def check_client(client, func="fit"):
    """``client`` as a ``distributed.Client`` that is running, or a clear error."""
    distributed = require(func)
    if not isinstance(client, distributed.Client):
        raise TypeError(
            f"The 'client' parameter of {func} must be a distributed.Client (or None), not "
            f"{type(client).__name__}."
        )
    if client.status != "running":
        raise RuntimeError(f"{func}: the Dask client is {client.status!r}, not running; connect it first.")
    return client


def check_scheduler(client, func, exc=None):
    """A clear error if ``client`` lost its scheduler (what failed, ``exc``, as the cause): the fit
    cannot go on without it (its posterior is on the client, its sites are on the workers)."""
    if client.status == "running" and client.scheduler is not None:
        return
    raise RuntimeError(
        f"{func}: the Dask scheduler was lost (the client is {client.status!r}); the cluster fit cannot "
        "go on. Start the cluster again and fit again."
    ) from exc


def n_workers(client):
    """The cluster's number of workers (at least 1)."""
    return max(1, len(client.scheduler_info().get("workers", ())))


def cuts(n, unit, workers):
    """Row ranges of about n / workers rows, one per worker, each of whole units of ``unit`` rows
    but the last (a regression's chunks of the sweep, a stream's batches); none empty, but one
    (0, 0) for no rows."""
    per_worker = -(-n // workers)
    per = max(1, -(-per_worker // unit)) * unit
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)] or [(0, 0)]


def worker_threads():
    """The threads of the Dask worker this runs on (what its kernels may use: numba's default,
    every core, would put each worker's threads on the others' cores: on 2 cores with 2 workers of
    1 thread, a DBLP shard's pass took 15 s for 8 with one thread each), at most what numba may
    use in the worker's process (``NUMBA_NUM_THREADS``); None off a worker."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    state = getattr(worker, "state", worker)
    threads = getattr(state, "nthreads", None)
    return None if threads is None else max(1, min(int(threads), max_threads()))


def on_worker_threads(method):
    """A method of an actor (``regression.Partition``, ``cp.CPPartition``) run with the worker's
    threads (``self.threads``, set from ``worker_threads`` when the actor is made)."""

    @functools.wraps(method)
    def run(self, *args):
        with num_threads(self.threads):
            return method(self, *args)

    return run
