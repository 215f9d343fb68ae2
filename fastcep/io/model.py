"""Model files: a fitted CP decomposition (``fastcep.save_model``, ``fastcep.load_model``).

A model file holds, under the root group, the attributes ``format`` ("fastcep-cp-model"),
``format_version``, ``model``, ``method``, ``covariance``, ``rank``, ``shape``, ``n_iter``,
``converged``, ``stop_reason``, ``seed`` and ``options`` (JSON), and the datasets ``means/<k>``
(d_k, R), ``covs/<k>`` (d_k, R, R) or (d_k, R), ``noise`` (a, b) for cp_gaussian, and the trace
under ``trace/``, (version 3) the digest of all of it in the attribute ``sha256``, (version 4)
with a hierarchical prior its hyper-posterior under ``hyper/`` (attribute ``kind``, datasets
``a``, ``b``, ``mean``, ``beta``, ``nu``, ``W_inv``: ``fastcep.results.HyperState``), and
(version 5) the fitted likelihood in the attribute ``likelihood``: JSON {"name": the built-in's
name (``fastcep.likelihoods.SHORTHANDS``), parameter: value, ...}, learned values filled in (a
``Custom`` likelihood, code, cannot be written). Files before version 5 have the likelihood of
their model's name (cp_gaussian's variance from its noise posterior). Version 6 files are
sealed: a user block of 512 bytes before HDF5's superblock holds the format's name, the length
and the SHA-256 of the rest of the file (``fastcep.io.files``: checked before h5py opens the
file, so that a damaged file is refused before HDF5 parses it). Files are
written to a temporary file beside the target and renamed over it, so a killed writer never
leaves a half-written model behind. Reading checks the digest and every field (``_check``): a
model, method and covariance fastcep knows, shapes, finite numbers, positive (semi)definite
covariances and a positive noise posterior.
"""

import json
import os

import numpy as np

from .._loop import TRACE_FIELDS, Trace
from .._models import CP_MODELS
from ..likelihoods import SHORTHANDS, Custom
from ..results import HyperState, hyper_problems
from ..tensor.result import POINT_METHODS, CPResult
from .files import atomic_h5, bad_file, is_sealed, json_default, open_h5, sign, verify
from .formats import MODEL_FORMAT

#: version 2: the trace's columns named for what they hold (``fastcep._loop.TRACE_FIELDS``);
#: version 3: the digest of the contents (``files.sign``); version 4: the hyper-posterior of a
#: hierarchical prior (``hyper/``); version 5: the fitted likelihood (``likelihood``); version 6:
#: the seal (``files.SEAL_BYTES``)
MODEL_FORMAT_VERSION = 6
#: versions this fastcep reads (1 and 2 have no digest; before 6, no seal)
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
#: the first sealed version
SEALED_VERSION = 6
METHODS = ("cep1", "cep2", "lp", "vmp", "cp_wopt", "post")
COVARIANCES = ("full", "diag")
#: the arrays of a hyper-posterior (``HyperState`` after its kind)
HYPER_FIELDS = HyperState._fields[1:]
#: version 1's trace columns: "paper_change" held CEP's and VMP's largest parameter change,
#: CP-WOPT's change of the reconstructions and a stream's inner iterations; "elbo" held CP-WOPT's
#: objective (it may be missing in files written before it existed)
_V1_TRACE_FIELDS = ("elapsed", "change", "skipped", "paper_change", "damping", "eval_metric", "elbo")


