"""Model files: a fitted CP decomposition (``fastcep.save_model``, ``fastcep.load_model``).

A model file holds, under the root group, the attributes ``format`` ("fastcep-cp-model"),
``format_version``, ``model``, ``method``, ``covariance``, ``rank``, ``shape``, ``n_iter``,
``converged``, ``stop_reason``, ``seed`` and ``options`` (JSON), and the datasets ``means/<k>``
(d_k, R), ``covs/<k>`` (d_k, R, R) or (d_k, R), ``noise`` (a, b) for cp_gaussian, and the trace
under ``trace/``. Files are written to a temporary file beside the target and renamed over it,
so a killed writer never leaves a half-written model behind.
"""

import json
import os

import h5py
import numpy as np

from .._loop import TRACE_FIELDS, Trace
from ..tensor.result import POINT_METHODS, CPResult
from .files import atomic_h5, bad_file, json_default

MODEL_FORMAT = "fastcep-cp-model"
#: version 2: the trace's columns named for what they hold (``fastcep._loop.TRACE_FIELDS``)
MODEL_FORMAT_VERSION = 2
#: versions this fastcep reads
READABLE_VERSIONS = (1, 2)
#: version 1's trace columns: "paper_change" held CEP's and VMP's largest parameter change,
#: CP-WOPT's change of the reconstructions and a stream's inner iterations; "elbo" held CP-WOPT's
#: objective (it may be missing in files written before it existed)
_V1_TRACE_FIELDS = ("elapsed", "change", "skipped", "paper_change", "damping", "eval_metric", "elbo")


def save_model(result, path):
    """Write a ``CPResult`` to ``path`` (HDF5, atomically); read it back with ``load_model``."""
    if not isinstance(result, CPResult):
        raise TypeError(f"save_model: expected a CPResult, got {type(result).__name__}.")

    def write(f):
        f.attrs["format"] = MODEL_FORMAT
        f.attrs["format_version"] = MODEL_FORMAT_VERSION
        f.attrs["model"] = result.model
        f.attrs["method"] = result.method
        f.attrs["covariance"] = result.covariance
        f.attrs["rank"] = result.rank
        f.attrs["shape"] = np.asarray(result.shape, dtype=np.int64)
        f.attrs["n_iter"] = result.n_iter
        f.attrs["converged"] = bool(result.converged)
        f.attrs["stop_reason"] = result.stop_reason
        seed = result.options.get("seed")
        f.attrs["seed"] = json.dumps(seed if isinstance(seed, (int, type(None))) else repr(seed))
        f.attrs["options"] = json.dumps(result.options, default=json_default)
        gm, gc = f.create_group("means"), f.create_group("covs")
        for k, (m, c) in enumerate(zip(result.posterior.means, result.posterior.covs, strict=True)):
            gm.create_dataset(str(k), data=m)
            gc.create_dataset(str(k), data=c)
        if result.posterior.noise is not None:
            f.create_dataset("noise", data=np.asarray(result.posterior.noise, dtype=np.float64))
        gt = f.create_group("trace")
        for name in TRACE_FIELDS:
            gt.create_dataset(name, data=np.asarray(getattr(result.trace, name)))

    atomic_h5(path, write)


def load_model(path):
    """Read a model written by ``fastcep.save_model``; returns a ``CPResult`` (without its message state).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not HDF5, not a fastcep model, of another format version, or incomplete.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_model: no such file {path!r}.")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise bad_file("model", path, f"cannot be opened as HDF5 ({exc})") from exc
    with f:
        if f.attrs.get("format") != MODEL_FORMAT:
            raise bad_file(
                "model", path, f"format attribute is {f.attrs.get('format')!r}, not {MODEL_FORMAT!r}"
            )
        version = int(f.attrs.get("format_version", -1))
        if version not in READABLE_VERSIONS:
            raise bad_file(
                "model", path, f"format version {version}, this fastcep reads {MODEL_FORMAT_VERSION}"
            )
        try:
            shape = tuple(int(d) for d in f.attrs["shape"])
            rank = int(f.attrs["rank"])
            covariance = str(f.attrs["covariance"])
            model = str(f.attrs["model"])
            means = [np.asarray(f["means"][str(k)], dtype=np.float64) for k in range(len(shape))]
            covs = [np.asarray(f["covs"][str(k)], dtype=np.float64) for k in range(len(shape))]
            noise = tuple(float(v) for v in f["noise"][()]) if "noise" in f else None
            options = json.loads(f.attrs["options"])
            names = TRACE_FIELDS if version >= 2 else _V1_TRACE_FIELDS
            columns = {name: np.asarray(f["trace"][name]) for name in names if name in f["trace"]}
            if version < 2:
                columns = _v1_trace(columns, str(f.attrs["method"]), bool(options.get("stream")))
            trace = Trace.from_columns(len(columns["elapsed"]), **columns)
            attrs = {k: f.attrs[k] for k in ("method", "n_iter", "converged", "stop_reason")}
        except (KeyError, OSError, ValueError) as exc:
            raise bad_file("model", path, f"missing or unreadable content ({exc})") from exc
    cov_shape = (rank, rank) if covariance == "full" else (rank,)
    for k, d in enumerate(shape):
        if means[k].shape != (d, rank) or covs[k].shape != (d, *cov_shape):
            raise bad_file("model", path, f"mode {k} arrays have shapes {means[k].shape}, {covs[k].shape}")
        if not (np.all(np.isfinite(means[k])) and np.all(np.isfinite(covs[k]))):
            raise bad_file("model", path, f"mode {k} holds non-finite numbers")
    if model == "cp_gaussian" and noise is None and str(attrs["method"]) not in POINT_METHODS:
        raise bad_file("model", path, "cp_gaussian model without a noise posterior")
    options["shape"] = shape
    return CPResult(
        model,
        str(attrs["method"]),
        covariance,
        rank,
        shape,
        np.concatenate(means),
        np.concatenate(covs),
        noise,
        int(attrs["n_iter"]),
        bool(attrs["converged"]),
        str(attrs["stop_reason"]),
        trace,
        None,
        options,
    )


def _v1_trace(columns, method, stream):
    """A version-1 file's trace columns under their version-2 names."""
    out = dict(columns)
    paper = out.pop("paper_change", None)
    if method == "cp_wopt":
        out["prediction_change"] = paper
        out["objective"] = out.pop("elbo", None)
    elif stream:
        out["inner_iter"] = paper
    else:
        out["param_change"] = paper
    return out
