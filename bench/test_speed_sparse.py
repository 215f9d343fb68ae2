"""Speed of sparse rows (issue 39), with pytest-benchmark.

    python -m pytest bench/test_speed_sparse.py --benchmark-columns=median,iqr,min,rounds

- **Sparse against dense on the same data**: one parallel sweep of the sparse driver
  (``kernels.glm.sparse``, sites at the nonzeros) against the dense hand-written one, on a
  20,000 x 2,000 matrix with 20 nonzeros a row (1 %), probit CEP-1, logistic CEP-1 and probit EP
  (the dense EP is the generic one too).
- **Click-log scale**: one sweep at 1,000,000 rows x 2^20 columns, 20 nonzeros a row (the dense
  site store would be 16 TB), site updates per second; and the peak memory of a whole default fit
  of 200,000 such rows against the size of its input.
- **Online updates**: a stream of 200,000 such rows (2^20 columns) absorbed by ``res.update`` in
  batches of 1,000, rows per second, against a batch fit of the same rows; and one-row updates.
Each benchmark runs three sweeps (compile, leave the flat start) before it is timed.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import fastcep
from fastcep._quadrature import LOGISTIC_NODES, gauss_hermite
from fastcep.glm import sparse as SP
from fastcep.glm.learn import GENERIC_NODES
from fastcep.glm.result import RegressionResult
from fastcep.glm.rules import FLAT_PRECISION
from fastcep.kernels import chunk_rows
from fastcep.kernels.glm import schedules as S
from fastcep.kernels.glm import sparse as K
from fastcep.kernels.glm.state import GLMProblem, GLMScratch, GLMState
from fastcep.kernels.likelihoods import REGISTRY

from ._peak import run_script

SWEEPS = {
    "probit-cep1": ("probit", "cep1"),
    "logistic-cep1": ("logistic", "cep1"),
    "probit-ep": ("probit", "ep"),
}
NNZ_ROW = 20


def rows(n, d, seed):
    """A CSR array (n, d) with NNZ_ROW nonzeros a row in random columns, N(0, 1 / NNZ_ROW)
    values, and labels +-1 of a logistic model with N(0, 1) weights."""
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, d, size=(n, NNZ_ROW))
    indices.sort(axis=1)
    data = rng.standard_normal((n, NNZ_ROW)) / np.sqrt(NNZ_ROW)
    A = sp.csr_array((data.ravel(), indices.ravel(), np.arange(0, n * NNZ_ROW + 1, NNZ_ROW)), shape=(n, d))
    A.sum_duplicates()
    f = A @ rng.standard_normal(d)
    return A, np.where(rng.random(n) < 1 / (1 + np.exp(-f)), 1.0, -1.0)


def sparse_sweeper(A, s, model, method):
    code = SP.row_code(model, method, True)
    nodes, weights = gauss_hermite(LOGISTIC_NODES if code in (3, 4) else GENERIC_NODES)
    problem, state, scratch = SP.layout(A, s, np.ones(A.shape[1]), nodes, weights, code, np.empty(0))
    state.tau[:] = FLAT_PRECISION
    state.nu[:] = 0.0
    K.rebuild(problem, state, scratch)
    lik = REGISTRY[model]()

    def one_sweep():
        return K.parallel_step(problem, lik, state, scratch, 0.5, np.uint64(0))

    return one_sweep, state


def dense_sweeper(X, s, model, method):
    n, d = X.shape
    code = S.METHOD_CODES[(model, method)] if method != "ep" else S.GENERIC_CODES["ep"]
    if method == "ep":
        nodes, weights = gauss_hermite(GENERIC_NODES)
    else:
        nodes, weights = gauss_hermite(LOGISTIC_NODES if model == "logistic" else 2)
    chunk = chunk_rows(d)
    problem = GLMProblem(X, s, np.ones(d), np.zeros(d), nodes, weights, code, chunk, 0)
    tau = np.where(X != 0.0, FLAT_PRECISION, 0.0)
    state = GLMState(tau, np.zeros((n, d)), *(np.empty(d) for _ in range(4)))
    scratch = GLMScratch.allocate(n, d, chunk, -(-n // chunk))
    S.rebuild(problem, state, scratch)
    lik = REGISTRY[model]()

    def one_sweep():
        return S.parallel_step(problem, lik, state, scratch, 0.5, np.uint64(0))

    return one_sweep, state


@pytest.fixture(scope="module")
def small():
    return rows(20_000, 2_000, 0)


@pytest.mark.parametrize("layout", ["sparse", "dense"])
@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep_sparse_against_dense(benchmark, small, name, layout):
    A, s = small
    model, method = SWEEPS[name]
    if layout == "sparse":
        one_sweep, state = sparse_sweeper(A, s, model, method)
    else:
        one_sweep, state = dense_sweeper(A.toarray(), s, model, method)
    for _ in range(3):
        one_sweep()
    assert np.all(np.isfinite(state.mu)) and np.all(state.v > 0)
    benchmark.pedantic(one_sweep, rounds=7, warmup_rounds=0)
    benchmark.extra_info["nnz"] = int(A.nnz)
    benchmark.extra_info["site_updates_per_s"] = A.nnz / benchmark.stats.stats.median


@pytest.fixture(scope="module")
def click_scale():
    return rows(1_000_000, 1 << 20, 1)


@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep_at_click_log_scale(benchmark, click_scale, name):
    A, s = click_scale
    one_sweep, state = sparse_sweeper(A, s, *SWEEPS[name])
    for _ in range(3):
        one_sweep()
    assert np.all(np.isfinite(state.mu)) and np.all(state.v > 0)
    benchmark.pedantic(one_sweep, rounds=5, warmup_rounds=0)
    benchmark.extra_info["site_updates_per_s"] = A.nnz / benchmark.stats.stats.median
    benchmark.extra_info["rows_per_s"] = A.shape[0] / benchmark.stats.stats.median


PEAK_FIT = """
import numpy as np, fastcep
from bench._peak import peak, reset_peak
from bench.test_speed_sparse import rows
A, s = rows(200_000, 1 << 20, 2)
fastcep.fit(A[:100], s[:100], model="probit", max_iter=2, tol=0.0)  # (compiled, loaded)
base = reset_peak()
res = fastcep.fit(A, s, model="probit", max_iter=20, tol=0.0)
print(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes, peak() - base)
"""


def test_peak_memory_of_a_sparse_fit(benchmark):
    """A fit of 200,000 rows x 2^20 columns (20 nonzeros a row), 20 sweeps: the memory it adds
    at its peak against its input's size (the dense site store would be 3.4 TB)."""
    out = benchmark.pedantic(run_script, args=(PEAK_FIT,), rounds=1)
    input_bytes, added = (int(x) for x in out.split()[-2:])
    benchmark.extra_info["input_MB"] = input_bytes / 1e6
    benchmark.extra_info["fit_peak_added_MB"] = added / 1e6
    benchmark.extra_info["added_per_input_byte"] = added / input_bytes
    print(f"\ninput {input_bytes / 1e6:.1f} MB, the fit adds {added / 1e6:.1f} MB at its peak")


