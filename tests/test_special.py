"""Special functions of the kernels against scipy."""

import math
import platform
import re

import mpmath
import numpy as np
import pytest
from numba import njit
from scipy.special import expit, log_expit, log_ndtr

from fastcep.kernels._config import LEAF
from fastcep.kernels.special import (
    MILLS_TAYLOR_RADIUS,
    exp_bounded,
    inv_mills,
    inv_mills_poly,
    inv_mills_simd,
    inv_mills_taylor,
    inv_mills_taylor_ok,
    log_sigmoid,
    sigmoid_pair,
    sigmoid_pair_bounded,
)
from fastcep.kernels.special import log_ndtr as nb_log_ndtr

Z = np.concatenate(
    [
        -np.logspace(5, -3, 300),
        [0.0],
        np.logspace(-3, 1.6, 300),
        np.linspace(-40, -25, 301),  # around the switch to the asymptotic series and erfc underflow
    ]
)


def _mp(fn):
    with mpmath.workdps(50):
        return np.array([float(fn(mpmath.mpf(float(z)))) for z in Z])


def test_log_ndtr_matches_scipy_and_mpmath():
    ours = np.array([nb_log_ndtr(z) for z in Z])
    np.testing.assert_allclose(ours, log_ndtr(Z), rtol=1e-12, atol=1e-300)
    ref = _mp(lambda z: mpmath.log1p(-mpmath.ncdf(-z)) if z > 0 else mpmath.log(mpmath.ncdf(z)))
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-300)


def test_log_ndtr_far_tail_is_finite_and_monotone():
    z = -np.logspace(1, 150, 200)
    vals = np.array([nb_log_ndtr(v) for v in z])
    assert np.all(np.isfinite(vals))
    assert np.all(np.diff(vals) < 0)  # z decreasing -> log Phi decreasing


def test_inv_mills_matches_mpmath():
    ours = np.array([inv_mills(z) for z in Z])
    ref = _mp(lambda z: mpmath.npdf(z) / mpmath.ncdf(z))
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-300)


def test_inv_mills_limits():
    # r(z) -> -z as z -> -inf and r(z) * (z + r(z)) stays in (0, 1)
    for z in (-1e3, -1e6, -1e150):
        r = inv_mills(z)
        assert r == pytest.approx(-z, rel=1e-6)
    for z in np.linspace(-35, 8, 200):
        r = inv_mills(z)
        assert 0 < r * (z + r) < 1
    assert inv_mills(40.0) == 0.0  # phi underflows; Phi = 1


def test_inv_mills_taylor_matches_mpmath_where_accepted():
    """The polynomial about z0 gives r(z0 + h) to the accuracy of r(z0) itself wherever
    ``inv_mills_taylor_ok`` accepts |h| <= h_max, and it is accepted for the small spreads of
    long rows over the whole range where r does not underflow."""
    checked = 0
    with mpmath.workdps(40):
        for z0 in np.concatenate([np.linspace(-45.0, 35.0, 161), [-1e4, -300.0]]):
            c = inv_mills_taylor(z0)
            assert inv_mills_taylor_ok(c, 1e-6), z0  # the spread of a row at large n
            for h_max in (1e-6, 1e-3, 1e-2, 0.05, MILLS_TAYLOR_RADIUS):
                if not inv_mills_taylor_ok(c, h_max):
                    continue
                for h in (-h_max, -0.37 * h_max, 0.61 * h_max, h_max):
                    z = mpmath.mpf(float(z0)) + mpmath.mpf(float(h))
                    ref = float(mpmath.npdf(z) / mpmath.ncdf(z))
                    assert inv_mills_poly(c, h) == pytest.approx(ref, rel=2e-14), (z0, h)
                    checked += 1
    assert checked > 1500
    c = inv_mills_taylor(0.5)
    assert inv_mills_taylor_ok(c, 0.05)
    assert not inv_mills_taylor_ok(c, 2.0 * MILLS_TAYLOR_RADIUS)  # outside the radius it allows
    assert not inv_mills_taylor_ok(c, np.nan)  # a NaN z in the row
    c = inv_mills_taylor(np.nan)
    assert not inv_mills_taylor_ok(c, 1e-6)
    c = inv_mills_taylor(39.0)  # r(39) underflows to 0: no relative accuracy left
    assert not inv_mills_taylor_ok(c, 1e-6)


