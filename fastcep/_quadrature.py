"""Gauss-Hermite rules for expectations under a Gaussian."""

import functools

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

#: Gauss-Hermite nodes of the logistic's hand-written rules when n_nodes is None (regression and
#: its online updates)
LOGISTIC_NODES = 9


@functools.lru_cache(maxsize=32)
def gauss_hermite(n_nodes):
    """Probabilists' Gauss-Hermite rule with weights normalised to sum to one.

    E[f(a)] for a ~ N(m, v) is approximated by ``sum(w * f(m + sqrt(v) * x))``.

    Parameters
    ----------
    n_nodes : int
        Number of nodes (>= 1).

    Returns
    -------
    nodes, weights : ndarray of float64, shape (n_nodes,)
        Read-only arrays.
    """
    x, w = hermegauss(int(n_nodes))
    w = w / w.sum()
    x = np.ascontiguousarray(x, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w
