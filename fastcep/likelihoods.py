"""Likelihoods of one scalar f, for ``fastcep.fit(X, y, model=<likelihood>)`` (DESIGN.md section 7).

A likelihood says how an observation y depends on its linear predictor f = x.w (+ b, + offset):

- ``Bernoulli(link="probit" | "logistic")``: binary labels (``"probit"``, ``"logistic"``);
- ``Gaussian(var=None)``: real values, noise variance known or learned (``"gaussian"``);
- ``Poisson()``: counts, log link (``"poisson"``);
- ``NegativeBinomial(dispersion=None)``: over-dispersed counts, log link (``"negbin"``);
- ``StudentT(df=4.0, scale=None)``: real values with outliers (``"student_t"``);
- ``Custom(logpdf)``: a user's ``numba.njit`` log-density of two floats (y, f).

The strings in brackets are shorthands for the built-ins with their defaults. Each object checks
the values it accepts (``check``), hands the compiled kernels their numba form (``kernel``), and
gives the predictive mean and variance of y (``mean_var``) and its unit deviance where they have a
closed form; the count likelihoods give those of log(1 + y) too (``log1p_moments``). A parameter
given as None is learned by the fit (``learned``); the fitted object, with the learned values
filled in, is ``res.likelihood``.

How the parameters are learned: the Gaussian's noise precision has a conjugate Gamma(a0, b0)
posterior given the posterior marginals of f (the variational update, as ``cp_gaussian``'s); the
negative binomial's dispersion and the Student-t's scale maximise the expected log-likelihood
sum_i E[log p(y_i | f_i)] under those marginals (an EM step, one-dimensional, by quadrature),
once per sweep.
"""

import math
import re

import numpy as np

from . import _validation as V

#: the learned Gaussian noise precision's Gamma(a0, b0) prior: broad (as cp_gaussian's a0, b0)
NOISE_A0 = 1e-3
NOISE_B0 = 1e-3


class Likelihood:
    """The interface every likelihood offers (see the module's text)."""

    #: the registry code of its compiled leaves (``fastcep.kernels.likelihoods.REGISTRY``)
    name = None
    #: labels +-1 (checked as binary labels, scored by AUC)
    binary = False
    #: counts (checked as integers >= 0; ``log1p_moments`` gives the log scale's predictive)
    counts = False
    #: the names of the parameters learned by the fit (those given as None)
    learned = ()
    #: whether p(y | f) is log-concave in f; if not, EP and CEP keep sites of negative precision
    #: and the parallel schedule guards the posterior (as the kernel's registration says,
    #: ``kernels.likelihoods.seam``)
    log_concave = True

    def kernel(self):
        """The numba form of this likelihood (a NamedTuple of its parameters): what the compiled
        drivers take. Learned parameters must have values (``with_params``) first."""
        from .kernels.likelihoods import REGISTRY

        cls = REGISTRY[self.name]
        return cls(*(float(getattr(self, p)) for p in cls._fields))

    def params(self):
        """{name: value} of the parameters (None: learned, not yet fitted)."""
        return {}

    def driver(self, fn):
        """The compiled driver ``fn`` as this likelihood's kernels take it: ``fn`` itself (cached
        on disk) for the built-ins."""
        return fn

    def with_params(self, **values):
        """A copy with the given parameter values (the learned ones after a fit)."""
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        for name, value in values.items():
            setattr(out, name, value)
        out.learned = tuple(p for p in self.learned if getattr(out, p) is None)
        return out

    def check(self, y, name, func, n):
        """The values y (n,) checked for this likelihood, as float64 (binary: signs +-1)."""
        return _finite_vector(y, name, func, n)

    def mean_var(self, m, v):
        """Predictive mean and variance of y when f ~ N(m, v) (arrays), or None (no closed form)."""
        return None

    def log1p_moments(self, m, v):
        """Predictive mean and variance of log(1 + y) when f ~ N(m, v) (arrays) for the count
        likelihoods (``fastcep._log1p``), or None. The mean is the point prediction on the log
        scale: it minimises the expected square error there."""
        return None

    def link_values(self, y):
        """Rough values of f for the checked values y (arrays): what a CP fit's start factorises
        and sizes its embeddings by (``init="svd"``, the stream's first random means). y itself
        for the identity link and the binary labels +-1."""
        return y

    def unit_deviance(self, y, mean):
        """The deviance of y against a predicted mean (the scikit-learn / GLM convention), or None."""
        return None

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash((type(self), tuple(sorted(self.params().items()))))


