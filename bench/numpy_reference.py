"""A plain vectorised NumPy version of damped parallel CEP-1 for probit and logistic regression.

The baseline of issue 19's comparison: the same updates as ``fastcep.fit(..., method="cep1",
schedule="parallel")`` (DESIGN.md section 3.1), written as whole-array NumPy/SciPy operations
on the (n, d) site arrays, with no Python loop over rows and no Numba:

* messages fully factorised, in natural parameters ``tau`` (precision) and ``nu``
  (precision times mean), (n, d); they start flat, precision ``FLAT_PRECISION`` (exactly 0 where
  x_im = 0: that factor does not involve w_m); prior N(0, prior_var) on every weight;
* each sweep takes every cavity from one posterior, ``tc = T - tau``, ``nc = N - nu``;
* CEP-1: the other weights enter through their posterior means, ``b = x_i . mu - x_im mu_m``;
  probit moments analytic, with the inverse Mills ratio ``r = exp(log phi(z) - log Phi(z))``
  (``scipy.special.log_ndtr``: finite for any z); logistic moments by the 9-node probabilists'
  Gauss-Hermite rule with weights normalised to sum 1;
* new message ``tau* = 1/var - tc``, ``nu* = mean/var - nc`` (or, with
  ``message="cancellation_free"``, the same quantities in the kernels' form, see ``new_messages``);
  a message whose new precision is not positive (or whose cavity is improper, or that is not
  finite) is skipped: the old one is kept;
* the conventions of the kernels (``kernels/glm/sweep.py``): a factor that carries no
  information about w_m (x_im = 0, or a probit ratio r that underflowed to 0) gives the exactly
  flat message (0, 0), which is applied, not skipped;
* damping in natural parameters, ``msg <- (1 - damping) msg + damping new``;
* posterior = prior + sum of the sites.

``sweeps(X, y, model, n_sweeps, damping)`` runs ``n_sweeps`` such sweeps and returns the
posterior means and variances.
"""

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit, log_ndtr

#: precision of the flat messages at the start (fastcep's value, DESIGN.md section 3)
FLAT_PRECISION = 1e-6
#: log(sqrt(2 pi))
LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def gauss_hermite(n_nodes=9):
    """Probabilists' Gauss-Hermite nodes and weights (n_nodes,), the weights normalised to sum 1."""
    nodes, weights = hermegauss(n_nodes)
    return nodes, weights / weights.sum()


def label_signs(y):
    """Labels {0, 1}, {-1, 1} or bool (n,) -> signs s = +-1 (n,) float64."""
    y = np.asarray(y)
    if y.dtype == bool:
        return np.where(y, 1.0, -1.0)
    return np.where(y > 0, 1.0, -1.0)


def inv_mills(z):
    """phi(z) / Phi(z) elementwise, as exp(log phi(z) - log Phi(z)): no underflow for z << 0."""
    return np.exp(-0.5 * z * z - LOG_SQRT_2PI - log_ndtr(z))


def initial_sites(X):
    """Flat start: tau (n, d) = FLAT_PRECISION where X != 0, else 0; nu (n, d) = 0."""
    return np.where(X != 0.0, FLAT_PRECISION, 0.0), np.zeros(X.shape)


def posterior(tau, nu, prior_var=1.0):
    """Natural parameters (T, N) (d,) of prior N(0, prior_var) times the sites."""
    return 1.0 / prior_var + tau.sum(axis=0), nu.sum(axis=0)


def probit_moments(X, s, mc, vc, b):
    """CEP-1 conditional tilted moments of w_m under N(w | mc, vc) Phi(s (x w + b)), (n, d) each.

    Returns (delta, a, var, none): tilted mean mc + delta, variance var = vc (1 - a), and a mask of
    the sites that carry no information (x = 0, or r underflowed to 0: the moments are the cavity's).
    """
    xvc = X * vc
    den2 = 1.0 + X * xvc
    den = np.sqrt(den2)
    z = s[:, None] * (X * mc + b) / den
    r = inv_mills(z)
    delta = s[:, None] * xvc * r / den
    a = X * xvc * r * (z + r) / den2
    var = vc - xvc * xvc * r * (z + r) / den2
    return delta, a, var, X * X * r == 0.0


