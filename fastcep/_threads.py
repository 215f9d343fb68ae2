"""The ``n_threads`` option: numba's thread count for one call, restored afterwards."""

import contextlib
import statistics

import numba


def max_threads():
    """Largest thread count numba can use in this process (``NUMBA_NUM_THREADS``)."""
    return numba.config.NUMBA_NUM_THREADS


@contextlib.contextmanager
def num_threads(n_threads):
    """Run the body with ``numba.set_num_threads(n_threads)`` (``None``: the current setting) and
    restore the setting afterwards (the body may change it: ``ThreadGovernor``)."""
    old = numba.get_num_threads()
    if n_threads is not None:
        numba.set_num_threads(n_threads)
    try:
        yield
    finally:
        numba.set_num_threads(old)


#: work (entries x modes x R^2 of a CP fit or batch) below which a run without an ``n_threads``
#: uses one thread: its parallel regions are short, and on a machine with a busy core each can
#: wait a whole scheduler quantum (measured on a DBLP stream, batches of 1,000 at rank 8: 2.3 s
#: for 100 batches on one thread, 6.8 s on two with the other core busy)
SERIAL_WORK = 1 << 20


def plan(n_threads, work):
    """Threads and governor of a run of the given work: ``n_threads`` if given (governed when
    > 1); else one thread for small work, else numba's setting, governed."""
    if n_threads is None and work < SERIAL_WORK:
        return 1, None
    if n_threads == 1:
        return 1, None
    return n_threads, ThreadGovernor(n_threads)


#: the first iteration timed: the earlier ones are not typical (fresh memory, caches; measured on
#: Alog at rank 8 with two threads: iterations 1-10 alternate between 5 and 10-20 ms, later ones
#: take 4.4-5 ms)
FIRST_PROBE = 11
#: iterations of each thread count at the start (alternating, from FIRST_PROBE)
FIRST_PROBES = 3
#: iterations between two probes of the thread count not in use
PROBE_EVERY = 20
#: iteration times kept per thread count (their median decides)
WINDOW = 8
#: more threads are kept only when their mean iteration time is below this times one thread's
MANY_FASTER = 0.9


class ThreadGovernor:
    """Picks the thread count of each iteration of a run from the iterations' own times.

    On a machine with a busy core, a parallel region waits at its barrier for a thread that the
    scheduler has descheduled (a quantum, milliseconds), and many threads can be slower than one;
    on a quiet machine short parallel regions stall now and then too. The governor times
    iterations run with ``n_threads`` and with one thread (iterations 11 to 16 alternate; then the
    count not in use is tried again every PROBE_EVERY iterations) and runs the others with the
    count whose median time over its last WINDOW iterations is lower, keeping more threads only
    when they are clearly faster (MANY_FASTER): the median, because single slow iterations (the
    first ones touch fresh memory; a thread descheduled once) would otherwise decide for many
    iterations, while a busy core slows every parallel iteration. Results do not depend on the
    thread count (fixed chunking), so switching changes only the time. ``n_threads`` None:
    numba's current setting.
    """

    def __init__(self, n_threads=None):
        self.n_max = n_threads if n_threads is not None else numba.get_num_threads()
        self.times = {self.n_max: [], 1: []}  # thread count -> its last WINDOW iteration times
        self.current = self.n_max

    def _choice(self):
        many, one = self.times[self.n_max], self.times[1]
        if not many or not one:
            return self.n_max
        return self.n_max if statistics.median(many) < MANY_FASTER * statistics.median(one) else 1

    def before(self, it):
        """Set the thread count of iteration ``it``."""
        if self.n_max <= 1:
            return
        if FIRST_PROBE <= it < FIRST_PROBE + 2 * FIRST_PROBES:
            n = 1 if (it - FIRST_PROBE) % 2 else self.n_max
        elif it >= FIRST_PROBE + 2 * FIRST_PROBES and it % PROBE_EVERY == 0:
            n = 1 if self._choice() == self.n_max else self.n_max
        else:
            n = self._choice()
        self.current = n
        numba.set_num_threads(n)

    def after(self, it, seconds):
        """Record the time of iteration ``it`` (the first ones, with start-up costs, are not used)."""
        if it >= FIRST_PROBE and self.n_max > 1:
            window = self.times[self.current]
            window.append(seconds)
            del window[:-WINDOW]