def _as_vector(y, name, func, n):
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise V.param_error(name, func, "a 1-D array of numbers", y, TypeError) from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise V.param_error(name, func, "a 1-D array of numbers", f"shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(
            f"The {name!r} parameter of {func} must have one value per row of X ({n}). Got {arr.shape[0]} "
            "values instead."
        )
    if arr.shape[0] == 0:
        return np.empty(0)
    return np.ascontiguousarray(arr)


def _finite_vector(y, name, func, n):
    arr = _as_vector(y, name, func, n)
    if not np.all(np.isfinite(arr)):
        bad = np.nonzero(~np.isfinite(arr))[0]
        raise ValueError(
            f"The {name!r} parameter of {func} must hold finite values. Got {float(arr[bad[0]])!r} at "
            f"rows {bad[:5].tolist()} instead."
        )
    return arr


def _positive_or_none(value, name, owner):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: {name} must be a float > 0 or None (learned). Got {value!r} instead.")
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{owner}: {name} must be a float > 0 or None (learned). Got {value!r} instead.")
    return value


class Bernoulli(Likelihood):
    """Binary labels through a link: P(y = 1 | f) = Phi(f) ("probit") or sigmoid(f) ("logistic").

    Labels as ``fastcep.fit`` takes them: {0, 1}, {-1, 1}, bool or two classes of strings."""

    binary = True

    def __init__(self, link="probit"):
        if link not in ("probit", "logistic", "logit"):
            raise ValueError(f"Bernoulli: link must be 'probit' or 'logistic'. Got {link!r} instead.")
        self.link = "logistic" if link == "logit" else link
        self.name = self.link

    def params(self):
        return {"link": self.link}

    def kernel(self):
        from .kernels.likelihoods import REGISTRY

        return REGISTRY[self.name]()

    def check(self, y, name, func, n):
        return V.check_labels(y, name, func, n, V.label_classes(y, name, func))


class Gaussian(Likelihood):
    """Real values y = f + noise, noise ~ N(0, var); ``var=None`` learns the noise precision (its
    Gamma(NOISE_A0, NOISE_B0) posterior; the kernels use its mean)."""

    name = "gaussian"

    def __init__(self, var=None):
        self.var = _positive_or_none(var, "var", "Gaussian")
        self.learned = ("var",) if self.var is None else ()

    def params(self):
        return {"var": self.var}

    def mean_var(self, m, v):
        return m, v + self.var

    def unit_deviance(self, y, mean):
        return (y - mean) ** 2


#: the largest count: 2^53, the last integer float64 holds with its neighbours (a count of 1e300
#: has no neighbour within 1e284, and its tilted distribution no width the kernels can resolve)
MAX_COUNT = 2.0**53
#: the largest |y| of a real-valued likelihood in a regression: its square, the noise variance's
#: scale, stays finite in a sum of 1e8 values (y x 1e160 gave an infinite learned variance and
#: the prior back, "converged"; ``check_scale``)
MAX_ABS_VALUE = 1e150


def _check_counts(arr, name, func):
    bad = np.nonzero(~((arr >= 0) & (arr == np.floor(arr))))[0]
    if bad.size:
        raise ValueError(
            f"The {name!r} parameter of {func} must hold counts (integers >= 0). Got {float(arr[bad[0]])!r} "
            f"at rows {bad[:5].tolist()} instead."
        )
    big = np.nonzero(arr > MAX_COUNT)[0]
    if big.size:
        raise ValueError(
            f"The {name!r} parameter of {func} holds a count of {float(arr[big[0]])!r} at rows "
            f"{big[:5].tolist()}: counts above 2^53 = {MAX_COUNT:.4g}, the largest integer float64 "
            "holds exactly, cannot be fitted; model such values on another scale (log, say)."
        )
    return arr


def check_scale(arr, name, func):
    """``arr`` (the values of a real-valued likelihood) refused beyond +-MAX_ABS_VALUE, naming the
    rows: a regression fits them as they are (a CP fit measures them in a unit of their size,
    ``tensor.layout.standardization``)."""
    big = np.nonzero(np.abs(arr) > MAX_ABS_VALUE)[0]
    if big.size:
        raise ValueError(
            f"The {name!r} parameter of {func} holds {float(arr[big[0]])!r} at rows {big[:5].tolist()}: "
            f"values beyond +-{MAX_ABS_VALUE:.0e} overflow the noise variance's sums; divide them by a "
            "scale first."
        )
    return arr


class Poisson(Likelihood):
    """Counts y ~ Poisson(exp(f)) (log link). An exposure enters as ``offset=log(exposure)``."""

    name = "poisson"
    counts = True

    def check(self, y, name, func, n):
        return _check_counts(super().check(y, name, func, n), name, func)

    def link_values(self, y):
        return _log_counts(y)

    def mean_var(self, m, v):
        mean, spread = _lognormal(m, v)  # Var y = E[e^f] + Var[e^f]
        return mean, mean + spread

    def log1p_moments(self, m, v):
        from ._log1p import log1p_moments

        return log1p_moments(m, v)

    def unit_deviance(self, y, mean):
        return 2.0 * (_xlogy_ratio(y, mean) - y + mean)


