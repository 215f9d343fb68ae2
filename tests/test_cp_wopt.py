"""CP-WOPT (method="cp_wopt"): objective and gradient against the dense textbook form and finite
differences, exact recovery of a low-rank tensor, determinism, the point-estimate result, errors."""

import numpy as np
import pytest
from kernel_options import central_options_count
from short_fits import assert_max_iter_warns

import fastcep
from fastcep import IterationInfo
from fastcep._threads import num_threads
from fastcep.data_tools import make_cp_tensor
from fastcep.io import load_model
from fastcep.kernels.tensor import cp_wopt as kernel_module
from fastcep.tensor.cp_wopt import NOT_APPLICABLE, _Problem, fit_cp_wopt
from fastcep.tensor.layout import make_layout
from fastcep.tensor.result import CPResult
from naive import cp_full, cp_wopt_value_and_grad


def _random_problem(rng, shape, R, n, spare=1):
    """Distinct random entries of a tensor of ``shape`` whose last ``spare`` indices of every mode
    are never observed (objects with no entries), and random factors."""
    used = tuple(d - spare for d in shape)
    lin = rng.choice(int(np.prod(used)), size=n, replace=False)
    coords = np.stack(np.unravel_index(lin, used), axis=1).astype(np.int64)
    values = rng.standard_normal(n)
    factors = [rng.standard_normal((d, R)) for d in shape]
    return coords, values, factors


def _kernel_value_and_grad(coords, values, shape, factors, reg):
    lay = make_layout(coords, shape)
    R = factors[0].shape[1]
    problem = _Problem(lay, values, R, reg)
    F, G = problem(np.concatenate(factors).ravel())
    G = G.reshape(-1, R)
    return F, [G[lay.offsets[k] : lay.offsets[k + 1]] for k in range(len(shape))]


@pytest.mark.parametrize("shape, R", [((7, 6, 5), 3), ((5, 4, 3, 4), 2), ((9, 8), 4)])
@pytest.mark.parametrize("reg", [0.0, 0.7])
def test_value_and_gradient_match_dense_textbook(rng, shape, R, reg):
    coords, values, factors = _random_problem(rng, shape, R, n=40)
    F, grads = _kernel_value_and_grad(coords, values, shape, factors, reg)
    F_ref, grads_ref = cp_wopt_value_and_grad(coords, values, shape, factors, reg)
    assert F == pytest.approx(F_ref, rel=1e-12)
    for k in range(len(shape)):
        np.testing.assert_allclose(
            grads[k], grads_ref[k], rtol=1e-10, atol=1e-10 * np.abs(grads_ref[k]).max()
        )
        # the never-observed object (last index) feels only the penalty
        np.testing.assert_array_equal(grads[k][-1], reg * factors[k][-1])


def test_gradient_matches_central_differences(rng):
    shape, R, reg = (5, 4, 6), 3, 0.3
    coords, values, factors = _random_problem(rng, shape, R, n=50)
    coords = np.concatenate([coords, coords[:5]])  # repeated entries count twice
    values = np.concatenate([values, values[:5] + 0.5])
    lay = make_layout(coords, shape)
    problem = _Problem(lay, values, R, reg)
    x = np.concatenate(factors).ravel()
    F, G = problem(x)
    # the objective itself, entry by entry (repeated rows included)
    f = np.ones((len(coords), R))
    for k in range(3):
        f *= factors[k][coords[:, k]]
    F_loop = 0.5 * np.sum((values - f.sum(1)) ** 2) + 0.5 * reg * np.sum(x**2)
    assert F == pytest.approx(F_loop, rel=1e-12)
    h = 1e-5
    fd = np.empty_like(x)
    with num_threads(1):  # hundreds of tiny calls: no thread wake-ups
        for i in range(x.size):
            xp, xm = x.copy(), x.copy()
            xp[i] += h
            xm[i] -= h
            fd[i] = (problem(xp)[0] - problem(xm)[0]) / (2 * h)
    np.testing.assert_allclose(G, fd, rtol=0, atol=1e-7 * np.abs(G).max())


@pytest.fixture(scope="module")
def exact_tensor():
    """A noise-free rank-2 20 x 15 x 10 tensor, 60 % observed, and its unobserved entries."""
    t, factors = make_cp_tensor((20, 15, 10), 2, 1800, noise_sd=0.0, seed=7)
    full = cp_full(factors)
    mask = np.zeros(full.shape, dtype=bool)
    mask[tuple(t.coords.T)] = True
    held_out = np.argwhere(~mask)
    return t, held_out, full[~mask], float(np.sqrt(np.mean(full**2)))


