"""Method "kjit" (kernel-based just-in-time EP messages, Jitkrittum et al. 2015) for logistic
regression: the operator's kernels against numpy, the exact limit threshold = 0 (method "is"
bitwise), the operator learning the tilted moments, accuracy against EP, reproducibility on any
thread count, and bad input."""

import math

import numpy as np
import pytest
from kernel_options import central_options_count
from scipy import integrate
from scipy.linalg import solve_triangular
from scipy.special import expit, log_expit

import fastcep
import naive
from fastcep.data_tools import make_regression_simulation
from fastcep.glm.kjit import THRESHOLD, MessageOperator
from fastcep.kernels.glm import importance
from fastcep.kernels.glm import kjit as K


def _exact_alpha_beta(u0, log_s2):
    """(alpha, beta) of N(a | u0, s2) sigmoid(a) by 1-D quadrature (a = u0 + sd z)."""
    sd = math.exp(0.5 * log_s2)
    f = lambda z, k: z**k * math.exp(float(log_expit(u0 + sd * z)) - 0.5 * z * z)
    Z, m1, m2 = (
        integrate.quad(f, -40, 40, args=(k,), epsabs=0, epsrel=1e-10, limit=200)[0] for k in range(3)
    )
    mean, var = m1 / Z, m2 / Z - (m1 / Z) ** 2  # of z = (a - u0) / sd
    return mean / sd, (1 - var) / sd**2


def test_every_kernel_uses_the_central_options():
    assert central_options_count(K) >= 7


def test_features_and_prediction_match_numpy(rng):
    op = MessageOperator(n_features=60, seed=rng)
    U = np.column_stack([rng.uniform(-6, 6, 40), rng.uniform(-6, 2, 40)])
    Y = np.column_stack([rng.uniform(0, 1, 40), rng.uniform(0, 0.25, 40)])
    op.add(U[:25], Y[:25])
    op.add(U[25:], Y[25:])  # in two batches: the same as one
    D = op.n_features
    Ut = np.column_stack([rng.uniform(-8, 8, 30), rng.uniform(-8, 3, 30)])
    Phi = np.sqrt(2 / D) * np.cos((Ut / op.scale_) @ op.freq_.T + op.phase_)
    np.testing.assert_allclose(op.features(Ut), Phi, rtol=0, atol=1e-12)
    # prediction from the operator's state: mean phi^T coef, variance noise + |L^{-1} phi|^2
    mean, var = op.predict(Ut)
    np.testing.assert_allclose(mean, Phi @ op.coef_.T, rtol=1e-12, atol=1e-12)
    ref_var = op.noise_var + np.sum(solve_triangular(op.chol_, Phi.T, lower=True) ** 2, axis=0)
    np.testing.assert_allclose(var, ref_var, rtol=1e-12)
    # the state is the closed-form Bayesian linear regression of all 40 pairs
    P = np.sqrt(2 / D) * np.cos((U / op.scale_) @ op.freq_.T + op.phase_)
    A = np.eye(D) / op.prior_var + P.T @ P / op.noise_var
    np.testing.assert_allclose(op.chol_ @ op.chol_.T, A, rtol=1e-12, atol=1e-9)
    coef = np.linalg.solve(A, P.T @ Y / op.noise_var)
    np.testing.assert_allclose(Phi @ op.coef_.T, Phi @ coef, rtol=0, atol=1e-8)
    assert op.n_data_ == 40
    # pairs with a non-finite entry are dropped
    assert op.add(np.array([[0.0, np.nan], [1.0, 0.0]]), np.array([[0.5, 0.1], [np.inf, 0.1]])) == 0
    assert op.n_data_ == 40


