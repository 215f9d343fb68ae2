"""The likelihood seam (kernels.likelihoods): each built-in's leaves against scipy, the generic
quadrature against the closed forms, and the generic row functions against the hand-written ones
and against the exact limits of a Gaussian likelihood."""

import math

import numpy as np
import pytest
from glm_drivers import one_row, setup
from numba import njit
from scipy import integrate, stats
from scipy.special import log_expit

from fastcep._quadrature import gauss_hermite
from fastcep.kernels.glm import schedules as S
from fastcep.kernels.likelihoods import (
    REGISTRY,
    Gaussian,
    Logistic,
    Probit,
    derivative_tilted,
    log_lik,
    log_lik_derivs,
    log_predictive,
    quadrature_tilted,
    tilted,
)
from fastcep.kernels.likelihoods.seam import register

#: (m, v) pairs the fits visit: weak and strong cavities, means far in both tails
MOMENTS = [(0.0, 1.0), (1.3, 0.2), (-2.5, 3.0), (6.0, 0.05), (-8.0, 0.5), (0.4, 9.0), (15.0, 2.0)]
LIKELIHOODS = [(Probit(), 1.0), (Probit(), -1.0), (Logistic(), 1.0), (Logistic(), -1.0), (Gaussian(0.7), 1.9)]


def compiled_caller(seam_function):
    """An @njit function that calls ``seam_function`` (resolved by numba in compiled code only)
    with its arguments, so that a test can call it from Python."""

    @njit
    def call(*args):
        return seam_function(*args)

    return call


call_log_lik = compiled_caller(log_lik)
call_tilted = compiled_caller(tilted)
call_log_lik_derivs = compiled_caller(log_lik_derivs)
call_log_predictive = compiled_caller(log_predictive)
call_quadrature = compiled_caller(quadrature_tilted)
call_derivative = compiled_caller(derivative_tilted)


def scipy_log_lik(lik, y, f):
    if isinstance(lik, Probit):
        return stats.norm.logcdf(y * f)
    if isinstance(lik, Logistic):
        return log_expit(y * f)
    return stats.norm.logpdf(y, f, math.sqrt(lik.var))


def reference_tilted(lik, y, m, v):
    """(log Z, alpha, beta) by the trapezoid rule on a fine grid (200,001 points over 60 cavity
    standard deviations about the tilted mode; for these smooth, fast-decaying integrands its
    error is far below 1e-12): the moments E[f], Var[f] give alpha = (E f - m) / v and beta =
    (v - Var f) / v^2."""
    sd = math.sqrt(v)
    coarse = np.linspace(m - 12 * sd, m + 12 * sd, 4001)
    mode = coarse[np.argmax(scipy_log_lik(lik, y, coarse) + stats.norm.logpdf(coarse, m, sd))]
    f = np.linspace(mode - 30 * sd, mode + 30 * sd, 200_001)
    logt = scipy_log_lik(lik, y, f) + stats.norm.logpdf(f, m, sd)
    top = logt.max()
    p = np.exp(logt - top)
    h = f[1] - f[0]
    z = integrate.trapezoid(p, dx=h)
    u = f - mode
    e1 = integrate.trapezoid(p * u, dx=h) / z
    var = integrate.trapezoid(p * (u - e1) ** 2, dx=h) / z
    return top + math.log(z), (mode + e1 - m) / v, (v - var) / v**2


def test_registry_names_the_built_ins():
    # (the count and Student-t likelihoods: tests/test_likelihood_leaves.py)
    assert {k: REGISTRY[k] for k in ("probit", "logistic", "gaussian")} == {
        "probit": Probit,
        "logistic": Logistic,
        "gaussian": Gaussian,
    }


