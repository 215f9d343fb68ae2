"""The counts' predictive moments of log(1 + y) (``fastcep._log1p``, ``kernels.likelihoods.log1p``):
against the textbook sums of tests/naive.py, their limits, and the public ``scale="log1p"``."""

import math

import numpy as np
import pytest
from scipy import special

import fastcep
import naive
from fastcep._log1p import POISSON_SIZE, log1p_moments
from fastcep._threads import max_threads, num_threads
from fastcep.kernels.likelihoods import log1p as K
from fastcep.likelihoods import NegativeBinomial, Poisson


@pytest.mark.parametrize(
    "t", [-40.0, -6.0, -1.0, 0.0, 0.7, 3.0, 6.0, math.log(1999.0), math.log(2001.0), 9.0]
)
def test_the_poisson_moments_are_the_sums_over_the_counts(t):
    # below EXPANSION_RATE (2000) the kernel sums from the mode, above it the series
    g, g2 = K.poisson_log1p_moments(t)
    e1, e2 = naive.count_log1p_moments(t)
    assert abs(g - e1) <= 1e-11 * max(1.0, e1)
    assert abs(g2 - e2) <= 1e-11 * max(1.0, e2)


@pytest.mark.parametrize("r", [0.05, 0.6, 3.0, 1e4])
@pytest.mark.parametrize("f", [-4.0, 0.0, 2.5, 6.0])
def test_the_negative_binomial_moments_at_a_known_f_are_the_sums(r, f):
    mean, var = log1p_moments(np.array([f]), np.array([0.0]), r)
    e1, e2 = naive.count_log1p_moments(f, r)
    assert abs(mean[0] - e1) <= 1e-11 * max(1.0, e1)
    assert abs(var[0] - (e2 - e1 * e1)) <= 1e-10 * max(1.0, e2)


#: (m, v) of f: m + 12 sd at most 6, where the naive sums stay short
CASES = [(-3.0, 0.25), (-1.0, 0.3), (0.5, 0.01), (2.0, 0.1), (4.0, 0.02), (1.0, 4e-6)]


@pytest.mark.parametrize("r", [None, 0.5, 3.0])
def test_the_predictive_moments_are_the_integrals_of_the_sums(r):
    m, v = np.array(CASES).T
    mean, var = log1p_moments(m, v, r)
    for i, (mi, vi) in enumerate(CASES):
        e1, ev = naive.count_log1p_predictive(mi, vi, r)
        assert abs(mean[i] - e1) <= 1e-11, (mi, vi)
        assert abs(var[i] - ev) <= 1e-11, (mi, vi)


@pytest.mark.parametrize("r", [None, 0.6])
def test_the_limits_of_the_log_scale(r):
    # far left: no counts; far right: log(lam) = f + c, c = psi(r) - log r, Var = psi'(r) + v
    c, d = (0.0, 0.0) if r is None else (special.digamma(r) - math.log(r), special.polygamma(1, r))
    # (Var = E[L^2] - E[L]^2 loses about 1e-16 E[L]^2 to rounding: m is kept to 300 here). The
    # grid ends at 40 (Poisson) or 40 + 40 / r: the last entry straddles that end
    top = 40.0 if r is None else 40.0 + 40.0 / r
    m = np.array([-300.0, -60.0, 150.0, 300.0, 250.0, top + 2.0])
    v = np.array([1.0, 0.0, 0.0, 2.0, 3.0, 16.0])
    mean, var = log1p_moments(m, v, r)
    assert mean[0] == 0.0 and var[0] == 0.0
    assert 0.0 <= mean[1] < 1e-25
    # (Simpson's rule at steps of 1/32 is within about 1e-11 m of it: 4.6e-10 at m = 42, 1.1e-9 at
    # 108.7; a wrong closed form of the tail beyond the grid moves the straddling entry by 1.4)
    assert np.all(np.abs(mean[2:] - (m[2:] + c)) <= 1e-10 * m[2:])
    np.testing.assert_allclose(var[2:], d + v[2:], rtol=1e-9, atol=1e-7)


def test_a_wide_predictive_gives_finite_ordered_moments(rng):
    # the zero slices of a count tensor: means of f near -170 with sds near 100
    m = np.concatenate([rng.normal(0.0, 2.0, 200), [-170.0, -170.0, 5.0]])
    v = np.concatenate([rng.uniform(0.0, 2.0, 200), [1e4, 1e2, 1e4]])
    for r in (None, 0.6, 0.01):
        mean, var = log1p_moments(m, v, r)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
        assert np.all(mean >= 0.0) and np.all(var >= 0.0)
        # a higher mean of f predicts more counts
        order = np.argsort(m[:200])
        lone = log1p_moments(m[:200][order], np.full(200, 0.5), r)[0]
        assert np.all(np.diff(lone) > 0)


def test_an_entry_s_moments_do_not_depend_on_the_others(rng):
    m, v = rng.normal(1.0, 2.0, 50), rng.uniform(0.0, 3.0, 50)
    for r in (None, 0.6):
        together = log1p_moments(m, v, r)
        for i in (0, 17, 49):
            alone = log1p_moments(m[i : i + 1], v[i : i + 1], r)
            np.testing.assert_allclose(alone[0], together[0][i], rtol=0, atol=1e-12)
            np.testing.assert_allclose(alone[1], together[1][i], rtol=0, atol=1e-11)


