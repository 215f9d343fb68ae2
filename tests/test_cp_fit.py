"""fastcep.fit for CP models: recovery, determinism, results, save/load and bad input."""

import h5py
import numpy as np
import pytest
from conftest import SHARED_DATA
from edits import edited
from short_fits import assert_max_iter_warns

import fastcep
from fastcep.data_tools import load_paper_fold, make_cp_tensor

SHAPE = (30, 25, 20)


@pytest.fixture(scope="module")
def gaussian_split():
    """A rank-3 tensor with noise sd 0.1 (tau = 100), half its entries observed; 80/20 split."""
    n = int(np.prod(SHAPE) * 0.5)
    T, factors = make_cp_tensor(SHAPE, 3, n, noise_sd=0.1, seed=7)
    f = np.ones((n, 3))
    for k in range(3):
        f *= factors[k][T.coords[:, k]]
    f = f.sum(1)
    perm = np.random.default_rng(0).permutation(n)
    tr, te = perm[: int(0.8 * n)], perm[int(0.8 * n) :]
    floor = np.sqrt(np.mean((f[te] - T.values[te]) ** 2))
    return T, tr, te, floor


@pytest.fixture(scope="module")
def gaussian_fit(gaussian_split):
    """The paper's model (no standardization), whose noise precision is the truth's."""
    T, tr, te, _ = gaussian_split
    return fastcep.fit(
        T.coords[tr],
        T.values[tr],
        model="cp_gaussian",
        shape=SHAPE,
        rank=3,
        seed=0,
        eval_set=(T.coords[te], T.values[te]),
        standardize="none",
    )


@pytest.fixture(scope="module")
def probit_tensor():
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, binary=True, seed=3, factor_scale=1.2)
    return T


def test_recovers_noise_precision_and_reaches_noise_floor(gaussian_split, gaussian_fit):
    T, tr, te, floor = gaussian_split
    res = gaussian_fit
    assert res.converged and res.stop_reason == "tol"
    a, b = res.posterior.noise
    assert 85.0 < a / b < 115.0  # true precision 100
    test_rmse = res.rmse(T.coords[te], T.values[te])
    assert test_rmse <= 1.05 * floor, (test_rmse, floor)
    # the trace's test metric is the test RMSE of the model after each iteration
    assert res.trace.eval_metric[-1] == pytest.approx(test_rmse, rel=1e-12)
    assert res.trace.eval_metric.shape == (res.n_iter,)


def test_result_shapes_and_predictions(gaussian_split, gaussian_fit):
    T, tr, te, _ = gaussian_split
    res = gaussian_fit
    for k, d in enumerate(SHAPE):
        assert res.posterior.means[k].shape == (d, 3)
        assert res.posterior.covs[k].shape == (d, 3, 3)
        np.testing.assert_allclose(res.posterior.covs[k], res.posterior.covs[k].transpose(0, 2, 1))
        assert np.all(np.linalg.eigvalsh(res.posterior.covs[k]) > 0)
    mean, var = res.predict(T.coords[te[:50]], return_var=True)
    assert mean.shape == var.shape == (50,)
    a, b = res.posterior.noise
    assert np.all(var > b / (a - 1.0))  # predictive variance = Var f + E[1 / tau]
    weights, factors = res.to_cp_tensor()
    np.testing.assert_array_equal(weights, np.ones(3))
    recon = np.einsum("ir,jr,kr->ijk", *factors)
    c = T.coords[te[:50]]
    np.testing.assert_allclose(recon[c[:, 0], c[:, 1], c[:, 2]], mean, rtol=1e-10, atol=1e-12)


