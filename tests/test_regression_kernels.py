"""Regression kernels against the textbook versions of tests/naive.py, plus exact limits."""

import math

import numpy as np
import pytest
from glm_drivers import one_row, setup
from scipy import integrate
from scipy.special import expit, ndtr

import naive
from fastcep._quadrature import gauss_hermite
from fastcep.kernels import CHUNK_ROWS
from fastcep.kernels.glm import logistic, probit
from fastcep.kernels.glm import schedules as S
from fastcep.kernels.glm.generic import predictive
from fastcep.kernels.glm.schedules import METHOD_CODES, restore_improper
from fastcep.kernels.glm.sweep import rebuild_posterior, reduce_posterior
from fastcep.kernels.likelihoods import Logistic, Probit
from fastcep.kernels.special import MILLS_TAYLOR_TERMS, inv_mills_taylor, inv_mills_taylor_ok

RTOL = 1e-10
NODES, WEIGHTS = gauss_hermite(9)
#: the predictive kernels of the built-ins use no quadrature rule (and here no offset: its (0,))
NO_RULE = (np.empty(0), np.empty(0), np.empty(0))
#: importance sampling in the sweep tests: draws per row and the sweep's random key
N_SAMPLES = 200
KEY = 0x0123456789ABCDEF


def random_sites(rng, k):
    """k random (x, s, tc, nc, b, q) tuples in the range a fit visits."""
    x = rng.normal(0, 1.5, k)
    s = rng.choice([-1.0, 1.0], k)
    tc = np.exp(rng.uniform(-2, 4, k))
    nc = rng.normal(0, 1, k) * tc
    b = rng.normal(0, 2, k)
    q = np.exp(rng.uniform(-4, 0.5, k))
    return x, s, tc, nc, b, q


def _compare_sites(rng, fast, slow, second, extra=()):
    x, s, tc, nc, b, q = random_sites(rng, 400)
    n_ok = 0
    for i in range(x.size):
        t, n, ok = fast(x[i], s[i], tc[i], nc[i], b[i], q[i], second, *extra)
        t_ref, n_ref = slow(x[i], s[i], tc[i], nc[i], b[i], q[i], second, *extra)
        ok_ref = t_ref > 0 and np.isfinite(t_ref) and np.isfinite(n_ref)
        assert ok == ok_ref
        if ok:
            n_ok += 1
            assert t == pytest.approx(t_ref, rel=RTOL, abs=1e-12 * tc[i])
            assert n == pytest.approx(n_ref, rel=RTOL, abs=1e-12 * (abs(nc[i]) + tc[i]))
    assert n_ok > 300


@pytest.mark.parametrize("second", [False, True])
def test_probit_cep_site_matches_naive(rng, second):
    _compare_sites(rng, probit.probit_cep_site, naive.probit_cep_site, second)


@pytest.mark.parametrize("second", [False, True])
def test_logistic_cep_site_matches_naive(rng, second):
    _compare_sites(rng, logistic.logistic_cep_site, naive.logistic_cep_site, second, (NODES, WEIGHTS))


def _conditional_mean_var(model, x, s, mc, vc, b):
    if model == "probit":
        mean, var, _, _ = naive.probit_conditional_moments(x, s, mc, vc, b)
        return mean, var
    E, _, _ = naive.logistic_conditional_moments(x, s, mc, vc, b, NODES, WEIGHTS)
    mean = E[1] / E[0]
    return mean, E[2] / E[0] - mean**2


