"""Stream checkpoints: the stream's state and position, written atomically, checked on resume."""

import json
import os

import h5py
import numpy as np

from ..results import StreamState
from .files import FileFormatError, atomic_h5

CHECKPOINT_FORMAT = "fastcep-stream-checkpoint"
#: arrays of the stream state in a checkpoint (the per-batch trace is stored beside them)
_STATE_ARRAYS = ("P_Lam", "P_eta", "M", "S", "seen", "noise")
CHECKPOINT_FORMAT_VERSION = 1


def write_checkpoint(path, state, options, trace_lists):
    """Write a stream's ``StreamState``, its settings and its per-batch trace to ``path``
    (atomically: a killed run leaves the previous checkpoint)."""

    def write(f):
        f.attrs["format"] = CHECKPOINT_FORMAT
        f.attrs["format_version"] = CHECKPOINT_FORMAT_VERSION
        f.attrs["options"] = json.dumps(options)
        f.attrs["batches_done"] = state.batches_done
        f.attrs["rows_done"] = state.rows_done
        f.attrs["init_sd"] = -1.0 if np.isnan(state.init_sd) else state.init_sd
        for name in _STATE_ARRAYS:
            f.create_dataset(name, data=getattr(state, name))
        g = f.create_group("trace")
        for name, values in trace_lists.items():
            g.create_dataset(name, data=np.asarray(values, dtype=np.float64))

    atomic_h5(path, write)


def read_checkpoint(path, options, resume_keys=()):
    """A checkpoint's ``(StreamState, trace lists)``; with ``options`` (None: read without
    comparing) the settings of ``resume_keys`` must match it."""
    path = os.fspath(path)

    def bad(why):
        return FileFormatError(f"stream: cannot resume from checkpoint {path!r}: {why}.")

    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise bad(f"not a readable HDF5 file ({exc})") from exc
    with f:
        if f.attrs.get("format") != CHECKPOINT_FORMAT:
            raise bad(f"format attribute {f.attrs.get('format')!r}, not {CHECKPOINT_FORMAT!r}")
        version = int(f.attrs.get("format_version", -1))
        if version != CHECKPOINT_FORMAT_VERSION:
            raise bad(f"format version {version}, this fastcep reads {CHECKPOINT_FORMAT_VERSION}")
        try:
            saved = json.loads(f.attrs["options"])
            arrays = {k: np.array(f[k]) for k in _STATE_ARRAYS}
            init_sd = float(f.attrs["init_sd"])
            state = StreamState(
                **arrays,
                batches_done=int(f.attrs["batches_done"]),
                rows_done=int(f.attrs["rows_done"]),
                init_sd=np.nan if init_sd < 0 else init_sd,
            )
            trace = {k: list(np.array(v)) for k, v in f["trace"].items()}
        except (KeyError, OSError, ValueError) as exc:
            raise bad(f"missing or unreadable content ({exc})") from exc
    options = saved if options is None else options  # None: read without comparing
    diff = [k for k in resume_keys if json.dumps(saved.get(k)) != json.dumps(options.get(k))]
    if diff:
        detail = ", ".join(f"{k}: checkpoint {saved.get(k)!r} vs now {options.get(k)!r}" for k in diff)
        raise bad(f"it was written by a run with other settings ({detail})")
    if state.M.shape != (int(np.sum(options["shape"])), options["rank"]):
        raise bad(f"posterior of shape {state.M.shape} does not match the tensor")
    if not all(np.all(np.isfinite(getattr(state, k))) for k in ("P_Lam", "P_eta", "M", "S")):
        raise bad("it holds non-finite numbers")
    return state, trace