ONLINE_ROWS, ONLINE_BATCH = 200_000, 1_000
#: sweeps of the batch fit at most (sequential: the schedule that settles on such rows, README)
BATCH_SWEEPS = 200
PRIOR = dict(prior_var=1.0, fit_intercept=True, intercept_var=100.0, tol=1e-5, n_threads=None)


@pytest.fixture(scope="module")
def stream():
    A, s = rows(ONLINE_ROWS + 20_000, 1 << 20, 3)
    return A[:ONLINE_ROWS], s[:ONLINE_ROWS], A[ONLINE_ROWS:], s[ONLINE_ROWS:]


def _absorb_all(A, s, batch, max_iter=None):
    res = RegressionResult.prior("probit", "cep1", A.shape[1], PRIOR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        for lo in range(0, A.shape[0], batch):
            res.update(A[lo : lo + batch], s[lo : lo + batch], max_iter=max_iter)
    return res


@pytest.mark.parametrize("max_iter", [None, 1], ids=["default", "one-sweep"])
def test_online_pass_in_batches(benchmark, stream, max_iter):
    """The default (sweeps until tol, at most 50) and one sweep a batch (plain ADF)."""
    A, s, A_test, s_test = stream
    _absorb_all(A[:5_000], s[:5_000], ONLINE_BATCH)  # (compile)
    res = benchmark.pedantic(_absorb_all, args=(A, s, ONLINE_BATCH, max_iter), rounds=3)
    benchmark.extra_info["rows_per_s"] = A.shape[0] / benchmark.stats.stats.median
    benchmark.extra_info["sweeps_per_batch"] = res.n_iter / (A.shape[0] / ONLINE_BATCH)
    benchmark.extra_info["held_out_auc"] = res.auc(A_test, s_test)
    benchmark.extra_info["held_out_log_lik"] = res.log_likelihood(A_test, s_test)
    print(f"\nonline: {benchmark.extra_info}")


def test_batch_fit_of_the_same_rows(benchmark, stream):
    A, s, A_test, s_test = stream
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        kwargs = dict(model="probit", schedule="sequential", max_iter=BATCH_SWEEPS)
        res = benchmark.pedantic(fastcep.fit, args=(A, s), kwargs=kwargs, rounds=1)
    benchmark.extra_info["converged"] = res.converged
    benchmark.extra_info["rows_per_s"] = A.shape[0] / benchmark.stats.stats.median
    benchmark.extra_info["sweeps"] = res.n_iter
    benchmark.extra_info["held_out_auc"] = res.auc(A_test, s_test)
    benchmark.extra_info["held_out_log_lik"] = res.log_likelihood(A_test, s_test)
    print(f"\nbatch: {benchmark.extra_info}")


def test_online_one_row_updates(benchmark, stream):
    A, s, _, _ = stream
    benchmark.pedantic(_absorb_all, args=(A[:2_000], s[:2_000], 1), rounds=3)
    benchmark.extra_info["rows_per_s"] = 2_000 / benchmark.stats.stats.median
    print(f"\none row at a time: {benchmark.extra_info}")
