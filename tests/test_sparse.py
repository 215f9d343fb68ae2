"""Sparse X: sites at the nonzeros only (``kernels.glm.sparse``), against the textbook sweep of
tests/naive.py, the dense engine's bits, and the bad inputs a sparse matrix brings."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln, log_expit

import fastcep
import naive
from fastcep import likelihoods as L
from fastcep._quadrature import gauss_hermite
from fastcep.glm import sparse as SP
from fastcep.glm.learn import GENERIC_NODES
from fastcep.kernels.glm import sparse as K

TILTED = {
    "probit": naive.probit_tilted,
    "logistic": lambda y, m, v: naive.tilted_by_grid(lambda y, a: log_expit(y * a), y, m, v),
    "poisson": lambda y, m, v: naive.tilted_by_grid(lambda y, a: y * a - np.exp(a) - gammaln(y + 1), y, m, v),
}


def sparse_problem(rng, n=60, d=9, density=0.35):
    """A CSR array with empty rows and columns among random ones, and the rows' true f."""
    A = sp.random_array((n, d), density=density, rng=rng, format="csr")
    A.data = rng.normal(size=A.nnz)
    A = sp.csr_array(A.toarray() * (np.arange(n) % 7 != 3)[:, None])  # (every 7th row empty)
    A.sum_duplicates()
    return A, A @ rng.normal(size=d)


def labels(rng, model, f):
    if model == "poisson":
        return rng.poisson(np.exp(0.5 * f)).astype(float)
    return np.where(f + 0.5 * rng.normal(size=f.size) > 0, 1.0, -1.0)


@pytest.mark.parametrize(
    "model,method,code",
    [(m, "cep1", 10) for m in sorted(TILTED)]
    + [(m, "ep", 2) for m in sorted(TILTED)]
    + [("probit", "cep1", 0)],
)
def test_one_sweep_matches_the_textbook_sweep(rng, model, method, code):
    A, f = sparse_problem(rng)
    y = labels(rng, model, f)
    n, d = A.shape
    prior_T = np.full(d, 1.3)
    nodes, weights = gauss_hermite(GENERIC_NODES)
    problem, state, scratch = SP.layout(A, y, prior_T, nodes, weights, code, np.empty(0))
    # a state away from the flat start: sites of both signs of shift, some weak
    tau0 = np.exp(rng.uniform(-3, 0.5, A.nnz))
    nu0 = rng.normal(0, 0.5, A.nnz)
    np.copyto(state.tau, tau0)
    np.copyto(state.nu, nu0)
    K.rebuild(problem, state, scratch)
    rho = 0.7
    lik = L.resolve(model).kernel()
    change, skipped = K.parallel_step_serial(problem, lik, state, scratch, rho, np.uint64(0))
    t_ref, n_ref, k_ref = naive.sparse_parallel_sweep(
        TILTED[model], method, A.indptr, A.indices, A.data, y, tau0, nu0, prior_T, rho
    )
    # (40 Gauss-Hermite nodes against a 40,001-point grid for the logistic and the Poisson)
    rtol = 1e-12 if model == "probit" else 1e-7
    np.testing.assert_allclose(state.tau, t_ref, rtol=rtol)
    np.testing.assert_allclose(state.nu, n_ref, rtol=rtol, atol=1e-12)
    assert skipped == k_ref
    T = prior_T + np.bincount(A.indices, weights=state.tau, minlength=d)
    np.testing.assert_allclose(state.T, T, rtol=1e-14)
    np.testing.assert_allclose(
        state.mu, np.bincount(A.indices, weights=state.nu, minlength=d) / T, rtol=1e-12
    )
    # empty columns keep the prior exactly
    empty = np.bincount(A.indices, minlength=d) == 0
    assert np.array_equal(state.T[empty], prior_T[empty])
    assert np.isfinite(change)


def test_the_threaded_sweep_is_the_serial_one(rng):
    A, f = sparse_problem(rng, n=300, d=20)
    y = labels(rng, "probit", f)
    nodes, weights = gauss_hermite(GENERIC_NODES)
    lik = L.resolve("probit").kernel()
    out = []
    for driver in (K.parallel_step, K.parallel_step_serial):
        problem, state, scratch = SP.layout(A, y, np.ones(A.shape[1]), nodes, weights, 0, np.empty(0))
        state.tau[:] = 1e-6
        state.nu[:] = 0.0
        K.rebuild(problem, state, scratch)
        for _ in range(3):
            driver(problem, lik, state, scratch, 0.5, np.uint64(0))
        out.append(np.concatenate([state.tau, state.nu, state.T, state.N]))
    np.testing.assert_allclose(out[0], out[1], rtol=1e-13, atol=1e-15)


CASES = [
    ("probit", "cep1", "parallel"),
    ("probit", "cep2", "parallel"),
    ("probit", "ep", "parallel"),
    ("probit", "cep1", "sequential"),
    ("probit", "cep2", "sequential"),
    ("logistic", "cep1", "parallel"),
    ("poisson", "ep", "sequential"),
]


