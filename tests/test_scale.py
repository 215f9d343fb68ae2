"""cp_gaussian is scale-free: results at values c y are the results at y, scaled (and with
standardize="center", at c y + b too); constant values give proper posteriors."""

import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_cp_tensor


@pytest.fixture(scope="module")
def split():
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, noise_sd=0.1, seed=0)
    perm = np.random.default_rng(1).permutation(1500)
    return T, perm[:1200], perm[1200:]


SCALES = [(1e-100, 0.0), (1e-4, 0.0), (100.0, 0.0), (1e4, 0.0), (1e100, 0.0)]
OFFSETS = [(1.0, 1e6), (3.0, -5.0), (1e4, 1e6)]


def run(kind, T, tr, values, standardize="scale"):
    kw = dict(model="cp_gaussian", shape=T.shape, rank=2, standardize=standardize)
    if kind == "stream":
        return fastcep.stream(T.coords[tr], values[tr], batch_size=300, **kw)
    return fastcep.fit(T.coords[tr], values[tr], method=kind, max_iter=60, **kw)


@pytest.mark.parametrize("kind", ["cep1", "lp", "vmp", "cp_wopt", "stream"])
@pytest.mark.parametrize("standardize", ["scale", "center"])
def test_results_at_scale_and_offset_are_the_transformed_results(split, kind, standardize):
    """Before: relative RMSE 0.95 at scale 1e4 (0.10 at scale 1), the stream collapsed at 100,
    and an offset of 1e6 gave RMSE 1,864 on data of spread 1."""
    T, tr, te = split
    ref = run(kind, T, tr, T.values, standardize)
    p_ref, v_ref = ref.predict(T.coords[te], return_var=True)
    rmse = np.sqrt(np.mean((p_ref - T.values[te]) ** 2)) / np.std(T.values)
    assert rmse < 0.2
    K = len(T.shape)
    for c, b in SCALES + (OFFSETS if standardize == "center" else []):
        res = run(kind, T, tr, c * T.values + b, standardize)
        assert res.n_iter == ref.n_iter
        p, v = res.predict(T.coords[te], return_var=True)
        # to rounding: of the values (|b| eps) and of the transform
        np.testing.assert_allclose((p - b) / c, p_ref, rtol=1e-9, atol=1e-9 * (1 + abs(b / c)))
        np.testing.assert_allclose(v / c**2, v_ref, rtol=1e-9, atol=1e-12)
        # the posterior on the values' scale: the embeddings times |c|^(1/K) (up to sign)
        g = abs(c) ** (1 / K)
        for m, m_ref in zip(res.posterior.means, ref.posterior.means, strict=True):
            np.testing.assert_allclose(np.abs(m) / g, np.abs(m_ref), rtol=1e-8, atol=1e-10)
        if res.posterior.noise is not None:
            assert res.posterior.noise[1] / c**2 == pytest.approx(ref.posterior.noise[1], rel=1e-9)
    if standardize == "scale":  # the reconstruction from the embeddings is the prediction
        f = np.ones((len(te), 2))
        for k in range(K):
            f *= ref.posterior.means[k][T.coords[te, k]]
        np.testing.assert_allclose(f.sum(1), p_ref, rtol=1e-10, atol=1e-12)


def test_the_paper_model_fits_the_values_as_they_are(split):
    T, tr, te = split
    kw = dict(model="cp_gaussian", shape=T.shape, rank=2, standardize="none")
    res = fastcep.fit(T.coords[tr], T.values[tr] + 1e6, **kw)
    assert res.options["value_center"] == 0.0 and res.options["value_scale"] == 1.0
    assert np.sqrt(np.mean((res.predict(T.coords[te]) - 1e6 - T.values[te]) ** 2)) > 1.0


def test_the_transform_survives_the_model_file(split, tmp_path):
    T, tr, te = split
    res = fastcep.fit(T.coords[tr], 1e4 * T.values[tr] + 7.0, model="cp_gaussian", shape=T.shape, rank=2)
    fastcep.save_model(res, tmp_path / "m.h5")
    back = fastcep.load_model(tmp_path / "m.h5")
    np.testing.assert_array_equal(back.predict(T.coords[te]), res.predict(T.coords[te]))


def _smallest_eigenvalue(res):
    return min(
        float(np.linalg.eigvalsh(c).min()) if c.ndim == 3 else float(c.min()) for c in res.posterior.covs
    )


@pytest.mark.parametrize("standardize", ["scale", "center", "none"])
@pytest.mark.parametrize("kind", ["cep1", "lp", "vmp", "stream"])
def test_constant_values_give_a_proper_posterior(split, kind, standardize):
    """Before: embedding variances of 1e-303 (a starting noise precision of 10 / Var(y) = 1e301);
    the stream's covariances were not positive definite."""
    T, tr, _ = split
    kw = dict(model="cp_gaussian", shape=T.shape, rank=2, standardize=standardize)
    if kind == "stream":
        res = fastcep.stream(T.coords[tr], np.full(len(tr), 3.0), batch_size=300, **kw)
    else:
        res = fastcep.fit(T.coords[tr], np.full(len(tr), 3.0), method=kind, max_iter=300, **kw)
    assert _smallest_eigenvalue(res) > 1e-10
    np.testing.assert_allclose(res.predict(T.coords[tr[:20]]), 3.0, rtol=0.05)


def test_one_entry_fits_without_a_warning(split):
    """Before: a divide-by-zero warning (the variance of one value). (The fit is the model's: one
    entry is explained by the noise, the embeddings shrink to the prior's 0.)"""
    T, tr, _ = split
    res = fastcep.fit(T.coords[tr[:1]], [3.0], model="cp_gaussian", shape=T.shape, rank=2)
    assert res.converged and np.all(np.isfinite(res.predict(T.coords[tr[:1]])))
    assert _smallest_eigenvalue(res) > 1e-10
