"""Scalar special functions for the kernels: Gaussian tail ratios and the logistic function.

All are serial ``@njit`` leaves that take and return floats, never raise, and stay finite over
the whole real line (numba has no ``log_ndtr`` and ``math.erfc`` underflows near z = -38).

The two functions on the hot paths, the inverse Mills ratio phi(z)/Phi(z) (once per probit site)
and the logistic sigmoid (once per quadrature node), are evaluated from piecewise Chebyshev
tables built at import time from scipy's ``erfcx`` and ``expit`` (relative error below 1e-14,
tested against mpmath): a table lookup and a degree-8 to -10 polynomial cost about a third of
``math.erfc`` + ``math.exp``. Outside the tabulated ranges they fall back to exact formulas.
The table lookups are scalar code (a gather per coefficient); the logistic CEP node sums use the
table-free ``exp_bounded`` / ``sigmoid_pair_bounded`` instead, which compile to SIMD code, and
the probit CEP rows evaluate r exactly once per row and a Taylor polynomial about that point
per site (``inv_mills_taylor``), where it is exact to double precision (BENCHMARKS.md, issue 2).
``inv_mills_simd`` is a table-free r(z) for the whole real line (Weideman's rational approximation
of erfcx, inlined in numba's IR) for loops that should compile to SIMD code.

The count and Student-t likelihoods (``likelihoods.poisson``, ``negbin``, ``student_t``) need
the differences of large values without their cancellation: ``log1pmx`` = log(1 + x) - x,
``expm1mx`` = exp(x) - 1 - x and ``lgamma_correction``, the remainder of Stirling's series
(lgamma(y + 1) for y = 1e8 is 1.7e9, whose last bit is 2e-7).
"""

import math
from decimal import Decimal, localcontext

import numpy as np
from numba import njit
from numpy.polynomial import chebyshev as _cheb
from scipy.special import erfcx as _erfcx
from scipy.special import expit as _expit

from ._config import LEAF

