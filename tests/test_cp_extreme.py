"""CP fits of extreme data (issue 38, items 12-15; RELIABILITY.md, "Nothing silent"): a count far
beyond the others, values of any finite scale, modes too large for a dense start, and a state
bound to its entries."""

import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.metrics import rmse


@pytest.fixture(scope="module")
def tensor():
    T, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=500, noise_sd=0.1, seed=0)
    return T


@pytest.mark.parametrize("method", ["cep1", "lp", "vmp", "cp_wopt"])
def test_values_of_any_finite_scale_fit_as_the_scaled_problem(tensor, method):
    """Before: values x 1e200 gave numpy's LinAlgError (their squares overflowed the scale, taken
    as 1); values x 1e-200 predicted 0 everywhere and ``rmse`` said 0.0."""
    T = tensor
    fits = {}
    for scale in (1.0, 1e200, 1e-200, 1e300, 1e-300):
        res = fastcep.fit(
            T.coords, T.values * scale, model="cp_gaussian", method=method, shape=T.shape, rank=2
        )
        fits[scale] = (
            res.n_iter,
            res.predict(T.coords) / scale,
            res.rmse(T.coords, T.values * scale) / scale,
        )
    n_iter, pred, err = fits[1.0]
    for scale, (it, p, e) in fits.items():
        assert it == n_iter, scale
        np.testing.assert_allclose(p, pred, rtol=1e-9, atol=1e-12 * np.abs(pred).max())
        assert e == pytest.approx(err, rel=1e-12), scale


def test_one_huge_count_is_fitted_not_stopped_after_one_sweep(tensor):
    """Before: one count of 1e12 among Poisson counts near 1 stopped cp_poisson "converged" after
    one sweep (change 3.5e-5), predicting 3.8e17 for it: the stopping measure's floor was taken
    from the counts' own squares (1e24 / 500), not from their scale on f (log(1 + y))."""
    T = tensor
    rate = np.exp(T.values)
    y = np.random.default_rng(0).poisson(rate).astype(float)
    y[0] = 1e12
    res = fastcep.fit(T.coords, y, model="cp_poisson", shape=T.shape, rank=2, seed=0)
    assert res.converged and res.n_iter > 10  # (measured: 408 iterations)
    pred = res.predict(T.coords)
    assert pred[0] == pytest.approx(1e12, rel=1e-2)  # (measured: 1.00015e12)
    # the other entries keep their rates: median error of the log rate 0.22 (0.19 without the
    # huge count)
    assert np.median(np.abs(np.log(pred[1:]) - T.values[1:])) < 0.3


def test_rmse_of_extreme_errors_is_their_scaled_rmse():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    for scale in (1e-300, 1e-200, 1e200, 1e300):
        assert rmse(a * scale, b * scale) / scale == pytest.approx(rmse(a, b), rel=1e-13)


def test_huge_modes_start_from_the_columns_that_hold_entries():
    """Before: a (1e5)^3 tensor with 200 entries: a MemoryError asking for 74.5 GiB in the SVD
    start (its unfoldings are 1e10 columns wide)."""
    rng = np.random.default_rng(2)
    coords = rng.integers(0, 100_000, size=(200, 3))
    res = fastcep.fit(coords, rng.standard_normal(200), model="cp_gaussian", shape=(100_000,) * 3, rank=2)
    assert np.all(np.isfinite(res.predict(coords[:10])))


def test_the_start_of_a_modest_tensor_is_unchanged():
    """The columns are compressed only past MAX_DENSE_COLUMNS: the starts below it are the same
    as a dense unfolding's, bit for bit (the starts of the benchmarks' tensors did not move)."""
    from fastcep.tensor import init

    T, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=300, noise_sd=0.1, seed=3)
    before = init.svd_init(T.coords, T.values, T.shape, 2, 1.0, np.random.default_rng(0))
    limit = init.MAX_DENSE_COLUMNS
    try:
        init.MAX_DENSE_COLUMNS = 1  # (every unfolding compressed: the same leading vectors)
        compressed = init.svd_init(T.coords, T.values, T.shape, 2, 1.0, np.random.default_rng(0))
    finally:
        init.MAX_DENSE_COLUMNS = limit
    assert np.array_equal(
        before, init.svd_init(T.coords, T.values, T.shape, 2, 1.0, np.random.default_rng(0))
    )
    np.testing.assert_allclose(np.abs(compressed), np.abs(before), rtol=1e-8, atol=1e-10)


def test_a_state_is_bound_to_its_entries(tensor):
    """Before: ``init_state`` from another tensor of the same shape was taken: RMSE 0.368 against
    0.087 from scratch."""
    T = tensor
    other, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=500, noise_sd=0.1, seed=5)
    theirs = fastcep.fit(other.coords, other.values, model="cp_gaussian", shape=other.shape, rank=2)
    with pytest.raises(
        ValueError, match="'init_state' parameter of fit holds the messages of a fit on other entries"
    ):
        fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, init_state=theirs.state)
    ours = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, max_iter=5)
    again = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, init_state=ours.state)
    assert again.rmse(T.coords, T.values) < 0.2