def save_model(result, path):
    """Write a ``CPResult`` to ``path`` (HDF5, atomically); read it back with ``load_model``."""
    if not isinstance(result, CPResult):
        raise TypeError(f"save_model: expected a CPResult, got {type(result).__name__}.")
    if isinstance(result.likelihood, Custom):
        raise ValueError(
            "save_model: a Custom likelihood cannot be written (its log-density is code); keep the "
            "result, or save its posterior arrays (result.posterior) yourself."
        )

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
        f.attrs["likelihood"] = json.dumps({"name": result.likelihood.name, **result.likelihood.params()})
        gm, gc = f.create_group("means"), f.create_group("covs")
        for k, (m, c) in enumerate(zip(result.posterior.means, result.posterior.covs, strict=True)):
            gm.create_dataset(str(k), data=m)
            gc.create_dataset(str(k), data=c)
        if result.posterior.noise is not None:
            f.create_dataset("noise", data=np.asarray(result.posterior.noise, dtype=np.float64))
        gt = f.create_group("trace")
        for name in TRACE_FIELDS:
            gt.create_dataset(name, data=np.asarray(getattr(result.trace, name)))
        if result.hyper is not None:
            gh = f.create_group("hyper")
            gh.attrs["kind"] = result.hyper.kind
            for name in HYPER_FIELDS:
                gh.create_dataset(name, data=np.asarray(getattr(result.hyper, name), dtype=np.float64))
        sign(f)

    atomic_h5(path, write, seal=MODEL_FORMAT)


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
    with open_h5(path, "model", "load_model") as f:
        try:
            fields = _read(f, path)
        except (KeyError, OSError, ValueError, TypeError, RuntimeError, IndexError) as exc:
            if isinstance(exc, ValueError) and "not a valid fastcep model file" in str(exc):
                raise
            raise bad_file("model", path, f"missing or unreadable content ({exc})") from exc
    _check(fields, path)
    options = fields["options"]
    options["shape"] = fields["shape"]
    options["n_threads"] = None  # (the writer's thread count may exceed this machine's)
    noise = fields["noise"]
    return CPResult(
        fields["model"], fields["method"], fields["covariance"], fields["rank"], fields["shape"],
        np.concatenate(fields["means"]), np.concatenate(fields["covs"]), noise, fields["n_iter"],
        fields["converged"], fields["stop_reason"], fields["trace"], None, options, standardized=False,
        hyper=fields["hyper"], likelihood=fields["likelihood"],
    )  # fmt: skip


def _read(f, path):
    """The fields of an open model file, its format, version and digest checked."""
    if f.attrs.get("format") != MODEL_FORMAT:
        raise bad_file("model", path, f"format attribute is {f.attrs.get('format')!r}, not {MODEL_FORMAT!r}")
    version = int(f.attrs.get("format_version", -1))
    if version not in READABLE_VERSIONS:
        raise bad_file("model", path, f"format version {version}, this fastcep reads {MODEL_FORMAT_VERSION}")
    if version >= SEALED_VERSION and not is_sealed(f):
        raise bad_file("model", path, "its seal is missing")
    if not verify(f, "model", path) and version >= 3:
        raise bad_file("model", path, "its checksum is missing")
    shape = tuple(_int(d, "shape") for d in f.attrs["shape"])
    options = json.loads(f.attrs["options"])
    if not isinstance(options, dict):
        raise ValueError("options are not a JSON object")
    names = TRACE_FIELDS if version >= 2 else _V1_TRACE_FIELDS
    columns = {name: np.asarray(f["trace"][name], dtype=np.float64) for name in names if name in f["trace"]}
    method = str(f.attrs["method"])
    if version < 2:
        columns = _v1_trace(columns, method, bool(options.get("stream")))
    return dict(
        model=str(f.attrs["model"]), method=method, covariance=str(f.attrs["covariance"]),
        rank=_int(f.attrs["rank"], "rank"), shape=shape, options=options,
        means=[np.asarray(f["means"][str(k)], dtype=np.float64) for k in range(len(shape))],
        covs=[np.asarray(f["covs"][str(k)], dtype=np.float64) for k in range(len(shape))],
        noise=tuple(float(v) for v in f["noise"][()]) if "noise" in f else None,
        trace=Trace.from_columns(len(columns["elapsed"]), **columns),
        n_iter=_int(f.attrs["n_iter"], "n_iter"), converged=bool(f.attrs["converged"]),
        stop_reason=str(f.attrs["stop_reason"]), hyper=_read_hyper(f),
        likelihood=json.loads(f.attrs["likelihood"]) if version >= 5 else None,
    )  # fmt: skip


def _read_hyper(f):
    """The hyper-posterior of a model file, or None (none written, or a version before 4)."""
    if "hyper" not in f:
        return None
    g = f["hyper"]
    arrays = (np.asarray(g[name], dtype=np.float64) for name in HYPER_FIELDS)
    return HyperState(str(g.attrs["kind"]), *arrays)


