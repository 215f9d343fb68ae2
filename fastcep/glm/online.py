"""Online updates of a regression posterior: assumed density filtering by batches, with CEP
(DESIGN.md section 9).

The posterior so far is a batch's prior; the batch's sites, one per nonzero, are fitted by a few
sweeps of the sparse rows (``kernels.glm.sparse``), absorbed into the posterior and dropped, so
memory does not grow with the stream. A batch touches only the weights of its nonzero columns
(and the intercept): its problem is laid out on those columns alone, renumbered, so a small
update costs O(nnz log nnz) and allocates nothing of the size of d (a large one, O(nnz + d), with
a map of the d columns made once: ``DENSE_BATCH``).

Forgetting (``forget`` = f per row seen) moves the natural parameters toward the prior, T <- (1 -
f) T + f T0 and N likewise, the dynamics of AdPredictor and of a Kalman filter's random walk. It
is applied lazily: each weight records the number of rows seen when it was last brought up to
date, and is moved by (1 - f)^k (k rows since) when a batch touches it or when the whole
posterior is read (``sync``). A batch of n rows moves its weights by (1 - f)^n before it is
absorbed.
"""

import numpy as np
import scipy.sparse as sp

from .._quadrature import LOGISTIC_NODES, gauss_hermite
from ..kernels.glm import sparse as K
from . import sparse as SP
from .learn import GENERIC_NODES
from .rules import FLAT_PRECISION, Damping

#: sweeps of a batch at most (``RegressionResult.update``'s default ``max_iter``)
UPDATE_SWEEPS = 200
#: the default forgetting per row (``RegressionResult.update``, the classifiers' ``partial_fit``)
FORGET = 0.0
#: a batch of at least d / DENSE_BATCH nonzeros finds its columns by a scan of a map of all d
#: columns (``distinct_columns``, O(nnz + d)) instead of a sort (O(nnz log nnz)); smaller batches,
#: a row say, never touch anything of size d
DENSE_BATCH = 8


