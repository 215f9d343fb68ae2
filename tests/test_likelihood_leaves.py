"""The count and Student-t likelihoods (kernels.likelihoods.poisson, negbin, student_t), their
tilted rule (kernels.likelihoods.adaptive) and the mechanism for a user's log-density
(kernels.likelihoods.custom): leaves against scipy and mpmath, tilted moments against
scipy.integrate.quad on the hard cases, exact limits, and a Custom equal to the Poisson."""

import math

import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher
from scipy import optimize, stats

import fastcep.kernels.likelihoods as likelihoods
from fastcep._quadrature import gauss_hermite
from fastcep.kernels.likelihoods import (
    REGISTRY,
    Gaussian,
    NegativeBinomial,
    Poisson,
    StudentT,
    custom_likelihood,
    log_lik,
    log_lik_derivs,
    log_lik_step,
    quadrature_tilted,
    tilted,
    tilted_moments,
    uncached,
)
from naive import (
    negbin_log_lik_mp,
    poisson_log_lik_mp,
    student_t_log_lik_mp,
    tilted_by_quad,
)

EPS = np.finfo(float).eps


@njit
def call_log_lik(lik, y, f):
    return log_lik(lik, y, f)


@njit
def call_derivs(lik, y, f):
    return log_lik_derivs(lik, y, f)


@njit
def call_step(lik, y, f, x):
    return log_lik_step(lik, y, f, x)


@njit
def call_tilted(lik, y, m, v):
    nodes, weights = np.zeros(1), np.ones(1)  # (not used by the adaptive rule)
    return tilted(lik, y, m, v, nodes, weights)


@njit
def call_moments(lik, y, m, v):
    return tilted_moments(lik, y, m, v)


@njit
def call_quadrature(lik, y, m, v, nodes, weights):
    return quadrature_tilted(lik, y, m, v, nodes, weights)


def test_registry_holds_one_entry_per_likelihood():
    assert REGISTRY == {
        "probit": likelihoods.Probit,
        "logistic": likelihoods.Logistic,
        "gaussian": Gaussian,
        "poisson": Poisson,
        "negbin": NegativeBinomial,
        "student_t": StudentT,
    }


# ---------------------------------------------------------------- leaves against scipy and mpmath
COUNTS = [0.0, 1.0, 2.0, 7.0, 30.0, 1e3, 1e6, 2.5e7, 1e8]
F_GRID = [-40.0, -7.5, -1.0, 0.0, 0.3, 2.0, 9.0, 20.0, 40.0]


def _count_fs(y):
    """The f grid plus points about the likelihood's peak log y (where large counts cancel)."""
    peak = math.log(max(y, 1.0))
    return F_GRID + [peak + dx for dx in (-3.0, -1e-3, 0.0, 2e-4, 0.5)]


def scipy_log_lik(lik, y, f):
    if isinstance(lik, Poisson):
        return stats.poisson.logpmf(y, math.exp(f))
    if isinstance(lik, NegativeBinomial):
        r = lik.r
        return stats.nbinom.logpmf(y, r, r / (r + math.exp(f)))
    return stats.t.logpdf(y, lik.df, loc=f, scale=lik.scale)


def scipy_rounding(lik, y, f):
    """A bound on scipy's own rounding error: a few eps times the size of the terms it sums (about
    y |f| + exp(f) + lgamma(y + 1) for the counts: 2e9 at y = 1e8, where scipy keeps 1e-7)."""
    if isinstance(lik, StudentT):
        return 8 * EPS * (1.0 + abs(scipy_log_lik(lik, y, f)))
    terms = y * abs(f) + math.exp(f) + math.lgamma(y + 1.0)
    if isinstance(lik, NegativeBinomial):
        # (and scipy takes p = r / (r + mu): 1 - p to eps / (1 - p) relative, times y)
        r, mu = lik.r, math.exp(f)
        terms += (
            math.lgamma(y + r) + abs(math.lgamma(r)) + (y + r) * abs(math.log(r + mu)) + y * (1.0 + r / mu)
        )
    return 8 * EPS * (1.0 + terms)


