"""Stream checkpoints: the stream's state and position, written atomically, checked on resume.

A checkpoint holds the arrays of the ``StreamState``, the per-batch trace, the run's settings
(JSON), the digest of the data it was written for (``data_sha256``: the stream's
``tensor.layout.entries_digest``, so that it resumes only on the same entries, wherever they are)
and (version 2) the digest of its own contents (``files.sign``), (version 3) with a learned prior
its ``StreamPrior`` under ``prior/`` (the hyper-posterior under ``prior/hyper``) and (version 4)
with a generic model's learned likelihood parameters the attribute ``likelihood``: JSON {"name":
..., parameter: value, ...}, their current values (``StreamState.likelihood``), and (version 5; a
cluster fit's checkpoint, version 2) the seal: a user block of 512 bytes before HDF5's superblock
that holds the format's name, the length and the SHA-256 of the rest of the file
(``fastcep.io.files``: checked before h5py opens the file, so that a damaged checkpoint is refused
before HDF5 parses it). Reading checks the digest, the settings, the data and every field: shapes,
finite numbers, positive definite precisions and covariances, a positive noise posterior, a position
within the stream.
"""

import json
import os
import warnings

import numpy as np

from ..results import HyperState, StreamPrior, StreamState, hyper_problems
from .files import FileFormatError, atomic_h5, is_sealed, json_default, open_verified, sign, verify
from .formats import CHECKPOINT_FORMAT, FIT_CHECKPOINT_FORMAT

#: arrays of the stream state in a checkpoint (the per-batch trace is stored beside them)
_STATE_ARRAYS = ("P_Lam", "P_eta", "M", "S", "seen", "noise")
#: version 2: the digests of the contents and of the data; version 3: the learned prior;
#: version 4: the learned likelihood parameters; version 5: the seal (``files.SEAL_BYTES``)
CHECKPOINT_FORMAT_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)
#: the first sealed version
SEALED_VERSION = 5


def _opened(path, func, fmt, versions, newest, sealed_from):
    """(the checkpoint file at ``path`` open for reading, its format version, the maker of its
    errors): a FileFormatError naming the path when it is not a readable HDF5 file of format
    ``fmt`` in one of ``versions``, is damaged (``files.open_verified``), or is of a version from
    ``sealed_from`` on without its seal."""

    def bad(why):
        return FileFormatError(f"{func}: cannot resume from checkpoint {path!r}: {why}.")

    try:
        f = open_verified(path, bad)
    except OSError as exc:
        raise bad(f"not a readable HDF5 file ({exc})") from exc
    try:
        version = int(f.attrs.get("format_version", -1))
        held = f.attrs.get("format")
    except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
        f.close()
        raise bad(f"missing or unreadable content ({exc})") from exc
    why = None
    if held != fmt:
        why = f"format attribute {held!r}, not {fmt!r}"
    elif version not in versions:
        why = f"format version {version}, this fastcep reads {newest}"
    elif version >= sealed_from and not is_sealed(f):
        why = "its seal is missing"
    if why is not None:
        f.close()
        raise bad(why)
    return f, version, bad


def write_checkpoint(path, state, options, trace_lists, data_digest):
    """Write a stream's ``StreamState``, its settings, its per-batch trace and the digest of its
    data to ``path`` (atomically: a killed run leaves the previous checkpoint)."""

    def write(f):
        f.attrs["format"] = CHECKPOINT_FORMAT
        f.attrs["format_version"] = CHECKPOINT_FORMAT_VERSION
        f.attrs["options"] = json.dumps(options)
        f.attrs["data_sha256"] = data_digest
        f.attrs["batches_done"] = state.batches_done
        f.attrs["rows_done"] = state.rows_done
        f.attrs["init_sd"] = -1.0 if np.isnan(state.init_sd) else state.init_sd
        for name in _STATE_ARRAYS:
            f.create_dataset(name, data=getattr(state, name))
        if state.prior is not None:
            _write_prior(f.create_group("prior"), state.prior)
        if getattr(state, "likelihood", None) is not None:
            lik = state.likelihood
            f.attrs["likelihood"] = json.dumps({"name": lik.name, **lik.params()})
        g = f.create_group("trace")
        for name, values in trace_lists.items():
            g.create_dataset(name, data=np.asarray(values, dtype=np.float64))
        sign(f)

    atomic_h5(path, write, seal=CHECKPOINT_FORMAT)