@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_cep2_second_derivatives_match_finite_differences(rng, model):
    """CEP-2 = CEP-1 moments + 0.5 q d2/db2: the kernel's correction against a central difference."""
    fast = probit.probit_cep_site if model == "probit" else logistic.logistic_cep_site
    extra = () if model == "probit" else (NODES, WEIGHTS)
    x, s, tc, nc, b, q = random_sites(rng, 60)
    for i in range(x.size):
        vc, mc = 1 / tc[i], nc[i] / tc[i]
        h = 1e-3 * max(1.0, abs(b[i]))
        mv = [_conditional_mean_var(model, x[i], s[i], mc, vc, b[i] + k * h) for k in (-1, 0, 1)]
        d2m = (mv[0][0] - 2 * mv[1][0] + mv[2][0]) / h**2
        d2v = (mv[0][1] - 2 * mv[1][1] + mv[2][1]) / h**2
        mean = mv[1][0] + 0.5 * q[i] * d2m
        var = mv[1][1] + 0.5 * q[i] * d2v
        t, n, ok = fast(x[i], s[i], tc[i], nc[i], b[i], q[i], True, *extra)
        if not (var > 0 and 1 / var - tc[i] > 1e-6 * tc[i]):
            continue
        # mean and variance implied by the kernel's message
        assert ok
        var_k = 1 / (t + tc[i])
        mean_k = (n + nc[i]) * var_k
        scale = math.sqrt(vc)
        assert mean_k == pytest.approx(mean, abs=1e-6 * scale * (1 + q[i]))
        assert var_k == pytest.approx(var, rel=1e-5, abs=1e-6 * vc * (1 + q[i]))


@pytest.mark.parametrize("model", ["probit", "logistic"])
@pytest.mark.parametrize("method", ["cep1", "cep2", "ep"])
def test_d1_site_is_exact_moment_matching(rng, model, method):
    """With one weight, b = q = 0 and EP, CEP-1, CEP-2 all match the exact tilted moments."""
    lik = (lambda a: ndtr(a)) if model == "probit" else (lambda a: expit(a))
    nodes, weights = gauss_hermite(150)  # logistic quadrature converged (error < 1e-12) here
    for _ in range(20):
        x = float(np.clip(rng.normal(0, 1), -2, 2))
        s = rng.choice([-1.0, 1.0])
        tc = math.exp(rng.uniform(0, 2))
        mc = rng.normal()
        vc = 1 / tc
        f = lambda w, k, mc=mc, vc=vc, s=s, x=x: w**k * math.exp(-0.5 * (w - mc) ** 2 / vc) * lik(s * x * w)
        lo, hi = mc - 12 * math.sqrt(vc), mc + 12 * math.sqrt(vc)
        z0, z1, z2 = (
            integrate.quad(f, lo, hi, args=(k,), epsabs=0, epsrel=1e-12, limit=200)[0] for k in range(3)
        )
        mean, var = z1 / z0, z2 / z0 - (z1 / z0) ** 2
        tau_r = np.array([0.3])
        nu_r = np.array([0.1])
        T = np.array([tc + tau_r[0]])
        N = np.array([mc * tc + nu_r[0]])
        one_row(model, method, np.array([x]), s, tau_r, nu_r, T, N, 1.0, nodes, weights)
        assert 1 / (tau_r[0] + tc) == pytest.approx(var, rel=1e-9)
        assert (nu_r[0] + mc * tc) / (tau_r[0] + tc) == pytest.approx(mean, rel=1e-9, abs=1e-10)


def _random_row(rng, d_lo, d_hi):
    """One row of d (in d_lo..d_hi-1) weights: (x, s, tau_r, nu_r, T, N), the posterior
    (T, N) = the row's sites (tau_r, nu_r) + a random cavity."""
    d = rng.integers(d_lo, d_hi)
    x = rng.normal(0, 1, d)
    s = rng.choice([-1.0, 1.0])
    tau_r = np.exp(rng.uniform(-3, 0, d))
    nu_r = rng.normal(0, 0.3, d)
    T = tau_r + np.exp(rng.uniform(-1, 2, d))
    N = nu_r + rng.normal(0, 1, d)
    return x, s, tau_r, nu_r, T, N


