"""The one place where the compilation settings of every kernel are fixed.

``FASTMATH`` deliberately leaves out ``nnan`` and ``ninf``: the guards that refuse a message
with a non-positive or non-finite precision must survive compilation. It is a plain ``set``
because numba rejects a frozenset.

It leaves out ``reassoc`` too, for two reasons:

- **The same bits whether a kernel was compiled now or loaded from the disk cache.** numba
  compiles the body of a ``prange`` loop as a library of its own and links a copy of it into
  the driver. A process that compiles the driver runs the body as optimised once. The driver's
  cached object code holds the copy, which LLVM optimised a second time after linking. With
  ``reassoc``, that second pass vectorises some sums again in another order, so the first run
  after an install gave other figures than every later run (BENCHMARKS.md, "The same bits from
  a fresh compile and from the cache"). ``tests/test_style.py`` holds this for one parallel
  kernel, ``bench/test_long_checks.py`` for the fits.
- The leaves whose error analysis fixes the order of operations: Cody-Waite range reduction,
  whose (t - k hi) - k lo ``reassoc`` would fold into t - k (hi + lo), and the node offsets of
  ``likelihoods.adaptive._offset``.
"""

import types

FASTMATH = {"nsz", "arcp", "contract", "afn"}

#: numpy's error model: a division by zero gives inf/nan (caught by the kernels' finiteness
#: guards) instead of a Python ZeroDivisionError check in every division, which blocks SIMD
ERROR_MODEL = "numpy"

#: options for serial leaves (cached on disk)
LEAF = {"cache": True, "fastmath": FASTMATH, "nogil": True, "error_model": ERROR_MODEL}
#: the one exception to FASTMATH: the kernels whose sums over a regression row's d features
#: (x.mu, sum x^2 v) or over a CP entry's R x R block ``reassoc`` turns into SIMD code. Without
#: it a probit CEP-1 sweep of 1,000,000 x 100 took 2x as long (BENCHMARKS.md, "The same bits from
#: a fresh compile and from the cache"). Their fits give the same bits from a fresh compile and
#: from the cache (``bench/test_long_checks.py``).
FASTMATH_SUMS = FASTMATH | {"reassoc"}
LEAF_SUMS = dict(LEAF, fastmath=FASTMATH_SUMS)
#: options for serial drivers that loop over many rows
SERIAL = {"cache": True, "fastmath": FASTMATH, "nogil": True, "error_model": ERROR_MODEL}
#: options for parallel drivers (uncached: numba compiles them per process)
PARALLEL = {"parallel": True, "fastmath": FASTMATH, "nogil": True, "error_model": ERROR_MODEL}
#: parallel drivers whose compile time a benchmark showed to matter (BENCHMARKS.md, "first fit"):
#: cached on disk like the leaves
PARALLEL_CACHED = dict(PARALLEL, cache=True)


def renamed(func, name):
    """A copy of ``func`` under another name, to compile it twice (threaded and serial): numba
    caches a function under its qualified name, so two dispatchers of one Python function would
    share, and overwrite, one cache entry (a threaded driver then ran the serial build)."""
    copy = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__, func.__closure__)
    copy.__qualname__ = name
    return copy


#: rows per work unit of the parallel regression sweeps, at most; fixed by the data's shape, so
#: that partial sums and their reduction order do not depend on the number of threads
#: (bitwise-identical results on 1 or N threads)
CHUNK_ROWS = 1024
#: sites (rows x features) per work unit that wide data is cut into (``chunk_rows``)
CHUNK_SITES = 1 << 16


def chunk_rows(d):
    """Rows per work unit for d features: CHUNK_ROWS, fewer for wide rows (so that a few hundred
    wide rows still make several units), at least 16."""
    return max(16, min(CHUNK_ROWS, CHUNK_SITES // max(1, d)))


#: rows of per-row scratch space (each of length d) that a row function may use
N_WORK = 14
#: the binary models' codes in the kernels that take one (``glm.laplace``, ``glm.importance``,
#: ``glm.vb``)
PROBIT = 0
LOGISTIC = 1
