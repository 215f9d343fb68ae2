"""Evaluation metrics: the ROC curve and its area, RMSE, the Brier score, the calibration curve
and the expected calibration error of predicted probabilities, the mean Gaussian log predictive
density, and the KL divergence of two Gaussians."""

import math
from typing import NamedTuple

import numpy as np

from . import _validation as V


def _binary(y, name="y_true"):
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"The {name!r} parameter must be a 1-D array. Got shape {arr.shape} instead.")
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "iuf" or not np.all(np.isin(arr, (0, 1, -1))):
        raise ValueError(f"The {name!r} parameter must hold binary labels in {{0, 1}} or {{-1, 1}}.")
    return arr == 1


def _binary_and_scores(y_true, score, name):
    """Labels as bool and ``score`` as finite float64 of the same shape (the metrics' one check)."""
    pos = _binary(y_true)
    score = np.asarray(score, dtype=np.float64)
    if score.shape != pos.shape:
        raise ValueError(f"y_true and {name} must have the same shape. Got {pos.shape} and {score.shape}.")
    if not np.all(np.isfinite(score)):
        raise ValueError(f"The {name!r} parameter must be finite (no NaN or inf).")
    return pos, score


def _probabilities(y_true, p):
    pos, p = _binary_and_scores(y_true, p, "p")
    if p.size == 0:
        raise ValueError("The 'p' parameter must hold at least one probability. Got none.")
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("The 'p' parameter must hold probabilities in [0, 1].")
    return pos, p


def auc(y_true, score):
    """Area under the ROC curve (Mann-Whitney statistic, ties counted as one half).

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels in {0, 1}, {-1, 1} or bool.
    score : array of shape (n,)
        Higher means more likely positive.

    Returns
    -------
    float
    """
    pos, score = _binary_and_scores(y_true, score, "score")
    n_pos = int(pos.sum())
    n_neg = pos.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both classes in y_true. Got only one class.")
    ranks = average_ranks(score)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def average_ranks(x):
    """The ranks 1..n of x (n,), ties given the average of the ranks they share (as
    ``scipy.stats.rankdata``'s default, whose import cost every process about 0.4 s)."""
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    start = np.cumsum(counts) - counts  # (ranks below each distinct value)
    return (start + 0.5 * (counts + 1))[inverse.reshape(-1)]


def roc_curve(y_true, score):
    """The ROC curve: false and true positive rates at every distinct threshold of ``score``.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels in {0, 1}, {-1, 1} or bool, both classes present.
    score : array of shape (n,)
        Higher means more likely positive (finite).

    Returns
    -------
    fpr, tpr : ndarray of float64, shape (m + 1,)
        From (0, 0) to (1, 1), one point per distinct score (m of them), highest first; tied
        scores move both rates at once, so the trapezoidal area under the curve equals ``auc``.
    """
    pos, score = _binary_and_scores(y_true, score, "score")
    if pos.all() or not pos.any():
        raise ValueError("The ROC curve needs both classes in y_true. Got only one class.")
    order = np.argsort(-score, kind="stable")
    s, p = score[order], pos[order]
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # the last row of each distinct score
    tp = np.cumsum(p)[last]
    fp = (last + 1) - tp
    return np.r_[0.0, fp / fp[-1]], np.r_[0.0, tp / tp[-1]]


def power_of_two_at_or_below(x):
    """The power of 2 at or below the positive finite float ``x``: a unit to measure values of
    extreme size in, exactly (dividing by it changes no significand)."""
    return math.ldexp(1.0, math.frexp(x)[1] - 1)


def rmse(y_true, y_pred):
    """Root mean squared error between two arrays of the same shape."""
    a = np.asarray(y_true, dtype=np.float64)
    b = np.asarray(y_pred, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"y_true and y_pred must have the same shape. Got {a.shape} and {b.shape}.")
    d = a - b
    top = float(np.max(np.abs(d))) if d.size else 0.0
    if top == 0.0 or not np.isfinite(top) or 1e-150 <= top <= 1e150:
        return float(np.sqrt(np.mean(d**2)))
    # (errors whose squares overflow or underflow: measured in a power of 2 of their size)
    unit = power_of_two_at_or_below(top)
    return float(np.sqrt(np.mean((d / unit) ** 2)) * unit)


def brier(y_true, p):
    """The Brier score: the mean squared difference between P(y = 1) and the 0/1 label.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels in {0, 1}, {-1, 1} or bool.
    p : array of shape (n,)
        Predicted probabilities P(y = 1) in [0, 1].

    Returns
    -------
    float
        0 for certain and right predictions; 0.25 for p = 0.5 everywhere.
    """
    pos, p = _probabilities(y_true, p)
    return float(np.mean((p - pos) ** 2))