def settings_differ(saved, now, keys, absent=None):
    """The settings of ``keys`` that differ between a checkpoint's (``saved``) and a run's
    (``now``), in words on one line: "rank 3 in the checkpoint, 4 now; ..." ("" if none). A
    setting left out of either is its value in ``absent`` (a default that is not written)."""
    absent = absent or {}
    out = []
    for k in keys:
        a, b = saved.get(k, absent.get(k)), now.get(k, absent.get(k))
        if json.dumps(a, default=json_default) != json.dumps(b, default=json_default):
            out.append(f"{k} {_words(a)} in the checkpoint, {_words(b)} now")
    return "; ".join(out)


def _words(value):
    """A setting's value as a message shows it: a likelihood {"name": ..., parameter: value}
    as name(parameter=value, ...), a parameter None as "learned", another None as "unset"."""
    if value is None:
        return "unset"
    if isinstance(value, dict):
        inner = ", ".join(
            f"{k}={'learned' if v is None else _words(v)}" for k, v in value.items() if k != "name"
        )
        return f"{value['name']}({inner})" if "name" in value else f"({inner})"
    if isinstance(value, (list, tuple)):
        return f"({', '.join(_words(v) for v in value)})"
    return str(value)


def read_checkpoint(path, options, resume_keys=(), data_digest=None, likelihood=None, absent=None):
    """A checkpoint's ``(StreamState, trace lists)``. With ``options`` (None: read without
    comparing) the settings of ``resume_keys`` must match it (``absent``: the values of settings
    left out, ``settings_differ``), and with ``data_digest`` the data it was written for.
    ``likelihood``: the run's likelihood with learned parameters (a generic model's), whose current
    values the checkpoint must hold (the state's ``likelihood`` is it with them filled in); None:
    the state's likelihood is read as the built-in it names, if any."""
    path = os.fspath(path)
    f, version, bad = _opened(
        path, "stream", CHECKPOINT_FORMAT, READABLE_VERSIONS, CHECKPOINT_FORMAT_VERSION, SEALED_VERSION
    )
    with f:
        try:
            if not verify(f, "checkpoint", path) and version >= 2:
                raise bad("its checksum is missing")
            saved = json.loads(f.attrs["options"])
            saved_data = f.attrs.get("data_sha256")
            arrays = {k: np.array(f[k]) for k in _STATE_ARRAYS}
            arrays["prior"] = _read_prior(f["prior"]) if "prior" in f else None
            held = json.loads(f.attrs["likelihood"]) if "likelihood" in f.attrs else None
            init_sd = float(f.attrs["init_sd"])
            position = {k: np.asarray(f.attrs[k]) for k in ("batches_done", "rows_done")}
            trace = {k: list(np.array(v, dtype=np.float64)) for k, v in f["trace"].items()}
        except FileFormatError:
            raise
        except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
            raise bad(f"missing or unreadable content ({exc})") from exc
    if not isinstance(saved, dict):
        raise bad("its settings are not a JSON object")
    options = saved if options is None else options  # None: read without comparing
    detail = settings_differ(saved, options, resume_keys, absent)
    if detail:
        raise bad(f"it was written by a run with other settings ({detail})")
    if data_digest is not None:
        if saved_data is None:
            warnings.warn(
                f"stream: checkpoint {path!r} predates data digests: fastcep cannot check that it "
                "was written for this data",
                UserWarning,
                stacklevel=3,
            )
        elif saved_data != data_digest:
            raise bad(
                "it was written for other data (the entries differ from the run's that wrote it); "
                "resume on the same data, or start again without resume"
            )
    for k, v in position.items():
        if v.shape != () or v.dtype.kind not in "iu":
            raise bad(f"{k} is {v.tolist()!r}, not an integer")
    arrays["likelihood"] = _read_likelihood(held, likelihood, bad)
    state = StreamState(
        **arrays,
        batches_done=int(position["batches_done"]),
        rows_done=int(position["rows_done"]),
        init_sd=np.nan if init_sd < 0 else init_sd,
    )
    why = _check(state, options)
    if why:
        raise bad(why)
    return state, trace