def _fit_rank2(t, **kwargs):
    """A rank-2 CP-WOPT fit of the cp_gaussian tensor t through ``fastcep.fit`` (seed 0, one thread)."""
    return fastcep.fit(
        t.coords,
        t.values,
        model="cp_gaussian",
        method="cp_wopt",
        shape=t.shape,
        rank=2,
        seed=0,
        n_threads=1,
        **kwargs,
    )


def test_recovers_exact_low_rank_tensor_from_svd_init(exact_tensor):
    t, held_out, truth, scale = exact_tensor
    res = _fit_rank2(t, tol=1e-14)
    assert res.method == "cp_wopt" and res.stop_reason in ("tol", "line_search")
    assert res.rmse(held_out, truth) / scale < 1e-6
    assert res.rmse(t.coords, t.values) / scale < 1e-6


def test_recovers_exact_low_rank_tensor_from_random_restarts(exact_tensor):
    # restarts chosen by the training objective only (never by the held-out entries)
    t, held_out, truth, scale = exact_tensor
    fits = [
        fit_cp_wopt(
            t.coords,
            t.values,
            "cp_gaussian",
            shape=t.shape,
            rank=2,
            init="random",
            tol=1e-14,
            seed=seed,
            n_threads=1,
        )
        for seed in range(3)
    ]
    best = min(fits, key=lambda r: r.trace.objective[-1])
    assert best.rmse(held_out, truth) / scale < 1e-6


def test_default_tolerance_stops_early_but_close(exact_tensor):
    t, held_out, truth, scale = exact_tensor
    res = fit_cp_wopt(t.coords, t.values, "cp_gaussian", shape=t.shape, rank=2, seed=0, n_threads=1)
    assert res.converged and res.stop_reason == "tol"
    assert res.trace.change[-1] < 1e-9 <= res.trace.change[:-1].min()
    assert res.rmse(held_out, truth) / scale < 1e-3


def test_trace_objective_change_and_eval_metric(exact_tensor):
    t, held_out, truth, scale = exact_tensor
    res = fit_cp_wopt(
        t.coords,
        t.values,
        "cp_gaussian",
        shape=t.shape,
        rank=2,
        seed=1,
        n_threads=1,
        max_iter=15,
        eval_set=(held_out, truth),
        standardize="none",  # (the objective of the values as they are)
    )
    tr = res.trace
    assert res.n_iter == 15 and res.stop_reason == "max_iter" and not res.converged
    assert len(tr.elapsed) == 15 and np.all(np.diff(tr.elapsed) >= 0)
    # objective holds F (minimised); change = its decrease relative to F(0) = |y|^2 / 2
    assert np.all(np.diff(tr.objective) < 0)
    F0 = 0.5 * np.sum(t.values**2)
    np.testing.assert_allclose(tr.change[1:], -np.diff(tr.objective) / F0, rtol=1e-12)
    U = [m for m in res.posterior.means]
    F_ref, _ = cp_wopt_value_and_grad(t.coords, t.values, t.shape, U, 0.0)
    assert tr.objective[-1] == pytest.approx(F_ref, rel=1e-10)
    assert tr.eval_metric[-1] == pytest.approx(res.rmse(held_out, truth), rel=1e-12)
    assert np.all(tr.prediction_change > 0) and np.all(tr.skipped == 0) and np.all(np.isnan(tr.damping))


def test_same_seed_same_factors_any_thread_count(rng):
    t, _ = make_cp_tensor((30, 20, 25), 3, 3000, noise_sd=0.1, seed=3)
    kw = dict(shape=t.shape, rank=3, max_iter=30, init="random", reg=0.01)
    a = fit_cp_wopt(t.coords, t.values, "cp_gaussian", seed=5, n_threads=1, **kw)
    b = fit_cp_wopt(t.coords, t.values, "cp_gaussian", seed=5, n_threads=2, **kw)
    c = fit_cp_wopt(t.coords, t.values, "cp_gaussian", seed=6, n_threads=1, **kw)
    for k in range(3):
        np.testing.assert_array_equal(a.posterior.means[k], b.posterior.means[k])
    np.testing.assert_array_equal(a.trace.objective, b.trace.objective)
    assert not np.array_equal(a.posterior.means[0], c.posterior.means[0])
    # the kernel alone: bitwise the same objective and gradient on 1 and 2 threads
    lay = make_layout(t.coords, t.shape)
    x = rng.standard_normal(int(lay.offsets[-1]) * 3)
    out = []
    for nt in (1, 2):
        with num_threads(nt):
            F, G = _Problem(lay, t.values, 3, 0.1)(x)
        out.append((F, G))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])