SQRT2 = math.sqrt(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@njit(**LEAF)
def finite(x):
    """Whether the float x is finite, in a form the kernels' fastmath keeps: numba's
    ``math.isfinite(x)`` is ``x - x`` compared with itself, and with ``reassoc`` and ``nsz`` LLVM
    folds that to true when x is itself a sum or a difference (seen: ``math.isfinite(a - b)`` was
    True for a = -inf, b = 0), so a guard against an infinite message or gradient was compiled
    away. A comparison is never folded without ``nnan`` / ``ninf``, which the kernels do not set.
    Every kernel uses this one (tests/test_style.py)."""
    return abs(x) < math.inf


#: below this z the ratio phi(z)/Phi(z) comes from the asymptotic series, not from erfc
_TAIL_Z = -30.0


def _chebyshev_table(f, lo, hi, width, degree):
    """Per interval [lo + k width, lo + (k + 1) width): monomial coefficients in t in [-1, 1],
    highest degree first, of the Chebyshev interpolant of f at degree + 1 Chebyshev nodes."""
    n = int(round((hi - lo) / width))
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    table = np.zeros((n, degree + 1))
    for k in range(n):
        a = lo + k * width
        coef = _cheb.cheb2poly(_cheb.chebfit(nodes, f(a + 0.5 * (nodes + 1.0) * width), degree))
        table[k, : coef.size] = coef
    return np.ascontiguousarray(table[:, ::-1])


#: inverse Mills ratio r(z) = sqrt(2/pi) / erfcx(-z/sqrt(2)) on [-30, 3]
_MILLS_LO, _MILLS_HI, _MILLS_INV_H = _TAIL_Z, 3.0, 4.0
_MILLS_TAB = _chebyshev_table(
    lambda z: math.sqrt(2.0 / math.pi) / _erfcx(-z / SQRT2), _MILLS_LO, _MILLS_HI, 1.0 / _MILLS_INV_H, 10
)
#: sigmoid(t) on [-40, 0] (t > 0 by symmetry)
_SIG_LO, _SIG_INV_H = -40.0, 4.0
_SIG_TAB = _chebyshev_table(_expit, _SIG_LO, 0.0, 1.0 / _SIG_INV_H, 8)


@njit(**LEAF)
def _table_eval(table, lo, inv_h, z):
    """Piecewise polynomial of ``_chebyshev_table`` at z (z within the table's range)."""
    u = (z - lo) * inv_h
    k = min(int(u), table.shape[0] - 1)
    t = 2.0 * (u - k) - 1.0
    p = table[k, 0]
    for j in range(1, table.shape[1]):
        p = p * t + table[k, j]
    return p


@njit(**LEAF)
def _tail_series(z):
    """S(z) = (-z) Phi(z) / phi(z) = 1 - 1/z^2 + 3/z^4 - 15/z^6 + ... for z <= -30 (error < 1e-17)."""
    w = 1.0 / (z * z)
    # (2k - 1)!! (-w)^k, k = 0..8, in Horner form
    s = 1.0 - 15.0 * w  # k = 8 factor: 2k-1 = 15
    s = 1.0 - 13.0 * w * s
    s = 1.0 - 11.0 * w * s
    s = 1.0 - 9.0 * w * s
    s = 1.0 - 7.0 * w * s
    s = 1.0 - 5.0 * w * s
    s = 1.0 - 3.0 * w * s
    s = 1.0 - 1.0 * w * s
    return s


@njit(**LEAF)
def log_ndtr(z):
    """log Phi(z), the log of the standard normal CDF, accurate on the whole real line."""
    if z > 0.0:
        return math.log1p(-0.5 * math.erfc(z / SQRT2))
    if z > _TAIL_Z:
        return math.log(0.5 * math.erfc(-z / SQRT2))
    # Phi(z) = phi(z) S(z) / (-z)
    return -0.5 * z * z - LOG_SQRT_2PI - math.log(-z) + math.log(_tail_series(z))


@njit(**LEAF)
def _inv_mills_low(z):
    """r(z) for z <= 3: table, or the asymptotic series below -30."""
    if z < _TAIL_Z:
        return -z / _tail_series(z)
    return _table_eval(_MILLS_TAB, _MILLS_LO, _MILLS_INV_H, z)


@njit(**LEAF)
def inv_mills_tabulated(z):
    """r(z) from the table only, exact for -30 <= z <= 3 (branch-free, SIMD-friendly).

    Outside that range the result is that of the nearest end; callers fix those sites up with
    ``inv_mills`` (see ``MILLS_TABLE_RANGE``).
    """
    return _table_eval(_MILLS_TAB, _MILLS_LO, _MILLS_INV_H, min(max(z, _MILLS_LO), _MILLS_HI))


#: (lo, hi): where ``inv_mills_tabulated`` is exact
MILLS_TABLE_RANGE = (_MILLS_LO, _MILLS_HI)


@njit(**LEAF)
def inv_mills(z):
    """r(z) = phi(z) / Phi(z), the inverse Mills ratio, finite for every finite z."""
    if z <= _MILLS_HI:
        return _inv_mills_low(z)
    # Phi(z) = 1 - Q(z) with Q(z) = phi(z) / r(-z): no cancellation, phi may underflow to 0
    phi = INV_SQRT_2PI * math.exp(-0.5 * z * z)
    return phi / (1.0 - phi / _inv_mills_low(-z))


#: terms c_0..c_8 of the Taylor polynomial of ``inv_mills_taylor``; c_9 and c_10 estimate the remainder
MILLS_TAYLOR_TERMS = 9
#: the polynomial is used for |z - z0| <= this radius at most (well inside the radius of
#: convergence, >= 2.8: the zeros of Phi nearest the real axis are at 1.92 +- 2.82i)
MILLS_TAYLOR_RADIUS = 0.1


@njit(**LEAF)
def inv_mills_taylor(z0):
    """Taylor coefficients (c_0, ..., c_10) of r(z) = phi(z)/Phi(z) about z0:
    r(z0 + h) = sum_n c_n h^n.

    From the Riccati equation r' = -r (z + r): c_0 = r(z0),
    (n + 1) c_{n+1} = -(z0 c_n + c_{n-1} + sum_{i <= n} c_i c_{n-i}), written out so that the
    coefficients stay in registers (a buffer row shared with the row's other scratch made the
    probit sweep 6x slower). A row of probit CEP sites has nearly the same z at every site (the
    sites differ by one weight's share of the cavity), so one exact r per row and a polynomial
    per site replace a table lookup per site, which is scalar code (``probit._cep_row``).
    """
    c0 = inv_mills(z0)
    c1 = -(z0 * c0 + c0 * c0)
    c2 = -(z0 * c1 + c0 + 2.0 * c0 * c1) / 2.0
    c3 = -(z0 * c2 + c1 + 2.0 * c0 * c2 + c1 * c1) / 3.0
    c4 = -(z0 * c3 + c2 + 2.0 * (c0 * c3 + c1 * c2)) / 4.0
    c5 = -(z0 * c4 + c3 + 2.0 * (c0 * c4 + c1 * c3) + c2 * c2) / 5.0
    c6 = -(z0 * c5 + c4 + 2.0 * (c0 * c5 + c1 * c4 + c2 * c3)) / 6.0
    c7 = -(z0 * c6 + c5 + 2.0 * (c0 * c6 + c1 * c5 + c2 * c4) + c3 * c3) / 7.0
    c8 = -(z0 * c7 + c6 + 2.0 * (c0 * c7 + c1 * c6 + c2 * c5 + c3 * c4)) / 8.0
    c9 = -(z0 * c8 + c7 + 2.0 * (c0 * c8 + c1 * c7 + c2 * c6 + c3 * c5) + c4 * c4) / 9.0
    c10 = -(z0 * c9 + c8 + 2.0 * (c0 * c9 + c1 * c8 + c2 * c7 + c3 * c6 + c4 * c5)) / 10.0
    return (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10)


@njit(**LEAF)
def inv_mills_taylor_ok(c, h_max):
    """Whether the polynomial of ``inv_mills_poly`` (MILLS_TAYLOR_TERMS terms) gives r to double
    precision for every |h| <= h_max: h_max within MILLS_TAYLOR_RADIUS, the next two terms below
    1e-17 r(z0), and r(z0) far from underflow (the series of a tail value near 1e-300 would
    lose its relative accuracy). False for a NaN h_max or z0."""
    tail = abs(c[9]) * h_max**9 + abs(c[10]) * h_max**10
    return h_max <= MILLS_TAYLOR_RADIUS and c[0] > 1e-280 and tail <= 1e-17 * c[0]


@njit(**LEAF)
def inv_mills_poly(c, h):
    """r(z0 + h) from the coefficients of ``inv_mills_taylor`` (Horner, terms c_0..c_8)."""
    return c[0] + h * (
        c[1] + h * (c[2] + h * (c[3] + h * (c[4] + h * (c[5] + h * (c[6] + h * (c[7] + h * c[8]))))))
    )


@njit(**LEAF)
def sigmoid_pair(t):
    """(sigmoid(t), 1 - sigmoid(t)) without overflow or cancellation."""
    a = -abs(t)
    if a < _SIG_LO:
        e = math.exp(a)
        small = e / (1.0 + e)
    else:
        small = _table_eval(_SIG_TAB, _SIG_LO, _SIG_INV_H, a)
    if t >= 0.0:
        return 1.0 - small, small
    return small, 1.0 - small


#: Cody-Waite split of ln 2: k * _LN2_HI is exact for |k| < 2^29 (24 significant bits), and
#: _LN2_LO = ln 2 - _LN2_HI to double precision (from a 40-digit ln 2)
_LN2_HI = float(np.float32(math.log(2.0)))
with localcontext() as _ctx:
    _ctx.prec = 40
    _LN2_LO = float(Decimal(2).ln() - Decimal(_LN2_HI))
_INV_LN2 = 1.0 / math.log(2.0)
#: 1.5 2^52: adding it to an integer-valued double leaves the integer in the low mantissa bits
_MAGIC = 6755399441055744.0


@njit(**LEAF)
def exp_bounded(t):
    """exp(t) for -708 <= t <= 0, without a table or a branch (SIMD-friendly); relative error
    about 2e-16 (tested against mpmath).

    t = k ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite, whose order of operations the kernels'
    fastmath keeps: it has no ``reassoc``, ``_config``);
    exp(r) by its Taylor polynomial of degree 13 (remainder < 3e-18), times 2^k built from its
    bits (exact while 2^k is a normal number, k >= -1022). Outside the range the result is
    wrong; callers clamp t or fix those values up.
    """
    k = np.floor(t * _INV_LN2 + 0.5)  # a float: math.floor gives an int, which blocks SIMD
    r = (t - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0  # 1/13!
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    # 2^k from its bits: k + 1.5 2^52 holds k + 1023 in its low mantissa bits (k <= 0), which
    # shifted into the exponent field give 2^k; integer shifts compile to SIMD, unlike int(k)
    bits = np.float64(k + (_MAGIC + 1023.0)).view(np.int64)
    return p * np.int64(bits << 52).view(np.float64)


def _weideman_coefficients(n):
    """L and the coefficients a_0, ..., a_{n-1} (lowest degree first) of Weideman's approximation
    erfcx(x) = w(ix) ~ (2 p(Y) / (L + x) + 1/sqrt(pi)) / (L + x), p(Y) = sum_k a_k Y^k,
    Y = (L - x) / (L + x), for x >= 0 (J. A. C. Weideman, "Computation of the complex error
    function", SIAM J. Numer. Anal. 31 (1994), 1497-1518, with z = ix).

    The a_k are Fourier coefficients of (L^2 + t^2) exp(-t^2) in theta, t = L tan(theta / 2):
    an FFT of its values at theta = k pi / (2n), -2n <= k < 2n (0 at theta = -pi), with
    Weideman's L = sqrt(n / sqrt(2)).
    """
    m = 2 * n
    big_l = math.sqrt(n / math.sqrt(2.0))
    t = big_l * np.tan(np.arange(-m + 1, m) * np.pi / (2 * m))
    f = np.concatenate([[0.0], np.exp(-(t**2)) * (big_l**2 + t**2)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return big_l, a[1 : n + 1].copy()


#: n = 36 terms: erfcx to 4.3e-16 relative on x >= 0 when p is summed exactly (measured against
#: mpmath; n = 32 gives 3e-14, n = 40 gives 9e-17), far below the rounding of the double sum
_WEID_L, _WEID_A = _weideman_coefficients(36)
#: p(Y) = P_even(Y^2) + Y P_odd(Y^2): two independent Horner chains (highest degree first) of
#: half the length, which halves the latency of the sum
_WEID_EVEN = np.ascontiguousarray(_WEID_A[0::2][::-1])
_WEID_ODD = np.ascontiguousarray(_WEID_A[1::2][::-1])
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
#: exp(-z^2/4) is evaluated at min(z, 53): exp_bounded needs -z^2/4 >= -708, and from z = 38.6 on
#: r(z) = sqrt(2/pi) exp(-z^2/4)^2 (...) underflows to 0 anyway
_SIMD_EXP_Z = 53.0


@njit(**LEAF, inline="always")
def inv_mills_simd(z):
    """r(z) = phi(z) / Phi(z) for every z, with no table and no branch: a loop over an array of z
    that calls it compiles to packed SIMD code.

    r(z) = sqrt(2/pi) / erfcx(x) with x = -z / sqrt(2). With u = L + |x|, Y = 2L/u - 1 and the
    degree-35 polynomial p of ``_weideman_coefficients`` (Weideman's rational approximation),
    erfcx(|x|) = W = q / u with q = 2 p(Y) / u + 1/sqrt(pi), so

    * z <= 0: r = sqrt(2/pi) u / q, which tends to -z without forming x^2 (no overflow up to
      z = -1.8e308; -inf gives +inf);
    * z > 0: erfcx(x) = 2 exp(x^2) - erfcx(-x) gives r = sqrt(2/pi) e / (2 - e W) with
      e = exp(-z^2/2) in (0, 1] and 2 - e W >= 1 (no cancellation). The argument must be exact
      (one ulp of z^2/2 ~ 700 would cost 1e-13), so z = zh + zl with zh = z rounded to float32,
      whose square is exact, and e = E^2 with E = exp_bounded(-zh^2/4) times the cubic Taylor
      polynomial of exp(-zl (z + zh) / 4) (argument below 6e-5). The square keeps subnormal
      results right; from z ~ 38.6 on (and at +inf) r is exactly 0.

    Both sides are computed for every z and joined by selects (blend instructions); NaN gives
    NaN. Relative error against mpmath (40 digits) on 200,000 z in [-1e6, 37.6]: at most 1.7e-15,
    at |z| < 0.5; 4.4e-16 for z < -5, 8.9e-16 elsewhere; median 2.2e-16 (tests/test_special.py).
    Where r is subnormal (37.6 < z < 38.6) the error is at most 2 units of 5e-324.

    Why: ``inv_mills_tabulated`` loads its coefficients from a table indexed by z (a gather), so
    a loop that calls it stays scalar. ``inline="always"`` inlines the body in numba's IR: as an
    LLVM call it is above LLVM's inlining threshold, and a call in a loop body blocks
    vectorisation.
    """
    x = abs(z) * (1.0 / SQRT2)
    u = _WEID_L + x
    inv_u = 1.0 / u
    y = 2.0 * _WEID_L * inv_u - 1.0
    y2 = y * y
    p_even = _WEID_EVEN[0]
    p_odd = _WEID_ODD[0]
    for k in range(1, _WEID_EVEN.shape[0]):
        p_even = p_even * y2 + _WEID_EVEN[k]
        p_odd = p_odd * y2 + _WEID_ODD[k]
    q = 2.0 * (p_even + y * p_odd) * inv_u + _INV_SQRT_PI
    # E = exp(-z^2/4), used only for z > 0 (for z <= 0 it may be anything, even NaN)
    zc = min(z, _SIMD_EXP_Z)
    zh = np.float64(np.float32(zc))
    d = 0.25 * (zc - zh) * (zc + zh)
    big_e = exp_bounded(-0.25 * (zh * zh)) * (1.0 - d * (1.0 - d * (0.5 - d * (1.0 / 6.0))))
    e = big_e * big_e
    num = e if z > 0.0 else u
    den = 2.0 - e * (q * inv_u) if z > 0.0 else q
    return _SQRT_2_OVER_PI * num / den


#: |t| beyond which ``sigmoid_pair_bounded`` is not exact
SIGMOID_BOUNDED_LIMIT = 40.0


@njit(**LEAF)
def sigmoid_pair_bounded(t):
    """(sigmoid(t), 1 - sigmoid(t)) for |t| <= 40, without a table or a branch (SIMD-friendly).

    With e = exp(-|t|): the small value e / (1 + e) and the large one 1 / (1 + e), both to a
    few units in the last place. Outside [-40, 40] the result is that of the nearest end;
    callers fix those sites up exactly (``SIGMOID_BOUNDED_LIMIT``).
    """
    e = exp_bounded(max(-abs(t), -SIGMOID_BOUNDED_LIMIT))
    big = 1.0 / (1.0 + e)
    small = e * big
    return (big if t >= 0.0 else small), (small if t >= 0.0 else big)


@njit(**LEAF)
def log_sigmoid(t):
    """log(1 / (1 + exp(-t))) without overflow."""
    if t >= 0.0:
        return -math.log1p(math.exp(-t))
    return t - math.log1p(math.exp(t))


@njit(**LEAF)
def log1pmx(x):
    """log(1 + x) - x for x > -1, to a few units in the last place (no cancellation).

    For -0.5 <= x <= 1, with t = x / (2 + x) (|t| <= 1/3): log(1 + x) = 2 atanh(t), so
    log(1 + x) - x = -t x + 2 t^3 (1/3 + t^2/5 + t^4/7 + ...), 18 terms (t^36 / 37 < 1e-18).
    Elsewhere log1p(x) - x loses at most two bits.
    """
    if -0.5 <= x <= 1.0:
        t = x / (2.0 + x)
        u = t * t
        s = 1.0 / 37.0
        for j in range(16, -1, -1):
            s = s * u + 1.0 / (2 * j + 3)
        return -t * x + 2.0 * t * u * s
    return math.log1p(x) - x


@njit(**LEAF)
def expm1mx(x):
    """exp(x) - 1 - x, to a few units in the last place (no cancellation).

    For |x| <= 1 the Taylor series x^2 (1/2! + x/3! + ... + x^16/18!) (remainder < 1e-17
    relative); elsewhere expm1(x) - x loses at most two bits.
    """
    if -1.0 <= x <= 1.0:
        fact = 6402373705728000.0  # 18!
        s = 1.0 / fact
        for k in range(17, 1, -1):
            fact /= k + 1
            s = s * x + 1.0 / fact
        return x * x * s
    return math.expm1(x) - x


#: the coefficients B_2k / (2k (2k - 1)) of Stirling's series, k = 1..7
_STIRLING = (
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360360.0,
    1.0 / 156.0,
)


@njit(**LEAF)
def lgamma_correction(z):
    """lgamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2) for z > 0, absolute error below 1e-15.

    For z >= 10 Stirling's series to z^-13 (the next term is 3e-17 at z = 10); below, from
    ``math.lgamma`` (terms below 13 in size: error about 4e-15).
    """
    if z >= 10.0:
        w = 1.0 / (z * z)
        s = _STIRLING[6]
        for k in range(5, -1, -1):
            s = s * w + _STIRLING[k]
        return s / z
    return math.lgamma(z) - ((z - 0.5) * math.log(z) - z + LOG_SQRT_2PI)


@njit(**LEAF)
def softplus(t):
    """log(1 + exp(t)) without overflow."""
    if t > 0.0:
        return t + math.log1p(math.exp(-t))
    return math.log1p(math.exp(t))