@pytest.mark.skipif(max_threads() < 2, reason="needs numba with two threads or more")
def test_the_moments_are_the_same_bits_on_one_thread_and_on_many(rng):
    """The grid and the expectations are parallel over points and entries, each on its own."""
    m, v = rng.normal(1.0, 2.0, 3000), rng.uniform(0.0, 3.0, 3000)
    m[:100], v[:100] = -170.0, 1e4  # wide ones: long Simpson sums and the upper tail
    for r in (None, 0.6):
        with num_threads(1):
            one = log1p_moments(m, v, r)
        with num_threads(max_threads()):
            many = log1p_moments(m, v, r)
        np.testing.assert_array_equal(one[0], many[0])
        np.testing.assert_array_equal(one[1], many[1])


def test_a_large_size_is_the_poisson(rng):
    m, v = rng.normal(1.0, 1.5, 40), rng.uniform(0.0, 1.0, 40)
    poisson = log1p_moments(m, v)
    np.testing.assert_array_equal(log1p_moments(m, v, 2 * POISSON_SIZE)[0], poisson[0])
    # O(1 / r) below it
    near = log1p_moments(m, v, 1e6)
    np.testing.assert_allclose(near[0], poisson[0], rtol=0, atol=1e-4)
    assert np.abs(near[0] - poisson[0]).max() > 0.0


def test_the_moments_are_continuous_in_the_variance():
    m = np.full(5, 1.3)
    v = np.array([0.0, 1e-14, 1e-10, 1e-6, 1e-4])
    mean, var = log1p_moments(m, v, 0.6)
    np.testing.assert_allclose(mean, mean[0], rtol=0, atol=1e-5)
    assert np.all(np.diff(var) >= -1e-10)
    np.testing.assert_allclose(var[:3], var[0], rtol=0, atol=1e-9)


def _counts(rng, n, d=3):
    X = rng.standard_normal((n, d))
    return X, rng.negative_binomial(2.0, 2.0 / (2.0 + np.exp(X @ np.array([0.5, -0.4, 0.8]) + 1.0)))


def test_a_regression_predicts_on_the_log_scale(rng):
    X, y = _counts(rng, 300)
    res = fastcep.fit(X, y, model="negbin")
    m, v = res.latent(X)
    mean, var = res.predict(X, return_var=True, scale="log1p")
    expect = log1p_moments(m, v, res.likelihood.dispersion)
    np.testing.assert_array_equal(mean, expect[0])
    np.testing.assert_array_equal(var, expect[1])
    np.testing.assert_array_equal(res.predict(X, scale="log1p"), mean)
    assert res.rmse(X, y, scale="log1p") == pytest.approx(
        np.sqrt(np.mean((np.log1p(y) - mean) ** 2)), rel=1e-14
    )
    # E[log(1 + y)] is the better point on the log scale than log(1 + E[y])
    assert res.rmse(X, y, scale="log1p") < np.sqrt(np.mean((np.log1p(y) - np.log1p(res.predict(X))) ** 2))
    poisson = fastcep.fit(X, y, model=Poisson())
    np.testing.assert_array_equal(poisson.predict(X, scale="log1p"), log1p_moments(*poisson.latent(X))[0])


def test_a_count_tensor_predicts_on_the_log_scale(rng):
    shape, rank = (12, 10, 8), 2
    coords = np.stack([rng.integers(0, s, 600) for s in shape], axis=1)
    coords = np.unique(coords, axis=0)
    values = rng.poisson(3.0, len(coords)).astype(float)
    res = fastcep.fit(
        coords,
        values,
        model="cp",
        likelihood=NegativeBinomial(dispersion=2.0),
        shape=shape,
        rank=rank,
        max_iter=20,
        seed=0,
    )
    m, v = res._f_moments(coords)
    mean, var = res.predict(coords, return_var=True, scale="log1p")
    expect = log1p_moments(m, v, 2.0)
    np.testing.assert_array_equal(mean, expect[0])
    np.testing.assert_array_equal(var, expect[1])
    assert res.rmse(coords, values, scale="log1p") == pytest.approx(
        np.sqrt(np.mean((np.log1p(values) - mean) ** 2)), rel=1e-14
    )
    with pytest.raises(ValueError, match="must hold counts"):
        res.rmse(coords, values + 0.5, scale="log1p")


def test_the_log_scale_is_refused_clearly(rng):
    X, y = _counts(rng, 100)
    res = fastcep.fit(X, y, model="poisson")
    with pytest.raises(
        ValueError, match=r"The 'scale' parameter of predict must be None or 'log1p'\. Got 'log'"
    ):
        res.predict(X, scale="log")
    gaussian = fastcep.fit(X, np.log1p(y), model="gaussian")
    with pytest.raises(ValueError, match=r"scale='log1p' needs a count likelihood"):
        gaussian.predict(X, scale="log1p")
    with pytest.raises(ValueError, match=r"scale='log1p' needs a count likelihood"):
        gaussian.rmse(X, np.log1p(y), scale="log1p")


def test_bad_moments_are_refused_clearly():
    with pytest.raises(ValueError, match=r"must be 1-D arrays of one shape\. Got shapes \(3,\) and \(2,\)"):
        log1p_moments(np.zeros(3), np.ones(2))
    with pytest.raises(
        ValueError, match=r"must be finite \(m may be -inf\)\. Got m = nan, v = 1.0 at entries \[1\]"
    ):
        log1p_moments(np.array([0.0, np.nan]), np.ones(2))
    with pytest.raises(ValueError, match=r"at entries \[0\]"):
        log1p_moments(np.array([0.0]), np.array([np.inf]), 0.5)
    # a rate of 0 predicts no counts; a variance rounded below 0 is 0
    mean, var = log1p_moments(np.array([-np.inf, 1.0, 1.0]), np.array([0.0, -1e-18, 0.0]), 0.5)
    assert mean[0] == 0.0 and var[0] == 0.0
    assert mean[1] == mean[2] and var[1] == var[2]
