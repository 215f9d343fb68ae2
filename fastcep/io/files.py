"""What every file fastcep writes shares: the atomic write and the one error class."""

import os
import tempfile

import h5py
import numpy as np


class FileFormatError(ValueError):
    """A file that is missing, corrupt, of another format or version, or inconsistent."""


def bad_file(kind, path, why):
    """The one message form: "'path' is not a valid fastcep <kind> file: <why>."."""
    return FileFormatError(f"{os.fspath(path)!r} is not a valid fastcep {kind} file: {why}.")


def atomic_h5(path, write):
    """Call ``write(h5py.File)`` on a temporary file in the target's folder, then rename it to ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".h5", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            write(f)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, np.ndarray)):
        return list(obj)
    return repr(obj)