@pytest.mark.parametrize(
    "lik", [Poisson(), NegativeBinomial(0.1), NegativeBinomial(3.3), NegativeBinomial(1e4)]
)
def test_count_log_lik_matches_scipy(lik):
    """Against scipy's logpmf to scipy's own rounding (which is large for large counts: the
    terms it sums are y f and lgamma(y + 1)); the tight check is against mpmath below."""
    for y in COUNTS:
        for f in _count_fs(y):
            want = scipy_log_lik(lik, y, f)
            got = call_log_lik(lik, y, f)
            assert abs(got - want) <= 1e-13 * abs(want) + scipy_rounding(lik, y, f), (y, f)


@pytest.mark.parametrize(
    "lik",
    [Poisson(), NegativeBinomial(0.1), NegativeBinomial(3.3), NegativeBinomial(1e4), NegativeBinomial(1e12)],
)
def test_count_log_lik_matches_mpmath(lik):
    """To a few eps of its conditioning: log p(y | f) at a double f counts to eps |f g1(f)| (the
    rounding of f itself; 2e-10 a few widths from the peak of a count 1e8)."""
    for y in COUNTS:
        for f in _count_fs(y):
            if isinstance(lik, Poisson):
                want = poisson_log_lik_mp(y)(f)
            else:
                want = negbin_log_lik_mp(lik.r, y)(f)
            g1 = call_derivs(lik, y, f)[0]
            got = call_log_lik(lik, y, f)
            assert abs(got - float(want)) <= 16 * EPS * (1.0 + abs(float(want)) + abs(f * g1)), (y, f)


STUDENTS = [
    StudentT(1.0, 1.0),
    StudentT(2.5, 0.1),
    StudentT(4.0, 3.0),
    StudentT(30.0, 1.0),
    StudentT(1e7, 2.0),
]


@pytest.mark.parametrize("lik", STUDENTS)
def test_student_t_log_lik_matches_scipy_and_mpmath(lik):
    for y in (-3.0, 0.0, 1.7, 250.0):
        for f in (-1e3, -40.0, -2.0, 0.0, 1.69, 1.7, 3.0, 1e4):
            want = student_t_log_lik_mp(lik.df, lik.scale, y)(f)
            got = call_log_lik(lik, y, f)
            assert got == pytest.approx(float(want), rel=4e-15, abs=4e-15)
            assert got == pytest.approx(scipy_log_lik(lik, y, f), rel=1e-12, abs=1e-12)


LEAF_CASES = [(Poisson(), y) for y in (0.0, 1.0, 1e3, 2.5e7)]
LEAF_CASES += [(NegativeBinomial(r), y) for r in (0.1, 1e4) for y in (0.0, 1.0, 1e3, 2.5e7)]
LEAF_CASES += [(lik, 1.3) for lik in STUDENTS[:4]]


@pytest.mark.parametrize("lik, y", LEAF_CASES)
def test_log_lik_derivs_match_finite_differences(lik, y):
    """Central differences with step h = 1e-4 times the likelihood's width at f (of log_lik_step,
    which keeps them free of the rounding of log p itself)."""
    peak = math.log(max(y, 1.0)) if not isinstance(lik, StudentT) else y
    for f in (-12.0, -1.0, 0.0, peak - 0.3, peak, peak + 0.02, 6.0, 25.0):
        g1, g2 = call_derivs(lik, y, f)
        h = 1e-3 / math.sqrt(abs(g2) + 1.0)
        up, down = call_step(lik, y, f, h), call_step(lik, y, f, -h)
        # (truncation about 1e-7 relative; rounding: the step's g1 h to eps, over h or h^2)
        rounding = 16 * EPS * abs(g1) * h
        assert g1 == pytest.approx(
            (up - down) / (2 * h), rel=1e-6, abs=1e-6 * math.sqrt(abs(g2)) + rounding / h
        ), f
        assert g2 == pytest.approx(
            (up + down) / h**2, rel=1e-5, abs=1e-5 * (abs(g2) + 1.0) + rounding / h**2
        ), f