def test_sigmoid_pair_and_log_sigmoid():
    t = np.concatenate([np.linspace(-800, 800, 1601), [-1e6, 1e6]])
    g = np.array([sigmoid_pair(v)[0] for v in t])
    omg = np.array([sigmoid_pair(v)[1] for v in t])
    # relative accuracy down to the smallest normal number; denormals compared absolutely
    np.testing.assert_allclose(g, expit(t), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(omg, expit(-t), rtol=1e-14, atol=1e-300)
    ls = np.array([log_sigmoid(v) for v in t])
    np.testing.assert_allclose(ls, log_expit(t), rtol=1e-14, atol=1e-300)


# the bounded functions run inside the SIMD loops of their callers: test them there too
@njit(**dict(LEAF, cache=False))
def _simd_exp(t, out):
    for i in range(t.shape[0]):
        out[i] = exp_bounded(t[i])


@njit(**dict(LEAF, cache=False))
def _simd_sigmoid(t, g, omg):
    for i in range(t.shape[0]):
        g[i], omg[i] = sigmoid_pair_bounded(t[i])


@njit(**dict(LEAF, cache=False))
def _simd_mills(z, out):
    for i in range(z.shape[0]):
        out[i] = inv_mills_simd(z[i])


def _mills_simd(z):
    z = np.ascontiguousarray(z, dtype=np.float64)
    out = np.empty_like(z)
    _simd_mills(z, out)
    return out


def test_exp_bounded_matches_mpmath_inside_a_simd_loop():
    t = np.concatenate([np.linspace(-708, 0, 7081), -np.logspace(-300, 2.85, 500), [-0.0]])
    out = np.empty_like(t)
    _simd_exp(t, out)
    with mpmath.workdps(40):
        ref = np.array([float(mpmath.exp(mpmath.mpf(float(v)))) for v in t])
    np.testing.assert_allclose(out, ref, rtol=1e-15, atol=0)  # measured: 2.2e-16


def test_sigmoid_pair_bounded_matches_mpmath_and_clamps_beyond_40():
    t = np.concatenate([np.linspace(-40, 40, 8001), [-1e-300, 1e-300]])
    g, omg = np.empty_like(t), np.empty_like(t)
    _simd_sigmoid(t, g, omg)
    with mpmath.workdps(40):
        ref = np.array([float(1 / (1 + mpmath.exp(-mpmath.mpf(float(v))))) for v in t])
        ref_o = np.array([float(1 / (1 + mpmath.exp(mpmath.mpf(float(v))))) for v in t])
    np.testing.assert_allclose(g, ref, rtol=2e-15, atol=0)  # measured: 4.4e-16
    np.testing.assert_allclose(omg, ref_o, rtol=2e-15, atol=0)
    far = np.array([-50.0, 50.0])
    gf, of = np.empty(2), np.empty(2)
    _simd_sigmoid(far, gf, of)
    end = np.empty(2), np.empty(2)
    _simd_sigmoid(np.array([-40.0, 40.0]), *end)
    np.testing.assert_array_equal(gf, end[0])
    np.testing.assert_array_equal(of, end[1])


#: z for r(z) = phi(z)/Phi(z): the log-spaced far tail, a fine grid over [-40, 40] (r is subnormal
#: from z = 37.6 on and 0 from z = 38.6 on) and tiny |z| of both signs
Z_MILLS = np.concatenate(
    [
        -np.logspace(6, np.log10(40.0), 400),
        np.linspace(-40.0, 40.0, 8001),
        np.logspace(-300, -1, 150),
        -np.logspace(-300, -1, 150),
    ]
)


def _mp_mills(z):
    with mpmath.workdps(40):
        return np.array([float(mpmath.npdf(v) / mpmath.ncdf(v)) for v in map(mpmath.mpf, map(float, z))])


def test_inv_mills_simd_matches_mpmath_inside_a_simd_loop():
    ours = _mills_simd(Z_MILLS)
    ref = _mp_mills(Z_MILLS)
    # relative while r is a normal number; subnormal r (z > 37.6) to a few units of 5e-324
    np.testing.assert_allclose(ours, ref, rtol=5e-15, atol=2e-322)  # measured: 1.1e-15, 1e-323
    assert np.all(ours[Z_MILLS > 38.6] == 0.0)
    # the scalar call (compiled without the loop) agrees
    sub = Z_MILLS[::37]
    np.testing.assert_allclose([inv_mills_simd(v) for v in sub], ref[::37], rtol=5e-15, atol=2e-322)


def test_inv_mills_simd_special_points():
    sqrt_2_pi = math.sqrt(2.0 / math.pi)
    z = np.array(
        [0.0, -0.0, 1e-300, -1e-300, 38.5, -38.5, -1e154, -1e300, -1.7e308, 1e300, np.inf, -np.inf, np.nan]
    )
    for r in (_mills_simd(z), np.array([inv_mills_simd(v) for v in z])):
        np.testing.assert_allclose(r[:4], sqrt_2_pi, rtol=1e-15, atol=0)  # measured: 5.6e-16
        assert r[4] == pytest.approx(_mp_mills([38.5])[0], rel=0, abs=2e-322)  # subnormal: 5.4e-323
        assert r[4] > 0.0
        assert r[5] == pytest.approx(_mp_mills([-38.5])[0], rel=2e-15)
        # -z / (1 - 1/z^2 + ...) is -z in double precision; nothing overflows
        np.testing.assert_allclose(r[6:9], -z[6:9], rtol=1e-15, atol=0)
        assert r[9] == 0.0 and r[10] == 0.0  # exp(-z^2/2) underflows: exactly 0, not NaN
        assert r[11] == np.inf
        assert np.isnan(r[12])


def test_inv_mills_simd_limits_and_slope():
    # r(z) -> -z as z -> -inf (r = -z (1 + 1/z^2 + ...)) and 0 < -r'(z) = r (z + r) < 1
    for z in (-1e4, -1e6, -1e150, -1e300):
        assert inv_mills_simd(z) == pytest.approx(-z, rel=2e-8)
    z = np.linspace(-35.0, 30.0, 6501)
    r = _mills_simd(z)
    assert np.all(r > 0.0)
    assert np.all((r * (z + r) > 0.0) & (r * (z + r) < 1.0))
    assert np.all(np.diff(r) < 0.0)
    far = -np.logspace(1, 300, 300)
    assert np.all(np.diff(_mills_simd(far)) > 0.0)  # z decreasing -> r increasing, no overflow
    assert _mills_simd([0.0])[0] == pytest.approx(math.sqrt(2.0 / math.pi), rel=1e-15, abs=0)


def test_inv_mills_simd_agrees_with_inv_mills(rng):
    # inv_mills loses accuracy like exp(-z^2/2) for large z (2.8e-14 at z = 23, 5.7e-14 at z = 36):
    # compare where it is accurate to 1.5e-14
    z = np.concatenate(
        [
            rng.uniform(-40.0, 20.0, 20000),
            3.0 * rng.standard_normal(20000),
            -(10.0 ** rng.uniform(1, 6, 2000)),
        ]
    )
    ours = _mills_simd(z)
    exact = np.array([inv_mills(v) for v in z])
    np.testing.assert_allclose(ours, exact, rtol=5e-14, atol=0)  # measured: 1.4e-14 (inv_mills' error)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 assembly")
def test_inv_mills_simd_loop_compiles_to_packed_code():
    """A loop over inv_mills_simd is vectorised: its two divisions per z appear as packed divpd
    (a call left in the loop body, a branch or a table gather would keep it scalar)."""
    _mills_simd(np.zeros(8))
    asm = _simd_mills.inspect_asm(_simd_mills.signatures[0])
    assert re.search(r"\bv?divpd\b", asm), "no packed division in the loop"
    assert "inv_mills_simd" not in re.sub(r"^\S.*$", "", asm, flags=re.M), "the leaf is still a call"
