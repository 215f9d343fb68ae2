"""The NamedTuples that the regression drivers take whole (DESIGN.md section 6).

``GLMProblem`` holds what does not change during a fit, ``GLMState`` the messages and the
posterior that a sweep changes, ``GLMScratch`` the work space a sweep needs (allocated once per
fit, never inside the loop). The likelihood (``kernels.likelihoods``) goes beside them as an
argument of its own: a tuple inside a tuple cannot enter a numba parallel loop.
"""

from typing import NamedTuple

import numpy as np

from .._config import N_WORK
from .sweep import SLAB_ROWS, SLAB_SITES


class GLMProblem(NamedTuple):
    """What does not change during a regression fit."""

    X: np.ndarray  #: (n, d) float64 features, C-contiguous
    s: np.ndarray  #: (n,) float64 values y (label signs +-1 for binary likelihoods)
    prior_T: np.ndarray  #: (d,) prior precisions
    prior_N: np.ndarray  #: (d,) prior precision-times-means
    nodes: np.ndarray  #: (J,) probabilists' Gauss-Hermite nodes
    weights: np.ndarray  #: (J,) their weights, summing to 1
    code: int  #: the row function (``schedules.METHOD_CODES``)
    chunk: int  #: rows per parallel work unit
    n_samples: int  #: importance samples per row (methods "is", "kjit")
    #: (n,) a known term added to each row's f (the generic rows; an exposure's log), or (0,): none
    offset: np.ndarray = np.empty(0)


class GLMState(NamedTuple):
    """Site messages and posterior natural parameters: what a sweep changes."""

    tau: np.ndarray  #: (n, d) site precisions
    nu: np.ndarray  #: (n, d) site precision-times-means
    T: np.ndarray  #: (d,) posterior precisions = prior + sum of sites
    N: np.ndarray  #: (d,) posterior precision-times-means
    mu: np.ndarray  #: (d,) posterior means N / T
    v: np.ndarray  #: (d,) posterior variances 1 / T


class GLMScratch(NamedTuple):
    """Work space of the sweeps."""

    pT: np.ndarray  #: (n_chunks, d) partial sums of the new site precisions, per chunk
    pN: np.ndarray  #: (n_chunks, d) the same for the precision-times-means
    skipped: np.ndarray  #: (n_chunks,) int64 messages not applied, per chunk
    work: np.ndarray  #: (n_chunks, N_WORK, d) the row functions' scratch
    mu_old: np.ndarray  #: (d,) the posterior means before the sweep
    v_old: np.ndarray  #: (d,) the variances before the sweep
    row_t: np.ndarray  #: (1, d) sequential schedule: a row's sums (unused)
    row_n: np.ndarray  #: (1, d) likewise
    old: np.ndarray  #: (2, d) sequential schedule: a row's messages before its update
    order: np.ndarray  #: (n,) int64 sequential schedule: the order of the rows
    slab: np.ndarray  #: (n_chunks, SLAB_ROWS, SLAB_SITES) parallel sweeps of short rows: a slab's sites
    tiles: np.ndarray  #: (4, SLAB_SITES) the posterior T, N, mu, v repeated row after row (``sweep``)

    @classmethod
    def allocate(cls, n, d, chunk, work_units):
        """Scratch of a fit on n rows of d features in chunks of ``chunk`` rows, with row-function
        scratch for ``work_units`` chunks at once (the number of chunks for the parallel
        schedule, 1 for the sequential one); rows in their order."""
        n_chunks = max(1, -(-n // chunk))
        return cls(
            np.empty((n_chunks, d)),
            np.empty((n_chunks, d)),
            np.zeros(n_chunks, dtype=np.int64),
            np.empty((work_units, N_WORK, d)),
            np.empty(d),
            np.empty(d),
            np.empty((1, d)),
            np.empty((1, d)),
            np.empty((2, d)),
            np.arange(n, dtype=np.int64),
            np.empty((work_units, SLAB_ROWS, SLAB_SITES)),
            np.empty((4, SLAB_SITES)),
        )
