"""A simulated click log: hashed one-hot fields with Zipf popularity, known true weights, optional
drift (the data of click-through-rate prediction, for issue 39's learner table and tests)."""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import expit

from fastcep import _validation as V

#: rows generated from one random stream: the log is made of these blocks, so its rows do not
#: depend on how it is read (``iter_click_log``'s ``rows``) or how long a prefix is asked for
CLICK_BLOCK = 65_536
#: the largest vocabulary of a field (the fields' vocabularies run from 10 to this, log-spaced)
MAX_VOCABULARY = 100_000
#: standard deviation of the true logit x.w over rows (before the bias)
LOGIT_SD = 2.0
#: rows drawn to set the bias to the click rate
CALIBRATION_ROWS = 50_000


class ClickLog(NamedTuple):
    """A simulated click log (``make_click_log``)."""

    X: object  #: csr_array (n, 2**bits) float64: 1 at each field's hashed column (2 where two collide)
    y: np.ndarray  #: (n,) int64 clicks, 0 or 1
    p: np.ndarray  #: (n,) float64 true click probabilities expit(bias + x.w(t))
    weights: np.ndarray  #: (2**bits,) float64 true weights at the log's start
    weights_end: np.ndarray  #: (2**bits,) true weights at its end (``weights`` without drift)
    bias: float  #: the true intercept


class _Truth(NamedTuple):
    cdfs: list  #: per field, (vocabulary,) cumulative Zipf probabilities
    columns: list  #: per field, (vocabulary,) int64 hashed column of each value
    w0: np.ndarray
    w1: np.ndarray
    angle: float  #: drift * pi / 2: w(t) = cos(angle t) w0 + sin(angle t) w1
    bias: float
    base: int  #: seed of the row blocks' random streams


def _check(n, fields, bits, drift, click_rate, zipf, func):
    n = V.check_int(n, "n", func, low=1)
    fields = V.check_int(fields, "fields", func, low=1)
    bits = V.check_int(bits, "bits", func, low=1, high=30)
    drift = V.check_float(drift, "drift", func, low=0.0)
    click_rate = V.check_float(click_rate, "click_rate", func, 0.0, 1.0, low_open=True, high_open=True)
    zipf = V.check_float(zipf, "zipf", func, low=0.0, low_open=True)
    return n, fields, bits, drift, click_rate, zipf


def _truth(fields, bits, drift, click_rate, zipf, rng):
    d = 1 << bits
    sizes = np.unique(np.round(np.logspace(1.0, np.log10(MAX_VOCABULARY), fields)).astype(np.int64))
    sizes = np.resize(sizes, fields) if sizes.size < fields else sizes
    cdfs, columns = [], []
    for size in sizes:
        weight = np.arange(1, size + 1, dtype=np.float64) ** -zipf
        cdfs.append(np.cumsum(weight) / weight.sum())
        columns.append(rng.integers(0, d, size=size))
    sd = LOGIT_SD / np.sqrt(fields)
    w0 = sd * rng.standard_normal(d)
    w1 = sd * rng.standard_normal(d) if drift > 0 else np.zeros(d)
    truth = _Truth(cdfs, columns, w0, w1, float(drift * np.pi / 2), 0.0, int(rng.integers(2**62)))
    X = _rows(truth, rng, CALIBRATION_ROWS)
    f = X @ w0
    bias = brentq(lambda b: float(np.mean(expit(f + b))) - click_rate, -50.0, 50.0, xtol=1e-12)
    return truth._replace(bias=float(bias))


def _rows(truth, rng, m):
    """(m, d) CSR rows: each field's value drawn by its Zipf popularity, at its hashed column."""
    d = truth.w0.size
    cols = np.empty((m, len(truth.cdfs)), dtype=np.int64)
    for k, (cdf, column) in enumerate(zip(truth.cdfs, truth.columns, strict=True)):
        value = np.minimum(np.searchsorted(cdf, rng.random(m), side="right"), cdf.size - 1)
        cols[:, k] = column[value]
    cols.sort(axis=1)
    indptr = np.arange(0, cols.size + 1, cols.shape[1], dtype=np.int64)
    X = sp.csr_array((np.ones(cols.size), cols.ravel(), indptr), shape=(m, d))
    X.sum_duplicates()
    return X