@pytest.mark.parametrize("lik, y", LEAF_CASES)
def test_log_lik_step_is_the_difference_of_log_lik(lik, y):
    """log_lik_step(f, x) = log p(y | f + x) - log p(y | f), against mpmath (the difference of two
    log_lik would carry their rounding, 1e-8 at y = 2.5e7)."""
    peak = math.log(max(y, 1.0)) if not isinstance(lik, StudentT) else y
    for f in (-3.0, peak - 1e-3, peak + 0.7, 12.0):
        for x in (-5.0, -0.3, -1e-4, 2e-6, 0.01, 1.5, 30.0):
            want = mp_log_lik(lik, y)(f + x) - mp_log_lik(lik, y)(f)
            g1 = call_derivs(lik, y, f)[0]
            got = call_step(lik, y, f, x)
            # (f + x is rounded: eps |f + x| |g1(f + x)| of conditioning, bounded via |g1(f)| + |want / x|)
            slack = 8 * EPS * (abs(float(want)) + abs(f + x) * (abs(g1) + abs(float(want) / x)))
            assert abs(got - float(want)) <= 1e-13 * abs(float(want)) + slack, (f, x)


# ---------------------------------------------------------------- tilted moments on the hard cases
def _log_concave_mode(lik, y, m, v):
    """The tilted mode of a log-concave likelihood: the root of g1(f) - (f - m) / v, which lies
    between m and m + v g1(m) and, for a count y > 0, between m and log y."""

    def slope(f):
        return call_derivs(lik, y, f)[0] - (f - m) / v

    lo, hi = sorted((m, m + v * call_derivs(lik, y, m)[0]))
    if y > 0:
        lo, hi = max(lo, min(m, math.log(y))), min(hi, max(m, math.log(y)))
    if lo == hi or slope(lo) * slope(hi) > 0:
        return lo
    return optimize.brentq(slope, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500)


def _student_t_stationary_points(lik, y, m, v):
    """The stationary points of the Student-t tilted: with e = y - f, the real roots of
    e^3 - D e^2 + (df s^2 + (df + 1) v) e - D df s^2, D = y - m."""
    ds2 = lik.df * lik.scale**2
    d = y - m
    roots = np.roots([1.0, -d, ds2 + (lik.df + 1.0) * v, -d * ds2])
    return sorted(y - e.real for e in roots if abs(e.imag) <= 1e-9 * (1.0 + abs(e.real)))


def mp_log_lik(lik, y):
    """f -> log p(y | f) of ``lik`` in mpmath (tests/naive.py)."""
    if isinstance(lik, Poisson):
        return poisson_log_lik_mp(y)
    if isinstance(lik, NegativeBinomial):
        return negbin_log_lik_mp(lik.r, y)
    return student_t_log_lik_mp(lik.df, lik.scale, y)


def reference(lik, y, m, v):
    if isinstance(lik, StudentT):
        anchors = _student_t_stationary_points(lik, y, m, v) + [y]
    else:
        anchors = [_log_concave_mode(lik, y, m, v)]
    return tilted_by_quad(mp_log_lik(lik, y), m, v, anchors)


def _hard_cases():
    cases = []
    for y in (0.0, 1.0, 1e3, 1e6, 2.5e7):
        peak = math.log(max(y, 0.5))
        for sd in (1e-3, 1.0, 30.0):
            for m in (-20.0, peak, 20.0):
                cases.append((Poisson(), y, m, sd * sd))
    for r in (0.1, 1e4):
        for y in (0.0, 1e3, 2.5e7):
            peak = math.log(max(y, 0.5))
            for sd, m in ((1e-3, -20.0), (1.0, peak), (30.0, 20.0), (30.0, peak - 5.0)):
                cases.append((NegativeBinomial(r), y, m, sd * sd))
    cases += [(NegativeBinomial(r), 3.0, 0.0, 25.0) for r in (1.0, 30.0)]
    for lik in (StudentT(1.0, 0.3), StudentT(4.0, 0.3)):
        for sd in (1e-3, 1.0, 30.0):
            for offset in (0.0, 50 * lik.scale, -50 * lik.scale, 3 * sd):
                cases.append((lik, 2.0 + offset, 2.0, sd * sd))
    cases += [(StudentT(30.0, 1.0), 2.0 + offset, 2.0, 100.0) for offset in (0.0, 8.0, 50.0)]
    return cases


