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
