"""Regression model files: a fitted Bayesian regression (any built-in likelihood) and the names of its
features (``save_glm_model``, ``load_glm_model``; written by ``fastcep glm fit``).

Layout (format version 5). Root attributes: ``format`` ("fastcep-glm-model"), ``format_version``,
``model`` (the likelihood's name: "probit", "logistic", "gaussian", "poisson", "negbin",
"student_t"), ``likelihood`` (its parameters, JSON, learned ones filled in), ``method``, ``target``
(the target column's name, "" if unknown), ``n_iter``, ``converged``, ``stop_reason`` and
``options`` (the fit's options, JSON). Datasets: ``features`` (d,) UTF-8 strings, the feature names
in the order of the weights (absent when the columns have no names, as a model of svmlight or hashed
data: version 4); ``posterior/mean`` and ``posterior/var`` (d,) float64, the factorised Gaussian
posterior of the weights; ``intercept/mean`` and ``intercept/var`` (scalars), present only for a fit
with an intercept: the fitted intercept, which for a centred fit (version 3) is b_c, the intercept
at the features' mean, beside ``center`` (d,) float64, the features' training means (absent for a
fit not centred; ``RegressionResult.center``); ``trace/<column>`` (n_iter,), the fit's trace
(``fastcep._loop.TRACE_FIELDS``); ``online/T``, ``online/N`` and ``online/seen`` (d, or d + 1 with
the intercept's last), with attributes ``rows``, ``forget`` and ``pending``, present only for a
result that has absorbed rows (``RegressionResult.update``): the natural parameters it absorbs into
and the lazy forgetting's bookkeeping, so that a loaded result goes on absorbing rows bit for bit as
the saved one would (a stream's checkpoint, version 4). Version 5 files are sealed: a user block of
512 bytes before HDF5's superblock holds the format's name, the length and the SHA-256 of the rest
of the file (``fastcep.io.files``: checked before h5py opens the file). The file is written to a
temporary file beside the target and renamed over it (``fastcep.io.files.atomic_h5``).
``load_glm_model`` checks the format, the version, the model and method names, the shapes, that
every number is finite and every variance positive.
"""

import json
import os
from typing import NamedTuple

import h5py
import numpy as np

from .._loop import TRACE_FIELDS, Trace
from .._models import REGRESSION_LIKELIHOODS, REGRESSION_METHODS
from ..glm.result import RegressionResult
from ..likelihoods import SHORTHANDS, Custom
from ..results import GaussianPosterior
from .files import FileFormatError, atomic_h5, bad_file, is_sealed, json_default, open_h5, sign, verify
from .formats import GLM_MODEL_FORMAT

GLM_MODEL_FORMAT_VERSION = 5
#: versions this fastcep reads (1: binary likelihoods only, no ``likelihood`` attribute; 2: no
#: ``center``, every fit un-centred; 3: the feature names always present; 4: no seal)
READABLE_VERSIONS = (1, 2, 3, 4, 5)
#: the first sealed version
SEALED_VERSION = 5
#: the kind named in the errors ("... is not a valid fastcep regression model file: ...")
KIND = "regression model"


class GLMModel(NamedTuple):
    """What a regression model file holds."""

    result: RegressionResult  #: the posterior, for predictions (its ``state`` is None)
    features: tuple | None  #: (d,) the feature names, in the order of the weights; None: unnamed
    target: str  #: the label column's name ("" if unknown)