def _read_likelihood(held, template, bad):
    """The state's likelihood from a checkpoint's ``likelihood`` attribute (``held``, its JSON
    read, or None): ``template`` with the held values of its learned parameters (each a float
    > 0, and the fixed ones as the template's); without a template the built-in it names
    (``fastcep.likelihoods.SHORTHANDS``) with its values, or None (a Custom one)."""
    from ..likelihoods import SHORTHANDS

    if held is not None and not (isinstance(held, dict) and isinstance(held.get("name"), str)):
        raise bad(f"its likelihood {held!r} is not a JSON object with a name")
    if template is None:
        if held is None or held["name"] not in SHORTHANDS:
            return None
        base = SHORTHANDS[held["name"]]()
        values = {k: v for k, v in held.items() if k in base.params() and isinstance(v, float)}
        return base.with_params(**values) if values else base
    if held is None:
        names = ", ".join(template.learned)
        raise bad(f"it holds no values of the likelihood's learned parameters ({names})")
    fixed = {k: v for k, v in template.params().items() if k not in template.learned}
    if held["name"] != template.name or any(held.get(k) != v for k, v in fixed.items()):
        raise bad(f"its likelihood {held!r} is not the run's {template!r}")
    values = {}
    for name in template.learned:
        value = held.get(name)
        if not _positive(value):
            raise bad(f"its likelihood's {name} is {value!r}, not a float > 0")
        values[name] = float(value)
    return template.with_params(**values)


