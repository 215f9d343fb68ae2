"""Online updates (``RegressionResult.update``, ``partial_fit``): assumed density filtering by
batches, with forgetting, against the conjugate posterior where it is exact."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln, log_expit

import fastcep
import naive
from fastcep._quadrature import LOGISTIC_NODES, gauss_hermite
from fastcep.data_tools import make_click_log
from fastcep.estimators import BayesianLogisticClassifier, BayesianProbitClassifier, BayesianRegressor
from fastcep.glm.online import Online
from fastcep.glm.result import RegressionResult
from fastcep.likelihoods import Gaussian, resolve

NOISE = 0.5
#: the options of a stream that starts from the prior (``RegressionResult.prior``)
PRIOR = dict(prior_var=1.0, fit_intercept=False, intercept_var=1.0, tol=1e-8, n_threads=None)


def conjugate(x, y, T, N, T0, forget, batches):
    """The exact posterior of one weight under Gaussian noise of variance NOISE, absorbed batch
    after batch with forgetting: T <- k T + (1 - k) T0, N <- k N (k = (1 - f)^n, a zero-mean
    prior), then the batch's sum x^2 / NOISE, x y / NOISE."""
    for lo, hi in batches:
        k = (1.0 - forget) ** (hi - lo)
        T, N = k * T + (1.0 - k) * T0, k * N
        T += np.sum(x[lo:hi] ** 2) / NOISE
        N += np.sum(x[lo:hi] * y[lo:hi]) / NOISE
    return N / T, 1.0 / T


@pytest.mark.parametrize("max_iter", [None, 1])
@pytest.mark.parametrize("forget", [0.0, 0.01])
@pytest.mark.parametrize("size", [1, 7, 50])
def test_batches_of_a_conjugate_model_give_the_exact_posterior(rng, forget, size, max_iter):
    """One weight under a known-variance Gaussian: each batch's sites are exact, so the stream's
    posterior is the conjugate one, whatever the batch size, with forgetting per row. One pass
    (max_iter=1) absorbs row by row: the conjugate posterior of batches of one row."""
    n = 200
    x = rng.normal(size=n)
    y = 0.8 * x + np.sqrt(NOISE) * rng.normal(size=n)
    lik = Gaussian(var=NOISE)
    res = RegressionResult.prior(lik, "cep1", 1, dict(PRIOR, prior_var=2.0, tol=1e-12))
    batches = [(lo, min(n, lo + size)) for lo in range(0, n, size)]
    for lo, hi in batches:
        res.update(x[lo:hi, None], y[lo:hi], forget=forget, max_iter=max_iter)
    rows = [(i, i + 1) for i in range(n)] if max_iter == 1 else batches
    mean, var = conjugate(x, y, 0.5, 0.0, 0.5, forget, rows)
    assert res.posterior.mean[0] == pytest.approx(mean, rel=1e-10)
    assert res.posterior.var[0] == pytest.approx(var, rel=1e-10)
    assert res.options["rows_absorbed"] == n and res.state is None
    assert res.n_iter == 0 and res.options["update_sweeps"] >= len(batches)


TILTED = {
    "probit": naive.probit_tilted,
    "logistic": lambda y, m, v: naive.tilted_by_grid(lambda y, a: log_expit(y * a), y, m, v),
    "poisson": lambda y, m, v: naive.tilted_by_grid(lambda y, a: y * a - np.exp(a) - gammaln(y + 1), y, m, v),
}