HARD_CASES = _hard_cases()


def _case_id(case):
    lik, y, m, v = case
    return f"{type(lik).__name__}{tuple(lik)}-y{y:g}-m{m:.3g}-sd{math.sqrt(v):g}"


@pytest.mark.parametrize("case", HARD_CASES, ids=[_case_id(c) for c in HARD_CASES])
def test_tilted_moments_match_quad(case):
    """log Z, the tilted mean (relative to its magnitude or, near 0, the tilted sd) and the
    tilted variance to 1e-10 relative (measured worst: 5e-12), on counts up to 2.5e7 with
    cavities of sd 1e-3 to 30 far from log y, and Student-t outliers 50 scales away (bimodal)."""
    lik, y, m, v = case
    log_z, mean, var = call_moments(lik, y, m, v)
    want_log_z, want_mean, want_var = reference(lik, y, m, v)
    assert abs(log_z - want_log_z) <= 1e-10 * max(1.0, abs(want_log_z))
    assert abs(mean - want_mean) <= 1e-10 * max(abs(want_mean), math.sqrt(want_var))
    assert abs(var - want_var) <= 1e-10 * want_var


def _far_mode(lik, y, m, v):
    """The tilted mode of a count likelihood by bisection in mpmath (its exp never overflows):
    the root of the decreasing slope g1(f) - (f - m) / v, g1 = y - mu (Poisson) or
    r (y - mu) / (r + mu) (negative binomial), mu = e^f."""
    import mpmath as mp

    with mp.workdps(60):

        def slope(f):
            mu = mp.exp(f)
            g1 = y - mu if isinstance(lik, Poisson) else lik.r * (y - mu) / (lik.r + mu)
            return g1 - (f - m) / mp.mpf(v)

        lo, hi = mp.mpf(m) - 1e6, mp.mpf(m) + 1e6
        for _ in range(400):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if slope(mid) > 0 else (lo, mid)
        return float((lo + hi) / 2)


FAR_CASES = [
    (Poisson(), 0.0, 300.0, 1.0),  # (the mode near f = 5.7: Newton's steps of about 1 from 300)
    (Poisson(), 0.0, 1000.0, 1e-2),  # (exp(f) overflows at the cavity's mean)
    (Poisson(), 1.0, 1e4, 1e4),
    (Poisson(), 1e3, 1000.0, 100.0),
    (NegativeBinomial(0.6), 1.0, -1e4, 1.0),  # (log p was -inf: the rate e^-1e4)
    (NegativeBinomial(0.6), 0.0, 1e4, 1e4),
    (NegativeBinomial(0.6), 5.0, -1e4, 1e4),  # (was NaN: a wide cavity where the rate underflows)
    (NegativeBinomial(50.0), 0.0, 1000.0, 1.0),
]


@pytest.mark.parametrize("case", FAR_CASES, ids=[_case_id(c) for c in FAR_CASES])
def test_tilted_moments_of_a_cavity_far_beyond_the_exponential_s_range(case):
    """Count likelihoods against cavities whose mean is where exp(f) overflows or underflows (a
    CP fit whose posterior ran far: a rank-10 Poisson fit of Alog predicted log-rates of 1e4 and
    scored a test entry NaN): the mode by bisection where Newton cannot reach it, and the same
    accuracy as the hard cases, against mpmath quadrature."""
    lik, y, m, v = case
    log_z, mean, var = call_moments(lik, y, m, v)
    want_log_z, want_mean, want_var = tilted_by_quad(mp_log_lik(lik, y), m, v, [_far_mode(lik, y, m, v)])
    assert abs(log_z - want_log_z) <= 1e-10 * max(1.0, abs(want_log_z))
    assert abs(mean - want_mean) <= 1e-10 * max(abs(want_mean), math.sqrt(want_var))
    assert abs(var - want_var) <= 1e-9 * want_var