def _positive(value):
    """A finite number > 0 (a JSON float or int, not a bool)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and bool(np.isfinite(value)) and value > 0


def _write_prior(g, prior):
    for name in StreamPrior._fields[1:]:
        g.create_dataset(name, data=getattr(prior, name))
    gh = g.create_group("hyper")
    gh.attrs["kind"] = prior.hyper.kind
    for name in HyperState._fields[1:]:
        gh.create_dataset(name, data=np.asarray(getattr(prior.hyper, name), dtype=np.float64))


def _read_prior(g):
    gh = g["hyper"]
    hyper = HyperState(
        str(gh.attrs["kind"]), *(np.array(gh[n], dtype=np.float64) for n in HyperState._fields[1:])
    )
    arrays = {n: np.array(g[n]) for n in StreamPrior._fields[1:]}
    arrays["version"] = arrays["version"].astype(np.int64)
    return StreamPrior(hyper, **arrays)


def _check(state, options):
    """What is wrong with a checkpoint's state for a stream with ``options`` (None if nothing)."""
    n_obj, R = int(np.sum(options["shape"])), int(options["rank"])
    cov = (R, R) if options.get("covariance", "full") == "full" else (R,)
    shapes = {"P_Lam": (n_obj, *cov), "S": (n_obj, *cov), "P_eta": (n_obj, R), "M": (n_obj, R)}
    shapes.update(seen=(n_obj,), noise=(2,))
    for name, shape in shapes.items():
        arr = getattr(state, name)
        if arr.shape != shape:
            return f"{name} has shape {arr.shape}, the stream needs {shape} (does the tensor match?)"
        if name != "seen" and not np.all(np.isfinite(arr)):
            return "it holds non-finite numbers"
    if state.seen.dtype != bool:
        return f"seen has dtype {state.seen.dtype}, not bool"
    if not np.all(state.noise > 0):
        return f"noise posterior {state.noise.tolist()} (two numbers > 0 expected)"
    for name in ("P_Lam", "S"):
        arr = getattr(state, name)
        if len(cov) == 1:
            ok = bool(np.all(arr > 0))
        else:
            ok = np.allclose(arr, np.swapaxes(arr, 1, 2), rtol=1e-8, atol=0) and bool(
                np.all(np.linalg.eigvalsh(arr)[:, 0] > 0)
            )
        if not ok:
            return f"{name} holds a matrix that is not positive definite"
    if (state.prior is None) != (options.get("prior", "fixed") == "fixed"):
        return "its learned prior does not match the run's prior setting"
    if state.prior is not None:
        why = _check_prior(state.prior, len(options["shape"]), R, n_obj, options.get("covariance", "full"))
        if why:
            return why
    n, batch = int(options["n"]), int(options["batch_size"])
    n_batches = -(-n // batch)
    if not 0 <= state.batches_done <= n_batches:
        return f"batches_done {state.batches_done} is outside 0..{n_batches} (the stream's batches)"
    if state.rows_done != min(n, state.batches_done * batch):
        return f"rows_done {state.rows_done} does not match {state.batches_done} batches of {batch}"
    return None


def _check_prior(prior, Kmodes, R, n_obj, covariance):
    """What is wrong with a ``StreamPrior`` read from a checkpoint, or ""."""
    why = hyper_problems(prior.hyper, Kmodes, R)
    if why:
        return f"hyper-posterior: {why}"
    cov = (R, R) if covariance == "full" else (R,)
    V = len(prior.msg_Lam)
    want = {
        "counts": (Kmodes,), "sum_M": (Kmodes, R), "sum_E2": (Kmodes, *cov), "version": (n_obj,),
        "msg_Lam": (V, Kmodes, *cov), "msg_eta": (V, Kmodes, R),
    }  # fmt: skip
    for name, shape in want.items():
        arr = getattr(prior, name)
        if arr.shape != shape or not np.all(np.isfinite(arr)):
            return (
                f"the learned prior's {name} has shape {arr.shape} (expected {shape}) or non-finite numbers"
            )
    if V < 1 or prior.version.min() < -1 or prior.version.max() >= V or np.any(prior.counts < 0):
        return "the learned prior's versions or counts are out of range"
    return ""


# ----------------------------------------------------------------- a cluster fit's checkpoints
#: version of a fit checkpoint's layout (2: the seal)
FIT_CHECKPOINT_VERSION = 2
FIT_READABLE_VERSIONS = (1, 2)


def write_fit_checkpoint(path, arrays, position, options, trace, data_digest):
    """Write a cluster fit's client state (``fastcep.cluster``): the posterior's ``arrays`` (name
    -> array), its ``position`` (name -> number: the iteration, the damping), its settings, its
    trace (``Trace``) and the digest of its data, atomically (a killed fit leaves the previous
    checkpoint) and signed."""

    def write(f):
        f.attrs["format"] = FIT_CHECKPOINT_FORMAT
        f.attrs["format_version"] = FIT_CHECKPOINT_VERSION
        f.attrs["options"] = json.dumps(options, default=json_default)
        f.attrs["data_sha256"] = data_digest
        f.attrs["position"] = json.dumps(position, default=json_default)
        for name, a in arrays.items():
            f.create_dataset(f"state/{name}", data=a)
        for name in trace._fields:
            f.create_dataset(f"trace/{name}", data=getattr(trace, name))
        sign(f)

    atomic_h5(path, write, seal=FIT_CHECKPOINT_FORMAT)


def _read_fit(path, func, read):
    """``(read(f), bad)``: the cluster fit checkpoint at ``path`` opened and its checksum checked,
    ``read(f)`` of it, and the maker of its errors; a file that is not one, or whose content is
    missing, a FileFormatError naming the path."""
    f, _, bad = _opened(path, func, FIT_CHECKPOINT_FORMAT, FIT_READABLE_VERSIONS, FIT_CHECKPOINT_VERSION, 2)
    with f:
        try:
            if not verify(f, "checkpoint", path):
                raise bad("its checksum is missing")
            return read(f), bad
        except FileFormatError:
            raise
        except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
            raise bad(f"missing or unreadable content ({exc})") from exc


def fit_checkpoint_position(path, func="info"):
    """``(options, position)`` of a cluster fit's checkpoint (its settings, and where the fit
    stood: ``sweeps`` done, the damping), checked as ``read_fit_checkpoint`` checks a file
    (format, version, checksum): what ``fastcep info`` says of it."""
    out, _ = _read_fit(
        os.fspath(path), func, lambda f: (json.loads(f.attrs["options"]), json.loads(f.attrs["position"]))
    )
    return out


def read_fit_checkpoint(path, options, keys, data_digest, shapes, func="fit"):
    """A cluster fit's checkpoint: ``(arrays, position, trace columns)``. The settings of ``keys``
    must match ``options``, the digest ``data_digest``, and each array of ``shapes`` (name ->
    shape) must be there, finite, of that shape; else FileFormatError naming the problem."""

    def read(f):
        return (
            json.loads(f.attrs["options"]),
            f.attrs["data_sha256"],
            json.loads(f.attrs["position"]),
            {name: np.array(f[f"state/{name}"]) for name in shapes},
            {name: np.array(v) for name, v in f["trace"].items()},
        )

    (saved, saved_data, position, arrays, trace), bad = _read_fit(os.fspath(path), func, read)
    detail = settings_differ(saved, options, keys)
    if detail:
        raise bad(f"it was written by a fit with other settings ({detail})")
    if saved_data != data_digest:
        raise bad("it was written for other data; resume on the same data, or fit again without resume")
    for name, shape in shapes.items():
        a = arrays[name]
        if a.shape != tuple(shape) or not np.all(np.isfinite(a)):
            raise bad(f"its {name} is not {tuple(shape)} finite numbers")
    return arrays, position, trace
