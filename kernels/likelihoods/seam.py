"""The likelihood seam (DESIGN.md section 7): the generic leaves that drivers call.

A likelihood is a ``NamedTuple`` class, its parameters as fields (``Gaussian(var)``; ``Probit()``
has none), and scalar ``@njit`` leaves registered for that class with ``register``:
- ``log_lik(lik, y, f)``: log p(y | f) for scalar f (required);
- ``log_lik_derivs(lik, y, f)``: (d/df, d^2/df^2) of log p(y | f) (optional);
- ``tilted(lik, y, m, v, nodes, weights)``: closed-form moments of the tilted distribution
  p(y | f) N(f | m, v) (optional);
- ``log_predictive(lik, y, m, v)``: log int p(y | f) N(f | m, v) df, the predictive density of y
  (optional; else the log Z of ``tilted``);
- ``log_lik_step(lik, y, f, x)``: log p(y | f + x) - log p(y | f) without the cancellation of
  two large values (optional; else that difference). For a count y = 1e8 log p(y | f) is about
  -1e7 a few likelihood widths from its peak, and its last bit is 2e-9: the integrand of a
  quadrature built on differences of it would carry that noise;
- ``peak(lik, y)``: argmax_f p(y | f), for likelihoods that are not log-concave in f (optional):
  ``adaptive.adaptive_tilted`` looks for a second mode of the tilted distribution from there.

``register(cls, log_concave=False, ...)`` marks a likelihood that may not be log-concave in f
(Student-t, a user's own). Its tilted variance can exceed the cavity's (an outlier's bimodal
tilted), so its EP and CEP sites may have negative precisions, which the drivers then keep
(``not_log_concave``; ``glm.generic.site_message``). For a log-concave likelihood such a site
cannot arise, and a slightly negative one is quadrature noise, refused as before.

Drivers call the generic functions below with the likelihood as an argument. numba resolves them
at compile time by the argument's type (``numba.extending.overload``), so one driver serves every
likelihood, compiled once per likelihood class and cached on disk (the type of a NamedTuple is
stable across processes; a jitted function passed as an argument is not, and would compile again
in every process). A likelihood without a closed-form ``tilted`` gets its moments by Gauss-Hermite
quadrature: ``mixed_tilted`` when it has ``log_lik_derivs``, else ``quadrature_tilted``. Those
rules are centred on the cavity N(m, v): they miss a likelihood much narrower than the cavity
(a count y = 1e6 has width 1e-3 in f). The count likelihoods (``poisson``, ``negbin``), the
Student-t (``student_t``) and a user's log-density (``custom``) register instead
``adaptive.adaptive_tilted`` as their ``tilted`` leaf: a rule centred on the tilted mode with the
Laplace scale, refined until it has converged (about 1e-11 relative, its docstring has the error
analysis); it ignores the given Gauss-Hermite rule. Probit, logistic and Gaussian keep the paths
above.

Adding a likelihood: one module here (its class, its leaves, one ``register`` call) and one entry
in ``REGISTRY`` (``__init__``); the drivers do not change. Only this package's likelihoods may go
through the cached drivers: their caches are keyed by a digest of the sources below ``kernels/``
only (``kernels._cache``), so a driver cached with a leaf from elsewhere would keep that leaf's old
code after it changed. A user's log-density goes through ``custom.custom_likelihood`` and drivers
compiled by ``custom.uncached`` instead.

``tilted`` returns ``(log_z, alpha, beta)``: log Z = log int p(y | f) N(f | m, v) df, alpha =
d log Z / dm and beta = -d^2 log Z / dm^2, so that the tilted mean is m + v alpha and its variance
v - v^2 beta (the form in which a Gaussian reduction passes them on, see ``glm.generic``).
"""

import math

from numba import njit
from numba.extending import overload

from .._config import LEAF
from ..special import finite

#: (likelihood class, leaf name) -> the registered @njit leaf
_LEAVES = {}
LEAF_NAMES = ("log_lik", "log_lik_derivs", "tilted", "log_predictive", "log_lik_step", "peak")
#: the likelihood classes registered with log_concave=False
_NOT_LOG_CONCAVE = set()