@pytest.mark.parametrize("model,method,schedule", CASES)
def test_a_sparse_fit_gives_the_bits_of_its_dense_copy_on_the_generic_rows(rng, model, method, schedule):
    """The dense engine with an offset runs the generic rows: the same arithmetic in the same
    order as the sparse rows, and the dense reduction's chunks, so the same bits."""
    A, f = sparse_problem(rng, n=150, d=12)
    y = labels(rng, model, f)
    opts = dict(model=model, method=method, schedule=schedule, offset=np.zeros(A.shape[0]))
    dense = fastcep.fit(A.toarray(), y, center=False, **opts)
    res = fastcep.fit(A, y, **opts)
    assert res.converged and res.n_iter == dense.n_iter
    assert np.array_equal(res.posterior.mean, dense.posterior.mean)
    assert np.array_equal(res.posterior.var, dense.posterior.var)
    assert res.intercept == dense.intercept
    # one message per nonzero and one per row for the intercept: nothing of size n x d
    assert res.state.sites.tau.shape == (A.nnz + A.shape[0],)
    assert res.options["center"] is False


@pytest.mark.parametrize("model", ["probit", "logistic"])
@pytest.mark.parametrize("method", ["cep1", "cep2"])
def test_a_sparse_fit_reaches_the_hand_written_dense_fixed_point(rng, model, method):
    """Without an offset the dense fit runs the hand-written rows (other arithmetic): the two
    fixed points agree within 1e-10 posterior sd once both are converged tightly."""
    A, f = sparse_problem(rng, n=200, d=10)
    y = labels(rng, model, f)
    opts = dict(model=model, method=method, tol=1e-13, max_iter=5000)
    dense = fastcep.fit(A.toarray(), y, center=False, **opts)
    res = fastcep.fit(A, y, **opts)
    sd = np.sqrt(dense.posterior.var)
    assert np.max(np.abs(res.posterior.mean - dense.posterior.mean) / sd) < 1e-10
    assert np.max(np.abs(res.posterior.var / dense.posterior.var - 1)) < 1e-10


def test_the_same_bits_on_any_thread_count(rng):
    """A problem past the serial threshold runs the threaded sweep: one and two threads give the
    same bits (each column is reduced by one thread in a fixed order)."""
    A = sp.random_array((6000, 400), density=0.06, rng=rng, format="csr")
    A.data = rng.normal(size=A.nnz)
    y = np.where(A @ rng.normal(size=400) + rng.normal(size=6000) > 0, 1.0, 0.0)
    assert A.nnz >= fastcep.glm.engine.SERIAL_SITES
    fits = [fastcep.fit(A, y, method="cep1", n_threads=k) for k in (1, 2)]
    assert fits[0].converged
    assert np.array_equal(fits[0].posterior.mean, fits[1].posterior.mean)
    assert np.array_equal(fits[0].posterior.var, fits[1].posterior.var)


def test_every_sparse_format_fits_alike_and_is_never_modified(rng):
    A, f = sparse_problem(rng, n=80, d=7)
    y = labels(rng, "probit", f)
    ref = fastcep.fit(A, y)
    coo = A.tocoo()
    # duplicates (summed) and unsorted indices, as scipy allows them
    half = coo.data / 2
    dup = sp.coo_array(
        (np.concatenate([half, half])[::-1], (np.tile(coo.row, 2)[::-1], np.tile(coo.col, 2)[::-1])),
        shape=A.shape,
    )
    forms = [A.tocsc(), coo, sp.csr_matrix(A), sp.coo_matrix(A), dup]
    for X in forms:
        before = X.copy()
        res = fastcep.fit(X, y)
        np.testing.assert_allclose(res.posterior.mean, ref.posterior.mean, rtol=1e-12, atol=1e-14)
        assert (X != before).nnz == 0 and X.format == before.format
    # float32 data and int labels
    res = fastcep.fit(A.astype(np.float32), (y > 0).astype(int))
    assert res.converged