def save_glm_model(result, path, features=None, target=""):
    """Write a regression ``result`` and its feature names to ``path`` (HDF5, atomically).

    Parameters
    ----------
    result : RegressionResult
    path : str or PathLike
    features : sequence of str, optional
        One distinct name per weight, in the order of the columns of X; None: the columns are
        known by their positions (svmlight and hashed data, where a million names would only
        cost room).
    target : str
        The name of the label column (what ``fastcep glm evaluate`` reads by default).
    """
    if not isinstance(result, RegressionResult):
        raise TypeError(f"save_glm_model: expected a RegressionResult, got {type(result).__name__}.")
    if isinstance(result.likelihood, Custom):
        raise ValueError(
            "save_glm_model: a Custom likelihood cannot be written (its log-density is code); keep the "
            "result, or save its posterior arrays (result.posterior) yourself."
        )
    features = None if features is None else tuple(str(name) for name in features)
    d = result.posterior.mean.size
    if features is not None and (len(features) != d or len(set(features)) != d):
        raise ValueError(
            f"save_glm_model: 'features' must hold {d} distinct names, one per weight. Got {len(features)}"
            f" ({len(set(features))} distinct) instead."
        )

    def write(f):
        f.attrs["format"] = GLM_MODEL_FORMAT
        f.attrs["format_version"] = GLM_MODEL_FORMAT_VERSION
        f.attrs["model"] = result.model
        f.attrs["method"] = result.method
        f.attrs["likelihood"] = json.dumps(result.likelihood.params())
        f.attrs["target"] = str(target)
        f.attrs["n_iter"] = int(result.n_iter)
        f.attrs["converged"] = bool(result.converged)
        f.attrs["stop_reason"] = result.stop_reason
        f.attrs["options"] = json.dumps(result.options, default=json_default)
        if features is not None:
            f.create_dataset("features", data=np.array(features, dtype=object), dtype=h5py.string_dtype())
        g = f.create_group("posterior")
        g.create_dataset("mean", data=np.asarray(result.posterior.mean, dtype=np.float64))
        g.create_dataset("var", data=np.asarray(result.posterior.var, dtype=np.float64))
        fitted = result.intercept if result.center is None else result.centered_intercept
        if fitted is not None:
            g = f.create_group("intercept")
            g.create_dataset("mean", data=float(fitted.mean))
            g.create_dataset("var", data=float(fitted.var))
        if result.center is not None:
            f.create_dataset("center", data=np.asarray(result.center, dtype=np.float64))
        g = f.create_group("trace")
        for name in TRACE_FIELDS:
            g.create_dataset(name, data=np.asarray(getattr(result.trace, name)))
        online = result.online_state()
        if online is not None:
            g = f.create_group("online")
            for name in ("T", "N", "seen"):
                g.create_dataset(name, data=online[name])
            for name in ("rows", "forget", "pending"):
                g.attrs[name] = online[name]
        sign(f)

    atomic_h5(path, write, seal=GLM_MODEL_FORMAT)


def _likelihood(path, model, params):
    """The likelihood of a model file: its model's built-in with the file's parameters, checked."""
    base = SHORTHANDS[model]()
    ok = isinstance(params, dict) and set(params) <= set(base.params())
    if ok and base.binary:
        ok = params.get("link", base.link) == base.link
    elif ok:
        ok = all(isinstance(v, (int, float)) and np.isfinite(v) and v > 0 for v in params.values())
    _check(path, ok, f"its likelihood's parameters {params!r} are not valid for {model!r}")
    return base if base.binary else base.with_params(**params)


def _check(path, ok, why):
    if not ok:
        raise bad_file(KIND, path, why)


def load_glm_model(path):
    """Read a regression model file written by ``save_glm_model``.

    Returns
    -------
    GLMModel
        Its ``result`` predicts as the fitted one did (``predict_proba``, ``log_likelihood``,
        ``auc``) with this machine's thread setting.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    FileFormatError
        If the file is not HDF5, not a regression model, of another format version, incomplete,
        or holds an unknown model, shapes that disagree, non-finite numbers or variances <= 0.
    """
    path = os.fspath(path)
    with open_h5(path, KIND, "load_glm_model") as f:
        try:
            fields = _read(f, path)
        except FileFormatError:
            raise
        except (KeyError, OSError, ValueError, TypeError, RuntimeError, IndexError) as exc:
            # (a damaged file fails anywhere in h5py: in the digest's walk, a name, a dtype)
            why = f"missing or unreadable content ({type(exc).__name__}: {exc})"
            raise bad_file(KIND, path, why) from exc
    return _model(path, **fields)