def register(cls, log_concave=True, **leaves):
    """Register the @njit leaves of likelihood class ``cls`` (``log_lik`` required, the others
    optional) and return ``cls``. ``log_concave=False``: p(y | f) may not be log-concave in f
    (its sites may have negative precisions, see the module's text)."""
    unknown = set(leaves) - set(LEAF_NAMES)
    if unknown:
        raise TypeError(f"register: unknown leaves {sorted(unknown)}; the leaves are {LEAF_NAMES}")
    if "log_lik" not in leaves:
        raise TypeError(f"register: {cls.__name__} needs a log_lik leaf")
    for name, leaf in leaves.items():
        _LEAVES[(cls, name)] = leaf
    if not log_concave:
        _NOT_LOG_CONCAVE.add(cls)
    return cls


def is_log_concave(cls):
    """Whether likelihood class ``cls`` was registered as log-concave in f (the default)."""
    return cls not in _NOT_LOG_CONCAVE


def not_log_concave(lik):
    """True for a likelihood registered with log_concave=False, a constant of the compiled code
    (in compiled code only)."""
    raise TypeError("not_log_concave is resolved by numba inside compiled code")


@overload(not_log_concave)
def _not_log_concave(lik):
    if getattr(lik, "instance_class", None) in _NOT_LOG_CONCAVE:
        return lambda lik: True
    return lambda lik: False


def has_leaf(cls, name):
    """Whether likelihood class ``cls`` has a registered leaf ``name``."""
    return (cls, name) in _LEAVES


def leaf_of(lik_type, name):
    return _LEAVES.get((getattr(lik_type, "instance_class", None), name))


def log_lik(lik, y, f):
    """log p(y | f) of likelihood ``lik`` (in compiled code only)."""
    raise TypeError("log_lik is resolved by numba inside compiled code")


def log_lik_derivs(lik, y, f):
    """(d/df, d^2/df^2) of log p(y | f) (in compiled code only)."""
    raise TypeError("log_lik_derivs is resolved by numba inside compiled code")


def log_lik_step(lik, y, f, x):
    """log p(y | f + x) - log p(y | f) (in compiled code only): the registered leaf, else the
    difference of two ``log_lik``."""
    raise TypeError("log_lik_step is resolved by numba inside compiled code")


def tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) of p(y | f) N(f | m, v) (in compiled code only): the registered
    closed form, else ``mixed_tilted`` or ``quadrature_tilted`` with the given Gauss-Hermite rule."""
    raise TypeError("tilted is resolved by numba inside compiled code")


def _pointwise(name):
    """The overload of a leaf of (lik, y, f): the registered leaf of lik's class, if any."""

    def resolve(lik, y, f):
        leaf = leaf_of(lik, name)
        if leaf is not None:
            return lambda lik, y, f: leaf(lik, y, f)
        return None

    return resolve


def log_predictive(lik, y, m, v, nodes, weights):
    """log int p(y | f) N(f | m, v) df (in compiled code only): the registered leaf, else the log Z
    of ``tilted`` with the given rule."""
    raise TypeError("log_predictive is resolved by numba inside compiled code")


overload(log_lik)(_pointwise("log_lik"))
overload(log_lik_derivs)(_pointwise("log_lik_derivs"))


@overload(log_lik_step)
def _log_lik_step(lik, y, f, x):
    leaf = leaf_of(lik, "log_lik_step")
    if leaf is not None:
        return lambda lik, y, f, x: leaf(lik, y, f, x)
    if leaf_of(lik, "log_lik") is not None:
        return lambda lik, y, f, x: log_lik(lik, y, f + x) - log_lik(lik, y, f)
    return None


@overload(tilted)
def _tilted(lik, y, m, v, nodes, weights):
    leaf = leaf_of(lik, "tilted")
    if leaf is not None:
        return lambda lik, y, m, v, nodes, weights: leaf(lik, y, m, v, nodes, weights)
    if leaf_of(lik, "log_lik_derivs") is not None:
        return lambda lik, y, m, v, nodes, weights: mixed_tilted(lik, y, m, v, nodes, weights)
    if leaf_of(lik, "log_lik") is not None:
        return lambda lik, y, m, v, nodes, weights: quadrature_tilted(lik, y, m, v, nodes, weights)
    return None