@pytest.mark.parametrize("case", HARD_CASES[::3], ids=[_case_id(c) for c in HARD_CASES[::3]])
def test_tilted_alpha_beta_agree_with_the_moments(case):
    """(log Z, alpha, beta) of the seam: alpha = (E f - m) / v and v - v^2 beta = Var f (strong
    factors by these very formulas; weak ones by the derivative form, to its accuracy). The
    variance through beta keeps eps (1 + v / Var f) relative (the convention's conditioning)."""
    lik, y, m, v = case
    log_z, alpha, beta = call_tilted(lik, y, m, v)
    want_log_z, mean, var = call_moments(lik, y, m, v)
    assert log_z == want_log_z
    assert abs(m + v * alpha - mean) <= 1e-10 * max(abs(mean), math.sqrt(var)) + 4 * EPS * abs(m)
    assert abs(v - v * v * beta - var) <= 1e-10 * var + 8 * EPS * v


@pytest.mark.parametrize(
    "lik, y", [(Poisson(), 3.0), (NegativeBinomial(2.0), 40.0), (StudentT(4.0, 0.5), 1.0)]
)
def test_weak_factors_keep_alpha_and_beta(lik, y):
    """A weak factor (v = 1e-12): alpha -> g1(m), beta -> -g2(m) to O(v), kept to rounding by the
    derivative form (1 - Var f / v would cancel)."""
    m, v = 0.7, 1e-12
    g1, g2 = call_derivs(lik, y, m)
    log_z, alpha, beta = call_tilted(lik, y, m, v)
    assert log_z == pytest.approx(call_log_lik(lik, y, m), rel=1e-11)
    assert alpha == pytest.approx(g1, rel=1e-9)
    assert beta == pytest.approx(-g2, rel=1e-9)


def test_the_cavity_centred_rule_misses_a_heavy_count():
    """Why the adaptive rule: the likelihood of y = 1e6 has width 1e-3 in f; Gauss-Hermite nodes on
    a cavity N(13, 1) (80 of them) put none near it."""
    lik, y, m, v = Poisson(), 1e6, 13.0, 1.0
    want = reference(lik, y, m, v)
    gh = call_quadrature(lik, y, m, v, *gauss_hermite(80))
    assert abs(m + v * gh[1] - want[1]) > 1e-3
    assert call_moments(lik, y, m, v)[1] == pytest.approx(want[1], rel=1e-12)


@pytest.mark.parametrize(
    "lik, y", [(Poisson(), 3.0), (NegativeBinomial(2.0), 3.0), (StudentT(4.0, 1.0), 1.0)]
)
def test_degenerate_cavities_give_nans(lik, y):
    for m, v in ((0.0, 0.0), (0.0, -1.0), (0.0, math.nan), (math.nan, 1.0), (0.0, math.inf)):
        assert all(math.isnan(t) for t in call_tilted(lik, y, m, v))
    assert all(math.isnan(t) for t in call_tilted(lik, math.nan, 0.0, 1.0))


# ---------------------------------------------------------------- exact limits
def test_negative_binomial_tends_to_the_poisson():
    """As r grows the negative binomial becomes the Poisson, its log-density by O(y^2 / r): the
    tilted moments' distance falls as 1 / r."""
    y, m, v = 40.0, 3.0, 0.5
    want = np.array(call_moments(Poisson(), y, m, v))
    gaps = {}
    for r in (1e6, 1e8, 1e12):
        got = np.array(call_moments(NegativeBinomial(r), y, m, v))
        gaps[r] = np.abs(got - want).max()
        for f in (-2.0, 3.7, 6.0):
            assert call_log_lik(NegativeBinomial(r), y, f) == pytest.approx(
                call_log_lik(Poisson(), y, f), rel=1e2 * y * y / r
            )
    assert 50 < gaps[1e6] / gaps[1e8] < 200
    assert gaps[1e12] < 1e-9