@pytest.mark.parametrize(
    "model,method",
    [("probit", "ep"), ("probit", "cep1"), ("logistic", "cep1"), ("logistic", "ep"), ("poisson", "cep1"),
     ("poisson", "ep")],
)  # fmt: skip
def test_one_pass_is_the_textbook_row_by_row_filter(rng, model, method):
    """``Online.pass_rows`` (the kernel ``adf_pass``: the probit's and the logistic's hand-written
    CEP sites, the generic rows otherwise) against tests/naive.py's row-by-row filter with the
    textbook sites, from a posterior away from the prior, with forgetting and damping."""
    n, d = 80, 12
    A = sp.random_array((n, d), density=0.3, rng=rng, format="csr")
    A.data = rng.normal(size=A.nnz)
    A = sp.csr_array(A.toarray() * (np.arange(n) % 9 != 4)[:, None])  # (some rows empty)
    f = A @ rng.normal(size=d)
    y = rng.poisson(np.exp(0.4 * f)).astype(float) if model == "poisson" else np.where(f > 0, 1.0, -1.0)
    T0, N0 = np.full(d, 2.0), np.zeros(d)
    T, N = np.exp(rng.uniform(0.5, 1.5, d)), rng.normal(0, 0.5, d)
    seen = rng.integers(0, 5, d)
    on = Online(T.copy(), N.copy(), T0, N0)
    on.seen[:], on.rows, on.forget = seen, 5, 0.02
    mean, var = np.full(d - 1, np.nan), np.full(d - 1, np.nan)  # (the last column: an intercept's)
    lik = resolve(model)
    refused = on.pass_rows(A, y, np.empty(0), lik, method, 0.8, mean, var, "update")
    site = None
    if (model, method) == ("probit", "cep1"):
        site = lambda x, s, tc, nc, b, q: naive.probit_cep_site(x, s, tc, nc, b, q, False)  # noqa: E731
    elif (model, method) == ("logistic", "cep1"):
        nodes, weights = gauss_hermite(LOGISTIC_NODES)
        site = lambda x, s, tc, nc, b, q: naive.logistic_cep_site(x, s, tc, nc, b, q, False, nodes, weights)  # noqa: E731
    T_ref, N_ref, seen_ref, refused_ref = naive.adf_pass(
        TILTED[model], method, A.indptr, A.indices, A.data, y, T, N, T0, N0, seen, 5, 0.02, rho=0.8, site=site
    )
    # (the generic rows' 40-node quadrature agrees with the fine grid to about 1e-7 a message,
    # test_sparse.py; a filter carries each row's error into the next rows' cavities)
    rtol = 2e-6 if site is None and model != "probit" else 1e-11
    np.testing.assert_allclose(on.T, T_ref, rtol=rtol)
    np.testing.assert_allclose(on.N, N_ref, rtol=rtol, atol=1e-12)
    assert np.array_equal(on.seen, seen_ref) and on.rows == 5 + n and refused == refused_ref
    touched = np.bincount(A.indices, minlength=d)[: d - 1] > 0
    assert np.array_equal(mean[touched], on.N[: d - 1][touched] / on.T[: d - 1][touched])
    assert np.all(np.isnan(mean[~touched]))


def test_one_pass_gives_the_same_bits_for_any_batching():
    """One pass (max_iter=1) absorbs row by row, forgetting included: batches of 1, 13 and all
    the rows give the same posterior, bit for bit, with or without an intercept."""
    log = make_click_log(600, fields=6, bits=9, seed=3)
    for intercept in (False, True):
        out = []
        for size in (1, 13, 600):
            res = RegressionResult.prior("probit", "ep", log.X.shape[1], dict(PRIOR, fit_intercept=intercept))
            for lo in range(0, 600, size):
                res.update(log.X[lo : lo + size], log.y[lo : lo + size], max_iter=1, forget=1e-3)
            out.append(res)
        for res in out[1:]:
            assert np.array_equal(res.posterior.mean, out[0].posterior.mean)
            assert np.array_equal(res.posterior.var, out[0].posterior.var)
            assert res.intercept == out[0].intercept


def test_an_updated_result_saves_and_loads(rng, tmp_path):
    A = sp.random_array((300, 40), density=0.2, rng=rng, format="csr")
    y = (A @ rng.normal(size=40) > 0).astype(float)
    res = fastcep.fit(A, y)
    n_iter = res.n_iter
    res.update(A[:50], y[:50], forget=1e-3)
    assert res.n_iter == n_iter == res.trace.change.size
    fastcep.save(res, tmp_path / "m.h5")
    back = fastcep.load(tmp_path / "m.h5")
    assert np.array_equal(back.posterior.mean, res.posterior.mean)
    np.testing.assert_allclose(back.predict_proba(A[:20]), res.predict_proba(A[:20]), rtol=1e-13)


