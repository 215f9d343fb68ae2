"""Sparse index arrays that do not fit their matrix's shape are refused at the boundary, naming the
row and the index, before any compiled code reads them: fit, predictions, update, partial_fit.
Before the check, an index past the width segfaulted the fit, a negative one was read as a
column from the end (or freed memory twice), and a prediction answered 0.5."""

import numpy as np
import pytest
import scipy.sparse as sp

import fastcep
from fastcep.estimators import BayesianProbitClassifier

N, D = 80, 30


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    A = sp.random_array((N, D), density=0.2, rng=rng, format="csr")
    A.data = rng.normal(size=A.nnz)
    y = (A @ rng.normal(size=D) + 0.3 * rng.normal(size=N) > 0).astype(float)
    return A, y


def with_index(A, pos, value):
    """A CSR array whose stored value ``pos`` has column ``value``, built the way scipy lets a user
    build it (the constructor does not check indices against the shape)."""
    indices = A.indices.astype(np.int64)
    indices[pos] = value
    return sp.csr_array((A.data.copy(), indices, A.indptr.copy()), shape=A.shape)


def row_of(A, pos):
    return int(np.searchsorted(A.indptr, pos, side="right") - 1)


@pytest.mark.parametrize("index", [D, D + 3, 10**6, -1, -3])
def test_fit_refuses_a_column_index_outside_the_width(rows, index):
    A, y = rows
    pos = A.indptr[7] + 1
    bad = with_index(A, pos, index)
    match = rf"'X' parameter of fit .* column indices lie in \[0, {D}\)\. Got column index {index} in row 7"
    assert row_of(A, pos) == 7
    with pytest.raises(ValueError, match=match):
        fastcep.fit(bad, y, model="probit")


@pytest.mark.parametrize("fmt", ["csc", "coo", "bsr"])
def test_every_format_is_checked_in_its_own_arrays(rows, fmt):
    A, y = rows
    B = A.copy().asformat(fmt, copy=True)
    if fmt == "csc":
        B.indices[3] = N + 5
        match = rf"row indices lie in \[0, {N}\)\. Got row index {N + 5} in column"
    elif fmt == "coo":
        B.col[4] = -2
        match = rf"column indices lie in \[0, {D}\)\. Got column index -2 at stored value 4"
    else:
        B = sp.bsr_array(A.toarray(), blocksize=(2, 3))
        B.indices[0] = D // 3
        width = D // 3
        match = rf"block column indices lie in \[0, {width}\)\. Got block column index {width} in block row 0"
    with pytest.raises(ValueError, match=match):
        fastcep.fit(B, y)


def test_a_corrupt_indptr_is_refused(rows):
    A, y = rows
    for ptr, got in [
        (lambda p: p.__setitem__(10, 10**6), "indptr decreasing at row 10"),
        (lambda p: p.__setitem__(0, 2), "indptr.0. = 2"),
        (lambda p: p.__setitem__(-1, A.nnz + 5), f"indptr ending at {A.nnz + 5} with {A.nnz} stored"),
    ]:
        bad = A.copy()
        ptr(bad.indptr)
        with pytest.raises(ValueError, match=rf"indptr starts at 0, never decreases.*Got {got}"):
            fastcep.fit(bad, y)
    short = A.copy()
    short.indptr = short.indptr[:-3]
    with pytest.raises(ValueError, match=rf"indptr hold {N + 1} values\. Got {N - 2}"):
        fastcep.fit(short, y)
    floats = A.copy()
    floats.indices = floats.indices.astype(float)
    with pytest.raises(ValueError, match="indices are a 1-D integer array"):
        fastcep.fit(floats, y)


def test_stored_values_past_the_last_row_are_ignored(rows):
    """scipy lets indptr end before the stored values: those belong to no row (scipy's own
    ``prune``), and the fit is that of the pruned matrix."""
    A, y = rows
    longer = sp.csr_array(A, copy=True)
    longer.indices = np.concatenate([A.indices, [10**6, -1]]).astype(A.indices.dtype)
    longer.data = np.concatenate([A.data, [np.nan, 5.0]])
    a, b = fastcep.fit(longer, y), fastcep.fit(A, y)
    np.testing.assert_array_equal(a.posterior.mean, b.posterior.mean)


def test_predictions_refuse_an_index_outside_the_width(rows):
    A, y = rows
    res = fastcep.fit(A, y)
    far = sp.csr_array((np.array([1.0]), np.array([10**6]), np.array([0, 1])), shape=(1, D))
    for call in (res.predict_proba, res.predict, res.latent):
        with pytest.raises(ValueError, match=r"lie in \[0, 30\)\. Got column index 1000000 in row 0"):
            call(far)
    with pytest.raises(ValueError, match="Got column index -1 in row 0"):
        res.predict_proba(with_index(A, 0, -1), draws=3)
    with pytest.raises(ValueError, match="Got column index 30 in row 0"):
        res.log_likelihood(with_index(A, 0, D), y)


@pytest.mark.parametrize("index", [-3, 10**6])
def test_update_refuses_an_index_outside_the_width_and_moves_nothing(rows, index):
    A, y = rows
    res = fastcep.fit(A, y)
    mean = res.posterior.mean.copy()
    bad = with_index(A[:5], 2, index)
    for max_iter in (1, 5):  # (one pass of assumed density filtering; a batch fit)
        with pytest.raises(ValueError, match=rf"'X' parameter of update .* Got column index {index} in row"):
            res.update(bad, y[:5], max_iter=max_iter)
    np.testing.assert_array_equal(res.posterior.mean, mean)


def test_partial_fit_refuses_an_index_outside_the_width(rows):
    A, y = rows
    est = BayesianProbitClassifier().partial_fit(A, y, classes=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"Got column index 31 in row"):
        est.partial_fit(with_index(A[:5], 1, D + 1), y[:5])
