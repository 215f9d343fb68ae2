"""Evaluation metrics: area under the ROC curve, RMSE, mean test log-likelihood."""

import numpy as np
from scipy.stats import rankdata


def _binary(y, name="y_true"):
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"The {name!r} parameter must be a 1-D array. Got shape {arr.shape} instead.")
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "iuf" or not np.all(np.isin(arr, (0, 1, -1))):
        raise ValueError(f"The {name!r} parameter must hold binary labels in {{0, 1}} or {{-1, 1}}.")
    return arr == 1


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
    pos = _binary(y_true)
    score = np.asarray(score, dtype=np.float64)
    if score.shape != pos.shape:
        raise ValueError(f"y_true and score must have the same shape. Got {pos.shape} and {score.shape}.")
    if not np.all(np.isfinite(score)):
        raise ValueError("The 'score' parameter must be finite (no NaN or inf).")
    n_pos = int(pos.sum())
    n_neg = pos.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both classes in y_true. Got only one class.")
    ranks = rankdata(score)  # average ranks for ties
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def rmse(y_true, y_pred):
    """Root mean squared error between two arrays of the same shape."""
    a = np.asarray(y_true, dtype=np.float64)
    b = np.asarray(y_pred, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"y_true and y_pred must have the same shape. Got {a.shape} and {b.shape}.")
    return float(np.sqrt(np.mean((a - b) ** 2)))


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