def _lognormal(m, v):
    """(E[e^f], Var[e^f]) for f ~ N(m, v), arrays: inf where they overflow a float, never NaN
    (Var[e^f] = E[e^f]^2 (e^v - 1), with no inf - inf; 0 where v = 0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.exp(m + 0.5 * v)
        spread = np.where(v > 0.0, mean * mean * np.expm1(v), 0.0)
    return mean, spread


def _log_counts(y):
    """log(1 + y) of counts: f on the log link's scale (a count of 2.5e7 is 17, not 2.5e7: the
    start of a count tensor's fit sized by the raw counts put its first rates at e^(1e7)), 0 for a
    zero count, as for the entries the start does not see."""
    return np.log1p(y)


def _xlogy_ratio(y, mean):
    """y log(y / mean), 0 where y = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mean), 0.0)


class NegativeBinomial(Likelihood):
    """Over-dispersed counts, log link: mean mu = exp(f), variance mu + mu^2 / dispersion
    (``dispersion`` is the size r > 0; r -> inf is the Poisson). None learns it."""

    name = "negbin"
    counts = True

    def __init__(self, dispersion=None):
        self.dispersion = _positive_or_none(dispersion, "dispersion", "NegativeBinomial")
        self.learned = ("dispersion",) if self.dispersion is None else ()

    def params(self):
        return {"dispersion": self.dispersion}

    def kernel(self):
        from .kernels.likelihoods import REGISTRY

        return REGISTRY[self.name](float(self.dispersion))

    def check(self, y, name, func, n):
        return _check_counts(super().check(y, name, func, n), name, func)

    def link_values(self, y):
        return _log_counts(y)

    def mean_var(self, m, v):
        mean, spread = _lognormal(m, v)  # Var y = E[mu + mu^2 / r] + Var[mu], mu = e^f
        with np.errstate(over="ignore"):  # (inf where it overflows, as _lognormal's)
            return mean, mean + (mean * mean + spread) / self.dispersion + spread

    def log1p_moments(self, m, v):
        from ._log1p import log1p_moments

        return log1p_moments(m, v, self.dispersion)

    def unit_deviance(self, y, mean):
        r = self.dispersion
        return 2.0 * (_xlogy_ratio(y, mean) - (y + r) * np.log((y + r) / (mean + r)))


class StudentT(Likelihood):
    """Real values with outliers: y = f + scale * t, t Student-t with ``df`` degrees of freedom
    (df > 0; the predictive variance needs df > 2). ``scale=None`` learns the scale."""

    name = "student_t"
    log_concave = False

    def __init__(self, df=4.0, scale=None):
        self.df = _positive_or_none(df, "df", "StudentT")
        if self.df is None:
            raise ValueError("StudentT: df must be a float > 0 (it is not learned). Got None instead.")
        self.scale = _positive_or_none(scale, "scale", "StudentT")
        self.learned = ("scale",) if self.scale is None else ()

    def params(self):
        return {"df": self.df, "scale": self.scale}

    def kernel(self):
        from .kernels.likelihoods import REGISTRY

        return REGISTRY[self.name](float(self.df), float(self.scale))

    def mean_var(self, m, v):
        noise = self.scale**2 * self.df / (self.df - 2.0) if self.df > 2.0 else np.inf
        return m, v + noise

    def unit_deviance(self, y, mean):
        return (y - mean) ** 2