def test_student_t_tends_to_the_gaussian():
    """As df grows the Student-t becomes the Gaussian of variance scale^2 (its closed-form tilted),
    by O(1 / df)."""
    scale, y, m, v = 0.8, 1.9, 0.4, 2.0
    gaussian = Gaussian(scale * scale)
    nodes, weights = np.zeros(1), np.ones(1)
    want = np.array(_gaussian_tilted(gaussian, y, m, v, nodes, weights))
    for f in (-3.0, 0.5, 4.0):
        e2 = ((y - f) / scale) ** 2  # the gap: (e^2 / 2 - e^4 / 4) / df + O(df^-2)
        got, want_f = call_log_lik(StudentT(1e15, scale), y, f), call_log_lik(gaussian, y, f)
        assert abs(got - want_f) <= (e2 * e2 + e2 + 1.0) / 1e15 + 4 * EPS * abs(want_f)
    gaps = {}
    for df in (1e4, 1e6):
        got = np.array(call_tilted(StudentT(df, scale), y, m, v))
        gaps[df] = np.abs(got - want).max()
    assert 50 < gaps[1e4] / gaps[1e6] < 200
    assert gaps[1e6] < 1e-5


@njit
def _gaussian_tilted(lik, y, m, v, nodes, weights):
    return tilted(lik, y, m, v, nodes, weights)


# ---------------------------------------------------------------- a user's own log-density
@njit
def textbook_poisson(y, f):
    return y * f - math.exp(f) - math.lgamma(y + 1.0)


def test_custom_equal_to_the_poisson_gives_its_moments():
    """A Custom written to equal the Poisson (its textbook formula, derivatives by central
    differences) gives the built-in's tilted moments to 1e-9, through uncached callers."""
    lik = custom_likelihood(textbook_poisson)
    moments, tilted_ = uncached(call_moments), uncached(call_tilted)
    for y in (0.0, 1.0, 3.0, 1e3):
        for m, v in ((0.0, 1.0), (math.log(y + 1.0), 0.01), (-5.0, 900.0), (6.0, 1e-6), (20.0, 25.0)):
            got, want = moments(lik, y, m, v), call_moments(Poisson(), y, m, v)
            assert got[0] == pytest.approx(want[0], rel=1e-9)
            assert got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-9 * math.sqrt(want[2]))
            assert got[2] == pytest.approx(want[2], rel=1e-9)
            log_z, alpha, beta = tilted_(lik, y, m, v)
            assert log_z == got[0]
            assert m + v * alpha == pytest.approx(got[1], rel=1e-12, abs=1e-12 * math.sqrt(got[2]))


def test_custom_compiles_once_and_stays_off_the_disk_cache():
    """The same logpdf gives the same class; the uncached copies are memoised, so a second call
    (with a second instance) compiles nothing; no cached kernel was compiled for the class."""

    @njit
    def shifted_poisson(y, f):
        return textbook_poisson(y, f - 0.5)

    lik = custom_likelihood(shifted_poisson)
    assert type(custom_likelihood(shifted_poisson)) is type(lik)
    assert type(lik) is not type(custom_likelihood(textbook_poisson))
    moments = uncached(call_moments)
    assert uncached(call_moments) is moments
    first = moments(lik, 3.0, 0.2, 1.0)
    n_signatures = len(moments.signatures)
    assert moments(custom_likelihood(shifted_poisson), 3.0, 0.2, 1.0) == first
    assert len(moments.signatures) == n_signatures
    log_z, mean, var = call_moments(Poisson(), 3.0, -0.3, 1.0)  # (f - 0.5 has the cavity N(-0.3, 1))
    assert first == pytest.approx((log_z, mean + 0.5, var), rel=1e-9)
    for module in vars(likelihoods).values():
        for obj in vars(module).values() if hasattr(module, "__dict__") else ():
            if isinstance(obj, CPUDispatcher):
                assert not any(
                    type(lik) in (getattr(t, "instance_class", None) for t in sig) for sig in obj.signatures
                )
