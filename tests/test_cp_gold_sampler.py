"""The Gibbs gold's hyper steps (``bench.cp_gold``, ``--prior wishart | ard``): draws from the
Normal-Wishart and Gamma conditionals against their closed-form moments (tests/naive.py's updates
given point embeddings), to a tolerance of a few Monte Carlo standard errors of the draws."""

import numpy as np
import pytest

import naive
from bench.cp_gold import _draw_priors, cp_gibbs, draw_ard
from fastcep.tensor.hyper import ARD_A0, ARD_B0

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


# ------------------------------------------------------------ the count model's gold (bench.cp_count_gold)
def test_negbin_loglik_is_the_textbook_formula():
    """Against tests/naive.py's 40-digit formula, from f = -300 to 700 and counts up to 2.5e7 (the
    tolerance: lgamma(y + r) - lgamma(y + 1) cancels two numbers of 4e8 at y = 2.5e7)."""
    from bench.cp_count_gold import negbin_loglik

    y = np.array([0.0, 0.0, 1.0, 7.0, 3409.0, 2.5e7, 2.5e7, 12.0])
    f = np.array([-300.0, 2.0, -5.0, 1.9, 8.1, 17.0, 40.0, 700.0])
    r = 0.444
    want = np.array([float(naive.negbin_log_lik_mp(r, yi)(fi)) for yi, fi in zip(y, f, strict=True)])
    got = negbin_loglik(y, r)(f)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12), got - want
    assert np.array_equal(negbin_loglik(y, r)(f[2:5], slice(2, 5)), got[2:5])


def test_zero_slice_entries_are_the_test_entries_of_objects_with_only_zero_counts():
    from bench.cp_count_gold import zero_slice_entries
    from fastcep.data_tools.tensors import SparseTensor

    train = SparseTensor(np.array([[0, 0], [0, 1], [1, 1], [2, 0]]), np.array([0.0, 3.0, 0.0, 0.0]), (3, 3))
    test = SparseTensor(np.array([[0, 0], [1, 0], [2, 1], [0, 2], [1, 2]]), np.zeros(5), (3, 3))
    # mode 0: objects 1 and 2 only zeros; mode 1: object 0 only zeros, object 2 unseen
    assert zero_slice_entries(train, test).tolist() == [True, True, True, False, True]


def test_against_gold_scores_the_zero_slices_and_the_others_apart():
    from bench.cp_count_gold import against_gold

    gold = dict(
        mean=np.array([0.0, 1.0, -5.0, -9.0]), var=np.array([4.0, 1.0, 9.0, 100.0]),
        lpd=np.array([-1.0, -2.0, -0.1, -0.3]), zero=np.array([False, False, True, True]),
    )  # fmt: skip
    out = against_gold(
        gold, np.array([1.0, 1.5, -5.0, -29.0]), np.array([1.0, 4.0, 9.0, 25.0]), np.zeros(4) - 1.0
    )
    assert out["other"] == dict(mean_in_sds=0.5, sd_ratio=1.25, lpd=-1.0, gold_lpd=-1.5)
    assert out["zero"] == dict(mean_in_sds=1.0, sd_ratio=0.75, lpd=-1.0, gold_lpd=-0.2)
