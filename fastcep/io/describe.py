"""What a fastcep file holds, as a few fields and one line of text (``fastcep info``): each format
described here, read by its own reader, so that the command line only prints."""

import os
from typing import NamedTuple

import numpy as np

from . import formats as F
from .checkpoint import fit_checkpoint_position, read_checkpoint
from .csr import CSRReader
from .files import FileFormatError, check_seal, open_verified, sealed_kind, unsealed_hdf5
from .glm_model import load_glm_model
from .model import load_model
from .sources import refuse_stream
from .tensor import TensorReader


class Description(NamedTuple):
    """What a file holds: ``fields`` (dict: "file", "format", then the format's own, each a JSON
    value) and ``text`` (str: one line that starts with the path)."""

    fields: dict
    text: str


class NotFastcepFileError(FileFormatError):
    """A file that is not HDF5, or HDF5 without one of the formats ``describe`` knows."""


def _tensor(path, fmt):
    with TensorReader(path) as r:
        fields = {
            "file": path,
            "format": fmt,
            "shape": list(r.shape),
            "entries": r.n,
            "binary": r.binary,
            "chunk_rows": r.chunk_rows,
            "density": r.n / float(np.prod([float(d) for d in r.shape])),
        }
    text = (
        f"{path}: tensor, shape {'x'.join(map(str, fields['shape']))}, {fields['entries']} entries "
        f"({'binary' if fields['binary'] else 'real'} values, density {fields['density']:.3g}), "
        f"chunks of {fields['chunk_rows']} rows"
    )
    return Description(fields, text)


def _cp_model(path, fmt):
    res = load_model(path)
    fields = {
        "file": path,
        "format": fmt,
        "model": res.model,
        "method": res.method,
        "rank": res.rank,
        "shape": list(res.shape),
        "covariance": res.covariance,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
    }
    text = (
        f"{path}: {res.model} model, rank {res.rank}, shape {'x'.join(map(str, res.shape))}, "
        f"{res.covariance} covariances, {res.n_iter} iterations ({res.stop_reason})"
    )
    return Description(fields, text)


def _glm_model(path, fmt):
    m = load_glm_model(path)
    res = m.result
    fields = {
        "file": path,
        "format": fmt,
        "model": res.model,
        "method": res.method,
        "target": m.target,
        "features": None if m.features is None else list(m.features),
        "n_features": res.posterior.mean.size,
        "intercept": res.intercept is not None,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "rows_absorbed": res.options.get("rows_absorbed", 0),
    }
    absorbed = fields["rows_absorbed"]
    online = f", then {absorbed:,} rows absorbed online" if absorbed else ""
    text = (
        f"{path}: {res.model} regression ({res.method}) of {m.target or 'a target'} on "
        f"{res.posterior.mean.size} feature{'s' if res.posterior.mean.size != 1 else ''}"
        f"{'' if m.features is not None else ' (unnamed columns)'}"
        f"{' and an intercept' if res.intercept is not None else ''}, "
        f"{res.n_iter} iterations ({res.stop_reason}){online}"
    )
    return Description(fields, text)


def _sparse_rows(path, fmt):
    with CSRReader(path) as r:
        fields = {
            "file": path, "format": fmt, "rows": r.n, "n_features": r.n_features, "nnz": r.nnz,
            "source": r.source,
        }  # fmt: skip
    text = (
        f"{path}: sparse rows, {r.n} rows x {r.n_features} columns, {r.nnz} nonzeros "
        f"({r.nnz / r.n:.1f} a row){f', from {r.source}' if r.source else ''}"
    )
    return Description(fields, text)


def _checkpoint(path, fmt):
    state, _ = read_checkpoint(path, None)
    fields = {
        "file": path,
        "format": fmt,
        "batches_done": state.batches_done,
        "rows_done": state.rows_done,
    }
    text = f"{path}: stream checkpoint after {state.batches_done} batches ({state.rows_done} entries)"
    return Description(fields, text)


def _fit_checkpoint(path, fmt):
    options, position = fit_checkpoint_position(path)
    sweeps = position["sweeps"]
    fields = {"file": path, "format": fmt, "model": options["model"], "method": options["method"]}
    what = f"{options['model']}/{options['method']}"
    if "partition_rows" in options:  # (a regression's)
        parts = options["partition_rows"]
        fields.update(rows=int(sum(parts)), features=options["d"], partition_rows=parts, sweeps_done=sweeps)
        text = (
            f"{path}: cluster fit checkpoint, {what} regression of {fields['rows']} rows x {options['d']} "
            f"features in {len(parts)} partitions, after {sweeps} sweeps"
        )
    elif "shard_rows" in options:  # (a cluster stream's)
        shards = options["shard_rows"]
        fields.update(shape=options["shape"], rank=options["rank"], shards=len(shards), passes_done=sweeps)
        text = (
            f"{path}: cluster stream checkpoint, {what} of shape {'x'.join(map(str, options['shape']))} "
            f"at rank {options['rank']} in {len(shards)} shards, after {sweeps} passes"
        )
    else:  # (a CP fit's)
        fields.update(shape=options["shape"], rank=options["rank"], iterations_done=sweeps)
        text = (
            f"{path}: cluster fit checkpoint, {what} decomposition of shape "
            f"{'x'.join(map(str, options['shape']))} at rank {options['rank']}, after {sweeps} iterations"
        )
    return Description(fields, text)


#: the formats ``describe`` knows, each with its description
_DESCRIBERS = {
    F.TENSOR_FORMAT: _tensor,
    F.MODEL_FORMAT: _cp_model,
    F.GLM_MODEL_FORMAT: _glm_model,
    F.CSR_FORMAT: _sparse_rows,
    F.CHECKPOINT_FORMAT: _checkpoint,
    F.FIT_CHECKPOINT_FORMAT: _fit_checkpoint,
}


def describe(path):
    """What the fastcep file at ``path`` holds: a tensor, a CP model, a regression model,
    sparse rows, a stream checkpoint or a cluster fit's checkpoint.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Description
        ``fields`` (dict of JSON values: "file", "format" and the format's own, e.g. a tensor's
        "shape", "entries", "binary", "chunk_rows", "density") and ``text`` (one line naming the
        path, as ``fastcep info`` prints it).

    Raises
    ------
    FileNotFoundError
        No such file.
    NotFastcepFileError
        Not an HDF5 file, or none of the formats above (a ``FileFormatError``).
    FileFormatError
        A file of one of the formats that its reader refuses (its message).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file {path!r}")
    refuse_stream(path, "a fastcep file")
    fmt = sealed_kind(path)  # (a sealed file's format from its seal: HDF5 never parses a damaged one)
    if fmt == "damaged":
        check_seal(path, "sealed")  # (its FileFormatError says what is wrong)
    if fmt is None:
        if not unsealed_hdf5(path):
            raise NotFastcepFileError(f"{path!r} is not an HDF5 file (no HDF5 signature at its start)")
        with open_verified(path, lambda why: FileFormatError(f"{path!r} is damaged: {why}.")) as f:
            fmt = f.attrs.get("format")
    describer = _DESCRIBERS.get(fmt) if isinstance(fmt, str) else None
    if describer is None:
        raise NotFastcepFileError(f"{path!r} is not a fastcep file (format attribute {fmt!r})")
    return describer(path, fmt)
