"""The Gibbs gold's hyper steps (``bench.cp_gold``, ``--prior wishart | ard``): draws from the
Normal-Wishart and Gamma conditionals against their closed-form moments (tests/naive.py's updates
given point embeddings), to a tolerance of a few Monte Carlo standard errors of the draws."""

import numpy as np
import pytest

import naive
from bench.cp_gold import _draw_priors, cp_gibbs, draw_ard, draw_normal_wishart
from fastcep.tensor.hyper import ARD_A0, ARD_B0, NW_BETA0

N_DRAWS = 20_000
#: standard errors allowed: a few dozen moments are compared, each to within Z se
Z = 5.0


def _assert_moments(draws, mean, var):
    """The draws' (N, ...) sample mean within Z standard errors of ``mean``, and their sample
    variance within Z standard errors of ``var`` (the variance's from the fourth central moment)."""
    n = len(draws)
    m = draws.mean(axis=0)
    d = draws - m
    v = (d * d).mean(axis=0)
    se_m = np.sqrt(v / n)
    se_v = np.sqrt(((d**4).mean(axis=0) - v * v) / n)
    assert np.all(np.abs(m - mean) < Z * se_m), (m, mean, se_m)
    assert np.all(np.abs(v - var) < Z * se_v), (v, var, se_v)


def test_normal_wishart_draws_have_the_conditional_posterior_moments():
    rng = np.random.default_rng(3)
    n, R = 15, 3
    Uk = rng.standard_normal((n, R)) @ np.array([[1.0, 0.4, 0.0], [0.0, 0.8, -0.3], [0.0, 0.0, 0.5]])
    Uk += np.array([0.7, -0.3, 1.2])  # a mean away from the hyperprior's
    mean, beta, W, nu = naive.cp_normal_wishart_update(Uk, np.zeros((n, R, R)), NW_BETA0, R, np.eye(R))
    draws = [draw_normal_wishart(rng, Uk) for _ in range(N_DRAWS)]
    mu = np.array([d[0] for d in draws])
    Lam = np.array([d[1] for d in draws])
    # Wishart(W, nu): E = nu W, Var(Lam_ij) = nu (W_ij^2 + W_ii W_jj)
    dW = np.diag(W)
    _assert_moments(Lam, nu * W, nu * (W * W + np.outer(dW, dW)))
    # mu | Lam ~ N(m_N, (beta_N Lam)^-1): E = m_N, Cov = E[Lam^-1] / beta_N = inv(W) / (beta_N (nu - R - 1))
    _assert_moments(mu, mean, np.diag(np.linalg.inv(W)) / (beta * (nu - R - 1)))


def test_ard_draws_have_the_conditional_posterior_moments():
    rng = np.random.default_rng(4)
    R, scales = 3, np.array([1.0, 0.1, 3.0])  # one small column: a large precision
    U = [rng.standard_normal((d, R)) * scales for d in (6, 5, 4)]
    a, b = naive.cp_ard_update(U, [np.zeros((len(Uk), R, R)) for Uk in U], ARD_A0, ARD_B0)
    lam = np.array([draw_ard(rng, U) for _ in range(N_DRAWS)])
    _assert_moments(lam, a / b, a / b**2)  # Gamma(a, rate b)


def test_the_fixed_prior_draws_nothing():
    """--prior fixed takes no numbers from the chain's generator: its tables stay reproducible."""
    rng = np.random.default_rng(5)
    U = [np.ones((4, 2)), np.ones((3, 2))]
    before = rng.bit_generator.state
    priors = _draw_priors(rng, U, "fixed", 2.0)
    assert rng.bit_generator.state == before
    for mu, Lam in priors:
        assert np.all(mu == 0) and np.array_equal(Lam, np.eye(2) / 2.0)


@pytest.mark.parametrize("prior", ["wishart", "ard"])
@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
def test_the_hierarchical_chains_run(model, prior):
    rng = np.random.default_rng(6)
    shape = (5, 4, 3)
    coords = np.stack([rng.integers(0, d, 30) for d in shape], axis=1)
    y = rng.integers(0, 2, 30).astype(float)
    out = cp_gibbs(model, coords, y, shape, 2, 40, 0, coords[:5], prior=prior)
    assert all(np.all(np.isfinite(np.concatenate(v))) for k, v in out.items() if k != "tau")
