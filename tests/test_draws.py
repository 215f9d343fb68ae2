"""Posterior draws of a regression's weights and of P(y = 1 | x) (issue 39, Thompson sampling)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, ndtr

import fastcep

LINK = {"probit": ndtr, "logistic": expit}


@pytest.fixture(scope="module")
def uncentred_data():
    r = np.random.default_rng(0)
    X = r.standard_normal((300, 4)) + 3.0
    y = (r.random(300) < ndtr(X @ [1.0, -1.0, 0.5, 0.0] - 1.0)).astype(int)
    return X, y


def _z(draws, mean, var):
    """The sample means' distances from ``mean`` in standard errors."""
    return np.abs(draws.mean(axis=0) - mean) / np.sqrt(var / draws.shape[0])


@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_weight_draws_follow_the_posterior(uncentred_data, model):
    X, y = uncentred_data
    res = fastcep.fit(X, y, model=model)
    assert res.center is not None  # (a centred fit: b = b_c - center.w)
    n = 40_000
    draws = res.sample_weights(n, seed=1)
    assert draws.weights.shape == (n, 4) and draws.intercept.shape == (n,)
    assert np.all(_z(draws.weights, res.posterior.mean, res.posterior.var) < 5.0)
    # each weight's spread is its posterior variance
    np.testing.assert_allclose(draws.weights.var(axis=0), res.posterior.var, rtol=0.05)
    assert _z(draws.intercept[:, None], res.intercept.mean, res.intercept.var)[0] < 5.0
    # the linear predictor, draw by draw, has the moments of res.latent: the intercept's draw
    # carries its coupling to the weights through the centring
    f = X[:5] @ draws.weights.T + draws.intercept
    mean, var = res.latent(X[:5])
    assert np.all(np.abs(f.mean(axis=1) - mean) < 5.0 * np.sqrt(var / n))
    np.testing.assert_allclose(f.var(axis=1), var, rtol=0.05)


@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_probability_draws_are_the_link_at_weight_draws(uncentred_data, model):
    X, y = uncentred_data
    res = fastcep.fit(X, y, model=model, center=False)
    P = res.predict_proba(X[:7], draws=6, seed=3)
    w = res.sample_weights(6, seed=3)  # (the same random numbers, in the same order)
    assert P.shape == (6, 7)
    np.testing.assert_allclose(P, LINK[model](X[:7] @ w.weights.T + w.intercept).T, rtol=1e-12, atol=1e-300)
    # averaged over many draws: the posterior predictive
    many = res.predict_proba(X[:7], draws=40_000, seed=4)
    assert np.all(np.abs(many.mean(axis=0) - res.predict_proba(X[:7])) < 5.0 * many.std(axis=0) / 200.0)


def test_draws_repeat_with_their_seed(uncentred_data):
    X, y = uncentred_data
    res = fastcep.fit(X, y)
    a, b = res.sample_weights(3, seed=7), res.sample_weights(3, seed=7)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.intercept, b.intercept)
    assert not np.array_equal(a.weights, res.sample_weights(3, seed=8).weights)
    np.testing.assert_array_equal(
        res.predict_proba(X, draws=2, seed=0), res.predict_proba(X, draws=2, seed=0)
    )


def test_sparse_rows_draw_only_their_columns():
    r = np.random.default_rng(1)
    X = sp.random(400, 2000, density=0.01, random_state=1, format="csr")
    w = r.standard_normal(2000)
    y = (r.random(400) < ndtr(X @ w)).astype(int)
    res = fastcep.fit(X, y, schedule="sequential", fit_intercept=False)
    rows = X[:5]
    P = res.predict_proba(rows, draws=30_000, seed=0)
    assert P.shape == (30_000, 5)
    assert np.all(np.abs(P.mean(axis=0) - res.predict_proba(rows)) < 5.0 * P.std(axis=0) / np.sqrt(30_000))
    # a row with no nonzero: every draw is the link at 0
    empty = sp.csr_array((1, 2000))
    np.testing.assert_array_equal(res.predict_proba(empty, draws=3, seed=0), 0.5)


def test_bad_draw_arguments(uncentred_data):
    X, y = uncentred_data
    res = fastcep.fit(X, y)
    with pytest.raises(ValueError, match="'n' parameter of sample_weights"):
        res.sample_weights(0)
    with pytest.raises(ValueError, match="'draws' parameter of predict_proba"):
        res.predict_proba(X, draws=0)
    with pytest.raises(ValueError, match="columns"):
        res.predict_proba(X[:, :3], draws=2)
    counts = fastcep.fit(X, np.arange(300) % 4, model="poisson")
    with pytest.raises(ValueError, match="not binary"):
        counts.predict_proba(X, draws=2)
    assert counts.sample_weights(2, seed=0).weights.shape == (2, 4)
