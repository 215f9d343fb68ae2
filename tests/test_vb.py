"""Mean-field VB (method "vb"): kernels against a textbook version, monotone ELBO, fixed points,
exact limits with one weight, the probit ELBO against quadrature, thread-count independence."""

import math

import numpy as np
import pytest
from kernel_options import central_options_count
from scipy import integrate, optimize
from scipy.special import expit, log_expit, log_ndtr, ndtr

import naive
from fastcep._quadrature import gauss_hermite
from fastcep._threads import max_threads, num_threads
from fastcep.data_tools import make_regression_simulation
from fastcep.glm.vb import MODEL_CODES, run_vb
from fastcep.kernels.glm import vb as kvb

MODELS = ["probit", "logistic"]


# ---------------------------------------------------------------- textbook reference
def naive_latent(model, s, t, sv):
    """Per row: probit E[z_i] of N(t_i, 1) truncated to s_i z > 0; logistic lam(xi_i), xi_i^2 = t^2 + sv."""
    out = np.empty(t.size)
    for i in range(t.size):
        if model == "probit":
            out[i] = t[i] + s[i] * naive.mills(s[i] * t[i])
        else:
            xi = math.sqrt(t[i] ** 2 + sv[i])
            out[i] = 0.125 if xi == 0.0 else math.tanh(xi / 2) / (4 * xi)
    return out


def naive_elbo(model, X, s, prior_T, mu, v):
    """ELBO with q(z) (probit) or xi (logistic) optimal for q(w) = N(mu, diag v)."""
    n, d = X.shape
    total = 0.0
    for i in range(n):
        t = sum(X[i, m] * mu[m] for m in range(d))
        sv = sum(X[i, m] ** 2 * v[m] for m in range(d))
        if model == "probit":
            total += float(log_ndtr(s[i] * t)) - 0.5 * sv
        else:
            xi = math.sqrt(t * t + sv)
            total += float(log_expit(xi)) - xi / 2 + s[i] * t / 2
    kl = 0.0
    for m in range(d):
        kl += 0.5 * (prior_T[m] * (v[m] + mu[m] ** 2) - 1 - math.log(prior_T[m] * v[m]))
    return total - kl


def naive_coordinates(model, X, s, prior_T, mu, v, m, lat):
    """Right-hand sides (mu_m, v_m) of the coordinate equations of w_m, latents ``lat`` fixed."""
    x = X[:, m]
    rest = X @ mu - x * mu[m]  # sum_{l != m} x_il mu_l, from scratch
    if model == "probit":
        v_m = 1 / (prior_T[m] + np.sum(x * x))
        return v_m * np.sum(x * (lat - rest)), v_m
    v_m = 1 / (prior_T[m] + 2 * np.sum(lat * x * x))
    return v_m * np.sum(x * (s / 2 - 2 * lat * rest)), v_m


def naive_vb_iteration(model, X, s, prior_T, mu, v):
    """One iteration straight from the formulas: latents, then w_0..w_{d-1} in order, then the ELBO."""
    mu, v = mu.copy(), v.copy()
    lat = naive_latent(model, s, X @ mu, (X * X) @ v)
    for m in range(X.shape[1]):
        mu[m], v[m] = naive_coordinates(model, X, s, prior_T, mu, v, m, lat)
    return mu, v, naive_elbo(model, X, s, prior_T, mu, v)


# ---------------------------------------------------------------- helpers
def random_problem(rng, model, n, d, corr=0.5):
    """Correlated Gaussian features (makes the mean field work), labels from the model."""
    L = np.linalg.cholesky((1 - corr) * np.eye(d) + corr * np.ones((d, d)))
    X = np.ascontiguousarray(rng.normal(0, 1, (n, d)) @ L.T)
    w = rng.normal(0, 1, d)
    p = ndtr(X @ w) if model == "probit" else expit(X @ w)
    s = np.where(rng.random(n) < p, 1.0, -1.0)
    return X, s


def kernel_state(model, X, s, prior_T, mu, v):
    """Arguments of ``vb_iteration`` for q(w) = N(mu, diag v), with t and sv set by ``vb_elbo``."""
    n = X.shape[0]
    mu, v = mu.copy(), v.copy()
    t, sv, a, c = (np.empty(n) for _ in range(4))
    elbo0 = kvb.vb_elbo(MODEL_CODES[model], X, s, prior_T, mu, v, t, sv)
    args = (MODEL_CODES[model], X, np.ascontiguousarray(X.T), s, prior_T, mu, v, t, sv, a, c)
    return args, elbo0