def test_an_update_touches_only_its_columns_and_allocates_nothing_of_size_d(rng):
    d = 1 << 20
    A = sp.random_array((2_000, d), density=20 / d, rng=rng, format="csr")
    y = (A @ rng.normal(size=d) > 0).astype(float)
    res = RegressionResult.prior("probit", "cep1", d, dict(PRIOR, fit_intercept=True))
    res.update(A[:1_000], y[:1_000])
    before_mean, before_var = res.posterior.mean.copy(), res.posterior.var.copy()
    row = A[1_000:1_001]
    res.update(row, y[1_000:1_001])  # (compiled here)
    touched = np.zeros(d, bool)
    touched[row.indices] = True
    assert np.array_equal(res.posterior.mean[~touched], before_mean[~touched])
    assert np.array_equal(res.posterior.var[~touched], before_var[~touched])
    assert not np.array_equal(res.posterior.mean[touched], before_mean[touched])
    tracemalloc.start()
    res.update(A[1_001:1_002], y[1_001:1_002])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * d / 20, peak  # (one array of d floats is 8 MB)
    res.update(A[1_002:1_003], y[1_002:1_003], max_iter=1)  # (one pass: its scratch is made once)
    tracemalloc.start()
    res.update(A[1_003:1_004], y[1_003:1_004], max_iter=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * d / 20, peak


def test_forgetting_is_applied_lazily_and_is_seen_when_the_posterior_is_read(rng):
    d = 50
    A = sp.csr_array(np.eye(d)[:10])  # rows touch columns 0..9 only
    y = np.ones(10)
    res = RegressionResult.prior("probit", "cep1", d, PRIOR)
    res.update(sp.csr_array(np.eye(d)[40:41] * 3.0), np.ones(1))  # column 40 learns something
    T40 = 1.0 / res.posterior.var[40]
    N40 = res.posterior.mean[40] * T40
    res.update(A, y, forget=0.05)  # 10 rows later, column 40 (untouched) has decayed
    k = 0.95**10
    assert 1.0 / res.posterior.var[40] == pytest.approx(k * T40 + (1 - k) * 1.0, rel=1e-12)
    assert res.posterior.mean[40] / res.posterior.var[40] == pytest.approx(k * N40, rel=1e-12)


def test_forgetting_tracks_a_drifting_click_rate(rng):
    """A click rate that jumps halfway: with forgetting the last tenth of the stream is
    predicted better than without (the log loss of each batch before it is absorbed)."""
    n, d = 20_000, 20
    X = sp.random_array((n, d), density=0.25, rng=rng, format="csr")
    X.data[:] = 1.0
    w = rng.normal(size=d)
    f = np.where(np.arange(n) < n // 2, X @ w, -(X @ w)) - 1.0
    y = (rng.random(n) < 1 / (1 + np.exp(-f))).astype(float)
    losses = {}
    for forget in (0.0, 1e-3):
        est = BayesianLogisticClassifier(forget=forget)
        loss = []
        for lo in range(0, n, 500):
            if lo:
                p = np.clip(est.predict_proba(X[lo : lo + 500])[:, 1], 1e-12, 1 - 1e-12)
                yy = y[lo : lo + 500]
                loss.append(-np.mean(yy * np.log(p) + (1 - yy) * np.log1p(-p)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
                est.partial_fit(X[lo : lo + 500], y[lo : lo + 500], classes=[0.0, 1.0])
        losses[forget] = np.mean(loss[-4:])
    assert losses[1e-3] < losses[0.0] - 0.02, losses


def test_partial_fit_reaches_the_batch_fit_s_predictions(rng):
    n, d = 6_000, 40
    X = sp.random_array((n, d), density=0.2, rng=rng, format="csr")
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, "yes", "no")
    online = BayesianProbitClassifier()
    for lo in range(0, n, 1_000):
        online.partial_fit(X[lo : lo + 1_000], y[lo : lo + 1_000], classes=["no", "yes"])
    batch = BayesianProbitClassifier().fit(X, y)
    assert online.classes_.tolist() == ["no", "yes"]
    p_on, p_batch = online.predict_proba(X)[:, 1], batch.predict_proba(X)[:, 1]
    assert np.corrcoef(p_on, p_batch)[0, 1] > 0.99
    assert abs(online.score(X, y) - batch.score(X, y)) < 0.02
    assert online.coef_ is online.result_.posterior.mean  # (nothing of size d copied per call)


def test_bad_batches_are_refused_by_name(rng):
    X = rng.normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(int)
    est = BayesianProbitClassifier()
    with pytest.raises(ValueError, match="first call needs classes"):
        est.partial_fit(X, y)
    with pytest.raises(ValueError, match="two labels"):
        est.partial_fit(X, y, classes=[0, 1, 2])
    est.partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="3 features"):
        est.partial_fit(X[:, :2], y)
    with pytest.raises(ValueError, match=r"labels outside the classes \[0, 1\]: \[7\] at rows \[4\]"):
        est.partial_fit(X[:5], np.array([0, 1, 0, 1, 7]))
    with pytest.raises(ValueError, match="differs from classes_"):
        est.partial_fit(X, y, classes=[0, 2])
    res = fastcep.fit(X, y)
    with pytest.raises(ValueError, match="with 3 columns"):
        res.update(X[:, :2], y)
    with pytest.raises(ValueError, match="forget"):
        res.update(X, y, forget=1.0)
    nan = X.copy()
    nan[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"finite.*\[3\]"):
        res.update(nan, y)
    # a batch that cannot be absorbed leaves the posterior as it was
    before = res.posterior.mean.copy(), res.posterior.var.copy(), res.intercept
    with pytest.raises(ValueError, match="squares overflow"):
        res.update(X * 1e200, y, forget=0.1)
    assert np.array_equal(res.posterior.mean, before[0]) and np.array_equal(res.posterior.var, before[1])
    assert res.intercept == before[2] and "rows_absorbed" not in res.options
    with pytest.raises(ValueError, match="'lp' fit cannot absorb rows"):
        fastcep.fit(X, y, method="lp").update(X, y)


def test_the_regressor_absorbs_batches_of_counts(rng):
    """A Poisson stream absorbed by partial_fit reaches the batch fit's predictions."""
    n, d = 4_000, 8
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    y = rng.poisson(np.exp(X @ rng.normal(size=d) + 0.5)).astype(float)
    online = BayesianRegressor(likelihood="poisson")
    for lo in range(0, n, 500):
        online.partial_fit(X[lo : lo + 500], y[lo : lo + 500])
    batch = BayesianRegressor(likelihood="poisson").fit(X, y)
    assert np.corrcoef(online.predict(X), batch.predict(X))[0, 1] > 0.99
    assert online.n_iter_ >= n // 500 and online.coef_ is online.result_.posterior.mean
    # a variance to be learned: the first batch learns it, as fit does, and the next keep it
    gauss = BayesianRegressor().partial_fit(X[:500], X[:500] @ np.ones(d) + 0.3 * rng.normal(size=500))
    var = gauss.likelihood_.var
    assert 0.05 < var < 0.2 and gauss.result_.converged
    gauss.partial_fit(X[500:1000], X[500:1000] @ np.ones(d) + 0.3 * rng.normal(size=500))
    assert gauss.likelihood_.var == var and gauss.result_.options["rows_absorbed"] == 500
    with pytest.raises(ValueError, match="8 features"):
        online.partial_fit(X[:5, :3], y[:5])


def test_a_one_row_update_settles_where_the_fit_does():
    """A row's sites move together: undamped, the sites of one informative probit row swing between
    two states for ever (CEP-1 and CEP-2), and the update stopped at max_iter where it happened to
    be. The default damping ("auto", the fit's rule) settles at the batch fit's fixed point."""
    world = np.random.default_rng([0, 0])
    world.standard_normal(10)
    x = world.standard_normal((10, 10))[9:10] * (3.0 / np.sqrt(10.0))
    y = np.array([0.0])
    for method in ("cep1", "cep2"):
        res = RegressionResult.prior("probit", method, 10, dict(PRIOR, tol=1e-10))
        res.update(x, y, max_iter=500)  # (a ConvergenceWarning is an error here)
        fit = fastcep.fit(x, y, method=method, fit_intercept=False, tol=1e-10)
        np.testing.assert_allclose(res.posterior.mean, fit.posterior.mean, rtol=0, atol=1e-8)
        np.testing.assert_allclose(res.posterior.var, fit.posterior.var, rtol=1e-8)
        swinging = RegressionResult.prior("probit", method, 10, dict(PRIOR, tol=1e-10))
        with pytest.warns(fastcep.ConvergenceWarning, match="stopped at max_iter=500"):
            swinging.update(x, y, max_iter=500, damping=1.0)


def test_a_failed_first_partial_fit_leaves_the_estimator_unfitted_and_names_partial_fit(rng):
    """Issue 56: a first call that failed left ``n_features_in_`` (and, past the checks,
    ``classes_`` and ``result_``) behind, so the estimator looked fitted; its errors named
    ``update``."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    for est, call in [
        (BayesianProbitClassifier(), lambda e, X: e.partial_fit(X, y, classes=[0, 1])),
        (fastcep.BayesianRegressor(likelihood="poisson"), lambda e, X: e.partial_fit(X, y.astype(float))),
    ]:
        for bad, match in [(X * 1e200, "^partial_fit: X holds values up to"), (X[:, :0], "0 feature")]:
            with pytest.raises(ValueError, match=match):
                call(est, bad)
            with pytest.raises(NotFittedError):
                check_is_fitted(est)
        call(est, X)  # (then a good first call fits, of any width)
        check_is_fitted(est)
    est = BayesianProbitClassifier().partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="^partial_fit: X holds values up to"):
        est.partial_fit(X * 1e200, y)


def test_the_prior_of_a_stream_checks_its_options():
    """Issue 56: ``RegressionResult.prior`` took a prior_var of -1, 0 or NaN and unknown keys."""
    from fastcep.glm.result import RegressionResult

    for options, exc, match in [
        (dict(prior_var=-1.0), ValueError, "'prior_var' parameter of RegressionResult.prior must be"),
        (dict(prior_var=0.0), ValueError, "'prior_var' parameter"),
        (dict(prior_var=np.nan), ValueError, "'prior_var' parameter"),
        (dict(prior_var=[1.0, 2.0]), ValueError, "an array of 3 floats > 0"),
        (dict(intercept_var=-2.0), ValueError, "'intercept_var' parameter"),
        (dict(prior_variance=1.0), TypeError, "unknown option 'prior_variance'"),
    ]:
        with pytest.raises(exc, match=match):
            RegressionResult.prior("probit", "cep1", 3, options)
    with pytest.raises(ValueError, match="'method' parameter of RegressionResult.prior"):
        RegressionResult.prior("probit", "cep3", 3)
    with pytest.raises(ValueError, match="'d' parameter of RegressionResult.prior"):
        RegressionResult.prior("probit", "cep1", 0)
    res = RegressionResult.prior("probit", "cep1", 3, dict(prior_var=[1.0, 2.0, 0.5]))
    np.testing.assert_array_equal(res.posterior.var, [1.0, 2.0, 0.5])


def test_a_regressor_with_a_binary_likelihood_is_refused_before_the_fit(rng, monkeypatch):
    """Issue 56: ``BayesianRegressor(likelihood="probit")`` was refused only after fitting."""
    import fastcep.estimators as E

    monkeypatch.setattr(E, "fit", lambda *a, **k: pytest.fail("fitted before the refusal"))
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(float)
    for call in (lambda e: e.fit(X, y), lambda e: e.partial_fit(X, y)):
        with pytest.raises(ValueError, match=r"likelihood='probit' is binary; use BayesianProbitClassifier"):
            call(fastcep.BayesianRegressor(likelihood="probit"))