def _int(value, name):
    """An integer attribute (a float or a string is refused)."""
    arr = np.asarray(value)
    if arr.shape != () or arr.dtype.kind not in "iu":
        shown = arr.tolist() if arr.ndim else arr.item()
        raise ValueError(f"{name} is {shown!r}, not an integer")
    return int(arr)


def _check(fields, path):
    """Every field of a model read from ``path``: FileFormatError naming the first bad one."""

    def bad(why):
        return bad_file("model", path, why)

    model, method, covariance, rank, shape = (
        fields[k] for k in ("model", "method", "covariance", "rank", "shape")
    )
    if model not in CP_MODELS:
        raise bad(f"unknown model {model!r} (fastcep knows {', '.join(CP_MODELS)})")
    if method not in METHODS:
        raise bad(f"unknown method {method!r}")
    if covariance not in COVARIANCES:
        raise bad(f"unknown covariance {covariance!r}")
    if rank < 1 or len(shape) < 2 or min(shape) < 1:
        raise bad(f"rank {rank} and shape {shape} (rank >= 1, >= 2 modes of size >= 1 expected)")
    if fields["n_iter"] < 0 or fields["trace"].elapsed.size != fields["n_iter"]:
        raise bad(f"n_iter {fields['n_iter']} does not match its trace of {fields['trace'].elapsed.size}")
    point = method in POINT_METHODS
    cov_shape = (rank, rank) if covariance == "full" else (rank,)
    for k, d in enumerate(shape):
        m, c = fields["means"][k], fields["covs"][k]
        if m.shape != (d, rank) or c.shape != (d, *cov_shape):
            raise bad(f"mode {k} arrays have shapes {m.shape}, {c.shape}")
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(c))):
            raise bad(f"mode {k} holds non-finite numbers")
        if point:
            continue
        if covariance == "diag":
            ok = np.all(c > 0)
        else:
            ok = np.allclose(c, np.swapaxes(c, 1, 2), rtol=1e-10, atol=0) and np.all(
                np.linalg.eigvalsh(c)[:, 0] > 0
            )
        if not ok:
            raise bad(f"mode {k} holds a covariance that is not positive definite")
    if fields["hyper"] is not None:
        why = hyper_problems(fields["hyper"], len(shape), rank)
        if why:
            raise bad(f"hyper-posterior: {why}")
    fields["likelihood"] = _likelihood(fields["likelihood"], model, bad)
    noise = fields["noise"]
    if model == "cp_gaussian" and noise is None and not point:
        raise bad("cp_gaussian model without a noise posterior")
    if noise is not None and (len(noise) != 2 or not all(np.isfinite(v) and v > 0 for v in noise)):
        raise bad(f"noise posterior {noise} (two finite numbers > 0 expected)")


def _likelihood(held, model, bad):
    """The likelihood of a model file from its ``likelihood`` attribute's JSON (``held``; None
    before version 5: the model's own, from ``CPResult``): the built-in it names with its
    parameters, each a float > 0 or None (learned, not fitted: a point estimate's), a link as
    the built-in's; that of the model's name unless the model is "cp"."""
    if held is None:
        if model == "cp":
            raise bad("model 'cp' without its likelihood")
        return None
    name = held.get("name") if isinstance(held, dict) else None
    if name not in SHORTHANDS:
        raise bad(f"likelihood {held!r} (a built-in's name expected: {', '.join(SHORTHANDS)})")
    base = SHORTHANDS[name]()
    params = {k: v for k, v in held.items() if k != "name"}
    if model != "cp" and name != model[3:]:
        raise bad(f"likelihood {name!r} for model {model!r}")
    ok = set(params) <= set(base.params())
    if ok and base.binary:
        ok = params.get("link", base.link) == base.link
    elif ok:
        ok = all(v is None or _positive(v) for v in params.values())
    if not ok:
        raise bad(f"its likelihood's parameters {params!r} are not valid for {name!r}")
    return base if base.binary else base.with_params(**params)


def _positive(value):
    """A finite number > 0 (a JSON float or int, not a bool)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and bool(np.isfinite(value)) and value > 0


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