class Online:
    """The natural parameters of a posterior that absorbs batches of rows: T, N (d,) (an
    intercept's last), the prior's T0, N0, and the lazy forgetting's bookkeeping."""

    def __init__(self, T, N, T0, N0):
        self.T, self.N, self.T0, self.N0 = T, N, T0, N0
        self.seen = np.zeros(T.shape[0], dtype=np.int64)  #: rows seen when each weight was last moved
        self.rows = 0  #: rows seen
        self.forget = 0.0
        self.pending = False  #: some weight has not been moved by the rows seen since it was
        self.slot = None  #: (d,) int64 scratch map of ``distinct_columns``, made by the first large batch
        self.work = None  #: (mu, v) (d,) scratch of ``pass_rows``, made by its first call

    @classmethod
    def restored(cls, held, T0, N0):
        """The state ``RegressionResult.online_state`` gave (``held``), under the prior T0, N0."""
        on = cls(np.asarray(held["T"], dtype=np.float64), np.asarray(held["N"], dtype=np.float64), T0, N0)
        on.seen, on.rows = np.asarray(held["seen"], dtype=np.int64), int(held["rows"])
        on.forget, on.pending = float(held["forget"]), bool(held["pending"])
        return on

    def forgotten(self, cols, rows):
        """(T, N) of the weights ``cols`` moved toward the prior for the rows seen since each was
        last moved, up to ``rows`` rows in all (new arrays; the state is not changed)."""
        T, N = self.T[cols], self.N[cols]
        if self.forget > 0.0:
            keep = (1.0 - self.forget) ** (rows - self.seen[cols]).astype(np.float64)
            T = keep * T + (1.0 - keep) * self.T0[cols]
            N = keep * N + (1.0 - keep) * self.N0[cols]
        return T, N

    def bring_up_to_date(self, cols):
        """Forgetting of the weights ``cols`` for the rows seen since each was last moved."""
        self.T[cols], self.N[cols] = self.forgotten(cols, self.rows)
        self.seen[cols] = self.rows

    def set_forget(self, forget):
        """A new forgetting rate: the weights are first brought up to date at the old one."""
        if forget != self.forget:
            self.sync()
            if self.forget == 0.0:  # (all up to date: ``pass_rows`` counts no rows without forgetting)
                self.seen[:] = self.rows
            self.forget = forget

    def sync(self):
        """Every weight brought up to date (O(d)); returns whether any moved."""
        if not self.pending:
            return False
        self.bring_up_to_date(np.arange(self.T.shape[0]))
        self.pending = False
        return True

    def pass_rows(self, A, s, offset, likelihood, method, rho, mean, var, func):
        """One pass of assumed density filtering over the rows of A (CSR, n x d with the
        intercept's column), values s: each row's sites fitted once against the posterior the
        rows before it left and absorbed at once, forgetting applied row by row
        (``kernels.glm.sparse.adf_pass``). No batch layout and no columns' search: O(nnz), and
        the same bits for any batching of the rows. ``mean``, ``var``: a result's posterior
        moments (d_out,), written for the columns touched; ``func``: the public call its errors
        name. Returns the messages refused."""
        n = A.shape[0]
        d = self.T.shape[0]
        if self.work is None:
            self.work = (np.empty(d), np.empty(d))
        code = SP.row_code(likelihood.name, method, likelihood.binary and offset.size == 0)
        nodes, weights = gauss_hermite(LOGISTIC_NODES if code in (3, 4) else GENERIC_NODES)
        indptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(A.indices, dtype=np.int64)
        data = np.ascontiguousarray(A.data, dtype=np.float64)
        empty, none = np.empty(0), np.empty(0, dtype=np.int64)
        problem = K.SparseProblem(
            indptr, indices, data, s, empty, empty, nodes, weights, code, 1, none, none, none, offset
        )  # fmt: skip
        nnz = data.shape[0]
        state = K.SparseState(np.zeros(nnz), np.zeros(nnz), self.T, self.N, *self.work)
        pass_ = likelihood.driver(K.adf_pass)
        forgetting = (self.T0, self.N0, self.seen, self.rows, self.forget)
        refused = pass_(likelihood.kernel(), problem, state, rho, *forgetting, mean, var)
        self.rows += n  # (the rows are seen, and their forgetting applied, even if refused)
        self.pending = self.pending or self.forget > 0.0
        if nnz and refused >= nnz:
            raise FloatingPointError(
                f"{func}: every message of the {n} rows was refused (tilted moments not finite, or a weight "
                "left improper); check the scale of X and y"
            )
        return int(refused)

    def absorb(self, A, s, offset, likelihood, method, schedule, damping, max_iter, tol, func):
        """Fit the batch A (CSR, n x d with the intercept's column), values s, as sparse rows
        whose prior is the current posterior of the columns they touch; absorb the result.
        Returns (the touched columns, sweeps run, whether the batch met tol, skipped messages);
        ``func``: the public call its errors name."""
        n = A.shape[0]
        d = self.T.shape[0]
        if A.nnz * DENSE_BATCH >= d:
            if self.slot is None:
                self.slot = np.full(d, -1, dtype=np.int64)
            cols, local = K.distinct_columns(A.indices, self.slot)
        else:
            cols, local = np.unique(A.indices, return_inverse=True)
        rows = self.rows + n  # (the state changes only once the batch is absorbed)
        prior_T, prior_N = self.forgotten(cols, rows)
        batch = sp.csr_array((A.data, local.astype(np.int64), A.indptr), shape=(n, cols.size))
        code = SP.row_code(likelihood.name, method, likelihood.binary and offset.size == 0)
        nodes, weights = gauss_hermite(LOGISTIC_NODES if code in (3, 4) else GENERIC_NODES)
        problem, state, scratch = SP.layout(batch, s, prior_T, nodes, weights, code, offset, prior_N)

        def start():  # (flat messages: the batch's posterior is its prior)
            state.tau[:] = FLAT_PRECISION
            state.nu[:] = 0.0
            K.rebuild(problem, state, scratch)

        start()
        lik = likelihood.kernel()
        step = likelihood.driver(K.sequential_step if schedule == "sequential" else K.parallel_step_serial)
        damp = Damping(damping)
        converged, skipped, it = False, 0, 0
        for it in range(1, max_iter + 1):
            change, skipped = step(problem, lik, state, scratch, damp.rho, np.uint64(0))
            if not np.isfinite(change):
                raise FloatingPointError(
                    f"{func}: the batch's posterior is not finite after sweep {it}; check the scale of X"
                )
            if skipped >= state.tau.shape[0] > 0:  # (nothing moved: no evidence of convergence)
                if not damp.undamped:
                    raise FloatingPointError(
                        f"{func}: every message of the batch was refused in sweep {it} at damping {damp.rho} "
                        "(tilted moments not finite); check the scale of X and y"
                    )
                damp.diverged(it)  # (the undamped start: again from flat messages, damped)
                start()
                continue
            if damp.update(change, state.mu - scratch.mu_old):  # (the undamped start diverged)
                start()
                continue
            if change / damp.rho < tol:
                converged = True
                break
        self.T[cols] = state.T
        self.N[cols] = state.N
        self.seen[cols] = rows
        self.rows = rows
        self.pending = self.pending or self.forget > 0.0
        return cols, it, converged, int(skipped)
