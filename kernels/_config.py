"""The one place where the compilation settings of every kernel are fixed.

``FASTMATH`` deliberately leaves out ``nnan`` and ``ninf``: the guards that refuse a message
with a non-positive or non-finite precision must survive compilation. It is a plain ``set``
because numba rejects a frozenset.
"""

FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}

#: options for serial leaves (cached on disk)
LEAF = {"cache": True, "fastmath": FASTMATH, "nogil": True}
#: options for serial drivers that loop over many rows
SERIAL = {"cache": True, "fastmath": FASTMATH, "nogil": True}
#: options for parallel drivers (uncached: numba compiles them per process)
PARALLEL = {"parallel": True, "fastmath": FASTMATH, "nogil": True}

#: rows per work unit of the parallel sweeps; fixed, so that partial sums and their reduction
#: order do not depend on the number of threads (bitwise-identical results on 1 or N threads)
CHUNK_ROWS = 1024
