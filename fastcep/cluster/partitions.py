"""The partitions of a cluster fit: one Dask actor per block of the data, made again on another
worker when its own is lost."""

from . import check_scheduler, require


def lost(distributed, exc):
    """Whether ``exc`` says a worker is gone (not an error of the data)."""
    if isinstance(exc, RuntimeError) and "Worker holding Actor was lost" in str(exc):
        return True
    return isinstance(exc, (OSError, distributed.comm.CommClosedError)) or type(exc).__name__ in (
        "KilledWorker", "FutureCancelledError", "FuturesCancelledError", "CancelledError",
    )  # fmt: skip


#: seconds to wait for a partition's actor to be made (a worker that never comes: lost)
ACTOR_WAIT = 300


class Partitions:
    """The client's handles of a fit's partitions: where each one's data come from (futures of
    its block's arrays) and its actor, ``kind(*block, *args)`` (``regression.Partition``,
    ``cp.CPPartition``). ``call(name, *args)`` calls a method of every partition at once and
    returns their results in partition order; a partition whose worker was lost (killed, or gone
    with its process) is made again on a worker that is left, from its data (recomputed by Dask,
    or sent again from the client's arrays), set up as before and given the flat sites
    (``setup`` with the last arguments, then ``reset``): its sites restart against the posterior
    of the last completed sweep (``revived`` counts)."""

    #: attempts to make a lost partition again before the fit gives up
    ATTEMPTS = 3

    def __init__(self, client, blocks, kind, args, func):
        self.distributed = require(func)
        self.client, self.kind, self.args, self.func = client, kind, args, func
        self.blocks, self.futures, self.actors = [], [], []
        self.setup_args = None
        self.revived = 0
        # the client's blocks sent to worker i in turn (left to itself, Dask put every scattered
        # block and actor of a 2-worker fit on the same worker); a Dask array's blocks where Dask
        # computes them (pinned, a block lost with its worker was recomputed only there: a
        # killed-worker fit waited for ever); each actor where its block is
        workers = sorted(client.scheduler_info().get("workers", ())) or [None]
        for i, block in enumerate(blocks):
            self.blocks.append(tuple(block))
            self.futures.append(self._send(self.blocks[-1], workers[i % len(workers)]))
            self.actors.append(self._actor(self.futures[-1], self._holder(self.futures[-1])))

    def _send(self, block, worker=None):
        """Futures of a block's arrays on the cluster: computed by Dask from Dask arrays, or
        scattered from the client (to ``worker`` if given)."""
        client = self.client
        if hasattr(block[0], "dask"):
            futures = client.compute(list(block))
        else:
            where = [worker] if worker else None
            futures = client.scatter(list(block), workers=where, hash=False)  # (a fit just before of
            # the same arrays releases its futures of the same key: "lost dependencies")
        self.distributed.wait(futures)
        return futures

    def _holder(self, futures):
        """A worker that holds a block (its first array), or None."""
        first = futures[0]
        held = sorted(self.client.who_has([first]).get(first.key, ()))
        return held[0] if held else None

    def _actor(self, futures, worker=None):
        """The partition's actor on ``worker`` (where its block is), else where Dask puts it."""
        where = [worker] if worker else None
        future = self.client.submit(self.kind, *futures, *self.args, actor=True, workers=where)
        return future.result(timeout=ACTOR_WAIT)  # (a TimeoutError counts as lost: made again)

    def keep(self, indices):
        """Only the partitions ``indices`` (the others have no rows)."""
        self.blocks = [self.blocks[i] for i in indices]
        self.futures = [self.futures[i] for i in indices]
        self.actors = [self.actors[i] for i in indices]

    def lost(self, exc):
        """Whether ``exc`` says a partition's worker is gone (not an error of the data)."""
        return lost(self.distributed, exc)

    def revive(self, i):
        """Partition i again, from its rows, set up, with the flat sites."""
        for _ in range(self.ATTEMPTS):
            try:
                if any(f.status in ("lost", "cancelled", "error") for f in self.futures[i]):
                    self.futures[i] = self._send(self.blocks[i])  # (scattered data die with their worker)
                self.distributed.wait(self.futures[i])  # (Dask recomputes a lost block)
                # (anywhere: pinned to the worker that holds its data, an actor whose address was
                # stale after the kill waited for ever; measured once in a test run)
                self.actors[i] = self._actor(self.futures[i])
                if self.setup_args is not None:
                    self.actors[i].setup(*self.setup_args).result()
                    self.actors[i].reset().result()
                self.revived += 1
                return
            except Exception as exc:
                check_scheduler(self.client, self.func, exc)
                if not self.lost(exc):
                    raise
        raise RuntimeError(
            f"{self.func}: partition {i} of the cluster fit was lost and could not be made again on "
            f"{self.ATTEMPTS} attempts; is the Dask scheduler still running?"
        )

    def call(self, name, *args):
        """Each partition's ``name(*args)``, at once; their results in partition order."""
        return self.call_each(name, [args] * len(self.actors))

    def call_each(self, name, args):
        """Partition i's ``name(*args[i])``, at once; their results in partition order."""
        calls = [self._call(i, name, args[i]) for i in range(len(self.actors))]
        out = []
        for i, c in enumerate(calls):
            for attempt in range(self.ATTEMPTS + 1):
                try:
                    if isinstance(c, Exception):  # (the call could not even be made)
                        raise c
                    out.append(c.result())
                    break
                except Exception as exc:
                    check_scheduler(self.client, self.func, exc)
                    if not self.lost(exc) or attempt == self.ATTEMPTS:
                        raise
                    self.revive(i)
                    c = self._call(i, name, args[i])
        if name == "setup":
            self.setup_args = args[0]
        return out

    def _call(self, i, name, args):
        """Partition i's ``name(*args)`` (a future), or the error of making the call (an actor
        whose worker is gone refuses it at once)."""
        try:
            return getattr(self.actors[i], name)(*args)
        except Exception as exc:
            return exc