def _block(truth, k, n):
    """Rows [k * CLICK_BLOCK, min(n, (k + 1) * CLICK_BLOCK)) of the log: (X, y, p)."""
    rng = np.random.default_rng([truth.base, k])
    start = k * CLICK_BLOCK
    m = min(n, start + CLICK_BLOCK) - start
    X = _rows(truth, rng, m)
    t = (start + np.arange(m)) / max(n - 1, 1)
    f = truth.bias + np.cos(truth.angle * t) * (X @ truth.w0)
    if truth.angle:
        f += np.sin(truth.angle * t) * (X @ truth.w1)
    p = expit(f)
    return X, (rng.random(m) < p).astype(np.int64), p


def iter_click_log(n, fields=20, bits=20, drift=0.0, seed=0, click_rate=0.05, zipf=1.1, rows=CLICK_BLOCK):
    """The rows of ``make_click_log`` in blocks, for logs larger than memory (the same rows, block
    by block: the concatenation of the blocks is ``make_click_log``'s log).

    Parameters
    ----------
    n, fields, bits, drift, seed, click_rate, zipf
        As ``make_click_log``.
    rows : int
        Rows per block yielded (the last one shorter).

    Yields
    ------
    ClickLog
        A block of rows, with the log's true weights and bias.
    """
    func = "iter_click_log"
    n, fields, bits, drift, click_rate, zipf = _check(n, fields, bits, drift, click_rate, zipf, func)
    rows = V.check_int(rows, "rows", func, low=1)
    truth = _truth(fields, bits, drift, click_rate, zipf, V.check_seed(seed, func))
    w_end = np.cos(truth.angle) * truth.w0 + np.sin(truth.angle) * truth.w1 if drift else truth.w0
    last = -(-n // CLICK_BLOCK) - 1
    held = []  # (X, y, p) pieces of rows not yet yielded
    for k in range(last + 1):
        held.append(_block(truth, k, n))
        count = sum(piece[1].size for piece in held)
        while count >= rows or (k == last and count):
            X = sp.vstack([piece[0] for piece in held], format="csr")
            y, p = (np.concatenate([piece[j] for piece in held]) for j in (1, 2))
            take = min(rows, count)
            yield ClickLog(X[:take], y[:take], p[:take], truth.w0, w_end, truth.bias)
            held = [(X[take:], y[take:], p[take:])] if count > take else []
            count -= take


def make_click_log(n, fields=20, bits=20, drift=0.0, seed=0, click_rate=0.05, zipf=1.1):
    """Simulate a click log: each row is one impression, ``fields`` categorical fields one-hot
    encoded by hashing into 2**bits columns, its label a click.

    Field k has a vocabulary of 10 to 100,000 values (log-spaced over the fields); a row's value
    of a field is drawn with Zipf popularity, P(rank r) proportional to r**-zipf, and sits at a
    column drawn uniformly for each value (the hashing trick: values of different fields may
    share a column, and a row whose two fields collide holds 2 there). The true model is
    logistic: P(click) = expit(bias + x.w(t)), w's entries i.i.d. N(0, 2**2 / fields), the bias
    set so that the mean click rate is ``click_rate``. With ``drift`` > 0 the weights turn, over
    the log, from w0 at its first row to cos(a) w0 + sin(a) w1 at its last (a = drift * pi / 2,
    w1 an independent copy of w0): each weight's marginal stays the same while the click rates
    move; at ``drift=1`` the last rows' weights are independent of the first rows'.

    Parameters
    ----------
    n : int
        Rows.
    fields : int
        Categorical fields (nonzeros per row, fewer where two collide).
    bits : int
        log2 of the columns (at most 30).
    drift : float
        How far the weights turn over the log (0: none; 1: a quarter turn).
    seed : int or Generator
    click_rate : float in (0, 1)
        The mean click probability at the log's start.
    zipf : float > 0
        The popularity exponent of the fields' values.

    Returns
    -------
    ClickLog
        ``X`` (n, 2**bits) CSR float64, ``y`` (n,) int64, ``p`` (n,) true probabilities, the true
        ``weights`` at the start and ``weights_end`` at the end, ``bias``.
    """
    blocks = list(iter_click_log(n, fields, bits, drift, seed, click_rate, zipf, rows=max(int(n), 1)))
    return blocks[0] if len(blocks) == 1 else _joined(blocks)


def _joined(blocks):
    first = blocks[0]
    return first._replace(
        X=sp.vstack([b.X for b in blocks], format="csr"),
        y=np.concatenate([b.y for b in blocks]),
        p=np.concatenate([b.p for b in blocks]),
    )