class Custom(Likelihood):
    """A user's likelihood: ``logpdf`` is a ``numba.njit`` function of two floats (y, f) returning
    log p(y | f). Nothing else is needed: the tilted moments come from quadrature.

    ``check``, if given, is a function of the values (a float64 array) that raises on values the
    likelihood does not accept; by default every finite value is accepted."""

    name = "custom"
    log_concave = False

    def __init__(self, logpdf, check=None):
        if not hasattr(logpdf, "py_func"):
            raise TypeError(
                "Custom: logpdf must be a numba.njit function of two floats (y, f) returning log p(y | f). "
                f"Got {type(logpdf).__name__} instead (decorate it with @numba.njit)."
            )
        self.logpdf = logpdf
        self.value_check = check
        self._kernel = None

    def params(self):
        return {"logpdf": getattr(self.logpdf, "__name__", "logpdf")}

    def driver(self, fn):
        """An uncached copy of ``fn`` (``kernels.likelihoods.custom.uncached``: a user's
        log-density never goes through the disk cache)."""
        from .kernels.likelihoods import uncached

        return uncached(fn)

    def kernel(self):
        if self._kernel is None:
            from .kernels.likelihoods.custom import custom_likelihood

            self._kernel = custom_likelihood(self.logpdf)
        return self._kernel

    def check(self, y, name, func, n):
        """The values checked as every likelihood's, by ``check`` if given, and the log-density
        probed on them (``probe``)."""
        arr = super().check(y, name, func, n)
        if self.value_check is not None:
            self.value_check(arr)
        self.probe(arr, name)
        return arr

    #: the latent values at which ``probe`` evaluates the log-density at every distinct y
    PROBE_F = (-3.0, -1.0, 0.0, 1.0, 3.0)

    def probe(self, y, name="y"):
        """Check the user's log-density before a fit: it compiles for two floats (y, f), returns
        one float, and is never NaN or +inf at the values ``y`` for f in ``PROBE_F`` (-inf, a
        zero density, is allowed). Raises TypeError or ValueError naming the problem and the
        first row where it shows."""
        from numba.core.errors import NumbaError

        from .kernels.likelihoods.custom import probe

        if y.size == 0:
            return
        where = f"logpdf(y={float(y[0])!r}, f=0.0)"
        try:
            out = self.logpdf(float(y[0]), 0.0)
        except NumbaError as exc:
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # (numba colours its messages)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            lines = [line for line in lines if not line.startswith("Failed in")] or [str(exc)]
            raise TypeError(
                "Custom: logpdf must be a numba.njit function of two floats (y, f) returning one "
                f"float, log p(y | f); numba cannot compile {where}: {lines[0]}"
            ) from None
        except Exception as exc:
            raise TypeError(f"Custom: {where} raised {type(exc).__name__}: {exc}") from None
        if isinstance(out, (bool, np.bool_)) or not isinstance(out, (int, float, np.integer, np.floating)):
            raise TypeError(
                f"Custom: logpdf must return one float, log p(y | f); {where} returned "
                f"{type(out).__name__} {out!r}"
            )
        values, first = np.unique(y, return_index=True)
        grid = np.array(self.PROBE_F)
        table = np.empty((values.size, grid.size))
        probe(self.logpdf)(values, grid, table)
        bad = np.isnan(table) | (table == np.inf)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            row = int(first[i])
            raise ValueError(
                f"Custom: logpdf(y={float(values[i])!r}, f={float(grid[j])!r}) is {float(table[i, j])!r} "
                f"at {name}[{row}]; a log-density must be finite, or -inf where the density is 0"
            )

    def __eq__(self, other):
        return type(self) is type(other) and self.logpdf is other.logpdf

    def __hash__(self):
        return hash((Custom, id(self.logpdf)))


def check_offset(offset, n, func):
    """The offset (n,) float64, finite; None: an empty array (no offset)."""
    return np.empty(0) if offset is None else _finite_vector(offset, "offset", func, n)


#: the shorthands: a string model names a built-in with its defaults
SHORTHANDS = {
    "probit": lambda: Bernoulli("probit"),
    "logistic": lambda: Bernoulli("logistic"),
    "gaussian": Gaussian,
    "poisson": Poisson,
    "negbin": NegativeBinomial,
    "student_t": StudentT,
}


def resolve(model, func="fit"):
    """A likelihood from ``model``: a ``Likelihood`` as given, or a shorthand's built-in."""
    if isinstance(model, Likelihood):
        return model
    if isinstance(model, str) and model in SHORTHANDS:
        return SHORTHANDS[model]()
    names = ", ".join(repr(s) for s in SHORTHANDS)
    raise V.param_error("model", func, f"a likelihood (fastcep.likelihoods) or one of {names}", model)


def log1p_prediction(likelihood, m, v, scale, func):
    """None when ``scale`` is None (the values' own scale), else (E[log(1 + y)], Var[log(1 + y)])
    under f ~ N(m, v) for a count likelihood (``scale="log1p"``); a clear error for any other
    scale or likelihood."""
    if scale is None:
        return None
    if not (isinstance(scale, str) and scale == "log1p"):
        raise V.param_error("scale", func, "None or 'log1p'", scale)
    moments = likelihood.log1p_moments(m, v)
    if moments is None:
        raise ValueError(
            f"{func}: scale='log1p' needs a count likelihood (Poisson or NegativeBinomial). Got "
            f"{likelihood!r} instead."
        )
    return moments


__all__ = [
    "Bernoulli",
    "Custom",
    "Gaussian",
    "Likelihood",
    "NegativeBinomial",
    "Poisson",
    "SHORTHANDS",
    "StudentT",
    "log1p_prediction",
    "resolve",
]
