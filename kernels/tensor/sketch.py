"""The map of a CP fit's sketch start (``fastcep.tensor.init``, ``init="sketch"``): every entry's
value times its row of each mode's test matrix, added at its object, per fixed group of entries.

A group's sums are added in entry order by one work unit, and groups are independent, so the
sums do not depend on the number of threads, and a cluster's partition (a run of whole groups)
forms the bits one process forms for the same groups.
"""

import numpy as np
from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..hashing import GOLDEN, mix64

__all__ = ["sketch_groups"]

#: the top bit of a uint64: a test sign's
TOP = np.uint64(63)


@njit(**LEAF)
def splitmix(h):
    """splitmix64's step: the finaliser of h + golden (uint64, wrapping; ``kernels.hashing``)."""
    return mix64(h + GOLDEN)


@njit(**LEAF)
def column_hash(coords_e, k):
    """The hash of entry's column of the mode-k unfolding: splitmix of (k + 1) xor-ed with each
    other mode's index in mode order."""
    h = np.uint64(k + 1)
    for j in range(coords_e.shape[0]):
        if j != k:
            h = splitmix(h ^ np.uint64(coords_e[j]))
    return h


@njit(**PARALLEL_CACHED)
def sketch_groups(coords, f, offsets, group, V, hashed, out):
    """out[g] (G, n_obj, width), zeroed first: for each entry e of group g (entries g group ..
    (g + 1) group - 1, in order) and each mode k, f[e] times its row of mode k's test matrix added
    at row offsets[k] + coords[e, k]. The row: with ``hashed``, -1 where the top bit of
    splitmix(h + r) is set, else +1 (h: ``column_hash``); else the product of the other modes'
    rows of V (n_obj, width), in mode order (the Khatri-Rao product: a round of subspace
    iteration)."""
    n, K = coords.shape
    width = out.shape[2]
    for g in prange(out.shape[0]):
        og = out[g]
        og[:, :] = 0.0
        for e in range(g * group, min(n, (g + 1) * group)):
            for k in range(K):
                row = og[offsets[k] + coords[e, k]]
                if hashed:
                    h = column_hash(coords[e], k)
                    for r in range(width):
                        if splitmix(h + np.uint64(r)) >> TOP:
                            row[r] -= f[e]
                        else:
                            row[r] += f[e]
                else:
                    for r in range(width):
                        w = 1.0
                        for j in range(K):
                            if j != k:
                                w *= V[offsets[j] + coords[e, j], r]
                        row[r] += f[e] * w