def test_predictions_on_sparse_rows_are_those_on_the_dense_rows(rng):
    A, f = sparse_problem(rng, n=120, d=8)
    y = labels(rng, "logistic", f)
    counts = labels(rng, "poisson", f)
    B, _ = sparse_problem(rng, n=40, d=8)
    for res in (
        fastcep.fit(A, y, model="logistic"),
        fastcep.fit(A.toarray() + 3.0, y, model="probit"),  # (a centred dense fit)
        fastcep.fit(A, counts, model="poisson", fit_intercept=False),
    ):
        dense = B.toarray()
        for X in (B, sp.csr_matrix(B), B.tocsc()):
            np.testing.assert_allclose(res.latent(X)[0], res.latent(dense)[0], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(res.latent(X)[1], res.latent(dense)[1], rtol=1e-10, atol=1e-12)
            if res.likelihood.binary:
                np.testing.assert_allclose(res.predict_proba(X), res.predict_proba(dense), rtol=1e-11)
                s = (labels(rng, "probit", B @ np.ones(8)) > 0).astype(float)
                assert res.log_likelihood(X, s) == pytest.approx(res.log_likelihood(dense, s), rel=1e-11)
                assert res.auc(X, s) == res.auc(dense, s)
            else:
                np.testing.assert_allclose(res.predict(X), res.predict(dense), rtol=1e-11)


def test_learned_likelihood_parameters_and_a_resumed_fit(rng):
    A, f = sparse_problem(rng, n=200, d=6)
    y = rng.negative_binomial(3.0, 3.0 / (3.0 + np.exp(0.5 * f + 1.0))).astype(float)
    res = fastcep.fit(A, y, model="negbin", max_iter=400)
    dense = fastcep.fit(A.toarray(), y, model="negbin", center=False, offset=np.zeros(200), max_iter=400)
    assert res.converged and dense.converged
    # (the learned dispersion's E-step sums x.w by sparse products here, by BLAS there)
    assert res.likelihood.dispersion == pytest.approx(dense.likelihood.dispersion, rel=1e-6)
    np.testing.assert_allclose(res.posterior.mean, dense.posterior.mean, rtol=1e-5, atol=1e-7)
    probit = fastcep.fit(A, np.sign(f + 0.1), max_iter=3)
    resumed = fastcep.fit(A, np.sign(f + 0.1), init_state=probit.state)
    full = fastcep.fit(A, np.sign(f + 0.1))
    assert resumed.converged and resumed.n_iter < full.n_iter
    np.testing.assert_allclose(resumed.posterior.mean, full.posterior.mean, atol=1e-4)
    with pytest.raises(ValueError, match="sparse fit with"):
        fastcep.fit(A[:100], np.sign(f[:100] + 0.1), init_state=probit.state)


@pytest.mark.parametrize("method", ["lp", "is", "vb", "kjit"])
def test_methods_without_sparse_rows_refuse_a_sparse_x(rng, method):
    A, f = sparse_problem(rng)
    y = labels(rng, "logistic", f)
    with pytest.raises(ValueError, match=f"method='{method}' does not take a sparse X.*'cep1', 'cep2', 'ep'"):
        fastcep.fit(A, y, model="logistic", method=method)


def test_bad_sparse_input_is_named(rng):
    A, f = sparse_problem(rng)
    y = labels(rng, "probit", f)
    bad = A.copy()
    bad.data[bad.indptr[5]] = np.nan
    with pytest.raises(ValueError, match=r"'X' parameter of fit must be finite.*first rows \[5\]"):
        fastcep.fit(bad, y)
    with pytest.raises(ValueError, match="non-empty"):
        fastcep.fit(sp.csr_array((0, 4)), np.empty(0))
    with pytest.raises(TypeError, match="real numbers"):
        fastcep.fit(A.astype(np.complex128), y)
    with pytest.raises(ValueError, match="squares overflow.*column"):
        fastcep.fit(A * 1e200, y)
    res = fastcep.fit(A, y)
    with pytest.raises(ValueError, match="with 9 columns"):
        res.predict_proba(sp.csr_array((3, 10)))
    with pytest.raises(ValueError, match=r"finite.*first rows \[5\]"):
        res.predict_proba(bad)
    # a row far beyond float64's squares is predicted at the limit, as a dense one is
    big = sp.csr_array(np.array([[1e200, 0, 0, 0, 0, 0, 0, 0, -3e199]]))
    np.testing.assert_allclose(res.predict_proba(big), res.predict_proba(big.toarray()), rtol=1e-12)


def test_column_order_is_the_stable_sort_of_the_columns(rng):
    """The counting sort of the sites by column is the permutation of a stable argsort (empty
    rows and columns, int32 and int64 indices)."""
    from fastcep.kernels.glm.sparse import column_order

    for dtype in (np.int32, np.int64):
        X = sp.random_array((300, 50), density=0.05, rng=rng, format="csr")
        X = sp.vstack([X, sp.csr_array((2, 50))], format="csr")  # (empty rows)
        indices = X.indices.astype(dtype)
        col_ptr, col_site, col_row = column_order(indices, X.shape[0], 53, X.indptr)
        order = np.argsort(indices, kind="stable")
        np.testing.assert_array_equal(col_site, order)
        np.testing.assert_array_equal(col_row, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[order])
        counts = np.bincount(indices, minlength=53)
        np.testing.assert_array_equal(col_ptr, np.concatenate([[0], np.cumsum(counts)]))


def test_distinct_columns_are_numpy_s_unique(rng):
    """The scan of a batch's columns (large batches of an online update) is ``np.unique`` with
    its inverse, and leaves its scratch map as it found it."""
    from fastcep.kernels.glm.sparse import distinct_columns

    slot = np.full(1000, -1, dtype=np.int64)
    for indices in (rng.integers(0, 1000, 5000), np.array([999, 0, 999, 5]), np.zeros(0, dtype=np.int64)):
        cols, inverse = distinct_columns(indices, slot)
        want, want_inverse = np.unique(indices, return_inverse=True)
        np.testing.assert_array_equal(cols, want)
        np.testing.assert_array_equal(inverse, want_inverse)
        assert np.all(slot == -1)
