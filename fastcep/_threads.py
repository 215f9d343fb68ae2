"""The ``n_threads`` option: numba's thread count for one call, restored afterwards."""

import contextlib

import numba


def max_threads():
    """Largest thread count numba can use in this process (``NUMBA_NUM_THREADS``)."""
    return numba.config.NUMBA_NUM_THREADS


@contextlib.contextmanager
def num_threads(n_threads):
    """Run the body with ``numba.set_num_threads(n_threads)``; ``None`` leaves it unchanged."""
    if n_threads is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    try:
        yield
    finally:
        numba.set_num_threads(old)


#: iterations between two probes of the thread count not in use
PROBE_EVERY = 16
#: more threads are kept only when they are clearly faster than one
KEEP_FASTER = 0.8


class ThreadGovernor:
    """Picks the thread count of each iteration of a long run from the iterations' own times.

    On a machine with a busy core, a parallel region waits at its barrier for a thread that the
    scheduler has descheduled (a quantum, milliseconds), and many threads can be slower than one.
    The governor times iterations run with ``n_threads`` and with one thread (iterations 2 and 3
    try each; then the one not in use is tried again every PROBE_EVERY iterations) and runs the
    others with the faster, keeping more threads only when their last time is below KEEP_FASTER
    times one thread's. Results do not depend on the thread count (fixed chunking), so switching
    changes only the time. ``n_threads`` None: numba's current setting.
    """

    def __init__(self, n_threads=None):
        self.n_max = n_threads if n_threads is not None else numba.get_num_threads()
        self.times = {}  # thread count -> seconds of its last iteration
        self.current = self.n_max

    def _choice(self):
        t_many, t_one = self.times.get(self.n_max), self.times.get(1)
        if t_many is None or t_one is None:
            return self.n_max
        return self.n_max if t_many < KEEP_FASTER * t_one else 1

    def before(self, it):
        """Set the thread count of iteration ``it``."""
        if self.n_max <= 1:
            return
        if it == 2:
            n = self.n_max
        elif it == 3:
            n = 1
        elif it > 3 and it % PROBE_EVERY == 0:
            n = 1 if self._choice() == self.n_max else self.n_max
        else:
            n = self._choice()
        self.current = n
        numba.set_num_threads(n)

    def after(self, it, seconds):
        """Record the time of iteration ``it`` (the first, with compilation and start-up, is not used)."""
        if it >= 2 and self.n_max > 1:
            self.times[self.current] = seconds