def logistic_moments(X, s, mc, vc, b, nodes, weights):
    """CEP-1 conditional tilted moments of w_m under N(w | mc, vc) sigmoid(s (x w + b)), (n, d) each,
    by Gauss-Hermite over the cavity: (delta, a, var, none) as in ``probit_moments``. The moments
    are formed about the cavity mean in units of the cavity standard deviation (f1, f2), so that
    the variance has no E[w^2] - E[w]^2 cancellation in the original scale."""
    sv = np.sqrt(vc)
    sx = s[:, None] * X
    t = (sx * mc + s[:, None] * b)[..., None] + (sx * sv)[..., None] * nodes  # (n, d, J)
    h = weights * expit(t)
    e0 = h.sum(axis=-1)
    f1 = (h * nodes).sum(axis=-1) / e0
    f2 = (h * (nodes * nodes)).sum(axis=-1) / e0
    c = f2 - f1 * f1
    return sv * f1, 1.0 - c, vc * c, X == 0.0


def new_messages(tc, nc, mc, vc, delta, a, var, none, message="design"):
    """New sites (tau*, nu*, ok) (n, d) from the tilted moments; ok False: skip (keep the old one).

    message="design": DESIGN.md's ``tau* = 1/var - tc``, ``nu* = mean/var - nc``; for a weak
    factor (a below about 1e-13) 1/var - tc is mostly rounding error, and can be <= 0 (skipped).
    message="cancellation_free": the same quantities written as fastcep's kernels write them
    (``kernels/glm/sweep.py: message_from_moments``), ``tau* = tc a / (1 - a)``,
    ``nu* = (delta tc + nc a) / (1 - a)``, exact for weak factors too.
    A site in ``none`` gets the exactly flat message (0, 0), applied (the kernels' convention).
    """
    if message == "design":
        t_new = 1.0 / var - tc
        n_new = (mc + delta) / var - nc
        ok = (tc > 0.0) & (var > 0.0)
    elif message == "cancellation_free":
        inv = 1.0 / (1.0 - a)
        t_new = tc * a * inv
        n_new = (delta * tc + nc * a) * inv
        ok = (tc > 0.0) & (a > 0.0) & (a < 1.0)
    else:
        raise ValueError(f"message must be 'design' or 'cancellation_free'; got {message!r}")
    t_new[none] = 0.0
    n_new[none] = 0.0
    ok = none | (ok & (t_new > 0.0) & np.isfinite(t_new) & np.isfinite(n_new))
    return t_new, n_new, ok


def sweep(X, s, tau, nu, T, N, model, damping, nodes=None, weights=None, message="design"):
    """One damped parallel CEP-1 sweep: tau, nu (n, d) updated in place; returns the number of
    skipped messages. T, N (d,): the posterior natural parameters the cavities are taken from."""
    mu = N / T
    tc = T - tau
    nc = N - nu
    vc = 1.0 / tc
    mc = nc * vc
    b = (X @ mu)[:, None] - X * mu  # sum_{l != m} x_il mu_l
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if model == "probit":
            delta, a, var, none = probit_moments(X, s, mc, vc, b)
        else:
            delta, a, var, none = logistic_moments(X, s, mc, vc, b, nodes, weights)
        t_new, n_new, ok = new_messages(tc, nc, mc, vc, delta, a, var, none, message)
    tau[ok] = (1.0 - damping) * tau[ok] + damping * t_new[ok]
    nu[ok] = (1.0 - damping) * nu[ok] + damping * n_new[ok]
    return int(ok.size - np.count_nonzero(ok))


def sweeps(X, y, model, n_sweeps, damping, prior_var=1.0, n_nodes=9, message="design", return_state=False):
    """Damped parallel CEP-1 from the flat start.

    Parameters
    ----------
    X : (n, d) float64
    y : (n,) labels {0, 1}, {-1, 1} or bool
    model : {"probit", "logistic"}
    n_sweeps : int
    damping : float in (0, 1]
    prior_var : float, variance of the N(0, prior_var) prior of every weight
    n_nodes : int, Gauss-Hermite nodes of the logistic moments
    message : {"design", "cancellation_free"}, how tau*, nu* are formed (``new_messages``)

    Returns
    -------
    mean, var : (d,) float64 posterior means and variances (and, with ``return_state``, a dict
    with the sites ``tau``, ``nu`` and the skipped messages per sweep)
    """
    if model not in ("probit", "logistic"):
        raise ValueError(f"model must be 'probit' or 'logistic'; got {model!r}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    s = label_signs(y)
    nodes, weights = gauss_hermite(n_nodes)
    tau, nu = initial_sites(X)
    T, N = posterior(tau, nu, prior_var)
    skipped = []
    for _ in range(n_sweeps):
        skipped.append(sweep(X, s, tau, nu, T, N, model, damping, nodes, weights, message))
        T, N = posterior(tau, nu, prior_var)
    if return_state:
        return N / T, 1.0 / T, {"tau": tau, "nu": nu, "skipped": skipped}
    return N / T, 1.0 / T