def test_same_seed_same_factors_and_thread_count_invariance(gaussian_split):
    T, tr, _, _ = gaussian_split
    kw = dict(model="cp_gaussian", shape=SHAPE, rank=3, max_iter=15, seed=11)
    r1 = fastcep.fit(T.coords[tr], T.values[tr], n_threads=1, **kw)
    r2 = fastcep.fit(T.coords[tr], T.values[tr], n_threads=2, **kw)
    r3 = fastcep.fit(T.coords[tr], T.values[tr], n_threads=2, **kw)
    for k in range(3):
        np.testing.assert_array_equal(r1.posterior.means[k], r2.posterior.means[k])
        np.testing.assert_array_equal(r1.posterior.covs[k], r2.posterior.covs[k])
        np.testing.assert_array_equal(r2.posterior.means[k], r3.posterior.means[k])
    assert r1.posterior.noise == r2.posterior.noise
    other = fastcep.fit(T.coords[tr], T.values[tr], **{**kw, "seed": 12})
    assert not np.array_equal(other.posterior.means[0], r1.posterior.means[0])


@pytest.mark.parametrize("curvature", ["full", "rank1"])
@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("schedule", ["parallel", "block", "sequential"])
def test_probit_learns_and_is_deterministic(probit_tensor, covariance, schedule, curvature):
    T = probit_tensor
    kw = dict(model="cp_probit", shape=T.shape, rank=2, seed=1, covariance=covariance, schedule=schedule)
    kw["probit_curvature"] = curvature
    r1 = fastcep.fit(T.coords, T.values, n_threads=1, max_iter=40, **kw)
    r2 = fastcep.fit(T.coords, T.values, n_threads=2, max_iter=40, **kw)
    np.testing.assert_array_equal(r1.posterior.means[1], r2.posterior.means[1])
    p = r1.predict(T.coords)
    assert np.all((p > 0) & (p < 1))
    assert r1.auc(T.coords, T.values) > 0.8
    want = (15, 2, 2) if covariance == "full" else (15, 2)
    assert r1.posterior.covs[1].shape == want
    assert r1.posterior.noise is None


def test_cavity_expectations_recover_the_noise_and_reach_the_floor(gaussian_split):
    """expect_under="cavity" on the synthetic rank-3 tensor: the noise precision (100) and the
    noise floor, as with the posterior's expectations, and a different posterior from those."""
    T, tr, te, floor = gaussian_split
    kw = dict(model="cp_gaussian", shape=SHAPE, rank=3, seed=0)
    res = fastcep.fit(T.coords[tr], T.values[tr], expect_under="cavity", **kw)
    assert res.converged and res.options["expect_under"] == "cavity"
    a, b = res.posterior.noise
    assert 85.0 < a / b < 115.0
    assert res.rmse(T.coords[te], T.values[te]) <= 1.05 * floor
    post = fastcep.fit(
        T.coords[tr], T.values[tr], max_iter=res.n_iter, tol=0.0, expect_under="posterior", **kw
    )
    assert "expect_under" not in post.options
    assert not np.allclose(post.posterior.covs[0], res.posterior.covs[0], rtol=1e-6)


@pytest.mark.parametrize("schedule", ["parallel", "block"])
@pytest.mark.parametrize("curvature", ["full", "rank1"])
def test_cavity_expectations_probit_learn_and_are_deterministic(probit_tensor, schedule, curvature):
    T = probit_tensor
    kw = dict(
        model="cp_probit", shape=T.shape, rank=2, seed=1, schedule=schedule, max_iter=40,
        probit_curvature=curvature, expect_under="cavity",
    )  # fmt: skip
    r1 = fastcep.fit(T.coords, T.values, n_threads=1, **kw)
    r2 = fastcep.fit(T.coords, T.values, n_threads=2, **kw)
    for k in range(3):
        np.testing.assert_array_equal(r1.posterior.means[k], r2.posterior.means[k])
        np.testing.assert_array_equal(r1.posterior.covs[k], r2.posterior.covs[k])
    assert r1.auc(T.coords, T.values) > 0.8


