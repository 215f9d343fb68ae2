"""A CP fit without a rank (issue 37): a generous rank from the data's size, pruned by the learned
prior, stated in the result; the stream takes the same default; methods without a learned prior
refuse it."""

import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.tensor.layout import DEFAULT_RANK_MAX, DEFAULT_RANK_MIN, default_rank


@pytest.fixture(scope="module")
def tensor():
    T, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=500, noise_sd=0.1, seed=0)
    return T


def test_the_rule_and_its_bounds():
    """n // (2 (d_1 + ... + d_K)), between 3 and 20: the paper's tensors."""
    assert default_rank((200, 100, 200), 21_076) == 20  # Alog, a training fold: 21 -> the cap
    assert default_rank((203, 203, 200), 1_010) == DEFAULT_RANK_MIN  # Enron: 0 -> the floor
    assert default_rank((10_000, 200, 10_000), 310_370) == 7  # DBLP's training entries
    assert default_rank((12, 10, 8), 500) == 8
    assert default_rank((5, 5), 10) == DEFAULT_RANK_MIN and default_rank((5, 5), 10**9) == DEFAULT_RANK_MAX


def test_a_fit_without_a_rank_is_the_fit_at_the_chosen_rank(tensor):
    T = tensor
    res = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, seed=0)
    R = default_rank(T.shape, len(T.values))
    assert res.rank == res.options["rank"] == R and res.options["rank_from_data"] is True
    same = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=R, seed=0)
    assert same.options["rank_from_data"] is False
    for a, b in zip(res.posterior.means, same.posterior.means, strict=True):
        np.testing.assert_array_equal(a, b)
    assert res.n_iter == same.n_iter


def test_the_generous_rank_prunes_itself_to_the_data(tensor):
    """A rank-2 tensor fitted at the default rank 8: the learned prior keeps at most 3 columns, and
    the fit predicts the held-out half as well as rank 2 (measured: 0.0875 both on the whole)."""
    T = tensor
    train, test = np.arange(0, 500, 2), np.arange(1, 500, 2)
    kw = dict(model="cp_gaussian", shape=T.shape, seed=0)
    res = fastcep.fit(T.coords[train], T.values[train], **kw)
    two = fastcep.fit(T.coords[train], T.values[train], rank=2, **kw)
    assert res.rank == 4 and res.effective_rank <= 3  # (250 entries: 250 // 60)
    assert res.rmse(T.coords[test], T.values[test]) < 1.1 * two.rmse(T.coords[test], T.values[test])


def test_the_stream_takes_the_same_default(tensor):
    T = tensor
    res = fastcep.stream(T.coords, T.values, model="cp_gaussian", shape=T.shape, batch_size=100, seed=0)
    assert res.rank == default_rank(T.shape, len(T.values))
    same = fastcep.stream(
        T.coords, T.values, model="cp_gaussian", shape=T.shape, batch_size=100, seed=0, rank=res.rank
    )
    for a, b in zip(res.posterior.means, same.posterior.means, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("method", ["lp", "vmp", "cp_wopt"])
def test_methods_without_a_learned_prior_need_a_rank(tensor, method):
    T = tensor
    with pytest.raises(TypeError, match="The 'rank' parameter of fit must be an int >= 1. Got None"):
        fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, method=method)


def test_a_fixed_prior_needs_a_rank(tensor):
    T = tensor
    with pytest.raises(ValueError, match="rank=None .* needs a learned prior"):
        fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, prior="fixed")
    with pytest.raises(ValueError, match="rank=None .* needs a learned prior"):
        fastcep.stream(T.coords, T.values, model="cp_gaussian", shape=T.shape, batch_size=100, prior="fixed")
    with pytest.raises(TypeError, match="The .rank. parameter of stream must be an int >= 1. Got None"):
        fastcep.stream(T.coords, T.values, model="cp_gaussian", shape=T.shape, batch_size=100, method="post")