def _read(f, path):
    """The fields of an open regression model file (its format, version and digest checked), as a
    dict: read only here, checked by ``_model``."""
    fmt = f.attrs.get("format")
    _check(path, fmt == GLM_MODEL_FORMAT, f"format attribute is {fmt!r}, not {GLM_MODEL_FORMAT!r}")
    version = int(f.attrs.get("format_version", -1))
    _check(
        path,
        version in READABLE_VERSIONS,
        f"format version {version}, this fastcep reads {GLM_MODEL_FORMAT_VERSION}",
    )
    _check(path, version < SEALED_VERSION or is_sealed(f), "its seal is missing")
    _check(path, verify(f, KIND, path), "its checksum is missing")
    n_iter = int(f.attrs["n_iter"])
    columns = {name: np.asarray(f["trace"][name]) for name in TRACE_FIELDS if name in f["trace"]}
    return dict(
        model=str(f.attrs["model"]),
        method=str(f.attrs["method"]),
        features=(
            tuple(v.decode() if isinstance(v, bytes) else str(v) for v in np.atleast_1d(f["features"][()]))
            if "features" in f or version < 4
            else None
        ),
        mean=np.asarray(f["posterior/mean"][()], dtype=np.float64),
        var=np.asarray(f["posterior/var"][()], dtype=np.float64),
        intercept=(
            np.array([f["intercept/mean"][()], f["intercept/var"][()]], dtype=np.float64)
            if "intercept" in f
            else None
        ),
        center=np.asarray(f["center"][()], dtype=np.float64) if "center" in f else None,
        options=json.loads(f.attrs["options"]),
        n_iter=n_iter,
        trace=Trace.from_columns(n_iter, **columns),
        target=str(f.attrs.get("target", "")),
        converged=bool(f.attrs["converged"]),
        stop_reason=str(f.attrs["stop_reason"]),
        params=json.loads(f.attrs["likelihood"]) if version >= 2 else {},
        online=(
            {name: np.asarray(f["online"][name][()]) for name in ("T", "N", "seen")}
            | {key: f["online"].attrs[key][()] for key in ("rows", "forget", "pending")}
            if "online" in f
            else None
        ),
    )


def _model(path, model, method, features, mean, var, intercept, center, options, n_iter, trace, target,
           converged, stop_reason, params, online):  # fmt: skip
    """The ``GLMModel`` of a file's fields (``_read``), each checked."""
    models, methods = REGRESSION_LIKELIHOODS, REGRESSION_METHODS
    known = [m for m in models if m in SHORTHANDS]
    _check(path, model in known, f"unknown model {model!r} (this fastcep knows {', '.join(known)})")
    likelihood = _likelihood(path, model, params)
    _check(path, method in methods, f"unknown method {method!r} (this fastcep knows {', '.join(methods)})")
    d = len(features) if features is not None else mean.shape[0]
    _check(path, features is None or len(set(features)) == d, "its feature names repeat")
    _check(
        path,
        mean.ndim == 1 and mean.shape == (d,) and var.shape == (d,),
        f"{d} features but posterior arrays of shapes {mean.shape} and {var.shape}",
    )
    _check(
        path,
        center is None or (center.shape == (d,) and intercept is not None),
        f"its center has shape {None if center is None else center.shape}, not ({d},) beside an intercept",
    )
    _check(path, intercept is None or intercept.shape == (2,), "its intercept is not two numbers")
    held = (("posterior", (mean, var)), ("intercept", () if intercept is None else intercept))
    for name, values in (*held, ("center", () if center is None else (center,))):
        _check(path, all(np.all(np.isfinite(v)) for v in values), f"the {name} holds non-finite numbers")
    _check(path, bool(np.all(var > 0.0)), "a posterior variance is not positive")
    _check(path, intercept is None or intercept[1] > 0.0, "the intercept's variance is not positive")
    _check(path, isinstance(options, dict), "its options are not a JSON object")
    options["n_threads"] = None  # (the writer's thread count may exceed this machine's)
    post = GaussianPosterior(mean, var)
    b = None if intercept is None else GaussianPosterior(float(intercept[0]), float(intercept[1]))
    if online is not None:
        _check_online(path, online, d + (intercept is not None))
    result = RegressionResult(
        model, method, post, n_iter, converged, stop_reason, trace, None, options, b, likelihood, center,
        features, target, online,
    )  # fmt: skip
    return GLMModel(result, features, target)


def _check_online(path, held, size):
    """Check the online state of a model file (``online`` group) against its posterior's size."""
    T, N, seen = held["T"], held["N"], held["seen"]
    ok = all(a.shape == (size,) for a in (T, N, seen)) and seen.dtype.kind in "iu"
    _check(path, ok, f"its online state is not three arrays of length {size}")
    _check(
        path,
        bool(np.all(np.isfinite(T)) and np.all(T > 0.0) and np.all(np.isfinite(N))),
        "its online state is not finite and positive",
    )
    rows, forget = int(held["rows"]), float(held["forget"])
    _check(
        path,
        0.0 <= forget < 1.0 and rows >= 0 and bool(np.all((seen >= 0) & (seen <= rows))),
        "its online bookkeeping is out of range",
    )