def test_operator_messages_are_gaussian_conditioning(rng):
    """With predicted (alpha, beta), every weight's message is the moment match of
    E[w_m] = mc_m + x_m vc_m s alpha, Var[w_m] = vc_m - x_m^2 vc_m^2 beta."""
    d = 5
    for _ in range(20):
        x = rng.normal(0, 1, d)
        x[2] = 0.0  # a weight outside the factor: flat message
        s = rng.choice([-1.0, 1.0])
        tc = np.exp(rng.uniform(-1, 2, d))
        nc = rng.normal(0, 1, d) * tc
        s2_a = x**2 @ (1 / tc)
        alpha, beta = rng.uniform(0, 1), rng.uniform(0, min(0.25, 0.9 / s2_a))  # var_a > 0
        tau, nu = np.zeros((1, d)), np.zeros((1, d))
        acc_t, acc_n = np.zeros((1, d)), np.zeros((1, d))
        k = K.operator_messages(x[None, :], s, 0, tau, nu, tc, nc, 1 / tc, alpha, beta, 1.0, acc_t, acc_n, 0)
        tau, nu, acc_t = tau[0], nu[0], acc_t[0]
        vc, mc = 1 / tc, nc / tc
        var = vc - x**2 * vc**2 * beta
        mean = mc + x * vc * s * alpha
        assert k == 0
        np.testing.assert_allclose(tau, 1 / var - tc, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(nu, mean / var - nc, rtol=1e-12, atol=1e-12)
        assert tau[2] == 0.0 and nu[2] == 0.0
        np.testing.assert_array_equal(acc_t, tau)


def test_oracle_target_matches_numpy_and_the_exact_moments(rng):
    """The oracle's (alpha, beta) are the self-normalised Stein estimates from the draws of the IS
    row with the same key (numpy on naive's draws), and agree with the direct moments of a' from
    the same draws and with quadrature within Monte-Carlo error."""
    d, S = 3, 20_000
    x = np.array([0.8, -1.3, 0.5])
    mc = np.array([0.4, -0.2, 1.0])
    for s, sd_scale in ((1.0, 0.3), (-1.0, 1.5)):
        sd = sd_scale * np.array([1.0, 0.7, 1.2])
        key = np.uint64(importance.row_key(np.uint64(99), 7))
        out = np.empty(2)
        mu_a = float(x @ mc)
        K.tilted_target(x, s, mu_a, sd, S, key, np.empty(d), out)
        eps = naive.standard_normals(int(key), S, d)
        a = s * (mu_a + eps @ (x * sd))
        f = expit(a)
        f /= f.sum()
        g = expit(-a)
        alpha = f @ g
        beta = f @ (g * (1 - g)) - f @ (g - alpha) ** 2
        np.testing.assert_allclose(out, [alpha, beta], rtol=1e-10, atol=1e-13)
        s2 = float(x**2 @ sd**2)
        direct = ((f @ a - s * mu_a) / s2, (s2 - f @ (a - f @ a) ** 2) / s2**2)
        exact = _exact_alpha_beta(s * mu_a, math.log(s2))
        assert np.all(np.abs(out - exact) < 4 / math.sqrt(S))
        assert abs(direct[0] - exact[0]) < 4 / math.sqrt(s2 * S)
        assert abs(direct[1] - exact[1]) < 4 * math.sqrt(2 / S) / s2


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_threshold_zero_reproduces_importance_sampling_bitwise(schedule):
    X, y, _ = make_regression_simulation("logistic", n=300, d=4, seed=0)
    kw = dict(model="logistic", seed=5, n_samples=2000, max_iter=10, damping="auto", schedule=schedule)
    kj = fastcep.fit(X, y, method="kjit", threshold=0, **kw)
    ref = fastcep.fit(X, y, method="is", **kw)
    assert kj.method == "kjit" and kj.n_iter == ref.n_iter == 10
    np.testing.assert_array_equal(kj.posterior.mean, ref.posterior.mean)
    np.testing.assert_array_equal(kj.posterior.var, ref.posterior.var)
    np.testing.assert_array_equal(kj.state.sites.tau, ref.state.sites.tau)
    np.testing.assert_array_equal(kj.state.sites.nu, ref.state.sites.nu)
    np.testing.assert_array_equal(kj.trace.change, ref.trace.change)
    np.testing.assert_array_equal(kj.trace.skipped, ref.trace.skipped)
    assert kj.options["oracle_calls"] == [300] * 10
    assert kj.options["threshold"] == 0.0 and kj.options["n_features"] == 200


def test_operator_learns_the_tilted_moments():
    """Trained on oracle targets over a grid of inputs, the operator predicts the exact tilted
    moments closely, and its predictive variance falls below the default threshold inside the
    grid and stays at the prior's far from it."""
    u0s, u1s = np.linspace(-8, 8, 17), np.linspace(-6, 2, 9)
    U = np.array([(a, b) for a in u0s for b in u1s])
    Y = np.empty_like(U)
    for j, (u0, u1) in enumerate(U):  # a 1-D row (x = 1, s = 1): a' = u0 + sd eps
        sd = np.array([math.exp(0.5 * u1)])
        key = np.uint64(importance.row_key(np.uint64(2024), j))
        K.tilted_target(np.ones(1), 1.0, u0, sd, 20_000, key, np.empty(1), Y[j])
    op = MessageOperator(seed=3)
    rng = np.random.default_rng(4)
    test = np.column_stack([rng.uniform(-7, 7, 15), rng.uniform(-5, 1.5, 15)])
    far = np.array([[40.0, 0.0], [0.0, 25.0]])
    var_before = op.predict(test)[1]
    assert np.all(var_before > 0.5)
    op.add(U, Y)
    mean, var = op.predict(test)
    assert np.all(var < THRESHOLD) and np.all(var < 1e-3 * var_before)
    assert np.all(op.predict(far)[1] > 0.5)
    exact = np.array([_exact_alpha_beta(u0, u1) for u0, u1 in test])
    err = np.abs(mean - exact)
    assert np.max(err) < 0.01, err  # measured: 0.004 (alpha), 0.003 (beta)
    # as tilted moments of a' (mean = u0 + s2 alpha, var = s2 - s2^2 beta): the mean within 2% of
    # the cavity's sd, the variance within 2% of the cavity's (measured: 0.6% and 0.7%)
    s2 = np.exp(test[:, 1])
    assert np.all(np.sqrt(s2) * err[:, 0] < 0.02)
    assert np.all(s2 * err[:, 1] < 0.02)


def test_default_fit_matches_ep_with_few_oracle_calls():
    X, y, _ = make_regression_simulation("logistic", n=1000, d=4, seed=1)
    # (the paper's model, without an intercept: with one, the third sweep still asks the oracle
    # for 577 rows, 612 in all after the first two)
    kw = dict(model="logistic", fit_intercept=False)
    res = fastcep.fit(X, y, method="kjit", seed=7, max_iter=1000, **kw)
    ep = fastcep.fit(X, y, method="ep", tol=1e-8, max_iter=2000, **kw)
    sd = np.sqrt(ep.posterior.var)
    assert res.converged and res.stop_reason == "tol"
    assert np.max(np.abs(res.posterior.mean - ep.posterior.mean) / sd) < 0.3
    np.testing.assert_allclose(res.posterior.var, ep.posterior.var, rtol=0.05)
    calls = res.options["oracle_calls"]
    assert len(calls) == res.n_iter and calls[0] == 1000  # no data yet: every row asks the oracle
    # after the two sweeps that train it the operator answers all but a few rows (measured: none
    # with the default damping, 14 sweeps; 44 in 108 sweeps with damping 0.1; IS asks the oracle
    # for all 1,000 rows in every sweep)
    assert sum(calls[2:]) < 100


def test_same_seed_same_result_on_any_thread_count():
    X, y, _ = make_regression_simulation("logistic", n=2500, d=3, seed=2)  # three chunks of rows
    X[5] = 0.0  # a row outside every factor: the oracle's flat messages, no training pair
    kw = dict(
        model="logistic", method="kjit", seed=11, n_samples=300, max_iter=4, damping=0.5, fit_intercept=False
    )
    a = fastcep.fit(X, y, n_threads=1, **kw)
    b = fastcep.fit(X, y, n_threads=2, **kw)
    c = fastcep.fit(X, y, **kw)
    for other in (b, c):
        np.testing.assert_array_equal(a.posterior.mean, other.posterior.mean)
        np.testing.assert_array_equal(a.posterior.var, other.posterior.var)
        np.testing.assert_array_equal(a.state.sites.nu, other.state.sites.nu)
        assert a.options["oracle_calls"] == other.options["oracle_calls"]
    assert a.options["oracle_calls"][0] == 2500 and a.options["oracle_calls"][-1] < 2500
    np.testing.assert_array_equal(a.state.sites.tau[5], 0.0)
    d = fastcep.fit(X, y, n_threads=1, **dict(kw, seed=12))
    assert not np.array_equal(a.posterior.mean, d.posterior.mean)


def test_bad_input_raises_clear_errors():
    X, y, _ = make_regression_simulation("logistic", n=50, d=2, seed=0)
    with pytest.raises(ValueError, match="kjit is implemented for the logistic model, as in the paper"):
        fastcep.fit(X, y, model="probit", method="kjit")
    with pytest.raises(ValueError, match="'threshold' parameter of fit must be a finite float >= 0"):
        fastcep.fit(X, y, model="logistic", method="kjit", threshold=-1e-3)
    with pytest.raises(ValueError, match="'threshold'"):
        fastcep.fit(X, y, model="logistic", method="kjit", threshold=np.inf)
    with pytest.raises(TypeError, match="'threshold'"):
        fastcep.fit(X, y, model="logistic", method="kjit", threshold="1e-3")
    with pytest.raises(ValueError, match="'n_features' parameter of fit must be an int >= 1"):
        fastcep.fit(X, y, model="logistic", method="kjit", n_features=0)
    with pytest.raises(TypeError, match="'n_features'"):
        fastcep.fit(X, y, model="logistic", method="kjit", n_features=10.5)
    with pytest.raises(ValueError, match="n_features must be >= 1"):
        MessageOperator(n_features=0)
    with pytest.raises(ValueError, match="noise_var"):
        MessageOperator(noise_var=0.0)