@pytest.mark.parametrize("schedule", ["parallel", "block"])
def test_cavity_expectations_resume_save_and_threads(tmp_path, gaussian_split, schedule):
    """The parallel schedule sums the messages per group of entries and fuses the noise
    messages into the sweep; the block schedule rebuilds each mode in turn: either way the
    same numbers on 1 and 2 threads, and a resumed fit continues the fresh one."""
    T, tr, te, _ = gaussian_split
    kw = dict(model="cp_gaussian", shape=SHAPE, rank=3, seed=4, expect_under="cavity", schedule=schedule)
    kw["noise_warmup"] = 0
    r1 = fastcep.fit(T.coords[tr], T.values[tr], n_threads=1, max_iter=12, **kw)
    r2 = fastcep.fit(T.coords[tr], T.values[tr], n_threads=2, max_iter=12, **kw)
    np.testing.assert_array_equal(r1.posterior.means[2], r2.posterior.means[2])
    assert r1.posterior.noise == r2.posterior.noise
    # 12 iterations = 6 + 6 resumed from the messages (the resumed sweeps are cavity sweeps from
    # the start, as the fresh fit's after its first)
    half = fastcep.fit(T.coords[tr], T.values[tr], max_iter=6, **kw)
    more = fastcep.fit(T.coords[tr], T.values[tr], max_iter=6, init_state=half.state, **kw)
    np.testing.assert_allclose(more.posterior.means[0], r1.posterior.means[0], rtol=1e-10, atol=1e-12)
    fastcep.save_model(r1, tmp_path / "cav.h5")
    back = fastcep.load_model(tmp_path / "cav.h5")
    assert back.options["expect_under"] == "cavity"
    np.testing.assert_array_equal(back.predict(T.coords[te]), r1.predict(T.coords[te]))