def test_probit_ep_row_matches_naive(rng):
    for _ in range(50):
        x, s, tau_r, nu_r, T, N = _random_row(rng, 1, 8)
        t_ref, n_ref = naive.probit_ep_row(x, s, T - tau_r, N - nu_r)
        _, acc_t, acc_n = one_row("probit", "ep", x, s, tau_r, nu_r, T, N, 1.0, NODES, WEIGHTS)
        np.testing.assert_allclose(tau_r, t_ref, rtol=RTOL)
        np.testing.assert_allclose(nu_r, n_ref, rtol=RTOL, atol=1e-13)
        np.testing.assert_array_equal(acc_t, tau_r)


def test_logistic_ep_row_matches_naive_2d_rule(rng):
    for _ in range(30):
        x, s, tau_r, nu_r, T, N = _random_row(rng, 2, 6)
        t_ref, n_ref = naive.logistic_ep_row(x, s, T - tau_r, N - nu_r, NODES, WEIGHTS)
        one_row("logistic", "ep", x, s, tau_r, nu_r, T, N, 1.0, NODES, WEIGHTS)
        ok = t_ref > 0
        np.testing.assert_allclose(tau_r[ok], t_ref[ok], rtol=1e-9)
        np.testing.assert_allclose(nu_r[ok], n_ref[ok], rtol=1e-9, atol=1e-12)


def _problem(rng, model, n=37, d=5):
    X = rng.normal(0, 1, (n, d))
    w = rng.normal(0, 1, d)
    p = ndtr(X @ w) if model == "probit" else expit(X @ w)
    s = np.where(rng.random(n) < p, 1.0, -1.0)
    tau = np.exp(rng.uniform(-4, -1, (n, d)))
    nu = rng.normal(0, 0.05, (n, d))
    return X, s, tau, nu


KERNELS = METHOD_CODES