class CalibrationCurve(NamedTuple):
    """Predicted probabilities against observed frequencies in equal-width bins of [0, 1]."""

    mean_p: np.ndarray  #: (n_bins,) mean predicted P of each bin (NaN where a bin is empty)
    positive_rate: np.ndarray  #: (n_bins,) fraction of positive labels in each bin (NaN where empty)
    counts: np.ndarray  #: (n_bins,) int64, the predictions in each bin
    edges: np.ndarray  #: (n_bins + 1,) the bins' edges, 0 to 1


def calibration_curve(y_true, p, n_bins=10):
    """The reliability curve: per equal-width bin of P, the mean P and the positive rate.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels in {0, 1}, {-1, 1} or bool.
    p : array of shape (n,)
        Predicted probabilities P(y = 1) in [0, 1].
    n_bins : int
        Bin b holds the p with floor(p n_bins) = b (b / n_bins <= p < (b + 1) / n_bins; p = 1 in
        the last bin).

    Returns
    -------
    CalibrationCurve
        A calibrated model's ``positive_rate`` equals its ``mean_p`` in every bin.
    """
    pos, p = _probabilities(y_true, p)
    n_bins = V.check_int(n_bins, "n_bins", "calibration_curve", 1)
    b = np.minimum(np.floor(p * n_bins).astype(np.int64), n_bins - 1)
    counts = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(b, weights=p, minlength=n_bins) / counts
        rate = np.bincount(b, weights=pos.astype(np.float64), minlength=n_bins) / counts
    return CalibrationCurve(mean_p, rate, counts, np.linspace(0.0, 1.0, n_bins + 1))


def expected_calibration_error(y_true, p, n_bins=10):
    """The expected calibration error: sum over bins of (bin's share of the predictions) x
    |mean P - positive rate| (equal-width bins, as ``calibration_curve``).

    Parameters
    ----------
    y_true : array of shape (n,)
    p : array of shape (n,)
        Predicted probabilities P(y = 1) in [0, 1].
    n_bins : int

    Returns
    -------
    float
        0 for a calibrated model; at most 1.
    """
    curve = calibration_curve(y_true, p, n_bins)
    full = curve.counts > 0
    gap = np.abs(curve.mean_p[full] - curve.positive_rate[full])
    return float(np.sum(curve.counts[full] * gap) / np.sum(curve.counts))


def gaussian_log_likelihood(y, mean, var):
    """Mean log density of ``y`` under independent Gaussians N(mean, var) (the test
    log-likelihood under a Gaussian predictive).

    Parameters
    ----------
    y, mean : arrays of shape (n,)
    var : array of shape (n,)
        Predictive variances, > 0.

    Returns
    -------
    float
    """
    y = np.asarray(y, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    if not (y.shape == mean.shape == var.shape):
        shapes = f"{y.shape}, {mean.shape}, {var.shape}"
        raise ValueError(f"y, mean and var must have the same shape. Got {shapes}.")
    if not np.all(var > 0.0):
        raise ValueError("The 'var' parameter must hold variances > 0.")
    return float(np.mean(-0.5 * (np.log(2.0 * np.pi * var) + (y - mean) ** 2 / var)))


def gaussian_kl(mean_p, cov_p, mean_q, cov_q):
    """KL(p || q) between two multivariate Gaussians (covariances full or 1-D diagonals).

    Parameters
    ----------
    mean_p, mean_q : array of shape (d,)
    cov_p, cov_q : array of shape (d, d) or (d,) for a diagonal covariance

    Returns
    -------
    float
    """
    mean_p = np.asarray(mean_p, dtype=np.float64)
    mean_q = np.asarray(mean_q, dtype=np.float64)
    d = mean_p.size
    cov_p = np.asarray(cov_p, dtype=np.float64)
    cov_q = np.asarray(cov_q, dtype=np.float64)
    cov_p = np.diag(cov_p) if cov_p.ndim == 1 else cov_p
    cov_q = np.diag(cov_q) if cov_q.ndim == 1 else cov_q
    lq = np.linalg.cholesky(cov_q)
    lp = np.linalg.cholesky(cov_p)
    a = np.linalg.solve(lq, lp)
    diff = np.linalg.solve(lq, mean_q - mean_p)
    logdet_q = 2.0 * np.log(np.diag(lq)).sum()
    logdet_p = 2.0 * np.log(np.diag(lp)).sum()
    return float(0.5 * (np.sum(a * a) + diff @ diff - d + logdet_q - logdet_p))