def test_point_estimate_result_predicts_reconstruction_and_round_trips(tmp_path, rng):
    t, _ = make_cp_tensor((8, 7, 6), 2, 200, noise_sd=0.1, seed=1)
    res = _fit_rank2(t, max_iter=20)
    assert isinstance(res, CPResult) and res.point_estimate
    assert res.posterior.noise is None
    assert all(
        np.all(c == 0) and c.shape == (d, 2, 2) for c, d in zip(res.posterior.covs, t.shape, strict=True)
    )
    new = np.stack([rng.integers(0, d, 50) for d in t.shape], axis=1)
    want = cp_full(res.posterior.means)[tuple(new.T)]
    mean, var = res.predict(new, return_var=True)
    np.testing.assert_allclose(mean, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(var, 0.0)
    weights, factors = res.to_cp_tensor()
    np.testing.assert_array_equal(weights, 1.0)
    np.testing.assert_array_equal(factors[1], res.posterior.means[1])
    path = tmp_path / "wopt.h5"
    fastcep.save_model(res, path)
    back = load_model(path)
    assert back.method == "cp_wopt" and back.point_estimate and back.posterior.noise is None
    np.testing.assert_array_equal(back.predict(new), res.predict(new))
    np.testing.assert_array_equal(back.trace.change, res.trace.change)


def test_binary_tensor_fits_zero_one_targets_and_scores_auc():
    t, factors = make_cp_tensor((20, 15, 10), 2, 2400, binary=True, seed=2)
    perm = np.random.default_rng(0).permutation(2400)  # the entries come sorted: split at random
    tr, te = perm[:1800], perm[1800:]
    # rank 3: least squares on {0, 1} targets spends one component on the offset of about 1/2
    kw = dict(shape=t.shape, rank=3, seed=0, n_threads=1)
    res = fit_cp_wopt(t.coords[tr], t.values[tr], "cp_probit", eval_set=(t.coords[te], t.values[te]), **kw)
    # the objective is least squares on {0, 1} targets, the same whatever label coding is given
    F_ref, _ = cp_wopt_value_and_grad(t.coords[tr], t.values[tr], t.shape, res.posterior.means, 0.0)
    assert res.trace.objective[-1] == pytest.approx(F_ref, rel=1e-10)
    signs = fit_cp_wopt(t.coords[tr], 2 * t.values[tr] - 1, "cp_probit", **kw)
    np.testing.assert_array_equal(signs.posterior.means[0], res.posterior.means[0])
    # predictions are the reconstruction (a score, not a probability)
    score = res.predict(t.coords[te])
    np.testing.assert_allclose(score, cp_full(res.posterior.means)[tuple(t.coords[te].T)], rtol=1e-12)
    auc = res.auc(t.coords[te], t.values[te])
    assert res.trace.eval_metric[-1] == pytest.approx(auc, rel=1e-12)
    # chance is 0.5 (sd about 0.025 on 600 entries), the true f scores 0.76
    assert auc > 0.65


def test_callback_receives_info_and_stops():
    t, _ = make_cp_tensor((8, 7, 6), 2, 200, seed=1)
    seen = []

    def cb(info):
        seen.append(info)
        return info.iteration == 3

    res = fit_cp_wopt(t.coords, t.values, "cp_gaussian", rank=2, seed=0, callback=cb, n_threads=1)
    assert res.n_iter == 3 and res.stop_reason == "callback" and not res.converged
    assert [i.iteration for i in seen] == [1, 2, 3]
    assert isinstance(seen[-1], IterationInfo) and seen[-1].skipped == 0
    np.testing.assert_array_equal(seen[-1].result.posterior.means[0], res.posterior.means[0])
    # the callback's result is a snapshot: later iterations did not overwrite it
    assert not np.array_equal(seen[0].result.posterior.means[0], seen[-1].result.posterior.means[0])


def test_reg_pulls_unobserved_objects_to_zero(rng):
    coords, values, _ = _random_problem(rng, (6, 5, 4), 2, n=60)
    shape = (6, 5, 4)
    # (standardize="none": the start as drawn)
    kw = dict(shape=shape, rank=2, init="random", seed=0, n_threads=1, standardize="none")
    free = fit_cp_wopt(coords, values, "cp_gaussian", **kw)
    pen = fit_cp_wopt(coords, values, "cp_gaussian", reg=0.5, tol=0, **kw)
    init = np.random.default_rng(0).standard_normal((15, 2))  # init="random", init_scale 1
    np.testing.assert_array_equal(free.posterior.means[0][-1], init[5])  # no entries, no penalty: unmoved
    assert np.abs(pen.posterior.means[0][-1]).max() < 1e-6


@pytest.mark.parametrize("name", NOT_APPLICABLE)
def test_bayesian_options_are_refused_by_name(name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter of fit must be left unset with method="):
        fastcep.fit(
            np.array([[0, 0], [1, 1]]), [1.0, 2.0], model="cp_gaussian", method="cp_wopt", rank=1, **{name: 1}
        )


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(rank=None), TypeError, "'rank' parameter of fit"),
        (dict(rank=0), ValueError, "'rank' parameter of fit"),
        (dict(rank=1, reg=-1.0), ValueError, "'reg' parameter of fit"),
        (dict(rank=1, tol=np.nan), ValueError, "'tol' parameter of fit"),
        (dict(rank=1, max_iter=0), ValueError, "'max_iter' parameter of fit"),
        (dict(rank=1, init="nmf"), ValueError, "'init' parameter of fit"),
        (dict(rank=1, n_threads=0), ValueError, "'n_threads' parameter of fit"),
        (dict(rank=1, callback=3), TypeError, "'callback' parameter of fit"),
        (dict(rank=1, eval_set=[[0, 0]]), TypeError, "'eval_set' parameter of fit"),
        (dict(rank=1, eval_set=([[0, 5]], [1.0])), ValueError, "'eval_set\\[0\\]' parameter of fit"),
        (dict(rank=1, bogus=1), TypeError, "unexpected keyword argument 'bogus'"),
    ],
)
def test_bad_options(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fastcep.fit(np.array([[0, 0], [1, 1]]), [1.0, 2.0], model="cp_gaussian", method="cp_wopt", **kwargs)


def test_bad_data():
    good = np.array([[0, 0], [1, 1], [1, 0]])
    with pytest.raises(ValueError, match="'eval_set\\[1\\]' parameter of fit must be labels of both classes"):
        fit_cp_wopt(good, [0, 1, 1], "cp_probit", rank=1, eval_set=(good[:2], [1, 1]))
    with pytest.raises(ValueError, match="'values' parameter of fit must be finite"):
        fit_cp_wopt(good, [1.0, np.nan, 2.0], "cp_gaussian", rank=1)
    with pytest.raises(ValueError, match="negative indices"):
        fit_cp_wopt(np.array([[0, 0], [-1, 1]]), [1.0, 2.0], "cp_gaussian", rank=1)
    with pytest.raises(ValueError, match="beyond shape"):
        fit_cp_wopt(good, [1.0, 2.0, 3.0], "cp_gaussian", rank=1, shape=(2, 1))
    with pytest.raises(ValueError, match="binary labels"):
        fit_cp_wopt(good, [0.0, 2.0, 1.0], "cp_probit", rank=1)
    with pytest.raises(ValueError, match="'model' parameter of fit"):
        fit_cp_wopt(good, [1.0, 2.0, 3.0], "probit", rank=1)
    with pytest.raises(FloatingPointError, match="init_scale"):
        fit_cp_wopt(good, [1.0, 2.0, 3.0], "cp_gaussian", rank=1, init="random", init_scale=1e200, seed=0)


def test_kernels_use_the_central_options():
    assert central_options_count(kernel_module) == 3


def test_a_cp_wopt_fit_resumes_from_its_factors(exact_tensor):
    """res.state (the factors) continues the optimisation: the objective goes on falling from
    where it stopped (L-BFGS's curvature memory starts afresh) (issue 19: every fit returns a
    resumable state)."""
    t = exact_tensor[0]
    kw = dict(shape=t.shape, rank=2, seed=1, n_threads=1, tol=0.0)
    part = fit_cp_wopt(t.coords, t.values, "cp_gaussian", max_iter=5, **kw)
    assert isinstance(part.state, fastcep.FactorState) and part.state.U.shape == (sum(t.shape), 2)
    rest = fit_cp_wopt(t.coords, t.values, "cp_gaussian", max_iter=5, init_state=part.state, **kw)
    assert rest.trace.objective[0] < part.trace.objective[-1]
    with pytest.raises(TypeError, match="'init_state' parameter of fit must be a FactorState"):
        fit_cp_wopt(t.coords, t.values, "cp_gaussian", max_iter=2, init_state=part.state.U, **kw)


def test_a_fit_stopped_by_max_iter_warns():
    assert_max_iter_warns("cp_wopt")
