"""Extreme values are fitted or refused, never returned as converged nonsense (issue 38, items 6-10;
RELIABILITY.md, "Nothing silent"). The data of the issue's reproducers: 400 rows, 3 features."""

import warnings

import numpy as np
import pytest

import fastcep
from fastcep import ConvergenceWarning
from fastcep.likelihoods import Gaussian, NegativeBinomial, Poisson


@pytest.fixture
def counts():
    r = np.random.default_rng(0)
    X = r.standard_normal((400, 3))
    return X, r.poisson(np.exp(X @ [0.4, -0.3, 0.2] + 0.5)).astype(float)


@pytest.mark.parametrize("model", ["poisson", "negbin"])
def test_a_count_beyond_2_53_is_refused_naming_its_row(counts, model):
    """Before: Poisson skipped that row's messages every sweep and reported converged; the
    negative binomial raised scipy's "Optimization bounds must be finite scalars"."""
    X, y = counts
    y = y.copy()
    y[5] = 1e300
    with pytest.raises(ValueError, match=r"count of 1e\+300 at rows \[5\]: counts above 2\^53"):
        fastcep.fit(X, y, model=model)
    edge = np.array([0.0, 2.0**53])  # (the largest exact integer is a count)
    for lik in (Poisson(), NegativeBinomial()):
        np.testing.assert_array_equal(lik.check(edge, "y", "fit", 2), edge)


def test_a_gaussian_value_whose_square_overflows_is_refused(counts):
    """Before: y x 1e160 gave a learned variance of inf and the prior back, "converged"."""
    X, y = counts
    with pytest.raises(ValueError, match=r"values beyond \+-1e\+150 overflow"):
        fastcep.fit(X, y * 1e160, model="gaussian")
    with pytest.raises(ValueError, match="at rows"):
        fastcep.fit(X, y * 1e160, model=fastcep.likelihoods.StudentT(scale=1.0))


@pytest.mark.parametrize("nonzero", [0, 1])
def test_a_dispersion_the_counts_cannot_determine_stays_bounded_and_warns(counts, nonzero):
    """Before: on all-zero counts, or a single nonzero count, the learned dispersion fell to 1e-8
    and ``predict`` gave 6.5e21, reported converged without a word."""
    X, _ = counts
    X = X[:150]
    y = np.zeros(150)
    y[3:4] = 4.0 * nonzero
    with pytest.warns(
        ConvergenceWarning, match="dispersion of NegativeBinomial ended at the end of its range, 0.01"
    ):
        res = fastcep.fit(X, y, model="negbin")
    assert res.likelihood.dispersion == pytest.approx(0.01, rel=1e-3)
    assert np.all(res.predict(X[:20]) < 10.0)  # (6.5e21 before)


def test_a_well_determined_dispersion_does_not_warn():
    r = np.random.default_rng(3)
    X = r.standard_normal((400, 2))
    y = r.negative_binomial(2.0, 2.0 / (2.0 + np.exp(X @ [0.4, -0.3] + 1.0))).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = fastcep.fit(X, y, model="negbin")
    assert res.converged and 1.0 < res.likelihood.dispersion < 4.0


def test_messages_refused_in_every_sweep_are_no_convergence(counts):
    """Before: Gaussian(var=1e-15) refused the intercept's 400 messages in every sweep; the
    intercept stayed at 0 (the values' mean is 5) and the fit reported converged."""
    X, y = counts
    y = X @ [1.0, 2.0, 3.0] + 5.0 + np.random.default_rng(1).standard_normal(400)
    with pytest.warns(ConvergenceWarning, match="messages were refused in each of the last 3 sweeps"):
        res = fastcep.fit(X, y, model=Gaussian(var=1e-15))
    assert not res.converged and res.stop_reason == "refused"
    assert np.all(res.trace.skipped[-3:] >= 400)


def test_count_regression_with_d_near_n_stops_in_seconds_and_names_the_method_that_settles():
    """Before: Poisson on 200 x 150 diverged with sweeps slower each time (one of 53 s), and at
    200 x 5,000 it still ran after 9 minutes. CEP's parallel sweeps run off there at every
    damping; EP settles (here in about 130 sweeps)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 60))
    y = rng.poisson(np.exp(X @ (0.1 * rng.standard_normal(60)))).astype(float)
    with pytest.raises(
        FloatingPointError, match=r"diverged at damping 0.1: .* try method='ep' \(with 61 features"
    ):
        fastcep.fit(X, y, model="poisson")
    res = fastcep.fit(X, y, model="poisson", method="ep")
    assert res.converged and np.all(np.abs(res.posterior.mean) < 5)


def test_one_huge_count_in_a_regression_is_refused_by_cep_and_fitted_by_ep(counts, tmp_path, monkeypatch):
    """Before: a Poisson count of 1e12 among counts near 2 ran 168 s and then "diverged". CEP's
    sweeps still run off here at every damping (factorised messages of a posterior that one row's
    curvature, exp(f) = 1e12, couples in every direction); the fit now says so within seconds,
    names the row and EP, whose exact tilted moments settle at the posterior of a large importance
    sample."""
    from bench import gold as G

    monkeypatch.setattr(G, "RESULTS", tmp_path)  # (no cache from another run)
    X, y = counts
    y = y.copy()
    y[0] = 1e12
    with pytest.raises(
        FloatingPointError,
        match=r"diverged at damping 0.1: .* try method='ep', .*; the counts at row 0 \(1e\+12\) are over",
    ):
        fastcep.fit(X, y, model="poisson")
    res = fastcep.fit(X, y, model="poisson", method="ep", intercept_var=1.0)
    assert res.converged
    # the gold standard of the same model: [X - center, 1] with N(0, 1) on every weight
    Z = np.column_stack([X - X.mean(axis=0), np.ones(len(X))])
    gold = G.likelihood_gold(Z, y, Poisson(), prior_var=1.0, n_samples=100_000, seed=1)
    assert gold["ess"] > 10_000
    sd = np.sqrt(np.diag(gold["cov"]))
    mean = np.append(res.posterior.mean, res.centered_intercept.mean)
    var = np.append(res.posterior.var, res.centered_intercept.var)
    # (measured: means within 0.004 sd, variances 0.68-0.99 of the gold's)
    assert np.all(np.abs(mean - gold["mean"]) < 0.05 * sd)
    assert np.all((var / sd**2 > 0.6) & (var / sd**2 < 1.1))