@pytest.mark.parametrize("model,method", sorted(KERNELS))
def test_parallel_sweep_matches_naive(rng, model, method):
    X, s, tau, nu = _problem(rng, model)
    n, d = X.shape
    prior_T = np.full(d, 1.0)
    rho = 0.7
    tau_ref, nu_ref, skipped_ref = naive.parallel_sweep(
        model, method, X, s, tau, nu, prior_T, rho, NODES, WEIGHTS, N_SAMPLES, KEY
    )
    chunk = 8  # several chunks on small data
    copies = []
    for driver in (S.parallel_step, S.parallel_step_serial):
        t, nn = tau.copy(), nu.copy()
        args = (X, s, t, nn, prior_T, model, method, chunk, NODES, WEIGHTS, N_SAMPLES)
        problem, lik, state, scratch = setup(*args)
        change, k = driver(problem, lik, state, scratch, rho, np.uint64(KEY))
        np.testing.assert_allclose(t, tau_ref, rtol=RTOL)
        np.testing.assert_allclose(nn, nu_ref, rtol=RTOL, atol=1e-13)
        assert k == skipped_ref
        # the fused partial sums give the posterior = prior + sum of sites
        np.testing.assert_allclose(state.T, prior_T + tau_ref.sum(0), rtol=1e-13)
        np.testing.assert_allclose(state.N, nu_ref.sum(0), rtol=1e-12, atol=1e-13)
        copies.append((t, nn, state.T, state.N, change))
    # the threaded and the serial build of the driver agree to rounding: the same arithmetic in
    # the same order, but numba inlines (and LLVM fuses multiply-adds) differently in the two
    # builds and when a leaf comes from the disk cache (BENCHMARKS.md, issue 19). A fit picks
    # the build by the size of its problem, never by the thread count, so its result does not
    # depend on the number of threads (test_fit.py)
    for a, b in zip(copies[0], copies[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def _taylor_rows(X, s, tau, nu, T, N, mu):
    """Which rows ``probit.cep_rows`` computes with the Taylor polynomial of r (its criterion,
    replayed in numpy)."""
    used = []
    d = X.shape[1]
    for i in range(X.shape[0]):
        x = X[i]
        vc = 1.0 / (T - tau[i])
        z = s[i] * (x * (N - nu[i]) * vc + x @ mu - x * mu) / np.sqrt(1.0 + x * x * vc)
        z0 = s[i] * (x @ mu)
        c = inv_mills_taylor(z0)
        used.append(d > MILLS_TAYLOR_TERMS and inv_mills_taylor_ok(c, float(np.sqrt(np.sum((z - z0) ** 2)))))
    return np.array(used)


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
@pytest.mark.parametrize("method", ["cep1", "cep2"])
@pytest.mark.parametrize("x_scale,site_scale", [(0.25, 1e-3), (1.0, 0.05), (2.0, 1.0)])
def test_probit_cep_rows_long_enough_for_taylor_match_naive(rng, schedule, method, x_scale, site_scale):
    """Probit CEP on rows with d > MILLS_TAYLOR_TERMS: with weak sites every cavity is close
    to the posterior, each row's z lie near z0 and r comes from the Taylor polynomial; with
    large features some rows fall back to the table. Both equal the naive sweep, in both
    schedules."""
    n, d = 40, 16
    X = rng.normal(0, x_scale, (n, d))
    s = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    tau = site_scale * np.exp(rng.uniform(-1, 1, (n, d)))
    nu = site_scale * rng.normal(0, 0.3, (n, d))
    prior_T = np.full(d, 1.0)
    rho = 0.7
    sweep_ref = naive.parallel_sweep if schedule == "parallel" else naive.sequential_sweep
    tau_ref, nu_ref, skipped_ref = sweep_ref(
        "probit", method, X, s, tau, nu, prior_T, rho, NODES, WEIGHTS, N_SAMPLES, KEY
    )
    problem, lik, state, scratch = setup(
        X, s, tau, nu, prior_T, "probit", method, CHUNK_ROWS, NODES, WEIGHTS, N_SAMPLES
    )
    used = _taylor_rows(
        X, s, tau, nu, state.T, state.N, state.mu
    )  # (before the sweep: every row of the parallel one)
    if x_scale < 1.0:
        assert used.all()
    if x_scale > 1.0:
        assert 0 < used.sum() < n
    driver = S.parallel_step if schedule == "parallel" else S.sequential_step
    _, k = driver(problem, lik, state, scratch, rho, np.uint64(KEY))
    np.testing.assert_allclose(tau, tau_ref, rtol=RTOL)
    np.testing.assert_allclose(nu, nu_ref, rtol=RTOL, atol=1e-13)
    assert k == skipped_ref


@pytest.mark.parametrize("model,method", sorted(KERNELS))
def test_sequential_sweep_matches_naive(rng, model, method):
    X, s, tau, nu = _problem(rng, model, n=15, d=4)
    n, d = X.shape
    prior_T = np.full(d, 2.0)
    rho = 0.6
    tau_ref, nu_ref, skipped_ref = naive.sequential_sweep(
        model, method, X, s, tau, nu, prior_T, rho, NODES, WEIGHTS, N_SAMPLES, KEY
    )
    problem, lik, state, scratch = setup(
        X, s, tau, nu, prior_T, model, method, CHUNK_ROWS, NODES, WEIGHTS, N_SAMPLES
    )
    _, k = S.sequential_step(problem, lik, state, scratch, rho, np.uint64(KEY))
    np.testing.assert_allclose(tau, tau_ref, rtol=1e-9)
    np.testing.assert_allclose(nu, nu_ref, rtol=1e-9, atol=1e-12)
    assert k == skipped_ref


def test_restore_improper_matches_naive(rng):
    """After a sweep with negative site precisions, the weights left with an improper posterior
    or cavity get their old messages back; the others keep the new ones."""
    n, d = 30, 6
    old_t = np.exp(rng.uniform(-2, 0, (n, d)))
    old_n = rng.normal(size=(n, d))
    tau = old_t + rng.normal(0, 0.3, (n, d))
    nu = old_n + rng.normal(0, 0.3, (n, d))
    tau[:, 1] -= 2.0  # posterior precision of weight 1 negative
    tau[:, 3] = -0.2  # weight 3: posterior precision 0.2 > 0 but the cavity of row 4 improper
    tau[4, 3] = 5.0
    tau[:, 5] -= 2.0  # weight 5: negative, with one message unchanged (not counted as undone)
    tau[7, 5] = old_t[7, 5]
    nu[7, 5] = old_n[7, 5]
    prior_T = np.ones(d)
    ref_t, ref_n, ref_k = naive.restore_improper(prior_T, tau, nu, old_t, old_n)
    T = prior_T + tau.sum(0)
    restored = np.zeros(d, dtype=np.int64)
    restore_improper(T, tau, nu, old_t, old_n, restored)
    np.testing.assert_array_equal(tau, ref_t)
    np.testing.assert_array_equal(nu, ref_n)
    np.testing.assert_array_equal(restored, ref_k)
    assert T[3] > 0 and restored[1] == restored[3] == n and restored[5] == n - 1
    assert np.all(restored[[0, 2, 4]] == 0)


def test_rebuild_equals_reduce_bitwise(rng):
    n, d, chunk = 300, 7, 64
    tau = rng.random((n, d))
    nu = rng.normal(size=(n, d))
    prior_T, prior_N = np.full(d, 0.5), np.zeros(d)
    out1 = [np.empty(d) for _ in range(4)]
    n_chunks = -(-n // chunk)
    rebuild_posterior(
        prior_T, prior_N, tau, nu, chunk, np.empty((n_chunks, d)), np.empty((n_chunks, d)), *out1
    )
    pT = np.array([tau[c * chunk : (c + 1) * chunk].sum(0) for c in range(n_chunks)])
    pN = np.array([nu[c * chunk : (c + 1) * chunk].sum(0) for c in range(n_chunks)])
    out2 = [np.empty(d) for _ in range(4)]
    reduce_posterior(prior_T, prior_N, pT, pN, *out2)
    np.testing.assert_allclose(out1[0], out2[0], rtol=1e-14)


def test_predictive_matches_naive(rng):
    X = rng.normal(size=(50, 4))
    mu = rng.normal(size=4)
    v = np.exp(rng.uniform(-3, 1, 4))
    p, logp = np.empty(50), np.empty(50)
    y = rng.choice([-1.0, 1.0], 50)
    predictive(Probit(), X, mu, v, 0.0, 0.0, *NO_RULE, p, logp, y)
    ref = naive.probit_predictive(X, mu, v)
    np.testing.assert_allclose(p, ref, rtol=1e-12)
    np.testing.assert_allclose(logp, np.log(np.where(y > 0, ref, 1 - ref)), rtol=1e-10)
    predictive(Logistic(), X, mu, v, 0.0, 0.0, *NO_RULE, p, logp, y)
    ref = naive.logistic_predictive(X, mu, v, n_quad=2000)
    np.testing.assert_allclose(p, ref, rtol=1e-11)
    np.testing.assert_allclose(logp, np.log(np.where(y > 0, ref, 1 - ref)), rtol=1e-10)
    # an intercept N(b_mean, b_var) is the weight of a constant feature
    Xb = np.hstack([X, np.ones((50, 1))])
    p2, logp2 = np.empty(50), np.empty(50)
    for lik in (Probit(), Logistic()):
        predictive(lik, X, mu, v, 0.7, 0.3, *NO_RULE, p, logp, y)
        predictive(lik, Xb, np.append(mu, 0.7), np.append(v, 0.3), 0.0, 0.0, *NO_RULE, p2, logp2, y)
        np.testing.assert_allclose(p, p2, rtol=1e-13)
        np.testing.assert_allclose(logp, logp2, rtol=1e-12)


def test_logistic_predictive_extreme_variance_and_margin():
    """Large predictive variance and probabilities near 0 or 1 keep full relative accuracy."""
    import mpmath

    for mean, sd in ((-3.0, 20.0), (40.0, 0.5), (-40.0, 3.0), (8.0, 9.0), (0.0, 1e-9)):
        X = np.array([[1.0]])
        p, logp = np.empty(1), np.empty(1)
        predictive(
            Logistic(),
            X,
            np.array([mean]),
            np.array([sd * sd]),
            0.0,
            0.0,
            *NO_RULE,
            p,
            logp,
            np.array([-1.0]),
        )
        with mpmath.workdps(30):
            f = lambda a, mean=mean, sd=sd: mpmath.npdf(a, mean, sd) / (1 + mpmath.exp(a))
            ref = float(
                mpmath.log(mpmath.quad(f, [-mpmath.inf, mean - 5 * sd, mean, mean + 5 * sd, mpmath.inf]))
            )
        assert logp[0] == pytest.approx(ref, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("sd", [5e3, 2e4, 1e8, 1e100])
@pytest.mark.parametrize("t", [-30.0, -3.0, 0.0, 2.0])
def test_logistic_predictive_for_wide_predictives(sd, t):
    """Wide predictives (huge rows): the rule on both sides of WIDE_SD, against mpmath (before:
    0 beyond sd ~1e50, an integer overflow in the rule's size)."""
    import mpmath

    mean = t * sd
    p, logp = np.empty(1), np.empty(1)
    predictive(
        Logistic(), np.array([[1.0]]), np.array([mean]), np.array([sd * sd]), 0.0, 0.0, *NO_RULE, p, logp,
        np.array([1.0]),
    )  # fmt: skip
    with mpmath.workdps(40):
        f = lambda a: mpmath.npdf(a, mean, sd) / (1 + mpmath.exp(-a))
        # the mass: around the mean, and (far in the wrong tail) right of 0 with decay length
        # sd / |t|, where the sigmoid saturates
        cuts = {mean - 8 * sd, -40.0, 0.0, 40.0, mean, mean + 8 * sd}
        if t:
            cuts |= {k * sd / abs(t) for k in (1, 3, 10, 30, 60)}
        ref = float(mpmath.log(mpmath.quad(f, [-mpmath.inf, *sorted(cuts), mpmath.inf], maxdegree=10)))
    # (beyond WIDE_SD: the step's relative error about 1.6 (1 + t^2) / sd^2 in p)
    assert logp[0] == pytest.approx(ref, rel=1e-9, abs=2 * (1 + t * t) / sd**2)


def test_weak_and_saturated_factors_stay_finite():
    """Tiny |x| (weak factor) and huge margins (underflowing information) give valid messages."""
    for x in (1e-12, 1e-6, 1e-3):
        t, n, ok = probit.probit_cep_site(x, 1.0, 2.0, 0.5, 0.3, 0.1, False)
        assert ok and 0 < t < 1e-2 and np.isfinite(n)
        t, n, ok = logistic.logistic_cep_site(x, 1.0, 2.0, 0.5, 0.3, 0.1, False, NODES, WEIGHTS)
        assert ok and 0 <= t < 1e-2 and np.isfinite(n)
    # margin of 60 sd: phi/Phi underflows, the exact message is flat and is applied as such
    t, n, ok = probit.probit_cep_site(1.0, 1.0, 1.0, 0.0, 60.0, 0.0, False)
    assert ok and t == 0.0 and n == 0.0
    # margin of -1e4 (badly misclassified): finite, informative message
    for fast, extra in ((probit.probit_cep_site, ()), (logistic.logistic_cep_site, (NODES, WEIGHTS))):
        t, n, ok = fast(1.0, 1.0, 1.0, 0.0, -1e4, 0.0, False, *extra)
        assert ok and np.isfinite(t) and np.isfinite(n) and t > 0