@pytest.mark.parametrize("lik, y", LIKELIHOODS)
def test_log_lik_matches_scipy(lik, y):
    for f in (-40.0, -5.0, -0.3, 0.0, 0.7, 4.0, 35.0):
        assert call_log_lik(lik, y, f) == pytest.approx(scipy_log_lik(lik, y, f), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("lik, y", LIKELIHOODS)
def test_log_lik_derivs_match_finite_differences(lik, y):
    """Central differences of log_lik with step h (errors ~ h^2 and eps / h)."""
    for f in (-6.0, -1.1, 0.0, 0.4, 3.0, 9.0):
        g1, g2 = call_log_lik_derivs(lik, y, f)
        h = 1e-4
        lo, mid, hi = (call_log_lik(lik, y, f + k * h) for k in (-1, 0, 1))
        assert g1 == pytest.approx((hi - lo) / (2 * h), rel=1e-6, abs=1e-9)
        assert g2 == pytest.approx((hi - 2 * mid + lo) / h**2, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("lik, y", LIKELIHOODS)
@pytest.mark.parametrize("m, v", MOMENTS)
def test_tilted_matches_a_fine_trapezoid_rule(lik, y, m, v):
    """Closed forms (probit, Gaussian) and the 200-node rule (logistic) to about 1e-10."""
    nodes, weights = gauss_hermite(200)
    got = call_tilted(lik, y, m, v, nodes, weights)
    want = reference_tilted(lik, y, m, v)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-9, abs=1e-11)


@pytest.mark.parametrize("lik, y", LIKELIHOODS)
@pytest.mark.parametrize("m, v", MOMENTS)
def test_log_predictive_matches_a_fine_trapezoid_rule(lik, y, m, v):
    """The predictive density: probit's and logistic's own leaves, the Gaussian's by the log Z of
    its closed-form tilted (the fallback)."""
    got = call_log_predictive(lik, y, m, v, *gauss_hermite(200))
    assert got == pytest.approx(reference_tilted(lik, y, m, v)[0], rel=1e-10, abs=1e-11)


def test_the_plain_rule_needs_more_nodes_for_wide_cavities():
    """The logistic's poles at +-i pi limit the plain Gauss-Hermite rule: its error grows with the
    cavity's variance (measured, 60 nodes: 1e-11 at v = 3, 4e-7 at v = 9; the derivative form
    1e-10 and 9e-6, which is why strong factors take the plain one), and falls with the number
    of nodes."""
    errors = {}
    for v in (3.0, 9.0):
        want = np.array(reference_tilted(Logistic(), 1.0, 0.4, v))
        for n in (20, 60, 200):
            got = np.array(call_quadrature(Logistic(), 1.0, 0.4, v, *gauss_hermite(n)))
            errors[v, n] = np.abs(got - want).max()
    assert errors[3.0, 60] < 1e-10 and errors[3.0, 200] < 1e-10
    assert errors[9.0, 20] > errors[9.0, 60] > errors[9.0, 200]
    assert errors[9.0, 60] > 1e-8 and errors[9.0, 200] < 1e-10


@pytest.mark.parametrize("lik, y", [(Probit(), 1.0), (Probit(), -1.0), (Gaussian(0.7), 1.9)])
@pytest.mark.parametrize("m, v", MOMENTS[:5])
@pytest.mark.parametrize("generic", [call_quadrature, call_derivative])
def test_quadrature_equals_the_closed_forms(lik, y, m, v, generic):
    """The generic paths (likelihoods without a closed form) on the likelihoods with one."""
    nodes, weights = gauss_hermite(80)
    got = generic(lik, y, m, v, nodes, weights)
    want = call_tilted(lik, y, m, v, nodes, weights)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("lik, y", LIKELIHOODS)
def test_derivative_form_keeps_weak_factors(lik, y):
    """A weak factor (v = 1e-12): log Z -> log p(y | m), alpha -> g1(m), beta -> -g2(m), each to
    O(v). The derivative form keeps them to rounding; the plain form's beta cancels (1 - Var t
    with Var t = 1 - O(v)), losing about 12 digits."""
    m, v = 0.7, 1e-12
    nodes, weights = gauss_hermite(20)
    g1, g2 = call_log_lik_derivs(lik, y, m)
    log_z, alpha, beta = call_derivative(lik, y, m, v, nodes, weights)
    assert log_z == pytest.approx(call_log_lik(lik, y, m), rel=1e-10)
    assert alpha == pytest.approx(g1, rel=1e-10)
    assert beta == pytest.approx(-g2, rel=1e-10)
    assert abs(call_quadrature(lik, y, m, v, nodes, weights)[2] / -g2 - 1) > 1e-6


def test_quadrature_refuses_a_degenerate_cavity():
    nodes, weights = gauss_hermite(20)
    for v in (0.0, -1.0, math.nan):
        assert all(math.isnan(t) for t in call_quadrature(Logistic(), 1.0, 0.3, v, nodes, weights))


def test_register_checks_its_leaves():
    class Odd(tuple):
        pass

    with pytest.raises(TypeError, match="needs a log_lik leaf"):
        register(Odd, tilted=call_tilted)
    with pytest.raises(TypeError, match="unknown leaves"):
        register(Odd, log_lik=call_log_lik, grad=call_log_lik)


def _random_row(rng, d, x_scale=1.2):
    x = rng.normal(0, x_scale, d)
    x[1] = 0.0  # a site that does not involve its weight: a flat message
    T = np.exp(rng.uniform(0, 2, d))
    N = rng.normal(0, 1, d) * T
    tau = T * rng.uniform(0.05, 0.4, d)
    nu = rng.normal(0, 0.3, d) * tau
    return x, T, N, tau, nu


@pytest.mark.parametrize("name, method", [("probit", "cep1"), ("probit", "ep"), ("logistic", "cep1")])
@pytest.mark.parametrize("d", [4, 24])
def test_generic_rows_equal_the_hand_written_ones(rng, name, method, d):
    """Through the generic row functions, probit (its closed-form tilted) gives the messages of
    its hand-written CEP-1 rows, and of EP (the generic EP is probit's EP, checked against
    tests/naive.py in test_regression_kernels), to rounding. Logistic (quadrature) gives those of
    its hand-written CEP-1 rows with a 100-node rule to 1e-8 where that rule has converged,
    cavities x_m^2 vc_m below about 4 (at 9 nodes either form differs from its converged value
    by up to 25 %; at x_m^2 vc_m = 20 both differ by 3e-4 at 100 nodes: wide cavities need a rule
    centred on the tilted distribution). On weak sites (message precision < 1e-6) the
    hand-written form cancels (measured: 4e-6 relative at 200 nodes, 1e-15 absolute), so there
    the check is absolute."""
    nodes, weights = gauss_hermite(100)
    for _ in range(20):
        x, T, N, tau, nu = _random_row(rng, d, 1.2 if name == "probit" else 0.6)
        s = float(rng.choice([-1.0, 1.0]))
        out = []
        for model in (REGISTRY[name](), name):
            t, n = tau.copy(), nu.copy()
            k, _, _ = one_row(model, method, x, s, t, n, T, N, 1.0, nodes, weights)
            out.append((k, t, n))
        (k1, t1, n1), (k2, t2, n2) = out
        assert k1 == k2 == 0
        assert t1[1] == 0.0 and n1[1] == 0.0
        if name == "probit":
            np.testing.assert_allclose(t1, t2, rtol=1e-11, atol=1e-300)
            np.testing.assert_allclose(n1, n2, rtol=1e-11, atol=1e-14)
            continue
        strong = t2 > 1e-6
        np.testing.assert_allclose(t1[strong], t2[strong], rtol=1e-8)
        np.testing.assert_allclose(n1[strong], n2[strong], rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(t1[~strong], t2[~strong], rtol=0, atol=1e-14)
        np.testing.assert_allclose(n1[~strong], n2[~strong], rtol=0, atol=1e-12)


def _blr(X, y, noise, prior_var):
    """The exact posterior of Bayesian linear regression: (mean, covariance)."""
    P = X.T @ X / noise + np.eye(X.shape[1]) / prior_var
    C = np.linalg.inv(P)
    return C @ X.T @ y / noise, C


@pytest.mark.parametrize("driver", [S.parallel_step, S.parallel_step_serial, S.sequential_step])
@pytest.mark.parametrize("method", ["cep1", "ep"])
def test_gaussian_likelihood_reaches_the_exact_posterior_means(rng, driver, method):
    """A likelihood that has no hand-written rows goes through the drivers unchanged. With a
    Gaussian likelihood the fixed point of both factorised methods has the exact posterior means
    (the means of a Gaussian model are a linear system's solution); CEP-1's variances are the
    mean-field ones, 1 / diag(precision). Rows with zeros included."""
    n, d, noise, prior_var = 300, 5, 0.6, 2.0
    X = rng.normal(size=(n, d))
    X[::5, 2] = 0.0
    y = X @ rng.normal(size=d) + rng.normal(0, math.sqrt(noise), n)
    nodes, weights = gauss_hermite(2)
    tau, nu = np.full((n, d), 1e-10), np.zeros((n, d))
    prior_T = np.full(d, 1 / prior_var)
    problem, lik, state, scratch = setup(X, y, tau, nu, prior_T, Gaussian(noise), method, 64, nodes, weights)
    for _ in range(400):
        change, skipped = driver(problem, lik, state, scratch, 0.5, np.uint64(0))
        assert skipped == 0
        if change < 1e-14:
            break
    mean, C = _blr(X, y, noise, prior_var)
    np.testing.assert_allclose(state.mu, mean, rtol=1e-9, atol=1e-12)
    if method == "cep1":
        np.testing.assert_allclose(state.v, 1 / np.diag(np.linalg.inv(C)), rtol=1e-9)


@pytest.mark.parametrize("code", [0, 5, 8])
def test_a_hand_written_row_code_for_another_likelihood_is_an_error(rng, code):
    """The drivers compile the hand-written rows of the likelihood's own class only
    (``schedules.hand_written_rows``): the probit's or the logistic's code with the Gaussian
    likelihood raises, it never runs some other likelihood's rows."""
    X = rng.normal(size=(20, 3))
    tau, nu = np.full((20, 3), 1e-10), np.zeros((20, 3))
    nodes, weights = gauss_hermite(2)
    problem, lik, state, scratch = setup(
        X, X[:, 0], tau, nu, np.ones(3), Gaussian(0.5), "ep", 8, nodes, weights
    )
    with pytest.raises(ValueError, match="hand-written row code"):
        S.parallel_step_serial(problem._replace(code=code), lik, state, scratch, 0.5, np.uint64(0))


def test_mixed_form_picks_by_the_factor_strength():
    """Logistic (no closed form): weak factors by the derivative form, strong ones by the plain."""
    nodes, weights = gauss_hermite(30)
    weak = (1.0, 0.4, 2.0)  # v |g2(m)| = 2 sigma(0.4) sigma(-0.4) = 0.48
    strong = (1.0, 0.4, 9.0)  # 2.2
    lik = Logistic()
    assert call_tilted(lik, *weak, nodes, weights) == call_derivative(lik, *weak, nodes, weights)
    assert call_tilted(lik, *strong, nodes, weights) == call_quadrature(lik, *strong, nodes, weights)
