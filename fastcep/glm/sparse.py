"""Sparse rows for regression fits: a scipy.sparse X keeps its sites at its nonzeros only.

``layout`` builds the problem, state and scratch of ``kernels.glm.sparse`` from a checked CSR
array (``_validation.check_sparse``); the sweeps, the reduction and the guard are that module's.
The intercept is one more column whose entry in every row is 1 (n more sites, nothing made
dense). Sparse features are not centred: centring would fill every row.
"""

import numpy as np
import scipy.sparse as sp

from .. import _validation as V
from ..kernels._config import chunk_rows
from ..kernels.glm import sparse as K
from ..results import RegressionState

#: methods whose rows take sparse X (the rest refuse it: ``check_method``)
METHODS = tuple(K.SPARSE_CODES)


def check_method(method, func):
    """Refuse a sparse X for a method without sparse rows, naming the ones that have them."""
    if method not in K.SPARSE_CODES:
        names = ", ".join(repr(m) for m in METHODS)
        raise ValueError(
            f"{func}: method={method!r} does not take a sparse X; the methods with sparse rows are {names} "
            "(or give X.toarray(), if it fits in memory)."
        )


def with_intercept_column(A):
    """[A, 1] as a new CSR array (n, d + 1): each row's entries, then a 1 in column d."""
    n, d = A.shape
    indptr = A.indptr.astype(np.int64) + np.arange(n + 1, dtype=np.int64)
    last = indptr[1:] - 1
    keep = np.ones(indptr[-1], dtype=bool)
    keep[last] = False
    indices = np.empty(indptr[-1], dtype=np.int64)
    data = np.empty(indptr[-1])
    indices[keep] = A.indices
    data[keep] = A.data
    indices[last] = d
    data[last] = 1.0
    return sp.csr_array((data, indices, indptr), shape=(n, d + 1))


def row_code(model, method, hand_written):
    """The rows of a sparse fit: the hand-written CEP sites of the probit and the logistic where
    the dense fit takes its hand-written rows (``hand_written``: binary labels, no offset), else
    the generic rows (EP always: the one-dimensional reduction)."""
    if hand_written and (model, method) in K.HAND_WRITTEN_CODES:
        return K.HAND_WRITTEN_CODES[(model, method)]
    return K.SPARSE_CODES[method]


def check_init_state(init_state, nnz, d, func):
    """A RegressionState of a sparse fit on the same nonzeros: (nnz,) messages, precisions >= 0."""
    if not isinstance(init_state, RegressionState):
        raise V.param_error(
            "init_state", func, "a RegressionState (res.state) or None", init_state, TypeError
        )
    tau, nu = init_state.sites.tau, init_state.sites.nu
    if np.shape(tau) != (nnz,) or np.shape(nu) != (nnz,) or np.shape(init_state.T) != (d,):
        want = f"the state of a sparse fit with {nnz} sites (one per nonzero) and {d} weights"
        raise V.param_error("init_state", func, want, f"messages of shape {np.shape(tau)}")
    if not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu)) and np.all(np.asarray(tau) >= 0)):
        raise V.param_error("init_state", func, "finite messages with precisions >= 0", "bad values")


def initial_messages(init_state, tau, nu, flat):
    """tau, nu (nnz,) <- the flat start (precision ``flat`` at every site, shift 0) or
    ``init_state``'s messages (checked already)."""
    if init_state is None:
        tau[:] = flat
        nu[:] = 0.0
    else:
        np.copyto(tau, init_state.sites.tau)
        np.copyto(nu, init_state.sites.nu)


def layout(A, s, prior_T, nodes, weights, code, offset, prior_N=None):
    """(problem, state, scratch) of a sparse fit on the CSR array A (n, d) (intercept column
    included), the state's arrays allocated, not filled. The chunks are the dense fit's
    (``chunk_rows(d)``), so the reduction adds the sites in the dense sweep's order. ``code``:
    the rows' (``row_code``). prior_N: the prior's precision-times-means (None: zero means)."""
    n, d = A.shape
    indptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(A.indices, dtype=np.int64)
    data = np.ascontiguousarray(A.data, dtype=np.float64)
    col_ptr, col_site, col_row = K.column_order(indices, n, d, indptr)
    problem = K.SparseProblem(
        indptr, indices, data, s, prior_T, np.zeros(d) if prior_N is None else prior_N, nodes, weights, code,
        chunk_rows(d),
        col_ptr, col_site, col_row, offset,
    )  # fmt: skip
    nnz = data.shape[0]
    state = K.SparseState(np.empty(nnz), np.empty(nnz), *(np.empty(d) for _ in range(4)))
    return problem, state, K.SparseScratch.allocate(problem)


def moments(A, mu, v):
    """(A @ mu, A^2 @ v): each sparse row's mean and variance of x.w under the factorised
    posterior."""
    sq = A.copy()
    sq.data = sq.data * sq.data
    return A @ mu, sq @ v