@pytest.mark.parametrize("prior", ["fixed", "ard"])
@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
def test_diag_equals_full_at_rank_one_with_the_block_schedule(model, prior):
    # with R = 1 a 1 x 1 covariance is diagonal and the block schedules visit the same blocks
    # (mode by mode) in the same order: the two code paths must give the same numbers
    T, _ = make_cp_tensor((12, 10, 8), 1, 500, noise_sd=0.1, seed=5, binary=model == "cp_probit")
    kw = dict(model=model, shape=T.shape, rank=1, max_iter=30, tol=0.0, seed=0, schedule="block", damping=0.7)
    kw.update(prior=prior, expect_under="posterior")
    full = fastcep.fit(T.coords, T.values, covariance="full", **kw)
    diag = fastcep.fit(T.coords, T.values, covariance="diag", **kw)
    for k in range(3):
        np.testing.assert_allclose(
            full.posterior.means[k][:, 0], diag.posterior.means[k][:, 0], rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(full.posterior.covs[k][:, 0, 0], diag.posterior.covs[k][:, 0], rtol=1e-9)
    if model == "cp_gaussian":
        assert full.posterior.noise == pytest.approx(diag.posterior.noise, rel=1e-10)


def test_block_schedule_is_stable_where_parallel_is_not():
    # Jacobi updates of all modes at damping 1 overshoot; mode-by-mode blocks converge
    T, _ = make_cp_tensor((12, 10, 8), 1, 500, noise_sd=0.1, seed=5)
    kw = dict(model="cp_gaussian", shape=T.shape, rank=1, max_iter=200, seed=0, damping=1.0)
    res = fastcep.fit(T.coords, T.values, schedule="block", **kw)
    assert res.converged and res.n_iter < 100
    a, b = res.posterior.noise
    assert 70 < a / b < 130  # true precision 100


def test_four_modes_and_callback_stop(rng):
    T, _ = make_cp_tensor((6, 5, 4, 3), 2, 300, noise_sd=0.1, seed=2)
    seen = []

    def cb(info):
        seen.append((info.iteration, info.change, info.result.n_iter))
        return info.iteration == 3

    res = fastcep.fit(T.coords, T.values, model="cp_gaussian", rank=2, callback=cb, seed=0)
    assert res.stop_reason == "callback" and res.n_iter == 3 and not res.converged
    assert [s[0] for s in seen] == [1, 2, 3] and [s[2] for s in seen] == [1, 2, 3]
    assert res.shape == (6, 5, 4, 3)
    assert res.trace.elapsed.shape == (3,) and np.all(np.diff(res.trace.elapsed) >= 0)


def test_init_state_resumes(gaussian_split):
    T, tr, _, _ = gaussian_split
    kw = dict(model="cp_gaussian", shape=SHAPE, rank=3, seed=0, max_iter=5)
    first = fastcep.fit(T.coords[tr], T.values[tr], **kw)
    more = fastcep.fit(T.coords[tr], T.values[tr], init_state=first.state, **kw)
    assert more.n_iter == 5
    # resuming continues from the messages: the first iteration of the resumed fit starts where the
    # first fit stopped, so its change is small compared with a fresh start
    assert more.trace.change[0] < first.trace.change[0]


def test_save_and_load_round_trip(tmp_path, gaussian_split, gaussian_fit, probit_tensor):
    T, _, te, _ = gaussian_split
    path = tmp_path / "model.h5"
    fastcep.save_model(gaussian_fit, path)
    back = fastcep.load_model(path)
    assert (back.model, back.rank, back.shape, back.n_iter) == ("cp_gaussian", 3, SHAPE, gaussian_fit.n_iter)
    assert back.posterior.noise == gaussian_fit.posterior.noise
    for k in range(3):
        np.testing.assert_array_equal(back.posterior.means[k], gaussian_fit.posterior.means[k])
        np.testing.assert_array_equal(back.posterior.covs[k], gaussian_fit.posterior.covs[k])
    np.testing.assert_array_equal(back.predict(T.coords[te]), gaussian_fit.predict(T.coords[te]))
    np.testing.assert_array_equal(back.trace.change, gaussian_fit.trace.change)
    assert [p.name for p in tmp_path.iterdir()] == ["model.h5"]  # no temporary file left behind
    pb = fastcep.fit(
        probit_tensor.coords, probit_tensor.values, model="cp_probit", rank=2, covariance="diag", max_iter=3,
        probit_curvature="rank1",
    )  # fmt: skip
    fastcep.save_model(pb, tmp_path / "probit.h5")
    back = fastcep.load_model(tmp_path / "probit.h5")
    assert back.options["probit_curvature"] == "rank1"
    np.testing.assert_array_equal(back.predict(probit_tensor.coords), pb.predict(probit_tensor.coords))


def test_load_model_refuses_bad_files(tmp_path, gaussian_fit):
    with pytest.raises(FileNotFoundError, match="no such file"):
        fastcep.load_model(tmp_path / "missing.h5")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not an hdf5 file at all")
    with pytest.raises(ValueError, match="cannot be opened as HDF5"):
        fastcep.load_model(junk)
    good = tmp_path / "good.h5"
    fastcep.save_model(gaussian_fit, good)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a valid fastcep model file"):
        fastcep.load_model(truncated)
    with edited(good, resign=False) as f:
        f.attrs["format_version"] = 99
    with pytest.raises(ValueError, match="format version 99"):
        fastcep.load_model(good)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(ValueError, match="format attribute"):
        fastcep.load_model(other)


def test_failed_save_keeps_previous_file(tmp_path, gaussian_fit, monkeypatch):
    path = tmp_path / "model.h5"
    fastcep.save_model(gaussian_fit, path)
    before = path.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(h5py.Group, "create_group", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        fastcep.save_model(gaussian_fit, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.h5"]


def test_duplicate_entries_count_as_repeated_observations():
    # documented behaviour: a repeated (coords, value) row is a second, independent observation;
    # it acts exactly like one row with the noise variance halved
    T, _ = make_cp_tensor((8, 7, 6), 2, 150, noise_sd=0.1, seed=4)
    twice = fastcep.fit(
        np.concatenate([T.coords, T.coords]),
        np.concatenate([T.values, T.values]),
        model="cp_gaussian",
        shape=T.shape,
        rank=2,
        seed=0,
        max_iter=30,
    )
    once = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, seed=0, max_iter=30)
    a2, b2 = twice.posterior.noise
    a1, b1 = once.posterior.noise
    assert a2 == pytest.approx(1e-3 + 150.0, rel=1e-6) and a1 == pytest.approx(1e-3 + 75.0, rel=1e-6)
    assert np.all(np.isfinite(twice.posterior.means[0]))


# ------------------------------------------------------------------ bad input
COORDS = np.array([[0, 0, 0], [1, 2, 3], [2, 1, 0]])
VALUES = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    "coords, values, kw, exc, match",
    [
        (COORDS, VALUES, dict(shape=(3, 3, 3)), ValueError, r"indices beyond shape \(3, 3, 3\).*rows \[1\]"),
        (COORDS - 1, VALUES, {}, ValueError, "0-based indices >= 0"),
        (COORDS, VALUES, dict(shape=(3, 3)), ValueError, "must have 2 columns"),
        (COORDS, VALUES, dict(shape=(3, 0, 4)), ValueError, "'shape' parameter"),
        (COORDS[:, 0], VALUES, {}, ValueError, r"2-D integer array \(n, K\)"),
        (COORDS[:, :1], VALUES[:1] * 0 + VALUES[0], {}, ValueError, "K >= 2"),
        (COORDS, VALUES[:2], {}, ValueError, "one value per row of coords"),
        (COORDS, np.array([0.5, np.nan, 2.0]), {}, ValueError, r"finite.*rows \[1\]"),
        (COORDS, np.array([0.5, np.inf, 2.0]), {}, ValueError, "finite"),
        (COORDS + 0.5, VALUES, {}, ValueError, "integer indices"),
        (COORDS.astype(str), VALUES, {}, TypeError, "integer array"),
        (np.zeros((0, 3), dtype=int), np.zeros(0), {}, ValueError, "no observed entries"),
        (COORDS, VALUES, dict(rank=0), ValueError, "'rank' parameter"),
        (COORDS, VALUES, dict(rank=None, method="lp"), TypeError, "'rank' parameter"),
        (COORDS, VALUES, dict(damping=0.0), ValueError, "'damping' parameter"),
        (COORDS, VALUES, dict(damping=1.5), ValueError, "'damping' parameter"),
        (COORDS, VALUES, dict(prior_var=-1.0), ValueError, "'prior_var' parameter"),
        (COORDS, VALUES, dict(covariance="dense"), ValueError, "'covariance' parameter"),
        (COORDS, VALUES, dict(method="ep"), ValueError, "'method' parameter"),
        (COORDS, VALUES, dict(method="cep2"), ValueError, "not implemented"),
        (COORDS, VALUES, dict(probit_curvature="half"), ValueError, "'probit_curvature' parameter"),
        (COORDS, VALUES, dict(probit_curvature="rank1"), ValueError, "applies to model='cp_probit'"),
        (COORDS, VALUES, dict(expect_under="tilted"), ValueError, "'expect_under' parameter"),
        (COORDS, VALUES, dict(expect_under="cavity", covariance="diag"), ValueError, "covariance='full'"),
        (COORDS, VALUES, dict(expect_under="cavity", schedule="sequential"), ValueError, "'parallel' or"),
        (COORDS, VALUES, dict(expect_under="cavity", method="lp"), ValueError, "method='cep1'"),
        (COORDS, VALUES, dict(eval_set=(COORDS + 5, VALUES)), ValueError, "eval_set"),
    ],
)
def test_bad_input_cp_gaussian(coords, values, kw, exc, match):
    kw = {"rank": 2, **kw}
    with pytest.raises(exc, match=match):
        fastcep.fit(coords, values, model="cp_gaussian", **kw)


def test_bad_input_cp_probit():
    with pytest.raises(ValueError, match="labels"):
        fastcep.fit(COORDS, VALUES, model="cp_probit", rank=2)
    with pytest.raises(ValueError, match="cep2"):
        fastcep.fit(COORDS, np.array([0, 1, 1]), model="cp_probit", rank=2, method="cep2")
    with pytest.raises(ValueError, match="method='cep1' only"):
        fastcep.fit(
            COORDS, np.array([0, 1, 1]), model="cp_probit", rank=2, method="lp", probit_curvature="rank1"
        )
    # {0, 1}, {-1, 1} and bool labels give the same fit
    fits = [
        fastcep.fit(COORDS, lab, model="cp_probit", rank=2, max_iter=3, seed=0)
        for lab in (np.array([0, 1, 1]), np.array([-1, 1, 1]), np.array([False, True, True]))
    ]
    for other in fits[1:]:
        np.testing.assert_array_equal(fits[0].posterior.means[0], other.posterior.means[0])


def test_predict_rejects_bad_coords(gaussian_fit):
    with pytest.raises(ValueError, match="beyond shape"):
        gaussian_fit.predict(np.array([[30, 0, 0]]))
    with pytest.raises(ValueError, match="must have 3 columns"):
        gaussian_fit.predict(np.array([[0, 0]]))


@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
def test_prior_mean_is_the_posterior_of_an_unobserved_object(model):
    T, _ = make_cp_tensor((8, 7, 6), 2, 150, noise_sd=0.1, seed=4, binary=model == "cp_probit")
    shape = (9, 7, 6)  # object 8 of mode 0 has no entries: its posterior is its prior
    for pm in (0.0, 0.3):
        res = fastcep.fit(
            T.coords, T.values, model=model, shape=shape, rank=2, prior_mean=pm, prior_var=2.0, seed=3,
            standardize="none", prior="fixed",  # (the prior as given, on the values' own scale)
        )  # fmt: skip
        m, c = res.posterior.means[0][8], res.posterior.covs[0][8]
        np.testing.assert_allclose(c, 2.0 * np.eye(2), rtol=1e-12)  # no messages: the prior
        if pm == 0.0:
            np.testing.assert_allclose(m, 0.0, atol=1e-12)
        else:
            assert np.all(m > 0) and np.all(m < 5 * pm)
    with pytest.raises(ValueError, match="'prior_mean' parameter"):
        fastcep.fit(T.coords, T.values, model=model, rank=2, prior_mean=-1.0)


def test_rank_one_curvature_reaches_a_fixed_point_on_enron():
    """On Enron (1,010 training entries, training AUC near 1) the "full" curvature keeps cycling
    (BENCHMARKS.md); the rank-one rule stops by its tolerance, at a good test AUC."""
    path = SHARED_DATA / "enron"
    if not path.is_dir():
        pytest.skip(f"Enron folds not found at {path}")
    train, test = load_paper_fold("enron", 1, path)
    res = fastcep.fit(
        train.coords, train.values, model="cp_probit", shape=train.shape, rank=8, seed=1, prior_mean=0.3,
        probit_curvature="rank1",
    )  # fmt: skip
    assert res.converged and res.stop_reason == "tol"
    assert int(np.sum(res.trace.skipped)) == 0
    assert res.auc(test.coords, test.values) > 0.82


def test_small_fits_run_on_one_thread_unless_told_otherwise():
    """A small CP fit (entries x modes x R^2 below fastcep._threads.SERIAL_WORK) runs on one
    thread when n_threads is not given: its parallel regions would be short, and with a busy core
    each could wait a scheduler quantum; the result is the same bits on any thread count."""
    import numba

    from fastcep._threads import SERIAL_WORK

    T, _ = make_cp_tensor((20, 15, 10), rank=2, n_obs=1500, noise_sd=0.1, seed=0)
    assert 1500 * 3 * 2 * 2 < SERIAL_WORK
    seen = []
    kw = dict(model="cp_gaussian", shape=T.shape, rank=2, max_iter=5, tol=0.0, seed=0)
    auto = fastcep.fit(T.coords, T.values, callback=lambda info: seen.append(numba.get_num_threads()), **kw)
    assert set(seen) == {1}
    if numba.config.NUMBA_NUM_THREADS > 1:
        two = fastcep.fit(T.coords, T.values, n_threads=2, **kw)
        for a, b in zip(auto.posterior.means, two.posterior.means, strict=True):
            np.testing.assert_array_equal(a, b)
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS  # restored


def test_a_fit_stopped_by_max_iter_warns():
    assert_max_iter_warns("cep1")