@overload(log_predictive)
def _log_predictive(lik, y, m, v, nodes, weights):
    leaf = leaf_of(lik, "log_predictive")
    if leaf is not None:
        return lambda lik, y, m, v, nodes, weights: leaf(lik, y, m, v)
    if leaf_of(lik, "log_lik") is not None:
        return lambda lik, y, m, v, nodes, weights: tilted(lik, y, m, v, nodes, weights)[0]
    return None


@njit(**LEAF)
def quadrature_tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) of p(y | f) N(f | m, v) by the Gauss-Hermite rule (probabilists'
    nodes, weights summing to one), in one pass: the node terms w_j p(y | m + sqrt(v) t_j) are
    summed relative to the largest so far (rescaled when a larger one comes), so that none
    underflows. NaNs when v is not positive or no node has a positive likelihood."""
    if not v > 0.0:
        return math.nan, math.nan, math.nan
    sd = math.sqrt(v)
    top = -math.inf
    z = 0.0
    s1 = 0.0
    s2 = 0.0
    for j in range(nodes.shape[0]):
        t = nodes[j]
        lt = math.log(weights[j]) + log_lik(lik, y, m + sd * t)
        if lt > top:
            scale = math.exp(top - lt)
            z *= scale
            s1 *= scale
            s2 *= scale
            top = lt
        p = math.exp(lt - top)
        z += p
        s1 += p * t
        s2 += p * t * t
    if not (finite(top) and z > 0.0):
        return math.nan, math.nan, math.nan
    e1 = s1 / z
    var_t = s2 / z - e1 * e1  # the tilted variance of t = (f - m) / sd
    # (for a weak factor, v small against its curvature, 1 - var_t cancels: beta loses about
    # log10(1 / (v |curvature|)) digits; ``derivative_tilted`` does not)
    return top + math.log(z), e1 / sd, (1.0 - var_t) / v


@njit(**LEAF)
def derivative_tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) as ``quadrature_tilted``, with alpha and beta as tilted expectations
    of the log-likelihood's derivatives g1, g2 (integration by parts): alpha = E[g1], beta =
    -E[g2] - Var[g1]. Nothing cancels when the factor is weak (v small against its curvature):
    the form of choice when ``log_lik_derivs`` is registered. Var[g1] is taken about g1(m)."""
    if not v > 0.0:
        return math.nan, math.nan, math.nan
    sd = math.sqrt(v)
    c1, c2 = log_lik_derivs(lik, y, m)
    top = -math.inf
    z = 0.0
    s1 = 0.0
    s11 = 0.0
    s2 = 0.0
    for j in range(nodes.shape[0]):
        f = m + sd * nodes[j]
        lt = math.log(weights[j]) + log_lik(lik, y, f)
        if lt > top:
            scale = math.exp(top - lt)
            z *= scale
            s1 *= scale
            s11 *= scale
            s2 *= scale
            top = lt
        p = math.exp(lt - top)
        g1, g2 = log_lik_derivs(lik, y, f)
        u = g1 - c1
        z += p
        s1 += p * u
        s11 += p * u * u
        s2 += p * g2
    if not (finite(top) and z > 0.0):
        return math.nan, math.nan, math.nan
    e1 = s1 / z
    return top + math.log(z), c1 + e1, -s2 / z - (s11 / z - e1 * e1)


#: ``mixed_tilted`` takes the derivative form below this v |d^2/df^2 log p(y | f)| at f = m
WEAK_FACTOR = 1.0


@njit(**LEAF)
def mixed_tilted(lik, y, m, v, nodes, weights):
    """(log Z, alpha, beta) by the form that is accurate for the factor at hand: with kappa = v
    |g2(m)|, ``derivative_tilted`` for weak factors (kappa < WEAK_FACTOR, where the plain form
    loses about log10(1 / kappa) digits), ``quadrature_tilted`` for strong ones or wide cavities
    (where the derivatives vary over the cavity and their rule converges more slowly: measured
    on the logistic at v = 9 with 60 nodes, 9e-6 against 4e-7, tests/test_likelihoods.py)."""
    g1, g2 = log_lik_derivs(lik, y, m)
    if v * abs(g2) < WEAK_FACTOR:
        return derivative_tilted(lik, y, m, v, nodes, weights)
    return quadrature_tilted(lik, y, m, v, nodes, weights)
