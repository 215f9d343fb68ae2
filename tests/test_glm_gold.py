"""The regression gold standard of any likelihood (``bench.gold.likelihood_gold``): on a Gaussian
likelihood its MAP and its importance sample give the closed-form posterior."""

import numpy as np
import pytest

from bench import gold as G
from fastcep.likelihoods import Gaussian


def test_the_gold_of_a_gaussian_likelihood_is_the_closed_form(rng, tmp_path, monkeypatch):
    monkeypatch.setattr(G, "RESULTS", tmp_path)  # (no cache from another run)
    n, d = 300, 3
    X = rng.standard_normal((n, d))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.5 * rng.standard_normal(n)
    off = np.linspace(-0.5, 0.5, n)
    gold = G.likelihood_gold(X, y, Gaussian(0.25), prior_var=2.0, offset=off, n_samples=40_000, seed=1)
    S = np.linalg.inv(X.T @ X / 0.25 + np.eye(d) / 2.0)
    mean = S @ X.T @ (y - off) / 0.25
    np.testing.assert_allclose(gold["map"], mean, rtol=1e-10)
    np.testing.assert_allclose(gold["laplace_cov"], S, rtol=1e-10)
    # the sample's moments, within a few Monte Carlo errors (ESS near the sample size here)
    assert gold["ess"] > 0.5 * gold["n_samples"]
    sd = np.sqrt(np.diag(S))
    assert np.all(np.abs(gold["mean"] - mean) < 5 * sd / np.sqrt(gold["ess"]))
    assert np.all(np.abs(np.diag(gold["cov"]) / np.diag(S) - 1) < 5 * np.sqrt(2 / gold["ess"]))
    assert (tmp_path / next(p.name for p in tmp_path.iterdir())).exists()  # cached
    assert G.likelihood_gold(X, y, Gaussian(0.25), prior_var=2.0, offset=off, n_samples=40_000, seed=1)[
        "ess"
    ] == pytest.approx(gold["ess"])