def lik(model):
    return ndtr if model == "probit" else expit


# ---------------------------------------------------------------- (a) kernel against the textbook
@pytest.mark.parametrize("model", MODELS)
def test_iteration_matches_naive(rng, model):
    n, d = 50, 5
    for start in ("prior", "random"):
        X, s = random_problem(rng, model, n, d)
        prior_T = np.exp(rng.uniform(-1, 1, d))
        if start == "prior":
            mu, v = np.zeros(d), 1 / prior_T
        else:
            mu, v = rng.normal(0, 0.5, d), np.exp(rng.uniform(-4, 0, d))
        args, elbo0 = kernel_state(model, X, s, prior_T, mu, v)
        assert elbo0 == pytest.approx(naive_elbo(model, X, s, prior_T, mu, v), rel=1e-12, abs=0)
        for _ in range(3):
            mu_ref, v_ref, elbo_ref = naive_vb_iteration(model, X, s, prior_T, mu, v)
            elbo = kvb.vb_iteration(*args)
            _, _, _, _, _, mu_k, v_k, t, sv, _, _ = args
            np.testing.assert_allclose(mu_k, mu_ref, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(v_k, v_ref, rtol=1e-12)
            assert elbo == pytest.approx(elbo_ref, rel=1e-12, abs=0)
            # on exit t and sv describe the new q(w) again
            np.testing.assert_allclose(t, X @ mu_k, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(sv, (X * X) @ v_k, rtol=1e-12)
            mu, v = mu_ref, v_ref


@pytest.mark.parametrize("model", MODELS)
def test_latent_update_matches_naive(rng, model):
    t = rng.normal(0, 3, 200)
    t[:3] = (-40.0, 0.0, 40.0)  # far tails of the truncated normal
    sv = np.exp(rng.uniform(-8, 2, 200))
    sv[0] = 0.0
    s = rng.choice([-1.0, 1.0], 200)
    ref = naive_latent(model, s, t, sv)
    for i in range(t.size):
        a, c = kvb.latent_update(MODEL_CODES[model], s[i], t[i], sv[i])
        if model == "probit":
            # c = E[z] - t, without the cancellation of the difference in the far tail
            assert a == 1.0
            assert c == pytest.approx(s[i] * naive.mills(s[i] * t[i]), rel=1e-12, abs=1e-300)
            assert t[i] + c == pytest.approx(ref[i], rel=1e-9, abs=1e-14)
        else:
            assert a == pytest.approx(2 * ref[i], rel=1e-14, abs=0)
            assert c == pytest.approx(s[i] / 2 - 2 * ref[i] * t[i], rel=1e-14, abs=1e-15)


def test_jj_lambda_series_branch():
    assert kvb.jj_lambda(0.0) == 0.125
    for xi in (1e-8, 1e-5, 3e-4, 9.99e-4, 1e-3, 1.2e-3):
        assert kvb.jj_lambda(xi) == pytest.approx(math.tanh(xi / 2) / (4 * xi), rel=4e-16, abs=0)
    assert kvb.jj_lambda(800.0) == pytest.approx(1 / 3200, rel=1e-15, abs=0)


# ---------------------------------------------------------------- (b) ELBO never decreases
def _problems(rng, model):
    yield "random", (*random_problem(rng, model, 300, 6, corr=0.7), np.full(6, 0.5))
    for features in ("gaussian", "mixture"):
        X, y, _ = make_regression_simulation(model, features, n=2000, d=4, seed=7)
        yield features, (X, np.where(y == 1, 1.0, -1.0), np.ones(4))


@pytest.mark.parametrize("model", MODELS)
def test_elbo_never_decreases(rng, model):
    for name, (X, s, prior_T) in _problems(rng, model):
        d = X.shape[1]
        _, elbo0 = kernel_state(model, X, s, prior_T, np.zeros(d), 1 / prior_T)
        res = run_vb(X, s, model, prior_T, max_iter=200, tol=0.0)
        assert res["n_iter"] == 200 and res["stop_reason"] == "max_iter" and not res["converged"]
        elbo = np.array([elbo0] + res["elbo"])
        steps = np.diff(elbo)
        assert np.all(steps >= -1e-9 * np.abs(elbo[1:])), (name, steps.min())
        assert elbo[-1] > elbo[0] + 1.0, name  # the fit did move
        # the recorded ELBO is that of the returned q(w)
        assert res["elbo"][-1] == pytest.approx(
            naive_elbo(model, X, s, prior_T, res["mu"], res["v"]), rel=1e-11, abs=0
        )


# ---------------------------------------------------------------- (c) fixed point
@pytest.mark.parametrize("model", MODELS)
def test_fixed_point_satisfies_coordinate_equations(rng, model):
    X, s = random_problem(rng, model, 200, 5, corr=0.3)
    prior_T = np.full(5, 1.0)
    res = run_vb(X, s, model, prior_T, max_iter=20000, tol=1e-13)
    assert res["converged"] and res["stop_reason"] == "tol"
    mu, v = res["mu"], res["v"]
    lat = naive_latent(model, s, X @ mu, (X * X) @ v)
    for m in range(5):
        mu_m, v_m = naive_coordinates(model, X, s, prior_T, mu, v, m, lat)
        assert abs(mu_m - mu[m]) / math.sqrt(v[m]) < 1e-8
        assert abs(v_m - v[m]) / v[m] < 1e-8
    # the fixed point is stationary: another iteration leaves it where it is
    mu2, v2, _ = naive_vb_iteration(model, X, s, prior_T, mu, v)
    assert np.max(np.abs(mu2 - mu) / np.sqrt(v)) < 1e-8


# ---------------------------------------------------------------- (d) one weight: exact optimum
def _log_evidence(model, x, s, prior_T):
    """log of int N(w | 0, 1/prior_T) prod_i f(s_i x_i w) dw by adaptive quadrature."""
    sd = 1 / math.sqrt(prior_T)
    f = lambda w: (
        math.exp(-0.5 * (w / sd) ** 2) / (sd * math.sqrt(2 * math.pi)) * np.prod(lik(model)(s * x * w))
    )
    return math.log(integrate.quad(f, -12 * sd, 12 * sd, epsabs=0, epsrel=1e-12, limit=200)[0])


def _check_single_weight(model, X, s, prior_T):
    res = run_vb(X, s, model, prior_T, max_iter=20000, tol=1e-14)
    assert res["converged"]
    mu, v = float(res["mu"][0]), float(res["v"][0])
    elbo = lambda p: naive_elbo(model, X, s, prior_T, [p[0]], [math.exp(p[1])])
    best = elbo((mu, math.log(v)))
    assert res["elbo"][-1] == pytest.approx(best, rel=1e-12, abs=0)
    # brute force: no point of a grid around the VB optimum is better
    dm = np.linspace(-0.05, 0.05, 21) * math.sqrt(v)
    dl = np.linspace(-0.05, 0.05, 21)
    grid = np.array([[elbo((mu + a, math.log(v) + c)) for c in dl] for a in dm])
    assert grid.max() <= best + 1e-13 * abs(best)
    assert grid[10, 10] == best
    # an independent optimiser, started far away, finds the same point
    opt = optimize.minimize(
        lambda p: -elbo(p),
        x0=np.array([mu + 2.0, math.log(v) - 1.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-15, "maxiter": 20000},
    )
    assert -opt.fun <= best + 1e-13 * abs(best)
    assert opt.x[0] == pytest.approx(mu, abs=1e-6 * math.sqrt(v))
    assert opt.x[1] == pytest.approx(math.log(v), abs=1e-6)
    # a lower bound of the log evidence
    assert best < _log_evidence(model, X[:, 0], s, prior_T[0])


@pytest.mark.parametrize("model", MODELS)
def test_single_weight_optimum_maximises_the_elbo(rng, model):
    for _ in range(3):
        n = int(rng.integers(2, 6))
        X = np.ascontiguousarray(rng.normal(0, 1.5, (n, 1)))
        s = rng.choice([-1.0, 1.0], n)
        prior_T = np.array([math.exp(rng.uniform(-1, 1))])
        _check_single_weight(model, X, s, prior_T)


# ---------------------------------------------------------------- (e) the ELBO formulas against quadrature
def _probit_row_by_quadrature(s, t, sv, nodes, weights):
    """E_q[log N(z | x.w, 1)] - E_q[log q(z)], q(z) = N(t, 1) truncated to s z > 0, x.w ~ N(t, sv)."""
    log_norm = float(log_ndtr(s * t))
    log_q = lambda z: -0.5 * (z - t) ** 2 - naive.LOG_SQRT_2PI - log_norm
    # x.w ~ N(t, sv) exactly under q(w): Gauss-Hermite over it
    e_log_lik = lambda z: np.sum(weights * (-0.5 * (z - t - math.sqrt(sv) * nodes) ** 2 - naive.LOG_SQRT_2PI))
    f = lambda z: math.exp(log_q(z)) * (e_log_lik(z) - log_q(z))
    lo, hi = (0.0, max(t, 0.0) + 40.0) if s > 0 else (min(t, 0.0) - 40.0, 0.0)
    return integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-12, limit=200)[0]


def _weight_by_quadrature(mu, v, prior_T):
    """E_q[log p(w)] - E_q[log q(w)] of one weight, q = N(mu, v), p = N(0, 1 / prior_T)."""
    sd = math.sqrt(v)
    log_q = lambda w: -0.5 * ((w - mu) / sd) ** 2 - math.log(sd) - naive.LOG_SQRT_2PI
    log_p = lambda w: -0.5 * prior_T * w * w + 0.5 * math.log(prior_T) - naive.LOG_SQRT_2PI
    f = lambda w: math.exp(log_q(w)) * (log_p(w) - log_q(w))
    return integrate.quad(f, mu - 40 * sd, mu + 40 * sd, epsabs=0, epsrel=1e-12, limit=200)[0]


def test_probit_elbo_matches_quadrature(rng):
    """E_q[log p(y, z, w)] - E_q[log q(z)] - E_q[log q(w)] with q(z) optimal, by quadrature."""
    nodes, weights = gauss_hermite(10)
    for _ in range(3):
        n, d = 3, 2
        X = rng.normal(0, 1, (n, d))
        s = rng.choice([-1.0, 1.0], n)
        prior_T = np.exp(rng.uniform(-1, 1, d))
        mu = rng.normal(0, 1, d)
        v = np.exp(rng.uniform(-2, 0.5, d))
        total = sum(
            _probit_row_by_quadrature(s[i], float(X[i] @ mu), float(X[i] ** 2 @ v), nodes, weights)
            for i in range(n)
        )
        total += sum(_weight_by_quadrature(mu[m], v[m], prior_T[m]) for m in range(d))
        _, elbo = kernel_state("probit", X, s, prior_T, mu, v)
        assert elbo == pytest.approx(total, rel=1e-9, abs=0)


def test_logistic_bound_is_below_the_exact_elbo_and_tight_at_a_point_mass(rng):
    """E_q[log sigma(s x.w)] - KL by quadrature is >= the Jaakkola-Jordan bound, equal when v -> 0."""
    nodes, weights = gauss_hermite(120)
    n, d = 6, 3
    X = rng.normal(0, 1, (n, d))
    s = rng.choice([-1.0, 1.0], n)
    prior_T = np.ones(d)
    mu = rng.normal(0, 1, d)
    for scale, gap in ((1.0, 1e-3), (1e-12, None)):
        v = scale * np.exp(rng.uniform(-1, 0.5, d))
        t, sv = X @ mu, (X * X) @ v
        exact = sum(np.sum(weights * log_expit(s[i] * (t[i] + math.sqrt(sv[i]) * nodes))) for i in range(n))
        exact -= kvb.kl_prior(prior_T, mu, v)
        _, bound = kernel_state("logistic", X, s, prior_T, mu, v)
        if gap is None:
            assert bound == pytest.approx(exact, abs=1e-10)
        else:
            assert bound < exact - gap


# ---------------------------------------------------------------- (f) threads, API, edge data
@pytest.mark.parametrize("model", MODELS)
def test_same_result_on_one_and_two_threads(rng, model):
    if max_threads() < 2:
        pytest.skip("numba has a single thread")
    X, y, _ = make_regression_simulation(model, "mixture", n=3000, d=4, seed=3)
    out = []
    for k in (1, 2):
        with num_threads(k):
            out.append(run_vb(X, y, model, np.ones(4), max_iter=50, tol=0.0))
    np.testing.assert_array_equal(out[0]["mu"], out[1]["mu"])
    np.testing.assert_array_equal(out[0]["v"], out[1]["v"])
    assert out[0]["elbo"] == out[1]["elbo"] and out[0]["change"] == out[1]["change"]


@pytest.mark.parametrize("model", MODELS)
def test_run_vb_result_and_callback(rng, model):
    X, s = random_problem(rng, model, 80, 3)
    res = run_vb(X, s, model, np.ones(3), max_iter=5000, tol=1e-8)
    assert set(res) == {"mu", "v", "n_iter", "converged", "stop_reason", "elapsed", "change", "elbo"}
    assert res["converged"] and res["stop_reason"] == "tol" and res["change"][-1] < 1e-8
    assert res["mu"].dtype == np.float64 and res["mu"].shape == (3,) and res["v"].shape == (3,)
    assert len(res["elapsed"]) == len(res["change"]) == len(res["elbo"]) == res["n_iter"]
    assert all(b >= a for a, b in zip(res["elapsed"], res["elapsed"][1:], strict=False))
    seen = []

    def stop_at_3(it, change, mu, v, elbo):
        seen.append((it, change, elbo))
        mu[:] = np.nan  # a copy: the fit must not see this
        return it == 3

    res2 = run_vb(X, s, model, np.ones(3), max_iter=5000, tol=1e-8, callback_fn=stop_at_3)
    assert res2["stop_reason"] == "callback" and res2["n_iter"] == 3 and not res2["converged"]
    assert [it for it, _, _ in seen] == [1, 2, 3]
    assert [e for _, _, e in seen] == res["elbo"][:3] == res2["elbo"]
    assert np.all(np.isfinite(res2["mu"]))


@pytest.mark.parametrize("model", MODELS)
def test_zero_column_keeps_the_prior(rng, model):
    X, s = random_problem(rng, model, 40, 3)
    X[:, 1] = 0.0
    prior_T = np.array([1.0, 2.5, 1.0])
    res = run_vb(X, s, model, prior_T, max_iter=100, tol=1e-10)
    assert res["mu"][1] == 0.0 and res["v"][1] == 1 / 2.5


@pytest.mark.parametrize("model", MODELS)
def test_one_class_only_stays_finite(rng, model):
    X = rng.normal(0, 1, (30, 2))
    res = run_vb(X, np.ones(30), model, np.ones(2), max_iter=500, tol=1e-10)
    assert res["converged"] and np.all(np.isfinite(res["mu"]))


@pytest.mark.parametrize("model", MODELS)
def test_non_finite_posterior_raises(model):
    X = np.array([[1e200], [1.0]])
    with pytest.raises(FloatingPointError, match="non-finite at iteration 1"):
        run_vb(X, np.array([1.0, -1.0]), model, np.ones(1), max_iter=10, tol=1e-8)


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"model": "ep"}, ValueError, "'model' parameter of run_vb"),
        ({"prior_T": np.array([1.0, -1.0])}, ValueError, "'prior_T' parameter of run_vb"),
        ({"prior_T": np.ones(3)}, ValueError, "'prior_T' parameter of run_vb"),
        ({"prior_T": "one"}, TypeError, "'prior_T' parameter of run_vb"),
        ({"prior_T": 0.0}, ValueError, "'prior_T' parameter of run_vb"),
        ({"max_iter": 0}, ValueError, "'max_iter' parameter of run_vb"),
        ({"tol": -1.0}, ValueError, "'tol' parameter of run_vb"),
        ({"callback_fn": 3}, TypeError, "'callback_fn' parameter of run_vb"),
        ({"X": np.array([[np.nan, 1.0], [0.0, 1.0]])}, ValueError, "'X' parameter of run_vb"),
        ({"s": np.array([1.0, 2.0])}, ValueError, "'s' parameter of run_vb"),
    ],
)
def test_run_vb_validation(kwargs, exc, match):
    args = {"X": np.eye(2), "s": np.array([1.0, -1.0]), "model": "probit", "prior_T": np.ones(2)}
    args.update({"max_iter": 10, "tol": 1e-6})
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        run_vb(**args)


def test_kernels_use_the_central_options():
    assert central_options_count(kvb, imported=True) >= 6
