"""The evaluation metrics (``fastcep.metrics``) against hand computations, and the CP test
log-likelihood against the predictive it is defined by."""

import numpy as np
import pytest
from scipy.stats import norm, rankdata

import fastcep
from fastcep import metrics
from fastcep.data_tools import make_cp_tensor

#: a small example worked by hand: bins of width 0.1 hold 0.05 | 0.15 0.15 | 0.85 | 0.95 0.95
Y = np.array([0, 0, 1, 1, 1, 0])
P = np.array([0.05, 0.15, 0.15, 0.85, 0.95, 0.95])


def test_brier_by_hand():
    # (0.05^2 + 0.15^2 + 0.85^2 + 0.15^2 + 0.05^2 + 0.95^2) / 6
    assert metrics.brier(Y, P) == pytest.approx(1.675 / 6, abs=1e-15)
    assert metrics.brier(np.where(Y == 1, 1, -1), P) == metrics.brier(Y.astype(bool), P)
    assert metrics.brier([1, 0], [0.5, 0.5]) == 0.25
    assert metrics.brier([1, 0], [1.0, 0.0]) == 0.0


def test_calibration_curve_by_hand():
    curve = metrics.calibration_curve(Y, P, n_bins=10)
    np.testing.assert_array_equal(curve.counts, [1, 2, 0, 0, 0, 0, 0, 0, 1, 2])
    full = curve.counts > 0
    np.testing.assert_allclose(curve.mean_p[full], [0.05, 0.15, 0.85, 0.95], rtol=1e-15)
    np.testing.assert_array_equal(curve.positive_rate[full], [0.0, 0.5, 1.0, 0.5])
    assert np.isnan(curve.mean_p[~full]).all() and np.isnan(curve.positive_rate[~full]).all()
    np.testing.assert_allclose(curve.edges, np.arange(11) / 10)
    # the ends: 0 in the first bin, 1 in the last, a bin's left edge in that bin
    curve = metrics.calibration_curve([0, 1, 1], [0.0, 0.25, 1.0], n_bins=4)
    np.testing.assert_array_equal(curve.counts, [1, 1, 0, 1])


def test_expected_calibration_error_by_hand():
    # (1 |0.05 - 0| + 2 |0.15 - 0.5| + 1 |0.85 - 1| + 2 |0.95 - 0.5|) / 6 = 1.8 / 6
    assert metrics.expected_calibration_error(Y, P) == pytest.approx(0.3, abs=1e-15)
    # calibrated in every bin: 0
    assert metrics.expected_calibration_error([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.0
    # one bin: |mean P - positive rate|
    assert metrics.expected_calibration_error([0, 0, 0, 1], [0.5] * 4, n_bins=1) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "y, p, match",
    [
        ([0, 1], [0.5, 1.5], "probabilities in"),
        ([0, 1], [0.5, np.nan], "finite"),
        ([0, 1], [0.5], "same shape"),
        ([0, 2], [0.5, 0.5], "binary labels"),
        ([], [], "at least one"),
    ],
)
def test_probability_metrics_refuse_bad_input(y, p, match):
    for func in (metrics.brier, metrics.expected_calibration_error, metrics.calibration_curve):
        with pytest.raises(ValueError, match=match):
            func(np.asarray(y), np.asarray(p, dtype=float))


def test_roc_curve_by_hand_and_its_area_is_the_auc(rng):
    # scores 0.9 (pos), 0.8 (neg), then a tie at 0.4 (one of each): the tie moves both rates
    fpr, tpr = metrics.roc_curve([1, 0, 1, 0], [0.9, 0.8, 0.4, 0.4])
    np.testing.assert_array_equal(fpr, [0.0, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(tpr, [0.0, 0.5, 0.5, 1.0])
    y = rng.integers(0, 2, 300)
    score = np.round(rng.standard_normal(300) + y, 1)  # many ties
    fpr, tpr = metrics.roc_curve(y, score)
    area = np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2)
    assert area == pytest.approx(metrics.auc(y, score), abs=1e-12)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    with pytest.raises(ValueError, match="both classes"):
        metrics.roc_curve([1, 1], [0.2, 0.3])


def test_average_ranks_are_scipy_s(rng):
    """The AUC's ranks (ties share their average rank) equal scipy.stats.rankdata's, bit for bit."""
    for x in (
        rng.normal(size=500),
        rng.integers(0, 4, 500).astype(float),
        np.array([3.0]),
        np.array([2.0, np.inf, 2.0, -np.inf]),
    ):
        assert np.array_equal(metrics.average_ranks(x), rankdata(x))


def test_gaussian_log_likelihood_by_hand():
    got = metrics.gaussian_log_likelihood([0.0, 1.0], [0.0, 0.0], [1.0, 4.0])
    want = (-0.5 * np.log(2 * np.pi) + (-0.5 * np.log(8 * np.pi) - 1.0 / 8.0)) / 2
    assert got == pytest.approx(want, abs=1e-15)
    with pytest.raises(ValueError, match="variances > 0"):
        metrics.gaussian_log_likelihood([0.0], [0.0], [0.0])


def test_cp_log_likelihood_is_the_predictive_density():
    T, _ = make_cp_tensor((12, 10, 8), 2, 500, binary=True, seed=1, factor_scale=1.2)
    res = fastcep.fit(T.coords, T.values, model="cp_probit", shape=T.shape, rank=2, max_iter=20)
    mean, var = res._f_moments(T.coords)
    z = mean / np.sqrt(1.0 + var)
    want = np.mean(np.where(T.values > 0, norm.logcdf(z), norm.logcdf(-z)))
    assert res.log_likelihood(T.coords, T.values) == pytest.approx(want, rel=1e-10)
    p = res.predict(T.coords)
    assert np.mean(np.log(np.where(T.values > 0, p, 1 - p))) == pytest.approx(want, rel=1e-8)

    T, _ = make_cp_tensor((12, 10, 8), 2, 500, noise_sd=0.2, seed=2)
    res = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, max_iter=20)
    mean, var_y = res.predict(T.coords, return_var=True)
    want = np.mean(norm.logpdf(T.values, mean, np.sqrt(var_y)))
    assert res.log_likelihood(T.coords, T.values) == pytest.approx(want, rel=1e-10)
    wopt = fastcep.fit(T.coords, T.values, model="cp_gaussian", method="cp_wopt", shape=T.shape, rank=2)
    with pytest.raises(ValueError, match="point estimate"):
        wopt.log_likelihood(T.coords, T.values)
